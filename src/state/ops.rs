//! Deep merge and state operations on the state map.
//!
//! Every write goes through [`StateMap`]/[`StateArray`](crate::state::StateArray)
//! methods, which copy only the containers on the written path (shallowly)
//! when they are shared with a snapshot: a write costs O(change × depth).

use super::{StateMap, StateValue};

/// An edit of an agent's state, applied in order after the action's output
/// is merged. State operations never appear among the returned directives.
///
/// Values are [`StateValue`]s: an action may write back (part of) the state
/// it read through [`Context::state`](crate::Context::state) without a
/// copy. The constructors take anything that converts, `serde_json` values
/// included.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum StateOp {
    /// Deep-merge a map into the state.
    SetState(StateMap),
    /// Replace the whole state.
    ReplaceState(StateMap),
    /// Remove top-level keys.
    DeleteKeys(Vec<String>),
    /// Set the value at a path, creating intermediate objects (an
    /// intermediate value that is not an object is replaced by one). An
    /// empty path replaces the whole state when the value is an object and
    /// does nothing otherwise.
    SetPath {
        /// The keys from the top of the state down.
        path: Vec<String>,
        /// The value to put there.
        value: StateValue,
    },
    /// Remove the value at a path (nothing happens when it is absent or
    /// when the path is empty).
    DeletePath(Vec<String>),
    /// Append a value to the array at a path: O(log n) on a long array,
    /// nothing else is copied. Intermediate objects are created as for
    /// [`StateOp::SetPath`]; a missing value, or one that is not an array,
    /// becomes a one-element array. An empty path does nothing.
    Append {
        /// The keys from the top of the state down to the array.
        path: Vec<String>,
        /// The value to append.
        value: StateValue,
    },
}

impl StateOp {
    /// [`StateOp::SetPath`] from anything that lists the keys.
    ///
    /// ```
    /// use jido::state::StateOp;
    /// use serde_json::json;
    ///
    /// let op = StateOp::set_path(["config", "retries"], json!(3));
    /// assert_eq!(op, StateOp::SetPath { path: vec!["config".into(), "retries".into()], value: 3.into() });
    /// ```
    pub fn set_path<I, K>(path: I, value: impl Into<StateValue>) -> Self
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        StateOp::SetPath {
            path: path.into_iter().map(Into::into).collect(),
            value: value.into(),
        }
    }

    /// [`StateOp::Append`] from anything that lists the keys.
    ///
    /// ```
    /// use jido::state::StateOp;
    /// use jido::state::StateMap;
    /// use serde_json::json;
    ///
    /// let mut state = StateMap::new();
    /// StateOp::append(["chat", "messages"], json!({"role": "user"})).apply(&mut state);
    /// StateOp::append(["chat", "messages"], json!({"role": "assistant"})).apply(&mut state);
    /// assert_eq!(state["chat"]["messages"][1]["role"], "assistant");
    /// ```
    pub fn append<I, K>(path: I, value: impl Into<StateValue>) -> Self
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        StateOp::Append {
            path: path.into_iter().map(Into::into).collect(),
            value: value.into(),
        }
    }

    /// [`StateOp::SetState`] from a map (a `serde_json` map or a
    /// [`StateMap`]).
    pub fn set_state(attrs: impl Into<StateMap>) -> Self {
        StateOp::SetState(attrs.into())
    }

    /// [`StateOp::ReplaceState`] from a map (a `serde_json` map or a
    /// [`StateMap`]).
    pub fn replace_state(state: impl Into<StateMap>) -> Self {
        StateOp::ReplaceState(state.into())
    }

    /// [`StateOp::DeletePath`] from anything that lists the keys.
    pub fn delete_path<I, K>(path: I) -> Self
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        StateOp::DeletePath(path.into_iter().map(Into::into).collect())
    }

    /// [`StateOp::DeleteKeys`] from anything that lists the keys.
    pub fn delete_keys<I, K>(keys: I) -> Self
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        StateOp::DeleteKeys(keys.into_iter().map(Into::into).collect())
    }

    /// Applies the operation to `state` (see [`apply_state_op`]).
    pub fn apply(self, state: &mut StateMap) {
        apply_state_op(state, self);
    }
}

