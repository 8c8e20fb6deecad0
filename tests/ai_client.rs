//! Contract tests of the `genai` client against an OpenAI wire-format server
//! started on 127.0.0.1 inside each test: JSON and `text/event-stream`
//! answers, fragmented tool calls, usage chunks, error statuses, dropped
//! connections, stalled streams, garbage.
//!
//! Time: only the tests of a timeout use tokio's paused clock (the runtime
//! auto-advances to the pending timeout while the server stays silent);
//! every other test sets no timer at all.
#![cfg(feature = "ai-genai")]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::response::Response;
use futures::{StreamExt, TryStreamExt};
use jido::ai::client::{
    EmbedRequest, FinishReason, GenaiClient, JsonSchemaFormat, LlmClient, LlmConfig, LlmErrorKind,
    LlmEvent, LlmRequest, Message, ToolCall, ToolCallAssembler, ToolChoice, ToolSpec, Usage,
};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// What the server answers to the next request.
enum Reply {
    /// A JSON body with a status.
    Json(u16, Value),
    /// A body with a content type, as is.
    Raw(u16, &'static str, String),
    /// A JSON body with a status and extra headers.
    WithHeaders(u16, Vec<(&'static str, &'static str)>, Value),
    /// SSE `data:` events, then `data: [DONE]` when `done`.
    Sse { events: Vec<String>, done: bool },
    /// SSE events; once `cut` fires, the connection is cut (no chunked
    /// terminator).
    SseThenDrop(Vec<String>, oneshot::Receiver<()>),
    /// SSE headers, then nothing ever; `dropped` fires when the server's
    /// body is dropped (the client went away).
    SseStall(Option<oneshot::Sender<()>>),
    /// Never answers at all (not even headers).
    Silent,
}

#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: HeaderMap,
    body: Value,
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
}

struct Server {
    url: String,
    shared: Arc<Shared>,
}

