//! The shared request core (`jido::ai::request`) as ReAct uses it: the typed
//! machine in the strategy ext, the JSON mirror under `__strategy__` as the
//! source of truth (restore, replaced state), the request history.
#![cfg(feature = "ai")]

use jido::agent::AgentData;
use jido::ai::react::machine::{Machine, Status, Turn};
use jido::ai::react::{ReAct, commands};
use jido::ai::request::{
    RequestCore, RequestState, RequestStatus, set_bool, set_json, set_str, set_u64,
};
use jido::ai::{ToolCall, ToolSet};
use jido::prelude::*;
use jido::state::StateMap;
use jido::strategy::Command;
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
    const NAME: &'static str = "request_core_bot";
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

fn call() -> ToolCall {
    ToolCall {
        id: "t1".into(),
        name: "multiply".into(),
        arguments: json!({"a": 6, "b": 7}).into(),
    }
}

fn llm(call_id: &str, turn: Turn) -> Command {
    Command::strategy(
        commands::LLM_RESULT,
        ReAct::llm_response_payload(call_id, Ok(turn)),
    )
}

fn tool_result(call_id: &str) -> Command {
    Command::strategy(
        commands::TOOL_RESULT,
        json!({"call_id": call_id, "tool_name": "multiply",
               "result": {"status": "ok", "result": {"product": 42}, "effects": []},
               "metadata": {}}),
    )
}

/// An agent in `awaiting_tool` after one model turn asking for `multiply`.
async fn awaiting_tool() -> AgentState {
    let mut agent = AgentState::new(Bot(react()), AgentOptions::new().id("a1"));
    agent
        .cmd(ReAct::query_command("6*7?", Some("r1")), ExecOptions::new())
        .await;
    agent
        .cmd(
            llm("call_r1_1", Turn::tool_calls(vec![call()])),
            ExecOptions::new(),
        )
        .await;
    assert_eq!(agent.state()["__strategy__"]["status"], "awaiting_tool");
    agent
}

#[tokio::test]
async fn the_mirror_is_the_typed_machine_as_json() {
    let agent = awaiting_tool().await;
    let typed = ReAct::machine_of(&agent).unwrap();
    let from_json = Machine::read(agent.strategy_state().unwrap()).unwrap();
    assert_eq!(typed, from_json);
    assert_eq!(typed.status, Status::AwaitingTool);
    assert_eq!(typed.conversation.len(), 2);
    // One revision per change: init, the query, the model's turn.
    assert_eq!(agent.state()["__strategy__"]["rev"], 3);
}

/// A tool result that does not end the turn changes the machine: it is
/// committed to the mirror like any other change, so a checkpoint taken
/// between two tool results keeps the first.
#[tokio::test]
async fn a_tool_result_before_the_last_reaches_the_mirror() {
    let mut agent = AgentState::new(Bot(react()), AgentOptions::new().id("a1"));
    agent
        .cmd(
            ReAct::query_command("6*7 and 7*6?", Some("r1")),
            ExecOptions::new(),
        )
        .await;
    let second = ToolCall {
        id: "t2".into(),
        ..call()
    };
    agent
        .cmd(
            llm("call_r1_1", Turn::tool_calls(vec![call(), second])),
            ExecOptions::new(),
        )
        .await;
    let d = agent.cmd(tool_result("t1"), ExecOptions::new()).await;
    assert!(d.is_empty());
    let typed = ReAct::machine_of(&agent).unwrap();
    assert_eq!(
        Machine::read(agent.strategy_state().unwrap()).unwrap(),
        typed
    );
    assert_eq!(typed.tool_calls[0].state.name(), "done");
    // init, the query, the model's turn, the first tool result.
    assert_eq!(agent.state()["__strategy__"]["rev"], 4);

    // A checkpoint (the JSON state only) now: the restored agent ends the
    // round on `t2`, with both results in the conversation.
    let checkpoint = agent.state().to_json();
    let options = AgentOptions::new().id("a1").state(&checkpoint);
    let mut restored = AgentState::new(Bot(react()), options);
    let d = restored.cmd(tool_result("t2"), ExecOptions::new()).await;
    let kinds: Vec<&str> = d.iter().map(|d| d.kind()).collect();
    assert_eq!(kinds, ["ai.llm_generate"]);
    let m = ReAct::machine_of(&restored).unwrap();
    assert_eq!(
        (m.status, m.iteration, m.conversation.len()),
        (Status::AwaitingLlm, 2, 4)
    );
}

