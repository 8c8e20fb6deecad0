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
use crate::directive::{ChildOptions, Restart};
pub use crate::directive::{ErrorDecision, ErrorEvent, ErrorPolicy, OnParentDeath};
use crate::error::{Error, Result};
use crate::signal::dispatch::DispatchConfig;

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

/// Executors of custom directives, by directive type. `None` when there
/// are none (most agents), and shared between the agents that inherit the
/// same ones: a pointer in every agent's state, not a map.
#[derive(Clone, Default)]
pub(crate) struct Executors(Option<Arc<HashMap<TypeId, Arc<dyn ErasedExec>>>>);

impl Executors {
    pub(crate) fn get(&self, ty: &TypeId) -> Option<&Arc<dyn ErasedExec>> {
        self.0.as_deref()?.get(ty)
    }

    /// Every executor, in no particular order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Arc<dyn ErasedExec>> {
        self.0.iter().flat_map(|map| map.values())
    }

    fn insert(&mut self, ty: TypeId, exec: Arc<dyn ErasedExec>) {
        Arc::make_mut(self.0.get_or_insert_with(Default::default)).insert(ty, exec);
    }

    pub(crate) fn merged_over(&self, base: &Executors) -> Executors {
        match (&self.0, &base.0) {
            (None, _) => base.clone(),
            (Some(_), None) => self.clone(),
            (Some(own), Some(base)) => {
                let mut out = HashMap::clone(base);
                out.extend(own.iter().map(|(k, v)| (*k, Arc::clone(v))));
                Executors(Some(Arc::new(out)))
            }
        }
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
    /// Boxed, as `parent`: rarely set, and the options travel by value
    /// through every start (ractor's spawn futures hold the arguments
    /// several times over).
    pub(crate) initial_state: Option<Box<Map<String, Value>>>,
    pub(crate) default_dispatch: Option<DispatchConfig>,
    pub(crate) error_policy: Option<ErrorPolicy>,
    pub(crate) max_queue_size: Option<usize>,
    pub(crate) max_pending_signals: Option<usize>,
    pub(crate) max_concurrent_dispatches: Option<usize>,
    pub(crate) parent: Option<Box<ParentRef>>,
    pub(crate) on_parent_death: Option<OnParentDeath>,
    pub(crate) debug: Option<bool>,
    pub(crate) restart: Option<Restart>,
    pub(crate) jido: Option<Jido>,
    pub(crate) executors: Executors,
    pub(crate) allow_untrusted_runtime_signals: Option<bool>,
    pub(crate) fail_calls_on_action_error: Option<bool>,
    /// Where the agent is kept between runs (feature `persist`).
    #[cfg(feature = "persist")]
    pub(crate) storage: Option<Arc<dyn crate::persist::Storage>>,
    /// How much of its work is durable (feature `persist`).
    #[cfg(feature = "persist")]
    pub(crate) durability: Option<super::durable::Durability>,
    /// Hibernate after this long without work (feature `persist`).
    #[cfg(feature = "persist")]
    pub(crate) idle_timeout: Option<std::time::Duration>,
    /// Set by the instance's timer table when it thaws a hibernated agent:
    /// the due time (Unix ms) it woke the agent for.
    #[cfg(feature = "persist")]
    pub(crate) thaw_due: Option<i64>,
}

