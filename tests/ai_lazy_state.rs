//! `__strategy__` of a request strategy is built from the typed machine
//! when the state is read: whoever reads it, whenever (after every signal,
//! once at the end, through a checkpoint and a restore), sees the same
//! JSON, byte for byte.
#![cfg(feature = "ai")]

use jido::ai::envelope::ResultEnvelope;
use jido::ai::react::machine::Turn;
use jido::ai::react::{ReAct, commands};
use jido::ai::signals::ToolResultData;
use jido::ai::{ToolCall, Usage};
use jido::prelude::*;
use jido::state::StateValue;
use jido::strategy::Command;
use serde_json::{Value, json};

struct Bot(ReAct);

impl Agent for Bot {
    const NAME: &'static str = "lazy_bot";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(self.0.clone())
    }
}

fn turn_with_tool(call: &str) -> Turn {
    Turn::tool_calls(vec![ToolCall {
        id: call.into(),
        name: "multiply".into(),
        arguments: json!({"a": 6, "b": 7}).into(),
    }])
    .with_usage(Usage {
        input_tokens: 5,
        output_tokens: 2,
        total_tokens: 7,
    })
}

/// Two requests of two turns each (a tool call, then the answer): the
/// commands in order.
fn script() -> Vec<Command> {
    let tool_result = |call: &str| {
        let data = ToolResultData {
            call_id: call.into(),
            tool_name: "multiply".into(),
            result: ResultEnvelope::ok(json!({"product": 42})),
            metadata: Default::default(),
        };
        Command::strategy(commands::TOOL_RESULT, serde_json::to_value(data).unwrap())
    };
    let llm = |call: &str, turn: Turn| {
        Command::strategy(
            commands::LLM_RESULT,
            ReAct::llm_response_payload(call, Ok(turn)),
        )
    };
    vec![
        ReAct::query_command("6*7?", Some("r1")),
        llm("call_r1_1", turn_with_tool("t1")),
        tool_result("t1"),
        llm("call_r1_2", Turn::answer("42")),
        ReAct::query_command("and 7*6?", Some("r2")),
        llm("call_r2_3", turn_with_tool("t2")),
        tool_result("t2"),
        llm("call_r2_4", Turn::answer("42 again")),
    ]
}

fn agent() -> AgentState {
    AgentState::new(Bot(ReAct::new()), AgentOptions::new().id("lazy-1"))
}

fn json_of(agent: &AgentState) -> String {
    serde_json::to_string(agent.state()).unwrap()
}

