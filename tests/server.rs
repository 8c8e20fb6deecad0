//! AgentServer core: call/cast/state/status, routing, one signal at a time
//! off the handler, FIFO deferral, options, stop.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use jido::agent::{RouteTarget, SignalRoute};
use jido::prelude::*;
use jido::server::{
    AgentRef, AgentServer, AgentServerArgs, ErrorDecision, ErrorPolicy, Jido, JidoConfig,
    ServerOptions, ServerStatus,
};
use jido::signal::Signal;
use jido::strategy::{Strategy, StrategyContext};
use serde_json::json;
use tokio::sync::Semaphore;

async fn start(agent: AgentState, opts: ServerOptions) -> (Jido, AgentRef) {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let r = jido.start_agent(agent, opts).await.unwrap();
    (jido, r)
}

#[test]
fn handles_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<AgentRef>();
    assert_send_sync::<Jido>();
    assert_send_sync::<ServerOptions>();
}

#[tokio::test]
async fn call_returns_the_agent_after_its_cmd() {
    let (jido, agent) = start(
        TestAgent::new().route("counter.add", add()).build("c1"),
        ServerOptions::new(),
    )
    .await;
    let after = agent
        .call(sig("counter.add", json!({"n": 2})))
        .await
        .unwrap();
    assert_eq!(after.id(), "c1");
    assert_eq!(after.state()["total"], 2);
    let after = agent
        .call(sig("counter.add", json!({"n": 3})))
        .await
        .unwrap();
    assert_eq!(after.state()["total"], 5);
    assert_eq!(agent.state().await.unwrap().state()["total"], 5);
    jido.shutdown().await;
}

#[tokio::test]
async fn cast_is_processed_in_arrival_order() {
    let (jido, agent) = start(
        TestAgent::new().route("log.append", append()).build("l1"),
        ServerOptions::new(),
    )
    .await;
    for i in 0..20 {
        agent.cast(sig("log.append", json!({"item": i}))).unwrap();
    }
    // A call queues behind the casts.
    let after = agent
        .call(sig("log.append", json!({"item": 20})))
        .await
        .unwrap();
    assert_eq!(after.state()["log"], json!((0..=20).collect::<Vec<_>>()));
    jido.shutdown().await;
}

#[tokio::test]
async fn no_route_is_a_routing_error_and_goes_to_the_error_policy() {
    let (tx, mut rx) = channel();
    let policy = ErrorPolicy::custom(move |ev| {
        let _ = tx.send(
            json!({"context": ev.context, "message": ev.error.message(), "count": ev.error_count}),
        );
        Ok(ErrorDecision::Continue)
    });
    let (jido, agent) = start(
        TestAgent::new().build("r1"),
        ServerOptions::new().error_policy(policy),
    )
    .await;
    let err = agent
        .call(sig("order.placed", json!({})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Routing);
    assert_eq!(err.message(), "no route for signal: order.placed");
    assert_eq!(err.detail("signal_type"), Some(&json!("order.placed")));
    assert_eq!(err.detail("reason"), Some(&json!("no_handlers_found")));
    assert_eq!(
        recv(&mut rx).await,
        json!({"context": "routing", "message": "no route for signal: order.placed", "count": 1})
    );
    // Runtime signals (`jido.agent.*`) without a route: the caller still
    // gets the routing error, the policy does not.
    let err = agent
        .call(sig("jido.agent.child.exit", json!({})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Routing);
    agent
        .call(sig("order.placed", json!({})))
        .await
        .unwrap_err();
    assert_eq!(recv(&mut rx).await["count"], 2);
    assert_eq!(agent.status().await.unwrap().error_count, 2);
    jido.shutdown().await;
}

#[tokio::test]
async fn queries_are_answered_while_a_long_action_runs_and_signals_wait_fifo() {
    let gate = Arc::new(Semaphore::new(0));
    let agent_def = TestAgent::new().route("work", gated(Arc::clone(&gate)));
    let (jido, agent) = start(agent_def.build("g1"), ServerOptions::new()).await;
    let caller = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.call(sig("work", json!({"item": 1}))).await })
    };
    // Wait until the first signal is in flight.
    within(async {
        while !agent.status().await.unwrap().in_flight {
            tokio::task::yield_now().await;
        }
    })
    .await;
    agent.cast(sig("work", json!({"item": 2}))).unwrap();
    agent.cast(sig("work", json!({"item": 3}))).unwrap();
    let status = within(agent.status()).await.unwrap();
    assert_eq!(status.status, ServerStatus::Processing);
    assert!(status.in_flight);
    assert_eq!(status.pending_signals, 2);
    assert_eq!(status.queue_length, 0);
    // The state is the one before the signal.
    assert_eq!(
        within(agent.state()).await.unwrap().state().get("log"),
        None
    );

    gate.add_permits(1);
    let after = within(caller).await.unwrap().unwrap();
    assert_eq!(after.state()["log"], json!([1]));
    gate.add_permits(2);
    let last = within(agent.call(sig("work", json!({"item": 4}))));
    gate.add_permits(1);
    assert_eq!(last.await.unwrap().state()["log"], json!([1, 2, 3, 4]));
    let status = agent.status().await.unwrap();
    assert_eq!(
        (status.status, status.pending_signals, status.in_flight),
        (ServerStatus::Idle, 0, false)
    );
    jido.shutdown().await;
}

