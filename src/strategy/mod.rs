//! Strategies: how an agent's `cmd` runs its instructions.
//!
//! A [`Strategy`] sits between [`AgentState::cmd`](crate::AgentState::cmd) and Exec. It receives
//! the normalised [`Command`]s (instructions to run, or commands addressed
//! to the strategy itself) and returns the [`Directive`]s for the runtime.
//! Its own state lives in the agent state under
//! [`__strategy__`](STRATEGY_KEY), so it is checkpointed with the agent and
//! visible through [`Snapshot`]s.
//!
//! Shipped strategies: [`Direct`] (the default: run now, in order) and
//! [`Fsm`] (a finite state machine running one instruction per
//! [`Directive::RunInstruction`]).
//!
//! # A custom strategy
//!
//! Only [`Strategy::cmd`] is required. This one retries each failed
//! instruction up to `max_retries` times (an option read from the
//! strategy's JSON options) before reporting it:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use jido::prelude::*;
//! use jido::strategy::{apply_outcome, Strategy, StrategyContext};
//! use serde_json::json;
//!
//! struct RetryStrategy;
//!
//! impl Strategy for RetryStrategy {
//!     async fn cmd(
//!         &self,
//!         agent: &mut AgentData,
//!         commands: Vec<Command>,
//!         ctx: &StrategyContext,
//!     ) -> Vec<Directive> {
//!         let max_retries = ctx.options().get("max_retries").and_then(|v| v.as_u64()).unwrap_or(3);
//!         let mut directives = Vec::new();
//!         for command in commands {
//!             let Command::Run(instruction) = command else {
//!                 directives.push(jido::strategy::unknown_command(&command));
//!                 continue;
//!             };
//!             let mut tries = 0;
//!             let outcome = loop {
//!                 let outcome = ctx.run(agent, instruction.clone()).await;
//!                 if outcome.result.is_ok() || tries >= max_retries {
//!                     break outcome;
//!                 }
//!                 tries += 1;
//!             };
//!             directives.extend(apply_outcome(agent, outcome));
//!         }
//!         directives
//!     }
//! }
//!
//! static CALLS: AtomicU32 = AtomicU32::new(0);
//!
//! #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
//! struct P {}
//! struct Flaky;
//! impl Action for Flaky {
//!     type Params = P;
//!     type Output = serde_json::Value;
//!     const NAME: &'static str = "flaky";
//!     async fn run(&self, _: P, _: &Context) -> jido::Result<serde_json::Value> {
//!         let n = CALLS.fetch_add(1, Ordering::SeqCst) + 1;
//!         if n < 3 { Err(Error::execution("not yet")) } else { Ok(json!({"calls": n})) }
//!     }
//! }
//!
//! struct Resilient;
//! impl Agent for Resilient {
//!     const NAME: &'static str = "resilient";
//!     type Schema = ();
//!     fn strategy(&self) -> DynStrategy {
//!         DynStrategy::new(RetryStrategy).with_option("max_retries", 5)
//!     }
//! }
//!
//! let mut agent = AgentState::new(Resilient, AgentOptions::new());
//! // No Exec-level retries: the strategy does the retrying.
//! let directives = agent.cmd(Flaky, ExecOptions::new().max_retries(0)).await;
//! assert!(directives.is_empty());
//! assert_eq!(agent.state()["calls"], 3);
//! # }
//! ```

pub mod behavior_tree;
mod direct;
mod fsm;
mod route;

pub use behavior_tree::BehaviorTree;
pub use direct::Direct;
pub use fsm::{DEFAULT_FSM_HISTORY, FSM_RESULT_ACTION, Fsm, FsmState, FsmTransition};
pub use route::{RouteTarget, SignalRoute};

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::action::DynAction;
use crate::agent_data::AgentData;
use crate::context::Context;
use crate::directive::{Directive, error_context};
use crate::effect::Effect;
use crate::effect::external_directives;
use crate::error::{Error, Result};
use crate::exec::{Exec, ExecOptions, Outcome};
use crate::instruction::{Instruction, IntoInstructions};
use crate::signal::Signal;

pub use crate::directive::DEFAULT_RESULT_ACTION;
pub use crate::state::STRATEGY_KEY;

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
        /// Its params (JSON, as they come from a signal).
        params: Value,
        /// Effects travelling with the params: those of the instruction
        /// whose result this command reports (see
        /// [`instruction_feedback`]); empty otherwise.
        effects: Vec<Effect>,
    },
}

