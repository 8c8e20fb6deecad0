//! The AI directives and their signal contract (seed 001): one test per
//! directive pins its fields, defaults and the exact payload of every
//! signal it emits; failures, stalls, panics and cancellation each end in
//! exactly one terminal signal.
#![cfg(feature = "ai")]

mod ai_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ai_support::*;
use jido::ai::directive::{AiDirective, DEFAULT_MAX_TOKENS};
use jido::ai::{
    AiRuntime, CancelRequest, EmbedResponse, EmitRequestError, EmitToolError, FinishReason,
    LlmEmbed, LlmError, LlmErrorKind, LlmEvent, LlmGenerate, LlmResponse, LlmStream, Message,
    ModelRef, ToolCall, ToolChoice, ToolExec, ToolSet, Usage,
};
use jido::effect::StateOp;
use jido::prelude::*;
use jido::signal::Signal;
use serde_json::{Value, json};

fn go() -> Signal {
    Signal::new("go", json!({}))
}

fn answer(text: &str, usage: Option<Usage>) -> LlmResponse {
    LlmResponse {
        model: "m-1".into(),
        text: text.into(),
        thinking: None,
        tool_calls: Vec::new(),
        finish_reason: FinishReason::Stop,
        usage,
    }
}

fn usage(i: u64, o: u64) -> Option<Usage> {
    Some(Usage {
        input_tokens: i,
        output_tokens: o,
        total_tokens: i + o,
    })
}

fn meta(op: &str) -> Value {
    json!({"request_id": "req_1", "run_id": "req_1", "iteration": 1, "origin": "directive", "operation": op})
}

fn seen(ty: &str, data: Value) -> Seen {
    (ty.to_owned(), data)
}

fn err_response(call_id: &str, model: &str, ms: u64, reason: Value, op: &str) -> Seen {
    seen(
        "ai.llm.response",
        json!({
            "call_id": call_id,
            "result": {"status": "error", "reason": reason, "effects": []},
            "model": model, "duration_ms": ms, "metadata": meta(op)
        }),
    )
}

// ---------------------------------------------------------------------------
// LlmGenerate

#[test]
fn llm_generate_fields_and_defaults() {
    let d = LlmGenerate::new("call_1", "openai:gpt-4o", vec![Message::user("q")]);
    assert_eq!(d.model, ModelRef::Spec("openai:gpt-4o".into()));
    assert_eq!(d.system_prompt, None);
    assert_eq!(d.tools, vec![]);
    assert_eq!(d.tool_choice, ToolChoice::Auto);
    assert_eq!(d.max_tokens, 1024);
    assert_eq!(DEFAULT_MAX_TOKENS, 1024);
    assert_eq!(d.temperature, 0.2);
    assert_eq!(d.timeout, None);
    assert!(d.metadata.is_empty());
    assert_eq!(
        serde_json::to_value(&d).unwrap(),
        json!({
            "id": "call_1", "model": "openai:gpt-4o",
            "context": [{"role": "user", "content": "q"}],
            "tools": [], "tool_choice": "auto", "max_tokens": 1024, "temperature": 0.2, "metadata": {}
        })
    );
    // As data: defaults filled, `context` as `{messages}`, model wins over
    // the alias when non-empty, the alias when the model is empty.
    let from: LlmGenerate = serde_json::from_value(json!({
        "id": "call_2", "model": "", "model_alias": "fast",
        "context": {"messages": [{"role": "user", "content": "q"}]},
        "tool_choice": {"required": "multiply"}, "timeout": 1500
    }))
    .unwrap();
    assert_eq!(from.model, ModelRef::alias("fast"));
    assert_eq!(from.tool_choice, ToolChoice::Required("multiply".into()));
    assert_eq!(from.timeout, Some(Duration::from_millis(1500)));
    assert_eq!(from.max_tokens, 1024);
    let both: LlmGenerate = serde_json::from_value(
        json!({"id": "c", "model": "a:b", "model_alias": "fast", "context": []}),
    )
    .unwrap();
    assert_eq!(both.model, ModelRef::spec("a:b"));
    let err = serde_json::from_value::<LlmGenerate>(json!({"id": "c", "context": []})).unwrap_err();
    assert_eq!(err.to_string(), "model or model_alias is required");
    let err = serde_json::from_value::<LlmGenerate>(
        json!({"id": "c", "model": "a:b", "context": [], "temprature": 1}),
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with("unknown field `temprature`"),
        "{err}"
    );
    assert_eq!(Directive::from(d).kind(), "ai.llm_generate");
}

#[test]
fn typed_correlation_comes_first_and_shows_as_metadata_in_the_data_form() {
    use jido::ai::signals::Correlation;
    let d = LlmGenerate::new("c1", "a:b", vec![Message::user("q")])
        .meta("phase", "reasoning")
        .meta("iteration", 9)
        .with_correlation(
            Correlation::new()
                .request_id("r1")
                .iteration(2)
                .strategy("react"),
        );
    // Typed ids win; an id the typed correlation leaves unset comes from
    // the metadata.
    assert_eq!(
        d.correlation(),
        Correlation::new()
            .request_id("r1")
            .iteration(2)
            .strategy("react")
    );
    let partial = LlmGenerate::new("c2", "a:b", Vec::<Message>::new())
        .meta("run_id", "run_7")
        .with_correlation(Correlation::new().request_id("r2"));
    assert_eq!(
        partial.correlation(),
        Correlation::new().request_id("r2").run_id("run_7")
    );
    // The data form: the typed ids first, then the other metadata keys.
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(
        serde_json::to_string(&json["metadata"]).unwrap(),
        r#"{"request_id":"r1","iteration":2,"strategy":"react","phase":"reasoning"}"#
    );
    // Read back as data, the ids are in the metadata: the same correlation.
    let back: LlmGenerate = serde_json::from_value(json).unwrap();
    assert_eq!(back.correlation(), d.correlation());
    assert_eq!(back.metadata["phase"], "reasoning");
}

