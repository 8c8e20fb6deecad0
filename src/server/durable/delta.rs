//! Checkpoint deltas: a checkpoint written as what changed since the last
//! durable one, found through the state's structure sharing (a top-level
//! value still shared with the durable state is unchanged; a long array
//! whose elements are still shared had elements appended), never by
//! comparing or serialising values.
//!
//! A full checkpoint is written first in every incarnation, then deltas
//! until [`MAX_CHECKPOINT_DELTAS`] of them or until their bytes exceed the last full
//! checkpoint's: a signal beside a large state costs O(its change), plus
//! the full rewrite amortised over the deltas it replaces.

use std::io;

use serde_json::Map;

use crate::agent::{AgentState, ORPHANED_FROM_KEY, PARENT_KEY};
use crate::persist::{Checkpoint, CheckpointDelta};
use crate::state::{StateMap, StateValue};

/// At most this many deltas follow a full checkpoint (bounds the work of
/// a restore, which folds them all).
pub const MAX_CHECKPOINT_DELTAS: u32 = 1024;

/// Whether `key` is kept in checkpoints (runtime-only keys are not).
pub(super) fn stored_key(key: &str) -> bool {
    key != PARENT_KEY && key != ORPHANED_FROM_KEY
}

/// The checkpoint of `agent` at journal position `applied`, with an empty
/// state: every field but the state.
pub(super) fn checkpoint_head(agent: &AgentState, applied: u64) -> Checkpoint {
    let meta = agent.metadata();
    let mut cp = Checkpoint::new(meta.name, meta.version, agent.id());
    cp.applied_seq = applied;
    cp
}

/// The full checkpoint of `agent` at journal position `applied`.
pub(super) fn checkpoint_of(agent: &AgentState, applied: u64) -> Checkpoint {
    let mut cp = checkpoint_head(agent, applied);
    cp.state = agent
        .state()
        .iter()
        .filter(|(k, _)| stored_key(k))
        .map(|(k, v)| (k.to_string(), v.to_json()))
        .collect();
    cp
}

/// The delta taking the stored checkpoint of `base` (the agent's state as
/// last made durable) to `agent`'s at journal position `applied`.
pub(super) fn delta_of(base: &StateMap, agent: &AgentState, applied: u64) -> CheckpointDelta {
    state_delta(base, agent.state(), checkpoint_head(agent, applied))
}

/// The delta taking a checkpoint of state `base` to `head` with state
/// `state`. O(top-level keys) plus, per long array still shared element
/// by element, O(its length) pointer comparisons; only what changed is
/// converted to JSON.
fn state_delta(base: &StateMap, state: &StateMap, mut head: Checkpoint) -> CheckpointDelta {
    let mut changed = Map::new();
    let mut keys = Vec::with_capacity(state.len());
    let mut appended = std::collections::BTreeMap::new();
    for (key, value) in state.iter().filter(|(k, _)| stored_key(k)) {
        keys.push(key.to_owned());
        match (base.get(key), value) {
            (Some(old), _) if old.same(value) => {}
            (Some(StateValue::Array(old)), StateValue::Array(new)) => {
                match new.appended_since(old) {
                    Some(tail) => {
                        appended.insert(
                            key.to_owned(),
                            tail.into_iter().map(StateValue::to_json).collect(),
                        );
                    }
                    None => {
                        changed.insert(key.to_owned(), value.to_json());
                    }
                }
            }
            _ => {
                changed.insert(key.to_owned(), value.to_json());
            }
        }
    }
    head.state = changed;
    let mut delta = CheckpointDelta::new(head, keys);
    delta.appended = appended;
    delta
}

/// The length of `value`'s JSON, without building it.
pub(super) fn json_len(value: &impl serde::Serialize) -> u64 {
    struct Count(u64);
    impl io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Serialising maps with string keys cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The delta bookkeeping of one durable agent.
#[derive(Debug, Default)]
pub(super) struct Deltas {
    /// The stored checkpoint is exactly the durable agent's (written by
    /// this incarnation): deltas may be computed against it.
    pub(super) base: bool,
    /// Deltas written since the last full checkpoint.
    pub(super) count: u32,
    /// Their bytes.
    pub(super) bytes: u64,
    /// The last full checkpoint's bytes.
    pub(super) full_bytes: u64,
}

impl Deltas {
    /// Whether the next checkpoint may be a delta.
    pub(super) fn next_is_delta(&self) -> bool {
        self.base && self.count < MAX_CHECKPOINT_DELTAS && self.bytes < self.full_bytes
    }

    /// A write succeeded.
    pub(super) fn written(&mut self, written: Written) {
        self.base = true;
        match written {
            Written::Full(bytes) => {
                self.count = 0;
                self.bytes = 0;
                self.full_bytes = bytes;
            }
            Written::Delta(bytes) => {
                self.count += 1;
                self.bytes = self.bytes.saturating_add(bytes);
            }
        }
    }
}

/// What a checkpoint write wrote, with its JSON length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Written {
    /// A full checkpoint.
    Full(u64),
    /// A delta.
    Delta(u64),
}
