//! The CloudEvents HTTP protocol binding (feature `http`): how a signal is
//! written into an HTTP request and read back from one.
//!
//! Two content modes exist. In *structured* mode the body is the whole event
//! in the CloudEvents JSON format under `content-type:
//! application/cloudevents+json; charset=utf-8`. In *binary* mode the context
//! attributes and extensions travel as `ce-<name>` headers (values
//! percent-encoded as the binding requires), `content-type` is the event's
//! `datacontenttype` and the body is the data alone.

use base64::Engine;
use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::json::{Attr, RawSignal, parse_raw, validate};
use super::{CLOUDEVENTS_SPEC_VERSION, SPEC_VERSION, Signal, invalid};
use crate::error::Result;

/// The `content-type` of a structured-mode CloudEvents request.
pub const CLOUDEVENTS_JSON_CONTENT_TYPE: &str = "application/cloudevents+json; charset=utf-8";

/// How an HTTP or webhook target writes a signal into its request.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentMode {
    /// The whole event as the JSON body, `content-type:
    /// application/cloudevents+json; charset=utf-8` (the default).
    #[default]
    Structured,
    /// Attributes and extensions as `ce-*` headers, `content-type` = the
    /// event's `datacontenttype`, the data as the body.
    Binary,
}

/// What the binding percent-encodes in a header value: controls, space,
/// `"`, `%` and everything outside ASCII.
const HEADER_ESCAPES: &AsciiSet = &CONTROLS.add(b' ').add(b'"').add(b'%').add(0x7f);

/// Headers and body of one request.
pub(crate) type Encoded = (Vec<(HeaderName, HeaderValue)>, Vec<u8>);

fn specversion(jido: bool) -> &'static str {
    if jido {
        SPEC_VERSION
    } else {
        CLOUDEVENTS_SPEC_VERSION
    }
}

/// The event in structured mode. With `jido`, Elixir Jido's wire instead:
/// `specversion` `"1.0.2"` under `content-type: application/json`.
pub(crate) fn encode_structured(signal: &Signal, jido: bool) -> Encoded {
    let (body, content_type) = if jido {
        (signal.to_json_vec(), super::JSON_CONTENT_TYPE)
    } else {
        (
            serde_json::to_vec(&signal.as_cloudevent()).unwrap_or_default(),
            CLOUDEVENTS_JSON_CONTENT_TYPE,
        )
    };
    (
        vec![(CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
}

fn ce_header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue)> {
    let header = format!("ce-{name}");
    let n = HeaderName::from_bytes(header.as_bytes()).map_err(|_| {
        invalid(
            name,
            "invalid_name",
            format!("{name} cannot be a header name"),
        )
    })?;
    let encoded = utf8_percent_encode(value, HEADER_ESCAPES).to_string();
    let v = HeaderValue::from_str(&encoded)
        .map_err(|_| invalid(name, "invalid", format!("{name} cannot be a header value")))?;
    Ok((n, v))
}

/// Whether a media type holds JSON (`application/json`, `text/json`,
/// `*/*+json`); no media type counts as JSON.
fn is_json(media: Option<&str>) -> bool {
    let Some(media) = media else {
        return true;
    };
    let essence = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json" || essence == "text/json" || essence.ends_with("+json")
}

/// The event in binary mode. The data is written as JSON when the
/// `datacontenttype` is JSON; otherwise a string is written as its text and
/// other values as JSON.
pub(crate) fn encode_binary(signal: &Signal, jido: bool) -> Result<Encoded> {
    let mut headers = vec![
        ce_header("specversion", specversion(jido))?,
        ce_header("id", signal.id())?,
        ce_header("source", signal.source())?,
        ce_header("type", signal.ty())?,
    ];
    let optional = [
        ("subject", signal.subject()),
        ("time", signal.time()),
        ("dataschema", signal.dataschema()),
    ];
    for (name, value) in optional {
        if let Some(v) = value {
            headers.push(ce_header(name, v)?);
        }
    }
    for (name, value) in signal.extensions() {
        let text = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        headers.push(ce_header(name, &text)?);
    }
    let content_type = signal.datacontenttype();
    if let Some(ct) = content_type {
        let v = HeaderValue::from_str(ct).map_err(|_| {
            invalid(
                "datacontenttype",
                "invalid",
                "datacontenttype cannot be a header value".into(),
            )
        })?;
        headers.push((CONTENT_TYPE, v));
    }
    let body = match signal.data() {
        None => Vec::new(),
        Some(Value::String(s)) if !is_json(content_type) => s.as_bytes().to_vec(),
        Some(data) => serde_json::to_vec(data).unwrap_or_default(),
    };
    Ok((headers, body))
}

/// Turns a body (binary mode) or decoded `data_base64` into signal data:
/// JSON for a JSON media type, text otherwise. Empty = no data.
fn data_from_bytes(bytes: &[u8], media: Option<&str>, field: &str) -> Result<Option<Value>> {
    if bytes.is_empty() {
        return Ok(None);
    }
    if is_json(media) {
        match serde_json::from_slice::<Value>(bytes) {
            Ok(v) => return Ok(Some(v)),
            // Without a media type, text that is not JSON is kept as text.
            Err(_) if media.is_none() => {}
            Err(e) if e.to_string().contains("recursion limit") => {
                return Err(super::too_deep(field));
            }
            Err(e) => {
                return Err(
                    invalid(field, "malformed_json", "data is not valid json".into())
                        .with_detail("error", e.to_string()),
                );
            }
        }
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(Some(Value::String(text.to_owned()))),
        Err(_) => Err(invalid(
            field,
            "binary_data",
            "data is not utf-8 text".into(),
        )),
    }
}

fn header_text(headers: &HeaderMap, name: &HeaderName) -> Result<Option<String>> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(invalid(
            name.as_str(),
            "duplicate_header",
            format!("duplicate header {name}"),
        ));
    }
    match value.to_str() {
        Ok(s) => Ok(Some(s.to_owned())),
        Err(_) => Err(invalid(
            name.as_str(),
            "malformed_header",
            format!("header {name} is not visible ascii"),
        )),
    }
}

