//! Directives: effects described as data, executed by the runtime.
//!
//! An agent's `cmd` never performs side effects itself: it returns
//! [`Directive`]s (emit a signal, spawn a child, schedule a message, stop)
//! and the runtime executes them in order. Directives are plain values:
//! build them with the constructors on [`Directive`], match on them,
//! compare them in tests.
//!
//! Constructors give Jido's defaults. A directive with one optional
//! setting has a pair of constructors ([`emit`](Directive::emit) /
//! [`emit_to`](Directive::emit_to), [`stop`](Directive::stop) /
//! [`stop_with`](Directive::stop_with), [`stop_child`](Directive::stop_child)
//! / [`stop_child_with`](Directive::stop_child_with), …); one with several
//! returns a typed builder ([`SpawnAgent`], [`Cron`], [`RunInstruction`])
//! that becomes a `Directive` with `.into()` (and an
//! [`Effect`](crate::effect::Effect) the same way, so
//! [`Context::push_effect`](crate::Context::push_effect) takes it as is).
//! The options a directive carries are typed too ([`ChildOptions`],
//! [`OnParentDeath`], [`Restart`], [`StopReason`], [`ErrorPolicy`]); their
//! `from_json` / `parse` forms are for directives that arrive as data
//! (signals, LLM tool calls).
//!
//! ```
//! use std::time::Duration;
//! use jido::directive::{Directive, StopReason};
//! use jido::signal::Signal;
//! use serde_json::json;
//!
//! let directives: Vec<Directive> = vec![
//!     Directive::emit(Signal::new("order.placed", json!({"id": 7}))),
//!     Directive::schedule(Duration::from_secs(5), json!({"check": "payment"})),
//!     Directive::cron("*/5 * * * *", json!({"poll": true})).job_id("poll").into(),
//!     Directive::stop_child_with("payment", StopReason::Shutdown),
//!     Directive::stop(),
//! ];
//! match &directives[4] {
//!     Directive::Stop { reason } => assert_eq!(*reason, StopReason::Normal),
//!     other => panic!("unexpected {other:?}"),
//! }
//! ```
//!
//! Custom directives implement [`CustomDirective`] and travel as
//! [`Directive::Custom`]; the runtime logs and skips one it cannot execute.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::instruction::Instruction;
use crate::signal::Signal;
use crate::signal::dispatch::DispatchConfig;

mod builders;
mod child;
mod error_policy;

pub use builders::{Cron, RunInstruction};
pub(crate) use child::ChildValue;
pub use child::{ChildAgent, ChildKind, ChildOptions, OnParentDeath, Placement, SpawnAgent};
pub use error_policy::{ErrorDecision, ErrorEvent, ErrorPolicy};

/// The `context` values of the Error directives built by the pure core.
pub mod error_context {
    /// Normalising the input of `cmd` failed.
    pub const NORMALIZE: &str = "normalize";
    /// An instruction failed.
    pub const INSTRUCTION: &str = "instruction";
    /// An instruction result fed back to a strategy was malformed or
    /// unexpected.
    pub const INSTRUCTION_RESULT: &str = "instruction_result";
    /// The FSM strategy refused a transition.
    pub const FSM_TRANSITION: &str = "fsm_transition";
    /// A strategy received a command it does not know.
    pub const STRATEGY_COMMAND: &str = "strategy_command";
    /// The agent's `on_before_cmd` hook failed.
    pub const ON_BEFORE_CMD: &str = "on_before_cmd";
    /// A signal could not be routed: no route matched, or an untrusted
    /// signal used a reserved runtime type.
    pub const ROUTING: &str = "routing";
    /// A directive could not be executed (a custom directive without an
    /// executor).
    pub const DIRECTIVE: &str = "directive";
}

/// Default `result_action` of [`Directive::RunInstruction`].
pub const DEFAULT_RESULT_ACTION: &str = "instruction_result";
/// Default `timezone` of [`Directive::Cron`].
pub const DEFAULT_TIMEZONE: &str = "Etc/UTC";
/// Signal type a non-signal [`Directive::Schedule`] message is wrapped in.
pub const SCHEDULED_SIGNAL_TYPE: &str = "jido.scheduled";
/// Signal type a non-signal [`Directive::Cron`] message is wrapped in.
pub const CRON_TICK_SIGNAL_TYPE: &str = "jido.cron_tick";

