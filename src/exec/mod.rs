//! Exec: the only way an action runs.
//!
//! Every run goes through the same stages, in order:
//!
//! 1. normalise params (a JSON object; `null` reads as `{}`) and context;
//! 2. check the action (its name must match `^[a-zA-Z][a-zA-Z0-9_]*$`);
//! 3. decode and validate params ([`Action::validate_params`](crate::Action::validate_params));
//! 4. put the action's metadata into the [`Context`];
//! 5. open a `jido.action` span for the attempt;
//! 6. resolve the time budget: `deadline = min(inherited deadline, now + timeout)`,
//!    failing at once with a timeout error if the budget is gone;
//! 7. run the action in a task of the executor's [`TaskSupervisor`] under
//!    that deadline (or inline in the caller when the timeout is
//!    `Duration::ZERO` and no deadline is inherited), catching panics;
//! 8. validate the output ([`Action::validate_output`](crate::Action::validate_output));
//! 9. compensate a failed attempt ([`Action::on_error`](crate::Action::on_error)),
//!    timeouts included, when the action enables it;
//! 10. close the span with the outcome;
//! 11. retry retryable failures with exponential backoff (250 ms doubling,
//!     capped at 30 s, one retry by default).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
//! use jido::prelude::*;
//! use serde_json::json;
//!
//! #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
//! struct Params { a: i64, b: i64 }
//!
//! struct Multiply;
//! impl Action for Multiply {
//!     type Params = Params;
//!     type Output = serde_json::Value;
//!     const NAME: &'static str = "multiply";
//!     async fn run(&self, p: Params, _: &Context) -> jido::Result<serde_json::Value> {
//!         Ok(json!({"product": p.a * p.b}))
//!     }
//! }
//!
//! let out = jido::exec::run(Multiply, json!({"a": 6, "b": 7}), Context::new(), ExecOptions::new()).await?;
//! assert_eq!(out.output["product"], 42);
//!
//! let err = jido::exec::run(Multiply, json!({"a": "six"}), Context::new(), ExecOptions::new()).await.unwrap_err();
//! assert_eq!(err.kind(), jido::ErrorKind::Validation);
//! assert_eq!(err.detail("path").unwrap(), "a");
//! # Ok(()) }
//! ```

mod async_handle;
mod chain;
mod options;
mod supervisor;

pub use async_handle::AsyncHandle;
pub use chain::{Chain, ChainOutcome};
pub use options::{
    DEFAULT_AWAIT_TIMEOUT, DEFAULT_BACKOFF, DEFAULT_MAX_BACKOFF, DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT, ExecOptions, Telemetry,
};
pub use supervisor::TaskSupervisor;

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures::FutureExt;
use serde_json::{Map, Value};
use tokio::time::Instant;
use tracing::{Instrument, Span, field};

use crate::action::{ActionMetadata, DynAction, Prepared, json_type_name, validate_name};
use crate::context::Context;
use crate::effect::Effect;
use crate::error::{Error, ErrorKind, Result};
use crate::instruction::Instruction;

/// A successful run: the action's output (a JSON object) and the effects
/// it pushed.
#[derive(Debug, Clone)]
pub struct ExecOutput {
    /// The output, serialised to a JSON object.
    pub output: Map<String, Value>,
    /// State operations and directives, in the order they were pushed.
    pub effects: Vec<Effect>,
}

/// Everything a run produced, success or failure: strategies use it to keep
/// the effects of a failed action.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The output, or the final error.
    pub result: Result<Map<String, Value>>,
    /// The effects pushed by the last attempt.
    pub effects: Vec<Effect>,
    /// How many attempts ran (0 when the run failed before the first one).
    pub attempts: u32,
}

impl Outcome {
    fn failed(error: Error) -> Self {
        Self {
            result: Err(error),
            effects: Vec::new(),
            attempts: 0,
        }
    }

    /// The output and effects, or the error (dropping its effects).
    ///
    /// # Errors
    ///
    /// The run's final error.
    pub fn into_result(self) -> Result<ExecOutput> {
        self.result.map(|output| ExecOutput {
            output,
            effects: self.effects,
        })
    }
}

/// An executor: a task supervisor plus default options. A `Jido` instance
/// owns one; [`Exec::global`] serves the free functions.
///
/// Cloning gives another handle to the same executor.
#[derive(Clone, Debug)]
pub struct Exec {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    supervisor: TaskSupervisor,
    defaults: ExecOptions,
}

