//! Exec: the pipeline, defaults, deadlines, panics, compensation, async
//! handles, chains, task supervision and telemetry.
//!
//! Every time-dependent test runs on a paused clock: durations are exact.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jido::action::Compensation;
use jido::effect::{Effect, StateOp};
use jido::exec::{
    AsyncHandle, Chain, ChainOutcome, DEFAULT_AWAIT_TIMEOUT, DEFAULT_BACKOFF, DEFAULT_MAX_BACKOFF,
    DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, ExecOutput, Outcome, TaskSupervisor, Telemetry,
};
use jido::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

// ====================================================================
// Test actions
// ====================================================================

/// Shared record of what an action saw.
#[derive(Default)]
struct Probe {
    /// `Instant::now()` at the start of every attempt.
    starts: Mutex<Vec<Instant>>,
    /// Futures dropped before they finished (cancelled, timed out).
    dropped: AtomicUsize,
    /// Futures that ran to the end.
    finished: AtomicUsize,
    /// Compensations: (when, message of the error given to on_error).
    compensations: Mutex<Vec<(Instant, String)>>,
    /// The task id each attempt ran on.
    task_ids: Mutex<Vec<Option<tokio::task::Id>>>,
    /// Deadlines seen by each attempt.
    deadlines: Mutex<Vec<Option<Instant>>>,
}

impl Probe {
    fn new() -> Arc<Self> {
        Arc::default()
    }
    fn runs(&self) -> usize {
        self.starts.lock().unwrap().len()
    }
    fn starts(&self) -> Vec<Instant> {
        self.starts.lock().unwrap().clone()
    }
    fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }
    fn finished(&self) -> usize {
        self.finished.load(Ordering::SeqCst)
    }
    fn compensations(&self) -> Vec<(Instant, String)> {
        self.compensations.lock().unwrap().clone()
    }
    fn enter(self: &Arc<Self>, ctx: &Context) -> DropProbe {
        self.starts.lock().unwrap().push(Instant::now());
        self.task_ids.lock().unwrap().push(tokio::task::try_id());
        self.deadlines.lock().unwrap().push(ctx.deadline());
        DropProbe {
            probe: self.clone(),
            armed: true,
        }
    }
}

/// Counts a future that is dropped before it finished.
struct DropProbe {
    probe: Arc<Probe>,
    armed: bool,
}

