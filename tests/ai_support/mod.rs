//! A scripted fake `LlmClient` and an agent recording the AI signals it
//! receives (shared by the AI tests).
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use jido::agent::SignalRoute;
use jido::ai::{
    AiRuntime, EmbedRequest, EmbedResponse, LlmClient, LlmError, LlmEvent, LlmEventStream,
    LlmRequest, LlmResponse,
};
use jido::prelude::*;
use jido::server::{Jido, JidoConfig};
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// One scripted step of a streamed answer.
#[derive(Clone, Debug)]
pub enum Step {
    Event(LlmEvent),
    Fail(LlmError),
    /// Never yields again.
    Stall,
    Sleep(Duration),
}

/// What the fake does for one call.
#[derive(Clone, Debug)]
pub enum Reply {
    Answer(LlmResponse),
    Fail(LlmError),
    Stall,
    Panic,
    Stream(Vec<Step>),
    Embed(EmbedResponse),
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    requests: Vec<Value>,
}

/// A client answering from a script, recording every request as JSON.
#[derive(Clone, Default)]
pub struct Fake(Arc<Mutex<Script>>);

impl Fake {
    pub fn new(replies: Vec<Reply>) -> Self {
        let fake = Fake::default();
        fake.0.lock().unwrap().replies = replies.into();
        fake
    }

    pub fn requests(&self) -> Vec<Value> {
        self.0.lock().unwrap().requests.clone()
    }

    fn next(&self, request: Value) -> Reply {
        let mut s = self.0.lock().unwrap();
        s.requests.push(request);
        s.replies.pop_front().expect("script exhausted")
    }
}

impl LlmClient for Fake {
    fn generate(&self, req: LlmRequest) -> BoxFuture<'static, Result<LlmResponse, LlmError>> {
        let reply = self.next(serde_json::to_value(&req).unwrap());
        Box::pin(async move {
            match reply {
                Reply::Answer(r) => Ok(r),
                Reply::Fail(e) => Err(e),
                Reply::Stall => std::future::pending().await,
                Reply::Panic => panic!("client bug"),
                other => panic!("unexpected reply {other:?}"),
            }
        })
    }

    fn stream(&self, req: LlmRequest) -> BoxFuture<'static, Result<LlmEventStream, LlmError>> {
        let reply = self.next(serde_json::to_value(&req).unwrap());
        Box::pin(async move {
            let steps = match reply {
                Reply::Stream(steps) => steps,
                Reply::Fail(e) => return Err(e),
                Reply::Stall => std::future::pending().await,
                other => panic!("unexpected reply {other:?}"),
            };
            let stream = futures::stream::unfold(steps.into_iter(), |mut steps| async move {
                loop {
                    match steps.next()? {
                        Step::Event(e) => return Some((Ok(e), steps)),
                        Step::Fail(e) => return Some((Err(e), steps)),
                        Step::Stall => std::future::pending::<()>().await,
                        Step::Sleep(d) => tokio::time::sleep(d).await,
                    }
                }
            });
            Ok(Box::pin(stream) as LlmEventStream)
        })
    }

    fn embed(&self, req: EmbedRequest) -> BoxFuture<'static, Result<EmbedResponse, LlmError>> {
        let reply = self.next(serde_json::to_value(&req).unwrap());
        Box::pin(async move {
            match reply {
                Reply::Embed(r) => Ok(r),
                Reply::Fail(e) => Err(e),
                Reply::Stall => std::future::pending().await,
                other => panic!("unexpected reply {other:?}"),
            }
        })
    }
}

pub type Seen = (String, Value);

/// An action sending `(signal type, data)` of every signal it gets.
pub fn recorder(tx: mpsc::UnboundedSender<Seen>) -> DynAction {
    jido::action_fn("record", move |p: Value, ctx: Context| {
        let tx = tx.clone();
        async move {
            let ty = ctx.signal().map(|s| s.ty().to_owned()).unwrap_or_default();
            let _ = tx.send((ty, p));
            Ok(json!({}))
        }
    })
}

type DirectivesFn = dyn Fn(&Value) -> Vec<Directive> + Send + Sync;

/// An agent whose `go` signal returns `f(data)` as directives and whose
/// `ai.**` signals are recorded.
pub fn ai_agent(
    id: &str,
    f: impl Fn(&Value) -> Vec<Directive> + Send + Sync + 'static,
    tx: mpsc::UnboundedSender<Seen>,
) -> AgentState {
    let f: Arc<DirectivesFn> = Arc::new(f);
    let go = jido::action_fn("go", move |p: Value, ctx: Context| {
        let f = Arc::clone(&f);
        async move {
            for d in f(&p) {
                ctx.push_effect(d);
            }
            // `{"set": {...}}` is merged into the agent's state.
            Ok(p.get("set").cloned().unwrap_or_else(|| json!({})))
        }
    });
    AgentState::new(
        RoutedAgent(vec![
            SignalRoute::action("go", go),
            SignalRoute::action("ai.**", recorder(tx)),
        ]),
        AgentOptions::new().id(id),
    )
}

#[derive(Clone)]
pub struct RoutedAgent(pub Vec<SignalRoute>);

impl Agent for RoutedAgent {
    const NAME: &'static str = "ai_test_agent";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        self.0.clone()
    }
}

/// Starts an instance with `ai` registered and one agent; returns the
/// instance, the agent and the receiver of recorded signals.
pub async fn start(
    ai: &AiRuntime,
    id: &str,
    f: impl Fn(&Value) -> Vec<Directive> + Send + Sync + 'static,
) -> (Jido, AgentRef, mpsc::UnboundedReceiver<Seen>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let jido = Jido::start(ai.register_instance(JidoConfig::new()))
        .await
        .unwrap();
    let agent = jido
        .start_agent(ai_agent(id, f, tx), ServerOptions::new())
        .await
        .unwrap();
    (jido, agent, rx)
}

/// The next recorded signal (waits up to 10 virtual minutes).
pub async fn next(rx: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(Duration::from_secs(600), rx.recv())
        .await
        .expect("no signal")
        .expect("closed")
}

/// Every signal recorded until `until` type arrives (included).
pub async fn until(rx: &mut mpsc::UnboundedReceiver<Seen>, until: &str) -> Vec<Seen> {
    let mut out = Vec::new();
    loop {
        let seen = next(rx).await;
        let done = seen.0 == until;
        out.push(seen);
        if done {
            return out;
        }
    }
}

/// Asserts nothing more arrives (lets the runtime settle first).
pub async fn nothing_more(rx: &mut mpsc::UnboundedReceiver<Seen>) {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    assert!(rx.try_recv().is_err(), "unexpected extra signal");
}
