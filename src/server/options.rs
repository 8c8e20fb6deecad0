//! Options of an AgentServer and of a `Jido` instance.

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use ractor::ActorRef;
use serde_json::{Map, Value};

use super::directives::{DirectiveExec, ErasedExec, TypedExec};
use super::msg::AgentMsg;
use super::{AgentRef, Jido};
use crate::agent::AgentState;
use crate::directive::{Restart, StopReason};
use crate::error::{Error, Result};
use crate::signal::Signal;
use crate::signal::dispatch::DispatchConfig;

/// What a child agent does when its parent ends (stops, crashes or is
/// killed).
///
/// ```
/// use jido::server::OnParentDeath;
///
/// assert_eq!(OnParentDeath::parse("emit_orphan"), Some(OnParentDeath::EmitOrphan));
/// assert_eq!(OnParentDeath::default(), OnParentDeath::Stop);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OnParentDeath {
    /// Stop with the reason `"shutdown: parent_down: <parent's reason>"`
    /// (the default). The child's own children then apply their policy.
    #[default]
    Stop,
    /// Keep running: the parent is dropped and `__orphaned_from__` records
    /// it.
    Continue,
    /// As [`Continue`](OnParentDeath::Continue), and process one
    /// `jido.agent.orphaned` signal.
    EmitOrphan,
}

impl OnParentDeath {
    /// Reads `"stop"`, `"continue"` or `"emit_orphan"`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "stop" => OnParentDeath::Stop,
            "continue" => OnParentDeath::Continue,
            "emit_orphan" => OnParentDeath::EmitOrphan,
            _ => return None,
        })
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            OnParentDeath::Stop => "stop",
            OnParentDeath::Continue => "continue",
            OnParentDeath::EmitOrphan => "emit_orphan",
        }
    }
}

/// What the error policy decides about one error (see
/// [`ErrorPolicy::custom`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorDecision {
    /// Keep going.
    Continue,
    /// Stop the agent with this reason.
    Stop(StopReason),
}

/// One error handed to the error policy.
///
/// The error is the one of the [`Directive::Error`](crate::Directive::Error)
/// with its details unsanitised (the policy runs in the process). Its cause
/// is there too: a failed instruction is an execution error "instruction
/// failed" whose `reason` detail is the action's error envelope
/// (`{type, message, details, retryable}`: e.g. `validation_error` with the
/// failing field in `details.path`, or "action NAME panicked: MESSAGE").
/// [`signal`](ErrorEvent::signal) is the signal whose processing failed.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ErrorEvent<'a> {
    /// The agent's id.
    pub agent_id: &'a str,
    /// The error.
    pub error: &'a Error,
    /// Where it happened (the Error directive's context: `instruction`,
    /// `routing`, `cmd`, `directive`, …).
    pub context: &'a str,
    /// How many errors the agent has seen, this one included.
    pub error_count: u32,
    /// The signal whose processing failed (for a strategy's `init`, a
    /// signal `jido.strategy.init`).
    pub signal: &'a Signal,
}

