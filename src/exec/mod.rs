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
//!    failing at once with a timeout error if the budget is gone; a run
//!    nested in an action inherits that action's deadline set back by
//!    [`nested_margin`] (see [`Context::nested_deadline`]);
//! 7. run the action in a task of the executor's [`TaskSupervisor`] under
//!    that deadline (or inline in the caller when the timeout is
//!    `Duration::ZERO` and no deadline is inherited), catching panics;
//! 8. validate the output ([`Action::validate_output`](crate::Action::validate_output));
//! 9. compensate a failed attempt ([`Action::on_error`](crate::Action::on_error)),
//!    timeouts included, when the action enables it;
//! 10. close the span with the outcome;
//! 11. retry retryable failures with exponential backoff (250 ms doubling,
//!     capped at 30 s, one retry by default), logging each retry at info
//!     level; a timeout caused by an inherited deadline is not retried.
//!
//! A run stops its action when it is abandoned: dropping the `run` future,
//! an [`AsyncHandle`] that is dropped, cancelled or whose wait times out,
//! and [`Exec::shutdown`] all end the action's task (its future is
//! dropped at its next await point), so no async work keeps running in
//! the background. A thread blocked in synchronous code cannot be
//! interrupted: the caller is answered at the deadline (or at shutdown)
//! all the same, the blocked task keeps its worker thread until it
//! returns and its result is discarded, and shutdown waits for it at most
//! [`DEFAULT_SHUTDOWN_GRACE`]; see
//! [`Action::run`](crate::Action::run) ("Cancellation and blocking").
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

pub use crate::executor::{
    DEFAULT_AWAIT_TIMEOUT, DEFAULT_BACKOFF, DEFAULT_MAX_BACKOFF, DEFAULT_MAX_RETRIES,
    DEFAULT_SHUTDOWN_GRACE, DEFAULT_TIMEOUT, Exec, ExecOptions, RetryPolicy, TaskSupervisor,
    Telemetry,
};
pub use async_handle::AsyncHandle;
pub use chain::{Chain, ChainOutcome};

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::Either;
use serde_json::{Map, Value};
use tokio::time::Instant;
use tracing::{Instrument, Span, field};

use crate::action::{ActionMetadata, CompensationOptions, DynAction, Prepared, json_type_name};
use crate::context::Context;
use crate::effect::{AttemptHandle, Effect};
use crate::error::{Error, ErrorKind, Result};
use crate::executor::TrackedTask;
pub(crate) use crate::executor::{millis, panic_message};
use crate::instruction::Instruction;

/// The most a nested run's deadline is set back from the deadline of the
/// action it runs in (see [`nested_margin`]).
pub const NESTED_MARGIN_MAX: Duration = Duration::from_millis(100);

/// The share of the enclosing attempt's budget held back from nested runs:
/// `1 / NESTED_MARGIN_DIVISOR` of it, at most [`NESTED_MARGIN_MAX`] (see
/// [`nested_margin`]).
pub const NESTED_MARGIN_DIVISOR: u32 = 10;

/// The margin between an attempt's deadline and the deadline its nested
/// runs inherit, for an attempt whose budget (deadline − start) is
/// `budget`: `min(budget / 10, 100 ms)`.
///
/// Without a margin a nested run inheriting the enclosing action's
/// deadline times out at the very instant the enclosing action does, so
/// the enclosing action never sees the nested error: both fail together.
/// With it, the nested run fails first and the enclosing action has the
/// margin to handle that error (log it, record it, fall back) and return
/// its own result before its own deadline.
///
/// Why this rule: handling an error takes microseconds to a few
/// milliseconds of work, so 100 ms is ample and the cap keeps long budgets
/// (seconds, minutes) almost whole for the nested run; a fixed margin
/// alone would swallow short budgets (a 50 ms action would leave nothing
/// to a nested run), so below 1 s the margin is a tenth of the budget
/// instead, and the nested run always keeps 90 % of it. The margin is
/// computed once per attempt, from the attempt's whole budget, so every
/// nested run (and every retry of one) started in that attempt inherits
/// the same deadline. A deadline set by hand with
/// [`Context::with_deadline`] is inherited as is.
///
/// ```
/// use std::time::Duration;
/// use jido::exec::nested_margin;
///
/// assert_eq!(nested_margin(Duration::from_secs(1)), Duration::from_millis(100));
/// assert_eq!(nested_margin(Duration::from_secs(30)), Duration::from_millis(100));
/// assert_eq!(nested_margin(Duration::from_millis(200)), Duration::from_millis(20));
/// ```
pub fn nested_margin(budget: Duration) -> Duration {
    // Budgets of a second or more (the default 30 s) skip the division.
    if budget >= NESTED_MARGIN_MAX * NESTED_MARGIN_DIVISOR {
        return NESTED_MARGIN_MAX;
    }
    budget / NESTED_MARGIN_DIVISOR
}

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