#[tokio::test(start_paused = true)]
async fn llm_generate_sends_usage_then_one_response() {
    let fake = Fake::new(vec![Reply::Answer(answer("hi there", usage(7, 3)))]);
    let ai = AiRuntime::new()
        .client(fake.clone())
        .model_aliases([("fast", "local:qwen")]);
    let (jido, agent, mut rx) = start(&ai, "gen-1", |_| {
        vec![
            LlmGenerate::new(
                "call_1",
                ModelRef::alias("fast"),
                vec![Message::user("hello")],
            )
            .system_prompt("be brief")
            .tools(vec![jido::ai::ToolSpec {
                name: "noop".into(),
                description: "does nothing".into(),
                parameters: json!({"type": "object"}),
                strict: false,
            }])
            .meta("request_id", "req_1")
            .meta("iteration", 1)
            .meta("observability", json!({"log": true}))
            .into(),
        ]
    })
    .await;
    agent.cast(go()).unwrap();
    assert_eq!(
        until(&mut rx, "ai.llm.response").await,
        vec![
            seen(
                "ai.usage",
                json!({
                    "call_id": "call_1", "model": "m-1", "input_tokens": 7, "output_tokens": 3,
                    "total_tokens": 10, "duration_ms": 0, "metadata": meta("generate_text")
                })
            ),
            seen(
                "ai.llm.response",
                json!({
                    "call_id": "call_1",
                    "result": {"status": "ok", "result": {
                        "type": "final_answer", "text": "hi there", "thinking_content": null,
                        "tool_calls": [], "finish_reason": "stop", "model": "m-1",
                        "usage": {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}
                    }, "effects": []},
                    "model": "local:qwen", "duration_ms": 0, "metadata": meta("generate_text")
                })
            ),
        ]
    );
    nothing_more(&mut rx).await;
    // What the client was asked: the resolved model, the system prompt
    // first, the directive's defaults.
    let req = &fake.requests()[0];
    assert_eq!(req["model"], "local:qwen");
    assert_eq!(
        req["messages"],
        json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}])
    );
    assert_eq!(req["tools"][0]["name"], "noop");
    assert_eq!(req["tool_choice"], "auto");
    assert_eq!(req["max_tokens"], 1024);
    assert_eq!(req["temperature"].as_f64().unwrap() as f32, 0.2f32);
    assert_eq!(req["timeout"], 30_000);
    assert_eq!(ai.running(&agent), 0);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn llm_generate_with_tool_calls_and_no_counted_tokens_sends_no_usage() {
    let mut resp = answer("", usage(0, 0));
    resp.tool_calls = vec![ToolCall {
        id: "tc_1".into(),
        name: "multiply".into(),
        arguments: json!({"a": 2, "b": 3}).into(),
    }];
    resp.finish_reason = FinishReason::Other("length".into());
    let ai = AiRuntime::new().client(Fake::new(vec![Reply::Answer(resp)]));
    let (jido, agent, mut rx) = start(&ai, "gen-2", |_| {
        vec![LlmGenerate::new("call_2", "local:m", vec![Message::user("2*3?")]).into()]
    })
    .await;
    agent.cast(go()).unwrap();
    let (ty, data) = next(&mut rx).await;
    assert_eq!(ty, "ai.llm.response");
    assert_eq!(
        data["result"]["result"],
        json!({
            "type": "tool_calls", "text": "", "thinking_content": null,
            "tool_calls": [{"id": "tc_1", "name": "multiply", "arguments": {"a": 2, "b": 3}}],
            "finish_reason": "length", "model": "m-1",
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        })
    );
    assert_eq!(
        data["metadata"],
        json!({"origin": "directive", "operation": "generate_text"})
    );
    nothing_more(&mut rx).await;
    jido.shutdown().await;
}

