//! The real client on the `genai` crate (feature `ai-genai`). This is the
//! only file that names `genai` types; none of them leaves it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use ::genai::adapter::AdapterKind;
use ::genai::chat::{
    ChatMessage, ChatOptions, ChatRequest, ChatResponse, ChatResponseFormat, ChatStream,
    ChatStreamEvent, ContentPart, JsonSpec, MessageContent, StopReason, StreamEnd, Tool,
    ToolCall as GToolCall, ToolChoice as GToolChoice, ToolResponse, Usage as GUsage,
};
use ::genai::embed::EmbedOptions;
use ::genai::resolver::{AuthData, Endpoint};
use ::genai::webc::StreamTimeout;
use ::genai::{Client, ModelIden, ModelSpec, ServiceTarget};
use futures::future::{BoxFuture, FutureExt};
use futures::stream::{self, StreamExt};
use serde_json::{Value, json};

use super::assemble::parse_arguments;
use super::{
    EmbedRequest, EmbedResponse, FinishReason, LlmClient, LlmConfig, LlmError, LlmErrorKind,
    LlmEvent, LlmEventStream, LlmRequest, LlmResponse, Message, Role, ToolCall, ToolChoice, Usage,
};

/// An [`LlmClient`] for real providers, built on the `genai` crate: OpenAI
/// and any OpenAI-compatible server (llama.cpp, Ollama, vLLM, proxies)
/// through a base URL, and Anthropic, Gemini, Ollama's native API and
/// `genai`'s other providers through `provider::model` names. Requires
/// the `ai-genai` feature (and Rust 1.88).
///
/// Where requests go, the default model, aliases and default timeouts come
/// from its [`LlmConfig`] (see there). Streams report content, thinking
/// and tool-call fragments as they arrive, then one
/// [`LlmEvent::Done`] with the assembled calls, finish reason and usage;
/// tool calls are kept whatever the finish reason (llama.cpp reports
/// `length` beside a complete call). A stream that delivers no bytes for
/// the idle timeout fails with [`LlmErrorKind::StreamIdle`]; dropping a
/// stream closes its connection.
///
/// Errors: HTTP statuses become [`LlmErrorKind::Status`] (details: the
/// provider's `body`, `retry_after` when sent), retryable for 429 and 5xx
/// (a provider's `x-should-retry` header wins); refused or dropped
/// connections [`LlmErrorKind::Connect`] and timeouts
/// [`LlmErrorKind::Timeout`], both retryable; an answer that cannot be read
/// [`LlmErrorKind::Decode`]; missing keys or an unusable request
/// [`LlmErrorKind::InvalidRequest`].
///
/// # Examples
///
/// ```no_run
/// use jido::ai::client::{GenaiClient, LlmClient, LlmConfig, LlmRequest, Message};
///
/// # #[tokio::main] async fn main() -> Result<(), jido::ai::LlmError> {
/// // A local llama.cpp or Ollama server; `LlmConfig::from_env()` reads
/// // OPENAI_BASE_URL, OPENAI_API_KEY and JIDO_MODEL instead.
/// let client = GenaiClient::new(
///     LlmConfig::new()
///         .with_base_url("http://127.0.0.1:8181/v1")
///         .with_default_model("gemma3"),
/// )?;
/// let mut req = LlmRequest::new("", vec![Message::user("The capital of France is")]);
/// req.max_tokens = Some(16);
/// let answer = client.generate(req).await?;
/// println!("{} ({:?})", answer.text, answer.usage);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct GenaiClient {
    client: Client,
    config: Arc<LlmConfig>,
}

impl std::fmt::Debug for GenaiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenaiClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl GenaiClient {
    /// A client for `config`.
    ///
    /// # Errors
    ///
    /// [`LlmErrorKind::Other`] when the HTTP client cannot be built (no
    /// TLS backend).
    pub fn new(config: LlmConfig) -> Result<Self, LlmError> {
        // Idle connections are dropped before a server's usual keep-alive
        // of 5 s (llama.cpp, uvicorn) closes them: a request sent on a
        // connection the server is closing fails without an answer.
        let http = reqwest::Client::builder()
            .tcp_nodelay(true)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build()
            .map_err(|e| {
                LlmError::new(LlmErrorKind::Other, "cannot build the http client")
                    .with_details(json!({"cause": causes(&e)}))
            })?;
        let client = Client::builder()
            .with_reqwest(http)
            .build()
            .map_err(map_error)?;
        Ok(GenaiClient {
            client,
            config: Arc::new(config),
        })
    }

