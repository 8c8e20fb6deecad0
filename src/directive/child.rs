//! What a child agent is started with: [`ChildOptions`], its
//! [`OnParentDeath`] policy, and the [`SpawnAgent`] builder behind
//! [`Directive::spawn_agent`].

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Directive, ErrorPolicy, Restart};
use crate::error::{Error, Result};
use crate::signal::dispatch::DispatchConfig;

/// What a child agent does when its parent ends (stops, crashes or is
/// killed).
///
/// ```
/// use jido::directive::OnParentDeath;
///
/// assert_eq!(OnParentDeath::parse("emit_orphan"), Some(OnParentDeath::EmitOrphan));
/// assert_eq!(OnParentDeath::default(), OnParentDeath::Stop);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OnParentDeath {
    /// Stop with the reason `"shutdown: parent_down: <parent's reason>"`
    /// (the default). The child's own children then apply their policy.
    #[default]
    Stop,
    /// Keep running: the parent is dropped and `__orphaned_from__` records
    /// it.
    Continue,
    /// As [`Continue`](OnParentDeath::Continue), and process one
    /// `jido.agent.orphaned` signal.
    EmitOrphan,
}

impl OnParentDeath {
    /// Reads `"stop"`, `"continue"` or `"emit_orphan"`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "stop" => OnParentDeath::Stop,
            "continue" => OnParentDeath::Continue,
            "emit_orphan" => OnParentDeath::EmitOrphan,
            _ => return None,
        })
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            OnParentDeath::Stop => "stop",
            OnParentDeath::Continue => "continue",
            OnParentDeath::EmitOrphan => "emit_orphan",
        }
    }
}

/// Server options of a child agent started by
/// [`Directive::SpawnAgent`]: the subset of
/// [`ServerOptions`](crate::server::ServerOptions) a parent may choose for
/// its child. Every option left unset takes the instance's default, then
/// Jido's (see `ServerOptions`). The child's parent, instance, restart
/// policy and custom directive executors come from the parent and the
/// directive, not from here.
///
/// | option | default for a child |
/// |---|---|
/// | `id` | `"<parent id>/<tag>"` |
/// | `on_parent_death` | [`OnParentDeath::Stop`] |
/// | `initial_state` | none (merged shallowly over the child's state) |
/// | `default_dispatch` | none |
/// | `error_policy` | [`ErrorPolicy::LogOnly`] |
/// | `max_queue_size`, `max_pending_signals` | 10 000 (≥ 1) |
/// | `max_concurrent_dispatches` | 64 (≥ 1) |
/// | `debug` | false |
/// | `allow_untrusted_runtime_signals` | false |
/// | `fail_calls_on_action_error` | true |
///
/// A value out of range (a size of 0) is refused when the child starts:
/// the start fails, is logged, and the parent keeps nothing of it.
///
/// # Examples
///
/// ```
/// use jido::directive::{ChildOptions, ErrorPolicy, OnParentDeath};
/// use serde_json::json;
///
/// let opts = ChildOptions::new()
///     .id("worker-1")
///     .on_parent_death(OnParentDeath::Continue)
///     .error_policy(ErrorPolicy::max_errors(3))
///     .max_queue_size(100);
/// assert_eq!(opts.get_id(), Some("worker-1"));
/// assert_eq!(opts.get_on_parent_death(), Some(OnParentDeath::Continue));
/// assert_eq!(opts.get_max_queue_size(), Some(100));
///
/// // Options that arrive as data (a signal, an LLM tool call):
/// let data = json!({"id": "worker-1", "on_parent_death": "continue", "max_queue_size": 100});
/// let parsed = ChildOptions::from_json(data.as_object().unwrap())?;
/// assert_eq!(parsed.get_on_parent_death(), Some(OnParentDeath::Continue));
/// # Ok::<(), jido::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct ChildOptions {
    pub(crate) id: Option<String>,
    pub(crate) initial_state: Option<Map<String, Value>>,
    pub(crate) default_dispatch: Option<DispatchConfig>,
    pub(crate) error_policy: Option<ErrorPolicy>,
    pub(crate) max_queue_size: Option<usize>,
    pub(crate) max_pending_signals: Option<usize>,
    pub(crate) max_concurrent_dispatches: Option<usize>,
    pub(crate) on_parent_death: Option<OnParentDeath>,
    pub(crate) debug: Option<bool>,
    pub(crate) allow_untrusted_runtime_signals: Option<bool>,
    pub(crate) fail_calls_on_action_error: Option<bool>,
}

