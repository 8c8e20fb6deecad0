//! The scripted model: a deterministic [`LlmClient`] for tests and offline
//! runs, following Jido's `expect_react` scripts.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use futures::stream::{self, StreamExt};
use serde_json::{Value, json};

use super::{
    EmbedRequest, EmbedResponse, FinishReason, LlmClient, LlmError, LlmErrorKind, LlmEvent,
    LlmEventStream, LlmRequest, LlmResponse, Message, Role, ToolCall, Usage,
};

/// The model name a scripted response reports when the request names none.
const MODEL_NAME: &str = "scripted";
/// Default length of an embedding vector.
const DEFAULT_DIMENSIONS: usize = 16;
/// Default size (in characters) of a streamed tool-argument fragment.
const DEFAULT_FRAGMENT_CHARS: usize = 4;
/// Default number of requests [`ScriptedModel::requests`] keeps (the
/// latest ones). Tests assert on the first few model calls of a few
/// requests, far fewer than this; a model serving a long-running agent
/// holds at most this many (each one shares its conversation and tools
/// with the agent, so an entry is small), where an unbounded log grew
/// without end (gigabytes in a benchmark of a few million requests).
pub const DEFAULT_REQUEST_LOG: usize = 256;

/// One model turn of a [`Script`].
#[derive(Clone, Debug)]
enum Turn {
    /// The model calls tools (and may say something first).
    Calls {
        text: String,
        calls: Vec<ToolCall>,
        usage: Option<Usage>,
    },
    /// The model answers; the script ends.
    Answer {
        text: String,
        finish_reason: FinishReason,
        usage: Option<Usage>,
    },
    /// The call fails with this error; the script ends.
    Fail(LlmError),
    /// The model never answers: a stream delivers nothing until its idle
    /// timeout, a generate call nothing until its request timeout.
    Stall,
}

impl Turn {
    fn is_terminal(&self) -> bool {
        !matches!(self, Turn::Calls { .. })
    }
}

/// What a scripted model answers to one user question: the question, then
/// the model's turns in order (tool calls, then a final answer or a
/// failure).
///
/// Tool calls get ids `tc_1`, `tc_2`, … in script order unless given one.
/// A script is checked when it is added to a [`ScriptedModel`]: the
/// question must not be empty, tool arguments must be JSON objects, and
/// the script must end with [`answer`](Script::answer),
/// [`fail`](Script::fail) or [`stall`](Script::stall), with nothing after.
///
/// # Examples
///
/// ```
/// use jido::ai::client::Script;
/// use serde_json::json;
///
/// let script = Script::user("What is 6 times 7?")
///     .call("multiply", json!({"a": 6, "b": 7}))
///     .answer("6 times 7 is 42.");
/// assert_eq!(script.question(), "What is 6 times 7?");
/// ```
#[derive(Clone, Debug)]
pub struct Script {
    user: String,
    turns: Vec<Turn>,
    next_call: usize,
}

impl Script {
    /// A script answering the user question `prompt` (matched exactly
    /// against the conversation's latest user message).
    pub fn user(prompt: impl Into<String>) -> Self {
        Script {
            user: prompt.into(),
            turns: Vec::new(),
            next_call: 0,
        }
    }

    /// The user question this script answers.
    pub fn question(&self) -> &str {
        &self.user
    }

    fn next_id(&mut self) -> String {
        self.next_call += 1;
        format!("tc_{}", self.next_call)
    }

    /// A turn where the model calls one tool with `arguments` (id `tc_N`).
    pub fn call(self, name: impl Into<String>, arguments: Value) -> Self {
        self.calls([(name.into(), arguments)])
    }

    /// A turn where the model calls several tools at once (parallel tool
    /// calls), ids `tc_N`, `tc_N+1`, … in order.
    pub fn calls<N: Into<String>>(mut self, calls: impl IntoIterator<Item = (N, Value)>) -> Self {
        let calls = calls
            .into_iter()
            .map(|(name, arguments)| ToolCall {
                id: self.next_id(),
                name: name.into(),
                arguments: arguments.into(),
            })
            .collect();
        self.turns.push(Turn::Calls {
            text: String::new(),
            calls,
            usage: None,
        });
        self
    }

    /// A turn where the model makes exactly these calls (ids as given) and
    /// says `text` beside them.
    pub fn tool_calls(mut self, text: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        self.turns.push(Turn::Calls {
            text: text.into(),
            calls,
            usage: None,
        });
        self
    }

