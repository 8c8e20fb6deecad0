//! Signals: CloudEvents 1.0.2 envelopes, the [router] and [dispatch].
//!
//! A [`Signal`] is how everything talks to an agent. It carries the
//! attributes of a CloudEvents 1.0.2 event:
//!
//! | attribute | value |
//! |---|---|
//! | `specversion` | always [`SPEC_VERSION`] (`"1.0.2"`, as in Jido) |
//! | `id` | a UUIDv7 unless given |
//! | `source` | [`DEFAULT_SOURCE`] unless given |
//! | `type` | required, e.g. `"order.placed"` |
//! | `subject` | optional |
//! | `time` | RFC 3339, the UTC creation time unless given |
//! | `datacontenttype` | `"application/json"` when there is data |
//! | `dataschema` | optional |
//! | `data` | optional JSON |
//! | extensions | further attributes, named by the CloudEvents rules (`[a-z0-9]+`) |
//!
//! [`Signal::new`] makes a signal from a type and data, [`Signal::builder`]
//! sets the rest, and [`TypedSignal`] declares a signal type with a fixed
//! `type` and a typed data struct.
//!
//! # JSON
//!
//! Signals serialise to the CloudEvents JSON event format ([`Signal::to_json_string`],
//! `serde::Serialize`) and parse from it ([`Signal::from_json_str`],
//! [`Signal::from_json_slice`], [`Signal::from_map`], `serde::Deserialize`)
//! with Jido's validation: a wrong or missing `specversion`, a missing or
//! empty `type` or `source`, and an `id`, `subject`, `time`,
//! `datacontenttype` or `dataschema` given but empty are
//! [`ErrorKind::Validation`](crate::ErrorKind::Validation) errors whose
//! `field` detail names the attribute. Unknown top-level attributes become
//! extensions. Data nested deeper than [`MAX_DATA_DEPTH`] levels is refused,
//! so hostile input can neither overflow the stack nor panic.
//!
//! **Spec version on the wire.** Jido writes and demands `"1.0.2"`, while
//! the CloudEvents specification (and SDKs such as `cloudevents-sdk` or
//! Python's `cloudevents`) write and demand `"1.0"` for every 1.0.x
//! revision. The JSON methods above write Jido's `"1.0.2"`;
//! [`Signal::to_cloudevents_json_string`] / [`Signal::as_cloudevent`] write
//! `"1.0"`; parsing reads both.
//!
//! # HTTP (feature `http`)
//!
//! HTTP and webhook dispatch ([`dispatch::HttpTarget`],
//! [`dispatch::WebhookTarget`]) speak the CloudEvents HTTP binding: by
//! default structured mode (`content-type: application/cloudevents+json;
//! charset=utf-8`, `specversion` `"1.0"`), binary mode (`ce-*` headers) with
//! [`ContentMode::Binary`], and Jido's own wire (`"1.0.2"` under
//! `application/json`) with `jido_specversion(true)`. A receiver turns a
//! request in any of these forms into an untrusted signal with
//! [`Signal::from_http`], after checking a webhook's signature with
//! [`dispatch::WebhookVerifier`].
//!
//! ```
//! use jido::signal::Signal;
//! use serde_json::json;
//!
//! let signal = Signal::builder("order.placed")
//!     .source("/shop")
//!     .subject("order-42")
//!     .data(json!({"total": 99}))
//!     .extension("tenant", "acme")
//!     .build()?;
//! assert_eq!(signal.ty(), "order.placed");
//! assert_eq!(signal.datacontenttype(), Some("application/json"));
//!
//! let text = signal.to_json_string();
//! let back = Signal::from_json_str(&text)?;
//! assert_eq!(back, signal);
//! assert_eq!(back.extension("tenant"), Some(&json!("acme")));
//!
//! let err = Signal::from_json_str(r#"{"specversion":"1.0.2","type":"","source":"/x"}"#).unwrap_err();
//! assert_eq!(err.message(), "invalid signal: missing type");
//! assert_eq!(err.detail("field"), Some(&json!("type")));
//! # Ok::<(), jido::Error>(())
//! ```