/// An effect for the runtime to execute.
///
/// Field meanings and defaults follow Jido's directives. Each variant has
/// a constructor giving the defaults ([`Directive::emit`],
/// [`Directive::spawn_agent`], [`Directive::cron`], …).
#[non_exhaustive]
#[derive(Debug, Clone)]
pub enum Directive {
    /// Send a signal. With no `dispatch` the runtime uses the agent's
    /// default dispatch, and without one the signal goes back into the
    /// agent's own mailbox (it is routed like any incoming signal).
    ///
    /// In-process targets (actors, agents, process groups, channels with
    /// room, logger, console, noop) get the signal at once, in the agent's
    /// handler, so signals arrive in the order they were emitted and
    /// before anything the agent does next. Targets that must wait (HTTP,
    /// webhook, synchronous actor delivery) are served in a supervised
    /// task, at most
    /// [`max_concurrent_dispatches`](crate::server::ServerOptions::max_concurrent_dispatches)
    /// at once per agent; beyond that the Emit fails with a queue-overflow
    /// error handed to the error policy.
    Emit {
        /// The signal.
        signal: Signal,
        /// Where to deliver it (`None`: the default, see above).
        dispatch: Option<DispatchConfig>,
    },
    /// Send a signal to the agent's parent, by id. Built by
    /// [`Directive::emit_to_parent`], which only does so while the agent
    /// has a live parent.
    EmitToParent {
        /// The signal.
        signal: Signal,
        /// The parent agent's id.
        parent_id: String,
    },
    /// Hand an error to the agent's error policy.
    Error {
        /// The error.
        error: Error,
        /// Where it happened, e.g. `"instruction"` (see [`error_context`]).
        context: String,
    },
    /// Start an untracked child (anything, not necessarily an agent).
    Spawn {
        /// How to start it.
        child: ChildSpec,
        /// A tag for logs.
        tag: Option<String>,
    },
    /// Start a child agent, tracked by the parent under `tag`.
    ///
    /// The runtime reserves `tag`, starts the child off the parent's
    /// handler and tracks it once the child announces its start (the
    /// parent then processes `jido.agent.child.started`); a start that
    /// fails is logged and leaves nothing on the parent. The child
    /// inherits the parent's instance and custom directive executors. It
    /// runs linked under the instance supervisor, or, for a parent
    /// embedded without an instance, under the parent's own supervisor;
    /// with neither, a child whose `on_parent_death` is `continue` or
    /// `emit_orphan` is refused with a configuration error for the error
    /// policy (see [`ServerOptions::jido`](crate::server::ServerOptions::jido)).
    /// A failed start also gives the parent `jido.agent.child.start_failed`
    /// `{parent_id, child_id, tag, error}`, and so does a `tag` already in
    /// use (a tracked, starting or hosted child): nothing is started, the
    /// error is a validation error "tag in use" (details `reason:
    /// "tag_in_use"`, `tag`, `child_id`). Jido only logs a failed start;
    /// here the parent learns it as a signal (the error policy is not
    /// involved).
    ///
    /// A child described by a [`ChildKind`] (a registered kind and a
    /// [`Placement`], instead of a value) is handed to the instance's
    /// [`ChildHost`](crate::server::ChildHost), which starts it from its
    /// kind wherever its placement says (feature `cluster`: on a node of
    /// the cluster, see `docs/cluster.md`) with the options as data
    /// ([`ChildOptions::to_json`]); its tag, StopChild, exit signal and
    /// status entry work as for a local child. Without a host the spawn
    /// fails (`jido.agent.child.start_failed` and a configuration error for
    /// the error policy). `restart` applies to it as the host decides
    /// (the cluster's host restarts it, placed anew, after an end its
    /// policy restarts, with the instance's limits: see `docs/cluster.md`).
    /// Unlike one of an agent value, such a SpawnAgent has a data form in
    /// the durable outbox: a journaled or checkpointed parent issues it
    /// again after a restore.
    SpawnAgent {
        /// The child: an agent value (any agent type) or a [`ChildKind`].
        agent: ChildAgent,
        /// The tag the parent knows the child by.
        tag: String,
        /// Server options for the child (`id`, `on_parent_death`, …);
        /// the child's id defaults to `"<parent id>/<tag>"`.
        options: ChildOptions,
        /// Free metadata handed to the child with its parent reference.
        meta: Map<String, Value>,
        /// Restart policy under the instance supervisor.
        restart: Restart,
    },
    /// Become the parent of an existing agent.
    ///
    /// A request to the child and its answer, never awaited inside the
    /// parent's handler: `tag` is reserved meanwhile and released on a
    /// refusal, the child's end, or after 5 s without an answer. The child
    /// refuses when it has a parent or when the would-be parent descends
    /// from it. Refusals are logged (warning, with a `reason`).
    AdoptChild {
        /// The child agent's id.
        child: String,
        /// The tag to track it under.
        tag: String,
        /// Free metadata handed to the child.
        meta: Map<String, Value>,
    },
    /// Stop the child tracked under `tag` (an unknown tag is a no-op).
    StopChild {
        /// The child's tag.
        tag: String,
        /// The reason given to the child (default normal).
        reason: StopReason,
    },
    /// Deliver `message` to the agent itself after `delay`.
    Schedule {
        /// How long to wait.
        delay: Duration,
        /// What to deliver; JSON is wrapped as a `"jido.scheduled"`
        /// signal `{message}`.
        message: ScheduledMessage,
    },
    /// Deliver `message` to the agent on a cron schedule.
    Cron {
        /// The cron expression.
        cron: String,
        /// What to deliver on each tick; JSON is wrapped as a
        /// `"jido.cron_tick"` signal `{job_id, message}`.
        message: ScheduledMessage,
        /// The job's id, used by [`Directive::CronCancel`] (a UUIDv7 by
        /// default).
        job_id: String,
        /// The time zone of the expression (default `"Etc/UTC"`).
        timezone: String,
    },
    /// Cancel a cron job.
    CronCancel {
        /// The job's id.
        job_id: String,
    },
    /// Run an instruction in the runtime, then feed its result back to the
    /// agent's `cmd` as the strategy command `result_action` (see
    /// [`crate::strategy::instruction_feedback`]).
    RunInstruction {
        /// The instruction.
        instruction: Box<Instruction>,
        /// The strategy command the result comes back as (default
        /// `"instruction_result"`).
        result_action: String,
        /// Free metadata passed back with the result.
        meta: Map<String, Value>,
    },
    /// Stop the agent. Queued directives are dropped.
    Stop {
        /// Why (default normal).
        reason: StopReason,
    },
    /// A directive defined outside this crate.
    Custom(Arc<dyn CustomDirective>),
}

