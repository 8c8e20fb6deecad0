//! Durable agents (feature `persist`): restore on start, checkpoints before
//! replies, the write-ahead journal.
//!
//! The actor calls into this module from a few points only (start, settle
//! of a `cmd`, acceptance of a signal, stop); an agent
//! without a storage has no [`Durable`] and pays one branch at those points.
//!
//! * **Checkpoint before reply.** At the end of a signal's `cmd` the reply of a
//!   call is held; a task writes the checkpoint (the state, the journal
//!   position) and answers them once it is durable. While it runs the
//!   write is the agent's work in flight: queries, stop and supervision
//!   events are served, further signals wait.
//! * **Write ahead (Journal).** An accepted signal is appended to the
//!   journal before it is queued; the appends of signals arriving together
//!   share one write. `cast_durable` is answered after the append.
//! * **Restore.** Before the agent starts: the checkpoint (migrated by
//!   [`Agent::migrate`](crate::agent::Agent::migrate) when its version
//!   differs), then the journal after it, replayed as casts. The first
//!   entry to replay counts an attempt; at [`MAX_REPLAYS`] it goes to the
//!   dead letters instead and the agent gets a
//!   [`DEAD_LETTER`](super::signal_types::DEAD_LETTER) signal.
//!
//! * **Outbox.** The directives a signal's `cmd` decided are stored, in their data
//!   form, with its checkpoint, and queued again on restore (at
//!   least once). An Emit keeps its signal's id: a journaling receiver
//!   drops a signal whose id it saw last ([`RECENT_IDS`]).
//! * **Timers.** Schedules and cron jobs are stored with wall-clock due
//!   times and re-armed on restore; a hibernated agent with timers is
//!   thawed by the instance when the next one is due.
//! * **Parent.** The parent link is stored by id; a restored child finds
//!   its parent again in the registry, or applies `on_parent_death`.
//!
//! Submodules: [`restore`] (on start), [`checkpoint`] (before replies, on
//! stop), [`journal`] (write ahead, `cast_durable`, duplicate ids),
//! [`outbox`] (directives as data), [`timers`] (schedules and crons),
//! [`parent`] (parent links by id), [`hibernate`] (idle agents),
//! [`writes`] (a restart waits for the writes still in flight).

mod checkpoint;
mod delta;
mod hibernate;
mod journal;
mod outbox;
mod parent;
mod rearm;
mod restore;
mod timers;
mod writes;

use std::collections::HashMap;
use std::sync::Arc;

use ractor::{ActorRef, RpcReplyPort};
use tokio::task::JoinHandle;

use super::actor::{AbortOnDrop, AgentServerState};
use super::exit::FENCED;
use super::inflight::Reply;
use super::msg::AgentMsg;
use crate::agent::AgentState;
use crate::error::{Error, ErrorKind, Result};
use crate::persist::{Storage, StorageKey};
use crate::signal::Signal;

pub use delta::MAX_CHECKPOINT_DELTAS;
pub use rearm::KindFactory;
pub(crate) use restore::load;
use timers::Scheduled;
pub(crate) use timers::wall_now_ms;
use writes::WriteLock;

/// How much of an agent's work survives a crash (see `docs/persistence.md`).
///
/// | mode | writes | a reply / acknowledgement means | lost on `kill -9` |
/// |---|---|---|---|
/// | `Volatile` | a checkpoint when the agent stops gracefully | nothing durable | everything since the last stop |
/// | `Checkpoint` | a checkpoint after each signal's `cmd` that changed the state, before its reply | `call`: its state change is durable | casts not processed yet, and the effects of processed casts whose checkpoint was not written |
/// | `Journal` | each accepted signal appended ahead; a checkpoint before the reply of a call, else every [`JOURNAL_CHECKPOINT_EVERY`] signals | `call`: as `Checkpoint`; [`cast_durable`](super::AgentRef::cast_durable): the signal is in the journal and will be processed (at least once) | nothing acknowledged; plain casts not yet appended |
///
/// ```
/// use jido::server::{Durability, ServerOptions};
///
/// assert_eq!(Durability::default(), Durability::Volatile);
/// let opts = ServerOptions::new().durability(Durability::Checkpoint);
/// # let _ = opts;
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// No write on the signal path (today's behaviour); with a storage,
    /// restored on start and checkpointed on a graceful stop.
    #[default]
    Volatile,
    /// A `call` is answered only after the checkpoint holding its state
    /// change and the directives it decided (the outbox) is durable.
    Checkpoint,
    /// `Checkpoint`, plus every accepted signal written to the journal
    /// before it is queued (and before [`cast_durable`](super::AgentRef::cast_durable)
    /// returns).
    Journal,
}