#[tokio::test]
async fn a_restored_agent_rebuilds_the_machine_from_json() {
    let agent = awaiting_tool().await;
    // A checkpoint holds the JSON state only: a new agent from it has no ext.
    let json = Value::from(agent.state().clone());
    let mut restored = AgentState::new(
        Bot(react()),
        AgentOptions::new()
            .id("a1")
            .state(json.as_object().unwrap()),
    );
    let d = restored.cmd(tool_result("t1"), ExecOptions::new()).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].kind(), "ai.llm_generate");
    let m = ReAct::machine_of(&restored).unwrap();
    assert_eq!((m.status, m.iteration), (Status::AwaitingLlm, 2));
    assert_eq!(m.conversation.len(), 3);
    restored
        .cmd(llm("call_r1_2", Turn::answer("42")), ExecOptions::new())
        .await;
    assert_eq!(restored.state()["status"], "completed");
    assert_eq!(restored.state()["last_answer"], "42");
    assert_eq!(
        RequestCore::request_status(&restored, "r1"),
        Some(RequestStatus::Completed)
    );
}

#[tokio::test]
async fn a_replaced_state_wins_over_the_typed_machine() {
    let mut agent = AgentState::new(Bot(react()), AgentOptions::new().id("a1"));
    agent
        .cmd(ReAct::query_command("6*7?", Some("r1")), ExecOptions::new())
        .await;
    let snapshot = agent.state().clone();
    agent
        .cmd(
            llm("call_r1_1", Turn::tool_calls(vec![call()])),
            ExecOptions::new(),
        )
        .await;
    // Back to the snapshot (awaiting the model): the ext holds a newer
    // machine, which must not be used.
    agent.replace_state(snapshot);
    assert_eq!(
        ReAct::machine_of(&agent).unwrap().status,
        Status::AwaitingLlm
    );
    agent
        .cmd(
            llm("call_r1_1", Turn::answer("forty-two")),
            ExecOptions::new(),
        )
        .await;
    assert_eq!(agent.state()["status"], "completed");
    assert_eq!(agent.state()["last_answer"], "forty-two");
    assert_eq!(
        agent.state()["__strategy__"]["conversation"],
        json!([{"role": "user", "content": "6*7?"},
               {"role": "assistant", "content": "forty-two"}])
    );
}

/// A `multiply` result whose tool pushed `effects` (their JSON form).
fn tool_result_with(call_id: &str, effects: Value) -> Command {
    Command::strategy(
        commands::TOOL_RESULT,
        json!({"call_id": call_id, "tool_name": "multiply",
               "result": {"status": "ok", "result": {"product": 42}, "effects": effects},
               "metadata": {}}),
    )
}

#[tokio::test]
async fn a_tool_effect_writing_the_strategy_state_reaches_the_machine() {
    let mut agent = awaiting_tool().await;
    // The tool adds a note to the conversation through `__strategy__`.
    let note = json!({"op": "append", "path": ["__strategy__", "conversation"],
                      "value": {"role": "user", "content": "note from the tool"}});
    let d = agent
        .cmd(tool_result_with("t1", json!([note])), ExecOptions::new())
        .await;
    // The next model call sees the note after the tool's answer.
    let generate = match &d[..] {
        [Directive::Custom(c)] => c.downcast_ref::<jido::ai::LlmGenerate>().unwrap(),
        other => panic!("one LlmGenerate expected, got {other:?}"),
    };
    let roles: Vec<_> = generate
        .context
        .iter()
        .map(|m| (format!("{:?}", m.role), m.content.clone()))
        .collect();
    assert_eq!(roles.len(), 4);
    assert_eq!(
        roles[3],
        ("User".to_owned(), "note from the tool".to_owned())
    );
    let m = ReAct::machine_of(&agent).unwrap();
    assert_eq!(m.conversation.len(), 4);
    assert_eq!(m.status, Status::AwaitingLlm);
    // The typed machine and the JSON agree, and the next commit keeps the note.
    agent
        .cmd(llm("call_r1_2", Turn::answer("42")), ExecOptions::new())
        .await;
    let conversation = &agent.state()["__strategy__"]["conversation"];
    assert_eq!(conversation[3]["content"], "note from the tool");
    assert_eq!(
        conversation[4],
        json!({"role": "assistant", "content": "42"})
    );
    assert_eq!(agent.state()["last_answer"], "42");
    assert_eq!(
        ReAct::machine_of(&agent).unwrap(),
        Machine::read(agent.strategy_state().unwrap()).unwrap()
    );
}