impl Directive {
    /// Emits `signal` through the default dispatch (or back to the agent
    /// itself when there is none).
    pub fn emit(signal: Signal) -> Self {
        Directive::Emit {
            signal,
            dispatch: None,
        }
    }

    /// Emits `signal` through `dispatch`.
    pub fn emit_to(signal: Signal, dispatch: DispatchConfig) -> Self {
        Directive::Emit {
            signal,
            dispatch: Some(dispatch),
        }
    }

    /// As [`emit_to_parent`](Directive::emit_to_parent), from an agent's
    /// state: what an action sees as [`Context::state`](crate::Context::state).
    ///
    /// ```
    /// # use jido::prelude::*;
    /// use jido::signal::Signal;
    /// use serde_json::json;
    ///
    /// # async fn run(ctx: &Context) {
    /// if let Some(state) = ctx.state() {
    ///     if let Some(d) = Directive::emit_to_parent_of(state, Signal::new("job.done", json!({}))) {
    ///         ctx.push_effect(d);
    ///     }
    /// }
    /// # }
    /// ```
    pub fn emit_to_parent_of(state: &crate::state::StateMap, signal: Signal) -> Option<Self> {
        let parent_id = crate::state::parent_id_of(state)?;
        Some(Directive::EmitToParent {
            signal,
            parent_id: parent_id.to_owned(),
        })
    }

    /// An Error directive.
    pub fn error(error: Error, context: impl Into<String>) -> Self {
        Directive::Error {
            error,
            context: context.into(),
        }
    }

    /// Starts an untracked child with `child` (no tag).
    pub fn spawn(child: ChildSpec) -> Self {
        Directive::Spawn { child, tag: None }
    }

    /// Starts an untracked child with `child`, tagged `tag` in logs.
    pub fn spawn_tagged(child: ChildSpec, tag: impl Into<String>) -> Self {
        Directive::Spawn {
            child,
            tag: Some(tag.into()),
        }
    }