impl Exec {
    /// Runs `action` with `params` (a JSON object) through the whole
    /// pipeline.
    ///
    /// As with [`execute`](Exec::execute), the params are normalised,
    /// decoded and validated when `run` is called; the returned future runs
    /// the attempts (dropped before it is polled, it runs none).
    ///
    /// # Errors
    ///
    /// Validation errors for bad params or output, a configuration error for
    /// a bad action name, timeout errors, the action's own error (wrapped
    /// in a compensation error when compensation ran), a cancelled error
    /// when the executor shuts down.
    pub fn run(
        &self,
        action: impl Into<DynAction>,
        params: Value,
        ctx: Context,
        opts: ExecOptions,
    ) -> impl Future<Output = Result<ExecOutput>> + Send + '_ {
        // Mapped, not awaited in an `async fn`: that would hold the
        // arguments and the run future side by side, and copy the run
        // future into its state on the first poll.
        self.execute_parts(action.into(), params, Map::new(), opts, ctx)
            .map(Outcome::into_result)
    }

    /// Runs an instruction with its own context values and options.
    ///
    /// # Errors
    ///
    /// As [`Exec::run`].
    pub async fn run_instruction(&self, instruction: Instruction) -> Result<ExecOutput> {
        self.execute(instruction, Context::new())
            .await
            .into_result()
    }

    /// Starts a run in a supervised task and returns a handle that only its
    /// owner can wait for or cancel. Dropping the handle cancels the run.
    ///
    /// # Errors
    ///
    /// A cancelled error when the executor is shut down.
    pub fn run_async(
        &self,
        instruction: Instruction,
        ctx: Context,
    ) -> Result<AsyncHandle<ExecOutput>> {
        let exec = self.clone();
        let handle = self
            .supervisor()
            .spawn_tracked(async move { exec.execute(instruction, ctx).await.into_result() })?;
        Ok(AsyncHandle::new(handle))
    }

    /// Runs an instruction with a base context and returns everything it
    /// produced, effects of a failed run included. Context values of
    /// `base` win over the instruction's own.
    ///
    /// The params are normalised, decoded and validated when `execute` is
    /// called; the returned future runs the attempts (dropped before it is
    /// polled, it runs none).
    pub fn execute(
        &self,
        instruction: Instruction,
        base: Context,
    ) -> impl Future<Output = Outcome> + Send + '_ {
        let Instruction {
            action,
            params,
            context,
            opts,
            ..
        } = instruction;
        self.execute_parts(action, params, context, opts, base)
    }

    /// Runs the synchronous stages at once, so the returned future only
    /// holds what the attempts need (it is moved on every run: its size is
    /// on the hot path).
    pub(crate) fn execute_parts(
        &self,
        action: DynAction,
        params: Value,
        context: Map<String, Value>,
        opts: ExecOptions,
        base: Context,
    ) -> impl Future<Output = Outcome> + Send + '_ {
        match self.prepare(action, params, context, opts, base) {
            // A spawned run is boxed once, whole: it holds the attempt's
            // task, timer and shutdown wait, and the caller's future (a
            // `cmd`, a strategy, a chain) is moved several times; in a box
            // only its pointer moves.
            Ok(ready) if !ready.inline() => Either::Left(Box::pin(ready.run::<Spawned>(self))),
            // An inline run holds none of that (the action's own future is
            // boxed by `run_owned`): it is small enough to stay in the
            // caller's future, and a run allocates no box of its own.
            Ok(ready) => Either::Right(Either::Left(ready.run::<Inline>(self))),
            Err(error) => Either::Right(Either::Right(std::future::ready(Outcome::failed(error)))),
        }
    }

    /// Stages 1 to 3: normalise, check the action, validate the params.
    fn prepare(
        &self,
        action: DynAction,
        params: Value,
        context: Map<String, Value>,
        opts: ExecOptions,
        base: Context,
    ) -> Result<Ready> {
        let meta = action.meta();
        if self.supervisor().is_shut_down() {
            return Err(shut_down(meta.name));
        }
        let opts = opts.or(self.defaults());

        // 1. Normalise params and context.
        let params = match params {
            Value::Object(_) => params,
            Value::Null => Value::Object(Map::new()),
            other => {
                return Err(Error::validation(format!(
                    "invalid params type: expected a JSON object, got {}",
                    json_type_name(&other)
                ))
                .with_detail("action", meta.name));
            }
        };
        let mut ctx = base;
        if !context.is_empty() {
            let mut values = context;
            values.extend(ctx.values().iter().map(|(k, v)| (k.clone(), v.clone())));
            ctx.set_values(values);
        }

        // 2. Check the action.
        action.erased().check_name()?;

        // 3. Validate params.
        let prepared = action.erased().prepare(params)?;
        Ok(Ready {
            action,
            prepared,
            opts,
            ctx,
        })
    }
}