impl Server {
    async fn start(replies: Vec<Reply>) -> Server {
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into()),
            seen: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Server {
            url: format!("http://{addr}/v1"),
            shared,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    fn client(&self) -> GenaiClient {
        GenaiClient::new(
            LlmConfig::new()
                .with_base_url(&self.url)
                .with_api_key("test-key")
                .with_default_model("test-model")
                .with_timeout(None)
                .with_stream_idle_timeout(None),
        )
        .unwrap()
    }
}

/// Drops a sender when the body is dropped.
struct DropSignal(Option<oneshot::Sender<()>>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

fn sse_body(events: Vec<String>, done: bool) -> String {
    let mut body: String = events
        .into_iter()
        .map(|e| format!("data: {e}\n\n"))
        .collect();
    if done {
        body.push_str("data: [DONE]\n\n");
    }
    body
}

fn sse_response(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let headers = req.headers().clone();
    let bytes = axum::body::to_bytes(req.into_body(), 1 << 20)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    shared.seen.lock().unwrap().push(Seen {
        path,
        headers,
        body,
    });
    let reply = shared.replies.lock().unwrap().pop_front();
    match reply {
        None => Response::builder()
            .status(500)
            .body(Body::from("no reply scripted"))
            .unwrap(),
        Some(Reply::Json(status, value)) => Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Body::from(value.to_string()))
            .unwrap(),
        Some(Reply::WithHeaders(status, headers, value)) => {
            let mut builder = Response::builder()
                .status(status)
                .header("content-type", "application/json");
            for (name, value) in headers {
                builder = builder.header(name, value);
            }
            builder.body(Body::from(value.to_string())).unwrap()
        }
        Some(Reply::Raw(status, content_type, text)) => Response::builder()
            .status(status)
            .header("content-type", content_type)
            .body(Body::from(text))
            .unwrap(),
        Some(Reply::Sse { events, done }) => sse_response(Body::from(sse_body(events, done))),
        Some(Reply::SseThenDrop(events, cut)) => {
            let first = futures::stream::once(async move { Ok(sse_body(events, false)) });
            let then = futures::stream::once(async move {
                let _ = cut.await;
                Err(std::io::Error::other("connection cut"))
            });
            sse_response(Body::from_stream(first.chain(then)))
        }
        Some(Reply::SseStall(dropped)) => {
            let guard = DropSignal(dropped);
            let body = futures::stream::pending::<Result<String, std::io::Error>>().map(move |x| {
                let _keep = &guard;
                x
            });
            sse_response(Body::from_stream(body))
        }
        Some(Reply::Silent) => futures::future::pending().await,
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({
        "id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    })
    .to_string()
}

fn usage_chunk(prompt: u64, completion: u64) -> String {
    json!({
        "id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    })
    .to_string()
}

fn tool_request() -> LlmRequest {
    let mut req = LlmRequest::new(
        "",
        vec![
            Message::system("be brief"),
            Message::user("What is 2 times 3?"),
            Message::assistant_tool_calls(
                "",
                vec![ToolCall {
                    id: "call_a".into(),
                    name: "multiply".into(),
                    arguments: json!({"a": 2, "b": 3}).into(),
                }],
            ),
            Message::tool_result("call_a", "multiply", "6"),
            Message::user("And 6 times 7?"),
        ],
    );
    req.tools = vec![ToolSpec {
        name: "multiply".into(),
        description: "Multiply two integers".into(),
        parameters: json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"]
        }),
        strict: false,
    }]
    .into();
    req.tool_choice = ToolChoice::Any;
    req.max_tokens = Some(40);
    req.temperature = Some(0.2);
    req.stop = vec!["\n".into()];
    req
}

async fn collect(
    client: &GenaiClient,
    req: LlmRequest,
) -> (Vec<LlmEvent>, Option<jido::ai::client::LlmError>) {
    let mut stream = client.stream(req).await.unwrap();
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(e) => events.push(e),
            Err(e) => {
                assert!(stream.next().await.is_none(), "nothing follows an error");
                return (events, Some(e));
            }
        }
    }
    (events, None)
}

#[tokio::test]
async fn generate_sends_the_openai_request_and_reads_the_answer() {
    let server = Server::start(vec![Reply::Json(
        200,
        json!({
            "id": "r1", "object": "chat.completion", "created": 1, "model": "served-model",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Let me compute.",
                "tool_calls": [{"id": "call_b", "type": "function",
                    "function": {"name": "multiply", "arguments": "{\"a\": 6, \"b\": 7}"}}]
            }}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}
        }),
    )])
    .await;
    let res = server.client().generate(tool_request()).await.unwrap();
    assert_eq!(res.text, "Let me compute.");
    assert_eq!(
        res.tool_calls,
        vec![ToolCall {
            id: "call_b".into(),
            name: "multiply".into(),
            arguments: json!({"a": 6, "b": 7}).into()
        }]
    );
    assert_eq!(res.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        res.usage,
        Some(Usage {
            input_tokens: 30,
            output_tokens: 9,
            total_tokens: 39
        })
    );
    assert_eq!(res.model, "served-model");

    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(seen[0].headers["authorization"], "Bearer test-key");
    let body = &seen[0].body;
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["stream"], false);
    assert_eq!(body["max_tokens"], 40);
    assert_eq!(body["temperature"], 0.2);
    assert_eq!(body["stop"], json!(["\n"]));
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(body["tools"][0]["function"]["name"], "multiply");
    assert_eq!(
        body["tools"][0]["function"]["parameters"]["required"],
        json!(["a", "b"])
    );
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
    let call = &body["messages"][2]["tool_calls"][0];
    assert_eq!(call["id"], "call_a");
    assert_eq!(call["function"]["name"], "multiply");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"a": 2, "b": 3}));
    assert_eq!(body["messages"][3]["tool_call_id"], "call_a");
    assert_eq!(body["messages"][3]["content"], "6");
}

#[tokio::test]
async fn structured_output_is_sent_as_json_schema() {
    let server = Server::start(vec![Reply::Json(
        200,
        json!({"model": "m", "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "{\"name\": \"A\"}"}}]}),
    )])
    .await;
    let mut req = LlmRequest::new("x", vec![Message::user("name?")]);
    req.response_format = Some(JsonSchemaFormat {
        name: "person".into(),
        schema: json!({"type": "object", "properties": {"name": {"type": "string"}}}),
    });
    let res = server.client().generate(req).await.unwrap();
    assert_eq!(res.text, "{\"name\": \"A\"}");
    assert_eq!(res.finish_reason, FinishReason::Stop);
    assert_eq!(res.usage, None);
    let body = &server.seen()[0].body;
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["name"], "person");
    assert_eq!(body["model"], "x");
}

