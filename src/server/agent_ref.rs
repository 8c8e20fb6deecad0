//! `AgentRef`: the handle of a running agent.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{ActorRef, ActorStatus, RpcReplyPort};
use serde_json::Value;

use super::exit::{ExitReason, Recorded};
use super::instance::Shared;
use super::msg::{AgentMsg, Internal};
use super::{DEFAULT_AWAIT_TIMEOUT, DEFAULT_CALL_TIMEOUT, DEFAULT_STOP_TIMEOUT};
use crate::agent::AgentState;
use crate::directive::StopReason;
use crate::error::{Error, Result};
use crate::signal::Signal;
use crate::strategy::{Snapshot, SnapshotStatus};

/// The handle of a running agent: a typed wrapper around its
/// `ActorRef<AgentMsg>` plus its id. Cheap to clone; `Send + Sync`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::prelude::*;
/// use jido::server::{Jido, JidoConfig, ServerOptions};
/// use jido::signal::Signal;
/// use jido::agent::SignalRoute;
/// use serde_json::json;
///
/// #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
/// struct Add { n: i64 }
/// struct AddAction;
/// impl Action for AddAction {
///     type Params = Add;
///     type Output = serde_json::Value;
///     const NAME: &'static str = "add";
///     async fn run(&self, p: Add, ctx: &Context) -> jido::Result<serde_json::Value> {
///         let total = ctx.state().and_then(|s| s.get("total")?.as_i64()).unwrap_or(0);
///         Ok(json!({"total": total + p.n}))
///     }
/// }
///
/// struct Counter;
/// impl Agent for Counter {
///     const NAME: &'static str = "counter";
///     type Schema = ();
///     fn signal_routes(&self) -> Vec<SignalRoute> {
///         vec![SignalRoute::action("counter.add", AddAction)]
///     }
/// }
///
/// let jido = Jido::start(JidoConfig::new()).await?;
/// let agent = jido.start_agent(AgentState::new(Counter, AgentOptions::new().id("c1")), ServerOptions::new()).await?;
/// let after = agent.call(Signal::new("counter.add", json!({"n": 2}))).await?;
/// assert_eq!(after.state()["total"], 2);
/// agent.cast(Signal::new("counter.add", json!({"n": 3})))?;
/// let status = agent.status().await?;
/// assert_eq!(status.agent_id, "c1");
/// jido.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AgentRef {
    actor: ActorRef<AgentMsg>,
    id: Arc<str>,
    /// The instance the agent runs in, when this handle came from it (so
    /// `stop` can rule out a restart even if the agent must be killed).
    instance: Weak<Shared>,
}

impl fmt::Debug for AgentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentRef")
            .field("id", &self.id)
            .field("actor", &self.actor.get_id())
            .finish()
    }
}

impl PartialEq for AgentRef {
    fn eq(&self, other: &Self) -> bool {
        self.actor.get_id() == other.actor.get_id()
    }
}

impl Eq for AgentRef {}

/// Whether `now + timeout` is a representable deadline (tokio's clock, so
/// a paused test clock counts).
pub(crate) fn deadline_representable(timeout: Duration) -> bool {
    tokio::time::Instant::now().checked_add(timeout).is_some()
}

/// The strategy's snapshot for a status report. A panicking
/// [`Strategy::snapshot`](crate::strategy::Strategy::snapshot) does not
/// take the agent down: it is logged and reported as a snapshot with
/// status [`SnapshotStatus::Error`] and the panic message under
/// `details.error`.
pub(crate) fn guarded_snapshot(agent: &AgentState, agent_id: &str) -> Snapshot {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| agent.strategy_snapshot())) {
        Ok(snapshot) => snapshot,
        Err(panic) => {
            let message = format!(
                "strategy snapshot panicked: {}",
                crate::exec::panic_message(&*panic)
            );
            tracing::warn!(
                target: "jido::agent_server",
                agent_id,
                agent_module = agent.name(),
                error = %crate::error::sanitize_str(&message),
                "strategy snapshot panicked"
            );
            let mut snapshot = Snapshot::new(SnapshotStatus::Error);
            snapshot
                .details
                .insert("error".into(), Value::String(message));
            snapshot
        }
    }
}

