//! The bytes that cross nodes: requests to a gateway, its replies and its
//! down notices, as versioned JSON. Decoding never panics: anything
//! malformed is an [`ErrorKind::Validation`] error, which the gateway
//! answers with (a call) or drops with a log line (a cast).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::agent::AgentState;
use crate::error::{Error, ErrorKind, Result};
use crate::signal::Signal;
use crate::signal::json::{Attr, RawSignal, validate, write_json_str};

/// The envelope version this build speaks.
pub(crate) const VERSION: u32 = 1;

/// What a request asks the owner's gateway to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Op {
    /// Process the signal and answer with the agent's checkpoint.
    Call,
    /// Process the signal; nobody waits.
    Cast,
    /// Tell the sender's gateway when the agent ends.
    Watch,
    /// Stop telling.
    Unwatch,
    /// Start the agent if it does not run (a remote child's spawn).
    Start,
    /// Stop the agent with `reason` (a remote child's stop).
    Stop,
    /// The remote child's parent `parent` ended with `reason`: the
    /// child's `on_parent_death` applies.
    ParentDown,
}

/// A request as it is sent: borrowed, the signal written straight from
/// the [`Signal`] (CloudEvents JSON, no intermediate `Value`).
#[derive(Debug, Serialize)]
pub(crate) struct Outgoing<'a> {
    v: u32,
    op: Op,
    agent: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<&'a Signal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deadline_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    from: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tag: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    options: Option<&'a Map<String, Value>>,
}

impl<'a> Outgoing<'a> {
    /// A request to send.
    pub(crate) fn new(op: Op, agent: &'a str, kind: Option<&'a str>) -> Self {
        Outgoing {
            v: VERSION,
            op,
            agent,
            kind,
            signal: None,
            deadline_ms: None,
            from: None,
            reason: None,
            parent: None,
            tag: None,
            options: None,
        }
    }

    /// The child's options (JSON form of `ChildOptions`) of a remote
    /// child's start: applied over its kind factory's when it starts.
    pub(crate) fn options(mut self, options: Option<&'a Map<String, Value>>) -> Self {
        self.options = options;
        self
    }

    /// The parent (and its tag for the child) of a remote child's start,
    /// or the parent that ended (parent down).
    pub(crate) fn parent(mut self, parent: &'a str, tag: Option<&'a str>) -> Self {
        self.parent = Some(parent);
        self.tag = tag;
        self
    }

    pub(crate) fn signal(mut self, signal: &'a Signal) -> Self {
        self.signal = Some(signal);
        self
    }

