//! The `Jido` instance: a root supervisor, a registry, a task supervisor and
//! default options.

use std::collections::VecDeque;

/// The bookkeeping maps of agents (by actor and by id), touched several
/// times by every start and stop: hashed with foldhash (seeded per
/// process, as the state maps), not SipHash.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use serde_json::json;
use tokio::time::Instant;

use super::actor::{AgentServer, spawn_error};
use super::agent_ref::{AgentRef, not_alive};
use super::directives::DirectiveExec;
use super::exit::{AgentEvent, AgentEvents, ExitBook, ExitReason};
use super::msg::{AgentMsg, HierarchyMsg, Internal};
use super::options::{AgentServerArgs, ErrorPolicy, ParentRef, ServerOptions};
use super::{DEFAULT_MAX_RESTARTS, DEFAULT_RESTART_WINDOW, DEFAULT_STOP_TIMEOUT, signal_types};
use crate::agent::AgentState;
use crate::directive::Restart;
use crate::error::{Error, Result};
use crate::exec::{DEFAULT_SHUTDOWN_GRACE, Exec, ExecOptions, TaskSupervisor};
use crate::signal::Signal;
use crate::signal::dispatch::{CircuitBreakers, DispatchConfig};

/// Configuration of a [`Jido`] instance.
///
/// ```
/// use std::time::Duration;
/// use jido::server::{ErrorPolicy, JidoConfig};
///
/// let config = JidoConfig::new()
///     .name("shop")
///     .error_policy(ErrorPolicy::max_errors(5))
///     .max_restarts(3, Duration::from_secs(5));
/// # let _ = config;
/// ```
#[derive(Clone, Default)]
pub struct JidoConfig {
    name: Option<String>,
    defaults: ServerOptions,
    exec_defaults: ExecOptions,
    max_restarts: Option<(u32, Duration)>,
    shutdown_grace: Option<Duration>,
    /// Per agent kind: how to make it from its id (see `JidoConfig::kind`).
    #[cfg(feature = "persist")]
    pub(crate) kinds: std::collections::HashMap<String, Arc<super::KindFactory>>,
}

impl fmt::Debug for JidoConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JidoConfig")
            .field("name", &self.name)
            .field("defaults", &self.defaults)
            .field("exec_defaults", &self.exec_defaults)
            .field("max_restarts", &self.max_restarts)
            .field("shutdown_grace", &self.shutdown_grace)
            .finish_non_exhaustive()
    }
}

impl JidoConfig {
    /// Jido's defaults and a generated name.
    pub fn new() -> Self {
        Self::default()
    }

    /// The instance's name (telemetry field `jido_instance`); default
    /// `"jido-<uuid>"`.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Default server options of every agent of the instance (an agent's
    /// own options win). Options set before on this config (a directive
    /// executor, error policy or default dispatch) are kept unless
    /// `defaults` sets them too.
    #[must_use]
    pub fn defaults(mut self, defaults: ServerOptions) -> Self {
        self.defaults = defaults.or(&self.defaults);
        self
    }

    /// Default dispatch of Emit directives.
    #[must_use]
    pub fn default_dispatch(mut self, dispatch: DispatchConfig) -> Self {
        self.defaults = self.defaults.default_dispatch(dispatch);
        self
    }

    /// Default error policy.
    #[must_use]
    pub fn error_policy(mut self, policy: ErrorPolicy) -> Self {
        self.defaults = self.defaults.error_policy(policy);
        self
    }

    /// Registers a custom directive executor for every agent.
    #[must_use]
    pub fn directive_exec<E: DirectiveExec>(mut self, exec: E) -> Self {
        self.defaults = self.defaults.directive_exec(exec);
        self
    }

    /// Defaults of the instance's executor (timeouts, retries of actions).
    #[must_use]
    pub fn exec_options(mut self, opts: ExecOptions) -> Self {
        self.exec_defaults = opts;
        self
    }

    /// How long [`Jido::shutdown`] waits for the instance's tasks to end
    /// once cancelled (default
    /// [`DEFAULT_SHUTDOWN_GRACE`](crate::exec::DEFAULT_SHUTDOWN_GRACE),
    /// 5 s). Only tasks whose thread is blocked in synchronous code take
    /// that long; shutdown then returns with them still running (see
    /// [`TaskSupervisor`](crate::exec::TaskSupervisor#what-can-be-interrupted)).
    #[must_use]
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = Some(grace);
        self
    }

    /// Where the instance's agents are kept between runs (feature
    /// `persist`): the default [`ServerOptions::storage`] of every agent.
    /// Checkpoints are stored under `namespace / agent name / agent id`,
    /// the namespace being the instance's [`name`](JidoConfig::name) when
    /// one was given, `"default"` otherwise (a generated name would change
    /// on every run).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use jido::persist::MemoryStorage;
    /// use jido::server::{Durability, JidoConfig, ServerOptions};
    ///
    /// let config = JidoConfig::new()
    ///     .name("shop")
    ///     .storage(Arc::new(MemoryStorage::new()))
    ///     .defaults(ServerOptions::new().durability(Durability::Checkpoint));
    /// # let _ = config;
    /// ```
    #[cfg(feature = "persist")]
    #[must_use]
    pub fn storage(mut self, storage: Arc<dyn crate::persist::Storage>) -> Self {
        self.defaults = self.defaults.storage(storage);
        self
    }

    /// Restart intensity: a supervised agent that needs more than `max`
    /// restarts within `window` is given up (default 3 in 5 s).
    #[must_use]
    pub fn max_restarts(mut self, max: u32, window: Duration) -> Self {
        self.max_restarts = Some((max, window));
        self
    }
}

