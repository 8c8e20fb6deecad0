//! Durable agents (feature `persist`): restore on start, checkpoints before
//! replies, the write-ahead journal.
//!
//! The actor calls into this module from a few points only (start, settle
//! of a `cmd`, end of a batch, acceptance of a signal, stop); an agent
//! without a storage has no [`Durable`] and pays one branch at those points.
//!
//! * **Checkpoint before reply.** At the end of a batch the replies of its
//!   calls are held; a task writes the checkpoint (the state, the journal
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

use std::collections::HashMap;
use std::sync::Arc;

use ractor::{ActorRef, RpcReplyPort};
use serde_json::{Map, Value, json};
use tokio::task::JoinHandle;

use super::actor::{AbortOnDrop, AgentServerState, InFlight, Running};
use super::exit::{FENCED, HIBERNATE};
use super::inflight::{Reply, Work};
use super::msg::{AgentMsg, Internal};
use super::options::AgentServerArgs;
use crate::agent::{AgentState, ORPHANED_FROM_KEY, PARENT_KEY};
use crate::directive::Directive;
use crate::error::{Error, ErrorKind, Result};
use crate::persist::{Checkpoint, Expect, JournalEntry, Storage, StorageKey};
use crate::signal::Signal;
use crate::state::StateMap;

/// How much of an agent's work survives a crash (see `docs/persistence.md`).
///
/// | mode | writes | a reply / acknowledgement means | lost on `kill -9` |
/// |---|---|---|---|
/// | `Volatile` | a checkpoint when the agent stops gracefully | nothing durable | everything since the last stop |
/// | `Checkpoint` | a checkpoint after each batch that changed the state, before its replies | `call`: its state change is durable | casts not processed yet, and the effects of processed casts whose checkpoint was not written |
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
    /// change is durable.
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

/// How many journal entries a restore reads at a time.
const JOURNAL_PAGE: usize = 1024;

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
}

/// The result of a checkpoint write.
pub(crate) struct Outcome {
    generation: u64,
    result: Result<u64>,
    /// The agent as written.
    agent: AgentState,
    /// The journal position written.
    applied: u64,
}

/// The persistence state of one durable agent.
pub(crate) struct Durable {
    storage: Arc<dyn Storage>,
    key: Arc<StorageKey>,
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
    /// Answers waiting for the checkpoint of their batch.
    held: Vec<(Reply, Result<AgentState>)>,
    /// A `cmd` settled whose signal is not in the journal (a call in
    /// `Checkpoint` mode, instruction results, runtime signals).
    unjournaled: bool,
    /// The agent as last made durable.
    durable_agent: AgentState,
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
}

/// What a restore read from the storage, before the agent starts.
pub(crate) struct Loaded {
    durable: Box<Durable>,
    /// The checkpoint's state (migrated), if there was a checkpoint.
    state: Option<Map<String, Value>>,
    /// The checkpoint was of another version: the migrated state is not
    /// durable yet.
    migrated: bool,
    replay: Vec<(u64, Signal)>,
    dead: Vec<Signal>,
}