pub mod dispatch;
#[cfg(feature = "http")]
mod http;
pub(crate) mod json;
mod payload;
pub mod router;
mod stamp;
mod text;
mod typed;

#[cfg(feature = "http")]
pub use http::{CLOUDEVENTS_JSON_CONTENT_TYPE, ContentMode};
pub use json::CloudEvent;
pub use router::{Route, Router};
pub use typed::TypedSignal;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use payload::Data;
pub(crate) use stamp::{new_id, now_rfc3339};
use text::{Short, Text};

/// The `specversion` of every signal, as Jido writes it.
pub const SPEC_VERSION: &str = "1.0.2";
/// The `specversion` the CloudEvents specification writes for 1.0.x events.
/// Accepted when parsing; written by [`Signal::to_cloudevents_json_string`].
pub const CLOUDEVENTS_SPEC_VERSION: &str = "1.0";
/// The `source` of a signal made without one.
pub const DEFAULT_SOURCE: &str = "jido";
/// The `datacontenttype` of a signal with data and no explicit type.
pub const JSON_CONTENT_TYPE: &str = "application/json";
/// The deepest nesting of arrays and objects accepted in `data` (and in
/// extension values) when parsing or building a signal.
pub const MAX_DATA_DEPTH: usize = 100;

/// The CloudEvents context attributes; no extension may take these names.
pub const RESERVED_ATTRIBUTES: [&str; 10] = [
    "specversion",
    "id",
    "source",
    "type",
    "subject",
    "time",
    "datacontenttype",
    "dataschema",
    "data",
    "data_base64",
];

/// A CloudEvents 1.0.2 event. See the [module docs](self).
///
/// ```
/// use jido::signal::Signal;
/// use serde_json::json;
///
/// let s = Signal::new("user.created", json!({"id": 7}));
/// assert_eq!(s.ty(), "user.created");
/// assert_eq!(s.source(), "jido");
/// assert_eq!(s.id().len(), 36);
/// assert_eq!(s.data(), Some(&json!({"id": 7})));
/// assert_eq!(Signal::new("tick", serde_json::Value::Null).data(), None);
/// ```
///
/// # Typed payloads
///
/// Signals made and consumed in the same process (the AI runtime's
/// `ai.llm.response`, `ai.tool.result`, …) may carry their data as a typed
/// Rust value ([`Signal::typed`], [`SignalBuilder::payload`]) instead of
/// JSON. A reader in the process takes it with [`Signal::payload`] (no
/// JSON built, none decoded); [`Signal::data`], serialisation and `==`
/// see the JSON form, built from the value the first time it is asked for
/// and kept, so on the wire and to every JSON reader such a signal is the
/// same as one carrying that JSON. A signal read from JSON (a user, the
/// network, a restore) has JSON data only: a reader falls back to
/// decoding [`data`](Signal::data).
///
/// # Trust
///
/// Every signal carries a runtime-only **trust mark**. Signals made in the
/// process ([`Signal::new`], the builder, parsing JSON, the runtime's own
/// signals) are trusted. Code that turns outside input into signals (an
/// HTTP or webhook receiver, a cluster gateway: any *untrusted ingress*)
/// marks them with [`Signal::untrusted`] (or
/// [`mark_untrusted`](Signal::mark_untrusted)) before handing them to an
/// agent. The mark is never serialised and never read from JSON (an
/// attribute of that name would only be an extension), survives `clone`
/// and [`to_builder`](Signal::to_builder), and is not compared by `==`
/// (two signals are equal when their CloudEvents attributes are).
///
/// An AgentServer refuses an untrusted signal whose type is in the
/// runtime's reserved namespace `jido.agent.*` (`jido.agent.stop`,
/// `jido.agent.child.*`, `jido.agent.orphaned`, `jido.agent.error`, …):
/// outside input can neither stop an agent nor fake hierarchy or error
/// events, unless the agent opts in with
/// [`ServerOptions::allow_untrusted_runtime_signals`](crate::server::ServerOptions::allow_untrusted_runtime_signals).
///
/// ```
/// use jido::signal::Signal;
///
/// let s = Signal::new("jido.agent.stop", serde_json::Value::Null);
/// assert!(s.is_trusted());
/// let s = s.untrusted();
/// assert!(!s.is_trusted());
/// assert!(!s.clone().is_trusted());
/// // Never on the wire: what is parsed back is trusted again.
/// assert!(Signal::from_json_str(&s.to_json_string())?.is_trusted());
/// # Ok::<(), jido::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    /// Inline when generated (a UUIDv7): no allocation per signal.
    pub(crate) id: Text<36>,
    /// `None` for [`DEFAULT_SOURCE`] (never `Some` of it), inline when
    /// short (the crate's own sources): no allocation per signal.
    pub(crate) source: Option<Short>,
    /// Inline when short (see [`Short`]): no allocation per signal.
    pub(crate) ty: Short,
    pub(crate) subject: Option<Box<str>>,
    /// Inline when generated (the creation time with microseconds).
    pub(crate) time: Option<Text<27>>,
    pub(crate) datacontenttype: MediaType,
    pub(crate) dataschema: Option<Box<str>>,
    /// JSON, or a typed value with its JSON built on first read.
    pub(crate) data: Option<Data>,
    pub(crate) extensions: Extensions,
    pub(crate) trust: Trust,
}

