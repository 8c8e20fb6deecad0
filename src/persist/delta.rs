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
///   elements pushed onto its end.
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
    /// array. `base` is left unchanged then.
    pub fn apply_to(self, base: &mut Checkpoint) -> Result<()> {
        let Self {
            mut checkpoint,
            keys,
            mut appended,
        } = self;
        // Check before moving anything, so that a failure changes nothing.
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
