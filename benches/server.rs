//! AgentServer against raw ractor, each pair in one criterion group. In
//! `call`, `cast` and `spawn_stop` both sides are driven from inside a
//! spawned task (as an actor or a service task calls an agent), not as the
//! `block_on` future, and both hold the same 5-key JSON map.
//!
//! * `call`: a call with a no-op action and default Exec options, beside a
//!   raw ractor actor whose handler runs the action as
//!   `timeout(30 s, tokio::spawn(..))`, merges its output into its map and
//!   replies (target: ≤ 2×, aim 1.5×);
//! * `cast`: N casts then a call, on an agent whose actions run inline,
//!   beside a raw actor bumping a counter in its map (target throughput
//!   ≥ 0.3×); the same on an agent whose strategy is not Direct (a
//!   strategy passing its commands to Direct's `cmd`) and on an FSM agent
//!   (one RunInstruction per signal);
//! * `spawn_stop/{current_thread,multi_thread}`: start and stop one agent,
//!   beside spawn + stop of the raw actor (target: ≤ 2×);
//! * `children`: a parent spawning N children (SpawnAgent) and stopping
//!   them, beside a raw supervisor doing the same (should grow linearly);
//! * `emit_fanout`: one signal whose action emits to 1 / 10 / 100 agents
//!   (an Emit directive with one actor target per agent) until every
//!   receiver ran it, beside the same number of raw ractor casts to raw
//!   actors;
//! * `schedule_cancel`: 10 000 Schedule directives (1 h) armed, then the
//!   agent stopped (every timer cancelled), beside a raw actor arming as
//!   many `send_after` timers and aborting them when stopped;
//! * `busy_query`: a `status` query to an agent whose current signal's
//!   action is retrying (the mailbox stays free), beside the same query to
//!   an idle agent.
//!
//! Sizes shrink when `CI` is set.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use jido::agent::SignalRoute;
use jido::prelude::*;
use jido::server::ActorTarget;
use jido::server::{AgentRef, OnParentDeath};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use serde_json::json;
use tokio::runtime::Runtime;

// ---------- raw ractor baseline ----------

/// A raw supervisor that ignores its children's exits.
struct RawSup;
impl Actor for RawSup {
    type Msg = ();
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
    async fn handle_supervisor_evt(
        &self,
        _: ActorRef<()>,
        _: SupervisionEvent,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

// ---------- agents ----------

/// A strategy that is not [`Direct`](jido::strategy::Direct) but runs its
/// commands as Direct does: the runtime's path for every other strategy.
struct Plain;
impl jido::strategy::Strategy for Plain {
    fn name(&self) -> &'static str {
        "plain"
    }
    async fn cmd(
        &self,
        agent: &mut jido::agent::AgentData,
        commands: Vec<jido::strategy::Command>,
        ctx: &jido::strategy::StrategyContext,
    ) -> Vec<Directive> {
        jido::strategy::Strategy::cmd(&jido::strategy::Direct, agent, commands, ctx).await
    }
}

/// [`Bench`] on the [`Plain`] strategy.
struct PlainBench;
impl Agent for PlainBench {
    const NAME: &'static str = "plain_bench";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(Plain)
    }
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![SignalRoute::action("noop", Noop)]
    }
}

/// [`Bench`] on the FSM strategy.
struct FsmBench;
impl Agent for FsmBench {
    const NAME: &'static str = "fsm_bench";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(jido::strategy::Fsm::new())
    }
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![SignalRoute::action("noop", Noop)]
    }
}

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

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct SpawnN {
    n: usize,
}

struct Bench;
impl Agent for Bench {
    const NAME: &'static str = "bench";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![SignalRoute::action("noop", Noop)]
    }
}

/// Spawns `n` children through SpawnAgent directives.
struct Spawner;
impl Action for Spawner {
    type Params = SpawnN;
    type Output = ();
    const NAME: &'static str = "spawner";
    async fn run(&self, p: SpawnN, ctx: &Context) -> jido::Result<()> {
        for i in 0..p.n {
            ctx.push_effect(
                Directive::spawn_agent(
                    AgentState::new(Bench, AgentOptions::new()),
                    format!("c{i}"),
                )
                .on_parent_death(OnParentDeath::Stop),
            );
        }
        Ok(())
    }
}

