//! The ReAct state machine: pure, a function of (state, event) to (new
//! state, steps), testable without an agent or an actor.
//!
//! | from | event | to | steps |
//! |---|---|---|---|
//! | idle, completed, error | `Start` | awaiting_llm | `CallLlm` (iteration 1; the conversation continues unless `keep_conversation` is off) |
//! | awaiting_llm, awaiting_tool | `Start` | unchanged | `Reject` (`busy`) |
//! | any | `Start` naming an unknown output schema | unchanged | `Reject` (`invalid_output_schema`) |
//! | awaiting_llm | `LlmDelta` of the current call | unchanged | none (accepted: the strategy forwards it) |
//! | awaiting_llm | `LlmResult` ok with tool calls (whatever the finish reason) | awaiting_tool | `ExecTool` for the first *concurrency* calls, in call order |
//! | awaiting_llm | `LlmResult` ok, blank text, finish reason neither stop nor tool calls | error | `Failed` (`incomplete_response`) |
//! | awaiting_llm | `LlmResult` ok, final answer | completed | `Completed` (`final_answer`) |
//! | awaiting_llm | `LlmResult` ok, structured answer invalid, no repair yet | awaiting_llm | `CallLlm` (the repair turn) |
//! | awaiting_llm | `LlmResult` ok, structured answer invalid after the repair | error | `Failed` (`invalid_output`) |
//! | awaiting_llm | `LlmResult` error | error | `Failed` (the error) |
//! | awaiting_tool | `ToolResult`, calls still missing | awaiting_tool | `ExecTool` for the next queued call, if any |
//! | awaiting_tool | `ToolResult`, the last one, iteration < max | awaiting_llm | `CallLlm` (iteration + 1; results appended in call order) |
//! | awaiting_tool | `ToolResult`, the last one, iteration = max | completed | `Completed` (`max_iterations`) |
//! | awaiting_llm, awaiting_tool | `Cancel` (no id, or the active request's) | error | `CancelCalls`, `Failed` (`cancelled`) |
//! | any | anything else (stale call ids, unknown tool-call ids, a second result for a call, a cancel of another request) | unchanged | none (not accepted) |

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::output::OutputSchema;
use crate::ai::client::{FinishReason, LlmResponse, Message, Messages, Role, ToolCall, Usage};
use crate::ai::envelope::{ErrorEnvelope, ResultEnvelope};
use crate::ai::request::{RequestCore, usage_state};
use crate::error::{Error, Result};
use crate::state::{StateArray, StateMap, StateValue};

/// Default most LLM turns of one request (10, Jido's).
pub const DEFAULT_MAX_ITERATIONS: u64 = 10;
/// Default most tool calls of one turn running at once (4, Jido's).
pub const DEFAULT_TOOL_CONCURRENCY: usize = 4;
/// The answer of a request that reached its maximum of iterations
/// (Jido's text).
pub const MAX_ITERATIONS_ANSWER: &str = "Maximum iterations reached without a final answer.";

/// Where the machine is.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Status {
    /// No request yet.
    #[default]
    Idle,
    /// Waiting for the model's answer.
    AwaitingLlm,
    /// Waiting for tool results.
    AwaitingTool,
    /// The last request completed.
    Completed,
    /// The last request failed (or was cancelled).
    Error,
}

impl Status {
    /// `"idle"`, `"awaiting_llm"`, `"awaiting_tool"`, `"completed"` or
    /// `"error"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Idle => "idle",
            Status::AwaitingLlm => "awaiting_llm",
            Status::AwaitingTool => "awaiting_tool",
            Status::Completed => "completed",
            Status::Error => "error",
        }
    }

    /// Reads [`Status::as_str`]'s names.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "idle" => Status::Idle,
            "awaiting_llm" => Status::AwaitingLlm,
            "awaiting_tool" => Status::AwaitingTool,
            "completed" => Status::Completed,
            "error" => Status::Error,
            _ => return None,
        })
    }

    /// Whether a request is running (awaiting the model or tools).
    pub fn is_busy(self) -> bool {
        matches!(self, Status::AwaitingLlm | Status::AwaitingTool)
    }
}

/// Why a request ended.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Termination {
    /// The model answered.
    FinalAnswer,
    /// The request used its iterations (a completion, not a failure).
    MaxIterations,
    /// The model call failed, or its answer could not be used.
    Error,
    /// The request was cancelled.
    Cancelled,
}

impl Termination {
    /// `"final_answer"`, `"max_iterations"`, `"error"` or `"cancelled"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Termination::FinalAnswer => "final_answer",
            Termination::MaxIterations => "max_iterations",
            Termination::Error => "error",
            Termination::Cancelled => "cancelled",
        }
    }

    /// Reads [`Termination::as_str`]'s names.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "final_answer" => Termination::FinalAnswer,
            "max_iterations" => Termination::MaxIterations,
            "error" => Termination::Error,
            "cancelled" => Termination::Cancelled,
            _ => return None,
        })
    }
}