/// Reads what a durable agent starts from: `None` when it has no storage.
///
/// # Errors
///
/// A storage error (retryable when the backend failed), a corrupt
/// checkpoint, a checkpoint of another agent, or the
/// [`Agent::migrate`](crate::agent::Agent::migrate) error: the agent does
/// not start, and nothing is written.
pub(crate) async fn load(args: &AgentServerArgs) -> Result<Option<Loaded>> {
    let defaults = args.options.jido.as_ref().map(|j| j.defaults());
    let Some(storage) = args
        .options
        .storage
        .clone()
        .or_else(|| defaults.and_then(|d| d.storage.clone()))
    else {
        return Ok(None);
    };
    let idle_timeout = args
        .options
        .idle_timeout
        .or_else(|| defaults.and_then(|d| d.idle_timeout));
    let mode = args
        .options
        .durability
        .or_else(|| defaults.and_then(|d| d.durability))
        .unwrap_or_default();
    let namespace = args
        .options
        .jido
        .as_ref()
        .map_or("default", |j| j.namespace());
    let key = Arc::new(StorageKey::new(namespace, args.agent.name(), args.id())?);
    let stored = storage.get_checkpoint(&key).await?;
    let mut migrated = false;
    let (epoch, rev, applied, state) = match stored {
        Some(stored) => {
            let cp = stored.value;
            if cp.agent != args.agent.name() {
                return Err(Error::validation("checkpoint is for another agent")
                    .with_detail("expected", args.agent.name())
                    .with_detail("got", cp.agent)
                    .with_detail("key", key.to_string()));
            }
            let version = args.agent.metadata().version;
            let state = if cp.version == version {
                cp.state
            } else {
                migrated = true;
                args.agent
                    .migrate_state(&cp.version, cp.state)
                    .map_err(|e| e.with_detail("key", key.to_string()))?
            };
            (stored.epoch, Some(stored.rev), cp.applied_seq, Some(state))
        }
        None => (
            storage.owner(&key).await?.map_or(0, |o| o.epoch),
            None,
            0,
            None,
        ),
    };
    let head = storage.journal_head(&key).await?;
    let mut entries: Vec<JournalEntry> = Vec::new();
    let mut after = applied;
    loop {
        let page = storage.load_journal(&key, after, JOURNAL_PAGE).await?;
        let full = page.len() == JOURNAL_PAGE;
        if let Some(last) = page.last() {
            after = last.seq;
        }
        entries.extend(page);
        if !full {
            break;
        }
    }
    let mut replay = Vec::with_capacity(entries.len());
    let mut dead = Vec::new();
    let mut first = true;
    for entry in entries {
        if first {
            // The entry replayed first is the one a crash during replay
            // points at (entries are checkpointed one by one on replay).
            first = false;
            let attempts = storage.bump_attempts(&key, epoch, entry.seq).await?;
            if attempts >= MAX_REPLAYS {
                let error = Error::execution("journal entry kept crashing the agent")
                    .with_detail("seq", entry.seq)
                    .with_detail("attempts", attempts)
                    .with_retry(false);
                storage.dead_letter(&key, epoch, entry.seq, &error).await?;
                tracing::warn!(
                    name: "jido.persist.dead_letter",
                    target: "jido::persist",
                    key = %key,
                    seq = entry.seq,
                    attempts,
                    "journal entry {} moved to the dead letters after {attempts} attempts",
                    entry.seq
                );
                let original = entry.to_signal().ok();
                let data = json!({
                    "key": key.to_string(),
                    "seq": entry.seq,
                    "attempts": attempts,
                    "signal_type": original.as_ref().map(|s| s.ty().to_owned()),
                    "signal_id": original.as_ref().map(|s| s.id().to_owned()),
                    "error": error.to_envelope(),
                });
                dead.push(Signal::new(super::signal_types::DEAD_LETTER, data));
                continue;
            }
        }
        match entry.to_signal() {
            Ok(signal) => replay.push((entry.seq, signal)),
            Err(error) => {
                // Bytes that are not a signal can never be processed.
                storage.dead_letter(&key, epoch, entry.seq, &error).await?;
            }
        }
    }
    let replay_until = replay.last().map_or(0, |(seq, _)| *seq);
    if !replay.is_empty() || !dead.is_empty() {
        tracing::info!(
            name: "jido.persist.restore",
            target: "jido::persist",
            key = %key,
            applied,
            replay = replay.len(),
            dead_letters = dead.len(),
            "jido.persist.restore"
        );
    }
    Ok(Some(Loaded {
        durable: Box::new(Durable {
            storage,
            key,
            mode,
            epoch,
            rev,
            head,
            applied,
            durable_applied: applied,
            replay_until,
            seqs: HashMap::new(),
            held: Vec::new(),
            unjournaled: false,
            durable_agent: args.agent.clone(),
            incoming: Vec::new(),
            appending: None,
            detached: None,
            fenced: false,
            idle_timeout,
            idle_gen: 0,
            idle_timer: None,
            hibernating: false,
        }),
        state,
        migrated,
        replay,
        dead,
    }))
}

