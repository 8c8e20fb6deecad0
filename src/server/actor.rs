//! The AgentServer actor: routing, one signal at a time off the handler, the
//! directive queue.

use crate::exec::panic_message;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use serde_json::{Map, Value, json};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use super::agent_ref::{
    AgentStatus, AwaitOptions, Completion, CompletionStatus, DebugEvent, ServerStatus,
    deadline_representable, guarded_snapshot, not_alive,
};
use super::cron::CronJob;
use super::hierarchy::{ChildInfo, Pending};
use super::inflight::{ActorWaker, DoneItem, LocalCmd, Reply, Work};
use super::msg::{AgentMsg, Internal};
use super::options::{
    AgentServerArgs, ErrorPolicy, Executors, OnParentDeath, ParentRef, ServerOptions,
};
use super::{AgentRef, DEBUG_BUFFER_SIZE, Jido, signal_types};
use crate::agent::{
    AgentState, CmdOptions, ORPHANED_FROM_KEY, PARENT_KEY, RouteTarget, SignalRoute,
};
use crate::directive::{Directive, StopReason};
use crate::error::{Error, Result};
use crate::exec::Exec;
use crate::instruction::Instruction;
use crate::signal::dispatch::DispatchConfig;
use crate::signal::{Route, Router, Signal};
use crate::state::{MapMark, StateMap, StateValue};
use crate::strategy::Command;

/// The actor running one agent. It runs agents of every type: the agent
/// value ([`AgentState`]) carries its definition.
///
/// Spawn it through [`Jido::start_agent`], or yourself with
/// [`AgentServer::start`] / [`AgentServer::start_linked`] or plain
/// `ractor::Actor::spawn_linked(None, AgentServer, args, supervisor)`: a
/// supervisor of your own then receives `ActorStarted`, `ActorTerminated`
/// and `ActorFailed` for it.
#[derive(Debug, Clone, Copy, Default)]
pub struct AgentServer;

impl AgentServer {
    /// Spawns an unsupervised AgentServer. Returns at the point
    /// [`Jido::start_agent`](super::Jido::start_agent) describes (start-up
    /// done, `init` directives not yet executed).
    ///
    /// # Errors
    ///
    /// The start error: invalid options, an invalid route (a configuration
    /// error naming it), an id already registered in the instance.
    pub async fn start(mut args: AgentServerArgs) -> Result<(AgentRef, JoinHandle<()>)> {
        let id = args.shared_id();
        let jido = args.options.jido.clone();
        let (actor, handle) = Actor::spawn(None, AgentServer, args)
            .await
            .map_err(spawn_error)?;
        Ok((handle_of(actor, id, jido.as_ref()), handle))
    }

    /// Spawns an AgentServer linked to `supervisor`, which receives its
    /// supervision events.
    ///
    /// # Errors
    ///
    /// As [`AgentServer::start`].
    pub async fn start_linked(
        mut args: AgentServerArgs,
        supervisor: ractor::ActorCell,
    ) -> Result<(AgentRef, JoinHandle<()>)> {
        let id = args.shared_id();
        let jido = args.options.jido.clone();
        let (actor, handle) = Actor::spawn_linked(None, AgentServer, args, supervisor)
            .await
            .map_err(spawn_error)?;
        Ok((handle_of(actor, id, jido.as_ref()), handle))
    }
}

/// The handle of a freshly started agent.
fn handle_of(actor: ActorRef<AgentMsg>, id: impl Into<Arc<str>>, jido: Option<&Jido>) -> AgentRef {
    let agent = AgentRef::new(actor, id);
    match jido {
        Some(jido) => agent.in_instance(jido.shared()),
        None => agent,
    }
}

/// Turns a ractor spawn error back into our error.
pub(crate) fn spawn_error(err: ractor::SpawnErr) -> Error {
    match err {
        ractor::SpawnErr::StartupFailed(inner) => match inner.downcast::<Error>() {
            Ok(e) => *e,
            Err(other) => Error::internal(format!("agent failed to start: {other}")),
        },
        other => Error::internal(format!("agent failed to start: {other}")),
    }
}