#[tokio::test]
async fn a_stale_signal_changes_nothing() {
    let mut agent = awaiting_tool().await;
    let before = agent.state().clone();
    let d = agent.cmd(tool_result("t9"), ExecOptions::new()).await;
    assert!(d.is_empty());
    let d = agent
        .cmd(llm("call_r1_1", Turn::answer("late")), ExecOptions::new())
        .await;
    assert!(d.is_empty());
    assert_eq!(agent.state(), &before);
}

#[tokio::test]
async fn the_history_keeps_the_latest_requests() {
    let mut agent = AgentState::new(
        Bot(react().request_history(2)),
        AgentOptions::new().id("a1"),
    );
    for (i, id) in ["q1", "q2", "q3"].into_iter().enumerate() {
        agent
            .cmd(ReAct::query_command("hi", Some(id)), ExecOptions::new())
            .await;
        let call_id = format!("call_{id}_{}", i + 1);
        agent
            .cmd(llm(&call_id, Turn::answer(id)), ExecOptions::new())
            .await;
    }
    let requests = agent.state()["__strategy__"]["requests"].clone();
    let ids: Vec<&str> = requests.as_object().unwrap().keys().collect();
    assert_eq!(ids, ["q2", "q3"]);
    assert_eq!(RequestCore::request_status(&agent, "q1"), None);
    assert_eq!(requests["q3"]["result"], "q3");
}

#[tokio::test]
async fn the_default_history_is_the_latest_hundred() {
    let mut agent = AgentState::new(Bot(react()), AgentOptions::new().id("a1"));
    for i in 0..101 {
        let id = format!("q{i}");
        agent
            .cmd(ReAct::query_command("hi", Some(&id)), ExecOptions::new())
            .await;
        let call_id = format!("call_{id}_{}", i + 1);
        agent
            .cmd(llm(&call_id, Turn::answer("ok")), ExecOptions::new())
            .await;
    }
    let requests = agent.state()["__strategy__"]["requests"].clone();
    let ids: Vec<&str> = requests.as_object().unwrap().keys().collect();
    assert_eq!(ids.len(), 100);
    assert_eq!(ids[0], "q1");
    assert_eq!(ids[99], "q100");
    assert_eq!(RequestCore::request_status(&agent, "q0"), None);
    assert_eq!(
        RequestCore::request_status(&agent, "q100"),
        Some(RequestStatus::Completed)
    );
}

// ------------------------------------------------------ the core alone

#[derive(Clone, Default, PartialEq, Debug)]
struct Counter {
    running: Option<String>,
    n: u64,
    done: bool,
    last: Value,
}

impl RequestState for Counter {
    fn read(from: &StateMap) -> Option<Self> {
        Some(Counter {
            running: from.get("running")?.as_str().map(str::to_owned),
            n: from.get("n")?.as_u64()?,
            done: from.get("done")?.as_bool()?,
            last: from
                .get("last")
                .map_or(Value::Null, |v| Value::from(v.clone())),
        })
    }
    fn write(&self, into: &mut StateMap) {
        set_str(into, "running", self.running.as_deref());
        set_u64(into, "n", self.n);
        set_bool(into, "done", self.done);
        set_json(into, "last", &self.last);
    }
    fn active_request(&self) -> Option<&str> {
        self.running.as_deref()
    }
}

