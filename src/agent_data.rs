//! An agent's data: its id, its state and the strategy's data that JSON
//! cannot hold. This is what a [strategy](crate::strategy) works on: the
//! strategy layer never sees an agent's definition (its type, schema and
//! hooks), so it sits below [`crate::agent`]. An
//! [`AgentState`](crate::AgentState) is an `AgentData` plus the definition,
//! and derefs to it: every method here is callable on an `AgentState`.
//! Read it at `jido::agent::AgentData`.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::directive::Directive;
use crate::effect::{Effect, apply_effects};
use crate::signal::Signal;
use crate::state::{STRATEGY_KEY, StateMap, StateOp, StateValue, parent_id_of};

/// An agent's data: id, state (a JSON object, see [`StateMap`]) and the
/// strategy's own data ([`strategy_ext`](AgentData::strategy_ext)).
///
/// [Strategies](crate::strategy::Strategy) take an `&mut AgentData`; an
/// [`AgentState`](crate::AgentState) derefs to one, so its `id()`,
/// `state()`, `apply_output(…)`, … are these methods.
///
/// Cloning is cheap (O(1)): the state's objects and arrays are shared
/// between clones and copied on write, only along the written path.
///
/// ```
/// use jido::agent::AgentData;
/// use jido::effect::StateOp;
/// use serde_json::json;
///
/// let mut data = AgentData::new("a1", json!({"n": 1}).as_object().unwrap());
/// data.apply_state_op(StateOp::set_path(["cfg", "mode"], "fast"));
/// assert_eq!(data.id(), "a1");
/// assert_eq!(data.state(), &json!({"n": 1, "cfg": {"mode": "fast"}}));
/// ```
#[derive(Clone, Default)]
pub struct AgentData {
    /// Shared between copies: the runtime copies the agent for every
    /// signal's `cmd` and every reply.
    id: Arc<str>,
    state: StateMap,
    ext: Option<Arc<dyn Any + Send + Sync>>,
}

impl AgentData {
    /// Data with this id and state and no strategy data. An agent's data
    /// comes from [`AgentState::new`](crate::AgentState::new); build one
    /// by hand to drive a strategy in a test.
    pub fn new(id: impl Into<String>, state: impl Into<StateMap>) -> Self {
        Self {
            id: Arc::from(id.into()),
            state: state.into(),
            ext: None,
        }
    }

    /// The agent's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Changes the agent's id (the runtime uses it when a server option
    /// names the id); an empty id is ignored.
    pub fn set_id(&mut self, id: impl Into<String>) {
        let id = id.into();
        if !id.is_empty() {
            self.id = Arc::from(id);
        }
    }

    /// The state. Reads look like serde_json's: `state()["key"]`,
    /// `state().get("key")`, `.as_i64()`, comparisons with `json!` values.
    /// `state().clone()` is an O(1) snapshot.
    pub fn state(&self) -> &StateMap {
        &self.state
    }

    /// The state, mutably. Writes through it copy only what they change
    /// when the state is shared with a clone (see [`StateMap`]).
    pub fn state_mut(&mut self) -> &mut StateMap {
        &mut self.state
    }

    /// Replaces the whole state (a [`StateMap`] or a `serde_json` map).
    pub fn replace_state(&mut self, state: impl Into<StateMap>) {
        self.state = state.into();
    }

    /// Appends `value` to the array at `path` (see [`StateOp::Append`]):
    /// O(log n) on a long array, nothing else copied.
    ///
    /// ```
    /// # use jido::prelude::*;
    /// # struct A; impl Agent for A { const NAME: &'static str = "a"; type Schema = (); }
    /// use serde_json::json;
    ///
    /// let mut agent = AgentState::new(A, AgentOptions::new());
    /// agent.append(["messages"], json!({"role": "user", "content": "hi"}));
    /// let snapshot = agent.clone();
    /// agent.append(["messages"], json!({"role": "assistant", "content": "hello"}));
    /// assert_eq!(snapshot.state()["messages"].as_array().unwrap().len(), 1);
    /// assert_eq!(agent.state()["messages"][1]["content"], "hello");
    /// ```
    pub fn append<I, K>(&mut self, path: I, value: impl Into<StateValue>)
    where
        I: IntoIterator<Item = K>,
        K: Into<String>,
    {
        StateOp::append(path, value).apply(&mut self.state);
    }

    /// Deep-merges `attrs` into the state (see [`deep_merge`](crate::state::deep_merge)): nested
    /// objects merge, any other value replaces.
    ///
    /// ```
    /// # use jido::prelude::*;
    /// # struct A; impl Agent for A { const NAME: &'static str = "a"; type Schema = (); }
    /// use serde_json::json;
    ///
    /// let mut agent = AgentState::new(A, AgentOptions::new());
    /// agent.set(json!({"cfg": {"a": 1, "b": [1]}}).as_object().unwrap());
    /// agent.set(json!({"cfg": {"b": [2]}}).as_object().unwrap());
    /// assert_eq!(agent.state()["cfg"], json!({"a": 1, "b": [2]}));
    /// ```
    pub fn set(&mut self, attrs: impl Into<StateMap>) {
        self.state.deep_merge(attrs);
    }