#[derive(Default)]
/// Both maps share the agent's id (the `Arc<str>` of its handle): no
/// copy of it per agent.
struct Registry {
    by_id: HashMap<Arc<str>, AgentRef>,
    by_actor: HashMap<ActorId, Arc<str>>,
}

pub(crate) struct Shared {
    registry: RwLock<Registry>,
    /// One lock per id being started by `get_or_start` (removed once the
    /// start is done).
    starting: Mutex<HashMap<Arc<str>, Arc<tokio::sync::Mutex<()>>>>,
    /// Agents writing their last checkpoint before they hibernate (still
    /// registered until they end).
    hibernating: Mutex<std::collections::HashSet<ActorId, foldhash::fast::RandomState>>,
    /// The timer table: hibernated agents with timers, by id, with the
    /// task that thaws each when its next timer is due.
    #[cfg(feature = "persist")]
    parked: Mutex<HashMap<String, (i64, tokio::task::AbortHandle)>>,
    exits: Mutex<ExitBook>,
    specs: Mutex<HashMap<ActorId, AgentServerArgs>>,
    shutting_down: AtomicBool,
    max_restarts: u32,
    restart_window: Duration,
}

impl Shared {
    /// The agent running as `actor` is never restarted: it was asked to
    /// stop through its own API.
    pub(crate) fn forget_restart(&self, actor: ActorId) {
        self.specs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&actor);
    }

    /// The exit record and event channel.
    pub(crate) fn exits(&self) -> std::sync::MutexGuard<'_, ExitBook> {
        self.exits.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The registry for reading; a poisoned lock still holds valid data.
    fn registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The registry for writing.
    fn registry_mut(&self) -> std::sync::RwLockWriteGuard<'_, Registry> {
        self.registry
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

struct JidoInner {
    name: String,
    /// The storage namespace of the instance's agents: its name when one
    /// was given, `"default"` otherwise.
    namespace: Arc<str>,
    root: ActorRef<RootMsg>,
    shared: Arc<Shared>,
    exec: Exec,
    defaults: ServerOptions,
    breakers: CircuitBreakers,
    /// Starts the children that specs describe (see [`ChildHost`]).
    child_host: RwLock<Option<Arc<dyn super::ChildHost>>>,
}

/// A Jido instance: a root supervisor actor that every agent of the
/// instance is linked under, a registry (agent id → [`AgentRef`]), the
/// task supervisor actions and `cmd`s run in, and default options.
///
/// Instances are isolated: two instances may run agents with the same id,
/// and shutting one down touches nothing of the other. Cloning gives
/// another handle to the same instance.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::prelude::*;
/// use jido::server::{Jido, JidoConfig, ServerOptions};
///
/// struct Idle;
/// impl Agent for Idle { const NAME: &'static str = "idle"; type Schema = (); }
///
/// let a = Jido::start(JidoConfig::new()).await?;
/// let b = Jido::start(JidoConfig::new()).await?;
/// a.start_agent(AgentState::new(Idle, AgentOptions::new().id("same")), ServerOptions::new()).await?;
/// b.start_agent(AgentState::new(Idle, AgentOptions::new().id("same")), ServerOptions::new()).await?;
/// assert!(a.whereis("same").is_some() && b.whereis("same").is_some());
///
/// a.stop_agent("same").await?;
/// assert!(a.whereis("same").is_none() && b.whereis("same").is_some());
/// a.shutdown().await;
/// b.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Jido {
    inner: Arc<JidoInner>,
}

impl fmt::Debug for Jido {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Jido")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

impl Jido {
    /// Starts an instance.
    ///
    /// # Errors
    ///
    /// An internal error when the root supervisor cannot start.
    pub async fn start(config: JidoConfig) -> Result<Jido> {
        let (max_restarts, restart_window) = config
            .max_restarts
            .unwrap_or((DEFAULT_MAX_RESTARTS, DEFAULT_RESTART_WINDOW));
        let shared = Arc::new(Shared {
            registry: RwLock::new(Registry::default()),
            starting: Mutex::new(HashMap::default()),
            hibernating: Mutex::new(std::collections::HashSet::default()),
            #[cfg(feature = "persist")]
            parked: Mutex::new(HashMap::default()),
            exits: Mutex::new(ExitBook::default()),
            specs: Mutex::new(HashMap::default()),
            shutting_down: AtomicBool::new(false),
            max_restarts,
            restart_window,
        });
        let (root, _) = Actor::spawn(None, InstanceSupervisor, Arc::clone(&shared))
            .await
            .map_err(|e| Error::internal(format!("instance supervisor failed to start: {e}")))?;
        let namespace: Arc<str> = Arc::from(config.name.as_deref().unwrap_or("default"));
        let name = config
            .name
            .unwrap_or_else(|| format!("jido-{}", uuid::Uuid::now_v7()));
        let jido = Jido {
            inner: Arc::new(JidoInner {
                name,
                namespace,
                root,
                shared,
                exec: Exec::with_supervisor(
                    TaskSupervisor::new().with_shutdown_grace(
                        config.shutdown_grace.unwrap_or(DEFAULT_SHUTDOWN_GRACE),
                    ),
                    config.exec_defaults,
                ),
                defaults: config.defaults,
                breakers: CircuitBreakers::new(),
                child_host: RwLock::new(None),
            }),
        };
        // The timer table is process memory: fill it again from storage.
        #[cfg(feature = "persist")]
        if !config.kinds.is_empty()
            && let Err(error) = jido.rearm_timers(&config.kinds).await
        {
            jido.shutdown().await;
            return Err(error);
        }
        Ok(jido)
    }

