//! # jido
//!
//! Jido's agent model on the [`ractor`] actor framework. The tour goes
//! bottom-up, in the order of the [layers](#layers): each module uses only
//! the ones before it.
//!
//! * [Errors](error) are data: one [`Error`] with an [`ErrorKind`], JSON
//!   details and the canonical envelope.
//! * An agent's [`state`] is a JSON object shared between snapshots;
//!   [`StateOp`](state::StateOp)s edit it.
//! * [Signals](signal) (CloudEvents 1.0.2) are how everything talks to an
//!   agent; the [router](signal::router) maps their types to targets and
//!   [dispatch](signal::dispatch) delivers them.
//! * [`Action`]s are typed, validated units of work ([`action`](mod@action));
//!   they run with a [`Context`] ([`context`]) and are packaged with params
//!   and [`ExecOptions`](exec::ExecOptions) as [`Instruction`]s
//!   ([`instruction`]).
//! * [Directives](directive) describe what the runtime should do (emit,
//!   spawn, schedule, stop) as data; an action asks for them, and for state
//!   operations, as [effects](effect).
//! * [`exec`] runs actions with deadlines, retries and compensation.
//! * [Strategies](strategy) decide how `cmd` runs its instructions against
//!   an agent's data ([`AgentData`](agent::AgentData)):
//!   [`Direct`](strategy::Direct), [`Fsm`](strategy::Fsm),
//!   [`BehaviorTree`](strategy::BehaviorTree) or your own.
//! * [Agents](agent) are plain values ([`AgentState`]) whose `cmd` returns
//!   new state plus directives.
//! * The [runtime](server) runs each agent as a ractor actor, routes
//!   signals to `cmd`, executes directives, delivers to actors and process
//!   groups ([`ActorTarget`](server::ActorTarget)) and keeps the agent
//!   hierarchy through supervision events.
//! * The AI layer (`ai`, feature `ai`): LLM and tool directives with their
//!   signal contract, tools from actions, the model interface; with
//!   feature `mcp`, the tools of MCP servers and actions served over MCP.
//! * Persistence (`persist`, feature `persist`): the `Storage` trait
//!   (checkpoints, a signal journal, owner epochs, dead letters) with
//!   memory, redb (`persist-redb`) and PostgreSQL (`persist-postgres`)
//!   adapters and a conformance suite for your own. With a storage, agents
//!   are durable (`server::Durability`: checkpoints before replies, a
//!   write-ahead journal and `AgentRef::cast_durable`), restored on every
//!   start and restart, and hibernate when idle (`Jido::get_or_start`
//!   thaws them); see `docs/persistence.md`.
//! * Distribution (`cluster`, feature `cluster`, experimental): agents
//!   addressable by id across nodes over `ractor_cluster`, a gateway per
//!   node carrying CloudEvents bytes, rendezvous placement, activation on
//!   demand, watches across nodes.
//!
//! The pure core (everything but `server` and the extensions) never
//! touches an actor: an agent's `cmd` runs and is tested as a plain value.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
//! use jido::prelude::*;
//! use serde_json::json;
//!
//! #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
//! struct Greet { name: String }
//!
//! struct SayHello;
//! impl Action for SayHello {
//!     type Params = Greet;
//!     type Output = serde_json::Value;
//!     const NAME: &'static str = "say_hello";
//!     async fn run(&self, p: Greet, _: &Context) -> jido::Result<serde_json::Value> {
//!         Ok(json!({"greeting": format!("hello, {}", p.name)}))
//!     }
//! }
//!
//! let out = jido::exec::run(SayHello, json!({"name": "ann"}), Context::new(), ExecOptions::new()).await?;
//! assert_eq!(out.output["greeting"], "hello, ann");
//! # Ok(()) }
//! ```
//!
//! # Layers
//!
//! Inside the pure core a module imports only from the layers below it
//! (`scripts/module_cycles.py` checks that there is no import cycle), so
//! the core reads bottom-up and a layer changes without touching the ones
//! below. From the bottom:
//!
//! | layer | module | holds |
//! |---|---|---|
//! | 1 | [`error`] | [`Error`], [`ErrorKind`], the envelope and its sanitising |
//! | 2 | [`state`] | the state value ([`StateMap`](state::StateMap)), [`StateOp`](state::StateOp), `deep_merge`, the reserved keys |
//! | 2 | [`signal`] | the [`Signal`] envelope, its JSON and HTTP forms, the router |
//! | 2 | `executor` (private, read at [`exec`]) | the nouns of a run: [`ExecOptions`](exec::ExecOptions), [`RetryPolicy`](exec::RetryPolicy), the [`TaskSupervisor`](exec::TaskSupervisor) and the [`Exec`](exec::Exec) handle |
//! | 3 | [`signal::dispatch`] | [`DispatchConfig`](signal::dispatch::DispatchConfig), the [`Dispatch`](signal::dispatch::Dispatch) trait, the in-process and HTTP adapters |
//! | 3 | `action_metadata` (private, read at [`action`](mod@action)) | [`ActionMetadata`](action::ActionMetadata), [`Compensation`](action::Compensation) |
//! | 4 | [`context`] | [`Context`]: what an action sees (values, deadline, state, signal, executor, the running action's metadata) |
//! | 5 | [`action`](mod@action) | the [`Action`] trait, [`DynAction`], `action_fn`, `json_action` |
//! | 6 | [`instruction`] | [`Instruction`]: an action, its params, context values and options |
//! | 7 | [`directive`] | [`Directive`] and its builders; a spawned child agent is held as a [`ChildAgent`](directive::ChildAgent): a value, or a [`ChildKind`](directive::ChildKind) (a registered kind and a placement, which the instance's [`ChildHost`](server::ChildHost) starts, on another node with feature `cluster`) |
//! | 8 | [`effect`] | [`Effect`](effect::Effect) (a state op or a directive), [`Context::push_effect`] |
//! | 9 | [`exec`] | running an action: validation, deadline, retries, compensation, chains |
//! | 10 | `agent_data` (private, read at [`agent`]) | [`AgentData`](agent::AgentData): an agent's id, state and strategy data |
//! | 11 | [`strategy`] | the [`Strategy`](strategy::Strategy) trait, Direct, FSM, behaviour trees, [`SignalRoute`](strategy::SignalRoute) |
//! | 12 | [`agent`] | the [`Agent`] trait, [`AgentState`] (= [`AgentData`](agent::AgentData) + the definition), `cmd`, checkpoints |
//!
//! Two links run against the data model and are held by small handles:
//! a context holds its attempt's effect sink type-erased (an effect can be
//! a directive that runs an action, which takes a context), and a
//! `SpawnAgent` directive holds its child as a [`ChildAgent`](directive::ChildAgent)
//! (an agent's `cmd` returns directives). Above the core sit the runtime
//! ([`server`]: the `AgentServer` actor, directive execution, hierarchy,
//! instances, the ractor dispatch targets) and the extensions (`ai`,
//! `persist`, `cluster`), which use the core and never the other way
//! round.
#![warn(missing_docs)]

