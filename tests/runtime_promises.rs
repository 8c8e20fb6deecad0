//! What the runtime promises about replies, stops and bounds: every accepted
//! signal is answered with its own result or a clear `Cancelled`, nothing
//! waits on work that is not its own, and nothing a stop asked for comes
//! back.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use jido::ErrorKind;
use jido::directive::Restart;
use jido::prelude::*;
use jido::server::{
    AgentRef, AgentServer, AgentServerArgs, AwaitOptions, ErrorDecision, ErrorPolicy, Jido,
    JidoConfig, OnParentDeath, ServerOptions,
};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

/// Sleeps `params.ms` (virtual time), records `params.n` in `log` and, when
/// given, reports it on `tx` as it starts.
fn slow(tx: Option<mpsc::UnboundedSender<Value>>) -> DynAction {
    act(move |p, ctx| {
        let tx = tx.clone();
        async move {
            if let Some(tx) = &tx {
                let _ = tx.send(p["n"].clone());
            }
            tokio::time::sleep(Duration::from_millis(p["ms"].as_u64().unwrap_or(0))).await;
            let mut log = ctx
                .state()
                .and_then(|s| s.get("log").cloned())
                .unwrap_or_else(|| json!([]).into());
            if let Some(list) = log.as_array_mut() {
                list.push(p["n"].clone());
            }
            Ok(json!({"log": log}))
        }
    })
}

fn work(n: u64, ms: u64) -> jido::signal::Signal {
    sig("work", json!({"n": n, "ms": ms}))
}

fn log_of(agent: &AgentState) -> Value {
    agent.state()["log"].to_json()
}

/// Starts `call(signal)` in a task and lets it reach the agent's mailbox.
async fn spawn_call(
    agent: &AgentRef,
    signal: jido::signal::Signal,
) -> tokio::task::JoinHandle<jido::Result<AgentState>> {
    let agent = agent.clone();
    let task =
        tokio::spawn(async move { agent.call_timeout(signal, Duration::from_secs(60)).await });
    tokio::task::yield_now().await;
    task
}

#[tokio::test(start_paused = true)]
async fn a_call_is_answered_when_its_own_cmd_finishes_not_when_its_batch_ends() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("work", slow(None))
                .build("batch-reply"),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    let t0 = Instant::now();
    // A runs alone; B and C wait, then run back to back in one batch.
    agent.cast(work(1, 1_000)).unwrap();
    let b = spawn_call(&agent, work(2, 0)).await;
    agent.cast(work(3, 10_000)).unwrap();
    let after_b = b.await.unwrap().unwrap();
    assert_eq!(t0.elapsed(), Duration::from_millis(1_000));
    assert_eq!(log_of(&after_b), json!([1, 2]));
    // State reads see B's change while C still runs.
    assert_eq!(log_of(&agent.state().await.unwrap()), json!([1, 2]));
    let last = agent
        .call_timeout(work(4, 0), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(t0.elapsed(), Duration::from_millis(11_000));
    assert_eq!(log_of(&last), json!([1, 2, 3, 4]));
    jido.shutdown().await;
}

