//! ReAct: the reason–act loop as a strategy on a pure state machine.
//!
//! [`ReAct`] is a [`Strategy`]: an agent using it answers questions sent as
//! `ai.react.query` signals by calling a model ([`LlmStream`] or
//! [`LlmGenerate`]), running the tools the model asks for ([`ToolExec`],
//! or [`EmitToolError`] for an unknown tool) and calling the model again
//! with their results, until the model answers. The loop itself is
//! [`machine::Machine`], a pure function of (state, event) to (state,
//! steps); the strategy only translates signals into events and steps into
//! directives, and keeps the machine in the agent state under
//! `__strategy__` (JSON, so checkpoints keep it).
//!
//! # Requests
//!
//! * `ai.react.query` `{query, request_id?, output_schema?}` starts a
//!   request (a missing id is generated). While another request runs, it
//!   is rejected: one `ai.request.error` `{request_id, reason: "busy",
//!   message}` and the running request is untouched.
//! * `ai.react.cancel` `{request_id?, reason?}` cancels the running
//!   request (a different id is ignored): its model stream and tool calls
//!   are cancelled ([`CancelRequest`]) and it fails with a `cancelled`
//!   error.
//! * The answer: top-level `status: "completed"` and `last_answer` in the
//!   agent state (so [`AgentRef::await_completion`] works), or `status:
//!   "failed"` and `error`; per request in `__strategy__.requests.ID`
//!   `{query, status: pending | completed | failed, result, error,
//!   termination_reason, usage}` (the latest [`DEFAULT_REQUEST_HISTORY`]
//!   requests), awaited with [`ReAct::await_options`].
//! * The conversation is kept: a follow-up question continues it.
//!
//! # Signals
//!
//! Consumed (the strategy's routes): `ai.react.query`, `ai.react.cancel`,
//! `ai.llm.delta`, `ai.llm.response`, `ai.usage`, `ai.tool.started`,
//! `ai.tool.result`, `ai.request.error`. With [`ReAct::events`], the
//! strategy emits to that dispatch, in order: `ai.request.started`
//! `{request_id, query}`; the `ai.llm.delta`, `ai.usage`,
//! `ai.tool.started` and `ai.tool.result` signals of the running request
//! (stale ones are not forwarded); `ai.request.error` for a rejected
//! request; and exactly one terminal `ai.request.completed` `{request_id,
//! result, termination_reason, usage}` or `ai.request.failed`
//! `{request_id, error, termination_reason, usage}` per accepted request.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
//! use jido::ai::react::{machine::Turn, ReAct};
//! use jido::prelude::*;
//! use jido::strategy::Command;
//! use serde_json::json;
//!
//! struct Assistant;
//! impl Agent for Assistant {
//!     const NAME: &'static str = "assistant";
//!     type Schema = ();
//!     fn strategy(&self) -> DynStrategy {
//!         DynStrategy::new(ReAct::new().model("local:tiny").system_prompt("Be brief."))
//!     }
//! }
//!
//! // Without a runtime: feed the strategy what the runtime would send.
//! let mut agent = AgentState::new(Assistant, AgentOptions::new());
//! let directives = agent.cmd(ReAct::query_command("Hi?", Some("r1")), ExecOptions::new()).await;
//! assert_eq!(directives[0].kind(), "ai.llm_stream");
//! let reply = ReAct::llm_response_payload("call_r1_1", Ok(Turn::answer("Hello!")));
//! agent.cmd(Command::strategy("react_llm_result", reply), ExecOptions::new()).await;
//! assert_eq!(agent.state()["status"], "completed");
//! assert_eq!(agent.state()["last_answer"], "Hello!");
//! assert_eq!(agent.strategy_snapshot().result, Some(json!("Hello!")));
//! # Ok(()) }
//! ```
//!
//! [`AgentRef::await_completion`]: crate::server::AgentRef::await_completion
//! [`LlmStream`]: crate::ai::directive::LlmStream
//! [`LlmGenerate`]: crate::ai::directive::LlmGenerate
//! [`ToolExec`]: crate::ai::directive::ToolExec
//! [`EmitToolError`]: crate::ai::directive::EmitToolError
//! [`CancelRequest`]: crate::ai::directive::CancelRequest

mod driven;
pub(crate) mod driver;
pub mod machine;
mod output;

pub use output::OutputSchema;

use serde_json::{Map, Value};