#[test]
fn commit_writes_only_what_changed_and_bumps_the_revision() {
    let core = RequestCore::new("counter");
    let mut agent = AgentData::new("c1", StateMap::new());
    core.init::<Counter>(&mut agent);
    assert_eq!(
        Value::from(agent.state().clone()),
        json!({"__strategy__": {"module": "counter", "running": null, "n": 0,
                                "done": false, "last": null, "rev": 1}})
    );
    let before = agent.strategy_state().unwrap().get("last").cloned();
    core.state::<Counter>(&mut agent).n = 5;
    core.commit::<Counter>(&mut agent);
    let st = agent.strategy_state().unwrap();
    assert_eq!(st["n"], 5);
    assert_eq!(st["rev"], 2);
    // An unchanged object value is the same shared value, not a copy.
    core.state::<Counter>(&mut agent).last = json!({"k": [1, 2]});
    core.commit::<Counter>(&mut agent);
    let first = agent.strategy_state().unwrap()["last"].clone();
    core.state::<Counter>(&mut agent).n = 6;
    core.commit::<Counter>(&mut agent);
    let second = &agent.strategy_state().unwrap()["last"];
    assert!(
        matches!((&first, second), (jido::state::StateValue::Object(a), jido::state::StateValue::Object(b)) if a.ptr_eq(b))
    );
    assert!(before.is_some());
    // peek reads the typed state without changing anything.
    let peeked = core.peek::<Counter>(&agent).unwrap().into_owned();
    assert_eq!(peeked.n, 6);
    // Another strategy's state: no typed state.
    assert!(RequestCore::new("other").peek::<Counter>(&agent).is_none());
}

#[test]
fn a_write_to_the_strategy_state_outside_the_core_is_read_back() {
    let core = RequestCore::new("counter");
    let mut agent = AgentData::new("c1", StateMap::new());
    core.init::<Counter>(&mut agent);
    core.state::<Counter>(&mut agent).n = 3;
    core.commit::<Counter>(&mut agent);
    // An effect or a state op writes a field of the mirror; the revision
    // is not touched.
    agent.apply_state_op(jido::effect::StateOp::set_path(
        ["__strategy__", "n"],
        json!(9),
    ));
    assert_eq!(agent.strategy_state().unwrap()["rev"], 2);
    assert_eq!(core.state::<Counter>(&mut agent).n, 9);
    assert_eq!(core.peek::<Counter>(&agent).unwrap().n, 9);
    core.state::<Counter>(&mut agent).done = true;
    core.commit::<Counter>(&mut agent);
    let st = agent.strategy_state().unwrap();
    assert_eq!(
        (st["n"].as_u64(), st["done"].as_bool()),
        (Some(9), Some(true))
    );
    assert_eq!(st["rev"], 3);
    // A write through `state_mut` is seen the same way.
    agent
        .state_mut()
        .object_mut("__strategy__")
        .insert("running", "r7");
    assert_eq!(
        core.state::<Counter>(&mut agent).running.as_deref(),
        Some("r7")
    );
    // The core's own request records keep the typed state (an uncommitted
    // change survives them).
    core.state::<Counter>(&mut agent).n = 10;
    let mut out = Vec::new();
    core.start(&mut agent, "r7", "q", &mut out);
    assert_eq!(core.state::<Counter>(&mut agent).n, 10);
    core.commit::<Counter>(&mut agent);
    assert_eq!(agent.strategy_state().unwrap()["n"], 10);
    assert_eq!(
        agent.strategy_state().unwrap()["requests"]["r7"]["status"],
        "pending"
    );
}

#[test]
fn an_unchanged_strategy_state_stays_the_same_shared_object() {
    // Checkpoint deltas compare top-level values by pointer.
    let core = RequestCore::new("counter");
    let mut agent = AgentData::new("c1", StateMap::new());
    core.init::<Counter>(&mut agent);
    let before = agent.state().clone();
    assert_eq!(core.state::<Counter>(&mut agent).n, 0);
    let _ = core.peek::<Counter>(&agent);
    // `__strategy__` is a lazy node (its JSON built when read): the same
    // node when nothing changed.
    let same = |a: &StateMap, b: &StateMap| match (a.get("__strategy__"), b.get("__strategy__")) {
        (Some(x), Some(y)) => x.ptr_eq(y),
        _ => false,
    };
    assert!(same(&before, agent.state()));
    core.state::<Counter>(&mut agent).n = 1;
    core.commit::<Counter>(&mut agent);
    assert!(!same(&before, agent.state()));
    assert_eq!(before["__strategy__"]["n"], 0);
    // Reading it (building its JSON) keeps it the same node.
    let read = agent.state().clone();
    assert_eq!(agent.state()["__strategy__"]["n"], 1);
    assert!(same(&read, agent.state()));
}