/// Deep-merges `src` into `dst`: where both sides hold an object the
/// objects are merged recursively, any other value in `src` (arrays,
/// scalars, `null`) replaces what `dst` had. Costs O(size of `src` ×
/// depth): nothing of `dst` beside the merged path is copied.
///
/// ```
/// use jido::state::deep_merge;
/// use jido::state::StateMap;
/// use serde_json::json;
///
/// let mut state = StateMap::from(json!({"a": {"x": 1, "y": 2}, "list": [1, 2]}).as_object().unwrap());
/// deep_merge(&mut state, json!({"a": {"y": 3}, "list": [9]}).as_object().unwrap().clone());
/// assert_eq!(state, json!({"a": {"x": 1, "y": 3}, "list": [9]}));
/// ```
pub fn deep_merge(dst: &mut StateMap, src: impl Into<StateMap>) {
    dst.deep_merge(src);
}

/// Applies one state operation to `state`:
///
/// * [`StateOp::SetState`]: deep merge (see [`deep_merge`]);
/// * [`StateOp::ReplaceState`]: replace everything, reserved keys included;
/// * [`StateOp::DeleteKeys`]: drop top-level keys;
/// * [`StateOp::SetPath`]: set a nested value, creating (or replacing with)
///   objects on the way; an empty path replaces the state when the value
///   is an object and is ignored otherwise;
/// * [`StateOp::DeletePath`]: remove a nested value; a missing path or an
///   empty one changes nothing;
/// * [`StateOp::Append`]: push onto the array at a path (O(log n)),
///   creating objects on the way and the array when it is missing (a value
///   that is not an array is replaced by a one-element array); an empty
///   path changes nothing.
///
/// ```
/// use jido::state::apply_state_op;
/// use jido::state::StateOp;
/// use jido::state::StateMap;
/// use serde_json::json;
///
/// let mut state = StateMap::new();
/// apply_state_op(&mut state, StateOp::set_path(["a", "b"], json!(1)));
/// apply_state_op(&mut state, StateOp::set_path(["a", "c"], json!(2)));
/// apply_state_op(&mut state, StateOp::delete_path(["a", "b"]));
/// apply_state_op(&mut state, StateOp::append(["log"], "x"));
/// assert_eq!(state, json!({"a": {"c": 2}, "log": ["x"]}));
/// ```
pub fn apply_state_op(state: &mut StateMap, op: StateOp) {
    match op {
        StateOp::SetState(attrs) => deep_merge(state, attrs),
        StateOp::ReplaceState(new) => *state = new,
        StateOp::DeleteKeys(keys) => {
            for key in keys {
                state.remove(&key);
            }
        }
        StateOp::SetPath { path, value } => set_path(state, &path, value),
        StateOp::DeletePath(path) => delete_path(state, &path),
        StateOp::Append { path, value } => append(state, &path, value),
    }
}

/// The object holding the last key of `parents`' path, created (or
/// replacing non-objects) on the way.
fn parent_mut<'a>(state: &'a mut StateMap, parents: &[String]) -> &'a mut StateMap {
    let mut current = state;
    for key in parents {
        current = current.object_mut(key);
    }
    current
}

fn set_path(state: &mut StateMap, path: &[String], value: StateValue) {
    let Some((last, parents)) = path.split_last() else {
        if let Some(map) = value.resolved().as_object() {
            *state = map.clone();
        }
        return;
    };
    parent_mut(state, parents).insert(last, value);
}

fn append(state: &mut StateMap, path: &[String], value: StateValue) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let slot = parent_mut(state, parents)
        .entry_or_insert_with(last, || StateValue::Array(Default::default()));
    match slot.force() {
        StateValue::Array(array) => array.push(value),
        other => *other = StateValue::from(vec![value]),
    }
}

fn delete_path(state: &mut StateMap, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    // Check first: a missing path must not copy a shared map.
    let mut probe = &*state;
    for key in parents {
        match probe.get(key).and_then(StateValue::as_object) {
            Some(map) => probe = map,
            _ => return,
        }
    }
    if !probe.contains_key(last) {
        return;
    }
    let mut current = state;
    for key in parents {
        match current.get_mut(key).and_then(StateValue::as_object_mut) {
            Some(map) => current = map,
            _ => return,
        }
    }
    current.remove(last);
}
