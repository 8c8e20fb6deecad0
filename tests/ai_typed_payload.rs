//! Typed payloads on signals: the AI runtime's signals carry their data as
//! Rust values, JSON is built only when read; strategies read the value,
//! and fall back to JSON for signals from outside.
#![cfg(feature = "ai")]

use std::time::Duration;

use jido::agent::CmdOptions;
use jido::ai::envelope::ResultEnvelope;
use jido::ai::react::machine::{Status, Turn};
use jido::ai::react::{ReAct, commands};
use jido::ai::signals::{
    ChunkType, Correlation, LlmDeltaData, LlmResponseData, LlmResultData, RequestErrorData,
    SignalMetadata, ToolResultData, ToolStartedData, UsageData,
};
use jido::ai::{ToolCall, ToolSet};
use jido::prelude::*;
use jido::server::{Jido, JidoConfig};
use jido::signal::{Signal, TypedSignal};
use jido::strategy::Command;
use serde::Serialize;
use serde_json::{Value, json};

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Mul {
    a: i64,
    b: i64,
}

/// Multiplies two integers.
#[jido::action]
async fn multiply(p: Mul) -> jido::Result<Value> {
    Ok(json!({"product": p.a * p.b}))
}

struct Bot(ReAct);

impl Agent for Bot {
    const NAME: &'static str = "typed_payload_bot";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(self.0.clone())
    }
}

fn react() -> ReAct {
    ReAct::new()
        .model("m")
        .streaming(false)
        .tools(ToolSet::new().with(Multiply).unwrap())
}

fn meta() -> SignalMetadata {
    Correlation::new()
        .request_id("r1")
        .iteration(1)
        .metadata("tool_execute")
}

/// Checks one payload type: the typed signal's JSON is the serde JSON of
/// the value and the same as the JSON-built signal's; it round-trips
/// through the wire as a JSON signal equal to it.
fn check<T>(data: T, typed: Signal)
where
    T: TypedSignal<Data = T> + Serialize + Clone + PartialEq + std::fmt::Debug + 'static,
{
    assert!(typed.has_typed_payload());
    assert_eq!(typed.payload::<T>(), Some(&data));
    assert_eq!(typed.payload::<String>(), None);
    assert_eq!(typed.ty(), T::TYPE);
    assert_eq!(typed.source(), T::SOURCE);
    assert_eq!(typed.datacontenttype(), Some("application/json"));
    let expected = serde_json::to_value(&data).unwrap();
    assert_eq!(typed.data(), Some(&expected));
    // The same JSON as the signal built the JSON way.
    let built = T::new(data.clone()).unwrap();
    assert_eq!(built.data(), typed.data());
    assert!(!built.has_typed_payload());
    // The wire: the JSON form, read back as JSON data, equal.
    let text = typed.to_json_string();
    let back = Signal::from_json_str(&text).unwrap();
    assert_eq!(back, typed);
    assert_eq!(back.payload::<T>(), None);
    assert_eq!(back.data(), Some(&expected));
    assert_eq!(T::decode(&back).unwrap(), data);
    assert_eq!(T::decode(&typed).unwrap(), data);
    let as_value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(as_value["data"], expected);
    // A clone shares the value; into_data gives the JSON.
    let clone = typed.clone();
    assert_eq!(clone.payload::<T>(), Some(&data));
    assert_eq!(typed.into_data(), Some(expected));
}

