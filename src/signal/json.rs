//! The CloudEvents JSON event format: serialisation, parsing and the
//! validation shared with the builder.

use std::borrow::Cow;
use std::fmt;

use chrono::DateTime;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::{
    CLOUDEVENTS_SPEC_VERSION, JSON_CONTENT_TYPE, SPEC_VERSION, Signal, check_depth,
    check_extension, invalid, new_id, too_deep,
};
use crate::error::{Error, Result};

/// A context attribute as read: a string (owned, or borrowed from the
/// JSON text being read when it has no escapes: no allocation), or
/// something else (named by its JSON type, for the error).
#[derive(Debug)]
pub(crate) enum Attr<'a> {
    Str(String),
    Ref(&'a str),
    Other(&'static str),
}

impl Attr<'_> {
    /// The string, when it is one.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Attr::Str(s) => Some(s),
            Attr::Ref(s) => Some(s),
            Attr::Other(_) => None,
        }
    }
}

/// An event as read, before validation. `None` = absent or `null`.
#[derive(Debug, Default)]
pub(crate) struct RawSignal<'a> {
    pub(crate) specversion: Option<Attr<'a>>,
    pub(crate) id: Option<Attr<'a>>,
    pub(crate) source: Option<Attr<'a>>,
    pub(crate) ty: Option<Attr<'a>>,
    pub(crate) subject: Option<Attr<'a>>,
    pub(crate) time: Option<Attr<'a>>,
    pub(crate) datacontenttype: Option<Attr<'a>>,
    pub(crate) dataschema: Option<Attr<'a>>,
    pub(crate) data: Option<Value>,
    pub(crate) extensions: Map<String, Value>,
}

fn string_attr<'a>(field: &str, attr: Option<Attr<'a>>) -> Result<Option<Cow<'a, str>>> {
    match attr {
        None => Ok(None),
        Some(Attr::Str(s)) => Ok(Some(Cow::Owned(s))),
        Some(Attr::Ref(s)) => Ok(Some(Cow::Borrowed(s))),
        Some(Attr::Other(kind)) => Err(invalid(
            field,
            "invalid",
            format!("{field} must be a string, got {kind}"),
        )),
    }
}

/// An optional attribute: absent is fine, empty is not.
fn optional_attr<'a>(field: &str, attr: Option<Attr<'a>>) -> Result<Option<Cow<'a, str>>> {
    match string_attr(field, attr)? {
        Some(s) if s.is_empty() => Err(invalid(field, "empty", format!("{field} given but empty"))),
        other => Ok(other),
    }
}

/// A required attribute: absent and empty are both "missing".
fn required_attr<'a>(field: &str, attr: Option<Attr<'a>>) -> Result<Cow<'a, str>> {
    match string_attr(field, attr)? {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(invalid(field, "missing", format!("missing {field}"))),
    }
}

/// Whether `t` is an RFC 3339 timestamp. The form the runtime writes
/// (`YYYY-MM-DDTHH:MM:SS` with an optional fraction and `Z`) is checked
/// by hand when its day is at most 28 (valid in every month, so nothing
/// chrono would refuse is accepted); anything else is chrono's to judge.
pub(crate) fn is_rfc3339(t: &str) -> bool {
    utc_in_runtime_form(t.as_bytes()) || DateTime::parse_from_rfc3339(t).is_ok()
}

fn utc_in_runtime_form(t: &[u8]) -> bool {
    let two = |i: usize| -> Option<u8> {
        let (a, b) = (*t.get(i)?, *t.get(i + 1)?);
        (a.is_ascii_digit() && b.is_ascii_digit()).then(|| (a - b'0') * 10 + (b - b'0'))
    };
    let shape = t.len() >= 20
        && t[..4].iter().all(u8::is_ascii_digit)
        && t[4] == b'-'
        && t[7] == b'-'
        && t[10] == b'T'
        && t[13] == b':'
        && t[16] == b':'
        && t.last() == Some(&b'Z');
    if !shape {
        return false;
    }
    let fraction = &t[19..t.len() - 1];
    let fraction_ok = fraction.is_empty()
        || ((2..=10).contains(&fraction.len())
            && fraction[0] == b'.'
            && fraction[1..].iter().all(u8::is_ascii_digit));
    let year_ok = &t[..4] != b"0000";
    matches!(two(5), Some(1..=12))
        && matches!(two(8), Some(1..=28))
        && matches!(two(11), Some(0..=23))
        && matches!(two(14), Some(0..=59))
        && matches!(two(17), Some(0..=59))
        && fraction_ok
        && year_ok
}

