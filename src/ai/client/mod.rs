//! The LLM client interface: our own request, message, event, response and
//! error types, and the [`LlmClient`] trait every model backend implements.
//!
//! No provider crate's type appears here. A backend (the `genai` adapter, the
//! scripted model, a user's own) maps its wire format onto these types; the AI
//! directives and strategies only ever see them.
//!
//! Messages, tool calls and usage are `serde` types because conversations live
//! in agent state and travel in signals.
//!
//! Backends here:
//! * [`ScriptedModel`]: plays [`Script`]s (question → tool calls → answer or
//!   failure) for deterministic tests and offline runs;
//! * `GenaiClient` (feature `ai-genai`): OpenAI and OpenAI-compatible servers
//!   (Ollama, vLLM, llama.cpp), Anthropic, Gemini and the other providers of
//!   the `genai` crate, configured by an [`LlmConfig`] with [`ModelAliases`].
//!
//! Errors are [`LlmError`]s whose `retryable` flag follows the kind: 429, 5xx,
//! connection failures and timeouts are retryable, other 4xx are not.

mod aliases;
mod assemble;
mod config;
#[cfg(feature = "ai-genai")]
mod genai;
mod messages;
mod scripted;
mod specs;

#[cfg(feature = "ai-genai")]
pub use self::genai::GenaiClient;
pub use aliases::ModelAliases;
pub use assemble::ToolCallAssembler;
pub use config::{DEFAULT_STREAM_IDLE_TIMEOUT, DEFAULT_TIMEOUT, LlmConfig};
pub use messages::{Messages, MessagesIter};
pub use scripted::{DEFAULT_REQUEST_LOG, Script, ScriptedModel};
pub use specs::ToolSpecs;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a [`Message`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The user's turn.
    User,
    /// The model's turn (text and/or tool calls).
    Assistant,
    /// A tool's result, answering one tool call by its id.
    Tool,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text (empty for an assistant turn made only of tool calls).
    #[serde(default)]
    pub content: String,
    /// Tool calls the model made in this (assistant) message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a [`Role::Tool`] message: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a [`Role::Tool`] message: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Message {
    fn text(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::text(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::text(Role::User, content)
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::text(Role::Assistant, content)
    }

    /// An assistant message carrying tool calls (and possibly text).
    pub fn assistant_tool_calls(content: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        Message {
            tool_calls: calls,
            ..Self::text(Role::Assistant, content)
        }
    }

    /// A tool result answering the call `call_id` of tool `name`.
    pub fn tool_result(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        Message {
            tool_call_id: Some(call_id.into()),
            name: Some(name.into()),
            ..Self::text(Role::Tool, content)
        }
    }
}

/// A tool call made by the model: the call id, the tool's name and its
/// arguments (a JSON value, already assembled from streamed fragments).
///
/// The arguments are shared (`Arc<Value>`): a call travels from the model's
/// answer into the conversation, the strategy's state, the tool directive
/// and the next model call, and each of those copies is a reference count,
/// not a copy of the JSON. Their serde form is the plain value.
///
/// ```
/// use jido::ai::ToolCall;
/// use serde_json::json;
///
/// let call = ToolCall::new("tc_1", "add", json!({"a": 2}));
/// let copy = call.clone(); // the arguments are not copied
/// assert_eq!(*copy.arguments, json!({"a": 2}));
/// assert_eq!(copy.arguments["a"], 2);
/// assert_eq!(
///     serde_json::to_value(&call).unwrap(),
///     json!({"id": "tc_1", "name": "add", "arguments": {"a": 2}})
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The model's id for this call; the tool result answers it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the model wrote them (normally a JSON object),
    /// shared.
    pub arguments: Arc<Value>,
}

impl ToolCall {
    /// A call `id` of tool `name` with `arguments` (a `Value` or an
    /// `Arc<Value>`).
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<Arc<Value>>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// A tool offered to the model: name, description and the JSON Schema of its
/// parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name (`^[a-zA-Z][a-zA-Z0-9_]*$` for tools made from actions).
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    /// Ask the provider to enforce the schema strictly (OpenAI `strict`).
    #[serde(default)]
    pub strict: bool,
}

/// Whether and which tools the model may call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// The model must call the named tool.
    Required(String),
    /// The model must call at least one of the tools (OpenAI `"required"`).
    Any,
}

/// Ask for a JSON answer that follows a schema (structured output).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JsonSchemaFormat {
    /// A name for the schema (some providers require one).
    pub name: String,
    /// The JSON Schema the answer must follow.
    pub schema: Value,
}