    pub(crate) fn deadline(mut self, remaining: Duration) -> Self {
        self.deadline_ms = Some(u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX));
        self
    }

    pub(crate) fn sender(mut self, node: &'a str) -> Self {
        self.from = Some(node);
        self
    }

    pub(crate) fn reason(mut self, reason: &'a str) -> Self {
        self.reason = Some(reason);
        self
    }

    /// The envelope's JSON: the bytes serde_json writes for this
    /// struct (a unit test holds them equal), written directly (the
    /// signal by [`Signal::write_json`]) into a buffer sized for a small
    /// signal (no regrowth on the way).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ENCODE_CAPACITY);
        self.encode_into(&mut out);
        out
    }

    /// [`Outgoing::encode`], appended to `out`.
    fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(VERSION_PREFIX);
        out.extend_from_slice(br#","op":"#);
        out.extend_from_slice(self.op.json());
        let field = |out: &mut Vec<u8>, key: &[u8], value: Option<&str>| {
            if let Some(value) = value {
                out.extend_from_slice(key);
                write_json_str(out, value);
            }
        };
        field(out, br#","agent":"#, Some(self.agent));
        field(out, br#","kind":"#, self.kind);
        if let Some(signal) = self.signal {
            out.extend_from_slice(br#","signal":"#);
            signal.write_json(out);
        }
        if let Some(ms) = self.deadline_ms {
            out.extend_from_slice(br#","deadline_ms":"#);
            // A number into memory: cannot fail.
            let _ = serde_json::to_writer(&mut *out, &ms);
        }
        field(out, br#","from":"#, self.from);
        field(out, br#","reason":"#, self.reason);
        field(out, br#","parent":"#, self.parent);
        field(out, br#","tag":"#, self.tag);
        if let Some(options) = self.options {
            out.extend_from_slice(br#","options":"#);
            // A map of JSON values into memory: cannot fail.
            let _ = serde_json::to_writer(&mut *out, options);
        }
        out.push(b'}');
    }
}

impl Outgoing<'_> {
    /// The request in the binary form (see [`BINARY_MAGIC`]) when it is
    /// a call or a cast, the JSON form otherwise (and for a string too
    /// long for a 32-bit length). Only sent to a gateway that reads it
    /// (one in [`BINARY_GROUP`]).
    pub(crate) fn encode_binary(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ENCODE_CAPACITY);
        self.encode_binary_into(&mut out);
        out
    }

    /// [`Outgoing::encode_binary`], appended to `out` (a batch of casts is
    /// written in place, no buffer per request).
    pub(crate) fn encode_binary_into(&self, out: &mut Vec<u8>) {
        let plain = self.from.is_none()
            && self.reason.is_none()
            && self.parent.is_none()
            && self.tag.is_none()
            && self.options.is_none();
        let op = match self.op {
            Op::Call => 0,
            Op::Cast => 1,
            _ => return self.encode_into(out),
        };
        if let Some(signal) = self.signal.filter(|_| plain) {
            let at = out.len();
            if self.write_binary(op, signal, out).is_some() {
                return;
            }
            out.truncate(at);
        }
        self.encode_into(out);
    }

    fn write_binary(&self, op: u8, signal: &Signal, out: &mut Vec<u8>) -> Option<()> {
        out.extend_from_slice(&[BINARY_MAGIC, op]);
        put_str(out, Some(self.agent.as_bytes()))?;
        put_str(out, self.kind.map(str::as_bytes))?;
        match self.deadline_ms {
            Some(ms) => {
                out.push(1);
                out.extend_from_slice(&ms.to_le_bytes());
            }
            None => out.push(0),
        }
        // The inline id, type and time as bytes: no UTF-8 check of text
        // the runtime wrote (the receiver checks what it reads).
        put_str(out, Some(signal.id.as_bytes()))?;
        put_str(out, Some(signal.source().as_bytes()))?;
        put_str(out, Some(signal.ty.as_bytes()))?;
        put_str(out, signal.subject().map(str::as_bytes))?;
        put_str(out, signal.time.as_ref().map(|t| t.as_bytes()))?;
        put_str(out, signal.datacontenttype().map(str::as_bytes))?;
        put_str(out, signal.dataschema().map(str::as_bytes))?;
        put_json(out, signal.data())?;
        let extensions = signal.extensions();
        put_json(out, (!extensions.is_empty()).then_some(extensions))?;
        Some(())
    }
}

/// The first byte of a request in the binary form (never the first byte
/// of JSON text). After it: the op (0 call, 1 cast); the agent id and
/// its kind; a deadline flag (0 or 1) and, with 1, the budget in
/// milliseconds (u64 little-endian); then the signal's `id`, `source`,
/// `type`, `subject`, `time`, `datacontenttype` and `dataschema` as
/// strings, its `data` and its extensions (an object) as JSON text. A
/// string is its length (u32 little-endian) and its UTF-8 bytes;
/// [`ABSENT`] as the length: none. No field names, no escapes, no JSON
/// scan of the attributes; the signal passes the same validation as one
/// read from JSON.
pub(crate) const BINARY_MAGIC: u8 = 0xB1;

/// The process group (in the cluster's scope) a gateway joins when it
/// reads requests in the binary form: a sender writes that form only to a
/// gateway in it, and JSON to any other (a peer of an older build), so
/// nodes of both builds keep talking during a rolling upgrade.
pub(crate) const BINARY_GROUP: &str = "jido.nodes.binary1";

/// The length of an absent string in the binary form.
const ABSENT: u32 = u32::MAX;

/// A string of the binary form; `None` when it is too long for it.
fn put_str(out: &mut Vec<u8>, s: Option<&[u8]>) -> Option<()> {
    match s {
        Some(s) => {
            let len = u32::try_from(s.len()).ok().filter(|n| *n != ABSENT)?;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(s);
        }
        None => out.extend_from_slice(&ABSENT.to_le_bytes()),
    }
    Some(())
}

/// A JSON value of the binary form, as text with its length in front.
fn put_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: Option<&T>) -> Option<()> {
    let Some(value) = value else {
        out.extend_from_slice(&ABSENT.to_le_bytes());
        return Some(());
    };
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    // JSON into memory: cannot fail.
    serde_json::to_writer(&mut *out, value).ok()?;
    let len = u32::try_from(out.len() - at - 4)
        .ok()
        .filter(|n| *n != ABSENT)?;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    Some(())
}

/// Reads the binary form, bounds-checked: running out of bytes, a bad
/// flag or bad UTF-8 is `None` (a malformed envelope), never a panic.
struct Binary<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Binary<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let slice = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }

    /// A field: `Some(None)` when absent.
    fn field(&mut self) -> Option<Option<&'a [u8]>> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().ok()?);
        if len == ABSENT {
            return Some(None);
        }
        self.take(usize::try_from(len).ok()?).map(Some)
    }

    fn str(&mut self) -> Option<Option<&'a str>> {
        match self.field()? {
            Some(bytes) => std::str::from_utf8(bytes).ok().map(Some),
            None => Some(None),
        }
    }

    fn attr(&mut self) -> Option<Option<Attr<'a>>> {
        Some(self.str()?.map(Attr::Ref))
    }
}

