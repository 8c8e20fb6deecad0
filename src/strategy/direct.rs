//! The Direct strategy: run every instruction now, in order.

use super::{
    Command, Strategy, StrategyContext, apply_instruction_result, apply_outcome,
    parse_instruction_result, unknown_command,
};
use crate::agent_data::AgentData;
use crate::directive::{DEFAULT_RESULT_ACTION, Directive, error_context};
use crate::exec::Outcome;

/// The default strategy: runs each instruction with Exec, sequentially, in
/// the caller.
///
/// * Success: the output is deep-merged into the state, then the effects
///   apply in order (state operations edit the state, other effects are
///   returned as directives).
/// * Failure: an Error directive (context `"instruction"`, execution error
///   "instruction failed", `reason` = the error's envelope) followed by
///   the directives among the failed action's effects; its state
///   operations are dropped. The next instruction still runs.
/// * The strategy command `"instruction_result"` (the result of a
///   [`Directive::RunInstruction`], see
///   [`instruction_feedback`](super::instruction_feedback)) is applied the
///   same way; a malformed one gives an Error directive with context
///   `"instruction_result"`.
/// * Any other strategy command gives an Error directive (context
///   `"strategy_command"`).
///
/// Direct keeps no strategy state; its snapshot is always idle.
#[derive(Debug, Clone, Copy, Default)]
pub struct Direct;

impl Strategy for Direct {
    fn name(&self) -> &'static str {
        "direct"
    }

    async fn cmd(
        &self,
        agent: &mut AgentData,
        commands: Vec<Command>,
        ctx: &StrategyContext,
    ) -> Vec<Directive> {
        let mut directives = Vec::new();
        let mut commands = commands.into_iter();
        // `let … else` rather than `for`, and the run started by a plain
        // function: no command then stays in the future across the await.
        loop {
            let Some(command) = commands.next() else {
                break;
            };
            let Some(run) = start(agent, command, ctx, &mut directives) else {
                continue;
            };
            let outcome = run.await;
            directives.extend(apply_outcome(agent, outcome));
        }
        directives
    }
}

/// Starts the run of an instruction; handles a strategy command at once
/// (only the instruction result is known to Direct) and returns `None`.
///
/// Exec boxes a spawned run whole, so the future held across the await is
/// a pointer; an inline run (`timeout 0`) is held in place (about 0.4 KB:
/// no task, timer or shutdown wait), so the `cmd` future the runtime boxes
/// for each signal stays below 1 KB and a signal allocates no run box.
fn start<'a>(
    agent: &mut AgentData,
    command: Command,
    ctx: &'a StrategyContext,
    directives: &mut Vec<Directive>,
) -> Option<impl Future<Output = Outcome> + Send + use<'a>> {
    match command {
        Command::Run(instruction) => {
            return Some(ctx.exec().execute(instruction, ctx.action_context(agent)));
        }
        Command::Strategy {
            name,
            params,
            effects,
        } if name == DEFAULT_RESULT_ACTION => match parse_instruction_result(&params) {
            Ok(result) => directives.extend(apply_instruction_result(agent, result, effects)),
            Err(error) => {
                directives.push(Directive::error(error, error_context::INSTRUCTION_RESULT))
            }
        },
        other => directives.push(unknown_command(&other)),
    }
    None
}