#[tokio::test]
async fn stop_is_served_while_an_action_runs_and_cancels_it() {
    let cancelled = Arc::new(AtomicBool::new(false));
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let flag = Arc::clone(&cancelled);
    let forever = act(move |_, _| {
        let guard = Flag(Arc::clone(&flag));
        async move {
            std::future::pending::<()>().await;
            drop(guard);
            Ok(json!({}))
        }
    });
    // Inline runs (timeout zero): the action runs inside the agent's cmd
    // task, which the stop aborts.
    let jido =
        Jido::start(JidoConfig::new().exec_options(ExecOptions::new().timeout(Duration::ZERO)))
            .await
            .unwrap();
    let agent = jido
        .start_agent(
            TestAgent::new().route("forever", forever).build("s1"),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    let caller = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.call(sig("forever", json!({}))).await })
    };
    within(async {
        while !agent.status().await.unwrap().in_flight {
            tokio::task::yield_now().await;
        }
    })
    .await;
    within(agent.stop("normal")).await.unwrap();
    assert!(!agent.is_alive());
    let err = within(caller).await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(err.message(), "agent stopped before replying");
    within(async {
        while !cancelled.load(Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(jido.whereis("s1").is_none());
    let err = agent.state().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(
        agent.cast(sig("x", json!({}))).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        agent.stop("normal").await.unwrap_err().kind(),
        ErrorKind::NotFound
    );
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn call_times_out_after_five_seconds_by_default() {
    let slow = act(|_, _| async {
        tokio::time::sleep(Duration::from_secs(20)).await;
        Ok(json!({"done": true}))
    });
    let (jido, agent) = start(
        TestAgent::new().route("slow", slow).build("t1"),
        ServerOptions::new(),
    )
    .await;
    let started = tokio::time::Instant::now();
    let err = agent.call(sig("slow", json!({}))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(err.message(), "agent call timed out after 5000ms");
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    // The signal is still processed.
    let err = agent
        .call_timeout(sig("nothing", json!({})), Duration::from_secs(30))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Routing);
    assert_eq!(agent.state().await.unwrap().state()["done"], true);
    jido.shutdown().await;
}

#[tokio::test]
async fn builtin_stop_signal_stops_with_its_reason() {
    let (agent, _probe, mut rx) = under_probe(AgentServerArgs::new(
        TestAgent::new().build("bs"),
        ServerOptions::new(),
    ))
    .await;
    agent
        .cast(sig("jido.agent.stop", json!({"reason": "bye"})))
        .unwrap();
    assert_eq!(
        exit_of(&mut rx, agent.actor_ref().get_id()).await,
        Seen::Terminated(agent.actor_ref().get_id(), Some("bye".into()))
    );
    // Without data the reason is normal.
    let (agent, _probe, mut rx) = under_probe(AgentServerArgs::new(
        TestAgent::new().build("bs2"),
        ServerOptions::new(),
    ))
    .await;
    let after = agent
        .call(sig("jido.agent.stop", json!(null)))
        .await
        .unwrap();
    assert_eq!(after.id(), "bs2");
    assert_eq!(
        exit_of(&mut rx, agent.actor_ref().get_id()).await,
        Seen::Terminated(agent.actor_ref().get_id(), Some("normal".into()))
    );
}

#[tokio::test]
async fn a_route_for_jido_agent_stop_overrides_the_builtin() {
    let (jido, agent) = start(
        TestAgent::new().route("jido.agent.stop", add()).build("ov"),
        ServerOptions::new(),
    )
    .await;
    let after = agent
        .call(sig("jido.agent.stop", json!({"n": 1})))
        .await
        .unwrap();
    assert_eq!(after.state()["total"], 1);
    assert!(agent.is_alive());
    jido.shutdown().await;
}

#[tokio::test]
async fn invalid_route_refuses_the_start_naming_it() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let err = jido
        .start_agent(
            TestAgent::new().route("order..placed", add()).build("bad"),
            ServerOptions::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(
        err.message(),
        "invalid signal route order..placed: path cannot contain consecutive dots"
    );
    assert_eq!(err.detail("route"), Some(&json!("order..placed")));
    let agent = AgentState::new(
        TestAgent {
            routes: vec![SignalRoute::action("ok", add()).with_priority(500)],
        },
        AgentOptions::new(),
    );
    let err = jido
        .start_agent(agent, ServerOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.detail("route"), Some(&json!("ok")));
    assert!(jido.whereis("bad").is_none());
    assert!(jido.agents().is_empty());
    jido.shutdown().await;
}

#[tokio::test]
async fn invalid_options_are_start_errors() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let err = jido
        .start_agent(
            TestAgent::new().build("q0"),
            ServerOptions::new().max_queue_size(0),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), "max_queue_size must be at least 1");
    let err = jido
        .start_agent(
            TestAgent::new().build("m0"),
            ServerOptions::new().error_policy(ErrorPolicy::max_errors(0)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.message(), "max_errors must be at least 1");
    let err =
        ServerOptions::from_json(json!({"lifecycle_mod": "x"}).as_object().unwrap()).unwrap_err();
    assert_eq!(err.message(), "unknown server option: lifecycle_mod");
    let err = ServerOptions::from_json(json!({"on_parent_death": "explode"}).as_object().unwrap())
        .unwrap_err();
    assert_eq!(err.message(), "invalid server option: on_parent_death");
    assert!(jido.agents().is_empty());
    jido.shutdown().await;
}

#[tokio::test]
async fn id_resolution_and_initial_state() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    // Explicit option id wins over the agent's.
    let a = jido
        .start_agent(
            TestAgent::new().build("from-agent"),
            ServerOptions::new()
                .id("explicit")
                .initial_state(json!({"total": 7}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(a.id(), "explicit");
    let st = a.state().await.unwrap();
    assert_eq!(
        (st.id(), st.state()["total"].to_json()),
        ("explicit", json!(7))
    );
    // The agent's id otherwise; an empty option id counts as none.
    let b = jido
        .start_agent(
            TestAgent::new().build("from-agent"),
            ServerOptions::new().id(""),
        )
        .await
        .unwrap();
    assert_eq!(b.id(), "from-agent");
    // A generated UUIDv7 when neither gives one.
    let c = jido
        .start_agent(
            AgentState::new(TestAgent::new(), AgentOptions::new()),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(c.id().len(), 36);
    assert_eq!(&c.id()[14..15], "7");
    let ids: Vec<String> = jido.agents().iter().map(|a| a.id().to_owned()).collect();
    let mut expected = vec![
        "explicit".to_owned(),
        "from-agent".to_owned(),
        c.id().to_owned(),
    ];
    expected.sort();
    assert_eq!(ids, expected);
    jido.shutdown().await;
}

#[tokio::test]
async fn several_matching_routes_run_in_router_order() {
    let agent_def = TestAgent::new()
        .route(
            "order.*",
            act(|_, ctx| async move {
                let log = ctx
                    .state()
                    .and_then(|s| s.get("log").cloned())
                    .unwrap_or(json!([]).into());
                let mut log = log.as_array().cloned().unwrap_or_default();
                log.push(json!("wildcard"));
                Ok(json!({"log": log}))
            }),
        )
        .route(
            "order.placed",
            act(|_, ctx| async move {
                let log = ctx
                    .state()
                    .and_then(|s| s.get("log").cloned())
                    .unwrap_or(json!([]).into());
                let mut log = log.as_array().cloned().unwrap_or_default();
                log.push(json!("exact"));
                Ok(json!({"log": log}))
            }),
        );
    let (jido, agent) = start(agent_def.build("m1"), ServerOptions::new()).await;
    let after = agent.call(sig("order.placed", json!({}))).await.unwrap();
    assert_eq!(after.state()["log"], json!(["exact", "wildcard"]));
    jido.shutdown().await;
}

/// Records every command it gets; ticks count up.
struct Recorder;
impl Strategy for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    async fn cmd(
        &self,
        agent: &mut AgentData,
        commands: Vec<Command>,
        _: &StrategyContext,
    ) -> Vec<Directive> {
        for c in commands {
            let entry = match c {
                Command::Run(ins) => json!({"run": ins.action.name(), "params": ins.params}),
                Command::Strategy { name, params, .. } => json!({"cmd": name, "params": params}),
                other => json!(format!("{other:?}")),
            };
            let mut log = agent
                .state()
                .get("seen")
                .and_then(|v| v.as_array().cloned())
                .unwrap_or_default();
            log.push(entry);
            agent.state_mut().insert("seen", json!(log));
        }
        Vec::new()
    }
    async fn tick(&self, agent: &mut AgentData, _: &StrategyContext) -> Vec<Directive> {
        let n = agent
            .state()
            .get("ticks")
            .and_then(|v| v.as_i64())
            .unwrap_or(0);
        agent.state_mut().insert("ticks", json!(n + 1));
        Vec::new()
    }
    fn signal_routes(&self, _: &StrategyContext) -> Vec<SignalRoute> {
        vec![SignalRoute::new(
            "strategy.go",
            RouteTarget::StrategyCmd("go".into()),
        )]
    }
}

struct RecorderAgent;
impl Agent for RecorderAgent {
    const NAME: &'static str = "recorder_agent";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(Recorder)
    }
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![
            SignalRoute::action("act.data", add()),
            SignalRoute::new(
                "act.fixed",
                RouteTarget::ActionWithParams(add(), json!({"n": 9})),
            ),
            SignalRoute::new("tick", RouteTarget::StrategyTick),
        ]
    }
}

#[tokio::test]
async fn route_targets_action_fixed_params_strategy_command_and_tick() {
    let (jido, agent) = start(
        AgentState::new(RecorderAgent, AgentOptions::new().id("rec")),
        ServerOptions::new(),
    )
    .await;
    agent.call(sig("act.data", json!({"n": 1}))).await.unwrap();
    agent.call(sig("act.fixed", json!({"n": 1}))).await.unwrap();
    agent
        .call(sig("strategy.go", json!({"x": true})))
        .await
        .unwrap();
    let after = agent.call(sig("tick", json!({}))).await.unwrap();
    assert_eq!(
        after.state()["seen"],
        json!([
            {"run": "do", "params": {"n": 1}},
            {"run": "do", "params": {"n": 9}},
            {"cmd": "go", "params": {"x": true}},
        ])
    );
    assert_eq!(after.state()["ticks"], 1);
    jido.shutdown().await;
}

struct Panicky;
impl Strategy for Panicky {
    async fn cmd(&self, _: &mut AgentData, _: Vec<Command>, _: &StrategyContext) -> Vec<Directive> {
        panic!("strategy exploded")
    }
}
struct PanickyAgent;
impl Agent for PanickyAgent {
    const NAME: &'static str = "panicky";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(Panicky)
    }
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![SignalRoute::action("go", add())]
    }
}