/// What the machine is configured with.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct MachineConfig {
    /// Most LLM turns of one request (default 10).
    pub max_iterations: u64,
    /// Most tool calls of one turn running at once (default 4; 0 reads
    /// as 1).
    pub tool_concurrency: usize,
    /// The structured-output schemas requests may name.
    pub outputs: HashMap<String, OutputSchema>,
    /// Whether a request continues the conversation of the previous ones
    /// (default true); false: each request starts a new conversation.
    pub keep_conversation: bool,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            max_iterations: DEFAULT_MAX_ITERATIONS,
            tool_concurrency: DEFAULT_TOOL_CONCURRENCY,
            outputs: HashMap::new(),
            keep_conversation: true,
        }
    }
}

impl MachineConfig {
    /// Jido's defaults, no output schemas.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the most LLM turns of one request.
    #[must_use]
    pub fn max_iterations(mut self, n: u64) -> Self {
        self.max_iterations = n;
        self
    }

    /// Sets how many tool calls of a turn run at once.
    #[must_use]
    pub fn tool_concurrency(mut self, n: usize) -> Self {
        self.tool_concurrency = n;
        self
    }

    /// Sets whether requests continue the conversation.
    #[must_use]
    pub fn keep_conversation(mut self, keep: bool) -> Self {
        self.keep_conversation = keep;
        self
    }

    /// Adds a structured-output schema.
    #[must_use]
    pub fn output(mut self, schema: OutputSchema) -> Self {
        self.outputs.insert(schema.name().to_owned(), schema);
        self
    }
}

/// One model turn, as `ai.llm.response` reports it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Turn {
    /// The answer's text.
    pub text: String,
    /// Tool calls (taken whatever the finish reason).
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped; `None` when not reported.
    pub finish_reason: Option<FinishReason>,
    /// Token counts.
    pub usage: Option<Usage>,
}

impl Turn {
    /// A final answer with finish reason stop.
    pub fn answer(text: impl Into<String>) -> Self {
        Turn {
            text: text.into(),
            finish_reason: Some(FinishReason::Stop),
            ..Turn::default()
        }
    }

    /// Tool calls with finish reason tool_calls.
    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        Turn {
            tool_calls: calls,
            finish_reason: Some(FinishReason::ToolCalls),
            ..Turn::default()
        }
    }

    /// Sets the usage.
    #[must_use]
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Sets the finish reason.
    #[must_use]
    pub fn with_finish_reason(mut self, reason: FinishReason) -> Self {
        self.finish_reason = Some(reason);
        self
    }

    /// The turn of a model's answer (what [`Turn::from_payload`] reads
    /// from the JSON of an `ai.llm.response` carrying it, without the
    /// JSON).
    ///
    /// ```
    /// use jido::ai::react::machine::Turn;
    /// use jido::ai::{FinishReason, LlmResponse};
    ///
    /// let resp: LlmResponse = serde_json::from_value(serde_json::json!({
    ///     "model": "m", "text": "42", "finish_reason": "stop"
    /// }))?;
    /// assert_eq!(Turn::from_response(&resp), Turn::answer("42"));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn from_response(resp: &LlmResponse) -> Self {
        let finish_reason = match &resp.finish_reason {
            // A provider's own word reads as JSON does.
            FinishReason::Other(word) => parse_finish_reason(word),
            known => known.clone(),
        };
        Turn {
            text: resp.text.clone(),
            tool_calls: resp.tool_calls.clone(),
            finish_reason: Some(finish_reason),
            usage: resp.usage,
        }
    }

    /// As [`Turn::from_payload`], by value: the text and the tool calls are
    /// moved, not copied.
    ///
    /// # Errors
    ///
    /// As [`Turn::from_payload`].
    pub fn from_value(payload: Value) -> Result<Self> {
        let invalid = |reason: String| {
            Error::validation(format!("invalid llm turn: {reason}")).with_detail("reason", reason)
        };
        let Value::Object(mut map) = payload else {
            return Err(invalid("expected a json object".into()));
        };
        let text = match map.remove("text") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s,
            Some(_) => return Err(invalid("text must be a string".into())),
        };
        let tool_calls = match map.remove("tool_calls") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => {
                Vec::<ToolCall>::deserialize(v).map_err(|e| invalid(format!("tool_calls: {e}")))?
            }
        };
        let usage = match map.get("usage") {
            None | Some(Value::Null) => None,
            Some(v) => Some(Usage::deserialize(v).map_err(|e| invalid(format!("usage: {e}")))?),
        };
        let finish_reason = map
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(parse_finish_reason);
        Ok(Turn {
            text,
            tool_calls,
            finish_reason,
            usage,
        })
    }

    /// Reads the payload of a successful `ai.llm.response` (`{type, text,
    /// tool_calls, finish_reason, usage, …}`).
    ///
    /// # Errors
    ///
    /// A validation error "invalid llm turn: REASON" when `text`,
    /// `tool_calls` or `usage` have the wrong shape.
    pub fn from_payload(payload: &Value) -> Result<Self> {
        let invalid = |reason: String| {
            Error::validation(format!("invalid llm turn: {reason}")).with_detail("reason", reason)
        };
        let Value::Object(map) = payload else {
            return Err(invalid("expected a json object".into()));
        };
        let text = match map.get("text") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(invalid("text must be a string".into())),
        };
        let tool_calls = match map.get("tool_calls") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => {
                Vec::<ToolCall>::deserialize(v).map_err(|e| invalid(format!("tool_calls: {e}")))?
            }
        };
        let usage = match map.get("usage") {
            None | Some(Value::Null) => None,
            Some(v) => Some(Usage::deserialize(v).map_err(|e| invalid(format!("usage: {e}")))?),
        };
        let finish_reason = map
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(parse_finish_reason);
        Ok(Turn {
            text,
            tool_calls,
            finish_reason,
            usage,
        })
    }
}