/// Every failure of an LLM call ends in exactly one `ai.llm.response`
/// carrying the error envelope, and no usage.
#[tokio::test(start_paused = true)]
async fn llm_generate_failures_end_in_one_error_response() {
    let provider = LlmError::new(LlmErrorKind::Status(503), "overloaded")
        .with_details(json!({"api_key": "sk-1", "body": "busy"}));
    let fake = Fake::new(vec![Reply::Fail(provider), Reply::Panic, Reply::Stall]);
    let ai = AiRuntime::new()
        .client(fake)
        .llm_timeout(Duration::from_secs(5))
        .model_aliases([("fast", "local:m")]);
    let (jido, agent, mut rx) = start(&ai, "gen-3", |p| {
        let model = match p["model"].as_str() {
            Some(alias) => ModelRef::alias(alias),
            None => ModelRef::spec("local:m"),
        };
        vec![
            LlmGenerate::new("call_1", model, vec![Message::user("q")])
                .meta("request_id", "req_1")
                .meta("iteration", "1")
                .into(),
        ]
    })
    .await;
    let cases = [
        json!({
            "type": "execution_error", "message": "overloaded",
            "details": {"llm_error": "status", "status": 503, "retry": true,
                        "provider_details": {"api_key": "[REDACTED]", "body": "busy"}},
            "retryable": true
        }),
        json!({
            "type": "execution_error", "message": "llm call panicked: client bug",
            "details": {"retry": false}, "retryable": false
        }),
        json!({
            "type": "timeout", "message": "llm request timed out",
            "details": {"timeout_ms": 5000}, "retryable": true
        }),
    ];
    for (i, reason) in cases.into_iter().enumerate() {
        agent.cast(go()).unwrap();
        let ms = if i == 2 { 5000 } else { 0 };
        assert_eq!(
            next(&mut rx).await,
            err_response("call_1", "local:m", ms, reason, "generate_text")
        );
    }
    // An alias nobody knows; the alias is the model named in the signal.
    agent
        .cast(Signal::new("go", json!({"model": "smart"})))
        .unwrap();
    assert_eq!(
        next(&mut rx).await,
        err_response(
            "call_1",
            "smart",
            0,
            json!({
                "type": "configuration_error", "message": "unknown model alias: smart",
                "details": {"alias": "smart", "available": ["fast"]}, "retryable": false
            }),
            "generate_text"
        )
    );
    nothing_more(&mut rx).await;
    assert_eq!(ai.running(&agent), 0);
    jido.shutdown().await;

    // No client at all.
    let ai = AiRuntime::new();
    let (jido, agent, mut rx) = start(&ai, "gen-4", |_| {
        vec![LlmGenerate::new("call_9", "local:m", vec![]).into()]
    })
    .await;
    agent.cast(go()).unwrap();
    let (_, data) = next(&mut rx).await;
    assert_eq!(
        data["result"],
        json!({"status": "error", "reason": {
            "type": "configuration_error", "message": "no llm client configured",
            "details": {}, "retryable": false
        }, "effects": []})
    );
    jido.shutdown().await;
}

// ---------------------------------------------------------------------------
// LlmStream

#[test]
fn llm_stream_fields_and_defaults_match_llm_generate() {
    let d =
        LlmStream::new("call_1", ModelRef::alias("fast"), vec![]).timeout(Duration::from_secs(2));
    assert_eq!(
        serde_json::to_value(&d).unwrap(),
        json!({
            "id": "call_1", "model_alias": "fast", "context": [], "tools": [], "tool_choice": "auto",
            "max_tokens": 1024, "temperature": 0.2, "timeout": 2000, "metadata": {}
        })
    );
    let back: LlmStream = serde_json::from_value(serde_json::to_value(&d).unwrap()).unwrap();
    assert_eq!(back, d);
    assert_eq!(Directive::from(d).kind(), "ai.llm_stream");
}

