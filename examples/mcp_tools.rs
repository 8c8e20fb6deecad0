//! A ReAct agent using the tools of an MCP server: the reference server
//! `@modelcontextprotocol/server-everything` (npm), started over stdio.
//!
//! Offline by default: a scripted model asks for `get_sum` (the server's
//! `get-sum`) and `echo`, then answers. With `OPENAI_BASE_URL` set (and the
//! `ai-genai` feature) it asks that OpenAI-compatible server instead
//! (`JIDO_MODEL` names the model).
//!
//! ```sh
//! export JIDO_MCP_EVERYTHING=$(scripts/mcp_server.sh install)   # else `npx -y`
//! cargo run --features mcp --example mcp_tools
//! ```
//!
//! Without node (`npx`) and without `JIDO_MCP_EVERYTHING` it says so and
//! exits 0.

use std::sync::Arc;
use std::time::Duration;

use jido::ai::client::{LlmClient, Script, ScriptedModel};
use jido::ai::mcp::{McpClient, McpServerConfig};
use jido::ai::{AiRuntime, ReAct, ToolSet};
use jido::prelude::*;
use jido::server::{Jido, JidoConfig};
use jido::signal::Signal;
use jido::signal::dispatch::{ChannelTarget, DispatchConfig};
use serde_json::{Value, json};

const QUESTION: &str = "What is 19 plus 23? Then echo the word 'done'.";
const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";

struct Assistant(ReAct);

impl Agent for Assistant {
    const NAME: &'static str = "mcp_assistant";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(self.0.clone())
    }
}

/// How to start server-everything, or `None` when this machine cannot.
fn server() -> Option<McpServerConfig> {
    if let Some(bin) = std::env::var_os("JIDO_MCP_EVERYTHING").filter(|b| !b.is_empty()) {
        return Some(McpServerConfig::stdio(bin.to_string_lossy()).arg("stdio"));
    }
    let npx = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join("npx").is_file()));
    npx.then(|| McpServerConfig::stdio("npx").args(["-y", EVERYTHING, "stdio"]))
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
    println!("model: scripted (set OPENAI_BASE_URL for a real one)");
    let script = Script::user(QUESTION)
        .calls([("get_sum", json!({"a": 19, "b": 23}))])
        .calls([("echo", json!({"message": "done"}))])
        .answer("19 plus 23 is 42. Echo: done.");
    Ok(Model(
        Arc::new(ScriptedModel::new([script])?),
        "scripted".into(),
        false,
    ))
}

fn line(signal: &Signal) -> String {
    let data = signal.data().cloned().unwrap_or(Value::Null);
    let brief = match signal.ty() {
        "ai.llm.delta" => data["delta"].to_string(),
        "ai.tool.started" => format!("{} {}", data["tool_name"], data["arguments"]),
        "ai.tool.result" => format!("{} {}", data["call_id"], data["result"]),
        _ => data.to_string(),
    };
    format!("{:<22} {brief}", signal.ty())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(config) = server() else {
        println!(
            "mcp_tools: skipped, neither JIDO_MCP_EVERYTHING nor npx is available \
             (install node, or run `scripts/mcp_server.sh install`)"
        );
        return Ok(());
    };
    let mcp = McpClient::connect(
        config
            .name("everything")
            .connect_timeout(Duration::from_secs(180)),
    )
    .await?;
    let tools = ToolSet::new().with_all(mcp.tools().await?)?;
    println!(
        "mcp tools: {}",
        tools.names().collect::<Vec<_>>().join(", ")
    );

    let Model(client, model_name, live) = model()?;
    let (tx, mut trace) = tokio::sync::mpsc::unbounded_channel();
    let mut react = ReAct::new()
        .model(model_name.as_str())
        .system_prompt("Answer with the tools. Be brief.")
        .tools(tools)
        .events(DispatchConfig::new(ChannelTarget::unbounded(tx))?);
    if live {
        react = react.temperature(0.0).max_tokens(80).max_iterations(3);
    }
    let ai = AiRuntime::new()
        .client_arc(client)
        .llm_timeout(Duration::from_secs(120));
    let jido = Jido::start(ai.register_instance(JidoConfig::new())).await?;
    let agent = jido
        .start_agent(
            AgentState::new(Assistant(react), AgentOptions::new().id("mcp-assistant")),
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
    jido.shutdown().await;
    mcp.close().await;
    Ok(())
}