impl Durable {
    fn journals(&self) -> bool {
        self.mode == Durability::Journal
    }
}

/// The checkpoint of `agent` at journal position `applied`.
fn checkpoint_of(agent: &AgentState, applied: u64) -> Checkpoint {
    let meta = agent.metadata();
    let mut cp = Checkpoint::new(meta.name, meta.version, agent.id());
    cp.state = agent
        .state()
        .iter()
        .filter(|(k, _)| *k != PARENT_KEY && *k != ORPHANED_FROM_KEY)
        .map(|(k, v)| (k.to_string(), v.to_json()))
        .collect();
    cp.applied_seq = applied;
    cp
}

fn is_fencing(error: &Error) -> bool {
    matches!(error.kind(), ErrorKind::Fenced | ErrorKind::Conflict)
}

impl AgentServerState {
    /// Takes what a restore loaded: the checkpoint's state replaces the
    /// initial one, journal entries wait as casts (behind nothing).
    pub(crate) fn attach_durable(&mut self, loaded: Option<Loaded>) {
        let Some(Loaded {
            mut durable,
            state,
            migrated,
            replay,
            dead,
        }) = loaded
        else {
            return;
        };
        if let Some(state) = state {
            let mut map = StateMap::from(state);
            map.remove(PARENT_KEY);
            map.remove(ORPHANED_FROM_KEY);
            *self.agent.state_mut() = map;
            self.sync_reserved();
        }
        if !migrated {
            durable.durable_agent = self.agent.clone();
        }
        for (seq, signal) in replay {
            durable.seqs.entry(signal.id().to_owned()).or_insert(seq);
            self.pending.push_back(Work {
                signal,
                reply: None,
            });
        }
        for signal in dead {
            self.pending.push_back(Work {
                signal,
                reply: None,
            });
        }
        self.durable = Some(durable);
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

    /// A batch ended: writes its checkpoint if the mode asks for one (the
    /// write becomes the work in flight), else answers its callers.
    pub(crate) fn batch_done(&mut self) {
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        if d.fenced {
            return;
        }
        let changed = !self.agent.state().ptr_eq(d.durable_agent.state());
        let write = d.hibernating
            || match d.mode {
                Durability::Volatile => false,
                Durability::Checkpoint => changed,
                Durability::Journal => {
                    let behind = d.applied.saturating_sub(d.durable_applied);
                    (changed && (!d.held.is_empty() || d.unjournaled))
                        || behind >= JOURNAL_CHECKPOINT_EVERY
                        || (behind > 0 && d.durable_applied < d.replay_until)
                }
                #[allow(unreachable_patterns)]
                _ => changed,
            };
        if !write {
            for (reply, answer) in d.held.drain(..) {
                let _ = reply.send(answer);
            }
            return;
        }
        self.next_id += 1;
        let generation = self.next_id;
        let Some(fut) = self.checkpoint_task(generation) else {
            return;
        };
        if let Ok(task) = self.exec.supervisor().spawn(fut) {
            self.in_flight = Some(InFlight::new(generation, Running::Persist(Some(task))));
        }
        // Else the instance is gone: the held callers were answered
        // `Cancelled` when the future was dropped.
    }

    /// The write of the current agent's checkpoint, answering the held
    /// callers once it is durable (with the storage error if it failed).
    fn checkpoint_task(
        &mut self,
        generation: u64,
    ) -> Option<impl Future<Output = Outcome> + Send + 'static> {
        let agent = self.agent.clone();
        let myself = self.myself.clone();
        let d = self.durable.as_deref_mut()?;
        let storage = Arc::clone(&d.storage);
        let key = Arc::clone(&d.key);
        let held = std::mem::take(&mut d.held);
        let applied = d.applied;
        let expect = d.rev.map_or(Expect::Absent, Expect::Rev);
        let epoch = d.epoch;
        Some(async move {
            let started = tokio::time::Instant::now();
            let cp = checkpoint_of(&agent, applied);
            let result = storage.put_checkpoint(&key, &cp, expect, epoch).await;
            tracing::debug!(
                name: "jido.persist.checkpoint",
                target: "jido::persist",
                key = %key,
                applied,
                duration_us = started.elapsed().as_micros() as u64,
                ok = result.is_ok(),
                "jido.persist.checkpoint"
            );
            match &result {
                Ok(_) => {
                    for (reply, answer) in held {
                        let _ = reply.send(answer);
                    }
                }
                Err(error) => {
                    for (reply, _) in held {
                        let _ = reply.send(Err(error.clone()));
                    }
                }
            }
            let outcome = Outcome {
                generation,
                result,
                agent,
                applied,
            };
            // The actor takes the outcome from its mailbox; a stopping
            // agent from the task's handle instead.
            let copy = Outcome {
                generation,
                result: outcome.result.clone(),
                agent: outcome.agent.clone(),
                applied,
            };
            let _ = myself.send_message(AgentMsg::internal(Internal::Durable(Box::new(
                DurableMsg::Persisted(Box::new(copy)),
            ))));
            outcome
        })
    }