#[tokio::test]
async fn the_json_is_the_same_whenever_it_is_read() {
    // Read after every signal (as a checkpoint after each would), after
    // every other one, and only at the end.
    let (mut every, mut other, mut end) = (agent(), agent(), agent());
    let mut seen = Vec::new();
    for (i, command) in script().into_iter().enumerate() {
        every.cmd(command.clone(), ExecOptions::new()).await;
        other.cmd(command.clone(), ExecOptions::new()).await;
        end.cmd(command, ExecOptions::new()).await;
        seen.push(json_of(&every));
        if i % 2 == 1 {
            assert_eq!(json_of(&other), json_of(&every));
        }
        // The conversation is the machine's, message for message.
        let machine = ReAct::machine_of(&every).unwrap();
        let conversation = &every.state()["__strategy__"]["conversation"];
        assert_eq!(
            conversation.as_array().unwrap().len(),
            machine.conversation.len()
        );
        assert_eq!(
            conversation.to_json(),
            serde_json::to_value(machine.conversation.messages()).unwrap()
        );
    }
    // What `await_completion` reads (a request's status and result) is
    // read without building the JSON of the machine.
    let st = end.state().get("__strategy__").unwrap();
    assert_eq!(st["requests"]["r2"]["status"], "completed");
    assert_eq!(st["requests"]["r2"]["result"], "42 again");
    assert_eq!(st["requests"]["r1"]["status"], "completed");
    let StateValue::Lazy(node) = st else {
        panic!("__strategy__ is not a lazy node: {st:?}")
    };
    assert!(node.built().is_none());
    assert_eq!(json_of(&end), json_of(&every));
    assert_eq!(json_of(&other), json_of(&every));

    // What it is, exactly (keys in the order they were first written).
    let st: Value = serde_json::from_str(seen.last().unwrap()).unwrap();
    let st = &st["__strategy__"];
    assert_eq!(
        st.as_object().unwrap().keys().collect::<Vec<_>>(),
        [
            "module",
            "status",
            "iteration",
            "request_id",
            "llm_call_id",
            "call_seq",
            "result",
            "termination_reason",
            "usage",
            "output",
            "repaired",
            "conversation",
            "tool_calls",
            "rev",
            "requests"
        ]
    );
    assert_eq!(st["module"], "react");
    assert_eq!(st["status"], "completed");
    assert_eq!(st["rev"], 9); // init, then four commits per request
    assert_eq!(st["call_seq"], 4);
    assert_eq!(st["tool_calls"], json!([]));
    assert_eq!(
        st["conversation"],
        json!([
            {"role": "user", "content": "6*7?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "t1", "name": "multiply", "arguments": {"a": 6, "b": 7}}]},
            {"role": "tool", "content": "{\"ok\":true,\"result\":{\"product\":42}}", "tool_call_id": "t1", "name": "multiply"},
            {"role": "assistant", "content": "42"},
            {"role": "user", "content": "and 7*6?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "t2", "name": "multiply", "arguments": {"a": 6, "b": 7}}]},
            {"role": "tool", "content": "{\"ok\":true,\"result\":{\"product\":42}}", "tool_call_id": "t2", "name": "multiply"},
            {"role": "assistant", "content": "42 again"},
        ])
    );
    assert_eq!(
        st["requests"]["r2"],
        json!({"query": "and 7*6?", "status": "completed", "termination_reason": "final_answer",
               "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
               "result": "42 again"})
    );
}

#[tokio::test]
async fn a_state_kept_unread_shows_what_it_was_when_taken() {
    // A commit changes the node it published in place when nothing else
    // holds it (the request record after the machine's commit, the next
    // command's commit): a clone of the state taken in between, read
    // only later, must still show the state of its moment.
    let (mut read, mut kept) = (agent(), agent());
    let mut seen = Vec::new();
    let mut taken = Vec::new();
    for command in script() {
        read.cmd(command.clone(), ExecOptions::new()).await;
        kept.cmd(command, ExecOptions::new()).await;
        seen.push(json_of(&read));
        taken.push(kept.state().clone());
    }
    for (i, (state, expected)) in taken.iter().zip(&seen).enumerate() {
        assert_eq!(
            &serde_json::to_string(state).unwrap(),
            expected,
            "state taken after command {i}"
        );
    }
    assert_eq!(json_of(&kept), *seen.last().unwrap());
}

#[tokio::test]
async fn ignored_and_rejected_signals_leave_the_unread_state_as_it_was() {
    // A busy query (rejected) and a stale model answer (ignored) between
    // the commands: the machine is lent to the transition and given back
    // without a commit; read only at the end or after every signal, the
    // JSON is the same and the revision did not move.
    let stale = Command::strategy(
        commands::LLM_RESULT,
        ReAct::llm_response_payload("call_r1_99", Ok(Turn::answer("no"))),
    );
    let mut commands = script();
    commands.insert(2, ReAct::query_command("busy?", Some("r9")));
    commands.insert(3, stale);
    let (mut every, mut end, mut settled) = (agent(), agent(), agent());
    let mut revs = Vec::new();
    for (i, command) in commands.into_iter().enumerate() {
        every.cmd(command.clone(), ExecOptions::new()).await;
        end.cmd(command.clone(), ExecOptions::new()).await;
        settled.cmd(command, ExecOptions::new()).await;
        revs.push(every.state()["__strategy__"]["rev"].as_u64().unwrap());
        if i == 2 || i == 3 {
            // Read first right after the rejection, then the ignored answer.
            assert_eq!(json_of(&settled), json_of(&every), "after command {i}");
        }
    }
    assert_eq!(revs, [2, 3, 3, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(json_of(&end), json_of(&every));
    let st = &every.state()["__strategy__"];
    assert!(st["requests"].get("r9").is_none());
    assert_eq!(st["requests"]["r1"]["result"], "42");
}

#[tokio::test]
async fn a_checkpoint_restored_mid_request_continues_to_the_same_json() {
    let commands = script();
    let mut straight = agent();
    for command in commands.clone() {
        straight.cmd(command, ExecOptions::new()).await;
    }
    // Checkpointed after each signal and restored from it before the next.
    let mut restored = agent();
    for command in commands {
        let cp = restored.checkpoint();
        restored = AgentState::restore(Bot(ReAct::new()), &cp).unwrap();
        restored.cmd(command, ExecOptions::new()).await;
    }
    assert_eq!(json_of(&restored), json_of(&straight));
}

#[tokio::test]
async fn an_outside_write_is_read_back_and_kept() {
    let mut agent = agent();
    let commands = script();
    agent.cmd(commands[0].clone(), ExecOptions::new()).await;
    // A state op (as a tool's effect would) writes beside the machine.
    agent.apply_state_op(jido::effect::StateOp::set_path(
        ["__strategy__", "note"],
        "kept",
    ));
    assert!(matches!(
        agent.state().get("__strategy__"),
        Some(StateValue::Object(_))
    ));
    // A write to a machine field is what the machine reads next: the
    // answer of call 1 is stale once `llm_call_id` says call 9.
    agent.apply_state_op(jido::effect::StateOp::set_path(
        ["__strategy__", "llm_call_id"],
        "call_r1_9",
    ));
    let d = agent.cmd(commands[1].clone(), ExecOptions::new()).await;
    assert!(d.is_empty());
    assert_eq!(agent.state()["__strategy__"]["status"], "awaiting_llm");
    let turn = Command::strategy(
        commands::LLM_RESULT,
        ReAct::llm_response_payload("call_r1_9", Ok(Turn::answer("42"))),
    );
    agent.cmd(turn, ExecOptions::new()).await;
    let st = &agent.state()["__strategy__"];
    assert_eq!(st["status"], "completed");
    assert_eq!(st["note"], "kept");
    assert_eq!(st["requests"]["r1"]["result"], "42");
    assert_eq!(agent.state()["last_answer"], "42");
}