impl Command {
    /// Runs `action` with empty params.
    pub fn run(action: impl Into<DynAction>) -> Self {
        Command::Run(Instruction::new(action))
    }

    /// A strategy command with `params` and no effects.
    pub fn strategy(name: impl Into<String>, params: Value) -> Self {
        Command::Strategy {
            name: name.into(),
            params,
            effects: Vec::new(),
        }
    }

    /// The strategy command's name, or `None` for an instruction.
    pub fn strategy_name(&self) -> Option<&str> {
        match self {
            Command::Strategy { name, .. } => Some(name),
            Command::Run(_) => None,
        }
    }
}

impl From<Instruction> for Command {
    fn from(ins: Instruction) -> Self {
        Command::Run(ins)
    }
}

/// The shapes [`AgentState::cmd`](crate::AgentState::cmd) accepts: every shape
/// [`IntoInstructions`] accepts (an action, a [`DynAction`], an
/// [`Instruction`], `(action, params)`, `(action, params, context)`,
/// `(action, params, context, opts)`), a [`Command`], a `Vec` of any of
/// these (also mixed through `Vec<Command>`), or a [`Result`] of any of
/// these (an `Err` becomes a normalisation error).
///
/// Any other [`IntoInstructions`] type goes through
/// [`FromInstructions`].
pub trait IntoCommands {
    /// The commands, or why the input cannot be normalised.
    ///
    /// # Errors
    ///
    /// Only `Result` inputs fail, with their own error.
    fn into_commands(self) -> Result<Vec<Command>>
    where
        Self: Sized,
    {
        let mut out = Vec::with_capacity(1);
        self.push_commands(&mut out)?;
        Ok(out)
    }

    /// Appends the commands to `out` (what `Vec` inputs use, so a list of
    /// instructions is converted without a vector per item).
    ///
    /// # Errors
    ///
    /// As [`IntoCommands::into_commands`].
    fn push_commands(self, out: &mut Vec<Command>) -> Result<()>;
}

/// Adapts any [`IntoInstructions`] type to [`IntoCommands`].
#[derive(Debug, Clone)]
pub struct FromInstructions<T>(pub T);

impl<T: IntoInstructions> IntoCommands for FromInstructions<T> {
    fn push_commands(self, out: &mut Vec<Command>) -> Result<()> {
        out.extend(self.0.into_instructions().into_iter().map(Command::Run));
        Ok(())
    }
}

impl<A: crate::Action> IntoCommands for A {
    fn push_commands(self, out: &mut Vec<Command>) -> Result<()> {
        out.push(Command::Run(Instruction::new(self)));
        Ok(())
    }
}

impl IntoCommands for DynAction {
    fn push_commands(self, out: &mut Vec<Command>) -> Result<()> {
        out.push(Command::Run(Instruction::new(self)));
        Ok(())
    }
}

impl IntoCommands for Instruction {
    fn push_commands(self, out: &mut Vec<Command>) -> Result<()> {
        out.push(Command::Run(self));
        Ok(())
    }
}

impl<A: Into<DynAction>> IntoCommands for (A, Value) {
    fn push_commands(self, out: &mut Vec<Command>) -> Result<()> {
        out.push(Command::Run(Instruction::new(self.0).with_params(self.1)));
        Ok(())
    }
}

impl<A: Into<DynAction>> IntoCommands for (A, Value, Map<String, Value>) {
    fn push_commands(self, out: &mut Vec<Command>) -> Result<()> {
        out.push(Command::Run(
            Instruction::new(self.0)
                .with_params(self.1)
                .with_context(self.2),
        ));
        Ok(())
    }
}

impl<A: Into<DynAction>> IntoCommands for (A, Value, Map<String, Value>, ExecOptions) {
    fn push_commands(self, out: &mut Vec<Command>) -> Result<()> {
        out.push(Command::Run(
            Instruction::new(self.0)
                .with_params(self.1)
                .with_context(self.2)
                .with_opts(self.3),
        ));
        Ok(())
    }
}

impl IntoCommands for Command {
    fn push_commands(self, out: &mut Vec<Command>) -> Result<()> {
        out.push(self);
        Ok(())
    }
}

impl<T: IntoCommands> IntoCommands for Vec<T> {
    fn into_commands(self) -> Result<Vec<Command>> {
        let mut out = Vec::with_capacity(self.len());
        self.push_commands(&mut out)?;
        Ok(out)
    }

