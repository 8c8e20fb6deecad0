//! The context an action runs with.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::action_metadata::{ActionMetadata, HasMetadata};
use crate::error::{Error, Result, json_type_name};
use crate::executor::Exec;
use crate::signal::Signal;
use crate::state::StateMap;

/// What an action sees beside its params: caller values (a tenant, a
/// request id), the action's own metadata, the deadline of the run, the
/// agent state when run by an agent, and a place to push
/// [effects](crate::effect::Effect).
///
/// Cloning is cheap. Pass the context (or a clone) to a nested
/// [`exec::run`](crate::exec::run) so the nested action inherits the
/// remaining time budget and the instance's task supervisor.
///
/// ```
/// use jido::Context;
/// use serde_json::json;
///
/// let ctx = Context::from_value(json!({"tenant": "acme"})).unwrap();
/// assert_eq!(ctx.get("tenant"), Some(&json!("acme")));
/// assert!(ctx.deadline().is_none());
/// ```
#[derive(Clone, Default)]
pub struct Context {
    /// `None` when empty (most contexts): a context is cloned into every
    /// attempt and its task, and an empty map cost a clone each time.
    values: Option<Arc<Map<String, Value>>>,
    /// The running action (set by Exec), seen through its metadata.
    action: Option<Arc<dyn HasMetadata>>,
    deadline: Option<Instant>,
    /// The deadline nested runs inherit: `deadline` set back by the nested
    /// margin in the contexts Exec builds for attempts, `deadline` itself
    /// otherwise.
    nested_deadline: Option<Instant>,
    state: Option<StateMap>,
    signal: Option<Arc<Signal>>,
    exec: Option<Exec>,
    /// Where the attempt's effects go: only the context Exec builds for an
    /// attempt has one, so a context built by hand needs no allocation.
    ///
    /// Held type-erased: an effect can be a directive, a directive can
    /// carry an instruction, an instruction holds an action, and an action
    /// takes a context, so the effect types sit above this module.
    /// [`crate::effect`] gives the sink its type back
    /// ([`Context::push_effect`]).
    effects: Option<Arc<dyn Any + Send + Sync>>,
}

