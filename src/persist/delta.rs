//! [`CheckpointDelta`]: what changed in a checkpoint since the previous
//! write of its key, so that a small change beside a large state writes a
//! small record.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{CHECKPOINT_FORMAT, Checkpoint, corrupt};
use crate::error::{Error, Result};

/// The changes of a checkpoint since the previous write (full or delta) of
/// the same key: written by
/// [`Storage::put_checkpoint_delta`](super::Storage::put_checkpoint_delta),
/// folded into the stored checkpoint by every read.
///
/// * [`checkpoint`](Self::checkpoint) holds every field of the new
///   checkpoint except that its `state` holds only the top-level keys
///   whose value was set or replaced;
/// * [`keys`](Self::keys) lists every top-level key of the new state, in
///   order: a key not listed was removed, a listed key that is neither in
///   `checkpoint.state` nor in `appended` keeps its stored value;
/// * [`appended`](Self::appended): per top-level key holding an array, the
///   elements pushed onto its end;
/// * [`recent_ids_kept`](Self::recent_ids_kept): when set,
///   `checkpoint.recent_ids` holds only the ids accepted since the previous
///   write, and the new list is the last `recent_ids_kept` ids of the stored
///   list followed by them (a journaling agent's 1 024 recent ids are not
///   rewritten by every checkpoint).
///
/// # Examples
///
/// ```
/// use jido::persist::{Checkpoint, CheckpointDelta};
/// use serde_json::json;
///
/// let mut stored = Checkpoint::new("chat", "1", "c-1");
/// stored.state.insert("history".into(), json!(["hi"]));
/// stored.state.insert("turns".into(), json!(1));
///
/// let mut next = Checkpoint::new("chat", "1", "c-1");
/// next.state.insert("turns".into(), json!(2));
/// next.applied_seq = 4;
/// let mut delta = CheckpointDelta::new(next, ["history", "turns"]);
/// delta.appended.insert("history".into(), vec![json!("hello")]);
///
/// delta.apply_to(&mut stored)?;
/// assert_eq!(stored.state["history"], json!(["hi", "hello"]));
/// assert_eq!(stored.state["turns"], json!(2));
/// assert_eq!(stored.applied_seq, 4);
/// # Ok::<(), jido::Error>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointDelta {
    /// The new checkpoint, its `state` holding only the keys set or
    /// replaced since the previous write.
    pub checkpoint: Checkpoint,
    /// Every top-level key of the new state, in order.
    pub keys: Vec<String>,
    /// Per top-level key: the elements appended to its array.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub appended: BTreeMap<String, Vec<Value>>,
    /// When set, how many ids at the end of the stored `recent_ids` stay
    /// before `checkpoint.recent_ids`; when `None`, `checkpoint.recent_ids`
    /// is the whole new list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recent_ids_kept: Option<u32>,
}

/// The stored layout: the fields of [`CheckpointDelta`] after a `format`.
#[derive(Serialize)]
struct DeltaOut<'a> {
    format: u32,
    #[serde(flatten)]
    delta: &'a CheckpointDelta,
}

