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

pub mod machine;
mod output;

pub use output::OutputSchema;

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use self::machine::{Event, Machine, MachineConfig, Status, Step, Termination, Turn};
use super::client::{Message, ToolSpecs};
use super::directive::{
    CancelRequest, DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, EmitToolError, LlmGenerate, LlmStream,
    ModelRef, ToolExec,
};
use super::envelope::ResultEnvelope;
pub use super::request::{
    DEFAULT_REQUEST_HISTORY, REQUEST_COMPLETED, REQUEST_FAILED, REQUEST_STARTED,
};
use super::request::{RequestCore, RequestState, usage_json};
use super::signals::{self, LlmDeltaData, LlmResponseData, ToolResultData};
use super::tool::ToolSet;
use crate::agent::{AgentData, RouteTarget, SignalRoute};
use crate::directive::{Directive, error_context};
use crate::error::Error;
use crate::server::AwaitOptions;
use crate::signal::Signal;
use crate::signal::dispatch::DispatchConfig;
use crate::state::StateMap;
use crate::strategy::{
    Command, Snapshot, SnapshotStatus, Strategy, StrategyContext, apply_outcome,
};

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
/// (none).
#[derive(Clone, Debug)]
pub struct ReAct {
    model: ModelRef,
    system_prompt: Option<String>,
    examples: Arc<Vec<Message>>,
    tools: ToolSet,
    specs: ToolSpecs,
    machine: MachineConfig,
    streaming: bool,
    max_tokens: u32,
    temperature: f64,
    llm_timeout: Option<Duration>,
    tool_timeout_ms: u64,
    tool_max_retries: u32,
    tool_backoff_ms: u64,
    core: RequestCore,
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
            model: ModelRef::alias("fast"),
            system_prompt: None,
            examples: Arc::new(Vec::new()),
            tools: ToolSet::new(),
            specs: ToolSpecs::new(),
            machine: MachineConfig::new(),
            streaming: true,
            max_tokens: DEFAULT_MAX_TOKENS,
            temperature: DEFAULT_TEMPERATURE,
            llm_timeout: None,
            tool_timeout_ms: DEFAULT_TOOL_TIMEOUT_MS,
            tool_max_retries: DEFAULT_TOOL_MAX_RETRIES,
            tool_backoff_ms: DEFAULT_TOOL_BACKOFF_MS,
            core: RequestCore::new(MODULE),
        }
    }

    /// The model: a spec (`"provider:model"`, a plain string) or
    /// [`ModelRef::alias`].
    #[must_use]
    pub fn model(mut self, model: impl Into<ModelRef>) -> Self {
        self.model = model.into();
        self
    }

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
        self.examples = Arc::new(messages);
        self
    }

    /// The tools offered to the model (run directly, without the
    /// runtime's tool set).
    #[must_use]
    pub fn tools(mut self, tools: ToolSet) -> Self {
        self.specs = tools.specs().into();
        self.tools = tools;
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

    /// Per-attempt timeout of a tool call, in ms (0: none).
    #[must_use]
    pub fn tool_timeout_ms(mut self, ms: u64) -> Self {
        self.tool_timeout_ms = ms;
        self
    }

    /// Retries of a tool call failing with a retryable error.
    #[must_use]
    pub fn tool_max_retries(mut self, n: u32) -> Self {
        self.tool_max_retries = n;
        self
    }

    /// Delay between tool attempts, in ms.
    #[must_use]
    pub fn tool_backoff_ms(mut self, ms: u64) -> Self {
        self.tool_backoff_ms = ms;
        self
    }

    /// Streamed model calls ([`LlmStream`], the default) or not
    /// ([`LlmGenerate`]).
    #[must_use]
    pub fn streaming(mut self, on: bool) -> Self {
        self.streaming = on;
        self
    }

    /// `max_tokens` of each model call.
    #[must_use]
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }

    /// Temperature of each model call.
    #[must_use]
    pub fn temperature(mut self, t: f64) -> Self {
        self.temperature = t;
        self
    }

    /// Timeout of each model call (else the runtime's).
    #[must_use]
    pub fn llm_timeout(mut self, timeout: Duration) -> Self {
        self.llm_timeout = Some(timeout);
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

    /// Where the request's signals go (see [Signals](self#signals)).
    #[must_use]
    pub fn events(mut self, dispatch: DispatchConfig) -> Self {
        self.core = self.core.events(dispatch);
        self
    }

    /// How many requests `__strategy__.requests` keeps (oldest dropped).
    #[must_use]
    pub fn request_history(mut self, n: usize) -> Self {
        self.core = self.core.history(n);
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
            metadata: Map::new(),
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
        &self.core
    }

    fn on_command(
        &self,
        agent: &mut AgentData,
        name: &str,
        params: Value,
        ctx: &StrategyContext,
    ) -> Vec<Directive> {
        let mut out = Vec::new();
        let mut effects = None;
        let event = match name {
            commands::QUERY => match Query::deserialize(&params) {
                Ok(q) => Event::Start {
                    request_id: q
                        .request_id
                        .filter(|id| !id.is_empty())
                        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
                    query: q.query,
                    output: q.output_schema,
                },
                Err(e) => {
                    let request_id = RequestCore::request_id(&params);
                    out.push(RequestCore::reject(
                        &request_id,
                        "invalid_request",
                        format!("invalid query: {e}"),
                    ));
                    return out;
                }
            },
            commands::CANCEL => {
                let (request_id, reason) = RequestCore::cancel_params(&params);
                Event::Cancel { request_id, reason }
            }
            commands::LLM_DELTA => {
                let call_id = match signals::typed_payload::<LlmDeltaData>(ctx, &params) {
                    Some(d) => d.call_id.as_str(),
                    None => params.get("call_id").and_then(Value::as_str).unwrap_or(""),
                };
                let m = self.core.state::<Machine>(agent);
                if m.status == Status::AwaitingLlm && m.llm_call_id.as_deref() == Some(call_id) {
                    self.core.forward(ctx, &mut out);
                }
                return out;
            }
            commands::USAGE | commands::TOOL_STARTED => {
                let request_id = signals::correlated_request(ctx, &params);
                let m = self.core.state::<Machine>(agent);
                if m.status.is_busy() && m.request_id.as_deref() == request_id {
                    self.core.forward(ctx, &mut out);
                }
                return out;
            }
            commands::REQUEST_ERROR => {
                self.core.record_rejection(agent, &params);
                self.core.forward(ctx, &mut out);
                return out;
            }
            commands::LLM_RESULT => match signals::read_llm_response(ctx, params) {
                Ok((call_id, result)) => Event::LlmResult { call_id, result },
                Err(e) => return vec![bad_payload(name, &e)],
            },
            commands::TOOL_RESULT => {
                match signals::command_payload(ctx, params, ToolResultData::from_value) {
                    Ok(data) => {
                        let data = data.into_owned();
                        effects = Some(data.result.decode_effects());
                        Event::ToolResult {
                            call_id: data.call_id,
                            result: data.result,
                        }
                    }
                    Err(e) => return vec![bad_payload(name, &e)],
                }
            }
            other => {
                return vec![crate::strategy::unknown_command(&Command::strategy(
                    other,
                    Value::Null,
                ))];
            }
        };
        let m = self.core.state::<Machine>(agent);
        let t = m.handle(&self.machine, event);
        if !t.accepted {
            return out;
        }
        // A rejection (busy, unknown schema) leaves the machine as it was:
        // the state stays untouched, revision included.
        if !t.steps.iter().all(|s| matches!(s, Step::Reject { .. })) {
            self.core.commit::<Machine>(agent);
        }
        // The tool's effects after the commit: a write of theirs to
        // `__strategy__` is then what the machine reads next.
        if let Some(effects) = effects {
            self.core.forward(ctx, &mut out);
            match effects {
                Ok(effects) => out.extend(agent.apply_effects(effects)),
                Err(err) => out.push(Directive::error(err, "tool_effects")),
            }
        }
        self.lift(agent, t.steps, &mut out);
        out
    }

    /// Turns the machine's steps into directives and request records.
    fn lift(&self, agent: &mut AgentData, steps: Vec<Step>, out: &mut Vec<Directive>) {
        for step in steps {
            match step {
                Step::CallLlm {
                    call_id,
                    request_id,
                    iteration,
                    output,
                } => {
                    let m = self.core.state::<Machine>(agent);
                    let first =
                        iteration == 1 && !m.repaired && m.llm_call_id.as_deref() == Some(&call_id);
                    let query = if first {
                        m.conversation.last_content()
                    } else {
                        None
                    };
                    let directive = self.llm_directive(m, call_id, &request_id, iteration, output);
                    if let Some(query) = query {
                        self.core.start(agent, &request_id, &query, out);
                    }
                    out.push(directive);
                }
                Step::ExecTool {
                    call,
                    request_id,
                    iteration,
                } => out.push(match self.tools.get(&call.name) {
                    Some(tool) => ToolExec::new(call.id, call.name, call.arguments)
                        .tool(tool)
                        .request_id(request_id)
                        .iteration(iteration)
                        .timeout_ms(self.tool_timeout_ms)
                        .max_retries(self.tool_max_retries)
                        .retry_backoff_ms(self.tool_backoff_ms)
                        .meta("strategy", MODULE)
                        .into(),
                    None => EmitToolError::unknown_tool(call.id, call.name)
                        .meta("request_id", request_id)
                        .meta("iteration", iteration)
                        .meta("strategy", MODULE)
                        .into(),
                }),
                Step::Reject {
                    request_id,
                    reason,
                    message,
                } => out.push(RequestCore::reject(&request_id, &reason, message)),
                Step::CancelCalls { request_id, reason } => {
                    out.push(CancelRequest::new(request_id).reason(reason).into());
                }
                Step::Completed {
                    request_id,
                    answer,
                    termination,
                } => {
                    let usage = self.core.state::<Machine>(agent).usage;
                    self.core.finish(
                        agent,
                        &request_id,
                        Ok(answer),
                        termination.as_str(),
                        &usage,
                        out,
                    );
                }
                Step::Failed {
                    request_id,
                    error,
                    termination,
                } => {
                    let usage = self.core.state::<Machine>(agent).usage;
                    self.core.finish(
                        agent,
                        &request_id,
                        Err(error),
                        termination.as_str(),
                        &usage,
                        out,
                    );
                }
                #[allow(unreachable_patterns)]
                _ => {}
            }
        }
    }

    fn llm_directive(
        &self,
        m: &Machine,
        call_id: String,
        request_id: &str,
        iteration: u64,
        output: Option<String>,
    ) -> Directive {
        let format = output
            .as_deref()
            .and_then(|n| self.machine.outputs.get(n))
            .map(OutputSchema::format);
        let mut metadata = Map::with_capacity(3);
        metadata.insert("request_id".into(), request_id.into());
        metadata.insert("iteration".into(), iteration.into());
        metadata.insert("strategy".into(), MODULE.into());
        let context = if self.examples.is_empty() {
            m.conversation.messages()
        } else {
            let mut all = self.examples.as_ref().clone();
            all.extend(m.conversation.messages());
            all
        };
        macro_rules! build {
            ($ty:ident) => {{
                let mut d = $ty::new(call_id, self.model.clone(), context)
                    .tools(self.specs.clone())
                    .max_tokens(self.max_tokens)
                    .temperature(self.temperature)
                    .metadata(metadata);
                d.system_prompt = self.system_prompt.clone();
                d.timeout = self.llm_timeout;
                d.response_format = format;
                d.into()
            }};
        }
        if self.streaming {
            build!(LlmStream)
        } else {
            build!(LlmGenerate)
        }
    }
}