#[tokio::test]
async fn stream_assembles_fragmented_tool_calls_and_reads_the_usage_chunk() {
    // Two calls whose fragments interleave, llama.cpp's `length` finish
    // beside complete calls, then usage in a chunk with empty `choices`.
    let frag = |index: u64, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut call = json!({"index": index, "function": {"arguments": args}});
        if let Some(id) = id {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        if let Some(name) = name {
            call["function"]["name"] = json!(name);
        }
        chunk(json!({"tool_calls": [call]}), None)
    };
    let events = vec![
        chunk(json!({"role": "assistant", "content": null}), None),
        frag(0, Some("call_1"), Some("multiply"), "{"),
        frag(0, None, None, "\"a\""),
        frag(1, Some("call_2"), Some("add"), ""),
        frag(0, None, None, ": 6, \"b\""),
        frag(1, None, None, "{\"x\": [1, "),
        frag(0, None, None, ": 7}"),
        frag(1, None, None, "2]}"),
        chunk(json!({}), Some("length")),
        usage_chunk(442, 40),
    ];
    let server = Server::start(vec![Reply::Sse { events, done: true }]).await;
    let (events, err) = collect(&server.client(), tool_request()).await;
    assert!(err.is_none(), "{err:?}");

    let mut assembler = ToolCallAssembler::new();
    let mut firsts = Vec::new();
    for e in &events {
        if let LlmEvent::ToolCallDelta {
            index, id, name, ..
        } = e
        {
            if id.is_some() {
                firsts.push((*index, id.clone().unwrap(), name.clone().unwrap()));
            } else {
                assert!(name.is_none());
            }
        }
        assembler.push(e);
    }
    assert_eq!(
        firsts,
        [
            (0, "call_1".to_string(), "multiply".to_string()),
            (1, "call_2".to_string(), "add".to_string())
        ]
    );
    assert_eq!(assembler.arguments(0), Some("{\"a\": 6, \"b\": 7}"));
    assert_eq!(assembler.arguments(1), Some("{\"x\": [1, 2]}"));
    let fragments = events
        .iter()
        .filter(|e| matches!(e, LlmEvent::ToolCallDelta { .. }))
        .count();
    assert!(
        fragments >= 7,
        "one event per non-empty fragment, got {fragments}"
    );
    let assembled = assembler.finish();

    let Some(LlmEvent::Done(done)) = events.last() else {
        panic!("last event is not Done: {events:?}")
    };
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, LlmEvent::Done(_)))
            .count(),
        1
    );
    assert_eq!(done.tool_calls, assembled);
    assert_eq!(done.tool_calls[0].arguments, json!({"a": 6, "b": 7}).into());
    assert_eq!(done.tool_calls[1].arguments, json!({"x": [1, 2]}).into());
    assert_eq!(done.finish_reason, FinishReason::Length);
    assert_eq!(
        done.usage,
        Some(Usage {
            input_tokens: 442,
            output_tokens: 40,
            total_tokens: 482
        })
    );
    let body = &server.seen()[0].body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn stream_content_and_thinking_deltas_then_done() {
    let events = vec![
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"reasoning_content": "think"}), None),
        chunk(json!({"content": "Hel"}), None),
        chunk(json!({"content": "lo"}), None),
        chunk(json!({}), Some("stop")),
        usage_chunk(5, 2),
    ];
    let server = Server::start(vec![Reply::Sse { events, done: true }]).await;
    let (events, err) = collect(
        &server.client(),
        LlmRequest::new("", vec![Message::user("hi")]),
    )
    .await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(
        events[..3],
        [
            LlmEvent::Thinking("think".into()),
            LlmEvent::Content("Hel".into()),
            LlmEvent::Content("lo".into())
        ]
    );
    let LlmEvent::Done(done) = &events[3] else {
        panic!("{events:?}")
    };
    assert_eq!(events.len(), 4);
    assert_eq!(done.text, "Hello");
    assert_eq!(done.thinking.as_deref(), Some("think"));
    assert_eq!(done.finish_reason, FinishReason::Stop);
    assert_eq!(done.usage.unwrap().total_tokens, 7);
    assert_eq!(done.model, "test-model");
}

