//! Effects: what an action asks for beside its output.
//!
//! An action pushes effects with [`Context::push_effect`](crate::Context::push_effect).
//! State operations ([`StateOp`]) edit the agent's state when the agent
//! applies the result; every other effect is a [`Directive`] handed to the
//! runtime, in order.

use crate::directive::Directive;
use crate::state::{StateMap, StateValue};

/// One effect of an action.
#[non_exhaustive]
#[derive(Debug, Clone)]
// Directives (which carry signals) are the common effect; boxing them would
// add an allocation per effect.
#[allow(clippy::large_enum_variant)]
pub enum Effect {
    /// Edit the agent state.
    State(StateOp),
    /// Ask the runtime to do something.
    Directive(Directive),
}

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
    /// use jido::effect::StateOp;
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
    /// use jido::effect::StateOp;
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

    /// Applies the operation to `state` (see [`crate::agent::apply_state_op`]).
    pub fn apply(self, state: &mut StateMap) {
        crate::agent::apply_state_op(state, self);
    }
}

impl From<StateOp> for Effect {
    fn from(op: StateOp) -> Self {
        Effect::State(op)
    }
}

impl From<Directive> for Effect {
    fn from(d: Directive) -> Self {
        Effect::Directive(d)
    }
}

impl From<crate::directive::SpawnAgent> for Effect {
    fn from(d: crate::directive::SpawnAgent) -> Self {
        Effect::Directive(d.into())
    }
}

impl From<crate::directive::Cron> for Effect {
    fn from(d: crate::directive::Cron) -> Self {
        Effect::Directive(d.into())
    }
}

impl From<crate::directive::RunInstruction> for Effect {
    fn from(d: crate::directive::RunInstruction) -> Self {
        Effect::Directive(d.into())
    }
}