struct Parent;
impl Agent for Parent {
    const NAME: &'static str = "parent";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![
            SignalRoute::action("spawn", Spawner),
            SignalRoute::action("noop", Noop),
        ]
    }
}

fn current_thread() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// Runs `iters` rounds of `round` inside a spawned task — where an actor or
/// a service task calls an agent from, not as the `block_on` future — and
/// returns the time measured inside that task.
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

/// The state both sides hold: a 5-key JSON map.
fn five_keys() -> serde_json::Map<String, serde_json::Value> {
    json!({"a": 1, "b": "two", "c": [3], "d": {"e": 4}, "n": 0})
        .as_object()
        .cloned()
        .expect("object")
}

/// The raw ractor shape of an agent: for a call it runs the action as
/// `timeout(30 s, tokio::spawn(action))`, merges the output into its 5-key
/// map and replies; a cast bumps a counter in that map.
struct RawAgent;

enum RawAgentMsg {
    Cast,
    Call(RpcReplyPort<u64>),
}

#[cfg(feature = "cluster")]
impl ractor::Message for RawAgentMsg {}

impl Actor for RawAgent {
    type Msg = RawAgentMsg;
    type State = serde_json::Map<String, serde_json::Value>;
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
                if let serde_json::Value::Object(out) = out {
                    state.extend(out);
                }
                let _ = reply.send(state.len() as u64);
            }
        }
        Ok(())
    }
}

/// An agent holding the same 5-key map.
fn bench_agent(id: &str) -> AgentState {
    AgentState::new(Bench, AgentOptions::new().id(id).state(five_keys()))
}

fn call(c: &mut Criterion) {
    let rt = runtime();
    let (raw, jido, agent) = rt.block_on(async {
        let (raw, _) = Actor::spawn(None, RawAgent, ()).await.expect("raw");
        let jido = Jido::start(JidoConfig::new()).await.expect("jido");
        let agent = jido
            .start_agent(bench_agent("b"), ServerOptions::new())
            .await
            .expect("agent");
        (raw, jido, agent)
    });
    let mut g = c.benchmark_group("call");
    g.bench_function("raw_ractor_call_spawned_action", |b| {
        b.iter_custom(|iters| {
            let raw = raw.clone();
            in_task(&rt, iters, move || {
                let raw = raw.clone();
                async move { raw.call(RawAgentMsg::Call, None).await.expect("call") }
            })
        })
    });
    g.bench_function("agent_call_noop", |b| {
        b.iter_custom(|iters| {
            let agent = agent.clone();
            in_task(&rt, iters, move || {
                let agent = agent.clone();
                async move {
                    agent
                        .call(Signal::new("noop", json!({})))
                        .await
                        .expect("call")
                }
            })
        })
    });
    g.finish();
    rt.block_on(async {
        jido.shutdown().await;
        raw.stop(None);
    });
}

fn cast(c: &mut Criterion) {
    let n: u64 = if ci() { 200 } else { 1_000 };
    let rt = runtime();
    let (raw, jido, agent, plain, fsm) = rt.block_on(async {
        let (raw, _) = Actor::spawn(None, RawAgent, ()).await.expect("raw");
        let (jido, agent, plain, fsm) = inline_agents().await;
        (raw, jido, agent, plain, fsm)
    });
    let mut g = c.benchmark_group("cast");
    g.throughput(Throughput::Elements(n));
    g.bench_function("raw_ractor_cast", |b| {
        b.iter_custom(|iters| {
            let raw = raw.clone();
            in_task(&rt, iters, move || {
                let raw = raw.clone();
                async move {
                    for _ in 0..n {
                        raw.cast(RawAgentMsg::Cast).expect("cast");
                    }
                    raw.call(RawAgentMsg::Call, None).await.expect("call")
                }
            })
        })
    });
    g.bench_function("agent_cast_noop_inline", |b| {
        b.iter_custom(|iters| {
            let agent = agent.clone();
            in_task(&rt, iters, move || {
                let agent = agent.clone();
                async move {
                    for _ in 0..n {
                        agent.cast(Signal::new("noop", json!({}))).expect("cast");
                    }
                    agent
                        .call_timeout(Signal::new("noop", json!({})), Duration::from_secs(60))
                        .await
                        .expect("call")
                }
            })
        })
    });
    for (name, agent) in [
        ("agent_cast_noop_inline_plain", &plain),
        ("agent_cast_noop_inline_fsm", &fsm),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let agent = agent.clone();
                in_task(&rt, iters, move || {
                    let agent = agent.clone();
                    async move { casts_then_call(&agent, n).await }
                })
            })
        });
    }
    g.finish();
    rt.block_on(async {
        jido.shutdown().await;
        raw.stop(None);
    });
}