impl ChildOptions {
    /// Nothing set: every option takes its default.
    pub fn new() -> Self {
        Self::default()
    }

    /// The child's id (an empty id counts as none: `"<parent id>/<tag>"`).
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        let id = id.into();
        self.id = (!id.is_empty()).then_some(id);
        self
    }

    /// What the child does when its parent ends.
    #[must_use]
    pub fn on_parent_death(mut self, policy: OnParentDeath) -> Self {
        self.on_parent_death = Some(policy);
        self
    }

    /// State merged (shallowly) over the child's state at start.
    #[must_use]
    pub fn initial_state(mut self, state: Map<String, Value>) -> Self {
        self.initial_state = Some(state);
        self
    }

    /// Where the child's Emit directives without a dispatch go.
    #[must_use]
    pub fn default_dispatch(mut self, dispatch: DispatchConfig) -> Self {
        self.default_dispatch = Some(dispatch);
        self
    }

    /// The child's error policy.
    #[must_use]
    pub fn error_policy(mut self, policy: ErrorPolicy) -> Self {
        self.error_policy = Some(policy);
        self
    }

    /// The most directives the child's queue holds (≥ 1).
    #[must_use]
    pub fn max_queue_size(mut self, n: usize) -> Self {
        self.max_queue_size = Some(n);
        self
    }

    /// The most signals that may wait while the child is busy (≥ 1).
    #[must_use]
    pub fn max_pending_signals(mut self, n: usize) -> Self {
        self.max_pending_signals = Some(n);
        self
    }

    /// The most Emit dispatches the child runs at once in tasks (≥ 1).
    #[must_use]
    pub fn max_concurrent_dispatches(mut self, n: usize) -> Self {
        self.max_concurrent_dispatches = Some(n);
        self
    }

    /// Debug mode for the child (keeps its last 500 events).
    #[must_use]
    pub fn debug(mut self, on: bool) -> Self {
        self.debug = Some(on);
        self
    }

    /// Whether untrusted signals may use the reserved `jido.agent.*` types
    /// on the child (default `false`).
    #[must_use]
    pub fn allow_untrusted_runtime_signals(mut self, allow: bool) -> Self {
        self.allow_untrusted_runtime_signals = Some(allow);
        self
    }

    /// Whether a `call` to the child whose actions failed answers with the
    /// error (default `true`; `false` is Jido's behaviour).
    #[must_use]
    pub fn fail_calls_on_action_error(mut self, on: bool) -> Self {
        self.fail_calls_on_action_error = Some(on);
        self
    }

    /// The id, if set.
    pub fn get_id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The parent-death policy, if set.
    pub fn get_on_parent_death(&self) -> Option<OnParentDeath> {
        self.on_parent_death
    }

    /// The initial state, if set.
    pub fn get_initial_state(&self) -> Option<&Map<String, Value>> {
        self.initial_state.as_ref()
    }

    /// The default dispatch, if set.
    pub fn get_default_dispatch(&self) -> Option<&DispatchConfig> {
        self.default_dispatch.as_ref()
    }

    /// The error policy, if set.
    pub fn get_error_policy(&self) -> Option<&ErrorPolicy> {
        self.error_policy.as_ref()
    }

    /// The directive queue bound, if set.
    pub fn get_max_queue_size(&self) -> Option<usize> {
        self.max_queue_size
    }

    /// The pending signal bound, if set.
    pub fn get_max_pending_signals(&self) -> Option<usize> {
        self.max_pending_signals
    }

    /// The concurrent dispatch bound, if set.
    pub fn get_max_concurrent_dispatches(&self) -> Option<usize> {
        self.max_concurrent_dispatches
    }

    /// Debug mode, if set.
    pub fn get_debug(&self) -> Option<bool> {
        self.debug
    }

    /// Whether untrusted runtime signals are allowed, if set.
    pub fn get_allow_untrusted_runtime_signals(&self) -> Option<bool> {
        self.allow_untrusted_runtime_signals
    }

    /// Whether calls fail on action errors, if set.
    pub fn get_fail_calls_on_action_error(&self) -> Option<bool> {
        self.fail_calls_on_action_error
    }

    /// Reads options that arrive as JSON (a signal's data, an LLM tool
    /// call): `id` (string or null), `initial_state` (object),
    /// `on_parent_death` (`"stop"`, `"continue"`, `"emit_orphan"`),
    /// `max_queue_size`, `max_pending_signals`, `max_concurrent_dispatches`
    /// (non-negative integers), `debug`, `allow_untrusted_runtime_signals`,
    /// `fail_calls_on_action_error` (booleans), `error_policy` (see [`ErrorPolicy::from_json`]).
    ///
    /// # Errors
    ///
    /// A configuration error "unknown server option: KEY" for another key,
    /// "invalid server option: KEY" for a bad value (details `option`,
    /// `value`), or the error policy's "invalid error policy".
    pub fn from_json(opts: &Map<String, Value>) -> Result<Self> {
        let bad = |key: &str, value: &Value| {
            Error::configuration(format!("invalid server option: {key}"))
                .with_detail("option", key.to_owned())
                .with_detail("value", value.clone())
        };
        let count = |key: &str, value: &Value| {
            value
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| bad(key, value))
        };
        let flag = |key: &str, value: &Value| value.as_bool().ok_or_else(|| bad(key, value));
        let mut out = ChildOptions::new();
        for (key, value) in opts {
            match key.as_str() {
                "id" => match value {
                    Value::String(s) => out = out.id(s.clone()),
                    Value::Null => {}
                    _ => return Err(bad(key, value)),
                },
                "initial_state" => match value {
                    Value::Object(m) => out.initial_state = Some(m.clone()),
                    _ => return Err(bad(key, value)),
                },
                "on_parent_death" => {
                    out.on_parent_death = Some(
                        value
                            .as_str()
                            .and_then(OnParentDeath::parse)
                            .ok_or_else(|| bad(key, value))?,
                    );
                }
                "max_queue_size" => out.max_queue_size = Some(count(key, value)?),
                "max_pending_signals" => out.max_pending_signals = Some(count(key, value)?),
                "max_concurrent_dispatches" => {
                    out.max_concurrent_dispatches = Some(count(key, value)?);
                }
                "debug" => out.debug = Some(flag(key, value)?),
                "allow_untrusted_runtime_signals" => {
                    out.allow_untrusted_runtime_signals = Some(flag(key, value)?);
                }
                "fail_calls_on_action_error" => {
                    out.fail_calls_on_action_error = Some(flag(key, value)?);
                }
                "error_policy" => out.error_policy = Some(ErrorPolicy::from_json(value)?),
                _ => {
                    return Err(
                        Error::configuration(format!("unknown server option: {key}"))
                            .with_detail("option", key.clone()),
                    );
                }
            }
        }
        Ok(out)
    }
}