fn from_structured(body: &[u8]) -> Result<Signal> {
    let mut raw = parse_raw(body)?;
    if let Some(encoded) = raw.extensions.remove("data_base64") {
        if raw.data.as_ref().is_some_and(|d| !d.is_null()) {
            return Err(invalid(
                "data_base64",
                "conflict",
                "data and data_base64 both given".into(),
            ));
        }
        let Value::String(encoded) = encoded else {
            return Err(invalid(
                "data_base64",
                "invalid",
                "data_base64 must be a string".into(),
            ));
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_bytes())
            .map_err(|_| invalid("data_base64", "invalid", "data_base64 is not base64".into()))?;
        let media = raw.datacontenttype.as_ref().and_then(Attr::as_str);
        // Binary data has no JSON meaning unless its media type says so.
        let media = media.or(Some("application/octet-stream"));
        raw.data = data_from_bytes(&bytes, media, "data_base64")?;
    }
    validate(raw, true)
}

fn from_binary(headers: &HeaderMap, body: &[u8], media: Option<String>) -> Result<Signal> {
    let mut map = serde_json::Map::new();
    for name in headers.keys() {
        let Some(attr) = name.as_str().strip_prefix("ce-") else {
            continue;
        };
        if matches!(attr, "data" | "data_base64" | "datacontenttype") {
            return Err(invalid(
                name.as_str(),
                "malformed_header",
                format!("header {name} is not allowed in binary mode"),
            ));
        }
        let Some(text) = header_text(headers, name)? else {
            continue;
        };
        let decoded = percent_decode_str(&text).decode_utf8().map_err(|_| {
            invalid(
                name.as_str(),
                "malformed_header",
                format!("header {name} is not percent-encoded utf-8"),
            )
        })?;
        map.insert(attr.to_owned(), Value::String(decoded.into_owned()));
    }
    let data = data_from_bytes(body, media.as_deref(), "data")?;
    if let Some(media) = media {
        map.insert("datacontenttype".into(), Value::String(media));
    }
    let mut raw = RawSignal::from_map(map);
    raw.data = data;
    validate(raw, true)
}

