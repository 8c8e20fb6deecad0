//! The signals the AI directives send back to their agent: types, sources,
//! typed payloads and correlation metadata.
//!
//! | directive | signals, in order |
//! |---|---|
//! | `LlmStream` | 0..n `ai.llm.delta`, then `ai.usage` (only when tokens were counted), then one `ai.llm.response` |
//! | `LlmGenerate` | `ai.usage` (same rule), then one `ai.llm.response` |
//! | `LlmEmbed` | one `ai.embed.result` |
//! | `ToolExec` | `ai.tool.started`, then one `ai.tool.result` |
//! | `EmitToolError` | one `ai.tool.result` (an error) |
//! | `EmitRequestError` | one `ai.request.error` |
//!
//! Each payload is a struct here implementing [`TypedSignal`], so a route
//! or strategy reads it back with [`TypedSignal::decode`]. Its `metadata`
//! is a [`SignalMetadata`]: the correlation ids, shared by the signals of
//! one call, its JSON map built only when read:
//!
//! ```
//! use jido::ai::signals::{Correlation, ToolResultData};
//! use jido::ai::envelope::ResultEnvelope;
//! use jido::signal::TypedSignal;
//! use serde_json::json;
//!
//! let data = ToolResultData {
//!     call_id: "tc_1".into(),
//!     tool_name: "multiply".into(),
//!     result: ResultEnvelope::ok(json!({"product": 6})),
//!     metadata: Correlation::new().request_id("req_1").iteration(2).metadata("tool_execute"),
//! };
//! let signal = ToolResultData::new(data.clone())?;
//! assert_eq!(signal.ty(), "ai.tool.result");
//! assert_eq!(signal.source(), "/ai/tool");
//! assert_eq!(signal.data().unwrap()["metadata"], json!({
//!     "request_id": "req_1", "run_id": "req_1", "iteration": 2,
//!     "origin": "directive", "operation": "tool_execute"
//! }));
//! assert_eq!(ToolResultData::decode(&signal)?, data);
//! assert_eq!(data.metadata.request_id(), Some("req_1"));
//! assert_eq!(data.metadata["operation"], "tool_execute");
//! # Ok::<(), jido::Error>(())
//! ```

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::client::LlmResponse;
use super::envelope::{ErrorEnvelope, ResultEnvelope};
use super::react::machine::Turn;
use crate::signal::TypedSignal;

/// `ai.llm.delta`.
pub const LLM_DELTA: &str = "ai.llm.delta";
/// `ai.llm.response`.
pub const LLM_RESPONSE: &str = "ai.llm.response";
/// `ai.usage`.
pub const USAGE: &str = "ai.usage";
/// `ai.embed.result`.
pub const EMBED_RESULT: &str = "ai.embed.result";
/// `ai.tool.started`.
pub const TOOL_STARTED: &str = "ai.tool.started";
/// `ai.tool.result`.
pub const TOOL_RESULT: &str = "ai.tool.result";
/// `ai.request.error`.
pub const REQUEST_ERROR: &str = "ai.request.error";

/// The most characters of one `ai.llm.delta` text (Jido's 4000).
pub const MAX_DELTA_CHARS: usize = 4000;

/// The correlation ids every AI signal carries in its `metadata`: the
/// caller's request id, the run id (defaults to the request id), the
/// 1-based iteration of a multi-turn strategy, and the strategy's name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Correlation {
    /// The caller's request id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The run id (defaults to the request id in signals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The iteration (a strategy's turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u64>,
    /// The strategy's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
}

impl Correlation {
    /// No ids.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the request id.
    #[must_use]
    pub fn request_id(mut self, id: impl Into<String>) -> Self {
        self.request_id = Some(id.into());
        self
    }

    /// Sets the run id.
    #[must_use]
    pub fn run_id(mut self, id: impl Into<String>) -> Self {
        self.run_id = Some(id.into());
        self
    }

    /// Sets the iteration.
    #[must_use]
    pub fn iteration(mut self, n: u64) -> Self {
        self.iteration = Some(n);
        self
    }

    /// Sets the strategy's name.
    #[must_use]
    pub fn strategy(mut self, name: impl Into<String>) -> Self {
        self.strategy = Some(name.into());
        self
    }

    /// Reads `request_id`, `run_id`, `iteration` (an integer or a numeric
    /// string) and `strategy` from a directive's metadata; other keys are
    /// ignored.
    pub fn from_metadata(metadata: &Map<String, Value>) -> Self {
        let text = |key: &str| match metadata.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            _ => None,
        };
        Correlation {
            request_id: text("request_id"),
            run_id: text("run_id"),
            iteration: metadata.get("iteration").and_then(read_u64),
            strategy: text("strategy"),
        }
    }

    /// This correlation with each id it leaves unset read from a
    /// directive's `metadata` (see [`from_metadata`](Self::from_metadata)).
    #[must_use]
    pub fn or_from_metadata(self, metadata: &Map<String, Value>) -> Self {
        if metadata.is_empty() {
            return self;
        }
        let m = Self::from_metadata(metadata);
        Correlation {
            request_id: self.request_id.or(m.request_id),
            run_id: self.run_id.or(m.run_id),
            iteration: self.iteration.or(m.iteration),
            strategy: self.strategy.or(m.strategy),
        }
    }

    /// A directive's data-form `metadata`: the ids this correlation sets
    /// (`request_id`, `run_id`, `iteration`, `strategy`), then every entry
    /// of `metadata` they do not name.
    pub fn with_metadata(&self, metadata: &Map<String, Value>) -> Map<String, Value> {
        let mut out = Map::with_capacity(4 + metadata.len());
        if let Some(r) = &self.request_id {
            out.insert("request_id".into(), Value::from(r.as_str()));
        }
        if let Some(r) = &self.run_id {
            out.insert("run_id".into(), Value::from(r.as_str()));
        }
        if let Some(i) = self.iteration {
            out.insert("iteration".into(), Value::from(i));
        }
        if let Some(s) = &self.strategy {
            out.insert("strategy".into(), Value::from(s.as_str()));
        }
        for (k, v) in metadata {
            if !out.contains_key(k) {
                out.insert(k.clone(), v.clone());
            }
        }
        out
    }

    /// The `metadata` of a signal: `request_id`, `run_id` (the request id
    /// when unset), `iteration`, `strategy` (each only when known), then
    /// `origin: "directive"` and `operation`; its JSON map is built only
    /// when read (see [`SignalMetadata`]).
    pub fn metadata(&self, operation: &'static str) -> SignalMetadata {
        SignalMetadata::new(self.clone(), operation)
    }
}