/// A run whose params passed validation.
struct Ready {
    action: DynAction,
    prepared: Prepared,
    opts: ExecOptions,
    ctx: Context,
}

impl Ready {
    /// Whether every attempt runs inline, in the caller: a zero timeout
    /// and no inherited deadline (both hold for the whole run).
    fn inline(&self) -> bool {
        is_inline(&self.opts, &self.ctx)
    }

    /// Stages 4 to 11: attempts, with retries, driven as `M` says. Nested
    /// runs started with the action's context stay on this executor.
    ///
    /// A spawned run's future is what a run allocates (it is boxed whole,
    /// see [`Exec::execute_parts`]): whatever it holds across an await is
    /// in that box, and a box past ~1 KB leaves glibc's per-thread cache
    /// for its slow path. So the attempt's synchronous steps are plain
    /// functions ([`Run::begin`], [`Run::spawn`]) whose locals are not
    /// kept, the attempt's span lives in its shared cell only, and the
    /// backoff's timer is boxed (retries are rare).
    ///
    /// An `async move` block rather than an `async fn`: the latter would
    /// keep `self` twice in the future (the argument, and the local it is
    /// moved into on the first poll).
    #[allow(clippy::manual_async_fn)] // see above: `async fn` keeps `self` twice
    fn run<M: Attempts>(self, exec: &Exec) -> impl Future<Output = Outcome> + Send + '_ {
        async move {
            let run = Run {
                exec,
                ready: &self,
                meta: self.action.meta(),
            };
            let max_retries = self.opts.get_max_retries();
            let mut attempt: u32 = 0;
            loop {
                let (result, effects, dispatched) = M::attempt(&run, attempt).await;
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
                if !dispatched || attempt >= max_retries || !error.retryable() {
                    return done(error);
                }
                // Computed when needed: the iterator would sit in every run's
                // future.
                let delay = self.opts.retry_policy().delays().nth(attempt as usize);
                let Some(delay) = delay else {
                    return done(error);
                };
                if self
                    .ctx
                    .nested_deadline()
                    .is_some_and(|d| instant_after(Instant::now(), delay) >= d)
                {
                    // The inherited budget cannot fit another attempt.
                    return done(error);
                }
                let meta = self.action.meta();
                tracing::info!(
                    action = meta.name,
                    attempt = attempt + 1,
                    max_retries,
                    delay_ms = millis(delay),
                    "retrying {} (attempt {}/{}) after {}ms backoff",
                    meta.name,
                    attempt + 1,
                    max_retries,
                    millis(delay)
                );
                Box::pin(tokio::time::sleep(delay)).await;
                attempt += 1;
            }
        }
    }
}