    /// A client configured from the environment ([`LlmConfig::from_env`]).
    ///
    /// # Errors
    ///
    /// As [`GenaiClient::new`].
    pub fn from_env() -> Result<Self, LlmError> {
        Self::new(LlmConfig::from_env())
    }

    /// The configuration.
    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// Where a request for `model` goes, and the model name to report.
    fn target(&self, model: &str) -> Result<(ModelSpec, String), LlmError> {
        let spec = self.config.resolve_model(model)?;
        if let Some(base) = self.config.base_url() {
            let (namespace, name) = match spec.split_once("::") {
                Some((ns, name)) => (Some(ns), name),
                None => (None, spec.as_str()),
            };
            if namespace.is_none_or(|ns| ns == "openai") {
                let mut url = base.to_string();
                if !url.ends_with('/') {
                    url.push('/');
                }
                let target = ServiceTarget {
                    endpoint: Endpoint::from_owned(url),
                    auth: AuthData::from_single(self.config.api_key().unwrap_or_default()),
                    model: ModelIden::new(AdapterKind::OpenAI, name),
                };
                return Ok((ModelSpec::Target(target), name.to_string()));
            }
        }
        Ok((ModelSpec::from_name(spec.as_str()), spec))
    }

    fn chat_options(&self, req: &LlmRequest) -> ChatOptions {
        let mut options = ChatOptions::default()
            .with_capture_usage(true)
            .with_capture_content(true)
            .with_capture_reasoning_content(true)
            .with_capture_tool_calls(true);
        if let Some(t) = req.temperature {
            // Through the decimal text: 0.2f32 is sent as 0.2, not 0.20000000298.
            options = options.with_temperature(t.to_string().parse().unwrap_or(f64::from(t)));
        }
        if let Some(n) = req.max_tokens {
            options = options.with_max_tokens(n);
        }
        if !req.stop.is_empty() {
            options = options.with_stop_sequences(req.stop.clone());
        }
        if let Some(format) = &req.response_format {
            options = options.with_response_format(ChatResponseFormat::JsonSpec(JsonSpec::new(
                format.name.clone(),
                format.schema.clone(),
            )));
        }
        if !req.tools.is_empty() {
            options = options.with_tool_choice(match &req.tool_choice {
                ToolChoice::None => GToolChoice::None,
                ToolChoice::Required(name) => GToolChoice::tool(name.clone()),
                ToolChoice::Any => GToolChoice::Required,
                _ => GToolChoice::Auto,
            });
        }
        if let Some(idle) = req
            .stream_idle_timeout
            .or(self.config.stream_idle_timeout())
        {
            options = options.with_stream_read_timeout(idle);
        }
        options
    }
}

/// Our request as a `genai` chat request.
fn chat_request(req: &LlmRequest) -> Result<ChatRequest, LlmError> {
    let mut messages = Vec::with_capacity(req.messages.len());
    for m in &req.messages {
        messages.push(chat_message(m)?);
    }
    let mut chat = ChatRequest::new(messages);
    if !req.tools.is_empty() {
        chat = chat.with_tools(req.tools.iter().map(|t| {
            let tool = Tool::new(t.name.clone())
                .with_description(t.description.clone())
                .with_schema(t.parameters.clone());
            if t.strict {
                tool.with_strict(true)
            } else {
                tool
            }
        }));
    }
    Ok(chat)
}