use serde::Deserialize as _;

/// `"stop"`, `"tool_calls"`, `"length"`, `"content_filter"` or the
/// provider's own word.
fn parse_finish_reason(s: &str) -> FinishReason {
    match s {
        "stop" => FinishReason::Stop,
        "tool_calls" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

fn finish_reason_name(reason: &FinishReason) -> String {
    match reason {
        FinishReason::Stop => "stop".into(),
        FinishReason::ToolCalls => "tool_calls".into(),
        FinishReason::Length => "length".into(),
        FinishReason::ContentFilter => "content_filter".into(),
        FinishReason::Other(s) => s.clone(),
    }
}

/// What the machine is told.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A request: a question, its id, and optionally the name of the
    /// structured-output schema its answer must follow.
    Start {
        /// The request id.
        request_id: String,
        /// The question.
        query: String,
        /// A schema of [`MachineConfig::outputs`].
        output: Option<String>,
    },
    /// A piece of a streamed answer arrived (`ai.llm.delta`).
    LlmDelta {
        /// Its LLM call id.
        call_id: String,
    },
    /// The model answered (`ai.llm.response`).
    LlmResult {
        /// The LLM call id.
        call_id: String,
        /// The turn, or the call's error.
        result: std::result::Result<Turn, ErrorEnvelope>,
    },
    /// A tool call ended (`ai.tool.result`).
    ToolResult {
        /// The tool-call id.
        call_id: String,
        /// Its result.
        result: ResultEnvelope,
    },
    /// Cancel the running request (`None`: whichever runs).
    Cancel {
        /// The request to cancel.
        request_id: Option<String>,
        /// Why.
        reason: String,
    },
}

/// What the machine asks for (the strategy lifts these into directives).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Call the model with the conversation.
    CallLlm {
        /// The new LLM call id.
        call_id: String,
        /// The request.
        request_id: String,
        /// The turn (1-based).
        iteration: u64,
        /// The structured-output schema, if the request asked for one.
        output: Option<String>,
    },
    /// Run a tool call.
    ExecTool {
        /// The model's call.
        call: ToolCall,
        /// The request.
        request_id: String,
        /// The turn.
        iteration: u64,
    },
    /// Reject a request (the machine is unchanged).
    Reject {
        /// The rejected request.
        request_id: String,
        /// `busy`, `invalid_output_schema`.
        reason: String,
        /// For the caller.
        message: String,
    },
    /// Cancel the running model and tool calls of a request.
    CancelCalls {
        /// The request.
        request_id: String,
        /// Why.
        reason: String,
    },
    /// The request completed.
    Completed {
        /// The request.
        request_id: String,
        /// The answer: text, or the JSON value of a structured answer.
        answer: Value,
        /// Why it ended.
        termination: Termination,
    },
    /// The request failed.
    Failed {
        /// The request.
        request_id: String,
        /// The error envelope.
        error: Value,
        /// Why it ended.
        termination: Termination,
    },
}

/// The outcome of one event.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Transition {
    /// Whether the event was taken (false: stale or out of place, nothing
    /// changed).
    pub accepted: bool,
    /// What to do.
    pub steps: Vec<Step>,
}

impl Transition {
    fn ignored() -> Self {
        Transition::default()
    }

    fn taken(steps: Vec<Step>) -> Self {
        Transition {
            accepted: true,
            steps,
        }
    }
}

/// Where a tool call of the current turn is.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub enum ToolCallState {
    /// Waiting for a free slot.
    Queued,
    /// Started.
    Running,
    /// Ended with this result.
    Done(ResultEnvelope),
}

impl ToolCallState {
    /// `"queued"`, `"running"` or `"done"` (as in the JSON mirror).
    pub fn name(&self) -> &'static str {
        match self {
            ToolCallState::Queued => "queued",
            ToolCallState::Running => "running",
            ToolCallState::Done(_) => "done",
        }
    }
}

/// A tool call of the current turn.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingToolCall {
    /// The model's call.
    pub call: ToolCall,
    /// Where it is.
    pub state: ToolCallState,
}

