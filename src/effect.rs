//! Effects: what an action asks for beside its output.
//!
//! An action pushes effects with [`Context::push_effect`](crate::Context::push_effect).
//! State operations ([`StateOp`]) edit the agent's state when the agent
//! applies the result; every other effect is a [`Directive`] handed to the
//! runtime, in order.

use std::sync::atomic::AtomicU8;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;
use tracing::Span;

use crate::action::DynAction;
use crate::action_metadata::HasMetadata;
use crate::context::Context;
use crate::directive::Directive;
use crate::executor::{Exec, IDLE, PollFlag};
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

/// What one attempt (or compensation) shares between its caller, its task
/// and every clone of its context, in one allocation: the effects it
/// pushed, in order (the sink a context built by Exec holds, type-erased,
/// see [`Context`]'s fields), and its task's poll flag (see
/// [`PollFlag`]).
struct AttemptCell {
    effects: Mutex<Vec<Effect>>,
    poll: AtomicU8,
    /// The attempt's `jido.action` span, entered around each poll of its
    /// task (kept here rather than in the task's future, which tokio
    /// copies several times on every spawn).
    span: Span,
}

impl PollFlag for AttemptCell {
    fn poll_flag(&self) -> &AtomicU8 {
        &self.poll
    }

    fn span(&self) -> Option<&Span> {
        Some(&self.span)
    }
}

impl Context {
    /// Records an effect (a state operation or a directive) of the running
    /// action. Exec returns the effects of the last attempt beside its
    /// output, or beside its error. Only the context Exec hands to an
    /// action collects effects: on a context built by hand (not yet given
    /// to a run) they are discarded.
    pub fn push_effect(&self, effect: impl Into<Effect>) {
        if let Some(cell) = self.cell() {
            cell.effects
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(effect.into());
        }
    }

    /// The context of one attempt (or compensation) of `action`: the
    /// caller's values and state, the action's metadata, the resolved
    /// deadline and the one nested runs inherit, the executor running it,
    /// and a fresh effect sink.
    ///
    /// Returns the context and the attempt's own handle on its effects and
    /// poll flag, so that the context itself can be moved into the
    /// attempt's task.
    ///
    /// `span` is the attempt's span, entered around each poll of its task.
    pub(crate) fn for_attempt(
        &self,
        action: &DynAction,
        deadline: Option<Instant>,
        nested_deadline: Option<Instant>,
        exec: Exec,
        span: Span,
    ) -> (Self, AttemptHandle) {
        let cell = Arc::new(AttemptCell {
            effects: Mutex::default(),
            poll: AtomicU8::new(IDLE),
            span,
        });
        let handle = AttemptHandle(Arc::clone(&cell));
        let action: Arc<dyn HasMetadata> = action.erased().clone();
        let ctx = self.for_run(action, deadline, nested_deadline, exec, cell);
        (ctx, handle)
    }

    fn cell(&self) -> Option<&AttemptCell> {
        self.effect_sink()?.downcast_ref::<AttemptCell>()
    }
}

/// Exec's handle on one attempt's shared cell (see [`Context::for_attempt`]).
pub(crate) struct AttemptHandle(Arc<AttemptCell>);

impl AttemptHandle {
    /// Takes the effects pushed so far.
    pub(crate) fn take_effects(&self) -> Vec<Effect> {
        std::mem::take(
            &mut *self
                .0
                .effects
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// The attempt's `jido.action` span.
    pub(crate) fn span(&self) -> &Span {
        &self.0.span
    }

    /// The poll flag for the attempt's task (shared with its effect sink:
    /// no allocation of its own).
    pub(crate) fn poll_flag(&self) -> Arc<dyn PollFlag> {
        Arc::clone(&self.0) as Arc<dyn PollFlag>
    }
}