#[tokio::test(start_paused = true)]
async fn llm_stream_sends_deltas_then_usage_then_one_response() {
    let mut done = answer("Hello", usage(5, 2));
    done.thinking = Some("let me think".into());
    let fake = Fake::new(vec![Reply::Stream(vec![
        Step::Event(LlmEvent::Thinking("let me think".into())),
        Step::Event(LlmEvent::Content("Hel".into())),
        Step::Event(LlmEvent::ToolCallDelta {
            index: 0,
            id: Some("tc".into()),
            name: Some("x".into()),
            arguments: "{".into(),
        }),
        Step::Sleep(Duration::from_millis(40)),
        Step::Event(LlmEvent::Content("lo\u{7}".into())),
        Step::Event(LlmEvent::Content(String::new())),
        Step::Event(LlmEvent::Done(done)),
    ])]);
    let ai = AiRuntime::new().client(fake.clone());
    let (jido, agent, mut rx) = start(&ai, "str-1", |_| {
        vec![
            LlmStream::new("call_1", "local:m", vec![Message::user("hi")])
                .meta("request_id", "req_1")
                .meta("iteration", 1)
                .into(),
        ]
    })
    .await;
    agent.cast(go()).unwrap();
    let m = meta("stream_text");
    let delta = |text: &str, kind: &str, seq: u64| {
        seen(
            "ai.llm.delta",
            json!({"call_id": "call_1", "delta": text, "chunk_type": kind, "seq": seq, "metadata": m}),
        )
    };
    assert_eq!(
        until(&mut rx, "ai.llm.response").await,
        vec![
            delta("let me think", "thinking", 1),
            delta("Hel", "content", 2),
            delta("lo", "content", 3),
            seen(
                "ai.usage",
                json!({
                    "call_id": "call_1", "model": "m-1", "input_tokens": 5, "output_tokens": 2,
                    "total_tokens": 7, "duration_ms": 40, "metadata": m
                })
            ),
            seen(
                "ai.llm.response",
                json!({
                    "call_id": "call_1",
                    "result": {"status": "ok", "result": {
                        "type": "final_answer", "text": "Hello", "thinking_content": "let me think",
                        "tool_calls": [], "finish_reason": "stop", "model": "m-1",
                        "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}
                    }, "effects": []},
                    "model": "local:m", "duration_ms": 40, "metadata": m
                })
            ),
        ]
    );
    nothing_more(&mut rx).await;
    assert_eq!(fake.requests()[0]["stream_idle_timeout"], 30_000);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn llm_stream_that_stalls_fails_or_ends_early_sends_one_error_response() {
    let fake = Fake::new(vec![
        Reply::Stream(vec![
            Step::Event(LlmEvent::Content("a".into())),
            Step::Stall,
        ]),
        Reply::Stall,
        Reply::Stream(vec![Step::Event(LlmEvent::Content("b".into()))]),
        Reply::Stream(vec![Step::Fail(LlmError::new(
            LlmErrorKind::StreamIdle,
            "stream idle",
        ))]),
    ]);
    let ai = AiRuntime::new().client(fake);
    let (jido, agent, mut rx) = start(&ai, "str-2", |_| {
        vec![
            LlmStream::new("call_1", "local:m", vec![])
                .timeout(Duration::from_secs(2))
                .meta("request_id", "req_1")
                .meta("iteration", 1)
                .into(),
        ]
    })
    .await;
    let delta = |t: &str| {
        seen(
            "ai.llm.delta",
            json!({"call_id": "call_1", "delta": t, "chunk_type": "content", "seq": 1, "metadata": meta("stream_text")}),
        )
    };
    let timeout = |message: &str| json!({"type": "timeout", "message": message, "details": {"timeout_ms": 2000}, "retryable": true});
    // Stalls after a delta: the idle timeout.
    agent.cast(go()).unwrap();
    assert_eq!(
        until(&mut rx, "ai.llm.response").await,
        vec![
            delta("a"),
            err_response(
                "call_1",
                "local:m",
                2000,
                timeout("llm stream stalled"),
                "stream_text"
            )
        ]
    );
    // Never opens.
    agent.cast(go()).unwrap();
    assert_eq!(
        next(&mut rx).await,
        err_response(
            "call_1",
            "local:m",
            2000,
            timeout("llm request timed out"),
            "stream_text"
        )
    );
    // Ends without its response.
    agent.cast(go()).unwrap();
    assert_eq!(
        until(&mut rx, "ai.llm.response").await,
        vec![
            delta("b"),
            err_response(
                "call_1",
                "local:m",
                0,
                json!({
                    "type": "execution_error", "message": "llm stream ended without a response",
                    "details": {"llm_error": "connect"}, "retryable": true
                }),
                "stream_text"
            )
        ]
    );
    // The provider reports an error mid-stream.
    agent.cast(go()).unwrap();
    assert_eq!(
        next(&mut rx).await,
        err_response(
            "call_1",
            "local:m",
            0,
            json!({"type": "timeout", "message": "stream idle", "details": {"llm_error": "stream_idle"}, "retryable": true}),
            "stream_text"
        )
    );
    nothing_more(&mut rx).await;
    jido.shutdown().await;
}

// ---------------------------------------------------------------------------
// LlmEmbed

#[tokio::test(start_paused = true)]
async fn llm_embed_fields_and_its_one_result() {
    let d = LlmEmbed::new(
        "emb_1",
        "openai:text-embedding-3-small",
        vec!["a".into(), "b".into()],
    );
    assert_eq!(
        serde_json::to_value(&d).unwrap(),
        json!({"id": "emb_1", "model": "openai:text-embedding-3-small", "texts": ["a", "b"], "metadata": {}})
    );
    let one: LlmEmbed = serde_json::from_value(
        json!({"id": "e", "model_alias": "embedding", "texts": "just one", "dimensions": 8}),
    )
    .unwrap();
    assert_eq!(one.texts, vec!["just one".to_owned()]);
    assert_eq!(one.model, ModelRef::alias("embedding"));
    assert_eq!(one.dimensions, Some(8));

    let fake = Fake::new(vec![
        Reply::Embed(EmbedResponse {
            model: "e-1".into(),
            embeddings: vec![vec![0.5, -0.25], vec![1.0, 0.0]],
            usage: usage(4, 0),
        }),
        Reply::Stall,
    ]);
    let ai = AiRuntime::new().client(fake.clone());
    let (jido, agent, mut rx) = start(&ai, "emb-1", move |_| {
        vec![d.clone().dimensions(2).meta("request_id", "req_1").into()]
    })
    .await;
    agent.cast(go()).unwrap();
    let m = json!({"request_id": "req_1", "run_id": "req_1", "origin": "directive", "operation": "embed"});
    assert_eq!(
        next(&mut rx).await,
        seen(
            "ai.embed.result",
            json!({
                "call_id": "emb_1",
                "result": {"status": "ok", "result": {
                    "embeddings": [[0.5, -0.25], [1.0, 0.0]], "count": 2,
                    "usage": {"input_tokens": 4, "output_tokens": 0, "total_tokens": 4}
                }, "effects": []},
                "model": "openai:text-embedding-3-small", "duration_ms": 0, "metadata": m
            })
        )
    );
    assert_eq!(
        fake.requests()[0],
        json!({"model": "openai:text-embedding-3-small", "texts": ["a", "b"], "dimensions": 2, "timeout": 30000})
    );
    // A stalled embedding ends at the default timeout.
    agent.cast(go()).unwrap();
    let (ty, data) = next(&mut rx).await;
    assert_eq!(ty, "ai.embed.result");
    assert_eq!(data["duration_ms"], 30_000);
    assert_eq!(
        data["result"]["reason"],
        json!({"type": "timeout", "message": "embedding request timed out", "details": {"timeout_ms": 30000}, "retryable": true})
    );
    nothing_more(&mut rx).await;
    jido.shutdown().await;
}

// ---------------------------------------------------------------------------
// ToolExec

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct MulParams {
    a: i64,
    b: i64,
}

fn multiply() -> DynAction {
    jido::action_fn("multiply", |p: MulParams, ctx: Context| async move {
        ctx.push_effect(StateOp::set_path(["last_product"], json!(p.a * p.b)));
        ctx.push_effect(Directive::stop());
        Ok(json!({"product": p.a * p.b}))
    })
}

fn tool_meta() -> Value {
    json!({"request_id": "req_9", "run_id": "req_9", "iteration": 2, "origin": "directive", "operation": "tool_execute"})
}

#[test]
fn tool_exec_fields_and_defaults() {
    let d = ToolExec::new("tc_1", "multiply", json!({"a": 2, "b": 3}));
    assert_eq!(d.max_retries, 0);
    assert_eq!(d.retry_backoff_ms, 0);
    assert_eq!(d.timeout_ms, None);
    assert_eq!(
        serde_json::to_value(&d).unwrap(),
        json!({
            "id": "tc_1", "tool_name": "multiply", "arguments": {"a": 2, "b": 3}, "context": {},
            "max_retries": 0, "retry_backoff_ms": 0, "metadata": {}
        })
    );
    let from: ToolExec = serde_json::from_value(json!({
        "id": "tc_2", "tool_name": "t", "max_retries": -3, "timeout_ms": 15000, "retry_backoff_ms": 200,
        "metadata": {"request_id": "req_m", "iteration": 4}, "context": {"request_id": "req_c", "run_id": "run_c"}
    }))
    .unwrap();
    assert_eq!(from.max_retries, 0);
    assert_eq!(from.arguments, json!({}).into());
    assert_eq!(from.timeout_ms, Some(15_000));
    // request id and iteration: field, then metadata, then context.
    let c = from.correlation();
    assert_eq!(
        (c.request_id.as_deref(), c.iteration, c.run_id.as_deref()),
        (Some("req_m"), Some(4), Some("run_c"))
    );
    let c = from.clone().request_id("req_f").iteration(7).correlation();
    assert_eq!(
        (c.request_id.as_deref(), c.iteration),
        (Some("req_f"), Some(7))
    );
    assert_eq!(Directive::from(d).kind(), "ai.tool_exec");
}

#[tokio::test(start_paused = true)]
async fn tool_exec_sends_started_then_one_result_with_allowed_effects() {
    let ai = AiRuntime::new().tools(ToolSet::new().with(multiply()).unwrap());
    let (jido, agent, mut rx) = start(&ai, "tool-1", |_| {
        vec![
            ToolExec::new(
                "tc_1",
                "multiply",
                json!({"a": "2", "b": 3, "api_key": "sk"}),
            )
            .request_id("req_9")
            .iteration(2)
            .into(),
        ]
    })
    .await;
    agent.cast(go()).unwrap();
    assert_eq!(
        until(&mut rx, "ai.tool.result").await,
        vec![
            seen(
                "ai.tool.started",
                json!({
                    "call_id": "tc_1", "tool_name": "multiply",
                    "arguments": {"a": "2", "b": 3, "api_key": "[REDACTED]"}, "metadata": tool_meta()
                })
            ),
            // The stop directive was denied by the default effect policy;
            // the state op travels as data.
            seen(
                "ai.tool.result",
                json!({
                    "call_id": "tc_1", "tool_name": "multiply",
                    "result": {"status": "ok", "result": {"product": 6},
                               "effects": [{"op": "set_path", "path": ["last_product"], "value": 6}]},
                    "metadata": tool_meta()
                })
            ),
        ]
    );
    nothing_more(&mut rx).await;
    assert!(agent.is_alive());
    // The tool ran beside the mailbox: the state op is for the strategy to
    // apply, the runtime did not.
    assert_eq!(
        agent.state().await.unwrap().state().get("last_product"),
        None
    );
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn tool_exec_failures_end_in_one_error_result() {
    let slow = jido::action_fn("slow", |_: Value, _: Context| async {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(json!({}))
    });
    let boom = jido::action_fn("boom", |_: Value, _: Context| async {
        if true {
            panic!("tool bug");
        }
        Ok(json!({}))
    });
    let tools = ToolSet::new()
        .with(multiply())
        .unwrap()
        .with(slow)
        .unwrap()
        .with(boom)
        .unwrap();
    let ai = AiRuntime::new().tools(tools);
    let (jido, agent, mut rx) = start(&ai, "tool-2", |p| {
        vec![
            ToolExec::new("tc_1", p["tool"].as_str().unwrap(), p["args"].clone())
                .timeout_ms(1000)
                .request_id("req_9")
                .iteration(2)
                .into(),
        ]
    })
    .await;
    let cases = [
        (
            json!({"tool": "teleport", "args": {}}),
            json!({"type": "not_found", "message": "tool not found: teleport",
                   "details": {"tool_name": "teleport", "retry": false}, "retryable": false}),
        ),
        (
            json!({"tool": "multiply", "args": {"a": "two", "b": 3}}),
            json!({"type": "validation_error",
                   "message": "invalid parameters for action multiply: a: invalid type: string \"two\", expected i64",
                   "details": {"action": "multiply", "path": "a", "reason": "invalid type: string \"two\", expected i64"},
                   "retryable": false}),
        ),
        (
            json!({"tool": "multiply", "args": [1, 2]}),
            json!({"type": "validation_error", "message": "tool arguments must be a JSON object",
                   "details": {"arguments": [1, 2], "tool_name": "multiply"}, "retryable": false}),
        ),
        (
            json!({"tool": "slow", "args": {}}),
            json!({"type": "timeout", "message": "action slow timed out after 1000ms",
                   "details": {"action": "slow", "timeout_ms": 1000}, "retryable": true}),
        ),
        (
            json!({"tool": "boom", "args": {}}),
            json!({"type": "execution_error", "message": "action boom panicked: tool bug",
                   "details": {"action": "boom", "panic": "tool bug"}, "retryable": true}),
        ),
    ];
    for (data, reason) in cases {
        let tool = data["tool"].as_str().unwrap().to_owned();
        agent.cast(Signal::new("go", data)).unwrap();
        let got = until(&mut rx, "ai.tool.result").await;
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, "ai.tool.started");
        assert_eq!(
            got[1],
            seen(
                "ai.tool.result",
                json!({"call_id": "tc_1", "tool_name": tool,
                       "result": {"status": "error", "reason": reason, "effects": []},
                       "metadata": tool_meta()})
            )
        );
    }
    nothing_more(&mut rx).await;
    assert!(agent.is_alive());
    assert_eq!(ai.running(&agent), 0);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn tool_exec_retries_only_when_asked_with_a_fixed_backoff() {
    let attempts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen_attempts = Arc::clone(&attempts);
    let flaky = jido::action_fn("flaky", move |_: Value, _: Context| {
        let attempts = Arc::clone(&seen_attempts);
        async move {
            let n = {
                let mut a = attempts.lock().unwrap();
                a.push(tokio::time::Instant::now());
                a.len()
            };
            if n != 4 {
                return Err(Error::execution("flaky"));
            }
            Ok(json!({"attempt": n}))
        }
    });
    let ai = AiRuntime::new().tools(ToolSet::new().with(flaky).unwrap());
    let (jido, agent, mut rx) = start(&ai, "tool-3", |p| {
        vec![
            ToolExec::new("tc_1", "flaky", json!({}))
                .max_retries(p["retries"].as_u64().unwrap_or(0) as u32)
                .retry_backoff_ms(200)
                .into(),
        ]
    })
    .await;
    // Default: no retry.
    agent.cast(go()).unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(
        got[1].1["result"],
        json!({"status": "error", "reason": {"type": "execution_error", "message": "flaky",
               "details": {}, "retryable": true}, "effects": []})
    );
    assert_eq!(attempts.lock().unwrap().len(), 1);
    // Two retries, 200 ms apart each (not doubling).
    agent
        .cast(Signal::new("go", json!({"retries": 2})))
        .unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(
        got[1].1["result"],
        json!({"status": "ok", "result": {"attempt": 4}, "effects": []})
    );
    let a = attempts.lock().unwrap().clone();
    assert_eq!(a.len(), 4);
    assert_eq!(a[2] - a[1], Duration::from_millis(200));
    assert_eq!(a[3] - a[2], Duration::from_millis(200));
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn tool_exec_context_state_key_is_the_runtimes() {
    let peek = jido::action_fn("peek", |_: Value, ctx: Context| async move {
        Ok(json!({
            "state_marker": ctx.state().and_then(|s| s.get("marker")).map(|v| v.to_json()),
            "state_value": ctx.get("state").cloned(),
            "tenant": ctx.get("tenant").cloned(),
        }))
    });
    let ai = AiRuntime::new().tools(ToolSet::new().with(peek).unwrap());
    let (jido, agent, mut rx) = start(&ai, "tool-4", |_| {
        vec![
            ToolExec::new("tc_1", "peek", json!({}))
                .context_value("state", json!({"marker": "forged"}))
                .context_value("tenant", "acme")
                .into(),
        ]
    })
    .await;
    agent
        .cast(Signal::new("go", json!({"set": {"marker": "agent"}})))
        .unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(
        got[1].1["result"]["result"],
        json!({"state_marker": "agent", "state_value": null, "tenant": "acme"})
    );
    jido.shutdown().await;
}

// ---------------------------------------------------------------------------
// EmitToolError, EmitRequestError

#[tokio::test(start_paused = true)]
async fn emit_tool_error_and_emit_request_error_send_one_signal_each() {
    let d = EmitToolError::unknown_tool("tc_7", "teleport")
        .meta("request_id", "req_9")
        .meta("iteration", 2);
    assert_eq!(
        serde_json::to_value(&d).unwrap(),
        json!({
            "id": "tc_7", "tool_name": "teleport",
            "error": {"type": "not_found", "message": "tool not found: teleport",
                      "details": {"tool_name": "teleport", "retry": false}, "retryable": false},
            "metadata": {"request_id": "req_9", "iteration": 2}
        })
    );
    let from_data: EmitToolError =
        serde_json::from_value(json!({"id": "tc_8", "tool_name": "x", "error": "boom"})).unwrap();
    assert_eq!(
        from_data.error.to_value(),
        json!({"type": "execution_error", "message": "boom", "details": {}, "retryable": false})
    );
    let r = EmitRequestError::new("req_2", "busy", "agent is busy");
    assert_eq!(
        serde_json::to_value(&r).unwrap(),
        json!({"request_id": "req_2", "reason": "busy", "message": "agent is busy"})
    );

    let ai = AiRuntime::new();
    let (jido, agent, mut rx) = start(&ai, "emit-1", move |_| {
        vec![d.clone().into(), r.clone().into()]
    })
    .await;
    agent.cast(go()).unwrap();
    assert_eq!(
        vec![next(&mut rx).await, next(&mut rx).await],
        vec![
            seen(
                "ai.tool.result",
                json!({
                    "call_id": "tc_7", "tool_name": "teleport",
                    "result": {"status": "error", "reason": {
                        "type": "not_found", "message": "tool not found: teleport",
                        "details": {"tool_name": "teleport", "retry": false}, "retryable": false
                    }, "effects": []},
                    "metadata": tool_meta()
                })
            ),
            seen(
                "ai.request.error",
                json!({"request_id": "req_2", "reason": "busy", "message": "agent is busy"})
            ),
        ]
    );
    nothing_more(&mut rx).await;
    jido.shutdown().await;
}

// ---------------------------------------------------------------------------
// Cancellation

#[tokio::test(start_paused = true)]
async fn cancel_request_ends_running_calls_with_a_cancelled_result() {
    assert_eq!(
        serde_json::to_value(CancelRequest::new("req_1")).unwrap(),
        json!({"request_id": "req_1", "reason": "user_cancelled"})
    );
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    let slow = jido::action_fn("slow", move |_: Value, _: Context| {
        let counter = Arc::clone(&counter);
        async move {
            tokio::time::sleep(Duration::from_secs(20)).await;
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(json!({}))
        }
    });
    let ai = AiRuntime::new()
        .client(Fake::new(vec![Reply::Stream(vec![Step::Stall])]))
        .tools(ToolSet::new().with(slow).unwrap());
    let (jido, agent, mut rx) = start(&ai, "cancel-1", |p| match p["do"].as_str() {
        Some("start") => vec![
            LlmStream::new("call_1", "local:m", vec![])
                .meta("request_id", "req_1")
                .meta("iteration", 1)
                .into(),
            ToolExec::new("tc_1", "slow", json!({}))
                .request_id("req_1")
                .iteration(1)
                .into(),
        ],
        Some("cancel") => vec![
            CancelRequest::new(p["id"].as_str().unwrap())
                .reason("stop_now")
                .into(),
        ],
        _ => vec![],
    })
    .await;
    agent
        .cast(Signal::new("go", json!({"do": "start"})))
        .unwrap();
    assert_eq!(next(&mut rx).await.0, "ai.tool.started");
    assert_eq!(ai.running(&agent), 2);
    // Another id: nothing happens.
    agent
        .cast(Signal::new(
            "go",
            json!({"do": "cancel", "id": "req_other"}),
        ))
        .unwrap();
    nothing_more(&mut rx).await;
    assert_eq!(ai.running(&agent), 2);

    agent
        .cast(Signal::new("go", json!({"do": "cancel", "id": "req_1"})))
        .unwrap();
    let mut got = vec![next(&mut rx).await, next(&mut rx).await];
    got.sort_by(|a, b| a.0.cmp(&b.0));
    let cancelled = json!({"type": "cancelled", "message": "request cancelled",
                           "details": {"reason": "stop_now"}, "retryable": false});
    assert_eq!(
        got,
        vec![
            err_response("call_1", "local:m", 0, cancelled.clone(), "stream_text"),
            seen(
                "ai.tool.result",
                json!({"call_id": "tc_1", "tool_name": "slow",
                       "result": {"status": "error", "reason": cancelled, "effects": []},
                       "metadata": {"request_id": "req_1", "run_id": "req_1", "iteration": 1,
                                    "origin": "directive", "operation": "tool_execute"}})
            ),
        ]
    );
    // The tool was stopped, not left running.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    nothing_more(&mut rx).await;
    assert_eq!(ai.running(&agent), 0);
    jido.shutdown().await;
}

// ---------------------------------------------------------------------------
// Directives as data

#[test]
fn every_directive_reads_from_tagged_data() {
    let cases = [
        (
            json!({"directive": "llm_stream", "id": "c", "model": "a:b", "context": []}),
            "ai.llm_stream",
        ),
        (
            json!({"directive": "llm_generate", "id": "c", "model_alias": "fast", "context": []}),
            "ai.llm_generate",
        ),
        (
            json!({"directive": "llm_embed", "id": "e", "model": "a:b", "texts": ["x"]}),
            "ai.llm_embed",
        ),
        (
            json!({"directive": "tool_exec", "id": "t", "tool_name": "x"}),
            "ai.tool_exec",
        ),
        (
            json!({"directive": "emit_tool_error", "id": "t", "tool_name": "x", "error": {"type": "boom", "message": "m"}}),
            "ai.emit_tool_error",
        ),
        (
            json!({"directive": "emit_request_error", "request_id": "r", "reason": "busy", "message": "m"}),
            "ai.emit_request_error",
        ),
        (
            json!({"directive": "cancel_request", "request_id": "r"}),
            "ai.cancel_request",
        ),
    ];
    for (data, kind) in cases {
        let d: AiDirective = serde_json::from_value(data.clone()).unwrap();
        let again: AiDirective = serde_json::from_value(serde_json::to_value(&d).unwrap()).unwrap();
        assert_eq!(again, d);
        assert_eq!(Directive::from(d).kind(), kind);
    }
    let err = serde_json::from_value::<AiDirective>(json!({"directive": "llm_dream", "id": "c"}))
        .unwrap_err();
    assert!(
        err.to_string().starts_with("unknown variant `llm_dream`"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------
// Where the runtime is registered

#[tokio::test(start_paused = true)]
async fn an_agents_runtime_is_inherited_by_its_children_and_no_one_else() {
    use jido::server::{Jido, JidoConfig};
    let ai = AiRuntime::new().client(Fake::new(vec![Reply::Answer(answer(
        "child says hi",
        None,
    ))]));
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let child_tx = tx.clone();
    let parent = ai_agent(
        "parent-1",
        move |p| match p["do"].as_str() {
            Some("spawn") => vec![
                Directive::spawn_agent(
                    ai_agent(
                        "unused",
                        |_| vec![LlmGenerate::new("call_c", "local:m", vec![]).into()],
                        child_tx.clone(),
                    ),
                    "kid",
                )
                .into(),
            ],
            _ => vec![],
        },
        tx.clone(),
    );
    let parent = jido
        .start_agent(parent, ai.register(ServerOptions::new()))
        .await
        .unwrap();
    parent
        .cast(Signal::new("go", json!({"do": "spawn"})))
        .unwrap();
    let child = loop {
        if let Some(child) = jido.whereis("parent-1/kid") {
            break child;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    child.cast(go()).unwrap();
    let (ty, data) = next(&mut rx).await;
    assert_eq!(ty, "ai.llm.response");
    assert_eq!(data["result"]["result"]["text"], "child says hi");

    // An agent of the same instance without the runtime: the directive has
    // no executor (a configuration error for its error policy), no signal.
    let other = jido
        .start_agent(
            ai_agent(
                "other-1",
                |_| vec![LlmGenerate::new("call_o", "local:m", vec![]).into()],
                tx,
            ),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    other.call(go()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), async {
        while other.status().await.unwrap().error_count == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the unhandled directive reached the error policy");
    assert_eq!(other.status().await.unwrap().error_count, 1);
    nothing_more(&mut rx).await;
    jido.shutdown().await;
}

// ---------------------------------------------------------------------------
// A task that cannot start

/// When the instance's task supervisor shuts down between a signal and its
/// directives (the instance is shutting down), a directive whose work runs
/// in a supervised task cannot start it: it sends its terminal signal at
/// once, carrying a `cancelled` error "task supervisor is shut down" with
/// the call id, and nothing else (no `ai.tool.started`, usage or delta); no
/// call is left registered. The agent, whose instance is gone, refuses that
/// signal like any other: its error policy sees each terminal once (context
/// `shutdown`), which is how this test observes them.
#[tokio::test(start_paused = true)]
async fn a_task_that_cannot_start_ends_in_one_terminal_signal() {
    use jido::directive::{ErrorDecision, ErrorPolicy};
    let ai = AiRuntime::new()
        .client(Fake::new(vec![]))
        .tools(ToolSet::new().with(multiply()).unwrap());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Seen>();
    let policy = ErrorPolicy::custom(move |ev| {
        if ev.context == "shutdown" {
            let data = ev.signal.data().cloned().unwrap_or(Value::Null);
            let _ = tx.send((ev.signal.ty().to_owned(), data));
        }
        Ok(ErrorDecision::Continue)
    });
    // Actions inline (timeout 0): `go` itself needs no task.
    let jido = jido::server::Jido::start(
        ai.register_instance(
            jido::server::JidoConfig::new()
                .exec_options(ExecOptions::new().timeout(Duration::ZERO))
                .error_policy(policy),
        ),
    )
    .await
    .unwrap();
    let supervisor = jido.exec().supervisor().clone();
    let go_action = jido::action_fn("go", move |_: Value, ctx: Context| {
        let supervisor = supervisor.clone();
        async move {
            // The instance starts shutting down while the signal runs.
            supervisor.shutdown().await;
            let directives: Vec<Directive> = vec![
                LlmStream::new("call_s", "local:m", vec![Message::user("hi")])
                    .meta("request_id", "req_1")
                    .meta("iteration", 1)
                    .into(),
                LlmGenerate::new("call_g", "local:m", vec![Message::user("hi")])
                    .meta("request_id", "req_1")
                    .meta("iteration", 1)
                    .into(),
                LlmEmbed::new("call_e", "local:e", vec!["hi".into()])
                    .meta("request_id", "req_1")
                    .into(),
                ToolExec::new("tc_1", "multiply", json!({"a": 6, "b": 7}))
                    .request_id("req_1")
                    .iteration(1)
                    .into(),
            ];
            for d in directives {
                ctx.push_effect(d);
            }
            Ok(json!({}))
        }
    });
    let agent = jido
        .start_agent(
            AgentState::new(
                RoutedAgent(vec![jido::agent::SignalRoute::action("go", go_action)]),
                AgentOptions::new().id("nostart-1"),
            ),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    agent.cast(go()).unwrap();
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(next(&mut rx).await);
    }
    nothing_more(&mut rx).await;
    let reason = |call_id: &str| {
        json!({"type": "cancelled", "message": "task supervisor is shut down",
               "details": {"call_id": call_id}, "retryable": false})
    };
    let meta = |op: &str, iteration: bool| {
        let mut m = json!({"request_id": "req_1", "run_id": "req_1", "origin": "directive", "operation": op});
        if iteration {
            m["iteration"] = json!(1);
        }
        m
    };
    let error =
        |call_id: &str| json!({"status": "error", "reason": reason(call_id), "effects": []});
    assert_eq!(
        got,
        vec![
            seen(
                "ai.llm.response",
                json!({"call_id": "call_s", "result": error("call_s"),
                 "model": "local:m", "duration_ms": 0, "metadata": meta("stream_text", true)})
            ),
            seen(
                "ai.llm.response",
                json!({"call_id": "call_g", "result": error("call_g"),
                 "model": "local:m", "duration_ms": 0, "metadata": meta("generate_text", true)})
            ),
            seen(
                "ai.embed.result",
                json!({"call_id": "call_e", "result": error("call_e"),
                 "model": "local:e", "duration_ms": 0, "metadata": meta("embed", false)})
            ),
            seen(
                "ai.tool.result",
                json!({"call_id": "tc_1", "tool_name": "multiply",
                 "result": error("tc_1"), "metadata": meta("tool_execute", true)})
            ),
        ]
    );
    assert_eq!(ai.running(&agent), 0);
    jido.shutdown().await;
}