/// `n` casts of `noop`, then a call.
async fn casts_then_call(agent: &AgentRef, n: u64) -> AgentState {
    for _ in 0..n {
        agent.cast(Signal::new("noop", json!({}))).expect("cast");
    }
    agent
        .call_timeout(Signal::new("noop", json!({})), Duration::from_secs(60))
        .await
        .expect("call")
}

/// The agents of the `cast` group on an instance whose actions run inline:
/// Direct, [`Plain`] and FSM.
async fn inline_agents() -> (Jido, AgentRef, AgentRef, AgentRef) {
    let jido =
        Jido::start(JidoConfig::new().exec_options(ExecOptions::new().timeout(Duration::ZERO)))
            .await
            .expect("jido");
    let direct = jido
        .start_agent(bench_agent("b"), ServerOptions::new())
        .await
        .expect("agent");
    let plain = jido
        .start_agent(
            AgentState::new(PlainBench, AgentOptions::new().id("p").state(five_keys())),
            ServerOptions::new(),
        )
        .await
        .expect("agent");
    let fsm = jido
        .start_agent(
            AgentState::new(FsmBench, AgentOptions::new().id("f").state(five_keys())),
            ServerOptions::new(),
        )
        .await
        .expect("agent");
    (jido, direct, plain, fsm)
}

fn spawn_stop(c: &mut Criterion) {
    for (flavor, rt) in [
        ("current_thread", current_thread()),
        ("multi_thread", runtime()),
    ] {
        let jido = rt.block_on(Jido::start(JidoConfig::new())).expect("jido");
        let mut g = c.benchmark_group(format!("spawn_stop/{flavor}"));
        g.bench_function("raw_ractor_spawn_stop", |b| {
            b.iter_custom(|iters| {
                in_task(&rt, iters, || async {
                    let (a, h) = Actor::spawn(None, RawAgent, ()).await.expect("spawn");
                    a.stop(None);
                    h.await.expect("join");
                })
            })
        });
        g.bench_function("agent_start_stop", |b| {
            b.iter_custom(|iters| {
                let jido = jido.clone();
                in_task(&rt, iters, move || {
                    let jido = jido.clone();
                    async move {
                        let a = jido
                            .start_agent(bench_agent("s"), ServerOptions::new())
                            .await
                            .expect("start");
                        jido.stop_agent(a.id()).await.expect("stop");
                    }
                })
            })
        });
        g.finish();
        rt.block_on(jido.shutdown());
    }
}

async fn agent_family(jido: &Jido, n: usize) -> Duration {
    let started = Instant::now();
    let parent: AgentRef = jido
        .start_agent(
            AgentState::new(Parent, AgentOptions::new().id("p")),
            ServerOptions::new(),
        )
        .await
        .expect("parent");
    parent
        .call(Signal::new("spawn", json!({"n": n})))
        .await
        .expect("spawn");
    // Returns once every SpawnAgent directive ran.
    parent
        .call_timeout(Signal::new("noop", json!({})), Duration::from_secs(60))
        .await
        .expect("noop");
    assert_eq!(jido.agents().len(), n + 1);
    parent.stop("shutdown").await.expect("stop");
    while !jido.agents().is_empty() {
        tokio::time::sleep(Duration::from_micros(50)).await;
    }
    started.elapsed()
}

