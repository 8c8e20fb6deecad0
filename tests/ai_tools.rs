//! Tools from actions (descriptions, closed schemas, argument
//! normalisation), the tool effect policy, and the envelopes a model and a
//! strategy read.
#![cfg(feature = "ai")]

mod ai_support;

use std::time::Duration;

use ai_support::*;
use jido::ai::effects::{self, EffectKind, EffectPolicy};
use jido::ai::envelope::{ErrorEnvelope, MAX_TOOL_CONTENT_BYTES, ResultEnvelope};
use jido::ai::tool::{Tool, ToolSet, normalize_arguments, tool_schema};
use jido::ai::{AiRuntime, ToolExec};
use jido::effect::{Effect, StateOp};
use jido::prelude::*;
use jido::signal::Signal;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Detailed,
    Summary,
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Place {
    city: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct SearchParams {
    query: String,
    limit: Option<u32>,
    mode: Mode,
    place: Place,
    ratio: f64,
    tags: Vec<String>,
    #[serde(default)]
    verbose: bool,
}

/// Searches the web.
#[jido::action]
async fn search(p: SearchParams) -> jido::Result<Value> {
    Ok(json!({"echo": p}))
}

fn search_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": ["integer", "null"], "format": "uint32", "minimum": 0},
            "mode": {"$ref": "#/$defs/Mode"},
            "place": {"$ref": "#/$defs/Place"},
            "ratio": {"type": "number", "format": "double"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "verbose": {"type": "boolean", "default": false}
        },
        "required": ["query", "mode", "place", "ratio", "tags"],
        "$defs": {
            "Mode": {"type": "string", "enum": ["detailed", "summary"]},
            "Place": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "additionalProperties": false
            }
        },
        "additionalProperties": false
    })
}

#[test]
fn a_tool_is_the_actions_name_description_and_closed_params_schema() {
    let tool = Tool::from_action(Search);
    let spec = serde_json::to_value(tool.spec()).unwrap();
    assert_eq!(
        spec,
        json!({
            "name": "search",
            "description": "Searches the web.",
            "parameters": search_schema(),
            "strict": false
        })
    );
    // Key order is kept for the model (`$schema` and `title` dropped).
    let keys: Vec<&String> = spec["parameters"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "type",
            "properties",
            "required",
            "$defs",
            "additionalProperties"
        ]
    );
    // An action without a description still gets one.
    let bare = jido::action_fn("ping", |_: Value, _: Context| async { Ok(json!({})) });
    let spec = Tool::from_action(bare).spec().clone();
    assert_eq!(spec.description, "Runs the ping action.");
    // `Value` params: an object taking anything, closed.
    assert_eq!(
        spec.parameters,
        json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
    );
}

#[derive(Clone, Deserialize, schemars::JsonSchema)]
#[allow(dead_code)] // only its schema is used
struct Open {
    name: String,
    extra: serde_json::Map<String, Value>,
}

#[test]
fn the_strict_variant_closes_every_object() {
    let open = jido::action_fn("open", |_: Open, _: Context| async { Ok(json!({})) });
    let loose = Tool::from_action(open.clone());
    assert_eq!(
        loose.spec().parameters["properties"]["extra"],
        json!({"type": "object", "additionalProperties": true})
    );
    assert!(!loose.spec().strict);
    let strict = Tool::from_action(open).strict(true);
    assert_eq!(
        strict.spec().parameters["properties"]["extra"],
        json!({"type": "object", "additionalProperties": false})
    );
    assert_eq!(strict.spec().parameters["additionalProperties"], false);
    assert!(strict.spec().strict);
    // A property named `properties` is a property, not a schema keyword.
    assert_eq!(
        tool_schema(
            json!({"type": "object", "properties": {"properties": {"type": "string"}}}),
            false
        ),
        json!({"type": "object", "properties": {"properties": {"type": "string"}},
               "required": [], "additionalProperties": false})
    );
}