/// The start of every envelope this build writes: `{"v":VERSION`.
const VERSION_PREFIX: &[u8] = br#"{"v":1"#;

impl Op {
    /// The operation's JSON string (its serde name, quoted).
    fn json(self) -> &'static [u8] {
        match self {
            Op::Call => br#""call""#,
            Op::Cast => br#""cast""#,
            Op::Watch => br#""watch""#,
            Op::Unwatch => br#""unwatch""#,
            Op::Start => br#""start""#,
            Op::Stop => br#""stop""#,
            Op::ParentDown => br#""parent_down""#,
        }
    }
}

/// The first buffer of an envelope being written: a request with a small
/// signal fits (serde_json's own start, 128 bytes, would grow twice).
const ENCODE_CAPACITY: usize = 512;

/// Reads JSON from bytes that arrived from the network: their UTF-8 is
/// checked once for the whole envelope, and the strings in it are then
/// read without another check each (serde_json checks every string of a
/// byte slice on its own).
fn from_network<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> std::result::Result<T, JsonError> {
    let text = std::str::from_utf8(bytes).map_err(JsonError::Utf8)?;
    serde_json::from_str(text).map_err(JsonError::Json)
}

/// Why bytes from the network are not the JSON expected.
#[derive(Debug, thiserror::Error)]
enum JsonError {
    #[error("not utf-8: {0}")]
    Utf8(#[source] std::str::Utf8Error),
    #[error(transparent)]
    Json(serde_json::Error),
}

/// A request to a gateway, as received: the signal decoded straight
/// from the envelope's bytes.
#[derive(Debug, Deserialize)]
pub(crate) struct Request {
    pub(crate) v: u32,
    pub(crate) op: Op,
    pub(crate) agent: String,
    /// The kind the owner starts the agent from when it does not run.
    #[serde(default)]
    pub(crate) kind: Option<String>,
    /// The signal (call and cast), a valid CloudEvent, marked untrusted
    /// (it came from the network) and shared from here on: the request,
    /// the gateway's queue and the agent's message move a pointer, not
    /// the signal.
    #[serde(default, deserialize_with = "untrusted_signal")]
    pub(crate) signal: Option<Arc<Signal>>,
    /// The caller's remaining budget when it sent the request.
    #[serde(default)]
    pub(crate) deadline_ms: Option<u64>,
    /// The sending node (watch, unwatch).
    #[serde(default)]
    pub(crate) from: Option<String>,
    /// The stop reason (stop), the parent's exit reason (parent down).
    #[serde(default)]
    pub(crate) reason: Option<String>,
    /// The parent of a remote child (start, parent down).
    #[serde(default)]
    pub(crate) parent: Option<String>,
    /// The parent's tag for the child (start).
    #[serde(default)]
    pub(crate) tag: Option<String>,
    /// The child's options over its kind factory's (start).
    #[serde(default)]
    pub(crate) options: Option<Map<String, Value>>,
}

impl Request {
    /// Decodes and checks a request.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Validation`] "malformed cluster envelope" (bad JSON or
    /// fields, or a signal that is not a valid CloudEvent: the source
    /// says why), "unsupported cluster envelope version", "empty agent
    /// id", "cluster request without a signal" for a call or cast.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Request> {
        if bytes.first() == Some(&BINARY_MAGIC) {
            return Self::decode_binary(bytes);
        }
        let req: Request = from_network(bytes).map_err(|e| {
            // Another version may have another shape: say so rather than
            // "malformed" when the version is readable.
            match serde_json::from_slice::<Version>(bytes) {
                Ok(Version { v }) if v != VERSION => unsupported(v),
                _ => Error::validation("malformed cluster envelope")
                    .with_detail("bytes", bytes.len() as u64)
                    .with_source(e),
            }
        })?;
        if req.v != VERSION {
            return Err(unsupported(req.v));
        }
        if req.agent.is_empty() {
            return Err(Error::validation("empty agent id"));
        }
        if matches!(req.op, Op::Call | Op::Cast) && req.signal.is_none() {
            return Err(Error::validation("cluster request without a signal"));
        }
        Ok(req)
    }