/// In [`Durability::Journal`], a checkpoint is written at least every this
/// many journaled signals (and before every call's reply): replay covers
/// the ones in between, so a long state is not rewritten per signal.
pub const JOURNAL_CHECKPOINT_EVERY: u64 = 64;

/// A journal entry whose replay was started this many times (it crashed
/// the agent: once live, then on each replay) goes to the dead letters.
pub const MAX_REPLAYS: u32 = 3;

/// A journaling agent remembers the ids of this many signals it accepted
/// last (stored with its checkpoint) and drops a cast or `cast_durable`
/// carrying one of them: an outbox run again after a crash re-sends its
/// Emits with their ids, and the receiver processes each once.
pub const RECENT_IDS: usize = 1024;

/// Who waits for a signal being appended to the journal.
pub(crate) enum Ack {
    /// A plain cast: nobody.
    None,
    /// A call: answered after the signal's `cmd` (and checkpoint).
    Call(Reply),
    /// A `cast_durable`: answered when the append is durable.
    Durable(RpcReplyPort<Result<()>>),
}

/// The runtime messages of a durable agent.
pub(crate) enum DurableMsg {
    /// `AgentRef::cast_durable`.
    Cast(Signal, RpcReplyPort<Result<()>>),
    /// The append of `signals` after `after` finished.
    Appended {
        after: u64,
        signals: Vec<Signal>,
        result: Result<u64>,
    },
    /// The checkpoint write of generation `generation` finished.
    Persisted(Box<Outcome>),
    /// The idle timer armed as generation `.0` fired.
    Idle(u64),
    /// The durable schedule numbered `.0` is due.
    Timer(u64),
}

/// The result of a checkpoint write.
pub(crate) struct Outcome {
    generation: u64,
    result: Result<u64>,
    /// The agent as written.
    agent: AgentState,
    /// The journal position written.
    applied: u64,
    /// A full checkpoint or a delta, and its bytes.
    written: delta::Written,
    /// The recent signal ids as written.
    recent: journal::RecentMark,
}

