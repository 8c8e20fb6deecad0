//! The runtime: agents as ractor actors.
//!
//! * [`Jido`] is an instance: a root supervisor actor, a registry (agent
//!   id → [`AgentRef`]), the task supervisor actions run in, and default
//!   options. Instances are isolated from each other.
//! * [`AgentServer`] is the actor running one agent. Every agent is an
//!   `ActorRef<`[`AgentMsg`]`>`, whatever its type; [`AgentRef`] wraps it
//!   with `call`, `cast`, `state`, `status`, `await_completion` and
//!   `stop`.
//! * An agent takes **one signal at a time**, in arrival order. Its actions
//!   run in supervised tasks (unless made inline with a zero timeout), so
//!   queries, stop and supervision events are served while a long action
//!   runs: whatever the strategy, the actor drives the `cmd` itself (no
//!   task of its own) and is woken when what it awaits, such as an
//!   action's task, is ready.
//! * The [directives](crate::directive) a `cmd` returns are queued and
//!   executed **one per message** (built-ins, then custom ones through
//!   [`DirectiveExec`]); errors go to the [`ErrorPolicy`].
//! * Parents and children are tied by ractor **monitors**: a child's end is
//!   a `jido.agent.child.exit` signal for the parent; a parent's end
//!   applies the child's [`OnParentDeath`] policy, whether the parent
//!   stopped, crashed or was killed. Children run linked under the
//!   instance supervisor, which restarts them by their [`Restart`]
//!   policy.
//!
//! `docs/runtime-semantics.md` states the ordering, lifecycle and
//! parent-death guarantees.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
//! use jido::prelude::*;
//! use jido::agent::SignalRoute;
//! use jido::server::{AwaitOptions, CompletionStatus, Jido, JidoConfig, ServerOptions};
//! use jido::signal::Signal;
//! use serde_json::json;
//!
//! #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
//! struct Finish { answer: i64 }
//! struct FinishAction;
//! impl Action for FinishAction {
//!     type Params = Finish;
//!     type Output = serde_json::Value;
//!     const NAME: &'static str = "finish";
//!     async fn run(&self, p: Finish, _: &Context) -> jido::Result<serde_json::Value> {
//!         Ok(json!({"status": "completed", "last_answer": p.answer}))
//!     }
//! }
//!
//! struct Solver;
//! impl Agent for Solver {
//!     const NAME: &'static str = "solver";
//!     type Schema = ();
//!     fn signal_routes(&self) -> Vec<SignalRoute> {
//!         vec![SignalRoute::action("solver.finish", FinishAction)]
//!     }
//! }
//!
//! let jido = Jido::start(JidoConfig::new()).await?;
//! let agent = jido.start_agent(AgentState::new(Solver, AgentOptions::new()), ServerOptions::new()).await?;
//! agent.cast(Signal::new("solver.finish", json!({"answer": 42})))?;
//! let done = agent.await_completion(AwaitOptions::new()).await?;
//! assert_eq!((done.status, done.result), (CompletionStatus::Completed, json!(42)));
//! jido.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! [`Restart`]: crate::directive::Restart

mod actor;
mod actor_target;
mod agent_ref;
mod child_host;
pub mod cron;
mod directives;
#[cfg(feature = "persist")]
mod durable;
#[cfg(not(feature = "persist"))]
#[path = "durable_off.rs"]
mod durable;
mod exit;
mod hierarchy;
mod inflight;
mod ingress;
mod instance;
mod msg;
mod options;
mod specs;

use std::time::Duration;

pub use actor::{AgentServer, AgentServerState};
pub use actor_target::{ActorTarget, DeliveryMode, GroupTarget, SignalSink};
pub use agent_ref::{
    AgentRef, AgentStatus, AwaitOptions, Completion, CompletionStatus, DebugEvent, ServerStatus,
};
pub(crate) use child_host::tag_in_use;
pub use child_host::{ChildHost, ChildSpawn, ChildStatus};
pub use directives::{DirectiveContext, DirectiveExec, DirectiveResult};
#[cfg(feature = "persist")]
pub use durable::{
    Durability, JOURNAL_CHECKPOINT_EVERY, KindFactory, MAX_CHECKPOINT_DELTAS, MAX_REPLAYS,
    RECENT_IDS,
};
#[cfg(feature = "cluster")]
pub(crate) use exit::FinalExit;
pub use exit::{AgentEvent, AgentEvents, EVENTS_CAPACITY, ExitReason};
#[cfg(feature = "cluster")]
pub(crate) use hierarchy::stop_child_reason;
#[cfg(feature = "cluster")]
pub(crate) use instance::should_restart_after;
pub use instance::{Jido, JidoConfig};
pub use msg::{AgentMsg, CallRequest, RuntimeMsg};
pub use options::{
    AgentServerArgs, ErrorDecision, ErrorEvent, ErrorPolicy, OnParentDeath, ParentRef,
    ServerOptions,
};
pub use specs::AgentSpecs;