pub(crate) fn not_alive(id: &str) -> Error {
    Error::not_found("agent is not alive").with_detail("agent_id", id.to_owned())
}

fn call_timed_out(id: &str, timeout: Duration) -> Error {
    Error::timeout(format!(
        "agent call timed out after {}ms",
        timeout.as_millis()
    ))
    .with_detail("agent_id", id.to_owned())
    .with_detail("timeout_ms", timeout.as_millis() as u64)
}

fn stopped_before_reply(id: &str) -> Error {
    Error::cancelled("agent stopped before replying").with_detail("agent_id", id.to_owned())
}

impl AgentRef {
    pub(crate) fn new(actor: ActorRef<AgentMsg>, id: impl Into<Arc<str>>) -> Self {
        Self {
            actor,
            id: id.into(),
            instance: Weak::new(),
        }
    }

    /// This handle, knowing the instance the agent runs in.
    pub(crate) fn in_instance(mut self, shared: &Arc<Shared>) -> Self {
        self.instance = Arc::downgrade(shared);
        self
    }

    /// Asks the agent to stop on its own terms (what finished is settled,
    /// the rest cancelled, never restarted); a raw ractor stop when its
    /// mailbox no longer takes messages.
    pub(crate) fn request_stop(&self, reason: String) {
        if let Some(shared) = self.instance.upgrade() {
            shared.forget_restart(self.actor.get_id());
        }
        if let Err(ractor::MessagingErr::SendErr(AgentMsg::Runtime(super::msg::RuntimeMsg(
            Internal::Stop(reason),
        )))) = self
            .actor
            .send_message(AgentMsg::internal(Internal::Stop(reason)))
        {
            self.actor.stop(Some(reason));
        }
    }

    /// Sends `signal` as a call whose answer the agent hands to `then`, in
    /// its own turn (a call from another node: the gateway writes the
    /// reply's bytes there, with no task waiting for the answer). `then`
    /// is dropped unrun when the agent ends without answering.
    ///
    /// # Errors
    ///
    /// `NotFound` "agent is not alive" when the agent's mailbox is closed
    /// (`then` is dropped).
    #[cfg(feature = "cluster")]
    pub(crate) fn call_then(
        &self,
        signal: std::sync::Arc<Signal>,
        then: Box<dyn FnOnce(Result<AgentState>) + Send>,
    ) -> Result<()> {
        self.actor
            .send_message(AgentMsg::Call(super::msg::CallRequest {
                signal,
                reply: super::inflight::Reply::Then(then),
            }))
            .map_err(|_| not_alive(&self.id))
    }

    /// Tells a remote child that its parent on another node ended (see
    /// `Internal::RemoteParentDown`); false when the agent is gone.
    #[cfg(feature = "cluster")]
    pub(crate) fn remote_parent_down(&self, data: serde_json::Value) -> bool {
        self.actor
            .send_message(AgentMsg::internal(Internal::RemoteParentDown(Box::new(
                data,
            ))))
            .is_ok()
    }

