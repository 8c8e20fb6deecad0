//! The CloudEvents JSON event format: serialisation, parsing and the
//! validation shared with the builder.

use std::fmt;

use chrono::DateTime;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::{
    CLOUDEVENTS_SPEC_VERSION, JSON_CONTENT_TYPE, RESERVED_ATTRIBUTES, SPEC_VERSION, Signal,
    check_depth, check_extension, invalid, new_id, too_deep,
};
use crate::error::{Error, Result};

/// A context attribute as read: a string, or something else (named by its
/// JSON type, for the error).
#[derive(Debug)]
pub(crate) enum Attr {
    Str(String),
    Other(&'static str),
}

/// An event as read, before validation. `None` = absent or `null`.
#[derive(Debug, Default)]
pub(crate) struct RawSignal {
    pub(crate) specversion: Option<Attr>,
    pub(crate) id: Option<Attr>,
    pub(crate) source: Option<Attr>,
    pub(crate) ty: Option<Attr>,
    pub(crate) subject: Option<Attr>,
    pub(crate) time: Option<Attr>,
    pub(crate) datacontenttype: Option<Attr>,
    pub(crate) dataschema: Option<Attr>,
    pub(crate) data: Option<Value>,
    pub(crate) extensions: Map<String, Value>,
}

fn string_attr(field: &str, attr: Option<Attr>) -> Result<Option<String>> {
    match attr {
        None => Ok(None),
        Some(Attr::Str(s)) => Ok(Some(s)),
        Some(Attr::Other(kind)) => Err(invalid(
            field,
            "invalid",
            format!("{field} must be a string, got {kind}"),
        )),
    }
}

/// An optional attribute: absent is fine, empty is not.
fn optional_attr(field: &str, attr: Option<Attr>) -> Result<Option<String>> {
    match string_attr(field, attr)? {
        Some(s) if s.is_empty() => Err(invalid(field, "empty", format!("{field} given but empty"))),
        other => Ok(other),
    }
}

/// A required attribute: absent and empty are both "missing".
fn required_attr(field: &str, attr: Option<Attr>) -> Result<String> {
    match string_attr(field, attr)? {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(invalid(field, "missing", format!("missing {field}"))),
    }
}

/// Jido's validation of an event. `wire` = read from JSON or a map (a
/// specversion is then required).
pub(crate) fn validate(raw: RawSignal, wire: bool) -> Result<Signal> {
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
                .with_detail("value", v));
            }
        }
    }
    let ty = required_attr("type", raw.ty)?;
    let source = required_attr("source", raw.source)?;
    let id = optional_attr("id", raw.id)?.map_or_else(new_id, super::Text::from);
    let subject = optional_attr("subject", raw.subject)?;
    let time = optional_attr("time", raw.time)?;
    if let Some(t) = &time
        && DateTime::parse_from_rfc3339(t).is_err()
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
        None if data.is_some() => Some(JSON_CONTENT_TYPE.to_owned()),
        other => other,
    };
    Ok(Signal {
        id,
        source: (source != super::DEFAULT_SOURCE).then(|| source.into_boxed_str()),
        ty: super::text::Short::from_string(ty),
        subject: subject.map(String::into_boxed_str),
        time: time.map(super::Text::from),
        datacontenttype: super::MediaType::from_text(datacontenttype),
        dataschema: dataschema.map(String::into_boxed_str),
        data: data.map(super::payload::Data::Json),
        extensions: super::Extensions::from_map(raw.extensions),
        trust: super::Trust::default(),
    })
}

fn attr_from_value(value: Value) -> Option<Attr> {
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

impl RawSignal {
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
        serde_json::to_vec(self).unwrap_or_default()
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
pub(crate) fn parse_raw(json: &[u8]) -> Result<RawSignal> {
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

/// A top-level key of the JSON format.
enum Key {
    Known(&'static str),
    Other(String),
}

/// The attributes read into fields: every reserved one but `data_base64`
/// (the last), which is refused.
const KNOWN_KEYS: &[&str] = RESERVED_ATTRIBUTES
    .split_at(RESERVED_ATTRIBUTES.len() - 1)
    .0;

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an attribute name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(match KNOWN_KEYS.iter().find(|k| **k == v) {
                    Some(k) => Key::Known(k),
                    None => Key::Other(v.to_owned()),
                })
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key, E> {
                Ok(match KNOWN_KEYS.iter().find(|k| **k == v) {
                    Some(k) => Key::Known(k),
                    None => Key::Other(v),
                })
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Reads an attribute value without building a JSON tree for it.
struct AttrSeed;

impl<'de> DeserializeSeed<'de> for AttrSeed {
    type Value = Option<Attr>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        struct AttrVisitor;
        impl<'de> Visitor<'de> for AttrVisitor {
            type Value = Option<Attr>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an attribute value")
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

impl<'de> Deserialize<'de> for RawSignal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RawVisitor;
        impl<'de> Visitor<'de> for RawVisitor {
            type Value = RawSignal;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a cloudevents json object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawSignal, A::Error> {
                let mut raw = RawSignal::default();
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Known("data") => {
                            raw.data = Some(map.next_value::<Value>().map_err(mark_depth::<
                                A::Error,
                            >(
                                "data"
                            ))?);
                        }
                        Key::Known(name) => {
                            let attr =
                                map.next_value_seed(AttrSeed)
                                    .map_err(mark_depth::<A::Error>(name))?;
                            let slot = match name {
                                "specversion" => &mut raw.specversion,
                                "id" => &mut raw.id,
                                "source" => &mut raw.source,
                                "type" => &mut raw.ty,
                                "subject" => &mut raw.subject,
                                "time" => &mut raw.time,
                                "datacontenttype" => &mut raw.datacontenttype,
                                _ => &mut raw.dataschema,
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