/// The conversation: the messages (for the model calls, no decoding per
/// call), appended in O(1) amortised whoever else holds them. Its JSON
/// (`__strategy__.conversation`) is built when the state is read as JSON,
/// appending to the previous one what is new (see
/// [`Machine::write_since`]).
#[derive(Clone, Debug, Default)]
pub struct Conversation {
    /// The messages, each in its own allocation: a clone of the vector
    /// copies handles, never messages, and the same allocation at an
    /// index tells that another conversation is a prefix of this one.
    entries: imbl::Vector<Arc<Message>>,
    /// The JSON this conversation was read from, if any, and how many of
    /// `entries` came from it (its elements are kept as they were, those
    /// that are not messages included).
    head: Option<(StateArray, usize)>,
}

impl PartialEq for Conversation {
    /// The same messages (and the same JSON).
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self.iter().eq(other.iter())
            && self.to_array() == other.to_array()
    }
}

impl Conversation {
    /// An empty conversation.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a message.
    pub fn push(&mut self, message: Message) {
        self.entries.push_back(Arc::new(message));
    }

    /// How many messages.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The messages, shared (what a model call sends): no message is
    /// copied.
    pub fn messages(&self) -> Messages {
        Messages::from_shared(self.entries.clone())
    }

    /// The messages, borrowed.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Message> + DoubleEndedIterator + '_ {
        self.entries.iter().map(|e| &**e)
    }

    /// The content of the last message, if any.
    pub fn last_content(&self) -> Option<String> {
        Some(self.entries.last()?.content.clone())
    }

    /// The JSON (`__strategy__.conversation`): the array it was read from
    /// followed by the messages appended since.
    pub fn to_array(&self) -> StateArray {
        let (mut array, from) = match &self.head {
            Some((head, n)) => (head.clone(), *n),
            None => (StateArray::new(), 0),
        };
        for message in self.entries.iter().skip(from) {
            array.push(message_state(message));
        }
        array
    }

    /// The length of [`to_array`](Conversation::to_array).
    fn json_len(&self) -> usize {
        match &self.head {
            Some((head, n)) => head.len() + self.len() - n,
            None => self.len(),
        }
    }

    /// Whether `prev` is this conversation before some appends.
    fn extends(&self, prev: &Conversation) -> bool {
        let same_head = match (&self.head, &prev.head) {
            (None, None) => true,
            (Some((a, n)), Some((b, m))) => a.ptr_eq(b) && n == m,
            _ => false,
        };
        same_head
            && prev.len() <= self.len()
            && match prev.len().checked_sub(1) {
                None => true,
                // `prev` holds its message: the same allocation is the
                // same push.
                Some(last) => match (self.entries.get(last), prev.entries.get(last)) {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    _ => false,
                },
            }
    }

    /// Brings `slot` (the JSON of `prev`, when given) up to date: the
    /// messages appended since `prev` are added, anything else rebuilds
    /// the array.
    fn write_json(&self, slot: &mut StateValue, prev: Option<&Conversation>) {
        if let Some(prev) = prev
            && self.extends(prev)
            && slot.as_array().is_some_and(|a| a.len() == prev.json_len())
            && let Some(array) = slot.as_array_mut()
        {
            for message in self.entries.iter().skip(prev.len()) {
                array.push(message_state(message));
            }
            return;
        }
        *slot = StateValue::Array(self.to_array());
    }

    /// A conversation over a JSON `array` (entries that are not messages
    /// are skipped; the JSON keeps them).
    pub fn from_array(array: StateArray) -> Self {
        let entries: imbl::Vector<Arc<Message>> = array
            .iter()
            .filter_map(|v| Message::deserialize(v).ok())
            .map(Arc::new)
            .collect();
        let n = entries.len();
        Conversation {
            entries,
            head: Some((array, n)),
        }
    }
}

/// A message as state, exactly as serde writes it (`tool_calls`,
/// `tool_call_id` and `name` only when present), without going through
/// `serde_json::Value`.
fn message_state(m: &Message) -> StateValue {
    let mut map = StateMap::with_capacity(5);
    let role = match m.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    map.insert("role", role);
    map.insert("content", m.content.as_str());
    if !m.tool_calls.is_empty() {
        let calls: StateArray = m
            .tool_calls
            .iter()
            .map(|c| {
                let mut call = StateMap::with_capacity(3);
                call.insert("id", c.id.as_str());
                call.insert("name", c.name.as_str());
                call.insert("arguments", StateValue::from(&*c.arguments));
                StateValue::Object(call)
            })
            .collect();
        map.insert("tool_calls", calls);
    }
    if let Some(id) = &m.tool_call_id {
        map.insert("tool_call_id", id.as_str());
    }
    if let Some(name) = &m.name {
        map.insert("name", name.as_str());
    }
    StateValue::Object(map)
}