    /// A signal accepted from outside, of a journaling agent: appended
    /// before it is queued. `false` when the agent does not journal (the
    /// caller queues it as usual).
    pub(crate) fn journal(&mut self, signal: Signal, ack: Ack) -> Option<(Signal, Ack)> {
        let Some(d) = self.durable.as_deref_mut().filter(|d| d.journals()) else {
            return Some((signal, ack));
        };
        d.incoming.push((signal, ack));
        if d.appending.is_none() {
            self.start_append();
        }
        None
    }

    /// Appends every signal waiting, in one write.
    fn start_append(&mut self) {
        let myself = self.myself.clone();
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        if d.incoming.is_empty() || d.fenced {
            return;
        }
        let (signals, acks): (Vec<Signal>, Vec<Ack>) = d.incoming.drain(..).unzip();
        let storage = Arc::clone(&d.storage);
        let key = Arc::clone(&d.key);
        let (epoch, after) = (d.epoch, d.head);
        d.appending = Some(acks);
        let fut = async move {
            let started = tokio::time::Instant::now();
            let result = storage.append_journal(&key, epoch, after, &signals).await;
            tracing::debug!(
                name: "jido.persist.journal.append",
                target: "jido::persist",
                key = %key,
                after,
                count = signals.len(),
                duration_us = started.elapsed().as_micros() as u64,
                ok = result.is_ok(),
                "jido.persist.journal.append"
            );
            let _ = myself.send_message(AgentMsg::internal(Internal::Durable(Box::new(
                DurableMsg::Appended {
                    after,
                    signals,
                    result,
                },
            ))));
        };
        if self.exec.supervisor().spawn(fut).is_err()
            && let Some(acks) = self.durable.as_deref_mut().and_then(|d| d.appending.take())
        {
            let error = Error::cancelled("jido instance is shut down");
            answer_acks(acks, &error);
        }
    }

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

