//! The AI runtime's directives polled in place: work that is ready at once
//! (a client answering from memory, a tool run inline) completes in the
//! directive's handler with no task and no registration; work that waits
//! is registered and finished by a task. Both keep the signal contract:
//! the same signals in the same order, exactly one terminal signal, panics
//! caught on the first poll as on a later one, cancellation of what waits.
#![cfg(feature = "ai")]

mod ai_support;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ai_support::*;
use futures::future::BoxFuture;
use jido::ai::{
    AiRuntime, CancelRequest, EmbedRequest, EmbedResponse, FinishReason, LlmClient, LlmError,
    LlmErrorKind, LlmEventStream, LlmGenerate, LlmRequest, LlmResponse, Message, ToolExec, ToolSet,
    Usage,
};
use jido::prelude::*;
use jido::signal::Signal;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// How the probe client answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Ready on its first poll.
    AtOnce,
    /// Waits for `release` before answering.
    Awaits,
    /// Panics on its first poll.
    PanicAtOnce,
    /// Panics after one wait.
    PanicLater,
    /// Panics in `generate` itself, before any future exists.
    PanicInCall,
}

/// A client that records how many calls of the agent the runtime had
/// registered each time its future was polled.
#[derive(Clone)]
struct Probe {
    mode: Arc<Mutex<Mode>>,
    seen: Arc<OnceLock<(AiRuntime, AgentRef)>>,
    running_at_poll: Arc<Mutex<Vec<usize>>>,
    release: Arc<Notify>,
}

impl Probe {
    fn new() -> Self {
        Probe {
            mode: Arc::new(Mutex::new(Mode::AtOnce)),
            seen: Arc::new(OnceLock::new()),
            running_at_poll: Arc::default(),
            release: Arc::new(Notify::new()),
        }
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    fn polls(&self) -> Vec<usize> {
        std::mem::take(&mut *self.running_at_poll.lock().unwrap())
    }

    fn record(&self) {
        let (ai, agent) = self.seen.get().expect("agent known");
        self.running_at_poll.lock().unwrap().push(ai.running(agent));
    }
}

fn response(text: &str) -> LlmResponse {
    LlmResponse {
        model: "m-1".into(),
        text: text.into(),
        thinking: None,
        tool_calls: Vec::new(),
        finish_reason: FinishReason::Stop,
        usage: Some(Usage {
            input_tokens: 2,
            output_tokens: 1,
            total_tokens: 3,
        }),
    }
}

impl LlmClient for Probe {
    fn generate(&self, _: LlmRequest) -> BoxFuture<'static, Result<LlmResponse, LlmError>> {
        let mode = *self.mode.lock().unwrap();
        if mode == Mode::PanicInCall {
            panic!("client bug in the call");
        }
        let probe = self.clone();
        Box::pin(async move {
            probe.record();
            match mode {
                Mode::AtOnce => Ok(response("at once")),
                Mode::PanicAtOnce => panic!("client bug at once"),
                Mode::Awaits | Mode::PanicLater => {
                    probe.release.notified().await;
                    probe.record();
                    if mode == Mode::PanicLater {
                        panic!("client bug later");
                    }
                    Ok(response("after a wait"))
                }
                Mode::PanicInCall => unreachable!(),
            }
        })
    }

    fn stream(&self, _: LlmRequest) -> BoxFuture<'static, Result<LlmEventStream, LlmError>> {
        Box::pin(async { Err(LlmError::new(LlmErrorKind::Other, "no streams here")) })
    }

    fn embed(&self, _: EmbedRequest) -> BoxFuture<'static, Result<EmbedResponse, LlmError>> {
        Box::pin(async { Err(LlmError::new(LlmErrorKind::Other, "no embeddings here")) })
    }
}

fn meta() -> Value {
    json!({"request_id": "req_1", "run_id": "req_1", "iteration": 1,
           "origin": "directive", "operation": "generate_text"})
}

fn usage_signal(ms: u64) -> Seen {
    (
        "ai.usage".into(),
        json!({"call_id": "call_1", "model": "m-1", "input_tokens": 2, "output_tokens": 1,
               "total_tokens": 3, "duration_ms": ms, "metadata": meta()}),
    )
}

