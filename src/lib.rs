//! # jido
//!
//! Jido's agent model on the [`ractor`] actor framework.
//!
//! * [`Action`]s are typed, validated units of work ([`action`](mod@action)).
//! * [`exec`] runs them with deadlines, retries and compensation.
//! * [Agents](agent) are plain data ([`AgentState`]) whose `cmd` returns
//!   new state plus [directives](directive): effects described as data.
//! * [Strategies](strategy) decide how `cmd` runs its instructions:
//!   [`Direct`](strategy::Direct), [`Fsm`](strategy::Fsm),
//!   [`BehaviorTree`](strategy::BehaviorTree) or your own.
//! * [Signals](signal) (CloudEvents 1.0.2) are how everything talks to an
//!   agent; the [router](signal::router) maps their types to targets and
//!   [dispatch](signal::dispatch) delivers them.
//! * The [runtime](server) runs each agent as a ractor actor, routes
//!   signals to `cmd`, executes directives and keeps the agent hierarchy
//!   through supervision events.
//! * The AI layer (`ai`, feature `ai`): LLM and tool directives with their
//!   signal contract, tools from actions, the model interface.
//! * Persistence (`persist`, feature `persist`): the `Storage` trait
//!   (checkpoints, a signal journal, owner epochs, dead letters) with
//!   memory, redb (`persist-redb`) and PostgreSQL (`persist-postgres`)
//!   adapters and a conformance suite for your own.
//!
//! The pure core (everything but `server` and `signal::dispatch`) never
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
#![warn(missing_docs)]

pub mod action;
pub mod agent;
#[cfg(feature = "ai")]
pub mod ai;
pub mod context;
pub mod directive;
pub mod effect;
pub mod error;
pub mod exec;
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
    pub use crate::agent::{Agent, AgentOptions, AgentState, CmdOptions};
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