impl CheckpointDelta {
    /// A delta carrying `checkpoint` (its `state`: the keys set or
    /// replaced) over a state whose top-level keys are `keys`, in order.
    pub fn new<I, K>(checkpoint: Checkpoint, keys: I) -> Self
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        Self {
            checkpoint,
            keys: keys.into_iter().map(Into::into).collect(),
            appended: BTreeMap::new(),
            recent_ids_kept: None,
        }
    }

    /// Folds the delta into `base`, the checkpoint it was computed
    /// against: `base` becomes the new checkpoint. Costs O(keys + the
    /// delta); the values kept are moved, not copied.
    ///
    /// # Errors
    ///
    /// A [`ErrorKind::Storage`](crate::ErrorKind::Storage) error
    /// `"corrupt checkpoint delta"` (not retryable, the `key` in the
    /// details) when `base` is not what the delta was computed against: a
    /// kept or appended key is missing, or an appended key is not an
    /// array, or more recent ids are kept than it holds. `base` is left
    /// unchanged then.
    pub fn apply_to(self, base: &mut Checkpoint) -> Result<()> {
        let Self {
            mut checkpoint,
            keys,
            mut appended,
            recent_ids_kept,
        } = self;
        // Check before moving anything, so that a failure changes nothing.
        let kept = recent_ids_kept.map(|n| n as usize);
        if kept.is_some_and(|n| n > base.recent_ids.len()) {
            return Err(mismatch("recent_ids", "more ids kept than stored"));
        }
        for key in &keys {
            if checkpoint.state.contains_key(key) {
                continue;
            }
            match base.state.get(key) {
                Some(Value::Array(_)) => {}
                Some(_) if !appended.contains_key(key) => {}
                Some(_) => return Err(mismatch(key, "appended to a value that is not an array")),
                None => return Err(mismatch(key, "kept key missing")),
            }
        }
        let mut old = std::mem::take(&mut base.state);
        let mut state = Map::with_capacity(keys.len());
        for key in keys {
            let value = match checkpoint.state.remove(&key) {
                Some(value) => value,
                None => {
                    let mut value = old.remove(&key).unwrap_or(Value::Null);
                    if let (Some(tail), Value::Array(items)) = (appended.remove(&key), &mut value) {
                        items.extend(tail);
                    }
                    value
                }
            };
            state.insert(key, value);
        }
        checkpoint.state = state;
        if let Some(kept) = kept {
            let mut ids = std::mem::take(&mut base.recent_ids);
            ids.drain(..ids.len() - kept);
            ids.append(&mut checkpoint.recent_ids);
            checkpoint.recent_ids = ids;
        }
        *base = checkpoint;
        Ok(())
    }

    /// The stored JSON form: `{"format": 1, "checkpoint": …, "keys": …,
    /// "appended": …}`.
    pub fn to_json_vec(&self) -> Vec<u8> {
        let out = DeltaOut {
            format: CHECKPOINT_FORMAT,
            delta: self,
        };
        // Maps with string keys, strings and numbers cannot fail.
        serde_json::to_vec(&out).unwrap_or_default()
    }

    /// Reads the stored JSON form back.
    ///
    /// # Errors
    ///
    /// A [`ErrorKind::Storage`](crate::ErrorKind::Storage) error
    /// `"corrupt checkpoint delta"` (not retryable) when the bytes are not
    /// a delta.
    pub fn from_json_slice(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| corrupt("checkpoint delta", e))
    }
}

fn mismatch(key: &str, reason: &str) -> Error {
    Error::storage("corrupt checkpoint delta")
        .with_detail("key", key.to_owned())
        .with_detail("reason", reason.to_owned())
        .with_retry(false)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ErrorKind;

    fn with_ids(ids: &[&str]) -> Checkpoint {
        let mut cp = Checkpoint::new("a", "1", "a-1");
        cp.state.insert("n".into(), json!(1));
        cp.recent_ids = ids.iter().map(|&i| i.to_owned()).collect();
        cp
    }

    #[test]
    fn recent_ids_kept_from_the_end_of_the_stored_list() {
        let mut base = with_ids(&["a", "b", "c"]);
        let mut delta = CheckpointDelta::new(with_ids(&["d"]), ["n"]);
        delta.checkpoint.state.clear();
        delta.recent_ids_kept = Some(2);
        delta.apply_to(&mut base).unwrap();
        assert_eq!(base.recent_ids, ["b", "c", "d"]);
        assert_eq!(base.state["n"], json!(1));
        // Without `recent_ids_kept` the delta's list replaces the stored one.
        let delta = CheckpointDelta::new(with_ids(&["x"]), ["n"]);
        delta.apply_to(&mut base).unwrap();
        assert_eq!(base.recent_ids, ["x"]);
    }

    #[test]
    fn keeping_more_recent_ids_than_stored_is_corrupt_and_changes_nothing() {
        let mut base = with_ids(&["a"]);
        let before = base.clone();
        let mut delta = CheckpointDelta::new(with_ids(&["d"]), ["n"]);
        delta.recent_ids_kept = Some(2);
        let err = delta.apply_to(&mut base).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Storage);
        assert_eq!(err.message(), "corrupt checkpoint delta");
        assert_eq!(err.details()["key"], json!("recent_ids"));
        assert_eq!(base, before);
    }

    #[test]
    fn the_stored_form_round_trips_and_omits_an_unset_kept_count() {
        let mut delta = CheckpointDelta::new(with_ids(&["d"]), ["n"]);
        let bytes = delta.to_json_vec();
        assert!(!String::from_utf8_lossy(&bytes).contains("recent_ids_kept"));
        assert_eq!(CheckpointDelta::from_json_slice(&bytes).unwrap(), delta);
        delta.recent_ids_kept = Some(7);
        let back = CheckpointDelta::from_json_slice(&delta.to_json_vec()).unwrap();
        assert_eq!(back.recent_ids_kept, Some(7));
    }
}
