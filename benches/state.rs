//! State scaling: one `call` whose action writes one small key (`write`)
//! or appends one ≈ 500-byte message to the history (`append`), beside a
//! history of 0 / 100 / 1 000 / 10 000 messages under another key; in the
//! same group, a raw ractor actor holding the same state as a
//! `serde_json` map, whose handler writes the key / pushes the message and
//! replies.
//!
//! The caller runs inside a spawned tokio task (as an actor or a service
//! task calls an agent): `iter_custom` spawns one task that runs the
//! iterations and times them itself. Target: the 10 000 case ≤ 1.5× the
//! empty case, for both actions. (`append` grows the history by one message
//! per iteration, on both sides.)

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use jido::agent::SignalRoute;
use jido::effect::StateOp;
use jido::prelude::*;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::{Map, Value, json};

const SIZES: [usize; 4] = [0, 100, 1_000, 10_000];

/// A chat message of about 500 bytes.
fn message(i: usize) -> Value {
    json!({"role": if i.is_multiple_of(2) { "user" } else { "assistant" }, "content": "x".repeat(440), "n": i})
}

static MESSAGE: LazyLock<Value> = LazyLock::new(|| message(0));

fn initial_state(history_len: usize) -> Map<String, Value> {
    let mut state = Map::new();
    state.insert(
        "history".into(),
        Value::Array((0..history_len).map(message).collect()),
    );
    state.insert("count".into(), json!(0));
    state
}

// ---------- raw ractor baseline ----------

enum RawMsg {
    Write(u64, RpcReplyPort<()>),
    Append(RpcReplyPort<()>),
}

#[cfg(feature = "cluster")]
impl ractor::Message for RawMsg {}

struct Raw;
impl Actor for Raw {
    type Msg = RawMsg;
    type State = Map<String, Value>;
    type Arguments = usize;
    async fn pre_start(
        &self,
        _: ActorRef<RawMsg>,
        history_len: usize,
    ) -> Result<Map<String, Value>, ActorProcessingErr> {
        Ok(initial_state(history_len))
    }
    async fn handle(
        &self,
        _: ActorRef<RawMsg>,
        msg: RawMsg,
        state: &mut Map<String, Value>,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RawMsg::Write(n, reply) => {
                state.insert("count".into(), json!(n));
                let _ = reply.send(());
            }
            RawMsg::Append(reply) => {
                if let Some(Value::Array(history)) = state.get_mut("history") {
                    history.push(MESSAGE.clone());
                }
                let _ = reply.send(());
            }
        }
        Ok(())
    }
}

// ---------- the agent ----------

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct N {
    n: u64,
}

struct Write;
impl Action for Write {
    type Params = N;
    type Output = Value;
    const NAME: &'static str = "write";
    async fn run(&self, p: N, _: &Context) -> jido::Result<Value> {
        Ok(json!({"count": p.n}))
    }
}

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct NoParams {}

struct Append;
impl Action for Append {
    type Params = NoParams;
    type Output = Value;
    const NAME: &'static str = "append";
    async fn run(&self, _: NoParams, ctx: &Context) -> jido::Result<Value> {
        ctx.push_effect(StateOp::append(["history"], &*MESSAGE));
        Ok(json!({}))
    }
}

struct Chat;
impl Agent for Chat {
    const NAME: &'static str = "chat";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![
            SignalRoute::action("write", Write),
            SignalRoute::action("append", Append),
        ]
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn scaling(c: &mut Criterion, name: &str, append: bool) {
    let rt = runtime();
    let jido = rt.block_on(async { Jido::start(JidoConfig::new()).await.expect("jido") });
    let mut g = c.benchmark_group(name);
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for size in SIZES {
        let (raw, agent) = rt.block_on(async {
            let (raw, _) = Actor::spawn(None, Raw, size).await.expect("raw");
            let agent = jido
                .start_agent(
                    AgentState::new(
                        Chat,
                        AgentOptions::new()
                            .id(format!("{name}-{size}"))
                            .state(initial_state(size)),
                    ),
                    ServerOptions::new(),
                )
                .await
                .expect("agent");
            (raw, agent)
        });
        g.bench_with_input(BenchmarkId::new("raw_ractor", size), &size, |b, _| {
            b.to_async(&rt).iter_custom(|iters| {
                let raw = raw.clone();
                async move {
                    tokio::spawn(async move {
                        let start = Instant::now();
                        for i in 0..iters {
                            if append {
                                raw.call(RawMsg::Append, None).await.expect("call");
                            } else {
                                raw.call(|r| RawMsg::Write(i, r), None).await.expect("call");
                            }
                        }
                        start.elapsed()
                    })
                    .await
                    .expect("task")
                }
            });
        });
        g.bench_with_input(BenchmarkId::new("agent", size), &size, |b, _| {
            b.to_async(&rt).iter_custom(|iters| {
                let agent = agent.clone();
                async move {
                    tokio::spawn(async move {
                        let start = Instant::now();
                        for i in 0..iters {
                            let signal = if append {
                                Signal::new("append", json!({}))
                            } else {
                                Signal::new("write", json!({"n": i}))
                            };
                            agent.call(signal).await.expect("call");
                        }
                        start.elapsed()
                    })
                    .await
                    .expect("task")
                }
            });
        });
        raw.stop(None);
    }
    g.finish();
    rt.block_on(jido.shutdown());
}

fn state_write(c: &mut Criterion) {
    scaling(c, "state_write", false);
}

fn state_append(c: &mut Criterion) {
    scaling(c, "state_append", true);
}

criterion_group!(benches, state_write, state_append);
criterion_main!(benches);
