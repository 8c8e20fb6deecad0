//! Calls and casts between two nodes on loopback (feature `cluster`).
//!
//! Node B is a child process: this bench binary re-executed with
//! `JIDO_BENCH_CLUSTER_ROLE=node`. It runs a jido node (gateway, agent kind
//! `bench`) and, beside it, a raw ractor_cluster actor that echoes bytes.
//!
//! Group `cluster_call` (one round trip, caller in a spawned task):
//! * `raw_ractor_cluster_call`: `call` to the raw remote actor with the
//!   bytes of jido's call envelope, echoed back (the baseline);
//! * `jido_remote_call`: `cluster.agent(id).call(signal)` to an agent
//!   owned by node B (envelope, gateway, agent, checkpoint reply);
//! * `jido_remote_call_reply`: the same call through
//!   `ClusterAgent::call_reply`, the checkpoint's JSON checked but not
//!   built into a `Value` (the raw case does not decode its echo either);
//! * `jido_local_call`: the same agent kind on this node, through
//!   `cluster.agent(id)` (the local registry).
//!
//! Group `cluster_cast` (100 casts then one call, which is answered after
//! them): `raw_ractor_cluster_cast` beside
//! * `jido_remote_cast`: to an agent of kind `bench_inline` on node B,
//!   whose noop action runs inline (`timeout(Duration::ZERO)`), as in the
//!   local `cast` group of benches/server.rs: the raw echo spawns no task
//!   per cast either, so this is the like-for-like row;
//! * `jido_remote_cast_default_exec`: to the `bench` agent, whose action
//!   runs under the default Exec (30 s timeout: one task per signal).
//!
//! The raw case sends one ractor_cluster message per cast;
//! `raw_ractor_cluster_cast_batched` is a raw sender that batches by hand
//! (the round's 100 casts' bytes framed into one message, the echo actor
//! walking the frames), the baseline for what batching itself saves.
//! jido's casts to
//! node B (a gateway of this build) are batched: the 100 casts of a round
//! wait in node A's outbox for node B and leave as one `Casts` message
//! when the round's call flushes them (docs/cluster.md, "Casts travel in
//! batches"). Same bytes per cast, same two nodes, fewer messages.
//!
//! After criterion, p50/p90/p99 of 5 000 calls of each kind are printed
//! (hdrhistogram).
//!
//!     cargo bench --features cluster --bench cluster
//!     python3 scripts/bench_report.py
//!
//! `JIDO_CLUSTER_PROBE=CASE:ROUNDS` (not a benchmark) sets the two nodes up,
//! runs one case ROUNDS times in a spawned task on node A and exits, for
//! counting instructions with callgrind (load-independent): the difference
//! of two round counts over the difference in rounds. CASE is
//! `raw_call`, `remote_call`, `remote_call_reply`, `local_call`, `raw_cast`,
//! `raw_cast_batched`,
//! `remote_cast` (the inline agent) or `remote_cast_default` (the default
//! Exec) (100 casts then one call a round). With `JIDO_CLUSTER_PROBE_B=FILE`
//! node B runs under `valgrind --tool=callgrind --callgrind-out-file=FILE`
//! too, so both sides are counted; `scripts/cluster_probe_counts.sh`
//! does both and prints instructions per round on each node.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use jido::cluster::{Cluster, ClusterAgent, ClusterConfig};
use jido::prelude::*;
use jido::server::{Jido, JidoConfig, ServerOptions};
use jido::signal::Signal;
use ractor::message::{BoxedDowncastErr, SerializedMessage};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::json;
use tokio::runtime::Runtime;

const ROLE: &str = "JIDO_BENCH_CLUSTER_ROLE";
const COOKIE: &str = "jido-bench";
const CLUSTER: &str = "bench";
const RAW_SCOPE: &str = "jido-bench.raw";
const RAW_GROUP: &str = "echo";
const CASTS: u64 = 100;

/// The raw baseline: a remotable actor echoing bytes.
enum RawMsg {
    Cast(Vec<u8>),
    /// Several casts' bytes in one message, each after its length (u32
    /// little-endian): a raw sender batching by hand.
    Casts(Vec<u8>),
    Call(Vec<u8>, RpcReplyPort<Vec<u8>>),
}