/// The `metadata` of an AI signal: `request_id`, `run_id` (the request id
/// when unset), `iteration`, `strategy` (each only when known), then
/// `origin` and `operation`.
///
/// The AI runtime builds one per call from its typed [`Correlation`]
/// (see [`SignalMetadata::new`]) and shares it, an [`Arc`] inside, with
/// every signal of the call: no map is built, hashed or copied per signal.
/// The JSON map is built only when someone asks for it
/// ([`as_map`](Self::as_map), [`get`](Self::get), `Debug`), once. Metadata
/// decoded from JSON (a signal from outside) keeps its map as it came,
/// other keys included. Both forms serialize to the same JSON, and compare
/// equal when their JSON is equal.
///
/// ```
/// use jido::ai::signals::{Correlation, SignalMetadata};
/// use serde_json::json;
///
/// let meta = Correlation::new().request_id("req_1").iteration(2).metadata("tool_execute");
/// assert_eq!(meta.request_id(), Some("req_1"));
/// assert_eq!(meta["run_id"], "req_1");
/// let expected = json!({
///     "request_id": "req_1", "run_id": "req_1", "iteration": 2,
///     "origin": "directive", "operation": "tool_execute"
/// });
/// assert_eq!(serde_json::to_value(&meta)?, expected);
/// // Decoded from JSON: the same metadata.
/// let decoded: SignalMetadata = serde_json::from_value(expected)?;
/// assert_eq!(decoded, meta);
/// assert_eq!(decoded.iteration(), Some(2));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone)]
pub struct SignalMetadata(Arc<MetadataRepr>);

enum MetadataRepr {
    /// Built by the runtime: the JSON map made on demand.
    Typed {
        correlation: Correlation,
        origin: &'static str,
        operation: &'static str,
        map: std::sync::OnceLock<Map<String, Value>>,
    },
    /// Decoded from JSON (or given as a map): kept as it came.
    Json(Map<String, Value>),
}

/// The value of a key a metadata does not hold (see the `Index` impl).
static NULL: Value = Value::Null;

impl SignalMetadata {
    /// The metadata of a signal an AI directive sends: `correlation`'s
    /// ids, `origin: "directive"` and `operation` (`"stream_text"`,
    /// `"generate_text"`, `"embed"`, `"tool_execute"`).
    pub fn new(correlation: Correlation, operation: &'static str) -> Self {
        Self::with_origin(correlation, super::telemetry::ORIGIN_DIRECTIVE, operation)
    }

    /// As [`new`](Self::new), with another origin (see
    /// [`telemetry`](super::telemetry)).
    pub fn with_origin(
        correlation: Correlation,
        origin: &'static str,
        operation: &'static str,
    ) -> Self {
        SignalMetadata(Arc::new(MetadataRepr::Typed {
            correlation,
            origin,
            operation,
            map: std::sync::OnceLock::new(),
        }))
    }

    /// The request id (`request_id`, when a string).
    pub fn request_id(&self) -> Option<&str> {
        match &*self.0 {
            MetadataRepr::Typed { correlation, .. } => correlation.request_id.as_deref(),
            MetadataRepr::Json(m) => m.get("request_id")?.as_str(),
        }
    }

    /// The run id (`run_id`, when a string): the request id unless set
    /// apart.
    pub fn run_id(&self) -> Option<&str> {
        match &*self.0 {
            MetadataRepr::Typed { correlation, .. } => correlation
                .run_id
                .as_deref()
                .or(correlation.request_id.as_deref()),
            MetadataRepr::Json(m) => m.get("run_id")?.as_str(),
        }
    }

    /// The iteration (`iteration`: an integer or a numeric string).
    pub fn iteration(&self) -> Option<u64> {
        match &*self.0 {
            MetadataRepr::Typed { correlation, .. } => correlation.iteration,
            MetadataRepr::Json(m) => m.get("iteration").and_then(read_u64),
        }
    }

    /// The strategy's name (`strategy`, when a string).
    pub fn strategy(&self) -> Option<&str> {
        match &*self.0 {
            MetadataRepr::Typed { correlation, .. } => correlation.strategy.as_deref(),
            MetadataRepr::Json(m) => m.get("strategy")?.as_str(),
        }
    }

    /// Who made the call (`origin`, when a string).
    pub fn origin(&self) -> Option<&str> {
        match &*self.0 {
            MetadataRepr::Typed { origin, .. } => Some(origin),
            MetadataRepr::Json(m) => m.get("origin")?.as_str(),
        }
    }