    /// Waits until the agent has ended and says why.
    ///
    /// For an agent of a [`Jido`](super::Jido) instance the reason is the
    /// one its supervisor saw ([`ExitReason::Failed`] with the panic
    /// message, [`ExitReason::Killed`], the stop reason, …), also when the
    /// agent ended before this call (the instance remembers its last 1 024
    /// exits). A restarted agent is a new actor: this handle's agent has
    /// ended, [`Jido::whereis`](super::Jido::whereis) finds the new one.
    /// For an agent spawned without an instance only its own supervisor
    /// learns the reason: this resolves when it has stopped, with
    /// [`ExitReason::Unknown`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
    /// use jido::prelude::*;
    /// use jido::server::{ExitReason, Jido, JidoConfig, ServerOptions};
    ///
    /// struct Idle;
    /// impl Agent for Idle { const NAME: &'static str = "idle"; type Schema = (); }
    ///
    /// let jido = Jido::start(JidoConfig::new()).await?;
    /// let agent = jido.start_agent(AgentState::new(Idle, AgentOptions::new()), ServerOptions::new()).await?;
    /// let watcher = tokio::spawn({
    ///     let agent = agent.clone();
    ///     async move { agent.wait_exit().await }
    /// });
    /// agent.actor_ref().kill();
    /// assert_eq!(watcher.await.unwrap(), ExitReason::Killed);
    /// # jido.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub async fn wait_exit(&self) -> ExitReason {
        let Some(shared) = self.instance.upgrade() else {
            let _ = self.actor.wait(None).await;
            return ExitReason::Unknown;
        };
        let recorded = shared.exits().wait(self.actor.get_id());
        drop(shared);
        match recorded {
            Some(Recorded::Done(reason)) => reason,
            Some(Recorded::Pending(rx)) => rx.await.unwrap_or(ExitReason::Unknown),
            None => {
                let _ = self.actor.wait(None).await;
                ExitReason::Unknown
            }
        }
    }

    /// Wraps the actor of an AgentServer you spawned yourself, asking it for
    /// its id.
    ///
    /// # Errors
    ///
    /// [`NotFound`](crate::ErrorKind::NotFound) when the actor is not
    /// alive, a timeout after 5 s.
    pub async fn from_actor(actor: ActorRef<AgentMsg>) -> Result<AgentRef> {
        let probe = AgentRef::new(actor, "");
        let status = probe.status().await?;
        Ok(AgentRef::new(probe.actor, status.agent_id))
    }

    /// The agent's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The id, shared (the registry keys on it without a copy).
    pub(crate) fn shared_id(&self) -> &Arc<str> {
        &self.id
    }

    /// The raw actor, e.g. to link, monitor or supervise it yourself.
    pub fn actor_ref(&self) -> &ActorRef<AgentMsg> {
        &self.actor
    }

    /// Whether the actor is still running (not stopping or stopped).
    pub fn is_alive(&self) -> bool {
        self.actor.get_status() < ActorStatus::Stopping
    }

    async fn request<T: Send + 'static>(
        &self,
        build: impl FnOnce(RpcReplyPort<T>) -> AgentMsg,
        timeout: Duration,
    ) -> Result<T> {
        // A timeout too large to be a deadline waits without one.
        let limit = deadline_representable(timeout).then_some(timeout);
        match self.actor.call(build, limit).await {
            Ok(CallResult::Success(v)) => Ok(v),
            Ok(CallResult::Timeout) => Err(call_timed_out(&self.id, timeout)),
            Ok(CallResult::SenderError) => Err(stopped_before_reply(&self.id)),
            Err(_) => Err(not_alive(&self.id)),
        }
    }

    /// Sends `signal` and waits (at most 5 s) for its `cmd` to finish.
    /// Returns the agent as it is once the signal's directives are
    /// **queued** (not yet executed).
    ///
    /// # Errors
    ///
    /// * [`Routing`](crate::ErrorKind::Routing) "no route for signal:
    ///   TYPE" when no route matches (an Error directive also goes to the
    ///   error policy);
    /// * [`QueueOverflow`](crate::ErrorKind::QueueOverflow) when the
    ///   directives did not fit in the queue (they are dropped, the state
    ///   change is kept);
    /// * [`Timeout`](crate::ErrorKind::Timeout) after 5 s (the signal is
    ///   still processed);
    /// * [`NotFound`](crate::ErrorKind::NotFound) when the agent is not
    ///   alive, [`Cancelled`](crate::ErrorKind::Cancelled) when it stopped
    ///   before answering;
    /// * [`Execution`](crate::ErrorKind::Execution) when the strategy
    ///   panicked;
    /// * [`Validation`](crate::ErrorKind::Validation) "untrusted signal
    ///   may not use reserved type TYPE" when the signal is marked
    ///   untrusted and its type is a runtime one (`jido.agent.*`), unless
    ///   the agent allows it (see
    ///   [`ServerOptions::allow_untrusted_runtime_signals`](super::ServerOptions::allow_untrusted_runtime_signals)).
    pub async fn call(&self, signal: Signal) -> Result<AgentState> {
        self.call_timeout(signal, DEFAULT_CALL_TIMEOUT).await
    }

    /// [`call`](AgentRef::call) with another timeout.
    ///
    /// # Errors
    ///
    /// As [`call`](AgentRef::call).
    pub async fn call_timeout(&self, signal: Signal, timeout: Duration) -> Result<AgentState> {
        self.request(|reply| AgentMsg::call(signal, reply), timeout)
            .await?
    }

    /// Sends `signal` without waiting.
    ///
    /// # Errors
    ///
    /// [`NotFound`](crate::ErrorKind::NotFound) when the agent is not
    /// alive.
    pub fn cast(&self, signal: Signal) -> Result<()> {
        self.cast_shared(std::sync::Arc::new(signal))
    }

    /// [`cast`](Self::cast) of a shared signal (a cluster gateway's: no
    /// copy of it on the way).
    pub(crate) fn cast_shared(&self, signal: std::sync::Arc<Signal>) -> Result<()> {
        self.actor
            .send_message(AgentMsg::Signal(signal))
            .map_err(|_| not_alive(&self.id))
    }

    /// Sends `signal` to an agent with [`Durability::Journal`](super::Durability::Journal)
    /// and returns once it is in the agent's journal (feature `persist`):
    /// from then on it survives a crash or a kill of the process and is
    /// processed (at least once: a replay after a crash may run it again,
    /// with the same signal id). Its result is not waited for.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
    /// use std::sync::Arc;
    /// use jido::prelude::*;
    /// use jido::persist::MemoryStorage;
    /// use jido::server::{Durability, Jido, JidoConfig, ServerOptions};
    /// use jido::signal::Signal;
    ///
    /// struct Inbox;
    /// impl Agent for Inbox {
    ///     const NAME: &'static str = "inbox";
    ///     type Schema = ();
    /// }
    /// let jido = Jido::start(JidoConfig::new().storage(Arc::new(MemoryStorage::new()))).await?;
    /// let agent = AgentState::new(Inbox, AgentOptions::new().id("inbox-1"));
    /// let inbox = jido.start_agent(agent, ServerOptions::new().durability(Durability::Journal)).await?;
    /// inbox.cast_durable(Signal::new("mail.received", serde_json::json!({"n": 1}))).await?;
    /// # jido.shutdown().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// * [`Storage`](crate::ErrorKind::Storage) (retryable) when the
    ///   append failed: the signal was not accepted;
    /// * [`Fenced`](crate::ErrorKind::Fenced) when a newer owner holds the
    ///   agent (it stops with reason `fenced`);
    /// * [`Configuration`](crate::ErrorKind::Configuration) "cast_durable
    ///   needs an agent with durability journal";
    /// * the refusals of [`call`](AgentRef::call) on arrival (an untrusted
    ///   reserved signal, a full pending queue), a timeout (5 s), or
    ///   [`NotFound`](crate::ErrorKind::NotFound) when the agent is not
    ///   alive.
    #[cfg(feature = "persist")]
    pub async fn cast_durable(&self, signal: Signal) -> Result<()> {
        self.request(
            |r| {
                AgentMsg::internal(Internal::Durable(Box::new(
                    super::durable::DurableMsg::Cast(signal, r),
                )))
            },
            DEFAULT_CALL_TIMEOUT,
        )
        .await?
    }

    /// The agent as it is now. While a signal is being processed this is
    /// the state before it.
    ///
    /// # Errors
    ///
    /// As [`call`](AgentRef::call), without the routing and queue errors.
    pub async fn state(&self) -> Result<AgentState> {
        self.request(
            |r| AgentMsg::internal(Internal::State(r)),
            DEFAULT_CALL_TIMEOUT,
        )
        .await
    }

    /// The server's status.
    ///
    /// # Errors
    ///
    /// As [`state`](AgentRef::state).
    pub async fn status(&self) -> Result<AgentStatus> {
        self.request(
            |r| AgentMsg::internal(Internal::Status(r)),
            DEFAULT_CALL_TIMEOUT,
        )
        .await
    }

    /// Waits until the agent's state says `completed` or `failed` (see
    /// [`AwaitOptions`]). Event-driven: checked after every `cmd` and every
    /// directive.
    ///
    /// Any timeout is accepted, up to `Duration::MAX`: one too large to be
    /// a deadline (past what `Instant` can represent) means waiting with
    /// no timer at all.
    ///
    /// # Errors
    ///
    /// A [`Timeout`](crate::ErrorKind::Timeout) error "await completion
    /// timed out after Nms" with details `waited_ms`, `server_status`,
    /// `queue_length`, `hint`; the waiter is removed. Errors of
    /// [`state`](AgentRef::state).
    pub async fn await_completion(&self, options: AwaitOptions) -> Result<Completion> {
        let margin = options.timeout.saturating_add(Duration::from_secs(1));
        self.request(
            |r| AgentMsg::internal(Internal::Await(Box::new(options), r)),
            margin,
        )
        .await?
    }

    /// The newest `limit` (all when `None`) debug events, newest first.
    ///
    /// # Errors
    ///
    /// A validation error "debug mode is not enabled" when debug is off;
    /// errors of [`state`](AgentRef::state).
    pub async fn recent_events(&self, limit: Option<usize>) -> Result<Vec<DebugEvent>> {
        self.request(
            |r| AgentMsg::internal(Internal::RecentEvents(limit, r)),
            DEFAULT_CALL_TIMEOUT,
        )
        .await?
    }

    /// Turns debug mode on (an empty buffer) or off (the buffer is
    /// dropped).
    ///
    /// # Errors
    ///
    /// As [`state`](AgentRef::state).
    pub async fn set_debug(&self, on: bool) -> Result<()> {
        self.request(
            |r| AgentMsg::internal(Internal::SetDebug(on, r)),
            DEFAULT_CALL_TIMEOUT,
        )
        .await
    }

    /// Stops the agent gracefully with `reason` and waits for it to end,
    /// at most 5 s ([`DEFAULT_STOP_TIMEOUT`](super::DEFAULT_STOP_TIMEOUT)),
    /// after which it is killed. See [`stop_timeout`](AgentRef::stop_timeout).
    ///
    /// # Errors
    ///
    /// As [`stop_timeout`](AgentRef::stop_timeout).
    pub async fn stop(&self, reason: impl Into<StopReason>) -> Result<()> {
        self.stop_timeout(reason, DEFAULT_STOP_TIMEOUT).await
    }

    /// Stops the agent gracefully with `reason` and waits for it to end,
    /// at most `grace`; then kills it and waits `grace` again.
    ///
    /// The stop takes effect after the message the agent is handling: every
    /// `cmd` that already finished is settled (state kept, caller answered
    /// with its result), the unfinished one and the signals still waiting
    /// get [`Cancelled`](crate::ErrorKind::Cancelled), queued directives are
    /// dropped. An agent stopped this way is **never restarted**, whatever
    /// the reason and its restart policy, even when it has to be killed
    /// (the reason still reaches its supervisor and its parent).
    ///
    /// # Errors
    ///
    /// [`NotFound`](crate::ErrorKind::NotFound) when the agent was not
    /// alive; [`Timeout`](crate::ErrorKind::Timeout) "agent did not stop"
    /// (details `agent_id`, `timeout_ms`) when even the kill did not finish
    /// in time (its handler is blocked): the agent still runs.
    pub async fn stop_timeout(&self, reason: impl Into<StopReason>, grace: Duration) -> Result<()> {
        self.stop_reporting_kill(reason.into().to_string(), grace)
            .await
            .map(|_| ())
    }

    /// [`stop_timeout`](AgentRef::stop_timeout); `true` when the agent had
    /// to be killed (its `post_stop` did not run).
    pub(crate) async fn stop_reporting_kill(
        &self,
        reason: String,
        grace: Duration,
    ) -> Result<bool> {
        if !self.is_alive() {
            return Err(not_alive(&self.id));
        }
        self.request_stop(reason);
        let cell = self.actor.get_cell();
        if cell.wait(Some(grace)).await.is_ok() {
            return Ok(false);
        }
        match cell.kill_and_wait(Some(grace)).await {
            Err(ractor::RactorErr::Timeout) => Err(Error::timeout("agent did not stop")
                .with_detail("agent_id", self.id.to_string())
                .with_detail("timeout_ms", grace.as_millis() as u64)),
            // Killed, or it was already gone.
            _ => Ok(true),
        }
    }
}