/// A local-only ractor message (used as an actor's `Msg` by examples and
/// benches): with feature `cluster` the blanket impl is gone, and a signal
/// crosses nodes only as CloudEvents JSON through the gateway.
#[cfg(feature = "cluster")]
impl ractor::Message for Signal {}

/// A signal's `datacontenttype`: the JSON default without an allocation
/// (most signals), any other type boxed.
#[derive(Clone, Default, PartialEq)]
pub(crate) enum MediaType {
    #[default]
    Absent,
    Json,
    Other(Box<str>),
}

impl MediaType {
    pub(crate) fn from_text(text: Option<String>) -> Self {
        match text {
            None => MediaType::Absent,
            Some(t) if t == JSON_CONTENT_TYPE => MediaType::Json,
            Some(t) => MediaType::Other(t.into_boxed_str()),
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            MediaType::Absent => None,
            MediaType::Json => Some(JSON_CONTENT_TYPE),
            MediaType::Other(t) => Some(t),
        }
    }
}

impl std::fmt::Debug for MediaType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

/// The extension attributes of a signal: boxed, and absent when there are
/// none (most signals), so a signal is 64 bytes smaller (it is moved on
/// every send) and an empty one allocates nothing.
#[derive(Clone, Default, PartialEq)]
pub(crate) struct Extensions(Option<Box<Map<String, Value>>>);

impl Extensions {
    pub(crate) fn from_map(map: Map<String, Value>) -> Self {
        Self((!map.is_empty()).then(|| Box::new(map)))
    }

    pub(crate) fn into_map(self) -> Map<String, Value> {
        self.0.map(|m| *m).unwrap_or_default()
    }

    pub(crate) fn as_map(&self) -> &Map<String, Value> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        match &self.0 {
            Some(map) => map,
            None => EMPTY.get_or_init(Map::new),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |m| m.len())
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Value> {
        self.0.as_ref()?.get(name)
    }

    pub(crate) fn insert(&mut self, name: String, value: Value) {
        self.0.get_or_insert_with(Box::default).insert(name, value);
    }

    pub(crate) fn remove(&mut self, name: &str) -> Option<Value> {
        let map = self.0.as_mut()?;
        let value = map.remove(name);
        if map.is_empty() {
            self.0 = None;
        }
        value
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter().flat_map(|m| m.iter())
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_map().fmt(f)
    }
}

/// The runtime-only trust mark of a [`Signal`] (see "Trust" there). Always
/// equal to another mark, so it never makes two signals differ.
#[derive(Clone, Copy, Default)]
pub(crate) struct Trust {
    untrusted: bool,
}