#[tokio::test]
async fn a_panicking_cmd_is_an_execution_error_and_the_agent_lives_on() {
    let (tx, mut rx) = channel();
    let policy = ErrorPolicy::custom(move |ev| {
        let _ = tx.send(json!({"context": ev.context, "message": ev.error.message()}));
        Ok(ErrorDecision::Continue)
    });
    let (jido, agent) = start(
        AgentState::new(PanickyAgent, AgentOptions::new().id("p1")),
        ServerOptions::new().error_policy(policy),
    )
    .await;
    let err = agent.call(sig("go", json!({"n": 1}))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Execution);
    assert_eq!(err.message(), "agent cmd panicked: strategy exploded");
    assert_eq!(
        recv(&mut rx).await,
        json!({"context": "cmd", "message": "agent cmd panicked: strategy exploded"})
    );
    assert!(agent.is_alive());
    assert_eq!(agent.status().await.unwrap().status, ServerStatus::Idle);
    jido.shutdown().await;
}

#[tokio::test]
async fn status_reports_the_server() {
    let (jido, agent) = start(
        TestAgent::new().route("a", add()).build("st"),
        ServerOptions::new(),
    )
    .await;
    agent.call(sig("a", json!({"n": 4}))).await.unwrap();
    let s = agent.status().await.unwrap();
    assert_eq!(s.agent_id, "st");
    assert_eq!(s.agent_type, "test_agent");
    assert_eq!(s.status, ServerStatus::Idle);
    assert_eq!(s.snapshot.status, SnapshotStatus::Idle);
    assert_eq!(
        (s.queue_length, s.pending_signals, s.in_flight),
        (0, 0, false)
    );
    assert!(s.children.is_empty());
    assert_eq!(s.parent_id, None);
    assert_eq!(s.completion_waiters, 0);
    assert_eq!(s.agent.state()["total"], 4);
    jido.shutdown().await;
}

