//! The ReAct state machine alone (pure: no agent, no actor): every
//! transition of its table, busy, stale ids, ordered parallel tools, max
//! iterations, the incomplete-response guard, structured output, cancel.
#![cfg(feature = "ai")]

use jido::ai::envelope::{ErrorEnvelope, ResultEnvelope};
use jido::ai::react::OutputSchema;
use jido::ai::react::machine::{
    Event, MAX_ITERATIONS_ANSWER, Machine, MachineConfig, Status, Step, Termination, ToolCallState,
    Turn,
};
use jido::ai::{FinishReason, Message, Role, ToolCall, Usage};
use jido::state::StateMap;
use serde_json::{Value, json};

fn start(id: &str, q: &str) -> Event {
    Event::Start {
        request_id: id.into(),
        query: q.into(),
        output: None,
    }
}

fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

fn llm(call_id: &str, turn: Turn) -> Event {
    Event::LlmResult {
        call_id: call_id.into(),
        result: Ok(turn),
    }
}

fn tool(call_id: &str, result: Value) -> Event {
    Event::ToolResult {
        call_id: call_id.into(),
        result: ResultEnvelope::ok(result),
    }
}

fn usage(i: u64, o: u64) -> Usage {
    Usage {
        input_tokens: i,
        output_tokens: o,
        total_tokens: i + o,
    }
}

/// The call id of the single `CallLlm` step.
fn llm_call(steps: &[Step]) -> String {
    match steps {
        [.., Step::CallLlm { call_id, .. }] => call_id.clone(),
        other => panic!("expected a CallLlm step, got {other:?}"),
    }
}

