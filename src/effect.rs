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
    /// Set the value at a path, creating intermediate objects.
    SetPath {
        /// The keys from the top of the state down.
        path: Vec<String>,
        /// The value to put there.
        value: Value,
    },
    /// Remove the value at a path (nothing happens when it is absent).
    DeletePath(Vec<String>),
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
