//! The typed API (issue #13): directive builders and typed child options,
//! typed strategy state, and the options a compensation runs under.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use jido::action::CompensationOptions;
use jido::directive::{
    ChildOptions, ErrorPolicy, OnParentDeath, Restart, ScheduledMessage, StopReason,
};
use jido::prelude::*;
use jido::server::{Jido, JidoConfig};
use serde_json::{Map, Value, json};

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

// ---------------------------------------------------------------------------
// Directives: builders and typed child options
// ---------------------------------------------------------------------------

#[test]
fn spawn_agent_builder_sets_every_child_option() {
    let kid = TestAgent::new().build("kid");
    let d: Directive = Directive::spawn_agent(kid, "w1")
        .options(
            ChildOptions::new()
                .max_queue_size(7)
                .max_pending_signals(8)
                .max_concurrent_dispatches(9)
                .debug(true)
                .allow_untrusted_runtime_signals(true)
                .error_policy(ErrorPolicy::max_errors(2))
                .default_dispatch(DispatchConfig::default()),
        )
        // Set after `options`: they add to it.
        .id("kid-1")
        .on_parent_death(OnParentDeath::EmitOrphan)
        .initial_state(obj(json!({"x": 1})))
        .meta(obj(json!({"role": "worker"})))
        .restart(Restart::Permanent)
        .into();
    let Directive::SpawnAgent {
        agent,
        tag,
        options,
        meta,
        restart,
    } = &d
    else {
        panic!("{d:?}")
    };
    assert_eq!((agent.id(), tag.as_str()), ("kid", "w1"));
    assert_eq!(*restart, Restart::Permanent);
    assert_eq!(meta, &obj(json!({"role": "worker"})));
    assert_eq!(options.get_id(), Some("kid-1"));
    assert_eq!(
        options.get_on_parent_death(),
        Some(OnParentDeath::EmitOrphan)
    );
    assert_eq!(options.get_initial_state(), Some(&obj(json!({"x": 1}))));
    assert_eq!(
        (
            options.get_max_queue_size(),
            options.get_max_pending_signals(),
            options.get_max_concurrent_dispatches(),
        ),
        (Some(7), Some(8), Some(9))
    );
    assert_eq!(
        (
            options.get_debug(),
            options.get_allow_untrusted_runtime_signals()
        ),
        (Some(true), Some(true))
    );
    assert!(matches!(
        options.get_error_policy(),
        Some(ErrorPolicy::MaxErrors(2))
    ));
    assert!(options.get_default_dispatch().is_some());

    // `options` replaces what was set before it.
    let d: Directive = Directive::spawn_agent(TestAgent::new().build("k"), "t")
        .id("gone")
        .options(ChildOptions::new().debug(false))
        .into();
    let Directive::SpawnAgent { options, .. } = &d else {
        panic!()
    };
    assert_eq!((options.get_id(), options.get_debug()), (None, Some(false)));
    // An empty id counts as none.
    assert_eq!(ChildOptions::new().id("").get_id(), None);
}

