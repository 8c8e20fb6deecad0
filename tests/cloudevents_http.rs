//! The CloudEvents HTTP binding on the wire: what HTTP and webhook dispatch
//! send (structured by default, binary as an option, Jido's "1.0.2" for Jido
//! peers), `Signal::from_http` on the receiving end, `WebhookVerifier`, and
//! interoperability with the Python `cloudevents` SDK in both directions
//! (scripts/ce_peer.py; skipped with a message when python3 or the package
//! is missing, required when `CI=true`).
#![cfg(feature = "http")]

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use jido::ErrorKind;
use jido::signal::Signal;
use jido::signal::dispatch::{
    ContentMode, DispatchConfig, HttpTarget, RetryPolicy, WebhookTarget, WebhookVerifier,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};

const PEER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/ce_peer.py");
const STRUCTURED: &str = "application/cloudevents+json; charset=utf-8";

// ------------------------------------------------------------ helpers

/// A request as a loopback server saw it, and what `Signal::from_http`
/// made of it.
#[derive(Debug, Clone)]
struct Hit {
    headers: HeaderMap,
    body: Bytes,
    parsed: Result<Signal, jido::Error>,
}

struct Server {
    addr: SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl Server {
    /// A loopback axum server that parses every request with
    /// `Signal::from_http`: 200 when it parses, 400 with the message when not.
    async fn start() -> Self {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let app = axum::Router::new()
            .fallback(receive)
            .with_state(hits.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { addr, hits }
    }

    fn url(&self) -> String {
        format!("http://{}/events", self.addr)
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }
}

async fn receive(
    State(hits): State<Arc<Mutex<Vec<Hit>>>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let parsed = Signal::from_http(&headers, &body);
    let answer = match &parsed {
        Ok(_) => (StatusCode::OK, String::new()),
        Err(e) => (StatusCode::BAD_REQUEST, e.message().to_owned()),
    };
    hits.lock().unwrap().push(Hit {
        headers,
        body,
        parsed,
    });
    answer
}

fn header<'a>(hit: &'a Hit, name: &str) -> Vec<&'a str> {
    hit.headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect()
}

fn ce_headers(hit: &Hit) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = hit
        .headers
        .iter()
        .filter(|(n, _)| n.as_str().starts_with("ce-"))
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    out.sort();
    out
}

async fn send(target: HttpTarget, signal: &Signal) -> jido::Result<()> {
    DispatchConfig::new(target.retry(RetryPolicy::none()))
        .unwrap()
        .dispatch(signal)
        .await
}