    /// A call or cast in the binary form (see [`BINARY_MAGIC`]): the
    /// same checks and errors as its JSON form.
    fn decode_binary(bytes: &[u8]) -> Result<Request> {
        let malformed = || {
            Error::validation("malformed cluster envelope").with_detail("bytes", bytes.len() as u64)
        };
        let mut r = Binary { bytes, at: 1 };
        let op = match r.byte() {
            Some(0) => Op::Call,
            Some(1) => Op::Cast,
            _ => return Err(malformed()),
        };
        let head = (|| {
            let agent = r.str()?;
            let kind = r.str()?;
            let deadline_ms = match r.byte()? {
                0 => None,
                1 => Some(r.u64()?),
                _ => return None,
            };
            Some((agent, kind, deadline_ms))
        })();
        let Some((Some(agent), kind, deadline_ms)) = head else {
            return Err(malformed());
        };
        if agent.is_empty() {
            return Err(Error::validation("empty agent id"));
        }
        let attrs = (|| {
            Some([
                r.attr()?,
                r.attr()?,
                r.attr()?,
                r.attr()?,
                r.attr()?,
                r.attr()?,
                r.attr()?,
            ])
        })();
        let Some([id, source, ty, subject, time, datacontenttype, dataschema]) = attrs else {
            return Err(malformed());
        };
        let data = match r.field().ok_or_else(malformed)? {
            Some(text) => Some(
                serde_json::from_slice::<Value>(text).map_err(|e| malformed().with_source(e))?,
            ),
            None => None,
        };
        let extensions = match r.field().ok_or_else(malformed)? {
            Some(text) => serde_json::from_slice::<Map<String, Value>>(text)
                .map_err(|e| malformed().with_source(e))?,
            None => Map::new(),
        };
        if r.at != bytes.len() {
            return Err(malformed());
        }
        let raw = RawSignal {
            specversion: None,
            id,
            source,
            ty,
            subject,
            time,
            datacontenttype,
            dataschema,
            data,
            extensions,
        };
        let signal = validate(raw, false).map_err(|e| malformed().with_source(e))?;
        Ok(Request {
            v: VERSION,
            op,
            agent: agent.to_owned(),
            kind: kind.map(str::to_owned),
            signal: Some(Arc::new(signal.untrusted())),
            deadline_ms,
            from: None,
            reason: None,
            parent: None,
            tag: None,
            options: None,
        })
    }

    /// The signal of a call or cast, marked untrusted (it came from the
    /// network).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Validation`] when it is missing.
    pub(crate) fn take_signal(&mut self) -> Result<Arc<Signal>> {
        self.signal
            .take()
            .ok_or_else(|| Error::validation("cluster request without a signal"))
    }

    /// The caller's budget (the default call timeout without one).
    pub(crate) fn budget(&self) -> Duration {
        self.deadline_ms
            .map_or(crate::server::DEFAULT_CALL_TIMEOUT, Duration::from_millis)
    }
}

/// A request's signal, marked untrusted as it is decoded.
fn untrusted_signal<'de, D: serde::Deserializer<'de>>(
    de: D,
) -> std::result::Result<Option<Arc<Signal>>, D::Error> {
    Ok(Option::<Signal>::deserialize(de)?.map(|s| Arc::new(s.untrusted())))
}

/// Only the version of an envelope.
#[derive(Deserialize)]
struct Version {
    v: u32,
}

fn unsupported(v: u32) -> Error {
    Error::validation("unsupported cluster envelope version")
        .with_detail("version", v)
        .with_detail("supported", VERSION)
}

/// A gateway's answer to a call or a watch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Reply {
    pub(crate) v: u32,
    /// Present (`null` included) on success.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub(crate) ok: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<Value>,
}

impl Reply {
    pub(crate) fn encode(result: &Result<Value>) -> Vec<u8> {
        match result {
            Ok(v) => ok_bytes(v),
            Err(e) => error_bytes(e),
        }
    }

    /// The reply to a call: the agent's checkpoint written straight from
    /// its state (no intermediate `Value`), or the error.
    pub(crate) fn encode_checkpoint(result: &Result<AgentState>) -> Vec<u8> {
        match result {
            Ok(state) => ok_bytes(&Checkpoint::of(state)),
            Err(e) => error_bytes(e),
        }
    }

    /// The result a reply carries.
    ///
    /// # Errors
    ///
    /// The remote error, rebuilt from its envelope; [`ErrorKind::Validation`]
    /// "malformed cluster reply" when the bytes are not a reply.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Value> {
        // What this build writes for a success, `{"v":1,"ok":…}`, is read
        // as the value alone; anything else (an error, another writer's
        // spacing or order, a malformed reply) takes the full path.
        if let Some(ok) = bytes
            .strip_prefix(OK_PREFIX)
            .and_then(|rest| rest.strip_suffix(b"}"))
            && let Ok(value) = from_network::<Value>(ok)
        {
            return Ok(value);
        }
        let reply: Reply = from_network(bytes)
            .map_err(|e| Error::validation("malformed cluster reply").with_source(e))?;
        match (reply.ok, reply.error) {
            (Some(ok), None) => Ok(ok),
            (None, Some(env)) => Err(error_from_envelope(&env)),
            _ => Err(Error::validation("malformed cluster reply")),
        }
    }
}