async fn raw_family(n: usize) -> Duration {
    let started = Instant::now();
    let (sup, h) = Actor::spawn(None, RawSup, ()).await.expect("sup");
    for _ in 0..n {
        Actor::spawn_linked(None, RawAgent, (), sup.get_cell())
            .await
            .expect("child");
    }
    sup.stop_children_and_wait(None, None).await;
    sup.stop(None);
    h.await.expect("join");
    started.elapsed()
}

fn children(c: &mut Criterion) {
    let sizes: &[usize] = if ci() { &[10, 100] } else { &[10, 100, 1_000] };
    let rt = runtime();
    let jido = rt.block_on(Jido::start(JidoConfig::new())).expect("jido");
    let mut g = c.benchmark_group("children");
    g.sample_size(10);
    for &n in sizes {
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("raw_ractor_supervisor", n), &n, |b, &n| {
            b.to_async(&rt).iter_custom(|iters| async move {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += raw_family(n).await;
                }
                total
            })
        });
        g.bench_with_input(BenchmarkId::new("agent_parent", n), &n, |b, &n| {
            let jido = jido.clone();
            b.to_async(&rt).iter_custom(move |iters| {
                let jido = jido.clone();
                async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += agent_family(&jido, n).await;
                    }
                    total
                }
            })
        });
    }
    g.finish();
    rt.block_on(jido.shutdown());
}

// ---------- Emit fan-out ----------

/// Counts what the receivers processed.
struct Counted(Arc<AtomicU64>);
impl Actor for Counted {
    type Msg = Signal;
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<Signal>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
    async fn handle(
        &self,
        _: ActorRef<Signal>,
        _: Signal,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

struct CountAction(Arc<AtomicU64>);
impl Action for CountAction {
    type Params = Nothing;
    type Output = ();
    const NAME: &'static str = "count";
    async fn run(&self, _: Nothing, _: &Context) -> jido::Result<()> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

struct Receiver(Arc<AtomicU64>);
impl Agent for Receiver {
    const NAME: &'static str = "receiver";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![SignalRoute::action("count", CountAction(self.0.clone()))]
    }
}

/// Emits one `count` signal through its dispatch (one target per receiver).
struct FanOutAction(DispatchConfig);
impl Action for FanOutAction {
    type Params = Nothing;
    type Output = ();
    const NAME: &'static str = "fan_out";
    async fn run(&self, _: Nothing, ctx: &Context) -> jido::Result<()> {
        ctx.push_effect(Directive::emit_to(
            Signal::new("count", json!({})),
            self.0.clone(),
        ));
        Ok(())
    }
}

struct Emitter(DispatchConfig);
impl Agent for Emitter {
    const NAME: &'static str = "emitter";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![SignalRoute::action("fan_out", FanOutAction(self.0.clone()))]
    }
}

async fn wait_count(counter: &AtomicU64, target: u64) {
    while counter.load(Ordering::Relaxed) < target {
        tokio::task::yield_now().await;
    }
}

fn emit_fanout(c: &mut Criterion) {
    let sizes: &[usize] = if ci() { &[1, 10] } else { &[1, 10, 100] };
    let rt = runtime();
    let jido = rt
        .block_on(Jido::start(
            JidoConfig::new().exec_options(ExecOptions::new().timeout(Duration::ZERO)),
        ))
        .expect("jido");
    let mut g = c.benchmark_group("emit_fanout");
    for &n in sizes {
        let counter = Arc::new(AtomicU64::new(0));
        let (raws, emitter) = rt.block_on(async {
            let mut raws = Vec::new();
            for _ in 0..n {
                let (a, _) = Actor::spawn(None, Counted(counter.clone()), ())
                    .await
                    .expect("raw");
                raws.push(a);
            }
            let mut dispatch: Option<DispatchConfig> = None;
            for i in 0..n {
                let r = jido
                    .start_agent(
                        AgentState::new(
                            Receiver(counter.clone()),
                            AgentOptions::new().id(format!("r{n}_{i}")),
                        ),
                        ServerOptions::new(),
                    )
                    .await
                    .expect("receiver");
                let t = ActorTarget::new(r);
                dispatch = Some(match dispatch {
                    None => DispatchConfig::new(t).expect("dispatch"),
                    Some(d) => d.with(t).expect("dispatch"),
                });
            }
            let emitter = jido
                .start_agent(
                    AgentState::new(
                        Emitter(dispatch.expect("at least one receiver")),
                        AgentOptions::new().id(format!("e{n}")),
                    ),
                    ServerOptions::new(),
                )
                .await
                .expect("emitter");
            (raws, emitter)
        });
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("raw_ractor_casts", n), &n, |b, &n| {
            b.to_async(&rt).iter(|| async {
                let start = counter.load(Ordering::Relaxed);
                for a in &raws {
                    a.cast(Signal::new("count", json!({}))).expect("cast");
                }
                wait_count(&counter, start + n as u64).await;
            })
        });
        g.bench_with_input(BenchmarkId::new("agent_emit", n), &n, |b, &n| {
            b.to_async(&rt).iter(|| async {
                let start = counter.load(Ordering::Relaxed);
                emitter
                    .cast(Signal::new("fan_out", json!({})))
                    .expect("cast");
                wait_count(&counter, start + n as u64).await;
            })
        });
        for a in raws {
            a.stop(None);
        }
    }
    g.finish();
    rt.block_on(jido.shutdown());
}

