//! The one error type of the crate.
//!
//! Every failure in `jido` is an [`Error`]: a [`kind`](Error::kind), a short
//! message, JSON [`details`](Error::details) and an optional
//! [`source`](std::error::Error::source) chain. Errors are plain data: they
//! clone cheaply, travel inside directives and signals, and turn into the
//! canonical envelope `{type, message, details, retryable}` with
//! [`Error::to_envelope`].
//!
//! # Retry rules
//!
//! [`Error::retryable`] follows jido_action:
//!
//! * [`ErrorKind::Validation`] and [`ErrorKind::Configuration`] never retry;
//! * [`ErrorKind::Timeout`] always retries;
//! * [`ErrorKind::Cancelled`] never retries (somebody asked for it to stop);
//! * [`ErrorKind::Conflict`] and [`ErrorKind::Fenced`] never retry as they
//!   are: the write was based on stale knowledge (re-read first);
//! * every other kind retries unless its details carry a hint: `retry` or
//!   `retryable` set to `false`, looked up first at the top level and then,
//!   recursively, under `reason`.
//!
//! ```
//! use jido::{Error, ErrorKind};
//! use serde_json::json;
//!
//! let err = Error::execution("upstream refused").with_detail("reason", json!({"retry": false}));
//! assert_eq!(err.kind(), ErrorKind::Execution);
//! assert!(!err.retryable());
//! assert!(Error::timeout("too slow").retryable());
//! assert!(!Error::validation("bad input").retryable());
//! ```

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, coarsely. Decides [`Error::retryable`] and the envelope's
/// `type`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Input failed validation: params, output, signals, options given at
    /// run time. Never retried.
    Validation,
    /// Something was configured wrong: an action name, a route table, an
    /// option value. Never retried.
    Configuration,
    /// An action ran and failed (or panicked).
    Execution,
    /// A time budget ran out. Always retried.
    Timeout,
    /// An action failed and its compensation ran; see the details'
    /// `compensated` flag.
    Compensation,
    /// No route matched a signal, or a route could not be used.
    Routing,
    /// A signal could not be delivered to a dispatch target.
    Dispatch,
    /// A queue was full and the work was refused.
    QueueOverflow,
    /// A target (agent, actor, child) does not exist or is no longer alive.
    NotFound,
    /// The work was cancelled on purpose (shutdown, `cancel()`). Never
    /// retried.
    Cancelled,
    /// A bug or broken invariant inside the runtime.
    Internal,
    /// A storage backend failed (I/O, a lost connection, data it cannot
    /// read back). Retried unless the details say `retry: false`, as they do
    /// for corrupt data.
    Storage,
    /// A conditional write lost: the revision or sequence it expected is no
    /// longer the stored one. Never retried as is.
    Conflict,
    /// A write by an owner whose epoch is no longer current: another node
    /// claimed the key. Never retried; the writer must stop.
    Fenced,
}