    fn push_commands(self, out: &mut Vec<Command>) -> Result<()> {
        for item in self {
            item.push_commands(out)?;
        }
        Ok(())
    }
}

impl<T: IntoCommands> IntoCommands for Result<T> {
    fn push_commands(self, out: &mut Vec<Command>) -> Result<()> {
        self?.push_commands(out)
    }
}

/// What a strategy sees besides the agent: the agent type's name, the
/// strategy's options, the executor, the options of this `cmd`, and the
/// signal being handled (under the runtime).
#[derive(Debug, Clone)]
pub struct StrategyContext {
    agent_name: &'static str,
    options: Arc<Map<String, Value>>,
    exec: Exec,
    exec_options: ExecOptions,
    signal: Option<Arc<Signal>>,
}

impl StrategyContext {
    /// A context for agent type `agent_name` with no options, the global
    /// executor and default exec options. [`AgentState::strategy_context`](crate::AgentState::strategy_context)
    /// builds the real one.
    pub fn new(agent_name: &'static str) -> Self {
        Self {
            agent_name,
            options: Arc::new(Map::new()),
            exec: Exec::global().clone(),
            exec_options: ExecOptions::new(),
            signal: None,
        }
    }

    pub(crate) fn from_parts(
        agent_name: &'static str,
        options: Arc<Map<String, Value>>,
        exec: Option<Exec>,
        exec_options: ExecOptions,
        signal: Option<Arc<Signal>>,
    ) -> Self {
        Self {
            agent_name,
            options,
            exec: exec.unwrap_or_else(|| Exec::global().clone()),
            exec_options,
            signal,
        }
    }

    /// Sets the strategy options.
    #[must_use]
    pub fn with_options(mut self, options: Arc<Map<String, Value>>) -> Self {
        self.options = options;
        self
    }

    /// Sets the executor.
    #[must_use]
    pub fn with_exec(mut self, exec: Exec) -> Self {
        self.exec = exec;
        self
    }

    /// Sets the options of this `cmd`.
    #[must_use]
    pub fn with_exec_options(mut self, opts: ExecOptions) -> Self {
        self.exec_options = opts;
        self
    }

    /// Sets the signal being handled.
    #[must_use]
    pub fn with_signal(mut self, signal: Signal) -> Self {
        self.signal = Some(Arc::new(signal));
        self
    }

    /// The agent type's name.
    pub fn agent_name(&self) -> &'static str {
        self.agent_name
    }

    /// The strategy's options (see [`DynStrategy::with_options`]).
    pub fn options(&self) -> &Map<String, Value> {
        &self.options
    }

    /// The executor (instance) actions run on.
    pub fn exec(&self) -> &Exec {
        &self.exec
    }

    /// Options of this `cmd`; `cmd` has already applied them to its
    /// instructions.
    pub fn exec_options(&self) -> &ExecOptions {
        &self.exec_options
    }

    /// The signal being handled, if any.
    pub fn signal(&self) -> Option<&Signal> {
        self.signal.as_deref()
    }

    /// The base context of an action run for `agent`: the agent state, the
    /// signal being handled (if any) and the executor.
    pub fn action_context(&self, agent: &AgentData) -> Context {
        Context::for_agent(
            agent.state().clone(),
            self.exec.clone(),
            self.signal.clone(),
        )
    }

    /// Runs `instruction` for `agent` with [`Exec::execute`]: everything
    /// it produced, effects of a failure included. The agent is not
    /// changed; see [`apply_outcome`].
    #[inline]
    pub fn run<'a>(
        &'a self,
        agent: &AgentData,
        instruction: Instruction,
    ) -> impl Future<Output = Outcome> + Send + use<'a> {
        self.exec.execute(instruction, self.action_context(agent))
    }
}

/// Status of a strategy, as reported by [`Snapshot`].
#[non_exhaustive]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
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
    /// The snapshot could not be taken: the strategy's
    /// [`snapshot`](Strategy::snapshot) panicked. The snapshot's details
    /// hold the panic message under `error`. Not terminal: the strategy
    /// itself may be fine.
    Error,
}