#[test]
fn child_options_from_json_is_the_data_form() {
    let opts = ChildOptions::from_json(&obj(json!({
        "id": "w",
        "on_parent_death": "emit_orphan",
        "initial_state": {"a": 1},
        "max_queue_size": 5,
        "max_pending_signals": 6,
        "max_concurrent_dispatches": 7,
        "debug": true,
        "allow_untrusted_runtime_signals": false,
        "error_policy": {"max_errors": 3},
    })))
    .unwrap();
    assert_eq!(opts.get_id(), Some("w"));
    assert_eq!(opts.get_on_parent_death(), Some(OnParentDeath::EmitOrphan));
    assert_eq!(opts.get_initial_state(), Some(&obj(json!({"a": 1}))));
    assert_eq!(
        (
            opts.get_max_queue_size(),
            opts.get_max_pending_signals(),
            opts.get_max_concurrent_dispatches()
        ),
        (Some(5), Some(6), Some(7))
    );
    assert_eq!(
        (opts.get_debug(), opts.get_allow_untrusted_runtime_signals()),
        (Some(true), Some(false))
    );
    assert!(matches!(
        opts.get_error_policy(),
        Some(ErrorPolicy::MaxErrors(3))
    ));
    assert_eq!(
        ChildOptions::from_json(&obj(json!({"id": null})))
            .unwrap()
            .get_id(),
        None
    );

    for (bad, message, option) in [
        (
            json!({"on_parent_death": "explode"}),
            "invalid server option: on_parent_death",
            "on_parent_death",
        ),
        (
            json!({"max_queue_size": -1}),
            "invalid server option: max_queue_size",
            "max_queue_size",
        ),
        (
            json!({"debug": "yes"}),
            "invalid server option: debug",
            "debug",
        ),
        (json!({"pool": "x"}), "unknown server option: pool", "pool"),
        (
            json!({"error_policy": "explode"}),
            "invalid error policy",
            "error_policy",
        ),
    ] {
        let err = ChildOptions::from_json(&obj(bad.clone())).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Configuration, "{bad}");
        assert_eq!(err.message(), message, "{bad}");
        assert_eq!(err.detail("option"), Some(&json!(option)), "{bad}");
    }
}

#[test]
fn the_option_nouns_keep_their_server_paths() {
    // Moved down into `directive`; `server` re-exports them.
    let p: jido::server::OnParentDeath = OnParentDeath::Continue;
    assert_eq!(p.as_str(), "continue");
    let e: jido::server::ErrorPolicy = ErrorPolicy::StopOnError;
    assert!(matches!(e, jido::directive::ErrorPolicy::StopOnError));
    let _: fn(jido::server::ErrorDecision) -> jido::directive::ErrorDecision = |d| d;
}

#[test]
fn every_directive_has_a_constructor() {
    let sig = |t: &str| Signal::new(t, json!({}));
    let d = Directive::stop_child_with("w", StopReason::Shutdown);
    assert!(matches!(&d, Directive::StopChild { tag, reason: StopReason::Shutdown } if tag == "w"));
    let d = Directive::stop_child_with("w", "quota");
    assert!(
        matches!(&d, Directive::StopChild { reason: StopReason::Custom(r), .. } if r == "quota")
    );
    let d = Directive::adopt_child_with_meta("c-1", "w", obj(json!({"k": 1})));
    assert!(
        matches!(&d, Directive::AdoptChild { child, tag, meta } if child == "c-1" && tag == "w" && meta["k"] == 1)
    );
    let spec = jido::directive::ChildSpec::new("flusher", || async { Ok(()) });
    let d = Directive::spawn_tagged(spec, "metrics");
    assert!(
        matches!(&d, Directive::Spawn { child, tag: Some(t) } if child.name() == "flusher" && t == "metrics")
    );

    let d: Directive = Directive::cron("0 9 * * *", json!({"r": 1}))
        .job_id("daily")
        .timezone("Europe/Paris")
        .into();
    let Directive::Cron {
        cron,
        message,
        job_id,
        timezone,
    } = &d
    else {
        panic!()
    };
    assert_eq!(
        (cron.as_str(), job_id.as_str(), timezone.as_str()),
        ("0 9 * * *", "daily", "Europe/Paris")
    );
    assert_eq!(message, &ScheduledMessage::Json(json!({"r": 1})));

    let d: Directive = Directive::run_instruction(Instruction::new(add()))
        .result_action("added")
        .meta(obj(json!({"step": 2})))
        .into();
    let Directive::RunInstruction {
        instruction,
        result_action,
        meta,
    } = &d
    else {
        panic!()
    };
    assert_eq!(
        (instruction.action.name(), result_action.as_str()),
        ("do", "added")
    );
    assert_eq!(meta, &obj(json!({"step": 2})));

    // Builders are effects as they are (what `Context::push_effect` takes).
    let effects: [Effect; 3] = [
        Directive::spawn_agent(TestAgent::new().build("k"), "t").into(),
        Directive::cron("* * * * *", sig("tick")).into(),
        Directive::run_instruction(Instruction::new(add())).into(),
    ];
    let kinds: Vec<&str> = effects
        .iter()
        .map(|e| match e {
            Effect::Directive(d) => d.kind(),
            _ => "state",
        })
        .collect();
    assert_eq!(kinds, ["spawn_agent", "cron", "run_instruction"]);
    Context::new().push_effect(Directive::spawn_agent(TestAgent::new().build("k"), "t"));
}

