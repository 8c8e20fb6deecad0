//! The AI directives: side effects a strategy asks the runtime for.
//!
//! Each is a [`CustomDirective`] with a builder and a serde form (for
//! directives that arrive as data), and converts into a [`Directive`].
//! Fields and defaults follow jido_ai's `Jido.AI.Directive.*`:
//!
//! | directive | fields (default) |
//! |---|---|
//! | [`LlmStream`], [`LlmGenerate`] | `id`, `model` or `model_alias` (one required), `system_prompt` (none), `context` (messages), `tools` (`[]`), `tool_choice` (`auto`), `max_tokens` (1024), `temperature` (0.2), `timeout` (none: the runtime's), `response_format` (none), `metadata` (`{}`) |
//! | [`LlmEmbed`] | `id`, `model` or `model_alias`, `texts`, `dimensions` (none), `timeout` (none), `metadata` (`{}`) |
//! | [`ToolExec`] | `id`, `tool_name`, `arguments` (`{}`), `context` (`{}`), `timeout_ms` (none: the runtime's), `max_retries` (0), `retry_backoff_ms` (0), `request_id`, `iteration` (none), `metadata` (`{}`) |
//! | [`EmitToolError`] | `id`, `tool_name`, `error`, `metadata` (`{}`) |
//! | [`EmitRequestError`] | `request_id`, `reason`, `message` |
//! | [`CancelRequest`] | `request_id`, `reason` (`"user_cancelled"`) |
//!
//! ```
//! use jido::ai::directive::{LlmGenerate, ModelRef, ToolExec};
//! use jido::ai::Message;
//! use jido::Directive;
//! use serde_json::json;
//!
//! let d = LlmGenerate::new("call_1", ModelRef::alias("fast"), vec![Message::user("hi")])
//!     .system_prompt("be brief")
//!     .max_tokens(256);
//! assert_eq!(d.temperature, 0.2);
//! let data = serde_json::to_value(&d).unwrap();
//! assert_eq!(data["model_alias"], "fast");
//! assert_eq!(serde_json::from_value::<LlmGenerate>(data).unwrap(), d);
//!
//! let tool = ToolExec::new("tc_1", "multiply", json!({"a": 2, "b": 3})).request_id("req_1").iteration(2);
//! assert_eq!(tool.max_retries, 0);
//! let directive: Directive = tool.into();
//! assert_eq!(directive.kind(), "ai.tool_exec");
//! ```

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::client::{JsonSchemaFormat, Messages, ToolChoice, ToolSpecs};
use super::envelope::ErrorEnvelope;
use super::signals::Correlation;
use super::tool::Tool;
use crate::action::DynAction;
use crate::directive::{CustomDirective, Directive};
use crate::effect::Effect;
use crate::error::{Error, Result};

/// Default `max_tokens` of the LLM directives (1024).
pub const DEFAULT_MAX_TOKENS: u32 = 1024;
/// Default `temperature` of the LLM directives (0.2).
pub const DEFAULT_TEMPERATURE: f64 = 0.2;
/// Default `reason` of [`CancelRequest`].
pub const DEFAULT_CANCEL_REASON: &str = "user_cancelled";

/// Which model an LLM directive asks for: a model spec (`"provider:model"`
/// or what the client takes) or an alias resolved by the runtime when the
/// directive runs. A plain string converts to a spec.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ModelRef {
    /// A model spec, used as is.
    Spec(String),
    /// An alias (`"fast"`, `"capable"`, …) resolved at execution.
    Alias(String),
}

impl ModelRef {
    /// A model spec.
    pub fn spec(spec: impl Into<String>) -> Self {
        ModelRef::Spec(spec.into())
    }

    /// An alias.
    pub fn alias(alias: impl Into<String>) -> Self {
        ModelRef::Alias(alias.into())
    }

    /// The spec or alias text.
    pub fn as_str(&self) -> &str {
        match self {
            ModelRef::Spec(s) | ModelRef::Alias(s) => s,
        }
    }

    /// Jido's rule for data: `model` wins when non-empty, else
    /// `model_alias`; neither is a validation error.
    fn from_fields(model: Option<String>, alias: Option<String>) -> Result<Self> {
        match (model, alias) {
            (Some(m), _) if !m.is_empty() => Ok(ModelRef::Spec(m)),
            (_, Some(a)) if !a.is_empty() => Ok(ModelRef::Alias(a)),
            _ => Err(Error::validation("model or model_alias is required")),
        }
    }