/// A future that is pending once, waking its task at once: the task goes
/// to the back of the scheduler's queue, behind the tasks that are ready
/// (the one the handler just spawned among them). Not
/// `tokio::task::yield_now`, which defers the wake until the scheduler
/// has also polled the I/O and timer drivers: a longer turn than needed.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            return std::task::Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// Aborts a task when dropped (timers, in-flight work), so nothing outlives
/// the agent, whichever way it ends.
pub(crate) struct AbortOnDrop<T>(pub(crate) JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The work in flight: one `cmd` (or instruction and its feedback) the
/// actor drives itself, or a checkpoint being written.
pub(crate) struct InFlight {
    generation: u64,
    running: Running,
}

pub(crate) enum Running {
    /// A signal's `cmd` (whatever the strategy, ticks included) or a
    /// RunInstruction's run and feedback, polled by the actor (see
    /// [`LocalCmd`]).
    Local(LocalCmd),
    /// The checkpoint of a durable agent's last signal being written (see
    /// `durable.rs`); its callers are answered once it is durable.
    #[cfg_attr(not(feature = "persist"), allow(dead_code))]
    Persist(Option<JoinHandle<Option<super::durable::Outcome>>>),
}

#[cfg_attr(not(feature = "persist"), allow(dead_code))]
impl InFlight {
    /// Work in flight that is not a `cmd`.
    pub(crate) fn new(generation: u64, running: Running) -> Self {
        Self {
            generation,
            running,
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// A checkpoint write.
    pub(crate) fn is_persist(&self) -> bool {
        matches!(self.running, Running::Persist(_))
    }
}

/// A routed signal ready for `cmd`.
pub(crate) struct Prepared {
    signal: Arc<Signal>,
    reply: Option<Reply>,
    commands: Vec<Command>,
    tick: bool,
}

/// The most signals one handler call starts (only while they finish at
/// once and return no directives).
const MAX_BATCH: usize = 32;

pub(crate) struct Waiter {
    opts: AwaitOptions,
    reply: RpcReplyPort<Result<Completion>>,
    started: Instant,
    /// `None` when the timeout is too far away to be a deadline.
    deadline: Option<Instant>,
}

/// The one timer of an agent's completion waiters, armed for the earliest
/// deadline (a timer per waiter would spawn a task per
/// `await_completion`); it stays armed when its waiter is answered early,
/// so the next waiter, whose deadline is later, needs none.
pub(crate) struct WaiterTimer {
    deadline: Instant,
    /// Tells this timer's message from one of a timer it replaced.
    generation: u64,
    _timer: TimerHandle,
}

/// The state of an [`AgentServer`]. Opaque: query it through
/// [`AgentRef`].
pub struct AgentServerState {
    pub(crate) agent: AgentState,
    pub(crate) id: Arc<str>,
    /// Shared with the agents of the same type and routes (see
    /// [`shared_router`]).
    pub(crate) router: Arc<Router<RouteTarget>>,
    pub(crate) settings: Settings,
    pub(crate) myself: ActorRef<AgentMsg>,
    pub(crate) status: ServerStatus,
    pub(crate) in_flight: Option<InFlight>,
    pub(crate) pending: VecDeque<Work>,
    pub(crate) queue: VecDeque<(Arc<Signal>, Directive)>,
    pub(crate) drain_scheduled: bool,
    pub(crate) stopping: bool,
    /// In the instance registry (removed once, however the agent ends).
    pub(crate) registered: bool,
    /// The instance keeps a restart spec for this agent (its policy is
    /// not `temporary`): a stop through its own API forgets it.
    pub(crate) restartable: bool,
    pub(crate) parent: Option<Box<ParentRef>>,
    pub(crate) error_count: u32,
    pub(crate) next_id: u64,
    pub(crate) exec: Exec,
    pub(crate) jido: Option<Jido>,
    /// Allocated on first use: most agents never need it.
    pub(crate) extras: Option<Box<Extras>>,
    /// Wakes the actor when its local `cmd` can make progress; made on the
    /// first signal.
    pub(crate) waker: Option<Arc<ActorWaker>>,
    /// The persistence of a durable agent (`None`: no storage).
    pub(crate) durable: Option<Box<super::durable::Durable>>,
}

/// The options an AgentServer consults while it runs (the rest of
/// [`ServerOptions`] only matters at start).
pub(crate) struct Settings {
    pub(crate) max_queue_size: usize,
    pub(crate) max_pending: usize,
    pub(crate) on_parent_death: OnParentDeath,
    /// Boxed, as the two below: rarely set, and in every agent's state.
    pub(crate) error_policy: Option<Box<ErrorPolicy>>,
    pub(crate) default_dispatch: Option<Box<DispatchConfig>>,
    pub(crate) executors: Executors,
    pub(crate) allow_untrusted_runtime_signals: bool,
    pub(crate) fail_calls_on_action_error: bool,
    pub(crate) max_concurrent_dispatches: usize,
}

type TimerHandle = AbortOnDrop<std::result::Result<(), ractor::MessagingErr<AgentMsg>>>;

/// The rarely used part of an agent's state, boxed and allocated on first
/// use: a million idle agents should not each carry empty maps for
/// children, cron jobs, waiters, timers and debug events.
#[derive(Default)]
pub(crate) struct Extras {
    pub(crate) children: HashMap<String, ChildInfo>,
    /// `{"id", "tag", "meta"}` of the parent this agent outlived.
    pub(crate) orphaned_from: Option<Value>,
    pub(crate) waiters: Vec<Waiter>,
    pub(crate) waiter_timer: Option<WaiterTimer>,
    /// The state every waiter was last checked against, while there are
    /// waiters: marked, not held, so a write moves the map without copying
    /// its entries and the mark stops matching (see
    /// [`AgentServerState::check_waiters`]).
    pub(crate) waiters_checked: Option<MapMark>,
    pub(crate) debug: Option<VecDeque<DebugEvent>>,
    pub(crate) timers: Vec<TimerHandle>,
    /// `timers` is pruned of fired timers when it reaches this length
    /// (doubling), so arming n timers costs O(n), not O(n²).
    pub(crate) prune_timers_at: usize,
    pub(crate) crons: HashMap<String, CronJob>,
    /// Children being spawned or adopted, and starts waiting for a tag.
    pub(crate) pending: Pending,
    /// Set when a custom directive executor panicked: the handler then
    /// fails, and the actor with it.
    pub(crate) crash: Option<String>,
    /// Permits of the dispatch tasks (`max_concurrent_dispatches`),
    /// created on the first Emit that needs a task.
    pub(crate) dispatch_slots: Option<Arc<tokio::sync::Semaphore>>,
}

impl fmt::Debug for AgentServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentServerState")
            .field("id", &self.id)
            .field("status", &self.status)
            .field("queue", &self.queue.len())
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

fn boxed(err: Error) -> ActorProcessingErr {
    Box::new(err)
}

/// The router of an agent: shared with the other live agents of its type
/// whose routes are the same (same patterns and priorities, the same
/// action values — `DynAction::ptr_eq`, as zero-sized actions always are —
/// and equal params), built otherwise. A router is never changed once
/// built, and a million agents of one type should not hold a million
/// copies of it (~0.8 KB for two routes) nor build it on every start.
///
/// The cache holds no action: only the router, weakly, and what its routes
/// were built from, with actions by address. An address is compared only
/// while the router is alive, which keeps those actions alive, so it
/// cannot have been reused; an agent's actions (and what they hold) are
/// dropped with the last agent using them.
pub(crate) fn shared_router(agent: &AgentState) -> Result<Arc<Router<RouteTarget>>> {
    type Cache = HashMap<
        &'static str,
        (Vec<RouteKey>, std::sync::Weak<Router<RouteTarget>>),
        foldhash::fast::RandomState,
    >;
    static CACHE: std::sync::OnceLock<std::sync::Mutex<Cache>> = std::sync::OnceLock::new();
    let routes = agent.signal_routes();
    let cache = CACHE.get_or_init(Default::default);
    let lock = || {
        cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    {
        let cache = lock();
        if let Some((cached, router)) = cache.get(agent.name())
            && let Some(router) = router.upgrade()
            && cached.len() == routes.len()
            && cached.iter().zip(&routes).all(|(k, r)| k.matches(r))
        {
            return Ok(router);
        }
    }
    let keys: Vec<RouteKey> = routes.iter().map(RouteKey::of).collect();
    let router = Arc::new(build_router(routes)?);
    lock().insert(agent.name(), (keys, Arc::downgrade(&router)));
    Ok(router)
}

/// What one route of a shared router was built from (see
/// [`shared_router`]).
struct RouteKey {
    path: String,
    priority: Option<i32>,
    target: TargetKey,
}

enum TargetKey {
    /// The action's address.
    Action(usize),
    ActionWithParams(usize, Value),
    StrategyCmd(String),
    StrategyPayload(String),
    StrategyTick,
}

/// The address of an action value (compared only while it is alive).
fn action_addr(action: &crate::action::DynAction) -> usize {
    Arc::as_ptr(action.erased()).cast::<()>() as usize
}

impl RouteKey {
    /// Whether `route` is the route this was made from.
    fn matches(&self, route: &SignalRoute) -> bool {
        self.path == route.path
            && self.priority == route.priority
            && match (&self.target, &route.target) {
                (TargetKey::Action(x), RouteTarget::Action(a)) => *x == action_addr(a),
                (TargetKey::ActionWithParams(x, p), RouteTarget::ActionWithParams(a, q)) => {
                    *x == action_addr(a) && p == q
                }
                (TargetKey::StrategyCmd(x), RouteTarget::StrategyCmd(y))
                | (TargetKey::StrategyPayload(x), RouteTarget::StrategyPayload(y)) => x == y,
                (TargetKey::StrategyTick, RouteTarget::StrategyTick) => true,
                _ => false,
            }
    }

    fn of(route: &SignalRoute) -> Self {
        let addr = action_addr;
        let target = match &route.target {
            RouteTarget::Action(a) => TargetKey::Action(addr(a)),
            RouteTarget::ActionWithParams(a, p) => TargetKey::ActionWithParams(addr(a), p.clone()),
            RouteTarget::StrategyCmd(name) => TargetKey::StrategyCmd(name.clone()),
            RouteTarget::StrategyPayload(name) => TargetKey::StrategyPayload(name.clone()),
            RouteTarget::StrategyTick => TargetKey::StrategyTick,
        };
        Self {
            path: route.path.clone(),
            priority: route.priority,
            target,
        }
    }
}

/// Builds a router from routes, naming the first invalid route.
fn build_router(routes: Vec<SignalRoute>) -> Result<Router<RouteTarget>> {
    let mut router = Router::new();
    for route in routes {
        let path = route.path.clone();
        let mut r = Route::new(route.path, route.target);
        if let Some(p) = route.priority {
            r = r.priority(p);
        }
        router.add_route(r).map_err(|err| {
            Error::configuration(format!("invalid signal route {path}: {}", err.message()))
                .with_detail("route", path.clone())
                .with_details(Value::Object(err.details().clone()))
                .with_source(err)
        })?;
    }
    Ok(router)
}

impl Actor for AgentServer {
    type Msg = AgentMsg;
    type State = AgentServerState;
    type Arguments = AgentServerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<AgentMsg>,
        args: AgentServerArgs,
    ) -> std::result::Result<AgentServerState, ActorProcessingErr> {
        // ractor boxes this future itself and drops it once the agent has
        // started (the agent's own task never holds it): no box of ours,
        // which would only copy it once more. A durable agent resumes from
        // its storage (nothing is written); that read is a large future,
        // boxed so the common start does not build and move it.
        let loaded = if args.may_be_durable() {
            Box::pin(super::durable::load(&args)).await.map_err(boxed)?
        } else {
            None
        };
        let mut state = AgentServerState::init(myself, args).map_err(boxed)?;
        state.attach_durable(loaded);
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<AgentMsg>,
        state: &mut AgentServerState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        state.status = ServerStatus::Idle;
        state.announce_to_parent();
        state.check_parent_alive(&myself);
        state.advance(&myself);
        state.take_crash()
    }

    async fn handle(
        &self,
        myself: ActorRef<AgentMsg>,
        msg: AgentMsg,
        state: &mut AgentServerState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        match msg {
            AgentMsg::Signal(signal) => state.accept_signal(&myself, signal, None),
            AgentMsg::Call(call) => state.accept_signal(&myself, call.signal, Some(call.reply)),
            AgentMsg::Runtime(rt) => {
                if state.handle_internal(&myself, rt.0) {
                    // Boxed (one allocation per directive): directive
                    // execution is a large future, and inline it would sit
                    // in every agent's processing loop, idle or not (ractor
                    // boxes that loop once per actor), costing ~9 KB per
                    // agent.
                    Box::pin(state.on_drain(&myself)).await;
                }
            }
        }
        // A directive executor panicked: the agent fails now, before
        // anything else is settled.
        state.take_crash()?;
        if state.hold_local() {
            // The `cmd` this call left waiting (on an action's task, the
            // default) gets one scheduler turn: a task that ends in it (a
            // short action) is settled now, without a `Poll` message and
            // its pass through the mailbox. The turn is a yield, not a
            // wait: the mailbox is served again right after it.
            YieldOnce(false).await;
            state.release_local(&myself);
            state.take_crash()?;
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<AgentMsg>,
        event: SupervisionEvent,
        state: &mut AgentServerState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        // Never the ractor default (which stops on any child exit): only the
        // parent policy may stop this agent. Not acted on here: re-posted
        // to the mailbox, behind the messages the actor sent before it ended.
        match event {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                let reason = super::exit_reason(reason);
                state.post_actor_down(&myself, cell.get_id(), reason);
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                state.post_actor_down(&myself, cell.get_id(), format!("failed: {err}"));
            }
            _ => {}
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<AgentMsg>,
        state: &mut AgentServerState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        // Both waits are boxed, being large and rare: ractor builds and
        // moves this future on every stop.
        if !state.stopping {
            // Stopped from outside through ractor (`stop`, `drain`, a
            // supervisor): the work the agent accepted is finished first.
            Box::pin(state.finish_accepted(&myself)).await;
        }
        if state.durable.is_some() {
            Box::pin(state.persist_on_stop()).await;
        }
        state.status = ServerStatus::Stopping;
        state.cleanup(&myself);
        // A directive executor that panicked while the work was finished
        // still fails the agent.
        match state.extras.as_mut().and_then(|e| e.crash.take()) {
            Some(message) => Err(boxed(Error::execution(message))),
            None => Ok(()),
        }
    }
}

impl AgentServerState {
    fn init(myself: ActorRef<AgentMsg>, args: AgentServerArgs) -> Result<Self> {
        // Kept only for agents the instance may restart (the default,
        // `temporary`, never is): a copy of the agent and its options.
        let may_restart = args
            .options
            .restart
            .or_else(|| {
                args.options
                    .jido
                    .as_ref()
                    .and_then(|j| j.defaults().restart)
            })
            .is_some_and(|r| r != crate::directive::Restart::Temporary);
        let restart_args = (args.supervised && may_restart).then(|| args.clone());
        let AgentServerArgs {
            mut agent,
            mut options,
            supervised,
            shared_id,
        } = args;
        if let Some(jido) = options.jido.take() {
            options.fill_from(jido.defaults());
            options.jido = Some(jido);
        }
        options.validate()?;
        if let Some(id) = options.id.as_ref().filter(|id| id.as_str() != agent.id()) {
            agent.set_id(id.clone());
        }
        if let Some(initial) = &options.initial_state {
            agent
                .state_mut()
                .extend(initial.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        agent.check_definition()?;
        let router = shared_router(&agent)?;
        let exec = options
            .jido
            .as_ref()
            .map_or_else(|| Exec::global().clone(), |j| j.exec().clone());
        let id: Arc<str> = match shared_id {
            Some(id) if *id == *agent.id() => id,
            _ => Arc::from(agent.id()),
        };
        let restart = options
            .restart
            .unwrap_or(crate::directive::Restart::Temporary);
        let ServerOptions {
            parent,
            jido,
            debug,
            max_queue_size,
            max_pending_signals,
            on_parent_death,
            error_policy,
            default_dispatch,
            executors,
            allow_untrusted_runtime_signals,
            fail_calls_on_action_error,
            max_concurrent_dispatches,
            ..
        } = options;
        let mut state = Self {
            agent,
            id: Arc::clone(&id),
            router,
            myself: myself.clone(),
            status: ServerStatus::Initializing,
            in_flight: None,
            pending: VecDeque::new(),
            queue: VecDeque::new(),
            drain_scheduled: false,
            stopping: false,
            registered: false,
            restartable: false,
            parent: None,
            error_count: 0,
            next_id: 0,
            exec,
            jido,
            extras: None,
            waker: None,
            durable: None,
            settings: Settings {
                max_queue_size: max_queue_size.unwrap_or(super::DEFAULT_MAX_QUEUE_SIZE),
                max_pending: max_pending_signals.unwrap_or(super::DEFAULT_MAX_PENDING_SIGNALS),
                on_parent_death: on_parent_death.unwrap_or_default(),
                error_policy: error_policy.map(Box::new),
                default_dispatch: default_dispatch.map(Box::new),
                executors,
                allow_untrusted_runtime_signals: allow_untrusted_runtime_signals.unwrap_or(false),
                fail_calls_on_action_error: fail_calls_on_action_error.unwrap_or(true),
                max_concurrent_dispatches: max_concurrent_dispatches
                    .unwrap_or(super::DEFAULT_MAX_CONCURRENT_DISPATCHES),
            },
        };
        if debug == Some(true) {
            state.extras_mut().debug = Some(VecDeque::new());
        }
        // The strategy's init runs for real now; its directives are queued.
        let init_directives = state
            .agent
            .init_strategy(CmdOptions::new().exec(state.exec.clone()));
        // Every fallible step before the parent is bound: a child that
        // fails to start leaves no monitor on its parent.
        if let Some(jido) = &state.jido {
            jido.register(
                &id,
                AgentRef::new(myself.clone(), Arc::clone(&id)),
                supervised,
                parent.as_ref().map(|p| p.id.as_str()),
            )?;
            state.registered = true;
            if let Some(restart_args) = restart_args
                .filter(|_| supervised && restart != crate::directive::Restart::Temporary)
            {
                jido.register_restart(myself.get_id(), restart_args);
                state.restartable = true;
            }
        }
        if let Some(parent) = parent {
            state.bind_parent(&myself, parent);
        }
        state.sync_reserved();
        if !init_directives.is_empty() {
            let init_signal = Arc::new(Signal::new("jido.strategy.init", Value::Null));
            for d in init_directives {
                state.queue.push_back((Arc::clone(&init_signal), d));
            }
        }
        Ok(state)
    }

    /// The rarely used state, if it was ever needed.
    pub(crate) fn extras(&self) -> Option<&Extras> {
        self.extras.as_deref()
    }

    /// The rarely used state, allocated on first use.
    pub(crate) fn extras_mut(&mut self) -> &mut Extras {
        self.extras.get_or_insert_with(Box::default)
    }

    pub(crate) fn agent_ref(&self) -> AgentRef {
        handle_of(
            self.myself.clone(),
            Arc::clone(&self.id),
            self.jido.as_ref(),
        )
    }

    pub(crate) fn instance_name(&self) -> &str {
        self.jido.as_ref().map_or("", |j| j.name())
    }

    /// Records a debug event when debug is on; `data` is built only then
    /// (no JSON on the signal path of an agent without debug).
    pub(crate) fn record(&mut self, kind: &'static str, data: impl FnOnce() -> Value) {
        if let Some(buf) = self.extras.as_mut().and_then(|e| e.debug.as_mut()) {
            buf.push_front(DebugEvent {
                at: chrono::Utc::now(),
                kind,
                data: data(),
            });
            buf.truncate(DEBUG_BUFFER_SIZE);
        }
    }

    /// Keeps `__parent__` and `__orphaned_from__` in the agent state in line
    /// with the server's view (a `cmd` cannot change them).
    pub(crate) fn sync_reserved(&mut self) {
        let want_parent = self.parent.as_deref().map(ParentRef::to_json);
        let want_orphan = self.extras().and_then(|e| e.orphaned_from.clone());
        let st = self.agent.state();
        let same = |key: &str, want: &Option<Value>| match (st.get(key), want) {
            (None, None) => true,
            (Some(have), Some(want)) => have == want,
            _ => false,
        };
        if same(PARENT_KEY, &want_parent) && same(ORPHANED_FROM_KEY, &want_orphan) {
            return;
        }
        let st = self.agent.state_mut();
        match want_parent {
            Some(v) => {
                st.insert(PARENT_KEY, v);
            }
            None => {
                st.remove(PARENT_KEY);
            }
        }
        match want_orphan {
            Some(v) => {
                st.insert(ORPHANED_FROM_KEY, v);
            }
            None => {
                st.remove(ORPHANED_FROM_KEY);
            }
        }
    }

    /// A signal from outside (a cast or a call): refused when untrusted and
    /// reserved, with `QueueOverflow` when `max_pending_signals` signals
    /// already wait; else queued (`start_signal` refuses it with
    /// `Cancelled` once the instance is gone). The signal stays behind the
    /// `Arc` it arrived in (never copied), except for a journaling agent,
    /// which writes it ahead first.
    #[inline]
    pub(crate) fn accept_signal(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        signal: Arc<Signal>,
        reply: Option<Reply>,
    ) {
        if self.stopping {
            return self.enqueue_signal(myself, signal, reply);
        }
        if let Some((error, context)) = self.admission_error(&signal) {
            return self.refuse(myself, Work { signal, reply }, error, context);
        }
        if self.durable.is_some() {
            return self.accept_durable(myself, signal, reply);
        }
        self.enqueue_signal(myself, signal, reply);
    }

    /// [`accept_signal`](Self::accept_signal) for a durable agent: a
    /// journaling agent writes the signal ahead first.
    fn accept_durable(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        signal: Arc<Signal>,
        reply: Option<Reply>,
    ) {
        let ack = match reply {
            Some(reply) => super::durable::Ack::Call(reply),
            None => super::durable::Ack::None,
        };
        match self.journal(Arc::unwrap_or_clone(signal), ack) {
            Some((signal, super::durable::Ack::Call(reply))) => {
                self.enqueue_signal(myself, signal, Some(reply))
            }
            Some((signal, _)) => self.enqueue_signal(myself, signal, None),
            None => {}
        }
    }

    /// Nothing waits or runs: a signal accepted now starts at once.
    fn nothing_ahead(&self) -> bool {
        self.pending.is_empty() && self.queue.is_empty() && self.in_flight.is_none()
    }

    /// Why a signal from outside is refused on arrival (with the error
    /// policy's context): untrusted and reserved, or `max_pending_signals`
    /// signals already wait.
    pub(crate) fn admission_error(&mut self, signal: &Signal) -> Option<(Error, &'static str)> {
        if let Some(error) = self.untrusted_refusal(signal) {
            return Some((error, crate::directive::error_context::ROUTING));
        }
        if self.pending.len() >= self.settings.max_pending {
            let max = self.settings.max_pending;
            self.overflow_event(signal, "pending", max, 1);
            let error = Error::queue_overflow("pending signal queue full")
                .with_detail("agent_id", self.id.to_string())
                .with_detail("max_pending_signals", max)
                .with_detail("signal_type", signal.ty().to_owned());
            return Some((error, "queue_overflow"));
        }
        None
    }

    /// The warning event `jido.agent_server.queue.overflow`: `queue` is
    /// `pending` (signals waiting) or `directives`.
    fn overflow_event(
        &self,
        signal: &Signal,
        queue: &'static str,
        queue_size: usize,
        dropped: usize,
    ) {
        tracing::warn!(
            name: "jido.agent_server.queue.overflow",
            target: "jido::agent_server",
            agent_id = %self.id,
            agent_module = self.agent.name(),
            signal_type = signal.ty(),
            jido_instance = self.instance_name(),
            queue,
            queue_size,
            dropped,
            "{queue} queue overflow: {dropped} dropped"
        );
    }

    /// Whether the instance (its task supervisor or root supervisor) is
    /// gone, so no work can start.
    fn instance_gone(&self) -> bool {
        self.exec.supervisor().is_shut_down() || self.jido.as_ref().is_some_and(Jido::is_shut_down)
    }

    /// Refuses work because the instance is gone.
    fn refuse_gone(&mut self, myself: &ActorRef<AgentMsg>, work: Work) {
        let error = Error::cancelled("jido instance is shut down")
            .with_detail("agent_id", self.id.to_string())
            .with_detail("signal_type", work.signal.ty().to_owned());
        self.refuse(myself, work, error, "shutdown");
    }

    /// Refuses a signal on arrival: the caller gets `error`, and the error
    /// policy sees it at once like any other error (a cast's only trace) —
    /// applied rather than queued as an Error directive, so a flood of
    /// refused signals takes no queue space.
    pub(crate) fn refuse(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        work: Work,
        error: Error,
        context: &str,
    ) {
        if let Some(reply) = work.reply {
            let _ = reply.send(Err(error.clone()));
        }
        if let super::DirectiveResult::Stop(reason) =
            self.apply_error_policy(myself, &work.signal, &error, context)
        {
            self.stop_self(myself, reason.to_string());
        }
    }

    /// Starts `signal` at once when nothing is ahead of it, else queues it
    /// (refused with `Cancelled` while the agent stops).
    #[inline]
    pub(crate) fn enqueue_signal(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        signal: impl Into<Arc<Signal>>,
        reply: Option<Reply>,
    ) {
        let signal = signal.into();
        if self.stopping {
            if let Some(reply) = reply {
                let _ = reply.send(Err(Error::cancelled("agent is stopping")
                    .with_detail("agent_id", self.id.to_string())));
            }
            return;
        }
        self.record(
            "signal_received",
            || json!({"type": signal.ty(), "id": signal.id()}),
        );
        if self.nothing_ahead() {
            // Nothing ahead of it: start at once without going through
            // `pending`, so an agent that only ever sees one signal at a
            // time never allocates a queue buffer.
            self.start_signal(myself, signal, reply);
        } else {
            self.pending.push_back(Work { signal, reply });
        }
        self.advance(myself);
    }

    /// Starts the next piece of work when nothing is in flight: queued
    /// directives first (one per `Drain` message), then the next signal.
    pub(crate) fn advance(&mut self, myself: &ActorRef<AgentMsg>) {
        let mut started = 0;
        loop {
            if self.stopping || self.in_flight.is_some() {
                return;
            }
            if !self.queue.is_empty() {
                self.status = ServerStatus::Processing;
                if !self.drain_scheduled {
                    self.drain_scheduled = true;
                    let _ = myself.send_message(AgentMsg::internal(Internal::Drain));
                }
                return;
            }
            let Some(work) = self.pending.pop_front() else {
                self.status = ServerStatus::Idle;
                self.idle();
                if self.pending.capacity() > 0 {
                    // An idle agent keeps no queue buffer (a million idle
                    // agents would otherwise hold ~1.3 KB each).
                    self.pending = VecDeque::new();
                }
                return;
            };
            if started == MAX_BATCH {
                // Signals that finish at once (inline actions) do not hold
                // the mailbox for more than a batch: the rest start after
                // the messages that arrived meanwhile.
                self.pending.push_front(work);
                self.status = ServerStatus::Processing;
                let _ = myself.send_message(AgentMsg::internal(Internal::Poll));
                return;
            }
            started += 1;
            self.start_signal(myself, work.signal, work.reply);
        }
    }

    /// Routes `work`; `None` when it was handled at once (no route, the
    /// built-in stop).
    fn prepare(&mut self, signal: Arc<Signal>, reply: Option<Reply>) -> Option<Prepared> {
        let err = match self.router.targets(&signal) {
            Ok(targets) => return Some(Self::prepared(signal, reply, targets)),
            Err(err) => err,
        };
        self.unrouted(signal, reply, err);
        None
    }

    fn prepared<'a>(
        signal: Arc<Signal>,
        reply: Option<Reply>,
        targets: impl IntoIterator<Item = &'a RouteTarget, IntoIter: ExactSizeIterator>,
    ) -> Prepared {
        let targets = targets.into_iter();
        // The signal's data, copied once for each route that takes it as
        // its params (an instruction owns its params); no other copy.
        let data = || match signal.data() {
            // An empty object is made, not cloned (a clone of an empty
            // `IndexMap` still copies its table header).
            Some(Value::Object(map)) if map.is_empty() => Value::Object(Map::new()),
            Some(data) => data.clone(),
            None => Value::Object(Map::new()),
        };
        // The instructions share the signal's id (no second UUIDv7 per
        // signal); a signal whose id is not a UUIDv7 gives them a new one.
        let id = || crate::signal::uuid_v7(&signal).unwrap_or_else(uuid::Uuid::now_v7);
        let mut commands = Vec::with_capacity(targets.len());
        let mut tick = false;
        for target in targets {
            match target {
                RouteTarget::Action(a) => {
                    commands.push(Command::Run(Instruction::with_id(id(), a.clone(), data())));
                }
                RouteTarget::ActionWithParams(a, p) => {
                    commands.push(Command::Run(Instruction::with_id(
                        id(),
                        a.clone(),
                        p.clone(),
                    )));
                }
                RouteTarget::StrategyCmd(name) => {
                    commands.push(Command::strategy(name.clone(), data()));
                }
                RouteTarget::StrategyPayload(name) => {
                    // A typed payload is read from the signal by the
                    // strategy: no JSON built.
                    let params = if signal.has_typed_payload() {
                        Value::Null
                    } else {
                        data()
                    };
                    commands.push(Command::strategy(name.clone(), params));
                }
                RouteTarget::StrategyTick => tick = true,
            }
        }
        Prepared {
            signal,
            reply,
            commands,
            tick,
        }
    }

    /// Starts a signal's `cmd`, driven by the actor itself (see
    /// [`start_local`](Self::start_local)).
    fn start_signal(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        signal: Arc<Signal>,
        reply: Option<Reply>,
    ) {
        if self.instance_gone() {
            return self.refuse_gone(myself, Work { signal, reply });
        }
        if let Some(p) = self.prepare(signal, reply) {
            self.start_local(myself, p);
        }
    }

    /// Starts a signal's `cmd` (and its tick), whatever the strategy,
    /// driven by the actor itself, and polls it once: a `cmd` whose actions
    /// run inline finishes here, one that awaits (an action's task, the
    /// default) waits without holding the mailbox, and is polled again when
    /// it is woken.
    fn start_local(&mut self, myself: &ActorRef<AgentMsg>, p: Prepared) {
        tracing::debug!(
            name: "jido.agent_server.signal.start",
            target: "jido::agent_server",
            agent_id = %self.id,
            agent_module = self.agent.name(),
            signal_type = p.signal.ty(),
            jido_instance = self.instance_name(),
            "jido.agent_server.signal.start"
        );
        let span = tracing::debug_span!(
            target: "jido::agent_server",
            "jido.agent_server.signal",
            agent_id = %self.id,
            agent_module = self.agent.name(),
            signal_type = p.signal.ty(),
            signal_id = p.signal.id(),
            batch = 1,
            jido_instance = self.instance_name(),
        );
        if !p.tick && self.agent.runs_inline(&p.commands) {
            return self.run_inline(p, &span);
        }
        let fut = Box::pin(local_cmd(self.agent.clone(), p, self.exec.clone()));
        self.run_local(myself, fut, span);
    }

    /// Runs a `cmd` that finishes at once ([`AgentState::runs_inline`]) on
    /// the agent itself, polled once here: no copy of the agent, no future
    /// kept. One that panics, or waits against its strategy's promise, may
    /// have half-changed the agent: the agent fails (as on a panicking
    /// directive executor), and its caller gets the error.
    fn run_inline(&mut self, p: Prepared, span: &tracing::Span) {
        let started = tracing::enabled!(target: "jido::agent_server", tracing::Level::WARN)
            .then(Instant::now);
        let Prepared {
            signal,
            reply,
            commands,
            tick: _,
        } = p;
        let opts = CmdOptions::new()
            .exec(self.exec.clone())
            .signal(Arc::clone(&signal));
        let polled = {
            let _entered = span.enter();
            let mut cmd = std::pin::pin!(self.agent.cmd_commands(commands, &opts));
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            std::panic::catch_unwind(AssertUnwindSafe(|| cmd.as_mut().poll(&mut cx)))
        };
        let failure = match polled {
            Ok(std::task::Poll::Ready(directives)) => {
                let duration_us = started.map_or(0, |s| s.elapsed().as_micros() as u64);
                self.settle_outcome(signal, reply, Ok(directives), duration_us, true);
                self.signal_done();
                self.check_waiters();
                return;
            }
            Ok(std::task::Poll::Pending) => format!(
                "agent cmd waited: strategy {} runs its commands inline",
                self.agent.strategy().name()
            ),
            Err(panic) => format!("agent cmd panicked: {}", panic_message(&*panic)),
        };
        if let Some(reply) = reply {
            let _ =
                reply
                    .send(Err(Error::execution(failure.clone())
                        .with_detail("agent_id", self.id.to_string())));
        }
        // Nothing more runs on the half-changed agent: the handler fails.
        self.stopping = true;
        self.extras_mut().crash = Some(failure);
    }

    /// Puts `fut` in flight, driven by the actor, and polls it once.
    fn run_local(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        fut: std::pin::Pin<Box<dyn Future<Output = DoneItem> + Send>>,
        span: tracing::Span,
    ) {
        self.next_id += 1;
        self.status = ServerStatus::Processing;
        self.in_flight = Some(InFlight {
            generation: self.next_id,
            running: Running::Local(LocalCmd {
                fut,
                waiting: false,
                span: (!span.is_disabled()).then(|| Box::new(span)),
            }),
        });
        self.poll_local(myself);
    }

    /// The crash a panicking directive executor left, as the handler's
    /// error.
    fn take_crash(&mut self) -> Result<(), ActorProcessingErr> {
        match self.extras.as_mut().and_then(|e| e.crash.take()) {
            Some(message) => Err(boxed(Error::execution(message))),
            None => Ok(()),
        }
    }

    /// Whether the handler should keep the local `cmd` it just polled for
    /// one scheduler turn (it is waiting); wakes meanwhile send no
    /// message (see [`ActorWaker::hold`]).
    fn hold_local(&mut self) -> bool {
        let (
            Some(InFlight {
                running: Running::Local(cmd),
                ..
            }),
            Some(waker),
        ) = (&mut self.in_flight, &self.waker)
        else {
            return false;
        };
        if !std::mem::take(&mut cmd.waiting) {
            return false;
        }
        waker.hold();
        true
    }

    /// Ends [`hold_local`](Self::hold_local): polls the `cmd` if it was
    /// woken meanwhile, then moves on as after a `Poll` message.
    fn release_local(&mut self, myself: &ActorRef<AgentMsg>) {
        if self.waker.as_ref().is_some_and(|w| w.release()) {
            self.poll_local(myself);
            self.advance(myself);
        }
    }

    /// Polls the local `cmd` in flight, if any; settles it when it is
    /// done.
    fn poll_local(&mut self, myself: &ActorRef<AgentMsg>) {
        let Some(InFlight {
            running: Running::Local(cmd),
            ..
        }) = self.in_flight.as_mut()
        else {
            return;
        };
        let waker = self
            .waker
            .get_or_insert_with(|| Arc::new(ActorWaker::new(myself.clone())));
        waker.polling();
        let waker = futures::task::waker_ref(waker);
        let mut cx = std::task::Context::from_waker(&waker);
        let polled = {
            let _entered = cmd.span.as_deref().map(tracing::Span::enter);
            cmd.fut.as_mut().poll(&mut cx)
        };
        match polled {
            std::task::Poll::Ready(item) => {
                self.in_flight = None;
                self.settle(item);
                self.signal_done();
                self.check_waiters();
            }
            std::task::Poll::Pending => cmd.waiting = true,
        }
    }

    /// Runs one piece of work (an instruction and its feedback) on a copy
    /// of the agent, driven by the actor like a `cmd`.
    pub(crate) fn run_work<F, Fut>(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        signal: Arc<Signal>,
        span: tracing::Span,
        work: F,
    ) where
        F: FnOnce(AgentState) -> Fut,
        Fut: Future<Output = (AgentState, std::result::Result<Vec<Directive>, Error>)>
            + Send
            + 'static,
    {
        if self.instance_gone() {
            tracing::warn!(target: "jido::agent_server", agent_id = %self.id, "work refused: the task supervisor is shut down");
            return;
        }
        let fut = work(self.agent.clone());
        self.run_local(
            myself,
            Box::pin(async move {
                let started = Instant::now();
                let (agent, result) = fut.await;
                DoneItem {
                    signal,
                    reply: None,
                    agent,
                    result,
                    duration_us: started.elapsed().as_micros() as u64,
                }
            }),
            span,
        );
    }

    fn unrouted(&mut self, signal: Arc<Signal>, reply: Option<Reply>, err: Error) {
        self.consumed(&signal);
        let ty = signal.ty().to_owned();
        if ty == signal_types::AGENT_STOP {
            let reason = signal
                .data()
                .and_then(|d| d.get("reason"))
                .and_then(Value::as_str)
                .map_or(StopReason::Normal, StopReason::from);
            self.queue.push_back((signal, Directive::Stop { reason }));
            if let Some(reply) = reply {
                let _ = reply.send(Ok(self.agent.clone()));
            }
            return;
        }
        let error = Error::routing(format!("no route for signal: {ty}"))
            .with_details(Value::Object(err.details().clone()))
            .with_detail("agent_id", self.id.to_string())
            .with_source(err);
        if let Some(reply) = reply {
            let _ = reply.send(Err(error.clone()));
        }
        if ty.starts_with(signal_types::RUNTIME_PREFIX) {
            tracing::debug!(
                target: "jido::agent_server",
                agent_id = %self.id,
                signal_type = %ty,
                "runtime signal without a route ignored"
            );
            return;
        }
        self.queue
            .push_back((signal, Directive::error(error, "routing")));
    }

    /// The end of in-flight work when the agent stops on its own decision:
    /// a finished `cmd` was settled when it finished; the unfinished one is
    /// cancelled (dropped with its caller's reply port: `Cancelled`).
    fn abandon_in_flight(&mut self) {
        match self.in_flight.take().map(|f| f.running) {
            // A checkpoint write answers its callers itself; the stop
            // waits for it.
            Some(Running::Persist(task)) => self.detach_write(task),
            Some(Running::Local(_)) | None => {}
        }
    }

    /// Stopped through ractor from outside (`stop`, `drain`, a supervisor):
    /// finishes the accepted work (the `cmd` in flight, the directives,
    /// the signals waiting) without a mailbox, then lets the agent end. A
    /// Stop directive or a stopping error policy ends it early.
    pub(crate) async fn finish_accepted(&mut self, myself: &ActorRef<AgentMsg>) {
        loop {
            if self.stopping {
                // An inline `cmd` failed the agent (see `run_inline`).
                return;
            }
            match self.in_flight.as_mut().map(|f| &mut f.running) {
                Some(Running::Local(cmd)) => {
                    let span = cmd
                        .span
                        .as_deref()
                        .cloned()
                        .unwrap_or_else(tracing::Span::none);
                    let item = cmd.fut.as_mut().instrument(span).await;
                    self.in_flight = None;
                    self.settle(item);
                    self.signal_done();
                    self.check_waiters();
                    continue;
                }
                Some(Running::Persist(task)) => {
                    let task = task.take();
                    self.in_flight = None;
                    self.detach_write(task);
                    self.persist_on_stop().await;
                    self.check_waiters();
                    continue;
                }
                None => {}
            }
            if let Some((signal, directive)) = self.queue.pop_front() {
                let outcome = self.exec_directive(myself, signal, directive).await;
                let crashed = self.extras.as_ref().is_some_and(|e| e.crash.is_some());
                if crashed || matches!(outcome, super::DirectiveResult::Stop(_)) {
                    self.stopping = true;
                    return;
                }
                self.check_waiters();
                continue;
            }
            match self.pending.pop_front() {
                Some(work) => self.start_signal(myself, work.signal, work.reply),
                None => return,
            }
        }
    }

    /// Applies one finished `cmd`: state, directives (or overflow), reply.
    fn settle(&mut self, item: DoneItem) {
        let DoneItem {
            signal,
            reply,
            agent,
            result,
            duration_us,
        } = item;
        // The reserved keys can only have moved if the `cmd` wrote the state
        // (a write to the copy makes a new top-level map).
        let wrote = result.is_ok() && !agent.state().ptr_eq(self.agent.state());
        if result.is_ok() {
            self.agent = agent;
        }
        self.settle_outcome(signal, reply, result, duration_us, wrote);
    }

    /// Applies a finished `cmd`'s outcome, the agent already in place:
    /// directives (or overflow), reply; `wrote` when the state may have
    /// changed.
    fn settle_outcome(
        &mut self,
        signal: Arc<Signal>,
        reply: Option<Reply>,
        result: std::result::Result<Vec<Directive>, Error>,
        duration_us: u64,
        wrote: bool,
    ) {
        self.consumed(&signal);
        match result {
            Ok(directives) => {
                if wrote {
                    self.sync_reserved();
                }
                let failure = match &reply {
                    Some(_) if self.settings.fail_calls_on_action_error => {
                        super::inflight::call_failure(&directives, &self.id)
                    }
                    _ => None,
                };
                let n = directives.len();
                let max = self.settings.max_queue_size;
                let answer = if self.queue.len() + n > max {
                    self.overflow_event(&signal, "directives", max, n);
                    let error = Error::queue_overflow("directive queue overflow")
                        .with_detail("agent_id", self.id.to_string())
                        .with_detail("queue_size", max)
                        .with_detail("dropped", n);
                    // Like any other error, for a cast as for a call (the
                    // one directive allowed past the limit).
                    self.queue.push_back((
                        Arc::clone(&signal),
                        Directive::error(error.clone(), "queue_overflow"),
                    ));
                    Err(error)
                } else {
                    if tracing::enabled!(target: "jido::agent_server", tracing::Level::DEBUG) {
                        let types: Vec<&'static str> =
                            directives.iter().map(Directive::kind).collect();
                        tracing::debug!(
                            name: "jido.agent_server.signal.stop",
                            target: "jido::agent_server",
                            agent_id = %self.id,
                            agent_module = self.agent.name(),
                            signal_type = signal.ty(),
                            jido_instance = self.instance_name(),
                            duration_us,
                            directive_count = n,
                            directive_types = ?types,
                            "jido.agent_server.signal.stop"
                        );
                    }
                    for d in directives {
                        self.queue.push_back((Arc::clone(&signal), d));
                    }
                    match failure {
                        Some(error) => Err(error),
                        // The agent, copied only for a caller (below).
                        None => Ok(()),
                    }
                };
                if let Some(reply) = reply {
                    let answer = answer.map(|()| self.agent.clone());
                    self.answer(reply, answer);
                }
            }
            Err(error) => {
                tracing::warn!(
                    name: "jido.agent_server.signal.exception",
                    target: "jido::agent_server",
                    agent_id = %self.id,
                    agent_module = self.agent.name(),
                    signal_type = signal.ty(),
                    jido_instance = self.instance_name(),
                    duration_us,
                    error = %crate::error::sanitize_str(error.message()),
                    error_type = error.kind().as_str(),
                    retryable = error.retryable(),
                    "jido.agent_server.signal.exception"
                );
                if let Some(reply) = reply {
                    self.answer(reply, Err(error.clone()));
                }
                self.queue
                    .push_back((signal, Directive::error(error, "cmd")));
            }
        }
    }

    async fn on_drain(&mut self, myself: &ActorRef<AgentMsg>) {
        self.drain_scheduled = false;
        if self.stopping || self.in_flight.is_some() {
            return;
        }
        if let Some((signal, directive)) = self.queue.pop_front() {
            let outcome = self.exec_directive(myself, signal, directive).await;
            if let super::DirectiveResult::Stop(reason) = outcome {
                self.stop_self(myself, reason.to_string());
                return;
            }
        }
        self.check_waiters();
        self.advance(myself);
    }

    /// Stops gracefully on the agent's own decision (a Stop directive, the
    /// error policy, its parent's death, `AgentRef::stop`): what finished is
    /// settled, the unfinished `cmd` is cancelled, queued directives are
    /// dropped and waiting callers get `Cancelled`.
    pub(crate) fn stop_self(&mut self, myself: &ActorRef<AgentMsg>, reason: String) {
        if self.stopping {
            return;
        }
        self.stopping = true;
        self.status = ServerStatus::Stopping;
        self.abandon_in_flight();
        self.cancel_pending();
        let dropped = self.queue.len();
        self.queue.clear();
        if dropped > 0 {
            tracing::debug!(
                target: "jido::agent_server",
                agent_id = %self.id,
                dropped,
                "agent stopping: queued directives dropped"
            );
        }
        myself.stop(Some(reason));
    }

    /// Handles a runtime message; `true` for `Drain`, which the caller
    /// runs (it is the only one that awaits).
    fn handle_internal(&mut self, myself: &ActorRef<AgentMsg>, msg: Internal) -> bool {
        match msg {
            Internal::State(reply) => {
                let _ = reply.send(self.agent.clone());
            }
            Internal::Status(reply) => {
                let _ = reply.send(self.status_report());
            }
            Internal::Await(opts, reply) => self.add_waiter(myself, *opts, reply),
            Internal::AwaitTimeout(generation) => self.waiters_timed_out(myself, generation),
            Internal::RecentEvents(limit, reply) => {
                let answer = match self.extras().and_then(|e| e.debug.as_ref()) {
                    None => Err(Error::validation("debug mode is not enabled")
                        .with_detail("agent_id", self.id.to_string())),
                    Some(buf) => Ok(buf
                        .iter()
                        .take(limit.unwrap_or(usize::MAX))
                        .cloned()
                        .collect()),
                };
                let _ = reply.send(answer);
            }
            Internal::SetDebug(on, reply) => {
                let enabled = self.extras().is_some_and(|e| e.debug.is_some());
                match (on, enabled) {
                    (true, false) => self.extras_mut().debug = Some(VecDeque::new()),
                    (false, true) => self.extras_mut().debug = None,
                    _ => {}
                }
                let _ = reply.send(());
            }
            Internal::Poll => {
                self.poll_local(myself);
                self.advance(myself);
            }
            Internal::Drain => return true,
            Internal::ChildStarted(started) => self.on_child_started(myself, *started),
            Internal::CronTick(job_id, generation) => {
                self.on_cron_tick(myself, &job_id, generation)
            }
            Internal::Stop(reason) => {
                // Asked to stop through the agent's own API: it is never
                // brought back, whatever the reason. (A handle that knows
                // the instance forgot the spec already; one that does not,
                // e.g. from `AgentRef::from_actor`, relies on this.)
                if self.restartable
                    && let Some(jido) = &self.jido
                {
                    jido.forget_restart(myself.get_id());
                }
                self.stop_self(myself, reason);
            }
            Internal::Down { actor, reason } => self.on_actor_down(myself, actor, reason),
            Internal::Hierarchy(msg) => self.on_hierarchy(myself, *msg),
            Internal::RemoteParentDown(data) => self.on_remote_parent_down(myself, *data),
            Internal::Durable(msg) => self.on_durable(myself, *msg),
        }
        false
    }

    fn status_report(&self) -> AgentStatus {
        let extras = self.extras();
        let child_details = self.child_details();
        let children = child_details.iter().map(|c| c.tag.clone()).collect();
        let mut cron_jobs: Vec<String> =
            extras.map_or_else(Vec::new, |e| e.crons.keys().cloned().collect());
        cron_jobs.sort();
        AgentStatus {
            agent_id: self.id.to_string(),
            agent_type: self.agent.name(),
            status: self.status,
            snapshot: guarded_snapshot(&self.agent, &self.id),
            queue_length: self.queue.len(),
            pending_signals: self.pending.len(),
            in_flight: self.in_flight.is_some(),
            children,
            child_details,
            parent_id: self.parent.as_ref().map(|p| p.id.clone()),
            completion_waiters: extras.map_or(0, |e| e.waiters.len()),
            error_count: self.error_count,
            scheduled: extras.map_or(0, |e| {
                e.timers.iter().filter(|t| !t.0.is_finished()).count()
            }) + self.durable_schedules(),
            cron_jobs,
            agent: self.agent.clone(),
        }
    }

    fn add_waiter(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        opts: AwaitOptions,
        reply: RpcReplyPort<Result<Completion>>,
    ) {
        if let Some(done) = completion(&self.agent, &opts) {
            let _ = reply.send(Ok(done));
            return;
        }
        let started = Instant::now();
        // A timeout too large to be a deadline waits without a timer.
        let deadline = deadline_representable(opts.timeout).then(|| started + opts.timeout);
        self.extras_mut().waiters.push(Waiter {
            opts,
            reply,
            started,
            deadline,
        });
        if let Some(deadline) = deadline {
            self.arm_waiter_timer(myself, deadline);
        }
    }

    /// Arms the waiters' timer for `deadline` unless it fires by then.
    fn arm_waiter_timer(&mut self, myself: &ActorRef<AgentMsg>, deadline: Instant) {
        if self
            .extras()
            .and_then(|e| e.waiter_timer.as_ref())
            .is_some_and(|t| t.deadline <= deadline)
        {
            return;
        }
        self.next_id += 1;
        let generation = self.next_id;
        let delay = deadline.saturating_duration_since(Instant::now());
        let timer = AbortOnDrop(myself.send_after(delay, move || {
            AgentMsg::internal(Internal::AwaitTimeout(generation))
        }));
        // The timer it replaces, if any, is aborted.
        self.extras_mut().waiter_timer = Some(WaiterTimer {
            deadline,
            generation,
            _timer: timer,
        });
    }

    /// The waiters' timer fired: answers the waiters whose deadline passed
    /// and arms it again for the earliest one left.
    fn waiters_timed_out(&mut self, myself: &ActorRef<AgentMsg>, generation: u64) {
        let Some(extras) = self.extras.as_mut() else {
            return;
        };
        if extras
            .waiter_timer
            .as_ref()
            .is_none_or(|t| t.generation != generation)
        {
            return;
        }
        extras.waiter_timer = None;
        let now = Instant::now();
        let mut due = Vec::new();
        let mut i = 0;
        while i < extras.waiters.len() {
            if extras.waiters[i].deadline.is_some_and(|d| d <= now) {
                due.push(extras.waiters.swap_remove(i));
            } else {
                i += 1;
            }
        }
        let next = extras.waiters.iter().filter_map(|w| w.deadline).min();
        if extras.waiters.is_empty() {
            extras.waiters_checked = None;
        }
        for waiter in due {
            self.waiter_timed_out(waiter);
        }
        if let Some(next) = next {
            self.arm_waiter_timer(myself, next);
        }
    }

    fn waiter_timed_out(&self, waiter: Waiter) {
        let waited_ms = waiter.started.elapsed().as_millis() as u64;
        let error = Error::timeout(format!("await completion timed out after {waited_ms}ms"))
            .with_detail("agent_id", self.id.to_string())
            .with_detail("waited_ms", waited_ms)
            .with_detail("server_status", self.status.as_str())
            .with_detail("queue_length", self.queue.len())
            .with_detail("pending_signals", self.pending.len())
            .with_detail(
                "hint",
                format!(
                    "the state at {:?} never became \"completed\" or \"failed\"",
                    waiter.opts.status_path.join(".")
                ),
            );
        let _ = waiter.reply.send(Err(error));
    }

    /// Answers the completion waiters whose condition now holds. Nothing
    /// to do when the state is the one they were all checked against (a
    /// waiter is checked when it arrives): the state is shared, so it is
    /// the same map exactly when nothing was written since.
    pub(crate) fn check_waiters(&mut self) {
        let Some(extras) = self.extras.as_mut() else {
            return;
        };
        let state = self.agent.state();
        if extras
            .waiters_checked
            .as_ref()
            .is_some_and(|checked| checked.is(state))
        {
            return;
        }
        let waiters = &mut extras.waiters;
        let mut i = 0;
        while i < waiters.len() {
            if let Some(done) = completion(&self.agent, &waiters[i].opts) {
                let waiter = waiters.swap_remove(i);
                let _ = waiter.reply.send(Ok(done));
            } else {
                i += 1;
            }
        }
        extras.waiters_checked = (!waiters.is_empty()).then(|| state.mark());
    }

    /// Schedules `signal` back to this agent after `delay`.
    pub(crate) fn schedule(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        delay: std::time::Duration,
        signal: Signal,
    ) {
        // A durable agent keeps it with its due time.
        let Some(signal) = self.schedule_durable(delay, signal) else {
            return;
        };
        let timer = myself.send_after(delay, move || AgentMsg::from(signal));
        let extras = self.extras_mut();
        if extras.timers.len() >= extras.prune_timers_at {
            extras.timers.retain(|t| !t.0.is_finished());
            extras.prune_timers_at = (extras.timers.len() * 2).max(16);
        }
        extras.timers.push(AbortOnDrop(timer));
    }

    fn cleanup(&mut self, myself: &ActorRef<AgentMsg>) {
        let cell = myself.get_cell();
        if let Some(parent) = &self.parent {
            cell.unmonitor(parent.actor.get_cell());
        }
        for child in self.extras().iter().flat_map(|e| e.children.values()) {
            cell.unmonitor(child.actor.get_cell());
        }
        // Now, not when a supervisor drops the final state it is sent.
        self.release();
        tracing::debug!(
            name: "jido.agent_server.stop",
            target: "jido::agent_server",
            agent_id = %self.id,
            agent_module = self.agent.name(),
            jido_instance = self.instance_name(),
            "jido.agent_server.stop"
        );
    }

    /// Answers every caller still waiting (`Cancelled`), cancels timers,
    /// crons and unfinished work, and leaves the registry. Runs when the
    /// agent stops (`post_stop`) and again, as a no-op then, when its state
    /// is dropped — the only step a killed agent gets.
    fn release(&mut self) {
        self.abandon_in_flight();
        self.cancel_pending();
        self.queue.clear();
        if let Some(extras) = self.extras.take() {
            for waiter in extras.waiters {
                let _ = waiter.reply.send(Err(stopped(&self.id)));
            }
        }
        if std::mem::take(&mut self.registered)
            && let Some(jido) = &self.jido
        {
            // Only a durable agent can have marked itself hibernating.
            jido.unregister(&self.id, self.myself.get_id(), self.durable.is_some());
        }
    }

    /// Answers every waiting call with `Cancelled`; waiting casts are
    /// dropped (counted in a debug event).
    fn cancel_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        let dropped = pending.len();
        for work in pending {
            if let Some(reply) = work.reply {
                let _ = reply.send(Err(stopped(&self.id)));
            }
        }
        if dropped > 0 {
            tracing::debug!(
                target: "jido::agent_server",
                agent_id = %self.id,
                dropped,
                "agent stopping: waiting signals cancelled"
            );
        }
    }

    /// Looks an agent up in the instance registry.
    pub(crate) fn lookup_agent(&self, id: &str) -> Result<AgentRef> {
        self.jido
            .as_ref()
            .and_then(|j| j.whereis(id))
            .ok_or_else(|| not_alive(id))
    }
}

impl Drop for AgentServerState {
    fn drop(&mut self) {
        self.release();
    }
}

/// The answer of a caller whose signal the agent will never process.
fn stopped(id: &str) -> Error {
    Error::cancelled("agent stopped before replying").with_detail("agent_id", id.to_owned())
}

/// The completion `opts` wait for, when the agent's state shows one.
fn completion(agent: &AgentState, opts: &AwaitOptions) -> Option<Completion> {
    let status = lookup(agent.state(), &opts.status_path)?;
    let (status, path) = match status.as_str()? {
        "completed" => (CompletionStatus::Completed, &opts.result_path),
        "failed" => (CompletionStatus::Failed, &opts.error_path),
        _ => return None,
    };
    let result = lookup(agent.state(), path).map_or(Value::Null, StateValue::to_json);
    Some(Completion { status, result })
}

fn lookup<'a>(
    state: &'a StateMap,
    path: &[std::borrow::Cow<'static, str>],
) -> Option<&'a StateValue> {
    let (first, rest) = path.split_first()?;
    let mut current = state.get(first)?;
    for key in rest {
        current = current.get(&**key)?;
    }
    Some(current)
}

/// The `cmd` of one routed signal on a copy of the agent, as a future the
/// actor drives (see [`LocalCmd`]). A panic in the strategy or a hook
/// becomes an execution error and leaves the agent unchanged (the copy is
/// dropped).
fn local_cmd(
    mut agent: AgentState,
    p: Prepared,
    exec: Exec,
) -> impl Future<Output = DoneItem> + Send {
    // The clock is read only when the duration is reported.
    let started =
        tracing::enabled!(target: "jido::agent_server", tracing::Level::WARN).then(Instant::now);
    let Prepared {
        signal,
        reply,
        commands,
        tick,
    } = p;
    async move {
        // The options are only read when the `cmd` starts: built here and
        // dropped before the first await, they take no room in this future
        // (boxed for every signal; below 1 KB, glibc serves it from its
        // per-thread cache). The `cmd` is pinned where it is made and a
        // panic is caught around each of its polls: a `catch_unwind`
        // wrapper would move the whole `cmd` future once more.
        let result = {
            let mut cmd = std::pin::pin!({
                let opts = CmdOptions::new().exec(exec).signal(Arc::clone(&signal));
                if tick {
                    // Rare: boxed apart, so the common `cmd` stays small.
                    futures::future::Either::Right(Box::pin(cmd_then_tick(
                        &mut agent, commands, opts,
                    )))
                } else {
                    futures::future::Either::Left(agent.cmd_commands(commands, &opts))
                }
            });
            std::future::poll_fn(|cx| {
                match std::panic::catch_unwind(AssertUnwindSafe(|| cmd.as_mut().poll(cx))) {
                    Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
                    Ok(std::task::Poll::Ready(directives)) => {
                        std::task::Poll::Ready(Ok(directives))
                    }
                    Err(p) => std::task::Poll::Ready(Err(Error::execution(format!(
                        "agent cmd panicked: {}",
                        panic_message(&*p)
                    )))),
                }
            })
            .await
        };
        DoneItem {
            signal,
            reply,
            agent,
            result,
            duration_us: started.map_or(0, |s| s.elapsed().as_micros() as u64),
        }
    }
}

/// The `cmd` of a signal routed (also) to the strategy's tick: its
/// commands, if any, then one tick.
async fn cmd_then_tick(
    agent: &mut AgentState,
    commands: Vec<Command>,
    opts: CmdOptions,
) -> Vec<Directive> {
    let mut directives = Vec::new();
    if !commands.is_empty() {
        directives = agent.cmd_commands(commands, &opts).await;
    }
    directives.extend(agent.tick(opts).await);
    directives
}

#[cfg(test)]
mod router_sharing {
    use super::*;
    use crate::agent::{Agent, AgentOptions};

    struct Nothing;
    impl crate::action::Action for Nothing {
        type Params = serde_json::Map<String, Value>;
        type Output = ();
        const NAME: &'static str = "nothing";
        async fn run(&self, _: Self::Params, _: &crate::Context) -> Result<()> {
            Ok(())
        }
    }

    /// Holds a value: every instance is its own action.
    struct Holding(#[allow(dead_code)] String);
    impl crate::action::Action for Holding {
        type Params = serde_json::Map<String, Value>;
        type Output = ();
        const NAME: &'static str = "holding";
        async fn run(&self, _: Self::Params, _: &crate::Context) -> Result<()> {
            Ok(())
        }
    }

    struct Zst;
    impl Agent for Zst {
        const NAME: &'static str = "router_sharing_zst";
        type Schema = ();
        fn signal_routes(&self) -> Vec<SignalRoute> {
            vec![
                SignalRoute::action("a", Nothing),
                SignalRoute::action("b.*", Nothing),
            ]
        }
    }

    struct Owning;
    impl Agent for Owning {
        const NAME: &'static str = "router_sharing_owning";
        type Schema = ();
        fn signal_routes(&self) -> Vec<SignalRoute> {
            vec![SignalRoute::action("a", Holding("x".into()))]
        }
    }

    #[test]
    fn same_routes_share_one_router_while_it_lives() {
        let a = shared_router(&AgentState::new(Zst, AgentOptions::new())).unwrap();
        let b = shared_router(&AgentState::new(Zst, AgentOptions::new())).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        drop((a, b));
        // Gone with its last agent: the next one builds a new router.
        let c = shared_router(&AgentState::new(Zst, AgentOptions::new())).unwrap();
        assert_eq!(Arc::strong_count(&c), 1);
    }

    #[test]
    fn routes_to_distinct_action_values_are_not_shared() {
        let a = shared_router(&AgentState::new(Owning, AgentOptions::new())).unwrap();
        let b = shared_router(&AgentState::new(Owning, AgentOptions::new())).unwrap();
        assert!(!Arc::ptr_eq(&a, &b));
    }
}
