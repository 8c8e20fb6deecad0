//! Checkpoint deltas: a checkpoint written as what changed since the last
//! durable one, found through the state's structure sharing: a top-level
//! value still shared with the durable state is unchanged (one pointer
//! comparison), an array whose old elements are still shared had elements
//! appended. Values rebuilt by an action's output (not shared any more) are
//! compared by value, which is still far cheaper than writing them.
//!
//! A full checkpoint is written first in every incarnation, then deltas
//! until [`MAX_CHECKPOINT_DELTAS`] of them or until their bytes exceed the last full
//! checkpoint's: a signal beside a large state costs O(its change), plus
//! the full rewrite amortised over the deltas it replaces.

use std::io;

use serde_json::{Map, Value};

use super::journal::RecentMark;
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

/// What a checkpoint keeps besides the state, taken in the actor: the
/// outbox, the timers, the recent signal ids and the parent link.
#[derive(Default)]
pub(super) struct Record {
    pub(super) outbox: Vec<Value>,
    pub(super) timers: Vec<Value>,
    pub(super) recent_ids: Vec<String>,
    pub(super) parent: Option<Value>,
}

/// The checkpoint of `agent` at journal position `applied`, with an empty
/// state: every field but the state.
pub(super) fn checkpoint_head(agent: &AgentState, applied: u64, record: Record) -> Checkpoint {
    let meta = agent.metadata();
    let mut cp = Checkpoint::new(meta.name, meta.version, agent.id());
    cp.applied_seq = applied;
    cp.outbox = record.outbox;
    cp.timers = record.timers;
    cp.recent_ids = record.recent_ids;
    cp.parent = record.parent;
    cp
}

/// `head` (from [`checkpoint_head`]) with `agent`'s whole state: a full
/// checkpoint.
pub(super) fn with_state(mut head: Checkpoint, agent: &AgentState) -> Checkpoint {
    head.state = agent
        .state()
        .iter()
        .filter(|(k, _)| stored_key(k))
        .map(|(k, v)| (k.to_string(), v.to_json()))
        .collect();
    head
}

/// The full checkpoint of `agent` at journal position `applied`.
pub(super) fn checkpoint_of(agent: &AgentState, applied: u64, record: Record) -> Checkpoint {
    with_state(checkpoint_head(agent, applied, record), agent)
}

/// The delta taking the stored checkpoint of `base` (the agent's state as
/// last made durable) to `agent`'s, with every other field from `head`.
pub(super) fn delta_of(base: &StateMap, agent: &AgentState, head: Checkpoint) -> CheckpointDelta {
    state_delta(base, agent.state(), head)
}