    /// Installs (or with `None` removes) the host that starts the
    /// children a [`ChildKind`](crate::directive::ChildKind) describes,
    /// for every agent of the instance, those already running included;
    /// returns the one it replaces. Without a host such a SpawnAgent
    /// fails (see [`ChildHost`](super::ChildHost)). Feature `cluster`: `Cluster::start`
    /// installs the cluster's, `Cluster::shutdown` removes it.
    pub fn set_child_host(
        &self,
        host: Option<Arc<dyn super::ChildHost>>,
    ) -> Option<Arc<dyn super::ChildHost>> {
        let mut slot = self
            .inner
            .child_host
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *slot, host)
    }

    /// The installed child host, if any.
    pub fn child_host(&self) -> Option<Arc<dyn super::ChildHost>> {
        self.inner
            .child_host
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The instance's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The storage namespace of the instance's agents (see
    /// [`JidoConfig::storage`]).
    #[cfg_attr(not(feature = "persist"), allow(dead_code))]
    pub(crate) fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    /// The executor (and task supervisor) of the instance.
    pub fn exec(&self) -> &Exec {
        &self.inner.exec
    }

    /// The circuit breakers of the instance: every Emit dispatch of its
    /// agents goes through them, so a target failing for one instance
    /// never opens a breaker in another. Closed breakers unused for
    /// [`CIRCUIT_IDLE_TTL`](crate::signal::dispatch::CIRCUIT_IDLE_TTL) are
    /// evicted.
    pub fn circuit_breakers(&self) -> &CircuitBreakers {
        &self.inner.breakers
    }

    /// The root supervisor's cell: every agent of the instance is linked
    /// under it.
    pub fn supervisor_cell(&self) -> ActorCell {
        self.inner.root.get_cell()
    }

    pub(crate) fn defaults(&self) -> &ServerOptions {
        &self.inner.defaults
    }

    /// Whether the instance is shut down: [`shutdown`](Jido::shutdown) was
    /// called, or its task supervisor or root supervisor is gone (stopped
    /// or killed by someone else). Its agents then answer every signal with
    /// [`Cancelled`](crate::ErrorKind::Cancelled) "jido instance is shut
    /// down".
    pub fn is_shut_down(&self) -> bool {
        self.inner.shared.shutting_down.load(Ordering::SeqCst)
            || self.inner.exec.supervisor().is_shut_down()
            || self.inner.root.get_status() >= ractor::ActorStatus::Stopping
    }

    /// Starts `agent` under the instance supervisor with `options` (unset
    /// options take the instance's defaults).
    ///
    /// Returns once the agent's start-up (ractor's `pre_start`) is done:
    /// options and routes checked, `initial_state` merged, the strategy's
    /// `init` run (its directives queued), the agent registered under its
    /// id ([`whereis`](Jido::whereis) finds it) and announced on
    /// [`events`](Jido::events), and for a child its parent bound (it
    /// monitors the parent). Still to come, in the agent's first turn and
    /// before any signal you send after this returns: the strategy's
    /// `init` directives are executed, a parent is told of the child
    /// (`jido.agent.child.started`), and a parent found already dead
    /// triggers `on_parent_death`. So a `call` made right after this
    /// returns sees the agent as its `init` left it.
    ///
    /// # Errors
    ///
    /// A configuration error for invalid options, an invalid route
    /// (naming it) or an unusable state schema (see
    /// [`AgentState::check_definition`](crate::agent::AgentState::check_definition)),
    /// "agent id already registered" when the id is taken in
    /// this instance, a cancelled error after shutdown.
    pub async fn start_agent(&self, agent: AgentState, options: ServerOptions) -> Result<AgentRef> {
        if self.is_shut_down() {
            return Err(Error::cancelled("jido instance is shut down"));
        }
        let mut args = AgentServerArgs::new(agent, options.jido(self.clone()));
        args.supervised = true;
        let id = args.shared_id();
        let (actor, _) = Actor::spawn_linked(None, AgentServer, args, self.supervisor_cell())
            .await
            .map_err(spawn_error)?;
        Ok(AgentRef::new(actor, id).in_instance(&self.inner.shared))
    }

    /// The agent with this id: the running one, or one started with what
    /// `start` returns (the agent value and its options; the id is `id`).
    /// With a storage this thaws a hibernated agent (see
    /// [`ServerOptions::idle_timeout`]) with its state. Concurrent calls for
    /// one id start it once: the others wait and get the same agent. A
    /// lookup that finds the agent while it hibernates waits for it to end
    /// and starts it again.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
    /// use jido::prelude::*;
    /// use jido::server::{Jido, JidoConfig, ServerOptions};
    ///
    /// struct Cart;
    /// impl Agent for Cart {
    ///     const NAME: &'static str = "cart";
    ///     type Schema = ();
    /// }
    /// let jido = Jido::start(JidoConfig::new()).await?;
    /// let make = || (AgentState::new(Cart, AgentOptions::new()), ServerOptions::new());
    /// let a = jido.get_or_start("cart-1", make).await?;
    /// let b = jido.get_or_start("cart-1", make).await?;
    /// assert_eq!(a, b);
    /// # jido.shutdown().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`start_agent`](Jido::start_agent) (a restore that fails
    /// included).
    pub async fn get_or_start(
        &self,
        id: &str,
        start: impl FnOnce() -> (AgentState, ServerOptions),
    ) -> Result<AgentRef> {
        if let Some(agent) = self.live(id).await {
            return Ok(agent);
        }
        let shared = &self.inner.shared;
        let key: Arc<str> = Arc::from(id);
        let lock = Arc::clone(
            shared
                .starting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(Arc::clone(&key))
                .or_default(),
        );
        let result = {
            let _guard = lock.lock().await;
            match self.live(id).await {
                Some(agent) => Ok(agent),
                None => {
                    let (agent, options) = start();
                    self.start_agent(agent, options.id(id)).await
                }
            }
        };
        let mut starting = shared
            .starting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if starting.get(&key).is_some_and(|l| Arc::ptr_eq(l, &lock)) {
            starting.remove(&key);
        }
        result
    }

    /// The registered agent `id`, once it is not hibernating (waits for a
    /// hibernating one to end).
    async fn live(&self, id: &str) -> Option<AgentRef> {
        loop {
            let agent = self.whereis(id)?;
            let hibernating = self
                .inner
                .shared
                .hibernating
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&agent.actor_ref().get_id());
            if !hibernating {
                return Some(agent);
            }
            agent.wait_exit().await;
            tokio::task::yield_now().await;
        }
    }

    /// Marks the agent running as `actor` as hibernating.
    #[cfg_attr(not(feature = "persist"), allow(dead_code))]
    pub(crate) fn hibernating(&self, actor: ActorId) {
        self.inner
            .shared
            .hibernating
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(actor);
    }

    /// Puts a hibernated agent with timers in the timer table: it is
    /// thawed (started from `args`, restored from its storage) when
    /// `due_ms` (Unix ms, the runtime's wall clock) comes.
    #[cfg(feature = "persist")]
    pub(crate) fn park(&self, id: &str, due_ms: i64, args: AgentServerArgs) {
        let AgentServerArgs { agent, options, .. } = args;
        self.park_agent(id, due_ms, agent, options);
    }

    /// [`park`](Jido::park) with the agent and its options.
    #[cfg(feature = "persist")]
    pub(crate) fn park_agent(
        &self,
        id: &str,
        due_ms: i64,
        agent: AgentState,
        mut options: ServerOptions,
    ) {
        if self.is_shut_down() {
            return;
        }
        let delay =
            u64::try_from(due_ms.saturating_sub(super::durable::wall_now_ms())).unwrap_or(0);
        options.thaw_due = Some(due_ms);
        let jido = self.clone();
        let key = id.to_owned();
        let task = self.exec().supervisor().spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            {
                let mut parked = jido
                    .inner
                    .shared
                    .parked
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let ours = tokio::task::try_id()
                    .is_some_and(|me| parked.get(&key).is_some_and(|(_, t)| t.id() == me));
                if ours {
                    parked.remove(&key);
                }
            }
            tracing::debug!(
                name: "jido.persist.thaw.timer",
                target: "jido::persist",
                agent_id = %key,
                due_ms,
                "jido.persist.thaw.timer"
            );
            if let Err(error) = jido.get_or_start(&key, move || (agent, options)).await {
                tracing::warn!(
                    target: "jido::persist",
                    agent_id = %key,
                    error = %error,
                    "agent thaw for its timer failed"
                );
            }
        });
        if let Ok(task) = task {
            let previous = self
                .inner
                .shared
                .parked
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id.to_owned(), (due_ms, task.abort_handle()));
            if let Some((_, previous)) = previous {
                previous.abort();
            }
        }
    }

    /// When the timer table thaws the hibernated agent `id` (Unix ms),
    /// if it holds it: a hibernated agent with timers is kept there until
    /// its next timer is due (feature `persist`).
    #[cfg(feature = "persist")]
    pub fn parked_due(&self, id: &str) -> Option<i64> {
        self.inner
            .shared
            .parked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .map(|(due, _)| *due)
    }

    /// The instance's restart intensity: at most this many restarts of one
    /// agent within the window (`JidoConfig::max_restarts`).
    #[cfg(feature = "cluster")]
    pub(crate) fn restart_limits(&self) -> (u32, Duration) {
        let shared = self.shared();
        (shared.max_restarts, shared.restart_window)
    }

    /// The running agent with this id.
    pub fn whereis(&self, id: &str) -> Option<AgentRef> {
        let reg = self.inner.shared.registry();
        reg.by_id.get(id).filter(|r| r.is_alive()).cloned()
    }

    /// Entries in the registry, live or not (for tests of cleanup).
    #[doc(hidden)]
    pub fn registered_count(&self) -> usize {
        self.inner.shared.registry().by_id.len()
    }

    /// A receiver of this instance's agent lifecycle events: every agent
    /// started (restarts and SpawnAgent children included), every exit
    /// with its [`ExitReason`] and whether a restart follows, every agent
    /// given up after too many restarts. It sees what happens after this
    /// call, in order.
    ///
    /// This is how a service embedding Jido learns why its agents end (and
    /// sees the children its agents spawn) without a ractor supervisor of
    /// its own.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
    /// use jido::prelude::*;
    /// use jido::server::{AgentEvent, ExitReason, Jido, JidoConfig, ServerOptions};
    ///
    /// struct Idle;
    /// impl Agent for Idle { const NAME: &'static str = "idle"; type Schema = (); }
    ///
    /// let jido = Jido::start(JidoConfig::new()).await?;
    /// let mut events = jido.events();
    /// let agent = jido.start_agent(AgentState::new(Idle, AgentOptions::new().id("a1")), ServerOptions::new()).await?;
    /// assert!(matches!(events.recv().await?, AgentEvent::Started { id, .. } if id == "a1"));
    ///
    /// agent.stop("done").await?;
    /// match events.recv().await? {
    ///     AgentEvent::Exited { id, reason, restarting, .. } => {
    ///         assert_eq!((id.as_str(), restarting), ("a1", false));
    ///         assert_eq!(reason, ExitReason::Stopped("done".into()));
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// # jido.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn events(&self) -> AgentEvents {
        self.inner.shared.exits().subscribe()
    }

    /// The agents of this instance that end for good (no restart), without
    /// loss (see `ExitBook::final_exits`): the cluster's watches and fencing
    /// events rest on it.
    #[cfg(feature = "cluster")]
    pub(crate) fn final_exits(&self) -> tokio::sync::mpsc::UnboundedReceiver<super::FinalExit> {
        self.inner.shared.exits().final_exits()
    }

    /// Every running agent, sorted by id.
    pub fn agents(&self) -> Vec<AgentRef> {
        let reg = self.inner.shared.registry();
        let mut all: Vec<AgentRef> = reg
            .by_id
            .values()
            .filter(|r| r.is_alive())
            .cloned()
            .collect();
        all.sort_by(|a, b| a.id().cmp(b.id()));
        all
    }

    /// Stops the agent `id` with the reason `"shutdown"` as
    /// [`AgentRef::stop`] does (never restarted; killed after 5 s) and
    /// removes it from the registry.
    ///
    /// # Errors
    ///
    /// [`NotFound`](crate::ErrorKind::NotFound) when no such agent runs; a
    /// [`Timeout`](crate::ErrorKind::Timeout) when even the kill did not
    /// finish — the agent still runs, and keeps its registry entry.
    pub async fn stop_agent(&self, id: &str) -> Result<()> {
        let agent = self.whereis(id).ok_or_else(|| not_alive(id))?;
        let killed = agent
            .stop_reporting_kill("shutdown".to_owned(), DEFAULT_STOP_TIMEOUT)
            .await?;
        if killed {
            // A graceful stop left the registry in `post_stop`; a killed
            // agent's state (which would) may not be dropped yet.
            let mut reg = self.inner.shared.registry_mut();
            reg.remove(id, agent.actor_ref().get_id());
        }
        Ok(())
    }

    /// Shuts the instance down: every agent is asked to stop with
    /// `"shutdown"` at once, those still running after 5 s are killed, no
    /// agent is restarted, every task of the executor is cancelled, then
    /// the root supervisor stops. From the start of the shutdown the
    /// registry is empty (`whereis` finds nothing); afterwards nothing of
    /// the instance runs and `start_agent` fails. Calling it again does
    /// nothing.
    pub async fn shutdown(&self) {
        let shared = &self.inner.shared;
        if shared.shutting_down.swap(true, Ordering::SeqCst) {
            return;
        }
        #[cfg(feature = "persist")]
        for (_, (_, task)) in
            std::mem::take(&mut *shared.parked.lock().unwrap_or_else(PoisonError::into_inner))
        {
            task.abort();
        }
        // The registry is taken, not copied (`whereis` finds no agent from
        // here on). Every agent is asked to stop at once, in spawn order
        // (actor ids grow: memory is freed in the order it was taken, much
        // faster for many agents than hash order), then all are awaited
        // under one deadline: one timer, not one per agent.
        let registry = std::mem::take(&mut *shared.registry_mut());
        let mut agents: Vec<AgentRef> = registry.by_id.into_values().collect();
        drop(registry.by_actor);
        agents.sort_unstable_by_key(|a| a.actor_ref().get_id().pid());
        for agent in &agents {
            agent.request_stop("shutdown".to_owned());
        }
        // Awaited one after the other (they all stop at once meanwhile):
        // no future per agent to allocate and poll, which for a million
        // agents cost more than the wait, in an allocator busy freeing
        // them.
        let all_stopped = async {
            for agent in &agents {
                let _ = agent.actor_ref().wait(None).await;
            }
        };
        if tokio::time::timeout(DEFAULT_STOP_TIMEOUT, all_stopped)
            .await
            .is_err()
        {
            futures::future::join_all(
                agents
                    .iter()
                    .filter(|a| a.is_alive())
                    .map(|a| a.actor_ref().kill_and_wait(Some(DEFAULT_STOP_TIMEOUT))),
            )
            .await;
        }
        // Anything still linked (e.g. an agent between restart and
        // registration).
        let leftovers = self.inner.root.get_children();
        futures::future::join_all(
            leftovers
                .iter()
                .map(|c| c.stop_and_wait(Some("shutdown".into()), Some(DEFAULT_STOP_TIMEOUT))),
        )
        .await;
        self.inner.exec.shutdown().await;
        let _ = self
            .inner
            .root
            .stop_and_wait(None, Some(DEFAULT_STOP_TIMEOUT))
            .await;
        // Break the reference cycles (restart specs hold the instance).
        shared
            .specs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        shared.exits().close();
        let mut reg = shared.registry_mut();
        *reg = Registry::default();
    }

    /// Registers `agent` under `id`; an agent linked under the instance
    /// supervisor (`supervised`) is also announced as started and its exit
    /// will be recorded.
    pub(crate) fn register(
        &self,
        id: &str,
        agent: AgentRef,
        supervised: bool,
        parent: Option<&str>,
    ) -> Result<()> {
        let mut reg = self.inner.shared.registry_mut();
        if reg
            .by_id
            .get(id)
            .is_some_and(|existing| existing.is_alive() && existing != &agent)
        {
            return Err(Error::configuration("agent id already registered")
                .with_detail("agent_id", id.to_owned())
                .with_detail("jido_instance", self.inner.name.clone()));
        }
        let agent = agent.in_instance(&self.inner.shared);
        let actor = agent.actor_ref().get_id();
        let key = if agent.id() == id {
            Arc::clone(agent.shared_id())
        } else {
            Arc::from(id)
        };
        if let Some(old) = reg.by_id.insert(Arc::clone(&key), agent) {
            reg.by_actor.remove(&old.actor_ref().get_id());
        }
        reg.by_actor.insert(actor, Arc::clone(&key));
        drop(reg);
        if supervised {
            // The registry's key, shared: no copy of the id.
            self.inner.shared.exits().started(actor, &key, parent);
        }
        Ok(())
    }

    /// Removes `id` (running as `actor`) from the registry; `durable`: it
    /// may have marked itself hibernating.
    pub(crate) fn unregister(&self, id: &str, actor: ActorId, durable: bool) {
        if durable {
            self.inner
                .shared
                .hibernating
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&actor);
        }
        if self.inner.shared.shutting_down.load(Ordering::SeqCst) {
            // `shutdown` clears the registry at the end: no lock per agent.
            return;
        }
        let mut reg = self.inner.shared.registry_mut();
        reg.remove(id, actor);
    }

    /// The agent running as `actor` is not restarted when it ends.
    pub(crate) fn forget_restart(&self, actor: ActorId) {
        self.inner.shared.forget_restart(actor);
    }

    pub(crate) fn register_restart(&self, actor: ActorId, args: AgentServerArgs) {
        self.inner
            .shared
            .specs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(actor, args);
    }

    /// Records the current parent of `actor` in its restart spec (after an
    /// adoption, or `None` when the parent was dropped), so a restart
    /// binds the child to the parent it has then, not the one it started
    /// with. A no-op for agents without a spec.
    pub(crate) fn set_restart_parent(&self, actor: ActorId, parent: Option<ParentRef>) {
        let mut specs = self
            .inner
            .shared
            .specs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(args) = specs.get_mut(&actor) {
            args.options.parent = parent.map(Box::new);
        }
    }
}