impl Trust {
    pub(crate) const UNTRUSTED: Trust = Trust { untrusted: true };
}

impl PartialEq for Trust {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.untrusted {
            "untrusted"
        } else {
            "trusted"
        })
    }
}

/// The id of a signal as a UUIDv7, when it is one (always, for the ids
/// the runtime generates): the id the instructions routed from it share.
pub(crate) fn uuid_v7(signal: &Signal) -> Option<uuid::Uuid> {
    let id = match &signal.id {
        Text::Inline(bytes) => uuid::Uuid::try_parse_ascii(bytes),
        Text::Heap(text) => uuid::Uuid::try_parse(text),
    };
    id.ok().filter(|id| id.get_version_num() == 7)
}

impl Signal {
    /// A new signal of type `ty` carrying `data` (`Value::Null` for none),
    /// with a fresh UUIDv7 id, source [`DEFAULT_SOURCE`], the current time
    /// and `datacontenttype` `"application/json"` when there is data.
    ///
    /// This never fails; it does not check `ty`. Use
    /// [`Signal::builder`] for validation and the other attributes.
    pub fn new(ty: impl AsRef<str>, data: impl Into<Value>) -> Self {
        let data = data.into();
        let data = (!data.is_null()).then_some(Data::Json(data));
        let (id, time) = stamp::id_and_time();
        Self {
            id,
            source: None,
            ty: Short::new(ty.as_ref()),
            subject: None,
            time: Some(time),
            datacontenttype: if data.is_some() {
                MediaType::Json
            } else {
                MediaType::Absent
            },
            dataschema: None,
            data,
            extensions: Extensions::default(),
            trust: Trust::default(),
        }
    }

