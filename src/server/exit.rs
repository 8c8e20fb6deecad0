//! Why agents end, and the instance's stream of agent lifecycle events.
//!
//! The instance supervisor sees every exit of the agents linked under it
//! (ractor's `ActorTerminated` / `ActorFailed`). It turns each into an
//! [`ExitReason`], answers [`AgentRef::wait_exit`](super::AgentRef::wait_exit)
//! and publishes an [`AgentEvent`] to every [`AgentEvents`] receiver, so
//! a service learns why its agents end without writing a supervisor.

use std::collections::VecDeque;

/// The bookkeeping maps of agents (by actor and by id), touched several
/// times by every start and stop: hashed with foldhash (seeded per
/// process, as the state maps), not SipHash.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
use std::fmt;
use std::sync::Arc;

use ractor::ActorId;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::error::{Error, Result};

/// Why an agent ended.
///
/// `Display` gives the reason string the runtime uses everywhere else
/// (`jido.agent.child.exit`'s `reason`, logs): `"normal"`, `"shutdown"`,
/// `"killed"`, the stop reason, or `"failed: MESSAGE"`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExitReason {
    /// Stopped without a reason, with `"normal"`, or drained.
    Normal,
    /// Stopped with `"shutdown"` ([`Jido::stop_agent`](super::Jido::stop_agent),
    /// [`Jido::shutdown`](super::Jido::shutdown)).
    Shutdown,
    /// Killed (ractor's `kill`, or a stop that did not finish in time).
    Killed,
    /// Stopped with reason `"fenced"`: a durable agent found that a newer
    /// owner of its storage key exists (another node claimed it, or
    /// another incarnation wrote its checkpoint). Never restarted, like
    /// `Shutdown`: the newer owner holds the agent now.
    Fenced,
    /// Stopped with reason `"hibernate"`: an idle durable agent wrote its
    /// checkpoint and left (see `ServerOptions::idle_timeout`); never
    /// restarted. [`Jido::get_or_start`](super::Jido::get_or_start) thaws it.
    Hibernated,
    /// Stopped with another reason: a Stop directive or signal with a
    /// reason, the error policy (`"agent_error: …"`), a parent's death
    /// (`"shutdown: parent_down: …"`).
    Stopped(String),
    /// The actor failed: a panic or an error in one of its handlers.
    Failed(String),
    /// The agent runs without an instance, so only the supervisor it was
    /// spawned under learned why it ended (or the instance was shut down
    /// before the exit was recorded).
    Unknown,
}

/// The stop reason of a fenced agent (see [`ExitReason::Fenced`]).
pub(crate) const FENCED: &str = "fenced";
/// The stop reason of a hibernated agent (see [`ExitReason::Hibernated`]).
pub(crate) const HIBERNATE: &str = "hibernate";

impl ExitReason {
    /// From a ractor exit: the stop reason of `ActorTerminated`, or the
    /// error of `ActorFailed`.
    pub(crate) fn from_ractor(stopped: std::result::Result<Option<String>, String>) -> Self {
        match stopped {
            Err(failure) => ExitReason::Failed(failure),
            // The stop reason is moved, never copied: no allocation for
            // the usual reasons.
            Ok(None) => ExitReason::Normal,
            Ok(Some(reason)) => match reason.as_str() {
                "normal" | super::instance::DRAINED => ExitReason::Normal,
                "shutdown" => ExitReason::Shutdown,
                "killed" => ExitReason::Killed,
                FENCED => ExitReason::Fenced,
                HIBERNATE => ExitReason::Hibernated,
                _ => ExitReason::Stopped(reason),
            },
        }
    }

    /// Whether the agent ended on purpose and in order (`Normal`,
    /// `Shutdown`).
    pub fn is_clean(&self) -> bool {
        matches!(self, ExitReason::Normal | ExitReason::Shutdown)
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitReason::Normal => f.write_str("normal"),
            ExitReason::Shutdown => f.write_str("shutdown"),
            ExitReason::Killed => f.write_str("killed"),
            ExitReason::Fenced => f.write_str(FENCED),
            ExitReason::Hibernated => f.write_str(HIBERNATE),
            ExitReason::Stopped(reason) => f.write_str(reason),
            ExitReason::Failed(message) => write!(f, "failed: {message}"),
            ExitReason::Unknown => f.write_str("unknown"),
        }
    }
}

/// Something that happened to an agent of an instance (see
/// [`Jido::events`](super::Jido::events)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentEvent {
    /// An agent started and registered (also each restart, and children
    /// started by SpawnAgent).
    Started {
        /// The agent's id.
        id: String,
        /// Its actor.
        actor: ActorId,
        /// Its parent's id, for a child.
        parent: Option<String>,
    },
    /// An agent ended.
    Exited {
        /// The agent's id.
        id: String,
        /// Its actor.
        actor: ActorId,
        /// Why.
        reason: ExitReason,
        /// Whether the instance restarts it (a `Started` follows).
        restarting: bool,
    },
    /// An agent kept failing and hit the restart limit: it stays down.
    GivenUp {
        /// The agent's id.
        id: String,
        /// Restarts within the window.
        restarts: usize,
    },
}