impl ErrorKind {
    /// The envelope `type` of this kind, e.g. `"validation_error"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Validation => "validation_error",
            ErrorKind::Configuration => "configuration_error",
            ErrorKind::Execution => "execution_error",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Compensation => "compensation_error",
            ErrorKind::Routing => "routing_error",
            ErrorKind::Dispatch => "dispatch_error",
            ErrorKind::QueueOverflow => "queue_overflow",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Internal => "internal",
            ErrorKind::Storage => "storage_error",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Fenced => "fenced",
        }
    }

    /// The kind whose envelope `type` is `name`: the inverse of
    /// [`as_str`](ErrorKind::as_str), for envelopes that come back from
    /// another process. `None` for a type this version does not know.
    ///
    /// ```
    /// use jido::ErrorKind;
    /// assert_eq!(ErrorKind::from_type("timeout"), Some(ErrorKind::Timeout));
    /// assert_eq!(ErrorKind::from_type("no_such_error"), None);
    /// ```
    pub fn from_type(name: &str) -> Option<Self> {
        Some(match name {
            "validation_error" => ErrorKind::Validation,
            "configuration_error" => ErrorKind::Configuration,
            "execution_error" => ErrorKind::Execution,
            "timeout" => ErrorKind::Timeout,
            "compensation_error" => ErrorKind::Compensation,
            "routing_error" => ErrorKind::Routing,
            "dispatch_error" => ErrorKind::Dispatch,
            "queue_overflow" => ErrorKind::QueueOverflow,
            "not_found" => ErrorKind::NotFound,
            "cancelled" => ErrorKind::Cancelled,
            "internal" => ErrorKind::Internal,
            "storage_error" => ErrorKind::Storage,
            "conflict" => ErrorKind::Conflict,
            "fenced" => ErrorKind::Fenced,
            _ => return None,
        })
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of every fallible operation in `jido`.
///
/// Build one with a kind constructor ([`Error::validation`],
/// [`Error::execution`], …) and refine it with [`with_detail`](Error::with_detail),
/// [`with_details`](Error::with_details) and [`with_source`](Error::with_source).
#[derive(Clone)]
pub struct Error {
    kind: ErrorKind,
    message: Cow<'static, str>,
    details: Map<String, Value>,
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

macro_rules! kind_constructors {
    ($($(#[$doc:meta])* $name:ident => $kind:ident,)*) => {
        $(
            $(#[$doc])*
            pub fn $name(message: impl Into<Cow<'static, str>>) -> Self {
                Self::new(ErrorKind::$kind, message)
            }
        )*
    };
}

impl Error {
    /// A new error of `kind` with `message` and no details.
    pub fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind,
            message: message.into(),
            details: Map::new(),
            source: None,
        }
    }

    kind_constructors! {
        /// A [`ErrorKind::Validation`] error.
        validation => Validation,
        /// A [`ErrorKind::Configuration`] error.
        configuration => Configuration,
        /// An [`ErrorKind::Execution`] error.
        execution => Execution,
        /// A [`ErrorKind::Timeout`] error.
        timeout => Timeout,
        /// A [`ErrorKind::Compensation`] error.
        compensation => Compensation,
        /// A [`ErrorKind::Routing`] error.
        routing => Routing,
        /// A [`ErrorKind::Dispatch`] error.
        dispatch => Dispatch,
        /// A [`ErrorKind::QueueOverflow`] error.
        queue_overflow => QueueOverflow,
        /// A [`ErrorKind::NotFound`] error.
        not_found => NotFound,
        /// A [`ErrorKind::Cancelled`] error.
        cancelled => Cancelled,
        /// An [`ErrorKind::Internal`] error.
        internal => Internal,
        /// An [`ErrorKind::Storage`] error.
        storage => Storage,
        /// An [`ErrorKind::Conflict`] error.
        conflict => Conflict,
        /// An [`ErrorKind::Fenced`] error.
        fenced => Fenced,
    }

    /// Adds (or replaces) one detail.
    #[must_use]
    pub fn with_detail(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.details.insert(key.into(), value.into());
        self
    }

    /// Merges `details` into the error's details (later keys win). A value
    /// that is not a JSON object is stored under `"value"`.
    #[must_use]
    pub fn with_details(mut self, details: impl Into<Value>) -> Self {
        match details.into() {
            Value::Object(map) => self.details.extend(map),
            Value::Null => {}
            other => {
                self.details.insert("value".into(), other);
            }
        }
        self
    }

    /// Sets the underlying cause, returned by
    /// [`std::error::Error::source`].
    #[must_use]
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(source));
        self
    }

    /// Marks the error as not retryable (`details.retry = false`) or
    /// retryable (`true`), overriding the kind's default where the rules
    /// allow it (validation and configuration never retry, timeouts always
    /// do).
    #[must_use]
    pub fn with_retry(self, retry: bool) -> Self {
        self.with_detail("retry", retry)
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The short, human readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Structured details (never sanitised; see [`Error::to_envelope`]).
    pub fn details(&self) -> &Map<String, Value> {
        &self.details
    }

    /// One detail by key.
    pub fn detail(&self, key: &str) -> Option<&Value> {
        self.details.get(key)
    }

    /// Whether retrying the failed work may help. See the [module
    /// docs](self) for the rules.
    pub fn retryable(&self) -> bool {
        match self.kind {
            ErrorKind::Validation
            | ErrorKind::Configuration
            | ErrorKind::Cancelled
            | ErrorKind::Conflict
            | ErrorKind::Fenced => false,
            ErrorKind::Timeout => true,
            _ => retry_hint(&self.details, 0).unwrap_or(true),
        }
    }

    /// The canonical envelope `{type, message, details, retryable}` with
    /// the details [sanitised](sanitize).
    ///
    /// ```
    /// use jido::Error;
    /// use serde_json::json;
    ///
    /// let env = Error::execution("charge failed")
    ///     .with_detail("api_key", "sk-123")
    ///     .to_envelope();
    /// assert_eq!(
    ///     env,
    ///     json!({
    ///         "type": "execution_error",
    ///         "message": "charge failed",
    ///         "details": {"api_key": "[REDACTED]"},
    ///         "retryable": true
    ///     })
    /// );
    /// ```
    pub fn to_envelope(&self) -> Value {
        let mut env = Map::with_capacity(4);
        env.insert("type".into(), Value::String(self.kind.as_str().into()));
        env.insert("message".into(), Value::String(self.message.to_string()));
        env.insert(
            "details".into(),
            sanitize(&Value::Object(self.details.clone())),
        );
        env.insert("retryable".into(), Value::Bool(self.retryable()));
        Value::Object(env)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind).field("message", &self.message);
        if !self.details.is_empty() {
            d.field("details", &self.details);
        }
        if let Some(source) = &self.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

impl PartialEq for Error {
    /// Two errors are equal when kind, message and details are; sources are
    /// not compared.
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message && self.details == other.details
    }
}

/// Reads a retry hint (`retry` / `retryable`) from details, falling back
/// to the nested `reason` object.
fn retry_hint(details: &Map<String, Value>, depth: usize) -> Option<bool> {
    for key in ["retry", "retryable"] {
        match details.get(key) {
            Some(Value::Bool(b)) => return Some(*b),
            Some(Value::Null) | None => {}
            Some(_) => return Some(true),
        }
    }
    match details.get("reason") {
        Some(Value::Object(inner)) if depth < 8 => retry_hint(inner, depth + 1),
        _ => None,
    }
}

/// Deepest nesting kept by [`sanitize`]; deeper values are replaced.
pub const SANITIZE_MAX_DEPTH: usize = 4;
/// Most items kept per object or array by [`sanitize`].
pub const SANITIZE_MAX_ITEMS: usize = 20;
/// Longest string kept whole by [`sanitize`], in characters.
pub const SANITIZE_MAX_STRING: usize = 512;

const REDACTED: &str = "[REDACTED]";
/// Markers looked for in keys with case, `-` and `_` removed, so that
/// `api_key`, `API-KEY` and `apiKey` all match.
const SECRET_MARKERS: [&str; 7] = [
    "password",
    "secret",
    "token",
    "apikey",
    "authorization",
    "credential",
    "privatekey",
];

/// Returns a copy of `value` safe to log or hand to a model:
///
/// * nesting deeper than [`SANITIZE_MAX_DEPTH`] becomes `"[MAX_DEPTH]"`;
/// * objects and arrays keep their first [`SANITIZE_MAX_ITEMS`] items; an
///   object then gets `"__truncated__": <dropped>` and an array a last
///   string item `"...(N more)"`;
/// * strings longer than [`SANITIZE_MAX_STRING`] characters are cut and end
///   in `"...(truncated)"`;
/// * values under keys that look secret (containing `password`, `secret`,
///   `token`, `api_key`, `authorization`, `credential` or `private_key`,
///   compared in any case and with `-` / `_` ignored, so `API-KEY` and
///   `privateKey` match) become `"[REDACTED]"`; token counts such as
///   `max_tokens` or `input_tokens` are kept;
/// * values under `stacktrace` (same comparison) become `"[OMITTED]"`.
///
/// ```
/// use jido::error::sanitize;
/// use serde_json::json;
///
/// let clean = sanitize(&json!({"Auth-Token": "abc", "user": {"password": "p", "name": "ann"}}));
/// assert_eq!(clean, json!({"Auth-Token": "[REDACTED]", "user": {"password": "[REDACTED]", "name": "ann"}}));
/// ```
pub fn sanitize(value: &Value) -> Value {
    sanitize_with(value, &SanitizeLimits::ENVELOPE)
}

/// The bounds of [`sanitize_with`]: nesting depth, items per object or
/// array, characters per string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SanitizeLimits {
    /// Deepest nesting kept; deeper objects and arrays become
    /// `"[MAX_DEPTH]"`.
    pub max_depth: usize,
    /// Most items kept per object or array.
    pub max_items: usize,
    /// Longest string kept whole, in characters.
    pub max_string: usize,
}

impl SanitizeLimits {
    /// The bounds of error envelopes and logs ([`sanitize`]):
    /// [`SANITIZE_MAX_DEPTH`], [`SANITIZE_MAX_ITEMS`], [`SANITIZE_MAX_STRING`].
    pub const ENVELOPE: SanitizeLimits = SanitizeLimits {
        max_depth: SANITIZE_MAX_DEPTH,
        max_items: SANITIZE_MAX_ITEMS,
        max_string: SANITIZE_MAX_STRING,
    };
}

/// [`sanitize`] with other bounds (the same markers and redaction rules),
/// e.g. the larger ones of tool results handed to a model.
///
/// ```
/// use jido::error::{SanitizeLimits, sanitize_with};
/// use serde_json::json;
///
/// let limits = SanitizeLimits { max_depth: 8, max_items: 2, max_string: 3 };
/// assert_eq!(
///     sanitize_with(&json!({"list": [1, 2, 3], "word": "abcdef", "token": "t"}), &limits),
///     json!({"list": [1, 2, "...(1 more)"], "word": "abc...(truncated)", "__truncated__": 1})
/// );
/// ```
pub fn sanitize_with(value: &Value, limits: &SanitizeLimits) -> Value {
    // A value sanitising would give back as it is (the common case: small
    // arguments and results) is cloned: its maps are copied whole, no key
    // is hashed again.
    if is_clean(value, 1, limits) {
        value.clone()
    } else {
        sanitize_at(value, 1, limits)
    }
}

/// Whether [`sanitize_at`] gives `value` back unchanged at `depth`: no
/// string to cut, no object or array too deep or too long, no secret or
/// stack-trace key.
fn is_clean(value: &Value, depth: usize, limits: &SanitizeLimits) -> bool {
    match value {
        // At most as many characters as bytes.
        Value::String(s) => {
            s.len() <= limits.max_string || s.chars().nth(limits.max_string).is_none()
        }
        Value::Object(map) => {
            depth <= limits.max_depth
                && map.len() <= limits.max_items
                && map.iter().all(|(k, v)| {
                    !is_secret_key(k) && !is_stacktrace_key(k) && is_clean(v, depth + 1, limits)
                })
        }
        Value::Array(items) => {
            depth <= limits.max_depth
                && items.len() <= limits.max_items
                && items.iter().all(|v| is_clean(v, depth + 1, limits))
        }
        _ => true,
    }
}

fn sanitize_at(value: &Value, depth: usize, limits: &SanitizeLimits) -> Value {
    match value {
        Value::String(s) => Value::String(truncate_to(s, limits.max_string)),
        Value::Object(map) => {
            if depth > limits.max_depth {
                return Value::String("[MAX_DEPTH]".into());
            }
            let mut out = Map::with_capacity(map.len().min(limits.max_items + 1));
            for (key, v) in map.iter().take(limits.max_items) {
                let clean = if is_secret_key(key) {
                    Value::String(REDACTED.into())
                } else if is_stacktrace_key(key) {
                    Value::String("[OMITTED]".into())
                } else {
                    sanitize_at(v, depth + 1, limits)
                };
                out.insert(key.clone(), clean);
            }
            if map.len() > limits.max_items {
                out.insert(
                    "__truncated__".into(),
                    Value::from(map.len() - limits.max_items),
                );
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            if depth > limits.max_depth {
                return Value::String("[MAX_DEPTH]".into());
            }
            let mut out: Vec<Value> = items
                .iter()
                .take(limits.max_items)
                .map(|v| sanitize_at(v, depth + 1, limits))
                .collect();
            if items.len() > limits.max_items {
                out.push(Value::String(format!(
                    "...({} more)",
                    items.len() - limits.max_items
                )));
            }
            Value::Array(out)
        }
        other => other.clone(),
    }
}

/// [`sanitize_with`]'s value, serialised straight from `value` (no
/// sanitised copy is built): `serde_json::to_string(&Sanitized::new(v,
/// limits))` is the text of `sanitize_with(v, limits)`.
#[cfg(feature = "ai")]
pub(crate) struct Sanitized<'a> {
    value: &'a Value,
    depth: usize,
    limits: &'a SanitizeLimits,
}

#[cfg(feature = "ai")]
impl<'a> Sanitized<'a> {
    /// `value` sanitised with `limits`, when serialised.
    pub(crate) fn new(value: &'a Value, limits: &'a SanitizeLimits) -> Self {
        Sanitized {
            value,
            depth: 1,
            limits,
        }
    }

    fn child(&self, value: &'a Value) -> Self {
        Sanitized {
            value,
            depth: self.depth + 1,
            limits: self.limits,
        }
    }
}

#[cfg(feature = "ai")]
impl serde::Serialize for Sanitized<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        const TRUNCATED: &str = "__truncated__";
        let limits = self.limits;
        match self.value {
            Value::String(s) => {
                // At most as many characters as bytes: a short string is
                // kept without counting.
                if s.len() <= limits.max_string {
                    ser.serialize_str(s)
                } else {
                    ser.serialize_str(&truncate_to(s, limits.max_string))
                }
            }
            Value::Object(_) | Value::Array(_) if self.depth > limits.max_depth => {
                ser.serialize_str("[MAX_DEPTH]")
            }
            Value::Object(map) => {
                let extra = map.len().saturating_sub(limits.max_items);
                // `sanitize_at` inserts the count after the kept entries:
                // a kept `__truncated__` key takes it in its place.
                let in_place =
                    extra > 0 && map.keys().take(limits.max_items).any(|k| k == TRUNCATED);
                let kept = map.len().min(limits.max_items);
                let len = kept + usize::from(extra > 0 && !in_place);
                let mut m = ser.serialize_map(Some(len))?;
                for (key, v) in map.iter().take(limits.max_items) {
                    if in_place && key == TRUNCATED {
                        m.serialize_entry(key, &extra)?;
                    } else if is_secret_key(key) {
                        m.serialize_entry(key, REDACTED)?;
                    } else if is_stacktrace_key(key) {
                        m.serialize_entry(key, "[OMITTED]")?;
                    } else {
                        m.serialize_entry(key, &self.child(v))?;
                    }
                }
                if extra > 0 && !in_place {
                    m.serialize_entry(TRUNCATED, &extra)?;
                }
                m.end()
            }
            Value::Array(items) => {
                let extra = items.len().saturating_sub(limits.max_items);
                let kept = items.len().min(limits.max_items);
                let mut seq = ser.serialize_seq(Some(kept + usize::from(extra > 0)))?;
                for v in items.iter().take(limits.max_items) {
                    seq.serialize_element(&self.child(v))?;
                }
                if extra > 0 {
                    seq.serialize_element(&format!("...({extra} more)"))?;
                }
                seq.end()
            }
            other => serde::Serialize::serialize(other, ser),
        }
    }
}