impl ractor::Message for RawMsg {
    fn serializable() -> bool {
        true
    }
    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        Ok(match self {
            RawMsg::Cast(args) => SerializedMessage::Cast {
                variant: "Cast".into(),
                args,
                metadata: None,
            },
            RawMsg::Casts(args) => SerializedMessage::Cast {
                variant: "Casts".into(),
                args,
                metadata: None,
            },
            RawMsg::Call(args, reply) => SerializedMessage::Call {
                variant: "Call".into(),
                args,
                reply,
                metadata: None,
            },
        })
    }
    fn deserialize(msg: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        match msg {
            SerializedMessage::Cast { variant, args, .. } if variant == "Casts" => {
                Ok(RawMsg::Casts(args))
            }
            SerializedMessage::Cast { args, .. } => Ok(RawMsg::Cast(args)),
            SerializedMessage::Call { args, reply, .. } => Ok(RawMsg::Call(args, reply)),
            SerializedMessage::CallReply(..) => Err(BoxedDowncastErr),
        }
    }
}

struct RawEcho;

impl Actor for RawEcho {
    type Msg = RawMsg;
    type State = u64;
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<RawMsg>, _: ()) -> Result<u64, ActorProcessingErr> {
        Ok(0)
    }
    async fn handle(
        &self,
        _: ActorRef<RawMsg>,
        msg: RawMsg,
        seen: &mut u64,
    ) -> Result<(), ActorProcessingErr> {
        *seen += 1;
        match msg {
            RawMsg::Cast(bytes) => {
                std::hint::black_box(bytes);
            }
            RawMsg::Casts(bytes) => {
                let mut rest = &bytes[..];
                while let Some((len, tail)) = rest.split_first_chunk::<4>() {
                    let len = (u32::from_le_bytes(*len) as usize).min(tail.len());
                    let (one, tail) = tail.split_at(len);
                    *seen += 1;
                    std::hint::black_box(one);
                    rest = tail;
                }
            }
            RawMsg::Call(bytes, reply) => {
                let _ = reply.send(bytes);
            }
        }
        Ok(())
    }
}

/// Node B's agent: one route to a noop action, run with the instance's
/// default Exec (30 s timeout: a task per signal).
struct Quiet;
impl Agent for Quiet {
    const NAME: &'static str = "bench";
    type Schema = ();
    fn signal_routes(&self) -> Vec<jido::agent::SignalRoute> {
        quiet_routes()
    }
}

fn quiet_routes() -> Vec<jido::agent::SignalRoute> {
    vec![jido::agent::SignalRoute::action(
        "bench.ping",
        jido::action_fn("noop", |_: serde_json::Value, _: Context| async {
            Ok::<_, jido::Error>(json!({}))
        }),
    )]
}

/// The same agent with its actions run inline (`timeout(Duration::ZERO)`
/// on each instruction, as the local `cast` group of benches/server.rs
/// configures its instance): the raw echo spawns no task per cast either.
struct QuietInline;
impl Agent for QuietInline {
    const NAME: &'static str = "bench_inline";
    type Schema = ();
    fn signal_routes(&self) -> Vec<jido::agent::SignalRoute> {
        quiet_routes()
    }
    fn on_before_cmd(
        &self,
        _: &mut AgentState,
        mut commands: Vec<jido::strategy::Command>,
    ) -> jido::Result<Vec<jido::strategy::Command>> {
        for c in &mut commands {
            if let jido::strategy::Command::Run(i) = c {
                i.opts = i.opts.timeout(Duration::ZERO);
            }
        }
        Ok(commands)
    }
}

async fn start_node(name: &str, port: u16, seeds: Vec<String>) -> (Jido, Cluster) {
    let jido = Jido::start(JidoConfig::new()).await.expect("jido");
    let config = ClusterConfig::new(name)
        .cookie(COOKIE)
        .cluster(CLUSTER)
        .listen(format!("127.0.0.1:{port}").parse().expect("addr"))
        .seeds(seeds);
    let cluster = Cluster::start(&jido, config).await.expect("cluster");
    cluster.register_kind("bench", |id| {
        Ok((
            AgentState::new(Quiet, AgentOptions::new().id(id)),
            ServerOptions::new(),
        ))
    });
    cluster.register_kind("bench_inline", |id| {
        Ok((
            AgentState::new(QuietInline, AgentOptions::new().id(id)),
            ServerOptions::new(),
        ))
    });
    (jido, cluster)
}