/// The lifecycle status of an AgentServer.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerStatus {
    /// Starting (before `post_start` ran).
    Initializing,
    /// Nothing to do.
    Idle,
    /// A `cmd` is running or directives are queued.
    Processing,
    /// A stop was decided; the actor is about to end.
    Stopping,
}

impl ServerStatus {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerStatus::Initializing => "initializing",
            ServerStatus::Idle => "idle",
            ServerStatus::Processing => "processing",
            ServerStatus::Stopping => "stopping",
        }
    }
}

impl fmt::Display for ServerStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What [`AgentRef::status`] reports.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct AgentStatus {
    /// The agent's id.
    pub agent_id: String,
    /// The agent type's name.
    pub agent_type: &'static str,
    /// The server's lifecycle status.
    pub status: ServerStatus,
    /// The strategy's snapshot. When the strategy's `snapshot` panicked:
    /// status [`SnapshotStatus::Error`], `details.error` "strategy
    /// snapshot panicked: MESSAGE" (the agent keeps serving).
    pub snapshot: Snapshot,
    /// Directives waiting in the queue.
    pub queue_length: usize,
    /// Signals waiting for their turn (not counting the one in flight).
    pub pending_signals: usize,
    /// Whether a `cmd` (or an instruction) is running now.
    pub in_flight: bool,
    /// Tags of the tracked children, sorted: the agent's own and those the
    /// instance's [`ChildHost`](super::ChildHost) keeps for it (feature
    /// `cluster`: its children on other nodes).
    pub children: Vec<String>,
    /// The same children with their ids and nodes, sorted by tag (`node`
    /// is `None` for a child in the agent's own instance).
    pub child_details: Vec<super::ChildStatus>,
    /// The live parent's id.
    pub parent_id: Option<String>,
    /// Callers waiting in [`AgentRef::await_completion`].
    pub completion_waiters: usize,
    /// Errors seen by the error policy.
    pub error_count: u32,
    /// Pending Schedule timers.
    pub scheduled: usize,
    /// Ids of the active cron jobs, sorted.
    pub cron_jobs: Vec<String>,
    /// The agent value.
    pub agent: AgentState,
}

