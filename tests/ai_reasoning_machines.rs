//! The reasoning machines without an agent: transitions, limits, parsing
//! of well-formed and malformed model output, failures, busy,
//! cancellation and usage.
#![cfg(feature = "ai")]

use jido::ai::envelope::{ErrorEnvelope, ResultEnvelope};
use jido::ai::react::machine::Turn;
use jido::ai::reasoning::adaptive::{Adaptive, AdaptiveConfig, Choice, Delegate, TaskType, select};
use jido::ai::reasoning::aot::{Aot, AotConfig};
use jido::ai::reasoning::cot::{COD_PROMPT, COT_PROMPT, Cot, CotConfig};
use jido::ai::reasoning::got::{Aggregation, EdgeKind, Got, GotConfig, NodeKind};
use jido::ai::reasoning::machine::{Event, LlmCall, Machine, Phase, Step, Termination, Transition};
use jido::ai::reasoning::parse::ParserMode;
use jido::ai::reasoning::tot::{Tot, TotConfig, Traversal};
use jido::ai::reasoning::trm::{Trm, TrmConfig};
use jido::ai::{FinishReason, Role, ToolCall, Usage};
use serde_json::{Value, json};

fn start<M: Machine>(m: &mut M, cfg: &M::Config, id: &str, q: &str) -> Transition {
    m.handle(
        cfg,
        Event::Start {
            request_id: id.into(),
            query: q.into(),
        },
    )
}

fn only_call(t: &Transition) -> LlmCall {
    match &t.steps[..] {
        [Step::CallLlm(c)] => c.clone(),
        other => panic!("expected one call, got {other:?}"),
    }
}

fn usage(i: u64, o: u64) -> Usage {
    Usage {
        input_tokens: i,
        output_tokens: o,
        total_tokens: i + o,
    }
}

/// Answers the awaited call with `text` (usage 10 + 5).
fn reply<M: Machine>(m: &mut M, cfg: &M::Config, text: &str) -> Transition {
    let call_id = m.run().llm_call_id.clone().expect("a call is awaited");
    m.handle(
        cfg,
        Event::LlmResult {
            call_id,
            result: Ok(Turn::answer(text).with_usage(usage(10, 5))),
        },
    )
}

fn user_text(c: &LlmCall) -> &str {
    let m = c.messages.last().unwrap();
    assert_eq!(m.role, Role::User);
    &m.content
}

fn completed(t: &Transition) -> (Value, Termination) {
    match t.steps.last() {
        Some(Step::Completed {
            answer,
            termination,
            ..
        }) => (answer.clone(), *termination),
        other => panic!("expected completion, got {other:?}"),
    }
}

fn failed(t: &Transition) -> (Value, Termination) {
    match t.steps.last() {
        Some(Step::Failed {
            error, termination, ..
        }) => (error.clone(), *termination),
        other => panic!("expected failure, got {other:?}"),
    }
}

fn round_trip<M: Machine + PartialEq>(m: &M) {
    let json = serde_json::to_value(m).unwrap();
    let back: M = serde_json::from_value(json).unwrap();
    assert_eq!(&back, m);
}

// ------------------------------------------------------------------ CoT

#[test]
fn cot_reasons_once_and_parses_steps_and_conclusion() {
    let cfg = CotConfig::thought();
    let mut m = Cot::default();
    assert_eq!(Cot::name(&cfg), "cot");
    let t = start(&mut m, &cfg, "r1", "What is 6 times 7?");
    let call = only_call(&t);
    assert_eq!(call.call_id, "call_r1_1");
    assert_eq!(call.phase, Phase::Reasoning);
    assert_eq!(call.system_prompt.as_deref(), Some(COT_PROMPT));
    assert_eq!(user_text(&call), "What is 6 times 7?");
    assert_eq!(m.run.phase, Phase::Reasoning);

    // Busy: rejected, nothing changes.
    let before = m.clone();
    let t = start(&mut m, &cfg, "r2", "again");
    assert_eq!(
        t.steps,
        vec![Step::Reject {
            request_id: "r2".into(),
            reason: "busy".into(),
            message: "agent is busy (status: reasoning)".into()
        }]
    );
    assert_eq!(m, before);

    // A stale call id is ignored.
    let t = m.handle(
        &cfg,
        Event::LlmResult {
            call_id: "call_old".into(),
            result: Ok(Turn::answer("x")),
        },
    );
    assert!(!t.accepted);
    assert_eq!(m, before);
    assert!(
        m.handle(
            &cfg,
            Event::LlmDelta {
                call_id: "call_r1_1".into()
            }
        )
        .accepted
    );

    let t = reply(
        &mut m,
        &cfg,
        "Step 1: 6 times 7 is 42.\nStep 2: Nothing else.\nConclusion: 42",
    );
    assert_eq!(completed(&t), (json!("42"), Termination::Success));
    assert_eq!(m.run.phase, Phase::Completed);
    assert_eq!(m.steps.len(), 2);
    assert_eq!(m.steps[0].content, "6 times 7 is 42.");
    assert_eq!(m.conclusion.as_deref(), Some("42"));
    assert_eq!(m.run.usage, usage(10, 5));
    round_trip(&m);

    // A new request after completion starts afresh.
    let t = start(&mut m, &cfg, "r3", "And 2+2?");
    assert_eq!(only_call(&t).call_id, "call_r3_2");
    assert!(m.steps.is_empty() && m.conclusion.is_none());
    assert_eq!(m.run.usage, Usage::default());
    // Without markers the whole text is the answer.
    let t = reply(&mut m, &cfg, "  four  ");
    assert_eq!(completed(&t).0, json!("four"));
    assert!(m.conclusion.is_none());
}

