//! Work running off the AgentServer's handler, and how its results come
//! back.
//!
//! A batch of `cmd`s runs in a task of the instance's task supervisor. Each
//! `cmd` that finishes is put in the batch's [`Inbox`] at once, and the actor
//! is woken by a `Progress` message (one per burst, not one per item), so a
//! caller is answered when its own `cmd` has finished, never when the batch
//! ends. The inbox outlives the actor's mailbox: when the agent stops (or is
//! killed) the runtime takes what finished from it and settles it, and a
//! `cmd` that finishes after the inbox was closed answers its own caller.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::task::ArcWake;
use ractor::{ActorRef, RpcReplyPort};
use tokio::sync::Notify;

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
    pub(crate) signal: Signal,
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

impl DoneItem {
    /// Answers the caller with this item's own result when the agent is gone
    /// and cannot settle it any more (its directives are not executed).
    fn answer_unsettled(self, fail_calls: bool) {
        if let Some(reply) = self.reply {
            let answer = match self.result {
                Ok(directives) => match fail_calls
                    .then(|| call_failure(&directives, self.agent.id()))
                    .flatten()
                {
                    Some(error) => Err(error),
                    None => Ok(self.agent),
                },
                Err(error) => Err(error),
            };
            let _ = reply.send(answer);
        }
    }
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

/// Where a running batch leaves its results.
pub(crate) struct Inbox {
    state: Mutex<InboxState>,
    /// Woken on every push, for a stopping agent that waits without a
    /// mailbox.
    changed: Notify,
    /// The agent's `fail_calls_on_action_error`, for the callers answered
    /// after the agent is gone.
    fail_calls: bool,
}

#[derive(Default)]
struct InboxState {
    items: VecDeque<DoneItem>,
    /// Set when the batch ended: the signals it did not run.
    ended: Option<Vec<Work>>,
    /// A `Progress` message is on its way (cleared when the actor takes).
    woken: bool,
    /// The agent is gone: finishers answer their own callers.
    closed: bool,
}

/// What the actor takes from an inbox.
pub(crate) struct Taken {
    pub(crate) items: VecDeque<DoneItem>,
    /// `Some` once the batch ended, with the signals it did not run.
    pub(crate) ended: Option<Vec<Work>>,
}

impl Inbox {
    pub(crate) fn new(fail_calls: bool) -> Self {
        Inbox {
            state: Mutex::default(),
            changed: Notify::new(),
            fail_calls,
        }
    }

    fn lock(&self) -> MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes everything that arrived.
    pub(crate) fn take(&self) -> Taken {
        let mut st = self.lock();
        st.woken = false;
        Taken {
            items: std::mem::take(&mut st.items),
            ended: st.ended.take(),
        }
    }

    /// Closes the inbox and takes what finished: from now on a finishing
    /// `cmd` answers its own caller.
    pub(crate) fn close(&self) -> VecDeque<DoneItem> {
        let mut st = self.lock();
        st.closed = true;
        st.ended = None;
        std::mem::take(&mut st.items)
    }

    /// Waits until something can be taken.
    pub(crate) async fn ready(&self) {
        loop {
            let changed = self.changed.notified();
            {
                let st = self.lock();
                if !st.items.is_empty() || st.ended.is_some() {
                    return;
                }
            }
            changed.await;
        }
    }

    /// Pushes a finished item; `true` when the actor must be woken.
    fn push(&self, item: DoneItem) -> bool {
        let mut st = self.lock();
        if st.closed {
            drop(st);
            item.answer_unsettled(self.fail_calls);
            return false;
        }
        st.items.push_back(item);
        self.changed.notify_one();
        !std::mem::replace(&mut st.woken, true)
    }

    /// Marks the batch ended; `true` when the actor must be woken.
    fn end(&self, leftover: Vec<Work>) -> bool {
        let mut st = self.lock();
        if st.closed {
            return false;
        }
        st.ended = Some(leftover);
        self.changed.notify_one();
        !std::mem::replace(&mut st.woken, true)
    }
}

/// The task's side of an inbox: pushes results and wakes the actor.
pub(crate) struct Sink {
    inbox: Arc<Inbox>,
    actor: ActorRef<AgentMsg>,
    generation: u64,
    ended: bool,
}

impl Sink {
    pub(crate) fn new(inbox: Arc<Inbox>, actor: ActorRef<AgentMsg>, generation: u64) -> Self {
        Self {
            inbox,
            actor,
            generation,
            ended: false,
        }
    }

    fn wake(&self) {
        // A stopping agent has no mailbox: it waits on the inbox itself.
        let _ = self
            .actor
            .send_message(AgentMsg::internal(Internal::Progress(self.generation)));
    }

    /// Hands one finished `cmd` to the agent.
    pub(crate) fn item(&self, item: DoneItem) {
        if self.inbox.push(item) {
            self.wake();
        }
    }

    /// Ends the batch, giving back the signals it did not run.
    pub(crate) fn end(mut self, leftover: Vec<Work>) {
        self.ended = true;
        if self.inbox.end(leftover) {
            self.wake();
        }
    }
}

impl Drop for Sink {
    /// A batch that ends without [`Sink::end`] (its task panicked or was
    /// cancelled) still ends, so the agent never waits for it forever.
    fn drop(&mut self) {
        if !self.ended && self.inbox.end(Vec::new()) {
            self.wake();
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