/// A receiver of an instance's [`AgentEvent`]s, from
/// [`Jido::events`](super::Jido::events). It sees the events published
/// after it was created, in order. A receiver that falls more than
/// [`EVENTS_CAPACITY`] events behind is told so (never silently).
#[derive(Debug)]
pub struct AgentEvents {
    rx: broadcast::Receiver<AgentEvent>,
}

/// How many events a slow [`AgentEvents`] receiver may fall behind before
/// it misses some.
pub const EVENTS_CAPACITY: usize = 1024;

/// How many exits an instance remembers for
/// [`AgentRef::wait_exit`](super::AgentRef::wait_exit) on an agent that
/// already ended.
pub(crate) const RECENT_EXITS: usize = 1024;

impl AgentEvents {
    /// The next event.
    ///
    /// # Errors
    ///
    /// * [`QueueOverflow`](crate::ErrorKind::QueueOverflow) "agent events
    ///   lagged" with the detail `missed` when this receiver fell too far
    ///   behind; the next call returns the oldest event still kept;
    /// * [`Cancelled`](crate::ErrorKind::Cancelled) "jido instance is
    ///   shut down" once the instance is gone and every event was read.
    pub async fn recv(&mut self) -> Result<AgentEvent> {
        match self.rx.recv().await {
            Ok(event) => Ok(event),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                Err(Error::queue_overflow("agent events lagged").with_detail("missed", missed))
            }
            Err(broadcast::error::RecvError::Closed) => {
                Err(Error::cancelled("jido instance is shut down"))
            }
        }
    }

    /// The next event if one is waiting, without blocking (`Ok(None)`
    /// otherwise).
    ///
    /// # Errors
    ///
    /// As [`recv`](AgentEvents::recv).
    pub fn try_recv(&mut self) -> Result<Option<AgentEvent>> {
        match self.rx.try_recv() {
            Ok(event) => Ok(Some(event)),
            Err(broadcast::error::TryRecvError::Empty) => Ok(None),
            Err(broadcast::error::TryRecvError::Lagged(missed)) => {
                Err(Error::queue_overflow("agent events lagged").with_detail("missed", missed))
            }
            Err(broadcast::error::TryRecvError::Closed) => {
                Err(Error::cancelled("jido instance is shut down"))
            }
        }
    }
}

/// The instance's record of exits: who waits for which actor, and the
/// last [`RECENT_EXITS`] exits for late askers. Bounded: a million agents
/// ending keep at most that many entries.
pub(crate) struct ExitBook {
    /// `None` once the instance is shut down (receivers then end).
    events: Option<broadcast::Sender<AgentEvent>>,
    /// The id of every live agent, by actor (the registry entry may be
    /// gone before the supervisor hears of the exit).
    ids: HashMap<ActorId, Arc<str>>,
    waiters: HashMap<ActorId, Vec<oneshot::Sender<ExitReason>>>,
    recent: HashMap<ActorId, ExitReason>,
    order: VecDeque<ActorId>,
    /// Lossless subscribers of final exits (see [`ExitBook::final_exits`]).
    final_exits: Vec<mpsc::UnboundedSender<FinalExit>>,
}

/// An agent that ended for good (no restart follows): its id and reason.
/// What [`ExitBook::final_exits`] delivers.
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub(crate) struct FinalExit {
    pub(crate) id: Arc<str>,
    pub(crate) reason: ExitReason,
}

impl Default for ExitBook {
    fn default() -> Self {
        ExitBook {
            events: Some(broadcast::channel(EVENTS_CAPACITY).0),
            ids: HashMap::default(),
            waiters: HashMap::default(),
            recent: HashMap::default(),
            order: VecDeque::new(),
            final_exits: Vec::new(),
        }
    }
}

impl ExitBook {
    /// A new receiver of events.
    pub(crate) fn subscribe(&self) -> AgentEvents {
        let rx = match &self.events {
            Some(tx) => tx.subscribe(),
            // Shut down: a receiver that ends at once.
            None => broadcast::channel(1).1,
        };
        AgentEvents { rx }
    }

    /// Publishes an event (nobody listening is fine).
    pub(crate) fn publish(&self, event: impl FnOnce() -> AgentEvent) {
        // Built only for someone to receive it: a broadcast without
        // receivers drops it, and receivers subscribe under the same lock.
        if let Some(tx) = self.events.as_ref().filter(|tx| tx.receiver_count() > 0) {
            let _ = tx.send(event());
        }
    }