#[test]
fn cod_uses_the_draft_prompt_and_the_hash_answer() {
    let cfg = CotConfig::draft();
    assert_eq!(Cot::name(&cfg), "cod");
    let mut m = Cot::default();
    let call = only_call(&start(&mut m, &cfg, "r1", "6*7?"));
    assert_eq!(call.system_prompt.as_deref(), Some(COD_PROMPT));
    let t = reply(&mut m, &cfg, "- 6*7\n- =42\n#### 42");
    assert_eq!(completed(&t).0, json!("42"));
    assert_eq!(m.steps.len(), 2);
}

#[test]
fn cot_failures_errors_blank_and_truncated_answers() {
    let cfg = CotConfig::thought();
    let mut m = Cot::default();
    start(&mut m, &cfg, "r1", "q");
    let call_id = m.run.llm_call_id.clone().unwrap();
    let envelope = ErrorEnvelope {
        kind: "llm_error".into(),
        message: "boom".into(),
        details: Default::default(),
        retryable: false,
    };
    let t = m.handle(
        &cfg,
        Event::LlmResult {
            call_id,
            result: Err(envelope.clone()),
        },
    );
    assert_eq!(failed(&t), (envelope.to_value(), Termination::Error));
    assert_eq!(m.run.phase, Phase::Error);

    start(&mut m, &cfg, "r2", "q");
    let t = reply(&mut m, &cfg, "   ");
    assert_eq!(failed(&t).0["type"], "empty_response");

    start(&mut m, &cfg, "r3", "q");
    let call_id = m.run.llm_call_id.clone().unwrap();
    let t = m.handle(
        &cfg,
        Event::LlmResult {
            call_id,
            result: Ok(Turn::answer("").with_finish_reason(FinishReason::Length)),
        },
    );
    let (error, _) = failed(&t);
    assert_eq!(error["type"], "incomplete_response");
    assert_eq!(
        error["message"],
        "incomplete response (finish reason: length)"
    );
}