    /// [`Signal::typed`] with a `source`, for the crate's own signal types
    /// and sources: constants its tests hold valid, so the builder's
    /// checks are skipped (debug builds still run them).
    #[cfg(feature = "ai")]
    pub(crate) fn typed_from<T: serde::Serialize + Send + Sync + 'static>(
        ty: &'static str,
        source: &'static str,
        value: T,
    ) -> Self {
        debug_assert!(
            Signal::builder(ty).source(source).build().is_ok(),
            "invalid built-in signal type or source: {ty} {source}"
        );
        let mut signal = Signal::typed(ty, value);
        if source != DEFAULT_SOURCE {
            signal.source = Some(Short::new(source));
        }
        signal
    }

    /// A builder for a signal of type `ty`; see [`SignalBuilder`].
    pub fn builder(ty: impl Into<String>) -> SignalBuilder {
        SignalBuilder::new(ty)
    }

    /// A builder holding every attribute of this signal, to change some and
    /// build again (with validation).
    pub fn to_builder(&self) -> SignalBuilder {
        self.clone().into_builder()
    }

    /// Like [`to_builder`](Signal::to_builder), consuming the signal.
    pub fn into_builder(self) -> SignalBuilder {
        SignalBuilder {
            ty: self.ty.into_string(),
            id: Some(self.id.into_string()),
            source: self.source.map(Short::into_string),
            subject: self.subject.map(String::from),
            time: Some(
                self.time
                    .map_or(TimeAttr::Absent, |t| TimeAttr::Raw(t.into_string())),
            ),
            datacontenttype: self.datacontenttype.as_str().map(str::to_owned),
            dataschema: self.dataschema.map(String::from),
            data: self.data,
            extensions: self.extensions.into_map(),
            trust: self.trust,
        }
    }

    /// This signal marked as coming from an untrusted ingress (see "Trust"
    /// on [`Signal`]). Call it in code that turns outside input (HTTP,
    /// webhooks, a cluster gateway) into signals.
    pub fn untrusted(mut self) -> Self {
        self.mark_untrusted();
        self
    }

    /// Marks this signal as coming from an untrusted ingress (see
    /// [`Signal::untrusted`]). There is no way back: a trusted copy must
    /// be built anew by trusted code.
    pub fn mark_untrusted(&mut self) {
        self.trust = Trust::UNTRUSTED;
    }

    /// Whether the signal was made in the process (`true`, the default) or
    /// marked as coming from an untrusted ingress (`false`).
    pub fn is_trusted(&self) -> bool {
        !self.trust.untrusted
    }

    /// Always [`SPEC_VERSION`].
    pub fn specversion(&self) -> &'static str {
        SPEC_VERSION
    }

    /// The event type, e.g. `"order.placed"`.
    pub fn ty(&self) -> &str {
        self.ty.as_str()
    }

    /// Whether the event type is `ty` (as `self.ty() == ty`, without
    /// reading the type as text).
    pub(crate) fn is_type(&self, ty: &str) -> bool {
        self.ty.is(ty)
    }

    /// The event id.
    pub fn id(&self) -> &str {
        self.id.as_str()
    }

    /// The event source.
    pub fn source(&self) -> &str {
        self.source.as_ref().map_or(DEFAULT_SOURCE, Short::as_str)
    }

    /// The subject, if any.
    pub fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }

    /// The time as written (RFC 3339), if any.
    pub fn time(&self) -> Option<&str> {
        self.time.as_ref().map(Text::as_str)
    }

    /// The time converted to UTC, if any.
    pub fn time_utc(&self) -> Option<DateTime<Utc>> {
        self.time()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc))
    }

    /// The media type of [`data`](Signal::data), if any.
    pub fn datacontenttype(&self) -> Option<&str> {
        self.datacontenttype.as_str()
    }

    /// The schema URI of the data, if any.
    pub fn dataschema(&self) -> Option<&str> {
        self.dataschema.as_deref()
    }

    /// The payload, if any, as JSON. For a [typed
    /// payload](Signal#typed-payloads) it is built on the first call (what
    /// serde writes for the value) and kept.
    pub fn data(&self) -> Option<&Value> {
        self.data.as_ref().and_then(Data::json)
    }

    /// The payload as JSON, consuming the signal.
    pub fn into_data(self) -> Option<Value> {
        self.data.and_then(Data::into_json)
    }

    /// The typed payload, when the signal was built with one of type `T`
    /// ([`Signal::typed`], [`SignalBuilder::payload`]); `None` for a
    /// payload of another type and for JSON data (a parsed signal, one
    /// made with [`Signal::new`]): read [`data`](Signal::data) then.
    ///
    /// ```
    /// use jido::signal::Signal;
    /// use serde_json::json;
    ///
    /// #[derive(serde::Serialize, Debug, PartialEq)]
    /// struct Placed { total: u32 }
    ///
    /// let s = Signal::typed("order.placed", Placed { total: 12 });
    /// assert_eq!(s.payload::<Placed>(), Some(&Placed { total: 12 }));
    /// assert_eq!(s.data(), Some(&json!({"total": 12})));
    ///
    /// let parsed = Signal::from_json_str(&s.to_json_string())?;
    /// assert_eq!(parsed.payload::<Placed>(), None);
    /// assert_eq!(parsed, s);
    /// # Ok::<(), jido::Error>(())
    /// ```
    pub fn payload<T: 'static>(&self) -> Option<&T> {
        self.data.as_ref()?.payload::<T>()
    }

    /// Whether the data is a typed payload (see
    /// [`payload`](Signal::payload)).
    pub fn has_typed_payload(&self) -> bool {
        self.data.as_ref().is_some_and(Data::is_typed)
    }

    /// A new signal of type `ty` carrying the typed payload `value` (as
    /// [`Signal::new`] otherwise: fresh id, default source, current time,
    /// `datacontenttype` `"application/json"`). Its JSON form
    /// ([`data`](Signal::data), serialisation) is what serde writes for
    /// `value`, built only when first needed; in-process readers take the
    /// value itself with [`payload`](Signal::payload). The value must not
    /// serialise to `null`.
    pub fn typed<T: serde::Serialize + Send + Sync + 'static>(
        ty: impl AsRef<str>,
        value: T,
    ) -> Self {
        let mut signal = Signal::new(ty, Value::Null);
        signal.data = Some(Data::typed(value));
        signal.datacontenttype = MediaType::Json;
        signal
    }

    /// Decodes the payload into `T` (a missing payload reads as `null`).
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::Validation`](crate::ErrorKind::Validation) error
    /// whose `path` detail names the failing field.
    ///
    /// ```
    /// use jido::signal::Signal;
    /// use serde_json::json;
    ///
    /// #[derive(Debug, serde::Deserialize)]
    /// struct Order { total: u32 }
    ///
    /// let s = Signal::new("order.placed", json!({"total": 12}));
    /// assert_eq!(s.data_as::<Order>()?.total, 12);
    /// let err = Signal::new("order.placed", json!({"total": "x"})).data_as::<Order>().unwrap_err();
    /// assert_eq!(err.detail("path"), Some(&json!("total")));
    /// # Ok::<(), jido::Error>(())
    /// ```
    pub fn data_as<T: DeserializeOwned>(&self) -> Result<T> {
        decode_data(self.ty.as_str(), self.data())
    }

    /// All extension attributes.
    pub fn extensions(&self) -> &Map<String, Value> {
        self.extensions.as_map()
    }

    /// One extension attribute.
    pub fn extension(&self, name: &str) -> Option<&Value> {
        self.extensions.get(name)
    }

    /// Sets an extension attribute (`Value::Null` removes it).
    ///
    /// # Errors
    ///
    /// A validation error when `name` breaks the CloudEvents naming rules
    /// (`[a-z0-9]+`) or is a context attribute, or when the value is nested
    /// deeper than [`MAX_DATA_DEPTH`].
    pub fn put_extension(
        &mut self,
        name: impl Into<String>,
        value: impl Into<Value>,
    ) -> Result<()> {
        let name = name.into();
        let value = value.into();
        check_extension(&name, &value)?;
        if value.is_null() {
            self.extensions.remove(&name);
        } else {
            self.extensions.insert(name, value);
        }
        Ok(())
    }

    /// Removes an extension attribute, returning its value.
    pub fn remove_extension(&mut self, name: &str) -> Option<Value> {
        self.extensions.remove(name)
    }
}

