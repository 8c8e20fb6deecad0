//! The work in flight of an AgentServer, and how it makes progress.
//!
//! A signal's `cmd` (whatever the strategy) and a RunInstruction's run are
//! futures the actor drives itself ([`LocalCmd`]): polled in the handler
//! that starts them, settled there when they finish at once, and woken by
//! one `Poll` message ([`ActorWaker`]) when what they await (an action's
//! task) is done, so the mailbox is never held while they wait.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use futures::task::ArcWake;
use ractor::{ActorRef, RpcReplyPort};

use super::msg::{AgentMsg, Internal};
use crate::agent::AgentState;
use crate::directive::Directive;
use crate::error::{Error, Result};
use crate::signal::Signal;

/// Where a `call`'s answer goes: the caller's port, or (a call from
/// another node) a function the agent runs with its answer, in its own
/// turn, which writes the reply's bytes without a task waiting for it.
pub(crate) enum Reply {
    Port(RpcReplyPort<Result<AgentState>>),
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    Then(Box<dyn FnOnce(Result<AgentState>) + Send>),
}

impl Reply {
    /// Answers the caller (nothing happens when it gave up).
    pub(crate) fn send(self, answer: Result<AgentState>) -> std::result::Result<(), ()> {
        match self {
            Reply::Port(port) => port.send(answer).map_err(|_| ()),
            Reply::Then(then) => {
                then(answer);
                Ok(())
            }
        }
    }
}

impl From<RpcReplyPort<Result<AgentState>>> for Reply {
    fn from(port: RpcReplyPort<Result<AgentState>>) -> Self {
        Reply::Port(port)
    }
}

/// One signal waiting for its turn.
pub(crate) struct Work {
    pub(crate) signal: Arc<Signal>,
    pub(crate) reply: Option<Reply>,
}

/// One signal (or instruction result) whose `cmd` ran.
pub(crate) struct DoneItem {
    pub(crate) signal: Arc<Signal>,
    pub(crate) reply: Option<Reply>,
    /// The agent right after this item.
    pub(crate) agent: AgentState,
    pub(crate) result: std::result::Result<Vec<Directive>, Error>,
    pub(crate) duration_us: u64,
}

/// One signal's `cmd` driven by the actor itself, without a task of its
/// own: the handler polls it when it starts and again each time it is
/// woken (see [`ActorWaker`]), and settles it as soon as it is ready.
/// Dropping it (the agent stopped) drops its caller's reply port: the
/// caller gets `Cancelled`.
pub(crate) struct LocalCmd {
    pub(crate) fut: Pin<Box<dyn Future<Output = DoneItem> + Send>>,
    /// Left pending by the last poll of the handler running now (see
    /// `AgentServerState::hold_local`).
    pub(crate) waiting: bool,
    /// The signal's span, entered around each poll (an `Instrumented`
    /// wrapper would move the future once more before it is boxed);
    /// `None` while the span is disabled, boxed otherwise: this sits in
    /// every agent's state.
    pub(crate) span: Option<Box<tracing::Span>>,
}

/// The waker of an actor's [`LocalCmd`]: a wake is a `Poll` message to the
/// actor, one per burst of wakes (cleared when the actor polls), except
/// while the handler that left the `cmd` waiting holds it (see
/// [`ActorWaker::hold`]): a wake then only marks it, and that handler
/// polls it before it returns.
pub(crate) struct ActorWaker {
    actor: ActorRef<AgentMsg>,
    /// [`WOKEN`] and [`HELD`].
    state: AtomicU8,
}

/// Woken since the last poll: a `Poll` message was sent, or the holding
/// handler will poll.
const WOKEN: u8 = 1;
/// A handler of the actor will poll once more before it returns: a wake
/// sends no message.
const HELD: u8 = 2;

impl ActorWaker {
    pub(crate) fn new(actor: ActorRef<AgentMsg>) -> Self {
        Self {
            actor,
            state: AtomicU8::new(0),
        }
    }

    /// Called right before the actor polls: wakes from now on send a new
    /// message.
    pub(crate) fn polling(&self) {
        self.state.store(0, Ordering::Release);
    }

    /// The handler that polled keeps the `cmd` for one more scheduler
    /// turn: wakes until [`ActorWaker::release`] send no message.
    pub(crate) fn hold(&self) {
        self.state.fetch_or(HELD, Ordering::AcqRel);
    }

    /// Ends [`ActorWaker::hold`]; `true` when the `cmd` was woken while
    /// held (or before), so the handler polls it now. A wake after this
    /// sends a message again (unless one is due to this poll anyway).
    pub(crate) fn release(&self) -> bool {
        self.state.fetch_and(!HELD, Ordering::AcqRel) & WOKEN != 0
    }
}

impl ArcWake for ActorWaker {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        if arc_self.state.fetch_or(WOKEN, Ordering::AcqRel) == 0 {
            // A stopped actor has nothing left to poll.
            let _ = arc_self
                .actor
                .send_message(AgentMsg::internal(Internal::Poll));
        }
    }
}

/// What a `call` answers when its `cmd` succeeded but reported a failure
/// as an Error directive (an action failed after its retries, the input
/// could not be normalised, the strategy refused the command): the first
/// such error, the failed action's own error
/// rather than the "instruction failed" wrapper the error policy gets,
/// with the agent's id. The directives, the Error one included, still
/// run as in Jido.
pub(crate) fn call_failure(directives: &[Directive], agent_id: &str) -> Option<Error> {
    directives.iter().find_map(|d| match d {
        Directive::Error { error, context } => {
            use crate::directive::error_context as ctx;
            let error = match context.as_str() {
                ctx::INSTRUCTION => std::error::Error::source(error)
                    .and_then(|cause| cause.downcast_ref::<Error>())
                    .unwrap_or(error),
                ctx::NORMALIZE
                | ctx::INSTRUCTION_RESULT
                | ctx::FSM_TRANSITION
                | ctx::STRATEGY_COMMAND
                | ctx::ON_BEFORE_CMD => error,
                // An Error directive an action pushed as an effect is its
                // own report to the error policy, not a failed call.
                _ => return None,
            };
            Some(
                error
                    .clone()
                    .with_detail("agent_id", agent_id.to_owned())
                    .with_detail("error_context", context.clone()),
            )
        }
        _ => None,
    })
}