    fn into_fields(self) -> (Option<String>, Option<String>) {
        match self {
            ModelRef::Spec(s) => (Some(s), None),
            ModelRef::Alias(a) => (None, Some(a)),
        }
    }
}

impl From<&str> for ModelRef {
    fn from(s: &str) -> Self {
        ModelRef::Spec(s.to_owned())
    }
}

impl From<String> for ModelRef {
    fn from(s: String) -> Self {
        ModelRef::Spec(s)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A conversation given as a list, or as an object with `messages`.
#[derive(Deserialize)]
#[serde(untagged)]
enum ContextWire {
    List(Messages),
    Object { messages: Messages },
}

/// A list of texts, or one text.
#[derive(Deserialize)]
#[serde(untagged)]
enum TextsWire {
    List(Vec<String>),
    One(String),
}

fn default_max_tokens() -> u32 {
    DEFAULT_MAX_TOKENS
}

fn default_temperature() -> f64 {
    DEFAULT_TEMPERATURE
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LlmCallWire {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model_alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    system_prompt: Option<String>,
    #[serde(serialize_with = "ser_context")]
    context: ContextWire,
    #[serde(default)]
    tools: ToolSpecs,
    #[serde(default)]
    tool_choice: ToolChoice,
    #[serde(default = "default_max_tokens")]
    max_tokens: u32,
    #[serde(default = "default_temperature")]
    temperature: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response_format: Option<JsonSchemaFormat>,
    #[serde(default)]
    metadata: Map<String, Value>,
}

fn ser_context<S: Serializer>(c: &ContextWire, s: S) -> std::result::Result<S::Ok, S::Error> {
    match c {
        ContextWire::List(m) | ContextWire::Object { messages: m } => m.serialize(s),
    }
}

/// The fields of an LLM directive, as the runtime uses them.
pub(crate) struct LlmCall {
    pub(crate) id: String,
    pub(crate) model: ModelRef,
    pub(crate) system_prompt: Option<String>,
    pub(crate) context: Messages,
    pub(crate) tools: ToolSpecs,
    pub(crate) tool_choice: ToolChoice,
    pub(crate) max_tokens: u32,
    pub(crate) temperature: f64,
    pub(crate) timeout: Option<Duration>,
    pub(crate) response_format: Option<JsonSchemaFormat>,
    pub(crate) correlation: Correlation,
}

macro_rules! llm_directive {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq)]
        #[non_exhaustive]
        pub struct $name {
            /// The LLM call id; every resulting signal carries it as
            /// `call_id`.
            pub id: String,
            /// The model, or an alias resolved when the directive runs.
            pub model: ModelRef,
            /// Sent first as a system message, when set.
            pub system_prompt: Option<String>,
            /// The conversation (shared: no message is copied into the
            /// directive nor out of it into the model's request).
            pub context: Messages,
            /// Tools offered to the model (descriptions only; empty: none),
            /// shared: a strategy passing the same tools on every call
            /// copies no spec.
            pub tools: ToolSpecs,
            /// Whether and which tool the model may call (default auto).
            pub tool_choice: ToolChoice,
            /// Upper bound on generated tokens (default 1024).
            pub max_tokens: u32,
            /// Sampling temperature (default 0.2).
            pub temperature: f64,
            /// How long the runtime waits (see the runtime's docs); `None`:
            /// the runtime's default.
            pub timeout: Option<Duration>,
            /// Structured output: ask for a JSON answer following this
            /// schema (none by default).
            pub response_format: Option<JsonSchemaFormat>,
            /// Free metadata; `request_id`, `run_id`, `iteration` and
            /// `strategy` are copied to every signal (where
            /// [`correlation`](Self::correlation) does not set them).
            pub metadata: Map<String, Value>,
            /// The correlation ids of its signals, typed (what a strategy
            /// sets: no JSON map per call). An id left unset here is read
            /// from `metadata`; the data form writes these into
            /// `metadata`.
            pub correlation: Correlation,
        }

        impl $name {
            /// A call `id` to `model` with the conversation `context` (a
            /// `Vec<Message>` or shared [`Messages`]) and every other field
            /// at its default.
            pub fn new(id: impl Into<String>, model: impl Into<ModelRef>, context: impl Into<Messages>) -> Self {
                $name {
                    id: id.into(),
                    model: model.into(),
                    system_prompt: None,
                    context: context.into(),
                    tools: ToolSpecs::new(),
                    tool_choice: ToolChoice::Auto,
                    max_tokens: DEFAULT_MAX_TOKENS,
                    temperature: DEFAULT_TEMPERATURE,
                    timeout: None,
                    response_format: None,
                    metadata: Map::new(),
                    correlation: Correlation::new(),
                }
            }

            /// Asks for a JSON answer following `format`'s schema.
            #[must_use]
            pub fn response_format(mut self, format: JsonSchemaFormat) -> Self {
                self.response_format = Some(format);
                self
            }

            /// Sets the system prompt.
            #[must_use]
            pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
                self.system_prompt = Some(prompt.into());
                self
            }

            /// Sets the tools (a `Vec<ToolSpec>` or shared [`ToolSpecs`]).
            #[must_use]
            pub fn tools(mut self, tools: impl Into<ToolSpecs>) -> Self {
                self.tools = tools.into();
                self
            }

            /// Sets the tool choice.
            #[must_use]
            pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
                self.tool_choice = choice;
                self
            }