type ErrorFn = dyn Fn(&ErrorEvent<'_>) -> Result<ErrorDecision> + Send + Sync;

/// How an agent reacts to [`Directive::Error`](crate::Directive::Error)s.
///
/// ```
/// use jido::server::{ErrorDecision, ErrorPolicy};
/// use jido::directive::StopReason;
///
/// let policy = ErrorPolicy::custom(|ev| {
///     Ok(if ev.context == "routing" { ErrorDecision::Continue } else { ErrorDecision::Stop(StopReason::from("bad")) })
/// });
/// # let _ = policy;
/// let _ = ErrorPolicy::max_errors(3);
/// ```
#[non_exhaustive]
#[derive(Clone, Default)]
pub enum ErrorPolicy {
    /// Log `"agent <id> [<context>]: <message>"` at error level (the
    /// default). Every policy logs this line first (event
    /// `jido.agent_server.error`, fields `agent_id`, `context`, `policy`,
    /// `error_type`, `signal_id`, `signal_type`, `details`), with the
    /// details sanitised as in [`Error::to_envelope`] (secret-looking keys
    /// `"[REDACTED]"`, depth, item and string bounds) and the message cut
    /// like a sanitised string.
    #[default]
    LogOnly,
    /// Log, then stop with the reason `"agent_error: <message>"` (the
    /// message cut like a sanitised string).
    StopOnError,
    /// Log, then emit `jido.agent.error` through this dispatch (`None`:
    /// like an Emit without dispatch, e.g. back to the agent itself). Its
    /// data: Jido's `error` (the message), `context` and `agent_id`, plus
    /// `error_type` (the error kind, e.g. `"execution_error"`), `details`
    /// (sanitised as in [`Error::to_envelope`]: a failed instruction's
    /// cause is under `details.reason`), `retryable`, and `signal_id` /
    /// `signal_type` of the signal whose processing failed. Strings are
    /// cut to [`SANITIZE_MAX_STRING`](crate::error::SANITIZE_MAX_STRING)
    /// characters.
    ///
    /// No error loop: an error raised while processing a
    /// `jido.agent.error` signal is logged and counted but emits no
    /// further `jido.agent.error`, so one failure yields exactly one error
    /// signal even when it comes back to a catch-all route.
    EmitSignal(Option<DispatchConfig>),
    /// Log and count; stop with `"max_errors_exceeded: <count>"` once the
    /// count reaches `n` (≥ 1).
    MaxErrors(u32),
    /// A function deciding per error. Its panics and `Err` returns are
    /// logged and ignored (the agent continues).
    Custom(Arc<ErrorFn>),
}

impl ErrorPolicy {
    /// [`ErrorPolicy::MaxErrors`].
    pub fn max_errors(n: u32) -> Self {
        ErrorPolicy::MaxErrors(n)
    }

    /// [`ErrorPolicy::EmitSignal`] through `dispatch`.
    pub fn emit_signal(dispatch: DispatchConfig) -> Self {
        ErrorPolicy::EmitSignal(Some(dispatch))
    }

    /// [`ErrorPolicy::Custom`].
    pub fn custom(
        f: impl Fn(&ErrorEvent<'_>) -> Result<ErrorDecision> + Send + Sync + 'static,
    ) -> Self {
        ErrorPolicy::Custom(Arc::new(f))
    }

    /// Reads `"log_only"`, `"stop_on_error"`, `"emit_signal"` (to the
    /// default dispatch) or `{"max_errors": n}`.
    ///
    /// # Errors
    ///
    /// A configuration error "invalid error policy" for anything else.
    pub fn from_json(value: &Value) -> Result<Self> {
        match value {
            Value::String(s) if s == "log_only" => Ok(ErrorPolicy::LogOnly),
            Value::String(s) if s == "stop_on_error" => Ok(ErrorPolicy::StopOnError),
            Value::String(s) if s == "emit_signal" => Ok(ErrorPolicy::EmitSignal(None)),
            Value::Object(map) if map.len() == 1 => match map.get("max_errors") {
                Some(n) => n
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .map(ErrorPolicy::MaxErrors)
                    .ok_or_else(|| invalid_policy(value)),
                None => Err(invalid_policy(value)),
            },
            _ => Err(invalid_policy(value)),
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            ErrorPolicy::LogOnly => "log_only",
            ErrorPolicy::StopOnError => "stop_on_error",
            ErrorPolicy::EmitSignal(_) => "emit_signal",
            ErrorPolicy::MaxErrors(_) => "max_errors",
            ErrorPolicy::Custom(_) => "custom",
        }
    }
}

fn invalid_policy(value: &Value) -> Error {
    Error::configuration("invalid error policy")
        .with_detail("option", "error_policy")
        .with_detail("value", value.clone())
}

impl fmt::Debug for ErrorPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorPolicy::MaxErrors(n) => write!(f, "MaxErrors({n})"),
            ErrorPolicy::EmitSignal(d) => f.debug_tuple("EmitSignal").field(d).finish(),
            other => f.write_str(other.name()),
        }
    }
}

