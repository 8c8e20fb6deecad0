//! Deep merge and state operations on the state map.
//!
//! Every write goes through [`StateMap`]/[`StateArray`](crate::state::StateArray)
//! methods, which copy only the containers on the written path (shallowly)
//! when they are shared with a snapshot: a write costs O(change × depth).

use crate::directive::Directive;
use crate::effect::{Effect, StateOp};
use crate::state::{StateMap, StateValue};

/// Deep-merges `src` into `dst`: where both sides hold an object the
/// objects are merged recursively, any other value in `src` (arrays,
/// scalars, `null`) replaces what `dst` had. Costs O(size of `src` ×
/// depth): nothing of `dst` beside the merged path is copied.
///
/// ```
/// use jido::agent::deep_merge;
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
/// use jido::agent::apply_state_op;
/// use jido::effect::StateOp;
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
        if let StateValue::Object(map) = value {
            *state = map;
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
    match slot {
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
        match probe.get(key) {
            Some(StateValue::Object(map)) => probe = map,
            _ => return,
        }
    }
    if !probe.contains_key(last) {
        return;
    }
    let mut current = state;
    for key in parents {
        match current.get_mut(key) {
            Some(StateValue::Object(map)) => current = map,
            _ => return,
        }
    }
    current.remove(last);
}

/// Applies the state operations among `effects` to `state`, in order, and
/// returns the other effects as directives, in order.
pub(crate) fn apply_effects(state: &mut StateMap, effects: Vec<Effect>) -> Vec<Directive> {
    let mut directives = Vec::new();
    for effect in effects {
        match effect {
            Effect::State(op) => apply_state_op(state, op),
            Effect::Directive(d) => directives.push(d),
        }
    }
    directives
}

/// The directives among `effects`, dropping state operations.
pub(crate) fn external_directives(effects: Vec<Effect>) -> Vec<Directive> {
    effects
        .into_iter()
        .filter_map(|e| match e {
            Effect::State(_) => None,
            Effect::Directive(d) => Some(d),
        })
        .collect()
}
