//! The bytes that cross nodes: requests to a gateway, its replies and its
//! down notices, as versioned JSON. Decoding never panics: anything
//! malformed is an [`ErrorKind::Validation`] error, which the gateway
//! answers with (a call) or drops with a log line (a cast).

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, ErrorKind, Result};
use crate::signal::Signal;

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
}

/// A request to a gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Request {
    pub(crate) v: u32,
    pub(crate) op: Op,
    pub(crate) agent: String,
    /// The kind the owner starts the agent from when it does not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) kind: Option<String>,
    /// The signal as CloudEvents JSON (call and cast).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) signal: Option<Value>,
    /// The caller's remaining budget when it sent the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) deadline_ms: Option<u64>,
    /// The sending node (watch, unwatch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) from: Option<String>,
    /// The stop reason (stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
}

impl Request {
    pub(crate) fn new(op: Op, agent: &str, kind: Option<&str>) -> Self {
        Request {
            v: VERSION,
            op,
            agent: agent.to_owned(),
            kind: kind.map(str::to_owned),
            signal: None,
            deadline_ms: None,
            from: None,
            reason: None,
        }
    }

    pub(crate) fn reason(mut self, reason: &str) -> Self {
        self.reason = Some(reason.to_owned());
        self
    }

    pub(crate) fn signal(mut self, signal: &Signal) -> Self {
        self.signal = Some(signal.to_json_value());
        self
    }

    pub(crate) fn deadline(mut self, remaining: Duration) -> Self {
        self.deadline_ms = Some(u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX));
        self
    }

    pub(crate) fn sender(mut self, node: &str) -> Self {
        self.from = Some(node.to_owned());
        self
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        // A struct of strings, numbers and a JSON value: cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes and checks a request.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Validation`] "malformed cluster envelope" (bad JSON or
    /// fields), "unsupported cluster envelope version", "empty agent id",
    /// "cluster request without a signal" for a call or cast.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Request> {
        let req: Request = serde_json::from_slice(bytes).map_err(|e| {
            Error::validation("malformed cluster envelope")
                .with_detail("bytes", bytes.len() as u64)
                .with_source(e)
        })?;
        if req.v != VERSION {
            return Err(Error::validation("unsupported cluster envelope version")
                .with_detail("version", req.v)
                .with_detail("supported", VERSION));
        }
        if req.agent.is_empty() {
            return Err(Error::validation("empty agent id"));
        }
        if matches!(req.op, Op::Call | Op::Cast) && req.signal.is_none() {
            return Err(Error::validation("cluster request without a signal"));
        }
        Ok(req)
    }

    /// The signal of a call or cast, marked untrusted (it came from the
    /// network).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Validation`] when it is missing or not a valid
    /// CloudEvent.
    pub(crate) fn take_signal(&mut self) -> Result<Signal> {
        let value = self
            .signal
            .take()
            .ok_or_else(|| Error::validation("cluster request without a signal"))?;
        Ok(Signal::from_value(value)?.untrusted())
    }

    /// The caller's budget (the default call timeout without one).
    pub(crate) fn budget(&self) -> Duration {
        self.deadline_ms
            .map_or(crate::server::DEFAULT_CALL_TIMEOUT, Duration::from_millis)
    }
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
        let reply = match result {
            Ok(v) => Reply {
                v: VERSION,
                ok: Some(v.clone()),
                error: None,
            },
            Err(e) => Reply {
                v: VERSION,
                ok: None,
                error: Some(e.to_envelope()),
            },
        };
        serde_json::to_vec(&reply).unwrap_or_default()
    }

    /// The result a reply carries.
    ///
    /// # Errors
    ///
    /// The remote error, rebuilt from its envelope; [`ErrorKind::Validation`]
    /// "malformed cluster reply" when the bytes are not a reply.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Value> {
        let reply: Reply = serde_json::from_slice(bytes)
            .map_err(|e| Error::validation("malformed cluster reply").with_source(e))?;
        match (reply.ok, reply.error) {
            (Some(ok), None) => Ok(ok),
            (None, Some(env)) => Err(error_from_envelope(&env)),
            _ => Err(Error::validation("malformed cluster reply")),
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
        serde_json::from_slice(bytes)
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

/// The checkpoint form of an agent as a JSON object, the `ok` of a call.
pub(crate) fn checkpoint_value(state: &crate::agent::AgentState) -> Value {
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
        let req = Request::new(Op::Call, "order:1", Some("order"))
            .signal(&signal)
            .deadline(Duration::from_millis(1500));
        let mut back = Request::decode(&req.encode()).unwrap();
        assert_eq!(back.budget(), Duration::from_millis(1500));
        let s = back.take_signal().unwrap();
        assert_eq!((s.ty(), s.id()), ("order.pay", signal.id()));
        assert!(!s.is_trusted());
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
        let mut bad_signal =
            Request::decode(br#"{"v":1,"op":"cast","agent":"a","signal":{"x":1}}"#).unwrap();
        assert_eq!(
            bad_signal.take_signal().unwrap_err().kind(),
            ErrorKind::Validation
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
        assert_eq!(
            error_from_envelope(&json!({"type": "nope"})).kind(),
            ErrorKind::Internal
        );
    }
}