/// A child's reference to its parent agent: id, the tag the parent tracks
/// it under, free metadata, and the parent's actor.
#[derive(Clone)]
pub struct ParentRef {
    /// The parent agent's id.
    pub id: String,
    /// The tag the parent knows this child by.
    pub tag: String,
    /// Free metadata from the parent.
    pub meta: Map<String, Value>,
    pub(crate) actor: ActorRef<AgentMsg>,
    /// The ids above the parent (its parent, grandparent, ...), kept up to
    /// date by the runtime: an agent refuses to be adopted by one of its
    /// descendants.
    pub(crate) ancestors: Vec<String>,
}

impl ParentRef {
    /// A reference to `parent`, tracking the child under `tag`.
    pub fn new(parent: &AgentRef, tag: impl Into<String>) -> Self {
        Self {
            id: parent.id().to_owned(),
            tag: tag.into(),
            meta: Map::new(),
            actor: parent.actor_ref().clone(),
            ancestors: Vec::new(),
        }
    }

    /// Sets the metadata.
    #[must_use]
    pub fn with_meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta = meta;
        self
    }

    /// The parent's actor.
    pub fn actor_ref(&self) -> &ActorRef<AgentMsg> {
        &self.actor
    }

    /// `{"id", "tag", "meta"}`: what `__parent__` and `__orphaned_from__`
    /// hold.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"id": self.id, "tag": self.tag, "meta": self.meta})
    }
}

impl fmt::Debug for ParentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParentRef")
            .field("id", &self.id)
            .field("tag", &self.tag)
            .field("meta", &self.meta)
            .field("actor", &self.actor.get_id())
            .field("ancestors", &self.ancestors)
            .finish()
    }
}

/// Executors of custom directives, by directive type.
#[derive(Clone, Default)]
pub(crate) struct Executors(pub(crate) HashMap<TypeId, Arc<dyn ErasedExec>>);

impl Executors {
    pub(crate) fn merged_over(&self, base: &Executors) -> Executors {
        let mut out = base.0.clone();
        out.extend(self.0.iter().map(|(k, v)| (*k, Arc::clone(v))));
        Executors(out)
    }
}

/// Options of one AgentServer. Every option left unset takes the
/// instance's default (see [`JidoConfig`](super::JidoConfig)), then
/// Jido's.
///
/// | option | default |
/// |---|---|
/// | `id` | the agent value's id (a UUIDv7 unless it was given one) |
/// | `initial_state` | none (merged shallowly over the agent's state) |
/// | `default_dispatch` | none: Emit without dispatch goes back to the agent |
/// | `error_policy` | [`ErrorPolicy::LogOnly`] |
/// | `max_queue_size` | 10 000 (≥ 1) |
/// | `max_pending_signals` | 10 000 (≥ 1) |
/// | `max_concurrent_dispatches` | 64 (≥ 1) |
/// | `parent` | none |
/// | `on_parent_death` | [`OnParentDeath::Stop`] |
/// | `debug` | false |
/// | `restart` | [`Restart::Temporary`] (children from SpawnAgent: the directive's) |
/// | `allow_untrusted_runtime_signals` | false: untrusted signals may not use `jido.agent.*` |
/// | `fail_calls_on_action_error` | true: a `call` whose actions failed answers with the error |
///
/// ```
/// use jido::server::{ErrorPolicy, ServerOptions};
///
/// let opts = ServerOptions::new().id("order-7").max_queue_size(100).error_policy(ErrorPolicy::StopOnError).debug(true);
/// # let _ = opts;
/// ```
#[derive(Clone, Default)]
pub struct ServerOptions {
    pub(crate) id: Option<String>,
    pub(crate) initial_state: Option<Map<String, Value>>,
    pub(crate) default_dispatch: Option<DispatchConfig>,
    pub(crate) error_policy: Option<ErrorPolicy>,
    pub(crate) max_queue_size: Option<usize>,
    pub(crate) max_pending_signals: Option<usize>,
    pub(crate) max_concurrent_dispatches: Option<usize>,
    pub(crate) parent: Option<ParentRef>,
    pub(crate) on_parent_death: Option<OnParentDeath>,
    pub(crate) debug: Option<bool>,
    pub(crate) restart: Option<Restart>,
    pub(crate) jido: Option<Jido>,
    pub(crate) executors: Executors,
    pub(crate) allow_untrusted_runtime_signals: Option<bool>,
    pub(crate) fail_calls_on_action_error: Option<bool>,
}