    /// The final answer (finish reason `stop`).
    pub fn answer(self, text: impl Into<String>) -> Self {
        self.answer_with(text, FinishReason::Stop)
    }

    /// The final answer with a chosen finish reason (e.g.
    /// [`FinishReason::Length`] to test the incomplete-answer guard).
    pub fn answer_with(mut self, text: impl Into<String>, finish_reason: FinishReason) -> Self {
        self.turns.push(Turn::Answer {
            text: text.into(),
            finish_reason,
            usage: None,
        });
        self
    }

    /// The call fails with `error` (e.g. a retryable 429).
    pub fn fail(mut self, error: LlmError) -> Self {
        self.turns.push(Turn::Fail(error));
        self
    }

    /// The model never answers: a stream stays silent and fails with
    /// [`LlmErrorKind::StreamIdle`] after the request's
    /// `stream_idle_timeout`; a generate call fails with
    /// [`LlmErrorKind::Timeout`] after the request's `timeout`. Without
    /// the timeout it waits until dropped.
    pub fn stall(mut self) -> Self {
        self.turns.push(Turn::Stall);
        self
    }

    /// Token counts reported with the last turn added (tool calls or
    /// answer; ignored after `fail` and `stall`).
    pub fn usage(mut self, usage: Usage) -> Self {
        if let Some(Turn::Calls { usage: u, .. } | Turn::Answer { usage: u, .. }) =
            self.turns.last_mut()
        {
            *u = Some(usage);
        }
        self
    }

    fn check(&self) -> Result<(), LlmError> {
        let fail = |message: String| {
            Err(LlmError::new(LlmErrorKind::Script, message)
                .with_details(json!({"user": self.user})))
        };
        if self.user.is_empty() {
            return fail("script needs a non-empty user question".into());
        }
        let Some(last) = self.turns.last() else {
            return fail(format!("script for {:?} has no model turn", self.user));
        };
        for (i, turn) in self.turns.iter().enumerate() {
            if turn.is_terminal() && i + 1 != self.turns.len() {
                return fail(format!(
                    "script for {:?} has turns after answer, fail or stall",
                    self.user
                ));
            }
            if let Turn::Calls { calls, .. } = turn {
                if calls.is_empty() {
                    return fail(format!(
                        "script for {:?} has a turn without calls",
                        self.user
                    ));
                }
                for call in calls {
                    if call.name.is_empty() {
                        return fail(format!(
                            "script for {:?} calls a tool with no name",
                            self.user
                        ));
                    }
                    if !call.arguments.is_object() {
                        return fail(format!(
                            "script for {:?}: arguments of {} must be a json object",
                            self.user, call.name
                        ));
                    }
                }
            }
        }
        if !last.is_terminal() {
            return fail(format!(
                "script for {:?} must end with answer, fail or stall",
                self.user
            ));
        }
        Ok(())
    }
}

