//! Agents: plain data whose `cmd` runs actions and returns directives.
//!
//! An agent has two parts:
//!
//! * a **definition**, a type implementing [`Agent`]: name and metadata, an
//!   optional typed state schema, the [strategy](crate::strategy) that runs
//!   its instructions, its signal routes and hooks;
//! * a **value**, [`AgentState`]: an id, the state (a JSON object) and the
//!   definition, type-erased, so agents of every type look the same to the
//!   runtime and can travel inside a [`Directive::SpawnAgent`].
//!
//! [`AgentState::cmd`] runs instructions through the strategy with no actor
//! involved: action outputs are deep-merged into the state, state
//! operations edit it, and every other effect comes back as a
//! [`Directive`] for the runtime.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
//! use jido::prelude::*;
//! use serde_json::json;
//!
//! #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
//! struct Amount { by: i64 }
//!
//! struct Increment;
//! impl Action for Increment {
//!     type Params = Amount;
//!     type Output = serde_json::Value;
//!     const NAME: &'static str = "increment";
//!     async fn run(&self, p: Amount, ctx: &Context) -> jido::Result<serde_json::Value> {
//!         let count = ctx.state().and_then(|s| s["count"].as_i64()).unwrap_or(0);
//!         Ok(json!({"count": count + p.by}))
//!     }
//! }
//!
//! #[derive(Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
//! struct Counter { count: i64 }
//!
//! struct CounterAgent;
//! impl Agent for CounterAgent {
//!     const NAME: &'static str = "counter";
//!     type Schema = Counter;
//! }
//!
//! let mut agent = AgentState::new(CounterAgent, AgentOptions::new().id("c1"));
//! let directives = agent.cmd((Increment, json!({"by": 2})), ExecOptions::new()).await;
//! assert!(directives.is_empty());
//! assert_eq!(agent.state_as::<Counter>()?.count, 2);
//! # Ok(()) }
//! ```

mod erased;

pub use crate::agent_data::AgentData;
pub use crate::state::{
    ORPHANED_FROM_KEY, PARENT_KEY, RESERVED_KEYS, STRATEGY_KEY, apply_state_op, deep_merge,
    parent_id_of,
};
pub use crate::strategy::{RouteTarget, SignalRoute};

use std::any::Any;
use std::fmt;
use std::future::Future;

use futures::future::Either;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::state::{StateMap, StateValue};

use crate::directive::{ChildAgent, ChildValue, Directive, error_context};
use crate::error::{Error, Result};
use crate::exec::{Exec, ExecOptions};
use crate::signal::Signal;
use crate::strategy::{Command, DynStrategy, IntoCommands, Snapshot, StrategyContext};

use erased::{Definition, ErasedAgent};

/// A typed state schema: defaults, validation and typed reads. `()` means
/// no schema.
///
/// Implemented for every `Default + Serialize + DeserializeOwned +
/// JsonSchema` type. The schema's `Default` value, serialised, gives the
/// state's defaults, and is their only source: a new agent starts with
/// them, and a top-level field missing from the state later reads and
/// validates as its default ([`AgentState::validate`]), with or without
/// `#[serde(default)]`. It must serialise to a JSON object that decodes
/// back into the schema; otherwise the runtime refuses to start the agent
/// with a configuration error ([`AgentState::check_definition`]).
pub trait StateSchema:
    Default + Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static
{
}
impl<T: Default + Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static> StateSchema
    for T
{
}

/// Default route priority of an agent's own routes.
pub const AGENT_ROUTE_PRIORITY: i32 = 0;
/// Default route priority of a strategy's routes.
pub const STRATEGY_ROUTE_PRIORITY: i32 = 50;

/// An agent type's static metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentMetadata {
    /// Name, matching `^[a-zA-Z][a-zA-Z0-9_]*$`.
    pub name: &'static str,
    /// Description.
    pub description: &'static str,
    /// Category.
    pub category: &'static str,
    /// Tags.
    pub tags: &'static [&'static str],
    /// Version (also the checkpoint version).
    pub version: &'static str,
}