fn chat_message(m: &Message) -> Result<ChatMessage, LlmError> {
    Ok(match m.role {
        Role::System => ChatMessage::system(m.content.clone()),
        Role::User => ChatMessage::user(m.content.clone()),
        Role::Assistant if m.tool_calls.is_empty() => ChatMessage::assistant(m.content.clone()),
        Role::Assistant => {
            let mut parts = Vec::with_capacity(m.tool_calls.len() + 1);
            if !m.content.is_empty() {
                parts.push(ContentPart::Text(m.content.clone()));
            }
            parts.extend(m.tool_calls.iter().map(|c| {
                ContentPart::ToolCall(GToolCall {
                    call_id: c.id.clone(),
                    fn_name: c.name.clone(),
                    fn_arguments: Value::clone(&c.arguments),
                    thought_signatures: None,
                })
            }));
            ChatMessage::assistant(MessageContent::from_parts(parts))
        }
        Role::Tool => {
            let Some(id) = &m.tool_call_id else {
                return Err(LlmError::new(
                    LlmErrorKind::InvalidRequest,
                    "tool message without tool_call_id",
                ));
            };
            let mut response = ToolResponse::new(id.clone(), m.content.clone());
            if let Some(name) = &m.name {
                response = response.with_fn_name(name.clone());
            }
            ChatMessage::from(response)
        }
    })
}

fn finish_reason(reason: Option<&StopReason>, has_calls: bool) -> FinishReason {
    match reason {
        Some(StopReason::Completed(_) | StopReason::StopSequence(_)) => FinishReason::Stop,
        Some(StopReason::MaxTokens(_)) => FinishReason::Length,
        Some(StopReason::ToolCall(_)) => FinishReason::ToolCalls,
        Some(StopReason::ContentFilter(_)) => FinishReason::ContentFilter,
        Some(StopReason::Other(raw)) if raw.is_empty() => implied_finish(has_calls),
        Some(StopReason::Other(raw)) => FinishReason::Other(raw.clone()),
        None => implied_finish(has_calls),
    }
}

/// A provider that names no finish reason finished normally.
fn implied_finish(has_calls: bool) -> FinishReason {
    if has_calls {
        FinishReason::ToolCalls
    } else {
        FinishReason::Stop
    }
}

fn count(n: Option<i32>) -> u64 {
    n.and_then(|n| u64::try_from(n).ok()).unwrap_or(0)
}

/// Token counts, or `None` when the provider sent none.
fn usage(u: &GUsage) -> Option<Usage> {
    if u.prompt_tokens.is_none() && u.completion_tokens.is_none() && u.total_tokens.is_none() {
        return None;
    }
    let input_tokens = count(u.prompt_tokens);
    let output_tokens = count(u.completion_tokens);
    let total_tokens = u
        .total_tokens
        .map_or(input_tokens + output_tokens, |t| count(Some(t)));
    Some(Usage {
        input_tokens,
        output_tokens,
        total_tokens,
    })
}

fn tool_call(c: GToolCall) -> ToolCall {
    let arguments = match c.fn_arguments {
        Value::String(text) => parse_arguments(text),
        Value::Null => json!({}),
        other => other,
    };
    ToolCall {
        id: c.call_id,
        name: c.fn_name,
        arguments: arguments.into(),
    }
}

fn response(res: ChatResponse) -> LlmResponse {
    let usage = usage(&res.usage);
    let thinking = res.reasoning_content.clone().filter(|t| !t.is_empty());
    let stop = res.stop_reason.clone();
    let text = res.content.texts().join("");
    let tool_calls: Vec<ToolCall> = res
        .content
        .into_tool_calls()
        .into_iter()
        .map(tool_call)
        .collect();
    LlmResponse {
        model: res.provider_model_iden.model_name.to_string(),
        text,
        thinking,
        finish_reason: finish_reason(stop.as_ref(), !tool_calls.is_empty()),
        tool_calls,
        usage,
    }
}

/// Maps `genai` stream events to ours: per call, the id and name on its
/// first fragment and only the new part of the (cumulative) arguments.
struct StreamState {
    model: String,
    /// Per call index: the call id and the argument text sent so far.
    calls: Vec<(String, String)>,
    text: String,
    thinking: String,
}

