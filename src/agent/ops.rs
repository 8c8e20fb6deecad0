//! Deep merge and state operations on JSON objects.

use serde_json::{Map, Value};

use crate::directive::Directive;
use crate::effect::{Effect, StateOp};

/// Deep-merges `src` into `dst`: where both sides hold an object the
/// objects are merged recursively, any other value in `src` (arrays,
/// scalars, `null`) replaces what `dst` had. Costs O(size of `src`).
///
/// ```
/// use jido::agent::deep_merge;
/// use serde_json::json;
///
/// let mut state = json!({"a": {"x": 1, "y": 2}, "list": [1, 2]}).as_object().unwrap().clone();
/// deep_merge(&mut state, json!({"a": {"y": 3}, "list": [9]}).as_object().unwrap().clone());
/// assert_eq!(serde_json::Value::Object(state), json!({"a": {"x": 1, "y": 3}, "list": [9]}));
/// ```
pub fn deep_merge(dst: &mut Map<String, Value>, src: Map<String, Value>) {
    for (key, value) in src {
        match (dst.get_mut(&key), value) {
            (Some(Value::Object(d)), Value::Object(s)) => deep_merge(d, s),
            (_, value) => {
                dst.insert(key, value);
            }
        }
    }
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
///   empty one changes nothing.
///
/// ```
/// use jido::agent::apply_state_op;
/// use jido::effect::StateOp;
/// use serde_json::{json, Map, Value};
///
/// let mut state = Map::new();
/// apply_state_op(&mut state, StateOp::set_path(["a", "b"], json!(1)));
/// apply_state_op(&mut state, StateOp::set_path(["a", "c"], json!(2)));
/// apply_state_op(&mut state, StateOp::delete_path(["a", "b"]));
/// assert_eq!(Value::Object(state), json!({"a": {"c": 2}}));
/// ```
pub fn apply_state_op(state: &mut Map<String, Value>, op: StateOp) {
    match op {
        StateOp::SetState(attrs) => deep_merge(state, attrs),
        StateOp::ReplaceState(new) => *state = new,
        StateOp::DeleteKeys(keys) => {
            for key in keys {
                state.shift_remove(&key);
            }
        }
        StateOp::SetPath { path, value } => set_path(state, path, value),
        StateOp::DeletePath(path) => delete_path(state, &path),
    }
}

fn set_path(state: &mut Map<String, Value>, path: Vec<String>, value: Value) {
    let mut keys = path.into_iter();
    let Some(first) = keys.next() else {
        if let Value::Object(map) = value {
            *state = map;
        }
        return;
    };
    let mut current = state;
    let mut key = first;
    for next in keys {
        let slot = current
            .entry(key)
            .and_modify(|v| {
                if !v.is_object() {
                    *v = Value::Object(Map::new());
                }
            })
            .or_insert_with(|| Value::Object(Map::new()));
        current = match slot {
            Value::Object(map) => map,
            // Just made an object above.
            _ => return,
        };
        key = next;
    }
    current.insert(key, value);
}

fn delete_path(state: &mut Map<String, Value>, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = state;
    for key in parents {
        match current.get_mut(key) {
            Some(Value::Object(map)) => current = map,
            _ => return,
        }
    }
    current.shift_remove(last);
}

/// Applies the state operations among `effects` to `state`, in order, and
/// returns the other effects as directives, in order.
pub(crate) fn apply_effects(
    state: &mut Map<String, Value>,
    effects: Vec<Effect>,
) -> Vec<Directive> {
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
            Effect::Directive(d) => Some(d),
            Effect::State(_) => None,
        })
        .collect()
}