/// An agent definition: metadata, state schema, strategy, routes and
/// hooks. The agent value is [`AgentState`].
///
/// Only [`NAME`](Agent::NAME) and [`Schema`](Agent::Schema) are required.
/// The definition is a value: a unit struct for most agents, or a struct
/// holding configuration the strategy or hooks read.
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

    /// The strategy with its options. Called once, when an [`AgentState`]
    /// is created. Defaults to [`Direct`](crate::strategy::Direct).
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(crate::strategy::Direct)
    }

    /// Signal routes of the agent (priority 0 by default).
    fn signal_routes(&self) -> Vec<SignalRoute> {
        Vec::new()
    }

    /// Called by `cmd` after normalisation, before the strategy runs; may
    /// rewrite the commands or the agent.
    ///
    /// # Errors
    ///
    /// An error ends the `cmd` with one Error directive (context
    /// `"on_before_cmd"`); changes the hook made to the agent stay.
    fn on_before_cmd(
        &self,
        agent: &mut AgentState,
        commands: Vec<Command>,
    ) -> Result<Vec<Command>> {
        let _ = agent;
        Ok(commands)
    }

    /// Called at the end of `cmd` with the directives; may rewrite them or
    /// the agent.
    fn on_after_cmd(&self, agent: &mut AgentState, directives: Vec<Directive>) -> Vec<Directive> {
        let _ = agent;
        directives
    }

    /// Brings the state of a checkpoint written by another
    /// [`VERSION`](Agent::VERSION) of this agent (`from_version`) up to
    /// this one. The runtime calls it when it restores a durable agent
    /// (feature `persist`) from such a checkpoint; the migrated state is
    /// what the agent resumes with, and its next checkpoint carries the
    /// current version.
    ///
    /// ```
    /// use jido::prelude::*;
    /// use serde_json::{Map, Value};
    ///
    /// struct Counter;
    /// impl Agent for Counter {
    ///     const NAME: &'static str = "counter";
    ///     const VERSION: &'static str = "2.0.0";
    ///     type Schema = ();
    ///     fn migrate(&self, from: &str, mut state: Map<String, Value>) -> jido::Result<Map<String, Value>> {
    ///         match from {
    ///             // 1.x called the count "n".
    ///             v if v.starts_with("1.") => {
    ///                 let n = state.remove("n").unwrap_or(Value::from(0));
    ///                 state.insert("count".into(), n);
    ///                 Ok(state)
    ///             }
    ///             _ => Err(jido::Error::validation("checkpoint version mismatch")),
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// # Errors
    ///
    /// The default refuses every other version: a validation error
    /// "checkpoint version mismatch" (details `expected`, `got`). The
    /// agent then does not start, and its checkpoint stays as it is.
    fn migrate(&self, from_version: &str, state: Map<String, Value>) -> Result<Map<String, Value>> {
        let _ = state;
        Err(Error::validation("checkpoint version mismatch")
            .with_detail("expected", Self::VERSION)
            .with_detail("got", from_version.to_owned()))
    }

    /// The agent type's metadata.
    fn metadata() -> AgentMetadata
    where
        Self: Sized,
    {
        AgentMetadata {
            name: Self::NAME,
            description: Self::DESCRIPTION,
            category: Self::CATEGORY,
            tags: Self::TAGS,
            version: Self::VERSION,
        }
    }
}

/// How to create an [`AgentState`]: its id and initial state.
///
/// ```
/// use jido::agent::AgentOptions;
/// use serde_json::json;
///
/// let opts = AgentOptions::new()
///     .id("order-7")
///     .state(json!({"total": 0}).as_object().unwrap());
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    id: Option<String>,
    state: StateMap,
}

impl AgentOptions {
    /// No id (a UUIDv7 is generated) and no initial state.
    pub fn new() -> Self {
        Self::default()
    }

    /// The agent's id; an empty id counts as none.
    #[must_use]
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Initial state, merged (shallowly) over the schema's defaults: a
    /// [`StateMap`] or a `serde_json` map (by value or by reference).
    #[must_use]
    pub fn state(mut self, state: impl Into<StateMap>) -> Self {
        self.state = state.into();
        self
    }
}