#[test]
fn cancel_rules() {
    assert!(RequestCore::cancel_matches(Some("r1"), None));
    assert!(RequestCore::cancel_matches(Some("r1"), Some("r1")));
    assert!(!RequestCore::cancel_matches(Some("r1"), Some("r2")));
    assert!(!RequestCore::cancel_matches(None, None));
    assert_eq!(
        RequestCore::cancel_params(&json!({})),
        (None, "user_cancelled".to_owned())
    );
    assert_eq!(
        RequestCore::cancel_params(&json!({"request_id": "r1", "reason": "timeout"})),
        (Some("r1".to_owned()), "timeout".to_owned())
    );
    let (d, error) = RequestCore::cancel("r1", "timeout");
    assert_eq!(d.kind(), "ai.cancel_request");
    assert_eq!(error["type"], "cancelled");
    assert_eq!(error["message"], "request cancelled");
    assert_eq!(error["details"]["reason"], "timeout");
    assert_eq!(error["retryable"], false);
}

#[test]
fn finish_records_usage_and_the_completion_fields() {
    let core = RequestCore::new("counter");
    let mut agent = AgentData::new("c1", StateMap::new());
    let mut out = Vec::new();
    core.start(&mut agent, "r1", "q?", &mut out);
    assert!(out.is_empty()); // no events dispatch
    let usage = jido::ai::Usage {
        input_tokens: 3,
        output_tokens: 4,
        total_tokens: 7,
    };
    core.finish(
        &mut agent,
        "r1",
        Err(json!({"type": "timeout", "message": "m", "details": {}, "retryable": true})),
        "error",
        &usage,
        &mut out,
    );
    assert_eq!(agent.state()["status"], "failed");
    assert_eq!(agent.state()["error"]["type"], "timeout");
    assert_eq!(
        agent.state()["__strategy__"]["requests"]["r1"],
        json!({"query": "q?", "status": "failed", "termination_reason": "error",
               "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
               "error": {"type": "timeout", "message": "m", "details": {}, "retryable": true}})
    );
    let busy = core.busy("r2", "awaiting_llm");
    assert_eq!(busy.kind(), "ai.emit_request_error");
}

// ------------------------------------------------- the request history

/// The ids of `__strategy__.requests`, in order.
fn request_ids(state: &StateMap) -> Vec<String> {
    state["__strategy__"]["requests"]
        .as_object()
        .map(|m| m.keys().map(str::to_owned).collect())
        .unwrap_or_default()
}

fn ok_usage() -> jido::ai::Usage {
    jido::ai::Usage {
        input_tokens: 1,
        output_tokens: 2,
        total_tokens: 3,
    }
}

/// Starts and completes `id` (answer: the id).
fn run(core: &RequestCore, agent: &mut AgentData, id: &str) {
    let mut out = Vec::new();
    core.start(agent, id, &format!("{id}?"), &mut out);
    core.finish(
        agent,
        id,
        Ok(json!(id)),
        "final_answer",
        &ok_usage(),
        &mut out,
    );
}

#[test]
fn the_history_drops_the_oldest_first_and_keeps_the_order() {
    let core = RequestCore::new("counter").history(3);
    let mut agent = AgentData::new("c1", StateMap::new());
    core.init::<Counter>(&mut agent);
    for id in ["r1", "r2", "r3"] {
        run(&core, &mut agent, id);
    }
    assert_eq!(request_ids(agent.state()), ["r1", "r2", "r3"]);
    run(&core, &mut agent, "r4");
    assert_eq!(request_ids(agent.state()), ["r2", "r3", "r4"]);
    // A tracked id started again moves last; nothing is dropped.
    let mut out = Vec::new();
    core.start(&mut agent, "r3", "again?", &mut out);
    assert_eq!(request_ids(agent.state()), ["r2", "r4", "r3"]);
    assert_eq!(
        agent.state()["__strategy__"]["requests"]["r3"],
        json!({"query": "again?", "status": "pending"})
    );
    run(&core, &mut agent, "r5");
    assert_eq!(request_ids(agent.state()), ["r4", "r3", "r5"]);
    assert_eq!(RequestCore::request_status(&agent, "r2"), None);
    assert_eq!(
        RequestCore::request_status(&agent, "r3"),
        Some(RequestStatus::Pending)
    );
    // A rejection is recorded last and trims too.
    core.record_rejection(
        &mut agent,
        &json!({"request_id": "r6", "reason": "invalid_request", "message": "no"}),
    );
    assert_eq!(request_ids(agent.state()), ["r3", "r5", "r6"]);
    assert_eq!(
        agent.state()["__strategy__"]["requests"]["r5"],
        json!({"query": "r5?", "status": "completed", "termination_reason": "final_answer",
               "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
               "result": "r5"})
    );
    assert_eq!(
        agent.state()["__strategy__"]["requests"]["r6"]["error"]["type"],
        "rejected"
    );
}