impl SnapshotStatus {
    /// Reads `"idle"`, `"running"`, `"waiting"`, `"success"`,
    /// `"failure"` or `"error"`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "idle" => SnapshotStatus::Idle,
            "running" => SnapshotStatus::Running,
            "waiting" => SnapshotStatus::Waiting,
            "success" => SnapshotStatus::Success,
            "failure" => SnapshotStatus::Failure,
            "error" => SnapshotStatus::Error,
            _ => return None,
        })
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotStatus::Idle => "idle",
            SnapshotStatus::Running => "running",
            SnapshotStatus::Waiting => "waiting",
            SnapshotStatus::Success => "success",
            SnapshotStatus::Failure => "failure",
            SnapshotStatus::Error => "error",
        }
    }

    /// Success or failure.
    pub fn is_terminal(self) -> bool {
        matches!(self, SnapshotStatus::Success | SnapshotStatus::Failure)
    }

    /// Running or waiting.
    pub fn is_running(self) -> bool {
        matches!(self, SnapshotStatus::Running | SnapshotStatus::Waiting)
    }
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

impl Snapshot {
    /// A snapshot with `status`, `done` set from it, no result and no
    /// details.
    pub fn new(status: SnapshotStatus) -> Self {
        Self {
            status,
            done: status.is_terminal(),
            result: None,
            details: Map::new(),
        }
    }

    /// The default snapshot of a strategy state (the `__strategy__`
    /// object): `status` read from its `"status"` (idle when missing or
    /// unknown), `result` from its `"result"` (`null` counts as none),
    /// details = the rest minus `module`, `status`, `result` and
    /// `config`.
    ///
    /// ```
    /// use jido::strategy::{Snapshot, SnapshotStatus};
    /// use serde_json::json;
    ///
    /// let st = json!({"module": "x", "status": "success", "result": 42, "config": {}, "step": 3});
    /// let snap = Snapshot::from_strategy_state(&jido::state::StateMap::from(st.as_object().unwrap()));
    /// assert_eq!(snap.status, SnapshotStatus::Success);
    /// assert!(snap.done);
    /// assert_eq!(snap.result, Some(json!(42)));
    /// assert_eq!(serde_json::Value::Object(snap.details), json!({"step": 3}));
    /// ```
    pub fn from_strategy_state(state: &crate::state::StateMap) -> Self {
        let status = state
            .get("status")
            .and_then(crate::state::StateValue::as_str)
            .and_then(SnapshotStatus::parse)
            .unwrap_or_default();
        let result = state
            .get("result")
            .filter(|v| !v.is_null())
            .map(crate::state::StateValue::to_json);
        let details = state
            .iter()
            .filter(|(k, _)| !matches!(*k, "module" | "status" | "result" | "config"))
            .map(|(k, v)| (k.to_owned(), v.to_json()))
            .collect();
        Self {
            status,
            done: status.is_terminal(),
            result,
            details,
        }
    }

    /// The default snapshot of `agent` (see
    /// [`Snapshot::from_strategy_state`]); idle when it has no strategy
    /// state.
    pub fn of(agent: &AgentData) -> Self {
        agent
            .strategy_state()
            .map(Self::from_strategy_state)
            .unwrap_or_default()
    }

    /// Whether the status is running or waiting.
    pub fn is_running(&self) -> bool {
        self.status.is_running()
    }

    /// The detail `key`, if the strategy gave one.
    pub fn detail(&self, key: &str) -> Option<&Value> {
        self.details.get(key)
    }

    /// The result decoded as a `T`; `Ok(None)` without a result.
    ///
    /// ```
    /// use jido::strategy::{Snapshot, SnapshotStatus};
    /// use serde_json::json;
    ///
    /// let mut snap = Snapshot::new(SnapshotStatus::Success);
    /// snap.result = Some(json!({"total": 3}));
    /// snap.details.insert("tick_count".into(), json!(4));
    ///
    /// #[derive(serde::Deserialize, Debug, PartialEq)]
    /// struct Out { total: i64 }
    /// assert_eq!(snap.result_as::<Out>()?, Some(Out { total: 3 }));
    /// assert_eq!(snap.detail_as::<u64>("tick_count")?, Some(4));
    /// assert_eq!(snap.detail_as::<u64>("missing")?, None);
    /// let err = snap.detail_as::<String>("tick_count").unwrap_err();
    /// assert_eq!(err.message(), "invalid snapshot detail tick_count: invalid type: integer `4`, expected a string");
    /// # Ok::<(), jido::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A validation error "invalid snapshot result: REASON" when the
    /// result is not a `T`.
    pub fn result_as<T: serde::de::DeserializeOwned>(&self) -> crate::error::Result<Option<T>> {
        self.result
            .as_ref()
            .map(|v| {
                T::deserialize(v)
                    .map_err(|e| Error::validation(format!("invalid snapshot result: {e}")))
            })
            .transpose()
    }