            /// Sets `max_tokens`.
            #[must_use]
            pub fn max_tokens(mut self, n: u32) -> Self {
                self.max_tokens = n;
                self
            }

            /// Sets the temperature.
            #[must_use]
            pub fn temperature(mut self, t: f64) -> Self {
                self.temperature = t;
                self
            }

            /// Sets the timeout.
            #[must_use]
            pub fn timeout(mut self, timeout: Duration) -> Self {
                self.timeout = Some(timeout);
                self
            }

            /// Sets one metadata entry.
            #[must_use]
            pub fn meta(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
                self.metadata.insert(key.into(), value.into());
                self
            }

            /// Sets the metadata.
            #[must_use]
            pub fn metadata(mut self, metadata: Map<String, Value>) -> Self {
                self.metadata = metadata;
                self
            }

            /// Sets the typed correlation ids.
            #[must_use]
            pub fn with_correlation(mut self, correlation: Correlation) -> Self {
                self.correlation = correlation;
                self
            }

            /// The correlation ids of its signals: the typed ones, each
            /// unset one read from `metadata`.
            pub fn correlation(&self) -> Correlation {
                self.correlation.clone().or_from_metadata(&self.metadata)
            }

            pub(crate) fn to_call(&self) -> LlmCall {
                LlmCall {
                    id: self.id.clone(),
                    model: self.model.clone(),
                    system_prompt: self.system_prompt.clone(),
                    context: self.context.clone(),
                    tools: self.tools.clone(),
                    tool_choice: self.tool_choice.clone(),
                    max_tokens: self.max_tokens,
                    temperature: self.temperature,
                    timeout: self.timeout,
                    response_format: self.response_format.clone(),
                    correlation: self.correlation(),
                }
            }

            fn to_wire(&self) -> LlmCallWire {
                let (model, model_alias) = self.model.clone().into_fields();
                LlmCallWire {
                    id: self.id.clone(),
                    model,
                    model_alias,
                    system_prompt: self.system_prompt.clone(),
                    context: ContextWire::List(self.context.clone()),
                    tools: self.tools.clone(),
                    tool_choice: self.tool_choice.clone(),
                    max_tokens: self.max_tokens,
                    temperature: self.temperature,
                    timeout: self.timeout.map(millis),
                    response_format: self.response_format.clone(),
                    metadata: self.correlation.with_metadata(&self.metadata),
                }
            }

            fn from_wire(w: LlmCallWire) -> Result<Self> {
                Ok($name {
                    model: ModelRef::from_fields(w.model, w.model_alias)?,
                    id: w.id,
                    system_prompt: w.system_prompt,
                    context: match w.context {
                        ContextWire::List(m) | ContextWire::Object { messages: m } => m,
                    },
                    tools: w.tools,
                    tool_choice: w.tool_choice,
                    max_tokens: w.max_tokens,
                    temperature: w.temperature,
                    timeout: w.timeout.map(Duration::from_millis),
                    response_format: w.response_format,
                    metadata: w.metadata,
                    correlation: Correlation::new(),
                })
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                self.to_wire().serialize(s)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let wire = LlmCallWire::deserialize(d)?;
                $name::from_wire(wire).map_err(serde::de::Error::custom)
            }
        }

        impl CustomDirective for $name {
            fn type_name(&self) -> &'static str {
                $kind
            }
        }

        impl From<$name> for Directive {
            fn from(d: $name) -> Directive {
                Directive::custom(d)
            }
        }

        impl From<$name> for Effect {
            fn from(d: $name) -> Effect {
                Effect::Directive(Directive::custom(d))
            }
        }
    };
}