/// Whether a run with these options and base context runs its attempts
/// inline: a zero timeout and no inherited deadline.
fn is_inline(opts: &ExecOptions, ctx: &Context) -> bool {
    opts.get_timeout().is_zero() && ctx.nested_deadline().is_none()
}

/// What an attempt gave: its result, its effects, and whether the action
/// was dispatched (`false` when the budget was gone).
type Attempted = (Result<Map<String, Value>>, Vec<Effect>, bool);

/// How a run drives its attempts: [`Inline`] or [`Spawned`].
trait Attempts {
    /// One attempt of `run`.
    fn attempt<'a>(run: &'a Run<'a>, attempt: u32) -> impl Future<Output = Attempted> + Send + 'a;
}

/// Attempts in the caller, with no time limit (a zero timeout and no
/// inherited deadline): the run's future holds no task, timer or
/// shutdown wait.
struct Inline;

impl Attempts for Inline {
    fn attempt<'a>(run: &'a Run<'a>, attempt: u32) -> impl Future<Output = Attempted> + Send + 'a {
        run.attempt_inline(attempt)
    }
}

/// Attempts in tasks of the executor's supervisor, under a deadline.
struct Spawned;

impl Attempts for Spawned {
    fn attempt<'a>(run: &'a Run<'a>, attempt: u32) -> impl Future<Output = Attempted> + Send + 'a {
        run.attempt(attempt)
    }
}

/// A started attempt: its context, its cell, and its time budget
/// (`Some((deadline, started))` when it has a time limit).
type Begun = (Context, AttemptHandle, Option<(Instant, Instant)>);

/// One run of one action: what every attempt needs (three pointers: it
/// is held across every await of the run).
struct Run<'a> {
    exec: &'a Exec,
    ready: &'a Ready,
    meta: &'a ActionMetadata,
}

impl Run<'_> {
    fn action(&self) -> &DynAction {
        &self.ready.action
    }

    fn prepared(&self) -> &Prepared {
        &self.ready.prepared
    }

    fn meta(&self) -> &ActionMetadata {
        self.meta
    }

    fn opts(&self) -> &ExecOptions {
        &self.ready.opts
    }

    fn ctx(&self) -> &Context {
        &self.ready.ctx
    }
}