/// Three ways an agent ends while a batch runs: its own stop, a kill, its
/// parent's death. B (finished) gets its own result, C (unfinished) gets
/// `Cancelled`.
async fn end_while_batch_runs(end: &str) {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let parent = jido
        .start_agent(
            TestAgent::new().build(&format!("parent-{end}")),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    let (started, mut started_rx) = mpsc::unbounded_channel();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("work", slow(Some(started)))
                .build(&format!("ending-{end}")),
            ServerOptions::new()
                .parent(jido::server::ParentRef::new(&parent, "worker"))
                .on_parent_death(OnParentDeath::Stop),
        )
        .await
        .unwrap();
    agent.cast(work(1, 1_000)).unwrap();
    assert_eq!(recv(&mut started_rx).await, json!(1));
    let b = spawn_call(&agent, work(2, 0)).await;
    let c = spawn_call(&agent, work(3, 60_000)).await;
    // C runs: B has finished in the same batch.
    assert_eq!(recv(&mut started_rx).await, json!(2));
    assert_eq!(recv(&mut started_rx).await, json!(3));
    match end {
        "stop" => agent.stop("shutdown").await.unwrap(),
        "kill" => agent.actor_ref().kill_and_wait(None).await.unwrap(),
        _ => parent.stop("shutdown").await.unwrap(),
    }
    let after_b = b.await.unwrap().unwrap();
    assert_eq!(log_of(&after_b), json!([1, 2]));
    let err = c.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(err.message(), "agent stopped before replying");
    within(agent.actor_ref().wait(None)).await.unwrap();
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_stop_settles_finished_cmds_and_cancels_only_the_unfinished_one() {
    end_while_batch_runs("stop").await;
}

#[tokio::test(start_paused = true)]
async fn a_kill_answers_finished_cmds_and_cancels_only_the_unfinished_one() {
    end_while_batch_runs("kill").await;
}

#[tokio::test(start_paused = true)]
async fn a_parent_death_settles_finished_cmds_and_cancels_only_the_unfinished_one() {
    end_while_batch_runs("parent").await;
}

/// ractor's `drain` and `stop` from outside finish the signal in flight and
/// every signal the agent accepted, then end; `drain` is a normal exit that
/// is never restarted.
async fn raw_ractor_end(drain: bool) {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (started, mut started_rx) = mpsc::unbounded_channel();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("work", slow(Some(started)))
                .build(&format!("raw-{drain}")),
            ServerOptions::new().restart(Restart::Permanent),
        )
        .await
        .unwrap();
    agent.cast(work(1, 1_000)).unwrap();
    assert_eq!(recv(&mut started_rx).await, json!(1));
    let b = spawn_call(&agent, work(2, 500)).await;
    agent.cast(work(3, 500)).unwrap();
    let waiter = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.await_completion(AwaitOptions::new()).await })
    };
    tokio::task::yield_now().await;
    let t0 = Instant::now();
    if drain {
        agent.actor_ref().drain_and_wait(None).await.unwrap();
    } else {
        agent.actor_ref().stop_and_wait(None, None).await.unwrap();
    }
    assert_eq!(t0.elapsed(), Duration::from_millis(2_000));
    assert_eq!(log_of(&b.await.unwrap().unwrap()), json!([1, 2]));
    assert_eq!(recv(&mut started_rx).await, json!(2));
    assert_eq!(recv(&mut started_rx).await, json!(3));
    let err = waiter.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    tokio::time::sleep(Duration::from_secs(1)).await;
    if drain {
        // A normal end: the permanent agent is not brought back.
        assert!(jido.whereis("raw-true").is_none());
        assert!(jido.supervisor_cell().get_children().is_empty());
    }
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn ractor_drain_finishes_accepted_signals_and_ends_normally() {
    raw_ractor_end(true).await;
}

#[tokio::test(start_paused = true)]
async fn ractor_stop_finishes_accepted_signals() {
    raw_ractor_end(false).await;
}

#[tokio::test(start_paused = true)]
async fn agent_ref_stop_never_brings_back_a_permanent_agent() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    for (id, reason) in [("perm-normal", "normal"), ("perm-custom", "bye")] {
        let agent = jido
            .start_agent(
                TestAgent::new().build(id),
                ServerOptions::new().restart(Restart::Permanent),
            )
            .await
            .unwrap();
        agent.stop(reason).await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(jido.agents().is_empty());
    assert!(jido.supervisor_cell().get_children().is_empty());
    jido.shutdown().await;
}

/// A directive whose executor blocks its thread until released.
#[derive(Debug)]
struct Block;
impl jido::directive::CustomDirective for Block {}