impl StreamState {
    fn event(&mut self, event: ChatStreamEvent, out: &mut VecDeque<LlmEvent>) -> bool {
        match event {
            ChatStreamEvent::Chunk(c) if !c.content.is_empty() => {
                self.text.push_str(&c.content);
                out.push_back(LlmEvent::Content(c.content));
            }
            ChatStreamEvent::ReasoningChunk(c) if !c.content.is_empty() => {
                self.thinking.push_str(&c.content);
                out.push_back(LlmEvent::Thinking(c.content));
            }
            ChatStreamEvent::ToolCallChunk(chunk) => {
                let call = chunk.tool_call;
                let text = match call.fn_arguments {
                    Value::String(s) => s,
                    Value::Null => String::new(),
                    other => other.to_string(),
                };
                let (index, first) = match self.calls.iter().position(|(id, _)| *id == call.call_id)
                {
                    Some(i) => (i, false),
                    None => {
                        self.calls.push((call.call_id.clone(), String::new()));
                        (self.calls.len() - 1, true)
                    }
                };
                let sent = &mut self.calls[index].1;
                // Cumulative text: send the suffix; otherwise a new piece.
                let piece = match text.strip_prefix(sent.as_str()) {
                    Some(rest) => rest.to_string(),
                    None => text,
                };
                sent.push_str(&piece);
                if first || !piece.is_empty() {
                    out.push_back(LlmEvent::ToolCallDelta {
                        index,
                        id: first.then(|| call.call_id.clone()),
                        name: first.then(|| call.fn_name.clone()),
                        arguments: piece,
                    });
                }
            }
            ChatStreamEvent::End(end) => {
                out.push_back(LlmEvent::Done(self.done(end)));
                return true;
            }
            _ => {}
        }
        false
    }

    fn done(&mut self, end: StreamEnd) -> LlmResponse {
        let usage = end.captured_usage.as_ref().and_then(usage);
        let stop = end.captured_stop_reason.clone();
        let thinking = end
            .captured_reasoning_content
            .clone()
            .filter(|t| !t.is_empty())
            .or_else(|| (!self.thinking.is_empty()).then(|| std::mem::take(&mut self.thinking)));
        let text = match end.captured_texts() {
            Some(texts) if !texts.is_empty() => texts.concat(),
            _ => std::mem::take(&mut self.text),
        };
        let tool_calls: Vec<ToolCall> = end
            .captured_into_tool_calls()
            .unwrap_or_default()
            .into_iter()
            .map(tool_call)
            .collect();
        LlmResponse {
            model: std::mem::take(&mut self.model),
            text,
            thinking,
            finish_reason: finish_reason(stop.as_ref(), !tool_calls.is_empty()),
            tool_calls,
            usage,
        }
    }
}

/// Our event stream over a `genai` chat stream: ends after `Done` or the
/// first error; a stream that stops without its end is a dropped
/// connection.
fn events(inner: ChatStream, model: String) -> LlmEventStream {
    let state = StreamState {
        model,
        calls: Vec::new(),
        text: String::new(),
        thinking: String::new(),
    };
    let init = (Some(inner), state, VecDeque::new());
    stream::unfold(init, |(mut inner, mut state, mut queue)| async move {
        loop {
            if let Some(event) = queue.pop_front() {
                return Some((Ok(event), (inner, state, queue)));
            }
            let source = inner.as_mut()?;
            match source.next().await {
                Some(Ok(event)) => {
                    if state.event(event, &mut queue) {
                        inner = None;
                    }
                }
                Some(Err(err)) => return Some((Err(map_error(err)), (None, state, queue))),
                None => {
                    let err = LlmError::new(
                        LlmErrorKind::Connect,
                        "stream ended before the response was complete",
                    );
                    return Some((Err(err), (None, state, queue)));
                }
            }
        }
    })
    .boxed()
}

async fn within<T>(
    limit: Option<Duration>,
    fut: impl Future<Output = Result<T, LlmError>>,
) -> Result<T, LlmError> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, fut).await.unwrap_or_else(|_| {
            Err(LlmError::new(
                LlmErrorKind::Timeout,
                format!("no response within {} ms", limit.as_millis()),
            )
            .with_details(
                json!({"timeout_ms": u64::try_from(limit.as_millis()).unwrap_or(u64::MAX)}),
            ))
        }),
        None => fut.await,
    }
}