    /// The operation (`operation`, when a string).
    pub fn operation(&self) -> Option<&str> {
        match &*self.0 {
            MetadataRepr::Typed { operation, .. } => Some(operation),
            MetadataRepr::Json(m) => m.get("operation")?.as_str(),
        }
    }

    /// The correlation ids (as [`Correlation::from_metadata`] reads them
    /// from the JSON form).
    pub fn correlation(&self) -> Correlation {
        match &*self.0 {
            MetadataRepr::Typed { correlation, .. } => correlation.clone(),
            MetadataRepr::Json(m) => Correlation::from_metadata(m),
        }
    }

    /// The value of `key` in the JSON form.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_map().get(key)
    }

    /// Whether the JSON form has no key (never, for a runtime-built one).
    pub fn is_empty(&self) -> bool {
        match &*self.0 {
            MetadataRepr::Typed { .. } => false,
            MetadataRepr::Json(m) => m.is_empty(),
        }
    }

    /// The JSON form, built on the first call.
    pub fn as_map(&self) -> &Map<String, Value> {
        match &*self.0 {
            MetadataRepr::Typed {
                correlation,
                origin,
                operation,
                map,
            } => map.get_or_init(|| build_metadata(correlation, origin, operation)),
            MetadataRepr::Json(m) => m,
        }
    }

    /// A copy of the JSON form.
    pub fn to_map(&self) -> Map<String, Value> {
        self.as_map().clone()
    }

    /// The JSON form, moved out when this is its only holder.
    pub fn into_map(self) -> Map<String, Value> {
        match Arc::try_unwrap(self.0) {
            Ok(MetadataRepr::Json(m)) => m,
            Ok(MetadataRepr::Typed {
                correlation,
                origin,
                operation,
                map,
            }) => map
                .into_inner()
                .unwrap_or_else(|| build_metadata(&correlation, origin, operation)),
            Err(shared) => SignalMetadata(shared).to_map(),
        }
    }
}

/// The JSON form of a typed metadata (see [`SignalMetadata`]).
fn build_metadata(correlation: &Correlation, origin: &str, operation: &str) -> Map<String, Value> {
    // Sized once: six entries at most (a map grown entry by entry
    // rehashes twice on the way).
    let mut out = Map::with_capacity(6);
    if let Some(r) = &correlation.request_id {
        out.insert("request_id".into(), Value::from(r.as_str()));
    }
    if let Some(r) = correlation
        .run_id
        .as_ref()
        .or(correlation.request_id.as_ref())
    {
        out.insert("run_id".into(), Value::from(r.as_str()));
    }
    if let Some(i) = correlation.iteration {
        out.insert("iteration".into(), Value::from(i));
    }
    if let Some(s) = &correlation.strategy {
        out.insert("strategy".into(), Value::from(s.as_str()));
    }
    out.insert("origin".into(), Value::from(origin));
    out.insert("operation".into(), Value::from(operation));
    out
}

/// No key: `{}`.
impl Default for SignalMetadata {
    fn default() -> Self {
        static EMPTY: std::sync::LazyLock<Arc<MetadataRepr>> =
            std::sync::LazyLock::new(|| Arc::new(MetadataRepr::Json(Map::new())));
        SignalMetadata(Arc::clone(&EMPTY))
    }
}

/// Equal when the JSON forms are (typed ones compared without building
/// them).
impl PartialEq for SignalMetadata {
    fn eq(&self, other: &Self) -> bool {
        if Arc::ptr_eq(&self.0, &other.0) {
            return true;
        }
        match (&*self.0, &*other.0) {
            (MetadataRepr::Typed { .. }, MetadataRepr::Typed { .. }) => {
                self.request_id() == other.request_id()
                    && self.run_id() == other.run_id()
                    && self.iteration() == other.iteration()
                    && self.strategy() == other.strategy()
                    && self.origin() == other.origin()
                    && self.operation() == other.operation()
            }
            _ => self.as_map() == other.as_map(),
        }
    }
}

impl Eq for SignalMetadata {}

/// The JSON form's `Debug`.
impl std::fmt::Debug for SignalMetadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_map(), f)
    }
}

/// A map kept as given (an empty one shares [`Default`]'s).
impl From<Map<String, Value>> for SignalMetadata {
    fn from(map: Map<String, Value>) -> Self {
        if map.is_empty() {
            return Self::default();
        }
        SignalMetadata(Arc::new(MetadataRepr::Json(map)))
    }
}

/// The JSON form.
impl From<SignalMetadata> for Map<String, Value> {
    fn from(meta: SignalMetadata) -> Self {
        meta.into_map()
    }
}

/// The JSON form.
impl From<SignalMetadata> for Value {
    fn from(meta: SignalMetadata) -> Self {
        Value::Object(meta.into_map())
    }
}

/// The value of `key`, `null` when absent (as indexing a [`Value`]).
impl std::ops::Index<&str> for SignalMetadata {
    type Output = Value;
    fn index(&self, key: &str) -> &Value {
        self.get(key).unwrap_or(&NULL)
    }
}