impl Signal {
    /// Reads a signal from an HTTP request in either content mode of the
    /// CloudEvents HTTP binding, the receiving end of
    /// [`HttpTarget`](crate::signal::dispatch::HttpTarget) and
    /// [`WebhookTarget`](crate::signal::dispatch::WebhookTarget).
    ///
    /// - A `ce-specversion` header means binary mode: `ce-*` headers are
    ///   the attributes and extensions (percent-decoded; extensions arrive
    ///   as strings), `content-type` is the `datacontenttype`, the body is
    ///   the data: parsed as JSON when the content type is JSON or absent
    ///   (absent and not JSON: kept as text), kept as text otherwise.
    /// - Otherwise the body is a structured event (`application/cloudevents+json`,
    ///   or Jido's `application/json`, or no content type), parsed as by
    ///   [`Signal::from_json_slice`]; a `data_base64` member is decoded (to
    ///   JSON for a JSON `datacontenttype`, else to text).
    ///
    /// Both `specversion` `"1.0"` and Jido's `"1.0.2"` are accepted. The
    /// signal comes from the network, so it is marked
    /// [untrusted](Signal::untrusted).
    ///
    /// ```
    /// use jido::signal::Signal;
    /// use reqwest::header::{HeaderMap, HeaderValue};
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert("ce-specversion", HeaderValue::from_static("1.0"));
    /// headers.insert("ce-id", HeaderValue::from_static("42"));
    /// headers.insert("ce-source", HeaderValue::from_static("/shop"));
    /// headers.insert("ce-type", HeaderValue::from_static("order.placed"));
    /// headers.insert("ce-tenant", HeaderValue::from_static("acme%20inc"));
    /// headers.insert("content-type", HeaderValue::from_static("application/json"));
    /// let signal = Signal::from_http(&headers, br#"{"total":99}"#)?;
    /// assert_eq!(signal.ty(), "order.placed");
    /// assert_eq!(signal.extension("tenant"), Some(&serde_json::json!("acme inc")));
    /// assert_eq!(signal.data(), Some(&serde_json::json!({"total": 99})));
    /// assert!(!signal.is_trusted());
    /// # Ok::<(), jido::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::Validation`](crate::ErrorKind::Validation) error
    /// (`invalid signal: …`, details `field` and `reason`): the errors of
    /// [`Signal::from_json_slice`], plus `reason` `malformed_header` (a
    /// header that is not visible ASCII or not percent-encoded UTF-8, or
    /// `ce-data`/`ce-datacontenttype`), `duplicate_header`,
    /// `malformed_json` (binary JSON data), `binary_data` (data that is
    /// neither JSON nor UTF-8 text), `batch_unsupported`
    /// (`application/cloudevents-batch+json`) and `not_a_cloudevent` (a
    /// content type other than JSON without `ce-specversion`).
    pub fn from_http(headers: &HeaderMap, body: &[u8]) -> Result<Signal> {
        let media = header_text(headers, &CONTENT_TYPE)?;
        let essence = media.as_deref().map(|m| {
            m.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
        let signal = if headers.contains_key("ce-specversion") {
            from_binary(headers, body, media)?
        } else {
            match essence.as_deref() {
                Some("application/cloudevents-batch+json") => {
                    return Err(invalid(
                        "content-type",
                        "batch_unsupported",
                        "batched cloudevents are not supported".into(),
                    ));
                }
                None | Some("application/cloudevents+json") => from_structured(body)?,
                Some(_) if is_json(media.as_deref()) => from_structured(body)?,
                Some(other) => {
                    return Err(invalid(
                        "content-type",
                        "not_a_cloudevent",
                        format!(
                            "not a cloudevent: no ce-specversion header and content type {other}"
                        ),
                    ));
                }
            }
        };
        Ok(signal.untrusted())
    }
}