struct BlockExec {
    entered: mpsc::UnboundedSender<Value>,
    release: Arc<std::sync::Mutex<std::sync::mpsc::Receiver<()>>>,
}
impl jido::server::DirectiveExec for BlockExec {
    type Directive = Block;
    fn exec(
        &self,
        _: &Block,
        _: &jido::signal::Signal,
        _: &jido::server::DirectiveContext<'_>,
    ) -> jido::server::DirectiveResult {
        let _ = self.entered.send(json!("blocking"));
        let _ = self.release.lock().unwrap().recv();
        jido::server::DirectiveResult::Ok
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_that_cannot_even_kill_is_an_error_and_the_agent_stays_registered() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (release, blocked) = std::sync::mpsc::channel();
    let (entered, mut entered_rx) = mpsc::unbounded_channel();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("block", effects(|_| vec![Directive::custom(Block)]))
                .build("blocked"),
            ServerOptions::new()
                .restart(Restart::Permanent)
                .directive_exec(BlockExec {
                    entered,
                    release: Arc::new(std::sync::Mutex::new(blocked)),
                }),
        )
        .await
        .unwrap();
    agent.call(sig("block", json!({}))).await.unwrap();
    assert_eq!(recv(&mut entered_rx).await, json!("blocking"));
    let err = agent
        .stop_timeout("shutdown", Duration::from_millis(50))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(err.message(), "agent did not stop");
    assert_eq!(err.detail("timeout_ms"), Some(&json!(50)));
    assert_eq!(jido.whereis("blocked").as_ref(), Some(&agent));
    // Released, the agent takes the kill and, though permanent, stays down.
    release.send(()).unwrap();
    within(agent.actor_ref().wait(None)).await.unwrap();
    within(async {
        while !jido.supervisor_cell().get_children().is_empty() || jido.whereis("blocked").is_some()
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(jido.whereis("blocked").is_none());
    jido.shutdown().await;
}

/// A supervisor that handles supervision events only when let through.
struct SlowSupervisor;

impl ractor::Actor for SlowSupervisor {
    type Msg = ();
    type State = Arc<Notify>;
    type Arguments = Arc<Notify>;

    async fn pre_start(
        &self,
        _: ractor::ActorRef<()>,
        gate: Arc<Notify>,
    ) -> Result<Arc<Notify>, ractor::ActorProcessingErr> {
        Ok(gate)
    }

    async fn handle_supervisor_evt(
        &self,
        _: ractor::ActorRef<()>,
        _: ractor::SupervisionEvent,
        gate: &mut Arc<Notify>,
    ) -> Result<(), ractor::ActorProcessingErr> {
        gate.notified().await;
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn waiting_callers_are_answered_when_the_agent_stops_not_when_its_supervisor_looks() {
    let gate = Arc::new(Notify::new());
    let (sup, _) = ractor::Actor::spawn(None, SlowSupervisor, Arc::clone(&gate))
        .await
        .unwrap();
    let (started, mut started_rx) = mpsc::unbounded_channel();
    let (agent, _) = AgentServer::start_linked(
        AgentServerArgs::new(
            TestAgent::new()
                .route("work", slow(Some(started)))
                .build("slow-sup"),
            ServerOptions::new(),
        ),
        sup.get_cell(),
    )
    .await
    .unwrap();
    // The supervisor is stuck on the agent's start event from here on.
    agent.cast(work(1, 60_000)).unwrap();
    assert_eq!(recv(&mut started_rx).await, json!(1));
    let b = spawn_call(&agent, work(2, 0)).await;
    let waiter = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.await_completion(AwaitOptions::new()).await })
    };
    tokio::task::yield_now().await;
    let t0 = Instant::now();
    agent.stop("shutdown").await.unwrap();
    let err = b.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(err.message(), "agent stopped before replying");
    assert_eq!(
        waiter.await.unwrap().unwrap_err().kind(),
        ErrorKind::Cancelled
    );
    assert_eq!(t0.elapsed(), Duration::ZERO);
    gate.notify_waiters();
    sup.stop(None);
}

/// The errors a policy saw: context and kind.
type PolicyLog = Arc<std::sync::Mutex<Vec<(String, ErrorKind)>>>;

/// A policy that records every error it sees.
fn counting() -> (ErrorPolicy, PolicyLog) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let policy = {
        let seen = Arc::clone(&seen);
        ErrorPolicy::custom(move |ev| {
            seen.lock()
                .unwrap()
                .push((ev.context.to_owned(), ev.error.kind()));
            Ok(ErrorDecision::Continue)
        })
    };
    (policy, seen)
}