/// What `cmd` runs with besides its input: options for every instruction,
/// the executor, and the signal being handled.
///
/// `ExecOptions` converts into it, so `agent.cmd(x, ExecOptions::new())`
/// works.
#[derive(Debug, Clone, Default)]
pub struct CmdOptions {
    exec_options: ExecOptions,
    exec: Option<Exec>,
    signal: Option<Arc<Signal>>,
}

impl CmdOptions {
    /// Jido's defaults, the global executor, no signal.
    pub fn new() -> Self {
        Self::default()
    }

    /// Options applied to every instruction (they win over the
    /// instruction's own).
    #[must_use]
    pub fn exec_options(mut self, opts: ExecOptions) -> Self {
        self.exec_options = opts;
        self
    }

    /// The executor actions run on (default: [`Exec::global`]).
    #[must_use]
    pub fn exec(mut self, exec: Exec) -> Self {
        self.exec = Some(exec);
        self
    }

    /// The signal that caused this `cmd` (set by the runtime): a
    /// [`Signal`], or an `Arc<Signal>` to share one without a copy.
    #[must_use]
    pub fn signal(mut self, signal: impl Into<Arc<Signal>>) -> Self {
        self.signal = Some(signal.into());
        self
    }
}

impl From<ExecOptions> for CmdOptions {
    fn from(opts: ExecOptions) -> Self {
        Self::new().exec_options(opts)
    }
}

/// The agent value: its [data](AgentData) (an id, a JSON-object state,
/// strategy data) and its definition (the [`Agent`] type, its schema,
/// hooks and strategy).
///
/// An `AgentState` derefs to its [`AgentData`]: `id()`, `state()`,
/// `state_mut()`, `apply_output(…)`, the strategy data accessors, … are
/// [`AgentData`]'s methods, and an `&mut AgentState` is accepted where a
/// strategy function takes an `&mut AgentData`.
///
/// Cloning is cheap (O(1)): the state is a [`StateMap`] whose objects and
/// arrays are shared between clones; a write through one clone copies only
/// the containers on its path, shallowly (O(change × depth)), and appending
/// to a long array costs O(log n).
#[derive(Clone)]
pub struct AgentState {
    data: AgentData,
    def: Arc<dyn ErasedAgent>,
}

impl AgentState {
    /// Creates an agent of type `A`.
    ///
    /// * The id is `opts`' id, or a new UUIDv7 when it is missing or empty.
    /// * The state is the schema's defaults, then `opts`' state on top
    ///   (shallow: a top-level key of `opts` replaces the default).
    /// * The strategy's [`init`](crate::strategy::Strategy::init) runs and
    ///   **its directives are dropped**, as in Jido; the runtime calls
    ///   [`AgentState::init_strategy`] again when it starts the agent and
    ///   executes those directives.
    ///
    /// ```
    /// # use jido::prelude::*;
    /// #[derive(Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    /// struct Order { total: i64, status: String }
    ///
    /// struct OrderAgent;
    /// impl Agent for OrderAgent { const NAME: &'static str = "order"; type Schema = Order; }
    ///
    /// let state = serde_json::json!({"total": 5});
    /// let agent = AgentState::new(OrderAgent, AgentOptions::new().state(state.as_object().unwrap()));
    /// assert_eq!(agent.id().len(), 36);
    /// assert_eq!(agent.state()["total"], 5);
    /// assert_eq!(agent.state()["status"], "");
    /// ```
    pub fn new<A: Agent>(agent: A, opts: AgentOptions) -> Self {
        let def = Definition::new(agent);
        let mut state = def.schema_defaults().clone();
        if state.is_empty() {
            state = opts.state;
        } else {
            state.extend(opts.state.iter().map(|(k, v)| (k, v.clone())));
        }
        let id = match opts.id {
            Some(id) if !id.is_empty() => id,
            _ => uuid::Uuid::now_v7().to_string(),
        };
        let mut agent = Self {
            data: AgentData::new(id, state),
            def: Arc::new(def),
        };
        let _dropped = agent.init_strategy(CmdOptions::new());
        agent
    }

