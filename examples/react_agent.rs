//! A ReAct agent with two tools (a calculator and a lookup table) answering
//! a question, printing the trace of signals it emits.
//!
//! Offline by default: a scripted model asks for both tools in one turn,
//! then answers. With `OPENAI_BASE_URL` set (and the `ai-genai` feature) it
//! asks that OpenAI-compatible server instead (`JIDO_MODEL` names the
//! model, `OPENAI_API_KEY` its key). For a real model on this machine:
//!
//! ```sh
//! cargo run --features ai --example react_agent                 # scripted
//! export OPENAI_BASE_URL=$(scripts/llm_server.sh start) JIDO_MODEL=gemma3-270m
//! cargo run --features ai-genai --example react_agent           # llama.cpp
//! scripts/llm_server.sh stop
//! ```
//!
//! The local model is Gemma 3 270M, a small *base* model: it calls a tool
//! only because the agent sends three worked examples before the
//! conversation ([`ReAct::examples`]), and its answers ramble. Whatever it
//! says, the request ends in exactly one `ai.request.completed` or
//! `ai.request.failed`.

use std::sync::Arc;
use std::time::Duration;

use jido::ai::client::{LlmClient, Script, ScriptedModel};
use jido::ai::{AiRuntime, Message, ReAct, ToolCall, ToolSet};
use jido::prelude::*;
use jido::server::{Jido, JidoConfig};
use jido::signal::Signal;
use jido::signal::dispatch::{ChannelTarget, DispatchConfig};
use serde_json::{Value, json};

const QUESTION: &str = "What is 6 times 7, and what is the capital of France?";

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Calc {
    /// `add`, `sub`, `mul` or `div`.
    op: String,
    a: f64,
    b: f64,
}

/// Computes `a op b` for op add, sub, mul or div.
#[jido::action]
async fn calculator(p: Calc) -> jido::Result<Value> {
    let value = match p.op.as_str() {
        "add" => p.a + p.b,
        "sub" => p.a - p.b,
        "mul" => p.a * p.b,
        "div" if p.b != 0.0 => p.a / p.b,
        "div" => return Err(jido::Error::validation("division by zero").with_retry(false)),
        other => {
            return Err(jido::Error::validation(format!("unknown op: {other}")).with_retry(false));
        }
    };
    Ok(json!({"value": value}))
}

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Key {
    /// What to look up, e.g. "capital of France".
    key: String,
}

/// Looks a fact up in a small table.
#[jido::action]
async fn lookup(p: Key) -> jido::Result<Value> {
    let answer = match p.key.to_lowercase().as_str() {
        "capital of france" => "Paris",
        "capital of norway" => "Oslo",
        "speed of light" => "299 792 458 m/s",
        _ => return Ok(json!({"found": false})),
    };
    Ok(json!({"found": true, "value": answer}))
}

struct Assistant(ReAct);

impl Agent for Assistant {
    const NAME: &'static str = "assistant";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(self.0.clone())
    }
}

/// The client, the model's name, and whether it is a real one.
struct Model(Arc<dyn LlmClient>, String, bool);

/// The model to use.
fn model() -> Result<Model, Box<dyn std::error::Error>> {
    #[cfg(feature = "ai-genai")]
    {
        let config = jido::ai::client::LlmConfig::from_env();
        if config.base_url().is_some() {
            let name = config.default_model().unwrap_or("gemma3-270m").to_owned();
            let config = config.with_default_model(name.clone());
            println!("model: {name} at {:?}", config.base_url());
            let client = jido::ai::client::GenaiClient::new(config)?;
            return Ok(Model(Arc::new(client), name, true));
        }
    }
    if std::env::var_os("OPENAI_BASE_URL").is_some() && !cfg!(feature = "ai-genai") {
        println!("OPENAI_BASE_URL is set: build with --features ai-genai to use it");
    }
    println!("model: scripted (set OPENAI_BASE_URL for a real one)");
    let script = Script::user(QUESTION)
        .calls([
            ("calculator", json!({"op": "mul", "a": 6, "b": 7})),
            ("lookup", json!({"key": "capital of France"})),
        ])
        .answer("6 times 7 is 42, and the capital of France is Paris.");
    Ok(Model(
        Arc::new(ScriptedModel::new([script])?),
        "scripted".into(),
        false,
    ))
}

/// Three worked examples (question, tool call, result, answer) for a small
/// base model.
fn few_shot() -> Vec<Message> {
    let mut out = Vec::new();
    for (i, (a, b)) in [(2.0, 3.0), (4.0, 5.0), (8.0, 9.0)].into_iter().enumerate() {
        let id = format!("example_{i}");
        out.push(Message::user(format!("What is {a} times {b}?")));
        out.push(Message::assistant_tool_calls(
            "",
            vec![ToolCall {
                id: id.clone(),
                name: "calculator".into(),
                arguments: json!({"op": "mul", "a": a, "b": b}).into(),
            }],
        ));
        out.push(Message::tool_result(
            &id,
            "calculator",
            json!({"ok": true, "result": {"value": a * b}}).to_string(),
        ));
        out.push(Message::assistant(format!("{a} times {b} is {}.", a * b)));
    }
    out
}

fn line(signal: &Signal) -> String {
    let data = signal.data().cloned().unwrap_or(Value::Null);
    let brief = match signal.ty() {
        "ai.llm.delta" => data["delta"].to_string(),
        "ai.tool.started" => format!("{} {}", data["tool_name"], data["arguments"]),
        "ai.tool.result" => format!("{} {}", data["call_id"], data["result"]),
        "ai.usage" => format!("in {} out {}", data["input_tokens"], data["output_tokens"]),
        _ => data.to_string(),
    };
    format!("{:<22} {brief}", signal.ty())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Model(client, model_name, live) = model()?;
    let (tx, mut trace) = tokio::sync::mpsc::unbounded_channel();
    let mut react = ReAct::new()
        .model(model_name.as_str())
        .system_prompt("Answer with the tools. Be brief.")
        .tools(ToolSet::new().with(Calculator)?.with(Lookup)?)
        .events(DispatchConfig::new(ChannelTarget::unbounded(tx))?);
    if live {
        react = react
            .examples(few_shot())
            .temperature(0.0)
            .max_tokens(60)
            .max_iterations(3);
    }

    let ai = AiRuntime::new()
        .client_arc(client)
        .llm_timeout(Duration::from_secs(120));
    let jido = Jido::start(ai.register_instance(JidoConfig::new())).await?;
    let agent = jido
        .start_agent(
            AgentState::new(Assistant(react), AgentOptions::new().id("assistant")),
            ServerOptions::new(),
        )
        .await?;

    println!("question: {QUESTION}\n");
    agent.cast(ReAct::query(QUESTION, Some("q1")))?;
    while let Some(signal) = trace.recv().await {
        println!("{}", line(&signal));
        if matches!(signal.ty(), "ai.request.completed" | "ai.request.failed") {
            break;
        }
    }
    let done = agent
        .await_completion(ReAct::await_options("q1").timeout(Duration::from_secs(300)))
        .await?;
    println!("\n{:?}: {}", done.status, done.result);
    let snapshot = agent.state().await?.strategy_snapshot();
    println!(
        "iterations: {}, usage: {}",
        snapshot.detail("iteration").unwrap_or(&Value::Null),
        snapshot.detail("usage").unwrap_or(&Value::Null)
    );
    jido.shutdown().await;
    Ok(())
}
