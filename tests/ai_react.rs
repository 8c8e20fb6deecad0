//! The ReAct strategy on an agent: the directives it returns (no actor),
//! then whole requests through the runtime against a scripted fake model:
//! parallel tools in call order, busy, cancellation, ToolExec retries, a
//! terminal signal on every failure path, follow-ups, and AI calls
//! dropped when their agent stops.
#![cfg(feature = "ai")]

mod ai_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use ai_support::{Fake, Reply, Step};
use futures::future::BoxFuture;
use jido::ai::react::machine::Turn;
use jido::ai::react::{OutputSchema, ReAct, commands};
use jido::ai::{
    AiRuntime, EmbedRequest, EmbedResponse, FinishReason, LlmClient, LlmError, LlmErrorKind,
    LlmEvent, LlmEventStream, LlmRequest, LlmResponse, ToolCall, ToolSet, Usage,
};
use jido::prelude::*;
use jido::server::{AwaitOptions, CompletionStatus, Jido, JidoConfig};
use jido::signal::Signal;
use jido::signal::dispatch::{ChannelTarget, DispatchConfig};
use jido::strategy::Command;
use serde_json::{Value, json};
use tokio::sync::mpsc;

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

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Look {
    key: String,
    /// Virtual milliseconds to take.
    #[serde(default)]
    delay_ms: u64,
}

/// Looks a key up.
#[jido::action]
async fn lookup(p: Look) -> jido::Result<Value> {
    tokio::time::sleep(Duration::from_millis(p.delay_ms)).await;
    Ok(json!({"value": format!("value of {}", p.key)}))
}

struct Bot(ReAct);

impl Agent for Bot {
    const NAME: &'static str = "react_bot";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(self.0.clone())
    }
}

fn tools() -> ToolSet {
    ToolSet::new().with(Multiply).unwrap().with(Lookup).unwrap()
}