/// Jido's validation of an event. `wire` = read from JSON or a map (a
/// specversion is then required).
pub(crate) fn validate(raw: RawSignal<'_>, wire: bool) -> Result<Signal> {
    if wire {
        match string_attr("specversion", raw.specversion)? {
            None => {
                return Err(invalid(
                    "specversion",
                    "missing",
                    "missing specversion".into(),
                ));
            }
            Some(v) if v == SPEC_VERSION || v == CLOUDEVENTS_SPEC_VERSION => {}
            Some(v) => {
                return Err(invalid(
                    "specversion",
                    "unexpected",
                    format!("unexpected specversion {v}"),
                )
                .with_detail("value", v.into_owned()));
            }
        }
    }
    let ty = required_attr("type", raw.ty)?;
    let source = required_attr("source", raw.source)?;
    let id = optional_attr("id", raw.id)?.map_or_else(new_id, text);
    let subject = optional_attr("subject", raw.subject)?;
    let time = optional_attr("time", raw.time)?;
    if let Some(t) = &time
        && !is_rfc3339(t)
    {
        return Err(invalid(
            "time",
            "invalid",
            "time is not an rfc 3339 timestamp".into(),
        ));
    }
    let datacontenttype = optional_attr("datacontenttype", raw.datacontenttype)?;
    let dataschema = optional_attr("dataschema", raw.dataschema)?;
    let data = raw.data.filter(|d| !d.is_null());
    if let Some(d) = &data {
        if d.as_str() == Some("") {
            return Err(invalid(
                "data",
                "empty",
                "data field given but empty".into(),
            ));
        }
        check_depth("data", d)?;
    }
    for (name, value) in &raw.extensions {
        check_extension(name, value)?;
    }
    let datacontenttype = match datacontenttype {
        None if data.is_some() => super::MediaType::Json,
        None => super::MediaType::Absent,
        Some(Cow::Owned(t)) => super::MediaType::from_text(Some(t)),
        Some(Cow::Borrowed(t)) if t == JSON_CONTENT_TYPE => super::MediaType::Json,
        Some(Cow::Borrowed(t)) => super::MediaType::Other(t.into()),
    };
    Ok(Signal {
        id,
        source: (source != super::DEFAULT_SOURCE).then(|| match source {
            Cow::Borrowed(s) => super::text::Short::new(s),
            Cow::Owned(s) => super::text::Short::from_string(s),
        }),
        ty: match ty {
            Cow::Borrowed(t) => super::text::Short::new(t),
            Cow::Owned(t) => super::text::Short::from_string(t),
        },
        subject: subject.map(boxed),
        time: time.map(text),
        datacontenttype,
        dataschema: dataschema.map(boxed),
        data: data.map(super::payload::Data::Json),
        extensions: super::Extensions::from_map(raw.extensions),
        trust: super::Trust::default(),
    })
}

/// `text` in its own buffer (no copy when it already has one).
fn boxed(text: Cow<'_, str>) -> Box<str> {
    match text {
        Cow::Borrowed(t) => t.into(),
        Cow::Owned(t) => t.into_boxed_str(),
    }
}

/// `text` inline when it has the length the runtime writes (a UUIDv7 id,
/// a time with microseconds) in ASCII, as a signal made here holds it;
/// else in its own buffer.
fn text<const N: usize>(text: Cow<'_, str>) -> super::Text<N> {
    match <[u8; N]>::try_from(text.as_bytes()) {
        Ok(bytes) if bytes.is_ascii() => super::Text::Inline(bytes),
        _ => super::Text::Heap(boxed(text)),
    }
}