/// A deterministic model that plays [`Script`]s: user question → tool
/// calls → final answer or failure. Use it to test agents without a real
/// LLM, or to run them offline.
///
/// A request is answered by the script whose question equals the latest
/// user message of the conversation. The turn played is the number of
/// assistant messages with tool calls after that user message, so a
/// ReAct loop that sends back each tool call and its result walks through
/// the script. The model keeps no state between calls (the same
/// conversation always gets the same answer), except the log of the latest
/// requests it received ([`requests`](ScriptedModel::requests), at most
/// [`DEFAULT_REQUEST_LOG`] unless [`request_log`](ScriptedModel::request_log)
/// says otherwise).
///
/// Errors ([`LlmErrorKind::Script`], not retryable):
/// * no script for the latest user question: `scripted model has no script
///   for user "…"` (details: `expected_users`, `actual_user`);
/// * the conversation is past the script's end: `script for "…" has no
///   turn at index N` (details: `user`, `index`).
///
/// [`stream`](LlmClient::stream) plays the same turn as
/// [`generate`](LlmClient::generate), as events: the answer split into
/// word-sized [`LlmEvent::Content`] deltas, tool calls as
/// [`LlmEvent::ToolCallDelta`] fragments (id and name on the first, the
/// arguments' JSON text in small pieces), then [`LlmEvent::Done`].
/// [`embed`](LlmClient::embed) answers deterministic unit vectors built by
/// hashing the words of each text, so texts sharing words are close.
///
/// # Examples
///
/// ```
/// use jido::ai::client::{LlmClient, LlmRequest, Message, Script, ScriptedModel};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), jido::ai::LlmError> {
/// let model = ScriptedModel::new([Script::user("What is 6 times 7?")
///     .call("multiply", json!({"a": 6, "b": 7}))
///     .answer("42")])?;
///
/// // First turn: the model asks for the tool.
/// let mut messages = vec![Message::user("What is 6 times 7?")];
/// let first = model.generate(LlmRequest::new("any", messages.clone())).await?;
/// assert_eq!(first.tool_calls[0].id, "tc_1");
/// assert_eq!(*first.tool_calls[0].arguments, json!({"a": 6, "b": 7}));
///
/// // Send back the call and its result: the model answers.
/// messages.push(Message::assistant_tool_calls("", first.tool_calls.clone()));
/// messages.push(Message::tool_result("tc_1", "multiply", "42"));
/// let second = model.generate(LlmRequest::new("any", messages.clone())).await?;
/// assert_eq!(second.text, "42");
///
/// // Going on past the script's end is an error.
/// messages.push(Message::assistant_tool_calls("", first.tool_calls));
/// let err = model.generate(LlmRequest::new("any", messages)).await.unwrap_err();
/// assert_eq!(err.message, r#"script for "What is 6 times 7?" has no turn at index 2"#);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ScriptedModel {
    scripts: Arc<BTreeMap<String, Script>>,
    requests: Arc<Mutex<RequestLog>>,
    dimensions: usize,
    fragment_chars: usize,
}

impl ScriptedModel {
    /// A model playing `scripts` (one per user question).
    ///
    /// # Errors
    ///
    /// [`LlmErrorKind::Script`] when a script is malformed (see
    /// [`Script`]) or two scripts answer the same question.
    pub fn new(scripts: impl IntoIterator<Item = Script>) -> Result<Self, LlmError> {
        let mut map = BTreeMap::new();
        for script in scripts {
            script.check()?;
            if map.contains_key(&script.user) {
                return Err(LlmError::new(
                    LlmErrorKind::Script,
                    format!("two scripts for user {:?}", script.user),
                ));
            }
            map.insert(script.user.clone(), script);
        }
        Ok(ScriptedModel {
            scripts: Arc::new(map),
            requests: Arc::new(Mutex::new(RequestLog {
                entries: VecDeque::new(),
                keep: DEFAULT_REQUEST_LOG,
            })),
            dimensions: DEFAULT_DIMENSIONS,
            fragment_chars: DEFAULT_FRAGMENT_CHARS,
        })
    }

    /// Length of the embedding vectors when a request asks for none
    /// (default 16; at least 1).
    pub fn with_embedding_dimensions(mut self, dimensions: usize) -> Self {
        self.dimensions = dimensions.max(1);
        self
    }

    /// Size in characters of streamed tool-argument fragments (default 4;
    /// at least 1).
    pub fn with_fragment_chars(mut self, chars: usize) -> Self {
        self.fragment_chars = chars.max(1);
        self
    }

    /// Keep the latest `n` chat requests in the log that
    /// [`requests`](ScriptedModel::requests) reads (default
    /// [`DEFAULT_REQUEST_LOG`]); `0` keeps none. Requests already logged
    /// beyond the new bound are dropped, oldest first. Clones share the log,
    /// so they share its bound too.
    ///
    /// # Examples
    ///
    /// ```
    /// use jido::ai::client::{LlmClient, LlmRequest, Message, Script, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), jido::ai::LlmError> {
    /// let model = ScriptedModel::new([Script::user("hi").answer("hello")])?.request_log(1);
    /// model.generate(LlmRequest::new("first", vec![Message::user("hi")])).await?;
    /// model.generate(LlmRequest::new("second", vec![Message::user("hi")])).await?;
    /// let log = model.requests();
    /// assert_eq!(log.len(), 1);
    /// assert_eq!(log[0].model, "second");
    /// # Ok(()) }
    /// ```
    pub fn request_log(self, n: usize) -> Self {
        {
            let mut log = self.log();
            log.keep = n;
            let excess = log.entries.len().saturating_sub(n);
            log.entries.drain(..excess);
        }
        self
    }

