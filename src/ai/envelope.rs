//! The result and error envelopes of AI signals, and the tool-result content
//! the model reads.
//!
//! * [`ErrorEnvelope`] `{type, message, details, retryable}`: the crate's
//!   [`Error::to_envelope`] as a typed value (details sanitised: JSON-safe,
//!   secrets redacted, bounded), plus [`ErrorEnvelope::normalize`] for
//!   error shapes that arrive as data.
//! * [`ResultEnvelope`]: Jido's canonical triple `{:ok, payload, effects}` /
//!   `{:error, reason, effects}`, in JSON
//!   `{"status": "ok", "result": …, "effects": […]}` /
//!   `{"status": "error", "reason": {…}, "effects": […]}` (the shape of the
//!   runtime's instruction feedback). It is the `result` of
//!   `ai.llm.response`, `ai.tool.result` and `ai.embed.result`.
//! * [`ResultEnvelope::tool_content`]: the body of the `role: tool` message,
//!   `{"ok": true, "result": …}` / `{"ok": false, "error": {…}}`, sanitised
//!   and size-limited.
//!
//! ```
//! use jido::ai::envelope::ResultEnvelope;
//! use jido::Error;
//! use serde_json::json;
//!
//! let ok = ResultEnvelope::ok(json!({"product": 6}));
//! assert_eq!(ok.to_value(), json!({"status": "ok", "result": {"product": 6}, "effects": []}));
//! assert_eq!(ok.tool_content(), r#"{"ok":true,"result":{"product":6}}"#);
//!
//! let err = ResultEnvelope::error(&Error::timeout("tool timed out"));
//! assert_eq!(
//!     err.tool_content(),
//!     r#"{"ok":false,"error":{"type":"timeout","message":"tool timed out","details":{},"retryable":true}}"#
//! );
//! ```

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::effect::Effect;
use crate::error::{Error, Result, SanitizeLimits, is_sanitized, sanitize, sanitize_with};

/// Error types that are retryable when nothing says otherwise (Jido's
/// transient types).
const TRANSIENT_TYPES: [&str; 4] = ["timeout", "transient", "transient_error", "rate_limited"];

/// The bounds of a tool result handed to a model: depth 8, 100 items per
/// object or array, strings of 16 384 characters.
pub const TOOL_CONTENT_LIMITS: SanitizeLimits = SanitizeLimits {
    max_depth: 8,
    max_items: 100,
    max_string: 16_384,
};

/// The most bytes of a tool-result content: a longer `result` is replaced
/// by the first [`TOOL_CONTENT_LIMITS`]`.max_string` characters of its JSON
/// text, ending in `"...(truncated)"`.
pub const MAX_TOOL_CONTENT_BYTES: usize = 65_536;

/// The canonical error envelope `{type, message, details, retryable}`.
///
/// Built from an [`Error`] it is exactly [`Error::to_envelope`] (`type` is
/// the error kind, e.g. `"validation_error"`, details sanitised).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorEnvelope {
    /// The error type, e.g. `"execution_error"`, `"not_found"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A short message.
    pub message: String,
    /// JSON details, sanitised (JSON-safe, secrets redacted, bounded).
    #[serde(default)]
    pub details: Map<String, Value>,
    /// Whether a retry may help.
    #[serde(default)]
    pub retryable: bool,
}

impl ErrorEnvelope {
    /// The envelope of `error` ([`Error::to_envelope`]).
    pub fn from_error(error: &Error) -> Self {
        // One source of truth: the crate's envelope, read back as a struct.
        serde_json::from_value(error.to_envelope()).unwrap_or_else(|_| ErrorEnvelope {
            kind: error.kind().as_str().to_owned(),
            message: error.message().to_owned(),
            details: Map::new(),
            retryable: error.retryable(),
        })
    }