#[test]
fn a_typed_signal_is_its_json_form_to_every_json_reader() {
    let turn = ReAct::llm_response_data(
        "call_r1_1",
        Ok(Turn::tool_calls(vec![ToolCall {
            id: "t1".into(),
            name: "multiply".into(),
            arguments: json!({"a": 6, "b": 7}).into(),
        }])),
    );
    check(turn.clone(), turn.clone().into_signal());
    assert_eq!(
        turn.clone().into_signal().data(),
        Some(&ReAct::llm_response_payload(
            "call_r1_1",
            Ok(Turn::tool_calls(vec![ToolCall {
                id: "t1".into(),
                name: "multiply".into(),
                arguments: json!({"a": 6, "b": 7}).into(),
            }]))
        ))
    );
    let error = jido::Error::timeout("llm request timed out");
    let failed = ReAct::llm_response_data("call_r1_2", Err(&error));
    check(failed.clone(), failed.into_signal());

    let result = ToolResultData {
        call_id: "t1".into(),
        tool_name: "multiply".into(),
        result: ResultEnvelope::ok(json!({"product": 42})),
        metadata: meta(),
    };
    check(result.clone(), result.into_signal());
    let started = ToolStartedData {
        call_id: "t1".into(),
        tool_name: "multiply".into(),
        arguments: json!({"a": 6, "b": 7}),
        metadata: meta(),
    };
    check(started.clone(), started.into_signal());
    let usage = UsageData {
        call_id: "call_r1_1".into(),
        model: "m".into(),
        input_tokens: 3,
        output_tokens: 4,
        total_tokens: 7,
        duration_ms: 12,
        metadata: meta(),
    };
    check(usage.clone(), usage.into_signal());
    let delta = LlmDeltaData {
        call_id: "call_r1_1".into(),
        delta: "Hel".into(),
        chunk_type: ChunkType::Content,
        seq: 1,
        metadata: meta(),
    };
    check(delta.clone(), delta.into_signal());
    let rejected = RequestErrorData {
        request_id: "r2".into(),
        reason: "busy".into(),
        message: "agent is busy (status: awaiting_llm)".into(),
    };
    check(rejected.clone(), rejected.into_signal());
}

/// A model answer as the client returns it.
fn response(text: &str, calls: Vec<ToolCall>) -> jido::ai::LlmResponse {
    serde_json::from_value(json!({
        "model": "m",
        "text": text,
        "tool_calls": calls,
        "finish_reason": if calls.is_empty() { "stop" } else { "tool_calls" },
        "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
    }))
    .unwrap()
}

fn llm_result(call_id: &str, resp: jido::ai::LlmResponse) -> LlmResultData {
    LlmResultData {
        call_id: call_id.into(),
        result: Ok(resp),
        model: "m".into(),
        duration_ms: 4,
        metadata: meta(),
    }
}

#[test]
fn the_runtimes_typed_llm_answer_is_the_llm_response_json() {
    let data = llm_result("call_r1_1", response("", vec![call()]));
    let signal = data.clone().into_signal();
    assert_eq!(signal.ty(), "ai.llm.response");
    assert_eq!(signal.source(), "/ai/llm");
    assert_eq!(signal.payload::<LlmResultData>(), Some(&data));
    let expected = json!({
        "call_id": "call_r1_1",
        "result": {"status": "ok", "result": {
            "type": "tool_calls", "text": "", "thinking_content": null,
            "tool_calls": [{"id": "t1", "name": "multiply", "arguments": {"a": 6, "b": 7}}],
            "finish_reason": "tool_calls", "model": "m",
            "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}
        }, "effects": []},
        "model": "m",
        "duration_ms": 4,
        "metadata": meta(),
    });
    assert_eq!(signal.data(), Some(&expected));
    assert_eq!(
        serde_json::to_value(data.clone().into_data()).unwrap(),
        expected
    );
    let back = Signal::from_json_str(&signal.to_json_string()).unwrap();
    assert_eq!(back, signal);
    assert_eq!(LlmResponseData::decode(&back).unwrap(), data.into_data());

    let error = jido::ai::envelope::ErrorEnvelope::from_error(&jido::Error::timeout("late"));
    let failed = LlmResultData {
        result: Err(error.clone()),
        ..llm_result("call_r1_2", response("x", vec![]))
    };
    let json = failed.clone().into_signal().into_data().unwrap();
    assert_eq!(json["result"]["status"], "error");
    assert_eq!(json["result"]["reason"], error.to_value());
}

