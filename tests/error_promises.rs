//! Errors reach the error policy with their cause, never loop, never
//! panic the runtime; untrusted signals cannot use the runtime's reserved
//! types (issue #11).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use jido::agent::SignalRoute;
use jido::directive::CustomDirective;
use jido::error::SANITIZE_MAX_STRING;
use jido::prelude::*;
use jido::server::{
    AgentServerArgs, AwaitOptions, CompletionStatus, ErrorDecision, ErrorPolicy, Jido, JidoConfig,
    ServerOptions,
};
use jido::signal::Signal;
use jido::signal::dispatch::{ChannelTarget, DispatchConfig};
use jido::strategy::{Direct, Strategy, StrategyContext};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// A custom error policy that reports every event as JSON and continues.
fn recording_policy() -> (ErrorPolicy, mpsc::UnboundedReceiver<Value>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let policy = ErrorPolicy::custom(move |ev| {
        let _ = tx.send(json!({
            "agent_id": ev.agent_id,
            "kind": ev.error.kind().as_str(),
            "message": ev.error.message(),
            "details": Value::Object(ev.error.details().clone()),
            "context": ev.context,
            "count": ev.error_count,
            "signal_id": ev.signal.id(),
            "signal_type": ev.signal.ty(),
        }));
        Ok(ErrorDecision::Continue)
    });
    (policy, rx)
}

fn signal_channel() -> (DispatchConfig, mpsc::UnboundedReceiver<Signal>) {
    let (tx, rx) = mpsc::unbounded_channel::<Signal>();
    (
        DispatchConfig::new(ChannelTarget::unbounded(tx)).unwrap(),
        rx,
    )
}

fn with_id(ty: &str, id: &str, data: Value) -> Signal {
    Signal::builder(ty).id(id).data(data).build().unwrap()
}

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct AddParams {
    #[allow(dead_code)]
    n: i64,
}

/// A typed action: params must be `{n: integer}`.
struct TypedAdd;

impl Action for TypedAdd {
    type Params = AddParams;
    type Output = Value;
    const NAME: &'static str = "typed_add";
    async fn run(&self, _: AddParams, _: &Context) -> jido::Result<Value> {
        Ok(json!({}))
    }
}

/// Lets the paused clock run until every actor and task is idle.
async fn settle() {
    tokio::time::sleep(Duration::from_secs(1)).await;
}

// 1. The error policy sees the cause.