/// The delta taking a checkpoint of state `base` to `head` with state
/// `state`. A top-level value still shared with `base` costs one pointer
/// comparison; one that is not is compared by value (an action's output
/// replaces whole values with equal copies), an array element by element
/// to find an appended tail. Only what changed is converted to JSON.
fn state_delta(base: &StateMap, state: &StateMap, mut head: Checkpoint) -> CheckpointDelta {
    let mut changed = Map::new();
    let mut keys = Vec::with_capacity(state.len());
    let mut appended = std::collections::BTreeMap::new();
    for (key, value) in state.iter().filter(|(k, _)| stored_key(k)) {
        keys.push(key.to_owned());
        match (base.get(key), value) {
            // Still shared (the usual case: untouched by the signal), or
            // rebuilt equal (an action's output replaces whole values).
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
            (Some(old), _) if old.identical(value) => {}
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
    /// The recent signal ids as stored (with `base`).
    pub(super) recent: Option<RecentMark>,
}

impl Deltas {
    /// Whether the next checkpoint may be a delta.
    pub(super) fn next_is_delta(&self) -> bool {
        self.base && self.count < MAX_CHECKPOINT_DELTAS && self.bytes < self.full_bytes
    }

    /// A write succeeded.
    pub(super) fn written(&mut self, written: Written, recent: RecentMark) {
        self.base = true;
        self.recent = Some(recent);
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

#[cfg(test)]
mod tests {
    //! Property: any sequence of state writes, checkpointed as deltas or
    //! in full by the runtime's policy, with crashes (the storage reopened,
    //! the state rebuilt from what it returns, the next write full) at any
    //! point, reads back exactly the state last written.

    use std::sync::Arc;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::persist::{Expect, MemoryStorage, Storage, StorageKey};

    #[derive(Debug, Clone)]
    enum Op {
        Set(usize, i64),
        SetObject(usize, i64),
        Remove(usize),
        Push(usize, i64, usize),
        SetIndex(usize, usize, i64),
        Pop(usize),
        MoveLast(usize),
        /// The value rebuilt from its JSON: equal, no longer shared.
        Rebuild(usize),
        /// An object equal to `SetObject`'s but with its keys swapped.
        SetObjectSwapped(usize, i64),
        Write,
        Crash,
    }

    const KEYS: [&str; 5] = ["a", "history", "c", "d", PARENT_KEY];

    fn op() -> impl Strategy<Value = Op> {
        let k = 0..KEYS.len();
        prop_oneof![
            1 => (k.clone(), any::<i64>()).prop_map(|(k, n)| Op::Set(k, n)),
            1 => (k.clone(), any::<i64>()).prop_map(|(k, n)| Op::SetObject(k, n % 3)),
            1 => k.clone().prop_map(Op::Remove),
            3 => (k.clone(), any::<i64>(), 1..40usize).prop_map(|(k, n, c)| Op::Push(k, n, c)),
            1 => (k.clone(), 0..80usize, any::<i64>()).prop_map(|(k, i, n)| Op::SetIndex(k, i, n)),
            1 => k.clone().prop_map(Op::Pop),
            1 => k.clone().prop_map(Op::MoveLast),
            2 => k.clone().prop_map(Op::Rebuild),
            1 => (k, any::<i64>()).prop_map(|(k, n)| Op::SetObjectSwapped(k, n % 3)),
            4 => Just(Op::Write),
            1 => Just(Op::Crash),
        ]
    }

    fn apply(state: &mut StateMap, op: &Op) {
        match *op {
            Op::Set(k, n) => {
                state.insert(KEYS[k], n);
            }
            Op::SetObject(k, n) => {
                state.insert(KEYS[k], StateValue::from(json!({"v": n, "w": [n]})));
            }
            Op::SetObjectSwapped(k, n) => {
                state.insert(KEYS[k], StateValue::from(json!({"w": [n], "v": n})));
            }
            Op::Rebuild(k) => {
                if let Some(v) = state.get(KEYS[k]).map(StateValue::to_json) {
                    state.insert(KEYS[k], StateValue::from(v));
                }
            }
            Op::Remove(k) => {
                state.remove(KEYS[k]);
            }
            Op::Push(k, n, count) => {
                let slot =
                    state.entry_or_insert_with(KEYS[k], || StateValue::Array(Default::default()));
                if !slot.is_array() {
                    *slot = StateValue::Array(Default::default());
                }
                if let Some(array) = slot.as_array_mut() {
                    for i in 0..count {
                        array.push(StateValue::from(json!({"n": n, "i": i})));
                    }
                }
            }
            Op::SetIndex(k, i, n) => {
                if let Some(slot) = state
                    .get_mut(KEYS[k])
                    .and_then(StateValue::as_array_mut)
                    .and_then(|a| a.get_mut(i))
                {
                    *slot = StateValue::from(n);
                }
            }
            Op::Pop(k) => {
                if let Some(a) = state.get_mut(KEYS[k]).and_then(StateValue::as_array_mut) {
                    a.pop();
                }
            }
            Op::MoveLast(k) => {
                if let Some(v) = state.remove(KEYS[k]) {
                    state.insert(KEYS[k], v);
                }
            }
            Op::Write | Op::Crash => {}
        }
    }

    fn stored_json(state: &StateMap) -> Map<String, serde_json::Value> {
        state
            .iter()
            .filter(|(k, _)| stored_key(k))
            .map(|(k, v)| (k.to_owned(), v.to_json()))
            .collect()
    }

    /// Opens the storage again (a crash of the process for redb).
    type Reopen = Box<dyn FnMut(Option<Arc<dyn Storage>>) -> Arc<dyn Storage>>;

    async fn run(
        ops: Vec<Op>,
        mut reopen: Reopen,
    ) -> std::result::Result<(u32, u32), TestCaseError> {
        let key = StorageKey::new("prop", "agent", "a-1")
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut storage = reopen(None);
        let mut state = StateMap::new();
        let mut durable = state.clone();
        let mut deltas = Deltas::default();
        let mut rev: Option<u64> = None;
        let mut seq = 0;
        let (mut full_writes, mut delta_writes) = (0, 0);
        for op in ops.iter().chain([Op::Write, Op::Crash].iter()) {
            apply(&mut state, op);
            match op {
                Op::Write => {
                    seq += 1;
                    let mut head = Checkpoint::new("prop", "1", "a-1");
                    head.applied_seq = seq;
                    let expect = rev.map_or(Expect::Absent, Expect::Rev);
                    let delta = deltas
                        .next_is_delta()
                        .then(|| state_delta(&durable, &state, head.clone()))
                        .map(|d| (json_len(&d), d))
                        .filter(|(len, _)| deltas.bytes + len <= deltas.full_bytes);
                    let (result, written) = match delta {
                        Some((len, d)) => {
                            delta_writes += 1;
                            (
                                storage.put_checkpoint_delta(&key, &d, expect, 0).await,
                                Written::Delta(len),
                            )
                        }
                        None => {
                            full_writes += 1;
                            head.state = stored_json(&state);
                            let len = json_len(&head);
                            (
                                storage.put_checkpoint(&key, &head, expect, 0).await,
                                Written::Full(len),
                            )
                        }
                    };
                    let new_rev = result.map_err(|e| TestCaseError::fail(format!("write: {e}")))?;
                    prop_assert_eq!(new_rev, rev.unwrap_or(0) + 1);
                    rev = Some(new_rev);
                    deltas.written(written, RecentMark::default());
                    durable = state.clone();
                }
                Op::Crash => {
                    storage = reopen(Some(storage));
                    let stored = storage
                        .get_checkpoint(&key)
                        .await
                        .map_err(|e| TestCaseError::fail(format!("read: {e}")))?;
                    match stored {
                        Some(stored) => {
                            let expected = stored_json(&durable);
                            prop_assert_eq!(&stored.value.state, &expected);
                            // Key order too, at every depth (serde_json maps
                            // compare without it).
                            prop_assert_eq!(
                                serde_json::to_string(&stored.value.state).ok(),
                                serde_json::to_string(&expected).ok()
                            );
                            prop_assert_eq!(stored.value.applied_seq, seq);
                            prop_assert_eq!(Some(stored.rev), rev);
                            // What a restore does: a fresh state, not
                            // shared with anything; the next write full.
                            state = StateMap::from(stored.value.state);
                        }
                        None => {
                            prop_assert_eq!(rev, None);
                            state = StateMap::new();
                        }
                    }
                    durable = state.clone();
                    deltas = Deltas::default();
                }
                _ => {}
            }
        }
        prop_assert!(full_writes >= 1);
        Ok((full_writes, delta_writes))
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| rt.block_on(f))
            .unwrap_or_else(|e| panic!("runtime: {e}"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn deltas_restore_exactly_on_memory(ops in proptest::collection::vec(op(), 1..80)) {
            let memory = MemoryStorage::new();
            block_on(run(ops, Box::new(move |_| Arc::new(memory.clone()))))?;
        }
    }

    #[cfg(feature = "persist-redb")]
    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn deltas_restore_exactly_on_redb(ops in proptest::collection::vec(op(), 1..60)) {
            let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
            let path = dir.path().join("prop.redb");
            block_on(run(ops, Box::new(move |old| {
                drop(old); // the file is released with the last handle
                Arc::new(crate::persist::redb::RedbStorage::open(&path).unwrap_or_else(|e| panic!("open: {e}")))
            })))?;
        }
    }

    #[test]
    fn the_policy_writes_deltas_then_a_full_checkpoint() {
        // A long history, then small appends: deltas until their bytes
        // pass the full checkpoint's, then a full one; a crash in between.
        let mut ops = vec![Op::Push(1, 7, 39), Op::Push(1, 8, 39), Op::Write];
        for i in 0..60 {
            ops.extend([Op::Push(1, i, 1), Op::Set(0, i), Op::Write]);
            if i == 30 {
                ops.push(Op::Crash);
            }
        }
        let memory = MemoryStorage::new();
        let counts = block_on(run(ops, Box::new(move |_| Arc::new(memory.clone()))));
        let (full, delta) = counts.unwrap_or_else(|e| panic!("{e}"));
        // The first write, the one after the crash, and five more each
        // time the deltas (about 150 bytes each) outgrew the last full
        // checkpoint (1.3 KB of history and up): 7 full, 55 deltas.
        assert_eq!((full, delta), (7, 55));
    }

    #[test]
    fn a_delta_holds_only_the_change() {
        let mut state = StateMap::new();
        let history: Vec<serde_json::Value> = (0..1000).map(|i| json!({"m": i})).collect();
        state.insert(
            "history",
            StateValue::from(serde_json::Value::Array(history)),
        );
        state.insert("n", 1);
        let base = state.clone();
        if let Some(a) = state.get_mut("history").and_then(StateValue::as_array_mut) {
            a.push(StateValue::from(json!({"m": "new"})));
        }
        state.insert("n", 2);
        let delta = state_delta(&base, &state, Checkpoint::new("x", "1", "i"));
        assert_eq!(delta.keys, ["history", "n"]);
        assert_eq!(
            delta.checkpoint.state,
            json!({"n": 2}).as_object().cloned().unwrap_or_default()
        );
        assert_eq!(
            delta.appended.get("history"),
            Some(&vec![json!({"m": "new"})])
        );
        // An element changed in the middle: the whole array is written.
        let base = state.clone();
        if let Some(slot) = state
            .get_mut("history")
            .and_then(StateValue::as_array_mut)
            .and_then(|a| a.get_mut(10))
        {
            *slot = StateValue::from(0);
        }
        let delta = state_delta(&base, &state, Checkpoint::new("x", "1", "i"));
        assert!(delta.appended.is_empty());
        assert_eq!(
            delta.checkpoint.state["history"].as_array().map(Vec::len),
            Some(1001)
        );
        assert!(!delta.checkpoint.state.contains_key("n"));
    }
}