fn ok_response(text: &str, ms: u64) -> Seen {
    (
        "ai.llm.response".into(),
        json!({
            "call_id": "call_1",
            "result": {"status": "ok", "result": {
                "type": "final_answer", "text": text, "thinking_content": null,
                "tool_calls": [], "finish_reason": "stop", "model": "m-1",
                "usage": {"input_tokens": 2, "output_tokens": 1, "total_tokens": 3}
            }, "effects": []},
            "model": "local:m", "duration_ms": ms, "metadata": meta()
        }),
    )
}

fn error_response(reason: Value, ms: u64) -> Seen {
    (
        "ai.llm.response".into(),
        json!({
            "call_id": "call_1",
            "result": {"status": "error", "reason": reason, "effects": []},
            "model": "local:m", "duration_ms": ms, "metadata": meta()
        }),
    )
}

fn panicked(message: &str) -> Value {
    json!({"type": "execution_error", "message": format!("llm call panicked: {message}"),
           "details": {"retry": false}, "retryable": false})
}

/// An agent whose `go` starts `call_1` (request `req_1`) and whose
/// `cancel` cancels `req_1`.
async fn probe_agent(id: &str) -> (Probe, AiRuntime, jido::server::Jido, AgentRef, Receiver) {
    let probe = Probe::new();
    let ai = AiRuntime::new().client(probe.clone());
    let (jido, agent, rx) = start(&ai, id, |p| match p["do"].as_str() {
        Some("cancel") => vec![CancelRequest::new("req_1").into()],
        _ => vec![
            LlmGenerate::new("call_1", "local:m", vec![Message::user("q")])
                .meta("request_id", "req_1")
                .meta("iteration", 1)
                .into(),
        ],
    })
    .await;
    assert!(probe.seen.set((ai.clone(), agent.clone())).is_ok());
    (probe, ai, jido, agent, rx)
}

type Receiver = tokio::sync::mpsc::UnboundedReceiver<Seen>;

/// A client ready on its first poll: the call completes where the
/// directive is executed, before any registration (the registry never
/// holds it), and sends `ai.usage` then one `ai.llm.response`.
#[tokio::test(start_paused = true)]
async fn a_client_that_answers_at_once_completes_without_a_task() {
    let (probe, ai, jido, agent, mut rx) = probe_agent("inline-1").await;
    agent.cast(Signal::new("go", json!({}))).unwrap();
    assert_eq!(
        until(&mut rx, "ai.llm.response").await,
        vec![usage_signal(0), ok_response("at once", 0)]
    );
    nothing_more(&mut rx).await;
    // Polled once, and nothing was registered for it at that time.
    assert_eq!(probe.polls(), vec![0]);
    assert_eq!(ai.running(&agent), 0);
    jido.shutdown().await;
}

/// A client that waits: its first poll happens in place (nothing is
/// registered yet), then the call is registered and a task finishes it;
/// meanwhile the agent serves queries and other signals (its mailbox is
/// not blocked), and the call can be cancelled by its request id.
#[tokio::test(start_paused = true)]
async fn a_client_that_awaits_is_registered_and_finished_by_a_task() {
    let (probe, ai, jido, agent, mut rx) = probe_agent("inline-2").await;
    probe.set(Mode::Awaits);
    agent
        .cast(Signal::new("go", json!({"set": {"phase": "waiting"}})))
        .unwrap();
    // The agent is free while the call waits.
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(agent.state().await.unwrap().state()["phase"], "waiting");
    assert_eq!(ai.running(&agent), 1);
    assert_eq!(probe.polls(), vec![0]);
    probe.release.notify_one();
    assert_eq!(
        until(&mut rx, "ai.llm.response").await,
        vec![usage_signal(10), ok_response("after a wait", 10)]
    );
    // Polled again by the task, while registered.
    assert_eq!(probe.polls(), vec![1]);
    nothing_more(&mut rx).await;
    assert_eq!(ai.running(&agent), 0);

    // Cancelled while it waits: one terminal signal, nothing else.
    agent.cast(Signal::new("go", json!({}))).unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(ai.running(&agent), 1);
    agent
        .cast(Signal::new("go", json!({"do": "cancel"})))
        .unwrap();
    assert_eq!(
        next(&mut rx).await,
        error_response(
            json!({"type": "cancelled", "message": "request cancelled",
                              "details": {"reason": "user_cancelled"}, "retryable": false}),
            10
        )
    );
    nothing_more(&mut rx).await;
    assert_eq!(ai.running(&agent), 0);
    jido.shutdown().await;
}