impl ChildOptions {
    /// The JSON form [`from_json`](ChildOptions::from_json) reads back:
    /// every option that is set, `error_policy` as `"log_only"`,
    /// `"stop_on_error"`, `"emit_signal"` or `{"max_errors": n}`. This is
    /// what crosses nodes with a [`ChildKind`].
    ///
    /// ```
    /// use jido::directive::{ChildOptions, ErrorPolicy, OnParentDeath};
    /// use serde_json::json;
    ///
    /// let opts = ChildOptions::new()
    ///     .on_parent_death(OnParentDeath::EmitOrphan)
    ///     .error_policy(ErrorPolicy::max_errors(3));
    /// let data = opts.to_json()?;
    /// assert_eq!(serde_json::Value::Object(data.clone()),
    ///     json!({"on_parent_death": "emit_orphan", "error_policy": {"max_errors": 3}}));
    /// let back = ChildOptions::from_json(&data)?;
    /// assert_eq!(back.get_on_parent_death(), Some(OnParentDeath::EmitOrphan));
    /// # Ok::<(), jido::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A configuration error "child option has no data form: OPTION"
    /// (detail `option`) for a `default_dispatch`, an `emit_signal` error
    /// policy with its own dispatch, or a custom error policy: they hold
    /// code or actor references.
    pub fn to_json(&self) -> Result<Map<String, Value>> {
        let no_form = |option: &str| {
            Error::configuration(format!("child option has no data form: {option}"))
                .with_detail("option", option.to_owned())
        };
        let mut out = Map::new();
        if let Some(id) = &self.id {
            out.insert("id".into(), Value::String(id.clone()));
        }
        if let Some(state) = &self.initial_state {
            out.insert("initial_state".into(), Value::Object(state.clone()));
        }
        if self.default_dispatch.is_some() {
            return Err(no_form("default_dispatch"));
        }
        if let Some(policy) = &self.error_policy {
            let value = match policy {
                ErrorPolicy::LogOnly => Value::from("log_only"),
                ErrorPolicy::StopOnError => Value::from("stop_on_error"),
                ErrorPolicy::EmitSignal(None) => Value::from("emit_signal"),
                ErrorPolicy::MaxErrors(n) => serde_json::json!({ "max_errors": n }),
                ErrorPolicy::EmitSignal(Some(_)) | ErrorPolicy::Custom(_) => {
                    return Err(no_form("error_policy"));
                }
            };
            out.insert("error_policy".into(), value);
        }
        let counts = [
            ("max_queue_size", self.max_queue_size),
            ("max_pending_signals", self.max_pending_signals),
            ("max_concurrent_dispatches", self.max_concurrent_dispatches),
        ];
        for (key, n) in counts {
            if let Some(n) = n {
                out.insert(key.into(), Value::from(n as u64));
            }
        }
        if let Some(policy) = self.on_parent_death {
            out.insert("on_parent_death".into(), Value::from(policy.as_str()));
        }
        let flags = [
            ("debug", self.debug),
            (
                "allow_untrusted_runtime_signals",
                self.allow_untrusted_runtime_signals,
            ),
            (
                "fail_calls_on_action_error",
                self.fail_calls_on_action_error,
            ),
        ];
        for (key, flag) in flags {
            if let Some(flag) = flag {
                out.insert(key.into(), Value::Bool(flag));
            }
        }
        Ok(out)
    }
}