#[tokio::test]
async fn error_statuses_map_to_kinds_and_retryable() {
    let cases = [
        (400, false),
        (401, false),
        (404, false),
        (422, false),
        (429, true),
        (500, true),
        (501, true),
        (503, true),
    ];
    let mut replies = Vec::new();
    for (status, _) in cases {
        for _ in 0..3 {
            replies.push(Reply::Json(
                status,
                json!({"error": {"message": format!("failed {status}"), "type": "test"}}),
            ));
        }
    }
    let server = Server::start(replies).await;
    let client = server.client();
    for (status, retryable) in cases {
        let req = LlmRequest::new("", vec![Message::user("hi")]);
        let errs = [
            client.generate(req.clone()).await.unwrap_err(),
            client.stream(req).await.err().unwrap(),
            client
                .embed(EmbedRequest {
                    model: String::new(),
                    texts: vec!["a".into()],
                    dimensions: None,
                    timeout: None,
                })
                .await
                .unwrap_err(),
        ];
        for err in errs {
            assert_eq!(err.kind, LlmErrorKind::Status(status), "{err:?}");
            assert_eq!(err.retryable, retryable, "{status}");
            assert_eq!(
                err.message,
                format!("provider answered with status {status}")
            );
            assert_eq!(
                err.details["body"]["error"]["message"],
                format!("failed {status}")
            );
        }
    }
}

#[tokio::test]
async fn retry_after_and_should_retry_headers_reach_the_error() {
    let error = json!({"error": {"message": "busy"}});
    let server = Server::start(vec![
        Reply::WithHeaders(429, vec![("retry-after", "7")], error.clone()),
        Reply::WithHeaders(503, vec![("x-should-retry", "false")], error),
    ])
    .await;
    let client = server.client();
    let req = LlmRequest::new("", vec![Message::user("hi")]);
    let err = client.generate(req.clone()).await.unwrap_err();
    assert_eq!(err.kind, LlmErrorKind::Status(429));
    assert!(err.retryable);
    assert_eq!(err.details["retry_after"], "7");
    let err = client.stream(req.clone()).await.err().unwrap();
    assert_eq!(err.kind, LlmErrorKind::Status(503));
    assert!(!err.retryable, "the provider said not to retry");
    // Nothing scripted: the server answers 500 with a text body.
    let err = client.generate(req).await.unwrap_err();
    assert_eq!(err.kind, LlmErrorKind::Status(500));
    assert!(err.retryable);
    assert_eq!(err.details["body"], "no reply scripted");
}

#[tokio::test]
async fn a_refused_connection_is_a_retryable_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let client = GenaiClient::new(
        LlmConfig::new()
            .with_base_url(format!("http://127.0.0.1:{port}/v1"))
            .with_default_model("m")
            .with_timeout(None)
            .with_stream_idle_timeout(None),
    )
    .unwrap();
    let req = LlmRequest::new("", vec![Message::user("hi")]);
    let err = client.generate(req.clone()).await.unwrap_err();
    assert_eq!(err.kind, LlmErrorKind::Connect);
    assert!(err.retryable);
    assert_eq!(err.message, "could not connect");
    let err = client.stream(req).await.err().unwrap();
    assert_eq!(err.kind, LlmErrorKind::Connect);
    assert!(err.retryable);
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_a_retryable_connect_error() {
    let events = vec![
        chunk(json!({"content": "Hel"}), None),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "c", "type": "function",
                "function": {"name": "t", "arguments": "{\"a\""}}]}),
            None,
        ),
    ];
    let (cut, on_cut) = oneshot::channel();
    let server = Server::start(vec![Reply::SseThenDrop(events, on_cut)]).await;
    let mut stream = server
        .client()
        .stream(LlmRequest::new("", vec![Message::user("hi")]))
        .await
        .unwrap();
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        LlmEvent::Content("Hel".into())
    );
    assert!(matches!(
        stream.next().await.unwrap().unwrap(),
        LlmEvent::ToolCallDelta { index: 0, .. }
    ));
    cut.send(()).unwrap();
    let err = stream.next().await.unwrap().unwrap_err();
    assert_eq!(err.kind, LlmErrorKind::Connect, "{err:?}");
    assert!(err.retryable);
    assert_eq!(err.message, "connection dropped while reading the response");
    assert!(stream.next().await.is_none(), "no Done after the error");
}

#[tokio::test]
async fn a_connection_dropped_mid_answer_fails_generate_with_connect() {
    // A connection closed before the answer's head is sent once more (a
    // pooled connection may have been closed by the server): both cut.
    let mut replies = Vec::new();
    for _ in 0..2 {
        let (cut, on_cut) = oneshot::channel();
        cut.send(()).unwrap();
        replies.push(Reply::SseThenDrop(vec!["{\"choices\": [".into()], on_cut));
    }
    let server = Server::start(replies).await;
    let err = server
        .client()
        .generate(LlmRequest::new("", vec![Message::user("hi")]))
        .await
        .unwrap_err();
    assert_eq!(err.kind, LlmErrorKind::Connect, "{err:?}");
    assert!(err.retryable);
}