    /// The agent type's name.
    pub fn name(&self) -> &'static str {
        self.def.metadata().name
    }

    /// The agent type's metadata.
    pub fn metadata(&self) -> AgentMetadata {
        self.def.metadata()
    }

    /// Whether the agent is of type `A`.
    pub fn is<A: Agent>(&self) -> bool {
        self.def.definition().is::<A>()
    }

    /// The definition, when the agent is of type `A`.
    pub fn definition<A: Agent>(&self) -> Option<&A> {
        self.def.definition().downcast_ref::<A>()
    }

    /// Checks the state against the schema, keeping keys the schema does
    /// not know. Values the schema normalises are written back. An agent
    /// without a schema always passes.
    ///
    /// The schema's defaults come from one place, its [`Default`] value:
    /// a top-level field missing from the state (a deleted key, a replaced
    /// state) takes the value a new agent starts with, whether or not the
    /// field says `#[serde(default)]` (which would otherwise give the
    /// field type's `Default`, not the schema's, or fail with "missing
    /// field").
    ///
    /// ```
    /// # use jido::prelude::*;
    /// #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    /// struct Retry { attempts: u32 }
    /// impl Default for Retry { fn default() -> Self { Retry { attempts: 3 } } }
    ///
    /// struct A;
    /// impl Agent for A { const NAME: &'static str = "a"; type Schema = Retry; }
    ///
    /// let mut agent = AgentState::new(A, AgentOptions::new());
    /// agent.state_mut().remove("attempts");
    /// agent.validate()?;
    /// assert_eq!(agent.state()["attempts"], 3);
    /// # Ok::<(), jido::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A validation error `"state validation failed: <path>: <reason>"` with
    /// `path` and `reason` details; the state is left unchanged. The
    /// configuration error of [`check_definition`](AgentState::check_definition)
    /// when the schema's `Default` is unusable.
    pub fn validate(&mut self) -> Result<()> {
        self.validate_with(false)
    }

    /// Checks that the definition can be used: the schema's [`Default`]
    /// value serialises to a JSON object and decodes back into the schema
    /// (it does not when, say, a field is skipped when serialising but
    /// required when decoding). The runtime calls it when it starts the
    /// agent and refuses to start it otherwise.
    ///
    /// ```
    /// # use jido::prelude::*;
    /// #[derive(Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    /// struct Secret {
    ///     #[serde(skip_serializing)]
    ///     token: String,
    /// }
    /// struct A;
    /// impl Agent for A { const NAME: &'static str = "vault"; type Schema = Secret; }
    ///
    /// let agent = AgentState::new(A, AgentOptions::new());
    /// let err = agent.check_definition().unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::Configuration);
    /// assert_eq!(
    ///     err.message(),
    ///     "invalid state schema of agent vault: its Default value does not decode back: \
    ///      token: missing field `token`"
    /// );
    /// ```
    ///
    /// # Errors
    ///
    /// A configuration error `"invalid state schema of agent <name>: ..."`
    /// with an `agent` detail (and `path`/`reason` when decoding fails).
    pub fn check_definition(&self) -> Result<()> {
        match self.def.schema_error() {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        }
    }

    /// Like [`AgentState::validate`], but drops every key the schema does
    /// not know (the [reserved keys](RESERVED_KEYS) are kept).
    ///
    /// # Errors
    ///
    /// As [`AgentState::validate`].
    pub fn validate_strict(&mut self) -> Result<()> {
        self.validate_with(true)
    }

    fn validate_with(&mut self, strict: bool) -> Result<()> {
        let Some(known) = self.def.validate(self.data.state())? else {
            return Ok(());
        };
        let state = self.data.state_mut();
        if strict {
            let reserved: Vec<(&str, StateValue)> = RESERVED_KEYS
                .iter()
                .filter_map(|k| state.get(k).map(|v| (*k, v.clone())))
                .collect();
            let mut fresh = StateMap::from(known);
            fresh.extend(reserved);
            *state = fresh;
        } else {
            for (key, value) in known {
                // Unchanged values keep their shared representation.
                if state.get(&key).is_none_or(|old| *old != value) {
                    state.insert(&key, value);
                }
            }
        }
        Ok(())
    }

    /// Reads the state as a `T` (usually the agent's schema). A top-level
    /// key of the schema's defaults missing from the state (deleted, or
    /// replaced away) reads as its default, as in
    /// [`validate`](AgentState::validate).
    ///
    /// # Errors
    ///
    /// A validation error naming the failing field in its `path` detail.
    pub fn state_as<T: DeserializeOwned>(&self) -> Result<T> {
        let state = erased::with_defaults(self.data.state(), self.def.defaults());
        serde_path_to_error::deserialize(&*state).map_err(|err| {
            let (path, reason) = field_error(err);
            Error::validation(format!("invalid state: {path}: {reason}"))
                .with_detail("path", path)
                .with_detail("reason", reason)
        })
    }

    /// The JSON Schema of the agent's state schema, or `None` without one.
    pub fn state_schema(&self) -> Option<Value> {
        self.def.state_schema()
    }

    /// A checkpoint: `{"version", "agent", "id", "state"}` where `version`
    /// and `agent` are the agent type's [`VERSION`](Agent::VERSION) and
    /// [`NAME`](Agent::NAME). Strategy data kept outside the JSON state
    /// ([`AgentData::strategy_ext`](crate::agent::AgentData::strategy_ext)) is not included.
    pub fn checkpoint(&self) -> Value {
        let meta = self.def.metadata();
        serde_json::json!({
            "version": meta.version,
            "agent": meta.name,
            "id": self.data.id(),
            "state": self.data.state(),
        })
    }

    /// Rebuilds an agent of type `A` from a [checkpoint](AgentState::checkpoint):
    /// creates it with the checkpoint's id (the strategy's `init` runs, its
    /// directives dropped), then merges the checkpoint's state over the
    /// new state (shallow: the checkpoint wins).
    ///
    /// ```
    /// # use jido::prelude::*;
    /// # struct A; impl Agent for A { const NAME: &'static str = "a"; type Schema = (); }
    /// # struct B; impl Agent for B { const NAME: &'static str = "b"; type Schema = (); }
    /// let mut agent = AgentState::new(A, AgentOptions::new().id("a1"));
    /// agent.state_mut().insert("n", 1);
    /// let saved = agent.checkpoint();
    ///
    /// let back = AgentState::restore(A, &saved).unwrap();
    /// assert_eq!((back.id(), &back.state()["n"]), ("a1", &1.into()));
    /// assert!(AgentState::restore(B, &saved).is_err());
    /// ```
    ///
    /// # Errors
    ///
    /// A validation error when the checkpoint is not of the documented
    /// shape ("invalid checkpoint"), belongs to another agent type
    /// ("checkpoint is for another agent") or another version
    /// ("checkpoint version mismatch"); details `expected` and `got`.
    pub fn restore<A: Agent>(agent: A, checkpoint: &Value) -> Result<Self> {
        let invalid = |what: &str| {
            Error::validation("invalid checkpoint").with_detail("reason", what.to_owned())
        };
        let obj = checkpoint
            .as_object()
            .ok_or_else(|| invalid("expected a JSON object"))?;
        let name = obj
            .get("agent")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("missing agent"))?;
        if name != A::NAME {
            return Err(Error::validation("checkpoint is for another agent")
                .with_detail("expected", A::NAME)
                .with_detail("got", name.to_owned()));
        }
        let version = obj
            .get("version")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("missing version"))?;
        if version != A::VERSION {
            return Err(Error::validation("checkpoint version mismatch")
                .with_detail("expected", A::VERSION)
                .with_detail("got", version.to_owned()));
        }
        let id = obj
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("missing id"))?;
        let state = obj
            .get("state")
            .and_then(Value::as_object)
            .ok_or_else(|| invalid("missing state object"))?;
        let mut restored = Self::new(agent, AgentOptions::new().id(id));
        restored
            .state_mut()
            .extend(state.iter().map(|(k, v)| (k, StateValue::from(v))));
        Ok(restored)
    }

    /// Runs the definition's [`Agent::migrate`] on a checkpoint's state.
    #[cfg_attr(not(feature = "persist"), allow(dead_code))]
    pub(crate) fn migrate_state(
        &self,
        from_version: &str,
        state: Map<String, Value>,
    ) -> Result<Map<String, Value>> {
        self.def.migrate(from_version, state)
    }

    /// The strategy of the agent's definition.
    pub fn strategy(&self) -> &DynStrategy {
        self.def.strategy()
    }

    /// The context the strategy runs with for a `cmd` with `opts`.
    pub fn strategy_context(&self, opts: &CmdOptions) -> StrategyContext {
        let strategy = self.def.strategy();
        StrategyContext::from_parts(
            self.def.metadata().name,
            Arc::clone(strategy.options_arc()),
            opts.exec.clone(),
            opts.exec_options,
            opts.signal.clone(),
        )
    }

    /// Runs the strategy's [`init`](crate::strategy::Strategy::init) and
    /// returns its directives. [`AgentState::new`] calls it (dropping the
    /// directives); the runtime calls it again when it starts the agent.
    pub fn init_strategy(&mut self, opts: CmdOptions) -> Vec<Directive> {
        let strategy = self.def.strategy().clone();
        let ctx = self.strategy_context(&opts);
        strategy.init(self, &ctx)
    }

    /// Runs one strategy [`tick`](crate::strategy::Strategy::tick).
    pub fn tick(
        &mut self,
        opts: impl Into<CmdOptions>,
    ) -> impl Future<Output = Vec<Directive>> + Send + '_ {
        let opts = opts.into();
        async move {
            let strategy = self.def.strategy().clone();
            let ctx = self.strategy_context(&opts);
            strategy.tick(self, &ctx).await
        }
    }

    /// The strategy's state seen from outside.
    pub fn strategy_snapshot(&self) -> Snapshot {
        let ctx = self.strategy_context(&CmdOptions::new());
        self.def.strategy().snapshot(self, &ctx)
    }

    /// The routes of the agent for a router: the strategy's (default
    /// priority 50) then the agent's own (default priority 0), with every
    /// priority filled in.
    pub fn signal_routes(&self) -> Vec<SignalRoute> {
        let ctx = self.strategy_context(&CmdOptions::new());
        let strategy_routes = self.def.strategy().signal_routes(&ctx);
        let fill = |mut r: SignalRoute, p: i32| {
            r.priority.get_or_insert(p);
            r
        };
        strategy_routes
            .into_iter()
            .map(|r| fill(r, STRATEGY_ROUTE_PRIORITY))
            .chain(
                self.def
                    .signal_routes()
                    .into_iter()
                    .map(|r| fill(r, AGENT_ROUTE_PRIORITY)),
            )
            .collect()
    }

    /// Runs `input` through the agent's strategy and returns the directives
    /// for the runtime. Needs no actor: call it directly in tests.
    ///
    /// `input` is anything [`IntoCommands`] accepts: an action, `(action,
    /// params)`, an [`Instruction`](crate::Instruction), a [`Command`], a
    /// `Vec` of one of those, or a `Result` of one (from
    /// [`Instruction::from_json`](crate::Instruction::from_json)). `opts`
    /// is an [`ExecOptions`] applied to every instruction (they win over
    /// the instruction's own options) or a full [`CmdOptions`].
    ///
    /// Steps:
    ///
    /// 1. **Normalise.** On failure (an `Err` input, params that are not a
    ///    JSON object) the agent is unchanged and the result is one
    ///    [`Directive::Error`] with context `"normalize"` holding a
    ///    validation error "invalid action" whose `reason` detail is the
    ///    cause's envelope.
    /// 2. [`Agent::on_before_cmd`] (an error gives one Error directive with
    ///    context `"on_before_cmd"`). Steps 1 and 2 run when `cmd` is
    ///    called; the returned future runs the rest.
    /// 3. The strategy's `cmd`. Actions see the state through
    ///    [`Context::state`](crate::Context::state). With the default
    ///    [Direct](crate::strategy::Direct) strategy, for each instruction
    ///    in order:
    ///    * success: the output is deep-merged into the state, then the
    ///      effects apply in order: state operations edit the state, every
    ///      other effect is returned as a directive, in order;
    ///    * failure: an Error directive (context `"instruction"`, execution
    ///      error "instruction failed", `reason` detail = the error's
    ///      envelope), **followed by the directives among the failed
    ///      action's effects; its state operations are not applied**; the
    ///      next instruction still runs.
    /// 4. [`Agent::on_after_cmd`].
    ///
    /// State operations never appear among the returned directives.
    ///
    /// If the returned future is dropped before it finishes, the agent keeps
    /// the results of the instructions that completed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use jido::prelude::*;
    /// use serde_json::json;
    ///
    /// #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
    /// struct P {}
    /// struct Fail;
    /// impl Action for Fail {
    ///     type Params = P;
    ///     type Output = ();
    ///     const NAME: &'static str = "fail";
    ///     async fn run(&self, _: P, _: &Context) -> jido::Result<()> {
    ///         Err(Error::execution("boom").with_retry(false))
    ///     }
    /// }
    ///
    /// struct A;
    /// impl Agent for A { const NAME: &'static str = "a"; type Schema = (); }
    ///
    /// let mut agent = AgentState::new(A, AgentOptions::new());
    /// let directives = agent.cmd(Fail, ExecOptions::new()).await;
    /// match &directives[..] {
    ///     [Directive::Error { error, context }] => {
    ///         assert_eq!(context, "instruction");
    ///         assert_eq!(error.message(), "instruction failed");
    ///         assert_eq!(error.detail("reason").unwrap()["message"], "boom");
    ///     }
    ///     other => panic!("unexpected {other:?}"),
    /// }
    /// # }
    /// ```
    pub fn cmd(
        &mut self,
        input: impl IntoCommands,
        opts: impl Into<CmdOptions>,
    ) -> impl Future<Output = Vec<Directive>> + Send + '_ {
        let commands = input.into_commands().and_then(check_commands);
        self.cmd_checked(commands, &opts.into())
    }

    /// `cmd` for a list of commands as it is (the runtime's path: no
    /// conversion, no new vector).
    pub(crate) fn cmd_commands<'a>(
        &'a mut self,
        commands: Vec<Command>,
        opts: &CmdOptions,
    ) -> impl Future<Output = Vec<Directive>> + Send + use<'a> {
        self.cmd_checked(check_commands(commands), opts)
    }

    /// Whether [`cmd_commands`](Self::cmd_commands) of `commands` finishes
    /// without waiting, as the strategy promises
    /// ([`Strategy::strategy_commands_inline`](crate::strategy::Strategy::strategy_commands_inline)):
    /// strategy commands only, to a strategy that says so.
    pub(crate) fn runs_inline(&self, commands: &[Command]) -> bool {
        let strategy = self.strategy();
        !commands.is_empty()
            && !strategy.is_direct()
            && commands
                .iter()
                .all(|c| matches!(c, Command::Strategy { .. }))
            && strategy.strategy_commands_inline()
    }

    fn cmd_checked<'a>(
        &'a mut self,
        commands: Result<Vec<Command>>,
        opts: &CmdOptions,
    ) -> impl Future<Output = Vec<Directive>> + Send + use<'a> {
        match self.prepare_cmd(commands, opts) {
            Ok((def, commands, ctx)) => Either::Left(async move {
                let strategy = def.strategy();
                let directives = if strategy.is_direct() {
                    crate::strategy::Strategy::cmd(&crate::strategy::Direct, self, commands, &ctx)
                        .await
                } else {
                    strategy.cmd(self, commands, &ctx).await
                };
                def.on_after_cmd(self, directives)
            }),
            Err(directives) => Either::Right(std::future::ready(directives)),
        }
    }

    /// The synchronous part of `cmd` (run at once, so the returned future
    /// stays small): the input check, `on_before_cmd`, the options merged
    /// into each instruction, the strategy context. `Err` holds the
    /// directives to return instead.
    #[allow(clippy::type_complexity)]
    fn prepare_cmd(
        &mut self,
        commands: Result<Vec<Command>>,
        opts: &CmdOptions,
    ) -> std::result::Result<(Arc<dyn ErasedAgent>, Vec<Command>, StrategyContext), Vec<Directive>>
    {
        let commands = match commands {
            Ok(c) => c,
            Err(err) => {
                let error = Error::validation("invalid action")
                    .with_detail("reason", err.to_envelope())
                    .with_source(err);
                return Err(vec![Directive::error(error, error_context::NORMALIZE)]);
            }
        };
        let def = Arc::clone(&self.def);
        let mut commands = match def.on_before_cmd(self, commands) {
            Ok(c) => c,
            Err(err) => return Err(vec![Directive::error(err, error_context::ON_BEFORE_CMD)]),
        };
        for command in &mut commands {
            if let Command::Run(ins) = command {
                ins.opts = opts.exec_options.or(&ins.opts);
            }
        }
        let ctx = self.strategy_context(opts);
        Ok((def, commands, ctx))
    }
}