fn tc(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

fn resp(
    text: &str,
    calls: Vec<ToolCall>,
    finish: FinishReason,
    usage: Option<Usage>,
) -> LlmResponse {
    LlmResponse {
        model: "fake".into(),
        text: text.into(),
        thinking: None,
        tool_calls: calls,
        finish_reason: finish,
        usage,
    }
}

fn usage(i: u64, o: u64) -> Usage {
    Usage {
        input_tokens: i,
        output_tokens: o,
        total_tokens: i + o,
    }
}

// ------------------------------------------------------------- no actor

fn custom<T: jido::directive::CustomDirective>(d: &Directive) -> &T {
    match d {
        Directive::Custom(c) => c.downcast_ref::<T>().expect("another custom directive"),
        other => panic!("not a custom directive: {other:?}"),
    }
}

#[tokio::test]
async fn model_calls_share_the_conversation_and_the_tool_arguments() {
    let react = ReAct::new().model("local:tiny").tools(tools());
    let mut agent = AgentState::new(Bot(react), AgentOptions::new());
    let d = agent
        .cmd(ReAct::query_command("6*7?", Some("r1")), ExecOptions::new())
        .await;
    let first = custom::<jido::ai::LlmStream>(&d[0]).context.clone();
    assert_eq!(first, vec![jido::ai::Message::user("6*7?")]);
    let call = tc("t1", "multiply", json!({"a": 6, "b": 7}));
    let args = Arc::clone(&call.arguments);
    let d = agent
        .cmd(
            Command::strategy(
                commands::LLM_RESULT,
                ReAct::llm_response_payload("call_r1_1", Ok(Turn::tool_calls(vec![call]))),
            ),
            ExecOptions::new(),
        )
        .await;
    // The tool runs with the model's arguments, shared, not copied.
    let exec = custom::<jido::ai::ToolExec>(&d[0]);
    assert_eq!(*exec.arguments, json!({"a": 6, "b": 7}));
    let d = agent
        .cmd(
            Command::strategy(
                commands::TOOL_RESULT,
                json!({
                    "call_id": "t1", "tool_name": "multiply",
                    "result": {"status": "ok", "result": {"product": 42}, "effects": []},
                    "metadata": {},
                }),
            ),
            ExecOptions::new(),
        )
        .await;
    let second = custom::<jido::ai::LlmStream>(&d[0]).context.clone();
    assert_eq!(second.len(), 3);
    assert_eq!(second[1].tool_calls[0].arguments, args);
    // The second call's history is the first call's messages themselves.
    let (a, b) = (
        first.shared().next().unwrap(),
        second.shared().next().unwrap(),
    );
    assert!(Arc::ptr_eq(a, b));
    // A push onto one call's list leaves the other as it was.
    let mut more = second.clone();
    more.push(jido::ai::Message::user("next"));
    assert_eq!((second.len(), more.len()), (3, 4));
}

#[tokio::test]
async fn directives_of_a_request_without_a_runtime() {
    let react = ReAct::new()
        .model("local:tiny")
        .system_prompt("Use tools.")
        .tools(tools())
        .tool_timeout_ms(500)
        .tool_max_retries(2)
        .tool_backoff_ms(10);
    let mut agent = AgentState::new(Bot(react), AgentOptions::new());
    assert_eq!(
        agent.strategy_snapshot().status,
        jido::strategy::SnapshotStatus::Idle
    );

    let d = agent
        .cmd(
            ReAct::query_command("6*7 and key k?", Some("r1")),
            ExecOptions::new(),
        )
        .await;
    assert_eq!(d.len(), 1);
    let stream = custom::<jido::ai::LlmStream>(&d[0]);
    assert_eq!(stream.id, "call_r1_1");
    assert_eq!(stream.system_prompt.as_deref(), Some("Use tools."));
    assert_eq!(stream.model, jido::ai::ModelRef::spec("local:tiny"));
    assert_eq!(
        stream
            .tools
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["multiply", "lookup"]
    );
    // Typed correlation; the data form shows it as `metadata`.
    assert!(stream.metadata.is_empty());
    assert_eq!(
        stream.correlation(),
        jido::ai::signals::Correlation::new()
            .request_id("r1")
            .iteration(1)
            .strategy("react")
    );
    assert_eq!(
        serde_json::to_value(stream).unwrap()["metadata"],
        json!({"request_id": "r1", "iteration": 1, "strategy": "react"})
    );
    assert_eq!(agent.state()["status"], "running");
    assert_eq!(agent.state()["last_query"], "6*7 and key k?");
    assert_eq!(
        agent.state()["__strategy__"]["requests"]["r1"],
        json!({"query": "6*7 and key k?", "status": "pending"})
    );

    // A second request is rejected; the state is untouched.
    let before = agent.state().clone();
    let d = agent
        .cmd(
            ReAct::query_command("again", Some("r2")),
            ExecOptions::new(),
        )
        .await;
    let rejected = custom::<jido::ai::EmitRequestError>(&d[0]);
    assert_eq!(
        (
            rejected.request_id.as_str(),
            rejected.reason.as_str(),
            rejected.message.as_str()
        ),
        ("r2", "busy", "agent is busy (status: awaiting_llm)")
    );
    assert_eq!(agent.state(), &before);

    // Tool calls: known tools run directly with the strategy's settings,
    // an unknown one is answered with EmitToolError.
    let turn = Turn::tool_calls(vec![
        tc("t1", "multiply", json!({"a": 6, "b": 7})),
        tc("t2", "teleport", json!({})),
    ]);
    let d = agent
        .cmd(
            Command::strategy(
                commands::LLM_RESULT,
                ReAct::llm_response_payload("call_r1_1", Ok(turn)),
            ),
            ExecOptions::new(),
        )
        .await;
    assert_eq!(d.len(), 2);
    let exec = custom::<jido::ai::ToolExec>(&d[0]);
    assert_eq!(
        (exec.id.as_str(), exec.tool_name.as_str()),
        ("t1", "multiply")
    );
    assert_eq!(exec.action.as_ref().map(|a| a.name()), Some("multiply"));
    assert_eq!(
        (exec.timeout_ms, exec.max_retries, exec.retry_backoff_ms),
        (Some(500), 2, 10)
    );
    assert_eq!(
        (exec.request_id.as_deref(), exec.iteration),
        (Some("r1"), Some(1))
    );
    let unknown = custom::<jido::ai::EmitToolError>(&d[1]);
    assert_eq!(unknown.error.kind, "not_found");
    assert_eq!(unknown.metadata["request_id"], "r1");

    // Non-streaming configuration asks with LlmGenerate.
    let mut agent = AgentState::new(Bot(ReAct::new().streaming(false)), AgentOptions::new());
    let d = agent
        .cmd(ReAct::query_command("q", None), ExecOptions::new())
        .await;
    let generate = custom::<jido::ai::LlmGenerate>(&d[0]);
    assert_eq!(generate.model, jido::ai::ModelRef::alias("fast"));
    // A generated request id.
    let request_id = generate.correlation().request_id.unwrap();
    assert_eq!(request_id.len(), 36);
}

#[tokio::test]
async fn invalid_queries_are_rejected_and_requests_keep_the_latest() {
    let mut agent = AgentState::new(Bot(ReAct::new().request_history(2)), AgentOptions::new());
    let d = agent
        .cmd(
            Command::strategy(commands::QUERY, json!({"request_id": "bad", "qurey": "x"})),
            ExecOptions::new(),
        )
        .await;
    let e = custom::<jido::ai::EmitRequestError>(&d[0]);
    assert_eq!(
        (e.request_id.as_str(), e.reason.as_str()),
        ("bad", "invalid_request")
    );
    assert!(
        e.message
            .starts_with("invalid query: unknown field `qurey`"),
        "{}",
        e.message
    );

    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        agent
            .cmd(ReAct::query_command("q", Some(id)), ExecOptions::new())
            .await;
        let call = format!("call_{id}_{}", i + 1);
        agent
            .cmd(
                Command::strategy(
                    commands::LLM_RESULT,
                    ReAct::llm_response_payload(&call, Ok(Turn::answer(*id))),
                ),
                ExecOptions::new(),
            )
            .await;
    }
    let requests = &agent.state()["__strategy__"]["requests"];
    let ids: Vec<&str> = requests.as_object().unwrap().keys().collect();
    assert_eq!(ids, ["b", "c"]);
    assert_eq!(requests["c"]["result"], "c");
    assert_eq!(requests["c"]["termination_reason"], "final_answer");
    assert_eq!(agent.state()["last_answer"], "c");
    let snap = agent.strategy_snapshot();
    assert!(snap.done);
    assert_eq!(snap.detail("conversation_length"), Some(&json!(6)));
}