    /// Applies one state operation (see [`apply_state_op`](crate::state::apply_state_op)).
    pub fn apply_state_op(&mut self, op: StateOp) {
        op.apply(&mut self.state);
    }

    /// Applies the state operations among `effects` in order and returns
    /// the other effects as directives, in order.
    pub fn apply_effects(&mut self, effects: Vec<Effect>) -> Vec<Directive> {
        if effects.is_empty() {
            return Vec::new();
        }
        apply_effects(&mut self.state, effects)
    }

    /// Applies a successful action result: deep-merges `output` into the
    /// state (converting only what it writes), then applies `effects` (see
    /// [`AgentData::apply_effects`]).
    pub fn apply_output(
        &mut self,
        output: Map<String, Value>,
        effects: Vec<Effect>,
    ) -> Vec<Directive> {
        if !output.is_empty() {
            self.state.deep_merge_json(output);
        }
        self.apply_effects(effects)
    }

    /// The id of the live parent (`__parent__.id`), if any.
    pub fn parent_id(&self) -> Option<&str> {
        parent_id_of(&self.state)
    }

    /// The strategy's state (`__strategy__`), if it is an object.
    pub fn strategy_state(&self) -> Option<&StateMap> {
        self.state.get(STRATEGY_KEY)?.as_object()
    }

    /// The strategy's state, mutably, created (or replaced, if it was not
    /// an object) as an empty object. Writes copy only what they change.
    pub fn strategy_state_mut(&mut self) -> &mut StateMap {
        self.state.object_mut(STRATEGY_KEY)
    }

    /// Strategy data that cannot live in the JSON state (pending
    /// instructions, deferred directives), when it is a `T`. It is not part
    /// of checkpoints.
    pub fn strategy_ext<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.ext.as_deref()?.downcast_ref::<T>()
    }

    /// The strategy data, mutably, when it is a `T` (copied first if shared
    /// with a clone).
    pub fn strategy_ext_mut<T: Any + Send + Sync + Clone>(&mut self) -> Option<&mut T> {
        ext_mut(&mut self.ext)
    }

    /// The state and the strategy data (when it is a `T`, copied first if
    /// shared with a clone), both mutably: for a strategy that keeps a typed
    /// state in the ext and mirrors it into the JSON state (see
    /// [`RequestCore::commit`](crate::ai::request::RequestCore::commit)
    /// with feature `ai`).
    pub fn state_and_strategy_ext_mut<T: Any + Send + Sync + Clone>(
        &mut self,
    ) -> (&mut StateMap, Option<&mut T>) {
        (&mut self.state, ext_mut(&mut self.ext))
    }

    /// Sets the strategy data.
    pub fn set_strategy_ext<T: Any + Send + Sync>(&mut self, value: T) {
        self.ext = Some(Arc::new(value));
    }

    /// Removes the strategy data.
    pub fn clear_strategy_ext(&mut self) {
        self.ext = None;
    }
}

/// The strategy data in `ext`, mutably, when it is a `T` (copied first if
/// shared with a clone).
fn ext_mut<T: Any + Send + Sync + Clone>(
    ext: &mut Option<Arc<dyn Any + Send + Sync>>,
) -> Option<&mut T> {
    let arc = ext.as_mut()?;
    if Arc::get_mut(arc).is_none() {
        let copy: T = (**arc).downcast_ref::<T>()?.clone();
        *arc = Arc::new(copy);
    }
    Arc::get_mut(arc)?.downcast_mut::<T>()
}

impl fmt::Debug for AgentData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentData")
            .field("id", &self.id)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Directive {
    /// Emits `signal` to the parent of `agent`, or `None` when the agent
    /// has no live parent (no `__parent__` entry with an `id`, which is also
    /// the case after it was orphaned).
    ///
    /// ```
    /// # use jido::prelude::*;
    /// # use jido::agent::AgentOptions;
    /// # struct Child;
    /// # impl Agent for Child { const NAME: &'static str = "child"; type Schema = (); }
    /// use jido::signal::Signal;
    /// use serde_json::json;
    ///
    /// let mut agent = AgentState::new(Child, AgentOptions::new());
    /// assert!(Directive::emit_to_parent(&agent, Signal::new("done", json!({}))).is_none());
    ///
    /// agent.state_mut().insert("__parent__", json!({"id": "boss", "tag": "worker"}));
    /// let d = Directive::emit_to_parent(&agent, Signal::new("done", json!({}))).unwrap();
    /// assert!(matches!(d, Directive::EmitToParent { ref parent_id, .. } if parent_id == "boss"));
    /// ```
    pub fn emit_to_parent(agent: &AgentData, signal: Signal) -> Option<Self> {
        Self::emit_to_parent_of(agent.state(), signal)
    }
}