pub(crate) fn decode_data<T: DeserializeOwned>(ty: &str, data: Option<&Value>) -> Result<T> {
    let value = data.cloned().unwrap_or(Value::Null);
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let reason = err.into_inner().to_string();
        let message = if path == "." {
            format!("invalid data for signal {ty}: {reason}")
        } else {
            format!("invalid data for signal {ty}: {path}: {reason}")
        };
        Error::validation(message)
            .with_detail("signal_type", ty)
            .with_detail("path", path)
            .with_detail("reason", reason)
    })
}

/// How the builder got its time.
#[derive(Debug, Clone, PartialEq)]
enum TimeAttr {
    Absent,
    Raw(String),
}

/// Builds a [`Signal`] with validation. Made by [`Signal::builder`].
///
/// Unset attributes take the defaults of [`Signal::new`]: a UUIDv7 id,
/// [`DEFAULT_SOURCE`], the current time and `"application/json"` when there
/// is data.
///
/// ```
/// use jido::signal::Signal;
/// use jido::ErrorKind;
/// use serde_json::json;
///
/// let s = Signal::builder("user.login")
///     .source("/auth")
///     .id("evt-1")
///     .dataschema("https://example.com/login.json")
///     .data(json!({"user": "ann"}))
///     .build()?;
/// assert_eq!(s.id(), "evt-1");
///
/// let err = Signal::builder("user.login").subject("").build().unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Validation);
/// assert_eq!(err.message(), "invalid signal: subject given but empty");
/// # Ok::<(), jido::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct SignalBuilder {
    ty: String,
    id: Option<String>,
    source: Option<String>,
    subject: Option<String>,
    time: Option<TimeAttr>,
    datacontenttype: Option<String>,
    dataschema: Option<String>,
    data: Option<Data>,
    extensions: Map<String, Value>,
    trust: Trust,
}