impl Reply {
    /// The checkpoint's JSON in a success reply, its syntax checked but no
    /// value built: the reply's text and where the checkpoint is in it.
    ///
    /// # Errors
    ///
    /// As [`Reply::decode`].
    pub(crate) fn decode_json(bytes: Vec<u8>) -> Result<(String, std::ops::Range<usize>)> {
        // What this build writes, `{"v":1,"ok":…}`: the value is checked
        // where it is (no tree built). Anything else takes the full
        // decoder, and a success is written again compactly.
        let end = bytes.len().saturating_sub(1);
        if !(bytes.starts_with(OK_PREFIX) && bytes.ends_with(b"}") && end > OK_PREFIX.len()) {
            return Self::decode_rewritten(&bytes);
        }
        match String::from_utf8(bytes) {
            Ok(text) => {
                let ok = OK_PREFIX.len()..end;
                if text
                    .get(ok.clone())
                    .is_some_and(|json| serde_json::from_str::<IgnoredAny>(json).is_ok())
                {
                    return Ok((text, ok));
                }
                Self::decode_rewritten(text.as_bytes())
            }
            Err(e) => Self::decode_rewritten(e.as_bytes()),
        }
    }

    /// [`Reply::decode`], a success written again as compact JSON.
    fn decode_rewritten(bytes: &[u8]) -> Result<(String, std::ops::Range<usize>)> {
        Self::decode(bytes).map(|value| {
            let json = value.to_string();
            let len = json.len();
            (json, 0..len)
        })
    }
}

/// A reply `{"v":1,"ok":…}`.
#[derive(Serialize)]
struct OkOut<'a, T: Serialize> {
    v: u32,
    ok: &'a T,
}

/// A reply `{"v":1,"error":…}`.
#[derive(Serialize)]
struct ErrorOut {
    v: u32,
    error: Value,
}

/// The start of a success reply as [`ok_bytes`] writes it.
const OK_PREFIX: &[u8] = br#"{"v":1,"ok":"#;

fn ok_bytes<T: Serialize>(ok: &T) -> Vec<u8> {
    // JSON values and maps of them: cannot fail.
    let mut out = Vec::with_capacity(ENCODE_CAPACITY);
    let _ = serde_json::to_writer(&mut out, &OkOut { v: VERSION, ok });
    out
}

fn error_bytes(e: &Error) -> Vec<u8> {
    serde_json::to_vec(&ErrorOut {
        v: VERSION,
        error: e.to_envelope(),
    })
    .unwrap_or_default()
}

/// [`AgentState::checkpoint`]'s `{version, agent, id, state}`, written
/// from the agent without building a `Value` (a unit test holds the two
/// equal).
#[derive(Serialize)]
struct Checkpoint<'a> {
    version: &'static str,
    agent: &'static str,
    id: &'a str,
    state: &'a crate::state::StateMap,
}

impl<'a> Checkpoint<'a> {
    fn of(state: &'a AgentState) -> Self {
        let meta = state.metadata();
        Checkpoint {
            version: meta.version,
            agent: meta.name,
            id: state.id(),
            state: state.state(),
        }
    }
}

/// A field that is there, even as `null` (serde reads `null` as `None`
/// for an `Option` otherwise).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A gateway's notice that a watched agent ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Down {
    pub(crate) v: u32,
    pub(crate) agent: String,
    pub(crate) node: String,
    pub(crate) reason: String,
}

impl Down {
    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// # Errors
    ///
    /// [`ErrorKind::Validation`] "malformed cluster envelope".
    pub(crate) fn decode(bytes: &[u8]) -> Result<Down> {
        from_network(bytes)
            .map_err(|e| Error::validation("malformed cluster envelope").with_source(e))
    }
}

/// Rebuilds an error from its canonical envelope (`{type, message,
/// details, retryable}`); an unknown type becomes `internal`.
pub(crate) fn error_from_envelope(env: &Value) -> Error {
    let kind = env
        .get("type")
        .and_then(Value::as_str)
        .map_or(ErrorKind::Internal, kind_from_str);
    let message: Cow<'static, str> = env
        .get("message")
        .and_then(Value::as_str)
        .map_or(Cow::Borrowed("remote error"), |m| Cow::Owned(m.to_owned()));
    let mut err = Error::new(kind, message);
    if let Some(Value::Object(details)) = env.get("details") {
        err = err.with_details(Value::Object(details.clone()));
    }
    err
}