/// Written as its JSON form (a typed one without building the map).
impl Serialize for SignalMetadata {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match &*self.0 {
            MetadataRepr::Typed {
                correlation,
                origin,
                operation,
                ..
            } => {
                let run_id = correlation
                    .run_id
                    .as_ref()
                    .or(correlation.request_id.as_ref());
                let len = 2
                    + usize::from(correlation.request_id.is_some())
                    + usize::from(run_id.is_some())
                    + usize::from(correlation.iteration.is_some())
                    + usize::from(correlation.strategy.is_some());
                let mut m = s.serialize_map(Some(len))?;
                if let Some(r) = &correlation.request_id {
                    m.serialize_entry("request_id", r)?;
                }
                if let Some(r) = run_id {
                    m.serialize_entry("run_id", r)?;
                }
                if let Some(i) = correlation.iteration {
                    m.serialize_entry("iteration", &i)?;
                }
                if let Some(st) = &correlation.strategy {
                    m.serialize_entry("strategy", st)?;
                }
                m.serialize_entry("origin", origin)?;
                m.serialize_entry("operation", operation)?;
                m.end()
            }
            MetadataRepr::Json(map) => map.serialize(s),
        }
    }
}

/// Read from any JSON object, kept as it came.
impl<'de> Deserialize<'de> for SignalMetadata {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Map::deserialize(d).map(Self::from)
    }
}

pub(crate) fn read_u64(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// What an `ai.llm.delta` carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ChunkType {
    /// Answer text.
    Content,
    /// Reasoning text.
    Thinking,
}

/// Strips control characters (but tab, newline and carriage return) and
/// cuts to [`MAX_DELTA_CHARS`] characters.
///
/// ```
/// assert_eq!(jido::ai::signals::sanitize_delta("a\u{0}b\n"), "ab\n");
/// ```
pub fn sanitize_delta(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r'))
        .take(MAX_DELTA_CHARS)
        .collect()
}

macro_rules! typed {
    ($ty:ident, $const:ident, $source:literal) => {
        impl TypedSignal for $ty {
            const TYPE: &'static str = $const;
            const SOURCE: &'static str = $source;
            type Data = $ty;
        }
    };
}

/// `ai.llm.delta` (source `/ai/llm`): one piece of a streamed answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmDeltaData {
    /// The LLM call id (the directive's `id`).
    pub call_id: String,
    /// The text ([`sanitize_delta`]d).
    pub delta: String,
    /// Answer or reasoning text.
    pub chunk_type: ChunkType,
    /// 1, 2, … within the call: order deltas by it.
    pub seq: u64,
    /// Correlation ([`SignalMetadata`]).
    pub metadata: SignalMetadata,
}
typed!(LlmDeltaData, LLM_DELTA, "/ai/llm");

/// `ai.usage` (source `/ai/usage`): token counts of one call, sent only
/// when some were counted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageData {
    /// The LLM call id.
    pub call_id: String,
    /// The model that answered (the requested one when the provider named
    /// none).
    pub model: String,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Both.
    pub total_tokens: u64,
    /// Time from the start of the task to the answer, in ms.
    pub duration_ms: u64,
    /// Correlation ([`SignalMetadata`]).
    pub metadata: SignalMetadata,
}
typed!(UsageData, USAGE, "/ai/usage");

/// `ai.llm.response` (source `/ai/llm`): the terminal signal of an LLM
/// call.
///
/// On success `result` is `{"status": "ok", "result": <turn>, "effects":
/// []}` where the turn is `{"type": "final_answer" | "tool_calls", "text",
/// "thinking_content" (string or null), "tool_calls": [{id, name,
/// arguments}], "finish_reason", "model", "usage" (object or null)}`; on
/// failure `{"status": "error", "reason": {type, message, details,
/// retryable}, "effects": []}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmResponseData {
    /// The LLM call id.
    pub call_id: String,
    /// The result triple.
    pub result: ResultEnvelope,
    /// The model asked for (after alias resolution; the alias itself when
    /// resolution failed).
    pub model: String,
    /// Time from the start of the task to this signal, in ms.
    pub duration_ms: u64,
    /// Correlation ([`SignalMetadata`]).
    pub metadata: SignalMetadata,
}
typed!(LlmResponseData, LLM_RESPONSE, "/ai/llm");

/// `ai.llm.response` as the AI runtime sends a model's answer in the
/// process: the answer typed. Its JSON (what [`Signal::data`] and the
/// wire see) is exactly [`LlmResponseData`]'s, built only when read
/// ([`into_data`](LlmResultData::into_data) gives that payload); a strategy
/// reads the answer from [`Signal::payload`] without JSON.
///
/// ```
/// use jido::ai::signals::{LlmResponseData, LlmResultData};
/// use jido::ai::LlmResponse;
/// use jido::signal::TypedSignal;
/// use serde_json::json;
///
/// let resp: LlmResponse = serde_json::from_value(json!({
///     "model": "m", "text": "42", "finish_reason": "stop"
/// }))
/// .expect("a response");
/// let data = LlmResultData {
///     call_id: "call_1".into(),
///     result: Ok(resp),
///     model: "m".into(),
///     duration_ms: 3,
///     metadata: Default::default(),
/// };
/// let signal = data.clone().into_signal();
/// assert_eq!(signal.ty(), "ai.llm.response");
/// assert_eq!(signal.payload::<LlmResultData>(), Some(&data));
/// let json = LlmResponseData::decode(&signal)?;
/// assert_eq!(json, data.into_data());
/// assert_eq!(signal.data().unwrap()["result"]["result"]["text"], "42");
/// # Ok::<(), jido::Error>(())
/// ```
///
/// [`Signal::data`]: crate::signal::Signal::data
/// [`Signal::payload`]: crate::signal::Signal::payload
#[derive(Clone, Debug, PartialEq)]
pub struct LlmResultData {
    /// The LLM call id.
    pub call_id: String,
    /// The model's answer, or the error envelope.
    pub result: Result<LlmResponse, ErrorEnvelope>,
    /// The model asked for (after alias resolution).
    pub model: String,
    /// Time from the start of the task to this signal, in ms.
    pub duration_ms: u64,
    /// Correlation ([`SignalMetadata`]).
    pub metadata: SignalMetadata,
}