fn attr_from_value(value: Value) -> Option<Attr<'static>> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(Attr::Str(s)),
        other => Some(Attr::Other(kind_of(&other))),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl RawSignal<'static> {
    fn set(&mut self, key: &str, value: Value) {
        let slot = match key {
            "specversion" => &mut self.specversion,
            "id" => &mut self.id,
            "source" => &mut self.source,
            "type" => &mut self.ty,
            "subject" => &mut self.subject,
            "time" => &mut self.time,
            "datacontenttype" => &mut self.datacontenttype,
            "dataschema" => &mut self.dataschema,
            "data" => {
                self.data = Some(value);
                return;
            }
            _ => {
                if !value.is_null() {
                    self.extensions.insert(key.to_owned(), value);
                }
                return;
            }
        };
        *slot = attr_from_value(value);
    }

    pub(crate) fn from_map(map: Map<String, Value>) -> Self {
        let mut raw = RawSignal::default();
        for (key, value) in map {
            raw.set(&key, value);
        }
        raw
    }
}

impl Signal {
    /// Parses a signal from CloudEvents JSON text. See the [module
    /// docs](super) for the rules.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::Validation`](crate::ErrorKind::Validation) error:
    /// `invalid signal: malformed json` (details `reason:
    /// "malformed_json"`, `error`), `invalid signal: expected a json
    /// object`, or an attribute error naming the `field`.
    pub fn from_json_str(json: &str) -> Result<Signal> {
        Self::from_json_slice(json.as_bytes())
    }

    /// Parses a signal from CloudEvents JSON bytes; see
    /// [`from_json_str`](Signal::from_json_str).
    ///
    /// # Errors
    ///
    /// As [`from_json_str`](Signal::from_json_str).
    pub fn from_json_slice(json: &[u8]) -> Result<Signal> {
        validate(parse_raw(json)?, true)
    }

    /// Makes a signal from a JSON value holding a CloudEvents JSON object.
    ///
    /// # Errors
    ///
    /// As [`from_map`](Signal::from_map); a value that is not an object
    /// gives `invalid signal: expected a json object`.
    pub fn from_value(value: Value) -> Result<Signal> {
        match value {
            Value::Object(map) => Self::from_map(map),
            other => Err(not_an_object(kind_of(&other))),
        }
    }

    /// Makes a signal from a map of attributes (as in the JSON format,
    /// `data` included). Unknown attributes become extensions; `null`
    /// values count as absent.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::Validation`](crate::ErrorKind::Validation) error
    /// naming the `field`: `missing specversion`, `unexpected specversion
    /// X`, `missing type`, `missing source`, `<field> given but empty`,
    /// `<field> must be a string, got <kind>`, `time is not an rfc 3339
    /// timestamp`, `data field given but empty`, data nested deeper than
    /// [`MAX_DATA_DEPTH`](super::MAX_DATA_DEPTH), or a bad extension name.
    pub fn from_map(map: Map<String, Value>) -> Result<Signal> {
        validate(RawSignal::from_map(map), true)
    }

    /// The signal as a CloudEvents JSON object (`specversion` `"1.0.2"`).
    pub fn to_json_value(&self) -> Value {
        Value::Object(self.to_map(SPEC_VERSION))
    }

    /// The signal as CloudEvents JSON text (`specversion` `"1.0.2"`).
    pub fn to_json_string(&self) -> String {
        // Serialising strings and JSON values into memory cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The signal as CloudEvents JSON bytes (`specversion` `"1.0.2"`).
    pub fn to_json_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        self.write_json(&mut out);
        out
    }

    /// The signal as CloudEvents JSON text with `specversion` `"1.0"`, the
    /// value the CloudEvents specification and its SDKs expect.
    ///
    /// ```
    /// use jido::signal::Signal;
    ///
    /// let s = Signal::new("ping", serde_json::Value::Null);
    /// assert!(s.to_cloudevents_json_string().starts_with(r#"{"specversion":"1.0","#));
    /// assert!(s.to_json_string().starts_with(r#"{"specversion":"1.0.2","#));
    /// ```
    pub fn to_cloudevents_json_string(&self) -> String {
        serde_json::to_string(&self.as_cloudevent()).unwrap_or_default()
    }