#[test]
fn a_tool_set_refuses_duplicate_and_invalid_names() {
    let set = ToolSet::new()
        .with(Search)
        .unwrap()
        .with(Tool::from_action(Search).prefixed("web_"))
        .unwrap();
    assert_eq!(set.names().collect::<Vec<_>>(), ["search", "web_search"]);
    assert_eq!(
        set.specs()
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["search", "web_search"]
    );
    let err = set.clone().with(Search).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), "duplicate tool name search");
    assert_eq!(err.detail("name"), Some(&json!("search")));
    let err = ToolSet::new()
        .with(Tool::from_action(Search).prefixed("1x_"))
        .unwrap_err();
    assert_eq!(err.message(), "invalid tool name \"1x_search\"");
    assert_eq!(set.len(), 2);
}

#[test]
fn model_arguments_are_normalised_against_the_schema() {
    let schema = search_schema();
    let norm = |v: Value| normalize_arguments(&schema, v).unwrap();
    assert_eq!(
        norm(json!({
            "query": "rust", "limit": " 5 ", "mode": "SUMMARY", "place": {"city": "Oslo"},
            "ratio": "0.5", "tags": ["a"], "verbose": "True"
        })),
        json!({
            "query": "rust", "limit": 5, "mode": "summary", "place": {"city": "Oslo"},
            "ratio": 0.5, "tags": ["a"], "verbose": true
        })
    );
    // Strings stay strings where the schema wants one; what does not
    // convert is left for decoding to refuse.
    assert_eq!(
        norm(json!({"query": "42", "limit": "many", "mode": "brief", "ratio": "2"})),
        json!({"query": "42", "limit": "many", "mode": "brief", "ratio": 2})
    );
    // JSON text and null.
    assert_eq!(norm(json!("{\"limit\": \"3\"}")), json!({"limit": 3}));
    assert_eq!(norm(Value::Null), json!({}));
    let err = normalize_arguments(&schema, json!("not json")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.message(), "tool arguments must be a JSON object");
    assert_eq!(err.detail("arguments"), Some(&json!("not json")));
}

#[tokio::test(start_paused = true)]
async fn a_tool_call_with_loose_arguments_runs_the_typed_action() {
    let ai = AiRuntime::new().tools(ToolSet::new().with(Search).unwrap());
    let (jido, agent, mut rx) = start(&ai, "tools-1", |p| {
        vec![ToolExec::new("tc_1", "search", p["args"].clone()).into()]
    })
    .await;
    agent
        .cast(Signal::new(
            "go",
            json!({"args": "{\"query\": \"rust\", \"mode\": \"Detailed\", \"place\": {\"city\": \"Oslo\"}, \"ratio\": \"1\", \"tags\": []}"}),
        ))
        .unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(
        got[1].1["result"],
        json!({"status": "ok", "result": {"echo": {
            "query": "rust", "limit": null, "mode": "detailed", "place": {"city": "Oslo"},
            "ratio": 1.0, "tags": [], "verbose": false
        }}, "effects": []})
    );
    jido.shutdown().await;
}

// ---------------------------------------------------------------------------
// Effect policy

fn all_effects() -> Vec<Effect> {
    vec![
        StateOp::set_state(json!({"a": 1}).as_object().unwrap().clone()).into(),
        StateOp::replace_state(json!({"b": 2}).as_object().unwrap().clone()).into(),
        StateOp::delete_keys(["c"]).into(),
        StateOp::set_path(["d", "e"], json!(3)).into(),
        StateOp::delete_path(["f"]).into(),
        StateOp::append(["log"], json!("x")).into(),
        Directive::emit(
            Signal::builder("app.note")
                .id("s1")
                .source("/t")
                .no_time()
                .data(json!({"n": 1}))
                .build()
                .unwrap(),
        )
        .into(),
        Directive::schedule(Duration::from_millis(1500), json!({"tick": 1})).into(),
        Directive::stop().into(),
        Directive::spawn_agent(
            AgentState::new(RoutedAgent(vec![]), AgentOptions::new()),
            "child",
        )
        .into(),
        Directive::cron("* * * * *", json!({})).into(),
        Directive::run_instruction(Instruction::new(Search)).into(),
        Directive::emit_to(
            Signal::new("app.other", json!({})),
            jido::signal::dispatch::DispatchConfig::new(jido::signal::dispatch::NoopTarget)
                .unwrap(),
        )
        .into(),
    ]
}

