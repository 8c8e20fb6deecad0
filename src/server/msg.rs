//! The one message type of every AgentServer.

use std::fmt;
use std::sync::Arc;

use ractor::RpcReplyPort;

use super::agent_ref::{AgentStatus, AwaitOptions, Completion, DebugEvent};
use super::options::ParentRef;
use crate::agent::AgentState;
use crate::error::Result;
use crate::signal::Signal;

/// The message type of every AgentServer, so every agent is an
/// `ActorRef<AgentMsg>` whatever its agent type.
///
/// Only [`AgentMsg::Signal`] is meant to be built by hand (or through
/// `From<Signal>`). The others are local requests made by
/// [`AgentRef`](super::AgentRef) and by the runtime itself.
///
/// `AgentMsg` never crosses nodes: with feature `cluster` a per-node
/// gateway carries signals as CloudEvents JSON bytes (see `jido::cluster`),
/// and `AgentMsg` implements `ractor::Message` explicitly as a local-only
/// message, so agents are never advertised to peers.
///
/// A signal travels behind an `Arc`: the message stays a few words long
/// (ractor moves it several times on every send), and the agent shares the
/// signal from there on without copying it again.
///
/// ```
/// use jido::server::AgentMsg;
/// use jido::signal::Signal;
///
/// let msg = AgentMsg::from(Signal::new("order.placed", serde_json::json!({"id": 1})));
/// assert!(matches!(msg, AgentMsg::Signal(ref s) if s.ty() == "order.placed"));
/// assert!(std::mem::size_of::<AgentMsg>() <= 64);
/// ```
#[non_exhaustive]
pub enum AgentMsg {
    /// Process a signal; nobody waits for the result (a cast).
    Signal(Arc<Signal>),
    /// Process a signal and answer the caller (see
    /// [`AgentRef::call`](super::AgentRef::call)).
    Call(CallRequest),
    /// A local request of the runtime (queries, completion of work,
    /// hierarchy bookkeeping). Opaque.
    Runtime(RuntimeMsg),
}

#[cfg(feature = "cluster")]
impl ractor::Message for AgentMsg {}

impl From<Signal> for AgentMsg {
    fn from(signal: Signal) -> Self {
        AgentMsg::Signal(Arc::new(signal))
    }
}

impl From<Arc<Signal>> for AgentMsg {
    fn from(signal: Arc<Signal>) -> Self {
        AgentMsg::Signal(signal)
    }
}

impl AgentMsg {
    /// A call request: process `signal` and answer on `reply` with what
    /// [`AgentRef::call`](super::AgentRef::call) returns. Its shape fits
    /// ractor's own `call!` / `call_t!` macros, so a raw
    /// `ActorRef<AgentMsg>` (one you spawned and supervise yourself) can be
    /// called without wrapping it in an `AgentRef`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
    /// use jido::prelude::*;
    /// use jido::agent::SignalRoute;
    /// use jido::server::{AgentMsg, AgentServer, AgentServerArgs, ServerOptions};
    /// use jido::signal::Signal;
    ///
    /// struct Quiet;
    /// impl Agent for Quiet {
    ///     const NAME: &'static str = "quiet";
    ///     type Schema = ();
    /// }
    ///
    /// let args = AgentServerArgs::new(AgentState::new(Quiet, AgentOptions::new().id("q")), ServerOptions::new());
    /// let (actor, _) = ractor::Actor::spawn(None, AgentServer, args).await.expect("spawn");
    /// // No route for it: the agent answers with a routing error, through ractor's macro.
    /// let answer = ractor::call!(actor, AgentMsg::call, Signal::new("ping", serde_json::json!({})))
    ///     .expect("the agent answered");
    /// assert_eq!(answer.unwrap_err().kind(), ErrorKind::Routing);
    /// actor.stop(None);
    /// # Ok(()) }
    /// ```
    pub fn call(signal: Signal, reply: RpcReplyPort<Result<AgentState>>) -> Self {
        AgentMsg::Call(CallRequest {
            signal: Arc::new(signal),
            reply: reply.into(),
        })
    }
}

impl fmt::Debug for AgentMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentMsg::Signal(s) => f.debug_tuple("Signal").field(&s.ty()).finish(),
            AgentMsg::Call(c) => f.debug_tuple("Call").field(&c.signal.ty()).finish(),
            AgentMsg::Runtime(r) => f.debug_tuple("Runtime").field(&r.0.name()).finish(),
        }
    }
}

/// A signal with the port its answer goes to.
pub struct CallRequest {
    pub(crate) signal: Arc<Signal>,
    pub(crate) reply: super::inflight::Reply,
}