impl fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerOptions")
            .field("id", &self.id)
            .field("initial_state", &self.initial_state)
            .field("default_dispatch", &self.default_dispatch)
            .field("error_policy", &self.error_policy)
            .field("max_queue_size", &self.max_queue_size)
            .field("max_pending_signals", &self.max_pending_signals)
            .field("max_concurrent_dispatches", &self.max_concurrent_dispatches)
            .field("parent", &self.parent)
            .field("on_parent_death", &self.on_parent_death)
            .field("debug", &self.debug)
            .field("restart", &self.restart)
            .field(
                "allow_untrusted_runtime_signals",
                &self.allow_untrusted_runtime_signals,
            )
            .field(
                "fail_calls_on_action_error",
                &self.fail_calls_on_action_error,
            )
            .field("jido", &self.jido.as_ref().map(Jido::name))
            .finish_non_exhaustive()
    }
}

impl ServerOptions {
    /// Nothing set: every option takes its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// The agent's id (an empty id counts as none).
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        let id = id.into();
        self.id = (!id.is_empty()).then_some(id);
        self
    }

    /// State merged (shallowly) over the agent's state at start.
    #[must_use]
    pub fn initial_state(mut self, state: Map<String, Value>) -> Self {
        self.initial_state = Some(state);
        self
    }

    /// Where Emit directives without a dispatch go.
    #[must_use]
    pub fn default_dispatch(mut self, dispatch: DispatchConfig) -> Self {
        self.default_dispatch = Some(dispatch);
        self
    }

    /// The error policy.
    #[must_use]
    pub fn error_policy(mut self, policy: ErrorPolicy) -> Self {
        self.error_policy = Some(policy);
        self
    }

    /// The most directives the queue holds (≥ 1).
    #[must_use]
    pub fn max_queue_size(mut self, n: usize) -> Self {
        self.max_queue_size = Some(n);
        self
    }

    /// The most signals that may wait while the agent is busy (≥ 1). A
    /// signal beyond it is refused: a `call` gets
    /// [`QueueOverflow`](crate::ErrorKind::QueueOverflow) "pending signal
    /// queue full" (details `max_pending_signals`, `signal_type`), and the
    /// error policy sees the same error (context `queue_overflow`) for a
    /// call or a cast. Signals the runtime makes itself (child events,
    /// schedules, Emit back to the agent) are not counted against it.
    #[must_use]
    pub fn max_pending_signals(mut self, n: usize) -> Self {
        self.max_pending_signals = Some(n);
        self
    }

    /// The most Emit dispatches this agent runs at once in tasks (≥ 1,
    /// default
    /// [`DEFAULT_MAX_CONCURRENT_DISPATCHES`](super::DEFAULT_MAX_CONCURRENT_DISPATCHES),
    /// 64).
    ///
    /// Only targets that must wait use a task (HTTP, webhook, synchronous
    /// actor delivery, a full bounded channel); in-process targets are
    /// delivered at once in the handler and do not count. An Emit that
    /// would start one more task fails instead: its targets that must wait
    /// get nothing, and an [`ErrorKind::QueueOverflow`](crate::ErrorKind::QueueOverflow)
    /// error "emit dispatch overflow" (details `max_concurrent_dispatches`,
    /// `signal_type`, `signal_id`) goes to the error policy with the
    /// context `"emit"` — except for the `jido.agent.error` signal of the
    /// error policy itself, whose overflow is only logged (no loop).
    #[must_use]
    pub fn max_concurrent_dispatches(mut self, n: usize) -> Self {
        self.max_concurrent_dispatches = Some(n);
        self
    }

    /// The parent agent.
    #[must_use]
    pub fn parent(mut self, parent: ParentRef) -> Self {
        self.parent = Some(parent);
        self
    }

    /// What to do when the parent ends.
    #[must_use]
    pub fn on_parent_death(mut self, policy: OnParentDeath) -> Self {
        self.on_parent_death = Some(policy);
        self
    }

    /// Debug mode: keep the last 500 events (see
    /// [`AgentRef::recent_events`]).
    #[must_use]
    pub fn debug(mut self, on: bool) -> Self {
        self.debug = Some(on);
        self
    }

    /// Restart policy under the instance supervisor.
    #[must_use]
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = Some(restart);
        self
    }

    /// Whether signals marked untrusted (see "Trust" on
    /// [`Signal`]) may use the runtime's reserved types `jido.agent.*`
    /// (default `false`).
    ///
    /// By default an untrusted `jido.agent.stop`, `jido.agent.child.*`,
    /// `jido.agent.orphaned`, `jido.agent.error` (any `jido.agent.*`) is
    /// refused when it arrives, before routing: a `call` gets a validation
    /// error "untrusted signal may not use reserved type TYPE" (details
    /// `signal_type`, `agent_id`), the error policy gets the same error
    /// (context `routing`) at once, and the signal neither stops the agent
    /// nor reaches a route. Signals from the process itself (casts, calls,
    /// emits, the runtime's hierarchy events) are trusted and never
    /// refused. Turn this on only for an agent that must receive such
    /// types from outside, through an ingress that authenticates them.
    #[must_use]
    pub fn allow_untrusted_runtime_signals(mut self, allow: bool) -> Self {
        self.allow_untrusted_runtime_signals = Some(allow);
        self
    }

    /// Whether a [`call`](super::AgentRef::call) whose `cmd` produced an
    /// error answers with it (default `true`).
    ///
    /// An action that fails after its retries does not fail the `cmd`: as
    /// in Jido, the agent keeps the state change of the instructions that
    /// succeeded and hands an Error directive (context `"instruction"`) to
    /// its error policy. With this option on (the default) the caller of
    /// `call` also gets `Err` with the failed action's own error (its kind,
    /// message and details such as the field `path` of a bad param), plus
    /// the details `agent_id` and `error_context`; the first failure when
    /// several instructions failed, and likewise for the other errors a
    /// `cmd` reports as Error directives (a refused FSM transition, a
    /// failed `on_before_cmd`). The error policy still runs and the state
    /// change is kept either way: read it with
    /// [`state`](super::AgentRef::state). Turn it off for Jido's exact
    /// behaviour, where such a `call` answers `Ok(agent)`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
    /// use jido::agent::SignalRoute;
    /// use jido::prelude::*;
    /// use jido::server::{Jido, JidoConfig, ServerOptions};
    /// use serde_json::json;
    ///
    /// struct Shop;
    /// impl Agent for Shop {
    ///     const NAME: &'static str = "shop";
    ///     type Schema = ();
    ///     fn signal_routes(&self) -> Vec<SignalRoute> {
    ///         let failing = jido::action_fn("failing", |_: serde_json::Value, _| async {
    ///             Err::<serde_json::Value, _>(jido::Error::execution("no stock").with_retry(false))
    ///         });
    ///         vec![SignalRoute::action("order", failing)]
    ///     }
    /// }
    /// let jido = Jido::start(JidoConfig::new()).await?;
    /// let opts = AgentOptions::new;
    ///
    /// let strict = jido.start_agent(AgentState::new(Shop, opts()), ServerOptions::new()).await?;
    /// let err = strict.call(Signal::new("order", json!({}))).await.unwrap_err();
    /// assert_eq!((err.kind(), err.message()), (jido::ErrorKind::Execution, "no stock"));
    ///
    /// let like_jido = ServerOptions::new().fail_calls_on_action_error(false);
    /// let lenient = jido.start_agent(AgentState::new(Shop, opts()), like_jido).await?;
    /// assert!(lenient.call(Signal::new("order", json!({}))).await.is_ok());
    /// # jido.shutdown().await;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn fail_calls_on_action_error(mut self, on: bool) -> Self {
        self.fail_calls_on_action_error = Some(on);
        self
    }

    /// The instance the agent belongs to: its registry, task supervisor,
    /// defaults and supervisor for children. Set by
    /// [`Jido::start_agent`]; set it yourself when embedding an
    /// AgentServer that should spawn supervised children.
    ///
    /// Without an instance, the children an agent starts with
    /// [`SpawnAgent`](crate::Directive::SpawnAgent) are linked under the
    /// agent's own supervisor (the one it was spawned linked to): that
    /// supervisor receives their `ActorStarted` / `ActorTerminated` /
    /// `ActorFailed` and finds them in `get_children()` (no restarts: those
    /// need an instance). An agent with neither an instance nor a
    /// supervisor refuses a SpawnAgent whose `on_parent_death` is
    /// `continue` or `emit_orphan` (the child would outlive its parent
    /// with nobody able to reach it): a configuration error goes to the
    /// error policy (context `spawn_agent`); `stop` children run
    /// unsupervised and end with their parent.
    #[must_use]
    pub fn jido(mut self, jido: Jido) -> Self {
        self.jido = Some(jido);
        self
    }

    /// Registers the executor of a custom directive type (see
    /// [`DirectiveExec`]).
    #[must_use]
    pub fn directive_exec<E: DirectiveExec>(mut self, exec: E) -> Self {
        self.executors
            .0
            .insert(TypeId::of::<E::Directive>(), Arc::new(TypedExec::new(exec)));
        self
    }

    /// Reads the JSON options of a
    /// [`Directive::SpawnAgent`](crate::Directive::SpawnAgent): `id`,
    /// `initial_state` (object), `on_parent_death` (`"stop"`,
    /// `"continue"`, `"emit_orphan"`), `max_queue_size`, `max_pending_signals`,
    /// `max_concurrent_dispatches`, `debug`, `error_policy` (see
    /// [`ErrorPolicy::from_json`]), `allow_untrusted_runtime_signals`,
    /// `fail_calls_on_action_error`.
    ///
    /// # Errors
    ///
    /// A configuration error naming the `option` for an unknown key or a
    /// bad value.
    pub fn from_json(opts: &Map<String, Value>) -> Result<Self> {
        let bad = |key: &str, value: &Value| {
            Error::configuration(format!("invalid server option: {key}"))
                .with_detail("option", key.to_owned())
                .with_detail("value", value.clone())
        };
        let count = |key: &str, value: &Value| {
            value
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| bad(key, value))
        };
        let mut out = ServerOptions::new();
        for (key, value) in opts {
            match key.as_str() {
                "id" => match value {
                    Value::String(s) => out = out.id(s.clone()),
                    Value::Null => {}
                    _ => return Err(bad(key, value)),
                },
                "initial_state" => match value {
                    Value::Object(m) => out.initial_state = Some(m.clone()),
                    _ => return Err(bad(key, value)),
                },
                "on_parent_death" => {
                    out.on_parent_death = Some(
                        value
                            .as_str()
                            .and_then(OnParentDeath::parse)
                            .ok_or_else(|| bad(key, value))?,
                    );
                }
                "max_queue_size" => out.max_queue_size = Some(count(key, value)?),
                "max_pending_signals" => out.max_pending_signals = Some(count(key, value)?),
                "max_concurrent_dispatches" => {
                    out.max_concurrent_dispatches = Some(count(key, value)?)
                }
                "debug" => out.debug = Some(value.as_bool().ok_or_else(|| bad(key, value))?),
                "allow_untrusted_runtime_signals" => {
                    out.allow_untrusted_runtime_signals =
                        Some(value.as_bool().ok_or_else(|| bad(key, value))?);
                }
                "fail_calls_on_action_error" => {
                    out.fail_calls_on_action_error =
                        Some(value.as_bool().ok_or_else(|| bad(key, value))?);
                }
                "error_policy" => out.error_policy = Some(ErrorPolicy::from_json(value)?),
                _ => {
                    return Err(
                        Error::configuration(format!("unknown server option: {key}"))
                            .with_detail("option", key.clone()),
                    );
                }
            }
        }
        Ok(out)
    }

    /// These options with every unset one taken from `defaults`
    /// (executors merge, these win).
    pub(crate) fn or(mut self, defaults: &ServerOptions) -> Self {
        self.id = self.id.or_else(|| defaults.id.clone());
        self.initial_state = self
            .initial_state
            .or_else(|| defaults.initial_state.clone());
        self.default_dispatch = self
            .default_dispatch
            .or_else(|| defaults.default_dispatch.clone());
        self.error_policy = self.error_policy.or_else(|| defaults.error_policy.clone());
        self.max_queue_size = self.max_queue_size.or(defaults.max_queue_size);
        self.max_pending_signals = self.max_pending_signals.or(defaults.max_pending_signals);
        self.max_concurrent_dispatches = self
            .max_concurrent_dispatches
            .or(defaults.max_concurrent_dispatches);
        self.parent = self.parent.or_else(|| defaults.parent.clone());
        self.on_parent_death = self.on_parent_death.or(defaults.on_parent_death);
        self.debug = self.debug.or(defaults.debug);
        self.restart = self.restart.or(defaults.restart);
        self.allow_untrusted_runtime_signals = self
            .allow_untrusted_runtime_signals
            .or(defaults.allow_untrusted_runtime_signals);
        self.fail_calls_on_action_error = self
            .fail_calls_on_action_error
            .or(defaults.fail_calls_on_action_error);
        self.jido = self.jido.or_else(|| defaults.jido.clone());
        self.executors = self.executors.merged_over(&defaults.executors);
        self
    }

    /// Checks the values.
    pub(crate) fn validate(&self) -> Result<()> {
        for (option, value) in [
            ("max_queue_size", self.max_queue_size),
            ("max_pending_signals", self.max_pending_signals),
            ("max_concurrent_dispatches", self.max_concurrent_dispatches),
        ] {
            if value == Some(0) {
                return Err(Error::configuration(format!("{option} must be at least 1"))
                    .with_detail("option", option)
                    .with_detail("value", 0));
            }
        }
        if let Some(ErrorPolicy::MaxErrors(0)) = self.error_policy {
            return Err(Error::configuration("max_errors must be at least 1")
                .with_detail("option", "error_policy")
                .with_detail("value", 0));
        }
        Ok(())
    }
}