impl Default for Exec {
    fn default() -> Self {
        Self::new()
    }
}

impl Exec {
    /// An executor with its own supervisor and Jido's defaults.
    pub fn new() -> Self {
        Self::with_defaults(ExecOptions::new())
    }

    /// An executor with its own supervisor and `defaults` for every option a
    /// run leaves unset.
    pub fn with_defaults(defaults: ExecOptions) -> Self {
        Self::with_supervisor(TaskSupervisor::new(), defaults)
    }

    /// An executor spawning into `supervisor`.
    pub fn with_supervisor(supervisor: TaskSupervisor, defaults: ExecOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                supervisor,
                defaults,
            }),
        }
    }

    /// The process-wide executor used by [`run`] and friends when the
    /// context names none.
    pub fn global() -> &'static Exec {
        static GLOBAL: OnceLock<Exec> = OnceLock::new();
        GLOBAL.get_or_init(Exec::new)
    }

    /// The supervisor owning this executor's tasks.
    pub fn supervisor(&self) -> &TaskSupervisor {
        &self.inner.supervisor
    }

    /// The default options.
    pub fn defaults(&self) -> &ExecOptions {
        &self.inner.defaults
    }

    /// Cancels every task of this executor and refuses new runs.
    pub async fn shutdown(&self) {
        self.inner.supervisor.shutdown().await;
    }

    /// Runs `action` with `params` (a JSON object) through the whole
    /// pipeline.
    ///
    /// # Errors
    ///
    /// Validation errors for bad params or output, a configuration error for
    /// a bad action name, timeout errors, the action's own error (wrapped
    /// in a compensation error when compensation ran), a cancelled error
    /// when the executor shuts down.
    pub async fn run(
        &self,
        action: impl Into<DynAction>,
        params: Value,
        ctx: Context,
        opts: ExecOptions,
    ) -> Result<ExecOutput> {
        let ins = Instruction::new(action).with_params(params).with_opts(opts);
        self.execute(ins, ctx).await.into_result()
    }

    /// Runs an instruction with its own context values and options.
    ///
    /// # Errors
    ///
    /// As [`Exec::run`].
    pub async fn run_instruction(&self, instruction: Instruction) -> Result<ExecOutput> {
        self.execute(instruction, Context::new()).await.into_result()
    }

    /// Starts a run in a supervised task and returns a handle that only its
    /// owner can wait for or cancel.
    ///
    /// # Errors
    ///
    /// A cancelled error when the executor is shut down.
    pub fn run_async(&self, instruction: Instruction, ctx: Context) -> Result<AsyncHandle<ExecOutput>> {
        let exec = self.clone();
        let handle = self
            .inner
            .supervisor
            .spawn(async move { exec.execute(instruction, ctx).await.into_result() })?;
        Ok(AsyncHandle::new(handle))
    }

    /// Runs an instruction with a base context and returns everything it
    /// produced, effects of a failed run included. Context values of
    /// `base` win over the instruction's own.
    pub async fn execute(&self, instruction: Instruction, base: Context) -> Outcome {
        let Instruction {
            action,
            params,
            context,
            opts,
            ..
        } = instruction;
        let opts = opts.or(&self.inner.defaults);

        // 1. Normalise params and context.
        let params = match params {
            Value::Object(_) => params,
            Value::Null => Value::Object(Map::new()),
            other => {
                return Outcome::failed(
                    Error::validation(format!(
                        "invalid params type: expected a JSON object, got {}",
                        json_type_name(&other)
                    ))
                    .with_detail("action", action.name()),
                );
            }
        };
        let mut ctx = base;
        if !context.is_empty() {
            let mut values = context;
            values.extend(ctx.values().iter().map(|(k, v)| (k.clone(), v.clone())));
            ctx.set_values(values);
        }
        if ctx.exec().is_none() {
            ctx = ctx.with_exec(self.clone());
        }

        // 2. Check the action.
        let meta = action.metadata();
        if let Err(err) = validate_name(meta.name) {
            return Outcome::failed(err);
        }

        // 3. Validate params.
        let prepared = match action.erased().prepare(params) {
            Ok(p) => Arc::new(p),
            Err(err) => return Outcome::failed(err),
        };

        // 4..11. Attempts, with retries.
        let max_retries = opts.get_max_retries();
        let mut delays = ExponentialBuilder::default()
            .with_min_delay(opts.get_backoff())
            .with_max_delay(opts.get_max_backoff())
            .with_factor(2.0)
            .without_max_times()
            .build();
        let mut attempt: u32 = 0;
        loop {
            let (result, effects) = self.attempt(&action, &prepared, &ctx, meta, &opts, attempt).await;
            let error = match result {
                Ok(output) => {
                    return Outcome {
                        result: Ok(output),
                        effects,
                        attempts: attempt + 1,
                    };
                }
                Err(error) => error,
            };
            let done = |error: Error| Outcome {
                result: Err(error),
                effects,
                attempts: attempt + 1,
            };
            if attempt >= max_retries || !error.retryable() || error.detail(BUDGET_EXHAUSTED).is_some() {
                return done(error);
            }
            let delay = delays.next().unwrap_or_else(|| opts.get_max_backoff());
            if ctx.deadline().is_some_and(|d| Instant::now() + delay >= d) {
                // The inherited budget cannot fit another attempt.
                return done(error);
            }
            tracing::info!(
                action = meta.name,
                attempt = attempt + 1,
                max_attempts = max_retries + 1,
                delay_ms = millis(delay),
                "retrying {} (attempt {}/{}) after {}ms backoff",
                meta.name,
                attempt + 1,
                max_retries,
                millis(delay)
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    async fn attempt(
        &self,
        action: &DynAction,
        prepared: &Arc<Prepared>,
        ctx: &Context,
        meta: ActionMetadata,
        opts: &ExecOptions,
        attempt: u32,
    ) -> (Result<Map<String, Value>>, Vec<Effect>) {
        let span = match opts.get_telemetry() {
            Telemetry::Full => tracing::info_span!(
                "jido.action",
                action = meta.name,
                attempt = attempt + 1,
                outcome = field::Empty,
                error_type = field::Empty,
                retryable = field::Empty,
            ),
            Telemetry::Silent => Span::none(),
        };

        // Resolve the time budget.
        let timeout = opts.get_timeout();
        let now = Instant::now();
        let own = (!timeout.is_zero()).then(|| now + timeout);
        let deadline = match (ctx.deadline(), own) {
            (Some(inherited), Some(own)) => Some(inherited.min(own)),
            (inherited, own) => inherited.or(own),
        };
        if let Some(deadline) = deadline {
            if deadline <= now {
                let err = Error::timeout("execution deadline exceeded before action dispatch")
                    .with_detail("action", meta.name)
                    .with_detail(BUDGET_EXHAUSTED, true);
                record(&span, &Err(err.clone()));
                return (Err(err), Vec::new());
            }
        }
        let actx = ctx.for_attempt(meta, deadline);

        let result = self
            .run_attempt(action, prepared, &actx, meta, deadline, now)
            .instrument(span.clone())
            .await;
        let result = match result {
            Err(err) if meta.compensation.enabled && err.kind() != ErrorKind::Cancelled => Err(self
                .compensate(action, prepared, &actx, meta, opts, err)
                .instrument(span.clone())
                .await),
            other => other,
        };
        record(&span, &result);
        (result, actx.take_effects())
    }

    async fn run_attempt(
        &self,
        action: &DynAction,
        prepared: &Arc<Prepared>,
        actx: &Context,
        meta: ActionMetadata,
        deadline: Option<Instant>,
        started: Instant,
    ) -> Result<Map<String, Value>> {
        let Some(deadline) = deadline else {
            // Inline: no task, no limit.
            return match AssertUnwindSafe(action.erased().run(prepared, actx))
                .catch_unwind()
                .await
            {
                Ok(result) => result,
                Err(panic) => Err(panicked(meta.name, &*panic)),
            };
        };
        let erased = Arc::clone(action.erased());
        let task_prepared = Arc::clone(prepared);
        let task_ctx = actx.clone();
        let mut handle = match self.inner.supervisor.spawn(
            async move { erased.run(&task_prepared, &task_ctx).await }.in_current_span(),
        ) {
            Ok(h) => h,
            Err(err) => return Err(err.with_detail("action", meta.name)),
        };
        match tokio::time::timeout_at(deadline, &mut handle).await {
            Ok(Ok(Some(result))) => result,
            Ok(Ok(None)) => Err(Error::cancelled(format!(
                "action {} was cancelled: task supervisor shut down",
                meta.name
            ))
            .with_detail("action", meta.name)),
            Ok(Err(join)) if join.is_panic() => Err(panicked(meta.name, &*join.into_panic())),
            Ok(Err(_)) => Err(Error::cancelled(format!("action {} was cancelled", meta.name))
                .with_detail("action", meta.name)),
            Err(_elapsed) => {
                handle.abort();
                let ms = millis(deadline.saturating_duration_since(started));
                Err(
                    Error::timeout(format!("action {} timed out after {ms}ms", meta.name))
                        .with_detail("action", meta.name)
                        .with_detail("timeout_ms", ms),
                )
            }
        }
    }

    async fn compensate(
        &self,
        action: &DynAction,
        prepared: &Arc<Prepared>,
        actx: &Context,
        meta: ActionMetadata,
        opts: &ExecOptions,
        original: Error,
    ) -> Error {
        let timeout = opts
            .get_compensation_timeout()
            .unwrap_or(meta.compensation.timeout);
        let erased = Arc::clone(action.erased());
        let task_prepared = Arc::clone(prepared);
        let task_error = original.clone();
        let cctx = actx.for_attempt(meta, Some(Instant::now() + timeout));
        let spawned = self.inner.supervisor.spawn(
            async move { erased.compensate(&task_prepared, &task_error, &cctx).await }.in_current_span(),
        );
        let envelope = original.to_envelope();
        let retry = original.retryable();
        let base = |message: String, compensated: bool| {
            Error::compensation(message)
                .with_detail("compensated", compensated)
                .with_detail("original_error", envelope.clone())
                .with_detail("action", meta.name)
                .with_retry(retry)
                .with_source(original.clone())
        };
        let orig_msg = original.message();
        let mut handle = match spawned {
            Ok(h) => h,
            Err(err) => {
                return base(format!("compensation failed for: {orig_msg}"), false)
                    .with_detail("compensation_error", err.to_envelope());
            }
        };
        match tokio::time::timeout(timeout, &mut handle).await {
            Ok(Ok(Some(Ok(result)))) => base(format!("compensation completed for: {orig_msg}"), true)
                .with_detail("compensation_result", result),
            Ok(Ok(Some(Err(err)))) => base(format!("compensation failed for: {orig_msg}"), false)
                .with_detail("compensation_error", err.to_envelope()),
            Ok(Ok(None)) => base(format!("compensation crashed for: {orig_msg}"), false)
                .with_detail("exit_reason", "cancelled"),
            Ok(Err(join)) => {
                let reason = if join.is_panic() {
                    panic_message(&*join.into_panic())
                } else {
                    "cancelled".to_owned()
                };
                base(format!("compensation crashed for: {orig_msg}"), false)
                    .with_detail("exit_reason", reason)
            }
            Err(_) => {
                handle.abort();
                base(
                    format!("compensation timed out after {}ms for: {orig_msg}", millis(timeout)),
                    false,
                )
            }
        }
    }
}

/// Detail set on a timeout that happened because the inherited budget was
/// already gone: retrying cannot help.
const BUDGET_EXHAUSTED: &str = "budget_exhausted";

fn record(span: &Span, result: &Result<Map<String, Value>>) {
    match result {
        Ok(_) => {
            span.record("outcome", "ok");
        }
        Err(err) => {
            span.record("outcome", "error");
            span.record("error_type", err.kind().as_str());
            span.record("retryable", err.retryable());
        }
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

fn panicked(action: &'static str, panic: &(dyn Any + Send)) -> Error {
    let msg = panic_message(panic);
    Error::execution(format!("action {action} panicked: {msg}"))
        .with_detail("action", action)
        .with_detail("panic", msg)
}

/// Runs `action` through the pipeline with the executor of `ctx`, or the
/// [global](Exec::global) one.
///
/// # Errors
///
/// As [`Exec::run`].
pub async fn run(
    action: impl Into<DynAction>,
    params: Value,
    ctx: Context,
    opts: ExecOptions,
) -> Result<ExecOutput> {
    let exec = ctx.exec().cloned().unwrap_or_else(|| Exec::global().clone());
    exec.run(action, params, ctx, opts).await
}

/// Runs an instruction with the [global](Exec::global) executor.
///
/// # Errors
///
/// As [`Exec::run`].
pub async fn run_instruction(instruction: Instruction) -> Result<ExecOutput> {
    Exec::global().run_instruction(instruction).await
}

/// Starts an instruction in a task of the [global](Exec::global) executor.
///
/// # Errors
///
/// A cancelled error when the global executor was shut down.
pub fn run_async(instruction: Instruction) -> Result<AsyncHandle<ExecOutput>> {
    Exec::global().run_async(instruction, Context::new())
}