#[test]
fn the_default_policy_keeps_state_ops_emit_and_schedule_only() {
    let (kept, denied) = EffectPolicy::default().filter(all_effects());
    assert_eq!(
        kept,
        vec![
            json!({"op": "set_state", "value": {"a": 1}}),
            json!({"op": "replace_state", "value": {"b": 2}}),
            json!({"op": "delete_keys", "keys": ["c"]}),
            json!({"op": "set_path", "path": ["d", "e"], "value": 3}),
            json!({"op": "delete_path", "path": ["f"]}),
            json!({"op": "append", "path": ["log"], "value": "x"}),
            json!({"op": "emit", "signal": {
                "specversion": "1.0.2", "id": "s1", "source": "/t", "type": "app.note",
                "datacontenttype": "application/json", "data": {"n": 1}
            }}),
            json!({"op": "schedule", "delay_ms": 1500, "message": {"tick": 1}}),
        ]
    );
    assert_eq!(
        denied,
        ["stop", "spawn_agent", "cron", "run_instruction", "emit"]
    );
    // Every kept effect decodes back to the same JSON.
    for json in &kept {
        let effect = effects::decode(json).unwrap();
        assert_eq!(effects::encode(&effect).as_ref(), Some(json));
    }
    let err = effects::decode(&json!({"op": "stop"})).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.message(), "invalid tool effect: unknown op stop");
    assert_eq!(
        effects::decode(&json!({"op": "set_path", "path": "a"}))
            .unwrap_err()
            .message(),
        "invalid tool effect: path must be a list of strings"
    );
}

#[test]
fn policies_narrow_by_kind_and_by_signal_type() {
    let (kept, denied) = EffectPolicy::deny_all().filter(all_effects());
    assert!(kept.is_empty());
    assert_eq!(denied.len(), 13);
    let policy = EffectPolicy::default()
        .deny(EffectKind::ReplaceState)
        .emit_types(["app.other."]);
    let (kept, denied) = policy.filter(all_effects());
    assert_eq!(kept.len(), 6);
    assert_eq!(
        denied,
        [
            "replace_state",
            "emit",
            "stop",
            "spawn_agent",
            "cron",
            "run_instruction",
            "emit"
        ]
    );
    assert!(policy.allows(EffectKind::Schedule));
    assert!(!policy.allows(EffectKind::ReplaceState));
}

#[tokio::test(start_paused = true)]
async fn the_runtime_applies_its_effect_policy_to_tool_results() {
    let noisy = jido::action_fn("noisy", |_: Value, ctx: Context| async move {
        ctx.push_effect(StateOp::set_path(["seen"], json!(true)));
        ctx.push_effect(Directive::emit(Signal::new("app.note", json!({}))));
        ctx.push_effect(Directive::emit(Signal::new("other.note", json!({}))));
        Err::<Value, _>(Error::execution("half done").with_retry(false))
    });
    let ai = AiRuntime::new()
        .tools(ToolSet::new().with(noisy).unwrap())
        .effect_policy(
            EffectPolicy::default()
                .deny(EffectKind::SetPath)
                .emit_types(["app."]),
        );
    let (jido, agent, mut rx) = start(&ai, "tools-2", |_| {
        vec![ToolExec::new("tc_1", "noisy", json!({})).into()]
    })
    .await;
    agent.cast(Signal::new("go", json!({}))).unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    let result = &got[1].1["result"];
    // The effects of a failed call travel with its error.
    assert_eq!(result["status"], "error");
    assert_eq!(result["reason"]["message"], "half done");
    let effects = result["effects"].as_array().unwrap();
    assert_eq!(effects.len(), 1);
    assert_eq!(effects[0]["op"], "emit");
    assert_eq!(effects[0]["signal"]["type"], "app.note");
    let envelope: ResultEnvelope = serde_json::from_value(result.clone()).unwrap();
    let decoded = envelope.decode_effects().unwrap();
    assert!(
        matches!(&decoded[..], [Effect::Directive(Directive::Emit { signal, dispatch: None })] if signal.ty() == "app.note")
    );
    jido.shutdown().await;
}

// ---------------------------------------------------------------------------
// Envelopes