impl fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("ServerOptions");
        f.field("id", &self.id)
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
            .field("jido", &self.jido.as_ref().map(Jido::name));
        #[cfg(feature = "persist")]
        f.field("storage", &self.storage.is_some())
            .field("durability", &self.durability)
            .field("idle_timeout", &self.idle_timeout);
        f.finish_non_exhaustive()
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
        self.initial_state = Some(Box::new(state));
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
        self.parent = Some(Box::new(parent));
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
    /// [`Signal`](crate::signal::Signal)) may use the runtime's reserved types `jido.agent.*`
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

    /// Where the agent is kept between runs (feature `persist`; the
    /// instance's [`JidoConfig::storage`](super::JidoConfig::storage) by
    /// default). With a storage the agent is restored from it on every
    /// start and restart, and checkpointed as its
    /// [`durability`](ServerOptions::durability) says (see
    /// `docs/persistence.md`).
    #[cfg(feature = "persist")]
    #[must_use]
    pub fn storage(mut self, storage: Arc<dyn crate::persist::Storage>) -> Self {
        self.storage = Some(storage);
        self
    }

    /// How much of the agent's work is durable (feature `persist`; default
    /// [`Durability::Volatile`](super::Durability::Volatile)). Needs a
    /// [`storage`](ServerOptions::storage) for anything but `Volatile`:
    /// the agent refuses to start without one.
    ///
    /// ```
    /// use jido::server::{Durability, ServerOptions};
    ///
    /// let opts = ServerOptions::new().durability(Durability::Journal);
    /// # let _ = opts;
    /// ```
    #[cfg(feature = "persist")]
    #[must_use]
    pub fn durability(mut self, durability: super::durable::Durability) -> Self {
        self.durability = Some(durability);
        self
    }

    /// Hibernates the agent after `timeout` without work (feature
    /// `persist`, needs a [`storage`](ServerOptions::storage)): it writes
    /// its checkpoint (in every durability mode), stops with reason
    /// `hibernate` ([`ExitReason::Hibernated`](super::ExitReason::Hibernated);
    /// never restarted) and leaves the registry.
    /// [`Jido::get_or_start`](super::Jido::get_or_start) by id thaws it.
    /// An agent hibernates only when nothing is in flight or waiting, no
    /// completion waiter, child, schedule or cron job is live; otherwise
    /// the timer starts again. A failed checkpoint keeps it running.
    #[cfg(feature = "persist")]
    #[must_use]
    pub fn idle_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }

    /// Registers the executor of a custom directive type (see
    /// [`DirectiveExec`]).
    #[must_use]
    pub fn directive_exec<E: DirectiveExec>(mut self, exec: E) -> Self {
        self.executors
            .insert(TypeId::of::<E::Directive>(), Arc::new(TypedExec::new(exec)));
        self
    }

    /// Reads server options that arrive as JSON: the keys of
    /// [`ChildOptions::from_json`] (`id`, `initial_state`,
    /// `on_parent_death`, `max_queue_size`, `max_pending_signals`,
    /// `max_concurrent_dispatches`, `debug`, `error_policy`,
    /// `allow_untrusted_runtime_signals`, `fail_calls_on_action_error`).
    ///
    /// # Errors
    ///
    /// A configuration error naming the `option` for an unknown key or a
    /// bad value.
    pub fn from_json(opts: &Map<String, Value>) -> Result<Self> {
        ChildOptions::from_json(opts).map(Self::from)
    }

    /// These options with every unset one taken from `defaults`
    /// (executors merge, these win).
    pub(crate) fn or(mut self, defaults: &ServerOptions) -> Self {
        self.fill_from(defaults);
        self
    }

    /// Takes every unset option from `defaults` (executors merge, these
    /// win), in place: the options are large and moved enough already.
    pub(crate) fn fill_from(&mut self, defaults: &ServerOptions) {
        fn fill<T: Clone>(own: &mut Option<T>, default: &Option<T>) {
            if own.is_none() {
                own.clone_from(default);
            }
        }
        fill(&mut self.id, &defaults.id);
        fill(&mut self.initial_state, &defaults.initial_state);
        fill(&mut self.default_dispatch, &defaults.default_dispatch);
        fill(&mut self.error_policy, &defaults.error_policy);
        fill(&mut self.max_queue_size, &defaults.max_queue_size);
        fill(&mut self.max_pending_signals, &defaults.max_pending_signals);
        fill(
            &mut self.max_concurrent_dispatches,
            &defaults.max_concurrent_dispatches,
        );
        fill(&mut self.parent, &defaults.parent);
        fill(&mut self.on_parent_death, &defaults.on_parent_death);
        fill(&mut self.debug, &defaults.debug);
        fill(&mut self.restart, &defaults.restart);
        fill(
            &mut self.allow_untrusted_runtime_signals,
            &defaults.allow_untrusted_runtime_signals,
        );
        fill(
            &mut self.fail_calls_on_action_error,
            &defaults.fail_calls_on_action_error,
        );
        fill(&mut self.jido, &defaults.jido);
        #[cfg(feature = "persist")]
        {
            fill(&mut self.storage, &defaults.storage);
            fill(&mut self.durability, &defaults.durability);
            fill(&mut self.idle_timeout, &defaults.idle_timeout);
        }
        if defaults.executors.0.is_some() {
            self.executors = self.executors.merged_over(&defaults.executors);
        }
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
        #[cfg(feature = "persist")]
        if self.storage.is_none()
            && self
                .durability
                .is_some_and(|d| d != super::durable::Durability::Volatile)
        {
            return Err(Error::configuration("durability needs a storage")
                .with_detail("option", "durability")
                .with_detail("value", format!("{:?}", self.durability)));
        }
        #[cfg(feature = "persist")]
        if self.storage.is_none() && self.idle_timeout.is_some() {
            return Err(Error::configuration("idle_timeout needs a storage")
                .with_detail("option", "idle_timeout"));
        }
        Ok(())
    }
}