    /// Starts `agent` (an [`AgentState`](crate::AgentState), or a
    /// [`ChildKind`] for a child started from a registered kind, possibly
    /// on another node) as a child tracked under `tag`: a [`SpawnAgent`]
    /// builder for the child's options (id, `on_parent_death`, …), meta and
    /// restart policy, turned into a directive with `.into()`. Defaults: no
    /// options, empty meta, [`Restart::Transient`].
    ///
    /// ```
    /// # use jido::prelude::*;
    /// # struct Worker;
    /// # impl Agent for Worker { const NAME: &'static str = "worker"; type Schema = (); }
    /// use jido::directive::{OnParentDeath, Restart};
    ///
    /// # let worker = AgentState::new(Worker, AgentOptions::new());
    /// let d: Directive = Directive::spawn_agent(worker, "w1")
    ///     .on_parent_death(OnParentDeath::Continue)
    ///     .restart(Restart::Permanent)
    ///     .into();
    /// assert_eq!(d.kind(), "spawn_agent");
    /// ```
    pub fn spawn_agent(agent: impl Into<ChildAgent>, tag: impl Into<String>) -> SpawnAgent {
        SpawnAgent::new(agent, tag)
    }

    /// Adopts the agent with id `child` under `tag`, with empty meta.
    pub fn adopt_child(child: impl Into<String>, tag: impl Into<String>) -> Self {
        Self::adopt_child_with_meta(child, tag, Map::new())
    }

    /// Adopts the agent with id `child` under `tag`, handing it `meta`
    /// (`__parent__.meta`).
    pub fn adopt_child_with_meta(
        child: impl Into<String>,
        tag: impl Into<String>,
        meta: Map<String, Value>,
    ) -> Self {
        Directive::AdoptChild {
            child: child.into(),
            tag: tag.into(),
            meta,
        }
    }

    /// Stops the child tagged `tag` with the normal reason.
    pub fn stop_child(tag: impl Into<String>) -> Self {
        Self::stop_child_with(tag, StopReason::Normal)
    }

    /// Stops the child tagged `tag` with `reason`.
    ///
    /// ```
    /// use jido::directive::{Directive, StopReason};
    ///
    /// let d = Directive::stop_child_with("w1", "quota");
    /// assert!(matches!(d, Directive::StopChild { ref tag, reason: StopReason::Custom(ref r) } if tag == "w1" && r == "quota"));
    /// ```
    pub fn stop_child_with(tag: impl Into<String>, reason: impl Into<StopReason>) -> Self {
        Directive::StopChild {
            tag: tag.into(),
            reason: reason.into(),
        }
    }

    /// Delivers `message` to the agent after `delay`.
    pub fn schedule(delay: Duration, message: impl Into<ScheduledMessage>) -> Self {
        Directive::Schedule {
            delay,
            message: message.into(),
        }
    }

    /// A cron job: a [`Cron`] builder for its job id (default a new
    /// UUIDv7) and time zone (default `"Etc/UTC"`), turned into a
    /// directive with `.into()`.
    ///
    /// ```
    /// use jido::directive::Directive;
    /// use serde_json::json;
    ///
    /// let d: Directive = Directive::cron("0 9 * * *", json!({"report": "daily"}))
    ///     .job_id("daily-report")
    ///     .timezone("Europe/Paris")
    ///     .into();
    /// assert!(matches!(d, Directive::Cron { ref job_id, ref timezone, .. } if job_id == "daily-report" && timezone == "Europe/Paris"));
    /// ```
    pub fn cron(cron: impl Into<String>, message: impl Into<ScheduledMessage>) -> Cron {
        Cron::new(cron, message)
    }

    /// Cancels the cron job `job_id`.
    pub fn cron_cancel(job_id: impl Into<String>) -> Self {
        Directive::CronCancel {
            job_id: job_id.into(),
        }
    }

    /// Runs `instruction` in the runtime: a [`RunInstruction`] builder for
    /// the strategy command the result comes back as (default
    /// `"instruction_result"`) and the meta passed back with it, turned
    /// into a directive with `.into()`.
    pub fn run_instruction(instruction: Instruction) -> RunInstruction {
        RunInstruction::new(instruction)
    }

    /// Stops the agent with the normal reason.
    pub fn stop() -> Self {
        Directive::Stop {
            reason: StopReason::Normal,
        }
    }

    /// Stops the agent with `reason`.
    pub fn stop_with(reason: impl Into<StopReason>) -> Self {
        Directive::Stop {
            reason: reason.into(),
        }
    }

    /// Wraps a custom directive.
    pub fn custom(directive: impl CustomDirective) -> Self {
        Directive::Custom(Arc::new(directive))
    }