    /// The latest chat requests received (generate and stream), oldest
    /// first: assert on what your agent sent. The log is bounded: it keeps
    /// the last [`DEFAULT_REQUEST_LOG`] requests, or as many as
    /// [`request_log`](ScriptedModel::request_log) set (none with `0`), so a
    /// model serving a long-running agent does not grow without end. Clones
    /// share the log.
    pub fn requests(&self) -> Vec<LlmRequest> {
        self.log().entries.iter().cloned().collect()
    }

    fn log(&self) -> std::sync::MutexGuard<'_, RequestLog> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The turn the script plays for this conversation, or the script error.
    fn turn(&self, req: &LlmRequest) -> Result<Turn, LlmError> {
        self.log().record(req);
        let latest_user = req.messages.iter().rposition(|m| m.role == Role::User);
        let user = latest_user.map_or("", |i| req.messages[i].content.as_str());
        let Some(script) = self.scripts.get(user) else {
            let expected: Vec<&str> = self.scripts.keys().map(String::as_str).collect();
            return Err(LlmError::new(
                LlmErrorKind::Script,
                format!("scripted model has no script for user {user:?}"),
            )
            .with_details(json!({"expected_users": expected, "actual_user": user})));
        };
        let since = latest_user.map_or(0, |i| i + 1);
        let index = req
            .messages
            .iter()
            .skip(since)
            .filter(|m: &&Message| m.role == Role::Assistant && !m.tool_calls.is_empty())
            .count();
        script.turns.get(index).cloned().ok_or_else(|| {
            LlmError::new(
                LlmErrorKind::Script,
                format!("script for {user:?} has no turn at index {index}"),
            )
            .with_details(json!({"user": user, "index": index}))
        })
    }

    fn model_name(req_model: &str) -> String {
        if req_model.is_empty() {
            MODEL_NAME.to_string()
        } else {
            req_model.to_string()
        }
    }

    fn response(model: String, turn: Turn) -> Result<LlmResponse, LlmError> {
        match turn {
            Turn::Calls { text, calls, usage } => Ok(LlmResponse {
                model,
                text,
                thinking: None,
                tool_calls: calls,
                finish_reason: FinishReason::ToolCalls,
                usage,
            }),
            Turn::Answer {
                text,
                finish_reason,
                usage,
            } => Ok(LlmResponse {
                model,
                text,
                thinking: None,
                tool_calls: Vec::new(),
                finish_reason,
                usage,
            }),
            Turn::Fail(err) => Err(err),
            // Handled by the callers (it waits).
            Turn::Stall => Err(LlmError::new(LlmErrorKind::Other, "scripted stall")),
        }
    }

    /// The events streaming `response`: content deltas, tool-call
    /// fragments, then `Done`.
    fn events(&self, response: LlmResponse) -> Vec<LlmEvent> {
        let mut events: Vec<LlmEvent> = response
            .text
            .split_inclusive(' ')
            .map(|piece| LlmEvent::Content(piece.to_string()))
            .collect();
        for (index, call) in response.tool_calls.iter().enumerate() {
            let args = call.arguments.to_string();
            let chars: Vec<char> = args.chars().collect();
            let mut pieces = chars.chunks(self.fragment_chars);
            let first: String = pieces
                .next()
                .map(|c| c.iter().collect())
                .unwrap_or_default();
            events.push(LlmEvent::ToolCallDelta {
                index,
                id: Some(call.id.clone()),
                name: Some(call.name.clone()),
                arguments: first,
            });
            events.extend(pieces.map(|piece| LlmEvent::ToolCallDelta {
                index,
                id: None,
                name: None,
                arguments: piece.iter().collect(),
            }));
        }
        events.push(LlmEvent::Done(response));
        events
    }
}

/// The latest requests a [`ScriptedModel`] received: a ring of at most
/// `keep` entries.
#[derive(Debug)]
struct RequestLog {
    entries: VecDeque<LlmRequest>,
    keep: usize,
}

impl RequestLog {
    /// Logs `req`, dropping the oldest entry when the log is full (nothing is
    /// copied when it keeps none).
    fn record(&mut self, req: &LlmRequest) {
        if self.keep == 0 {
            return;
        }
        if self.entries.len() >= self.keep {
            self.entries.pop_front();
        }
        self.entries.push_back(req.clone());
    }
}

async fn stall(after: Option<Duration>, error: LlmError) -> LlmError {
    match after {
        Some(after) => tokio::time::sleep(after).await,
        None => futures::future::pending::<()>().await,
    }
    error
}

