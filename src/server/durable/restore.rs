//! Restore on start: the checkpoint (migrated), then the journal after it;
//! poison entries to the dead letters.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use serde_json::{Map, Value, json};

use super::writes::write_lock;
use super::{Durable, MAX_REPLAYS, wall_now_ms};
use crate::agent::{ORPHANED_FROM_KEY, PARENT_KEY};
use crate::error::{Error, Result};
use crate::persist::{JournalEntry, StorageKey};
use crate::server::actor::AgentServerState;
use crate::server::inflight::Work;
use crate::server::options::AgentServerArgs;
use crate::signal::Signal;
use crate::state::StateMap;

/// The owner name this process claims durable agents under.
pub(super) static PROCESS_OWNER: LazyLock<String> =
    LazyLock::new(|| format!("process-{}", uuid::Uuid::now_v7()));

/// How many journal entries a restore reads at a time.
const JOURNAL_PAGE: usize = 1024;

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
    /// The checkpoint's outbox, timers and parent link.
    outbox: Vec<Value>,
    timers: Vec<Value>,
    parent: Option<Value>,
    /// The due time a thaw by the instance's timer table is for.
    thaw_due: Option<i64>,
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
    // Writes of an earlier incarnation still in flight land first.
    let lock = write_lock(&storage, &key);
    lock.settled().await;
    // An incarnation in another process (one that crashed, or a node that
    // lost the agent) may still have a write in flight: a new owner epoch
    // fences it, and what it wrote before the claim is read below. An
    // earlier incarnation in this process has settled its writes above and
    // keeps the claim (a thaw costs no extra write).
    let held = storage.owner(&key).await?;
    if held.is_none_or(|o| o.node != *PROCESS_OWNER) {
        storage.claim(&key, &PROCESS_OWNER).await?;
    }
    let stored = storage.get_checkpoint(&key).await?;
    let mut migrated = false;
    let mut outbox = Vec::new();
    let mut timers = Vec::new();
    let mut recent_ids = Vec::new();
    let mut parent = None;
    let (epoch, rev, applied, state) = match stored {
        Some(stored) => {
            let mut cp = stored.value;
            outbox = std::mem::take(&mut cp.outbox);
            timers = std::mem::take(&mut cp.timers);
            recent_ids = std::mem::take(&mut cp.recent_ids);
            parent = cp.parent.take();
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
                dead.push(Signal::new(crate::server::signal_types::DEAD_LETTER, data));
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
    let mut recent = super::journal::RecentIds::default();
    if mode == super::Durability::Journal {
        recent = super::journal::RecentIds::from_ids(
            recent_ids
                .into_iter()
                .chain(replay.iter().map(|(_, s)| s.id().to_owned())),
        );
    }
    // The instance's timer table thaws a hibernated agent with timers
    // from what it started with.
    let thaw = (idle_timeout.is_some() && args.options.jido.is_some()).then(|| {
        let mut thaw = args.clone();
        thaw.options.thaw_due = None;
        Box::new(thaw)
    });
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
            lock: Arc::clone(&lock),
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
            deltas: Default::default(),
            incoming: Vec::new(),
            appending: None,
            detached: None,
            fenced: false,
            idle_timeout,
            idle_gen: 0,
            idle_timer: None,
            hibernating: false,
            recent,
            stale: false,
            schedules: std::collections::BTreeMap::new(),
            next_schedule: 0,
            thaw,
            lost_parent: None,
        }),
        state,
        migrated,
        replay,
        dead,
        outbox,
        timers,
        parent,
        thaw_due: args.options.thaw_due,
    }))
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
            outbox,
            timers,
            parent,
            thaw_due,
        }) = loaded
        else {
            return;
        };
        let had_outbox = !outbox.is_empty();
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
                signal: signal.into(),
                reply: None,
            });
        }
        for signal in dead {
            self.pending.push_back(Work {
                signal: signal.into(),
                reply: None,
            });
        }
        self.durable = Some(durable);
        // The outbox runs first (it was decided before anything queued
        // now), at least once; then its stored copy is stale.
        let now = wall_now_ms();
        let decoded: Vec<_> = outbox
            .iter()
            .filter_map(|form| super::outbox::decode(form, &self.settings.executors, now))
            .collect();
        if !decoded.is_empty() {
            tracing::info!(
                name: "jido.persist.outbox.restore",
                target: "jido::persist",
                agent_id = %self.id,
                directives = decoded.len(),
                "jido.persist.outbox.restore"
            );
        }
        for entry in decoded.into_iter().rev() {
            self.queue.push_front(entry);
        }
        self.restore_timers(&timers, thaw_due);
        self.restore_parent(parent);
        if let Some(d) = self.durable.as_deref_mut() {
            d.stale = had_outbox;
        }
    }
}