// ------------------------------------------------------------ runtime

struct Run {
    jido: Jido,
    agent: AgentRef,
    events: mpsc::UnboundedReceiver<Signal>,
}

async fn run(ai: AiRuntime, react: ReAct, id: &str) -> Run {
    let (tx, events) = mpsc::unbounded_channel();
    let react = react.events(DispatchConfig::new(ChannelTarget::unbounded(tx)).unwrap());
    let jido = Jido::start(ai.register_instance(JidoConfig::new()))
        .await
        .unwrap();
    let agent = jido
        .start_agent(
            AgentState::new(Bot(react), AgentOptions::new().id(id)),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    Run {
        jido,
        agent,
        events,
    }
}

/// Event signals until (and with) the first of type `last`.
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

fn types(signals: &[Signal]) -> Vec<&str> {
    signals.iter().map(Signal::ty).collect()
}

fn stream_of(resp: LlmResponse, deltas: &[&str]) -> Reply {
    let mut steps: Vec<Step> = deltas
        .iter()
        .map(|d| Step::Event(LlmEvent::Content((*d).into())))
        .collect();
    steps.push(Step::Event(LlmEvent::Done(resp)));
    Reply::Stream(steps)
}

#[tokio::test(start_paused = true)]
async fn a_request_with_parallel_tools_answers_in_call_order() {
    let fake = Fake::new(vec![
        stream_of(
            resp(
                "",
                vec![
                    // The slow one first: its result still goes first.
                    tc("t1", "lookup", json!({"key": "k", "delay_ms": 50})),
                    tc("t2", "multiply", json!({"a": "6", "b": 7})),
                ],
                FinishReason::ToolCalls,
                Some(usage(10, 3)),
            ),
            &[],
        ),
        stream_of(
            resp(
                "42, value of k",
                vec![],
                FinishReason::Stop,
                Some(usage(20, 4)),
            ),
            &["42, ", "value of k"],
        ),
    ]);
    let ai = AiRuntime::new().client(fake.clone());
    let mut r = run(
        ai,
        ReAct::new().model("fake:1").tools(tools()),
        "react-parallel",
    )
    .await;
    r.agent
        .cast(ReAct::query("6*7 and k?", Some("r1")))
        .unwrap();
    let done = r
        .agent
        .await_completion(ReAct::await_options("r1"))
        .await
        .unwrap();
    assert_eq!(
        (done.status, done.result),
        (CompletionStatus::Completed, json!("42, value of k"))
    );
    let top = r.agent.await_completion(AwaitOptions::new()).await.unwrap();
    assert_eq!(top.result, json!("42, value of k"));

    let trace = events_until(&mut r.events, "ai.request.completed").await;
    let t = types(&trace);
    assert_eq!(t[0], "ai.request.started");
    assert_eq!(
        trace[0].data().unwrap(),
        &json!({"request_id": "r1", "query": "6*7 and k?"})
    );
    assert_eq!(t.iter().filter(|x| **x == "ai.tool.started").count(), 2);
    assert_eq!(t.iter().filter(|x| **x == "ai.tool.result").count(), 2);
    assert_eq!(t.iter().filter(|x| **x == "ai.usage").count(), 2);
    let deltas: Vec<&Value> = trace
        .iter()
        .filter(|s| s.ty() == "ai.llm.delta")
        .map(|s| &s.data().unwrap()["delta"])
        .collect();
    assert_eq!(deltas, [&json!("42, "), &json!("value of k")]);
    // The fast multiply finished first.
    let results: Vec<&Value> = trace
        .iter()
        .filter(|s| s.ty() == "ai.tool.result")
        .map(|s| &s.data().unwrap()["call_id"])
        .collect();
    assert_eq!(results, [&json!("t2"), &json!("t1")]);
    assert_eq!(
        trace.last().unwrap().data().unwrap(),
        &json!({"request_id": "r1", "result": "42, value of k", "termination_reason": "final_answer",
                "usage": {"input_tokens": 30, "output_tokens": 7, "total_tokens": 37}})
    );

    // The second model call saw the results in call order.
    let second = &fake.requests()[1];
    let msgs = second["messages"].as_array().unwrap();
    assert_eq!(msgs[0], json!({"role": "user", "content": "6*7 and k?"}));
    assert_eq!(msgs[2]["tool_call_id"], "t1");
    assert_eq!(
        msgs[2]["content"],
        r#"{"ok":true,"result":{"value":"value of k"}}"#
    );
    assert_eq!(msgs[3]["tool_call_id"], "t2");
    assert_eq!(msgs[3]["content"], r#"{"ok":true,"result":{"product":42}}"#);
    assert_eq!(second["tools"].as_array().unwrap().len(), 2);
    r.jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn busy_cancel_and_a_follow_up() {
    let fake = Fake::new(vec![
        Reply::Stream(vec![Step::Stall]),
        stream_of(resp("second answer", vec![], FinishReason::Stop, None), &[]),
    ]);
    let ai = AiRuntime::new().client(fake.clone());
    let mut r = run(ai.clone(), ReAct::new().model("m"), "react-busy").await;
    r.agent
        .call(ReAct::query("first", Some("r1")))
        .await
        .unwrap();
    r.agent.cast(ReAct::query("second", Some("r2"))).unwrap();
    let rejected = r
        .agent
        .await_completion(ReAct::await_options("r2"))
        .await
        .unwrap();
    assert_eq!(rejected.status, CompletionStatus::Failed);
    assert_eq!(
        rejected.result,
        json!({"type": "rejected", "message": "agent is busy (status: awaiting_llm)",
               "details": {"reason": "busy"}, "retryable": false})
    );
    // r1 still runs: its stream is open.
    let trace = events_until(&mut r.events, "ai.request.error").await;
    assert_eq!(types(&trace), ["ai.request.started", "ai.request.error"]);
    assert_eq!(ai.running(&r.agent), 1);

    r.agent
        .cast(Signal::new(
            "ai.react.cancel",
            json!({"request_id": "r1", "reason": "changed my mind"}),
        ))
        .unwrap();
    let failed = r
        .agent
        .await_completion(ReAct::await_options("r1"))
        .await
        .unwrap();
    assert_eq!(failed.status, CompletionStatus::Failed);
    assert_eq!(failed.result["type"], "cancelled");
    assert_eq!(failed.result["details"]["reason"], "changed my mind");
    let trace = events_until(&mut r.events, "ai.request.failed").await;
    assert_eq!(
        trace.last().unwrap().data().unwrap()["termination_reason"],
        "cancelled"
    );
    // The provider stream was cancelled too.
    for _ in 0..100 {
        if ai.running(&r.agent) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(ai.running(&r.agent), 0);

    // A follow-up continues the conversation (the cancelled turn included).
    r.agent
        .call(ReAct::query("second try", Some("r3")))
        .await
        .unwrap();
    let done = r
        .agent
        .await_completion(ReAct::await_options("r3"))
        .await
        .unwrap();
    assert_eq!(done.result, json!("second answer"));
    let msgs = fake.requests()[1]["messages"].clone();
    assert_eq!(
        msgs,
        json!([{"role": "user", "content": "first"}, {"role": "user", "content": "second try"}])
    );
    let st = r.agent.state().await.unwrap();
    assert_eq!(st.state()["last_request_id"], "r3");
    assert_eq!(st.state()["status"], "completed");
    r.jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn tool_exec_retries_a_flaky_tool() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let flaky = {
        let attempts = Arc::clone(&attempts);
        jido::action_fn("flaky", move |_: Value, _: Context| {
            let n = attempts.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                if n == 1 {
                    Err(jido::Error::execution("temporarily down"))
                } else {
                    Ok(json!({"attempt": n}))
                }
            }
        })
    };
    let fake = Fake::new(vec![
        Reply::Answer(resp(
            "",
            vec![tc("t1", "flaky", json!({}))],
            FinishReason::ToolCalls,
            None,
        )),
        Reply::Answer(resp("ok", vec![], FinishReason::Stop, None)),
    ]);
    let react = ReAct::new()
        .model("m")
        .streaming(false)
        .tools(ToolSet::new().with(flaky).unwrap())
        .tool_max_retries(1)
        .tool_backoff_ms(100);
    let mut r = run(AiRuntime::new().client(fake.clone()), react, "react-retry").await;
    r.agent.cast(ReAct::query("go", Some("r1"))).unwrap();
    let done = r
        .agent
        .await_completion(ReAct::await_options("r1"))
        .await
        .unwrap();
    assert_eq!(done.result, json!("ok"));
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    let msgs = &fake.requests()[1]["messages"];
    assert_eq!(msgs[2]["content"], r#"{"ok":true,"result":{"attempt":2}}"#);
    let _ = events_until(&mut r.events, "ai.request.completed").await;
    r.jido.shutdown().await;
}

/// Runs one request against `replies` and returns its terminal event.
async fn terminal_of(replies: Vec<Reply>, react: ReAct, id: &str) -> Signal {
    let fake = Fake::new(replies);
    let mut r = run(
        AiRuntime::new()
            .client(fake)
            .llm_timeout(Duration::from_secs(5)),
        react.model("m").tools(tools()),
        id,
    )
    .await;
    r.agent.cast(ReAct::query("q", Some("r1"))).unwrap();
    let trace = loop {
        let s = tokio::time::timeout(Duration::from_secs(600), r.events.recv())
            .await
            .unwrap()
            .unwrap();
        if matches!(s.ty(), "ai.request.completed" | "ai.request.failed") {
            break s;
        }
    };
    let st = r.agent.state().await.unwrap();
    let status = if trace.ty() == "ai.request.completed" {
        "completed"
    } else {
        "failed"
    };
    assert_eq!(st.state()["status"], status);
    assert_eq!(
        st.state()["__strategy__"]["requests"]["r1"]["status"],
        status
    );
    r.jido.shutdown().await;
    trace
}

#[tokio::test(start_paused = true)]
async fn every_failure_path_ends_in_a_terminal_signal() {
    // Provider error.
    let s = terminal_of(
        vec![Reply::Fail(LlmError::new(
            LlmErrorKind::Status(500),
            "boom",
        ))],
        ReAct::new(),
        "react-f1",
    )
    .await;
    assert_eq!(s.ty(), "ai.request.failed");
    assert_eq!(s.data().unwrap()["error"]["message"], "boom");
    assert_eq!(s.data().unwrap()["termination_reason"], "error");

    // A stalled stream times out.
    let s = terminal_of(
        vec![Reply::Stream(vec![Step::Stall])],
        ReAct::new(),
        "react-f2",
    )
    .await;
    assert_eq!(s.data().unwrap()["error"]["type"], "timeout");
    assert_eq!(s.data().unwrap()["error"]["message"], "llm stream stalled");

    // A blank answer cut by the token limit.
    let s = terminal_of(
        vec![stream_of(resp("", vec![], FinishReason::Length, None), &[])],
        ReAct::new(),
        "react-f3",
    )
    .await;
    assert_eq!(s.data().unwrap()["error"]["type"], "incomplete_response");

    // A structured answer still invalid after its repair turn.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Out {
        n: i64,
    }
    let fake = Fake::new(vec![
        Reply::Answer(resp("nope", vec![], FinishReason::Stop, None)),
        Reply::Answer(resp("{}", vec![], FinishReason::Stop, None)),
    ]);
    let r = run(
        AiRuntime::new().client(fake.clone()),
        ReAct::new()
            .model("m")
            .streaming(false)
            .output(OutputSchema::of::<Out>("out")),
        "react-f4",
    )
    .await;
    r.agent
        .cast(Signal::new(
            "ai.react.query",
            json!({"query": "n?", "request_id": "r1", "output_schema": "out"}),
        ))
        .unwrap();
    let failed = r
        .agent
        .await_completion(ReAct::await_options("r1"))
        .await
        .unwrap();
    assert_eq!(failed.result["type"], "invalid_output");
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(fake.requests()[0]["response_format"]["name"], "out");
    r.jido.shutdown().await;

    // Max iterations is a completion.
    let looping = |i: usize| {
        Reply::Stream(vec![Step::Event(LlmEvent::Done(resp(
            "",
            vec![tc(&format!("t{i}"), "multiply", json!({"a": 1, "b": 1}))],
            FinishReason::ToolCalls,
            None,
        )))])
    };
    let s = terminal_of(
        vec![looping(1), looping(2)],
        ReAct::new().max_iterations(2),
        "react-f5",
    )
    .await;
    assert_eq!(s.ty(), "ai.request.completed");
    assert_eq!(
        s.data().unwrap()["result"],
        "Maximum iterations reached without a final answer."
    );
    assert_eq!(s.data().unwrap()["termination_reason"], "max_iterations");
}

#[tokio::test(start_paused = true)]
async fn structured_output_answers_with_json() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct City {
        name: String,
        population: u64,
    }
    let fake = Fake::new(vec![
        Reply::Answer(resp("Oslo, about 700k", vec![], FinishReason::Stop, None)),
        Reply::Answer(resp(
            r#"{"name": "Oslo", "population": 709000}"#,
            vec![],
            FinishReason::Stop,
            None,
        )),
    ]);
    let mut r = run(
        AiRuntime::new().client(fake.clone()),
        ReAct::new()
            .model("m")
            .streaming(false)
            .output(OutputSchema::of::<City>("city")),
        "react-json",
    )
    .await;
    r.agent
        .cast(Signal::new(
            "ai.react.query",
            json!({"query": "Capital of Norway?", "request_id": "r1", "output_schema": "city"}),
        ))
        .unwrap();
    let done = r.agent.await_completion(AwaitOptions::new()).await.unwrap();
    assert_eq!(done.result, json!({"name": "Oslo", "population": 709000}));
    let repair = &fake.requests()[1]["messages"][2];
    assert_eq!(repair["role"], "user");
    assert!(
        repair["content"]
            .as_str()
            .unwrap()
            .starts_with("Answer is not valid json")
    );
    let _ = events_until(&mut r.events, "ai.request.completed").await;
    r.jido.shutdown().await;
}

/// A model whose stream never answers and records when it is dropped.
#[derive(Clone, Default)]
struct Hanging {
    dropped: Arc<AtomicBool>,
}

struct OnDrop(Arc<AtomicBool>);
impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl LlmClient for Hanging {
    fn generate(&self, _: LlmRequest) -> BoxFuture<'static, Result<LlmResponse, LlmError>> {
        let guard = OnDrop(Arc::clone(&self.dropped));
        Box::pin(async move {
            let _guard = guard;
            std::future::pending().await
        })
    }
    fn stream(&self, _: LlmRequest) -> BoxFuture<'static, Result<LlmEventStream, LlmError>> {
        let guard = OnDrop(Arc::clone(&self.dropped));
        Box::pin(async move {
            let _guard = guard;
            std::future::pending().await
        })
    }
    fn embed(&self, _: EmbedRequest) -> BoxFuture<'static, Result<EmbedResponse, LlmError>> {
        Box::pin(async { Err(LlmError::new(LlmErrorKind::Other, "no")) })
    }
}