impl LlmClient for GenaiClient {
    fn generate(&self, req: LlmRequest) -> BoxFuture<'static, Result<LlmResponse, LlmError>> {
        let this = self.clone();
        async move {
            let (spec, model) = this.target(&req.model)?;
            let chat = chat_request(&req)?;
            let mut options = this.chat_options(&req);
            options.stream_read_timeout = None;
            let limit = req.timeout.or(this.config.timeout());
            within(limit, async {
                let res = resend_once(|| async {
                    this.client
                        .exec_chat(spec.clone(), chat.clone(), Some(&options))
                        .await
                        .map_err(map_error)
                })
                .await?;
                let mut out = response(res);
                if out.model.is_empty() {
                    out.model = model;
                }
                Ok(out)
            })
            .await
        }
        .boxed()
    }

    fn stream(&self, req: LlmRequest) -> BoxFuture<'static, Result<LlmEventStream, LlmError>> {
        let this = self.clone();
        async move {
            let (spec, model) = this.target(&req.model)?;
            let chat = chat_request(&req)?;
            let options = this.chat_options(&req);
            // Accepted once the first event arrives (or the first error):
            // the request is sent when the stream is first polled, so a
            // connection closed before the answer shows there.
            let limit = req.timeout.or(this.config.timeout());
            let (first, events) = within(
                limit,
                resend_once(|| async {
                    let res = this
                        .client
                        .exec_chat_stream(spec.clone(), chat.clone(), Some(&options))
                        .await
                        .map_err(map_error)?;
                    let mut events = events(res.stream, model.clone());
                    match events.next().await {
                        Some(Ok(event)) => Ok((event, events)),
                        Some(Err(err)) => Err(err),
                        None => Err(LlmError::new(LlmErrorKind::Connect, "empty stream")),
                    }
                }),
            )
            .await?;
            Ok(stream::once(async move { Ok(first) }).chain(events).boxed())
        }
        .boxed()
    }

    fn embed(&self, req: EmbedRequest) -> BoxFuture<'static, Result<EmbedResponse, LlmError>> {
        let this = self.clone();
        async move {
            let (spec, model) = this.target(&req.model)?;
            let mut options = EmbedOptions::new().with_capture_usage(true);
            if let Some(d) = req.dimensions {
                options = options.with_dimensions(usize::try_from(d).unwrap_or(usize::MAX));
            }
            let count = req.texts.len();
            let limit = req.timeout.or(this.config.timeout());
            within(limit, async {
                let res = this
                    .client
                    .embed_batch(spec, req.texts, Some(&options))
                    .await
                    .map_err(map_error)?;
                let usage = usage(&res.usage);
                let mut embeddings = res.embeddings;
                embeddings.sort_by_key(|e| e.index);
                if embeddings.len() != count
                    || embeddings.iter().enumerate().any(|(i, e)| e.index != i)
                {
                    return Err(LlmError::new(
                        LlmErrorKind::Decode,
                        format!("expected {count} embeddings, got {}", embeddings.len()),
                    ));
                }
                Ok(EmbedResponse {
                    model,
                    embeddings: embeddings.into_iter().map(|e| e.vector).collect(),
                    usage,
                })
            })
            .await
        }
        .boxed()
    }
}

/// Runs `call`, and once more when the request failed before any answer
/// came: a pooled connection that the server closed as the request went
/// out. hyper reports that as a `SendRequest` client error whose cause is
/// "connection closed before message completed"; a model call has no side
/// effect before it is answered.
async fn resend_once<T, F, Fut>(call: F) -> Result<T, LlmError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, LlmError>>,
{
    match call().await {
        Err(e) if closed_before_answer(&e) => call().await,
        done => done,
    }
}

fn closed_before_answer(err: &LlmError) -> bool {
    err.kind == LlmErrorKind::Connect
        && err.details["cause"].as_str().is_some_and(|c| {
            c.contains("(SendRequest)") && c.contains("connection closed before message completed")
        })
}

/// How long an idle pooled connection is kept: under the 5 s keep-alive of
/// common servers.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// The text of an error's source chain (no URL: reqwest's own message
/// names it; its sources do not).
fn causes(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut next = err.source();
    while let Some(e) = next {
        parts.push(e.to_string());
        next = e.source();
    }
    parts.join(": ")
}

