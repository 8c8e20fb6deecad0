//! The reasoning strategies on agents: the directives they return (no
//! actor), then whole requests through the runtime against the scripted
//! model — every strategy answers, busy, cancellation, failures and
//! malformed output, the state checkpoints keep, and swapping strategies
//! on one agent.
#![cfg(feature = "ai")]

use std::time::Duration;

use jido::ai::client::{LlmError, LlmErrorKind, Script, ScriptedModel};
use jido::ai::react::machine::Turn;
use jido::ai::reasoning::adaptive::AdaptiveConfig;
use jido::ai::reasoning::machine::{Event, Machine, Step};
use jido::ai::reasoning::tot::TotConfig;
use jido::ai::reasoning::trm::TrmConfig;
use jido::ai::reasoning::{
    AdaptiveReasoning, AlgorithmOfThoughts, ChainOfDraft, ChainOfThought, GraphOfThoughts,
    Reasoning, TinyRecursive, TreeOfThoughts, commands,
};
use jido::ai::{AiRuntime, Role, ToolSet, Usage};
use jido::prelude::*;
use jido::server::{AwaitOptions, CompletionStatus, Jido, JidoConfig};
use jido::signal::Signal;
use jido::signal::dispatch::{ChannelTarget, DispatchConfig};
use jido::strategy::{Command, SnapshotStatus};
use serde_json::{Value, json};
use tokio::sync::mpsc;

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Look {
    key: String,
}

/// Looks a key up.
#[jido::action]
async fn lookup(p: Look) -> jido::Result<Value> {
    Ok(json!({"value": format!("value of {}", p.key)}))
}

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Inc {
    by: i64,
}

/// Adds to the counter.
#[jido::action]
async fn bump(p: Inc) -> jido::Result<Value> {
    Ok(json!({"counter": p.by}))
}

/// The same agent whatever its strategy: a `counter.bump` route of its own.
struct Bot(DynStrategy);

impl Agent for Bot {
    const NAME: &'static str = "reasoning_bot";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        self.0.clone()
    }
    fn signal_routes(&self) -> Vec<jido::agent::SignalRoute> {
        vec![jido::agent::SignalRoute::action("counter.bump", Bump)]
    }
}

fn custom<T: jido::directive::CustomDirective>(d: &Directive) -> &T {
    match d {
        Directive::Custom(c) => c.downcast_ref::<T>().expect("another custom directive"),
        other => panic!("not a custom directive: {other:?}"),
    }
}

const U: Usage = Usage {
    input_tokens: 3,
    output_tokens: 2,
    total_tokens: 5,
};

/// Scripts answering `answers` in order to the calls machine `M` makes
/// for `query` (each keyed by the call's last user message, as the
/// scripted model reads it), each reporting usage `U`.
fn scripts<M: Machine>(cfg: &M::Config, query: &str, answers: &[&str]) -> Vec<Script> {
    let mut m = M::default();
    let mut t = m.handle(
        cfg,
        Event::Start {
            request_id: "x".into(),
            query: query.into(),
        },
    );
    let mut out = Vec::new();
    for answer in answers {
        let Some(Step::CallLlm(call)) = t.steps.first() else {
            panic!("no call for {answer:?}: {:?}", t.steps)
        };
        let user = call
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .unwrap()
            .content
            .clone();
        out.push(Script::user(user).answer(*answer).usage(U));
        t = m.handle(
            cfg,
            Event::LlmResult {
                call_id: call.call_id.clone(),
                result: Ok(Turn::answer(*answer)),
            },
        );
    }
    out
}

struct Run {
    jido: Jido,
    agent: AgentRef,
    events: mpsc::UnboundedReceiver<Signal>,
    model: ScriptedModel,
}

