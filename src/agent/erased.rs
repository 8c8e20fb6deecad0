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
    /// Why the schema's `Default` cannot serve as the state's defaults, if
    /// it cannot.
    fn schema_error(&self) -> Option<&Error>;
    /// The schema's defaults (empty without a schema).
    fn defaults(&self) -> &StateMap;
    /// [`Agent::migrate`].
    fn migrate(&self, from_version: &str, state: Map<String, Value>) -> Result<Map<String, Value>>;
}

/// An agent definition with its strategy and schema defaults, computed once.
pub(crate) struct Definition<A: Agent> {
    agent: A,
    strategy: DynStrategy,
    has_schema: bool,
    defaults: StateMap,
    schema_error: Option<Error>,
}

impl<A: Agent> Definition<A> {
    pub(crate) fn new(agent: A) -> Self {
        let strategy = agent.strategy();
        let (has_schema, defaults, schema_error) = compute_defaults::<A>();
        Self {
            agent,
            strategy,
            has_schema,
            defaults,
            schema_error,
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
        if let Some(err) = &self.schema_error {
            return Err(err.clone());
        }
        let filled = with_defaults(state, &self.defaults);
        let typed: A::Schema = serde_path_to_error::deserialize(&*filled).map_err(|err| {
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

    fn schema_error(&self) -> Option<&Error> {
        self.schema_error.as_ref()
    }

    fn defaults(&self) -> &StateMap {
        &self.defaults
    }

    fn migrate(&self, from_version: &str, state: Map<String, Value>) -> Result<Map<String, Value>> {
        self.agent.migrate(from_version, state)
    }

    fn state_schema(&self) -> Option<Value> {
        self.has_schema
            .then(|| schemars::schema_for!(A::Schema).to_value())
    }
}

/// The schema's defaults: `A::Schema::default()` serialised, which must be a
/// JSON object (or `null`: no schema) and must decode back into the schema
/// (a field the schema skips when serialising but requires when decoding,
/// a `Default` its own deserialiser rejects); otherwise a configuration
/// error the runtime reports when the agent starts.
fn compute_defaults<A: Agent>() -> (bool, StateMap, Option<Error>) {
    let error = |reason: String| {
        Some(
            Error::configuration(format!(
                "invalid state schema of agent {}: {reason}",
                A::NAME
            ))
            .with_detail("agent", A::NAME),
        )
    };
    match serde_json::to_value(A::Schema::default()) {
        Ok(Value::Null) => (false, StateMap::new(), None),
        Ok(Value::Object(map)) => {
            let decoded =
                serde_path_to_error::deserialize::<_, A::Schema>(Value::Object(map.clone()));
            let err = decoded.err().and_then(|err| {
                let (path, reason) = super::field_error(err);
                error(format!(
                    "its Default value does not decode back: {path}: {reason}"
                ))
                .map(|e| e.with_detail("path", path).with_detail("reason", reason))
            });
            (true, StateMap::from(map), err)
        }
        Ok(other) => (
            true,
            StateMap::new(),
            error(format!(
                "its Default value must serialise to a JSON object, got {}",
                crate::action::json_type_name(&other)
            )),
        ),
        Err(err) => (
            true,
            StateMap::new(),
            error(format!("its Default value could not be serialised: {err}")),
        ),
    }
}

/// `state` with the top-level keys it lacks taken from `defaults`: a field
/// removed from the state decodes to its `Default` value, the same value a
/// new agent starts with, whether or not the schema says `#[serde(default)]`.
/// Borrowed when nothing is missing.
pub(super) fn with_defaults<'a>(
    state: &'a StateMap,
    defaults: &StateMap,
) -> std::borrow::Cow<'a, StateMap> {
    let missing = defaults.iter().any(|(k, _)| state.get(k).is_none());
    if !missing {
        return std::borrow::Cow::Borrowed(state);
    }
    let mut filled = state.clone();
    for (k, v) in defaults.iter() {
        if filled.get(k).is_none() {
            filled.insert(k, v.clone());
        }
    }
    std::borrow::Cow::Owned(filled)
}