#[tokio::test(start_paused = true)]
async fn stopping_an_agent_drops_its_running_ai_calls() {
    let model = Hanging::default();
    let ai = AiRuntime::new()
        .client(model.clone())
        .llm_timeout(Duration::from_secs(3600));
    let r = run(ai.clone(), ReAct::new().model("m"), "react-stop").await;
    r.agent.call(ReAct::query("q", Some("r1"))).await.unwrap();
    for _ in 0..100 {
        if ai.running(&r.agent) == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(ai.running(&r.agent), 1);
    assert!(!model.dropped.load(Ordering::SeqCst));
    r.agent
        .stop(jido::directive::StopReason::Normal)
        .await
        .unwrap();
    for _ in 0..100 {
        if ai.running(&r.agent) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Long before the one-hour timeout.
    assert_eq!(ai.running(&r.agent), 0);
    assert!(model.dropped.load(Ordering::SeqCst));
    r.jido.shutdown().await;
}

/// A structured answer whose check panics: `Deserialize` of this type
/// panics, so the ReAct transition that checks the answer panics while
/// the machine is lent to it.
struct Boom;

impl<'de> serde::Deserialize<'de> for Boom {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        panic!("boom in the check")
    }
}

impl schemars::JsonSchema for Boom {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Boom".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "object"})
    }
}