impl Registry {
    fn remove(&mut self, id: &str, actor: ActorId) {
        if self
            .by_id
            .get(id)
            .is_some_and(|r| r.actor_ref().get_id() == actor)
        {
            self.by_id.remove(id);
        }
        self.by_actor.remove(&actor);
    }

    fn remove_actor(&mut self, actor: ActorId) {
        let Some(id) = self.by_actor.remove(&actor) else {
            return;
        };
        if self
            .by_id
            .get(&id)
            .is_some_and(|r| r.actor_ref().get_id() == actor)
        {
            self.by_id.remove(&id);
        }
    }
}

/// How an agent ended, as its supervisor saw it: the reason, and whether
/// ractor drained it (reported as `Normal`, but never restarted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exit {
    reason: ExitReason,
    drained: bool,
}

impl Exit {
    /// Stopped, with ractor's stop reason.
    pub(crate) fn stopped(reason: Option<String>) -> Self {
        let drained = reason.as_deref() == Some(DRAINED);
        Exit {
            reason: ExitReason::from_ractor(Ok(reason)),
            drained,
        }
    }

    /// Failed (a panic or a handler error).
    pub(crate) fn failed(error: String) -> Self {
        Exit {
            reason: ExitReason::from_ractor(Err(error)),
            drained: false,
        }
    }