    /// A view of the signal that serialises with `specversion` `"1.0"`.
    pub fn as_cloudevent(&self) -> CloudEvent<'_> {
        CloudEvent(self)
    }

    fn to_map(&self, specversion: &str) -> Map<String, Value> {
        let mut map = Map::with_capacity(9 + self.extensions.len());
        map.insert("specversion".into(), specversion.into());
        map.insert("id".into(), self.id().into());
        map.insert("source".into(), self.source().into());
        map.insert("type".into(), self.ty().into());
        let optional = [
            ("subject", self.subject()),
            ("time", self.time()),
            ("datacontenttype", self.datacontenttype()),
            ("dataschema", self.dataschema()),
        ];
        for (key, value) in optional {
            if let Some(v) = value {
                map.insert(key.into(), v.into());
            }
        }
        if let Some(data) = self.data() {
            map.insert("data".into(), data.clone());
        }
        for (k, v) in self.extensions.iter() {
            map.insert(k.clone(), v.clone());
        }
        map
    }

    fn write<S: Serializer>(&self, specversion: &str, serializer: S) -> Result<S::Ok, S::Error> {
        let len = 4
            + usize::from(self.subject.is_some())
            + usize::from(self.time.is_some())
            + usize::from(self.datacontenttype().is_some())
            + usize::from(self.dataschema.is_some())
            + usize::from(self.data().is_some())
            + self.extensions.len();
        let mut map = serializer.serialize_map(Some(len))?;
        map.serialize_entry("specversion", specversion)?;
        map.serialize_entry("id", self.id())?;
        map.serialize_entry("source", self.source())?;
        map.serialize_entry("type", self.ty())?;
        if let Some(v) = &self.subject {
            map.serialize_entry("subject", v)?;
        }
        if let Some(v) = self.time() {
            map.serialize_entry("time", v)?;
        }
        if let Some(v) = self.datacontenttype() {
            map.serialize_entry("datacontenttype", v)?;
        }
        if let Some(v) = &self.dataschema {
            map.serialize_entry("dataschema", v)?;
        }
        if let Some(v) = self.data() {
            map.serialize_entry("data", v)?;
        }
        for (k, v) in self.extensions.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Writes `text` as a JSON string, byte for byte as serde_json does: the
/// text as it is between quotes when nothing in it needs an escape (a
/// check of eight bytes at a time, one copy), serde_json's escaping
/// otherwise.
pub(crate) fn write_json_str(out: &mut Vec<u8>, text: &str) {
    if needs_escape(text.as_bytes()) {
        // Into memory: cannot fail.
        let _ = serde_json::to_writer(&mut *out, text);
    } else {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    }
}

/// Whether a byte of `bytes` is one JSON escapes in a string (a control
/// character, `"` or `\`). Eight bytes at a time: "has a byte less than
/// n" and "has a zero byte" (after XOR with the quote or the backslash)
/// are exact tests on a word.
fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES << 7;
    let escapes = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        let x = u64::from_le_bytes(w);
        let control = x.wrapping_sub(ONES * 0x20) & !x;
        let q = x ^ (ONES * u64::from(b'"'));
        let quote = q.wrapping_sub(ONES) & !q;
        let s = x ^ (ONES * u64::from(b'\\'));
        let backslash = s.wrapping_sub(ONES) & !s;
        if (control | quote | backslash) & HIGH != 0 {
            return true;
        }
    }
    words.remainder().iter().any(|&b| escapes(b))
}