impl LlmResultData {
    /// The JSON-shaped payload (the answer as the turn object of
    /// [`LlmResponseData`]), its parts moved.
    pub fn into_data(self) -> LlmResponseData {
        LlmResponseData {
            call_id: self.call_id,
            result: match self.result {
                Ok(resp) => ResultEnvelope::ok(turn_payload(resp)),
                Err(reason) => ResultEnvelope::Error {
                    reason,
                    effects: Vec::new(),
                },
            },
            model: self.model,
            duration_ms: self.duration_ms,
            metadata: self.metadata,
        }
    }

    /// The `ai.llm.response` signal (source `/ai/llm`) carrying this
    /// payload typed.
    pub fn into_signal(self) -> crate::signal::Signal {
        crate::signal::Signal::typed_from(
            LLM_RESPONSE,
            <LlmResponseData as TypedSignal>::SOURCE,
            self,
        )
    }
}

/// Written as [`LlmResponseData`].
impl Serialize for LlmResultData {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.clone().into_data().serialize(s)
    }
}

/// The payload of a successful `ai.llm.response` (its parts moved).
pub(crate) fn turn_payload(resp: super::client::LlmResponse) -> Value {
    let tool_calls = resp.finish_reason == super::client::FinishReason::ToolCalls;
    turn_value(
        resp.text,
        resp.thinking,
        resp.tool_calls,
        Some(&resp.finish_reason),
        resp.model,
        resp.usage,
        tool_calls,
    )
}

/// The call id and the turn (or the error) of an `ai.llm.response`
/// strategy command: from the typed payload ([`LlmResultData`] or
/// [`LlmResponseData`]) of the signal being handled, else decoded from
/// `params`.
pub(crate) fn read_llm_response(
    ctx: &crate::strategy::StrategyContext,
    params: Value,
) -> Result<(String, Result<Turn, ErrorEnvelope>), serde_json::Error> {
    if params.is_null()
        && let Some(signal) = ctx.signal()
        && signal.is_type(LLM_RESPONSE)
        && let Some(data) = signal.payload::<LlmResultData>()
    {
        let result = match &data.result {
            Ok(resp) => Ok(Turn::from_response(resp)),
            Err(reason) => Err(reason.clone()),
        };
        return Ok((data.call_id.clone(), result));
    }
    Ok(
        match command_payload(ctx, params, LlmResponseData::from_value)? {
            std::borrow::Cow::Borrowed(data) => (
                data.call_id.clone(),
                match &data.result {
                    ResultEnvelope::Ok { result, .. } => {
                        Turn::from_payload(result).map_err(|e| ErrorEnvelope::from_error(&e))
                    }
                    ResultEnvelope::Error { reason, .. } => Err(reason.clone()),
                },
            ),
            std::borrow::Cow::Owned(data) => (
                data.call_id,
                match data.result {
                    ResultEnvelope::Ok { result, .. } => {
                        Turn::from_value(result).map_err(|e| ErrorEnvelope::from_error(&e))
                    }
                    ResultEnvelope::Error { reason, .. } => Err(reason),
                },
            ),
        },
    )
}

/// `ai.embed.result` (source `/ai/embed`): the terminal signal of an
/// embedding call. On success `result` is `{"status": "ok", "result":
/// {"embeddings": [[…], …], "count": n, "usage": {…} | null}, "effects":
/// []}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedResultData {
    /// The call id (the directive's `id`).
    pub call_id: String,
    /// The result triple.
    pub result: ResultEnvelope,
    /// The model asked for.
    pub model: String,
    /// Time from the start of the task to this signal, in ms.
    pub duration_ms: u64,
    /// Correlation ([`SignalMetadata`]).
    pub metadata: SignalMetadata,
}
typed!(EmbedResultData, EMBED_RESULT, "/ai/embed");

/// `ai.tool.started` (source `/ai/tool`): a tool call is about to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolStartedData {
    /// The model's tool-call id.
    pub call_id: String,
    /// The tool.
    pub tool_name: String,
    /// The arguments as given, sanitised (secrets redacted, bounded).
    pub arguments: Value,
    /// Correlation ([`SignalMetadata`]).
    pub metadata: SignalMetadata,
}
typed!(ToolStartedData, TOOL_STARTED, "/ai/tool");

/// `ai.tool.result` (source `/ai/tool`): the terminal signal of a tool
/// call. `result` is `{"status": "ok", "result": <action output>,
/// "effects": [<encoded effect>, …]}` or `{"status": "error", "reason":
/// {…}, "effects": […]}`; the model's message body is
/// [`ResultEnvelope::tool_content`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResultData {
    /// The model's tool-call id.
    pub call_id: String,
    /// The tool.
    pub tool_name: String,
    /// The result triple.
    pub result: ResultEnvelope,
    /// Correlation ([`SignalMetadata`]).
    pub metadata: SignalMetadata,
}
typed!(ToolResultData, TOOL_RESULT, "/ai/tool");

/// `ai.request.error` (source `/ai/strategy`): a request was rejected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestErrorData {
    /// The rejected request.
    pub request_id: String,
    /// Why, as a snake_case word (`busy`, `invalid_tools`, …).
    pub reason: String,
    /// A message for the caller.
    pub message: String,
}
typed!(RequestErrorData, REQUEST_ERROR, "/ai/strategy");

