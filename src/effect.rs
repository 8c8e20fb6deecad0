//! Effects: what an action asks for beside its output.
//!
//! An action pushes effects with [`Context::push_effect`](crate::Context::push_effect).
//! State operations ([`StateOp`]) edit the agent's state when the agent
//! applies the result; every other effect is a [`Directive`] handed to the
//! runtime, in order.

use crate::directive::Directive;
pub use crate::state::StateOp;

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

/// Applies the state operations among `effects` to `state`, in order, and
/// returns the other effects as directives, in order.
pub(crate) fn apply_effects(
    state: &mut crate::state::StateMap,
    effects: Vec<Effect>,
) -> Vec<Directive> {
    let mut directives = Vec::new();
    for effect in effects {
        match effect {
            Effect::State(op) => op.apply(state),
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