/// A [`Directive::SpawnAgent`] being built: returned by
/// [`Directive::spawn_agent`], turned into a [`Directive`] (or an
/// [`Effect`](crate::effect::Effect)) with `.into()` — [`Context::push_effect`](crate::Context::push_effect)
/// takes it as is.
///
/// Defaults: no options (see [`ChildOptions`]), empty meta, the
/// [`Restart::Transient`] policy.
///
/// # Examples
///
/// ```
/// # use jido::prelude::*;
/// # struct Worker;
/// # impl Agent for Worker { const NAME: &'static str = "worker"; type Schema = (); }
/// use jido::directive::{OnParentDeath, Restart};
/// use serde_json::json;
///
/// let worker = AgentState::new(Worker, AgentOptions::new());
/// let d: Directive = Directive::spawn_agent(worker, "w1")
///     .id("orders/w1")
///     .on_parent_death(OnParentDeath::EmitOrphan)
///     .restart(Restart::Permanent)
///     .meta(json!({"role": "worker"}).as_object().unwrap().clone())
///     .into();
///
/// let Directive::SpawnAgent { tag, options, meta, restart, .. } = &d else { unreachable!() };
/// assert_eq!(tag, "w1");
/// assert_eq!(options.get_id(), Some("orders/w1"));
/// assert_eq!(options.get_on_parent_death(), Some(OnParentDeath::EmitOrphan));
/// assert_eq!(*restart, Restart::Permanent);
/// assert_eq!(meta["role"], "worker");
/// ```
#[must_use = "a SpawnAgent does nothing until it is turned into a Directive"]
#[derive(Debug, Clone)]
pub struct SpawnAgent {
    agent: ChildAgent,
    tag: String,
    options: ChildOptions,
    meta: Map<String, Value>,
    restart: Restart,
}