pub mod action;
mod action_metadata;
pub mod agent;
mod agent_data;
#[cfg(feature = "ai")]
pub mod ai;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod context;
pub mod directive;
pub mod effect;
pub mod error;
pub mod exec;
mod executor;
pub mod instruction;
#[cfg(feature = "persist")]
pub mod persist;
pub mod server;
pub mod signal;
pub mod state;
pub mod strategy;

pub use action::{Action, DynAction, action_fn};

pub use agent::{Agent, AgentState};
pub use context::Context;
pub use directive::Directive;
pub use error::{Error, ErrorKind, Result};
pub use instruction::Instruction;
/// Turns an async function into an [`Action`] (feature `macros`, on by
/// default). The attribute lives beside the [`action`](mod@action) module:
/// write it `#[jido::action]`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::prelude::*;
/// use serde::{Deserialize, Serialize};
/// use serde_json::json;
///
/// #[derive(Clone, Deserialize, schemars::JsonSchema)]
/// struct AddParams { value: i64, amount: i64 }
///
/// #[derive(Serialize)]
/// struct Sum { value: i64 }
///
/// /// Adds `amount` to `value`.
/// #[jido::action]
/// async fn add(p: AddParams, _ctx: &Context) -> jido::Result<Sum> {
///     Ok(Sum { value: p.value + p.amount })
/// }
///
/// assert_eq!(Add::NAME, "add");
/// assert_eq!(Add::DESCRIPTION, "Adds `amount` to `value`.");
/// let out = jido::exec::run(Add, json!({"value": 1, "amount": 2}), Context::new(), ExecOptions::new()).await?;
/// assert_eq!(out.output["value"], 3);
/// // The function stays a plain function.
/// assert_eq!(add(AddParams { value: 1, amount: 1 }, &Context::new()).await?.value, 2);
/// # Ok(()) }
/// ```
///
/// The function is `async fn name(params: P, ctx: &Context) -> jido::Result<O>`
/// or, without the context, `async fn name(params: P) -> jido::Result<O>`.
/// The attribute keeps it unchanged and adds, with the function's
/// visibility, a unit struct (`Debug, Clone, Copy, Default, PartialEq, Eq,
/// Hash`) implementing [`Action`]:
///
/// * the struct is named after the function in CamelCase (`add_item` →
///   `AddItem`), or `struct_name = AddItemAction`;
/// * [`NAME`](Action::NAME) is the function's name, or `name = "..."`; a
///   name not matching `^[a-zA-Z][a-zA-Z0-9_]*$` is a compile error;
/// * [`DESCRIPTION`](Action::DESCRIPTION) is the doc comment (lines joined
///   with `\n`, trimmed; empty without one);
/// * [`Params`](Action::Params) is `P` (so the schema is `P`'s
///   `JsonSchema` and params are decoded and validated as for any action:
///   a bad field is a validation error with its `path`) and
///   [`Output`](Action::Output) is `O`;
/// * `category = "..."`, `version = "..."` and `tags = ["...", ...]` set
///   the other metadata.
/// * `crate = path` names the `jido` crate when it is not `::jido` (a
///   renamed dependency, a re-export).
///
/// A wrong signature (not `async`, no params, more than two arguments, a
/// context that is not `&Context`, `self`, generics, no `Result` return
/// type) is a compile error pointing at the offending part.
///
/// ```
/// use jido::prelude::*;
///
/// #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
/// struct Ping {}
///
/// #[jido::action(name = "ping_v2", struct_name = PingAction, category = "net", tags = ["net"])]
/// async fn ping(_p: Ping) -> jido::Result<()> {
///     Ok(())
/// }
///
/// assert_eq!(PingAction::NAME, "ping_v2");
/// assert_eq!(PingAction::CATEGORY, "net");
/// assert_eq!(PingAction::TAGS, &["net"]);
/// assert_eq!(PingAction::DESCRIPTION, "");
/// ```
///
/// These do not compile:
///
/// ```compile_fail
/// # #[derive(Clone, serde::Deserialize, schemars::JsonSchema)] struct P {}
/// #[jido::action] // error: an action fn must be `async`
/// fn not_async(_p: P, _ctx: &jido::Context) -> jido::Result<()> { Ok(()) }
/// ```
///
/// ```compile_fail
/// # #[derive(Clone, serde::Deserialize, schemars::JsonSchema)] struct P {}
/// #[jido::action] // error: too many arguments
/// async fn three(_p: P, _ctx: &jido::Context, _n: u32) -> jido::Result<()> { Ok(()) }
/// ```
///
/// ```compile_fail
/// # #[derive(Clone, serde::Deserialize, schemars::JsonSchema)] struct P {}
/// #[jido::action] // error: an action fn must return `jido::Result<Output>`
/// async fn no_result(_p: P) {}
/// ```
///
/// ```compile_fail
/// # #[derive(Clone, serde::Deserialize, schemars::JsonSchema)] struct P {}
/// #[jido::action(name = "2fast")] // error: invalid action name
/// async fn fast(_p: P) -> jido::Result<()> { Ok(()) }
/// ```
///
/// For an action built at run time (tests, a closure), see [`action_fn`].
#[cfg(feature = "macros")]
pub use jido_macros::action;
pub use signal::Signal;

/// The items most programs need.
pub mod prelude {
    pub use crate::action::{Action, ActionMetadata, Compensation, DynAction};
    pub use crate::agent::{Agent, AgentData, AgentOptions, AgentState, CmdOptions};
    pub use crate::context::Context;
    pub use crate::directive::Directive;
    pub use crate::effect::{Effect, StateOp};
    pub use crate::error::{Error, ErrorKind};
    pub use crate::exec::{Exec, ExecOptions};
    pub use crate::instruction::{Instruction, IntoInstructions};
    pub use crate::server::{AgentRef, Jido, JidoConfig, ServerOptions};
    pub use crate::signal::dispatch::{Dispatch, DispatchConfig};
    pub use crate::signal::{Route, Router, Signal, TypedSignal};
    pub use crate::state::{StateArray, StateMap, StateValue};
    pub use crate::strategy::{Command, DynStrategy, IntoCommands, Snapshot, SnapshotStatus};
}

/// The README's code samples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