async fn run<M: Machine>(strategy: Reasoning<M>, scripts: Vec<Script>, id: &str) -> Run {
    let model = ScriptedModel::new(scripts).unwrap();
    let (tx, events) = mpsc::unbounded_channel();
    let strategy = strategy
        .model("scripted")
        .events(DispatchConfig::new(ChannelTarget::unbounded(tx)).unwrap());
    let ai = AiRuntime::new().client(model.clone());
    let jido = Jido::start(ai.register_instance(JidoConfig::new()))
        .await
        .unwrap();
    let agent = jido
        .start_agent(
            AgentState::new(Bot(DynStrategy::new(strategy)), AgentOptions::new().id(id)),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    Run {
        jido,
        agent,
        events,
        model,
    }
}

async fn events_until(rx: &mut mpsc::UnboundedReceiver<Signal>, last: &str) -> Vec<Signal> {
    let mut out = Vec::new();
    loop {
        let s = tokio::time::timeout(Duration::from_secs(600), rx.recv())
            .await
            .expect("no event")
            .expect("closed");
        let done = s.ty() == last;
        out.push(s);
        if done {
            return out;
        }
    }
}

fn usage_of(calls: u64) -> Value {
    json!({"input_tokens": 3 * calls, "output_tokens": 2 * calls, "total_tokens": 5 * calls})
}

/// Runs one request to completion and checks what every strategy
/// promises: the answer, top-level status, the request record, summed
/// usage, the request signals.
async fn answers<M: Machine>(
    strategy: Reasoning<M>,
    scripts: Vec<Script>,
    query: &str,
    expected: Value,
    termination: &str,
    calls: u64,
) -> (Run, Vec<Signal>) {
    let cast = strategy.query(query, Some("r1"));
    let id = format!("strategy-{}", strategy.short_name());
    let mut r = run(strategy, scripts, &id).await;
    r.agent.cast(cast).unwrap();
    let done = r
        .agent
        .await_completion(ChainOfThought::await_options("r1"))
        .await
        .unwrap();
    assert_eq!(
        (done.status, &done.result),
        (CompletionStatus::Completed, &expected)
    );
    let top = r.agent.await_completion(AwaitOptions::new()).await.unwrap();
    assert_eq!(top.result, expected);
    let state = r.agent.state().await.unwrap();
    let record = &state.state()["__strategy__"]["requests"]["r1"];
    assert_eq!(record["termination_reason"], termination);
    assert_eq!(record["usage"], usage_of(calls));
    let trace = events_until(&mut r.events, "ai.request.completed").await;
    assert_eq!(trace[0].ty(), "ai.request.started");
    assert_eq!(
        trace[0].data().unwrap(),
        &json!({"request_id": "r1", "query": query})
    );
    assert_eq!(
        trace.iter().filter(|s| s.ty() == "ai.usage").count() as u64,
        calls
    );
    assert_eq!(
        trace.last().unwrap().data().unwrap(),
        &json!({"request_id": "r1", "result": expected,
                "termination_reason": termination, "usage": usage_of(calls)})
    );
    assert_eq!(r.model.requests().len() as u64, calls);
    (r, trace)
}

// ------------------------------------------------------------- no actor

#[tokio::test]
async fn directives_without_a_runtime() {
    let tools = ToolSet::new().with(Lookup).unwrap();
    let cot = ChainOfThought::new()
        .model("local:tiny")
        .tools(tools.clone())
        .max_tokens(300)
        .temperature(0.0);
    let mut agent = AgentState::new(Bot(DynStrategy::new(cot.clone())), AgentOptions::new());
    let d = agent
        .cmd(cot.query_command("6*7?", Some("r1")), ExecOptions::new())
        .await;
    assert_eq!(d.len(), 1);
    let s = custom::<jido::ai::LlmStream>(&d[0]);
    assert_eq!(s.id, "call_r1_1");
    assert_eq!(
        s.system_prompt.as_deref(),
        Some(jido::ai::reasoning::cot::COT_PROMPT)
    );
    assert_eq!(s.context[0].content, "6*7?");
    // CoT makes no tool calls: its tools are not offered.
    assert!(s.tools.is_empty());
    assert_eq!((s.max_tokens, s.temperature), (300, 0.0));
    assert_eq!(
        serde_json::to_string(&serde_json::to_value(s).unwrap()["metadata"]).unwrap(),
        r#"{"request_id":"r1","iteration":1,"strategy":"cot","phase":"reasoning"}"#
    );
    assert_eq!(s.correlation().strategy.as_deref(), Some("cot"));
    assert_eq!(agent.state()["status"], "running");
    assert_eq!(
        agent.state()["__strategy__"]["requests"]["r1"],
        json!({"query": "6*7?", "status": "pending"})
    );
    assert_eq!(agent.state()["__strategy__"]["module"], "cot");
    assert_eq!(agent.state()["__strategy__"]["run"]["phase"], "reasoning");
    assert_eq!(agent.strategy_snapshot().status, SnapshotStatus::Running);

    // Busy: one EmitRequestError, state untouched.
    let before = agent.state().clone();
    let d = agent
        .cmd(cot.query_command("again", Some("r2")), ExecOptions::new())
        .await;
    let e = custom::<jido::ai::EmitRequestError>(&d[0]);
    assert_eq!(
        (e.request_id.as_str(), e.reason.as_str(), e.message.as_str()),
        ("r2", "busy", "agent is busy (status: reasoning)")
    );
    assert_eq!(agent.state(), &before);

    // Invalid query.
    let d = agent
        .cmd(
            Command::strategy(
                cot.command_name(commands::QUERY),
                json!({"qurey": "x", "request_id": "bad"}),
            ),
            ExecOptions::new(),
        )
        .await;
    let e = custom::<jido::ai::EmitRequestError>(&d[0]);
    assert_eq!(
        (e.request_id.as_str(), e.reason.as_str()),
        ("bad", "invalid_request")
    );

    // ToT offers its tools, runs known ones and answers unknown ones.
    let tot = TreeOfThoughts::new().tools(tools).streaming(false);
    let mut agent = AgentState::new(Bot(DynStrategy::new(tot.clone())), AgentOptions::new());
    let d = agent
        .cmd(tot.query_command("p", Some("t1")), ExecOptions::new())
        .await;
    let g = custom::<jido::ai::LlmGenerate>(&d[0]);
    assert_eq!(g.tools.len(), 1);
    assert_eq!(g.metadata["phase"], "generating");
    let turn = Turn::tool_calls(vec![
        jido::ai::ToolCall {
            id: "a".into(),
            name: "lookup".into(),
            arguments: json!({"key": "k"}).into(),
        },
        jido::ai::ToolCall {
            id: "b".into(),
            name: "teleport".into(),
            arguments: json!({}).into(),
        },
    ]);
    let d = agent
        .cmd(
            tot.llm_result_command("call_t1_1", Ok(turn)),
            ExecOptions::new(),
        )
        .await;
    let exec = custom::<jido::ai::ToolExec>(&d[0]);
    assert_eq!(
        (exec.id.as_str(), exec.request_id.as_deref()),
        ("a", Some("t1"))
    );
    assert_eq!(
        custom::<jido::ai::EmitToolError>(&d[1]).error.kind,
        "not_found"
    );
}

#[tokio::test]
async fn the_machine_survives_a_checkpoint() {
    // A new agent built from the JSON state (no typed extension) picks
    // the request up where it was.
    let cot = ChainOfThought::new();
    let mut a = AgentState::new(Bot(DynStrategy::new(cot.clone())), AgentOptions::new());
    a.cmd(cot.query_command("6*7?", Some("r1")), ExecOptions::new())
        .await;
    let saved: Value = serde_json::to_value(a.state()).unwrap();
    let mut b = AgentState::new(
        Bot(DynStrategy::new(cot.clone())),
        AgentOptions::new().state(saved.as_object().unwrap().clone()),
    );
    assert_eq!(b.strategy_snapshot().status, SnapshotStatus::Running);
    b.cmd(
        cot.llm_result_command("call_r1_1", Ok(Turn::answer("Answer: 42"))),
        ExecOptions::new(),
    )
    .await;
    assert_eq!(b.state()["last_answer"], "42");
    assert_eq!(b.state()["status"], "completed");
    assert_eq!(b.strategy_snapshot().status, SnapshotStatus::Success);
    // A state without the machine's fields reads as an idle machine.
    b.cmd(cot.query_command("next", Some("r2")), ExecOptions::new())
        .await;
    let mut edited = b.state().clone();
    edited.object_mut("__strategy__").remove("run");
    let mut c = AgentState::new(
        Bot(DynStrategy::new(cot.clone())),
        AgentOptions::new().state(edited),
    );
    assert_eq!(c.strategy_snapshot().status, SnapshotStatus::Idle);
    let d = c
        .cmd(cot.query_command("fresh", Some("r3")), ExecOptions::new())
        .await;
    assert_eq!(d[0].kind(), "ai.llm_stream");
}

// ---------------------------------------------------- through the runtime

#[tokio::test(start_paused = true)]
async fn chain_of_thought_and_draft_answer() {
    let q = "What is 6 times 7?";
    let cot = ChainOfThought::new();
    let s = scripts::<jido::ai::reasoning::cot::Cot>(
        cot.config(),
        q,
        &["Step 1: 6 times 7 is 42.\nStep 2: Check: 42 / 7 = 6.\nConclusion: 42"],
    );
    let (r, trace) = answers(cot, s, q, json!("42"), "success", 1).await;
    // The streamed deltas of the running request are forwarded.
    assert!(trace.iter().any(|s| s.ty() == "ai.llm.delta"));
    let snap = r.agent.state().await.unwrap().strategy_snapshot();
    assert_eq!(snap.status, SnapshotStatus::Success);
    assert_eq!(snap.detail("steps").unwrap().as_array().unwrap().len(), 2);
    assert_eq!(snap.detail("termination_reason"), Some(&json!("success")));
    r.jido.shutdown().await;

    let cod = ChainOfDraft::new();
    let s = scripts::<jido::ai::reasoning::cot::Cod>(cod.config(), q, &["6*7\n=42\n#### 42"]);
    let (r, _) = answers(cod, s, q, json!("42"), "success", 1).await;
    let first = &r.model.requests()[0];
    assert_eq!(
        first.messages[0].content,
        jido::ai::reasoning::cot::COD_PROMPT
    );
    r.jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn algorithm_of_thoughts_answers_with_diagnostics() {
    let q = "Use 4 6 4 1 to make 24";
    let aot = AlgorithmOfThoughts::new();
    let s = scripts::<jido::ai::reasoning::aot::Aot>(
        aot.config(),
        q,
        &[
            "Trying a promising first operation:\n1. 4 * 6 : (24, 4, 1)\n- 4 / 4 : (24, 1) 24 = 24 * 1 -> found it!\nBacktracking the solution:\nStep 1: 4 * 6 = 24\nStep 2: 4 / 4 = 1\nStep 3: 24 * 1 = 24\nanswer: 4 * 6 * (4 / 4) = 24",
        ],
    );
    let (r, _) = answers(aot, s, q, json!("4 * 6 * (4 / 4) = 24"), "success", 1).await;
    let snap = r.agent.state().await.unwrap().strategy_snapshot();
    let search = snap.detail("search").unwrap();
    assert_eq!(search["found_solution"], true);
    assert_eq!(search["backtracking_steps"], 3);
    assert_eq!(search["first_operations_considered"], 1);
    r.jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn trm_improves_until_confident() {
    let q = "Why is the sky blue?";
    let trm = TinyRecursive::new();
    let s = scripts::<jido::ai::reasoning::trm::Trm>(
        trm.config(),
        q,
        &[
            "Scattering.",
            "ISSUE: too short\nSCORE: 0.4",
            "Rayleigh scattering of sunlight.",
            "It is Rayleigh scattering.",
            "STRENGTH: right\nSCORE: 0.92",
            "Rayleigh scattering: blue light scatters most.",
        ],
    );
    let (r, _) = answers(
        trm,
        s,
        q,
        json!("Rayleigh scattering of sunlight."),
        "act_threshold",
        6,
    )
    .await;
    let snap = r.agent.state().await.unwrap().strategy_snapshot();
    assert_eq!(snap.detail("confidence_history"), Some(&json!([0.4, 0.92])));
    r.jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn tree_of_thoughts_searches_with_a_tool_round() {
    let q = "Plan a 3-step route";
    let tot = TreeOfThoughts::new()
        .tools(ToolSet::new().with(Lookup).unwrap())
        .configure(|c: &mut TotConfig| c.max_depth = 2);
    let gen_root = r#"{"thoughts":[{"content":"via A"},{"content":"via B"}]}"#;
    let answers_list = [
        gen_root,
        r#"{"scores":{"t1":0.4,"t2":0.8}}"#,
        "1. via B then C\n2. via B then D",
        "t1: 0.9\nt2: 0.3",
    ];
    let mut s = scripts::<jido::ai::reasoning::tot::Tot>(tot.config(), q, &answers_list);
    // The first generation looks something up before answering.
    let first_user = {
        let mut m = jido::ai::reasoning::tot::Tot::default();
        let t = m.handle(
            tot.config(),
            Event::Start {
                request_id: "x".into(),
                query: q.into(),
            },
        );
        let Step::CallLlm(c) = &t.steps[0] else {
            unreachable!()
        };
        c.messages[0].content.clone()
    };
    s[0] = Script::user(first_user)
        .call("lookup", json!({"key": "map"}))
        .usage(U)
        .answer(gen_root)
        .usage(U);
    let (r, trace) = TreeOfThoughtsRun::go(tot, s, q).await;
    let results: Vec<&Signal> = trace
        .iter()
        .filter(|s| s.ty() == "ai.tool.result")
        .collect();
    assert_eq!(results.len(), 1);
    assert_eq!(
        results[0].data().unwrap()["result"]["result"],
        json!({"value": "value of map"})
    );
    // The repeated generation call saw the tool result.
    let second = &r.model.requests()[1];
    assert_eq!(second.messages.last().unwrap().role, Role::Tool);
    assert!(
        second
            .messages
            .last()
            .unwrap()
            .content
            .contains("value of map")
    );
    let snap = r.agent.state().await.unwrap().strategy_snapshot();
    assert_eq!(
        snap.detail("solution_path"),
        Some(&json!(["via B", "via B then C"]))
    );
    assert_eq!(snap.detail("parser_mode"), Some(&json!("regex")));
    r.jido.shutdown().await;
}

/// ToT's run: five model calls (one extra for the tool round).
struct TreeOfThoughtsRun;

impl TreeOfThoughtsRun {
    async fn go(tot: TreeOfThoughts, s: Vec<Script>, q: &str) -> (Run, Vec<Signal>) {
        let mut r = run(tot.clone(), s, "strategy-tot").await;
        r.agent.cast(tot.query(q, Some("r1"))).unwrap();
        let done = r
            .agent
            .await_completion(TreeOfThoughts::await_options("r1"))
            .await
            .unwrap();
        assert_eq!(
            (done.status, done.result),
            (CompletionStatus::Completed, json!("via B then C"))
        );
        let trace = events_until(&mut r.events, "ai.request.completed").await;
        assert_eq!(
            trace.last().unwrap().data().unwrap()["termination_reason"],
            "max_depth"
        );
        assert_eq!(trace.last().unwrap().data().unwrap()["usage"], usage_of(5));
        assert_eq!(r.model.requests().len(), 5);
        (r, trace)
    }
}

#[tokio::test(start_paused = true)]
async fn graph_of_thoughts_aggregates() {
    let q = "How should a city cut traffic?";
    let got = GraphOfThoughts::new();
    let s = scripts::<jido::ai::reasoning::got::Got>(
        got.config(),
        q,
        &[
            "1. Congestion pricing\n2. Better buses",
            "CONNECTION: n1 -> n2 : funding",
            "Answer: Price roads to fund buses.",
            "1. Add bike lanes",
            "n4: 0.9",
            "Answer: Price roads, fund buses, add bike lanes.",
        ],
    );
    let (r, _) = answers(
        got,
        s,
        q,
        json!("Price roads, fund buses, add bike lanes."),
        "success",
        6,
    )
    .await;
    let snap = r.agent.state().await.unwrap().strategy_snapshot();
    let edges = snap.detail("edges").unwrap().as_array().unwrap();
    assert_eq!(edges.iter().filter(|e| e["kind"] == "connects").count(), 1);
    assert_eq!(snap.detail("rounds"), Some(&json!(2)));
    r.jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn adaptive_picks_per_question() {
    // A simple question goes to Chain of Draft.
    let q = "Who wrote Hamlet?";
    let adaptive = AdaptiveReasoning::new();
    let s = vec![
        Script::user(q)
            .answer("Shakespeare #### Shakespeare")
            .usage(U),
    ];
    let (r, _) = answers(adaptive, s, q, json!("Shakespeare"), "success", 1).await;
    let snap = r.agent.state().await.unwrap().strategy_snapshot();
    assert_eq!(snap.detail("selection").unwrap()["strategy"], "cod");
    r.jido.shutdown().await;

    // A tool question goes to ReAct, which calls the tool.
    let q = "Look up the key k";
    let adaptive = AdaptiveReasoning::new().tools(ToolSet::new().with(Lookup).unwrap());
    let s = vec![
        Script::user(q)
            .call("lookup", json!({"key": "k"}))
            .usage(U)
            .answer("value of k")
            .usage(U),
    ];
    let (r, trace) = answers(adaptive, s, q, json!("value of k"), "final_answer", 2).await;
    assert_eq!(
        trace.iter().filter(|s| s.ty() == "ai.tool.result").count(),
        1
    );
    assert_eq!(r.model.requests()[0].tools.len(), 1);
    let snap = r.agent.state().await.unwrap().strategy_snapshot();
    assert_eq!(snap.detail("selection").unwrap()["strategy"], "react");
    r.jido.shutdown().await;

    // A manual override.
    let q = "Look up the key k";
    let adaptive = AdaptiveReasoning::new().configure(|c: &mut AdaptiveConfig| {
        c.strategy_override = Some(jido::ai::reasoning::adaptive::Choice::Cot)
    });
    let s = vec![Script::user(q).answer("Answer: k").usage(U)];
    let (r, _) = answers(adaptive, s, q, json!("k"), "success", 1).await;
    r.jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn busy_cancel_failure_and_malformed_output() {
    let q = "slow question";
    let mut s = vec![Script::user(q).stall()];
    s.push(
        Script::user("failing question")
            .fail(LlmError::new(LlmErrorKind::Status(500), "upstream down")),
    );
    let cot = ChainOfThought::new();
    let mut r = run(cot.clone(), s, "strategy-busy").await;
    r.agent.cast(cot.query(q, Some("r1"))).unwrap();
    events_until(&mut r.events, "ai.request.started").await;
    r.agent.cast(cot.query("other", Some("r2"))).unwrap();
    let err = events_until(&mut r.events, "ai.request.error").await;
    assert_eq!(
        err.last().unwrap().data().unwrap(),
        &json!({"request_id": "r2", "reason": "busy", "message": "agent is busy (status: reasoning)"})
    );
    let state = r.agent.state().await.unwrap();
    assert_eq!(
        state.state()["__strategy__"]["requests"]["r2"]["error"]["type"],
        "rejected"
    );
    assert_eq!(
        state.state()["__strategy__"]["requests"]["r1"]["status"],
        "pending"
    );

    // Cancelling another id does nothing; the running one fails.
    r.agent.cast(cot.cancel(Some("nope"), None)).unwrap();
    r.agent
        .cast(cot.cancel(Some("r1"), Some("enough")))
        .unwrap();
    let done = r
        .agent
        .await_completion(ChainOfThought::await_options("r1"))
        .await
        .unwrap();
    assert_eq!(done.status, CompletionStatus::Failed);
    assert_eq!(done.result["type"], "cancelled");
    assert_eq!(done.result["details"]["reason"], "enough");
    let failed = events_until(&mut r.events, "ai.request.failed").await;
    assert_eq!(
        failed.last().unwrap().data().unwrap()["termination_reason"],
        "cancelled"
    );

    // A model error fails the request with its envelope.
    r.agent
        .cast(cot.query("failing question", Some("r3")))
        .unwrap();
    let done = r
        .agent
        .await_completion(ChainOfThought::await_options("r3"))
        .await
        .unwrap();
    assert_eq!(done.status, CompletionStatus::Failed);
    assert_eq!(done.result["message"], "upstream down");
    let state = r.agent.state().await.unwrap();
    assert_eq!(state.state()["status"], "failed");
    assert_eq!(state.strategy_snapshot().status, SnapshotStatus::Failure);
    r.jido.shutdown().await;

    // ToT: unreadable thoughts, repaired once, still unreadable: failed.
    let tot = TreeOfThoughts::new();
    let q = "p";
    let mut m = jido::ai::reasoning::tot::Tot::default();
    let t = m.handle(
        tot.config(),
        Event::Start {
            request_id: "x".into(),
            query: q.into(),
        },
    );
    let Step::CallLlm(c) = &t.steps[0] else {
        unreachable!()
    };
    let gen_user = c.messages[0].content.clone();
    let t = m.handle(
        tot.config(),
        Event::LlmResult {
            call_id: c.call_id.clone(),
            result: Ok(Turn::answer("no idea")),
        },
    );
    let Step::CallLlm(c) = &t.steps[0] else {
        unreachable!()
    };
    let repair_user = c.messages.last().unwrap().content.clone();
    let s = vec![
        Script::user(gen_user).answer("no idea"),
        Script::user(repair_user).answer("still no idea"),
    ];
    let mut r = run(tot.clone(), s, "strategy-tot-bad").await;
    r.agent.cast(tot.query(q, Some("r1"))).unwrap();
    let done = r
        .agent
        .await_completion(TreeOfThoughts::await_options("r1"))
        .await
        .unwrap();
    assert_eq!(done.status, CompletionStatus::Failed);
    assert_eq!(done.result["type"], "thoughts_parse_failed");
    assert_eq!(done.result["details"]["answer"], "still no idea");
    let _ = events_until(&mut r.events, "ai.request.failed").await;
    r.jido.shutdown().await;
}

/// The same agent, its own route and the same checks under every
/// strategy: only the query signal changes.
#[tokio::test(start_paused = true)]
async fn swapping_strategies_keeps_the_agents_actions() {
    let q = "Define entropy.";
    let answer = "Answer: disorder";
    let strategies: Vec<(DynStrategy, Signal, Vec<Script>)> = vec![
        (
            DynStrategy::new(ChainOfThought::new()),
            ChainOfThought::new().query(q, Some("r1")),
            vec![Script::user(q).answer(answer)],
        ),
        (
            DynStrategy::new(ChainOfDraft::new()),
            ChainOfDraft::new().query(q, Some("r1")),
            vec![Script::user(q).answer(answer)],
        ),
        (
            DynStrategy::new(AlgorithmOfThoughts::new()),
            AlgorithmOfThoughts::new().query(q, Some("r1")),
            scripts::<jido::ai::reasoning::aot::Aot>(&Default::default(), q, &["answer: disorder"]),
        ),
        (
            DynStrategy::new(
                TinyRecursive::new().configure(|c: &mut TrmConfig| c.max_supervision_steps = 1),
            ),
            TinyRecursive::new().query(q, Some("r1")),
            scripts::<jido::ai::reasoning::trm::Trm>(
                &TrmConfig {
                    max_supervision_steps: 1,
                    ..TrmConfig::default()
                },
                q,
                &["disorder", "SCORE: 0.5", "disorder, measured"],
            ),
        ),
        (
            DynStrategy::new(AdaptiveReasoning::new()),
            AdaptiveReasoning::new().query(q, Some("r1")),
            vec![Script::user(q).answer("#### disorder")],
        ),
    ];
    for (i, (strategy, query, scripts)) in strategies.into_iter().enumerate() {
        let model = ScriptedModel::new(scripts).unwrap();
        let ai = AiRuntime::new()
            .client(model)
            .model_aliases([("fast", "scripted")]);
        let jido = Jido::start(ai.register_instance(JidoConfig::new()))
            .await
            .unwrap();
        let agent = jido
            .start_agent(
                AgentState::new(Bot(strategy), AgentOptions::new().id(format!("swap-{i}"))),
                ServerOptions::new(),
            )
            .await
            .unwrap();
        agent
            .call(Signal::new("counter.bump", json!({"by": 2})))
            .await
            .unwrap();
        assert_eq!(agent.state().await.unwrap().state()["counter"], 2, "{i}");
        agent.cast(query).unwrap();
        let done = agent
            .await_completion(AwaitOptions::new().timeout(Duration::from_secs(60)))
            .await
            .unwrap();
        assert_eq!(done.status, CompletionStatus::Completed, "{i}");
        assert!(
            done.result.as_str().unwrap().starts_with("disorder"),
            "{i}: {}",
            done.result
        );
        jido.shutdown().await;
    }
}