/// The persistence state of one durable agent.
pub(crate) struct Durable {
    storage: Arc<dyn Storage>,
    key: Arc<StorageKey>,
    /// Held by every write of this agent while it runs.
    lock: WriteLock,
    mode: Durability,
    epoch: u64,
    /// The stored checkpoint's revision (`None`: none stored).
    rev: Option<u64>,
    /// The journal's last sequence number.
    head: u64,
    /// The last journal entry folded into the agent in memory.
    applied: u64,
    /// The journal position of the last durable checkpoint.
    durable_applied: u64,
    /// Entries replayed on restore up to here: checkpointed one by one, so
    /// a crash points at the entry that caused it.
    replay_until: u64,
    /// Journal positions of signals queued but not processed yet, by id.
    seqs: HashMap<String, u64>,
    /// Answers waiting for the checkpoint of their signal.
    held: Vec<(Reply, Result<AgentState>)>,
    /// A `cmd` settled whose signal is not in the journal (a call in
    /// `Checkpoint` mode, instruction results, runtime signals).
    unjournaled: bool,
    /// The agent as last made durable.
    durable_agent: AgentState,
    /// Whether the next checkpoint may be a delta over the last one.
    deltas: delta::Deltas,
    /// Signals waiting for the next append.
    incoming: Vec<(Signal, Ack)>,
    /// Who waits for the append in flight (`None`: no append in flight).
    appending: Option<Vec<Ack>>,
    /// The checkpoint write of an agent that stopped while it ran.
    detached: Option<JoinHandle<Option<Outcome>>>,
    fenced: bool,
    /// Hibernate after this long without work.
    idle_timeout: Option<std::time::Duration>,
    /// The generation of the idle timer armed last.
    idle_gen: u64,
    idle_timer: Option<AbortOnDrop<std::result::Result<(), ractor::MessagingErr<AgentMsg>>>>,
    /// The checkpoint in flight is the last one before hibernating.
    hibernating: bool,
    /// The ids of the signals accepted last (journaling agents).
    recent: journal::RecentIds,
    /// The stored outbox or timers are not the live ones any more (the
    /// outbox ran, a timer was armed or fired): written when the agent
    /// is next idle (`Checkpoint` and `Journal`).
    stale: bool,
    /// Schedules armed, by number.
    schedules: std::collections::BTreeMap<u64, Scheduled>,
    next_schedule: u64,
    /// What the instance's timer table thaws a hibernated agent from.
    thaw: Option<Box<crate::server::options::AgentServerArgs>>,
    /// A stored parent that was gone at restore (`on_parent_death` is
    /// `stop`): kept in the checkpoint, so the link is not lost.
    lost_parent: Option<serde_json::Value>,
}

impl Durable {
    fn journals(&self) -> bool {
        self.mode == Durability::Journal
    }
}

fn is_fencing(error: &Error) -> bool {
    matches!(error.kind(), ErrorKind::Fenced | ErrorKind::Conflict)
}

impl AgentServerState {
    /// Handles a runtime message of a durable agent.
    pub(crate) fn on_durable(&mut self, myself: &ActorRef<AgentMsg>, msg: DurableMsg) {
        match msg {
            DurableMsg::Cast(signal, ack) => self.cast_durable(myself, signal, ack),
            DurableMsg::Appended {
                after,
                signals,
                result,
            } => self.on_appended(myself, after, signals, result),
            DurableMsg::Idle(generation) => self.on_idle(myself, generation),
            DurableMsg::Timer(n) => self.on_timer(myself, n),
            DurableMsg::Persisted(outcome) => {
                let current = self
                    .in_flight
                    .as_ref()
                    .is_some_and(|f| f.generation() == outcome.generation && f.is_persist());
                if current {
                    self.in_flight = None;
                    self.on_persisted(myself, *outcome);
                    self.check_waiters();
                    self.advance(myself);
                }
            }
        }
    }

    /// Answers a caller: at once, or (durable agent) after the checkpoint
    /// of its batch.
    pub(crate) fn answer(&mut self, reply: Reply, answer: Result<AgentState>) {
        match self.durable.as_deref_mut() {
            Some(d) if d.mode != Durability::Volatile => d.held.push((reply, answer)),
            _ => {
                let _ = reply.send(answer);
            }
        }
    }

    /// A signal's `cmd` was settled (or the signal was consumed without
    /// one): its journal position is folded in.
    pub(crate) fn consumed(&mut self, signal: &Signal) {
        if let Some(d) = self.durable.as_deref_mut() {
            match d.seqs.remove(signal.id()) {
                Some(seq) => d.applied = d.applied.max(seq),
                None => d.unjournaled = true,
            }
        }
    }

    /// Stops a fenced agent (a newer owner exists).
    pub(super) fn fence(&mut self, myself: &ActorRef<AgentMsg>, error: &Error) {
        if let Some(d) = self.durable.as_deref_mut() {
            d.fenced = true;
            tracing::warn!(
                name: "jido.persist.fenced",
                target: "jido::persist",
                key = %d.key,
                agent_id = %self.id,
                error = %error.message(),
                "jido.persist.fenced"
            );
        }
        if let Some(jido) = &self.jido {
            jido.forget_restart(myself.get_id());
        }
        self.stop_self(myself, FENCED.to_owned());
    }
}