/// The ReAct machine's state (Jido's `Jido.AI.ReAct.Machine`).
///
/// ```
/// use jido::ai::react::machine::{Event, Machine, MachineConfig, Status, Step, Turn};
/// use jido::ai::{ToolCall, Usage};
/// use jido::ai::envelope::ResultEnvelope;
/// use serde_json::json;
///
/// let cfg = MachineConfig::new();
/// let mut m = Machine::new();
/// let t = m.handle(&cfg, Event::Start { request_id: "r1".into(), query: "2+3?".into(), output: None });
/// let Step::CallLlm { call_id, .. } = &t.steps[0] else { unreachable!() };
/// assert_eq!(m.status, Status::AwaitingLlm);
///
/// let call = ToolCall::new("tc_1", "add", json!({"a": 2, "b": 3}));
/// let t = m.handle(&cfg, Event::LlmResult { call_id: call_id.clone(), result: Ok(Turn::tool_calls(vec![call])) });
/// assert!(matches!(&t.steps[..], [Step::ExecTool { .. }]));
/// let t = m.handle(&cfg, Event::ToolResult { call_id: "tc_1".into(), result: ResultEnvelope::ok(json!({"sum": 5})) });
/// let Step::CallLlm { call_id, iteration: 2, .. } = &t.steps[0] else { unreachable!() };
/// let t = m.handle(&cfg, Event::LlmResult { call_id: call_id.clone(), result: Ok(Turn::answer("5")) });
/// assert_eq!(m.status, Status::Completed);
/// assert_eq!(m.result, json!("5"));
/// assert_eq!(m.conversation.len(), 4); // user, assistant calls, tool result, answer
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Machine {
    /// Where it is.
    pub status: Status,
    /// The current turn of the request (1-based; 0 before any).
    pub iteration: u64,
    /// The running (or last) request (shared: a copy of the machine
    /// copies a handle).
    pub request_id: Option<Arc<str>>,
    /// The LLM call whose answer is awaited (or was last), shared.
    pub llm_call_id: Option<Arc<str>>,
    /// LLM calls made so far, by every request (makes call ids unique).
    pub call_seq: u64,
    /// The tool calls of the current turn, in call order.
    pub tool_calls: Vec<PendingToolCall>,
    /// The last request's answer (completed) or error envelope (error).
    pub result: Value,
    /// Why the last request ended.
    pub termination: Option<Termination>,
    /// Tokens of the request so far, summed over its turns.
    pub usage: Usage,
    /// The request's structured-output schema.
    pub output: Option<String>,
    /// Whether the request's repair turn was used.
    pub repaired: bool,
    /// The conversation, kept across requests.
    pub conversation: Conversation,
}

impl Machine {
    /// An idle machine with an empty conversation.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies `event`: the new state is `self`, the steps are returned.
    pub fn handle(&mut self, config: &MachineConfig, event: Event) -> Transition {
        match event {
            Event::Start {
                request_id,
                query,
                output,
            } => self.start(config, request_id, query, output),
            Event::LlmDelta { call_id } => Transition {
                accepted: self.status == Status::AwaitingLlm
                    && self.llm_call_id.as_deref() == Some(call_id.as_str()),
                steps: Vec::new(),
            },
            Event::LlmResult { call_id, result } => {
                if self.status != Status::AwaitingLlm
                    || self.llm_call_id.as_deref() != Some(call_id.as_str())
                {
                    return Transition::ignored();
                }
                match result {
                    Ok(turn) => self.on_turn(config, turn),
                    Err(error) => Transition::taken(vec![self.fail(error.to_value())]),
                }
            }
            Event::ToolResult { call_id, result } => self.on_tool_result(config, &call_id, result),
            Event::Cancel { request_id, reason } => {
                let active = self.request_id.as_deref().filter(|_| self.status.is_busy());
                if !RequestCore::cancel_matches(active, request_id.as_deref()) {
                    return Transition::ignored();
                }
                let active = self.request_id().to_owned();
                let error =
                    Error::cancelled("request cancelled").with_detail("reason", reason.clone());
                self.close_open_calls(&error);
                let mut failed = self.fail(error.to_envelope());
                if let Step::Failed { termination, .. } = &mut failed {
                    *termination = Termination::Cancelled;
                }
                self.termination = Some(Termination::Cancelled);
                Transition::taken(vec![
                    Step::CancelCalls {
                        request_id: active,
                        reason,
                    },
                    failed,
                ])
            }
        }
    }

    fn start(
        &mut self,
        config: &MachineConfig,
        request_id: String,
        query: String,
        output: Option<String>,
    ) -> Transition {
        if self.status.is_busy() {
            let message = format!("agent is busy (status: {})", self.status.as_str());
            return Transition::taken(vec![Step::Reject {
                request_id,
                reason: "busy".into(),
                message,
            }]);
        }
        if let Some(name) = output
            .as_deref()
            .filter(|n| !config.outputs.contains_key(*n))
        {
            return Transition::taken(vec![Step::Reject {
                request_id,
                reason: "invalid_output_schema".into(),
                message: format!("unknown output schema: {name}"),
            }]);
        }
        if !config.keep_conversation {
            self.conversation = Conversation::new();
        }
        self.conversation.push(Message::user(query));
        self.iteration = 1;
        self.request_id = Some(Arc::from(request_id));
        self.tool_calls.clear();
        self.result = Value::Null;
        self.termination = None;
        self.usage = Usage::default();
        self.output = output;
        self.repaired = false;
        Transition::taken(vec![self.call_llm()])
    }

