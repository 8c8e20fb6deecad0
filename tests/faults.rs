//! Fault injection: actions that panic, hang, fail with effects or crash in
//! compensation; directive executors that panic; crash loops; parents that
//! die; an instance shut down with work in flight. Each time every caller
//! gets an answer, nothing is left running, and the state is the
//! documented one.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use jido::directive::{CustomDirective, OnParentDeath, Restart};
use jido::prelude::*;
use jido::server::{
    AgentRef, DirectiveContext, DirectiveExec, DirectiveResult, ErrorDecision, ErrorPolicy, Jido,
    JidoConfig, ServerOptions,
};
use jido::signal::Signal;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// An error policy that reports `{context, message, reason}` of every error.
fn reporting() -> (ErrorPolicy, Rx) {
    let (tx, rx) = channel();
    let policy = ErrorPolicy::custom(move |ev| {
        let _ = tx.send(json!({
            "context": ev.context,
            "message": ev.error.message(),
            "reason": ev.error.detail("reason").and_then(|r| r.get("message")).cloned(),
            "count": ev.error_count,
        }));
        Ok(ErrorDecision::Continue)
    });
    (policy, rx)
}

/// Waits (bounded) until no task of the instance runs.
async fn no_tasks_left(jido: &Jido) {
    within(async {
        while jido.exec().supervisor().active() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

/// Waits (bounded) until nothing is linked under the instance supervisor.
async fn no_actors_left(jido: &Jido) {
    within(async {
        while !jido.supervisor_cell().get_children().is_empty() {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

fn panicking(runs: Arc<AtomicUsize>) -> DynAction {
    act(move |_, _| {
        runs.fetch_add(1, Ordering::SeqCst);
        async { panic!("kaboom") }
    })
}

#[tokio::test(start_paused = true)]
async fn a_panicking_action_is_an_error_and_the_agent_keeps_serving() {
    // In a supervised task (default) and inline (timeout zero).
    for inline in [false, true] {
        let runs = Arc::new(AtomicUsize::new(0));
        let (policy, mut errors) = reporting();
        let mut config = JidoConfig::new();
        if inline {
            config = config.exec_options(ExecOptions::new().timeout(Duration::ZERO));
        }
        let jido = Jido::start(config).await.unwrap();
        let agent = jido
            .start_agent(
                TestAgent::new()
                    .route("panic", panicking(Arc::clone(&runs)))
                    .route("counter.add", add())
                    .build("p"),
                ServerOptions::new().error_policy(policy),
            )
            .await
            .unwrap();
        within(agent.call(sig("counter.add", json!({"n": 2}))))
            .await
            .unwrap();
        for _ in 0..3 {
            let started = tokio::time::Instant::now();
            let err = within(agent.call(sig("panic", json!({}))))
                .await
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Execution);
            assert_eq!(within(agent.state()).await.unwrap().state()["total"], 2);
            // A panic is an execution error, hence retried once (250 ms backoff).
            assert_eq!(started.elapsed(), Duration::from_millis(250));
        }
        assert_eq!(runs.load(Ordering::SeqCst), 6);
        for count in 1..=3 {
            assert_eq!(
                recv(&mut errors).await,
                json!({"context": "instruction", "message": "instruction failed",
                       "reason": "action do panicked: kaboom", "count": count})
            );
        }
        let after = within(agent.call(sig("counter.add", json!({"n": 1}))))
            .await
            .unwrap();
        assert_eq!(after.state()["total"], 3);
        assert!(agent.is_alive());
        no_tasks_left(&jido).await;
        jido.shutdown().await;
        no_actors_left(&jido).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_hanging_action_times_out_at_its_deadline() {
    let (policy, mut errors) = reporting();
    let jido = Jido::start(
        JidoConfig::new().exec_options(ExecOptions::new().timeout(Duration::from_millis(200))),
    )
    .await
    .unwrap();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route(
                    "hang",
                    act(|_, _| async {
                        std::future::pending::<()>().await;
                        Ok(json!({}))
                    }),
                )
                .route("counter.add", add())
                .build("h"),
            ServerOptions::new().error_policy(policy),
        )
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let err = agent.call(sig("hang", json!({}))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    let after = agent.state().await.unwrap();
    // One retry by default: two attempts of 200 ms and a 250 ms backoff.
    assert_eq!(started.elapsed(), Duration::from_millis(650));
    assert_eq!(after.state().get("total"), None);
    assert_eq!(
        recv(&mut errors).await["reason"],
        json!("action do timed out after 200ms")
    );
    let after = agent
        .call(sig("counter.add", json!({"n": 4})))
        .await
        .unwrap();
    assert_eq!(after.state()["total"], 4);
    no_tasks_left(&jido).await;
    jido.shutdown().await;
}

#[tokio::test]
async fn a_failed_action_keeps_its_directives_and_drops_its_state_ops() {
    let (policy, mut errors) = reporting();
    let (tx, mut seen) = channel();
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route(
                    "half",
                    act(|_, ctx| async move {
                        ctx.push_effect(StateOp::set_path(["written"], json!(true)));
                        ctx.push_effect(Directive::emit(Signal::new(
                            "after.fail",
                            json!({"x": 1}),
                        )));
                        Err(Error::execution("half done").with_retry(false))
                    }),
                )
                .route("after.fail", forward(tx))
                .build("e"),
            ServerOptions::new().error_policy(policy),
        )
        .await
        .unwrap();
    let err = within(agent.call(sig("half", json!({}))))
        .await
        .unwrap_err();
    assert_eq!(err.message(), "half done");
    let after = within(agent.state()).await.unwrap();
    assert_eq!(after.state().get("written"), None);
    assert_eq!(recv(&mut errors).await["reason"], json!("half done"));
    // The emitted signal comes back to the agent and is routed.
    assert_eq!(recv(&mut seen).await, json!({"x": 1}));
    assert_eq!(
        within(agent.state()).await.unwrap().state().get("written"),
        None
    );
    no_tasks_left(&jido).await;
    jido.shutdown().await;
}

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Empty {}

/// Fails; its compensation panics.
struct BadUndo(Arc<AtomicUsize>);
impl Action for BadUndo {
    type Params = Empty;
    type Output = Value;
    const NAME: &'static str = "bad_undo";
    const COMPENSATION: Compensation = Compensation::ENABLED;
    async fn run(&self, _: Empty, _: &Context) -> jido::Result<Value> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Err(Error::execution("charge failed").with_retry(false))
    }
    async fn on_error(
        &self,
        _: Empty,
        _: &Error,
        _: &Context,
        _: &jido::action::CompensationOptions,
    ) -> jido::Result<Value> {
        panic!("undo exploded")
    }
}

#[tokio::test]
async fn a_compensation_that_panics_is_reported_and_the_agent_keeps_serving() {
    let (policy, mut errors) = reporting();
    let runs = Arc::new(AtomicUsize::new(0));
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("charge", DynAction::new(BadUndo(Arc::clone(&runs))))
                .route("counter.add", add())
                .build("c"),
            ServerOptions::new().error_policy(policy),
        )
        .await
        .unwrap();
    let err = within(agent.call(sig("charge", json!({}))))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Compensation);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let reason = recv(&mut errors).await["reason"].clone();
    assert_eq!(reason, json!("compensation crashed for: charge failed"),);
    let after = within(agent.call(sig("counter.add", json!({"n": 1}))))
        .await
        .unwrap();
    assert_eq!(after.state()["total"], 1);
    no_tasks_left(&jido).await;
    jido.shutdown().await;
}

#[derive(Debug)]
struct Crash;
impl CustomDirective for Crash {}
struct CrashExec;
impl DirectiveExec for CrashExec {
    type Directive = Crash;
    fn exec(&self, _: &Crash, _: &Signal, _: &DirectiveContext<'_>) -> DirectiveResult {
        panic!("exec exploded")
    }
}

fn crashable(id: &str, gate: Arc<Semaphore>) -> AgentState {
    TestAgent::new()
        .route("crash", effects(|_| vec![Directive::custom(Crash)]))
        .route("work", gated(gate))
        .route("counter.add", add())
        .build(id)
}

#[tokio::test]
async fn a_panicking_directive_crashes_the_agent_and_every_waiting_caller_is_answered() {
    let gate = Arc::new(Semaphore::new(0));
    let jido = Jido::start(JidoConfig::new().directive_exec(CrashExec))
        .await
        .unwrap();
    let agent = jido
        .start_agent(crashable("d", Arc::clone(&gate)), ServerOptions::new())
        .await
        .unwrap();
    // Park a signal in flight, then queue the crash and ten callers behind it.
    agent.cast(sig("work", json!({"item": 0}))).unwrap();
    within(async {
        while !agent.status().await.unwrap().in_flight {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let crash = {
        let a = agent.clone();
        tokio::spawn(async move { a.call(sig("crash", json!({}))).await })
    };
    let callers: Vec<_> = (0..10)
        .map(|i| {
            let a = agent.clone();
            tokio::spawn(async move { a.call(sig("counter.add", json!({"n": i}))).await })
        })
        .collect();
    within(async {
        while agent.status().await.map(|s| s.pending_signals).unwrap_or(0) < 11 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    gate.add_permits(1);
    // The crash call returns (directives are queued, not yet executed).
    within(crash).await.unwrap().unwrap();
    // Every other caller gets an answer: the agent died with them waiting.
    let mut cancelled = 0;
    for c in callers {
        match within(c).await.unwrap() {
            Ok(_) => {}
            Err(e) => {
                assert!(
                    matches!(e.kind(), ErrorKind::Cancelled | ErrorKind::NotFound),
                    "{e}"
                );
                cancelled += 1;
            }
        }
    }
    assert_eq!(cancelled, 10);
    assert!(!agent.is_alive());
    assert_eq!(agent.actor_ref().get_status(), ractor::ActorStatus::Stopped);
    within(async {
        while jido.whereis("d").is_some() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    no_tasks_left(&jido).await;
    no_actors_left(&jido).await;
    jido.shutdown().await;
}

#[tokio::test]
async fn a_top_level_agent_that_keeps_crashing_is_given_up() {
    let (events, _guard) = record_events();
    let gate = Arc::new(Semaphore::new(0));
    let jido = Jido::start(
        JidoConfig::new()
            .directive_exec(CrashExec)
            .max_restarts(3, Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let mut current = jido
        .start_agent(
            crashable("loop", gate),
            ServerOptions::new().restart(Restart::Permanent),
        )
        .await
        .unwrap();
    let mut crashes = 0;
    loop {
        let _ = current.cast(sig("crash", json!({})));
        crashes += 1;
        let old = current.clone();
        let next = within(async {
            loop {
                match jido.whereis("loop") {
                    Some(n) if n != old => return Some(n),
                    None if !old.is_alive() => {
                        // Either given up or between restart and register.
                        tokio::task::yield_now().await;
                        if jido.whereis("loop").is_none()
                            && !events
                                .named("jido.agent_server.restart.given_up")
                                .is_empty()
                        {
                            return None;
                        }
                    }
                    _ => tokio::task::yield_now().await,
                }
            }
        })
        .await;
        match next {
            Some(n) => current = n,
            None => break,
        }
        assert!(crashes < 10, "restarted forever");
    }
    // Three restarts, then the fourth crash is given up.
    assert_eq!(crashes, 4);
    assert_eq!(events.named("jido.agent_server.restart").len(), 3);
    assert_eq!(events.named("jido.agent_server.restart.given_up").len(), 1);
    assert!(jido.agents().is_empty());
    no_actors_left(&jido).await;
    no_tasks_left(&jido).await;
    jido.shutdown().await;
}

/// A parent with a child under each `on_parent_death` policy.
fn family_parent() -> AgentState {
    let kid = TestAgent::new()
        .route("counter.add", add())
        .route("jido.agent.orphaned", noop())
        .build("unused");
    TestAgent::new()
        .route(
            "spawn",
            effects(move |p| {
                // The tag names the child's parent-death policy.
                let tag = p["tag"].as_str().unwrap();
                let policy = OnParentDeath::parse(tag).expect("a policy name");
                vec![
                    Directive::spawn_agent(kid.clone(), tag)
                        .on_parent_death(policy)
                        .restart(Restart::Temporary)
                        .into(),
                ]
            }),
        )
        .route("crash", effects(|_| vec![Directive::custom(Crash)]))
        .route("jido.agent.child.started", noop())
        .build("parent")
}

async fn alive_child(jido: &Jido, id: &str) -> AgentRef {
    within(async {
        loop {
            if let Some(c) = jido.whereis(id) {
                return c;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
}

#[tokio::test]
async fn parents_stopped_crashed_and_killed_leave_exactly_the_documented_survivors() {
    for how in ["stop", "crash", "kill"] {
        let jido = Jido::start(JidoConfig::new().directive_exec(CrashExec))
            .await
            .unwrap();
        let p = jido
            .start_agent(family_parent(), ServerOptions::new())
            .await
            .unwrap();
        for tag in ["stop", "continue", "emit_orphan"] {
            within(p.call(sig("spawn", json!({"tag": tag}))))
                .await
                .unwrap();
        }
        let mut kids: Vec<AgentRef> = Vec::new();
        for t in ["stop", "continue", "emit_orphan"] {
            kids.push(alive_child(&jido, &format!("parent/{t}")).await);
        }
        match how {
            "stop" => within(p.stop("normal")).await.unwrap(),
            "crash" => p.cast(sig("crash", json!({}))).unwrap(),
            _ => p.actor_ref().kill(),
        }
        // The `stop` child stops; the others are orphaned and keep serving.
        within(async {
            while kids[0].is_alive() || p.is_alive() {
                tokio::task::yield_now().await;
            }
        })
        .await;
        for kid in &kids[1..] {
            within(async {
                loop {
                    let st = kid.state().await.unwrap();
                    if st.state().get("__orphaned_from__").is_some() {
                        assert_eq!(st.state().get("__parent__"), None);
                        break;
                    }
                    tokio::task::yield_now().await;
                }
            })
            .await;
            let after = within(kid.call(sig("counter.add", json!({"n": 1}))))
                .await
                .unwrap();
            assert_eq!(after.state()["total"], 1, "{how}");
        }
        let mut ids: Vec<String> = jido.agents().iter().map(|a| a.id().to_owned()).collect();
        ids.sort();
        assert_eq!(ids, ["parent/continue", "parent/emit_orphan"], "{how}");
        assert_eq!(jido.supervisor_cell().get_children().len(), 2, "{how}");
        within(jido.shutdown()).await;
        assert!(kids.iter().all(|k| !k.is_alive()));
        no_actors_left(&jido).await;
        assert_eq!(jido.exec().supervisor().active(), 0);
    }
}

#[tokio::test]
async fn shutdown_with_work_in_flight_answers_every_caller() {
    let gate = Arc::new(Semaphore::new(0));
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let mut agents = Vec::new();
    for i in 0..20 {
        agents.push(
            jido.start_agent(
                crashable(&format!("w{i}"), Arc::clone(&gate)),
                ServerOptions::new(),
            )
            .await
            .unwrap(),
        );
    }
    // Each agent: one signal in flight (blocked) and four waiting callers.
    let mut callers = Vec::new();
    for a in &agents {
        for k in 0..5 {
            let a = a.clone();
            callers.push(tokio::spawn(async move {
                a.call_timeout(sig("work", json!({"item": k})), Duration::from_secs(30))
                    .await
            }));
        }
    }
    within(async {
        for a in &agents {
            while a.status().await.map(|s| s.pending_signals).unwrap_or(0) < 4 {
                tokio::task::yield_now().await;
            }
        }
    })
    .await;
    // Per agent: the action's task (the agent drives its `cmd` itself,
    // without a task of its own).
    assert_eq!(jido.exec().supervisor().active(), 20);
    within(jido.shutdown()).await;
    let mut errors = 0;
    for c in callers {
        let err = within(c).await.unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
        assert_eq!(err.message(), "agent stopped before replying");
        errors += 1;
    }
    assert_eq!(errors, 100);
    assert!(agents.iter().all(|a| !a.is_alive()));
    assert!(
        agents
            .iter()
            .all(|a| a.actor_ref().get_status() == ractor::ActorStatus::Stopped)
    );
    assert!(jido.agents().is_empty());
    assert_eq!(jido.exec().supervisor().active(), 0);
    no_actors_left(&jido).await;
}

/// A strategy whose `init` crashes the agent at once.
struct CrashOnStart;
impl jido::strategy::Strategy for CrashOnStart {
    fn init(&self, _: &mut AgentData, _: &jido::strategy::StrategyContext) -> Vec<Directive> {
        vec![Directive::custom(Crash)]
    }
    async fn cmd(
        &self,
        _: &mut AgentData,
        _: Vec<Command>,
        _: &jido::strategy::StrategyContext,
    ) -> Vec<Directive> {
        Vec::new()
    }
}
struct Doomed;
impl Agent for Doomed {
    const NAME: &'static str = "doomed";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(CrashOnStart)
    }
    fn signal_routes(&self) -> Vec<jido::agent::SignalRoute> {
        Vec::new()
    }
}

#[tokio::test]
async fn a_child_crashing_in_a_loop_is_given_up_and_its_parent_is_told_once() {
    let (tx, mut given_up) = channel();
    let jido = Jido::start(
        JidoConfig::new()
            .directive_exec(CrashExec)
            .max_restarts(2, Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let doomed = AgentState::new(Doomed, AgentOptions::new());
    let parent = jido
        .start_agent(
            TestAgent::new()
                .route(
                    "spawn",
                    effects(move |_| {
                        vec![
                            Directive::spawn_agent(doomed.clone(), "d")
                                .restart(Restart::Permanent)
                                .into(),
                        ]
                    }),
                )
                .route("jido.agent.child.given_up", forward(tx))
                .route("counter.add", add())
                .build("p"),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    within(parent.call(sig("spawn", json!({})))).await.unwrap();
    assert_eq!(
        recv(&mut given_up).await,
        json!({"tag": "d", "id": "p/d", "restarts": 2,
               "reason": "failed: directive faults::Crash panicked: exec exploded"})
    );
    // The parent keeps serving; only it is left.
    let after = within(parent.call(sig("counter.add", json!({"n": 1}))))
        .await
        .unwrap();
    assert_eq!(after.state()["total"], 1);
    assert!(within(parent.status()).await.unwrap().children.is_empty());
    assert_eq!(
        jido.agents()
            .iter()
            .map(|a| a.id().to_owned())
            .collect::<Vec<_>>(),
        ["p"]
    );
    assert_eq!(jido.supervisor_cell().get_children().len(), 1);
    no_tasks_left(&jido).await;
    // Told once: nothing more arrives.
    within(parent.call(sig("counter.add", json!({"n": 1}))))
        .await
        .unwrap();
    assert!(given_up.try_recv().is_err());
    jido.shutdown().await;
    no_actors_left(&jido).await;
}