// ------------------------------------------------- payloads without serde

/// A payload turned into JSON by moving its parts (what serde would write,
/// without copying strings and values), and read back the same way.
pub(crate) trait Payload:
    TypedSignal<Data = Self> + Serialize + Sized + Send + Sync + 'static
{
    /// The payload as JSON.
    fn into_value(self) -> Value {
        serde_json::to_value(&self).unwrap_or(Value::Null)
    }
}

impl Payload for LlmDeltaData {}
impl Payload for UsageData {}
impl Payload for EmbedResultData {}
impl Payload for ToolStartedData {}
impl Payload for RequestErrorData {}

impl Payload for LlmResponseData {
    fn into_value(self) -> Value {
        let mut m = Map::with_capacity(5);
        m.insert("call_id".into(), self.call_id.into());
        m.insert("result".into(), self.result.into_value());
        m.insert("model".into(), self.model.into());
        m.insert("duration_ms".into(), self.duration_ms.into());
        m.insert("metadata".into(), self.metadata.into());
        Value::Object(m)
    }
}

impl Payload for ToolResultData {
    fn into_value(self) -> Value {
        let mut m = Map::with_capacity(4);
        m.insert("call_id".into(), self.call_id.into());
        m.insert("tool_name".into(), self.tool_name.into());
        m.insert("result".into(), self.result.into_value());
        m.insert("metadata".into(), self.metadata.into());
        Value::Object(m)
    }
}

/// A signal of `T`'s type and source carrying `data` as its [typed
/// payload](crate::signal::Signal#typed-payloads) (its JSON is built only
/// if someone reads it). The type and source are constants, held valid by
/// a test, so nothing is checked at run time and nothing can fail.
pub(crate) fn signal_of<T: Payload>(data: T) -> crate::signal::Signal {
    crate::signal::Signal::typed_from(T::TYPE, T::SOURCE, data)
}

/// The typed payload of the signal being handled when the strategy
/// command came through a
/// [`RouteTarget::StrategyPayload`](crate::agent::RouteTarget::StrategyPayload)
/// route: params `null`, and the signal of `T`'s type carries a `T`.
pub(crate) fn typed_payload<'a, T: Payload + 'static>(
    ctx: &'a crate::strategy::StrategyContext,
    params: &Value,
) -> Option<&'a T> {
    if !params.is_null() {
        return None;
    }
    let signal = ctx.signal()?;
    if !signal.is_type(T::TYPE) {
        return None;
    }
    signal.payload::<T>()
}

/// The `metadata.request_id` of an `ai.usage` or `ai.tool.started`
/// command: from the typed payload, else from the params' JSON.
pub(crate) fn correlated_request<'a>(
    ctx: &'a crate::strategy::StrategyContext,
    params: &'a Value,
) -> Option<&'a str> {
    let metadata = match (
        typed_payload::<UsageData>(ctx, params),
        typed_payload::<ToolStartedData>(ctx, params),
    ) {
        (Some(u), _) => &u.metadata,
        (_, Some(t)) => &t.metadata,
        _ => return params.get("metadata")?.get("request_id")?.as_str(),
    };
    metadata.request_id()
}

/// The payload of the AI signal a strategy command reports: the typed
/// value (see [`typed_payload`]), else `params` decoded with `decode` (a
/// signal from outside, a command built by hand).
pub(crate) fn command_payload<'a, T: Payload + Clone + 'static>(
    ctx: &'a crate::strategy::StrategyContext,
    params: Value,
    decode: fn(Value) -> Result<T, serde_json::Error>,
) -> Result<std::borrow::Cow<'a, T>, serde_json::Error> {
    match typed_payload::<T>(ctx, &params) {
        Some(data) => Ok(std::borrow::Cow::Borrowed(data)),
        None => decode(params).map(std::borrow::Cow::Owned),
    }
}

macro_rules! into_signal {
    ($($ty:ident),*) => {$(
        impl $ty {
            /// The signal the AI runtime sends with this payload: its
            /// type and source, the payload typed (see
            /// [typed payloads](crate::signal::Signal#typed-payloads));
            /// its JSON is what serde writes.
            pub fn into_signal(self) -> crate::signal::Signal {
                signal_of(self)
            }
        }
    )*};
}
into_signal!(
    LlmDeltaData,
    UsageData,
    LlmResponseData,
    EmbedResultData,
    ToolStartedData,
    ToolResultData,
    RequestErrorData
);

impl LlmResponseData {
    /// Reads an `ai.llm.response` payload by value: the parts are moved,
    /// not copied. Same rules as its `Deserialize` (unknown fields
    /// refused).
    ///
    /// # Errors
    ///
    /// The decoding error of `Deserialize` for a payload of another shape.
    pub fn from_value(value: Value) -> Result<Self, serde_json::Error> {
        let Value::Object(mut m) = value else {
            return Self::deserialize(value);
        };
        let canonical = m.len() == 5
            && m.get("call_id").is_some_and(Value::is_string)
            && m.get("model").is_some_and(Value::is_string)
            && m.get("duration_ms").is_some_and(Value::is_u64)
            && m.get("metadata").is_some_and(Value::is_object)
            && m.get("result").is_some_and(Value::is_object);
        if !canonical {
            return Self::deserialize(Value::Object(m));
        }
        Ok(LlmResponseData {
            call_id: take_string(&mut m, "call_id"),
            result: ResultEnvelope::from_value(m.remove("result").unwrap_or(Value::Null))?,
            model: take_string(&mut m, "model"),
            duration_ms: m.get("duration_ms").and_then(Value::as_u64).unwrap_or(0),
            metadata: match m.remove("metadata") {
                Some(Value::Object(meta)) => meta.into(),
                _ => SignalMetadata::default(),
            },
        })
    }
}