// ---------- Schedule: armed and cancelled ----------

enum TimerMsg {
    Arm(usize, RpcReplyPort<()>),
    Tick,
}

#[cfg(feature = "cluster")]
impl ractor::Message for TimerMsg {}

/// Arms `send_after` timers and aborts them when stopped.
struct RawTimers;
impl Actor for RawTimers {
    type Msg = TimerMsg;
    type State = Vec<tokio::task::JoinHandle<Result<(), ractor::MessagingErr<TimerMsg>>>>;
    type Arguments = ();
    async fn pre_start(
        &self,
        _: ActorRef<TimerMsg>,
        _: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(Vec::new())
    }
    async fn handle(
        &self,
        myself: ActorRef<TimerMsg>,
        msg: TimerMsg,
        timers: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            TimerMsg::Arm(n, reply) => {
                for _ in 0..n {
                    timers.push(myself.send_after(Duration::from_secs(3600), || TimerMsg::Tick));
                }
                let _ = reply.send(());
            }
            TimerMsg::Tick => {}
        }
        Ok(())
    }
    async fn post_stop(
        &self,
        _: ActorRef<TimerMsg>,
        timers: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        for t in timers.drain(..) {
            t.abort();
        }
        Ok(())
    }
}

/// Pushes `n` Schedule directives (1 h).
struct ArmAction;
impl Action for ArmAction {
    type Params = SpawnN;
    type Output = ();
    const NAME: &'static str = "arm";
    async fn run(&self, p: SpawnN, ctx: &Context) -> jido::Result<()> {
        for _ in 0..p.n {
            ctx.push_effect(Directive::schedule(
                Duration::from_secs(3600),
                Signal::new("noop", json!({})),
            ));
        }
        Ok(())
    }
}

struct Scheduler;
impl Agent for Scheduler {
    const NAME: &'static str = "scheduler";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![
            SignalRoute::action("arm", ArmAction),
            SignalRoute::action("noop", Noop),
        ]
    }
}

fn schedule_cancel(c: &mut Criterion) {
    let n: usize = if ci() { 1_000 } else { 10_000 };
    let rt = runtime();
    let jido = rt
        .block_on(Jido::start(
            JidoConfig::new().exec_options(ExecOptions::new().timeout(Duration::ZERO)),
        ))
        .expect("jido");
    let mut g = c.benchmark_group("schedule_cancel");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n as u64));
    g.bench_with_input(BenchmarkId::new("raw_ractor_send_after", n), &n, |b, &n| {
        b.to_async(&rt).iter(|| async move {
            let (a, h) = Actor::spawn(None, RawTimers, ()).await.expect("spawn");
            a.call(|r| TimerMsg::Arm(n, r), None).await.expect("arm");
            a.stop(None);
            h.await.expect("join");
        })
    });
    g.bench_with_input(BenchmarkId::new("agent_schedule", n), &n, |b, &n| {
        b.to_async(&rt).iter(|| async {
            let a = jido
                .start_agent(
                    AgentState::new(Scheduler, AgentOptions::new().id("sched")),
                    ServerOptions::new().max_queue_size(n + 10),
                )
                .await
                .expect("start");
            a.call(Signal::new("arm", json!({"n": n})))
                .await
                .expect("arm");
            // Returns once every Schedule directive ran.
            a.call_timeout(Signal::new("noop", json!({})), Duration::from_secs(60))
                .await
                .expect("noop");
            jido.stop_agent(a.id()).await.expect("stop");
        })
    });
    g.finish();
    rt.block_on(jido.shutdown());
}