impl ServerOptions {
    /// These options with every option `child` sets put over them (a
    /// child started from a kind factory with the options of the
    /// SpawnAgent that asked for it).
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn overlaid(mut self, child: ChildOptions) -> Self {
        let c = ServerOptions::from(child);
        macro_rules! over {
            ($($field:ident),*) => {$(
                if c.$field.is_some() {
                    self.$field = c.$field;
                }
            )*};
        }
        over!(
            id,
            initial_state,
            default_dispatch,
            error_policy,
            max_queue_size,
            max_pending_signals,
            max_concurrent_dispatches,
            on_parent_death,
            debug,
            allow_untrusted_runtime_signals,
            fail_calls_on_action_error
        );
        self
    }
}

impl From<ChildOptions> for ServerOptions {
    /// The server options a [`ChildOptions`] sets; everything else unset.
    fn from(o: ChildOptions) -> Self {
        Self {
            id: o.id,
            initial_state: o.initial_state.map(Box::new),
            default_dispatch: o.default_dispatch,
            error_policy: o.error_policy,
            max_queue_size: o.max_queue_size,
            max_pending_signals: o.max_pending_signals,
            max_concurrent_dispatches: o.max_concurrent_dispatches,
            on_parent_death: o.on_parent_death,
            debug: o.debug,
            allow_untrusted_runtime_signals: o.allow_untrusted_runtime_signals,
            fail_calls_on_action_error: o.fail_calls_on_action_error,
            ..Self::default()
        }
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
    /// The id, shared with the handle the starter returns (see
    /// [`AgentServerArgs::shared_id`]); used when it is still the id.
    pub(crate) shared_id: Option<Arc<str>>,
}

impl AgentServerArgs {
    /// Arguments for running `agent` with `options`.
    pub fn new(agent: AgentState, options: ServerOptions) -> Self {
        Self {
            agent,
            options,
            supervised: false,
            shared_id: None,
        }
    }

    /// Whether the agent has a storage (its own or the instance's
    /// default), so its start reads a checkpoint.
    pub(crate) fn may_be_durable(&self) -> bool {
        #[cfg(feature = "persist")]
        {
            self.options.storage.is_some()
                || self
                    .options
                    .jido
                    .as_ref()
                    .is_some_and(|j| j.defaults().storage.is_some())
        }
        #[cfg(not(feature = "persist"))]
        false
    }

    /// The id as a shared string, kept for the agent: the starter's handle
    /// and the agent's own state hold one allocation of it.
    pub(crate) fn shared_id(&mut self) -> Arc<str> {
        match &self.shared_id {
            Some(id) if **id == *self.id() => Arc::clone(id),
            _ => {
                let id: Arc<str> = Arc::from(self.id());
                self.shared_id = Some(Arc::clone(&id));
                id
            }
        }
    }

    /// The id the agent will run under: the option's, else the agent
    /// value's.
    pub fn id(&self) -> &str {
        self.options.id.as_deref().unwrap_or(self.agent.id())
    }
}