#[tokio::test]
async fn a_stream_closed_without_its_end_is_a_connect_error() {
    let events = vec![chunk(json!({"content": "Hel"}), None)];
    let server = Server::start(vec![Reply::Sse {
        events,
        done: false,
    }])
    .await;
    let (events, err) = collect(
        &server.client(),
        LlmRequest::new("", vec![Message::user("hi")]),
    )
    .await;
    assert_eq!(events, [LlmEvent::Content("Hel".into())]);
    let err = err.expect("error");
    assert_eq!(err.kind, LlmErrorKind::Connect);
    assert!(err.retryable);
    assert_eq!(err.message, "stream ended before the response was complete");
}

#[tokio::test]
async fn an_error_event_inside_the_stream_keeps_its_code() {
    let events = vec![
        chunk(json!({"content": "a"}), None),
        json!({"error": {"code": 500, "message": "boom", "type": "server_error"}}).to_string(),
    ];
    let server = Server::start(vec![Reply::Sse { events, done: true }]).await;
    let (events, err) = collect(
        &server.client(),
        LlmRequest::new("", vec![Message::user("hi")]),
    )
    .await;
    assert_eq!(events, [LlmEvent::Content("a".into())]);
    let err = err.unwrap();
    assert_eq!(err.kind, LlmErrorKind::Status(500));
    assert!(err.retryable);
    assert_eq!(err.details["body"]["message"], "boom");
}

#[tokio::test]
async fn garbage_from_the_network_is_a_decode_error_never_a_panic() {
    let server = Server::start(vec![
        Reply::Raw(200, "text/plain", "hello".into()),
        Reply::Raw(200, "application/json", "{\"choices\": [".into()),
        Reply::Sse {
            events: vec!["{broken".into()],
            done: true,
        },
        Reply::Raw(200, "application/json", "[1, 2]".into()),
        Reply::Json(
            200,
            json!({"choices": [{"message": 5, "finish_reason": 7}]}),
        ),
        Reply::Sse {
            events: vec![
                json!({"choices": [{"delta": {"tool_calls": "x", "content": 3}}]}).to_string(),
                json!({"choices": 1, "usage": "lots"}).to_string(),
            ],
            done: true,
        },
    ])
    .await;
    let client = server.client();
    let req = || LlmRequest::new("", vec![Message::user("hi")]);

    let err = client.generate(req()).await.unwrap_err();
    assert_eq!(err.kind, LlmErrorKind::Decode);
    assert!(!err.retryable);
    assert_eq!(err.message, "response is not json");
    let err = client.generate(req()).await.unwrap_err();
    assert_eq!(err.kind, LlmErrorKind::Decode);
    let err = client.stream(req()).await.err().unwrap();
    assert_eq!(err.kind, LlmErrorKind::Decode);
    assert_eq!(err.message, "invalid json in the stream");

    // Well-formed JSON of the wrong shape: an error or an empty answer,
    // never a panic.
    for _ in 0..2 {
        if let Err(err) = client.generate(req()).await {
            assert!(matches!(err.kind, LlmErrorKind::Decode), "{err:?}");
        }
    }
    let stream = client.stream(req()).await;
    if let Ok(stream) = stream {
        let _ = stream.collect::<Vec<_>>().await;
    }
    assert_eq!(server.seen().len(), 6);
}