    fn cast_durable(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        signal: Signal,
        ack: RpcReplyPort<Result<()>>,
    ) {
        if !self.durable.as_deref().is_some_and(Durable::journals) {
            let _ = ack.send(Err(Error::configuration(
                "cast_durable needs an agent with durability journal",
            )
            .with_detail("agent_id", self.id.to_string())));
            return;
        }
        if self.stopping {
            let _ = ack
                .send(Err(Error::cancelled("agent is stopping")
                    .with_detail("agent_id", self.id.to_string())));
            return;
        }
        if let Some((error, context)) = self.admission_error(&signal) {
            let _ = ack.send(Err(error.clone()));
            return self.refuse(
                myself,
                Work {
                    signal,
                    reply: None,
                },
                error,
                context,
            );
        }
        let _ = self.journal(signal, Ack::Durable(ack));
    }

    fn on_appended(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        after: u64,
        signals: Vec<Signal>,
        result: Result<u64>,
    ) {
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        let acks = d.appending.take().unwrap_or_default();
        match result {
            Ok(last) => {
                d.head = last;
                let mut ready = Vec::with_capacity(signals.len());
                for (i, (signal, ack)) in signals.into_iter().zip(acks).enumerate() {
                    let seq = after + 1 + i as u64;
                    d.seqs.entry(signal.id().to_owned()).or_insert(seq);
                    let reply = match ack {
                        Ack::None => None,
                        Ack::Call(reply) => Some(reply),
                        Ack::Durable(port) => {
                            let _ = port.send(Ok(()));
                            None
                        }
                    };
                    ready.push((signal, reply));
                }
                for (signal, reply) in ready {
                    self.enqueue_signal(myself, signal, reply);
                }
                self.start_append();
            }
            Err(error) => {
                answer_acks(acks, &error);
                if is_fencing(&error) {
                    return self.fence(myself, &error);
                }
                // Nothing of the batch was appended or acknowledged.
                if let Some(signal) = signals.first()
                    && let super::DirectiveResult::Stop(reason) =
                        self.apply_error_policy(myself, signal, &error, "persist")
                {
                    return self.stop_self(myself, reason.to_string());
                }
                self.start_append();
            }
        }
    }

    fn on_persisted(&mut self, myself: &ActorRef<AgentMsg>, outcome: Outcome) {
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        match outcome.result {
            Ok(rev) => {
                d.rev = Some(rev);
                d.durable_applied = outcome.applied;
                d.durable_agent = outcome.agent;
                d.unjournaled = false;
                if std::mem::take(&mut d.hibernating) && self.may_hibernate() {
                    self.hibernate(myself);
                }
            }
            Err(error) if is_fencing(&error) => self.fence(myself, &error),
            Err(error) => {
                d.hibernating = false;
                if d.mode == Durability::Checkpoint {
                    // The last durable state stays the truth; the batch's
                    // directives go with its state change.
                    self.agent = d.durable_agent.clone();
                    self.sync_reserved();
                    self.queue.clear();
                }
                // In Journal mode the journal still holds the batch's
                // signals: the state in memory is what replay gives.
                let signal = Arc::new(Signal::new("jido.persist.checkpoint", Value::Null));
                self.queue
                    .push_back((signal, Directive::error(error, "persist")));
            }
        }
    }

    /// The agent has nothing to do: (re)arms its idle timer.
    pub(crate) fn idle(&mut self) {
        let myself = self.myself.clone();
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        let Some(timeout) = d.idle_timeout else {
            return;
        };
        if d.hibernating || d.fenced {
            return;
        }
        d.idle_gen += 1;
        let generation = d.idle_gen;
        d.idle_timer = Some(AbortOnDrop(myself.send_after(timeout, move || {
            AgentMsg::internal(Internal::Durable(Box::new(DurableMsg::Idle(generation))))
        })));
    }

    /// Whether nothing keeps the agent alive: no work, no waiter, no live
    /// child, schedule or cron job, no append in flight.
    fn may_hibernate(&self) -> bool {
        let Some(d) = self.durable.as_deref() else {
            return false;
        };
        let extras_idle = self.extras().is_none_or(|e| {
            e.waiters.is_empty()
                && e.children.is_empty()
                && e.crons.is_empty()
                && e.timers.iter().all(|t| t.0.is_finished())
        });
        !self.stopping
            && !d.fenced
            && self.in_flight.is_none()
            && self.pending.is_empty()
            && self.queue.is_empty()
            && d.incoming.is_empty()
            && d.appending.is_none()
            && d.held.is_empty()
            && extras_idle
    }