    /// The running (or last) request's id (`""` before any).
    fn request_id(&self) -> &str {
        self.request_id.as_deref().unwrap_or_default()
    }

    /// A new LLM call of the current turn.
    fn call_llm(&mut self) -> Step {
        self.call_seq += 1;
        let request_id = self.request_id().to_owned();
        let call_id = call_id(&request_id, self.call_seq);
        self.llm_call_id = Some(Arc::from(call_id.as_str()));
        self.status = Status::AwaitingLlm;
        Step::CallLlm {
            call_id,
            request_id,
            iteration: self.iteration,
            output: self.output.clone(),
        }
    }

    fn on_turn(&mut self, config: &MachineConfig, turn: Turn) -> Transition {
        if let Some(usage) = turn.usage {
            self.usage += usage;
        }
        if !turn.tool_calls.is_empty() {
            self.conversation.push(Message::assistant_tool_calls(
                turn.text,
                turn.tool_calls.clone(),
            ));
            self.tool_calls = turn
                .tool_calls
                .into_iter()
                .map(|call| PendingToolCall {
                    call,
                    state: ToolCallState::Queued,
                })
                .collect();
            self.status = Status::AwaitingTool;
            let slots = config.tool_concurrency.max(1);
            let steps = (0..slots).filter_map(|_| self.start_next_tool()).collect();
            return Transition::taken(steps);
        }
        let truncated = !matches!(
            turn.finish_reason,
            None | Some(FinishReason::Stop) | Some(FinishReason::ToolCalls)
        );
        if turn.text.trim().is_empty() && truncated {
            let reason = turn
                .finish_reason
                .as_ref()
                .map(finish_reason_name)
                .unwrap_or_default();
            let error = json!({
                "type": "incomplete_response",
                "message": format!("incomplete response (finish reason: {reason})"),
                "details": {"finish_reason": reason},
                "retryable": false,
            });
            return Transition::taken(vec![self.fail(error)]);
        }
        self.conversation
            .push(Message::assistant(turn.text.clone()));
        let answer = match self.output.as_deref().and_then(|n| config.outputs.get(n)) {
            None => Value::String(turn.text),
            Some(schema) => match schema.parse(&turn.text) {
                Ok(value) => value,
                Err(err) if !self.repaired => {
                    self.repaired = true;
                    self.conversation.push(Message::user(format!(
                        "{} Answer again with only a JSON value that follows the schema {}.",
                        capitalise(err.message()),
                        schema.name()
                    )));
                    return Transition::taken(vec![self.call_llm()]);
                }
                Err(err) => {
                    let error = json!({
                        "type": "invalid_output",
                        "message": err.message(),
                        "details": {"schema": schema.name(), "answer": turn.text},
                        "retryable": false,
                    });
                    return Transition::taken(vec![self.fail(error)]);
                }
            },
        };
        Transition::taken(vec![self.complete(answer, Termination::FinalAnswer)])
    }

    /// Starts the first queued tool call, if any.
    fn start_next_tool(&mut self) -> Option<Step> {
        let next = self
            .tool_calls
            .iter_mut()
            .find(|c| c.state == ToolCallState::Queued)?;
        next.state = ToolCallState::Running;
        Some(Step::ExecTool {
            call: next.call.clone(),
            request_id: self.request_id().to_owned(),
            iteration: self.iteration,
        })
    }

    fn on_tool_result(
        &mut self,
        config: &MachineConfig,
        call_id: &str,
        result: ResultEnvelope,
    ) -> Transition {
        if self.status != Status::AwaitingTool {
            return Transition::ignored();
        }
        let Some(entry) = self
            .tool_calls
            .iter_mut()
            .find(|c| c.call.id == call_id && c.state == ToolCallState::Running)
        else {
            return Transition::ignored();
        };
        entry.state = ToolCallState::Done(result);
        let mut steps: Vec<Step> = self.start_next_tool().into_iter().collect();
        let all_done = self
            .tool_calls
            .iter()
            .all(|c| matches!(c.state, ToolCallState::Done(_)));
        if !all_done {
            return Transition::taken(steps);
        }
        for pending in std::mem::take(&mut self.tool_calls) {
            if let ToolCallState::Done(result) = pending.state {
                self.conversation.push(Message::tool_result(
                    pending.call.id,
                    pending.call.name,
                    result.tool_content(),
                ));
            }
        }
        if self.iteration >= config.max_iterations {
            steps.push(self.complete(
                Value::String(MAX_ITERATIONS_ANSWER.to_owned()),
                Termination::MaxIterations,
            ));
        } else {
            self.iteration += 1;
            steps.push(self.call_llm());
        }
        Transition::taken(steps)
    }

    /// Answers every call of the turn that has no result with `error`, so
    /// that the conversation stays well-formed (each tool call answered).
    fn close_open_calls(&mut self, error: &Error) {
        for pending in std::mem::take(&mut self.tool_calls) {
            let result = match pending.state {
                ToolCallState::Done(result) => result,
                _ => ResultEnvelope::error(error),
            };
            self.conversation.push(Message::tool_result(
                pending.call.id,
                pending.call.name,
                result.tool_content(),
            ));
        }
    }