    /// The detail `key` decoded as a `T`; `Ok(None)` without it.
    ///
    /// # Errors
    ///
    /// A validation error "invalid snapshot detail KEY: REASON" (detail
    /// `key`) when the detail is not a `T`.
    pub fn detail_as<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> crate::error::Result<Option<T>> {
        self.details
            .get(key)
            .map(|v| {
                T::deserialize(v).map_err(|e| {
                    Error::validation(format!("invalid snapshot detail {key}: {e}"))
                        .with_detail("key", key.to_owned())
                })
            })
            .transpose()
    }
}

/// An execution model for an agent's `cmd`. Only [`cmd`](Strategy::cmd) is
/// required.
///
/// A strategy value is shared by every agent of a definition: keep
/// per-agent data in the agent state under [`STRATEGY_KEY`] (JSON,
/// checkpointed) or, for what JSON cannot hold, in
/// [`AgentData::set_strategy_ext`](crate::agent::AgentData::set_strategy_ext).
pub trait Strategy: Send + Sync + 'static {
    /// A name for logs and the `module` entry of strategy states.
    fn name(&self) -> &'static str {
        std::any::type_name::<Self>()
    }

    /// Sets up the strategy's state. Runs when the agent is created (its
    /// directives are dropped then) and when the runtime starts the agent
    /// (its directives are executed).
    fn init(&self, agent: &mut AgentData, ctx: &StrategyContext) -> Vec<Directive> {
        let _ = (agent, ctx);
        Vec::new()
    }

    /// Runs `commands` against `agent`, returning the directives for the
    /// runtime.
    fn cmd(
        &self,
        agent: &mut AgentData,
        commands: Vec<Command>,
        ctx: &StrategyContext,
    ) -> impl Future<Output = Vec<Directive>> + Send;

    /// One more turn of multi-turn work (scheduled through a Schedule
    /// directive, never a sleep).
    fn tick(
        &self,
        agent: &mut AgentData,
        ctx: &StrategyContext,
    ) -> impl Future<Output = Vec<Directive>> + Send {
        let _ = (agent, ctx);
        async { Vec::new() }
    }

    /// Whether [`cmd`](Strategy::cmd) finishes without waiting when every
    /// command is a [`Command::Strategy`] (it awaits nothing for them).
    /// `false` by default.
    ///
    /// The runtime then runs such a `cmd` in place, on the agent itself,
    /// polled once in the handler: no copy of the agent is made for it, so
    /// its writes change the state in place instead of copying what they
    /// touch. The price is the rollback: a `cmd` that panics there (or,
    /// against this promise, waits) may leave the agent half-changed, so it
    /// **fails the agent** (`ActorFailed` "agent cmd panicked: …"; its
    /// supervisor restarts it by its policy), where a panic in a copied
    /// `cmd` is an execution error that leaves the agent as it was.
    /// The runtime decides from the signal's commands as routed: commands
    /// that run actions ([`Command::Run`]) always go through the copied
    /// path, but an agent's `on_before_cmd` hook that adds actions to an
    /// inline signal's commands makes its `cmd` wait, and fail the agent.
    /// The request strategies of the AI layer (ReAct and the
    /// reasoning strategies) say `true`: their transitions never await and
    /// catch their own panics.
    fn strategy_commands_inline(&self) -> bool {
        false
    }

    /// The strategy's state seen from outside. The default reads the
    /// strategy state (see [`Snapshot::from_strategy_state`]).
    fn snapshot(&self, agent: &AgentData, ctx: &StrategyContext) -> Snapshot {
        let _ = ctx;
        Snapshot::of(agent)
    }

    /// Routes the strategy adds to its agent's router (priority 50 unless
    /// they say otherwise).
    fn signal_routes(&self, ctx: &StrategyContext) -> Vec<SignalRoute> {
        let _ = ctx;
        Vec::new()
    }
}

/// Any strategy, type-erased, with its JSON options; cheap to clone.
///
/// ```
/// use jido::strategy::{Direct, DynStrategy};
///
/// let s = DynStrategy::new(Direct).with_option("max_retries", 5);
/// assert_eq!(s.options()["max_retries"], 5);
/// assert_eq!(s.name(), "direct");
/// ```
#[derive(Clone)]
pub struct DynStrategy {
    inner: Arc<dyn ErasedStrategy>,
    options: Arc<Map<String, Value>>,
    direct: bool,
}