fn order(id: &str) -> Signal {
    Signal::builder("order.placed")
        .id(id)
        .source("/shop")
        .subject("order-42")
        .time_rfc3339("2026-01-02T03:04:05Z")
        .dataschema("https://example.com/order.json")
        .data(json!({"total": 99, "items": ["a", "b"], "note": "café"}))
        .extension("tenant", "acme")
        .extension("priority", 3)
        .build()
        .unwrap()
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (n, v) in pairs {
        map.append(
            axum::http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    map
}

fn reason(err: &jido::Error) -> &str {
    err.detail("reason").and_then(Value::as_str).unwrap_or("")
}

// ------------------------------------------------- what we send (no Python)

#[tokio::test]
async fn http_dispatch_is_structured_cloudevents_by_default() {
    let server = Server::start().await;
    let signal = order("ce-default");
    send(HttpTarget::new(server.url()), &signal).await.unwrap();
    let hits = server.hits();
    assert_eq!(hits.len(), 1);
    let hit = &hits[0];
    assert_eq!(header(hit, "content-type"), vec![STRUCTURED]);
    assert!(ce_headers(hit).is_empty());
    let body: Value = serde_json::from_slice(&hit.body).unwrap();
    assert_eq!(body["specversion"], "1.0");
    assert_eq!(hit.body, signal.to_cloudevents_json_string().as_bytes());
    let parsed = hit.parsed.clone().unwrap();
    assert_eq!(parsed, signal);
    assert!(!parsed.is_trusted());
}

#[tokio::test]
async fn binary_mode_sends_ce_headers_and_the_data_as_body() {
    let server = Server::start().await;
    let signal = order("ce-binary")
        .to_builder()
        .extension("label", "50% off \"now\" ü")
        .extension("flag", true)
        .extension("meta", json!({"k": [1]}))
        .build()
        .unwrap();
    send(
        HttpTarget::new(server.url()).content_mode(ContentMode::Binary),
        &signal,
    )
    .await
    .unwrap();
    let hit = &server.hits()[0];
    assert_eq!(header(hit, "content-type"), vec!["application/json"]);
    let expected: Vec<(String, String)> = [
        ("ce-dataschema", "https://example.com/order.json"),
        ("ce-flag", "true"),
        ("ce-id", "ce-binary"),
        ("ce-label", "50%25%20off%20%22now%22%20%C3%BC"),
        ("ce-meta", "{%22k%22:[1]}"),
        ("ce-priority", "3"),
        ("ce-source", "/shop"),
        ("ce-specversion", "1.0"),
        ("ce-subject", "order-42"),
        ("ce-tenant", "acme"),
        ("ce-time", "2026-01-02T03:04:05Z"),
        ("ce-type", "order.placed"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(ce_headers(hit), expected);
    let body: Value = serde_json::from_slice(&hit.body).unwrap();
    assert_eq!(
        body,
        json!({"total": 99, "items": ["a", "b"], "note": "café"})
    );
    // Back into a signal: header extensions arrive as strings.
    let parsed = hit.parsed.clone().unwrap();
    assert_eq!(parsed.id(), "ce-binary");
    assert_eq!(parsed.ty(), "order.placed");
    assert_eq!(parsed.source(), "/shop");
    assert_eq!(parsed.subject(), Some("order-42"));
    assert_eq!(parsed.time(), Some("2026-01-02T03:04:05Z"));
    assert_eq!(parsed.dataschema(), signal.dataschema());
    assert_eq!(parsed.datacontenttype(), Some("application/json"));
    assert_eq!(parsed.data(), signal.data());
    assert_eq!(parsed.extension("label"), Some(&json!("50% off \"now\" ü")));
    assert_eq!(parsed.extension("priority"), Some(&json!("3")));
    assert_eq!(parsed.extension("flag"), Some(&json!("true")));
    assert_eq!(parsed.extension("meta"), Some(&json!("{\"k\":[1]}")));
    assert!(!parsed.is_trusted());
}

#[tokio::test]
async fn binary_mode_text_and_empty_data() {
    let server = Server::start().await;
    let text = Signal::builder("note")
        .id("t1")
        .datacontenttype("text/plain; charset=utf-8")
        .data("hello world")
        .build()
        .unwrap();
    let empty = Signal::builder("ping").id("e1").build().unwrap();
    let target = HttpTarget::new(server.url())
        .content_mode(ContentMode::Binary)
        .header("content-type", "application/xml");
    send(target.clone(), &text).await.unwrap();
    send(target, &empty).await.unwrap();
    let hits = server.hits();
    assert_eq!(
        header(&hits[0], "content-type"),
        vec!["text/plain; charset=utf-8"]
    );
    assert_eq!(&hits[0].body[..], b"hello world");
    assert_eq!(
        hits[0].parsed.clone().unwrap().data(),
        Some(&json!("hello world"))
    );
    // No data: no body and no content-type (the caller's is dropped).
    assert!(header(&hits[1], "content-type").is_empty());
    assert!(hits[1].body.is_empty());
    let parsed = hits[1].parsed.clone().unwrap();
    assert_eq!(parsed.data(), None);
    assert_eq!(parsed.datacontenttype(), None);
    assert_eq!(parsed.ty(), "ping");
}

#[tokio::test]
async fn jido_specversion_sends_jidos_wire_and_still_parses() {
    let server = Server::start().await;
    let signal = order("ce-jido");
    send(
        HttpTarget::new(server.url()).jido_specversion(true),
        &signal,
    )
    .await
    .unwrap();
    send(
        HttpTarget::new(server.url())
            .jido_specversion(true)
            .content_mode(ContentMode::Binary),
        &signal,
    )
    .await
    .unwrap();
    let hits = server.hits();
    assert_eq!(header(&hits[0], "content-type"), vec!["application/json"]);
    assert_eq!(hits[0].body, signal.to_json_vec());
    assert_eq!(hits[0].parsed.clone().unwrap(), signal);
    assert_eq!(header(&hits[1], "ce-specversion"), vec!["1.0.2"]);
    assert_eq!(hits[1].parsed.clone().unwrap().id(), "ce-jido");
}

// ------------------------------------------------------ Signal::from_http

#[test]
fn from_http_reads_both_spec_versions_and_marks_untrusted() {
    let signal = order("both");
    for (content_type, body) in [
        (STRUCTURED, signal.to_cloudevents_json_string()),
        ("application/cloudevents+json", signal.to_json_string()),
        ("application/json", signal.to_json_string()),
        ("application/json", signal.to_cloudevents_json_string()),
    ] {
        let parsed =
            Signal::from_http(&headers(&[("content-type", content_type)]), body.as_bytes())
                .unwrap();
        assert_eq!(parsed, signal, "{content_type}");
        assert!(!parsed.is_trusted());
    }
    // No content type at all: a structured body.
    let parsed = Signal::from_http(&HeaderMap::new(), signal.to_json_vec().as_slice()).unwrap();
    assert_eq!(parsed, signal);
}

#[test]
fn from_http_decodes_data_base64() {
    let body = json!({
        "specversion": "1.0", "id": "b64", "source": "/s", "type": "t",
        "datacontenttype": "text/plain", "data_base64": "aGVsbG8gd29ybGQ="
    });
    let parsed = Signal::from_http(
        &headers(&[("content-type", "application/cloudevents+json")]),
        body.to_string().as_bytes(),
    )
    .unwrap();
    assert_eq!(parsed.data(), Some(&json!("hello world")));
    assert_eq!(parsed.extension("data_base64"), None);
    let json_b64 = json!({
        "specversion": "1.0", "id": "b64", "source": "/s", "type": "t",
        "datacontenttype": "application/json", "data_base64": "eyJhIjoxfQ=="
    });
    let parsed = Signal::from_http(&HeaderMap::new(), json_b64.to_string().as_bytes()).unwrap();
    assert_eq!(parsed.data(), Some(&json!({"a": 1})));
}

#[test]
fn from_http_refuses_bad_input_with_typed_errors() {
    let ce = |extra: &[(&str, &str)]| {
        let mut h = headers(&[
            ("ce-specversion", "1.0"),
            ("ce-id", "1"),
            ("ce-source", "/s"),
            ("ce-type", "t"),
        ]);
        for (n, v) in extra {
            h.append(
                axum::http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    };
    let cases: Vec<(HeaderMap, &[u8], &str, &str)> = vec![
        (
            ce(&[("ce-type", "u")]),
            b"",
            "invalid signal: duplicate header ce-type",
            "duplicate_header",
        ),
        (
            ce(&[("ce-tenant", "%FF")]),
            b"",
            "invalid signal: header ce-tenant is not percent-encoded utf-8",
            "malformed_header",
        ),
        (
            ce(&[("ce-data", "x")]),
            b"",
            "invalid signal: header ce-data is not allowed in binary mode",
            "malformed_header",
        ),
        (
            ce(&[("content-type", "application/json")]),
            b"{nope",
            "invalid signal: data is not valid json",
            "malformed_json",
        ),
        (
            ce(&[("content-type", "application/octet-stream")]),
            &[0xff, 0xfe],
            "invalid signal: data is not utf-8 text",
            "binary_data",
        ),
        (
            ce(&[("ce-specversion", "2.0")]),
            b"",
            "invalid signal: duplicate header ce-specversion",
            "duplicate_header",
        ),
        (
            headers(&[
                ("ce-specversion", "0.3"),
                ("ce-source", "/s"),
                ("ce-type", "t"),
            ]),
            b"",
            "invalid signal: unexpected specversion 0.3",
            "unexpected",
        ),
        (
            headers(&[("ce-specversion", "1.0"), ("ce-source", "/s")]),
            b"",
            "invalid signal: missing type",
            "missing",
        ),
        (
            headers(&[("content-type", "text/plain")]),
            b"hi",
            "invalid signal: not a cloudevent: no ce-specversion header and content type text/plain",
            "not_a_cloudevent",
        ),
        (
            headers(&[("content-type", "application/cloudevents-batch+json")]),
            b"[]",
            "invalid signal: batched cloudevents are not supported",
            "batch_unsupported",
        ),
        (
            headers(&[("content-type", STRUCTURED)]),
            br#"{"id":"1","source":"/s","type":"t"}"#,
            "invalid signal: missing specversion",
            "missing",
        ),
        (
            headers(&[("content-type", STRUCTURED)]),
            br#"{"specversion":"1.0","source":"/s","type":"t","data":1,"data_base64":"AA=="}"#,
            "invalid signal: data and data_base64 both given",
            "conflict",
        ),
        (
            headers(&[("content-type", STRUCTURED)]),
            br#"{"specversion":"1.0","source":"/s","type":"t","data_base64":"!!"}"#,
            "invalid signal: data_base64 is not base64",
            "invalid",
        ),
    ];
    for (h, body, message, why) in cases {
        let err = Signal::from_http(&h, body).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation, "{message}");
        assert_eq!(err.message(), message);
        assert_eq!(reason(&err), why, "{message}");
    }
    // A header value that is not visible ASCII.
    let mut h = ce(&[]);
    h.insert(
        "ce-tenant",
        HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
    );
    let err = Signal::from_http(&h, b"").unwrap_err();
    assert_eq!(
        err.message(),
        "invalid signal: header ce-tenant is not visible ascii"
    );
    assert_eq!(reason(&err), "malformed_header");
    // Nesting too deep in binary data is refused, not a stack overflow.
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let err = Signal::from_http(
        &ce(&[("content-type", "application/json")]),
        deep.as_bytes(),
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.detail("field"), Some(&json!("data")));
}

// ------------------------------------------------------------- webhooks

#[tokio::test]
async fn webhook_requests_verify_and_parse_in_both_modes() {
    let server = Server::start().await;
    let signal = order("wh-1");
    for mode in [ContentMode::Structured, ContentMode::Binary] {
        DispatchConfig::new(
            WebhookTarget::new(server.url())
                .secret("s3cret")
                .content_mode(mode)
                .retry(RetryPolicy::none()),
        )
        .unwrap()
        .dispatch(&signal)
        .await
        .unwrap();
    }
    let hits = server.hits();
    assert_eq!(hits.len(), 2);
    let verifier = WebhookVerifier::new("s3cret");
    for hit in &hits {
        verifier.verify(&hit.headers, &hit.body).unwrap();
        let parsed = hit.parsed.clone().unwrap();
        assert_eq!(parsed.id(), "wh-1");
        assert_eq!(parsed.data(), signal.data());
    }
    assert_eq!(header(&hits[0], "content-type"), vec![STRUCTURED]);
    assert_eq!(header(&hits[1], "ce-type"), vec!["order.placed"]);

    // Tampering, replay, and malformed or missing headers.
    let hit = &hits[0];
    let ts: u64 = header(hit, "x-webhook-timestamp")[0].parse().unwrap();
    let err = verifier.verify(&hit.headers, b"{}").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.message(), "webhook signature mismatch");
    assert_eq!(reason(&err), "bad_signature");
    let err = WebhookVerifier::new("wrong")
        .verify(&hit.headers, &hit.body)
        .unwrap_err();
    assert_eq!(reason(&err), "bad_signature");
    verifier
        .verify_at(&hit.headers, &hit.body, ts + 300)
        .unwrap();
    verifier
        .verify_at(&hit.headers, &hit.body, ts - 300)
        .unwrap();
    let err = verifier
        .verify_at(&hit.headers, &hit.body, ts + 301)
        .unwrap_err();
    assert_eq!(err.message(), "webhook timestamp outside tolerance");
    assert_eq!(reason(&err), "stale_timestamp");
    assert_eq!(err.detail("timestamp"), Some(&json!(ts)));
    assert_eq!(err.detail("now"), Some(&json!(ts + 301)));
    assert_eq!(err.detail("tolerance_secs"), Some(&json!(300)));
    let err = verifier
        .verify_at(&hit.headers, &hit.body, ts - 301)
        .unwrap_err();
    assert_eq!(reason(&err), "stale_timestamp");
    WebhookVerifier::new("s3cret")
        .tolerance(Duration::from_secs(3600))
        .verify_at(&hit.headers, &hit.body, ts + 3600)
        .unwrap();

    let with = |name: &str, value: &str| {
        let mut h = hit.headers.clone();
        h.insert(
            axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
        h
    };
    let sig = header(hit, "x-webhook-signature")[0].to_owned();
    let cases = [
        (
            with("x-webhook-timestamp", "-5"),
            "malformed webhook header x-webhook-timestamp",
        ),
        (
            with("x-webhook-timestamp", "1e9"),
            "malformed webhook header x-webhook-timestamp",
        ),
        (
            with("x-webhook-signature", &sig[..63]),
            "malformed webhook header x-webhook-signature",
        ),
        (
            with("x-webhook-signature", &format!("{}zz", &sig[..62])),
            "malformed webhook header x-webhook-signature",
        ),
    ];
    for (h, message) in cases {
        let err = verifier.verify(&h, &hit.body).unwrap_err();
        assert_eq!(err.message(), message);
        assert_eq!(reason(&err), "malformed_header");
    }
    // The signature's hex is compared as bytes: uppercase is the same MAC.
    verifier
        .verify(&with("x-webhook-signature", &sig.to_uppercase()), &hit.body)
        .unwrap();
    let mut twice = hit.headers.clone();
    twice.append("x-webhook-signature", HeaderValue::from_str(&sig).unwrap());
    let err = verifier.verify(&twice, &hit.body).unwrap_err();
    assert_eq!(
        err.message(),
        "malformed webhook header x-webhook-signature"
    );
    let mut missing = hit.headers.clone();
    missing.remove("x-webhook-signature");
    let err = verifier.verify(&missing, &hit.body).unwrap_err();
    assert_eq!(err.message(), "missing webhook header x-webhook-signature");
    assert_eq!(reason(&err), "missing_header");
    assert_eq!(err.detail("header"), Some(&json!("x-webhook-signature")));
    let err = WebhookVerifier::new("")
        .verify(&hit.headers, &hit.body)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), "webhook secret is empty");
}

#[tokio::test]
async fn webhook_verifier_follows_renamed_headers() {
    let server = Server::start().await;
    DispatchConfig::new(
        WebhookTarget::new(server.url())
            .secret("k")
            .signature_header("x-sig")
            .timestamp_header("x-ts")
            .retry(RetryPolicy::none()),
    )
    .unwrap()
    .dispatch(&order("wh-2"))
    .await
    .unwrap();
    let hit = &server.hits()[0];
    assert!(header(hit, "x-webhook-timestamp").is_empty());
    let err = WebhookVerifier::new("k")
        .verify(&hit.headers, &hit.body)
        .unwrap_err();
    assert_eq!(err.message(), "missing webhook header x-webhook-timestamp");
    WebhookVerifier::new("k")
        .signature_header("x-sig")
        .timestamp_header("x-ts")
        .verify(&hit.headers, &hit.body)
        .unwrap();
}

// ------------------------------------------------- the Python cloudevents SDK

/// Whether python3 with the `cloudevents` package is here. Without it the
/// test is skipped with a message on stderr (not captured), except under
/// `CI=true`, where it fails.
fn python_sdk() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import cloudevents.http, cloudevents.conversion"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return true;
    }
    let message = "python3 with the `cloudevents` package is missing \
                   (python3 -m pip install cloudevents==1.12.0)";
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{message}; required because CI=true");
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED cloudevents_http interop test: {message}"
    );
    false
}