/// The failing field's path and the reason of a decode error; a missing
/// field is named by its own path rather than its parent's.
pub(crate) fn field_error(err: serde_path_to_error::Error<serde_json::Error>) -> (String, String) {
    let parent = err.path().to_string();
    let reason = err.into_inner().to_string();
    let missing = reason
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
        .map(str::to_owned);
    let path = match missing {
        Some(field) if parent == "." => field,
        Some(field) => format!("{parent}.{field}"),
        None => parent,
    };
    (path, reason)
}

/// Checks instruction params (a JSON object, `null` read as `{}`).
fn check_commands(mut commands: Vec<Command>) -> Result<Vec<Command>> {
    for (index, command) in commands.iter_mut().enumerate() {
        if let Command::Run(ins) = command {
            match &ins.params {
                Value::Object(_) => {}
                Value::Null => ins.params = Value::Object(Map::new()),
                other => {
                    return Err(Error::validation(format!(
                        "invalid params format: expected a JSON object, got {}",
                        crate::action::json_type_name(other)
                    ))
                    .with_detail("action", ins.action.name())
                    .with_detail("index", index));
                }
            }
        }
    }
    Ok(commands)
}

impl fmt::Debug for AgentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentState")
            .field("id", &self.data.id())
            .field("agent", &self.def.metadata().name)
            .field("state", self.data.state())
            .finish_non_exhaustive()
    }
}