fn transport(err: &reqwest::Error) -> LlmError {
    let details = json!({"cause": causes(err)});
    let (kind, message) = if err.is_timeout() {
        (LlmErrorKind::Timeout, "request timed out")
    } else if err.is_connect() {
        (LlmErrorKind::Connect, "could not connect")
    } else if err.is_body() || err.is_decode() {
        // reqwest reports a body cut short through its decoder as a decode
        // error; `genai` parses the JSON itself, so both are transport.
        (
            LlmErrorKind::Connect,
            "connection dropped while reading the response",
        )
    } else if let Some(status) = err.status() {
        return status_error(status.as_u16(), "", None);
    } else {
        (LlmErrorKind::Connect, "connection failed or dropped")
    };
    LlmError::new(kind, message).with_details(details)
}

/// A provider's error status, with its body and retry hints as details.
fn status_error(status: u16, body: &str, headers: Option<&reqwest::header::HeaderMap>) -> LlmError {
    let body_value = serde_json::from_str::<Value>(body)
        .map(|v| crate::error::sanitize(&v))
        .unwrap_or_else(|_| Value::String(body.chars().take(512).collect()));
    let mut details = json!({"status": status, "body": body_value});
    let mut err = LlmError::new(
        LlmErrorKind::Status(status),
        format!("provider answered with status {status}"),
    );
    if let Some(headers) = headers {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if let Some(after) = header("retry-after") {
            details["retry_after"] = Value::String(after.to_string());
        }
        match header("x-should-retry") {
            Some("true") => err = err.with_retryable(true),
            Some("false") => err = err.with_retryable(false),
            _ => {}
        }
    }
    err.with_details(details)
}

fn web_error(err: &::genai::webc::Error) -> LlmError {
    use ::genai::webc::Error as W;
    match err {
        W::ResponseFailedStatus {
            status,
            body,
            headers,
        } => status_error(status.as_u16(), body, Some(headers)),
        W::Reqwest(e) => transport(e),
        W::ResponseFailedNotJson { content_type, .. } => {
            LlmError::new(LlmErrorKind::Decode, "response is not json")
                .with_details(json!({"content_type": content_type}))
        }
        other => LlmError::new(LlmErrorKind::Decode, "response is not valid json").with_details(
            json!({"cause": other.to_string().chars().take(512).collect::<String>()}),
        ),
    }
}