use self::driver::Settings;
use self::machine::{Machine, MachineConfig, Turn};
use super::client::{Message, Messages};
use super::envelope::ResultEnvelope;
use super::request::RequestCore;
pub use super::request::{
    DEFAULT_REQUEST_HISTORY, REQUEST_COMPLETED, REQUEST_FAILED, REQUEST_STARTED,
};
use super::signals::{self, LlmResponseData};
use crate::agent::AgentData;
use crate::error::Error;
use crate::server::AwaitOptions;
use crate::signal::Signal;
use crate::strategy::{Command, Snapshot, Strategy, StrategyContext};

/// The signal starting a request.
pub const QUERY_SIGNAL: &str = "ai.react.query";
/// The signal cancelling the running request.
pub const CANCEL_SIGNAL: &str = "ai.react.cancel";

/// The strategy commands the routes send (the signal's data as params).
pub mod commands {
    /// `ai.react.query`.
    pub const QUERY: &str = "react_query";
    /// `ai.react.cancel`.
    pub const CANCEL: &str = "react_cancel";
    /// `ai.llm.delta`.
    pub const LLM_DELTA: &str = "react_llm_delta";
    /// `ai.llm.response`.
    pub const LLM_RESULT: &str = "react_llm_result";
    /// `ai.usage`.
    pub const USAGE: &str = "react_usage";
    /// `ai.tool.started`.
    pub const TOOL_STARTED: &str = "react_tool_started";
    /// `ai.tool.result`.
    pub const TOOL_RESULT: &str = "react_tool_result";
    /// `ai.request.error`.
    pub const REQUEST_ERROR: &str = "react_request_error";
}

/// Default per-attempt timeout of a tool call (15 s, Jido's ReAct).
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 15_000;
/// Default retries of a failed tool call (1, Jido's ReAct).
pub const DEFAULT_TOOL_MAX_RETRIES: u32 = 1;
/// Default delay between tool attempts (200 ms, Jido's ReAct).
pub const DEFAULT_TOOL_BACKOFF_MS: u64 = 200;

const MODULE: &str = "react";

/// The ReAct strategy (see the [module docs](self)).
///
/// Configuration (defaults): [`model`](ReAct::model) (alias `"fast"`),
/// [`system_prompt`](ReAct::system_prompt) (none),
/// [`examples`](ReAct::examples) (none),
/// [`tools`](ReAct::tools) (none), [`max_iterations`](ReAct::max_iterations)
/// (10), [`tool_concurrency`](ReAct::tool_concurrency) (4),
/// [`tool_timeout_ms`](ReAct::tool_timeout_ms) (15 000),
/// [`tool_max_retries`](ReAct::tool_max_retries) (1),
/// [`tool_backoff_ms`](ReAct::tool_backoff_ms) (200),
/// [`streaming`](ReAct::streaming) (on), [`max_tokens`](ReAct::max_tokens)
/// (1024), [`temperature`](ReAct::temperature) (0.2),
/// [`llm_timeout`](ReAct::llm_timeout) (the runtime's),
/// [`output`](ReAct::output) schemas (none), [`events`](ReAct::events)
/// (none; see [Signals](self#signals)).
#[derive(Clone, Debug)]
pub struct ReAct {
    settings: Settings,
    system_prompt: Option<String>,
    examples: Messages,
    machine: MachineConfig,
}

impl Default for ReAct {
    fn default() -> Self {
        Self::new()
    }
}

impl ReAct {
    /// The defaults above.
    pub fn new() -> Self {
        ReAct {
            settings: Settings::new(MODULE),
            system_prompt: None,
            examples: Messages::new(),
            machine: MachineConfig::new(),
        }
    }

    driver::settings_builders!();

    /// The system prompt, sent first on every model call.
    #[must_use]
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Example turns sent before the conversation on every model call
    /// (after the system prompt), never stored in it: a few-shot history
    /// showing a small model how to call the tools.
    #[must_use]
    pub fn examples(mut self, messages: Vec<Message>) -> Self {
        self.examples = messages.into();
        self
    }

    /// Most model turns of one request; reaching it completes the request
    /// with termination `max_iterations`.
    #[must_use]
    pub fn max_iterations(mut self, n: u64) -> Self {
        self.machine.max_iterations = n;
        self
    }

    /// How many tool calls of one turn run at once (results are still fed
    /// back in call order).
    #[must_use]
    pub fn tool_concurrency(mut self, n: usize) -> Self {
        self.machine.tool_concurrency = n;
        self
    }