trait ErasedStrategy: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    fn init(&self, agent: &mut AgentData, ctx: &StrategyContext) -> Vec<Directive>;
    fn cmd<'a>(
        &'a self,
        agent: &'a mut AgentData,
        commands: Vec<Command>,
        ctx: &'a StrategyContext,
    ) -> BoxFuture<'a, Vec<Directive>>;
    fn tick<'a>(
        &'a self,
        agent: &'a mut AgentData,
        ctx: &'a StrategyContext,
    ) -> BoxFuture<'a, Vec<Directive>>;
    fn strategy_commands_inline(&self) -> bool;
    fn snapshot(&self, agent: &AgentData, ctx: &StrategyContext) -> Snapshot;
    fn signal_routes(&self, ctx: &StrategyContext) -> Vec<SignalRoute>;
}

impl<S: Strategy> ErasedStrategy for S {
    fn name(&self) -> &'static str {
        Strategy::name(self)
    }
    fn init(&self, agent: &mut AgentData, ctx: &StrategyContext) -> Vec<Directive> {
        Strategy::init(self, agent, ctx)
    }
    fn cmd<'a>(
        &'a self,
        agent: &'a mut AgentData,
        commands: Vec<Command>,
        ctx: &'a StrategyContext,
    ) -> BoxFuture<'a, Vec<Directive>> {
        Box::pin(Strategy::cmd(self, agent, commands, ctx))
    }
    fn tick<'a>(
        &'a self,
        agent: &'a mut AgentData,
        ctx: &'a StrategyContext,
    ) -> BoxFuture<'a, Vec<Directive>> {
        Box::pin(Strategy::tick(self, agent, ctx))
    }
    fn strategy_commands_inline(&self) -> bool {
        Strategy::strategy_commands_inline(self)
    }
    fn snapshot(&self, agent: &AgentData, ctx: &StrategyContext) -> Snapshot {
        Strategy::snapshot(self, agent, ctx)
    }
    fn signal_routes(&self, ctx: &StrategyContext) -> Vec<SignalRoute> {
        Strategy::signal_routes(self, ctx)
    }
}

impl DynStrategy {
    /// Erases `strategy`, with no options.
    pub fn new<S: Strategy>(strategy: S) -> Self {
        Self {
            inner: Arc::new(strategy),
            options: Arc::new(Map::new()),
            direct: std::any::TypeId::of::<S>() == std::any::TypeId::of::<Direct>(),
        }
    }

    /// Whether this is the [`Direct`] strategy (which `cmd` calls without
    /// boxing its future).
    pub(crate) fn is_direct(&self) -> bool {
        self.direct
    }

    /// See [`Strategy::strategy_commands_inline`].
    pub fn strategy_commands_inline(&self) -> bool {
        self.inner.strategy_commands_inline()
    }

    /// Sets the JSON options strategies read through
    /// [`StrategyContext::options`].
    #[must_use]
    pub fn with_options(mut self, options: Map<String, Value>) -> Self {
        self.options = Arc::new(options);
        self
    }

    /// Sets one JSON option.
    #[must_use]
    pub fn with_option(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        Arc::make_mut(&mut self.options).insert(key.into(), value.into());
        self
    }

    /// The options.
    pub fn options(&self) -> &Map<String, Value> {
        &self.options
    }

    pub(crate) fn options_arc(&self) -> &Arc<Map<String, Value>> {
        &self.options
    }

    /// See [`Strategy::name`].
    pub fn name(&self) -> &'static str {
        self.inner.name()
    }

    /// See [`Strategy::init`].
    pub fn init(&self, agent: &mut AgentData, ctx: &StrategyContext) -> Vec<Directive> {
        self.inner.init(agent, ctx)
    }

    /// See [`Strategy::cmd`].
    pub fn cmd<'a>(
        &'a self,
        agent: &'a mut AgentData,
        commands: Vec<Command>,
        ctx: &'a StrategyContext,
    ) -> BoxFuture<'a, Vec<Directive>> {
        self.inner.cmd(agent, commands, ctx)
    }

    /// See [`Strategy::tick`].
    pub fn tick<'a>(
        &'a self,
        agent: &'a mut AgentData,
        ctx: &'a StrategyContext,
    ) -> BoxFuture<'a, Vec<Directive>> {
        self.inner.tick(agent, ctx)
    }

    /// See [`Strategy::snapshot`].
    pub fn snapshot(&self, agent: &AgentData, ctx: &StrategyContext) -> Snapshot {
        self.inner.snapshot(agent, ctx)
    }

    /// See [`Strategy::signal_routes`].
    pub fn signal_routes(&self, ctx: &StrategyContext) -> Vec<SignalRoute> {
        self.inner.signal_routes(ctx)
    }
}