#[tokio::test(start_paused = true)]
async fn a_gone_task_supervisor_makes_agents_answer_cancelled() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (policy, seen) = counting();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("work", slow(None))
                .build("orphaned-instance"),
            ServerOptions::new().error_policy(policy),
        )
        .await
        .unwrap();
    assert!(!jido.is_shut_down());
    jido.exec().supervisor().shutdown().await;
    assert!(jido.is_shut_down());
    let err = agent.call(work(1, 0)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(err.message(), "jido instance is shut down");
    agent.cast(work(2, 0)).unwrap();
    let status = agent.status().await.unwrap();
    assert_eq!(status.error_count, 2);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            ("shutdown".to_owned(), ErrorKind::Cancelled),
            ("shutdown".to_owned(), ErrorKind::Cancelled)
        ]
    );
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_gone_root_supervisor_shuts_the_instance_down_for_embedded_agents() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (agent, _) = AgentServer::start(AgentServerArgs::new(
        TestAgent::new().route("work", slow(None)).build("embedded"),
        ServerOptions::new().jido(jido.clone()),
    ))
    .await
    .unwrap();
    jido.supervisor_cell().kill_and_wait(None).await.unwrap();
    assert!(jido.is_shut_down());
    let err = agent.call(work(1, 0)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(err.message(), "jido instance is shut down");
    agent.stop("shutdown").await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_full_pending_queue_refuses_signals_with_queue_overflow() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (policy, seen) = counting();
    let (started, mut started_rx) = mpsc::unbounded_channel();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("work", slow(Some(started)))
                .build("bounded"),
            ServerOptions::new()
                .max_pending_signals(2)
                .error_policy(policy),
        )
        .await
        .unwrap();
    agent.cast(work(1, 1_000)).unwrap();
    assert_eq!(recv(&mut started_rx).await, json!(1));
    agent.cast(work(2, 0)).unwrap();
    agent.cast(work(3, 0)).unwrap();
    let err = agent.call(work(4, 0)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QueueOverflow);
    assert_eq!(err.message(), "pending signal queue full");
    assert_eq!(err.detail("max_pending_signals"), Some(&json!(2)));
    assert_eq!(err.detail("signal_type"), Some(&json!("work")));
    agent.cast(work(5, 0)).unwrap();
    let status = agent.status().await.unwrap();
    assert_eq!(status.pending_signals, 2);
    assert_eq!(status.error_count, 2);
    // The accepted ones all run; the refused ones never do.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let last = agent.call(work(6, 0)).await.unwrap();
    assert_eq!(log_of(&last), json!([1, 2, 3, 6]));
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            ("queue_overflow".to_owned(), ErrorKind::QueueOverflow),
            ("queue_overflow".to_owned(), ErrorKind::QueueOverflow)
        ]
    );
    let err = jido
        .start_agent(
            TestAgent::new().build("zero"),
            ServerOptions::new().max_pending_signals(0),
        )
        .await
        .unwrap_err();
    assert_eq!(err.message(), "max_pending_signals must be at least 1");
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_directive_overflow_on_a_cast_reaches_the_error_policy() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (policy, seen) = counting();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route(
                    "burst",
                    effects(|_| (0..3).map(|_| Directive::stop_with("never")).collect()),
                )
                .route("noop", noop())
                .build("overflow-cast"),
            ServerOptions::new().max_queue_size(2).error_policy(policy),
        )
        .await
        .unwrap();
    agent.cast(sig("burst", json!({}))).unwrap();
    // The next signal starts once the error directive ran.
    agent.call(sig("noop", json!({}))).await.unwrap();
    let status = agent.status().await.unwrap();
    assert_eq!(status.error_count, 1);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![("queue_overflow".to_owned(), ErrorKind::QueueOverflow)]
    );
    assert!(agent.is_alive());
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_killed_agent_outside_the_instance_supervisor_leaves_the_registry() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (agent, _probe, mut rx) = under_probe(AgentServerArgs::new(
        TestAgent::new().build("killed-outside"),
        ServerOptions::new().jido(jido.clone()),
    ))
    .await;
    assert_eq!(jido.registered_count(), 1);
    agent.actor_ref().kill();
    exit_of(&mut rx, agent.actor_ref().get_id()).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(jido.registered_count(), 0);
    jido.shutdown().await;
}