/// A panic on the first poll (in the handler), in the call itself, or on
/// a later poll (in the task) ends the call with one error response; the
/// agent survives each and its next call works.
#[tokio::test(start_paused = true)]
async fn a_client_panic_on_the_first_poll_or_later_ends_in_one_error_response() {
    let (probe, ai, jido, agent, mut rx) = probe_agent("inline-3").await;
    for (mode, message) in [
        (Mode::PanicAtOnce, "client bug at once"),
        (Mode::PanicInCall, "client bug in the call"),
        (Mode::PanicLater, "client bug later"),
    ] {
        probe.set(mode);
        agent.cast(Signal::new("go", json!({}))).unwrap();
        if mode == Mode::PanicLater {
            tokio::time::sleep(Duration::from_millis(10)).await;
            probe.release.notify_one();
        }
        let ms = if mode == Mode::PanicLater { 10 } else { 0 };
        assert_eq!(next(&mut rx).await, error_response(panicked(message), ms));
        nothing_more(&mut rx).await;
        assert_eq!(ai.running(&agent), 0);
    }
    probe.set(Mode::AtOnce);
    agent.cast(Signal::new("go", json!({}))).unwrap();
    assert_eq!(
        until(&mut rx, "ai.llm.response").await,
        vec![usage_signal(0), ok_response("at once", 0)]
    );
    probe.polls();
    jido.shutdown().await;
}

fn multiply() -> DynAction {
    jido::action_fn("multiply", |p: Value, _: Context| async move {
        Ok(json!({"product": p["a"].as_i64().unwrap_or(0) * p["b"].as_i64().unwrap_or(0)}))
    })
}

/// A tool run inline (`timeout_ms: 0`) completes where the directive is
/// executed and one run with a time limit (in Exec's task) after it: the
/// same two signals, `ai.tool.started` then one `ai.tool.result`, in both.
#[tokio::test(start_paused = true)]
async fn a_tool_run_inline_or_in_a_task_sends_the_same_signals() {
    let ai = AiRuntime::new().tools(ToolSet::new().with(multiply()).unwrap());
    let (jido, agent, mut rx) = start(&ai, "inline-tool", |p| {
        let d = ToolExec::new("tc_1", "multiply", json!({"a": 6, "b": 7}))
            .request_id("req_1")
            .iteration(1);
        let d = match p["timeout_ms"].as_u64() {
            Some(ms) => d.timeout_ms(ms),
            None => d,
        };
        vec![d.into()]
    })
    .await;
    let meta = json!({"request_id": "req_1", "run_id": "req_1", "iteration": 1,
                      "origin": "directive", "operation": "tool_execute"});
    let expected = vec![
        (
            "ai.tool.started".to_owned(),
            json!({"call_id": "tc_1", "tool_name": "multiply",
                   "arguments": {"a": 6, "b": 7}, "metadata": meta}),
        ),
        (
            "ai.tool.result".to_owned(),
            json!({"call_id": "tc_1", "tool_name": "multiply",
                   "result": {"status": "ok", "result": {"product": 42}, "effects": []},
                   "metadata": meta}),
        ),
    ];
    for data in [json!({"timeout_ms": 0}), json!({})] {
        agent.cast(Signal::new("go", data)).unwrap();
        assert_eq!(until(&mut rx, "ai.tool.result").await, expected);
        nothing_more(&mut rx).await;
        assert_eq!(ai.running(&agent), 0);
    }
    jido.shutdown().await;
}