// ---------- a query while an action retries ----------

/// Always fails with a retryable error.
struct Flaky;
impl Action for Flaky {
    type Params = Nothing;
    type Output = ();
    const NAME: &'static str = "flaky";
    async fn run(&self, _: Nothing, _: &Context) -> jido::Result<()> {
        Err(jido::Error::timeout("upstream slow"))
    }
}

struct Busy;
impl Agent for Busy {
    const NAME: &'static str = "busy";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![
            SignalRoute::action("flaky", Flaky),
            SignalRoute::action("noop", Noop),
        ]
    }
}

fn busy_query(c: &mut Criterion) {
    let rt = runtime();
    let (jido, idle, busy) = rt.block_on(async {
        // Retries for about an hour: the `flaky` signal stays in flight.
        let jido = Jido::start(
            JidoConfig::new().exec_options(
                ExecOptions::new()
                    .max_retries(1_000_000)
                    .backoff(Duration::from_millis(2))
                    .max_backoff(Duration::from_millis(5)),
            ),
        )
        .await
        .expect("jido");
        let idle = jido
            .start_agent(
                AgentState::new(Busy, AgentOptions::new().id("idle")),
                ServerOptions::new(),
            )
            .await
            .expect("idle");
        let busy = jido
            .start_agent(
                AgentState::new(Busy, AgentOptions::new().id("busy")),
                ServerOptions::new(),
            )
            .await
            .expect("busy");
        busy.cast(Signal::new("flaky", json!({}))).expect("cast");
        (jido, idle, busy)
    });
    let mut g = c.benchmark_group("busy_query");
    g.bench_function("raw_idle_agent_status", |b| {
        b.to_async(&rt)
            .iter(|| async { idle.status().await.expect("status") })
    });
    g.bench_function("agent_status_while_retrying", |b| {
        b.to_async(&rt).iter(|| async {
            let st = busy.status().await.expect("status");
            assert!(st.in_flight, "the flaky signal is still retrying");
            st
        })
    });
    g.finish();
    rt.block_on(jido.shutdown());
}

/// `JIDO_SERVER_PROBE=CASE:ROUNDS` runs one case ROUNDS times in a
/// spawned task on a 2-worker runtime and exits (for counting instructions
/// with callgrind: the difference of two round counts over the difference
/// in rounds). Cases: `cast_direct`, `cast_plain`, `cast_fsm` (100 casts
/// and a call a round, actions inline).
fn probe(spec: &str) {
    let (case, rounds) = spec.split_once(':').expect("CASE:ROUNDS");
    let rounds: u64 = rounds.parse().expect("rounds");
    let rt = runtime();
    let (jido, direct, plain, fsm) = rt.block_on(inline_agents());
    let agent = match case {
        "cast_direct" => direct,
        "cast_plain" => plain,
        "cast_fsm" => fsm,
        other => panic!("unknown probe case {other}"),
    };
    in_task(&rt, rounds, move || {
        let agent = agent.clone();
        async move { casts_then_call(&agent, 100).await }
    });
    rt.block_on(jido.shutdown());
}

fn main() {
    if let Ok(spec) = std::env::var("JIDO_SERVER_PROBE") {
        probe(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

criterion_group!(
    benches,
    call,
    cast,
    spawn_stop,
    children,
    emit_fanout,
    schedule_cancel,
    busy_query
);