llm_directive!(
    /// Streams an answer: `ai.llm.delta` per piece of text, `ai.usage`
    /// when tokens were counted, then one `ai.llm.response`.
    LlmStream,
    "ai.llm_stream"
);

llm_directive!(
    /// Asks for one answer: `ai.usage` when tokens were counted, then one
    /// `ai.llm.response`.
    LlmGenerate,
    "ai.llm_generate"
);

/// Embeds texts: one `ai.embed.result`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LlmEmbed {
    /// The call id (`call_id` of the signal).
    pub id: String,
    /// The embedding model, or an alias.
    pub model: ModelRef,
    /// The texts, answered in order.
    pub texts: Vec<String>,
    /// Requested dimension.
    pub dimensions: Option<u32>,
    /// How long the runtime waits for the whole call; `None`: the
    /// runtime's default.
    pub timeout: Option<Duration>,
    /// Free metadata (correlation keys are copied to the signal).
    pub metadata: Map<String, Value>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EmbedWire {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model_alias: Option<String>,
    #[serde(serialize_with = "ser_texts")]
    texts: TextsWire,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dimensions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout: Option<u64>,
    #[serde(default)]
    metadata: Map<String, Value>,
}

fn ser_texts<S: Serializer>(t: &TextsWire, s: S) -> std::result::Result<S::Ok, S::Error> {
    match t {
        TextsWire::List(list) => list.serialize(s),
        TextsWire::One(one) => [one].serialize(s),
    }
}

impl LlmEmbed {
    /// Embeds `texts` with `model`.
    pub fn new(id: impl Into<String>, model: impl Into<ModelRef>, texts: Vec<String>) -> Self {
        LlmEmbed {
            id: id.into(),
            model: model.into(),
            texts,
            dimensions: None,
            timeout: None,
            metadata: Map::new(),
        }
    }

    /// Sets the dimension.
    #[must_use]
    pub fn dimensions(mut self, n: u32) -> Self {
        self.dimensions = Some(n);
        self
    }

    /// Sets the timeout.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets one metadata entry.
    #[must_use]
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// The correlation ids of its signal.
    pub fn correlation(&self) -> Correlation {
        Correlation::from_metadata(&self.metadata)
    }
}