    /// A lossless stream of the agents that end for good, for the
    /// crate's own bookkeeping (the cluster's watches): unlike
    /// [`AgentEvents`], a slow reader misses nothing. Each item is small
    /// and the reader must keep up on average; it ends with the instance.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn final_exits(&mut self) -> mpsc::UnboundedReceiver<FinalExit> {
        let (tx, rx) = mpsc::unbounded_channel();
        if self.events.is_some() {
            self.final_exits.push(tx);
        }
        rx
    }

    /// Tells the [`final_exits`](ExitBook::final_exits) readers that agent
    /// `id` ended for good.
    pub(crate) fn notify_final(&mut self, id: &Arc<str>, reason: &ExitReason) {
        self.final_exits.retain(|tx| {
            tx.send(FinalExit {
                id: Arc::clone(id),
                reason: reason.clone(),
            })
            .is_ok()
        });
    }

    /// The instance is shut down: receivers end once they read what was
    /// published, waiters learn nothing more.
    pub(crate) fn close(&mut self) {
        self.events = None;
        self.final_exits.clear();
        self.waiters.clear();
        self.ids.clear();
    }

    /// `actor`, linked under the instance supervisor, started as agent
    /// `id`.
    pub(crate) fn started(&mut self, actor: ActorId, id: &Arc<str>, parent: Option<&str>) {
        self.ids.insert(actor, Arc::clone(id));
        self.publish(|| AgentEvent::Started {
            id: id.to_string(),
            actor,
            parent: parent.map(str::to_owned),
        });
    }

    /// Records `actor`'s exit: answers its waiters and remembers it; the
    /// agent's id, when it was one of the instance's.
    pub(crate) fn record(&mut self, actor: ActorId, reason: &ExitReason) -> Option<Arc<str>> {
        for waiter in self.waiters.remove(&actor).unwrap_or_default() {
            let _ = waiter.send(reason.clone());
        }
        if self.recent.insert(actor, reason.clone()).is_none() {
            self.order.push_back(actor);
        }
        while self.order.len() > RECENT_EXITS {
            if let Some(old) = self.order.pop_front() {
                self.recent.remove(&old);
            }
        }
        self.ids.remove(&actor)
    }

    /// The exit of `actor` if it was recorded, a receiver answered when it
    /// is, or `None` when the instance supervisor does not watch it.
    pub(crate) fn wait(&mut self, actor: ActorId) -> Option<Recorded> {
        if let Some(reason) = self.recent.get(&actor) {
            return Some(Recorded::Done(reason.clone()));
        }
        if !self.ids.contains_key(&actor) {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        let waiters = self.waiters.entry(actor).or_default();
        waiters.retain(|w| !w.is_closed());
        waiters.push(tx);
        Some(Recorded::Pending(rx))
    }
}

/// An exit, recorded or to come.
pub(crate) enum Recorded {
    Done(ExitReason),
    Pending(oneshot::Receiver<ExitReason>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_like_the_runtime_writes_them() {
        let from = |r: Option<&str>| ExitReason::from_ractor(Ok(r.map(str::to_owned)));
        assert_eq!(from(None), ExitReason::Normal);
        assert_eq!(from(Some("normal")), ExitReason::Normal);
        assert_eq!(from(Some("Drained")), ExitReason::Normal);
        assert_eq!(from(Some("shutdown")), ExitReason::Shutdown);
        assert_eq!(from(Some("killed")), ExitReason::Killed);
        let parent = from(Some("shutdown: parent_down: killed"));
        assert_eq!(parent.to_string(), "shutdown: parent_down: killed");
        assert!(!parent.is_clean());
        let failed = ExitReason::from_ractor(Err("boom".into()));
        assert_eq!(failed.to_string(), "failed: boom");
    }

    #[test]
    fn final_exits_are_not_lost_when_event_receivers_lag() {
        let mut book = ExitBook::default();
        let mut lagging = book.subscribe();
        let mut notices = book.final_exits();
        let n = EVENTS_CAPACITY * 3;
        for i in 0..n {
            let actor = ActorId::Local(i as u64);
            book.started(actor, &Arc::from(format!("a{i}")), None);
            let reason = ExitReason::Stopped(format!("r{i}"));
            let id = book.record(actor, &reason).expect("an agent of the book");
            book.notify_final(&id, &reason);
            book.publish(|| AgentEvent::Exited {
                id: id.to_string(),
                actor,
                reason,
                restarting: false,
            });
        }
        let err = lagging.try_recv().unwrap_err();
        assert_eq!(err.message(), "agent events lagged");
        for i in 0..n {
            let exit = notices.try_recv().expect("every exit, in order");
            assert_eq!(
                (&*exit.id, exit.reason),
                (
                    format!("a{i}").as_str(),
                    ExitReason::Stopped(format!("r{i}"))
                )
            );
        }
        assert!(notices.try_recv().is_err());
        book.close();
        assert!(
            book.final_exits().try_recv().is_err(),
            "closed: ends at once"
        );
    }
}