impl std::fmt::Debug for DynStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynStrategy")
            .field("name", &self.name())
            .field("options", &self.options)
            .finish()
    }
}

/// The Error directive for a failed instruction: context `"instruction"`,
/// an execution error "instruction failed" whose `reason` detail is the
/// error's envelope (its retryability follows the cause's).
pub fn instruction_error(error: Error) -> Directive {
    let reason = error.to_envelope();
    Directive::error(
        Error::execution("instruction failed")
            .with_detail("reason", reason)
            .with_source(error),
        error_context::INSTRUCTION,
    )
}

fn instruction_error_from_reason(reason: Value) -> Directive {
    Directive::error(
        Error::execution("instruction failed").with_detail("reason", reason),
        error_context::INSTRUCTION,
    )
}

/// Applies an instruction's [`Outcome`] to `agent` the way [`Direct`] does
/// and returns the directives:
///
/// * success: output deep-merged, then effects in order (state operations
///   applied, directives returned);
/// * failure: the [`instruction_error`] directive followed by the
///   directives among the effects; no state operation is applied.
pub fn apply_outcome(agent: &mut AgentData, outcome: Outcome) -> Vec<Directive> {
    match outcome.result {
        Ok(output) => agent.apply_output(output, outcome.effects),
        Err(error) => failed_directives(instruction_error(error), outcome.effects),
    }
}

fn failed_directives(error: Directive, effects: Vec<Effect>) -> Vec<Directive> {
    let mut directives = Vec::with_capacity(1 + effects.len());
    directives.push(error);
    directives.extend(external_directives(effects));
    directives
}

/// The Error directive for a strategy command the strategy does not know
/// (context `"strategy_command"`, validation error "unknown strategy
/// command" with a `command` detail). For an instruction, an internal
/// error "unexpected instruction".
pub fn unknown_command(command: &Command) -> Directive {
    let error = match command {
        Command::Strategy { name, .. } => {
            Error::validation(format!("unknown strategy command: {name}"))
                .with_detail("command", name.clone())
        }
        Command::Run(ins) => {
            Error::internal("unexpected instruction").with_detail("action", ins.action.name())
        }
    };
    Directive::error(error, error_context::STRATEGY_COMMAND)
}

/// Runs the instruction of a [`Directive::RunInstruction`] for `agent` and
/// builds the command that feeds its result back into `cmd`: the strategy
/// command `result_action` with params
///
/// * `{"status": "ok", "result": <output>, "instruction": {"id", "action"}, "meta": <meta>}`, or
/// * `{"status": "error", "reason": <error envelope>, "instruction": {..}, "meta": <meta>}`,
///
/// and the instruction's effects (of a failure too) in the command's
/// `effects`. The agent is not changed. The runtime and tests share this.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # use jido::prelude::*;
/// # #[derive(Clone, serde::Deserialize, schemars::JsonSchema)] struct P {}
/// # struct Ping;
/// # impl Action for Ping {
/// #     type Params = P; type Output = serde_json::Value;
/// #     const NAME: &'static str = "ping";
/// #     async fn run(&self, _: P, _: &Context) -> jido::Result<serde_json::Value> { Ok(serde_json::json!({"pong": true})) }
/// # }
/// # struct A; impl Agent for A { const NAME: &'static str = "a"; type Schema = (); }
/// use jido::exec::Exec;
/// use jido::strategy::instruction_feedback;
///
/// let agent = AgentState::new(A, AgentOptions::new());
/// let cmd = instruction_feedback(&agent, Instruction::new(Ping), "instruction_result", &Default::default(), &Exec::new()).await;
/// let Command::Strategy { name, params, .. } = cmd else { unreachable!() };
/// assert_eq!(name, "instruction_result");
/// assert_eq!(params["status"], "ok");
/// assert_eq!(params["result"]["pong"], true);
/// assert_eq!(params["instruction"]["action"], "ping");
/// # }
/// ```
pub async fn instruction_feedback(
    agent: &AgentData,
    instruction: Instruction,
    result_action: &str,
    meta: &Map<String, Value>,
    exec: &Exec,
) -> Command {
    let info = serde_json::json!({
        "id": instruction.id.to_string(),
        "action": instruction.action.name(),
    });
    let ctx = Context::new()
        .with_state(agent.state().clone())
        .with_exec(exec.clone());
    let outcome = exec.execute(instruction, ctx).await;
    let mut params = Map::with_capacity(4);
    match outcome.result {
        Ok(output) => {
            params.insert("status".into(), Value::from("ok"));
            params.insert("result".into(), Value::Object(output));
        }
        Err(error) => {
            params.insert("status".into(), Value::from("error"));
            params.insert("reason".into(), error.to_envelope());
        }
    }
    params.insert("instruction".into(), info);
    params.insert("meta".into(), Value::Object(meta.clone()));
    Command::Strategy {
        name: result_action.to_owned(),
        params: Value::Object(params),
        effects: outcome.effects,
    }
}