/// A chat request to a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmRequest {
    /// The resolved model spec, `"provider::model"` or a bare model name
    /// (aliases are resolved before a request is built).
    pub model: String,
    /// The conversation, system prompt first when there is one (shared:
    /// cloning a request copies no message).
    pub messages: Messages,
    /// Tools offered to the model (empty: none), shared.
    #[serde(default, skip_serializing_if = "ToolSpecs::is_empty")]
    pub tools: ToolSpecs,
    /// Tool choice.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// Upper bound on generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Structured output: the answer must be JSON following this schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<JsonSchemaFormat>,
    /// Whole-request timeout (for a stream: until its first event; after
    /// that [`LlmRequest::stream_idle_timeout`] applies).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_millis")]
    pub timeout: Option<Duration>,
    /// A stream that delivers nothing (no content, no fragment) for this long
    /// fails with [`LlmErrorKind::StreamIdle`].
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_millis")]
    pub stream_idle_timeout: Option<Duration>,
}

impl LlmRequest {
    /// A request for `model` with `messages` (a `Vec<Message>` or shared
    /// [`Messages`]) and every option unset.
    pub fn new(model: impl Into<String>, messages: impl Into<Messages>) -> Self {
        LlmRequest {
            model: model.into(),
            messages: messages.into(),
            tools: ToolSpecs::new(),
            tool_choice: ToolChoice::Auto,
            max_tokens: None,
            temperature: None,
            stop: Vec::new(),
            response_format: None,
            timeout: None,
            stream_idle_timeout: None,
        }
    }
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// A natural end or a stop sequence.
    Stop,
    /// The model asked for tool calls.
    ToolCalls,
    /// The token limit cut the answer.
    Length,
    /// A provider filter cut the answer.
    ContentFilter,
    /// Anything else the provider reported (kept verbatim).
    Other(String),
}

impl FinishReason {
    /// True when the answer may be cut short (`Length`, `ContentFilter`).
    pub fn is_truncating(&self) -> bool {
        matches!(self, FinishReason::Length | FinishReason::ContentFilter)
    }
}

/// Token counts of one call (or a sum over calls).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt (input) tokens.
    pub input_tokens: u64,
    /// Generated (output) tokens.
    pub output_tokens: u64,
    /// Both.
    pub total_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
    }
}

/// A complete answer of the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmResponse {
    /// The model that answered, as the provider named it.
    pub model: String,
    /// The answer's text (possibly empty when the model only called tools).
    #[serde(default)]
    pub text: String,
    /// Reasoning text, when the provider exposes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// Tool calls, taken whatever the finish reason (a local server may
    /// report `length` beside a complete call).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// Token counts, when the provider counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// One event of a streamed answer. A stream ends with exactly one
/// [`LlmEvent::Done`] carrying the assembled response, or with an error.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum LlmEvent {
    /// A piece of answer text.
    Content(String),
    /// A piece of reasoning text.
    Thinking(String),
    /// A fragment of a tool call: `index` names the call within the turn;
    /// `id` and `name` arrive with its first fragment; `arguments` is the
    /// next piece of the JSON text (not cumulative).
    ToolCallDelta {
        /// Position of the call in the turn.
        index: usize,
        /// The call id, on the first fragment.
        id: Option<String>,
        /// The tool name, on the first fragment.
        name: Option<String>,
        /// The next piece of the arguments' JSON text.
        arguments: String,
    },
    /// The assembled response; nothing follows it.
    Done(LlmResponse),
}

/// An embedding request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbedRequest {
    /// The resolved model spec.
    pub model: String,
    /// The texts to embed, answered in the same order.
    pub texts: Vec<String>,
    /// Requested dimension, when the model supports choosing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u32>,
    /// Whole-request timeout.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_millis")]
    pub timeout: Option<Duration>,
}

/// Embeddings, one vector per input text, in input order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbedResponse {
    /// The model that answered.
    pub model: String,
    /// One vector per text.
    pub embeddings: Vec<Vec<f32>>,
    /// Token counts, when the provider counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// What went wrong in an LLM call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LlmErrorKind {
    /// The request did not finish within its timeout.
    Timeout,
    /// A stream stopped delivering for longer than its idle timeout.
    StreamIdle,
    /// No connection (refused, reset, DNS, TLS), or it dropped mid-answer.
    Connect,
    /// The provider answered with an HTTP error status.
    Status(u16),
    /// The provider's answer could not be decoded.
    Decode,
    /// The request was cancelled.
    Cancelled,
    /// The request was invalid before it was sent (unknown model alias,
    /// missing configuration).
    InvalidRequest,
    /// A scripted model was asked something its script does not expect, or
    /// ran out of turns.
    Script,
    /// Anything else.
    Other,
}