impl ToolResultData {
    /// Reads an `ai.tool.result` payload by value (as
    /// [`LlmResponseData::from_value`]).
    ///
    /// # Errors
    ///
    /// The decoding error of `Deserialize` for a payload of another shape.
    pub fn from_value(value: Value) -> Result<Self, serde_json::Error> {
        let Value::Object(mut m) = value else {
            return Self::deserialize(value);
        };
        let canonical = m.len() == 4
            && m.get("call_id").is_some_and(Value::is_string)
            && m.get("tool_name").is_some_and(Value::is_string)
            && m.get("metadata").is_some_and(Value::is_object)
            && m.get("result").is_some_and(Value::is_object);
        if !canonical {
            return Self::deserialize(Value::Object(m));
        }
        Ok(ToolResultData {
            call_id: take_string(&mut m, "call_id"),
            tool_name: take_string(&mut m, "tool_name"),
            result: ResultEnvelope::from_value(m.remove("result").unwrap_or(Value::Null))?,
            metadata: match m.remove("metadata") {
                Some(Value::Object(meta)) => meta.into(),
                _ => SignalMetadata::default(),
            },
        })
    }
}

fn take_string(m: &mut Map<String, Value>, key: &str) -> String {
    match m.remove(key) {
        Some(Value::String(s)) => s,
        _ => String::new(),
    }
}