/// [`instruction_feedback`] for a directive: runs the instruction of a
/// [`Directive::RunInstruction`] and returns the command to feed back into
/// `cmd`, or `None` for any other directive.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// # use jido::prelude::*;
/// # #[derive(Clone, serde::Deserialize, schemars::JsonSchema)] struct P {}
/// # struct Ping;
/// # impl Action for Ping {
/// #     type Params = P; type Output = serde_json::Value;
/// #     const NAME: &'static str = "ping";
/// #     async fn run(&self, _: P, _: &Context) -> jido::Result<serde_json::Value> { Ok(serde_json::json!({"pong": true})) }
/// # }
/// # struct A; impl Agent for A { const NAME: &'static str = "a"; type Schema = (); }
/// use jido::exec::Exec;
/// use jido::strategy::run_instruction_directive;
///
/// let mut agent = AgentState::new(A, AgentOptions::new());
/// let directive: Directive = Directive::run_instruction(Instruction::new(Ping)).into();
/// let feedback = run_instruction_directive(&agent, &directive, &Exec::new()).await.unwrap();
/// assert!(agent.cmd(feedback, ExecOptions::new()).await.is_empty());
/// assert_eq!(agent.state()["pong"], true);
/// assert!(run_instruction_directive(&agent, &Directive::stop(), &Exec::new()).await.is_none());
/// # }
/// ```
pub async fn run_instruction_directive(
    agent: &AgentData,
    directive: &Directive,
    exec: &Exec,
) -> Option<Command> {
    let Directive::RunInstruction {
        instruction,
        result_action,
        meta,
    } = directive
    else {
        return None;
    };
    Some(instruction_feedback(agent, (**instruction).clone(), result_action, meta, exec).await)
}

/// A parsed instruction result (see [`instruction_feedback`]).
pub(crate) enum InstructionResult {
    Ok(Map<String, Value>),
    Failed(Value),
}

/// Reads instruction-result params; a malformed payload gives a validation
/// error for an Error directive with context `"instruction_result"`.
pub(crate) fn parse_instruction_result(params: &Value) -> Result<InstructionResult> {
    let invalid = |reason: String| {
        Error::validation("invalid instruction result").with_detail("reason", reason)
    };
    let Value::Object(map) = params else {
        return Err(invalid(format!(
            "expected a JSON object, got {}",
            crate::action::json_type_name(params)
        )));
    };
    match map.get("status").and_then(Value::as_str) {
        Some("ok") => match map.get("result") {
            Some(Value::Object(result)) => Ok(InstructionResult::Ok(result.clone())),
            None | Some(Value::Null) => Ok(InstructionResult::Ok(Map::new())),
            Some(other) => Err(invalid(format!(
                "result must be a JSON object, got {}",
                crate::action::json_type_name(other)
            ))),
        },
        Some("error") => Ok(InstructionResult::Failed(
            map.get("reason").cloned().unwrap_or(Value::Null),
        )),
        _ => Err(invalid("status must be \"ok\" or \"error\"".to_owned())),
    }
}

/// Applies an instruction result the way [`apply_outcome`] applies an
/// outcome.
pub(crate) fn apply_instruction_result(
    agent: &mut AgentData,
    result: InstructionResult,
    effects: Vec<Effect>,
) -> Vec<Directive> {
    match result {
        InstructionResult::Ok(output) => agent.apply_output(output, effects),
        InstructionResult::Failed(reason) => {
            failed_directives(instruction_error_from_reason(reason), effects)
        }
    }
}