impl SpawnAgent {
    /// Starts `agent` as a child tracked under `tag`, with the defaults.
    pub fn new(agent: impl Into<ChildAgent>, tag: impl Into<String>) -> Self {
        Self {
            agent: agent.into(),
            tag: tag.into(),
            options: ChildOptions::new(),
            meta: Map::new(),
            restart: Restart::default(),
        }
    }

    /// The child's id (default `"<parent id>/<tag>"`).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.options = self.options.id(id);
        self
    }

    /// What the child does when its parent ends (default
    /// [`OnParentDeath::Stop`]).
    pub fn on_parent_death(mut self, policy: OnParentDeath) -> Self {
        self.options = self.options.on_parent_death(policy);
        self
    }

    /// State merged (shallowly) over the child's state at start.
    pub fn initial_state(mut self, state: Map<String, Value>) -> Self {
        self.options = self.options.initial_state(state);
        self
    }

    /// The child's server options, replacing any set before (`id`,
    /// `on_parent_death` and `initial_state` included).
    pub fn options(mut self, options: ChildOptions) -> Self {
        self.options = options;
        self
    }

    /// Free metadata handed to the child with its parent reference
    /// (`__parent__.meta`), and carried by `jido.agent.child.started`.
    pub fn meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta = meta;
        self
    }

    /// The restart policy under the instance supervisor (default
    /// [`Restart::Transient`]); for a [`ChildKind`] child, what its host
    /// does when it ends (the cluster's host restarts it, placed anew).
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }
}

impl From<SpawnAgent> for Directive {
    fn from(s: SpawnAgent) -> Self {
        Directive::SpawnAgent {
            agent: s.agent,
            tag: s.tag,
            options: s.options,
            meta: s.meta,
            restart: s.restart,
        }
    }
}

/// The agent a [`Directive::SpawnAgent`] starts: an
/// [`AgentState`](crate::AgentState) held opaquely, or a [`ChildKind`]
/// (a registered kind and a [`Placement`]) that a child host builds,
/// possibly on another node.
///
/// Directives sit below agents in the core (an agent's `cmd` returns
/// directives), so the directive holds its child agent through this small
/// handle. Build it from an `AgentState` or a `ChildKind` (`.into()`, or
/// pass either where `impl Into<ChildAgent>` is taken, as in
/// [`Directive::spawn_agent`]); read it back with
/// [`agent`](ChildAgent::agent), [`into_agent`](ChildAgent::into_agent),
/// [`is`](ChildAgent::is) or [`spec`](ChildAgent::spec). Cloning is cheap.
///
/// ```
/// # use jido::prelude::*;
/// # struct Worker;
/// # impl Agent for Worker { const NAME: &'static str = "worker"; type Schema = (); }
/// use jido::directive::{ChildAgent, ChildKind};
///
/// let child = ChildAgent::from(AgentState::new(Worker, AgentOptions::new().id("w1")));
/// assert_eq!(child.id(), "w1");
/// assert!(child.is::<Worker>());
/// assert_eq!(child.agent().map(|a| a.name()), Some("worker"));
///
/// let by_kind = ChildAgent::from(ChildKind::new("report"));
/// assert_eq!(by_kind.spec().and_then(|s| s.kind()), Some("report"));
/// assert!(by_kind.agent().is_none());
/// assert_eq!(by_kind.id(), "");
/// ```
#[derive(Clone)]
pub struct ChildAgent(ChildRepr);

#[derive(Clone)]
enum ChildRepr {
    Value(Arc<dyn ChildValue>),
    Spec(ChildKind),
}

/// What a [`ChildAgent`] holds: implemented by `AgentState` alone.
pub(crate) trait ChildValue: Any + Send + Sync + fmt::Debug {
    /// The agent's id.
    fn id(&self) -> &str;
}

impl ChildAgent {
    /// Holds `agent` (the agent layer builds it: `From<AgentState>`).
    pub(crate) fn from_value(agent: Arc<dyn ChildValue>) -> Self {
        Self(ChildRepr::Value(agent))
    }

    /// The held value, for the agent layer to take back (`None` for a
    /// spec).
    pub(crate) fn value(&self) -> Option<&Arc<dyn ChildValue>> {
        match &self.0 {
            ChildRepr::Value(v) => Some(v),
            ChildRepr::Spec(_) => None,
        }
    }