/// `s` cut to [`SANITIZE_MAX_STRING`] characters the way [`sanitize`] cuts
/// strings (ending in `"...(truncated)"`); short strings are borrowed.
pub(crate) fn sanitize_str(s: &str) -> Cow<'_, str> {
    if s.len() <= SANITIZE_MAX_STRING {
        // At most as many characters as bytes.
        Cow::Borrowed(s)
    } else {
        Cow::Owned(truncate_string(s))
    }
}

fn truncate_string(s: &str) -> String {
    truncate_to(s, SANITIZE_MAX_STRING)
}

fn truncate_to(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((cut, _)) => format!("{}...(truncated)", &s[..cut]),
        None => s.to_owned(),
    }
}

fn is_secret_key(key: &str) -> bool {
    with_normalized_key(key, |normalized| {
        SECRET_MARKERS.iter().any(|m| {
            let m = m.as_bytes();
            normalized.windows(m.len()).enumerate().any(|(at, w)| {
                // `max_tokens`, `input_tokens`: token counts, not tokens.
                w == m && !(m == b"token" && normalized.get(at + m.len()) == Some(&b's'))
            })
        })
    })
}

fn is_stacktrace_key(key: &str) -> bool {
    with_normalized_key(key, |normalized| normalized == b"stacktrace")
}