    /// A shutdown, a drain (ractor's `drain`: the agent finished its work
    /// and stopped normally) or a fenced or hibernated agent (a newer
    /// owner holds it, or it sleeps until thawed): never restarted.
    fn is_shutdown(&self) -> bool {
        self.drained
            || match &self.reason {
                ExitReason::Shutdown | ExitReason::Fenced | ExitReason::Hibernated => true,
                ExitReason::Stopped(r) => r.starts_with("shutdown:"),
                _ => false,
            }
    }

    fn is_clean(&self) -> bool {
        matches!(self.reason, ExitReason::Normal) || self.is_shutdown()
    }

    fn reason(&self) -> String {
        self.reason.to_string()
    }
}

/// The exit reason ractor gives an actor that was drained.
pub(crate) const DRAINED: &str = "Drained";

/// Whether a child with this policy is restarted after this exit.
pub(crate) fn should_restart(restart: Restart, exit: &Exit) -> bool {
    match restart {
        Restart::Temporary => false,
        Restart::Transient => !exit.is_clean(),
        Restart::Permanent => !exit.is_shutdown(),
    }
}

/// [`should_restart`] for an exit known only by its stop reason (a remote
/// child's, as its node reported it).
#[cfg(feature = "cluster")]
pub(crate) fn should_restart_after(restart: Restart, reason: &str) -> bool {
    should_restart(restart, &Exit::stopped(Some(reason.to_owned())))
}