/// Options of [`AgentRef::await_completion`]: where the state says the
/// status, the result and the error, and how long to wait.
///
/// ```
/// use std::time::Duration;
/// use jido::server::AwaitOptions;
///
/// let opts = AwaitOptions::new().timeout(Duration::from_secs(2)).result_path(["order", "total"]);
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwaitOptions {
    pub(crate) status_path: Path,
    pub(crate) result_path: Path,
    pub(crate) error_path: Path,
    pub(crate) timeout: Duration,
}

/// A path of keys into the agent state; the defaults are static (no
/// allocation for an `AwaitOptions` whose paths are replaced).
pub(crate) type Path = Cow<'static, [Cow<'static, str>]>;

impl Default for AwaitOptions {
    fn default() -> Self {
        Self {
            status_path: Cow::Borrowed(&[Cow::Borrowed("status")]),
            result_path: Cow::Borrowed(&[Cow::Borrowed("last_answer")]),
            error_path: Cow::Borrowed(&[Cow::Borrowed("error")]),
            timeout: DEFAULT_AWAIT_TIMEOUT,
        }
    }
}

fn path<I, K>(keys: I) -> Path
where
    I: IntoIterator<Item = K>,
    K: Into<String>,
{
    Cow::Owned(keys.into_iter().map(|k| Cow::Owned(k.into())).collect())
}