    fn complete(&mut self, answer: Value, termination: Termination) -> Step {
        self.status = Status::Completed;
        self.termination = Some(termination);
        self.result = answer.clone();
        Step::Completed {
            request_id: self.request_id().to_owned(),
            answer,
            termination,
        }
    }

    fn fail(&mut self, error: Value) -> Step {
        self.status = Status::Error;
        self.termination = Some(Termination::Error);
        self.result = error.clone();
        Step::Failed {
            request_id: self.request_id().to_owned(),
            error,
            termination: Termination::Error,
        }
    }

    /// Brings a strategy state map up to date with the machine: only the
    /// fields that differ from what `into` holds are written (a signal that
    /// changes the status and one tool call writes those); the
    /// conversation's JSON is rebuilt (see [`Machine::write_since`]).
    pub fn write(&self, into: &mut StateMap) {
        self.write_since(into, None);
    }

    /// As [`Machine::write`], knowing that `into` is the JSON of `prev`:
    /// the messages appended since `prev` are added to its conversation
    /// (O(new messages)), nothing else of it is touched.
    pub fn write_since(&self, into: &mut StateMap, prev: Option<&Machine>) {
        // One pass over the mirror's entries (no key hashing), then the
        // keys it lacks (only on a first write).
        const KEYS: [&str; 12] = [
            "status",
            "iteration",
            "request_id",
            "llm_call_id",
            "call_seq",
            "result",
            "termination_reason",
            "usage",
            "output",
            "repaired",
            "conversation",
            "tool_calls",
        ];
        let mut seen = [false; KEYS.len()];
        let mut calls_changed = false;
        for (key, slot) in into.iter_mut() {
            let Some(i) = KEYS.iter().position(|k| *k == key) else {
                continue;
            };
            seen[i] = true;
            match i {
                0 => update_str(slot, Some(self.status.as_str())),
                1 => update_u64(slot, self.iteration),
                2 => update_str(slot, self.request_id.as_deref()),
                3 => update_str(slot, self.llm_call_id.as_deref()),
                4 => update_u64(slot, self.call_seq),
                5 => {
                    if *slot != self.result {
                        *slot = StateValue::from(&self.result);
                    }
                }
                6 => update_str(slot, self.termination.map(Termination::as_str)),
                7 => {
                    let same = slot.as_object().is_some_and(|u| {
                        let n = |k: &str| u.get(k).and_then(StateValue::as_u64);
                        n("input_tokens") == Some(self.usage.input_tokens)
                            && n("output_tokens") == Some(self.usage.output_tokens)
                            && n("total_tokens") == Some(self.usage.total_tokens)
                    });
                    if !same {
                        *slot = StateValue::Object(usage_state(&self.usage));
                    }
                }
                8 => update_str(slot, self.output.as_deref()),
                9 => {
                    if slot.as_bool() != Some(self.repaired) {
                        *slot = StateValue::Bool(self.repaired);
                    }
                }
                10 => self
                    .conversation
                    .write_json(slot, prev.map(|p| &p.conversation)),
                _ => calls_changed = !self.update_tool_calls(slot),
            }
        }
        for (i, key) in KEYS.iter().enumerate() {
            if seen[i] {
                continue;
            }
            let value = match i {
                0 => StateValue::from(self.status.as_str()),
                1 => StateValue::from(self.iteration),
                2 => StateValue::from(self.request_id.as_deref()),
                3 => StateValue::from(self.llm_call_id.as_deref()),
                4 => StateValue::from(self.call_seq),
                5 => StateValue::from(&self.result),
                6 => StateValue::from(self.termination.map(Termination::as_str)),
                7 => StateValue::Object(usage_state(&self.usage)),
                8 => StateValue::from(self.output.as_deref()),
                9 => StateValue::Bool(self.repaired),
                10 => StateValue::Array(self.conversation.to_array()),
                _ => StateValue::Array(self.tool_calls.iter().map(pending_state).collect()),
            };
            into.insert(key, value);
        }
        if calls_changed {
            into.insert(
                "tool_calls",
                self.tool_calls
                    .iter()
                    .map(pending_state)
                    .collect::<StateArray>(),
            );
        }
    }

    /// Updates the mirror's tool calls in place when they are the same
    /// calls (only the entries whose state changed are written); false
    /// when the calls differ (a new turn: the caller rewrites them).
    fn update_tool_calls(&self, slot: &mut StateValue) -> bool {
        let Some(array) = slot.as_array_mut() else {
            return false;
        };
        let same_calls = array.len() == self.tool_calls.len()
            && array
                .iter()
                .zip(&self.tool_calls)
                .all(|(v, c)| v.get("id").and_then(StateValue::as_str) == Some(c.call.id.as_str()));
        if !same_calls {
            return false;
        }
        let stale = self.tool_calls.iter().enumerate().any(|(i, c)| {
            array
                .get(i)
                .and_then(|v| v.get("state"))
                .and_then(StateValue::as_str)
                != Some(c.state.name())
        });
        if stale {
            for (i, c) in self.tool_calls.iter().enumerate() {
                let Some(entry) = array.get_mut(i).and_then(StateValue::as_object_mut) else {
                    continue;
                };
                if entry.get("state").and_then(StateValue::as_str) != Some(c.state.name()) {
                    entry.insert("state", c.state.name());
                    if let ToolCallState::Done(r) = &c.state {
                        entry.insert("result", StateValue::from(r.to_value()));
                    }
                }
            }
        }
        true
    }