fn exec_ids(steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::ExecTool { call, .. } => Some(call.id.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn idle_to_awaiting_llm_on_start() {
    let cfg = MachineConfig::new();
    let mut m = Machine::new();
    let t = m.handle(&cfg, start("r1", "hi"));
    assert!(t.accepted);
    assert_eq!(
        t.steps,
        [Step::CallLlm {
            call_id: "call_r1_1".into(),
            request_id: "r1".into(),
            iteration: 1,
            output: None
        }]
    );
    assert_eq!(m.status, Status::AwaitingLlm);
    assert_eq!(m.iteration, 1);
    assert_eq!(m.request_id.as_deref(), Some("r1"));
    assert_eq!(m.llm_call_id.as_deref(), Some("call_r1_1"));
    assert_eq!(m.conversation.messages(), [Message::user("hi")]);
}

#[test]
fn a_second_request_while_busy_is_rejected_and_changes_nothing() {
    let cfg = MachineConfig::new();
    let mut m = Machine::new();
    let c1 = llm_call(&m.handle(&cfg, start("r1", "first")).steps);
    let before = m.clone();
    let t = m.handle(&cfg, start("r2", "second"));
    assert!(t.accepted);
    assert_eq!(
        t.steps,
        [Step::Reject {
            request_id: "r2".into(),
            reason: "busy".into(),
            message: "agent is busy (status: awaiting_llm)".into()
        }]
    );
    assert_eq!(m, before);

    // Also while tools run.
    m.handle(
        &cfg,
        llm(&c1, Turn::tool_calls(vec![call("t1", "x", json!({}))])),
    );
    assert_eq!(m.status, Status::AwaitingTool);
    let before = m.clone();
    let t = m.handle(&cfg, start("r3", "third"));
    assert!(
        matches!(&t.steps[..], [Step::Reject { reason, message, .. }] if reason == "busy" && message == "agent is busy (status: awaiting_tool)")
    );
    assert_eq!(m, before);
}

#[test]
fn deltas_and_results_of_stale_calls_are_ignored() {
    let cfg = MachineConfig::new();
    let mut m = Machine::new();
    let c1 = llm_call(&m.handle(&cfg, start("r1", "q")).steps);
    assert!(
        m.handle(
            &cfg,
            Event::LlmDelta {
                call_id: c1.clone()
            }
        )
        .accepted
    );
    assert!(
        !m.handle(
            &cfg,
            Event::LlmDelta {
                call_id: "call_old_1".into()
            }
        )
        .accepted
    );
    let before = m.clone();
    let t = m.handle(&cfg, llm("call_old_1", Turn::answer("stale")));
    assert!(!t.accepted && t.steps.is_empty());
    assert_eq!(m, before);
    // A tool result while awaiting the model is out of place.
    assert!(!m.handle(&cfg, tool("t1", json!({}))).accepted);
    assert_eq!(m, before);
}

#[test]
fn tool_calls_start_at_most_the_concurrency_and_results_go_back_in_call_order() {
    let cfg = MachineConfig::new().tool_concurrency(2);
    let mut m = Machine::new();
    let c1 = llm_call(&m.handle(&cfg, start("r1", "q")).steps);
    let calls = vec![
        call("a", "t", json!({"n": 1})),
        call("b", "t", json!({"n": 2})),
        call("c", "t", json!({"n": 3})),
    ];
    // Accepted although the finish reason says the answer was cut.
    let turn = Turn::tool_calls(calls).with_finish_reason(FinishReason::Length);
    let t = m.handle(&cfg, llm(&c1, turn));
    assert_eq!(exec_ids(&t.steps), ["a", "b"]);
    assert_eq!(m.status, Status::AwaitingTool);
    assert_eq!(m.tool_calls[2].state, ToolCallState::Queued);
    match &t.steps[0] {
        Step::ExecTool {
            request_id,
            iteration,
            call,
        } => {
            assert_eq!((request_id.as_str(), *iteration), ("r1", 1));
            assert_eq!(call.arguments, json!({"n": 1}).into());
        }
        other => panic!("{other:?}"),
    }

    // b finishes first: c starts in its slot.
    let t = m.handle(&cfg, tool("b", json!({"v": "B"})));
    assert_eq!(exec_ids(&t.steps), ["c"]);
    // Unknown ids and a queued or finished call's id are ignored.
    assert!(!m.handle(&cfg, tool("zz", json!({}))).accepted);
    assert!(!m.handle(&cfg, tool("b", json!({"v": "again"}))).accepted);
    let t = m.handle(&cfg, tool("c", json!({"v": "C"})));
    assert!(t.steps.is_empty());
    assert_eq!(m.status, Status::AwaitingTool);
    // The last one: results appended in call order, next turn.
    let t = m.handle(&cfg, tool("a", json!({"v": "A"})));
    assert_eq!(
        t.steps,
        [Step::CallLlm {
            call_id: "call_r1_2".into(),
            request_id: "r1".into(),
            iteration: 2,
            output: None
        }]
    );
    assert_eq!(m.iteration, 2);
    assert!(m.tool_calls.is_empty());
    let msgs = m.conversation.messages();
    let tools: Vec<(&str, &str)> = msgs
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.as_deref().unwrap(), m.content.as_str()))
        .collect();
    assert_eq!(
        tools,
        [
            ("a", r#"{"ok":true,"result":{"v":"A"}}"#),
            ("b", r#"{"ok":true,"result":{"v":"B"}}"#),
            ("c", r#"{"ok":true,"result":{"v":"C"}}"#),
        ]
    );
    assert_eq!(msgs[1].role, Role::Assistant);
    assert_eq!(msgs[1].tool_calls.len(), 3);
}

#[test]
fn a_tool_error_is_fed_back_to_the_model() {
    let cfg = MachineConfig::new();
    let mut m = Machine::new();
    let c1 = llm_call(&m.handle(&cfg, start("r1", "q")).steps);
    m.handle(
        &cfg,
        llm(&c1, Turn::tool_calls(vec![call("a", "nope", json!({}))])),
    );
    let err = jido::ai::directive::unknown_tool_error("nope");
    let t = m.handle(
        &cfg,
        Event::ToolResult {
            call_id: "a".into(),
            result: ResultEnvelope::error(&err),
        },
    );
    assert_eq!(llm_call(&t.steps), "call_r1_2");
    let last = m.conversation.messages().pop().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&last.content).unwrap(),
        json!({"ok": false, "error": {"type": "not_found", "message": "tool not found: nope",
               "details": {"tool_name": "nope", "retry": false}, "retryable": false}})
    );
}

#[test]
fn a_final_answer_completes_with_usage_summed_over_turns() {
    let cfg = MachineConfig::new();
    let mut m = Machine::new();
    let c1 = llm_call(&m.handle(&cfg, start("r1", "q")).steps);
    let t = m.handle(
        &cfg,
        llm(
            &c1,
            Turn::tool_calls(vec![call("a", "t", json!({}))]).with_usage(usage(10, 2)),
        ),
    );
    assert_eq!(exec_ids(&t.steps), ["a"]);
    let c2 = llm_call(&m.handle(&cfg, tool("a", json!({}))).steps);
    // A turn without usage keeps the sum.
    let t = m.handle(&cfg, llm(&c2, Turn::answer("42").with_usage(usage(20, 5))));
    assert_eq!(
        t.steps,
        [Step::Completed {
            request_id: "r1".into(),
            answer: json!("42"),
            termination: Termination::FinalAnswer
        }]
    );
    assert_eq!(m.status, Status::Completed);
    assert_eq!(m.termination, Some(Termination::FinalAnswer));
    assert_eq!(m.result, json!("42"));
    assert_eq!(m.usage, usage(30, 7));
    assert_eq!(
        m.conversation.messages().last(),
        Some(&Message::assistant("42"))
    );
}

#[test]
fn a_blank_answer_cut_short_is_an_incomplete_response() {
    for (reason, name) in [
        (FinishReason::Length, "length"),
        (FinishReason::ContentFilter, "content_filter"),
        (FinishReason::Other("error".into()), "error"),
    ] {
        let cfg = MachineConfig::new();
        let mut m = Machine::new();
        let c1 = llm_call(&m.handle(&cfg, start("r1", "q")).steps);
        let t = m.handle(
            &cfg,
            llm(&c1, Turn::answer("  ").with_finish_reason(reason)),
        );
        let error = json!({"type": "incomplete_response",
                           "message": format!("incomplete response (finish reason: {name})"),
                           "details": {"finish_reason": name}, "retryable": false});
        assert_eq!(
            t.steps,
            [Step::Failed {
                request_id: "r1".into(),
                error: error.clone(),
                termination: Termination::Error
            }]
        );
        assert_eq!((m.status, m.result.clone()), (Status::Error, error));
    }
    // Text with a cut finish reason, and a blank natural stop, are answers.
    let cfg = MachineConfig::new();
    let mut m = Machine::new();
    let c1 = llm_call(&m.handle(&cfg, start("r1", "q")).steps);
    m.handle(
        &cfg,
        llm(
            &c1,
            Turn::answer("partial").with_finish_reason(FinishReason::Length),
        ),
    );
    assert_eq!(
        (m.status, m.result.clone()),
        (Status::Completed, json!("partial"))
    );
    let c2 = llm_call(&m.handle(&cfg, start("r2", "q")).steps);
    m.handle(&cfg, llm(&c2, Turn::answer("")));
    assert_eq!((m.status, m.result.clone()), (Status::Completed, json!("")));
}

#[test]
fn a_failed_model_call_fails_the_request() {
    let cfg = MachineConfig::new();
    let mut m = Machine::new();
    let c1 = llm_call(&m.handle(&cfg, start("r1", "q")).steps);
    let err = jido::Error::timeout("llm request timed out").with_detail("timeout_ms", 30000);
    let t = m.handle(
        &cfg,
        Event::LlmResult {
            call_id: c1,
            result: Err(ErrorEnvelope::from_error(&err)),
        },
    );
    assert_eq!(
        t.steps,
        [Step::Failed {
            request_id: "r1".into(),
            error: err.to_envelope(),
            termination: Termination::Error
        }]
    );
    assert_eq!(m.status, Status::Error);
    assert_eq!(m.termination, Some(Termination::Error));
}

#[test]
fn reaching_max_iterations_completes_with_that_reason() {
    let cfg = MachineConfig::new().max_iterations(2);
    let mut m = Machine::new();
    let mut c = llm_call(&m.handle(&cfg, start("r1", "loop")).steps);
    let mut llm_calls = 1;
    loop {
        let id = format!("t{llm_calls}");
        m.handle(
            &cfg,
            llm(&c, Turn::tool_calls(vec![call(&id, "t", json!({}))])),
        );
        let t = m.handle(&cfg, tool(&id, json!({})));
        match &t.steps[..] {
            [Step::CallLlm { call_id, .. }] => {
                c = call_id.clone();
                llm_calls += 1;
            }
            [
                Step::Completed {
                    answer,
                    termination,
                    ..
                },
            ] => {
                assert_eq!(*answer, json!(MAX_ITERATIONS_ANSWER));
                assert_eq!(*termination, Termination::MaxIterations);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(llm_calls, 2);
    assert_eq!(m.status, Status::Completed);
    assert_eq!(
        m.result,
        json!("Maximum iterations reached without a final answer.")
    );
}

#[test]
fn the_default_allows_ten_model_turns() {
    let cfg = MachineConfig::new();
    assert_eq!(cfg.max_iterations, 10);
    assert_eq!(cfg.tool_concurrency, 4);
    let mut m = Machine::new();
    let mut c = llm_call(&m.handle(&cfg, start("r1", "loop")).steps);
    for i in 1..=10 {
        assert_eq!(m.iteration, i);
        m.handle(
            &cfg,
            llm(&c, Turn::tool_calls(vec![call("t", "t", json!({}))])),
        );
        let t = m.handle(&cfg, tool("t", json!({})));
        if i < 10 {
            c = llm_call(&t.steps);
        } else {
            assert!(matches!(
                &t.steps[..],
                [Step::Completed {
                    termination: Termination::MaxIterations,
                    ..
                }]
            ));
        }
    }
}

#[test]
fn cancel_fails_the_running_request_and_answers_its_open_tool_calls() {
    let cfg = MachineConfig::new().tool_concurrency(1);
    let mut m = Machine::new();
    let c1 = llm_call(&m.handle(&cfg, start("r1", "q")).steps);
    m.handle(
        &cfg,
        llm(
            &c1,
            Turn::tool_calls(vec![call("a", "t", json!({})), call("b", "t", json!({}))]),
        ),
    );
    m.handle(&cfg, tool("a", json!({"v": 1})));
    // Another request's cancel is ignored.
    let before = m.clone();
    let t = m.handle(
        &cfg,
        Event::Cancel {
            request_id: Some("r9".into()),
            reason: "x".into(),
        },
    );
    assert!(!t.accepted);
    assert_eq!(m, before);

    let t = m.handle(
        &cfg,
        Event::Cancel {
            request_id: Some("r1".into()),
            reason: "user_cancelled".into(),
        },
    );
    let error = json!({"type": "cancelled", "message": "request cancelled",
                       "details": {"reason": "user_cancelled"}, "retryable": false});
    assert_eq!(
        t.steps,
        [
            Step::CancelCalls {
                request_id: "r1".into(),
                reason: "user_cancelled".into()
            },
            Step::Failed {
                request_id: "r1".into(),
                error: error.clone(),
                termination: Termination::Cancelled
            },
        ]
    );
    assert_eq!(m.status, Status::Error);
    assert_eq!(m.termination, Some(Termination::Cancelled));
    let msgs = m.conversation.messages();
    let tail: Vec<&str> = msgs
        .iter()
        .skip(msgs.len() - 2)
        .map(|m| m.content.as_str())
        .collect();
    assert_eq!(tail[0], r#"{"ok":true,"result":{"v":1}}"#);
    assert_eq!(
        serde_json::from_str::<Value>(tail[1]).unwrap(),
        json!({"ok": false, "error": error})
    );
    // Results arriving after the cancel are stale.
    assert!(!m.handle(&cfg, tool("b", json!({}))).accepted);
    // Nothing to cancel when not busy.
    assert!(
        !m.handle(
            &cfg,
            Event::Cancel {
                request_id: None,
                reason: "x".into()
            }
        )
        .accepted
    );
}

#[test]
fn a_follow_up_continues_the_conversation_after_completion_or_error() {
    let cfg = MachineConfig::new();
    let mut m = Machine::new();
    let c1 = llm_call(&m.handle(&cfg, start("r1", "first")).steps);
    m.handle(&cfg, llm(&c1, Turn::answer("one").with_usage(usage(1, 1))));
    let t = m.handle(&cfg, start("r2", "second"));
    let c2 = llm_call(&t.steps);
    assert_eq!(c2, "call_r2_2");
    assert_eq!(m.usage, Usage::default());
    assert_eq!(m.result, Value::Null);
    assert_eq!(
        m.conversation.messages(),
        [
            Message::user("first"),
            Message::assistant("one"),
            Message::user("second")
        ]
    );
    m.handle(
        &cfg,
        Event::LlmResult {
            call_id: c2,
            result: Err(ErrorEnvelope::from_error(&jido::Error::execution("down"))),
        },
    );
    assert_eq!(m.status, Status::Error);
    let t = m.handle(&cfg, start("r3", "third"));
    assert_eq!(llm_call(&t.steps), "call_r3_3");
    assert_eq!(m.conversation.len(), 4);
}

#[test]
fn without_keep_conversation_each_request_starts_a_new_one() {
    let cfg = MachineConfig::new().keep_conversation(false);
    let mut m = Machine::new();
    let c1 = llm_call(&m.handle(&cfg, start("r1", "first")).steps);
    m.handle(&cfg, llm(&c1, Turn::answer("one")));
    assert_eq!(m.conversation.len(), 2);
    let t = m.handle(&cfg, start("r2", "second"));
    assert_eq!(llm_call(&t.steps), "call_r2_2");
    assert_eq!(m.conversation.messages(), [Message::user("second")]);
    // The JSON mirror follows.
    let mut st = StateMap::new();
    m.write(&mut st);
    assert_eq!(
        st["conversation"],
        json!([{"role": "user", "content": "second"}])
    );
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Answer {
    value: i64,
}

#[test]
fn structured_output_gets_one_repair_turn() {
    let cfg = MachineConfig::new().output(OutputSchema::of::<Answer>("answer"));
    let with_output = |id: &str| Event::Start {
        request_id: id.into(),
        query: "q".into(),
        output: Some("answer".into()),
    };
    // Invalid, then valid.
    let mut m = Machine::new();
    let t = m.handle(&cfg, with_output("r1"));
    assert!(matches!(&t.steps[..], [Step::CallLlm { output: Some(o), .. }] if o == "answer"));
    let c1 = llm_call(&t.steps);
    let t = m.handle(&cfg, llm(&c1, Turn::answer("about 42")));
    let c2 = llm_call(&t.steps);
    assert_eq!(c2, "call_r1_2");
    assert_eq!(
        (m.status, m.iteration, m.repaired),
        (Status::AwaitingLlm, 1, true)
    );
    let repair = m.conversation.messages().pop().unwrap();
    assert_eq!(repair.role, Role::User);
    assert!(
        repair
            .content
            .starts_with("Answer is not valid json: expected value at line 1 column 1."),
        "{}",
        repair.content
    );
    assert!(repair.content.ends_with("follows the schema answer."));
    let t = m.handle(
        &cfg,
        llm(&c2, Turn::answer("```json\n{\"value\": 42}\n```")),
    );
    assert_eq!(
        t.steps,
        [Step::Completed {
            request_id: "r1".into(),
            answer: json!({"value": 42}),
            termination: Termination::FinalAnswer
        }]
    );

    // Invalid twice.
    let t = m.handle(&cfg, with_output("r2"));
    let c = llm_call(&t.steps);
    let c = llm_call(
        &m.handle(&cfg, llm(&c, Turn::answer(r#"{"value": "x"}"#)))
            .steps,
    );
    let t = m.handle(&cfg, llm(&c, Turn::answer(r#"{"other": 1}"#)));
    match &t.steps[..] {
        [
            Step::Failed {
                error,
                termination: Termination::Error,
                ..
            },
        ] => {
            assert_eq!(error["type"], "invalid_output");
            assert_eq!(
                error["message"],
                "answer does not match the schema answer: missing field `value`"
            );
            assert_eq!(
                error["details"],
                json!({"schema": "answer", "answer": r#"{"other": 1}"#})
            );
        }
        other => panic!("{other:?}"),
    }

    // An unknown schema is rejected, the machine untouched.
    let before = m.clone();
    let t = m.handle(
        &cfg,
        Event::Start {
            request_id: "r3".into(),
            query: "q".into(),
            output: Some("nope".into()),
        },
    );
    assert_eq!(
        t.steps,
        [Step::Reject {
            request_id: "r3".into(),
            reason: "invalid_output_schema".into(),
            message: "unknown output schema: nope".into()
        }]
    );
    assert_eq!(m, before);
}

#[test]
fn the_machine_round_trips_through_state() {
    let cfg = MachineConfig::new().tool_concurrency(1);
    let mut m = Machine::new();
    let c1 = llm_call(&m.handle(&cfg, start("r1", "q")).steps);
    m.handle(
        &cfg,
        llm(
            &c1,
            Turn::tool_calls(vec![
                call("a", "t", json!({"x": 1})),
                call("b", "t", json!({})),
            ])
            .with_usage(usage(3, 4)),
        ),
    );
    m.handle(&cfg, tool("a", json!({"v": 1})));
    let mut st = StateMap::new();
    m.write(&mut st);
    assert_eq!(st["status"], "awaiting_tool");
    assert_eq!(st["tool_calls"][0]["state"], "done");
    assert_eq!(st["tool_calls"][1]["state"], "running");
    assert_eq!(
        st["usage"],
        json!({"input_tokens": 3, "output_tokens": 4, "total_tokens": 7})
    );
    let back = Machine::read(&st).unwrap();
    assert_eq!(back, m);
    assert!(Machine::read(&StateMap::new()).is_none());
}