#[tokio::test]
async fn embedded_spawn_and_from_actor() {
    let args = AgentServerArgs::new(
        TestAgent::new().route("a", add()).build("emb"),
        ServerOptions::new(),
    );
    let (agent, handle) = AgentServer::start(args).await.unwrap();
    let again = AgentRef::from_actor(agent.actor_ref().clone())
        .await
        .unwrap();
    assert_eq!(again.id(), "emb");
    assert_eq!(again, agent);
    again.call(sig("a", json!({"n": 1}))).await.unwrap();
    agent.stop("normal").await.unwrap();
    within(handle).await.unwrap();
}

fn finishing_agent(id: &str) -> AgentState {
    TestAgent::new()
        .route(
            "finish",
            act(|p, _| async move {
                Ok(json!({"status": "completed", "last_answer": p["answer"].clone()}))
            }),
        )
        .route(
            "give_up",
            act(|p, _| async move { Ok(json!({"status": "failed", "error": p["why"].clone()})) }),
        )
        .route(
            "custom",
            act(|_, _| async move { Ok(json!({"job": {"state": "completed", "out": {"n": 1}}})) }),
        )
        .route("work", add())
        .build(id)
}

#[tokio::test(start_paused = true)]
async fn await_completion_is_event_driven() {
    use jido::server::{AwaitOptions, CompletionStatus};
    let (jido, agent) = start(finishing_agent("aw"), ServerOptions::new()).await;
    let waiter = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.await_completion(AwaitOptions::new()).await })
    };
    within(async {
        while agent.status().await.unwrap().completion_waiters == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    agent.cast(sig("work", json!({"n": 1}))).unwrap();
    agent.cast(sig("finish", json!({"answer": 42}))).unwrap();
    let done = within(waiter).await.unwrap().unwrap();
    assert_eq!(
        (done.status, done.result),
        (CompletionStatus::Completed, json!(42))
    );
    assert_eq!(agent.status().await.unwrap().completion_waiters, 0);
    // Already complete: answered at once.
    let again = agent.await_completion(AwaitOptions::new()).await.unwrap();
    assert_eq!(again.result, json!(42));
    jido.shutdown().await;

    let (jido, agent) = start(finishing_agent("aw2"), ServerOptions::new()).await;
    agent
        .cast(sig("give_up", json!({"why": "no stock"})))
        .unwrap();
    let done = agent.await_completion(AwaitOptions::new()).await.unwrap();
    assert_eq!(
        (done.status, done.result),
        (CompletionStatus::Failed, json!("no stock"))
    );
    // Configurable paths.
    agent.cast(sig("custom", json!({}))).unwrap();
    let done = agent
        .await_completion(
            AwaitOptions::new()
                .status_path(["job", "state"])
                .result_path(["job", "out"]),
        )
        .await
        .unwrap();
    assert_eq!(
        (done.status, done.result),
        (CompletionStatus::Completed, json!({"n": 1}))
    );
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn await_completion_times_out_with_a_diagnostic_and_leaves_no_waiter() {
    use jido::server::AwaitOptions;
    let (jido, agent) = start(finishing_agent("aw3"), ServerOptions::new()).await;
    let started = tokio::time::Instant::now();
    let err = agent
        .await_completion(AwaitOptions::new())
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(10));
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(err.message(), "await completion timed out after 10000ms");
    assert_eq!(err.detail("waited_ms"), Some(&json!(10_000)));
    assert_eq!(err.detail("server_status"), Some(&json!("idle")));
    assert_eq!(err.detail("queue_length"), Some(&json!(0)));
    assert_eq!(
        err.detail("hint"),
        Some(&json!(
            "the state at \"status\" never became \"completed\" or \"failed\""
        ))
    );
    assert_eq!(agent.status().await.unwrap().completion_waiters, 0);
    let err = agent
        .await_completion(AwaitOptions::new().timeout(Duration::from_millis(250)))
        .await
        .unwrap_err();
    assert_eq!(err.detail("waited_ms"), Some(&json!(250)));
    jido.shutdown().await;
}

/// Waiters with different timeouts each time out at their own deadline,
/// in any order of arrival, and one answered early leaves the others'.
#[tokio::test(start_paused = true)]
async fn each_completion_waiter_times_out_at_its_own_deadline() {
    use jido::server::{AwaitOptions, CompletionStatus};
    let other_done = act(|_, _| async move { Ok(json!({"other": "completed"})) });
    let (jido, agent) = start(
        TestAgent::new()
            .route("other_done", other_done)
            .build("aw4"),
        ServerOptions::new(),
    )
    .await;
    let started = tokio::time::Instant::now();
    let wait = |timeout_ms: u64, path: &'static str| {
        let agent = agent.clone();
        tokio::spawn(async move {
            let result = agent
                .await_completion(
                    AwaitOptions::new()
                        .status_path([path])
                        .timeout(Duration::from_millis(timeout_ms)),
                )
                .await;
            (result, started.elapsed())
        })
    };
    // Arrival order: 3 s, then 1 s, then 2 s (answered early), then 5 s.
    let w3 = wait(3_000, "status");
    tokio::task::yield_now().await;
    let w1 = wait(1_000, "status");
    tokio::task::yield_now().await;
    let w2 = wait(2_000, "other");
    tokio::task::yield_now().await;
    let w5 = wait(5_000, "status");
    within(async {
        while agent.status().await.unwrap().completion_waiters < 4 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    agent.cast(sig("other_done", json!({}))).unwrap();
    let (done, at) = w2.await.unwrap();
    assert_eq!(done.unwrap().status, CompletionStatus::Completed);
    assert_eq!(at, Duration::from_millis(500));
    for (waiter, ms) in [(w1, 1_000), (w3, 3_000), (w5, 5_000)] {
        let (result, at) = waiter.await.unwrap();
        let err = result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout);
        assert_eq!(
            err.message(),
            format!("await completion timed out after {ms}ms")
        );
        assert_eq!(at, Duration::from_millis(ms));
    }
    assert_eq!(agent.status().await.unwrap().completion_waiters, 0);
    jido.shutdown().await;
}

#[tokio::test]
async fn debug_ring_buffer_keeps_the_last_500_events_newest_first() {
    let (jido, agent) = start(finishing_agent("dbg"), ServerOptions::new()).await;
    let err = agent.recent_events(None).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.message(), "debug mode is not enabled");
    agent.set_debug(true).await.unwrap();
    let s = sig("work", json!({"n": 1}));
    let id = s.id().to_owned();
    agent.call(s).await.unwrap();
    let events = agent.recent_events(None).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, "signal_received");
    assert_eq!(events[0].data, json!({"type": "work", "id": id}));
    for i in 0..600 {
        agent.cast(sig("work", json!({"n": i}))).unwrap();
    }
    agent.call(sig("work", json!({"n": 0}))).await.unwrap();
    let events = agent.recent_events(None).await.unwrap();
    assert_eq!(events.len(), 500);
    assert!(events.windows(2).all(|w| w[0].at >= w[1].at));
    assert_eq!(agent.recent_events(Some(3)).await.unwrap().len(), 3);
    agent.set_debug(false).await.unwrap();
    assert!(agent.recent_events(None).await.is_err());
    jido.shutdown().await;

    // Directives and hierarchy events too, from the start option.
    let agent_def = TestAgent::new().route(
        "go",
        effects(|_| vec![Directive::emit(Signal::new("x.y", json!({})))]),
    );
    let (jido, agent) = start(agent_def.build("dbg2"), ServerOptions::new().debug(true)).await;
    agent.call(sig("go", json!({}))).await.unwrap();
    agent
        .call_timeout(sig("zzz", json!({})), Duration::from_secs(5))
        .await
        .unwrap_err();
    let kinds: Vec<&str> = agent
        .recent_events(None)
        .await
        .unwrap()
        .iter()
        .map(|e| e.kind)
        .collect();
    // Newest first: zzz (unrouted: its Error directive), x.y (emitted back,
    // unrouted: its Error directive), go (its Emit).
    assert_eq!(
        kinds,
        vec![
            "directive_started",
            "signal_received",
            "directive_started",
            "signal_received",
            "directive_started",
            "signal_received"
        ]
    );
    jido.shutdown().await;
}