    /// Normalises an error that arrived as data (Jido's rules, first match
    /// wins):
    ///
    /// * an object with `type` (or `code`) and `message`: kept; `details`
    ///   (a non-object is wrapped as `{"details": …}`); `retryable` (or
    ///   `retryable?`) when it is a boolean, else true iff the type is
    ///   transient (`timeout`, `transient`, `transient_error`,
    ///   `rate_limited`);
    /// * an object with only `message`: `fallback_type`, details = the
    ///   other keys;
    /// * a string: `fallback_type` with that message;
    /// * anything else: `fallback_type` and `fallback_message`, details
    ///   `{"reason": value}`.
    ///
    /// Details are sanitised and the message bounded like
    /// [`sanitize`] bounds strings.
    ///
    /// ```
    /// use jido::ai::envelope::ErrorEnvelope;
    /// use serde_json::json;
    ///
    /// let env = ErrorEnvelope::normalize(&json!({"code": "rate_limited", "message": "slow down", "password": "x"}),
    ///                                    "execution_error", "tool execution failed");
    /// assert_eq!(env.kind, "rate_limited");
    /// assert!(env.retryable);
    /// let env = ErrorEnvelope::normalize(&json!(42), "execution_error", "tool execution failed");
    /// assert_eq!(env.message, "tool execution failed");
    /// assert_eq!(env.details["reason"], 42);
    /// ```
    pub fn normalize(value: &Value, fallback_type: &str, fallback_message: &str) -> Self {
        let bounded = |s: &str| match sanitize(&Value::String(s.to_owned())) {
            Value::String(s) => s,
            _ => String::new(),
        };
        let clean = |details: Value| match sanitize(&details) {
            Value::Object(map) => map,
            other => Map::from_iter([("details".to_owned(), other)]),
        };
        match value {
            Value::Object(map) => {
                let ty = map
                    .get("type")
                    .or_else(|| map.get("code"))
                    .and_then(Value::as_str);
                let message = map.get("message").map(|m| match m {
                    Value::String(s) => s.clone(),
                    Value::Null => "execution failed".to_owned(),
                    other => other.to_string(),
                });
                let explicit = map
                    .get("retryable")
                    .or_else(|| map.get("retryable?"))
                    .and_then(Value::as_bool);
                match (ty, message) {
                    (Some(ty), Some(message)) => {
                        let details = match map.get("details") {
                            None | Some(Value::Null) => Map::new(),
                            Some(Value::Object(d)) => clean(Value::Object(d.clone())),
                            Some(other) => clean(json!({"details": other})),
                        };
                        ErrorEnvelope {
                            retryable: explicit.unwrap_or(TRANSIENT_TYPES.contains(&ty)),
                            kind: bounded(ty),
                            message: bounded(&message),
                            details,
                        }
                    }
                    (None, Some(message)) => {
                        let rest: Map<String, Value> = map
                            .iter()
                            .filter(|(k, _)| {
                                !matches!(k.as_str(), "message" | "retryable" | "retryable?")
                            })
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        ErrorEnvelope {
                            kind: fallback_type.to_owned(),
                            message: bounded(&message),
                            details: clean(Value::Object(rest)),
                            retryable: explicit.unwrap_or(TRANSIENT_TYPES.contains(&fallback_type)),
                        }
                    }
                    _ => Self::fallback(value, fallback_type, fallback_message),
                }
            }
            Value::String(message) => ErrorEnvelope {
                kind: fallback_type.to_owned(),
                message: bounded(message),
                details: Map::new(),
                retryable: TRANSIENT_TYPES.contains(&fallback_type),
            },
            other => Self::fallback(other, fallback_type, fallback_message),
        }
    }

    fn fallback(value: &Value, fallback_type: &str, fallback_message: &str) -> Self {
        let details = match sanitize(&json!({"reason": value})) {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        ErrorEnvelope {
            kind: fallback_type.to_owned(),
            message: fallback_message.to_owned(),
            details,
            retryable: TRANSIENT_TYPES.contains(&fallback_type),
        }
    }

    /// The envelope as JSON `{type, message, details, retryable}`.
    pub fn to_value(&self) -> Value {
        json!({
            "type": self.kind,
            "message": self.message,
            "details": self.details,
            "retryable": self.retryable,
        })
    }
}

impl From<&Error> for ErrorEnvelope {
    fn from(error: &Error) -> Self {
        ErrorEnvelope::from_error(error)
    }
}

/// The canonical result triple of `ai.llm.response`, `ai.tool.result` and
/// `ai.embed.result`: a payload or an error envelope, and the effects the
/// work asked for (encoded with [`effects::encode`](super::effects::encode);
/// always a list, empty for LLM and embedding calls).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResultEnvelope {
    /// `{"status": "ok", "result": …, "effects": […]}`.
    Ok {
        /// The payload.
        result: Value,
        /// Encoded effects.
        #[serde(default)]
        effects: Vec<Value>,
    },
    /// `{"status": "error", "reason": {…}, "effects": […]}`.
    Error {
        /// The error envelope.
        reason: ErrorEnvelope,
        /// Encoded effects (those of the failed attempt that the policy
        /// let through).
        #[serde(default)]
        effects: Vec<Value>,
    },
}

impl ResultEnvelope {
    /// A success without effects.
    pub fn ok(result: Value) -> Self {
        ResultEnvelope::Ok {
            result,
            effects: Vec::new(),
        }
    }

    /// A failure without effects.
    pub fn error(error: &Error) -> Self {
        ResultEnvelope::Error {
            reason: ErrorEnvelope::from_error(error),
            effects: Vec::new(),
        }
    }