impl Serialize for LlmEmbed {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let (model, model_alias) = self.model.clone().into_fields();
        EmbedWire {
            id: self.id.clone(),
            model,
            model_alias,
            texts: TextsWire::List(self.texts.clone()),
            dimensions: self.dimensions,
            timeout: self.timeout.map(millis),
            metadata: self.metadata.clone(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for LlmEmbed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let w = EmbedWire::deserialize(d)?;
        Ok(LlmEmbed {
            model: ModelRef::from_fields(w.model, w.model_alias)
                .map_err(serde::de::Error::custom)?,
            id: w.id,
            texts: match w.texts {
                TextsWire::List(list) => list,
                TextsWire::One(one) => vec![one],
            },
            dimensions: w.dimensions,
            timeout: w.timeout.map(Duration::from_millis),
            metadata: w.metadata,
        })
    }
}

/// Runs a tool: `ai.tool.started`, then exactly one `ai.tool.result`.
///
/// The tool is [`action`](ToolExec::action) when set, else the runtime's
/// tool named [`tool_name`](ToolExec::tool_name); an unknown name ends in
/// an `ai.tool.result` error (`not_found`). The `state` key of
/// [`context`](ToolExec::context) is the runtime's: the action sees the
/// agent's state through [`Context::state`](crate::Context::state), and a
/// `state` value given here is dropped.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ToolExec {
    /// The model's tool-call id (`call_id` of the signals).
    pub id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The arguments, as the model wrote them (normalised against the
    /// tool's schema before decoding).
    /// Shared with the tool call it answers (no copy per directive).
    #[serde(default = "empty_object")]
    pub arguments: Arc<Value>,
    /// Context values for the action (`state` excepted, see above).
    #[serde(default)]
    pub context: Map<String, Value>,
    /// Timeout per attempt, in ms; `None`: the runtime's default (30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Retries after the first attempt, for retryable errors only
    /// (default 0; negative values read as 0).
    #[serde(default, deserialize_with = "clamped_u32")]
    pub max_retries: u32,
    /// Fixed delay between attempts, in ms (default 0).
    #[serde(default)]
    pub retry_backoff_ms: u64,
    /// The request this call belongs to; else `metadata.request_id`, else
    /// `context.request_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The iteration; else `metadata.iteration`, else
    /// `context.iteration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<u64>,
    /// Free metadata; `request_id`, `run_id`, `iteration` and `strategy`
    /// are copied to the signals (where the typed fields do not set them).
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// The strategy that asked for the call, typed (what a strategy sets:
    /// no JSON map entry per call); else `metadata.strategy`. The data
    /// form writes it into `metadata`, first.
    #[serde(skip)]
    pub strategy: Option<String>,
    /// Run this action instead of looking `tool_name` up (not part of the
    /// data form).
    #[serde(skip)]
    pub action: Option<DynAction>,
    /// The tool of `action` when set through [`ToolExec::tool`]: its
    /// schema normalises the arguments without being built again.
    #[serde(skip)]
    pub(crate) tool: Option<Tool>,
}

fn empty_object() -> Arc<Value> {
    Arc::new(Value::Object(Map::new()))
}

fn clamped_u32<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u32, D::Error> {
    let n = i64::deserialize(d)?;
    Ok(u32::try_from(n.max(0)).unwrap_or(u32::MAX))
}

/// The data form of a [`ToolExec`]: its fields in order, the typed
/// strategy written into `metadata`.
#[derive(Serialize)]
struct ToolExecWire<'a> {
    id: &'a str,
    tool_name: &'a str,
    arguments: &'a Value,
    context: &'a Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<u64>,
    max_retries: u32,
    retry_backoff_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    iteration: Option<u64>,
    metadata: Cow<'a, Map<String, Value>>,
}

impl Serialize for ToolExec {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let metadata = match &self.strategy {
            None => Cow::Borrowed(&self.metadata),
            Some(strategy) => {
                let typed = Correlation {
                    strategy: Some(strategy.clone()),
                    ..Correlation::new()
                };
                Cow::Owned(typed.with_metadata(&self.metadata))
            }
        };
        ToolExecWire {
            id: &self.id,
            tool_name: &self.tool_name,
            arguments: &self.arguments,
            context: &self.context,
            timeout_ms: self.timeout_ms,
            max_retries: self.max_retries,
            retry_backoff_ms: self.retry_backoff_ms,
            request_id: self.request_id.as_deref(),
            iteration: self.iteration,
            metadata,
        }
        .serialize(s)
    }
}

impl PartialEq for ToolExec {
    /// Field by field; actions compare by name.
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.tool_name == other.tool_name
            && self.arguments == other.arguments
            && self.context == other.context
            && self.timeout_ms == other.timeout_ms
            && self.max_retries == other.max_retries
            && self.retry_backoff_ms == other.retry_backoff_ms
            && self.request_id == other.request_id
            && self.iteration == other.iteration
            && self.metadata == other.metadata
            && self.strategy == other.strategy
            && self.action.as_ref().map(DynAction::name)
                == other.action.as_ref().map(DynAction::name)
    }
}

impl ToolExec {
    /// Runs tool `tool_name` for call `id` with `arguments` (a `Value` or
    /// the `Arc<Value>` of a [`ToolCall`](crate::ai::ToolCall)).
    pub fn new(
        id: impl Into<String>,
        tool_name: impl Into<String>,
        arguments: impl Into<Arc<Value>>,
    ) -> Self {
        ToolExec {
            id: id.into(),
            tool_name: tool_name.into(),
            arguments: arguments.into(),
            context: Map::new(),
            timeout_ms: None,
            max_retries: 0,
            retry_backoff_ms: 0,
            request_id: None,
            iteration: None,
            metadata: Map::new(),
            strategy: None,
            action: None,
            tool: None,
        }
    }