impl Signal {
    /// Appends the signal's CloudEvents JSON (`specversion` `"1.0.2"`) to
    /// `out`: the same bytes as its `Serialize` form through serde_json,
    /// written with fewer steps (the envelope of a remote call is written
    /// this way).
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(br#"{"specversion":"#);
        write_json_str(out, SPEC_VERSION);
        let attributes: [(&[u8], Option<&str>); 7] = [
            (br#","id":"#, Some(self.id())),
            (br#","source":"#, Some(self.source())),
            (br#","type":"#, Some(self.ty())),
            (br#","subject":"#, self.subject()),
            (br#","time":"#, self.time()),
            (br#","datacontenttype":"#, self.datacontenttype()),
            (br#","dataschema":"#, self.dataschema()),
        ];
        for (key, value) in attributes {
            if let Some(value) = value {
                out.extend_from_slice(key);
                write_json_str(out, value);
            }
        }
        if let Some(data) = self.data() {
            out.extend_from_slice(br#","data":"#);
            // A JSON value into memory: cannot fail.
            let _ = serde_json::to_writer(&mut *out, data);
        }
        for (key, value) in self.extensions.iter() {
            out.push(b',');
            write_json_str(out, key);
            out.push(b':');
            let _ = serde_json::to_writer(&mut *out, value);
        }
        out.push(b'}');
    }
}

/// A [`Signal`] serialised with `specversion` `"1.0"` (the CloudEvents
/// specification's value for every 1.0.x revision). Made by
/// [`Signal::as_cloudevent`].
#[derive(Debug, Clone, Copy)]
pub struct CloudEvent<'a>(pub &'a Signal);

impl Serialize for CloudEvent<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.write(CLOUDEVENTS_SPEC_VERSION, serializer)
    }
}

impl Serialize for Signal {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.write(SPEC_VERSION, serializer)
    }
}

impl<'de> Deserialize<'de> for Signal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = RawSignal::deserialize(deserializer)?;
        validate(raw, true).map_err(|e| de::Error::custom(e.message()))
    }
}

impl From<Signal> for Value {
    fn from(signal: Signal) -> Self {
        signal.to_json_value()
    }
}

impl TryFrom<Value> for Signal {
    type Error = Error;

    fn try_from(value: Value) -> Result<Self> {
        Signal::from_value(value)
    }
}

/// Marks a serde error raised for nesting that is too deep; followed by the
/// field name.
const DEPTH_MARKER: &str = "jido-signal-too-deep:";

/// Reads a CloudEvents JSON object without validating it.
pub(crate) fn parse_raw(json: &[u8]) -> Result<RawSignal<'_>> {
    serde_json::from_slice(json).map_err(json_error)
}

fn not_an_object(kind: &str) -> Error {
    Error::validation("invalid signal: expected a json object")
        .with_detail("reason", "not_an_object")
        .with_detail("got", kind)
}

fn json_error(err: serde_json::Error) -> Error {
    let message = err.to_string();
    if let Some(rest) = message.strip_prefix(DEPTH_MARKER) {
        let field = rest.split(" at line").next().unwrap_or("data");
        return too_deep(field);
    }
    if message.contains("recursion limit exceeded") {
        return too_deep("data");
    }
    if err.is_data()
        && let Some(found) = message.strip_prefix("invalid type: ")
    {
        let kind = match found.split([' ', ',']).next().unwrap_or("") {
            "sequence" => "array",
            "string" => "string",
            "integer" | "floating" => "number",
            "boolean" => "boolean",
            "null" | "unit" => "null",
            _ => "unknown",
        };
        return not_an_object(kind);
    }
    Error::validation("invalid signal: malformed json")
        .with_detail("reason", "malformed_json")
        .with_detail("error", message)
}

/// A top-level key of the JSON format: a context attribute read into its
/// field, `data`, or another (an extension; `data_base64` too, refused as
/// one).
enum Key {
    Attr(Field),
    Data,
    Other(String),
}

/// A context attribute with a field of its own in [`RawSignal`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum Field {
    SpecVersion,
    Id,
    Source,
    Type,
    Subject,
    Time,
    DataContentType,
    DataSchema,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::SpecVersion => "specversion",
            Field::Id => "id",
            Field::Source => "source",
            Field::Type => "type",
            Field::Subject => "subject",
            Field::Time => "time",
            Field::DataContentType => "datacontenttype",
            Field::DataSchema => "dataschema",
        }
    }
}