#[tokio::test]
async fn telemetry_events_carry_jido_fields() {
    let (events, _guard) = record_events();
    let jido = Jido::start(JidoConfig::new().name("tel")).await.unwrap();
    let agent_def = TestAgent::new().route(
        "go",
        effects(|_| vec![Directive::schedule(Duration::from_secs(60), json!({}))]),
    );
    let agent = jido
        .start_agent(agent_def.build("t1"), ServerOptions::new())
        .await
        .unwrap();
    agent.call(sig("go", json!({}))).await.unwrap();
    agent
        .call_timeout(sig("nothing", json!({})), Duration::from_secs(5))
        .await
        .unwrap_err();
    let start = events.named("jido.agent_server.signal.start");
    assert_eq!(start[0]["agent_id"], json!("t1"));
    assert_eq!(start[0]["agent_module"], json!("test_agent"));
    assert_eq!(start[0]["signal_type"], json!("go"));
    assert_eq!(start[0]["jido_instance"], json!("tel"));
    let stop = events.named("jido.agent_server.signal.stop");
    assert_eq!(stop[0]["directive_count"], json!(1));
    assert_eq!(stop[0]["directive_types"], json!("[\"schedule\"]"));
    let directive = events.named("jido.agent_server.directive.stop");
    assert_eq!(directive[0]["directive_type"], json!("schedule"));
    assert_eq!(directive[0]["result"], json!("async"));
    jido.shutdown().await;
}