impl Run<'_> {
    /// One inline attempt: span, run in the caller, compensation.
    async fn attempt_inline(&self, attempt: u32) -> Attempted {
        let (actx, cell, budget) = match self.begin(attempt) {
            Ok(begun) => begun,
            Err(gone) => return (Err(gone), Vec::new(), false),
        };
        // `Inline` is only chosen when `is_inline` holds, and then `begin`
        // gives no budget: the attempt has no time limit.
        let _ = budget;
        let result = self.run_inline(actx, &cell).await;
        let result = match self.compensation(result, attempt, &cell) {
            Ok(result) => result,
            Err(compensating) => Err(compensating.await),
        };
        Self::settled(result, &cell)
    }

    /// One attempt: span, budget, run, compensation. The flag is `false`
    /// when the action was not dispatched because the budget was gone.
    async fn attempt(&self, attempt: u32) -> Attempted {
        let (actx, cell, budget) = match self.begin(attempt) {
            Ok(begun) => begun,
            Err(gone) => return (Err(gone), Vec::new(), false),
        };
        let result = match budget {
            // No budget: inline (a spawned run always has one; an attempt
            // without a time limit never goes to a task).
            None => self.run_inline(actx, &cell).await,
            // The context moves into the task, which enters the span around
            // each poll (the caller only waits, so it does not: that would
            // wrap and copy the whole wait); the effects are read through
            // `cell`.
            Some((deadline, started)) => match self.spawn(actx, &cell) {
                Ok(task) => self.join(task, deadline, started).await,
                Err(err) => Err(err),
            },
        };
        let result = match self.compensation(result, attempt, &cell) {
            Ok(result) => result,
            Err(compensating) => Err(compensating.await),
        };
        Self::settled(result, &cell)
    }

    /// The end of an attempt, once compensated: the span's outcome, the
    /// effects.
    fn settled(result: Result<Map<String, Value>>, cell: &AttemptHandle) -> Attempted {
        record(cell.span(), &result);
        (result, cell.take_effects(), true)
    }

    /// The result of an attempt as it stands, or the compensation to run
    /// for its failure, timeouts included, cancellation not (boxed: the
    /// cold path would otherwise triple the size of every run's future).
    /// A plain function, so that the result is not held across the
    /// compensation's await (it moves into the box).
    fn compensation<'a>(
        &'a self,
        result: Result<Map<String, Value>>,
        attempt: u32,
        cell: &AttemptHandle,
    ) -> std::result::Result<
        Result<Map<String, Value>>,
        std::pin::Pin<Box<impl Future<Output = Error> + Send + 'a>>,
    > {
        match result {
            Err(err) if self.meta().compensation.enabled && err.kind() != ErrorKind::Cancelled => {
                Err(Box::pin(
                    self.compensate(err, attempt + 1)
                        .instrument(cell.span().clone()),
                ))
            }
            other => Ok(other),
        }
    }

    /// The synchronous start of an attempt: its span, its time budget
    /// (`Some((deadline, started))` when it has a time limit) and its
    /// context and cell; the timeout error when the budget is gone.
    fn begin(&self, attempt: u32) -> Result<Begun> {
        let meta = self.meta();
        let span = match self.opts().get_telemetry() {
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
        let timeout = self.opts().get_timeout();
        let inherited = self.ctx().nested_deadline();
        // Inline runs (zero timeout, no inherited deadline) never read the
        // clock, so they have no budget.
        let now = if is_inline(self.opts(), self.ctx()) {
            None
        } else {
            Some(Instant::now())
        };
        let own = now
            .filter(|_| !timeout.is_zero())
            .map(|now| instant_after(now, timeout));
        let deadline = match (inherited, own) {
            (Some(inherited), Some(own)) => Some(inherited.min(own)),
            (inherited, own) => inherited.or(own),
        };
        let budget = deadline.zip(now);
        if budget.is_some_and(|(deadline, now)| deadline <= now) {
            let error = Error::timeout("execution deadline exceeded before action dispatch")
                .with_detail("action", meta.name);
            record_error(&span, &error);
            return Err(error);
        }
        // Nested runs inherit the deadline set back by the margin.
        let nested = budget.map(|(deadline, now)| {
            deadline - nested_margin(deadline.saturating_duration_since(now))
        });
        let (actx, cell) =
            self.ctx()
                .for_attempt(self.action(), deadline, nested, self.exec.clone(), span);
        Ok((actx, cell, budget))
    }

    /// An attempt in the caller, with no time limit, catching panics, in
    /// the attempt's span.
    ///
    /// A plain function: the boxed future owns the context, and the
    /// returned one holds that box and two references (an `async fn`
    /// would keep the context argument in it as well, and `instrument` a
    /// clone of the span).
    fn run_inline<'s>(
        &'s self,
        actx: Context,
        cell: &'s AttemptHandle,
    ) -> impl Future<Output = Result<Map<String, Value>>> + Send + 's {
        let mut attempt =
            AssertUnwindSafe(Arc::clone(self.action().erased()).run_owned(self.prepared(), actx))
                .catch_unwind();
        std::future::poll_fn(move |cx| {
            let _entered = cell.span().enter();
            attempt.poll_unpin(cx).map(|caught| match caught {
                Ok(result) => result,
                Err(panic) => Err(panicked(self.meta().name, &*panic)),
            })
        })
    }

    /// Starts an attempt in a supervised task (dropping the returned task,
    /// when the caller gives up, aborts it).
    fn spawn(
        &self,
        actx: Context,
        cell: &AttemptHandle,
    ) -> Result<TrackedTask<Result<Map<String, Value>>>> {
        Arc::clone(self.action().erased())
            .spawn_run(
                self.prepared(),
                actx,
                self.exec.supervisor(),
                cell.poll_flag(),
            )
            .map_err(|err| err.with_detail("action", self.meta().name))
    }

    /// Waits for an attempt's task until its deadline.
    async fn join(
        &self,
        mut task: TrackedTask<Result<Map<String, Value>>>,
        deadline: Instant,
        started: Instant,
    ) -> Result<Map<String, Value>> {
        // What the task gave is handled in its own arm and never held
        // across the wait below: it would be in every run's future.
        if let Ok(joined) = task.join_until(deadline).await {
            return self.joined(joined);
        }
        // The attempt is gone before compensation or a retry starts,
        // unless its thread is blocked in synchronous code: the caller is
        // answered at the deadline all the same.
        task.abandon().await;
        let name = self.meta().name;
        let ms = millis(deadline.saturating_duration_since(started));
        Err(
            Error::timeout(format!("action {name} timed out after {ms}ms"))
                .with_detail("action", name)
                .with_detail("timeout_ms", ms),
        )
    }

    /// What an attempt's task gave, before its deadline.
    fn joined(
        &self,
        joined: std::result::Result<Option<Result<Map<String, Value>>>, tokio::task::JoinError>,
    ) -> Result<Map<String, Value>> {
        let name = self.meta().name;
        match joined {
            Ok(Some(result)) => result,
            Ok(None) => Err(Error::cancelled(format!(
                "action {name} was cancelled: task supervisor shut down"
            ))
            .with_detail("action", name)),
            Err(join) if join.is_panic() => Err(panicked(name, &*join.into_panic())),
            Err(_) => Err(Error::cancelled(format!("action {name} was cancelled"))
                .with_detail("action", name)),
        }
    }

    /// Runs the action's compensation after attempt `attempt` (1-based)
    /// failed with `original`.
    async fn compensate(&self, original: Error, attempt: u32) -> Error {
        let meta = self.meta();
        let timeout = self
            .opts()
            .get_compensation_timeout()
            .unwrap_or(meta.compensation.timeout);
        let copts = CompensationOptions::new(timeout, *self.opts(), attempt);
        let deadline = instant_after(Instant::now(), timeout);
        let nested = deadline - nested_margin(timeout);
        // The attempt's context but for its deadlines and effect sink.
        // Its task runs in the current span (the attempt's), through the
        // wrapper below, not the cell's.
        let (cctx, cell) = self.ctx().for_attempt(
            self.action(),
            Some(deadline),
            Some(nested),
            self.exec.clone(),
            Span::none(),
        );
        let flag = cell.poll_flag();
        let compensation = Arc::clone(self.action().erased()).compensate(
            self.prepared(),
            original.clone(),
            cctx,
            copts,
        );
        let spawned = self
            .exec
            .supervisor()
            .spawn_tracked_with(compensation.in_current_span(), flag);
        let envelope = original.to_envelope();
        let retry = original.retryable();
        let orig_msg = original.message().to_owned();
        let base = move |message: String, compensated: bool| {
            Error::compensation(message)
                .with_detail("compensated", compensated)
                .with_detail("original_error", envelope)
                .with_detail("action", meta.name)
                .with_retry(retry)
                .with_source(original)
        };
        let mut task = match spawned {
            Ok(task) => task,
            Err(err) => {
                return base(format!("compensation failed for: {orig_msg}"), false)
                    .with_detail("compensation_error", err.to_envelope());
            }
        };
        match task.join_until(deadline).await {
            Ok(Ok(Some(Ok(result)))) => {
                base(format!("compensation completed for: {orig_msg}"), true)
                    .with_detail("compensation_result", result)
            }
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
                task.abandon().await;
                base(
                    format!(
                        "compensation timed out after {}ms for: {orig_msg}",
                        millis(timeout)
                    ),
                    false,
                )
            }
        }
    }
}

/// `now + d`, or a point ~30 years away when that overflows (a timeout of
/// `Duration::MAX` means "no practical limit", not a panic).
fn instant_after(now: Instant, d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);
    now.checked_add(d).unwrap_or_else(|| now + FAR)
}

fn shut_down(action: &'static str) -> Error {
    Error::cancelled("task supervisor is shut down").with_detail("action", action)
}

fn record(span: &Span, result: &Result<Map<String, Value>>) {
    match result {
        Ok(_) => {
            span.record("outcome", "ok");
        }
        Err(err) => record_error(span, err),
    }
}

fn record_error(span: &Span, err: &Error) {
    span.record("outcome", "error");
    span.record("error_type", err.kind().as_str());
    span.record("retryable", err.retryable());
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
    let exec = ctx
        .exec()
        .cloned()
        .unwrap_or_else(|| Exec::global().clone());
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
