//! scratch (not committed): N rounds of one case, for callgrind.
use jido::agent::SignalRoute;
use jido::prelude::*;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::json;
use std::time::Duration;

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Nothing {}
struct Noop;
impl Action for Noop {
    type Params = Nothing;
    type Output = ();
    const NAME: &'static str = "noop";
    async fn run(&self, _: Nothing, _: &Context) -> jido::Result<()> {
        Ok(())
    }
}
struct Bench;
impl Agent for Bench {
    const NAME: &'static str = "bench";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![SignalRoute::action("noop", Noop)]
    }
}
fn five_keys() -> serde_json::Map<String, serde_json::Value> {
    json!({"a": 1, "b": "two", "c": [3], "d": {"e": 4}, "n": 0})
        .as_object()
        .cloned()
        .unwrap()
}
struct RawAgent;
enum RawAgentMsg {
    Cast,
    Call(RpcReplyPort<u64>),
}
impl Actor for RawAgent {
    type Msg = RawAgentMsg;
    type State = serde_json::Map<String, serde_json::Value>;
    type Arguments = ();
    async fn pre_start(
        &self,
        _: ActorRef<RawAgentMsg>,
        _: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(five_keys())
    }
    async fn handle(
        &self,
        _: ActorRef<RawAgentMsg>,
        msg: RawAgentMsg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RawAgentMsg::Cast => {
                let n = state.get("n").and_then(|v| v.as_u64()).unwrap_or(0);
                state.insert("n".into(), json!(n + 1));
            }
            RawAgentMsg::Call(reply) => {
                let action = tokio::spawn(async { json!({"done": true}) });
                let out = tokio::time::timeout(jido::exec::DEFAULT_TIMEOUT, action).await??;
                if let serde_json::Value::Object(out) = out {
                    state.extend(out);
                }
                let _ = reply.send(state.len() as u64);
            }
        }
        Ok(())
    }
}

fn main() {
    let case = std::env::args().nth(1).unwrap();
    let n: u64 = std::env::args().nth(2).unwrap().parse().unwrap();
    let threads: usize = std::env::args()
        .nth(3)
        .map(|s| s.parse().unwrap())
        .unwrap_or(2);
    let rt = if threads == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
            .unwrap()
    };
    rt.block_on(async move {
        let inline = case.contains("cast");
        let cfg = if inline {
            JidoConfig::new().exec_options(ExecOptions::new().timeout(Duration::ZERO))
        } else {
            JidoConfig::new()
        };
        let jido = Jido::start(cfg).await.unwrap();
        let (raw, _) = Actor::spawn(None, RawAgent, ()).await.unwrap();
        let agent = jido
            .start_agent(
                AgentState::new(Bench, AgentOptions::new().id("b").state(five_keys())),
                ServerOptions::new(),
            )
            .await
            .unwrap();
        let exec = Exec::new();
        let j2 = jido.clone();
        let t = std::time::Instant::now();
        tokio::spawn(async move {
            for _ in 0..n {
                match case.as_str() {
                    "raw_call" => {
                        raw.call(RawAgentMsg::Call, None).await.unwrap();
                    }
                    "agent_call" => {
                        agent.call(Signal::new("noop", json!({}))).await.unwrap();
                    }
                    "raw_cast" => {
                        for _ in 0..100 {
                            raw.cast(RawAgentMsg::Cast).unwrap();
                        }
                        raw.call(RawAgentMsg::Call, None).await.unwrap();
                    }
                    "agent_cast" => {
                        for _ in 0..100 {
                            agent.cast(Signal::new("noop", json!({}))).unwrap();
                        }
                        agent.call(Signal::new("noop", json!({}))).await.unwrap();
                    }
                    "raw_spawn" => {
                        let (a, h) = Actor::spawn(None, RawAgent, ()).await.unwrap();
                        a.stop(None);
                        h.await.unwrap();
                    }
                    "agent_spawn" => {
                        let a = j2
                            .start_agent(
                                AgentState::new(
                                    Bench,
                                    AgentOptions::new().id("s").state(five_keys()),
                                ),
                                ServerOptions::new(),
                            )
                            .await
                            .unwrap();
                        j2.stop_agent(a.id()).await.unwrap();
                    }
                    "tokio_exec" => {
                        let _ = tokio::time::timeout(
                            jido::exec::DEFAULT_TIMEOUT,
                            tokio::spawn(async { Noop.run(Nothing {}, &Context::new()).await }),
                        )
                        .await;
                    }
                    "exec" => {
                        let _ = exec
                            .run(Noop, json!({}), Context::new(), ExecOptions::new())
                            .await;
                    }
                    _ => panic!(),
                }
            }
        })
        .await
        .unwrap();
        eprintln!("{:.2} us/round", t.elapsed().as_secs_f64() * 1e6 / n as f64);
        jido.shutdown().await;
    });
}