/// Node B (the child process).
fn node_main() {
    let port: u16 = std::env::var("JIDO_BENCH_PORT")
        .expect("port")
        .parse()
        .expect("port");
    let rt = Runtime::new().expect("runtime");
    rt.block_on(async move {
        let (_jido, cluster) = start_node("node-b", port, Vec::new()).await;
        let (echo, _) = Actor::spawn(None, RawEcho, ()).await.expect("echo");
        ractor::pg::join_scoped(RAW_SCOPE.into(), RAW_GROUP.into(), vec![echo.get_cell()]);
        let mut stdin = tokio::io::stdin();
        let _ = tokio::io::copy(&mut stdin, &mut tokio::io::sink()).await;
        cluster.shutdown().await;
    });
}

struct Setup {
    rt: Runtime,
    _child: std::process::Child,
    raw: ActorRef<RawMsg>,
    remote: ClusterAgent,
    /// An agent of kind `bench_inline` on node B (actions inline).
    remote_inline: ClusterAgent,
    local: ClusterAgent,
    payload: Vec<u8>,
}

fn setup() -> Setup {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let exe = std::env::current_exe().expect("exe");
    let mut command = match std::env::var("JIDO_CLUSTER_PROBE_B") {
        Ok(out) if !out.is_empty() => {
            let mut c = std::process::Command::new("valgrind");
            c.arg("--tool=callgrind")
                .arg(format!("--callgrind-out-file={out}"))
                .arg(&exe);
            c
        }
        _ => std::process::Command::new(&exe),
    };
    let child = command
        .env(ROLE, "node")
        .env("JIDO_BENCH_PORT", port.to_string())
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("node-b");
    let rt = Runtime::new().expect("runtime");
    let (raw, remote, remote_inline, local) = rt.block_on(async {
        let (_jido, a) = start_node("node-a", 0, vec![format!("127.0.0.1:{port}")]).await;
        a.wait_for_members(2, Duration::from_secs(30))
            .await
            .expect("node-b joins");
        // The raw echo is in its own process group; it arrives with the
        // session's group sync.
        let started = Instant::now();
        let raw = loop {
            let found = ractor::pg::get_scoped_members(&RAW_SCOPE.into(), &RAW_GROUP.into())
                .into_iter()
                .find(|c| !c.get_id().is_local());
            if let Some(cell) = found {
                break ActorRef::<RawMsg>::from(cell);
            }
            assert!(started.elapsed() < Duration::from_secs(30), "no raw echo");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let on = |kind: &str, node: &str| {
            (0..)
                .map(|i| format!("{kind}:{i}"))
                .find(|id| a.owner_of(id) == node)
                .expect("id")
        };
        let remote = a.agent(on("bench", "node-b"));
        let remote_inline = a.agent(on("bench_inline", "node-b"));
        let local = a.agent(on("bench", "node-a"));
        remote.call(ping(), T).await.expect("warm remote");
        remote_inline.call(ping(), T).await.expect("warm remote");
        local.call(ping(), T).await.expect("warm local");
        std::mem::forget(a);
        (raw, remote, remote_inline, local)
    });
    // The bytes jido's handle sends for the same call.
    let payload = serde_json::to_vec(&json!({
        "v": 1, "op": "call", "agent": remote.id(), "signal": ping().to_json_value(),
        "deadline_ms": T_MS
    }))
    .expect("json");
    Setup {
        rt,
        _child: child,
        raw,
        remote,
        remote_inline,
        local,
        payload,
    }
}

fn ping() -> Signal {
    Signal::new("bench.ping", json!({"n": 1}))
}

/// Runs `iters` rounds of `round` inside a spawned task (as in
/// benches/server.rs), returning the elapsed time.
fn in_task<F, Fut>(rt: &Runtime, iters: u64, round: F) -> Duration
where
    F: Fn() -> Fut + Send + 'static,
    Fut: Future + Send,
{
    rt.block_on(async move {
        tokio::spawn(async move {
            let started = Instant::now();
            for _ in 0..iters {
                std::hint::black_box(round().await);
            }
            started.elapsed()
        })
        .await
        .expect("bench task")
    })
}

/// The timeout of every call (long: the probe runs under valgrind).
const T_MS: u64 = 30_000;
const T: Duration = Duration::from_millis(T_MS);

/// One raw call round: the envelope bytes there and back.
async fn raw_call(raw: ActorRef<RawMsg>, payload: Vec<u8>) -> Vec<u8> {
    ractor::call_t!(raw, RawMsg::Call, T_MS, payload).expect("raw call")
}

/// One raw cast round: `CASTS` casts of the bytes, then a call to sync.
async fn raw_casts(raw: ActorRef<RawMsg>, payload: Vec<u8>) -> Vec<u8> {
    for _ in 0..CASTS {
        raw.send_message(RawMsg::Cast(payload.clone()))
            .expect("cast");
    }
    ractor::call_t!(raw, RawMsg::Call, T_MS, payload).expect("flush")
}

/// One raw cast round batched by hand: the `CASTS` casts' bytes framed
/// into one message, then a call to sync.
async fn raw_casts_batched(raw: ActorRef<RawMsg>, payload: Vec<u8>) -> Vec<u8> {
    let mut batch = Vec::with_capacity(CASTS as usize * (4 + payload.len()));
    for _ in 0..CASTS {
        batch.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        batch.extend_from_slice(&payload);
    }
    raw.send_message(RawMsg::Casts(batch)).expect("casts");
    ractor::call_t!(raw, RawMsg::Call, T_MS, payload).expect("flush")
}

/// One cast round through jido: `CASTS` casts, then a call to sync.
async fn agent_casts(agent: ClusterAgent) -> serde_json::Value {
    for _ in 0..CASTS {
        agent.cast(ping()).expect("cast");
    }
    agent.call(ping(), T).await.expect("flush")
}

fn bench(c: &mut Criterion) {
    let s = setup();
    let mut g = c.benchmark_group("cluster_call");
    g.bench_function("raw_ractor_cluster_call", |b| {
        b.iter_custom(|iters| {
            let (raw, payload) = (s.raw.clone(), s.payload.clone());
            in_task(&s.rt, iters, move || raw_call(raw.clone(), payload.clone()))
        })
    });
    g.bench_function("jido_remote_call", |b| {
        b.iter_custom(|iters| {
            let agent = s.remote.clone();
            in_task(&s.rt, iters, move || {
                let agent = agent.clone();
                async move { agent.call(ping(), T).await.expect("remote call") }
            })
        })
    });
    g.bench_function("jido_remote_call_reply", |b| {
        b.iter_custom(|iters| {
            let agent = s.remote.clone();
            in_task(&s.rt, iters, move || {
                let agent = agent.clone();
                async move { agent.call_reply(ping(), T).await.expect("remote call") }
            })
        })
    });
    g.bench_function("jido_local_call", |b| {
        b.iter_custom(|iters| {
            let agent = s.local.clone();
            in_task(&s.rt, iters, move || {
                let agent = agent.clone();
                async move { agent.call(ping(), T).await.expect("local call") }
            })
        })
    });
    g.finish();

    let mut g = c.benchmark_group("cluster_cast");
    g.throughput(criterion::Throughput::Elements(CASTS));
    g.bench_function("raw_ractor_cluster_cast", |b| {
        b.iter_custom(|iters| {
            let (raw, payload) = (s.raw.clone(), s.payload.clone());
            in_task(&s.rt, iters, move || {
                raw_casts(raw.clone(), payload.clone())
            })
        })
    });
    g.bench_function("raw_ractor_cluster_cast_batched", |b| {
        b.iter_custom(|iters| {
            let (raw, payload) = (s.raw.clone(), s.payload.clone());
            in_task(&s.rt, iters, move || {
                raw_casts_batched(raw.clone(), payload.clone())
            })
        })
    });
    g.bench_function("jido_remote_cast", |b| {
        b.iter_custom(|iters| {
            let agent = s.remote_inline.clone();
            in_task(&s.rt, iters, move || agent_casts(agent.clone()))
        })
    });
    g.bench_function("jido_remote_cast_default_exec", |b| {
        b.iter_custom(|iters| {
            let agent = s.remote.clone();
            in_task(&s.rt, iters, move || agent_casts(agent.clone()))
        })
    });
    g.finish();
    percentiles(&s);
}

/// p50/p90/p99 of 5 000 calls of each kind, after 500 warm-up calls.
fn percentiles(s: &Setup) {
    fn report(name: &str, samples: &[Duration]) {
        let mut h = hdrhistogram::Histogram::<u64>::new(3).expect("histogram");
        for d in samples {
            let _ = h.record(d.as_nanos() as u64);
        }
        let us = |q: f64| h.value_at_quantile(q) as f64 / 1_000.0;
        println!(
            "{name:<26} p50 {:>8.1} µs   p90 {:>8.1} µs   p99 {:>8.1} µs",
            us(0.50),
            us(0.90),
            us(0.99)
        );
    }
    let (raw, payload, remote, local) = (
        s.raw.clone(),
        s.payload.clone(),
        s.remote.clone(),
        s.local.clone(),
    );
    s.rt.block_on(async move {
        tokio::spawn(async move {
            let mut samples = Vec::with_capacity(5_000);
            for kind in [
                "raw_ractor_cluster_call",
                "jido_remote_call",
                "jido_remote_call_reply",
                "jido_local_call",
            ] {
                samples.clear();
                for i in 0..5_500 {
                    let started = Instant::now();
                    match kind {
                        "raw_ractor_cluster_call" => {
                            ractor::call_t!(raw, RawMsg::Call, T_MS, payload.clone()).expect("raw");
                        }
                        "jido_remote_call" => {
                            remote.call(ping(), T).await.expect("remote");
                        }
                        "jido_remote_call_reply" => {
                            remote.call_reply(ping(), T).await.expect("remote");
                        }
                        _ => {
                            local.call(ping(), T).await.expect("local");
                        }
                    }
                    if i >= 500 {
                        samples.push(started.elapsed());
                    }
                }
                report(kind, &samples);
            }
        })
        .await
        .expect("percentiles")
    });
}

/// One case of the probe (see the module doc), ROUNDS times in a spawned
/// task on node A; then node B is told to stop (its stdin closes) and
/// awaited, so that its callgrind output is written.
fn probe(spec: &str) {
    let (case, rounds) = spec.split_once(':').expect("CASE:ROUNDS");
    let rounds: u64 = rounds.parse().expect("rounds");
    let Setup {
        rt,
        _child: mut child,
        raw,
        remote,
        remote_inline,
        local,
        payload,
    } = setup();
    let elapsed = match case {
        "raw_call" => in_task(&rt, rounds, move || raw_call(raw.clone(), payload.clone())),
        "remote_call" | "local_call" => {
            let agent = if case == "local_call" { local } else { remote };
            in_task(&rt, rounds, move || {
                let agent = agent.clone();
                async move { agent.call(ping(), T).await.expect("call") }
            })
        }
        "remote_call_reply" => in_task(&rt, rounds, move || {
            let agent = remote.clone();
            async move { agent.call_reply(ping(), T).await.expect("call") }
        }),
        "raw_cast" => in_task(&rt, rounds, move || raw_casts(raw.clone(), payload.clone())),
        "raw_cast_batched" => in_task(&rt, rounds, move || {
            raw_casts_batched(raw.clone(), payload.clone())
        }),
        "remote_cast" => in_task(&rt, rounds, move || agent_casts(remote_inline.clone())),
        "remote_cast_default" => in_task(&rt, rounds, move || agent_casts(remote.clone())),
        other => panic!("unknown probe case {other}"),
    };
    println!("{case} {rounds} rounds in {elapsed:?}");
    drop(child.stdin.take());
    let _ = child.wait();
}

criterion_group!(benches, bench);

fn main() {
    if std::env::var(ROLE).as_deref() == Ok("node") {
        node_main();
        return;
    }
    if let Ok(spec) = std::env::var("JIDO_CLUSTER_PROBE") {
        probe(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