impl ChildValue for AgentState {
    fn id(&self) -> &str {
        self.data.id()
    }
}

impl From<AgentState> for ChildAgent {
    fn from(agent: AgentState) -> Self {
        ChildAgent::from_value(Arc::new(agent))
    }
}

impl ChildAgent {
    /// The child agent (`None` for a child described by a
    /// [`ChildKind`](crate::directive::ChildKind)).
    pub fn agent(&self) -> Option<&AgentState> {
        let value: &dyn Any = &**self.value()?;
        value.downcast_ref::<AgentState>()
    }

    /// The child agent, by value (cheap: an agent's state is shared, see
    /// [`AgentState`]). `None` as for [`agent`](ChildAgent::agent).
    pub fn into_agent(self) -> Option<AgentState> {
        self.agent().cloned()
    }

    /// Whether the child is an agent of type `A`.
    pub fn is<A: Agent>(&self) -> bool {
        self.agent().is_some_and(AgentState::is::<A>)
    }
}

impl std::ops::Deref for AgentState {
    type Target = AgentData;

    /// The agent's data: what strategies work on.
    fn deref(&self) -> &AgentData {
        &self.data
    }
}

impl std::ops::DerefMut for AgentState {
    fn deref_mut(&mut self) -> &mut AgentData {
        &mut self.data
    }
}