fn kind_from_str(s: &str) -> ErrorKind {
    const KINDS: [ErrorKind; 14] = [
        ErrorKind::Validation,
        ErrorKind::Configuration,
        ErrorKind::Execution,
        ErrorKind::Timeout,
        ErrorKind::Compensation,
        ErrorKind::Routing,
        ErrorKind::Dispatch,
        ErrorKind::QueueOverflow,
        ErrorKind::NotFound,
        ErrorKind::Cancelled,
        ErrorKind::Internal,
        ErrorKind::Storage,
        ErrorKind::Conflict,
        ErrorKind::Fenced,
    ];
    KINDS
        .into_iter()
        .find(|k| k.as_str() == s)
        .unwrap_or(ErrorKind::Internal)
}

/// The checkpoint form of an agent as compact JSON text (as
/// [`checkpoint_value`] would print).
pub(crate) fn checkpoint_json(state: &AgentState) -> String {
    // Strings and JSON values into memory: cannot fail.
    serde_json::to_string(&Checkpoint::of(state)).unwrap_or_default()
}

/// The checkpoint form of an agent as a JSON object, the `ok` of a call.
pub(crate) fn checkpoint_value(state: &AgentState) -> Value {
    match state.checkpoint() {
        Value::Object(map) => Value::Object(map),
        other => Value::Object(Map::from_iter([("state".to_owned(), other)])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_request_round_trips() {
        let signal = Signal::new("order.pay", json!({"amount": 42}));
        let req = Outgoing::new(Op::Call, "order:1", Some("order"))
            .signal(&signal)
            .deadline(Duration::from_millis(1500));
        let mut back = Request::decode(&req.encode()).unwrap();
        assert_eq!(back.budget(), Duration::from_millis(1500));
        let s = back.take_signal().unwrap();
        assert_eq!((s.ty(), s.id()), ("order.pay", signal.id()));
        assert!(!s.is_trusted());
    }

    #[test]
    fn the_binary_form_decodes_to_what_the_json_form_does() {
        let signal = Signal::builder("order.pay")
            .source("/shop")
            .subject("order-1")
            .data(json!({"amount": 42, "note": "a \"quoted\" é"}))
            .extension("tenant", "acme")
            .build()
            .unwrap();
        for (op, deadline) in [(Op::Call, Some(1500)), (Op::Cast, None)] {
            let mut out = Outgoing::new(op, "order:1", Some("order")).signal(&signal);
            if let Some(ms) = deadline {
                out = out.deadline(Duration::from_millis(ms));
            }
            let bytes = out.encode_binary();
            assert_eq!(bytes[0], BINARY_MAGIC);
            let mut bin = Request::decode(&bytes).unwrap();
            let mut text = Request::decode(&out.encode()).unwrap();
            assert_eq!(
                (bin.op, &bin.agent, &bin.kind),
                (op, &text.agent, &text.kind)
            );
            assert_eq!((bin.v, bin.deadline_ms), (text.v, text.deadline_ms));
            let (b, t) = (bin.take_signal().unwrap(), text.take_signal().unwrap());
            assert_eq!(*b, *t);
            assert_eq!(*b, signal);
            assert!(!b.is_trusted());
            assert_eq!(b.extension("tenant"), Some(&json!("acme")));
        }
        // A signal without data, subject or extensions.
        let bare = Signal::new("tick", Value::Null);
        let out = Outgoing::new(Op::Cast, "a", None).signal(&bare);
        let mut back = Request::decode(&out.encode_binary()).unwrap();
        assert_eq!(*back.take_signal().unwrap(), bare);
        assert_eq!(back.kind, None);
    }

    #[test]
    fn other_requests_stay_json_in_the_binary_encoder() {
        let out = Outgoing::new(Op::Watch, "a", None).sender("node-a");
        assert_eq!(out.encode_binary(), out.encode());
    }

    #[test]
    fn malformed_binary_requests_are_validation_errors() {
        let signal = Signal::new("order.pay", json!({"amount": 42}));
        let good = Outgoing::new(Op::Cast, "order:1", None)
            .signal(&signal)
            .encode_binary();
        let message = |bytes: &[u8]| Request::decode(bytes).unwrap_err().message().to_owned();
        // Every truncation, and trailing bytes.
        for end in 0..good.len() {
            if end == 0 {
                continue;
            }
            assert_eq!(
                message(&good[..end]),
                "malformed cluster envelope",
                "cut at {end}"
            );
        }
        let mut long = good.clone();
        long.push(0);
        assert_eq!(message(&long), "malformed cluster envelope");
        // A bad op, a bad deadline flag, bad UTF-8, bad data JSON.
        let mut bad = good.clone();
        bad[1] = 7;
        assert_eq!(message(&bad), "malformed cluster envelope");
        let agent_end = 2 + 4 + "order:1".len() + 4;
        let mut bad = good.clone();
        bad[agent_end] = 9;
        assert_eq!(message(&bad), "malformed cluster envelope");
        let mut bad = good.clone();
        bad[6] = 0xff;
        assert_eq!(message(&bad), "malformed cluster envelope");
        let data_at = good.windows(2).position(|w| w == b"{\"").unwrap();
        let mut bad = good.clone();
        bad[data_at] = b'[';
        assert_eq!(message(&bad), "malformed cluster envelope");
        // Lengths past the end (u32::MAX - 1) do not panic.
        let mut bad = vec![BINARY_MAGIC, 1];
        bad.extend_from_slice(&(u32::MAX - 1).to_le_bytes());
        assert_eq!(message(&bad), "malformed cluster envelope");
        // An empty agent id and an invalid signal, as in JSON.
        let out = Outgoing::new(Op::Cast, "", None).signal(&signal);
        assert_eq!(message(&out.encode_binary()), "empty agent id");
        let empty_type = Signal::new("", json!({"amount": 42}));
        let out = Outgoing::new(Op::Cast, "a", None).signal(&empty_type);
        let err = Request::decode(&out.encode_binary()).unwrap_err();
        assert_eq!(err.message(), "malformed cluster envelope");
        assert_eq!(err.kind(), ErrorKind::Validation);
        let cause = std::error::Error::source(&err)
            .and_then(|c| c.downcast_ref::<Error>())
            .unwrap();
        assert_eq!(cause.message(), "invalid signal: missing type");
    }

    #[test]
    fn malformed_requests_are_validation_errors() {
        for (bytes, message) in [
            (&b"\xff\x00garbage"[..], "malformed cluster envelope"),
            (br#"{"v":1}"#, "malformed cluster envelope"),
            (
                br#"{"v":2,"op":"cast","agent":"a","signal":{}}"#,
                "unsupported cluster envelope version",
            ),
            (br#"{"v":1,"op":"cast","agent":""}"#, "empty agent id"),
            (
                br#"{"v":1,"op":"call","agent":"a"}"#,
                "cluster request without a signal",
            ),
        ] {
            let err = Request::decode(bytes).unwrap_err();
            assert_eq!(
                (err.kind(), err.message()),
                (ErrorKind::Validation, message)
            );
        }
        // A signal that is not a CloudEvent: the envelope is malformed,
        // and the source says why.
        let err =
            Request::decode(br#"{"v":1,"op":"cast","agent":"a","signal":{"x":1}}"#).unwrap_err();
        assert_eq!(
            (err.kind(), err.message()),
            (ErrorKind::Validation, "malformed cluster envelope")
        );
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert!(
            source.as_deref().is_some_and(|s| s.contains("specversion")),
            "{source:?}"
        );
    }

    #[test]
    fn a_call_reply_carries_the_agents_checkpoint() {
        use crate::agent::{Agent, AgentOptions};
        struct Order;
        impl Agent for Order {
            const NAME: &'static str = "order";
            type Schema = ();
        }
        let mut state = AgentState::new(Order, AgentOptions::new().id("order:1"));
        state.state_mut().insert("n", 1);
        state.state_mut().insert("items", json!([{"sku": "a"}]));
        let bytes = Reply::encode_checkpoint(&Ok(state.clone()));
        assert_eq!(Reply::decode(&bytes).unwrap(), state.checkpoint());
        assert_eq!(Reply::decode(&bytes).unwrap(), checkpoint_value(&state));
        let err = Reply::decode(&Reply::encode_checkpoint(&Err(Error::fenced(
            "agent fenced",
        ))))
        .unwrap_err();
        assert_eq!(
            (err.kind(), err.message()),
            (ErrorKind::Fenced, "agent fenced")
        );
    }

    #[test]
    fn errors_cross_as_envelopes() {
        let err = Error::not_found("no such agent kind").with_detail("kind", "order");
        let bytes = Reply::encode(&Err(err));
        let back = Reply::decode(&bytes).unwrap_err();
        assert_eq!(
            (back.kind(), back.message()),
            (ErrorKind::NotFound, "no such agent kind")
        );
        assert_eq!(back.details()["kind"], "order");
        assert_eq!(
            Reply::decode(&Reply::encode(&Ok(json!({"a": 1})))).unwrap(),
            json!({"a": 1})
        );
        assert_eq!(
            Reply::decode(&Reply::encode(&Ok(Value::Null))).unwrap(),
            Value::Null
        );
        assert_eq!(
            Reply::decode(b"[]").unwrap_err().message(),
            "malformed cluster reply"
        );
        // The success prefix with more after the value, or bytes that are
        // not UTF-8, are not a reply: the fast path does not take them.
        for bad in [
            &br#"{"v":1,"ok":1,"error":{"type":"internal"}}"#[..],
            b"{\"v\":1,\"ok\":\"\xff\"}",
            br#"{"v":1,"ok":}"#,
        ] {
            assert_eq!(
                Reply::decode(bad).unwrap_err().message(),
                "malformed cluster reply",
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // Another writer's spacing is still a reply.
        assert_eq!(
            Reply::decode(br#"{ "ok": {"a": [1]}, "v": 1 }"#).unwrap(),
            json!({"a": [1]})
        );
        assert_eq!(OK_PREFIX, &ok_bytes(&1)[..OK_PREFIX.len()]);
        assert_eq!(
            error_from_envelope(&json!({"type": "nope"})).kind(),
            ErrorKind::Internal
        );
    }

    /// The direct writer writes the bytes serde_json writes for the
    /// struct, every field and operation.
    #[test]
    fn requests_are_written_as_serde_json_writes_them() {
        let signal = Signal::new("order.pay", json!({"amount": 42, "memo": "a\"b"}));
        let Value::Object(options) = json!({"on_parent_death": "stop", "q": "x\"y"}) else {
            unreachable!()
        };
        let ops = [
            Op::Call,
            Op::Cast,
            Op::Watch,
            Op::Unwatch,
            Op::Start,
            Op::Stop,
            Op::ParentDown,
        ];
        for op in ops {
            let bare = Outgoing::new(op, "order:1", None);
            let full = Outgoing::new(op, "order\"1é", Some("order"))
                .signal(&signal)
                .deadline(Duration::from_millis(1500))
                .sender("node-a")
                .reason("shutdown: x\ny")
                .parent("p:1", Some("tag\\1"))
                .options(Some(&options));
            for req in [bare, full] {
                assert_eq!(
                    String::from_utf8(req.encode()).unwrap(),
                    serde_json::to_string(&req).unwrap()
                );
            }
        }
        assert_eq!(VERSION_PREFIX, format!(r#"{{"v":{VERSION}"#).as_bytes());
    }

    #[test]
    fn a_success_replys_json_is_checked_in_place() {
        // This build's form: the checkpoint's text as it is in the reply.
        let bytes = ok_bytes(&json!({"id": "a:1", "state": {"s": "q\"é"}}));
        let (text, ok) = Reply::decode_json(bytes.clone()).unwrap();
        assert_eq!(&text[ok.clone()], r#"{"id":"a:1","state":{"s":"q\"é"}}"#);
        assert_eq!(
            serde_json::from_str::<Value>(&text[ok]).unwrap(),
            Reply::decode(&bytes).unwrap()
        );
        // Another writer's form: written again compactly.
        let (text, ok) = Reply::decode_json(br#"{ "ok": {"a": [1]}, "v": 1 }"#.to_vec()).unwrap();
        assert_eq!(&text[ok], r#"{"a":[1]}"#);
        let (text, ok) = Reply::decode_json(br#"{"v":1,"ok":null}"#.to_vec()).unwrap();
        assert_eq!(&text[ok], "null");
        // Errors and malformed replies: as `decode`.
        let err =
            Reply::decode_json(Reply::encode(&Err(Error::fenced("agent fenced")))).unwrap_err();
        assert_eq!(
            (err.kind(), err.message()),
            (ErrorKind::Fenced, "agent fenced")
        );
        for bad in [
            &br#"{"v":1,"ok":1,"error":{"type":"internal"}}"#[..],
            b"{\"v\":1,\"ok\":\"\xff\"}",
            br#"{"v":1,"ok":}"#,
            br#"{"v":1,"ok":{"a":}"#,
            br#"{"v":1,"ok":[1}"#,
            b"",
            b"}",
        ] {
            let err = Reply::decode_json(bad.to_vec()).unwrap_err();
            assert_eq!(
                (err.kind(), err.message()),
                (ErrorKind::Validation, "malformed cluster reply"),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn checkpoint_json_prints_the_checkpoint_value() {
        use crate::agent::{Agent, AgentOptions};
        struct Order;
        impl Agent for Order {
            const NAME: &'static str = "order";
            type Schema = ();
        }
        let mut state = AgentState::new(Order, AgentOptions::new().id("order:1"));
        state.state_mut().insert("b", 1);
        state.state_mut().insert("a", json!([{"s": "x\ny"}]));
        assert_eq!(
            checkpoint_json(&state),
            checkpoint_value(&state).to_string()
        );
    }
}