/// A boxed error from inside a `genai` stream.
fn boxed_error(err: &(dyn std::error::Error + Send + Sync + 'static)) -> LlmError {
    if let Some(timeout) = err.downcast_ref::<StreamTimeout>() {
        return match timeout {
            StreamTimeout::Read => LlmError::new(LlmErrorKind::StreamIdle, "stream went idle"),
            _ => LlmError::new(LlmErrorKind::Timeout, "no response headers in time"),
        };
    }
    if let Some(e) = err.downcast_ref::<::genai::Error>() {
        return genai_error(e);
    }
    if let Some(e) = err.downcast_ref::<reqwest::Error>() {
        return transport(e);
    }
    LlmError::new(LlmErrorKind::Decode, "could not read the stream")
        .with_details(json!({"cause": err.to_string().chars().take(512).collect::<String>()}))
}

fn genai_error(err: &::genai::Error) -> LlmError {
    use ::genai::Error as G;
    let cause = || json!({"cause": err.to_string().chars().take(1024).collect::<String>()});
    match err {
        G::HttpError {
            status,
            body,
            headers,
            ..
        } => status_error(status.as_u16(), body, Some(headers)),
        G::WebModelCall { webc_error, .. } | G::WebAdapterCall { webc_error, .. } => {
            web_error(webc_error)
        }
        G::WebStream { error, .. } => boxed_error(error.as_ref()),
        G::StreamParse { .. } => {
            LlmError::new(LlmErrorKind::Decode, "invalid json in the stream").with_details(cause())
        }
        G::ChatResponse { body, .. } => {
            // An error event inside a stream (`{"error": {...}}`).
            let body = crate::error::sanitize(body);
            let code = body
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .filter(|c| (400..600).contains(c));
            let err = match code {
                Some(code) => LlmError::new(
                    LlmErrorKind::Status(code),
                    format!("provider reported error {code} in the stream"),
                ),
                None => LlmError::new(
                    LlmErrorKind::Other,
                    "provider reported an error in the stream",
                ),
            };
            err.with_details(json!({"body": body}))
        }
        G::ChatResponseGeneration { cause: c, .. } => {
            LlmError::new(LlmErrorKind::Decode, "could not decode the response")
                .with_details(json!({"cause": c.chars().take(1024).collect::<String>()}))
        }
        G::NoChatResponse { .. } | G::InvalidJsonResponseElement { .. } | G::SerdeJson(_) => {
            LlmError::new(LlmErrorKind::Decode, "could not decode the response")
                .with_details(cause())
        }
        G::RequiresApiKey { .. }
        | G::NoAuthResolver { .. }
        | G::NoAuthData { .. }
        | G::Resolver { .. } => {
            LlmError::new(LlmErrorKind::InvalidRequest, "missing provider credentials")
                .with_details(cause())
        }
        G::Internal(_) | G::ClientBuildFail { .. } => {
            LlmError::new(LlmErrorKind::Other, "llm client failure").with_details(cause())
        }
        _ => LlmError::new(
            LlmErrorKind::InvalidRequest,
            "request not supported by the provider",
        )
        .with_details(cause()),
    }
}

fn map_error(err: ::genai::Error) -> LlmError {
    genai_error(&err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_reasons_map_to_finish_reasons() {
        let f = |s: &str| finish_reason(Some(&StopReason::from(s.to_string())), false);
        assert_eq!(f("stop"), FinishReason::Stop);
        assert_eq!(f("stop_sequence"), FinishReason::Stop);
        assert_eq!(f("length"), FinishReason::Length);
        assert_eq!(f("tool_calls"), FinishReason::ToolCalls);
        assert_eq!(f("content_filter"), FinishReason::ContentFilter);
        assert_eq!(f("cancelled"), FinishReason::Other("cancelled".into()));
        assert_eq!(f(""), FinishReason::Stop);
        assert_eq!(finish_reason(None, true), FinishReason::ToolCalls);
    }

    #[test]
    fn target_routes_by_base_url_and_namespace() {
        let c = GenaiClient::new(
            LlmConfig::new()
                .with_base_url("http://127.0.0.1:9/v1")
                .with_default_model("local")
                .with_alias("fast", "openai::small"),
        )
        .unwrap();
        let (spec, model) = c.target("").unwrap();
        assert_eq!(model, "local");
        let ModelSpec::Target(t) = spec else {
            panic!("not a target")
        };
        assert_eq!(t.endpoint.base_url(), "http://127.0.0.1:9/v1/");
        assert_eq!(t.model.adapter_kind, AdapterKind::OpenAI);
        let (_, model) = c.target("fast").unwrap();
        assert_eq!(model, "small");
        let (spec, model) = c.target("anthropic::claude-haiku-4-5").unwrap();
        assert_eq!(model, "anthropic::claude-haiku-4-5");
        assert!(matches!(spec, ModelSpec::Name(_)));
    }

    #[test]
    fn status_errors_carry_body_and_retry_hints() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "3".parse().unwrap());
        let e = status_error(
            429,
            r#"{"error":{"message":"slow","api_key":"sk-1"}}"#,
            Some(&headers),
        );
        assert_eq!(e.kind, LlmErrorKind::Status(429));
        assert!(e.retryable);
        assert_eq!(e.message, "provider answered with status 429");
        assert_eq!(e.details["retry_after"], "3");
        assert_eq!(e.details["body"]["error"]["message"], "slow");
        assert_ne!(e.details["body"]["error"]["api_key"], "sk-1");
        headers.insert("x-should-retry", "false".parse().unwrap());
        assert!(!status_error(503, "oops", Some(&headers)).retryable);
        let e = status_error(400, "not json", None);
        assert!(!e.retryable);
        assert_eq!(e.details["body"], "not json");
    }
}