fn query_params(query: &str, request_id: Option<&str>) -> Value {
    let mut m = Map::with_capacity(2);
    m.insert("query".into(), query.into());
    if let Some(id) = request_id {
        m.insert("request_id".into(), id.into());
    }
    Value::Object(m)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Query {
    query: String,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    output_schema: Option<String>,
}

fn bad_payload(command: &str, e: &serde_json::Error) -> Directive {
    Directive::error(
        Error::validation(format!("invalid {command} payload: {e}"))
            .with_detail("command", command.to_owned()),
        error_context::STRATEGY_COMMAND,
    )
}

impl RequestState for Machine {
    fn read(from: &StateMap) -> Option<Self> {
        Machine::read(from)
    }

    fn write(&self, into: &mut StateMap) {
        Machine::write(self, into);
    }

    fn write_since(&self, into: &mut StateMap, prev: Option<&Self>) {
        Machine::write_since(self, into, prev);
    }

    fn active_request(&self) -> Option<&str> {
        if self.status.is_busy() {
            self.request_id.as_deref()
        } else {
            None
        }
    }
}

impl Strategy for ReAct {
    fn name(&self) -> &'static str {
        MODULE
    }

    fn init(&self, agent: &mut AgentData, _ctx: &StrategyContext) -> Vec<Directive> {
        self.core.init::<Machine>(agent);
        Vec::new()
    }

    async fn cmd(
        &self,
        agent: &mut AgentData,
        commands: Vec<Command>,
        ctx: &StrategyContext,
    ) -> Vec<Directive> {
        let mut out = Vec::new();
        for command in commands {
            match command {
                Command::Run(instruction) => {
                    let outcome = ctx.run(agent, instruction).await;
                    out.extend(apply_outcome(agent, outcome));
                }
                Command::Strategy { name, params, .. } => {
                    out.extend(self.on_command(agent, &name, params, ctx));
                }
            }
        }
        out
    }

    /// `idle` → idle, `awaiting_llm` / `awaiting_tool` → running,
    /// `completed` → success, `error` → failure; `result` the answer (or
    /// the error); details `phase`, `iteration`, `request_id`,
    /// `termination_reason`, `usage`, `pending_tool_calls`,
    /// `conversation_length`.
    fn snapshot(&self, agent: &AgentData, _ctx: &StrategyContext) -> Snapshot {
        let Some(m) = self.core.peek::<Machine>(agent) else {
            return Snapshot::default();
        };
        let status = match m.status {
            Status::Idle => SnapshotStatus::Idle,
            Status::AwaitingLlm | Status::AwaitingTool => SnapshotStatus::Running,
            Status::Completed => SnapshotStatus::Success,
            Status::Error => SnapshotStatus::Failure,
        };
        let mut snap = Snapshot::new(status);
        snap.result = (!m.result.is_null()).then(|| m.result.clone());
        let d = &mut snap.details;
        d.insert("phase".into(), m.status.as_str().into());
        d.insert("iteration".into(), m.iteration.into());
        d.insert("request_id".into(), m.request_id.clone().into());
        d.insert(
            "termination_reason".into(),
            m.termination.map(Termination::as_str).into(),
        );
        d.insert("usage".into(), usage_json(&m.usage));
        d.insert("pending_tool_calls".into(), m.tool_calls.len().into());
        d.insert("conversation_length".into(), m.conversation.len().into());
        snap
    }

    fn signal_routes(&self, _ctx: &StrategyContext) -> Vec<SignalRoute> {
        let cmd =
            |path: &str, name: &str| SignalRoute::new(path, RouteTarget::StrategyCmd(name.into()));
        // The runtime's signals carry typed payloads, read without JSON.
        let typed = |path: &str, name: &str| {
            SignalRoute::new(path, RouteTarget::StrategyPayload(name.into()))
        };
        vec![
            cmd(QUERY_SIGNAL, commands::QUERY),
            cmd(CANCEL_SIGNAL, commands::CANCEL),
            typed(signals::LLM_DELTA, commands::LLM_DELTA),
            typed(signals::LLM_RESPONSE, commands::LLM_RESULT),
            typed(signals::USAGE, commands::USAGE),
            typed(signals::TOOL_STARTED, commands::TOOL_STARTED),
            typed(signals::TOOL_RESULT, commands::TOOL_RESULT),
            cmd(signals::REQUEST_ERROR, commands::REQUEST_ERROR),
        ]
    }
}