/// The payload of a successful `ai.llm.response` (see [`LlmResponseData`]),
/// built by moving the parts: `type` is `"tool_calls"` when there are tool
/// calls (or `tool_calls_finish` says the model stopped for them), else
/// `"final_answer"`.
pub(crate) fn turn_value(
    text: String,
    thinking: Option<String>,
    tool_calls: Vec<super::client::ToolCall>,
    finish_reason: Option<&super::client::FinishReason>,
    model: String,
    usage: Option<super::client::Usage>,
    tool_calls_finish: bool,
) -> Value {
    use super::client::FinishReason;
    let kind = if !tool_calls.is_empty() || tool_calls_finish {
        "tool_calls"
    } else {
        "final_answer"
    };
    let calls: Vec<Value> = tool_calls
        .into_iter()
        .map(|c| {
            let mut m = Map::with_capacity(3);
            m.insert("id".into(), c.id.into());
            m.insert("name".into(), c.name.into());
            m.insert("arguments".into(), Arc::unwrap_or_clone(c.arguments));
            Value::Object(m)
        })
        .collect();
    let finish = finish_reason.map_or(Value::Null, |r| {
        Value::String(match r {
            FinishReason::Stop => "stop".into(),
            FinishReason::ToolCalls => "tool_calls".into(),
            FinishReason::Length => "length".into(),
            FinishReason::ContentFilter => "content_filter".into(),
            FinishReason::Other(s) => s.clone(),
        })
    });
    let mut m = Map::with_capacity(7);
    m.insert("type".into(), kind.into());
    m.insert("text".into(), text.into());
    m.insert(
        "thinking_content".into(),
        thinking.map_or(Value::Null, Value::String),
    );
    m.insert("tool_calls".into(), Value::Array(calls));
    m.insert("finish_reason".into(), finish);
    m.insert("model".into(), model.into());
    m.insert(
        "usage".into(),
        usage.map_or(Value::Null, |u| super::request::usage_json(&u)),
    );
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::Signal;

    /// `signal_of` skips the builder's checks: every AI signal's type and
    /// source must pass them.
    #[test]
    fn every_ai_signal_type_and_source_is_valid() {
        fn check<T: TypedSignal>() {
            let built = Signal::builder(T::TYPE).source(T::SOURCE).build();
            assert!(built.is_ok(), "{} {}: {built:?}", T::TYPE, T::SOURCE);
        }
        check::<LlmDeltaData>();
        check::<UsageData>();
        check::<LlmResponseData>();
        check::<EmbedResultData>();
        check::<ToolStartedData>();
        check::<ToolResultData>();
        check::<RequestErrorData>();
    }

    /// The map `Correlation::metadata` built before `SignalMetadata`
    /// (kept here as the reference).
    fn old_metadata(c: &Correlation, operation: &str) -> Map<String, Value> {
        let mut out = Map::new();
        if let Some(r) = &c.request_id {
            out.insert("request_id".into(), Value::from(r.clone()));
        }
        if let Some(r) = c.run_id.as_ref().or(c.request_id.as_ref()) {
            out.insert("run_id".into(), Value::from(r.clone()));
        }
        if let Some(i) = c.iteration {
            out.insert("iteration".into(), Value::from(i));
        }
        if let Some(s) = &c.strategy {
            out.insert("strategy".into(), Value::from(s.clone()));
        }
        out.insert("origin".into(), Value::from("directive"));
        out.insert("operation".into(), Value::from(operation));
        out
    }

    fn correlations() -> Vec<Correlation> {
        vec![
            Correlation::new(),
            Correlation::new().request_id("r1"),
            Correlation::new().run_id("run_only"),
            Correlation::new().request_id("r1").run_id("run_1"),
            Correlation::new().request_id("r1").iteration(3),
            Correlation::new()
                .request_id("r1")
                .run_id("run_1")
                .iteration(0)
                .strategy("react"),
            Correlation::new().iteration(7).strategy(""),
        ]
    }

    #[test]
    fn signal_metadata_builds_the_old_map_lazily_and_serializes_it_byte_for_byte() {
        for c in correlations() {
            let expected = old_metadata(&c, "stream_text");
            let meta = c.metadata("stream_text");
            // Serialized without the map, then the map built on demand.
            assert_eq!(
                serde_json::to_string(&meta).unwrap(),
                serde_json::to_string(&expected).unwrap()
            );
            assert_eq!(meta.as_map(), &expected);
            // Same keys in the same order.
            assert!(meta.as_map().keys().eq(expected.keys()), "{c:?}");
            assert_eq!(
                serde_json::to_value(&meta).unwrap(),
                Value::Object(expected.clone())
            );
            assert_eq!(meta.clone().into_map(), expected);
            assert_eq!(Map::from(c.metadata("stream_text")), expected);
            assert_eq!(format!("{meta:?}"), format!("{expected:?}"));
            // Readers.
            assert_eq!(meta.request_id(), c.request_id.as_deref());
            assert_eq!(
                meta.run_id(),
                c.run_id.as_deref().or(c.request_id.as_deref())
            );
            assert_eq!(meta.iteration(), c.iteration);
            assert_eq!(meta.strategy(), c.strategy.as_deref());
            assert_eq!(meta.origin(), Some("directive"));
            assert_eq!(meta.operation(), Some("stream_text"));
            assert_eq!(meta["operation"], "stream_text");
            assert_eq!(meta["absent"], Value::Null);
            assert_eq!(meta.get("absent"), None);
            assert!(!meta.is_empty());
        }
    }

    #[test]
    fn signal_metadata_round_trips_through_json_and_equals_the_decoded_form() {
        for c in correlations() {
            let meta = c.metadata("tool_execute");
            let text = serde_json::to_string(&meta).unwrap();
            let decoded: SignalMetadata = serde_json::from_str(&text).unwrap();
            assert_eq!(decoded, meta);
            assert_eq!(meta, decoded);
            assert_eq!(serde_json::to_string(&decoded).unwrap(), text);
            assert_eq!(decoded.request_id(), meta.request_id());
            assert_eq!(decoded.run_id(), meta.run_id());
            assert_eq!(decoded.iteration(), meta.iteration());
            assert_eq!(decoded.strategy(), meta.strategy());
            assert_eq!(decoded.origin(), meta.origin());
            assert_eq!(decoded.operation(), meta.operation());
            assert_eq!(decoded.correlation().request_id, c.request_id);
            assert_eq!(decoded.correlation().iteration, c.iteration);
        }
        // An explicit run id equal to the request id is the same JSON.
        assert_eq!(
            Correlation::new().request_id("r").metadata("embed"),
            Correlation::new()
                .request_id("r")
                .run_id("r")
                .metadata("embed")
        );
        assert_ne!(
            Correlation::new().request_id("r").metadata("embed"),
            Correlation::new().request_id("r").metadata("embed_x")
        );
        assert_ne!(
            Correlation::new().request_id("r").metadata("embed"),
            Correlation::new().request_id("s").metadata("embed")
        );
        assert_ne!(
            Correlation::new().request_id("r").metadata("embed"),
            SignalMetadata::default()
        );
    }

    #[test]
    fn signal_metadata_decoded_from_json_keeps_other_keys_and_their_order() {
        let text = r#"{"trace":"t1","request_id":"r1","iteration":"4","origin":"action","extra":{"a":[1,2]}}"#;
        let meta: SignalMetadata = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&meta).unwrap(), text);
        assert_eq!(meta.request_id(), Some("r1"));
        assert_eq!(meta.run_id(), None);
        assert_eq!(meta.iteration(), Some(4));
        assert_eq!(meta.origin(), Some("action"));
        assert_eq!(meta.operation(), None);
        assert_eq!(meta["extra"]["a"][1], 2);
        assert_eq!(meta["trace"], "t1");
        assert_eq!(meta.as_map().len(), 5);
        // Not the typed form: it has other keys.
        assert_ne!(meta, Correlation::new().request_id("r1").metadata("embed"));
        // Not an object: refused.
        assert!(serde_json::from_str::<SignalMetadata>("[1]").is_err());

        let empty = SignalMetadata::default();
        assert!(empty.is_empty());
        assert_eq!(serde_json::to_string(&empty).unwrap(), "{}");
        assert_eq!(empty, SignalMetadata::from(Map::new()));
        assert_eq!(empty, serde_json::from_str::<SignalMetadata>("{}").unwrap());
        assert_eq!(empty.request_id(), None);
        assert_eq!(format!("{empty:?}"), "{}");
    }

    #[test]
    fn a_payload_with_typed_metadata_equals_its_decoded_json() {
        let data = ToolResultData {
            call_id: "tc_1".into(),
            tool_name: "multiply".into(),
            result: ResultEnvelope::ok(serde_json::json!({"product": 6})),
            metadata: Correlation::new()
                .request_id("req_1")
                .iteration(2)
                .strategy("react")
                .metadata("tool_execute"),
        };
        let value = serde_json::to_value(&data).unwrap();
        assert_eq!(ToolResultData::from_value(value.clone()).unwrap(), data);
        assert_eq!(
            serde_json::from_value::<ToolResultData>(value.clone()).unwrap(),
            data
        );
        assert_eq!(data.clone().into_value(), value);
        let signal = data.clone().into_signal();
        assert_eq!(signal.data(), Some(&value));
        // Copies share the metadata.
        let copy = data.clone();
        assert!(Arc::ptr_eq(&copy.metadata.0, &data.metadata.0));
    }
}