impl LlmErrorKind {
    /// Whether a call failing this way is worth retrying: timeouts, idle
    /// streams, connection failures, 429 and 5xx are; other 4xx, decoding,
    /// invalid requests, scripts and cancellations are not.
    pub fn is_retryable(self) -> bool {
        match self {
            LlmErrorKind::Timeout | LlmErrorKind::StreamIdle | LlmErrorKind::Connect => true,
            LlmErrorKind::Status(code) => code == 429 || (500..600).contains(&code),
            _ => false,
        }
    }

    /// A stable snake_case name, used as the error envelope's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            LlmErrorKind::Timeout => "timeout",
            LlmErrorKind::StreamIdle => "stream_idle",
            LlmErrorKind::Connect => "connect",
            LlmErrorKind::Status(_) => "status",
            LlmErrorKind::Decode => "decode",
            LlmErrorKind::Cancelled => "cancelled",
            LlmErrorKind::InvalidRequest => "invalid_request",
            LlmErrorKind::Script => "script",
            LlmErrorKind::Other => "other",
        }
    }
}

/// An LLM call's error: a kind, a short message, whether a retry may help,
/// and JSON details (status body, provider error code; already free of
/// secrets).
#[derive(Clone, Debug, PartialEq)]
pub struct LlmError {
    /// What went wrong.
    pub kind: LlmErrorKind,
    /// A short lowercase message.
    pub message: String,
    /// Whether a retry may help (defaults to [`LlmErrorKind::is_retryable`]).
    pub retryable: bool,
    /// JSON details.
    pub details: Value,
}

impl LlmError {
    /// An error of `kind` with `message`; `retryable` follows the kind.
    pub fn new(kind: LlmErrorKind, message: impl Into<String>) -> Self {
        LlmError {
            kind,
            message: message.into(),
            retryable: kind.is_retryable(),
            details: Value::Null,
        }
    }

    /// The same error with JSON details.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    /// The same error with `retryable` set explicitly (e.g. a provider's
    /// `x-should-retry: false` on a 5xx).
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            LlmErrorKind::Status(code) => write!(f, "llm error (status {code}): {}", self.message),
            kind => write!(f, "llm error ({}): {}", kind.as_str(), self.message),
        }
    }
}

impl std::error::Error for LlmError {}

/// A streamed answer: events, ending with [`LlmEvent::Done`] or an error.
/// Dropping it cancels the request (the connection is closed).
pub type LlmEventStream = BoxStream<'static, Result<LlmEvent, LlmError>>;

/// A model backend.
///
/// Implementations are cheap to share (`Arc<dyn LlmClient>`); every call
/// returns a `'static` future so the runtime can run it in a supervised task.
/// Cancellation is dropping the future or the stream.
pub trait LlmClient: Send + Sync + 'static {
    /// One non-streamed answer.
    fn generate(&self, req: LlmRequest) -> BoxFuture<'static, Result<LlmResponse, LlmError>>;

    /// A streamed answer. The outer future resolves when the provider has
    /// accepted the request.
    fn stream(&self, req: LlmRequest) -> BoxFuture<'static, Result<LlmEventStream, LlmError>>;

    /// Embeddings for a batch of texts.
    fn embed(&self, req: EmbedRequest) -> BoxFuture<'static, Result<EmbedResponse, LlmError>>;
}

mod opt_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_follows_status() {
        assert!(LlmErrorKind::Status(429).is_retryable());
        assert!(LlmErrorKind::Status(503).is_retryable());
        assert!(!LlmErrorKind::Status(400).is_retryable());
        assert!(!LlmErrorKind::Status(404).is_retryable());
        assert!(LlmErrorKind::Timeout.is_retryable());
        assert!(!LlmErrorKind::Cancelled.is_retryable());
        assert!(!LlmError::new(LlmErrorKind::Decode, "bad json").retryable);
    }

    #[test]
    fn messages_round_trip_through_json() {
        let call = ToolCall {
            id: "tc_1".into(),
            name: "add".into(),
            arguments: serde_json::json!({"a": 1}).into(),
        };
        let msgs = vec![
            Message::system("be brief"),
            Message::assistant_tool_calls("", vec![call]),
            Message::tool_result("tc_1", "add", "{\"ok\":true}"),
        ];
        let json = serde_json::to_value(&msgs).unwrap();
        assert_eq!(
            json[0],
            serde_json::json!({"role": "system", "content": "be brief"})
        );
        assert_eq!(json[2]["tool_call_id"], "tc_1");
        let back: Vec<Message> = serde_json::from_value(json).unwrap();
        assert_eq!(back, msgs);
    }
}