struct Peer {
    _child: Child,
    lines: tokio::io::Lines<BufReader<ChildStdout>>,
}

impl Peer {
    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .expect("the python peer did not answer within 20 s")
            .unwrap()
            .expect("the python peer exited");
        serde_json::from_str(&line).unwrap()
    }
}

async fn python_receiver() -> (Peer, u16) {
    let mut child = Command::new("python3")
        .args([PEER, "receive"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut peer = Peer {
        _child: child,
        lines: BufReader::new(stdout).lines(),
    };
    let port = peer.next().await["port"].as_u64().unwrap();
    (peer, u16::try_from(port).unwrap())
}

#[tokio::test]
async fn the_python_sdk_accepts_what_we_send_in_both_modes() {
    if !python_sdk() {
        return;
    }
    let (mut peer, port) = python_receiver().await;
    let url = format!("http://127.0.0.1:{port}/events");
    let signal = order("to-py");
    let text = Signal::builder("note")
        .id("to-py-text")
        .source("/notes")
        .datacontenttype("text/plain")
        .data("hello world")
        .build()
        .unwrap();
    let attributes = json!({
        "specversion": "1.0", "id": "to-py", "source": "/shop", "type": "order.placed",
        "subject": "order-42", "time": "2026-01-02T03:04:05Z",
        "dataschema": "https://example.com/order.json", "datacontenttype": "application/json",
        "tenant": "acme", "priority": "3",
    });
    let data = json!({"total": 99, "items": ["a", "b"], "note": "café"});
    for mode in [ContentMode::Structured, ContentMode::Binary] {
        send(HttpTarget::new(&url).content_mode(mode), &signal)
            .await
            .unwrap();
        let got = peer.next().await;
        assert_eq!(got["ok"], true, "{mode:?}: {got}");
        assert_eq!(got["attributes"], attributes, "{mode:?}");
        assert_eq!(got["data"], data, "{mode:?}");

        send(HttpTarget::new(&url).content_mode(mode), &text)
            .await
            .unwrap();
        let got = peer.next().await;
        assert_eq!(got["ok"], true, "{mode:?}: {got}");
        assert_eq!(got["attributes"]["datacontenttype"], "text/plain");
        assert_eq!(got["attributes"]["id"], "to-py-text");
        // The SDK hands a non-JSON binary body over as bytes.
        let expected = match mode {
            ContentMode::Binary => json!({"base64": "aGVsbG8gd29ybGQ="}),
            _ => json!("hello world"),
        };
        assert_eq!(got["data"], expected, "{mode:?}");
    }
    // A webhook is a CloudEvent too.
    DispatchConfig::new(
        WebhookTarget::new(&url)
            .secret("k")
            .retry(RetryPolicy::none()),
    )
    .unwrap()
    .dispatch(&signal)
    .await
    .unwrap();
    let got = peer.next().await;
    assert_eq!(got["attributes"], attributes);

    // Jido's "1.0.2" is what the SDK refuses, hence the new default.
    let err = send(HttpTarget::new(&url).jido_specversion(true), &signal)
        .await
        .unwrap_err();
    assert_eq!(err.message(), "http status 400");
    let got = peer.next().await;
    assert_eq!(got["ok"], false);
    assert!(got["error"].as_str().unwrap().contains("1.0.2"), "{got}");
}

#[tokio::test]
async fn what_the_python_sdk_sends_parses_into_signals() {
    if !python_sdk() {
        return;
    }
    let server = Server::start().await;
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        Command::new("python3")
            .args([PEER, "send", &server.url()])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the python sender did not finish within 30 s")
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let sent: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(sent.len(), 6);
    let hits = server.hits();
    assert_eq!(hits.len(), 6);
    let signals: Vec<Signal> = hits.iter().map(|h| h.parsed.clone().unwrap()).collect();
    // The order of scripts/ce_peer.py: each event structured, then binary.
    assert_eq!(
        header(&hits[0], "content-type"),
        vec!["application/cloudevents+json"]
    );
    assert_eq!(header(&hits[1], "ce-specversion"), vec!["1.0"]);
    for (i, s) in signals.iter().enumerate() {
        assert!(!s.is_trusted(), "{i}");
        assert_eq!(s.source(), "/py", "{i}");
    }
    for s in &signals[0..2] {
        assert_eq!(s.id(), "py-json");
        assert_eq!(s.ty(), "com.example.json");
        assert_eq!(s.subject(), Some("order-42"));
        assert_eq!(s.time(), Some("2026-01-02T03:04:05Z"));
        assert_eq!(s.dataschema(), Some("https://example.com/schema"));
        assert_eq!(s.datacontenttype(), Some("application/json"));
        assert_eq!(s.extension("tenant"), Some(&json!("acme inc")));
        assert_eq!(
            s.data(),
            Some(&json!({"total": 99, "items": ["a", "b"], "note": "café"}))
        );
    }
    for s in &signals[2..4] {
        assert_eq!(s.id(), "py-text");
        assert_eq!(s.datacontenttype(), Some("text/plain"));
        assert_eq!(s.data(), Some(&json!("hello world")));
    }
    for s in &signals[4..6] {
        assert_eq!(s.id(), "py-empty");
        assert_eq!(s.ty(), "com.example.empty");
        assert_eq!(s.data(), None);
        assert!(s.time().is_some());
    }
}

mod hostile {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever arrives, `from_http` answers with a value or a
        /// validation error; it never panics.
        #[test]
        fn from_http_never_panics(
            pairs in proptest::collection::vec(
                ("ce-(specversion|id|source|type|time|data|x)|content-type", "[ -~]{0,16}"),
                0..8,
            ),
            body in prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..48),
                "\\{\"specversion\":\"1\\.0\",\"type\":\"[a-z]{0,3}\",\"source\":\"[ -~]{0,4}\"(,\"data_base64\":\"[ -~]{0,8}\")?\\}"
                    .prop_map(String::into_bytes),
            ],
        ) {
            let mut map = HeaderMap::new();
            for (n, v) in &pairs {
                map.append(
                    axum::http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                );
            }
            match Signal::from_http(&map, &body) {
                Ok(s) => prop_assert!(!s.is_trusted()),
                Err(e) => prop_assert_eq!(e.kind(), ErrorKind::Validation),
            }
        }
    }
}
