//! Effects: what an action asks for beside its output.
//!
//! An action pushes effects with [`Context::push_effect`](crate::Context::push_effect).
//! State operations ([`StateOp`]) edit the agent's state when the agent
//! applies the result; every other effect is a [`Directive`] handed to the
//! runtime, in order.

use serde_json::{Map, Value};

use crate::directive::Directive;

/// One effect of an action.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub enum Effect {
    /// Edit the agent state.
    State(StateOp),
    /// Ask the runtime to do something.
    Directive(Directive),
}

/// An edit of an agent's state, applied in order after the action's output
/// is merged. State operations never appear among the returned directives.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum StateOp {
    /// Deep-merge a map into the state.
    SetState(Map<String, Value>),
    /// Replace the whole state.
    ReplaceState(Map<String, Value>),
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
        value: Value,
    },
    /// Remove the value at a path (nothing happens when it is absent or
    /// when the path is empty).
    DeletePath(Vec<String>),
}

impl StateOp {
    /// [`StateOp::SetPath`] from anything that lists the keys.
    ///
    /// ```
    /// use jido::effect::StateOp;
    /// use serde_json::json;
    ///
    /// let op = StateOp::set_path(["config", "retries"], json!(3));
    /// assert_eq!(op, StateOp::SetPath { path: vec!["config".into(), "retries".into()], value: json!(3) });
    /// ```
    pub fn set_path<I, K>(path: I, value: Value) -> Self
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        StateOp::SetPath {
            path: path.into_iter().map(Into::into).collect(),
            value,
        }
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
    pub fn apply(self, state: &mut Map<String, Value>) {
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