#[test]
fn tool_content_is_what_the_model_reads() {
    let ok = ResultEnvelope::ok(json!({"product": 6, "password": "hunter2"}));
    assert_eq!(
        ok.tool_content(),
        r#"{"ok":true,"result":{"product":6,"password":"[REDACTED]"}}"#
    );
    let err = ResultEnvelope::error(
        &Error::execution("card declined")
            .with_detail("card_token", "tok_1")
            .with_retry(false),
    );
    assert_eq!(
        err.tool_content(),
        r#"{"ok":false,"error":{"type":"execution_error","message":"card declined","details":{"card_token":"[REDACTED]","retry":false},"retryable":false}}"#
    );
    // Bounded: long strings cut at 16 384 characters, at most 100 items.
    let long = ResultEnvelope::ok(
        json!({"text": "a".repeat(20_000), "list": (0..150).collect::<Vec<_>>()}),
    );
    let content: Value = serde_json::from_str(&long.tool_content()).unwrap();
    let text = content["result"]["text"].as_str().unwrap();
    assert_eq!(text.len(), 16_384 + "...(truncated)".len());
    assert_eq!(content["result"]["list"].as_array().unwrap().len(), 101);
    assert_eq!(content["result"]["list"][100], "...(50 more)");
    // Still too big as a whole: the result's JSON text, cut.
    let huge = ResultEnvelope::ok(Value::Array(
        (0..100).map(|_| json!("b".repeat(16_000))).collect(),
    ));
    let content = huge.tool_content();
    assert!(content.len() <= MAX_TOOL_CONTENT_BYTES);
    let content: Value = serde_json::from_str(&content).unwrap();
    assert_eq!(content["ok"], true);
    assert!(content["result"].as_str().unwrap().starts_with("[\"bbbb"));
    assert!(
        content["result"]
            .as_str()
            .unwrap()
            .ends_with("...(truncated)")
    );
}

#[test]
fn envelopes_that_arrive_as_data_are_normalised() {
    let cases = [
        (
            json!({"type": "rate_limited", "message": "slow down", "details": {"secret": "s"}}),
            json!({"type": "rate_limited", "message": "slow down", "details": {"secret": "[REDACTED]"}, "retryable": true}),
        ),
        (
            json!({"code": "quota", "message": "over", "retryable?": true, "details": "raw"}),
            json!({"type": "quota", "message": "over", "details": {"details": "raw"}, "retryable": true}),
        ),
        (
            json!({"message": "plain", "hint": 1}),
            json!({"type": "execution_error", "message": "plain", "details": {"hint": 1}, "retryable": false}),
        ),
        (
            json!("just text"),
            json!({"type": "execution_error", "message": "just text", "details": {}, "retryable": false}),
        ),
        (
            json!([1, 2]),
            json!({"type": "execution_error", "message": "tool execution failed", "details": {"reason": [1, 2]}, "retryable": false}),
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(
            ErrorEnvelope::normalize(&input, "execution_error", "tool execution failed").to_value(),
            expected,
            "{input}"
        );
    }
    let env = ErrorEnvelope::from(&Error::timeout("slow"));
    assert_eq!(env.to_value(), Error::timeout("slow").to_envelope());

    let legacy = ResultEnvelope::normalize(
        &json!({"status": "ok", "result": 1, "effects": {"op": "delete_keys", "keys": ["a"]}}),
        "execution_error",
        "tool execution failed",
    );
    assert_eq!(
        legacy.to_value(),
        json!({"status": "ok", "result": 1, "effects": [{"op": "delete_keys", "keys": ["a"]}]})
    );
    let legacy = ResultEnvelope::normalize(
        &json!({"status": "error", "reason": "nope"}),
        "execution_error",
        "tool execution failed",
    );
    assert_eq!(
        legacy.to_value(),
        json!({"status": "error", "reason": {"type": "execution_error", "message": "nope", "details": {}, "retryable": false}, "effects": []})
    );
    assert_eq!(
        ResultEnvelope::normalize(&json!(42), "execution_error", "x").to_value(),
        json!({"status": "error", "reason": {"type": "invalid_result", "message": "invalid result envelope",
               "details": {"result": 42}, "retryable": false}, "effects": []})
    );
}