    /// A structured-output schema requests may name in `output_schema`:
    /// the answer must be JSON decoding into the type; an invalid answer
    /// gets one repair turn, then fails with `invalid_output`.
    #[must_use]
    pub fn output(mut self, schema: OutputSchema) -> Self {
        self.machine = self.machine.output(schema);
        self
    }

    /// Whether a request continues the conversation of the previous ones
    /// (default true: a follow-up question sees the earlier turns); false:
    /// each request starts a new conversation (a stateless question
    /// answerer, whose state does not grow).
    #[must_use]
    pub fn keep_conversation(mut self, keep: bool) -> Self {
        self.machine = self.machine.keep_conversation(keep);
        self
    }

    /// The machine's configuration.
    pub fn machine_config(&self) -> &MachineConfig {
        &self.machine
    }

    /// An `ai.react.query` signal.
    ///
    /// ```
    /// let s = jido::ai::react::ReAct::query("What is 6 times 7?", Some("r1"));
    /// assert_eq!(s.ty(), "ai.react.query");
    /// assert_eq!(s.data().unwrap()["request_id"], "r1");
    /// ```
    pub fn query(query: &str, request_id: Option<&str>) -> Signal {
        Signal::new(QUERY_SIGNAL, query_params(query, request_id))
    }

    /// The strategy command of an `ai.react.query` (to drive an agent
    /// without the runtime).
    pub fn query_command(query: &str, request_id: Option<&str>) -> Command {
        Command::strategy(commands::QUERY, query_params(query, request_id))
    }

    /// The data of an `ai.llm.response` for call `call_id` (what the
    /// runtime sends; to drive an agent without it), as JSON.
    pub fn llm_response_payload(call_id: &str, result: Result<Turn, &Error>) -> Value {
        signals::Payload::into_value(Self::llm_response_data(call_id, result))
    }

    /// The `ai.llm.response` payload for call `call_id`, typed: the
    /// runtime's signal is [`LlmResponseData::into_signal`] of it (to drive
    /// an agent without the runtime, pass that signal in
    /// [`CmdOptions::signal`](crate::agent::CmdOptions::signal) with the
    /// command's params `null`, as the runtime does).
    pub fn llm_response_data(call_id: &str, result: Result<Turn, &Error>) -> LlmResponseData {
        let result = match result {
            Ok(turn) => ResultEnvelope::ok(signals::turn_value(
                turn.text,
                None,
                turn.tool_calls,
                turn.finish_reason.as_ref(),
                String::new(),
                turn.usage,
                false,
            )),
            Err(error) => ResultEnvelope::error(error),
        };
        LlmResponseData {
            call_id: call_id.to_owned(),
            result,
            model: String::new(),
            duration_ms: 0,
            metadata: Default::default(),
        }
    }

    /// Options for [`AgentRef::await_completion`] waiting for request
    /// `request_id` (its entry in `__strategy__.requests`).
    ///
    /// [`AgentRef::await_completion`]: crate::server::AgentRef::await_completion
    pub fn await_options(request_id: &str) -> AwaitOptions {
        RequestCore::await_options(request_id)
    }

    /// The machine of `agent`, if it runs this strategy (the typed one in
    /// the strategy ext when current, else read from `__strategy__`).
    pub fn machine_of(agent: &AgentData) -> Option<Machine> {
        RequestCore::new(MODULE)
            .peek::<Machine>(agent)
            .map(std::borrow::Cow::into_owned)
    }

    /// The shared request handling (history, events).
    pub fn request_core(&self) -> &RequestCore {
        &self.settings.core
    }
}

/// The params of a query (`{query, request_id?}`).
pub(crate) fn query_params(query: &str, request_id: Option<&str>) -> Value {
    let mut m = Map::with_capacity(2);
    m.insert("query".into(), query.into());
    if let Some(id) = request_id {
        m.insert("request_id".into(), id.into());
    }
    Value::Object(m)
}

impl Strategy for ReAct {
    driver::strategy_methods!();

    /// `idle` → idle, `awaiting_llm` / `awaiting_tool` → running,
    /// `completed` → success, `error` → failure; `result` the answer (or
    /// the error); details `phase`, `iteration`, `request_id`,
    /// `termination_reason`, `usage`, `pending_tool_calls`,
    /// `conversation_length`.
    fn snapshot(&self, agent: &AgentData, _ctx: &StrategyContext) -> Snapshot {
        match self.settings.core.peek::<Machine>(agent) {
            Some(m) => driven::snapshot(&m),
            None => Snapshot::default(),
        }
    }
}