/// Default timeout of [`AgentRef::call`] and the queries (5 s).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Default timeout of [`AgentRef::await_completion`] (10 s).
pub const DEFAULT_AWAIT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a graceful stop may take before the agent is killed (5 s).
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Default `max_queue_size` (10 000 directives).
pub const DEFAULT_MAX_QUEUE_SIZE: usize = 10_000;
/// Default `max_pending_signals`: signals that may wait for their turn
/// (10 000); beyond it a signal is refused with `QueueOverflow`.
pub const DEFAULT_MAX_PENDING_SIGNALS: usize = 10_000;
/// How many Emit dispatches to targets that must wait (HTTP, webhook,
/// synchronous actor delivery, a full bounded channel) one agent runs at
/// once, by default (see
/// [`ServerOptions::max_concurrent_dispatches`]).
pub const DEFAULT_MAX_CONCURRENT_DISPATCHES: usize = 64;
/// Size of the debug ring buffer (500 events).
pub const DEBUG_BUFFER_SIZE: usize = 500;
/// Default restart intensity: restarts allowed per window (3).
pub const DEFAULT_MAX_RESTARTS: u32 = 3;
/// Default restart window (5 s).
pub const DEFAULT_RESTART_WINDOW: Duration = Duration::from_secs(5);

/// The reason an agent's exit is reported with: the stop reason, `"normal"`
/// without one or after ractor's `drain`.
pub(crate) fn exit_reason(reason: Option<String>) -> String {
    match reason {
        Some(r) if r != instance::DRAINED => r,
        _ => "normal".to_owned(),
    }
}

/// Signal types the runtime produces or handles itself.
pub mod signal_types {
    /// Stops the agent (built in when no route matches): data
    /// `{reason}` (default `"normal"`).
    pub const AGENT_STOP: &str = "jido.agent.stop";
    /// To a parent when a child (re)starts: `{parent_id, child_id,
    /// child_type, tag, meta}`, plus `node` for a child placed on a node
    /// (its `child_type` is then its kind's name).
    pub const CHILD_STARTED: &str = "jido.agent.child.started";
    /// To a parent when a child ends: `{tag, id, reason}`.
    pub const CHILD_EXIT: &str = "jido.agent.child.exit";
    /// To a parent when a child it asked for did not start: `{parent_id,
    /// child_id, tag, error}` (`error`: the error envelope `{type,
    /// message, details, retryable}`), plus `node` for a child placed on
    /// a node.
    pub const CHILD_START_FAILED: &str = "jido.agent.child.start_failed";
    /// To a parent when a child hit the restart limit: `{tag, id,
    /// restarts, reason}`, plus `node` for a child placed on a node.
    pub const CHILD_GIVEN_UP: &str = "jido.agent.child.given_up";
    /// To an orphan (`emit_orphan`): `{parent_id, tag, meta, reason}`.
    pub const ORPHANED: &str = "jido.agent.orphaned";
    /// Emitted by the `emit_signal` error policy: `{error, context,
    /// agent_id, error_type, details, retryable, signal_id, signal_type}`
    /// (see [`ErrorPolicy::EmitSignal`](super::ErrorPolicy::EmitSignal)).
    /// An error raised while processing one emits no further one.
    pub const AGENT_ERROR: &str = "jido.agent.error";
    /// Runtime signals (`jido.agent.*`) without a route are ignored
    /// instead of becoming routing errors. The namespace is reserved: an
    /// untrusted signal (see "Trust" on [`Signal`](crate::signal::Signal))
    /// of such a type is refused unless the agent opts in with
    /// [`ServerOptions::allow_untrusted_runtime_signals`](super::ServerOptions::allow_untrusted_runtime_signals).
    pub const RUNTIME_PREFIX: &str = "jido.agent.";
    /// To a durable agent (feature `persist`) when a journal entry that
    /// kept crashing it was moved to the dead letters on restore: `{key,
    /// seq, attempts, signal_type, signal_id, error}`. Processed like any
    /// signal (route it to react); without a route it is ignored.
    pub const DEAD_LETTER: &str = "jido.agent.dead_letter";
}