impl AwaitOptions {
    /// Jido's defaults: status at `status`, result at `last_answer`, error
    /// at `error`, 10 s.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where the status (`"completed"` / `"failed"`) is.
    #[must_use]
    pub fn status_path<I: IntoIterator<Item = K>, K: Into<String>>(mut self, keys: I) -> Self {
        self.status_path = path(keys);
        self
    }

    /// Where the result of a completed agent is.
    #[must_use]
    pub fn result_path<I: IntoIterator<Item = K>, K: Into<String>>(mut self, keys: I) -> Self {
        self.result_path = path(keys);
        self
    }

    /// Where the error of a failed agent is.
    #[must_use]
    pub fn error_path<I: IntoIterator<Item = K>, K: Into<String>>(mut self, keys: I) -> Self {
        self.error_path = path(keys);
        self
    }

    /// The three paths at once, as they are (no copy of a borrowed key):
    /// for callers that build the same paths for every request.
    #[cfg(feature = "ai")]
    #[must_use]
    pub(crate) fn paths(mut self, status: Path, result: Path, error: Path) -> Self {
        self.status_path = status;
        self.result_path = result;
        self.error_path = error;
        self
    }

    /// How long to wait.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// How an agent finished.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompletionStatus {
    /// The status said `"completed"`.
    Completed,
    /// The status said `"failed"`.
    Failed,
}