#[tokio::test]
async fn actions_see_the_signal_they_handle() {
    #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
    struct Any {}
    struct Echo;
    impl Action for Echo {
        type Params = Any;
        type Output = serde_json::Value;
        const NAME: &'static str = "echo_signal";
        async fn run(&self, _: Any, ctx: &Context) -> jido::Result<serde_json::Value> {
            let s = ctx.signal().expect("the runtime passes the signal");
            Ok(json!({"seen": {"type": s.ty(), "id": s.id(), "source": s.source()}}))
        }
    }
    let (jido, agent) = start(
        TestAgent::new()
            .route("probe.echo", Echo.into())
            .build("echo"),
        ServerOptions::new(),
    )
    .await;
    let signal = Signal::builder("probe.echo")
        .source("/tests")
        .data(json!({}))
        .build()
        .unwrap();
    let id = signal.id().to_owned();
    let after = agent.call(signal).await.unwrap();
    assert_eq!(
        after.state()["seen"],
        json!({"type": "probe.echo", "id": id, "source": "/tests"})
    );
    jido.shutdown().await;
}

/// Records the ids of the instructions each `cmd` gets, in the state.
struct IdRecorder;
impl Agent for IdRecorder {
    const NAME: &'static str = "id_recorder";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![
            SignalRoute::action("one", noop()),
            SignalRoute::action("two", noop()),
            SignalRoute::action("two", noop()),
        ]
    }
    fn on_before_cmd(
        &self,
        agent: &mut AgentState,
        commands: Vec<jido::strategy::Command>,
    ) -> jido::Result<Vec<jido::strategy::Command>> {
        let ids: Vec<String> = commands
            .iter()
            .filter_map(|c| match c {
                jido::strategy::Command::Run(ins) => Some(ins.id.to_string()),
                _ => None,
            })
            .collect();
        agent.state_mut().insert("ids", json!(ids));
        Ok(commands)
    }
}