    /// A short name of the variant, e.g. `"emit"` (for a custom directive,
    /// its [`type_name`](CustomDirective::type_name)). Used in logs and
    /// telemetry.
    pub fn kind(&self) -> &'static str {
        match self {
            Directive::Emit { .. } => "emit",
            Directive::EmitToParent { .. } => "emit_to_parent",
            Directive::Error { .. } => "error",
            Directive::Spawn { .. } => "spawn",
            Directive::SpawnAgent { .. } => "spawn_agent",
            Directive::AdoptChild { .. } => "adopt_child",
            Directive::StopChild { .. } => "stop_child",
            Directive::Schedule { .. } => "schedule",
            Directive::Cron { .. } => "cron",
            Directive::CronCancel { .. } => "cron_cancel",
            Directive::RunInstruction { .. } => "run_instruction",
            Directive::Stop { .. } => "stop",
            Directive::Custom(c) => c.type_name(),
        }
    }
}

/// Restart policy of a child agent under the instance supervisor.
#[non_exhaustive]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Restart {
    /// Always restarted.
    Permanent,
    /// Restarted only after an abnormal exit (the default).
    #[default]
    Transient,
    /// Never restarted.
    Temporary,
}

/// Why an agent or child stops (also usable as an exit reason).
///
/// Strings convert with `"normal"` and `"shutdown"` mapping to their
/// variants.
///
/// ```
/// use jido::directive::StopReason;
///
/// assert_eq!(StopReason::from("normal"), StopReason::Normal);
/// assert_eq!(StopReason::from("quota").to_string(), "quota");
/// assert!(StopReason::Shutdown.is_clean());
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum StopReason {
    /// A normal stop (the default).
    #[default]
    Normal,
    /// A shutdown asked by a supervisor or a parent.
    Shutdown,
    /// Any other reason.
    Custom(String),
}

impl StopReason {
    /// Whether the reason is a clean exit (normal or shutdown).
    pub fn is_clean(&self) -> bool {
        matches!(self, StopReason::Normal | StopReason::Shutdown)
    }

    /// The reason as text.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::Normal => "normal",
            StopReason::Shutdown => "shutdown",
            StopReason::Custom(s) => s,
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for StopReason {
    fn from(s: &str) -> Self {
        match s {
            "normal" => StopReason::Normal,
            "shutdown" => StopReason::Shutdown,
            other => StopReason::Custom(other.to_owned()),
        }
    }
}

impl From<String> for StopReason {
    fn from(s: String) -> Self {
        match s.as_str() {
            "normal" => StopReason::Normal,
            "shutdown" => StopReason::Shutdown,
            _ => StopReason::Custom(s),
        }
    }
}

impl serde::Serialize for StopReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for StopReason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        String::deserialize(d).map(StopReason::from)
    }
}

/// What a [`Directive::Schedule`] or [`Directive::Cron`] delivers.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
// A signal is the common case; boxing it would cost an allocation per
// schedule to save bytes on the rarer JSON form.
#[allow(clippy::large_enum_variant)]
pub enum ScheduledMessage {
    /// A signal, delivered as is.
    Signal(Signal),
    /// Any JSON, wrapped in a signal by the runtime.
    Json(Value),
}

impl ScheduledMessage {
    /// The signal a [`Directive::Schedule`] delivers: the signal itself, or
    /// JSON wrapped as `"jido.scheduled"` `{"message": <json>}`.
    pub fn into_scheduled_signal(self) -> Signal {
        match self {
            ScheduledMessage::Signal(s) => s,
            ScheduledMessage::Json(v) => {
                Signal::new(SCHEDULED_SIGNAL_TYPE, serde_json::json!({"message": v}))
            }
        }
    }

    /// The signal a [`Directive::Cron`] delivers on each tick: the signal
    /// itself, or JSON wrapped as `"jido.cron_tick"`
    /// `{"job_id": .., "message": <json>}`.
    pub fn to_cron_signal(&self, job_id: &str) -> Signal {
        match self {
            ScheduledMessage::Signal(s) => s.clone(),
            ScheduledMessage::Json(v) => Signal::new(
                CRON_TICK_SIGNAL_TYPE,
                serde_json::json!({"job_id": job_id, "message": v}),
            ),
        }
    }
}

impl From<Signal> for ScheduledMessage {
    fn from(s: Signal) -> Self {
        ScheduledMessage::Signal(s)
    }
}