/// The outcome of [`AgentRef::await_completion`].
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// Completed or failed.
    pub status: CompletionStatus,
    /// The value at the result path (completed) or the error path
    /// (failed); `null` when absent.
    pub result: Value,
}

/// One entry of the debug ring buffer.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct DebugEvent {
    /// When it happened (UTC).
    pub at: chrono::DateTime<chrono::Utc>,
    /// `signal_received`, `signal_refused` (an untrusted signal of a
    /// reserved type), `directive_started`, `child_started`,
    /// `child_exit`, `child_adopted`, `parent_adopted`, `parent_dropped`
    /// (an adoption accepted after its parent gave up waiting, undone),
    /// `parent_down`, `orphaned`.
    pub kind: &'static str,
    /// Details (signal type and id, directive kind, tag, …).
    pub data: Value,
}

/// Agents are dispatch targets: wrap one in an
/// [`ActorTarget`](crate::server::ActorTarget). Asynchronous
/// delivery is a [`cast`](AgentRef::cast); synchronous delivery is a
/// [`call`](AgentRef::call) (delivered once the agent's `cmd` ran, and
/// failing with the call's error, e.g. a routing error).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// # use jido::prelude::*;
/// # struct A; impl Agent for A { const NAME: &'static str = "a"; type Schema = (); }
/// use jido::server::{Jido, JidoConfig, ServerOptions};
/// use jido::server::ActorTarget;
/// use jido::signal::dispatch::DispatchConfig;
///
/// let jido = Jido::start(JidoConfig::new()).await?;
/// let agent = jido.start_agent(AgentState::new(A, AgentOptions::new().id("sink")), ServerOptions::new()).await?;
/// let config = DispatchConfig::new(ActorTarget::new(agent.clone()))?;
/// config.dispatch(&jido::Signal::new("anything", serde_json::json!({}))).await?;
/// jido.shutdown().await;
/// # Ok(()) }
/// ```
impl super::SignalSink for AgentRef {
    fn send_signal(&self, signal: Signal) -> Result<()> {
        self.cast(signal).map_err(|e| {
            crate::signal::dispatch::target_not_alive(&format!("agent:{}", self.id)).with_source(e)
        })
    }

    fn call_signal(
        &self,
        signal: Signal,
        timeout: Duration,
    ) -> futures::future::BoxFuture<'_, Result<()>> {
        Box::pin(async move { self.call_timeout(signal, timeout).await.map(|_| ()) })
    }

    fn describe(&self) -> String {
        format!("agent:{}", self.id)
    }
}