struct InstanceSupervisor;

struct RootState {
    shared: Arc<Shared>,
    restarts: RestartHistory,
}

/// Restart times per agent id, within the restart window. Bounded: the
/// entry of an agent goes when it is given up or ends for good, and
/// entries whose window has passed are pruned (amortised: when the map
/// doubled since the last pruning, and at least once per window).
#[derive(Default)]
struct RestartHistory {
    by_id: HashMap<String, VecDeque<Instant>>,
    prune_at: usize,
    last_prune: Option<Instant>,
}

impl RestartHistory {
    /// Records a restart of `id` at `now`, or refuses it with the number
    /// of restarts within the window when there were already `max` (the
    /// agent is then given up and forgotten).
    fn record(
        &mut self,
        id: &str,
        now: Instant,
        window: Duration,
        max: u32,
    ) -> std::result::Result<(), usize> {
        self.prune(now, window);
        let history = self.by_id.entry(id.to_owned()).or_default();
        drop_expired(history, now, window);
        if history.len() >= max as usize {
            let restarts = history.len();
            self.by_id.remove(id);
            return Err(restarts);
        }
        history.push_back(now);
        Ok(())
    }

    /// Forgets `id` (it ended for good).
    fn forget(&mut self, id: &str, now: Instant, window: Duration) {
        self.by_id.remove(id);
        self.prune(now, window);
    }