    /// Sets one context value.
    #[must_use]
    pub fn context_value(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.context.insert(key.into(), value.into());
        self
    }

    /// Sets the per-attempt timeout.
    #[must_use]
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.timeout_ms = Some(ms);
        self
    }

    /// Sets the retries.
    #[must_use]
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// Sets the delay between attempts.
    #[must_use]
    pub fn retry_backoff_ms(mut self, ms: u64) -> Self {
        self.retry_backoff_ms = ms;
        self
    }

    /// Sets the request id.
    #[must_use]
    pub fn request_id(mut self, id: impl Into<String>) -> Self {
        self.request_id = Some(id.into());
        self
    }

    /// Sets the iteration.
    #[must_use]
    pub fn iteration(mut self, n: u64) -> Self {
        self.iteration = Some(n);
        self
    }

    /// Sets one metadata entry.
    #[must_use]
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Sets the strategy that asks for the call (typed; its signals'
    /// `metadata.strategy`, and `metadata.strategy` in the data form).
    #[must_use]
    pub fn strategy(mut self, name: impl Into<String>) -> Self {
        self.strategy = Some(name.into());
        self
    }

    /// Runs `action` directly.
    #[must_use]
    pub fn action(mut self, action: impl Into<DynAction>) -> Self {
        self.action = Some(action.into());
        self.tool = None;
        self
    }

    /// Runs `tool`'s action directly, its arguments normalised against
    /// the tool's schema (what a strategy holding its own tools uses).
    #[must_use]
    pub fn tool(mut self, tool: &Tool) -> Self {
        self.action = Some(tool.action().clone());
        self.tool = Some(tool.clone());
        self
    }

    /// The correlation ids of its signals: request id and iteration from
    /// the field, else the metadata, else the context.
    pub fn correlation(&self) -> Correlation {
        let mut c = Correlation::from_metadata(&self.metadata);
        let from_context = Correlation::from_metadata(&self.context);
        c.request_id = self
            .request_id
            .clone()
            .or(c.request_id)
            .or(from_context.request_id);
        c.iteration = self.iteration.or(c.iteration).or(from_context.iteration);
        c.run_id = c.run_id.or(from_context.run_id);
        c.strategy = self.strategy.clone().or(c.strategy);
        c
    }
}

/// Answers a tool call that cannot run (unknown tool, refused arguments):
/// one `ai.tool.result` carrying the error, so no strategy waits forever.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct EmitToolError {
    /// The model's tool-call id.
    pub id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The error (data in any error shape is normalised, see
    /// [`ErrorEnvelope::normalize`], fallback `execution_error` "tool
    /// execution failed").
    #[serde(deserialize_with = "any_error")]
    pub error: ErrorEnvelope,
    /// Free metadata (correlation keys are copied to the signal).
    #[serde(default)]
    pub metadata: Map<String, Value>,
}

fn any_error<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<ErrorEnvelope, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(ErrorEnvelope::normalize(
        &v,
        "execution_error",
        "tool execution failed",
    ))
}

impl EmitToolError {
    /// Answers call `id` of `tool_name` with `error`.
    pub fn new(id: impl Into<String>, tool_name: impl Into<String>, error: &Error) -> Self {
        EmitToolError {
            id: id.into(),
            tool_name: tool_name.into(),
            error: ErrorEnvelope::from_error(error),
            metadata: Map::new(),
        }
    }

    /// Answers call `id` naming a tool that does not exist:
    /// [`unknown_tool_error`].
    pub fn unknown_tool(id: impl Into<String>, tool_name: impl Into<String>) -> Self {
        let tool_name = tool_name.into();
        let error = unknown_tool_error(&tool_name);
        Self::new(id, tool_name, &error)
    }

    /// Sets one metadata entry.
    #[must_use]
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// The correlation ids of its signal.
    pub fn correlation(&self) -> Correlation {
        Correlation::from_metadata(&self.metadata)
    }
}