#[test]
fn any_serialisable_value_can_be_a_typed_payload() {
    #[derive(Serialize, Debug, PartialEq)]
    struct Placed {
        total: u32,
        items: Vec<&'static str>,
    }
    let s = Signal::builder("order.placed")
        .source("/shop")
        .subject("o-1")
        .payload(Placed {
            total: 12,
            items: vec!["a"],
        })
        .build()
        .unwrap();
    assert_eq!(s.payload::<Placed>().unwrap().total, 12);
    assert_eq!(s.data(), Some(&json!({"total": 12, "items": ["a"]})));
    let same = Signal::builder("order.placed")
        .source("/shop")
        .subject("o-1")
        .id(s.id())
        .time_rfc3339(s.time().unwrap())
        .data(json!({"total": 12, "items": ["a"]}))
        .build()
        .unwrap();
    assert_eq!(s, same);
    assert_eq!(s.to_json_string(), same.to_json_string());
    // A typed signal is rebuilt through its builder with its payload.
    let renamed = s.to_builder().ty("order.booked").build().unwrap();
    assert_eq!(renamed.payload::<Placed>().unwrap().items, vec!["a"]);
    assert_eq!(
        Signal::typed("tick", 5u8).data_as::<u8>().unwrap(),
        5,
        "data_as reads the JSON form"
    );
}

fn call() -> ToolCall {
    ToolCall {
        id: "t1".into(),
        name: "multiply".into(),
        arguments: json!({"a": 6, "b": 7}).into(),
    }
}

fn tool_result(call_id: &str) -> ToolResultData {
    ToolResultData {
        call_id: call_id.into(),
        tool_name: "multiply".into(),
        result: ResultEnvelope::ok(json!({"product": 42})),
        metadata: Default::default(),
    }
}

/// Feeds `signal` the way the runtime does for a typed route: the
/// command's params `null`, the signal in the context.
async fn feed_typed(agent: &mut AgentState, command: &str, signal: Signal) -> Vec<Directive> {
    agent
        .cmd(
            Command::strategy(command, Value::Null),
            CmdOptions::new().signal(signal),
        )
        .await
}

/// The whole request driven with typed signals, or with JSON commands.
async fn drive(typed: bool) -> AgentState {
    let mut agent = AgentState::new(Bot(react()), AgentOptions::new().id("a1"));
    agent
        .cmd(ReAct::query_command("6*7?", Some("r1")), ExecOptions::new())
        .await;
    // The runtime's typed answers (LlmResultData) and a user-built typed
    // LlmResponseData both read as their JSON does.
    let turn1 = llm_result("call_r1_1", response("", vec![call()])).into_signal();
    let turn2 = ReAct::llm_response_data(
        "call_r1_2",
        Ok(Turn::answer("42").with_usage(jido::ai::Usage {
            input_tokens: 9,
            output_tokens: 1,
            total_tokens: 10,
        })),
    );
    for (command, data) in [
        (commands::LLM_RESULT, turn1),
        (commands::TOOL_RESULT, tool_result("t1").into_signal()),
        (commands::LLM_RESULT, turn2.into_signal()),
    ] {
        let d = if typed {
            feed_typed(&mut agent, command, data).await
        } else {
            let params = data.into_data().unwrap();
            agent
                .cmd(Command::strategy(command, params), ExecOptions::new())
                .await
        };
        assert!(d.iter().all(|d| !d.kind().contains("error")), "{d:?}");
    }
    agent
}

#[tokio::test]
async fn react_reads_typed_payloads_and_json_alike() {
    let typed = drive(true).await;
    let json = drive(false).await;
    assert_eq!(typed.state()["status"], "completed");
    assert_eq!(typed.state()["last_answer"], "42");
    assert_eq!(typed.state(), json.state());
    // Usage summed over both typed turns.
    assert_eq!(
        typed.state()["__strategy__"]["requests"]["r1"]["usage"],
        json!({"input_tokens": 14, "output_tokens": 3, "total_tokens": 17})
    );
    let conversation = &typed.state()["__strategy__"]["conversation"];
    assert_eq!(conversation.as_array().unwrap().len(), 4);
    assert_eq!(
        conversation[2],
        json!({"role": "tool", "content": "{\"ok\":true,\"result\":{\"product\":42}}",
               "tool_call_id": "t1", "name": "multiply"})
    );
}

