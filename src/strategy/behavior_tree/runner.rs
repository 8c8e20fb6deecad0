//! How an action node runs its action, and how the result lands in the
//! agent state.

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::action::DynAction;
use crate::agent_data::AgentData;
use crate::context::Context;
use crate::directive::Directive;
use crate::effect::Effect;
use crate::error::Result;
use crate::exec::{Exec, ExecOptions, Outcome};
use crate::instruction::Instruction;
use crate::state::StateMap;

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
        state: StateMap,
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
        state: StateMap,
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

/// Applies a run to the agent as the Direct strategy does: on success the
/// output is deep-merged, then the state operations among the effects are
/// applied in order and the other effects returned as directives. A failed
/// run applies no state operation; the directives among its effects are
/// still returned.
pub(crate) fn apply_outcome(
    agent: &mut AgentData,
    outcome: Outcome,
) -> (Result<Map<String, Value>>, Vec<Directive>) {
    match outcome.result {
        Ok(output) => {
            let directives = agent.apply_output(output.clone(), outcome.effects);
            (Ok(output), directives)
        }
        Err(error) => {
            let directives = outcome
                .effects
                .into_iter()
                .filter_map(|e| match e {
                    Effect::Directive(d) => Some(d),
                    Effect::State(_) => None,
                })
                .collect();
            (Err(error), directives)
        }
    }
}