impl CallRequest {
    /// The signal.
    pub fn signal(&self) -> &Signal {
        &self.signal
    }
}

/// An opaque runtime message.
pub struct RuntimeMsg(pub(crate) Internal);

impl AgentMsg {
    pub(crate) fn internal(msg: Internal) -> Self {
        AgentMsg::Runtime(RuntimeMsg(msg))
    }
}

/// A child announcing itself to its parent.
pub(crate) struct ChildStarted {
    pub(crate) tag: String,
    pub(crate) child_id: String,
    pub(crate) child_type: &'static str,
    pub(crate) actor: ractor::ActorRef<AgentMsg>,
    pub(crate) meta: serde_json::Map<String, serde_json::Value>,
    /// The ids above its parent, as the child knows them (the parent
    /// corrects a stale chain).
    pub(crate) ancestors: Vec<String>,
}

/// Parent/child bookkeeping between agents (and from the instance
/// supervisor): adoption, spawning, lineage. See `hierarchy.rs`.
pub(crate) enum HierarchyMsg {
    /// To a child: take this parent (request id for the answer).
    AdoptRequest(Box<ParentRef>, u64),
    /// To a parent: the child's answer to an adopt request.
    AdoptAnswer {
        tag: String,
        request: u64,
        child_id: String,
        actor: ractor::ActorRef<AgentMsg>,
        result: std::result::Result<(), String>,
    },
    /// To self: an adopt request got no answer in time.
    AdoptTimeout { tag: String, request: u64 },
    /// To a child: drop this parent (bound under this tag) if it is still
    /// the parent.
    DropParent {
        parent: ractor::ActorId,
        tag: String,
    },
    /// To self, from the task that started a SpawnAgent child.
    SpawnResult {
        tag: String,
        child_id: String,
        result: Result<ractor::ActorRef<AgentMsg>>,
    },
    /// To a child: the ids above its parent changed.
    Lineage {
        parent: ractor::ActorId,
        ancestors: Vec<String>,
    },
    /// To a parent, from the instance supervisor: this incarnation of a
    /// child was given up (processed after its exit).
    GivenUp {
        actor: ractor::ActorId,
        signal: Signal,
    },
}

pub(crate) enum Internal {
    State(RpcReplyPort<AgentState>),
    Status(RpcReplyPort<AgentStatus>),
    /// Boxed: the largest request, and a rare one (every message is as
    /// large as the largest).
    Await(Box<AwaitOptions>, RpcReplyPort<Result<Completion>>),
    /// The completion waiters' timer (its generation) fired.
    AwaitTimeout(u64),
    RecentEvents(Option<usize>, RpcReplyPort<Result<Vec<DebugEvent>>>),
    SetDebug(bool, RpcReplyPort<()>),
    /// The `cmd` the actor drives itself was woken (or more waiting
    /// signals may start).
    Poll,
    Drain,
    ChildStarted(Box<ChildStarted>),
    CronTick(String, u64),
    /// A graceful stop asked through `AgentRef::stop` / `Jido::stop_agent`.
    Stop(String),
    /// A monitored actor (parent or child) ended: a supervision event
    /// re-posted as a message, so it is handled after every message that
    /// actor sent before it ended.
    Down {
        actor: ractor::ActorId,
        reason: String,
    },
    Hierarchy(Box<HierarchyMsg>),
    /// A remote child's parent (on another node) ended or its node was
    /// lost: `{parent_id, tag, node, reason}` (see `jido::cluster`).
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    RemoteParentDown(Box<serde_json::Value>),
    /// Persistence of a durable agent (see `durable.rs`).
    #[cfg_attr(not(feature = "persist"), allow(dead_code))]
    Durable(Box<super::durable::DurableMsg>),
}

impl Internal {
    fn name(&self) -> &'static str {
        match self {
            Internal::State(_) => "state",
            Internal::Status(_) => "status",
            Internal::Await(..) => "await",
            Internal::AwaitTimeout(_) => "await_timeout",
            Internal::RecentEvents(..) => "recent_events",
            Internal::SetDebug(..) => "set_debug",
            Internal::Poll => "poll",
            Internal::Drain => "drain",
            Internal::ChildStarted(_) => "child_started",
            Internal::CronTick(..) => "cron_tick",
            Internal::Stop(_) => "stop",
            Internal::Down { .. } => "down",
            Internal::Hierarchy(_) => "hierarchy",
            Internal::RemoteParentDown(_) => "remote_parent_down",
            Internal::Durable(_) => "durable",
        }
    }
}