async fn until<F, Fut>(mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    within(async {
        while !f().await {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_typed_spawn_reaches_the_child() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let kid = TestAgent::new()
        .route("noop", noop())
        .route("fail", fail())
        .route("jido.agent.orphaned", noop())
        .build("unused");
    let parent = jido
        .start_agent(
            TestAgent::new()
                .route(
                    "spawn",
                    effects(move |_| {
                        vec![
                            Directive::spawn_agent(kid.clone(), "w")
                                .options(
                                    ChildOptions::new().error_policy(ErrorPolicy::max_errors(2)),
                                )
                                .id("typed-kid")
                                .on_parent_death(OnParentDeath::Continue)
                                .initial_state(obj(json!({"x": 1})))
                                .meta(obj(json!({"role": "worker"})))
                                .restart(Restart::Temporary)
                                .into(),
                        ]
                    }),
                )
                .route("jido.agent.child.started", noop())
                .route("jido.agent.child.exit", noop())
                .build("typed-parent"),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    parent.call(sig("spawn", json!({}))).await.unwrap();
    until(|| async { jido.whereis("typed-kid").is_some() }).await;
    let child = jido.whereis("typed-kid").unwrap();
    let st = child.state().await.unwrap();
    assert_eq!(st.state()["x"], 1);
    assert_eq!(
        st.state()["__parent__"],
        json!({"id": "typed-parent", "tag": "w", "meta": {"role": "worker"}})
    );
    until(|| async { parent.status().await.unwrap().children == ["w"] }).await;

    // on_parent_death continue: the child outlives its parent.
    parent.stop("normal").await.unwrap();
    until(|| async {
        child
            .state()
            .await
            .is_ok_and(|s| s.state().contains_key("__orphaned_from__"))
    })
    .await;
    assert_eq!(
        child.state().await.unwrap().state()["__orphaned_from__"],
        json!({"id": "typed-parent", "tag": "w", "meta": {"role": "worker"}})
    );

    // The typed error policy reached the child: max_errors 2 stops it at
    // the second error.
    let err = child.call(sig("fail", json!({}))).await.unwrap_err();
    assert_eq!(err.message(), "boom");
    assert!(jido.whereis("typed-kid").is_some());
    child.cast(sig("fail", json!({}))).unwrap();
    until(|| async { jido.whereis("typed-kid").is_none() }).await;
    jido.shutdown().await;
}

// ---------------------------------------------------------------------------
// Compensation: the options it runs under
// ---------------------------------------------------------------------------

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Charge {
    amount: i64,
}

/// Fails every attempt (retryable) and records what each compensation got.
/// Per compensation: the amount, its options, the time its context had left.
type Compensations = Arc<Mutex<Vec<(i64, CompensationOptions, Option<Duration>)>>>;

struct Charger(Compensations);

impl Action for Charger {
    type Params = Charge;
    type Output = Value;
    const NAME: &'static str = "charger";
    const COMPENSATION: Compensation = Compensation::with_timeout(Duration::from_secs(3));
    async fn run(&self, _: Charge, _: &Context) -> jido::Result<Value> {
        Err(Error::execution("declined"))
    }
    async fn on_error(
        &self,
        p: Charge,
        _: &Error,
        ctx: &Context,
        opts: &CompensationOptions,
    ) -> jido::Result<Value> {
        self.0
            .lock()
            .unwrap()
            .push((p.amount, *opts, ctx.remaining()));
        Ok(json!({"attempt": opts.attempt, "timeout_ms": opts.timeout.as_millis() as u64}))
    }
}

#[tokio::test(start_paused = true)]
async fn on_error_gets_its_timeout_the_callers_options_and_the_attempt() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let exec = Exec::with_defaults(ExecOptions::new().backoff(Duration::from_millis(10)));
    let caller = ExecOptions::new()
        .timeout(Duration::from_secs(9))
        .max_retries(1);
    let err = exec
        .run(
            Charger(seen.clone()),
            json!({"amount": 5}),
            Context::new(),
            caller,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Compensation);
    // The last attempt's compensation result is the one recorded.
    assert_eq!(
        err.detail("compensation_result"),
        Some(&json!({"attempt": 2, "timeout_ms": 3000}))
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    let resolved = caller.or(&ExecOptions::new().backoff(Duration::from_millis(10)));
    for (i, (amount, opts, remaining)) in seen.iter().enumerate() {
        assert_eq!(*amount, 5);
        assert_eq!(opts.attempt, i as u32 + 1);
        // The action's own compensation timeout.
        assert_eq!(opts.timeout, Duration::from_secs(3));
        // The caller's options over the executor's defaults.
        assert_eq!(opts.exec, resolved);
        assert_eq!(opts.exec.get_timeout(), Duration::from_secs(9));
        assert_eq!(opts.exec.get_max_retries(), 1);
        assert_eq!(opts.exec.get_backoff(), Duration::from_millis(10));
        // Its context carries its own deadline (the clock is paused).
        assert_eq!(*remaining, Some(Duration::from_secs(3)));
    }

    // A per-call compensation timeout wins over the action's.
    let seen2 = Arc::new(Mutex::new(Vec::new()));
    let err = exec
        .run(
            Charger(seen2.clone()),
            json!({"amount": 1}),
            Context::new(),
            ExecOptions::new()
                .max_retries(0)
                .compensation_timeout(Duration::from_millis(1500)),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.detail("compensation_result"),
        Some(&json!({"attempt": 1, "timeout_ms": 1500}))
    );
    let (_, opts, _) = seen2.lock().unwrap()[0];
    assert_eq!(opts.timeout, Duration::from_millis(1500));
    assert_eq!(
        opts.exec.get_compensation_timeout(),
        Some(Duration::from_millis(1500))
    );
}

// ---------------------------------------------------------------------------
// Strategy state: FSM, behaviour tree, snapshot
// ---------------------------------------------------------------------------

mod strategy_state {
    use super::*;
    use jido::exec::Exec;
    use jido::strategy::behavior_tree::{
        BehaviorTree, Status, TickStatus, TreeHarness, action, condition, inverter, repeat,
        selector, sequence, set_blackboard, wait,
    };
    use jido::strategy::{Fsm, FsmTransition, run_instruction_directive};

    #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
    struct Item {
        item: String,
        #[serde(default)]
        fail: bool,
    }

    /// Returns `{"last": item}`, or fails with "ITEM failed".
    struct Step;
    impl Action for Step {
        type Params = Item;
        type Output = Value;
        const NAME: &'static str = "step";
        async fn run(&self, p: Item, ctx: &Context) -> jido::Result<Value> {
            if p.fail {
                return Err(Error::execution(format!("{} failed", p.item)).with_retry(false));
            }
            ctx.push_effect(Directive::emit(Signal::new(
                format!("{}.done", p.item),
                Value::Null,
            )));
            Ok(json!({"last": p.item}))
        }
    }

    fn step(item: &str) -> Instruction {
        Instruction::new(Step).with_params(json!({"item": item}))
    }

    struct Machine(Fsm);
    impl Agent for Machine {
        const NAME: &'static str = "typed_machine";
        type Schema = ();
        fn strategy(&self) -> DynStrategy {
            DynStrategy::new(self.0.clone())
        }
    }

    /// Runs the one RunInstruction in `d` and feeds its result back.
    async fn feed(agent: &mut AgentState, d: Vec<Directive>) -> Vec<Directive> {
        assert_eq!(d.len(), 1, "{d:?}");
        let feedback = run_instruction_directive(agent, &d[0], &Exec::new())
            .await
            .expect("a RunInstruction");
        agent.cmd(feedback, ExecOptions::new()).await
    }

    fn t(from: &str, to: &str) -> FsmTransition {
        FsmTransition::new(from, to)
    }

    #[tokio::test]
    async fn fsm_state_of_follows_a_batch() {
        let mut agent = AgentState::new(Machine(Fsm::new()), AgentOptions::new());
        let fsm = Fsm::state_of(&agent).expect("written at new");
        assert_eq!(fsm.current, "idle");
        assert!(fsm.history.is_empty());
        assert_eq!(
            (fsm.processed_count, fsm.pending, fsm.last_result, fsm.error),
            (0, 0, None, None)
        );
        assert_eq!(
            fsm.transitions,
            vec![
                ("idle".to_owned(), vec!["processing".to_owned()]),
                (
                    "processing".to_owned(),
                    vec![
                        "idle".to_owned(),
                        "completed".to_owned(),
                        "failed".to_owned()
                    ]
                ),
                ("completed".to_owned(), vec!["idle".to_owned()]),
                ("failed".to_owned(), vec!["idle".to_owned()]),
            ]
        );

        let failing = Instruction::new(Step).with_params(json!({"item": "b", "fail": true}));
        let d = agent
            .cmd(vec![step("a"), failing, step("c")], ExecOptions::new())
            .await;
        let fsm = Fsm::state_of(&agent).unwrap();
        assert_eq!(fsm.current, "processing");
        assert_eq!(fsm.history, [t("idle", "processing")]);
        assert_eq!((fsm.processed_count, fsm.pending), (0, 2));

        let d = feed(&mut agent, d).await;
        let fsm = Fsm::state_of(&agent).unwrap();
        assert_eq!((fsm.processed_count, fsm.pending), (1, 1));
        assert_eq!(fsm.last_result, Some(json!({"last": "a"})));

        let d = feed(&mut agent, d).await;
        let fsm = Fsm::state_of(&agent).unwrap();
        assert_eq!((fsm.processed_count, fsm.pending), (1, 0));
        let error = fsm.error.expect("the failure is kept");
        assert_eq!(error["message"], "b failed");

        let d = feed(&mut agent, d).await;
        // The batch is over: deferred directives come out, back to idle.
        assert_eq!(
            d.iter().map(Directive::kind).collect::<Vec<_>>(),
            ["emit", "error", "emit"]
        );
        let fsm = Fsm::state_of(&agent).unwrap();
        assert_eq!(fsm.current, "idle");
        assert_eq!(
            fsm.history,
            [t("idle", "processing"), t("processing", "idle")]
        );
        assert_eq!(
            (fsm.processed_count, fsm.pending, fsm.last_result),
            (2, 0, Some(json!({"last": "c"})))
        );
    }

    #[tokio::test]
    async fn fsm_history_keeps_the_latest_transitions() {
        let mut agent = AgentState::new(Machine(Fsm::new().history_limit(3)), AgentOptions::new());
        for item in ["a", "b"] {
            let d = agent.cmd(step(item), ExecOptions::new()).await;
            feed(&mut agent, d).await;
        }
        assert_eq!(
            Fsm::state_of(&agent).unwrap().history,
            [
                t("processing", "idle"),
                t("idle", "processing"),
                t("processing", "idle")
            ]
        );

        let mut none = AgentState::new(Machine(Fsm::new().history_limit(0)), AgentOptions::new());
        let d = none.cmd(step("a"), ExecOptions::new()).await;
        feed(&mut none, d).await;
        let fsm = Fsm::state_of(&none).unwrap();
        assert_eq!((fsm.current.as_str(), fsm.history.len()), ("idle", 0));

        // Not an FSM agent.
        assert!(Fsm::state_of(&AgentState::new(Plain, AgentOptions::new())).is_none());
    }

    struct Plain;
    impl Agent for Plain {
        const NAME: &'static str = "plain";
        type Schema = ();
    }

    struct Robot(BehaviorTree);
    impl Agent for Robot {
        const NAME: &'static str = "typed_robot";
        type Schema = ();
        fn strategy(&self) -> DynStrategy {
            DynStrategy::new(self.0.clone())
        }
    }

    /// Writes `{"charged_to": to}` into the agent state.
    #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
    struct ChargeTo {
        to: i64,
    }
    struct Charge;
    impl Action for Charge {
        type Params = ChargeTo;
        type Output = Value;
        const NAME: &'static str = "charge";
        async fn run(&self, p: ChargeTo, ctx: &Context) -> jido::Result<Value> {
            ctx.push_effect(Directive::emit(Signal::new("charged", json!({"to": p.to}))));
            Ok(json!({"charged_to": p.to}))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn behavior_tree_state_and_node_statuses() {
        let bt = BehaviorTree::new(sequence([
            set_blackboard([("docked", json!(true))]),
            wait(Duration::from_secs(1)).named("dock"),
            action(Charge).param("to", 100),
        ]))
        .unwrap()
        .with_blackboard([("battery", json!(5))]);
        let mut robot = AgentState::new(Robot(bt.clone()), AgentOptions::new());
        let fresh = bt.state_of(&robot).expect("written by init");
        assert_eq!((fresh.status, fresh.tick_count), (SnapshotStatus::Idle, 0));
        assert!(fresh.nodes.iter().all(|n| n.status.is_none()));
        assert_eq!(fresh.blackboard["battery"], json!(5));

        robot.tick(CmdOptions::new()).await;
        let st = bt.state_of(&robot).unwrap();
        assert_eq!((st.status, st.tick_count), (SnapshotStatus::Running, 1));
        let nodes: Vec<_> = st
            .nodes
            .iter()
            .map(|n| (n.id, n.kind, n.name.as_deref(), n.status))
            .collect();
        assert_eq!(
            nodes,
            [
                (0, "Sequence", None, Some(TickStatus::Running)),
                (1, "SetBlackboard", None, Some(TickStatus::Success)),
                (2, "Wait", Some("dock"), Some(TickStatus::Running)),
                (3, "Action", Some("charge"), None),
            ]
        );
        assert_eq!(bt.statuses(&robot), st.nodes);
        assert_eq!(bt.blackboard(&robot)["docked"], json!(true));

        tokio::time::advance(Duration::from_secs(1)).await;
        robot.tick(CmdOptions::new()).await;
        let st = bt.state_of(&robot).unwrap();
        assert_eq!((st.status, st.tick_count), (SnapshotStatus::Success, 2));
        assert_eq!(st.last_result, Some(json!({"charged_to": 100})));
        assert_eq!(st.error, None);
        // The sequence resumed at the wait: the first child was not ticked.
        assert_eq!(
            st.nodes.iter().map(|n| n.status).collect::<Vec<_>>(),
            [
                Some(TickStatus::Success),
                None,
                Some(TickStatus::Success),
                Some(TickStatus::Success)
            ]
        );
        assert_eq!(robot.state()["charged_to"], 100);

        // The snapshot, typed.
        let snap = robot.strategy_snapshot();
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Charged {
            charged_to: i64,
        }
        assert_eq!(
            snap.result_as::<Charged>().unwrap(),
            Some(Charged { charged_to: 100 })
        );
        assert_eq!(snap.detail_as::<u64>("tick_count").unwrap(), Some(2));
        assert_eq!(snap.detail_as::<usize>("tree_depth").unwrap(), Some(2));
        assert_eq!(snap.detail("error"), Some(&Value::Null));
        let err = snap.detail_as::<bool>("tick_count").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation);
        assert_eq!(err.detail("key"), Some(&json!("tick_count")));

        // A halt forgets the statuses.
        robot
            .cmd(Command::strategy("bt_halt", json!({})), CmdOptions::new())
            .await;
        assert!(bt.statuses(&robot).iter().all(|n| n.status.is_none()));
        assert_eq!(bt.state_of(&robot).unwrap().status, SnapshotStatus::Idle);

        // Not a behaviour-tree agent.
        let plain = AgentState::new(Plain, AgentOptions::new());
        assert!(bt.state_of(&plain).is_none());
        assert!(bt.statuses(&plain).iter().all(|n| n.status.is_none()));
    }

    #[tokio::test]
    async fn a_harness_ticks_one_node_against_a_blackboard() {
        let mut h = TreeHarness::new(condition("low", |bb, _| {
            bb.get("battery").and_then(|b| b.as_i64()) < Some(20)
        }))
        .unwrap()
        .with_blackboard([("battery", json!(5))]);
        assert_eq!(h.tick().await, Status::Success);
        h.blackboard_mut().insert("battery", json!(80));
        assert_eq!(h.tick().await, Status::Failure);
        assert_eq!(h.tick_count(), 2);
        assert_eq!(h.statuses()[0].status, Some(TickStatus::Failure));

        // Conditions see the harness's agent state.
        let mut h = TreeHarness::new(condition("armed", |_, state| state["armed"] == true))
            .unwrap()
            .with_agent_state(obj(json!({"armed": true})));
        assert_eq!(h.tick().await, Status::Success);
    }

    #[tokio::test(start_paused = true)]
    async fn a_harness_ticks_a_subtree_and_keeps_node_memory() {
        let mut h = TreeHarness::new(selector([
            condition("never", |_, _| false),
            sequence([
                set_blackboard([("a", json!(1))]),
                repeat(2, inverter(condition("no", |_, _| false))),
            ]),
            wait(Duration::from_millis(300)),
        ]))
        .unwrap();
        // Node 2 is the sequence; ticking it leaves node 0 and 1 alone.
        assert_eq!(h.tick_node(2).await, Status::Running);
        assert_eq!(h.wake(), Some(Duration::ZERO));
        assert_eq!(h.blackboard()["a"], json!(1));
        let statuses: Vec<_> = h.statuses().iter().map(|n| n.status).collect();
        assert_eq!(
            statuses,
            [
                None,
                None,
                Some(TickStatus::Running),
                Some(TickStatus::Success),
                Some(TickStatus::Running),
                Some(TickStatus::Success),
                Some(TickStatus::Failure),
                None
            ]
        );
        // The repeat remembers its count: the second tick finishes it.
        assert_eq!(h.tick_node(2).await, Status::Success);
        assert_eq!(h.wake(), None);

        // A wait node alone, on the paused clock.
        assert_eq!(h.tick_node(7).await, Status::Running);
        assert_eq!(h.wake(), Some(Duration::from_millis(300)));
        tokio::time::advance(Duration::from_millis(300)).await;
        assert_eq!(h.tick_node(7).await, Status::Success);

        // Halting resets the memory: the repeat starts over.
        h.tick_node(2).await;
        h.halt();
        assert!(h.statuses().iter().all(|n| n.status.is_none()));
        assert_eq!(h.tick_node(2).await, Status::Running);

        let err = h.tick_node(8).await;
        let Status::Error(e) = err else {
            panic!("{err:?}")
        };
        assert_eq!(
            (e.kind(), e.message()),
            (ErrorKind::Internal, "no node 8 in the tree")
        );
    }

    #[tokio::test]
    async fn a_harness_runs_action_nodes_through_exec() {
        let mut h = TreeHarness::new(sequence([
            action(Charge).param(
                "to",
                jido::strategy::behavior_tree::Param::from_blackboard("full"),
            ),
            action(Step).param("item", "x").param("fail", true),
        ]))
        .unwrap()
        .with_blackboard([("full", json!(90))])
        .with_agent_state(obj(json!({"battery": 5})));
        let status = h.tick().await;
        let Status::Error(e) = &status else {
            panic!("{status:?}")
        };
        assert_eq!(e.message(), "x failed");
        assert_eq!(h.agent_state()["charged_to"], 90);
        assert_eq!(h.agent_state()["battery"], 5);
        assert_eq!(h.blackboard()["last_result"], json!({"charged_to": 90}));
        assert_eq!(h.blackboard()["error"]["message"], "x failed");
        let directives = h.take_directives();
        assert!(
            matches!(&directives[..], [Directive::Emit { signal, .. }] if signal.ty() == "charged" && signal.data() == Some(&json!({"to": 90})))
        );
        assert!(h.take_directives().is_empty());
        let statuses: Vec<_> = h.statuses().iter().map(|n| n.status).collect();
        assert_eq!(
            statuses,
            [
                Some(TickStatus::Error),
                Some(TickStatus::Success),
                Some(TickStatus::Error)
            ]
        );
    }
}