#[tokio::test]
async fn routed_instructions_share_the_signal_uuid() {
    let (jido, agent) = start(
        AgentState::new(IdRecorder, AgentOptions::new().id("ids1")),
        ServerOptions::new(),
    )
    .await;
    // A generated id (a UUIDv7): the instruction takes it.
    let signal = sig("one", json!({}));
    let id = signal.id().to_owned();
    let after = agent.call(signal).await.unwrap();
    assert_eq!(after.state()["ids"], json!([id]));
    // Two routes for one signal: both instructions share its id.
    let signal = sig("two", json!({}));
    let id = signal.id().to_owned();
    let after = agent.call(signal).await.unwrap();
    assert_eq!(after.state()["ids"], json!([id, id]));
    // An id that is not a UUIDv7 (given by hand, or a UUIDv4): a new
    // UUIDv7 for the instruction.
    for given in ["order-17", "5f0c6b8e-3d5a-4c1e-9a8b-2f1e0d9c8b7a"] {
        let signal = Signal::builder("one").id(given).build().unwrap();
        let after = agent.call(signal).await.unwrap();
        let ids = after.state()["ids"].as_array().unwrap().clone();
        assert_eq!(ids.len(), 1);
        let made = uuid::Uuid::parse_str(ids[0].as_str().unwrap()).unwrap();
        assert_eq!(made.get_version_num(), 7);
        assert_ne!(made.to_string(), given);
    }
    jido.shutdown().await;
}