    /// The idle timer fired: checkpoint (every mode), then hibernate.
    fn on_idle(&mut self, myself: &ActorRef<AgentMsg>, generation: u64) {
        let current = self
            .durable
            .as_deref()
            .is_some_and(|d| d.idle_gen == generation && !d.hibernating);
        if !current {
            return;
        }
        if !self.may_hibernate() {
            // Checked again one idle period later (a waiter, a child or a
            // timer may be gone by then without any new work).
            if self.in_flight.is_none() && self.pending.is_empty() && self.queue.is_empty() {
                self.idle();
            }
            return;
        }
        if let Some(d) = self.durable.as_deref_mut() {
            d.idle_timer = None;
            let changed = !self.agent.state().ptr_eq(d.durable_agent.state())
                || d.applied > d.durable_applied;
            if !changed {
                return self.hibernate(myself);
            }
            d.hibernating = true;
        }
        self.batch_done();
    }

    /// Leaves for good: the checkpoint is durable.
    fn hibernate(&mut self, myself: &ActorRef<AgentMsg>) {
        tracing::debug!(
            name: "jido.persist.hibernate",
            target: "jido::persist",
            agent_id = %self.id,
            "jido.persist.hibernate"
        );
        if let Some(jido) = &self.jido {
            jido.forget_restart(myself.get_id());
            jido.hibernating(myself.get_id());
        }
        self.stop_self(myself, HIBERNATE.to_owned());
    }

    /// Stops a fenced agent (a newer owner exists).
    fn fence(&mut self, myself: &ActorRef<AgentMsg>, error: &Error) {
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

    /// Keeps the checkpoint write in flight of an agent that stops, so
    /// the stop can wait for it.
    pub(crate) fn detach_write(&mut self, task: Option<JoinHandle<Option<Outcome>>>) {
        if let Some(d) = self.durable.as_deref_mut() {
            d.detached = task;
        }
    }

    /// On a graceful stop: waits for the write in flight, then writes the
    /// last checkpoint (every mode) and answers the callers still held.
    pub(crate) async fn persist_on_stop(&mut self) {
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        if let Some(task) = d.detached.take()
            && let Ok(Some(outcome)) = task.await
        {
            self.on_persisted_stopping(outcome);
        }
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        if d.fenced {
            return;
        }
        let changed =
            !self.agent.state().ptr_eq(d.durable_agent.state()) || d.applied > d.durable_applied;
        if !changed {
            for (reply, answer) in d.held.drain(..) {
                let _ = reply.send(answer);
            }
            return;
        }
        self.next_id += 1;
        if let Some(fut) = self.checkpoint_task(self.next_id) {
            let outcome = fut.await;
            self.on_persisted_stopping(outcome);
        }
    }

    fn on_persisted_stopping(&mut self, outcome: Outcome) {
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        match outcome.result {
            Ok(rev) => {
                d.rev = Some(rev);
                d.durable_applied = outcome.applied;
                d.durable_agent = outcome.agent;
            }
            Err(error) => {
                if is_fencing(&error) {
                    d.fenced = true;
                }
                tracing::warn!(
                    target: "jido::persist",
                    key = %d.key,
                    error = %error.message(),
                    "checkpoint on stop failed"
                );
            }
        }
    }
}

fn answer_acks(acks: Vec<Ack>, error: &Error) {
    for ack in acks {
        match ack {
            Ack::None => {}
            Ack::Call(reply) => {
                let _ = reply.send(Err(error.clone()));
            }
            Ack::Durable(port) => {
                let _ = port.send(Err(error.clone()));
            }
        }
    }
}