impl From<Value> for ScheduledMessage {
    fn from(v: Value) -> Self {
        ScheduledMessage::Json(v)
    }
}

type StartFn = dyn Fn() -> BoxFuture<'static, Result<()>> + Send + Sync;

/// How to start an untracked child for [`Directive::Spawn`]: a named
/// factory whose future starts the child (spawn an actor, a task, open a
/// connection) and reports whether that worked.
///
/// The runtime calls [`start`](ChildSpec::start) once per executed
/// directive, in a task of the instance's task supervisor, and logs an
/// error result. The child is not tracked: it is the factory's job to tie
/// it to a supervisor if it needs one.
///
/// ```
/// use jido::directive::{ChildSpec, Directive};
///
/// let spec = ChildSpec::new("metrics_flusher", || async {
///     // e.g. `Actor::spawn(None, Flusher, ()).await` in a runtime crate
///     Ok(())
/// });
/// let d = Directive::spawn(spec);
/// assert_eq!(d.kind(), "spawn");
/// ```
#[derive(Clone)]
pub struct ChildSpec {
    name: String,
    start: Arc<StartFn>,
}

impl ChildSpec {
    /// A child spec named `name` started by `start`.
    pub fn new<F, Fut>(name: impl Into<String>, start: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<()>> + Send + 'static,
    {
        Self {
            name: name.into(),
            start: Arc::new(move || Box::pin(start())),
        }
    }

    /// The name given at creation.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Starts the child.
    ///
    /// # Errors
    ///
    /// Whatever the factory reports.
    pub fn start(&self) -> BoxFuture<'static, Result<()>> {
        (self.start)()
    }
}

impl fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSpec")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Upcast to [`Any`], implemented for every sized `'static` type; lets
/// [`CustomDirective`]s be downcast.
pub trait AsAny: Any {
    /// `self` as `&dyn Any`.
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A directive defined outside this crate, carried by
/// [`Directive::Custom`]. The runtime extends this trait with execution;
/// as data it only needs a name and downcasting.
///
/// ```
/// use jido::directive::{CustomDirective, Directive};
///
/// #[derive(Debug, PartialEq)]
/// struct Notify { channel: String }
/// impl CustomDirective for Notify {}
///
/// let d = Directive::custom(Notify { channel: "ops".into() });
/// let Directive::Custom(c) = &d else { unreachable!() };
/// assert_eq!(c.downcast_ref::<Notify>(), Some(&Notify { channel: "ops".into() }));
/// assert!(c.type_name().ends_with("Notify"));
/// ```
pub trait CustomDirective: AsAny + fmt::Debug + Send + Sync {
    /// The directive's type name (for logs and telemetry). A durable
    /// directive is stored under this name and decoded by the executor
    /// whose directive type has it, so keep the default for those.
    fn type_name(&self) -> &'static str {
        std::any::type_name::<Self>()
    }

    /// The directive's data form, if it is durable (feature `persist`).
    ///
    /// A durable agent stores the directives a `cmd` decided with the
    /// checkpoint of that `cmd` (its outbox) and runs them again after a
    /// restore if they may not have run (at least once). A custom directive
    /// takes part when it returns `Some` here **and** its executor decodes
    /// the value back ([`DirectiveExec::decode`](crate::server::DirectiveExec::decode)).
    /// The default `None` keeps it volatile: it runs, but a crash between
    /// the checkpoint and its execution loses it (one warning per type says
    /// so).
    ///
    /// ```
    /// use jido::directive::CustomDirective;
    /// use serde_json::{Value, json};
    ///
    /// #[derive(Debug)]
    /// struct Notify { channel: String }
    /// impl CustomDirective for Notify {
    ///     fn durable(&self) -> Option<Value> {
    ///         Some(json!({"channel": self.channel}))
    ///     }
    /// }
    /// assert_eq!(Notify { channel: "ops".into() }.durable(), Some(json!({"channel": "ops"})));
    /// ```
    fn durable(&self) -> Option<Value> {
        None
    }
}

impl dyn CustomDirective {
    /// Whether the directive is a `T`.
    pub fn is<T: CustomDirective>(&self) -> bool {
        self.as_any().is::<T>()
    }

    /// The directive as a `T`, if it is one.
    pub fn downcast_ref<T: CustomDirective>(&self) -> Option<&T> {
        self.as_any().downcast_ref::<T>()
    }
}