impl SignalBuilder {
    /// A builder for a signal of type `ty`.
    pub fn new(ty: impl Into<String>) -> Self {
        Self {
            ty: ty.into(),
            id: None,
            source: None,
            subject: None,
            time: None,
            datacontenttype: None,
            dataschema: None,
            data: None,
            extensions: Map::new(),
            trust: Trust::default(),
        }
    }

    /// Sets the type.
    pub fn ty(mut self, ty: impl Into<String>) -> Self {
        self.ty = ty.into();
        self
    }

    /// Sets the id (default: a fresh UUIDv7).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the source (default: [`DEFAULT_SOURCE`]).
    pub fn source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// Sets the subject.
    pub fn subject(mut self, subject: impl Into<String>) -> Self {
        self.subject = Some(subject.into());
        self
    }

    /// Sets the time (default: now).
    pub fn time(mut self, time: DateTime<Utc>) -> Self {
        self.time = Some(TimeAttr::Raw(
            time.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        ));
        self
    }

    /// Sets the time from an RFC 3339 string, checked by
    /// [`build`](SignalBuilder::build).
    pub fn time_rfc3339(mut self, time: impl Into<String>) -> Self {
        self.time = Some(TimeAttr::Raw(time.into()));
        self
    }

    /// Leaves the time out.
    pub fn no_time(mut self) -> Self {
        self.time = Some(TimeAttr::Absent);
        self
    }

    /// Sets the data content type (default: `"application/json"` when
    /// there is data).
    pub fn datacontenttype(mut self, datacontenttype: impl Into<String>) -> Self {
        self.datacontenttype = Some(datacontenttype.into());
        self
    }

    /// Sets the data schema URI.
    pub fn dataschema(mut self, dataschema: impl Into<String>) -> Self {
        self.dataschema = Some(dataschema.into());
        self
    }

    /// Sets the data (`Value::Null` for none).
    pub fn data(mut self, data: impl Into<Value>) -> Self {
        let data = data.into();
        self.data = (!data.is_null()).then_some(Data::Json(data));
        self
    }

    /// Sets a typed payload (see [`Signal::typed`]): its JSON form is
    /// built when first read and is not checked by
    /// [`build`](SignalBuilder::build) (in-process data). It must not
    /// serialise to `null`.
    pub fn payload<T: serde::Serialize + Send + Sync + 'static>(mut self, value: T) -> Self {
        self.data = Some(Data::typed(value));
        self
    }

    /// Sets an extension attribute (`Value::Null` removes it); the name is
    /// checked by [`build`](SignalBuilder::build).
    pub fn extension(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        let name = name.into();
        let value = value.into();
        if value.is_null() {
            self.extensions.remove(&name);
        } else {
            self.extensions.insert(name, value);
        }
        self
    }

    /// Validates and builds the signal. It keeps the trust mark of the
    /// signal the builder came from ([`Signal::to_builder`]); a new
    /// builder makes a trusted signal.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::Validation`](crate::ErrorKind::Validation) error
    /// naming the attribute (`field` detail): `missing type`, `missing
    /// source`, `<field> given but empty`, `time is not an rfc 3339
    /// timestamp`, `data field given but empty` (data `""`), data nested
    /// too deep, or a bad extension name.
    pub fn build(self) -> Result<Signal> {
        // Generated (inline) when not given.
        let (now, time) = match self.time {
            None => (true, None),
            Some(TimeAttr::Absent) => (false, None),
            Some(TimeAttr::Raw(t)) => (false, Some(t)),
        };
        let raw = json::RawSignal {
            specversion: None,
            id: self.id.map(json::Attr::Str),
            source: Some(json::Attr::Str(
                self.source.unwrap_or_else(|| DEFAULT_SOURCE.to_owned()),
            )),
            ty: Some(json::Attr::Str(self.ty)),
            subject: self.subject.map(json::Attr::Str),
            time: time.map(json::Attr::Str),
            datacontenttype: self.datacontenttype.map(json::Attr::Str),
            dataschema: self.dataschema.map(json::Attr::Str),
            data: None,
            extensions: self.extensions,
        };
        // JSON data is checked (empty, depth); a typed payload is the
        // process's own value.
        let (json_data, typed) = match self.data {
            Some(Data::Json(v)) => (Some(v), None),
            Some(typed) => (None, Some(typed)),
            None => (None, None),
        };
        let raw = json::RawSignal {
            data: json_data,
            ..raw
        };
        let mut signal = json::validate(raw, false)?;
        if let Some(typed) = typed {
            signal.data = Some(typed);
            if signal.datacontenttype == MediaType::Absent {
                signal.datacontenttype = MediaType::Json;
            }
        }
        if now {
            signal.time = Some(now_rfc3339());
        }
        signal.trust = self.trust;
        Ok(signal)
    }
}

