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
    child.call(sig("fail", json!({}))).await.unwrap();
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
struct Charger(Arc<Mutex<Vec<(i64, CompensationOptions, Option<Duration>)>>>);

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