#[tokio::test]
async fn embeddings_come_back_in_input_order() {
    let server = Server::start(vec![
        Reply::Json(
            200,
            json!({"object": "list", "model": "emb",
                "data": [
                    {"object": "embedding", "index": 1, "embedding": [0.0, 1.0, 0.5]},
                    {"object": "embedding", "index": 0, "embedding": [1.0, 0.0, 0.5]}
                ],
                "usage": {"prompt_tokens": 7, "total_tokens": 7}}),
        ),
        Reply::Json(
            200,
            json!({"object": "list", "model": "emb",
                "data": [{"object": "embedding", "index": 0, "embedding": [1.0]}],
                "usage": {"prompt_tokens": 1, "total_tokens": 1}}),
        ),
    ])
    .await;
    let client = server.client();
    let req = EmbedRequest {
        model: "emb-model".into(),
        texts: vec!["hello world".into(), "the cat sat".into()],
        dimensions: Some(3),
        timeout: None,
    };
    let res = client.embed(req.clone()).await.unwrap();
    assert_eq!(
        res.embeddings,
        vec![vec![1.0, 0.0, 0.5], vec![0.0, 1.0, 0.5]]
    );
    assert_eq!(res.model, "emb-model");
    assert_eq!(
        res.usage,
        Some(Usage {
            input_tokens: 7,
            output_tokens: 0,
            total_tokens: 7
        })
    );
    let seen = server.seen();
    assert_eq!(seen[0].path, "/v1/embeddings");
    assert_eq!(seen[0].body["input"], json!(["hello world", "the cat sat"]));
    assert_eq!(seen[0].body["model"], "emb-model");
    assert_eq!(seen[0].body["dimensions"], 3);

    // One vector for two texts: a decode error, not a silent mismatch.
    let err = client.embed(req).await.unwrap_err();
    assert_eq!(err.kind, LlmErrorKind::Decode);
    assert_eq!(err.message, "expected 2 embeddings, got 1");
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let (tx, rx) = oneshot::channel();
    // Headers, then silence; the server signals when its body is dropped.
    let server = Server::start(vec![Reply::SseStall(Some(tx))]).await;
    let stream = server
        .client()
        .stream(LlmRequest::new("", vec![Message::user("hi")]));
    // The outer future waits for the first event, which never comes: drop
    // it while it waits (the request is on the wire once the server saw it).
    let handle = tokio::spawn(stream);
    while server.seen().is_empty() {
        tokio::task::yield_now().await;
    }
    handle.abort();
    rx.await.expect("the server saw the connection close");
}

#[tokio::test(start_paused = true)]
async fn a_stalled_stream_fails_with_stream_idle_after_the_idle_timeout() {
    let server = Server::start(vec![Reply::SseStall(None)]).await;
    let mut req = LlmRequest::new("", vec![Message::user("hi")]);
    req.stream_idle_timeout = Some(Duration::from_secs(5));
    let start = tokio::time::Instant::now();
    let err = server.client().stream(req).await.err().unwrap();
    assert_eq!(err.kind, LlmErrorKind::StreamIdle);
    assert!(err.retryable);
    assert_eq!(err.message, "stream went idle");
    assert!(start.elapsed() >= Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn a_silent_server_fails_with_timeout_after_the_request_timeout() {
    let server = Server::start(vec![Reply::Silent, Reply::Silent, Reply::Silent]).await;
    let client = server.client();
    let mut req = LlmRequest::new("", vec![Message::user("hi")]);
    req.timeout = Some(Duration::from_secs(10));
    let start = tokio::time::Instant::now();
    let err = client.generate(req.clone()).await.unwrap_err();
    assert_eq!(err.kind, LlmErrorKind::Timeout);
    assert!(err.retryable);
    assert_eq!(err.message, "no response within 10000 ms");
    assert!(start.elapsed() >= Duration::from_secs(10));
    let err = client.stream(req).await.err().unwrap();
    assert_eq!(err.kind, LlmErrorKind::Timeout);
    let err = client
        .embed(EmbedRequest {
            model: String::new(),
            texts: vec!["a".into()],
            dimensions: None,
            timeout: Some(Duration::from_secs(3)),
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind, LlmErrorKind::Timeout);
    assert_eq!(err.message, "no response within 3000 ms");
}

#[tokio::test]
async fn a_tool_message_without_call_id_is_an_invalid_request() {
    let server = Server::start(vec![]).await;
    let mut msg = Message::tool_result("x", "t", "r");
    msg.tool_call_id = None;
    let err = server
        .client()
        .generate(LlmRequest::new("", vec![Message::user("q"), msg]))
        .await
        .unwrap_err();
    assert_eq!(err.kind, LlmErrorKind::InvalidRequest);
    assert!(!err.retryable);
    assert!(server.seen().is_empty());
}

#[tokio::test]
async fn stream_events_are_usable_with_try_collect() {
    let events = vec![chunk(json!({"content": "ok"}), Some("stop"))];
    let server = Server::start(vec![Reply::Sse { events, done: true }]).await;
    let events: Vec<LlmEvent> = server
        .client()
        .stream(LlmRequest::new("", vec![Message::user("hi")]))
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0], LlmEvent::Content("ok".into()));
}
