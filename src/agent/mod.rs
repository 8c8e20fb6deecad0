//! Agents: plain data whose `cmd` returns directives.
//!
//! (Skeleton: the full agent value, state operations, hooks and
//! checkpoints land with the agent work. The names below are kept.)

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::action::DynAction;
use crate::directive::Directive;
use crate::error::Result;
use crate::strategy::{Command, DynStrategy};

/// A typed state schema: defaults, validation and typed reads. `()` means
/// no schema.
pub trait StateSchema:
    Default + Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static
{
}
impl<T: Default + Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static> StateSchema
    for T
{
}

/// What a route sends a matching signal to.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub enum RouteTarget {
    /// Run this action with the signal's data as params.
    Action(DynAction),
    /// Run this action with these fixed params.
    ActionWithParams(DynAction, Value),
    /// Send a strategy command (the signal's data as its params).
    StrategyCmd(String),
    /// Run one strategy tick.
    StrategyTick,
}

/// A signal route declared by an agent or a strategy.
#[derive(Debug, Clone)]
pub struct SignalRoute {
    /// The signal type pattern (`*` one segment, `**` one or more).
    pub path: String,
    /// Where matching signals go.
    pub target: RouteTarget,
    /// Priority in -100..=100; `None` takes the source's default (agent 0,
    /// strategy 50).
    pub priority: Option<i32>,
}

/// An agent definition: metadata, state schema, strategy, routes and
/// hooks. The agent value is [`AgentState`].
pub trait Agent: Send + Sync + 'static {
    /// Name, matching `^[a-zA-Z][a-zA-Z0-9_]*$`.
    const NAME: &'static str;
    /// Description.
    const DESCRIPTION: &'static str = "";
    /// Category.
    const CATEGORY: &'static str = "";
    /// Tags.
    const TAGS: &'static [&'static str] = &[];
    /// Version (also the checkpoint version).
    const VERSION: &'static str = "0.1.0";

    /// The typed state schema (`()` for none).
    type Schema: StateSchema;

    /// The strategy (Direct by default).
    fn strategy(&self) -> DynStrategy;

    /// Signal routes of the agent (priority 0 by default).
    fn signal_routes(&self) -> Vec<SignalRoute> {
        Vec::new()
    }

    /// Called before `cmd` runs the commands; may rewrite them.
    ///
    /// # Errors
    ///
    /// An error aborts the `cmd` with an Error directive.
    fn on_before_cmd(
        &self,
        agent: &mut AgentState,
        commands: Vec<Command>,
    ) -> Result<Vec<Command>> {
        let _ = agent;
        Ok(commands)
    }

    /// Called after `cmd` with the directives; may rewrite them.
    fn on_after_cmd(&self, agent: &mut AgentState, directives: Vec<Directive>) -> Vec<Directive> {
        let _ = agent;
        directives
    }
}

/// The agent value: an id, a JSON-object state and its definition.
#[derive(Clone)]
pub struct AgentState {
    id: String,
    state: Map<String, Value>,
    def: Arc<dyn std::any::Any + Send + Sync>,
}

impl AgentState {
    /// The agent's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The state.
    pub fn state(&self) -> &Map<String, Value> {
        &self.state
    }

    /// The state, mutably.
    pub fn state_mut(&mut self) -> &mut Map<String, Value> {
        &mut self.state
    }

    #[allow(dead_code)]
    pub(crate) fn def(&self) -> &Arc<dyn std::any::Any + Send + Sync> {
        &self.def
    }
}

impl std::fmt::Debug for AgentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentState")
            .field("id", &self.id)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}