impl DropProbe {
    fn done(mut self) {
        self.armed = false;
        self.probe.finished.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for DropProbe {
    fn drop(&mut self) {
        if self.armed {
            self.probe.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// What [`Scripted`] does on one attempt.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
struct Script {
    /// Sleep this long first.
    #[serde(default)]
    sleep_ms: u64,
    /// Fail this many attempts (then succeed).
    #[serde(default)]
    fail: usize,
    /// Fail with `retry: false`.
    #[serde(default)]
    no_retry: bool,
    /// Panic instead of failing.
    #[serde(default)]
    panic: Option<String>,
    /// Echoed back.
    #[serde(default)]
    n: i64,
}

/// A scriptable action. `COMP` selects the compensation behaviour:
/// 0 none, 1 ok, 2 error, 3 panic, 4 hang.
struct Scripted<const COMP: u8 = 0, const COMP_MS: u64 = 5000> {
    probe: Arc<Probe>,
}

fn scripted(probe: &Arc<Probe>) -> Scripted {
    Scripted {
        probe: probe.clone(),
    }
}

impl<const COMP: u8, const COMP_MS: u64> Action for Scripted<COMP, COMP_MS> {
    type Params = Script;
    type Output = Value;
    const NAME: &'static str = "scripted";
    const COMPENSATION: Compensation = if COMP == 0 {
        Compensation::DISABLED
    } else {
        Compensation::with_timeout(Duration::from_millis(COMP_MS))
    };

    async fn run(&self, s: Script, ctx: &Context) -> jido::Result<Value> {
        let guard = self.probe.enter(ctx);
        let attempt = self.probe.runs();
        if s.sleep_ms > 0 {
            tokio::time::sleep(Duration::from_millis(s.sleep_ms)).await;
        }
        if let Some(msg) = &s.panic {
            panic!("{msg}");
        }
        guard.done();
        if attempt <= s.fail {
            let err = Error::execution("card declined").with_detail("attempt", attempt);
            return Err(if s.no_retry {
                err.with_retry(false)
            } else {
                err
            });
        }
        Ok(json!({"n": s.n, "attempt": attempt}))
    }

    async fn on_error(
        &self,
        _s: Script,
        error: &Error,
        ctx: &Context,
        _opts: &jido::action::CompensationOptions,
    ) -> jido::Result<Value> {
        self.probe
            .compensations
            .lock()
            .unwrap()
            .push((Instant::now(), error.message().to_owned()));
        match COMP {
            1 => Ok(
                json!({"voided": true, "remaining_ms": ctx.remaining().map(|d| d.as_millis() as u64)}),
            ),
            2 => Err(Error::execution("void failed").with_detail("gateway", "down")),
            3 => panic!("void exploded"),
            _ => {
                std::future::pending::<()>().await;
                Ok(Value::Null)
            }
        }
    }
}

fn once() -> ExecOptions {
    ExecOptions::new().max_retries(0)
}

fn ins(action: impl Into<DynAction>, params: Value) -> Instruction {
    Instruction::new(action).with_params(params)
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

/// Lets aborted tasks be dropped: a few scheduler turns.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

fn gaps(starts: &[Instant]) -> Vec<u64> {
    starts.windows(2).map(|w| ms(w[1] - w[0])).collect()
}

// ====================================================================
// Pipeline
// ====================================================================

#[derive(Clone, Deserialize, JsonSchema)]
struct Who {
    name: String,
}

struct Greet;

impl Action for Greet {
    type Params = Who;
    type Output = Value;
    const NAME: &'static str = "greet";
    const DESCRIPTION: &'static str = "Says hello.";

    async fn run(&self, p: Who, ctx: &Context) -> jido::Result<Value> {
        ctx.push_effect(StateOp::SetPath {
            path: vec!["last".into()],
            value: json!(p.name).into(),
        });
        ctx.push_effect(StateOp::DeleteKeys(vec!["tmp".into()]));
        Ok(json!({
            "greeting": format!("hello, {}", p.name),
            "action": ctx.action().map(|m| m.name),
            "description": ctx.action().map(|m| m.description),
            "tenant": ctx.get("tenant"),
            "request": ctx.get("request"),
        }))
    }
}

#[tokio::test]
async fn run_goes_through_every_stage() {
    let exec = Exec::new();
    let ctx = Context::new().with("tenant", "acme");
    let out: ExecOutput = exec
        .run(Greet, json!({"name": "ann"}), ctx, ExecOptions::new())
        .await
        .unwrap();
    assert_eq!(
        Value::Object(out.output),
        json!({
            "greeting": "hello, ann",
            "action": "greet",
            "description": "Says hello.",
            "tenant": "acme",
            "request": null
        })
    );
    let ops: Vec<StateOp> = out
        .effects
        .into_iter()
        .map(|e| match e {
            Effect::State(op) => op,
            other => panic!("unexpected effect {other:?}"),
        })
        .collect();
    assert_eq!(
        ops,
        [
            StateOp::SetPath {
                path: vec!["last".into()],
                value: json!("ann").into()
            },
            StateOp::DeleteKeys(vec!["tmp".into()])
        ]
    );
    assert_eq!(exec.supervisor().active(), 0);
}

#[tokio::test]
async fn run_instruction_uses_the_instructions_context_and_opts() {
    let exec = Exec::new();
    let instruction = ins(Greet, json!({"name": "bo"}))
        .with_context(obj(json!({"tenant": "ins", "request": "r1"})))
        .with_opts(once());
    let out = exec.run_instruction(instruction).await.unwrap();
    assert_eq!(out.output["tenant"], "ins");
    assert_eq!(out.output["request"], "r1");

    // With a base context (as agents run them) the base values win.
    let instruction = ins(Greet, json!({"name": "bo"}))
        .with_context(obj(json!({"tenant": "ins", "request": "r1"})));
    let outcome: Outcome = exec
        .execute(instruction, Context::new().with("tenant", "base"))
        .await;
    assert_eq!(outcome.attempts, 1);
    let output = outcome.result.unwrap();
    assert_eq!(output["tenant"], "base");
    assert_eq!(output["request"], "r1");
    assert_eq!(outcome.effects.len(), 2);

    // The global executor serves the free functions.
    let out = jido::exec::run_instruction(ins(Greet, json!({"name": "cy"})))
        .await
        .unwrap();
    assert_eq!(out.output["greeting"], "hello, cy");
}

#[tokio::test]
async fn stages_run_in_order() {
    struct BadName;
    impl Action for BadName {
        type Params = Who;
        type Output = ();
        const NAME: &'static str = "bad-name";
        async fn run(&self, _: Who, _: &Context) -> jido::Result<()> {
            Ok(())
        }
    }
    let exec = Exec::new();
    // 1 before 2: params are normalised before the action is checked.
    let err = exec
        .run(BadName, json!("x"), Context::new(), once())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(
        err.message(),
        "invalid params type: expected a JSON object, got a string"
    );
    // 2 before 3: the action is checked before params are decoded.
    let err = exec
        .run(BadName, json!({"wrong": 1}), Context::new(), once())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    // 3: decoded params.
    let err = exec
        .run(Greet, json!({"name": 1}), Context::new(), once())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.detail("path"), Some(&json!("name")));
}

#[tokio::test]
async fn failures_before_the_first_attempt_keep_no_effects() {
    let outcome = Exec::new()
        .execute(ins(Greet, json!([1])), Context::new())
        .await;
    assert_eq!(outcome.attempts, 0);
    assert!(outcome.effects.is_empty());
    assert_eq!(
        outcome.result.unwrap_err().message(),
        "invalid params type: expected a JSON object, got an array"
    );
}

#[tokio::test]
async fn effects_of_a_failed_run_are_kept_in_the_outcome() {
    struct Half;
    impl Action for Half {
        type Params = Script;
        type Output = ();
        const NAME: &'static str = "half";
        async fn run(&self, _: Script, ctx: &Context) -> jido::Result<()> {
            ctx.push_effect(StateOp::DeleteKeys(vec!["a".into()]));
            Err(Error::execution("half done").with_retry(false))
        }
    }
    let outcome = Exec::new()
        .execute(Instruction::new(Half), Context::new())
        .await;
    assert_eq!(outcome.attempts, 1);
    assert_eq!(outcome.effects.len(), 1);
    assert_eq!(outcome.clone().result.unwrap_err().message(), "half done");
    assert_eq!(outcome.into_result().unwrap_err().message(), "half done");
}

#[tokio::test]
async fn effects_pushed_outside_a_run_are_discarded() {
    let ctx = Context::new();
    ctx.push_effect(StateOp::DeleteKeys(vec!["x".into()]));
    // The caller's context does not leak into the run's effects.
    let out = Exec::new()
        .run(Greet, json!({"name": "a"}), ctx, once())
        .await
        .unwrap();
    assert_eq!(out.effects.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn effects_are_those_of_the_last_attempt() {
    struct Twice(Arc<AtomicUsize>);
    impl Action for Twice {
        type Params = Script;
        type Output = ();
        const NAME: &'static str = "twice";
        async fn run(&self, _: Script, ctx: &Context) -> jido::Result<()> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            ctx.push_effect(StateOp::DeleteKeys(vec![format!("attempt{n}")]));
            if n == 0 {
                Err(Error::execution("first fails"))
            } else {
                Ok(())
            }
        }
    }
    let out = Exec::new()
        .run(
            Twice(Arc::default()),
            json!({}),
            Context::new(),
            ExecOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.effects.len(), 1);
    assert!(matches!(
        &out.effects[0],
        Effect::State(StateOp::DeleteKeys(keys)) if keys == &["attempt1".to_owned()]
    ));
}

// ====================================================================
// Defaults and options
// ====================================================================

#[test]
fn default_numbers_are_jidos() {
    assert_eq!(DEFAULT_TIMEOUT, Duration::from_secs(30));
    assert_eq!(DEFAULT_MAX_RETRIES, 1);
    assert_eq!(DEFAULT_BACKOFF, Duration::from_millis(250));
    assert_eq!(DEFAULT_MAX_BACKOFF, Duration::from_secs(30));
    assert_eq!(DEFAULT_AWAIT_TIMEOUT, Duration::from_secs(5));
    assert_eq!(
        jido::action::DEFAULT_COMPENSATION_TIMEOUT,
        Duration::from_secs(5)
    );
    let o = ExecOptions::new();
    assert_eq!(o, ExecOptions::default());
    assert_eq!(o.get_timeout(), Duration::from_secs(30));
    assert_eq!(o.get_max_retries(), 1);
    assert_eq!(o.get_backoff(), Duration::from_millis(250));
    assert_eq!(o.get_max_backoff(), Duration::from_secs(30));
    assert_eq!(o.get_compensation_timeout(), None);
    assert_eq!(o.get_telemetry(), Telemetry::Full);
}

#[test]
fn options_fall_back_field_by_field() {
    let call = ExecOptions::new().timeout(Duration::from_secs(1));
    let exec = ExecOptions::new()
        .timeout(Duration::from_secs(2))
        .max_retries(5)
        .telemetry(Telemetry::Silent);
    let r = call.or(&exec);
    assert_eq!(r.get_timeout(), Duration::from_secs(1));
    assert_eq!(r.get_max_retries(), 5);
    assert_eq!(r.get_telemetry(), Telemetry::Silent);
    assert_eq!(r.get_backoff(), Duration::from_millis(250));
}

#[tokio::test(start_paused = true)]
async fn default_timeout_is_thirty_seconds() {
    let probe = Probe::new();
    let exec = Exec::new();
    let t0 = Instant::now();
    let out = exec
        .run(
            scripted(&probe),
            json!({"sleep_ms": 29_000, "n": 1}),
            Context::new(),
            ExecOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.output["n"], 1);
    assert_eq!(t0.elapsed(), Duration::from_secs(29));
    assert_eq!(
        probe.deadlines.lock().unwrap()[0],
        Some(t0 + Duration::from_secs(30))
    );

    let probe = Probe::new();
    let t0 = Instant::now();
    let outcome = exec
        .execute(
            ins(scripted(&probe), json!({"sleep_ms": 31_000})),
            Context::new(),
        )
        .await;
    let err = outcome.result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(err.message(), "action scripted timed out after 30000ms");
    assert_eq!(
        Value::Object(err.details().clone()),
        json!({"action": "scripted", "timeout_ms": 30000})
    );
    assert!(err.retryable());
    // Timeouts are retried: 2 attempts of 30 s with 250 ms between.
    assert_eq!(outcome.attempts, 2);
    assert_eq!(probe.runs(), 2);
    assert_eq!(gaps(&probe.starts()), [30_250]);
    assert_eq!(t0.elapsed(), Duration::from_millis(60_250));
    settle().await;
    assert_eq!(probe.dropped(), 2, "timed-out futures are dropped");
    assert_eq!(probe.finished(), 0);
    assert_eq!(exec.supervisor().active(), 0);
}

#[tokio::test(start_paused = true)]
async fn per_call_and_per_executor_timeouts() {
    let probe = Probe::new();
    let exec = Exec::with_defaults(
        ExecOptions::new()
            .timeout(Duration::from_secs(2))
            .max_retries(0),
    );
    assert_eq!(exec.defaults().get_timeout(), Duration::from_secs(2));
    let err = exec
        .run(
            scripted(&probe),
            json!({"sleep_ms": 3000}),
            Context::new(),
            ExecOptions::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.message(), "action scripted timed out after 2000ms");
    // The call wins over the executor.
    let err = exec
        .run(
            scripted(&probe),
            json!({"sleep_ms": 3000}),
            Context::new(),
            ExecOptions::new().timeout(Duration::from_millis(1500)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.message(), "action scripted timed out after 1500ms");
    exec.run(
        scripted(&probe),
        json!({"sleep_ms": 3000}),
        Context::new(),
        ExecOptions::new().timeout(Duration::from_secs(4)),
    )
    .await
    .unwrap();
    assert_eq!(probe.runs(), 3);
}

#[tokio::test(start_paused = true)]
async fn huge_timeouts_do_not_overflow() {
    let probe = Probe::new();
    let out = Exec::new()
        .run(
            scripted(&probe),
            json!({"n": 3}),
            Context::new(),
            ExecOptions::new()
                .timeout(Duration::MAX)
                .compensation_timeout(Duration::MAX)
                .backoff(Duration::MAX)
                .max_backoff(Duration::MAX),
        )
        .await
        .unwrap();
    assert_eq!(out.output["n"], 3);
}

#[tokio::test(start_paused = true)]
async fn zero_timeout_runs_inline_in_the_callers_task() {
    let exec = Exec::new();
    let probe = Probe::new();
    let handle = tokio::spawn({
        let exec = exec.clone();
        let probe = probe.clone();
        async move {
            let me = tokio::task::try_id();
            let t0 = Instant::now();
            struct Inline(Arc<Probe>);
            impl Action for Inline {
                type Params = Script;
                type Output = Value;
                const NAME: &'static str = "inline";
                async fn run(&self, s: Script, ctx: &Context) -> jido::Result<Value> {
                    let g = self.0.enter(ctx);
                    let active = ctx.exec().unwrap().supervisor().active();
                    tokio::time::sleep(Duration::from_millis(s.sleep_ms)).await;
                    g.done();
                    Ok(json!({"active": active}))
                }
            }
            // An hour: far beyond the 30 s default, yet not limited.
            let out = exec
                .run(
                    Inline(probe.clone()),
                    json!({"sleep_ms": 3_600_000}),
                    Context::new(),
                    ExecOptions::new().timeout(Duration::ZERO),
                )
                .await
                .unwrap();
            (me, t0.elapsed(), out)
        }
    });
    let (me, elapsed, out) = handle.await.unwrap();
    assert!(me.is_some());
    assert_eq!(elapsed, Duration::from_secs(3600));
    assert_eq!(out.output["active"], 0, "no supervised task was spawned");
    assert_eq!(probe.task_ids.lock().unwrap().clone(), [me]);
    assert_eq!(probe.deadlines.lock().unwrap().clone(), [None]);

    // Contrast: with a timeout the action runs in another task.
    let spawned = tokio::spawn({
        let exec = exec.clone();
        let probe = probe.clone();
        async move {
            let me = tokio::task::try_id();
            exec.run(scripted(&probe), json!({}), Context::new(), once())
                .await
                .unwrap();
            me
        }
    })
    .await
    .unwrap();
    let ids = probe.task_ids.lock().unwrap().clone();
    assert_eq!(ids.len(), 2);
    assert!(ids[1].is_some());
    assert_ne!(ids[1], spawned);
}

#[tokio::test(start_paused = true)]
async fn default_is_one_retry_after_250ms() {
    let probe = Probe::new();
    let outcome = Exec::new()
        .execute(ins(scripted(&probe), json!({"fail": 5})), Context::new())
        .await;
    assert_eq!(outcome.attempts, 2);
    assert_eq!(probe.runs(), 2);
    assert_eq!(gaps(&probe.starts()), [250]);
    let err = outcome.result.unwrap_err();
    assert_eq!(err.message(), "card declined");
    assert_eq!(err.detail("attempt"), Some(&json!(2)));

    // A retry that succeeds.
    let probe = Probe::new();
    let out = Exec::new()
        .run(
            scripted(&probe),
            json!({"fail": 1, "n": 7}),
            Context::new(),
            ExecOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(Value::Object(out.output), json!({"n": 7, "attempt": 2}));
}

/// An inline run (`timeout 0`, which allocates no box of its own) keeps
/// retries, backoff and compensation: every attempt runs in the caller's
/// task, each failure is compensated, and the final error wraps the last.
#[tokio::test(start_paused = true)]
async fn an_inline_run_retries_and_compensates_in_the_caller() {
    let probe = Probe::new();
    let exec = Exec::new();
    let t0 = Instant::now();
    let handle = tokio::spawn({
        let probe = probe.clone();
        async move {
            let me = tokio::task::try_id();
            let outcome = exec
                .execute(
                    ins(
                        Scripted::<1> {
                            probe: probe.clone(),
                        },
                        json!({"fail": 5}),
                    )
                    .with_opts(ExecOptions::new().timeout(Duration::ZERO).max_retries(2)),
                    Context::new(),
                )
                .await;
            (me, outcome)
        }
    });
    let (me, outcome) = handle.await.unwrap();
    assert_eq!(outcome.attempts, 3);
    assert_eq!(gaps(&probe.starts()), [250, 500]);
    assert_eq!(probe.task_ids.lock().unwrap().clone(), [me, me, me]);
    assert_eq!(probe.deadlines.lock().unwrap().clone(), [None, None, None]);
    let compensated: Vec<_> = probe
        .compensations()
        .into_iter()
        .map(|(at, msg)| (at.duration_since(t0).as_millis(), msg))
        .collect();
    assert_eq!(
        compensated,
        [
            (0, "card declined".to_owned()),
            (250, "card declined".to_owned()),
            (750, "card declined".to_owned())
        ]
    );
    let err = outcome.result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Compensation);
    assert_eq!(err.message(), "compensation completed for: card declined");
    assert_eq!(err.detail("compensated"), Some(&json!(true)));
}

#[tokio::test(start_paused = true)]
async fn backoff_doubles_from_250ms_and_caps_at_30s() {
    let probe = Probe::new();
    let t0 = Instant::now();
    let outcome = Exec::new()
        .execute(
            ins(scripted(&probe), json!({"fail": 100}))
                .with_opts(ExecOptions::new().max_retries(10)),
            Context::new(),
        )
        .await;
    assert_eq!(outcome.attempts, 11);
    assert_eq!(
        gaps(&probe.starts()),
        [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
    );
    assert_eq!(probe.starts()[0], t0);
}

#[tokio::test(start_paused = true)]
async fn backoff_is_configurable_per_executor_and_per_call() {
    let exec = Exec::with_defaults(
        ExecOptions::new()
            .max_retries(4)
            .backoff(Duration::from_millis(100))
            .max_backoff(Duration::from_millis(500)),
    );
    let probe = Probe::new();
    let outcome = exec
        .execute(ins(scripted(&probe), json!({"fail": 100})), Context::new())
        .await;
    assert_eq!(outcome.attempts, 5);
    assert_eq!(gaps(&probe.starts()), [100, 200, 400, 500]);

    let probe = Probe::new();
    let outcome = exec
        .execute(
            ins(scripted(&probe), json!({"fail": 100})).with_opts(
                ExecOptions::new()
                    .max_retries(3)
                    .backoff(Duration::from_millis(30)),
            ),
            Context::new(),
        )
        .await;
    assert_eq!(outcome.attempts, 4);
    assert_eq!(gaps(&probe.starts()), [30, 60, 120]);

    // A first delay above the cap is capped too.
    let probe = Probe::new();
    exec.execute(
        ins(scripted(&probe), json!({"fail": 100})).with_opts(
            ExecOptions::new()
                .max_retries(2)
                .backoff(Duration::from_secs(60)),
        ),
        Context::new(),
    )
    .await;
    assert_eq!(gaps(&probe.starts()), [500, 500]);
}

#[tokio::test(start_paused = true)]
async fn non_retryable_errors_run_once() {
    let probe = Probe::new();
    let outcome = Exec::new()
        .execute(
            ins(scripted(&probe), json!({"fail": 9, "no_retry": true}))
                .with_opts(ExecOptions::new().max_retries(5)),
            Context::new(),
        )
        .await;
    assert_eq!(outcome.attempts, 1);
    assert_eq!(probe.runs(), 1);
    assert!(!outcome.result.unwrap_err().retryable());

    struct Invalid(Arc<AtomicUsize>);
    impl Action for Invalid {
        type Params = Script;
        type Output = ();
        const NAME: &'static str = "invalid";
        async fn run(&self, _: Script, _: &Context) -> jido::Result<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Err(Error::validation("no"))
        }
    }
    let n = Arc::new(AtomicUsize::new(0));
    let err = Exec::new()
        .run(
            Invalid(n.clone()),
            json!({}),
            Context::new(),
            ExecOptions::new().max_retries(5),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

// ====================================================================
// Deadlines
// ====================================================================

/// (deadline, remaining) as seen by each action.
type Seen = Arc<Mutex<Vec<(Option<Instant>, Option<Duration>)>>>;

struct Child(Seen);

impl Action for Child {
    type Params = Script;
    type Output = Value;
    const NAME: &'static str = "child";
    async fn run(&self, _: Script, ctx: &Context) -> jido::Result<Value> {
        self.0
            .lock()
            .unwrap()
            .push((ctx.deadline(), ctx.remaining()));
        Ok(json!({"child_action": ctx.action().map(|m| m.name), "tenant": ctx.get("tenant")}))
    }
}

#[derive(Clone, Deserialize, JsonSchema)]
struct ParentParams {
    /// Child timeout in ms (absent: default).
    child_timeout_ms: Option<u64>,
}

struct Parent(Seen);

impl Action for Parent {
    type Params = ParentParams;
    type Output = Value;
    const NAME: &'static str = "parent";
    async fn run(&self, p: ParentParams, ctx: &Context) -> jido::Result<Value> {
        self.0
            .lock()
            .unwrap()
            .push((ctx.deadline(), ctx.remaining()));
        tokio::time::sleep(Duration::from_secs(6)).await;
        let mut opts = ExecOptions::new();
        if let Some(t) = p.child_timeout_ms {
            opts = opts.timeout(Duration::from_millis(t));
        }
        let out = jido::exec::run(Child(self.0.clone()), json!({}), ctx.clone(), opts).await?;
        Ok(Value::Object(out.output))
    }
}

#[tokio::test(start_paused = true)]
async fn nested_runs_get_at_most_the_remaining_budget() {
    // The parent's 10 s budget holds back `nested_margin(10 s)` = 100 ms
    // for itself: a child inherits the parent's deadline minus 100 ms.
    for (child_timeout, expect_remaining) in [
        (None, 3900),    // default 30 s: capped by the parent's 4 s left - margin
        (Some(0), 3900), // zero: still bound by the inherited deadline
        (Some(60_000), 3900),
        (Some(1000), 1000), // own timeout shorter than what is left
    ] {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let exec = Exec::new();
        let t0 = Instant::now();
        let out = exec
            .run(
                Parent(seen.clone()),
                json!({"child_timeout_ms": child_timeout}),
                Context::new().with("tenant", "acme"),
                ExecOptions::new().timeout(Duration::from_secs(10)),
            )
            .await
            .unwrap();
        assert_eq!(
            Value::Object(out.output),
            json!({"child_action": "child", "tenant": "acme"}),
            "the child sees its own metadata and the inherited values"
        );
        let seen = seen.lock().unwrap().clone();
        let parent_deadline = t0 + Duration::from_secs(10);
        assert_eq!(
            seen[0],
            (Some(parent_deadline), Some(Duration::from_secs(10)))
        );
        assert_eq!(
            seen[1].1,
            Some(Duration::from_millis(expect_remaining)),
            "child timeout {child_timeout:?}"
        );
        let expect_deadline = t0 + Duration::from_secs(6) + Duration::from_millis(expect_remaining);
        assert_eq!(seen[1].0, Some(expect_deadline));
    }
}

#[tokio::test(start_paused = true)]
async fn a_child_outliving_the_parents_budget_times_out_at_the_parents_deadline() {
    struct SlowParent(Arc<Probe>);
    impl Action for SlowParent {
        type Params = Script;
        type Output = Value;
        const NAME: &'static str = "slow_parent";
        async fn run(&self, _: Script, ctx: &Context) -> jido::Result<Value> {
            tokio::time::sleep(Duration::from_secs(1)).await;
            // The child would like 60 s; 2 s are left. Swallow its error.
            let res = jido::exec::run(
                scripted(&self.0),
                json!({"sleep_ms": 60_000}),
                ctx.clone(),
                ExecOptions::new()
                    .timeout(Duration::from_secs(60))
                    .max_retries(3),
            )
            .await;
            let err = res.unwrap_err();
            Ok(json!({"message": err.message()}))
        }
    }
    let probe = Probe::new();
    let exec = Exec::new();
    let t0 = Instant::now();
    let res = exec
        .run(
            SlowParent(probe.clone()),
            json!({}),
            Context::new(),
            ExecOptions::new()
                .timeout(Duration::from_secs(3))
                .max_retries(0),
        )
        .await;
    // The child inherits the parent's deadline minus the nested margin
    // (100 ms of the parent's 3 s): it times out after 1.9 s, is not
    // retried past that deadline, and the parent returns its own result
    // before its own deadline.
    let out = res.expect("the parent handles the child's timeout");
    assert_eq!(
        out.output["message"],
        "action scripted timed out after 1900ms"
    );
    assert_eq!(t0.elapsed(), Duration::from_millis(2900));
    assert_eq!(probe.runs(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_exhausted_budget_fails_before_dispatch() {
    let probe = Probe::new();
    let exec = Exec::new();
    let t0 = Instant::now();
    for deadline in [t0, t0 - Duration::from_secs(1)] {
        let outcome = exec
            .execute(
                ins(scripted(&probe), json!({})).with_opts(ExecOptions::new().max_retries(3)),
                Context::new().with_deadline(deadline),
            )
            .await;
        let err = outcome.result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout);
        assert_eq!(
            err.message(),
            "execution deadline exceeded before action dispatch"
        );
        assert_eq!(err.detail("action"), Some(&json!("scripted")));
        assert_eq!(outcome.attempts, 1, "not retried");
        assert!(outcome.effects.is_empty());
    }
    assert_eq!(probe.runs(), 0, "the action never ran");
    assert_eq!(exec.supervisor().active(), 0);
    assert_eq!(Instant::now(), t0, "no backoff was waited for");

    // Same with a zero timeout (which would otherwise run inline).
    let err = exec
        .run(
            scripted(&probe),
            json!({}),
            Context::new().with_deadline(t0),
            ExecOptions::new().timeout(Duration::ZERO),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.message(),
        "execution deadline exceeded before action dispatch"
    );
    assert_eq!(probe.runs(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_inherited_deadline_is_not_retried_past() {
    let probe = Probe::new();
    let t0 = Instant::now();
    let outcome = Exec::new()
        .execute(
            ins(scripted(&probe), json!({"sleep_ms": 5000}))
                .with_opts(ExecOptions::new().max_retries(3)),
            Context::new().with_deadline(t0 + Duration::from_secs(1)),
        )
        .await;
    let err = outcome.result.unwrap_err();
    assert_eq!(err.message(), "action scripted timed out after 1000ms");
    assert_eq!(outcome.attempts, 1);
    assert_eq!(t0.elapsed(), Duration::from_secs(1));

    // Quick failures retry while the next backoff still fits the budget:
    // attempts at 0, 0.25, 0.75, 1.75, 3.75 and 7.75 s; the next delay
    // (8 s) would end past the 10 s deadline.
    let probe = Probe::new();
    let t0 = Instant::now();
    let outcome = Exec::new()
        .execute(
            ins(scripted(&probe), json!({"fail": 100}))
                .with_opts(ExecOptions::new().max_retries(10)),
            Context::new().with_deadline(t0 + Duration::from_secs(10)),
        )
        .await;
    assert_eq!(outcome.attempts, 6);
    assert_eq!(gaps(&probe.starts()), [250, 500, 1000, 2000, 4000]);
    assert_eq!(t0.elapsed(), Duration::from_millis(7750));
    assert_eq!(outcome.result.unwrap_err().message(), "card declined");
}

// ====================================================================
// Panics
// ====================================================================

#[tokio::test(start_paused = true)]
async fn a_panicking_action_is_an_execution_error() {
    for timeout in [DEFAULT_TIMEOUT, Duration::ZERO] {
        let probe = Probe::new();
        let exec = Exec::new();
        let outcome = exec
            .execute(
                ins(scripted(&probe), json!({"panic": "kaboom"}))
                    .with_opts(ExecOptions::new().timeout(timeout)),
                Context::new(),
            )
            .await;
        let err = outcome.result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Execution);
        assert_eq!(err.message(), "action scripted panicked: kaboom");
        assert_eq!(
            Value::Object(err.details().clone()),
            json!({"action": "scripted", "panic": "kaboom"})
        );
        // Retried like any execution error.
        assert_eq!(outcome.attempts, 2, "timeout {timeout:?}");
        assert_eq!(probe.runs(), 2);
        assert_eq!(probe.dropped(), 2, "unwound futures drop their locals");
        // The caller and the executor carry on.
        let out = exec
            .run(
                scripted(&probe),
                json!({"n": 1}),
                Context::new(),
                ExecOptions::new().timeout(timeout),
            )
            .await
            .unwrap();
        assert_eq!(out.output["n"], 1);
    }
}

#[tokio::test]
async fn panic_payloads_other_than_str() {
    struct Payload;
    impl Action for Payload {
        type Params = Script;
        type Output = ();
        const NAME: &'static str = "payload";
        async fn run(&self, s: Script, _: &Context) -> jido::Result<()> {
            if s.n == 1 {
                panic!("formatted {}", 42);
            }
            std::panic::panic_any(7_u8)
        }
    }
    for timeout in [DEFAULT_TIMEOUT, Duration::ZERO] {
        let opts = once().timeout(timeout);
        let err = Exec::new()
            .run(Payload, json!({"n": 1}), Context::new(), opts)
            .await
            .unwrap_err();
        assert_eq!(err.message(), "action payload panicked: formatted 42");
        let err = Exec::new()
            .run(Payload, json!({"n": 2}), Context::new(), opts)
            .await
            .unwrap_err();
        assert_eq!(
            err.message(),
            "action payload panicked: non-string panic payload"
        );
    }
}

// ====================================================================
// Compensation
// ====================================================================

fn details(err: &Error) -> Value {
    Value::Object(err.details().clone())
}

#[tokio::test(start_paused = true)]
async fn compensation_runs_after_every_failed_attempt() {
    let probe = Probe::new();
    let t0 = Instant::now();
    let outcome = Exec::new()
        .execute(
            ins(
                Scripted::<1> {
                    probe: probe.clone(),
                },
                json!({"fail": 100}),
            )
            .with_opts(ExecOptions::new().max_retries(2)),
            Context::new(),
        )
        .await;
    assert_eq!(outcome.attempts, 3);
    let comps = probe.compensations();
    assert_eq!(comps.len(), 3, "one compensation per attempt");
    assert!(comps.iter().all(|(_, m)| m == "card declined"));
    assert_eq!(
        comps.iter().map(|(t, _)| ms(*t - t0)).collect::<Vec<_>>(),
        [0, 250, 750]
    );

    let err = outcome.result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Compensation);
    assert_eq!(err.message(), "compensation completed for: card declined");
    assert_eq!(
        details(&err),
        json!({
            "compensated": true,
            "original_error": {
                "type": "execution_error",
                "message": "card declined",
                "details": {"attempt": 3},
                "retryable": true
            },
            "action": "scripted",
            "retry": true,
            // Compensation runs under its own 5 s budget.
            "compensation_result": {"voided": true, "remaining_ms": 5000}
        })
    );
    assert!(err.retryable(), "keeps the original's retryability");
    let source = std::error::Error::source(&err)
        .unwrap()
        .downcast_ref::<Error>()
        .unwrap();
    assert_eq!(
        source,
        &Error::execution("card declined").with_detail("attempt", 3)
    );
}

#[tokio::test(start_paused = true)]
async fn compensation_keeps_a_non_retryable_original_non_retryable() {
    let probe = Probe::new();
    let outcome = Exec::new()
        .execute(
            ins(
                Scripted::<1> {
                    probe: probe.clone(),
                },
                json!({"fail": 100, "no_retry": true}),
            )
            .with_opts(ExecOptions::new().max_retries(3)),
            Context::new(),
        )
        .await;
    assert_eq!(outcome.attempts, 1);
    assert_eq!(probe.compensations().len(), 1);
    let err = outcome.result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Compensation);
    assert_eq!(err.detail("retry"), Some(&json!(false)));
    assert_eq!(err.detail("compensated"), Some(&json!(true)));
    assert!(!err.retryable());
}

#[tokio::test(start_paused = true)]
async fn compensation_also_runs_after_a_timeout() {
    let probe = Probe::new();
    let t0 = Instant::now();
    let err = Exec::new()
        .run(
            Scripted::<1> {
                probe: probe.clone(),
            },
            json!({"sleep_ms": 10_000}),
            Context::new(),
            once().timeout(Duration::from_secs(1)),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Compensation);
    assert_eq!(
        err.message(),
        "compensation completed for: action scripted timed out after 1000ms"
    );
    assert_eq!(
        err.detail("original_error"),
        Some(&json!({
            "type": "timeout",
            "message": "action scripted timed out after 1000ms",
            "details": {"action": "scripted", "timeout_ms": 1000},
            "retryable": true
        }))
    );
    assert!(err.retryable());
    assert_eq!(
        probe.compensations(),
        [(
            t0 + Duration::from_secs(1),
            "action scripted timed out after 1000ms".to_owned()
        )]
    );
}

#[tokio::test(start_paused = true)]
async fn failing_compensation_is_reported() {
    let probe = Probe::new();
    let err = Exec::new()
        .run(
            Scripted::<2> {
                probe: probe.clone(),
            },
            json!({"fail": 1}),
            Context::new(),
            once(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Compensation);
    assert_eq!(err.message(), "compensation failed for: card declined");
    assert_eq!(
        details(&err),
        json!({
            "compensated": false,
            "original_error": {
                "type": "execution_error",
                "message": "card declined",
                "details": {"attempt": 1},
                "retryable": true
            },
            "action": "scripted",
            "retry": true,
            "compensation_error": {
                "type": "execution_error",
                "message": "void failed",
                "details": {"gateway": "down"},
                "retryable": true
            }
        })
    );
}

#[tokio::test(start_paused = true)]
async fn panicking_compensation_is_reported() {
    let probe = Probe::new();
    let err = Exec::new()
        .run(
            Scripted::<3> {
                probe: probe.clone(),
            },
            json!({"fail": 1}),
            Context::new(),
            once(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Compensation);
    assert_eq!(err.message(), "compensation crashed for: card declined");
    assert_eq!(err.detail("compensated"), Some(&json!(false)));
    assert_eq!(err.detail("exit_reason"), Some(&json!("void exploded")));
    assert_eq!(probe.compensations().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn compensation_timeouts() {
    // Default: the action's 5 s.
    let probe = Probe::new();
    let exec = Exec::new();
    let t0 = Instant::now();
    let err = exec
        .run(
            Scripted::<4> {
                probe: probe.clone(),
            },
            json!({"fail": 100}),
            Context::new(),
            once(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Compensation);
    assert_eq!(
        err.message(),
        "compensation timed out after 5000ms for: card declined"
    );
    assert_eq!(err.detail("compensated"), Some(&json!(false)));
    assert_eq!(t0.elapsed(), Duration::from_secs(5));
    assert_eq!(exec.supervisor().active(), 0);

    // The action's own setting.
    let t0 = Instant::now();
    let err = exec
        .run(
            Scripted::<4, 2000> {
                probe: probe.clone(),
            },
            json!({"fail": 100}),
            Context::new(),
            once(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.message(),
        "compensation timed out after 2000ms for: card declined"
    );
    assert_eq!(t0.elapsed(), Duration::from_secs(2));

    // Per call, over the action's.
    let err = exec
        .run(
            Scripted::<4, 2000> {
                probe: probe.clone(),
            },
            json!({"fail": 100}),
            Context::new(),
            once().compensation_timeout(Duration::from_millis(100)),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.message(),
        "compensation timed out after 100ms for: card declined"
    );

    // Per executor.
    let exec =
        Exec::with_defaults(ExecOptions::new().compensation_timeout(Duration::from_millis(300)));
    let err = exec
        .run(
            Scripted::<4> {
                probe: probe.clone(),
            },
            json!({"fail": 100}),
            Context::new(),
            once(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.message(),
        "compensation timed out after 300ms for: card declined"
    );
    assert_eq!(probe.compensations().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn compensation_is_off_unless_enabled() {
    let probe = Probe::new();
    let err = Exec::new()
        .run(scripted(&probe), json!({"fail": 1}), Context::new(), once())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::execution("card declined").with_detail("attempt", 1)
    );
    assert!(probe.compensations().is_empty());
}

#[tokio::test(start_paused = true)]
async fn compensation_of_a_panicking_action() {
    let probe = Probe::new();
    let err = Exec::new()
        .run(
            Scripted::<1> {
                probe: probe.clone(),
            },
            json!({"panic": "boom"}),
            Context::new(),
            once(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.message(),
        "compensation completed for: action scripted panicked: boom"
    );
    assert_eq!(probe.compensations().len(), 1);
}

// ====================================================================
// Async
// ====================================================================

#[tokio::test(start_paused = true)]
async fn run_async_and_wait() {
    let exec = Exec::new();
    let probe = Probe::new();
    let handle: AsyncHandle<ExecOutput> = exec
        .run_async(
            ins(scripted(&probe), json!({"n": 5, "sleep_ms": 4000})),
            Context::new(),
        )
        .unwrap();
    assert!(!handle.is_finished());
    assert_eq!(format!("{handle:?}"), "AsyncHandle { finished: false }");
    let t0 = Instant::now();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.output["n"], 5);
    assert_eq!(t0.elapsed(), Duration::from_secs(4));

    // The global executor.
    let out = jido::exec::run_async(ins(scripted(&probe), json!({"n": 6})))
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(out.output["n"], 6);
}

#[tokio::test(start_paused = true)]
async fn wait_gives_up_after_five_seconds_and_cancels() {
    let exec = Exec::new();
    let probe = Probe::new();
    let handle = exec
        .run_async(
            ins(scripted(&probe), json!({"sleep_ms": 6000})),
            Context::new(),
        )
        .unwrap();
    let t0 = Instant::now();
    let err = handle.wait().await.unwrap_err();
    assert_eq!(t0.elapsed(), Duration::from_secs(5));
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(err.message(), "async action timed out after 5000ms");
    assert_eq!(details(&err), json!({"timeout_ms": 5000}));
    settle().await;
    assert_eq!(probe.dropped(), 1, "the action itself was stopped");
    assert_eq!(probe.finished(), 0);
    assert_eq!(exec.supervisor().active(), 0);
    // Nothing finishes later.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(probe.finished(), 0);
}

#[tokio::test(start_paused = true)]
async fn wait_timeout() {
    let exec = Exec::new();
    let probe = Probe::new();
    let out = exec
        .run_async(
            ins(scripted(&probe), json!({"sleep_ms": 500, "n": 1})),
            Context::new(),
        )
        .unwrap()
        .wait_timeout(Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(out.output["n"], 1);

    let err = exec
        .run_async(
            ins(scripted(&probe), json!({"sleep_ms": 5000})),
            Context::new(),
        )
        .unwrap()
        .wait_timeout(Duration::from_millis(1500))
        .await
        .unwrap_err();
    assert_eq!(err.message(), "async action timed out after 1500ms");
    settle().await;
    assert_eq!(probe.dropped(), 1);
    assert_eq!(exec.supervisor().active(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_runs_own_error_comes_through_wait() {
    let exec = Exec::new();
    let probe = Probe::new();
    let err = exec
        .run_async(
            ins(scripted(&probe), json!({"fail": 1})).with_opts(once()),
            Context::new(),
        )
        .unwrap()
        .wait()
        .await
        .unwrap_err();
    assert_eq!(
        err,
        Error::execution("card declined").with_detail("attempt", 1)
    );
}

#[tokio::test(start_paused = true)]
async fn cancel_stops_the_action() {
    let exec = Exec::new();
    let probe = Probe::new();
    let handle = exec
        .run_async(
            ins(scripted(&probe), json!({"sleep_ms": 60_000})),
            Context::new(),
        )
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(probe.runs(), 1);
    assert_eq!(exec.supervisor().active(), 2, "the run and its attempt");
    let t0 = Instant::now();
    handle.cancel().await;
    assert_eq!(Instant::now(), t0);
    settle().await;
    assert_eq!(probe.dropped(), 1);
    assert_eq!(exec.supervisor().active(), 0);
}

#[tokio::test(start_paused = true)]
async fn cancel_after_the_end_is_fine() {
    let exec = Exec::new();
    let probe = Probe::new();
    let handle = exec
        .run_async(ins(scripted(&probe), json!({})), Context::new())
        .unwrap();
    while !handle.is_finished() {
        tokio::task::yield_now().await;
    }
    handle.cancel().await;
    assert_eq!(probe.finished(), 1);
    assert_eq!(probe.dropped(), 0);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_handle_cancels() {
    let exec = Exec::new();
    let probe = Probe::new();
    let handle = exec
        .run_async(
            ins(scripted(&probe), json!({"sleep_ms": 60_000})),
            Context::new(),
        )
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    drop(handle);
    settle().await;
    assert_eq!(probe.dropped(), 1);
    assert_eq!(exec.supervisor().active(), 0);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_run_future_stops_its_action() {
    let exec = Exec::new();
    let probe = Probe::new();
    let res = tokio::time::timeout(
        Duration::from_secs(1),
        exec.run(
            scripted(&probe),
            json!({"sleep_ms": 60_000}),
            Context::new(),
            ExecOptions::new(),
        ),
    )
    .await;
    assert!(res.is_err());
    settle().await;
    assert_eq!(probe.dropped(), 1);
    assert_eq!(exec.supervisor().active(), 0);
}

// ====================================================================
// Chain
// ====================================================================

#[derive(Clone, Deserialize, JsonSchema)]
struct AddParams {
    n: i64,
    by: i64,
}

struct AddBy(Arc<Mutex<Vec<String>>>);

impl Action for AddBy {
    type Params = AddParams;
    type Output = Value;
    const NAME: &'static str = "add_by";
    async fn run(&self, p: AddParams, ctx: &Context) -> jido::Result<Value> {
        self.0.lock().unwrap().push(format!(
            "add {} to {} for {}",
            p.by,
            p.n,
            ctx.get("tenant").and_then(Value::as_str).unwrap_or("?")
        ));
        if p.by < 0 {
            return Err(Error::execution("negative step").with_retry(false));
        }
        Ok(json!({"n": p.n + p.by}))
    }
}

#[tokio::test(start_paused = true)]
async fn chain_merges_each_output_into_the_next_params() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let chain = Chain::new()
        .step_with(AddBy(log.clone()), json!({"by": 1}))
        .step_with(AddBy(log.clone()), json!({"by": 10}))
        .step(AddBy(log.clone()));
    assert_eq!(chain.len(), 3);
    assert!(!chain.is_empty());
    assert_eq!(
        format!("{chain:?}"),
        r#"Chain { steps: ["add_by", "add_by", "add_by"], interruptible: false }"#
    );
    let out = chain
        .run(
            &Exec::new(),
            json!({"n": 1, "keep": true}),
            Context::new().with("tenant", "acme"),
        )
        .await
        .unwrap();
    // As in Jido, a step's own params stay in the accumulated map: the
    // third step runs with the second step's `by`.
    assert_eq!(
        out,
        ChainOutcome::Completed(obj(json!({"n": 22, "keep": true, "by": 10})))
    );
    assert_eq!(
        log.lock().unwrap().clone(),
        [
            "add 1 to 1 for acme",
            "add 10 to 2 for acme",
            "add 10 to 12 for acme"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn chain_interrupt_is_checked_before_each_step() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let checks = Arc::new(AtomicUsize::new(0));
    let chain = Chain::new()
        .step_with(AddBy(log.clone()), json!({"by": 1}))
        .step_with(AddBy(log.clone()), json!({"by": 2}))
        .step_with(AddBy(log.clone()), json!({"by": 3}))
        .interrupt_when({
            let checks = checks.clone();
            // Fires before the third step.
            move || checks.fetch_add(1, Ordering::SeqCst) == 2
        });
    let out = chain
        .run(&Exec::new(), json!({"n": 0}), Context::new())
        .await
        .unwrap();
    assert_eq!(
        out,
        ChainOutcome::Interrupted(obj(json!({"n": 3, "by": 2})))
    );
    assert_eq!(checks.load(Ordering::SeqCst), 3);
    assert_eq!(log.lock().unwrap().len(), 2);

    // Interrupted before anything ran: the initial params.
    let chain = Chain::new()
        .step(AddBy(log.clone()))
        .interrupt_when(|| true);
    let out = chain
        .run(&Exec::new(), json!({"n": 9, "by": 1}), Context::new())
        .await
        .unwrap();
    assert_eq!(
        out,
        ChainOutcome::Interrupted(obj(json!({"n": 9, "by": 1})))
    );
    assert_eq!(log.lock().unwrap().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn chain_halts_at_the_first_error() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let chain = Chain::new()
        .step_with(AddBy(log.clone()), json!({"by": 1}))
        .step_with(AddBy(log.clone()), json!({"by": -1}))
        .step_with(AddBy(log.clone()), json!({"by": 3}));
    let err = chain
        .run(&Exec::new(), json!({"n": 0}), Context::new())
        .await
        .unwrap_err();
    assert_eq!(err, Error::execution("negative step").with_retry(false));
    assert_eq!(
        log.lock().unwrap().clone(),
        ["add 1 to 0 for ?", "add -1 to 1 for ?"]
    );

    // Bad params halt too, before the step runs.
    let err = Chain::new()
        .step(AddBy(log.clone()))
        .run(&Exec::new(), json!({"n": 0}), Context::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.detail("path"), Some(&json!("by")));
    assert_eq!(log.lock().unwrap().len(), 2);

    let err = Chain::new()
        .step(AddBy(log.clone()))
        .run(&Exec::new(), json!([1]), Context::new())
        .await
        .unwrap_err();
    assert_eq!(
        err.message(),
        "invalid params: expected a JSON object, got an array"
    );
    let err = Chain::new()
        .step_with(AddBy(log.clone()), json!("x"))
        .run(&Exec::new(), json!({}), Context::new())
        .await
        .unwrap_err();
    assert_eq!(
        err.message(),
        "invalid step params: expected a JSON object, got a string"
    );
}

#[tokio::test(start_paused = true)]
async fn chain_steps_use_their_instruction_options() {
    let probe = Probe::new();
    let err = Chain::new()
        .instruction(
            Instruction::new(scripted(&probe)).with_opts(
                ExecOptions::new()
                    .timeout(Duration::from_millis(100))
                    .max_retries(0),
            ),
        )
        .run(&Exec::new(), json!({"sleep_ms": 1000}), Context::new())
        .await
        .unwrap_err();
    assert_eq!(err.message(), "action scripted timed out after 100ms");
    assert!(Chain::new().is_empty());
    assert_eq!(
        Chain::new()
            .run(&Exec::new(), json!({"a": 1}), Context::new())
            .await
            .unwrap(),
        ChainOutcome::Completed(obj(json!({"a": 1})))
    );
}

#[tokio::test(start_paused = true)]
async fn chain_spawn() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let exec = Exec::new();
    let handle: AsyncHandle<ChainOutcome> = Chain::new()
        .step_with(AddBy(log.clone()), json!({"by": 2}))
        .step_with(AddBy(log.clone()), json!({"by": 3}))
        .spawn(&exec, json!({"n": 1}), Context::new())
        .unwrap();
    assert_eq!(
        handle.wait().await.unwrap(),
        ChainOutcome::Completed(obj(json!({"n": 6, "by": 3})))
    );

    // Cancelling a spawned chain stops the running step.
    let probe = Probe::new();
    let handle = Chain::new()
        .step(scripted(&probe))
        .step(scripted(&probe))
        .spawn(&exec, json!({"sleep_ms": 10_000}), Context::new())
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    handle.cancel().await;
    settle().await;
    assert_eq!(probe.runs(), 1);
    assert_eq!(probe.dropped(), 1);
    assert_eq!(exec.supervisor().active(), 0);
}

// ====================================================================
// Task supervision
// ====================================================================

#[tokio::test(start_paused = true)]
async fn shutdown_cancels_every_task() {
    let exec = Exec::new();
    let probe = Probe::new();
    let handles: Vec<_> = (0..3)
        .map(|_| {
            exec.run_async(
                ins(scripted(&probe), json!({"sleep_ms": 60_000})),
                Context::new(),
            )
            .unwrap()
        })
        .collect();
    // A synchronous run from an unsupervised task.
    let sync_run = tokio::spawn({
        let exec = exec.clone();
        let probe = probe.clone();
        async move {
            exec.execute(
                ins(scripted(&probe), json!({"sleep_ms": 60_000})),
                Context::new(),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(probe.runs(), 4);
    assert_eq!(exec.supervisor().active(), 7, "3 runs, 4 attempts");

    let t0 = Instant::now();
    exec.shutdown().await;
    assert_eq!(Instant::now(), t0);
    assert_eq!(exec.supervisor().active(), 0);
    assert!(exec.supervisor().is_shut_down());
    assert_eq!(probe.dropped(), 4, "every action future was dropped");
    assert_eq!(probe.finished(), 0);

    for handle in handles {
        let err = handle.wait().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Cancelled);
        assert_eq!(
            err.message(),
            "async action was cancelled: task supervisor shut down"
        );
    }
    let outcome = sync_run.await.unwrap();
    let err = outcome.result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(
        err.message(),
        "action scripted was cancelled: task supervisor shut down"
    );
    assert_eq!(outcome.attempts, 1, "cancellation is not retried");
    assert!(!err.retryable());
}

#[tokio::test(start_paused = true)]
async fn a_shut_down_executor_refuses_new_runs() {
    let exec = Exec::new();
    exec.shutdown().await;
    let probe = Probe::new();
    for timeout in [DEFAULT_TIMEOUT, Duration::ZERO] {
        let err = exec
            .run(
                scripted(&probe),
                json!({}),
                Context::new(),
                ExecOptions::new().timeout(timeout),
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Cancelled);
        assert_eq!(err.message(), "task supervisor is shut down");
    }
    let err = exec
        .run_async(ins(scripted(&probe), json!({})), Context::new())
        .unwrap_err();
    assert_eq!(err.message(), "task supervisor is shut down");
    let err = Chain::new()
        .step(scripted(&probe))
        .spawn(&exec, json!({}), Context::new())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(probe.runs(), 0);
}

#[tokio::test(start_paused = true)]
async fn executors_are_isolated() {
    let a = Exec::new();
    let b = Exec::new();
    let probe_a = Probe::new();
    let probe_b = Probe::new();
    let _ha = a
        .run_async(
            ins(scripted(&probe_a), json!({"sleep_ms": 10_000})),
            Context::new(),
        )
        .unwrap();
    let hb = b
        .run_async(
            ins(scripted(&probe_b), json!({"sleep_ms": 10_000, "n": 2})),
            Context::new(),
        )
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    a.shutdown().await;
    assert_eq!(a.supervisor().active(), 0);
    assert_eq!(b.supervisor().active(), 2);
    assert_eq!(probe_a.dropped(), 1);
    let out = hb.wait_timeout(Duration::from_secs(20)).await.unwrap();
    assert_eq!(out.output["n"], 2);
    assert_eq!(probe_b.dropped(), 0);
    assert_eq!(probe_b.finished(), 1);
    // A clone is the same executor.
    let c = b.clone();
    c.shutdown().await;
    assert!(b.supervisor().is_shut_down());
}

#[tokio::test(start_paused = true)]
async fn nested_runs_use_the_executor_of_the_parent() {
    struct Nest(Arc<Probe>);
    impl Action for Nest {
        type Params = Script;
        type Output = Value;
        const NAME: &'static str = "nest";
        async fn run(&self, _: Script, ctx: &Context) -> jido::Result<Value> {
            let out = jido::exec::run(
                scripted(&self.0),
                json!({"sleep_ms": 60_000}),
                ctx.clone(),
                ExecOptions::new(),
            )
            .await?;
            Ok(Value::Object(out.output))
        }
    }
    let exec = Exec::new();
    let probe = Probe::new();
    // The caller's context names another executor: the one running the
    // parent still owns the nested run.
    let other = Exec::new();
    let handle = exec
        .run_async(
            Instruction::new(Nest(probe.clone())),
            Context::new().with_exec(other.clone()),
        )
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        exec.supervisor().active(),
        3,
        "run, parent attempt, child attempt"
    );
    assert_eq!(other.supervisor().active(), 0);
    exec.shutdown().await;
    assert_eq!(probe.dropped(), 1);
    assert_eq!(
        handle.wait().await.unwrap_err().kind(),
        ErrorKind::Cancelled
    );
}

#[tokio::test]
async fn task_supervisor_alone() {
    let sup = TaskSupervisor::new();
    let done = sup.spawn(async { 5 }).unwrap();
    assert_eq!(done.await.unwrap(), Some(5));
    let pending = sup.spawn(std::future::pending::<()>()).unwrap();
    assert_eq!(sup.active(), 1);
    assert!(!sup.is_shut_down());
    sup.clone().shutdown().await;
    assert_eq!(pending.await.unwrap(), None);
    assert_eq!(sup.active(), 0);
    let err = sup.spawn(async {}).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(err.message(), "task supervisor is shut down");
    // An executor on a shared supervisor.
    let sup = TaskSupervisor::new();
    let exec = Exec::with_supervisor(sup.clone(), ExecOptions::new());
    let _h = exec
        .run_async(ins(Greet, json!({"name": "x"})), Context::new())
        .unwrap();
    assert_eq!(sup.active(), 1);
}

// ====================================================================
// Telemetry
// ====================================================================

mod capture {
    use super::*;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Subscriber};
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::Context as LayerCtx;
    use tracing_subscriber::registry::LookupSpan;

    #[derive(Debug, Clone)]
    pub struct SpanRec {
        pub id: u64,
        pub name: &'static str,
        pub fields: BTreeMap<String, Value>,
        pub closed: bool,
    }

    #[derive(Debug, Clone)]
    pub struct EventRec {
        pub level: Level,
        pub fields: BTreeMap<String, Value>,
        pub span: Option<&'static str>,
    }

    #[derive(Default, Clone)]
    pub struct Captured {
        pub spans: Arc<Mutex<Vec<SpanRec>>>,
        pub events: Arc<Mutex<Vec<EventRec>>>,
    }

    impl Captured {
        pub fn spans(&self, name: &str) -> Vec<SpanRec> {
            self.spans
                .lock()
                .unwrap()
                .iter()
                .filter(|s| s.name == name)
                .cloned()
                .collect()
        }
        pub fn events(&self) -> Vec<EventRec> {
            self.events.lock().unwrap().clone()
        }
    }

    struct Fields<'a>(&'a mut BTreeMap<String, Value>);

    impl Visit for Fields<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0
                .insert(field.name().into(), json!(format!("{value:?}")));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().into(), json!(value));
        }
        fn record_bool(&mut self, field: &Field, value: bool) {
            self.0.insert(field.name().into(), json!(value));
        }
        fn record_u64(&mut self, field: &Field, value: u64) {
            self.0.insert(field.name().into(), json!(value));
        }
        fn record_i64(&mut self, field: &Field, value: i64) {
            self.0.insert(field.name().into(), json!(value));
        }
    }

    impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Captured {
        fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: LayerCtx<'_, S>) {
            let mut fields = BTreeMap::new();
            attrs.record(&mut Fields(&mut fields));
            self.spans.lock().unwrap().push(SpanRec {
                id: id.into_u64(),
                name: attrs.metadata().name(),
                fields,
                closed: false,
            });
        }
        fn on_record(&self, id: &Id, values: &Record<'_>, _: LayerCtx<'_, S>) {
            let mut spans = self.spans.lock().unwrap();
            if let Some(rec) = spans
                .iter_mut()
                .rev()
                .find(|s| s.id == id.into_u64() && !s.closed)
            {
                values.record(&mut Fields(&mut rec.fields));
            }
        }
        fn on_close(&self, id: Id, _: LayerCtx<'_, S>) {
            let mut spans = self.spans.lock().unwrap();
            if let Some(rec) = spans
                .iter_mut()
                .rev()
                .find(|s| s.id == id.into_u64() && !s.closed)
            {
                rec.closed = true;
            }
        }
        fn on_event(&self, event: &Event<'_>, ctx: LayerCtx<'_, S>) {
            let mut fields = BTreeMap::new();
            event.record(&mut Fields(&mut fields));
            let span = ctx.event_span(event).map(|s| s.name());
            self.events.lock().unwrap().push(EventRec {
                level: *event.metadata().level(),
                fields,
                span,
            });
        }
    }

    // One global subscriber routes every callback to the capture installed
    // on the current thread (tests run on current-thread runtimes). Scoped
    // `set_default` subscribers race on tracing's callsite-interest cache
    // when tests run in parallel and lose events now and then.
    thread_local! {
        static CURRENT: std::cell::RefCell<Option<Captured>> = const { std::cell::RefCell::new(None) };
    }

    struct ThreadRouted;

    fn current() -> Option<Captured> {
        CURRENT.with(|c| c.borrow().clone())
    }

    impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for ThreadRouted {
        fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: LayerCtx<'_, S>) {
            if let Some(c) = current() {
                c.on_new_span(attrs, id, ctx);
            }
        }
        fn on_record(&self, id: &Id, values: &Record<'_>, ctx: LayerCtx<'_, S>) {
            if let Some(c) = current() {
                c.on_record(id, values, ctx);
            }
        }
        fn on_close(&self, id: Id, ctx: LayerCtx<'_, S>) {
            if let Some(c) = current() {
                Layer::<S>::on_close(&c, id, ctx);
            }
        }
        fn on_event(&self, event: &Event<'_>, ctx: LayerCtx<'_, S>) {
            if let Some(c) = current() {
                c.on_event(event, ctx);
            }
        }
    }

    pub struct Guard;

    impl Drop for Guard {
        fn drop(&mut self) {
            CURRENT.with(|c| c.borrow_mut().take());
        }
    }

    pub fn install() -> (Captured, Guard) {
        use tracing_subscriber::layer::SubscriberExt;
        static INIT: std::sync::Once = std::sync::Once::new();
        INIT.call_once(|| {
            let subscriber = tracing_subscriber::registry().with(ThreadRouted);
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber in this test binary");
        });
        let captured = Captured::default();
        CURRENT.with(|c| *c.borrow_mut() = Some(captured.clone()));
        (captured, Guard)
    }
}

fn fields(pairs: Value) -> BTreeMap<String, Value> {
    obj(pairs).into_iter().collect()
}

#[tokio::test(start_paused = true)]
async fn one_span_per_attempt_with_outcome() {
    let (captured, _guard) = capture::install();
    let probe = Probe::new();
    Exec::new()
        .run(
            scripted(&probe),
            json!({"fail": 2}),
            Context::new(),
            ExecOptions::new().max_retries(3),
        )
        .await
        .unwrap();
    let spans = captured.spans("jido.action");
    assert_eq!(spans.len(), 3);
    assert!(spans.iter().all(|s| s.closed));
    let got: Vec<_> = spans.iter().map(|s| s.fields.clone()).collect();
    assert_eq!(
        got,
        [
            fields(
                json!({"action": "scripted", "attempt": 1, "outcome": "error", "error_type": "execution_error", "retryable": true})
            ),
            fields(
                json!({"action": "scripted", "attempt": 2, "outcome": "error", "error_type": "execution_error", "retryable": true})
            ),
            fields(json!({"action": "scripted", "attempt": 3, "outcome": "ok"})),
        ]
    );

    let retries: Vec<_> = captured
        .events()
        .into_iter()
        .filter(|e| {
            e.fields
                .get("message")
                .is_some_and(|m| m.as_str().unwrap().starts_with("retrying"))
        })
        .collect();
    assert_eq!(retries.len(), 2);
    assert!(retries.iter().all(|e| e.level == tracing::Level::INFO));
    assert!(
        retries.iter().all(|e| e.span.is_none()),
        "logged between attempts"
    );
    assert_eq!(
        retries[0].fields,
        fields(json!({
            "message": "retrying scripted (attempt 1/3) after 250ms backoff",
            "action": "scripted",
            "attempt": 1,
            "max_retries": 3,
            "delay_ms": 250
        }))
    );
    assert_eq!(
        retries[1].fields["message"],
        "retrying scripted (attempt 2/3) after 500ms backoff"
    );
}

#[tokio::test(start_paused = true)]
async fn spans_record_timeouts_and_non_retryable_errors() {
    let (captured, _guard) = capture::install();
    let probe = Probe::new();
    let exec = Exec::new();
    let _ = exec
        .run(
            scripted(&probe),
            json!({"sleep_ms": 2000}),
            Context::new(),
            once().timeout(Duration::from_secs(1)),
        )
        .await;
    let _ = exec
        .run(
            scripted(&probe),
            json!({"fail": 100, "no_retry": true}),
            Context::new(),
            once(),
        )
        .await;
    let _ = exec
        .run(
            scripted(&probe),
            json!({}),
            Context::new().with_deadline(Instant::now()),
            once(),
        )
        .await;
    let spans = captured.spans("jido.action");
    let got: Vec<_> = spans.iter().map(|s| s.fields.clone()).collect();
    assert_eq!(
        got,
        [
            fields(
                json!({"action": "scripted", "attempt": 1, "outcome": "error", "error_type": "timeout", "retryable": true})
            ),
            fields(
                json!({"action": "scripted", "attempt": 1, "outcome": "error", "error_type": "execution_error", "retryable": false})
            ),
            fields(
                json!({"action": "scripted", "attempt": 1, "outcome": "error", "error_type": "timeout", "retryable": true})
            ),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn events_of_the_action_are_inside_its_span() {
    struct Logs;
    impl Action for Logs {
        type Params = Script;
        type Output = ();
        const NAME: &'static str = "logs";
        async fn run(&self, _: Script, _: &Context) -> jido::Result<()> {
            tracing::warn!(inside = true, "from the action");
            Ok(())
        }
    }
    let (captured, _guard) = capture::install();
    for timeout in [DEFAULT_TIMEOUT, Duration::ZERO] {
        Exec::new()
            .run(Logs, json!({}), Context::new(), once().timeout(timeout))
            .await
            .unwrap();
    }
    let inside: Vec<_> = captured
        .events()
        .into_iter()
        .filter(|e| e.fields.contains_key("inside"))
        .collect();
    assert_eq!(inside.len(), 2);
    assert!(inside.iter().all(|e| e.span == Some("jido.action")));
}

#[tokio::test(start_paused = true)]
async fn silent_telemetry_opens_no_span_but_still_logs_retries() {
    let (captured, _guard) = capture::install();
    let probe = Probe::new();
    Exec::with_defaults(ExecOptions::new().telemetry(Telemetry::Silent))
        .run(
            scripted(&probe),
            json!({"fail": 1}),
            Context::new(),
            ExecOptions::new(),
        )
        .await
        .unwrap();
    assert!(captured.spans("jido.action").is_empty());
    let retries = captured
        .events()
        .into_iter()
        .filter(|e| {
            e.fields
                .get("message")
                .is_some_and(|m| m.as_str().unwrap().starts_with("retrying"))
        })
        .count();
    assert_eq!(retries, 1);
}

// ====================================================================
// Types
// ====================================================================

#[test]
fn public_handles_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Exec>();
    assert_send_sync::<TaskSupervisor>();
    assert_send_sync::<AsyncHandle<ExecOutput>>();
    assert_send_sync::<AsyncHandle<ChainOutcome>>();
    assert_send_sync::<DynAction>();
    assert_send_sync::<Context>();
    assert_send_sync::<Error>();
    assert_send_sync::<Instruction>();
    assert_send_sync::<ExecOutput>();
    assert_send_sync::<Outcome>();
    assert_send_sync::<Chain>();
    assert_send_sync::<ExecOptions>();
}

#[test]
fn run_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let exec = Exec::new();
    assert_send(&exec.run(Greet, json!({}), Context::new(), ExecOptions::new()));
    assert_send(&exec.execute(Instruction::new(Greet), Context::new()));
    assert_send(&jido::exec::run(
        Greet,
        json!({}),
        Context::new(),
        ExecOptions::new(),
    ));
    assert_send(&Chain::new().run(&exec, json!({}), Context::new()));
}

/// Counts its params checks and its runs.
struct Counted(Arc<(AtomicUsize, AtomicUsize)>);

#[derive(Clone, Deserialize, JsonSchema)]
struct CountedParams {
    n: i64,
}

impl Action for Counted {
    type Params = CountedParams;
    type Output = Value;
    const NAME: &'static str = "counted";
    fn validate_params(&self, params: &CountedParams) -> jido::Result<()> {
        self.0.0.fetch_add(1, Ordering::SeqCst);
        if params.n < 0 {
            return Err(Error::validation("n must not be negative").with_detail("path", "n"));
        }
        Ok(())
    }
    async fn run(&self, params: CountedParams, _: &Context) -> jido::Result<Value> {
        self.0.1.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"n": params.n}))
    }
}

#[tokio::test]
async fn params_are_checked_when_execute_is_called_and_attempts_run_when_polled() {
    let counts = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let exec = Exec::new();
    let ins = Instruction::new(Counted(Arc::clone(&counts))).with_params(json!({"n": 1}));
    let run = exec.execute(ins, Context::new());
    assert_eq!(counts.0.load(Ordering::SeqCst), 1, "checked at the call");
    assert_eq!(counts.1.load(Ordering::SeqCst), 0, "not run before polled");
    drop(run);
    tokio::task::yield_now().await;
    assert_eq!(
        counts.1.load(Ordering::SeqCst),
        0,
        "a dropped future runs nothing"
    );

    let ins = Instruction::new(Counted(Arc::clone(&counts))).with_params(json!({"n": 2}));
    let outcome = exec.execute(ins, Context::new()).await;
    assert_eq!(outcome.attempts, 1);
    assert_eq!(
        outcome.result.unwrap(),
        json!({"n": 2}).as_object().unwrap().clone()
    );
    assert_eq!(counts.1.load(Ordering::SeqCst), 1);

    let ins = Instruction::new(Counted(Arc::clone(&counts))).with_params(json!({"n": -1}));
    let outcome = exec.execute(ins, Context::new()).await;
    assert_eq!(outcome.attempts, 0);
    let err = outcome.result.unwrap_err();
    assert_eq!(
        (err.kind(), err.message()),
        (ErrorKind::Validation, "n must not be negative")
    );
    assert_eq!(
        counts.1.load(Ordering::SeqCst),
        1,
        "invalid params never run"
    );
}