/// The error of a call to a tool that does not exist: not found, "tool
/// not found: NAME", details `tool_name`, not retryable.
///
/// ```
/// let err = jido::ai::directive::unknown_tool_error("teleport");
/// assert_eq!(err.to_envelope(), serde_json::json!({
///     "type": "not_found", "message": "tool not found: teleport",
///     "details": {"tool_name": "teleport", "retry": false}, "retryable": false
/// }));
/// ```
pub fn unknown_tool_error(tool_name: &str) -> Error {
    Error::not_found(format!("tool not found: {tool_name}"))
        .with_detail("tool_name", tool_name.to_owned())
        .with_retry(false)
}

/// Rejects a request: one `ai.request.error`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct EmitRequestError {
    /// The rejected request.
    pub request_id: String,
    /// Why, as a snake_case word (`busy`, `invalid_tools`, `runtime`, …).
    pub reason: String,
    /// A message for the caller.
    pub message: String,
}

impl EmitRequestError {
    /// Rejects `request_id` for `reason` with `message`.
    pub fn new(
        request_id: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        EmitRequestError {
            request_id: request_id.into(),
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// Cancels the running LLM and tool calls of this agent whose request id
/// (or call id) is `request_id`. Each cancelled call ends with its usual
/// terminal signal (`ai.llm.response`, `ai.tool.result`,
/// `ai.embed.result`) carrying a `cancelled` error (details `reason`);
/// with nothing running under that id, nothing is sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CancelRequest {
    /// The request (or call) id.
    pub request_id: String,
    /// Why (default `"user_cancelled"`).
    #[serde(default = "default_cancel_reason")]
    pub reason: String,
}

fn default_cancel_reason() -> String {
    DEFAULT_CANCEL_REASON.to_owned()
}

impl CancelRequest {
    /// Cancels `request_id` with the default reason.
    pub fn new(request_id: impl Into<String>) -> Self {
        CancelRequest {
            request_id: request_id.into(),
            reason: default_cancel_reason(),
        }
    }

    /// Sets the reason.
    #[must_use]
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }
}

macro_rules! plain_directive {
    ($name:ident, $kind:literal) => {
        impl CustomDirective for $name {
            fn type_name(&self) -> &'static str {
                $kind
            }
        }

        impl From<$name> for Directive {
            fn from(d: $name) -> Directive {
                Directive::custom(d)
            }
        }

        impl From<$name> for Effect {
            fn from(d: $name) -> Effect {
                Effect::Directive(Directive::custom(d))
            }
        }
    };
}

plain_directive!(LlmEmbed, "ai.llm_embed");
plain_directive!(ToolExec, "ai.tool_exec");
plain_directive!(EmitToolError, "ai.emit_tool_error");
plain_directive!(EmitRequestError, "ai.emit_request_error");
plain_directive!(CancelRequest, "ai.cancel_request");

/// Any AI directive as data: `{"directive": "llm_stream", …fields}` with
/// `directive` one of `llm_stream`, `llm_generate`, `llm_embed`,
/// `tool_exec`, `emit_tool_error`, `emit_request_error`, `cancel_request`.
///
/// ```
/// use jido::ai::directive::AiDirective;
/// use serde_json::json;
///
/// let d: AiDirective = serde_json::from_value(json!({
///     "directive": "emit_request_error", "request_id": "r1", "reason": "busy", "message": "agent is busy"
/// })).unwrap();
/// assert_eq!(jido::Directive::from(d).kind(), "ai.emit_request_error");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "directive", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AiDirective {
    /// [`LlmStream`].
    LlmStream(LlmStream),
    /// [`LlmGenerate`].
    LlmGenerate(LlmGenerate),
    /// [`LlmEmbed`].
    LlmEmbed(LlmEmbed),
    /// [`ToolExec`].
    ToolExec(ToolExec),
    /// [`EmitToolError`].
    EmitToolError(EmitToolError),
    /// [`EmitRequestError`].
    EmitRequestError(EmitRequestError),
    /// [`CancelRequest`].
    CancelRequest(CancelRequest),
}

impl From<AiDirective> for Directive {
    fn from(d: AiDirective) -> Directive {
        match d {
            AiDirective::LlmStream(d) => d.into(),
            AiDirective::LlmGenerate(d) => d.into(),
            AiDirective::LlmEmbed(d) => d.into(),
            AiDirective::ToolExec(d) => d.into(),
            AiDirective::EmitToolError(d) => d.into(),
            AiDirective::EmitRequestError(d) => d.into(),
            AiDirective::CancelRequest(d) => d.into(),
        }
    }
}
