//! Jido's reasoning strategies beside ReAct: Chain of Thought, Chain of
//! Draft, Algorithm of Thoughts, Tree of Thoughts, Graph of Thoughts, TRM
//! and Adaptive.
//!
//! Each is a pure state machine ([`machine::Machine`]: [`cot::Cot`],
//! [`cot::Cod`], [`aot::Aot`], [`tot::Tot`], [`got::Got`], [`trm::Trm`],
//! [`adaptive::Adaptive`]) run by one strategy, [`Reasoning`], which turns
//! signals into machine events and the machine's steps into AI directives
//! (`LlmStream` / `LlmGenerate`, `ToolExec` / `EmitToolError`,
//! `EmitRequestError`, `CancelRequest`), through the same glue as
//! [`ReAct`](crate::ai::react::ReAct): the signals, directives and request
//! lifecycle of every request strategy are one mechanism. The aliases name
//! them:
//! [`ChainOfThought`], [`ChainOfDraft`], [`AlgorithmOfThoughts`],
//! [`TreeOfThoughts`], [`GraphOfThoughts`], [`TinyRecursive`] and
//! [`AdaptiveReasoning`].
//!
//! # Requests
//!
//! With NAME the strategy's short name (`cot`, `cod`, `aot`, `tot`,
//! `got`, `trm`, `adaptive`):
//!
//! * `ai.NAME.query` `{query, request_id?}` (`prompt` is accepted for
//!   `query`) starts a request; a missing id is generated. While another
//!   request runs it is rejected with one `ai.request.error` `{request_id,
//!   reason: "busy", message: "agent is busy (status: PHASE)"}` and the
//!   state is untouched.
//! * `ai.NAME.cancel` `{request_id?, reason?}` cancels the running request
//!   (another id is ignored): its calls are cancelled and it fails with a
//!   `cancelled` error, termination `cancelled`.
//! * The answer: top-level `status: "completed"` and `last_answer` (so
//!   [`AgentRef::await_completion`] works), or `status: "failed"` and
//!   `error`; per request in `__strategy__.requests.ID`. This is the
//!   shared [`RequestCore`](crate::ai::request::RequestCore): the machine
//!   lives typed in the strategy ext and its fields are mirrored as JSON
//!   under `__strategy__` (checkpoints keep them; a restored agent reads
//!   them back). Token usage is summed over the request's calls.
//!
//! Swapping one of these strategies for another (or for ReAct) changes
//! only the query signal's type: the agent's own routes and actions are
//! untouched.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use jido::ai::react::machine::Turn;
//! use jido::ai::reasoning::ChainOfThought;
//! use jido::prelude::*;
//!
//! struct Thinker;
//! impl Agent for Thinker {
//!     const NAME: &'static str = "thinker";
//!     type Schema = ();
//!     fn strategy(&self) -> DynStrategy {
//!         DynStrategy::new(ChainOfThought::new().model("local:tiny"))
//!     }
//! }
//!
//! // Without a runtime: feed the strategy what the runtime would send.
//! let cot = ChainOfThought::new();
//! let mut agent = AgentState::new(Thinker, AgentOptions::new());
//! let d = agent.cmd(cot.query_command("6 times 7?", Some("r1")), ExecOptions::new()).await;
//! assert_eq!(d[0].kind(), "ai.llm_stream");
//! let answer = Turn::answer("Step 1: 6 times 7 is 42.\nAnswer: 42");
//! agent.cmd(cot.llm_result_command("call_r1_1", Ok(answer)), ExecOptions::new()).await;
//! assert_eq!(agent.state()["status"], "completed");
//! assert_eq!(agent.state()["last_answer"], "42");
//! let snap = agent.strategy_snapshot();
//! assert_eq!(snap.detail("steps").unwrap()[0]["content"], "6 times 7 is 42.");
//! # }
//! ```
//!
//! [`AgentRef::await_completion`]: crate::server::AgentRef::await_completion

pub mod adaptive;
pub mod aot;
pub mod cot;
pub mod got;
pub mod machine;
pub mod parse;
mod strategy;
pub mod tot;
pub mod trm;

pub use strategy::{
    DEFAULT_REQUEST_HISTORY, DEFAULT_TOOL_BACKOFF_MS, DEFAULT_TOOL_MAX_RETRIES,
    DEFAULT_TOOL_TIMEOUT_MS, Reasoning, commands,
};

/// Chain of Thought ([`cot`]).
pub type ChainOfThought = Reasoning<cot::Cot>;
/// Chain of Draft ([`cot`]).
pub type ChainOfDraft = Reasoning<cot::Cod>;
/// Algorithm of Thoughts ([`aot`]).
pub type AlgorithmOfThoughts = Reasoning<aot::Aot>;
/// Tree of Thoughts ([`tot`]).
pub type TreeOfThoughts = Reasoning<tot::Tot>;
/// Graph of Thoughts ([`got`]).
pub type GraphOfThoughts = Reasoning<got::Got>;
/// TRM, the Tiny Recursive Model loop ([`trm`]).
pub type TinyRecursive = Reasoning<trm::Trm>;
/// Adaptive ([`adaptive`]).
pub type AdaptiveReasoning = Reasoning<adaptive::Adaptive>;