#[test]
fn cancellation_matches_the_running_request_only() {
    let cfg = CotConfig::thought();
    let mut m = Cot::default();
    // Idle: nothing to cancel.
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
    start(&mut m, &cfg, "r1", "q");
    let before = m.clone();
    let t = m.handle(
        &cfg,
        Event::Cancel {
            request_id: Some("other".into()),
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
    assert_eq!(
        t.steps[0],
        Step::CancelCalls {
            request_id: "r1".into(),
            reason: "user_cancelled".into()
        }
    );
    let (error, termination) = failed(&t);
    assert_eq!(termination, Termination::Cancelled);
    assert_eq!(error["type"], "cancelled");
    assert_eq!(error["details"]["reason"], "user_cancelled");
    // The cancelled call's late answer is stale.
    assert!(
        !m.handle(
            &cfg,
            Event::LlmResult {
                call_id: "call_r1_1".into(),
                result: Ok(Turn::answer("late"))
            }
        )
        .accepted
    );
    assert_eq!(m.run.phase, Phase::Error);
}

// ------------------------------------------------------------------ AoT

#[test]
fn aot_reports_search_diagnostics() {
    let cfg = AotConfig::default();
    let mut m = Aot::default();
    let call = only_call(&start(&mut m, &cfg, "r1", "4 6 4 1"));
    assert_eq!(call.phase, Phase::Exploring);
    assert!(
        call.system_prompt
            .clone()
            .unwrap()
            .contains("Search style preference: dfs.")
    );
    assert!(user_text(&call).ends_with("Problem:\n4 6 4 1"));
    let text = "Trying a promising first operation:\n1. 4 * 6 : (24, 4, 1)\n- 4 - 1 : (24, 3) no\nTrying another promising first operation:\n1. 6 - 4 : (2, 4, 1)\nfound it!\nBacktracking the solution:\nStep 1: 4 * 6 = 24\nStep 2: 4 / 4 = 1\nanswer: 4 * 6 * (4 / 4) = 24";
    let t = reply(&mut m, &cfg, text);
    assert_eq!(
        completed(&t),
        (json!("4 * 6 * (4 / 4) = 24"), Termination::Success)
    );
    let search = m.search.clone().unwrap();
    assert!(search.found_solution);
    assert_eq!(search.first_operations_considered, 2);
    assert_eq!(search.backtracking_steps, 2);
    assert_eq!(search.diagnostics["explicit_answer_found"], true);
    assert_eq!(search.raw_response, text);
    round_trip(&m);
}

#[test]
fn aot_without_an_answer_line_fails_or_completes_by_configuration() {
    let cfg = AotConfig::default();
    let mut m = Aot::default();
    start(&mut m, &cfg, "r1", "p");
    let t = reply(&mut m, &cfg, "found it! (4+4)*3");
    let (error, termination) = failed(&t);
    assert_eq!(termination, Termination::MissingExplicitAnswer);
    assert_eq!(error["type"], "missing_explicit_answer");
    assert_eq!(error["details"]["result"]["found_solution"], true);
    assert_eq!(error["details"]["result"]["usage"]["total_tokens"], 15);

    start(&mut m, &cfg, "r2", "p");
    let t = reply(&mut m, &cfg, "I give up.");
    assert_eq!(failed(&t).1, Termination::NoSolution);

    let lenient = AotConfig {
        require_explicit_answer: false,
        ..AotConfig::default()
    };
    start(&mut m, &lenient, "r3", "p");
    let t = reply(&mut m, &lenient, "solution found: (4+4)*3");
    assert_eq!(completed(&t), (Value::Null, Termination::Success));
}

// ------------------------------------------------------------------ TRM

#[test]
fn trm_loops_until_the_act_threshold_and_sums_usage() {
    let cfg = TrmConfig::default();
    let mut m = Trm::default();
    let call = only_call(&start(&mut m, &cfg, "r1", "Why is the sky blue?"));
    assert_eq!(
        (call.phase, user_text(&call)),
        (Phase::Reasoning, "Question: Why is the sky blue?")
    );
    let t = reply(&mut m, &cfg, "Rayleigh scattering.");
    let call = only_call(&t);
    assert_eq!(call.phase, Phase::Supervising);
    assert!(user_text(&call).contains("Answer to evaluate:\nRayleigh scattering."));
    let t = reply(
        &mut m,
        &cfg,
        "STRENGTH: right idea\nISSUE: too short\nSUGGESTION: explain wavelengths\nSCORE: 0.6",
    );
    let call = only_call(&t);
    assert_eq!(call.phase, Phase::Improving);
    assert!(user_text(&call).contains("- too short"));
    assert_eq!(m.feedback.as_ref().unwrap().issues, vec!["too short"]);
    // Step 1 ends below the threshold: step 2 starts.
    let t = reply(&mut m, &cfg, "Blue light scatters more (Rayleigh).");
    let call = only_call(&t);
    assert_eq!(call.phase, Phase::Reasoning);
    assert_eq!(m.step, 2);
    assert!(user_text(&call).contains("Current answer:\nBlue light scatters more (Rayleigh)."));
    reply(&mut m, &cfg, "It is right.");
    reply(&mut m, &cfg, "**SCORE**: 0.95");
    let t = reply(&mut m, &cfg, "Final polished answer.");
    // The best-scored answer wins (the one scored 0.95).
    assert_eq!(
        completed(&t),
        (
            json!("Blue light scatters more (Rayleigh)."),
            Termination::ActThreshold
        )
    );
    assert_eq!(m.confidence_history, vec![0.6, 0.95]);
    assert_eq!(m.run.usage, usage(60, 30));
    assert_eq!(m.run.llm_calls, 6);
    round_trip(&m);
}

#[test]
fn trm_stops_on_max_steps_and_on_convergence_with_default_scores() {
    let cfg = TrmConfig {
        max_supervision_steps: 2,
        ..TrmConfig::default()
    };
    let mut m = Trm::default();
    start(&mut m, &cfg, "r1", "q");
    for step in 1..=2 {
        reply(&mut m, &cfg, &format!("answer {step}"));
        reply(&mut m, &cfg, &format!("SCORE: 0.{}", step + 2));
        let t = reply(&mut m, &cfg, &format!("improved {step}"));
        if step == 2 {
            assert_eq!(completed(&t), (json!("improved 1"), Termination::MaxSteps));
        }
    }

    // Unreadable critiques score 0.5: three in a row converge.
    let cfg = TrmConfig::default();
    let mut m = Trm::default();
    start(&mut m, &cfg, "r2", "q");
    let mut last = Transition::default();
    for _ in 0..3 {
        reply(&mut m, &cfg, "thinking");
        reply(&mut m, &cfg, "looks okay to me");
        last = reply(&mut m, &cfg, "better");
    }
    assert_eq!(completed(&last).1, Termination::ConvergenceDetected);
    assert_eq!(m.confidence_history, vec![0.5, 0.5, 0.5]);
    assert!(m.feedback.as_ref().is_some_and(|f| !f.score_found));
}

// ------------------------------------------------------------------ ToT

fn thoughts_json(prefix: &str) -> String {
    json!({"thoughts": [
        {"id": "t1", "content": format!("{prefix} a")},
        {"id": "t2", "content": format!("{prefix} b")},
        {"id": "t3", "content": format!("{prefix} c")},
    ]})
    .to_string()
}

#[test]
fn tot_best_first_search_to_max_depth() {
    let cfg = TotConfig::default();
    let mut m = Tot::default();
    let call = only_call(&start(&mut m, &cfg, "r1", "Make 24 from 4 4 6 8"));
    assert_eq!(call.phase, Phase::Generating);
    assert_eq!(
        user_text(&call),
        "Generate 3 different approaches to solve this problem:\n\nProblem: Make 24 from 4 4 6 8"
    );
    let call = only_call(&reply(&mut m, &cfg, &thoughts_json("root")));
    assert_eq!(call.phase, Phase::Evaluating);
    assert!(user_text(&call).ends_with("t1: root a\nt2: root b\nt3: root c"));
    // Depth 1 scores: b is best and expanded next.
    let call = only_call(&reply(
        &mut m,
        &cfg,
        r#"{"scores":{"t1":0.2,"t2":0.7,"t3":0.4}}"#,
    ));
    assert_eq!(call.phase, Phase::Generating);
    assert_eq!(
        user_text(&call),
        "Given the reasoning so far, generate 3 different next steps:\n\nProblem: Make 24 from 4 4 6 8\nStep 1: root b"
    );
    reply(&mut m, &cfg, &thoughts_json("b"));
    // Markdown-wrapped JSON still parses; the best is now 0.9.
    let call = only_call(&reply(
        &mut m,
        &cfg,
        "```json\n{\"scores\":{\"t1\":0.9,\"t2\":0.5,\"t3\":0.1}}\n```",
    ));
    assert!(user_text(&call).ends_with("Step 1: root b\nStep 2: b a"));
    reply(&mut m, &cfg, &thoughts_json("ba"));
    let t = reply(&mut m, &cfg, r#"{"scores":{"t1":0.95,"t2":0.3,"t3":0.2}}"#);
    assert_eq!(completed(&t), (json!("ba a"), Termination::MaxDepth));
    assert_eq!(m.nodes.len(), 10);
    let d = m.details();
    assert_eq!(d["solution_path"], json!(["root b", "b a", "ba a"]));
    assert_eq!(d["best_score"], json!(0.95));
    assert_eq!(
        d["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["content"].clone())
            .collect::<Vec<_>>(),
        vec![json!("ba a"), json!("b b"), json!("root c")]
    );
    assert_eq!(m.run.usage, usage(60, 30));
    round_trip(&m);
}

#[test]
fn tot_traversal_orders() {
    // BFS expands the oldest frontier node (root's 2nd thought), DFS the
    // newest (the first child of the node just expanded).
    for (traversal, expected) in [
        (Traversal::Bfs, "Step 1: root b"),
        (Traversal::Dfs, "Step 2: a a"),
    ] {
        let cfg = TotConfig {
            traversal,
            max_depth: 4,
            convergence_window: 10,
            ..TotConfig::default()
        };
        let mut m = Tot::default();
        start(&mut m, &cfg, "r1", "p");
        reply(&mut m, &cfg, &thoughts_json("root"));
        let call = only_call(&reply(&mut m, &cfg, "1. 0.9\n2. 0.5\n3. 0.1"));
        assert!(
            user_text(&call).ends_with("Step 1: root a"),
            "{traversal:?}"
        );
        reply(&mut m, &cfg, &thoughts_json("a"));
        let call = only_call(&reply(&mut m, &cfg, "t1: 0.6\nt2: 0.6\nt3: 0.6"));
        assert!(
            user_text(&call).ends_with(expected),
            "{traversal:?}: {}",
            user_text(&call)
        );
        assert_eq!(m.parser_mode, Some(ParserMode::Regex));
    }
}

#[test]
fn tot_early_success_convergence_and_node_limit() {
    // A perfect score at depth 1 is below min_depth: the search goes on;
    // at depth 2 it wins.
    let cfg = TotConfig {
        convergence_window: 10,
        ..TotConfig::default()
    };
    let mut m = Tot::default();
    start(&mut m, &cfg, "r1", "p");
    reply(&mut m, &cfg, &thoughts_json("root"));
    let t = reply(&mut m, &cfg, r#"{"scores":{"t1":1.0,"t2":0.5,"t3":0.1}}"#);
    assert_eq!(only_call(&t).phase, Phase::Generating);
    reply(&mut m, &cfg, &thoughts_json("a"));
    let t = reply(&mut m, &cfg, r#"{"scores":{"t1":0.3,"t2":1.0,"t3":0.1}}"#);
    assert_eq!(completed(&t), (json!("a b"), Termination::Threshold));

    // Default window 2: a best score that does not grow converges.
    let cfg = TotConfig {
        max_depth: 5,
        ..TotConfig::default()
    };
    let mut m = Tot::default();
    start(&mut m, &cfg, "r2", "p");
    for _ in 0..2 {
        reply(&mut m, &cfg, &thoughts_json("x"));
        reply(&mut m, &cfg, r#"{"scores":{"t1":0.5,"t2":0.5,"t3":0.5}}"#);
    }
    reply(&mut m, &cfg, &thoughts_json("x"));
    let t = reply(&mut m, &cfg, r#"{"scores":{"t1":0.51,"t2":0.5,"t3":0.5}}"#);
    assert_eq!(completed(&t).1, Termination::Converged);

    // Node limit: only the thoughts that fit are kept.
    let cfg = TotConfig {
        max_nodes: 3,
        ..TotConfig::default()
    };
    let mut m = Tot::default();
    start(&mut m, &cfg, "r3", "p");
    reply(&mut m, &cfg, &thoughts_json("root"));
    let t = reply(&mut m, &cfg, r#"{"scores":{"t1":0.2,"t2":0.7,"t3":0.9}}"#);
    assert_eq!(completed(&t), (json!("root b"), Termination::MaxNodes));
    assert_eq!(m.nodes.len(), 3);
}

#[test]
fn tot_repairs_malformed_output_once_then_fails() {
    let cfg = TotConfig::default();
    let mut m = Tot::default();
    start(&mut m, &cfg, "r1", "p");
    let call = only_call(&reply(&mut m, &cfg, "I would rather not."));
    assert_eq!(call.phase, Phase::Generating);
    assert_eq!(call.messages.len(), 3);
    assert_eq!(call.messages[1].content, "I would rather not.");
    assert!(
        call.messages[2]
            .content
            .starts_with("Your answer could not be parsed.")
    );
    assert_eq!(m.parse_retries.generation, 1);
    // The repaired answer is used.
    reply(&mut m, &cfg, &thoughts_json("root"));
    let t = reply(&mut m, &cfg, "all good");
    assert_eq!(only_call(&t).phase, Phase::Evaluating);
    let t = reply(&mut m, &cfg, "still no numbers");
    let (error, termination) = failed(&t);
    assert_eq!(termination, Termination::Error);
    assert_eq!(error["type"], "scores_parse_failed");
    assert_eq!(error["details"]["answer"], "still no numbers");
    assert_eq!(m.run.phase, Phase::Error);
}

#[test]
fn tot_tool_rounds_feed_results_back_in_call_order() {
    let cfg = TotConfig::default();
    let mut m = Tot::default();
    start(&mut m, &cfg, "r1", "p");
    let call_id = m.run.llm_call_id.clone().unwrap();
    let calls = vec![
        ToolCall {
            id: "tc_1".into(),
            name: "lookup".into(),
            arguments: json!({"k": 1}).into(),
        },
        ToolCall {
            id: "tc_2".into(),
            name: "lookup".into(),
            arguments: json!({"k": 2}).into(),
        },
    ];
    let t = m.handle(
        &cfg,
        Event::LlmResult {
            call_id,
            result: Ok(Turn::tool_calls(calls.clone()).with_usage(usage(3, 1))),
        },
    );
    assert_eq!(
        t.steps,
        vec![
            Step::ExecTool {
                call: calls[0].clone(),
                request_id: "r1".into(),
                iteration: 1
            },
            Step::ExecTool {
                call: calls[1].clone(),
                request_id: "r1".into(),
                iteration: 1
            },
        ]
    );
    assert!(m.run.llm_call_id.is_none());
    // Results arrive out of order; unknown ids are ignored.
    let res = |v: i64| ResultEnvelope::ok(json!({"v": v}));
    assert!(
        !m.handle(
            &cfg,
            Event::ToolResult {
                call_id: "tc_9".into(),
                result: res(9)
            }
        )
        .accepted
    );
    let t = m.handle(
        &cfg,
        Event::ToolResult {
            call_id: "tc_2".into(),
            result: res(2),
        },
    );
    assert!(t.accepted && t.steps.is_empty());
    let t = m.handle(
        &cfg,
        Event::ToolResult {
            call_id: "tc_1".into(),
            result: res(1),
        },
    );
    let call = only_call(&t);
    assert_eq!(call.phase, Phase::Generating);
    let tail: Vec<_> = call.messages[1..]
        .iter()
        .map(|msg| (msg.role, msg.tool_call_id.clone()))
        .collect();
    assert_eq!(
        tail,
        vec![
            (Role::Assistant, None),
            (Role::Tool, Some("tc_1".into())),
            (Role::Tool, Some("tc_2".into()))
        ]
    );
    assert_eq!(m.run.usage, usage(3, 1));
    // The repeated call is answered normally.
    let t = reply(&mut m, &cfg, &thoughts_json("root"));
    assert_eq!(only_call(&t).phase, Phase::Evaluating);
}

#[test]
fn tot_stops_taking_tool_calls_after_three_rounds() {
    let cfg = TotConfig::default();
    let mut m = Tot::default();
    start(&mut m, &cfg, "r1", "p");
    let call = ToolCall {
        id: "tc".into(),
        name: "lookup".into(),
        arguments: json!({}).into(),
    };
    for round in 1..=4 {
        let call_id = m.run.llm_call_id.clone().unwrap();
        let turn = Turn {
            text: if round == 4 {
                thoughts_json("root")
            } else {
                String::new()
            },
            ..Turn::tool_calls(vec![call.clone()])
        };
        let t = m.handle(
            &cfg,
            Event::LlmResult {
                call_id,
                result: Ok(turn),
            },
        );
        if round < 4 {
            assert!(
                matches!(&t.steps[..], [Step::ExecTool { .. }]),
                "round {round}"
            );
            m.handle(
                &cfg,
                Event::ToolResult {
                    call_id: "tc".into(),
                    result: ResultEnvelope::ok(json!(round)),
                },
            );
        } else {
            // The fourth round's tool calls are dropped, its text is used.
            assert_eq!(only_call(&t).phase, Phase::Evaluating);
        }
    }
}

// ------------------------------------------------------------------ GoT

#[test]
fn got_generates_connects_and_aggregates_in_two_rounds() {
    let cfg = GotConfig::default();
    let mut m = Got::default();
    let call = only_call(&start(&mut m, &cfg, "r1", "How should a city cut traffic?"));
    assert_eq!(call.phase, Phase::Generating);
    let call = only_call(&reply(
        &mut m,
        &cfg,
        "1. Congestion pricing\n2. Better buses\n3. Bike lanes",
    ));
    assert_eq!(call.phase, Phase::Connecting);
    assert!(user_text(&call).contains("n1: Congestion pricing\nn2: Better buses\nn3: Bike lanes"));
    // A backward edge, a self edge and an unknown node are ignored.
    let call = only_call(&reply(
        &mut m,
        &cfg,
        r#"{"connections":[{"from":"n1","to":"n2"},{"from":"n3","to":"n1"},{"from":"n2","to":"n2"},{"from":"n1","to":"n9"}],"scores":{"n1":0.9,"n2":0.6}}"#,
    ));
    assert_eq!(call.phase, Phase::Aggregating);
    assert!(user_text(&call).contains("Relations: n1 -> n2"));
    assert!(user_text(&call).contains("Synthesize"));
    assert_eq!(
        m.nodes.iter().map(|n| n.score).collect::<Vec<_>>(),
        vec![None, Some(0.9), Some(0.6), Some(0.5)]
    );
    let call = only_call(&reply(
        &mut m,
        &cfg,
        "Combine them.\nAnswer: Price roads and fund buses.",
    ));
    assert_eq!(call.phase, Phase::Generating);
    assert!(user_text(&call).contains("Current conclusion:\nPrice roads and fund buses."));
    reply(
        &mut m,
        &cfg,
        r#"{"thoughts":["Add bike lanes too","Phase it in"]}"#,
    );
    reply(&mut m, &cfg, "CONNECTION: n5 -> n6 : sequence");
    let t = reply(
        &mut m,
        &cfg,
        "Final Answer: Price roads, fund buses, add bike lanes, phase it in.",
    );
    assert_eq!(
        completed(&t),
        (
            json!("Price roads, fund buses, add bike lanes, phase it in."),
            Termination::Success
        )
    );
    let kinds: Vec<_> = m.edges.iter().map(|e| (e.from, e.to, e.kind)).collect();
    assert_eq!(
        kinds,
        vec![
            (0, 1, EdgeKind::Generates),
            (0, 2, EdgeKind::Generates),
            (0, 3, EdgeKind::Generates),
            (1, 2, EdgeKind::Connects),
            (1, 4, EdgeKind::Aggregates),
            (2, 4, EdgeKind::Aggregates),
            (3, 4, EdgeKind::Aggregates),
            (4, 5, EdgeKind::Refines),
            (4, 6, EdgeKind::Refines),
            (5, 6, EdgeKind::Connects),
            (5, 7, EdgeKind::Aggregates),
            (6, 7, EdgeKind::Aggregates),
        ]
    );
    assert_eq!(m.nodes[7].kind, NodeKind::Aggregate);
    assert_eq!(m.nodes[7].depth, 4);
    assert_eq!(m.run.llm_calls, 6);
    round_trip(&m);
}

#[test]
fn got_limits_aggregations_and_unreadable_thoughts() {
    // One round when the depth does not allow another.
    let cfg = GotConfig {
        max_depth: 3,
        aggregation: Aggregation::Voting,
        ..GotConfig::default()
    };
    let mut m = Got::default();
    start(&mut m, &cfg, "r1", "p");
    reply(&mut m, &cfg, "1. yes\n2. yes\n3. no");
    let call = only_call(&reply(&mut m, &cfg, "no relations"));
    assert!(user_text(&call).contains("vote"));
    assert!(user_text(&call).contains("Relations: (none)"));
    let t = reply(&mut m, &cfg, "Two votes for yes.\nAnswer: yes");
    assert_eq!(completed(&t), (json!("yes"), Termination::MaxDepth));

    // Node limit: 5 nodes hold the root, 3 thoughts and an aggregate.
    let cfg = GotConfig {
        max_nodes: 5,
        aggregation: Aggregation::Weighted,
        ..GotConfig::default()
    };
    let mut m = Got::default();
    start(&mut m, &cfg, "r2", "p");
    reply(&mut m, &cfg, "1. a\n2. b\n3. c\n4. d");
    let call = only_call(&reply(&mut m, &cfg, "n1: 0.8\nn2: 0.2\nn3: 0.5"));
    assert!(user_text(&call).contains("n1 (score 0.8): a"));
    let t = reply(&mut m, &cfg, "a mostly");
    assert_eq!(completed(&t), (json!("a mostly"), Termination::MaxNodes));

    let mut m = Got::default();
    start(&mut m, &cfg, "r3", "p");
    let t = reply(&mut m, &cfg, "Sorry, no.");
    assert_eq!(failed(&t).0["type"], "thoughts_parse_failed");
}

// ------------------------------------------------------------- Adaptive

#[test]
fn adaptive_selection_rules() {
    let cfg = AdaptiveConfig::default();
    let pick = |q: &str| select(q, &cfg).strategy;
    assert_eq!(pick("Solve this riddle"), Choice::Trm);
    assert_eq!(pick("Integrate these perspectives"), Choice::Got);
    assert_eq!(
        pick("Look up the weather and fetch the forecast"),
        Choice::React
    );
    // Exploration prefers AoT, which is not available by default.
    assert_eq!(pick("Compare alternatives"), Choice::Tot);
    let with_aot = AdaptiveConfig {
        available: vec![Choice::Aot, Choice::Cot],
        ..AdaptiveConfig::default()
    };
    assert_eq!(
        select("Compare alternatives", &with_aot).strategy,
        Choice::Aot
    );
    let s = select("Who wrote Hamlet?", &cfg);
    assert_eq!(
        (s.strategy, s.task_type),
        (Choice::Cod, TaskType::SimpleQuery)
    );
    assert!(s.complexity < 0.3);
    // Without keywords the complexity is at most 0.7. A tool question
    // when ReAct is not available falls back to the complexity: a long,
    // constrained, multi-question one with complex keywords is complex.
    let no_react = AdaptiveConfig {
        available: vec![Choice::Cod, Choice::Cot, Choice::Tot],
        ..AdaptiveConfig::default()
    };
    let long = format!(
        "{} Use it to compare, contrast and evaluate. Is it true? Does it hold? Must it? Should it?",
        "word ".repeat(120)
    );
    let s = select(&long, &no_react);
    assert_eq!(s.task_type, TaskType::ToolUse);
    assert!(s.complexity > 0.7, "{}", s.complexity);
    assert_eq!(s.strategy, Choice::Tot);
    let plain = format!("{} Is it? Must it be? Should it?", "word ".repeat(200));
    let s = select(&plain, &cfg);
    assert_eq!(s.task_type, TaskType::General);
    // Middle complexity: ReAct.
    let mid = format!("{} Is it? Must it be? Should it?", "word ".repeat(60));
    let s = select(&mid, &cfg);
    assert!((0.3..=0.7).contains(&s.complexity), "{}", s.complexity);
    assert_eq!(s.strategy, Choice::React);
    let over = AdaptiveConfig {
        strategy_override: Some(Choice::Trm),
        ..AdaptiveConfig::default()
    };
    let s = select("Calculate 1+1", &over);
    assert_eq!(
        (s.strategy, s.task_type, s.complexity, s.source.as_str()),
        (Choice::Trm, TaskType::ManualOverride, 0.5, "override")
    );
}

#[test]
fn adaptive_delegates_per_request_and_keeps_busy_and_call_ids() {
    let cfg = AdaptiveConfig::default();
    let mut m = Adaptive::default();
    let call = only_call(&start(&mut m, &cfg, "r1", "Who wrote Hamlet?"));
    assert!(matches!(m.delegate, Delegate::Cod(_)));
    assert_eq!(call.system_prompt.as_deref(), Some(COD_PROMPT));
    assert_eq!(m.run.phase, Phase::Reasoning);
    let t = start(&mut m, &cfg, "r2", "x");
    assert_eq!(
        t.steps,
        vec![Step::Reject {
            request_id: "r2".into(),
            reason: "busy".into(),
            message: "agent is busy (status: reasoning)".into()
        }]
    );
    let t = reply(&mut m, &cfg, "Shakespeare\n#### Shakespeare");
    assert_eq!(completed(&t).0, json!("Shakespeare"));
    assert_eq!(m.run.phase, Phase::Completed);
    assert_eq!(m.run.usage, usage(10, 5));

    // The next question goes to ReAct, with a tool call.
    let call = only_call(&start(&mut m, &cfg, "r3", "Calculate 6 times 7"));
    assert!(matches!(m.delegate, Delegate::React(_)));
    assert_eq!(call.phase, Phase::AwaitingLlm);
    assert_eq!(call.call_id, "call_r3_2");
    assert_eq!(user_text(&call), "Calculate 6 times 7");
    assert!(m.wants_tools(&cfg));
    let tc = ToolCall {
        id: "tc_1".into(),
        name: "multiply".into(),
        arguments: json!({"a": 6, "b": 7}).into(),
    };
    let t = m.handle(
        &cfg,
        Event::LlmResult {
            call_id: call.call_id.clone(),
            result: Ok(Turn::tool_calls(vec![tc.clone()]).with_usage(usage(4, 2))),
        },
    );
    assert!(matches!(&t.steps[..], [Step::ExecTool { call, .. }] if call == &tc));
    assert_eq!(m.run.phase, Phase::AwaitingTool);
    let t = m.handle(
        &cfg,
        Event::ToolResult {
            call_id: "tc_1".into(),
            result: ResultEnvelope::ok(json!({"product": 42})),
        },
    );
    let call = only_call(&t);
    assert_eq!(call.messages.len(), 3);
    let t = reply(&mut m, &cfg, "42");
    assert_eq!(completed(&t), (json!("42"), Termination::FinalAnswer));
    assert_eq!(m.run.usage, usage(14, 7));
    assert_eq!(m.selection.as_ref().unwrap().strategy, Choice::React);
    round_trip(&m);

    // Cancel goes through the delegate.
    start(&mut m, &cfg, "r4", "Refine my essay");
    assert!(matches!(m.delegate, Delegate::Trm(_)));
    let t = m.handle(
        &cfg,
        Event::Cancel {
            request_id: None,
            reason: "stop".into(),
        },
    );
    assert_eq!(failed(&t).1, Termination::Cancelled);
    assert_eq!(m.run.phase, Phase::Error);
}
