//! The type-erased agent definition held by every `AgentState`.

use std::any::Any;

use serde_json::{Map, Value};

use crate::state::StateMap;

use super::{Agent, AgentMetadata, AgentState, SignalRoute};
use crate::directive::Directive;
use crate::error::{Error, Result};
use crate::strategy::{Command, DynStrategy};

/// What an `AgentState` needs from its definition, without its type.
pub(crate) trait ErasedAgent: Send + Sync + 'static {
    fn definition(&self) -> &dyn Any;
    fn metadata(&self) -> AgentMetadata;
    fn strategy(&self) -> &DynStrategy;
    fn signal_routes(&self) -> Vec<SignalRoute>;
    fn on_before_cmd(&self, agent: &mut AgentState, commands: Vec<Command>)
    -> Result<Vec<Command>>;
    fn on_after_cmd(&self, agent: &mut AgentState, directives: Vec<Directive>) -> Vec<Directive>;
    /// The schema's known keys with their (normalised) values, `None`
    /// without a schema.
    fn validate(&self, state: &StateMap) -> Result<Option<Map<String, Value>>>;
    fn state_schema(&self) -> Option<Value>;
}

/// An agent definition with its strategy and schema defaults, computed once.
pub(crate) struct Definition<A: Agent> {
    agent: A,
    strategy: DynStrategy,
    has_schema: bool,
    defaults: StateMap,
}

impl<A: Agent> Definition<A> {
    pub(crate) fn new(agent: A) -> Self {
        let strategy = agent.strategy();
        let (has_schema, defaults) = match serde_json::to_value(A::Schema::default()) {
            Ok(Value::Null) => (false, StateMap::new()),
            Ok(Value::Object(map)) => (true, StateMap::from(map)),
            Ok(_) | Err(_) => (true, StateMap::new()),
        };
        Self {
            agent,
            strategy,
            has_schema,
            defaults,
        }
    }

    pub(crate) fn schema_defaults(&self) -> &StateMap {
        &self.defaults
    }
}

impl<A: Agent> ErasedAgent for Definition<A> {
    fn definition(&self) -> &dyn Any {
        &self.agent
    }

    fn metadata(&self) -> AgentMetadata {
        A::metadata()
    }

    fn strategy(&self) -> &DynStrategy {
        &self.strategy
    }

    fn signal_routes(&self) -> Vec<SignalRoute> {
        self.agent.signal_routes()
    }

    fn on_before_cmd(
        &self,
        agent: &mut AgentState,
        commands: Vec<Command>,
    ) -> Result<Vec<Command>> {
        self.agent.on_before_cmd(agent, commands)
    }

    fn on_after_cmd(&self, agent: &mut AgentState, directives: Vec<Directive>) -> Vec<Directive> {
        self.agent.on_after_cmd(agent, directives)
    }

    fn validate(&self, state: &StateMap) -> Result<Option<Map<String, Value>>> {
        if !self.has_schema {
            return Ok(None);
        }
        let typed: A::Schema = serde_path_to_error::deserialize(state).map_err(|err| {
            let (path, reason) = super::field_error(err);
            Error::validation(format!("state validation failed: {path}: {reason}"))
                .with_detail("agent", A::NAME)
                .with_detail("path", path)
                .with_detail("reason", reason)
        })?;
        match serde_json::to_value(typed) {
            Ok(Value::Object(map)) => Ok(Some(map)),
            Ok(_) => Ok(Some(Map::new())),
            Err(err) => Err(Error::validation(format!("state validation failed: {err}"))
                .with_detail("agent", A::NAME)
                .with_source(err)),
        }
    }

    fn state_schema(&self) -> Option<Value> {
        self.has_schema
            .then(|| schemars::schema_for!(A::Schema).to_value())
    }
}