    /// Reads a machine written by [`Machine::write`]; missing fields take
    /// their defaults, `None` when `status` is missing or unknown.
    pub fn read(from: &StateMap) -> Option<Self> {
        let status = Status::parse(from.get("status")?.as_str()?)?;
        let text = |k: &str| from.get(k).and_then(StateValue::as_str).map(str::to_owned);
        let num = |k: &str| from.get(k).and_then(StateValue::as_u64).unwrap_or(0);
        let tool_calls = from
            .get("tool_calls")
            .and_then(StateValue::as_array)
            .map(|a| a.iter().filter_map(read_pending).collect())
            .unwrap_or_default();
        let usage = from
            .get("usage")
            .and_then(|u| Usage::deserialize(u).ok())
            .unwrap_or_default();
        Some(Machine {
            status,
            iteration: num("iteration"),
            request_id: text("request_id").map(Arc::from),
            llm_call_id: text("llm_call_id").map(Arc::from),
            call_seq: num("call_seq"),
            tool_calls,
            result: from.get("result").map_or(Value::Null, StateValue::to_json),
            termination: from
                .get("termination_reason")
                .and_then(StateValue::as_str)
                .and_then(Termination::parse),
            usage,
            output: text("output"),
            repaired: from
                .get("repaired")
                .and_then(StateValue::as_bool)
                .unwrap_or(false),
            conversation: Conversation::from_array(
                from.get("conversation")
                    .and_then(StateValue::as_array)
                    .cloned()
                    .unwrap_or_default(),
            ),
        })
    }
}

fn pending_state(c: &PendingToolCall) -> StateValue {
    let mut m = StateMap::with_capacity(5);
    m.insert("id", c.call.id.as_str());
    m.insert("name", c.call.name.as_str());
    m.insert("arguments", StateValue::from(&*c.call.arguments));
    m.insert("state", c.state.name());
    let result = match &c.state {
        ToolCallState::Done(r) => StateValue::from(r.to_value()),
        _ => StateValue::Null,
    };
    m.insert("result", result);
    StateValue::Object(m)
}

fn read_pending(v: &StateValue) -> Option<PendingToolCall> {
    let m = v.as_object()?;
    let call = ToolCall {
        id: m.get("id")?.as_str()?.to_owned(),
        name: m.get("name")?.as_str()?.to_owned(),
        arguments: Arc::new(m.get("arguments").map_or(Value::Null, StateValue::to_json)),
    };
    let state = match m.get("state")?.as_str()? {
        "queued" => ToolCallState::Queued,
        "running" => ToolCallState::Running,
        "done" => ToolCallState::Done(ResultEnvelope::normalize(
            &m.get("result").map_or(Value::Null, StateValue::to_json),
            "execution_error",
            "tool execution failed",
        )),
        _ => return None,
    };
    Some(PendingToolCall { call, state })
}

fn capitalise(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => {
            let mut out: String = first.to_uppercase().collect();
            out.push_str(chars.as_str());
            if !out.ends_with('.') {
                out.push('.');
            }
            out
        }
        None => String::new(),
    }
}

fn update_str(slot: &mut StateValue, value: Option<&str>) {
    let same = match slot {
        StateValue::Null => value.is_none(),
        StateValue::String(s) => value == Some(&**s),
        _ => false,
    };
    if !same {
        *slot = StateValue::from(value);
    }
}

fn update_u64(slot: &mut StateValue, value: u64) {
    if slot.as_u64() != Some(value) {
        *slot = StateValue::from(value);
    }
}

/// `call_REQUEST_SEQ`, the id of an LLM call (without `format!`'s
/// machinery: two model calls a request).
pub(crate) fn call_id(request_id: &str, seq: u64) -> String {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = seq;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut id = String::with_capacity(6 + request_id.len() + digits.len() - at);
    id.push_str("call_");
    id.push_str(request_id);
    id.push('_');
    id.extend(digits[at..].iter().map(|&d| char::from(d)));
    id
}

#[cfg(test)]
mod tests {
    use super::call_id;

    #[test]
    fn call_ids_are_prefix_request_and_sequence() {
        assert_eq!(call_id("r1", 0), "call_r1_0");
        assert_eq!(call_id("r1", 7), "call_r1_7");
        assert_eq!(call_id("req-9", 10), "call_req-9_10");
        assert_eq!(call_id("", 1234567890), "call__1234567890");
        assert_eq!(call_id("x", u64::MAX), format!("call_x_{}", u64::MAX));
    }
}