#[tokio::test]
async fn a_typed_signal_of_another_type_is_not_read_as_the_payload() {
    // The command's params are null and the context's signal is not an
    // ai.tool.result: the strategy reports a bad payload, it does not
    // take the other signal's value.
    let mut agent = AgentState::new(Bot(react()), AgentOptions::new().id("a1"));
    agent
        .cmd(ReAct::query_command("6*7?", Some("r1")), ExecOptions::new())
        .await;
    let wrong = ReAct::llm_response_data("call_r1_1", Ok(Turn::answer("42"))).into_signal();
    let d = feed_typed(&mut agent, commands::TOOL_RESULT, wrong).await;
    assert_eq!(d.len(), 1);
    let Directive::Error { error, .. } = &d[0] else {
        panic!("{d:?}")
    };
    assert_eq!(error.kind(), jido::ErrorKind::Validation);
    assert!(
        error
            .message()
            .starts_with("invalid react_tool_result payload:"),
        "{}",
        error.message()
    );
    assert_eq!(
        agent.state()["__strategy__"]["status"],
        Status::AwaitingLlm.as_str()
    );
}

#[tokio::test]
async fn a_checkpoint_mid_request_resumes_with_typed_signals() {
    let mut agent = AgentState::new(Bot(react()), AgentOptions::new().id("a1"));
    agent
        .cmd(ReAct::query_command("6*7?", Some("r1")), ExecOptions::new())
        .await;
    let turn1 = ReAct::llm_response_data("call_r1_1", Ok(Turn::tool_calls(vec![call()])));
    let d = feed_typed(&mut agent, commands::LLM_RESULT, turn1.into_signal()).await;
    assert_eq!(d[0].kind(), "ai.tool_exec");
    let checkpoint = agent.checkpoint();
    drop(agent);

    let mut restored = AgentState::restore(Bot(react()), &checkpoint).unwrap();
    let m = ReAct::machine_of(&restored).unwrap();
    assert_eq!((m.status, m.iteration), (Status::AwaitingTool, 1));
    let d = feed_typed(
        &mut restored,
        commands::TOOL_RESULT,
        tool_result("t1").into_signal(),
    )
    .await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].kind(), "ai.llm_generate");
    let turn2 = ReAct::llm_response_data("call_r1_2", Ok(Turn::answer("42")));
    feed_typed(&mut restored, commands::LLM_RESULT, turn2.into_signal()).await;
    assert_eq!(restored.state()["status"], "completed");
    assert_eq!(restored.state()["last_answer"], "42");
    assert_eq!(
        restored.state()["__strategy__"]["requests"]["r1"]["status"],
        "completed"
    );
    assert_eq!(
        restored.state()["__strategy__"]["conversation"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
}

#[tokio::test(start_paused = true)]
async fn outside_json_signals_drive_react_through_the_runtime() {
    // No AI runtime: nothing answers the directives but the JSON signals
    // cast from outside (as a network peer or a replay would send them).
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(
            AgentState::new(Bot(react()), AgentOptions::new().id("outside_json")),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    agent.cast(ReAct::query("6*7?", Some("r1"))).unwrap();
    let wire = |ty: &str, data: Value| {
        let s = Signal::builder(ty)
            .source("/peer")
            .data(data)
            .build()
            .unwrap();
        Signal::from_json_str(&s.to_json_string()).unwrap()
    };
    let turn1 = ReAct::llm_response_payload("call_r1_1", Ok(Turn::tool_calls(vec![call()])));
    agent.cast(wire("ai.llm.response", turn1)).unwrap();
    let result = serde_json::to_value(tool_result("t1")).unwrap();
    agent.cast(wire("ai.tool.result", result)).unwrap();
    let turn2 = ReAct::llm_response_payload("call_r1_2", Ok(Turn::answer("42")));
    agent.cast(wire("ai.llm.response", turn2)).unwrap();
    let done = tokio::time::timeout(
        Duration::from_secs(60),
        agent.await_completion(ReAct::await_options("r1")),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(done.result, json!("42"));
    let agent_state = agent.state().await.unwrap();
    let state = agent_state.state();
    assert_eq!(state["last_answer"], "42");
    assert_eq!(
        state["__strategy__"]["conversation"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    jido.shutdown().await;
}