/// A strategy other than Direct whose commands wait on a gate the test
/// opens: `"wait"` waits then records its `n` in `log`; `"boom"` waits
/// then panics (after its first poll); `"now"` records at once. Its tick
/// records `"tick"`.
struct Gated(Arc<Notify>);
impl jido::strategy::Strategy for Gated {
    async fn cmd(
        &self,
        agent: &mut jido::agent::AgentData,
        commands: Vec<jido::strategy::Command>,
        _: &jido::strategy::StrategyContext,
    ) -> Vec<jido::directive::Directive> {
        for command in commands {
            let jido::strategy::Command::Strategy { name, params, .. } = command else {
                continue;
            };
            if name != "now" {
                self.0.notified().await;
            }
            if name == "boom" {
                panic!("strategy exploded after waiting");
            }
            push_log(agent, params["n"].clone());
        }
        Vec::new()
    }
    async fn tick(
        &self,
        agent: &mut jido::agent::AgentData,
        _: &jido::strategy::StrategyContext,
    ) -> Vec<jido::directive::Directive> {
        self.0.notified().await;
        push_log(agent, json!("tick"));
        Vec::new()
    }
}

fn push_log(agent: &mut jido::agent::AgentData, item: Value) {
    let mut log = agent.state().get("log").map_or(json!([]), |v| v.to_json());
    if let Some(list) = log.as_array_mut() {
        list.push(item);
    }
    agent.state_mut().insert("log", log);
}

struct GatedAgent(Arc<Notify>);
impl Agent for GatedAgent {
    const NAME: &'static str = "gated_agent";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(Gated(Arc::clone(&self.0)))
    }
    fn signal_routes(&self) -> Vec<jido::agent::SignalRoute> {
        use jido::agent::{RouteTarget, SignalRoute};
        let mut routes = command_routes();
        routes.push(SignalRoute::new("tick", RouteTarget::StrategyTick));
        routes
    }
}

/// `"wait"`, `"boom"` and `"now"`, each to the strategy command of its name.
fn command_routes() -> Vec<jido::agent::SignalRoute> {
    use jido::agent::{RouteTarget, SignalRoute};
    ["wait", "boom", "now"]
        .into_iter()
        .map(|c| SignalRoute::new(c, RouteTarget::StrategyCmd(c.into())))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn any_strategy_cmd_runs_in_place_without_holding_the_mailbox() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let gate = Arc::new(Notify::new());
    let agent = jido
        .start_agent(
            AgentState::new(
                GatedAgent(Arc::clone(&gate)),
                AgentOptions::new().id("gated"),
            ),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    // A command that finishes at once settles in the handler.
    let now = agent.call(sig("now", json!({"n": 0}))).await.unwrap();
    assert_eq!(log_of(&now), json!([0]));
    let first = spawn_call(&agent, sig("wait", json!({"n": 1}))).await;
    let second = spawn_call(&agent, sig("now", json!({"n": 2}))).await;
    // While the first waits the mailbox is served: the state is the one
    // before it, the second signal waits its turn, and no task of the
    // instance runs the `cmd`.
    let status = agent.status().await.unwrap();
    assert!(status.in_flight);
    assert_eq!(status.pending_signals, 1);
    assert_eq!(log_of(&agent.state().await.unwrap()), json!([0]));
    assert_eq!(jido.exec().supervisor().active(), 0);
    assert!(!second.is_finished());
    gate.notify_one();
    assert_eq!(log_of(&first.await.unwrap().unwrap()), json!([0, 1]));
    assert_eq!(log_of(&second.await.unwrap().unwrap()), json!([0, 1, 2]));
    // A tick is driven the same way.
    let tick = spawn_call(&agent, sig("tick", json!({}))).await;
    assert!(agent.status().await.unwrap().in_flight);
    gate.notify_one();
    assert_eq!(
        log_of(&tick.await.unwrap().unwrap()),
        json!([0, 1, 2, "tick"])
    );
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_strategy_panicking_after_an_await_is_an_execution_error_and_changes_nothing() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let gate = Arc::new(Notify::new());
    let (policy, log) = counting();
    let agent = jido
        .start_agent(
            AgentState::new(
                GatedAgent(Arc::clone(&gate)),
                AgentOptions::new().id("boom"),
            ),
            ServerOptions::new().error_policy(policy),
        )
        .await
        .unwrap();
    agent.call(sig("now", json!({"n": 0}))).await.unwrap();
    let boom = spawn_call(&agent, sig("boom", json!({"n": 1}))).await;
    gate.notify_one();
    let err = boom.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Execution);
    assert_eq!(
        err.message(),
        "agent cmd panicked: strategy exploded after waiting"
    );
    assert_eq!(log_of(&agent.state().await.unwrap()), json!([0]));
    assert_eq!(
        log.lock().unwrap().clone(),
        vec![("cmd".to_owned(), ErrorKind::Execution)]
    );
    let after = agent.call(sig("now", json!({"n": 2}))).await.unwrap();
    assert_eq!(log_of(&after), json!([0, 2]));
    jido.shutdown().await;
}