    /// Drops every entry whose window has passed, when the map doubled
    /// since the last pruning or a window went by: O(1) amortised per
    /// exit, and the map never holds more than the restarts of about two
    /// windows (plus a constant).
    fn prune(&mut self, now: Instant, window: Duration) {
        let due_by_time = self
            .last_prune
            .is_none_or(|t| now.duration_since(t) > window);
        if self.by_id.len() < self.prune_at && !due_by_time {
            return;
        }
        self.by_id.retain(|_, history| {
            drop_expired(history, now, window);
            !history.is_empty()
        });
        self.by_id.shrink_to(self.by_id.len() * 2);
        self.prune_at = (self.by_id.len() * 2).max(16);
        self.last_prune = Some(now);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_id.len()
    }
}

fn drop_expired(history: &mut VecDeque<Instant>, now: Instant, window: Duration) {
    while history
        .front()
        .is_some_and(|t| now.duration_since(*t) > window)
    {
        history.pop_front();
    }
}

/// The instance supervisor takes no message (only supervision events). A
/// private empty type rather than `()`: with `ractor/cluster` on, `()` is
/// a serialisable message and every NodeSession would advertise the
/// supervisor to its peers.
pub(crate) enum RootMsg {}

#[cfg(feature = "cluster")]
impl ractor::Message for RootMsg {}

impl Actor for InstanceSupervisor {
    type Msg = RootMsg;
    type State = RootState;
    type Arguments = Arc<Shared>;

    async fn pre_start(
        &self,
        _myself: ActorRef<RootMsg>,
        shared: Arc<Shared>,
    ) -> std::result::Result<RootState, ActorProcessingErr> {
        Ok(RootState {
            shared,
            restarts: RestartHistory::default(),
        })
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<RootMsg>,
        event: SupervisionEvent,
        state: &mut RootState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        // Never the ractor default (stop the supervisor when a child ends).
        let (cell, exit) = match event {
            SupervisionEvent::ActorTerminated(cell, _, reason) => (cell, Exit::stopped(reason)),
            SupervisionEvent::ActorFailed(cell, err) => (cell, Exit::failed(err.to_string())),
            _ => return Ok(()),
        };
        if let Some(args) = state.on_exit(cell.get_id(), exit) {
            // Boxed: the spawn future is large (~2 KB) and inline it would
            // be built and moved for every exit, restarts or not.
            Box::pin(restart(myself, args)).await;
        }
        Ok(())
    }
}

/// Starts a supervised agent again from its first arguments.
async fn restart(myself: ActorRef<RootMsg>, args: Box<AgentServerArgs>) {
    let id = args.id().to_owned();
    if let Err(err) = Actor::spawn_linked(None, AgentServer, *args, myself.get_cell()).await {
        let err = spawn_error(err);
        tracing::error!(target: "jido::agent_server", agent_id = %id, error = %err, "agent restart failed");
    }
}

impl RootState {
    /// Records the exit of the agent that ran as `actor`; the arguments
    /// to restart it with when its policy says so.
    fn on_exit(&mut self, actor: ActorId, exit: Exit) -> Option<Box<AgentServerArgs>> {
        // The registry and restart spec first, then the exit book under
        // one lock: a waiter woken by the record finds the registry
        // already without the agent.
        let next = self.after_exit(actor, &exit);
        let reason = exit.reason;
        let mut exits = self.shared.exits();
        if let Some(id) = exits.record(actor, &reason) {
            let restarting = matches!(next, AfterExit::Restart(_));
            if !restarting {
                exits.notify_final(&id, &reason);
            }
            exits.publish(|| AgentEvent::Exited {
                id: id.to_string(),
                actor,
                reason,
                restarting,
            });
            if let AfterExit::GiveUp(restarts) = next {
                exits.publish(|| AgentEvent::GivenUp {
                    id: id.to_string(),
                    restarts,
                });
            }
        }
        match next {
            AfterExit::Restart(args) => Some(args),
            _ => None,
        }
    }