/// The start arguments of an [`AgentServer`](super::AgentServer): the agent
/// value and its options.
///
/// ```
/// # use jido::prelude::*;
/// # struct A; impl Agent for A { const NAME: &'static str = "a"; type Schema = (); }
/// use jido::server::{AgentServerArgs, ServerOptions};
///
/// let args = AgentServerArgs::new(AgentState::new(A, AgentOptions::new().id("a1")), ServerOptions::new());
/// assert_eq!(args.id(), "a1");
/// let args = AgentServerArgs::new(AgentState::new(A, AgentOptions::new()), ServerOptions::new().id("x"));
/// assert_eq!(args.id(), "x");
/// ```
#[derive(Clone, Debug)]
pub struct AgentServerArgs {
    pub(crate) agent: AgentState,
    pub(crate) options: ServerOptions,
    /// Spawned linked under the instance supervisor (restarts apply).
    pub(crate) supervised: bool,
}

impl AgentServerArgs {
    /// Arguments for running `agent` with `options`.
    pub fn new(agent: AgentState, options: ServerOptions) -> Self {
        Self {
            agent,
            options,
            supervised: false,
        }
    }

    /// The id the agent will run under: the option's, else the agent
    /// value's.
    pub fn id(&self) -> &str {
        self.options.id.as_deref().unwrap_or(self.agent.id())
    }
}
