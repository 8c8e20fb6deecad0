//! Strategies: how an agent's `cmd` runs its instructions.
//!
//! (Skeleton: Direct, FSM and behaviour trees land with the agent work.
//! The trait shape below is the contract they implement.)

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::agent::{AgentState, SignalRoute};
use crate::directive::Directive;
use crate::exec::{Exec, ExecOptions};
use crate::instruction::Instruction;

pub mod behavior_tree;

/// Key of the strategy's own state inside the agent state.
pub const STRATEGY_KEY: &str = "__strategy__";

/// One input of [`Strategy::cmd`]: an instruction to run, or a command
/// addressed to the strategy itself (FSM result feedback, behaviour-tree
/// halt/reset, a custom strategy's verbs).
#[non_exhaustive]
#[derive(Debug, Clone)]
pub enum Command {
    /// Run this instruction.
    Run(Instruction),
    /// A command for the strategy, with its params.
    Strategy {
        /// The command name, e.g. `"fsm_instruction_result"`.
        name: String,
        /// Its params.
        params: Value,
    },
}

/// What a strategy sees besides the agent.
#[derive(Debug, Clone)]
pub struct StrategyContext {
    /// The agent type's name.
    pub agent_name: &'static str,
    /// The executor (instance) actions run on.
    pub exec: Exec,
    /// Options applied to every instruction of this `cmd`.
    pub exec_options: ExecOptions,
}

/// Status of a strategy, as reported by [`Snapshot`].
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotStatus {
    /// Nothing going on (the default).
    #[default]
    Idle,
    /// Working.
    Running,
    /// Waiting for something outside (a result, a tick).
    Waiting,
    /// Finished well.
    Success,
    /// Finished badly.
    Failure,
}

/// A strategy's state seen from outside, without its internals.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// The status.
    pub status: SnapshotStatus,
    /// Whether the status is terminal (success or failure).
    pub done: bool,
    /// The strategy's main output, if any.
    pub result: Option<Value>,
    /// Everything else the strategy wants to show.
    pub details: Map<String, Value>,
}

/// An execution model for an agent's `cmd`. Only [`cmd`](Strategy::cmd) is
/// required.
pub trait Strategy: Send + Sync + 'static {
    /// Sets up the strategy's state when the agent starts.
    fn init(&self, agent: &mut AgentState, ctx: &StrategyContext) -> Vec<Directive> {
        let _ = (agent, ctx);
        Vec::new()
    }

    /// Runs `commands` against `agent`, returning the directives for the
    /// runtime.
    fn cmd(
        &self,
        agent: &mut AgentState,
        commands: Vec<Command>,
        ctx: &StrategyContext,
    ) -> impl Future<Output = Vec<Directive>> + Send;

    /// One more turn of multi-turn work (scheduled through a Schedule
    /// directive).
    fn tick(
        &self,
        agent: &mut AgentState,
        ctx: &StrategyContext,
    ) -> impl Future<Output = Vec<Directive>> + Send {
        let _ = (agent, ctx);
        async { Vec::new() }
    }

    /// The strategy's state seen from outside.
    fn snapshot(&self, agent: &AgentState, ctx: &StrategyContext) -> Snapshot {
        let _ = (agent, ctx);
        Snapshot::default()
    }

    /// Routes the strategy adds to its agent's router (priority 50 unless
    /// they say otherwise).
    fn signal_routes(&self, ctx: &StrategyContext) -> Vec<SignalRoute> {
        let _ = ctx;
        Vec::new()
    }
}

/// Any strategy, type-erased, cheap to clone.
#[derive(Clone)]
pub struct DynStrategy(Arc<dyn ErasedStrategy>);

trait ErasedStrategy: Send + Sync + 'static {
    fn init(&self, agent: &mut AgentState, ctx: &StrategyContext) -> Vec<Directive>;
    fn cmd<'a>(
        &'a self,
        agent: &'a mut AgentState,
        commands: Vec<Command>,
        ctx: &'a StrategyContext,
    ) -> BoxFuture<'a, Vec<Directive>>;
    fn tick<'a>(
        &'a self,
        agent: &'a mut AgentState,
        ctx: &'a StrategyContext,
    ) -> BoxFuture<'a, Vec<Directive>>;
    fn snapshot(&self, agent: &AgentState, ctx: &StrategyContext) -> Snapshot;
    fn signal_routes(&self, ctx: &StrategyContext) -> Vec<SignalRoute>;
}

impl<S: Strategy> ErasedStrategy for S {
    fn init(&self, agent: &mut AgentState, ctx: &StrategyContext) -> Vec<Directive> {
        Strategy::init(self, agent, ctx)
    }
    fn cmd<'a>(
        &'a self,
        agent: &'a mut AgentState,
        commands: Vec<Command>,
        ctx: &'a StrategyContext,
    ) -> BoxFuture<'a, Vec<Directive>> {
        Box::pin(Strategy::cmd(self, agent, commands, ctx))
    }
    fn tick<'a>(
        &'a self,
        agent: &'a mut AgentState,
        ctx: &'a StrategyContext,
    ) -> BoxFuture<'a, Vec<Directive>> {
        Box::pin(Strategy::tick(self, agent, ctx))
    }
    fn snapshot(&self, agent: &AgentState, ctx: &StrategyContext) -> Snapshot {
        Strategy::snapshot(self, agent, ctx)
    }
    fn signal_routes(&self, ctx: &StrategyContext) -> Vec<SignalRoute> {
        Strategy::signal_routes(self, ctx)
    }
}

impl DynStrategy {
    /// Erases `strategy`.
    pub fn new(strategy: impl Strategy) -> Self {
        Self(Arc::new(strategy))
    }

    /// See [`Strategy::init`].
    pub fn init(&self, agent: &mut AgentState, ctx: &StrategyContext) -> Vec<Directive> {
        self.0.init(agent, ctx)
    }

    /// See [`Strategy::cmd`].
    pub async fn cmd(
        &self,
        agent: &mut AgentState,
        commands: Vec<Command>,
        ctx: &StrategyContext,
    ) -> Vec<Directive> {
        self.0.cmd(agent, commands, ctx).await
    }

    /// See [`Strategy::tick`].
    pub async fn tick(&self, agent: &mut AgentState, ctx: &StrategyContext) -> Vec<Directive> {
        self.0.tick(agent, ctx).await
    }

    /// See [`Strategy::snapshot`].
    pub fn snapshot(&self, agent: &AgentState, ctx: &StrategyContext) -> Snapshot {
        self.0.snapshot(agent, ctx)
    }

    /// See [`Strategy::signal_routes`].
    pub fn signal_routes(&self, ctx: &StrategyContext) -> Vec<SignalRoute> {
        self.0.signal_routes(ctx)
    }
}

impl std::fmt::Debug for DynStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DynStrategy")
    }
}