#[test]
fn a_state_read_between_writes_sees_the_current_records() {
    let core = RequestCore::new("counter").history(2);
    let mut agent = AgentData::new("c1", StateMap::new());
    core.init::<Counter>(&mut agent);
    let mut out = Vec::new();
    core.start(&mut agent, "r1", "q1", &mut out);
    // A full read (the records built), kept while the agent goes on.
    let seen = agent.state().clone();
    assert_eq!(
        Value::from(seen.clone())["__strategy__"]["requests"],
        json!({"r1": {"query": "q1", "status": "pending"}})
    );
    core.finish(
        &mut agent,
        "r1",
        Ok(json!("a1")),
        "final_answer",
        &ok_usage(),
        &mut out,
    );
    assert_eq!(
        agent.state()["__strategy__"]["requests"]["r1"]["status"],
        "completed"
    );
    // A path read (no build), then a full read.
    assert_eq!(
        agent.strategy_state().unwrap()["requests"]["r1"]["result"],
        "a1"
    );
    run(&core, &mut agent, "r2");
    let shown = Value::from(agent.state().clone());
    assert_eq!(
        shown["__strategy__"]["requests"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["r1", "r2"]
    );
    run(&core, &mut agent, "r3");
    assert_eq!(request_ids(agent.state()), ["r2", "r3"]);
    // What was read earlier did not change.
    assert_eq!(
        Value::from(seen)["__strategy__"]["requests"],
        json!({"r1": {"query": "q1", "status": "pending"}})
    );
    // The JSON the state shows is a value like any other.
    assert_eq!(
        serde_json::to_value(agent.state()).unwrap()["__strategy__"]["requests"]["r3"]["result"],
        "r3"
    );
}

#[tokio::test]
async fn a_request_record_is_read_back_after_a_checkpoint() {
    let mut agent = AgentState::new(
        Bot(react().request_history(2)),
        AgentOptions::new().id("a1"),
    );
    for (i, id) in ["q1", "q2"].into_iter().enumerate() {
        agent
            .cmd(ReAct::query_command("hi", Some(id)), ExecOptions::new())
            .await;
        let call_id = format!("call_{id}_{}", i + 1);
        agent
            .cmd(llm(&call_id, Turn::answer(id)), ExecOptions::new())
            .await;
    }
    agent
        .cmd(ReAct::query_command("6*7?", Some("q3")), ExecOptions::new())
        .await;
    // Through text, as a store keeps it.
    let text = serde_json::to_string(&agent.checkpoint()).unwrap();
    let saved: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        request_ids(agent.state()),
        ["q2", "q3"],
        "q1 trimmed before the checkpoint"
    );
    let mut restored = AgentState::restore(Bot(react().request_history(2)), &saved).unwrap();
    assert_eq!(restored.state(), agent.state());
    assert_eq!(
        RequestCore::request_status(&restored, "q2"),
        Some(RequestStatus::Completed)
    );
    assert_eq!(
        RequestCore::request_status(&restored, "q3"),
        Some(RequestStatus::Pending)
    );
    assert_eq!(
        restored.state()["__strategy__"]["requests"]["q2"]["result"],
        "q2"
    );
    // The restored history goes on: q3 finishes in place, q4 drops q2.
    restored
        .cmd(llm("call_q3_3", Turn::answer("42")), ExecOptions::new())
        .await;
    assert_eq!(request_ids(restored.state()), ["q2", "q3"]);
    assert_eq!(
        RequestCore::request_status(&restored, "q3"),
        Some(RequestStatus::Completed)
    );
    restored
        .cmd(ReAct::query_command("hi", Some("q4")), ExecOptions::new())
        .await;
    assert_eq!(request_ids(restored.state()), ["q3", "q4"]);
    assert_eq!(
        restored.state()["__strategy__"]["requests"]["q3"],
        json!({"query": "6*7?", "status": "completed", "termination_reason": "final_answer",
               "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
               "result": "42"})
    );
}