/// A strategy that runs its strategy commands inline
/// (`strategy_commands_inline`): `"now"` records its `n`; `"boom"` records
/// it, then panics; `"wait"` awaits a gate first, against its promise.
struct Inline(Arc<Notify>);
impl jido::strategy::Strategy for Inline {
    async fn cmd(
        &self,
        agent: &mut jido::agent::AgentData,
        commands: Vec<jido::strategy::Command>,
        _: &jido::strategy::StrategyContext,
    ) -> Vec<jido::directive::Directive> {
        for command in commands {
            let jido::strategy::Command::Strategy { name, params, .. } = command else {
                continue;
            };
            if name == "wait" {
                self.0.notified().await;
            }
            push_log(agent, params["n"].clone());
            if name == "boom" {
                panic!("inline strategy exploded");
            }
        }
        Vec::new()
    }
    fn strategy_commands_inline(&self) -> bool {
        true
    }
}

struct InlineAgent(Arc<Notify>);
impl Agent for InlineAgent {
    const NAME: &'static str = "inline_agent";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(Inline(Arc::clone(&self.0)))
    }
    fn signal_routes(&self) -> Vec<jido::agent::SignalRoute> {
        command_routes()
    }
}

async fn inline_agent(
    id: &str,
) -> (
    AgentRef,
    ractor::ActorRef<()>,
    mpsc::UnboundedReceiver<Seen>,
) {
    under_probe(AgentServerArgs::new(
        AgentState::new(
            InlineAgent(Arc::new(Notify::new())),
            AgentOptions::new().id(id),
        ),
        ServerOptions::new(),
    ))
    .await
}

#[tokio::test(start_paused = true)]
async fn an_inline_strategy_cmd_answers_its_call_with_the_changed_agent() {
    let (agent, _probe, _rx) = inline_agent("inline-now").await;
    let first = agent.call(sig("now", json!({"n": 1}))).await.unwrap();
    assert_eq!(log_of(&first), json!([1]));
    agent.cast(sig("now", json!({"n": 2}))).unwrap();
    let third = agent.call(sig("now", json!({"n": 3}))).await.unwrap();
    assert_eq!(log_of(&third), json!([1, 2, 3]));
    assert_eq!(log_of(&agent.state().await.unwrap()), json!([1, 2, 3]));
    // The copy the first call got is its own: later signals did not change it.
    assert_eq!(log_of(&first), json!([1]));
    agent.actor_ref().stop(None);
}

#[tokio::test(start_paused = true)]
async fn an_inline_strategy_cmd_that_panics_fails_the_agent_and_its_caller() {
    let (agent, _probe, mut rx) = inline_agent("inline-boom").await;
    agent.call(sig("now", json!({"n": 1}))).await.unwrap();
    let err = agent.call(sig("boom", json!({"n": 2}))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Execution);
    assert_eq!(
        err.message(),
        "agent cmd panicked: inline strategy exploded"
    );
    // The state may be half-changed: the agent does not go on with it.
    match exit_of(&mut rx, agent.actor_ref().get_id()).await {
        Seen::Failed(_, reason) => assert!(
            reason.contains("agent cmd panicked: inline strategy exploded"),
            "{reason}"
        ),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn an_inline_strategy_cmd_that_waits_fails_the_agent_and_its_caller() {
    let (agent, _probe, mut rx) = inline_agent("inline-wait").await;
    let err = agent.call(sig("wait", json!({"n": 1}))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Execution);
    assert!(
        err.message().starts_with("agent cmd waited: strategy")
            && err.message().ends_with("runs its commands inline"),
        "{}",
        err.message()
    );
    assert!(matches!(
        exit_of(&mut rx, agent.actor_ref().get_id()).await,
        Seen::Failed(..)
    ));
}