/// An error about one attribute of a signal.
pub(crate) fn invalid(field: &str, reason: &'static str, message: String) -> Error {
    Error::validation(format!("invalid signal: {message}"))
        .with_detail("field", field)
        .with_detail("reason", reason)
}

/// Checks an extension's name and value.
pub(crate) fn check_extension(name: &str, value: &Value) -> Result<()> {
    if RESERVED_ATTRIBUTES.contains(&name) {
        return Err(invalid(
            name,
            "reserved",
            format!("extension name {name} is reserved"),
        ));
    }
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err(invalid(
            name,
            "invalid_name",
            format!("extension name {name:?} must be lowercase letters and digits"),
        ));
    }
    check_depth(name, value)
}

/// Checks that `value` nests at most [`MAX_DATA_DEPTH`] arrays/objects,
/// without recursion.
pub(crate) fn check_depth(field: &str, value: &Value) -> Result<()> {
    if depth_exceeds(value, MAX_DATA_DEPTH) {
        Err(too_deep(field))
    } else {
        Ok(())
    }
}

pub(crate) fn too_deep(field: &str) -> Error {
    invalid(
        field,
        "too_deep",
        format!("{field} nested deeper than {MAX_DATA_DEPTH} levels"),
    )
    .with_detail("max_depth", MAX_DATA_DEPTH)
}

/// Whether `value` nests more than `max` levels of arrays and objects. The
/// recursion stops one level past `max`, so it is bounded whatever the
/// input, and it does not allocate.
fn depth_exceeds(value: &Value, max: usize) -> bool {
    match value {
        Value::Array(items) => max == 0 || items.iter().any(|v| depth_exceeds(v, max - 1)),
        Value::Object(map) => max == 0 || map.values().any(|v| depth_exceeds(v, max - 1)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(depth: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..depth {
            v = json!([v]);
        }
        v
    }

    #[test]
    fn depth_is_counted_in_containers() {
        assert!(!depth_exceeds(&json!(1), 0));
        assert!(!depth_exceeds(&nested(3), 3));
        assert!(depth_exceeds(&nested(4), 3));
        assert!(!depth_exceeds(&json!({"a": [1, {"b": 2}]}), 3));
        assert!(depth_exceeds(&json!({"a": [1, {"b": [2]}]}), 3));
    }
}

#[cfg(test)]
mod id_tests {
    use super::*;

    #[test]
    fn new_id_is_a_uuid_v7() {
        let id = new_id();
        assert!(matches!(id, Text::Inline(_)));
        let id = id.as_str();
        let parsed = uuid::Uuid::parse_str(id).unwrap();
        assert_eq!(parsed.get_version_num(), 7);
        assert_eq!(parsed.hyphenated().to_string(), id);
    }

    #[test]
    fn new_signal_ids_grow() {
        let mut last = String::new();
        for _ in 0..1000 {
            let s = Signal::new("t", Value::Null);
            assert!(s.id() > last.as_str(), "{} after {last}", s.id());
            last = s.id().to_owned();
        }
    }

    #[test]
    fn a_signal_stays_small() {
        // Moved on every send, and held in every agent's message loop
        // (248 bytes before the type was kept inline, 256 before the
        // source was: each time 8 bytes more per move against an
        // allocation and a free on two threads).
        assert!(std::mem::size_of::<Signal>() <= 264);
    }
}