impl LlmClient for ScriptedModel {
    fn generate(&self, req: LlmRequest) -> BoxFuture<'static, Result<LlmResponse, LlmError>> {
        let turn = self.turn(&req);
        let model = Self::model_name(&req.model);
        async move {
            match turn? {
                Turn::Stall => {
                    let err = LlmError::new(LlmErrorKind::Timeout, "request timed out");
                    Err(stall(req.timeout, err).await)
                }
                turn => Self::response(model, turn),
            }
        }
        .boxed()
    }

    fn stream(&self, req: LlmRequest) -> BoxFuture<'static, Result<LlmEventStream, LlmError>> {
        let result = self.turn(&req).and_then(|turn| {
            let stream: LlmEventStream = match turn {
                Turn::Stall => {
                    let err = LlmError::new(LlmErrorKind::StreamIdle, "stream went idle");
                    stream::once(stall(req.stream_idle_timeout, err))
                        .map(Err)
                        .boxed()
                }
                turn => {
                    let response = Self::response(Self::model_name(&req.model), turn)?;
                    stream::iter(self.events(response).into_iter().map(Ok)).boxed()
                }
            };
            Ok(stream)
        });
        futures::future::ready(result).boxed()
    }

    fn embed(&self, req: EmbedRequest) -> BoxFuture<'static, Result<EmbedResponse, LlmError>> {
        let dimensions = req
            .dimensions
            .map_or(self.dimensions, |d| usize::try_from(d).unwrap_or(1).max(1));
        let embeddings = req
            .texts
            .iter()
            .map(|t| embed_text(t, dimensions))
            .collect();
        let tokens: u64 = req
            .texts
            .iter()
            .map(|t| t.split_whitespace().count() as u64)
            .sum();
        let response = EmbedResponse {
            model: Self::model_name(&req.model),
            embeddings,
            usage: Some(Usage {
                input_tokens: tokens,
                output_tokens: 0,
                total_tokens: tokens,
            }),
        };
        futures::future::ready(Ok(response)).boxed()
    }
}