    /// Whether this is a success.
    pub fn is_ok(&self) -> bool {
        matches!(self, ResultEnvelope::Ok { .. })
    }

    /// The encoded effects.
    pub fn effects(&self) -> &[Value] {
        match self {
            ResultEnvelope::Ok { effects, .. } | ResultEnvelope::Error { effects, .. } => effects,
        }
    }

    /// The effects decoded back into [`Effect`]s, for a strategy to return
    /// from its `cmd`.
    ///
    /// # Errors
    ///
    /// A validation error naming the first effect that does not decode.
    pub fn decode_effects(&self) -> Result<Vec<Effect>> {
        self.effects().iter().map(super::effects::decode).collect()
    }

    /// The envelope as JSON.
    pub fn to_value(&self) -> Value {
        match self {
            ResultEnvelope::Ok { result, effects } => {
                json!({"status": "ok", "result": result, "effects": effects})
            }
            ResultEnvelope::Error { reason, effects } => {
                json!({"status": "error", "reason": reason.to_value(), "effects": effects})
            }
        }
    }

    /// The envelope as JSON, moving its parts (same as
    /// [`to_value`](ResultEnvelope::to_value)).
    pub fn into_value(self) -> Value {
        let mut m = Map::with_capacity(3);
        match self {
            ResultEnvelope::Ok { result, effects } => {
                m.insert("status".into(), "ok".into());
                m.insert("result".into(), result);
                m.insert("effects".into(), Value::Array(effects));
            }
            ResultEnvelope::Error { reason, effects } => {
                m.insert("status".into(), "error".into());
                m.insert("reason".into(), reason.to_value());
                m.insert("effects".into(), Value::Array(effects));
            }
        }
        Value::Object(m)
    }

    /// Reads an envelope by value, moving its parts: the same rules as
    /// its `Deserialize`.
    ///
    /// # Errors
    ///
    /// The decoding error of `Deserialize` when it is not an envelope.
    pub fn from_value(value: Value) -> Result<Self, serde_json::Error> {
        let Value::Object(mut m) = value else {
            return Self::deserialize(value);
        };
        let ok = m.get("status").and_then(Value::as_str) == Some("ok")
            && m.contains_key("result")
            && m.keys()
                .all(|k| matches!(k.as_str(), "status" | "result" | "effects"))
            && matches!(m.get("effects"), None | Some(Value::Array(_)));
        if !ok {
            return Self::deserialize(Value::Object(m));
        }
        let result = m.remove("result").unwrap_or(Value::Null);
        let effects = match m.remove("effects") {
            Some(Value::Array(list)) => list,
            _ => Vec::new(),
        };
        Ok(ResultEnvelope::Ok { result, effects })
    }

    /// Reads an envelope that arrived as data. Accepts the canonical shape
    /// (a missing `effects` reads as `[]`, a single effect is wrapped) and
    /// normalises its error through [`ErrorEnvelope::normalize`] with
    /// `fallback_type` / `fallback_message`; anything else is an error
    /// envelope of type `invalid_result`, message "invalid result
    /// envelope", details `{"result": <value>}`.
    pub fn normalize(value: &Value, fallback_type: &str, fallback_message: &str) -> Self {
        let effects = |map: &Map<String, Value>| match map.get("effects") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => list.clone(),
            Some(one) => vec![one.clone()],
        };
        if let Value::Object(map) = value {
            match map.get("status").and_then(Value::as_str) {
                Some("ok") => {
                    return ResultEnvelope::Ok {
                        result: map.get("result").cloned().unwrap_or(Value::Null),
                        effects: effects(map),
                    };
                }
                Some("error") => {
                    let reason = map.get("reason").unwrap_or(&Value::Null);
                    return ResultEnvelope::Error {
                        reason: ErrorEnvelope::normalize(reason, fallback_type, fallback_message),
                        effects: effects(map),
                    };
                }
                _ => {}
            }
        }
        ResultEnvelope::Error {
            reason: ErrorEnvelope {
                kind: "invalid_result".to_owned(),
                message: "invalid result envelope".to_owned(),
                details: match sanitize(&json!({"result": value})) {
                    Value::Object(map) => map,
                    _ => Map::new(),
                },
                retryable: false,
            },
            effects: Vec::new(),
        }
    }

    /// The body of the `role: tool` message answering a tool call:
    /// `{"ok": true, "result": …}` or `{"ok": false, "error": {type,
    /// message, details, retryable}}`, as JSON text. The result passes the
    /// transport sanitiser ([`TOOL_CONTENT_LIMITS`], secret-looking keys
    /// `"[REDACTED]"`); a content still longer than
    /// [`MAX_TOOL_CONTENT_BYTES`] carries the cut JSON text of its result
    /// instead.
    pub fn tool_content(&self) -> String {
        // The common case, a result the sanitiser keeps as it is: its text
        // is written straight after the prefix (the same text as the
        // object's below: `ok` then `result`, compact), with no copy of
        // the result, no object built and dropped.
        if let ResultEnvelope::Ok { result, .. } = self
            && is_sanitized(result, &TOOL_CONTENT_LIMITS)
        {
            use std::fmt::Write as _;
            let mut text = String::with_capacity(64);
            text.push_str(r#"{"ok":true,"result":"#);
            let _ = write!(text, "{result}");
            text.push('}');
            if text.len() <= MAX_TOOL_CONTENT_BYTES {
                return text;
            }
        }
        let body = match self {
            ResultEnvelope::Ok { result, .. } => {
                json!({"ok": true, "result": sanitize_with(result, &TOOL_CONTENT_LIMITS)})
            }
            ResultEnvelope::Error { reason, .. } => {
                json!({"ok": false, "error": reason.to_value()})
            }
        };
        let text = body.to_string();
        if text.len() <= MAX_TOOL_CONTENT_BYTES {
            return text;
        }
        let inner = match self {
            ResultEnvelope::Ok { .. } => &body["result"],
            ResultEnvelope::Error { .. } => &body["error"],
        };
        let cut = sanitize_with(
            &Value::String(inner.to_string()),
            &SanitizeLimits {
                max_string: TOOL_CONTENT_LIMITS.max_string,
                ..TOOL_CONTENT_LIMITS
            },
        );
        match self {
            ResultEnvelope::Ok { .. } => json!({"ok": true, "result": cut}).to_string(),
            ResultEnvelope::Error { .. } => json!({"ok": false, "error": cut}).to_string(),
        }
    }
}