#[test]
fn a_malformed_restored_history_is_replaced_or_kept_as_it_is() {
    let core = RequestCore::new("counter").history(2);
    // `requests` not an object: a new history on the first request.
    let state = json!({"__strategy__": {"module": "counter", "rev": 1, "running": null,
                                         "n": 0, "done": false, "requests": "oops"}});
    let mut agent = AgentData::new("c1", StateMap::from(state.as_object().unwrap()));
    assert_eq!(RequestCore::request_status(&agent, "r1"), None);
    run(&core, &mut agent, "r1");
    assert_eq!(request_ids(agent.state()), ["r1"]);
    // Records that are not objects are shown as they were, and trimmed.
    let state = json!({"__strategy__": {"module": "counter", "rev": 1, "running": null,
                                         "n": 0, "done": false,
                                         "requests": {"a": 5, "b": {"status": "bogus"}}}});
    let mut agent = AgentData::new("c1", StateMap::from(state.as_object().unwrap()));
    assert_eq!(RequestCore::request_status(&agent, "a"), None);
    assert_eq!(RequestCore::request_status(&agent, "b"), None);
    let mut out = Vec::new();
    core.finish(
        &mut agent,
        "a",
        Ok(json!("x")),
        "final_answer",
        &ok_usage(),
        &mut out,
    );
    assert_eq!(
        RequestCore::request_status(&agent, "a"),
        Some(RequestStatus::Completed)
    );
    run(&core, &mut agent, "r1");
    assert_eq!(request_ids(agent.state()), ["b", "r1"]);
    assert_eq!(
        agent.state()["__strategy__"]["requests"]["b"],
        json!({"status": "bogus"})
    );
}

#[test]
fn ten_thousand_requests_keep_the_last_hundred() {
    let core = RequestCore::new("counter").history(100);
    let mut agent = AgentData::new("c1", StateMap::new());
    core.init::<Counter>(&mut agent);
    for i in 0..10_000 {
        run(&core, &mut agent, &format!("q{i}"));
        if i == 5_000 {
            // A full read midway (the records built once).
            assert_eq!(request_ids(agent.state()).len(), 100);
        }
    }
    let ids = request_ids(agent.state());
    let expected: Vec<String> = (9_900..10_000).map(|i| format!("q{i}")).collect();
    assert_eq!(ids, expected);
    assert_eq!(RequestCore::request_status(&agent, "q9899"), None);
    assert_eq!(
        RequestCore::request_status(&agent, "q9900"),
        Some(RequestStatus::Completed)
    );
    assert_eq!(
        agent.state()["__strategy__"]["requests"]["q9999"]["result"],
        "q9999"
    );
}

#[test]
fn ids_started_again_and_again_move_last_and_keep_the_history_small() {
    let core = RequestCore::new("counter").history(3);
    let mut agent = AgentData::new("c1", StateMap::new());
    core.init::<Counter>(&mut agent);
    run(&core, &mut agent, "a");
    run(&core, &mut agent, "b");
    for i in 0..1_000 {
        let id = if i % 2 == 0 { "x" } else { "y" };
        run(&core, &mut agent, id);
        // A clone of the state taken now keeps what it saw.
        if i == 500 {
            let seen = agent.state().clone();
            run(&core, &mut agent, "z");
            assert_eq!(request_ids(&seen), ["b", "y", "x"]);
            assert_eq!(request_ids(agent.state()), ["y", "x", "z"]);
        }
    }
    assert_eq!(request_ids(agent.state()), ["z", "x", "y"]);
    for id in ["x", "y", "z"] {
        assert_eq!(
            RequestCore::request_status(&agent, id),
            Some(RequestStatus::Completed)
        );
    }
    assert_eq!(RequestCore::request_status(&agent, "a"), None);
}
