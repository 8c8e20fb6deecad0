//! Profiling driver for the `call`, `cast`, `spawn_stop` and `exec_overhead`
//! benchmark groups (not a benchmark): runs one case `ROUNDS` times inside a
//! spawned task, as the benches do, and prints the allocations those rounds
//! made (a counting global allocator). Under `valgrind --tool=callgrind`,
//! run it with two round counts and divide the difference of the totals: an
//! instruction count per round that does not move with the machine's load
//! (see `docs/benchmarks.md`).
//!
//! ```text
//! cargo build --release --example probe
//! valgrind --tool=callgrind target/release/examples/probe call 200
//! valgrind --tool=callgrind target/release/examples/probe call 1200
//! ```
//!
//! `probe [CASE [ROUNDS]]`, CASE one of `call`, `raw_call`, `cast`
//! (100 casts and a call per round), `raw_cast`, `exec`, `raw_exec`,
//! `spawn_ct`, `raw_spawn_ct` (current-thread runtime), `spawn_mt`,
//! `raw_spawn_mt`, `signal`, or `sizes` (prints the sizes of the futures
//! and messages moved on every signal); default `call` and 200 rounds (10 with `CI`
//! set: `.ci/run` runs every example).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use jido::agent::SignalRoute;
use jido::prelude::*;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::{Map, Value, json};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(l.size() as u64, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(n as u64, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}
#[global_allocator]
static A: Counting = Counting;

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Nothing {}

struct Noop;
impl Action for Noop {
    type Params = Nothing;
    type Output = ();
    const NAME: &'static str = "noop";
    async fn run(&self, _: Nothing, _: &Context) -> jido::Result<()> {
        Ok(())
    }
}

struct Bench;
impl Agent for Bench {
    const NAME: &'static str = "bench";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![SignalRoute::action("noop", Noop)]
    }
}

fn five_keys() -> Map<String, Value> {
    json!({"a": 1, "b": "two", "c": [3], "d": {"e": 4}, "n": 0})
        .as_object()
        .cloned()
        .expect("object")
}

struct RawAgent;
enum RawAgentMsg {
    Cast,
    Call(RpcReplyPort<u64>),
}

#[cfg(feature = "cluster")]
impl ractor::Message for RawAgentMsg {}
impl Actor for RawAgent {
    type Msg = RawAgentMsg;
    type State = Map<String, Value>;
    type Arguments = ();
    async fn pre_start(
        &self,
        _: ActorRef<RawAgentMsg>,
        _: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(five_keys())
    }
    async fn handle(
        &self,
        _: ActorRef<RawAgentMsg>,
        msg: RawAgentMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RawAgentMsg::Cast => {
                let n = state.get("n").and_then(|v| v.as_u64()).unwrap_or(0);
                state.insert("n".into(), json!(n + 1));
            }
            RawAgentMsg::Call(reply) => {
                let action = tokio::spawn(async { json!({"done": true}) });
                let out = tokio::time::timeout(jido::exec::DEFAULT_TIMEOUT, action).await??;
                if let Value::Object(out) = out {
                    state.extend(out);
                }
                let _ = reply.send(state.len() as u64);
            }
        }
        Ok(())
    }
}

fn bench_agent(id: &str) -> AgentState {
    AgentState::new(Bench, AgentOptions::new().id(id).state(five_keys()))
}