/// A ReAct transition that panics while the machine is lent to it (the
/// `Lent` placeholder in the published `__strategy__` node) fails the
/// request it ran with an `execution_error`, and the machine starts over:
/// `__strategy__` reads an idle machine and the failed request (never the
/// placeholder, never the half-changed machine), and the agent serves the
/// next request. Before, through the runtime, the signal's `cmd` failed,
/// the agent kept its state from before that signal, and the request
/// waited for an answer already consumed: the agent answered every later
/// query `busy`.
#[tokio::test(start_paused = true)]
async fn a_transition_panicking_while_the_machine_is_lent_fails_its_request() {
    let panicked = json!({"type": "execution_error",
                          "message": "strategy transition panicked: boom in the check",
                          "details": {"retry": false}, "retryable": false});
    let fake = Fake::new(vec![
        Reply::Answer(resp("{}", vec![], FinishReason::Stop, None)),
        Reply::Answer(resp("42", vec![], FinishReason::Stop, None)),
    ]);
    let r = run(
        AiRuntime::new().client(fake.clone()),
        ReAct::new()
            .model("m")
            .streaming(false)
            .output(OutputSchema::of::<Boom>("boom")),
        "react-lent-panic",
    )
    .await;
    r.agent
        .cast(Signal::new(
            "ai.react.query",
            json!({"query": "boom?", "request_id": "r1", "output_schema": "boom"}),
        ))
        .unwrap();
    let failed = r
        .agent
        .await_completion(ReAct::await_options("r1"))
        .await
        .unwrap();
    assert_eq!(failed.status, CompletionStatus::Failed);
    assert_eq!(failed.result, panicked);
    let state = r.agent.state().await.unwrap();
    let strategy = &state.state()["__strategy__"];
    assert_eq!(strategy["status"], "idle");
    assert_eq!(strategy["conversation"], json!([]));
    assert_eq!(strategy["requests"]["r1"]["status"], "failed");
    assert_eq!(strategy["requests"]["r1"]["error"], panicked);
    r.agent
        .cast(Signal::new(
            "ai.react.query",
            json!({"query": "n?", "request_id": "r2"}),
        ))
        .unwrap();
    let done = r
        .agent
        .await_completion(ReAct::await_options("r2"))
        .await
        .unwrap();
    assert_eq!(done.status, CompletionStatus::Completed);
    assert_eq!(done.result, json!("42"));
    r.jido.shutdown().await;

    // The same on an agent with no runtime: the panic does not escape
    // `cmd`, and the state reads the failed request.
    let mut agent = AgentState::new(
        Bot(ReAct::new()
            .model("m")
            .streaming(false)
            .output(OutputSchema::of::<Boom>("boom"))),
        AgentOptions::new().id("react-lent-panic-core"),
    );
    let query = Command::strategy(
        commands::QUERY,
        json!({"query": "boom?", "request_id": "r1", "output_schema": "boom"}),
    );
    let directives = agent.cmd(query, CmdOptions::new()).await;
    assert_eq!(directives.len(), 1);
    let answer = jido::ai::signals::LlmResultData {
        call_id: "call_r1_1".into(),
        result: Ok(resp("{}", vec![], FinishReason::Stop, None)),
        model: "m".into(),
        duration_ms: 0,
        metadata: Default::default(),
    };
    agent
        .cmd(
            Command::strategy(commands::LLM_RESULT, Value::Null),
            CmdOptions::new().signal(answer.into_signal()),
        )
        .await;
    let strategy = &agent.state()["__strategy__"];
    assert_eq!(strategy["status"], "idle");
    assert_eq!(strategy["requests"]["r1"]["status"], "failed");
    assert_eq!(agent.state()["error"], panicked);
}