    /// What follows the exit of the agent that ran as `actor`: a restart
    /// when its policy says so and the limit allows.
    fn after_exit(&mut self, actor: ActorId, exit: &Exit) -> AfterExit {
        if self.shared.shutting_down.load(Ordering::SeqCst) {
            // `shutdown` clears the registry and the restart specs itself.
            return AfterExit::Stay;
        }
        self.shared.registry_mut().remove_actor(actor);
        let spec = self
            .shared
            .specs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&actor);
        let Some(mut args) = spec else {
            return AfterExit::Stay;
        };
        if self.shared.shutting_down.load(Ordering::SeqCst) {
            return AfterExit::Stay;
        }
        let id = args.id().to_owned();
        let now = Instant::now();
        let window = self.shared.restart_window;
        let restart = args.options.restart.unwrap_or(Restart::Temporary);
        if !should_restart(restart, exit) {
            self.restarts.forget(&id, now, window);
            return AfterExit::Stay;
        }
        // The child is bound to its parent as it is now: the live actor
        // registered under the parent's id (a parent that restarted is a
        // new actor).
        if let Some(parent) = args.options.parent.as_mut()
            && let Some(live) = self.shared.registry().by_id.get(parent.id.as_str())
            && live.is_alive()
        {
            parent.actor = live.actor_ref().clone();
        }
        if let Err(restarts) = self
            .restarts
            .record(&id, now, window, self.shared.max_restarts)
        {
            tracing::error!(
                name: "jido.agent_server.restart.given_up",
                target: "jido::agent_server",
                agent_id = %id,
                restarts,
                reason = %exit.reason(),
                "agent {id} keeps failing: restart limit reached, given up"
            );
            if let Some(parent) = &args.options.parent {
                let signal = Signal::builder(signal_types::CHILD_GIVEN_UP)
                    .source(format!("/agent/{}", parent.id))
                    .data(json!({
                        "tag": parent.tag,
                        "id": id,
                        "restarts": restarts,
                        "reason": exit.reason(),
                    }))
                    .build();
                if let Ok(signal) = signal {
                    // Processed by the parent after this incarnation's exit.
                    let _ = parent
                        .actor
                        .send_message(AgentMsg::internal(Internal::Hierarchy(Box::new(
                            HierarchyMsg::GivenUp { actor, signal },
                        ))));
                }
            }
            return AfterExit::GiveUp(restarts);
        }
        tracing::info!(
            name: "jido.agent_server.restart",
            target: "jido::agent_server",
            agent_id = %id,
            reason = %exit.reason(),
            "restarting agent {id}"
        );
        AfterExit::Restart(Box::new(args))
    }
}

/// What the instance supervisor does after an agent's exit.
enum AfterExit {
    /// Nothing: the agent stays down.
    Stay,
    /// Restart it with these arguments.
    Restart(Box<AgentServerArgs>),
    /// It hit the restart limit (this many restarts in the window).
    GiveUp(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_history_forgets_what_the_window_passed() {
        let window = Duration::from_secs(5);
        let t0 = Instant::now();
        let mut history = RestartHistory::default();
        // Many distinct agents crash once each.
        for i in 0..1000 {
            assert_eq!(history.record(&format!("a{i}"), t0, window, 3), Ok(()));
        }
        assert_eq!(history.len(), 1000);
        // Once their window has passed, the next exit prunes them all.
        let later = t0 + window + Duration::from_millis(1);
        assert_eq!(history.record("late", later, window, 3), Ok(()));
        assert_eq!(history.len(), 1);
        // The limit: three restarts, the fourth is refused and forgets.
        assert_eq!(history.record("late", later, window, 3), Ok(()));
        assert_eq!(history.record("late", later, window, 3), Ok(()));
        assert_eq!(history.record("late", later, window, 3), Err(3));
        assert_eq!(history.len(), 0);
        // An agent that ends for good is forgotten.
        assert_eq!(history.record("b", later, window, 3), Ok(()));
        history.forget("b", later, window);
        assert_eq!(history.len(), 0);
        // Within the window nothing is lost: a burst of one id counts.
        let mut history = RestartHistory::default();
        for i in 0..100 {
            assert_eq!(history.record(&format!("x{i}"), t0, window, 3), Ok(()));
        }
        let soon = t0 + Duration::from_secs(1);
        assert_eq!(history.record("x0", soon, window, 3), Ok(()));
        assert_eq!(history.record("x0", soon, window, 3), Ok(()));
        assert_eq!(history.record("x0", soon, window, 3), Err(3));
        assert_eq!(history.len(), 99);
    }

    #[test]
    fn restart_rules() {
        let failed = Exit::failed("boom".into());
        let killed = Exit::stopped(Some("killed".into()));
        let normal = Exit::stopped(Some("normal".into()));
        let none = Exit::stopped(None);
        let shutdown = Exit::stopped(Some("shutdown".into()));
        let drained = Exit::stopped(Some(DRAINED.into()));
        assert!(!should_restart(Restart::Permanent, &drained));
        assert!(!should_restart(Restart::Transient, &drained));
        assert_eq!(drained.reason(), "normal");
        let parent_down = Exit::stopped(Some("shutdown: parent_down: killed".into()));
        let custom = Exit::stopped(Some("agent_error: x".into()));
        let fenced = Exit::stopped(Some(super::super::exit::FENCED.into()));
        let hibernated = Exit::stopped(Some(super::super::exit::HIBERNATE.into()));
        for e in [&fenced, &hibernated] {
            assert!(!should_restart(Restart::Permanent, e));
            assert!(!should_restart(Restart::Transient, e));
        }
        for e in [
            &failed,
            &killed,
            &normal,
            &none,
            &shutdown,
            &parent_down,
            &custom,
        ] {
            assert!(!should_restart(Restart::Temporary, e));
        }
        assert!(should_restart(Restart::Transient, &failed));
        assert!(should_restart(Restart::Transient, &killed));
        assert!(should_restart(Restart::Transient, &custom));
        assert!(!should_restart(Restart::Transient, &normal));
        assert!(!should_restart(Restart::Transient, &none));
        assert!(!should_restart(Restart::Transient, &shutdown));
        assert!(!should_restart(Restart::Transient, &parent_down));
        assert!(should_restart(Restart::Permanent, &normal));
        assert!(should_restart(Restart::Permanent, &none));
        assert!(should_restart(Restart::Permanent, &failed));
        assert!(!should_restart(Restart::Permanent, &shutdown));
        assert!(!should_restart(Restart::Permanent, &parent_down));
    }
}