impl Key {
    /// The key named `name`, when it is not an extension (one `match`:
    /// no comparison with every attribute's name in turn).
    fn known(name: &str) -> Option<Key> {
        Some(match name {
            "specversion" => Key::Attr(Field::SpecVersion),
            "id" => Key::Attr(Field::Id),
            "source" => Key::Attr(Field::Source),
            "type" => Key::Attr(Field::Type),
            "subject" => Key::Attr(Field::Subject),
            "time" => Key::Attr(Field::Time),
            "datacontenttype" => Key::Attr(Field::DataContentType),
            "dataschema" => Key::Attr(Field::DataSchema),
            "data" => Key::Data,
            _ => return None,
        })
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an attribute name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(Key::known(v).unwrap_or_else(|| Key::Other(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key, E> {
                Ok(Key::known(&v).unwrap_or(Key::Other(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Reads an attribute value without building a JSON tree for it.
struct AttrSeed;

impl<'de> DeserializeSeed<'de> for AttrSeed {
    type Value = Option<Attr<'de>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        struct AttrVisitor;
        impl<'de> Visitor<'de> for AttrVisitor {
            type Value = Option<Attr<'de>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an attribute value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Some(Attr::Ref(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Some(Attr::Str(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Some(Attr::Str(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Some(Attr::Other("boolean")))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Some(Attr::Other("number")))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Some(Attr::Other("number")))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Some(Attr::Other("number")))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Some(Attr::Other("array")))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Some(Attr::Other("object")))
            }
        }
        deserializer.deserialize_any(AttrVisitor)
    }
}

fn mark_depth<E: de::Error>(field: &str) -> impl FnOnce(E) -> E + '_ {
    move |err| {
        if err.to_string().contains("recursion limit exceeded") {
            E::custom(format_args!("{DEPTH_MARKER}{field}"))
        } else {
            err
        }
    }
}

impl<'de> Deserialize<'de> for RawSignal<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RawVisitor;
        impl<'de> Visitor<'de> for RawVisitor {
            type Value = RawSignal<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a cloudevents json object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawSignal<'de>, A::Error> {
                let mut raw = RawSignal::default();
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Data => {
                            raw.data = Some(map.next_value::<Value>().map_err(mark_depth::<
                                A::Error,
                            >(
                                "data"
                            ))?);
                        }
                        Key::Attr(field) => {
                            let attr =
                                map.next_value_seed(AttrSeed)
                                    .map_err(mark_depth::<A::Error>(field.name()))?;
                            let slot = match field {
                                Field::SpecVersion => &mut raw.specversion,
                                Field::Id => &mut raw.id,
                                Field::Source => &mut raw.source,
                                Field::Type => &mut raw.ty,
                                Field::Subject => &mut raw.subject,
                                Field::Time => &mut raw.time,
                                Field::DataContentType => &mut raw.datacontenttype,
                                Field::DataSchema => &mut raw.dataschema,
                            };
                            *slot = attr;
                        }
                        Key::Other(name) => {
                            let value = map
                                .next_value::<Value>()
                                .map_err(mark_depth::<A::Error>(&name))?;
                            if !value.is_null() {
                                raw.extensions.insert(name, value);
                            }
                        }
                    }
                }
                Ok(raw)
            }
        }
        deserializer.deserialize_map(RawVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::{MediaType, RESERVED_ATTRIBUTES, Text};

    /// The same event with and without escapes in its strings: read
    /// borrowed from the text or copied, the signal is the same.
    #[test]
    fn borrowed_and_escaped_attributes_read_the_same() {
        let id = "0190f0c2-7c4e-7d4e-9b1a-0123456789ab";
        let plain = format!(
            r#"{{"specversion":"1.0.2","id":"{id}","source":"svc","type":"order.pay","subject":"s","time":"2026-11-22T10:00:00.123456Z","datacontenttype":"application/json","dataschema":"urn:x","data":{{"n":1}},"ext":"e"}}"#
        );
        // Every string with an escaped character in it.
        let escaped = plain
            .replace("svc", r"\u0073vc")
            .replace("order.pay", r"order\u002epay")
            .replace(id, &id.replace('0', r"\u0030"))
            .replace("10:00", r"1\u0030:00")
            .replace("application/json", r"application\/json")
            .replace("urn:x", r"urn:\u0078");
        assert_ne!(plain, escaped);
        let a = Signal::from_json_str(&plain).unwrap();
        let b = Signal::from_json_str(&escaped).unwrap();
        assert_eq!(a.to_json_value(), b.to_json_value());
        assert_eq!(
            (a.id(), a.source(), a.ty(), a.time()),
            (id, "svc", "order.pay", Some("2026-11-22T10:00:00.123456Z"))
        );
        // The forms a signal made here has: no allocation for them.
        for s in [&a, &b] {
            assert!(matches!(s.id, Text::Inline(_)));
            assert!(matches!(s.time, Some(Text::Inline(_))));
            assert!(s.datacontenttype == MediaType::Json);
        }
    }

    /// `write_json` writes what serde_json writes for the signal.
    #[test]
    fn the_direct_writer_writes_serde_jsons_bytes() {
        let plain = Signal::new("order.pay", serde_json::json!({"n": 1, "s": [true, null]}));
        let full = crate::signal::SignalBuilder::new("order\"pay\u{1}é\\")
            .id("id with \"quotes\" and\ttabs")
            .source("src/é")
            .subject("line\nbreak")
            .time_rfc3339("2026-11-22T10:00:00Z")
            .datacontenttype("text/plain")
            .dataschema("urn:x\u{7f}")
            .data(Value::String("x\u{0}y".into()))
            .extension("traceparent", "00-ab")
            .extension("count", 3)
            .build()
            .unwrap();
        let bare = crate::signal::SignalBuilder::new("t")
            .no_time()
            .build()
            .unwrap();
        for s in [plain, full, bare] {
            let want = serde_json::to_vec(&s).unwrap();
            assert_eq!(
                String::from_utf8(s.to_json_vec()).unwrap(),
                String::from_utf8(want).unwrap()
            );
        }
        // Every byte value at every position of a word and of the tail.
        for len in [7, 8, 9, 16, 17] {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = b;
                    let want = b < 0x20 || b == b'"' || b == b'\\';
                    assert_eq!(needs_escape(&bytes), want, "{len} {at} {b}");
                }
            }
        }
        for text in [
            "",
            "plain",
            "é\u{80}",
            "\"",
            "\\",
            "\u{1f}",
            "\u{7f}",
            "a\u{2028}b",
        ] {
            let mut out = Vec::new();
            write_json_str(&mut out, text);
            assert_eq!(out, serde_json::to_vec(text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn every_reserved_attribute_but_data_base64_has_a_key() {
        for name in RESERVED_ATTRIBUTES {
            match Key::known(name) {
                Some(Key::Attr(field)) => assert_eq!(field.name(), name),
                Some(Key::Data) => assert_eq!(name, "data"),
                Some(Key::Other(_)) => unreachable!(),
                None => assert_eq!(name, "data_base64"),
            }
        }
        assert!(Key::known("dataschemas").is_none());
    }

    #[test]
    fn other_lengths_and_non_ascii_text_are_kept_as_given() {
        // 36 bytes, not ASCII: on the heap, as given.
        let id = "é".repeat(18);
        let json = format!(r#"{{"specversion":"1.0.2","id":"{id}","source":"jido","type":"t"}}"#);
        let s = Signal::from_json_str(&json).unwrap();
        assert_eq!(s.id(), id);
        assert!(matches!(s.id, Text::Heap(_)));
        let s = Signal::from_json_str(
            r#"{"specversion":"1.0.2","id":"short","source":"jido","type":"t","datacontenttype":"text/plain","time":"2026-11-22T10:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(
            (s.id(), s.source(), s.datacontenttype(), s.time()),
            (
                "short",
                "jido",
                Some("text/plain"),
                Some("2026-11-22T10:00:00Z")
            )
        );
        assert!(s.source.is_none());
    }

    #[test]
    fn the_runtime_time_form_is_checked_by_hand_as_chrono_would() {
        use super::{is_rfc3339, utc_in_runtime_form};
        let signal = crate::signal::Signal::new("t", serde_json::Value::Null);
        let generated = signal.time().expect("time");
        assert!(utc_in_runtime_form(generated.as_bytes()), "{generated}");
        for t in [
            "2026-11-23T05:14:54Z",
            "2026-11-23T05:14:54.123456Z",
            "2026-02-28T23:59:59.1Z",
            "1999-12-01T00:00:00.123456789Z",
            // Left to chrono (and valid):
            "2026-11-30T05:14:54Z",
            "2024-02-29T00:00:00Z",
            "2026-11-23T05:14:54+02:00",
            "2026-11-23t05:14:54z",
            "2026-11-23T05:14:60Z",
            // Invalid:
            "2026-02-30T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-00-01T00:00:00Z",
            "2026-11-00T00:00:00Z",
            "2026-11-23T24:00:00Z",
            "2026-11-23T23:60:00Z",
            "2026-11-23T23:00:61Z",
            "2026-11-23T23:00:00.Z",
            "2026-11-23T23:00:00",
            "2026-11-23 23:00:00Z",
            "2026-1-23T23:00:00Z",
            "x026-11-23T23:00:00Z",
            "",
            "Z",
        ] {
            let chrono = chrono::DateTime::parse_from_rfc3339(t).is_ok();
            assert_eq!(is_rfc3339(t), chrono, "{t}");
            if utc_in_runtime_form(t.as_bytes()) {
                assert!(chrono, "accepted by hand but not by chrono: {t}");
            }
        }
    }
}