#[tokio::test(start_paused = true)]
async fn custom_policy_sees_the_cause_of_invalid_params_and_the_failed_signal() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (policy, mut rx) = recording_policy();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("calc.add", DynAction::new(TypedAdd))
                .build("cause-1"),
            ServerOptions::new().error_policy(policy),
        )
        .await
        .unwrap();
    // The call answers with the action's validation error; the policy
    // gets it too.
    let err = agent
        .call(with_id("calc.add", "sig-bad-params", json!({"n": "x"})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.details()["path"], "n");
    let seen = recv(&mut rx).await;
    assert_eq!(
        seen,
        json!({
            "agent_id": "cause-1",
            "kind": "execution_error",
            "message": "instruction failed",
            "details": {"reason": {
                "type": "validation_error",
                "message": "invalid parameters for action typed_add: n: invalid type: string \"x\", expected i64",
                "details": {
                    "action": "typed_add",
                    "path": "n",
                    "reason": "invalid type: string \"x\", expected i64"
                },
                "retryable": false
            }},
            "context": "instruction",
            "count": 1,
            "signal_id": "sig-bad-params",
            "signal_type": "calc.add",
        })
    );
    assert_eq!(within(agent.status()).await.unwrap().error_count, 1);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn custom_policy_sees_the_panic_message_of_a_panicking_action() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (policy, mut rx) = recording_policy();
    let boom = act(|_, _| async { panic!("kaboom") });
    let agent = jido
        .start_agent(
            TestAgent::new().route("work.run", boom).build("cause-2"),
            ServerOptions::new().error_policy(policy),
        )
        .await
        .unwrap();
    let err = agent
        .call(with_id("work.run", "sig-panic", json!({})))
        .await
        .unwrap_err();
    assert_eq!(err.message(), "action do panicked: kaboom");
    let seen = recv(&mut rx).await;
    assert_eq!(seen["kind"], "execution_error");
    assert_eq!(seen["message"], "instruction failed");
    assert_eq!(seen["context"], "instruction");
    assert_eq!(
        seen["details"]["reason"]["message"],
        "action do panicked: kaboom"
    );
    assert_eq!(seen["details"]["reason"]["type"], "execution_error");
    assert_eq!(
        (&seen["signal_id"], &seen["signal_type"]),
        (&json!("sig-panic"), &json!("work.run"))
    );
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn emit_signal_policy_emits_the_cause_exactly() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (cfg, mut srx) = signal_channel();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("calc.add", DynAction::new(TypedAdd))
                .build("cause-3"),
            ServerOptions::new().error_policy(ErrorPolicy::emit_signal(cfg)),
        )
        .await
        .unwrap();
    agent
        .call(with_id("calc.add", "sig-emit", json!({"n": [1]})))
        .await
        .unwrap_err();
    let s = within(srx.recv()).await.unwrap();
    assert_eq!(s.ty(), "jido.agent.error");
    assert_eq!(s.source(), "/agent/cause-3");
    assert_eq!(
        s.data(),
        Some(&json!({
            "error": "instruction failed",
            "context": "instruction",
            "agent_id": "cause-3",
            "error_type": "execution_error",
            "details": {"reason": {
                "type": "validation_error",
                "message": "invalid parameters for action typed_add: n: invalid type: sequence, expected i64",
                "details": {
                    "action": "typed_add",
                    "path": "n",
                    "reason": "invalid type: sequence, expected i64"
                },
                "retryable": false
            }},
            // Follows the cause: invalid params never retry.
            "retryable": false,
            "signal_id": "sig-emit",
            "signal_type": "calc.add",
        }))
    );
    jido.shutdown().await;
}

// 2. The error log line is redacted and bounded.