/// Runs `f` on `key` in lowercase ASCII with `-` and `_` removed (bytes:
/// the markers are ASCII, so a match never splits a UTF-8 sequence). Keys
/// up to 64 bytes are normalised on the stack: sanitising allocates
/// nothing per key.
fn with_normalized_key<R>(key: &str, f: impl FnOnce(&[u8]) -> R) -> R {
    let kept = key
        .bytes()
        .filter(|b| *b != b'-' && *b != b'_')
        .map(|b| b.to_ascii_lowercase());
    let mut buf = [0u8; 64];
    if key.len() <= buf.len() {
        let mut n = 0;
        for (slot, b) in buf.iter_mut().zip(kept) {
            *slot = b;
            n += 1;
        }
        f(&buf[..n])
    } else {
        f(&kept.collect::<Vec<u8>>())
    }
}

/// The JSON type name of a value, for error messages.
pub(crate) fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[cfg(feature = "ai")]
    #[test]
    fn sanitized_serialises_as_sanitize_with() {
        let limits = SanitizeLimits {
            max_depth: 3,
            max_items: 2,
            max_string: 4,
        };
        let cases = [
            json!(null),
            json!(1.5),
            json!("abc"),
            json!("abcd"),
            json!("abcdé"),
            json!("ééééé"),
            json!([1, 2]),
            json!([1, 2, 3, 4]),
            json!({"a": 1, "b": 2}),
            json!({"a": 1, "b": 2, "c": 3}),
            json!({"__truncated__": "x", "b": 2, "c": 3}),
            json!({"a": 1, "__truncated__": "x", "c": 3}),
            json!({"a": 1, "b": 2, "__truncated__": "x"}),
            json!({"api_key": "k", "StackTrace": [1], "n": {"m": {"o": {"p": 1}}}}),
            json!([[[[1]]], {"x": {"y": {}}}, "long string"]),
        ];
        for v in cases {
            let fast = serde_json::to_string(&Sanitized::new(&v, &limits)).expect("text");
            assert_eq!(fast, sanitize_with(&v, &limits).to_string(), "{v}");
        }
    }

    #[test]
    fn token_counts_are_not_secrets() {
        let clean = sanitize(
            &json!({"max_tokens": 10, "usage": {"input_tokens": 3}, "id_token": "x", "tokenSecret": "y"}),
        );
        assert_eq!(
            clean,
            json!({"max_tokens": 10, "usage": {"input_tokens": 3}, "id_token": "[REDACTED]", "tokenSecret": "[REDACTED]"})
        );
    }

    #[test]
    fn keys_are_matched_without_case_dashes_or_underscores_at_any_length() {
        let long_secret = format!("{}Private-Key", "x".repeat(70));
        let long_plain = "y".repeat(70);
        let clean = sanitize(&json!({
            "X-API-Key": "k",
            "Stack_Trace": ["frame"],
            "stacktraces": "kept",
            "émoji_password": "p",
            long_secret.clone(): "s",
            long_plain.clone(): 1,
        }));
        assert_eq!(
            clean,
            json!({
                "X-API-Key": "[REDACTED]",
                "Stack_Trace": "[OMITTED]",
                "stacktraces": "kept",
                "émoji_password": "[REDACTED]",
                long_secret: "[REDACTED]",
                long_plain: 1,
            })
        );
    }

    #[test]
    fn nested_reason_hint_is_read() {
        let err =
            Error::execution("x").with_details(json!({"reason": {"reason": {"retry": false}}}));
        assert!(!err.retryable());
    }

    #[test]
    fn non_bool_hint_means_retryable() {
        let err = Error::internal("x").with_detail("retry", "maybe");
        assert!(err.retryable());
    }

    #[test]
    fn clean_values_are_cloned_as_the_full_walk_would_give_them() {
        let limits = SanitizeLimits {
            max_depth: 2,
            max_items: 2,
            max_string: 3,
        };
        for value in [
            json!({"a": 6, "b": 7}),
            json!({"a": "abc", "b": [1, "é€x"]}),
            json!({"a": "abcd"}),
            json!({"a": "é€xy"}),
            json!({"a": 1, "b": 2, "c": 3}),
            json!([1, 2, 3]),
            json!({"a": {"b": {"c": 1}}}),
            json!({"a": [[1]]}),
            json!({"api_key": "k"}),
            json!({"stacktrace": 1}),
            json!({"max_tokens": 1}),
            json!("abcd"),
            json!(null),
        ] {
            assert_eq!(
                sanitize_with(&value, &limits),
                sanitize_at(&value, 1, &limits),
                "{value}"
            );
        }
        assert!(is_clean(&json!({"a": "é€x", "b": [1]}), 1, &limits));
        assert!(!is_clean(&json!({"a": "é€xy"}), 1, &limits));
        assert!(!is_clean(&json!({"a": {"b": {"c": 1}}}), 1, &limits));
    }
}