/// FNV-1a, 64 bits: stable across runs and platforms.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A unit vector from the text's lowercase words (feature hashing with a
/// sign bit); the zero vector for a text without words.
fn embed_text(text: &str, dimensions: usize) -> Vec<f32> {
    let mut v = vec![0f32; dimensions];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let h = fnv1a(word.to_lowercase().as_bytes());
        let slot = (h % dimensions as u64) as usize;
        let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
        v[slot] += sign;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt;

    fn model() -> ScriptedModel {
        ScriptedModel::new([
            Script::user("six times seven?")
                .call("multiply", json!({"a": 6, "b": 7}))
                .answer("it is 42"),
            Script::user("both?")
                .calls([("add", json!({"a": 1})), ("sub", json!({"b": 2}))])
                .fail(LlmError::new(LlmErrorKind::Status(429), "slow down")),
        ])
        .unwrap()
    }

    fn req(messages: Vec<Message>) -> LlmRequest {
        LlmRequest::new("", messages)
    }

    #[tokio::test]
    async fn walks_the_script_by_tool_turns() {
        let m = model();
        let q = Message::user("six times seven?");
        let first = m.generate(req(vec![q.clone()])).await.unwrap();
        assert_eq!(first.finish_reason, FinishReason::ToolCalls);
        assert_eq!(first.model, "scripted");
        assert_eq!(
            first.tool_calls,
            vec![ToolCall {
                id: "tc_1".into(),
                name: "multiply".into(),
                arguments: json!({"a": 6, "b": 7}).into()
            }]
        );
        let history = vec![
            q,
            Message::assistant_tool_calls("", first.tool_calls),
            Message::tool_result("tc_1", "multiply", "42"),
        ];
        let second = m.generate(req(history)).await.unwrap();
        assert_eq!(second.text, "it is 42");
        assert_eq!(second.finish_reason, FinishReason::Stop);
        assert!(second.tool_calls.is_empty());
        assert_eq!(m.requests().len(), 2);
    }

    #[tokio::test]
    async fn parallel_calls_get_consecutive_ids_and_fail_ends() {
        let m = model();
        let first = m.generate(req(vec![Message::user("both?")])).await.unwrap();
        let ids: Vec<&str> = first.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["tc_1", "tc_2"]);
        let history = vec![
            Message::user("both?"),
            Message::assistant_tool_calls("", first.tool_calls.clone()),
            Message::tool_result("tc_1", "add", "1"),
            Message::tool_result("tc_2", "sub", "2"),
        ];
        let err = m.generate(req(history)).await.unwrap_err();
        assert_eq!(err.kind, LlmErrorKind::Status(429));
        assert!(err.retryable);
    }

    #[tokio::test]
    async fn turn_index_counts_only_since_the_latest_question() {
        let m = model();
        // An earlier exchange with tool calls does not shift the new script.
        let history = vec![
            Message::user("both?"),
            Message::assistant_tool_calls(
                "",
                vec![ToolCall {
                    id: "x".into(),
                    name: "add".into(),
                    arguments: json!({}).into(),
                }],
            ),
            Message::tool_result("x", "add", "1"),
            Message::assistant("done"),
            Message::user("six times seven?"),
        ];
        let r = m.generate(req(history)).await.unwrap();
        assert_eq!(r.tool_calls[0].name, "multiply");
    }

    #[tokio::test]
    async fn mismatch_is_a_script_error_naming_both_users() {
        let m = model();
        let err = m
            .generate(req(vec![Message::system("s"), Message::user("hello")]))
            .await
            .unwrap_err();
        assert_eq!(err.kind, LlmErrorKind::Script);
        assert!(!err.retryable);
        assert_eq!(
            err.message,
            r#"scripted model has no script for user "hello""#
        );
        assert_eq!(err.details["actual_user"], "hello");
        assert_eq!(
            err.details["expected_users"],
            json!(["both?", "six times seven?"])
        );
        let err = m.stream(req(vec![])).await.err().unwrap();
        assert_eq!(err.message, r#"scripted model has no script for user """#);
    }

    #[tokio::test]
    async fn stream_splits_answer_and_arguments() {
        let m = model().with_fragment_chars(5);
        let events: Vec<LlmEvent> = m
            .stream(req(vec![Message::user("six times seven?")]))
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let args = json!({"a": 6, "b": 7}).to_string(); // {"a":6,"b":7}
        assert_eq!(args.len(), 13);
        assert_eq!(
            events[..3],
            [
                LlmEvent::ToolCallDelta {
                    index: 0,
                    id: Some("tc_1".into()),
                    name: Some("multiply".into()),
                    arguments: "{\"a\":".into()
                },
                LlmEvent::ToolCallDelta {
                    index: 0,
                    id: None,
                    name: None,
                    arguments: "6,\"b\"".into()
                },
                LlmEvent::ToolCallDelta {
                    index: 0,
                    id: None,
                    name: None,
                    arguments: ":7}".into()
                },
            ]
        );
        assert!(matches!(&events[3], LlmEvent::Done(r) if r.tool_calls.len() == 1));
        assert_eq!(events.len(), 4);

        let history = vec![
            Message::user("six times seven?"),
            Message::assistant_tool_calls(
                "",
                vec![ToolCall {
                    id: "tc_1".into(),
                    name: "multiply".into(),
                    arguments: json!({"a": 6, "b": 7}).into(),
                }],
            ),
            Message::tool_result("tc_1", "multiply", "42"),
        ];
        let events: Vec<LlmEvent> = m
            .stream(req(history))
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(
            events[..3],
            [
                LlmEvent::Content("it ".into()),
                LlmEvent::Content("is ".into()),
                LlmEvent::Content("42".into())
            ]
        );
        assert!(matches!(&events[3], LlmEvent::Done(r) if r.text == "it is 42"));
    }

    #[tokio::test]
    async fn the_request_log_keeps_exactly_the_last_n_in_order() {
        let asks = |m: &ScriptedModel| -> Vec<String> {
            m.requests().into_iter().map(|r| r.model).collect()
        };
        let send = |m: &ScriptedModel, i: usize| {
            let r = LlmRequest::new(format!("m{i}"), vec![Message::user("six times seven?")]);
            m.generate(r)
        };
        let m = model().request_log(3);
        for i in 0..2 {
            send(&m, i).await.unwrap();
        }
        assert_eq!(asks(&m), ["m0", "m1"]);
        for i in 2..7 {
            send(&m, i).await.unwrap();
        }
        assert_eq!(asks(&m), ["m4", "m5", "m6"]);
        // Streams and failed requests are logged too; clones share the log.
        let clone = m.clone();
        let stream = clone
            .stream(LlmRequest::new(
                "s7",
                vec![Message::user("six times seven?")],
            ))
            .await
            .unwrap();
        drop(stream);
        clone
            .generate(LlmRequest::new("e8", vec![Message::user("nobody")]))
            .await
            .unwrap_err();
        assert_eq!(asks(&m), ["m6", "s7", "e8"]);
        // Shrinking drops the oldest; 0 keeps none.
        let m = m.request_log(2);
        assert_eq!(asks(&m), ["s7", "e8"]);
        let m = m.request_log(0);
        send(&m, 9).await.unwrap();
        assert!(m.requests().is_empty());
    }

    #[tokio::test]
    async fn the_request_log_is_bounded_by_default() {
        let m = model();
        for i in 0..DEFAULT_REQUEST_LOG + 5 {
            let r = LlmRequest::new(format!("m{i}"), vec![Message::user("six times seven?")]);
            m.generate(r).await.unwrap();
        }
        let log = m.requests();
        assert_eq!(log.len(), DEFAULT_REQUEST_LOG);
        assert_eq!(log[0].model, "m5");
        assert_eq!(
            log[DEFAULT_REQUEST_LOG - 1].model,
            format!("m{}", DEFAULT_REQUEST_LOG + 4)
        );
    }

    #[test]
    fn malformed_scripts_are_rejected() {
        let msg = |s: Script| ScriptedModel::new([s]).unwrap_err().message;
        assert_eq!(
            msg(Script::user("q").call("t", json!({}))),
            r#"script for "q" must end with answer, fail or stall"#
        );
        assert_eq!(
            msg(Script::user("q")),
            r#"script for "q" has no model turn"#
        );
        assert_eq!(
            msg(Script::user("").answer("a")),
            "script needs a non-empty user question"
        );
        assert_eq!(
            msg(Script::user("q").answer("a").call("t", json!({}))),
            r#"script for "q" has turns after answer, fail or stall"#
        );
        assert_eq!(
            msg(Script::user("q").call("t", json!([1])).answer("a")),
            r#"script for "q": arguments of t must be a json object"#
        );
        let err =
            ScriptedModel::new([Script::user("q").answer("a"), Script::user("q").answer("b")])
                .unwrap_err();
        assert_eq!(err.message, r#"two scripts for user "q""#);
    }

    #[tokio::test]
    async fn embeddings_are_deterministic_unit_vectors() {
        let m = model().with_embedding_dimensions(8);
        let r = m
            .embed(EmbedRequest {
                model: String::new(),
                texts: vec!["the cat sat".into(), "The CAT sat".into(), "".into()],
                dimensions: None,
                timeout: None,
            })
            .await
            .unwrap();
        assert_eq!(r.embeddings.len(), 3);
        assert!(r.embeddings.iter().all(|v| v.len() == 8));
        assert_eq!(r.embeddings[0], r.embeddings[1]);
        let norm: f32 = r.embeddings[0].iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-5);
        assert!(r.embeddings[2].iter().all(|x| *x == 0.0));
        assert_eq!(r.usage.unwrap().input_tokens, 6);
        let r = m
            .embed(EmbedRequest {
                model: "e".into(),
                texts: vec!["x".into()],
                dimensions: Some(3),
                timeout: None,
            })
            .await
            .unwrap();
        assert_eq!(r.embeddings[0].len(), 3);
        assert_eq!(r.model, "e");
    }

    #[tokio::test(start_paused = true)]
    async fn stall_fails_after_the_idle_timeout() {
        let m = ScriptedModel::new([Script::user("q").stall()]).unwrap();
        let mut r = req(vec![Message::user("q")]);
        r.stream_idle_timeout = Some(Duration::from_secs(7));
        r.timeout = Some(Duration::from_secs(3));
        let start = tokio::time::Instant::now();
        let mut s = m.stream(r.clone()).await.unwrap();
        let err = s.next().await.unwrap().unwrap_err();
        assert_eq!(err.kind, LlmErrorKind::StreamIdle);
        assert_eq!(start.elapsed(), Duration::from_secs(7));
        let err = m.generate(r).await.unwrap_err();
        assert_eq!(err.kind, LlmErrorKind::Timeout);
        assert_eq!(start.elapsed(), Duration::from_secs(10));
    }
}