const CASTS: u64 = 100;

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_else(|| "call".to_owned());
    let default_rounds = if std::env::var_os("CI").is_some() {
        10
    } else {
        200
    };
    if case == "sizes" {
        // The futures built and moved on every signal (release layout).
        let exec = Exec::new();
        let run = exec.execute(Instruction::new(Noop), Context::new());
        println!(
            "Exec::execute future: {} bytes",
            std::mem::size_of_val(&run)
        );
        drop(run);
        let mut agent = bench_agent("sizes");
        let cmd = agent.cmd(Noop, ExecOptions::new());
        println!(
            "AgentState::cmd future: {} bytes",
            std::mem::size_of_val(&cmd)
        );
        drop(cmd);
        println!("Signal: {} bytes", std::mem::size_of::<Signal>());
        println!("Context: {} bytes", std::mem::size_of::<Context>());
        println!("ExecOptions: {} bytes", std::mem::size_of::<ExecOptions>());
        println!("Instruction: {} bytes", std::mem::size_of::<Instruction>());
        println!(
            "tokio Sleep: {} bytes",
            std::mem::size_of::<tokio::time::Sleep>()
        );
        println!(
            "tracing Span: {} bytes",
            std::mem::size_of::<tracing::Span>()
        );
        println!(
            "AgentMsg: {} bytes",
            std::mem::size_of::<jido::server::AgentMsg>()
        );
        println!(
            "AgentServerState: {} bytes",
            std::mem::size_of::<jido::server::AgentServerState>()
        );
        println!("AgentState: {} bytes", std::mem::size_of::<AgentState>());
        println!(
            "ServerOptions: {} bytes, AgentServerArgs: {} bytes",
            std::mem::size_of::<ServerOptions>(),
            std::mem::size_of::<jido::server::AgentServerArgs>()
        );
        println!(
            "ErrorPolicy: {} bytes, DispatchConfig: {} bytes",
            std::mem::size_of::<Option<jido::server::ErrorPolicy>>(),
            std::mem::size_of::<Option<jido::signal::dispatch::DispatchConfig>>()
        );
        return;
    }
    let rounds: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_rounds);
    let rt = if case.ends_with("_ct") || case.ends_with("exec") {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    }
    .expect("runtime");
    let (allocs, bytes) = rt.block_on(async move {
        let inline = case.contains("cast");
        let cfg = if inline {
            JidoConfig::new().exec_options(ExecOptions::new().timeout(Duration::ZERO))
        } else {
            JidoConfig::new()
        };
        let jido = Jido::start(cfg).await.expect("jido");
        let agent = jido
            .start_agent(bench_agent("b"), ServerOptions::new())
            .await
            .expect("agent");
        let (raw, _) = Actor::spawn(None, RawAgent, ()).await.expect("raw");
        let exec = Exec::new();
        let case2 = case.clone();
        let r = tokio::spawn(async move {
            let case = case2;
            let (a0, b0) = (
                ALLOCS.load(Ordering::Relaxed),
                BYTES.load(Ordering::Relaxed),
            );
            for _ in 0..rounds {
                match case.as_str() {
                    "call" => {
                        agent
                            .call(Signal::new("noop", json!({})))
                            .await
                            .expect("call");
                    }
                    "raw_call" => {
                        raw.call(RawAgentMsg::Call, None).await.expect("call");
                    }
                    "cast" => {
                        for _ in 0..CASTS {
                            agent.cast(Signal::new("noop", json!({}))).expect("cast");
                        }
                        agent
                            .call_timeout(Signal::new("noop", json!({})), Duration::from_secs(60))
                            .await
                            .expect("call");
                    }
                    "raw_cast" => {
                        for _ in 0..CASTS {
                            raw.cast(RawAgentMsg::Cast).expect("cast");
                        }
                        raw.call(RawAgentMsg::Call, None).await.expect("call");
                    }
                    "signal" => {
                        std::hint::black_box(Signal::new("noop", json!({})));
                    }
                    "exec" => {
                        let _ = std::hint::black_box(
                            exec.run(
                                Noop,
                                Value::Object(Map::new()),
                                Context::new(),
                                ExecOptions::new(),
                            )
                            .await,
                        );
                    }
                    "raw_exec" => {
                        let _ = std::hint::black_box(
                            tokio::time::timeout(
                                jido::exec::DEFAULT_TIMEOUT,
                                tokio::spawn(async { Noop.run(Nothing {}, &Context::new()).await }),
                            )
                            .await,
                        );
                    }
                    "spawn_ct" | "spawn_mt" => {
                        let a = jido
                            .start_agent(bench_agent("s"), ServerOptions::new())
                            .await
                            .expect("start");
                        jido.stop_agent(a.id()).await.expect("stop");
                    }
                    "raw_spawn_ct" | "raw_spawn_mt" => {
                        let (a, h) = Actor::spawn(None, RawAgent, ()).await.expect("spawn");
                        a.stop(None);
                        h.await.expect("join");
                    }
                    other => panic!("unknown case {other}"),
                }
            }
            let r = (
                ALLOCS.load(Ordering::Relaxed) - a0,
                BYTES.load(Ordering::Relaxed) - b0,
            );
            (r, jido)
        })
        .await
        .expect("task");
        let ((a, b), jido) = r;
        jido.shutdown().await;
        (a, b)
    });
    println!("rounds {rounds} allocs {allocs} bytes {bytes}");
}