impl Context {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }

    /// A context from a JSON object (`null` gives an empty context).
    ///
    /// # Errors
    ///
    /// A validation error when `value` is neither an object nor `null`.
    pub fn from_value(value: Value) -> Result<Self> {
        match value {
            Value::Object(values) => Ok(Self::from(values)),
            Value::Null => Ok(Self::new()),
            other => Err(Error::validation(format!(
                "invalid context type: expected a JSON object, got {}",
                json_type_name(&other)
            ))),
        }
    }

    /// A caller value by key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.as_deref()?.get(key)
    }

    /// Sets a caller value.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Value>) -> &mut Self {
        self.values_mut().insert(key.into(), value.into());
        self
    }

    /// Sets a caller value, by value.
    #[must_use]
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.insert(key, value);
        self
    }

    /// All caller values.
    pub fn values(&self) -> &Map<String, Value> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        match &self.values {
            Some(values) => values,
            None => EMPTY.get_or_init(Map::new),
        }
    }

    /// The caller values to write to (copied first when shared).
    fn values_mut(&mut self) -> &mut Map<String, Value> {
        Arc::make_mut(self.values.get_or_insert_with(Default::default))
    }

    /// Merges `values` into the caller values; keys in `values` win.
    pub fn merge_values(&mut self, values: Map<String, Value>) {
        if !values.is_empty() {
            self.values_mut().extend(values);
        }
    }

    /// The metadata of the running action (set by Exec).
    pub fn action(&self) -> Option<&ActionMetadata> {
        self.action.as_deref().map(HasMetadata::metadata)
    }

    /// The absolute deadline of the current run, if any, on tokio's clock
    /// ([`tokio::time::Instant`], which `tokio::time::pause` and
    /// `#[tokio::test(start_paused = true)]` control; convert with
    /// `into_std()` to compare with a `std::time::Instant`).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Time left before [`deadline`](Context::deadline) (zero once passed),
    /// or `None` without a deadline, measured on tokio's clock.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// The deadline a run started with this context inherits.
    ///
    /// In the context Exec hands to an action, this is the action's own
    /// [`deadline`](Context::deadline) set back by
    /// [`exec::nested_margin`](crate::exec::nested_margin) of the attempt's
    /// budget, so that a nested run times out while the enclosing action
    /// still has time to handle its error. In a context built by hand (or
    /// after [`with_deadline`](Context::with_deadline)) it is the deadline
    /// itself.
    ///
    /// ```
    /// use jido::Context;
    /// use tokio::time::Instant;
    ///
    /// let at = Instant::now();
    /// let ctx = Context::new().with_deadline(at);
    /// assert_eq!(ctx.nested_deadline(), Some(at));
    /// ```
    pub fn nested_deadline(&self) -> Option<Instant> {
        self.nested_deadline
    }

    /// Sets an absolute deadline: runs with this context finish by then
    /// (nested runs inherit it as is, with no margin).
    ///
    /// Deadlines live on tokio's clock ([`tokio::time::Instant`]); a
    /// `std::time::Instant` is accepted too and converted (both read the
    /// same monotonic clock unless tokio's is paused, as in tests with
    /// `start_paused = true`, where only tokio's instants follow the paused
    /// time).
    ///
    /// ```
    /// use std::time::Duration;
    /// use jido::Context;
    ///
    /// let tokio_clock = tokio::time::Instant::now() + Duration::from_secs(1);
    /// assert_eq!(Context::new().with_deadline(tokio_clock).deadline(), Some(tokio_clock));
    ///
    /// let std_clock = std::time::Instant::now() + Duration::from_secs(1);
    /// let ctx = Context::new().with_deadline(std_clock);
    /// assert_eq!(ctx.deadline().map(tokio::time::Instant::into_std), Some(std_clock));
    /// ```
    #[must_use]
    pub fn with_deadline(mut self, deadline: impl Into<Instant>) -> Self {
        let deadline = deadline.into();
        self.deadline = Some(deadline);
        self.nested_deadline = Some(deadline);
        self
    }

    /// The agent state, when the action runs inside an agent's `cmd`: a
    /// snapshot shared with the agent, read in place (no copy). Read it like
    /// serde_json (`s["history"]`, `.get("k")`, `.as_i64()`); a clone of it
    /// or of any value in it is O(1), so an action can return (part of) it
    /// through a [`StateOp`](crate::effect::StateOp) without a deep copy.
    pub fn state(&self) -> Option<&StateMap> {
        self.state.as_ref()
    }

    /// Sets the agent state seen by the action (a [`StateMap`] or a
    /// `serde_json` map).
    #[must_use]
    pub fn with_state(mut self, state: impl Into<StateMap>) -> Self {
        self.state = Some(state.into());
        self
    }

    /// The signal being handled, when the action runs for an agent's
    /// signal under the runtime.
    pub fn signal(&self) -> Option<&Signal> {
        self.signal.as_deref()
    }

    /// Sets the signal seen by the action.
    #[must_use]
    pub fn with_signal(mut self, signal: Arc<Signal>) -> Self {
        self.signal = Some(signal);
        self
    }

    /// The executor (instance) this run belongs to, if any.
    pub fn exec(&self) -> Option<&Exec> {
        self.exec.as_ref()
    }

    /// Ties the context to an executor: nested runs started with this
    /// context use its task supervisor and defaults.
    #[must_use]
    pub fn with_exec(mut self, exec: Exec) -> Self {
        self.exec = Some(exec);
        self
    }

    pub(crate) fn set_values(&mut self, values: Map<String, Value>) {
        self.values = (!values.is_empty()).then(|| Arc::new(values));
    }

    /// The context of one attempt (or compensation): the caller's values
    /// and state, the running action, the resolved deadline and the one
    /// nested runs inherit, the executor running it, and the attempt's
    /// effect sink (see [`crate::effect`]).
    pub(crate) fn for_run(
        &self,
        action: Arc<dyn HasMetadata>,
        deadline: Option<Instant>,
        nested_deadline: Option<Instant>,
        exec: Exec,
        effects: Arc<dyn Any + Send + Sync>,
    ) -> Self {
        Self {
            values: self.values.clone(),
            action: Some(action),
            deadline,
            nested_deadline,
            state: self.state.clone(),
            signal: self.signal.clone(),
            exec: Some(exec),
            effects: Some(effects),
        }
    }

    /// The context of an action run by an agent's strategy (built in
    /// place: this is on every `cmd`'s path).
    pub(crate) fn for_agent(state: StateMap, exec: Exec, signal: Option<Arc<Signal>>) -> Self {
        Self {
            values: None,
            action: None,
            deadline: None,
            nested_deadline: None,
            state: Some(state),
            signal,
            exec: Some(exec),
            effects: None,
        }
    }

    /// The effect sink of the attempt this context belongs to, if any
    /// (read by [`crate::effect`]).
    pub(crate) fn effect_sink(&self) -> Option<&(dyn Any + Send + Sync)> {
        self.effects.as_deref()
    }
}

impl From<Map<String, Value>> for Context {
    fn from(values: Map<String, Value>) -> Self {
        Self {
            values: (!values.is_empty()).then(|| Arc::new(values)),
            ..Self::default()
        }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("values", self.values())
            .field("action", &self.action().map(|a| a.name))
            .field("deadline", &self.deadline)
            .field("nested_deadline", &self.nested_deadline)
            .field("has_state", &self.state.is_some())
            .finish_non_exhaustive()
    }
}
