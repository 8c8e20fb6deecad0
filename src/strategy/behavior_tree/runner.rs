//! How an action node runs its action, and how the result lands in the
//! agent state.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::action::DynAction;
use crate::agent::{apply_state_op, deep_merge};
use crate::context::Context;
use crate::directive::Directive;
use crate::effect::Effect;
use crate::error::Result;
use crate::exec::{Exec, ExecOptions, Outcome};
use crate::instruction::Instruction;

/// Runs the action of an action node. The strategy uses [`ExecRunner`];
/// unit tests fake it.
pub(crate) trait ActionRunner: Send + Sync {
    /// Runs `action` with resolved `params` and the node's `opts`, the agent
    /// state (as it is at this point of the tick) in the context.
    fn run<'a>(
        &'a self,
        action: &'a DynAction,
        params: Value,
        opts: ExecOptions,
        state: Arc<Map<String, Value>>,
    ) -> BoxFuture<'a, Outcome>;
}

/// Runs actions through an [`Exec`]; the node's options win over the
/// options of the `cmd`.
pub(crate) struct ExecRunner<'a> {
    pub(crate) exec: &'a Exec,
    pub(crate) opts: ExecOptions,
    /// The strategy context's action context; each run replaces its state.
    pub(crate) base: Context,
}

impl ActionRunner for ExecRunner<'_> {
    fn run<'a>(
        &'a self,
        action: &'a DynAction,
        params: Value,
        opts: ExecOptions,
        state: Arc<Map<String, Value>>,
    ) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let instruction = Instruction::new(action.clone())
                .with_params(params)
                .with_opts(opts.or(&self.opts));
            self.exec
                .execute(instruction, self.base.clone().with_state(state))
                .await
        })
    }
}

/// Applies a run to the agent state as the Direct strategy does: on
/// success the output is deep-merged, then the state operations are
/// applied in order; the other effects are returned as directives. A failed
/// run applies no state operation; the directives among its effects are
/// still returned.
pub(crate) fn apply_outcome(
    state: &mut Map<String, Value>,
    outcome: Outcome,
) -> (Result<Map<String, Value>>, Vec<Directive>) {
    let ok = outcome.result.is_ok();
    if let Ok(output) = &outcome.result {
        deep_merge(state, output.clone());
    }
    let mut directives = Vec::new();
    for effect in outcome.effects {
        match effect {
            Effect::State(op) if ok => apply_state_op(state, op),
            Effect::State(_) => {}
            Effect::Directive(d) => directives.push(d),
        }
    }
    (outcome.result, directives)
}