/// The crate [`Error`] of an LLM call's [`LlmError`](super::client::LlmError),
/// so that it has the canonical envelope:
///
/// | `LlmErrorKind` | error kind |
/// |---|---|
/// | `Timeout`, `StreamIdle` | timeout (retryable) |
/// | `Cancelled` | cancelled (not retryable) |
/// | `InvalidRequest` | configuration (not retryable) |
/// | anything else | execution, retryable as the `LlmError` says |
///
/// The message is the `LlmError`'s; details are `llm_error` (the kind's
/// name, e.g. `"status"`), `status` (for an HTTP status), `retry` (for an
/// execution error) and `provider_details` (the `LlmError`'s details, when
/// not null).
///
/// ```
/// use jido::ai::envelope::llm_error;
/// use jido::ai::{LlmError, LlmErrorKind};
/// use serde_json::json;
///
/// let err = llm_error(&LlmError::new(LlmErrorKind::Status(503), "overloaded"));
/// assert_eq!(err.to_envelope(), json!({
///     "type": "execution_error", "message": "overloaded",
///     "details": {"llm_error": "status", "status": 503, "retry": true}, "retryable": true
/// }));
/// ```
pub fn llm_error(error: &super::client::LlmError) -> Error {
    use super::client::LlmErrorKind;
    let mut out = match error.kind {
        LlmErrorKind::Timeout | LlmErrorKind::StreamIdle => Error::timeout(error.message.clone()),
        LlmErrorKind::Cancelled => Error::cancelled(error.message.clone()),
        LlmErrorKind::InvalidRequest => Error::configuration(error.message.clone()),
        _ => Error::execution(error.message.clone()),
    }
    .with_detail("llm_error", error.kind.as_str());
    if let LlmErrorKind::Status(code) = error.kind {
        out = out.with_detail("status", code);
    }
    if out.kind() == crate::error::ErrorKind::Execution {
        out = out.with_retry(error.retryable);
    }
    if !error.details.is_null() {
        out = out.with_detail("provider_details", error.details.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text the whole object gives.
    fn by_value(result: &Value) -> String {
        json!({"ok": true, "result": sanitize_with(result, &TOOL_CONTENT_LIMITS)}).to_string()
    }

    #[test]
    fn a_clean_result_is_written_as_its_object_would_be() {
        for result in [
            json!({"product": 42}),
            json!({"z": 1, "a": [1, 2.5, null, true], "s": "é\"\n\\", "o": {"k": {}}}),
            json!("text"),
            json!(null),
            json!([]),
        ] {
            let content = ResultEnvelope::ok(result.clone()).tool_content();
            assert_eq!(content, by_value(&result));
        }
        // Not clean: the sanitiser's copy.
        let secret = json!({"api_key": "k", "n": 1});
        assert_eq!(
            ResultEnvelope::ok(secret.clone()).tool_content(),
            by_value(&secret)
        );
        assert!(by_value(&secret).contains("[REDACTED]"));
    }
}