#[tokio::test(start_paused = true)]
async fn the_error_log_line_is_redacted_and_bounded() {
    let (events, _guard) = record_events();
    let long_message = format!("charge failed: {}", "y".repeat(10 * 1024));
    let message = long_message.clone();
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route(
                    "go",
                    effects(move |_| {
                        vec![Directive::error(
                            Error::execution(message.clone())
                                .with_detail("api_key", "sk-secret")
                                .with_detail("blob", "x".repeat(10 * 1024)),
                            "billing",
                        )]
                    }),
                )
                .build("log-1"),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    agent
        .call(with_id("go", "sig-log", json!({})))
        .await
        .unwrap();
    settle().await;
    assert_eq!(within(agent.status()).await.unwrap().error_count, 1);
    jido.shutdown().await;

    let logged = events.named("jido.agent_server.error");
    assert_eq!(logged.len(), 1);
    let line = &logged[0];
    let cut = |s: &str| format!("{}...(truncated)", &s[..SANITIZE_MAX_STRING]);
    assert_eq!(
        line["details"],
        json!({"api_key": "[REDACTED]", "blob": cut(&"x".repeat(10 * 1024))}).to_string()
    );
    assert_eq!(
        line["message"],
        format!("agent log-1 [billing]: {}", cut(&long_message))
    );
    assert_eq!(line["context"], "billing");
    assert_eq!(line["error_type"], "execution_error");
    assert_eq!(line["signal_id"], "sig-log");
    assert_eq!(line["signal_type"], "go");
    // No secret and nothing unbounded anywhere in the log.
    let all = events.0.lock().unwrap().clone();
    for (name, fields) in &all {
        for (key, value) in fields {
            let text = value.to_string();
            assert!(!text.contains("sk-secret"), "{name}.{key} leaks the secret");
            assert!(
                text.len() < 2 * 1024,
                "{name}.{key} is {} bytes",
                text.len()
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_stop_on_error_reason_is_bounded() {
    let long_message = format!("charge failed: {}", "y".repeat(10 * 1024));
    let message = long_message.clone();
    let args = AgentServerArgs::new(
        TestAgent::new()
            .route(
                "go",
                effects(move |_| {
                    vec![Directive::error(
                        Error::execution(message.clone()),
                        "billing",
                    )]
                }),
            )
            .build("stop-bounded"),
        ServerOptions::new().error_policy(ErrorPolicy::StopOnError),
    );
    let (agent, _probe, mut rx) = under_probe(args).await;
    agent.cast(sig("go", json!({}))).unwrap();
    let cut = format!("{}...(truncated)", &long_message[..SANITIZE_MAX_STRING]);
    assert_eq!(
        exit_of(&mut rx, agent.actor_ref().get_id()).await,
        Seen::Terminated(
            agent.actor_ref().get_id(),
            Some(format!("agent_error: {cut}"))
        )
    );
}

// 3. emit_signal back to a catch-all route cannot loop.

#[tokio::test(start_paused = true)]
async fn one_failure_yields_exactly_one_error_signal_even_with_a_catch_all_route() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let runs = Arc::new(AtomicUsize::new(0));
    let catch_all = {
        let runs = Arc::clone(&runs);
        act(move |_, ctx| {
            let tx = tx.clone();
            let runs = Arc::clone(&runs);
            async move {
                let ty = ctx.signal().map(|s| s.ty().to_owned()).unwrap_or_default();
                let _ = tx.send(ty);
                // Fails the first times only, so that a loop (the bug) ends.
                if runs.fetch_add(1, Ordering::SeqCst) < 6 {
                    Err(Error::execution("handler failed").with_retry(false))
                } else {
                    Ok(json!({}))
                }
            }
        })
    };
    let agent = jido
        .start_agent(
            TestAgent::new().route("**", catch_all).build("loop-1"),
            ServerOptions::new().error_policy(ErrorPolicy::EmitSignal(None)),
        )
        .await
        .unwrap();
    agent.cast(sig("work.x", json!({}))).unwrap();
    settle().await;
    let mut seen = Vec::new();
    while let Ok(ty) = rx.try_recv() {
        seen.push(ty);
    }
    assert_eq!(seen, ["work.x", "jido.agent.error"]);
    let status = within(agent.status()).await.unwrap();
    // The failure of work.x, then the failure while handling its error
    // signal (counted, not emitted).
    assert_eq!(status.error_count, 2);
    assert_eq!(status.queue_length, 0);
    assert_eq!(status.pending_signals, 0);
    jido.shutdown().await;
}

// 4. await_completion with any timeout.

fn finishing_agent(id: &str) -> AgentState {
    TestAgent::new()
        .route(
            "finish",
            act(|_, _| async { Ok(json!({"status": "completed", "last_answer": 42})) }),
        )
        .build(id)
}

async fn await_with_timeout(id: &str, timeout: Duration) {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(finishing_agent(id), ServerOptions::new())
        .await
        .unwrap();
    let waiter = {
        let agent = agent.clone();
        tokio::spawn(async move {
            agent
                .await_completion(AwaitOptions::new().timeout(timeout))
                .await
        })
    };
    // A century of idle time: no timer may fire for such a timeout.
    tokio::time::sleep(Duration::from_secs(100 * 365 * 24 * 3600)).await;
    assert_eq!(within(agent.status()).await.unwrap().completion_waiters, 1);
    agent.cast(sig("finish", json!({}))).unwrap();
    let done = within(waiter).await.unwrap().unwrap();
    assert_eq!(
        (done.status, done.result),
        (CompletionStatus::Completed, json!(42))
    );
    assert_eq!(within(agent.status()).await.unwrap().completion_waiters, 0);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn await_completion_with_duration_max_waits_and_completes() {
    await_with_timeout("await-max", Duration::MAX).await;
}

#[tokio::test(start_paused = true)]
async fn await_completion_with_an_unrepresentable_timeout_waits_and_completes() {
    await_with_timeout("await-half", Duration::from_secs(u64::MAX / 2)).await;
}

#[tokio::test(start_paused = true)]
async fn await_completion_with_a_representable_timeout_still_times_out() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(finishing_agent("await-short"), ServerOptions::new())
        .await
        .unwrap();
    let err = agent
        .await_completion(AwaitOptions::new().timeout(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(err.message(), "await completion timed out after 300ms");
    jido.shutdown().await;
}

// 5. A panicking Strategy::snapshot does not crash the agent.

struct BadSnapshot;

impl Strategy for BadSnapshot {
    fn name(&self) -> &'static str {
        "bad_snapshot"
    }
    async fn cmd(
        &self,
        agent: &mut AgentData,
        commands: Vec<Command>,
        ctx: &StrategyContext,
    ) -> Vec<Directive> {
        Strategy::cmd(&Direct, agent, commands, ctx).await
    }
    fn snapshot(&self, _: &AgentData, _: &StrategyContext) -> Snapshot {
        panic!("snapshot bug")
    }
}

#[derive(Clone)]
struct BadSnapshotAgent;

impl Agent for BadSnapshotAgent {
    const NAME: &'static str = "bad_snapshot_agent";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(BadSnapshot)
    }
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![SignalRoute::action("counter.add", add())]
    }
}

#[tokio::test(start_paused = true)]
async fn a_panicking_snapshot_is_reported_and_the_agent_keeps_serving() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(
            AgentState::new(BadSnapshotAgent, AgentOptions::new().id("snap-1")),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    let status = within(agent.status()).await.unwrap();
    assert_eq!(status.snapshot.status, SnapshotStatus::Error);
    assert!(!status.snapshot.done);
    assert_eq!(status.snapshot.result, None);
    assert_eq!(
        Value::Object(status.snapshot.details.clone()),
        json!({"error": "strategy snapshot panicked: snapshot bug"})
    );
    assert!(agent.is_alive());
    let after = within(agent.call(sig("counter.add", json!({"n": 2}))))
        .await
        .unwrap();
    assert_eq!(after.state()["total"], 2);
    let status = within(agent.status()).await.unwrap();
    assert_eq!(status.snapshot.status, SnapshotStatus::Error);
    assert_eq!(status.agent.state()["total"], 2);
    assert_eq!(jido.agents().len(), 1);
    jido.shutdown().await;
}

// 6. A custom directive without an executor is an error.

#[derive(Debug)]
struct Ghost;
impl CustomDirective for Ghost {}

#[tokio::test(start_paused = true)]
async fn a_custom_directive_without_an_executor_reaches_the_error_policy() {
    let (events, _guard) = record_events();
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (policy, mut rx) = recording_policy();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("go", effects(|_| vec![Directive::custom(Ghost)]))
                .build("ghost-1"),
            ServerOptions::new().error_policy(policy),
        )
        .await
        .unwrap();
    agent
        .call(with_id("go", "sig-ghost", json!({})))
        .await
        .unwrap();
    let seen = recv(&mut rx).await;
    assert_eq!(
        seen,
        json!({
            "agent_id": "ghost-1",
            "kind": "configuration_error",
            "message": "no executor for directive error_promises::Ghost",
            "details": {"directive_type": "error_promises::Ghost", "agent_id": "ghost-1"},
            "context": "directive",
            "count": 1,
            "signal_id": "sig-ghost",
            "signal_type": "go",
        })
    );
    let status = within(agent.status()).await.unwrap();
    assert_eq!(status.error_count, 1);
    assert!(agent.is_alive());
    let warned = events.named("jido.agent_server.directive.unhandled");
    assert_eq!(warned.len(), 1);
    assert_eq!(
        warned[0]["message"],
        "no executor for directive error_promises::Ghost"
    );
    assert_eq!(warned[0]["directive_type"], "error_promises::Ghost");
    jido.shutdown().await;
}

// 7. Untrusted ingress.

fn refused(agent_id: &str, ty: &str) -> Error {
    Error::validation(format!("untrusted signal may not use reserved type {ty}"))
        .with_detail("signal_type", ty)
        .with_detail("agent_id", agent_id)
}

#[test]
fn the_trust_mark_is_runtime_only() {
    let s = sig("jido.agent.stop", json!({"reason": "x"}));
    assert!(s.is_trusted());
    let u = s.clone().untrusted();
    assert!(!u.is_trusted());
    assert!(!u.clone().is_trusted());
    // Kept through a rebuild, so middleware cannot launder it by accident.
    assert!(!u.to_builder().subject("s").build().unwrap().is_trusted());
    let mut m = s.clone();
    m.mark_untrusted();
    assert!(!m.is_trusted());
    // Not on the wire, not compared, not read back from JSON.
    assert_eq!(u.to_json_string(), s.to_json_string());
    assert_eq!(u, s);
    assert!(
        Signal::from_json_str(&u.to_json_string())
            .unwrap()
            .is_trusted()
    );
    let spoof = r#"{"specversion":"1.0.2","id":"1","source":"/x","type":"jido.agent.stop","trusted":false,"untrusted":true}"#;
    assert!(Signal::from_json_str(spoof).unwrap().is_trusted());
}

#[tokio::test(start_paused = true)]
async fn a_trusted_cast_of_jido_agent_stop_stops_an_agent_without_routes() {
    let args = AgentServerArgs::new(TestAgent::new().build("trust-stop"), ServerOptions::new());
    let (agent, _probe, mut rx) = under_probe(args).await;
    agent
        .cast(sig("jido.agent.stop", json!({"reason": "bye"})))
        .unwrap();
    assert_eq!(
        exit_of(&mut rx, agent.actor_ref().get_id()).await,
        Seen::Terminated(agent.actor_ref().get_id(), Some("bye".into()))
    );
}

#[tokio::test(start_paused = true)]
async fn an_untrusted_jido_agent_stop_is_refused() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (policy, mut prx) = recording_policy();
    let agent = jido
        .start_agent(
            TestAgent::new().build("untrusted-stop"),
            ServerOptions::new().error_policy(policy),
        )
        .await
        .unwrap();
    let stop = with_id("jido.agent.stop", "sig-stop", json!({"reason": "bye"})).untrusted();
    let err = within(agent.call(stop)).await.unwrap_err();
    assert_eq!(err, refused("untrusted-stop", "jido.agent.stop"));
    assert_eq!(err.kind(), ErrorKind::Validation);
    let seen = recv(&mut prx).await;
    assert_eq!(
        seen,
        json!({
            "agent_id": "untrusted-stop",
            "kind": "validation_error",
            "message": "untrusted signal may not use reserved type jido.agent.stop",
            "details": {"signal_type": "jido.agent.stop", "agent_id": "untrusted-stop"},
            "context": "routing",
            "count": 1,
            "signal_id": "sig-stop",
            "signal_type": "jido.agent.stop",
        })
    );
    settle().await;
    assert!(agent.is_alive());
    let status = within(agent.status()).await.unwrap();
    assert_eq!(status.error_count, 1);
    assert_eq!(status.queue_length, 0);
    // A cast is refused the same way.
    agent
        .cast(sig("jido.agent.stop", json!({})).untrusted())
        .unwrap();
    settle().await;
    assert!(agent.is_alive());
    assert_eq!(within(agent.status()).await.unwrap().error_count, 2);
    assert_eq!(jido.agents().len(), 1);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_untrusted_fake_child_exit_does_not_reach_the_route() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (tx, mut rx) = channel();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("jido.agent.child.exit", forward(tx.clone()))
                .route("jido.agent.orphaned", forward(tx.clone()))
                .route("jido.agent.error", forward(tx))
                .route("work.x", noop())
                .build("fake-exit"),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    for ty in [
        "jido.agent.child.exit",
        "jido.agent.orphaned",
        "jido.agent.error",
    ] {
        let err = within(agent.call(sig(ty, json!({"fake": true})).untrusted()))
            .await
            .unwrap_err();
        assert_eq!(err, refused("fake-exit", ty));
    }
    // Untrusted signals of other types are served as usual.
    within(agent.call(sig("work.x", json!({})).untrusted()))
        .await
        .unwrap();
    // A trusted one reaches the route.
    within(agent.call(sig("jido.agent.child.exit", json!({"real": true}))))
        .await
        .unwrap();
    assert_eq!(recv(&mut rx).await, json!({"real": true}));
    settle().await;
    assert!(rx.try_recv().is_err());
    assert_eq!(within(agent.status()).await.unwrap().error_count, 3);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn with_the_opt_in_untrusted_runtime_signals_are_served() {
    let (tx, mut rx) = channel();
    let args = AgentServerArgs::new(
        TestAgent::new()
            .route("jido.agent.child.exit", forward(tx))
            .build("opt-in"),
        ServerOptions::new().allow_untrusted_runtime_signals(true),
    );
    let (agent, _probe, mut seen) = under_probe(args).await;
    within(agent.call(sig("jido.agent.child.exit", json!({"fake": true})).untrusted()))
        .await
        .unwrap();
    assert_eq!(recv(&mut rx).await, json!({"fake": true}));
    assert_eq!(within(agent.status()).await.unwrap().error_count, 0);
    agent
        .cast(sig("jido.agent.stop", json!({"reason": "remote"})).untrusted())
        .unwrap();
    assert_eq!(
        exit_of(&mut seen, agent.actor_ref().get_id()).await,
        Seen::Terminated(agent.actor_ref().get_id(), Some("remote".into()))
    );
}

#[test]
fn the_opt_in_is_a_json_server_option_too() {
    let opts = ServerOptions::from_json(
        json!({"allow_untrusted_runtime_signals": true})
            .as_object()
            .unwrap(),
    )
    .unwrap();
    assert!(format!("{opts:?}").contains("allow_untrusted_runtime_signals: Some(true)"));
    let err = ServerOptions::from_json(
        json!({"allow_untrusted_runtime_signals": "yes"})
            .as_object()
            .unwrap(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        Error::configuration("invalid server option: allow_untrusted_runtime_signals")
            .with_detail("option", "allow_untrusted_runtime_signals")
            .with_detail("value", "yes")
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_untrusted_error_signal_emits_no_error_signal() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (cfg, mut srx) = signal_channel();
    let agent = jido
        .start_agent(
            TestAgent::new().build("refused-error"),
            ServerOptions::new().error_policy(ErrorPolicy::emit_signal(cfg.clone())),
        )
        .await
        .unwrap();
    agent
        .cast(sig("jido.agent.error", json!({"error": "fake"})).untrusted())
        .unwrap();
    agent
        .cast(with_id("jido.agent.stop", "sig-s", json!({})).untrusted())
        .unwrap();
    settle().await;
    // The refused stop is reported; the refused error signal is not (no
    // error signal for an error about an error signal).
    let s = within(srx.recv()).await.unwrap();
    assert_eq!(s.data().unwrap()["signal_id"], "sig-s");
    assert_eq!(
        s.data().unwrap()["error"],
        "untrusted signal may not use reserved type jido.agent.stop"
    );
    assert!(srx.try_recv().is_err());
    assert_eq!(within(agent.status()).await.unwrap().error_count, 2);
    assert!(agent.is_alive());
    jido.shutdown().await;
}
