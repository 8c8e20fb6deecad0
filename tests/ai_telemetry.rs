//! The `jido.ai.llm.*` / `jido.ai.tool.*` telemetry of the AI directives
//! (and the same types for an action's own calls, told apart by `origin`).
#![cfg(feature = "ai")]

mod ai_support;
mod common;

use ai_support::*;
use jido::ai::signals::Correlation;
use jido::ai::telemetry::{LlmTelemetry, ORIGIN_ACTION};
use jido::ai::{
    AiRuntime, FinishReason, LlmError, LlmErrorKind, LlmGenerate, LlmResponse, Message, ToolExec,
    ToolSet, Usage,
};
use jido::prelude::*;
use jido::signal::Signal;
use serde_json::{Value, json};

fn fields(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().unwrap().clone()
}

#[tokio::test(start_paused = true)]
async fn llm_calls_and_tool_runs_report_start_then_stop_or_exception() {
    let (events, _guard) = common::record_events();
    let multiply = jido::action_fn("multiply", |p: Value, _: Context| async move {
        Ok(json!({"product": p["a"].as_i64().unwrap_or(0) * p["b"].as_i64().unwrap_or(0)}))
    });
    let fake = Fake::new(vec![
        Reply::Answer(LlmResponse {
            model: "m-1".into(),
            text: "hi".into(),
            thinking: None,
            tool_calls: Vec::new(),
            finish_reason: FinishReason::Stop,
            usage: Some(Usage {
                input_tokens: 7,
                output_tokens: 3,
                total_tokens: 10,
            }),
        }),
        Reply::Fail(LlmError::new(LlmErrorKind::Status(503), "busy")),
    ]);
    let ai = AiRuntime::new()
        .client(fake)
        .model_aliases([("fast", "local:qwen")])
        .tools(ToolSet::new().with(multiply).unwrap());
    let (jido, _agent, mut rx) = start(&ai, "tel-1", |p| match p["do"].as_str() {
        Some("llm") => vec![
            LlmGenerate::new(
                p["id"].as_str().unwrap(),
                jido::ai::ModelRef::alias("fast"),
                vec![Message::user("hello")],
            )
            .meta("request_id", "req_1")
            .meta("iteration", 2)
            .into(),
        ],
        Some("tool") => vec![
            ToolExec::new("tc_1", "multiply", json!({"a": 6, "b": 7}))
                .request_id("req_1")
                .iteration(2)
                .into(),
        ],
        _ => vec![],
    })
    .await;
    agent_go(&_agent, json!({"do": "llm", "id": "call_1"}));
    until(&mut rx, "ai.llm.response").await;
    agent_go(&_agent, json!({"do": "llm", "id": "call_2"}));
    until(&mut rx, "ai.llm.response").await;
    agent_go(&_agent, json!({"do": "tool"}));
    until(&mut rx, "ai.tool.result").await;

    let base = |call_id: &str| {
        json!({"call_id": call_id, "request_id": "req_1", "iteration": 2,
               "origin": "directive", "operation": "generate_text"})
    };
    let mut start1 = fields(base("call_1"));
    start1.insert("model".into(), json!("fast"));
    start1.insert("message".into(), json!("jido.ai.llm.start"));
    let mut start2 = start1.clone();
    start2.insert("call_id".into(), json!("call_2"));
    assert_eq!(events.named("jido.ai.llm.start"), vec![start1, start2]);

    let mut stop = fields(base("call_1"));
    stop.extend(fields(json!({
        "model": "local:qwen", "duration_ms": 0, "input_tokens": 7, "output_tokens": 3,
        "total_tokens": 10, "finish_reason": "stop", "message": "jido.ai.llm.stop"
    })));
    assert_eq!(events.named("jido.ai.llm.stop"), vec![stop]);

    let exceptions = events.named("jido.ai.llm.exception");
    assert_eq!(exceptions.len(), 1);
    let e = &exceptions[0];
    assert_eq!(e["call_id"], "call_2");
    assert_eq!(e["model"], "local:qwen");
    assert_eq!(e["origin"], "directive");
    assert_eq!(e["operation"], "generate_text");
    assert_eq!(e["retryable"], true);
    assert_eq!(e["error_type"], "execution_error");
    assert_eq!(e["message"], "busy");

    let tool_base = json!({"call_id": "tc_1", "tool_name": "multiply", "request_id": "req_1",
                           "iteration": 2, "origin": "directive", "operation": "tool_execute"});
    let mut tool_start = fields(tool_base.clone());
    tool_start.insert("message".into(), json!("jido.ai.tool.start"));
    assert_eq!(events.named("jido.ai.tool.start"), vec![tool_start]);
    let mut tool_stop = fields(tool_base);
    tool_stop.insert("duration_ms".into(), json!(0));
    tool_stop.insert("message".into(), json!("jido.ai.tool.stop"));
    assert_eq!(events.named("jido.ai.tool.stop"), vec![tool_stop]);
    assert!(events.named("jido.ai.tool.exception").is_empty());
    jido.shutdown().await;
}

fn agent_go(agent: &jido::server::AgentRef, data: Value) {
    agent.cast(Signal::new("go", data)).unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_actions_own_call_reports_with_origin_action() {
    let (events, _guard) = common::record_events();
    let call = LlmTelemetry::start(
        "summary_1",
        "local:tiny",
        ORIGIN_ACTION,
        "generate_text",
        &Correlation::new().request_id("req_7"),
    );
    call.exception(&jido::Error::timeout("llm request timed out"));
    let e = &events.named("jido.ai.llm.exception")[0];
    assert_eq!(e["origin"], "action");
    assert_eq!(e["operation"], "generate_text");
    assert_eq!(e["request_id"], "req_7");
    assert_eq!(e["iteration"], 0);
    assert_eq!(e["error_type"], "timeout");
    assert_eq!(e["message"], "llm request timed out");
    assert_eq!(e["retryable"], true);
}