    /// The child's spec, when it is described by one instead of a value.
    pub fn spec(&self) -> Option<&ChildKind> {
        match &self.0 {
            ChildRepr::Spec(spec) => Some(spec),
            ChildRepr::Value(_) => None,
        }
    }

    /// The child agent's id (before the runtime applies the
    /// [`ChildOptions`] id, if any); empty for a [`ChildKind`], whose id
    /// is the options' id or `"<parent id>/<tag>"`.
    pub fn id(&self) -> &str {
        match &self.0 {
            ChildRepr::Value(v) => v.id(),
            ChildRepr::Spec(_) => "",
        }
    }
}

impl From<ChildKind> for ChildAgent {
    fn from(spec: ChildKind) -> Self {
        Self(ChildRepr::Spec(spec))
    }
}

impl fmt::Debug for ChildAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            ChildRepr::Value(v) => fmt::Debug::fmt(&**v, f),
            ChildRepr::Spec(spec) => fmt::Debug::fmt(spec, f),
        }
    }
}

/// Where a child described by a [`ChildKind`] runs. The runtime itself
/// starts no spec child: the instance's child host does (see
/// [`ChildHost`](crate::server::ChildHost); feature `cluster`:
/// `Cluster::start` installs one that starts it on a node of the
/// cluster).
///
/// ```
/// use jido::directive::Placement;
///
/// assert_eq!(Placement::default(), Placement::Hash);
/// let p: Placement = serde_json::from_value(serde_json::json!({"node": "node-b"}))?;
/// assert_eq!(p, Placement::Node("node-b".into()));
/// assert_eq!(serde_json::to_value(Placement::Local)?, "local");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Where the host places the child's id (a cluster: rendezvous
    /// hashing over the live nodes). The default.
    #[default]
    Hash,
    /// This node.
    Local,
    /// The node of this name (a start there fails when it is not a
    /// member).
    Node(String),
}

/// A child agent described by data instead of a value: the **kind** a
/// host starts it from (a factory registered under that name: feature
/// `cluster`, `Cluster::register_kind`) and its [`Placement`]. Its id,
/// initial state and the other [`ChildOptions`] come from the
/// [`SpawnAgent`], and cross nodes as JSON with it
/// ([`ChildOptions::to_json`]). Unlike an
/// [`AgentState`](crate::AgentState), a spec is serialisable, which is
/// what lets a `SpawnAgent` start its child on another node.
///
/// # Examples
///
/// ```
/// use jido::directive::{ChildKind, Directive, Placement};
/// use serde_json::json;
///
/// let spec = ChildKind::new("report").on_node("node-b");
/// assert_eq!(spec.placement(), &Placement::Node("node-b".into()));
/// let d: Directive = Directive::spawn_agent(spec.clone(), "nightly")
///     .id("report:nightly")
///     .initial_state(json!({"day": "mon"}).as_object().unwrap().clone())
///     .into();
/// let Directive::SpawnAgent { agent, options, .. } = &d else { unreachable!() };
/// assert_eq!(agent.spec(), Some(&spec));
/// assert_eq!(options.get_id(), Some("report:nightly"));
///
/// // Its data form.
/// assert_eq!(serde_json::to_value(&spec)?, json!({"kind": "report", "placement": {"node": "node-b"}}));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ChildKind {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(default)]
    placement: Placement,
}

impl ChildKind {
    /// A child of `kind`, placed by the host ([`Placement::Hash`]).
    pub fn new(kind: impl Into<String>) -> Self {
        Self {
            kind: Some(kind.into()),
            placement: Placement::Hash,
        }
    }

    /// A child whose kind is the one its id names (the prefix before
    /// `:`, as for `Cluster::agent`).
    pub fn by_id() -> Self {
        Self::default()
    }

    /// Where it runs.
    #[must_use]
    pub fn place(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// On node `node` ([`Placement::Node`]).
    #[must_use]
    pub fn on_node(self, node: impl Into<String>) -> Self {
        self.place(Placement::Node(node.into()))
    }

    /// The kind, when named (`None`: the id's prefix).
    pub fn kind(&self) -> Option<&str> {
        self.kind.as_deref()
    }

    /// Where it runs.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }
}
