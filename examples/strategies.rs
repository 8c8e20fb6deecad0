//! One question, answered by each reasoning strategy: Chain of Thought,
//! Chain of Draft, Algorithm of Thoughts, Tree of Thoughts, Graph of
//! Thoughts, TRM and Adaptive, printing each strategy's trace (the
//! request signals, the model calls and their phases) and its answer.
//!
//! ```sh
//! cargo run --example strategies                 # offline: a scripted model
//! OPENAI_BASE_URL=$(scripts/llm_server.sh start) \
//!     cargo run --features ai-genai --example strategies   # a real model
//! ```
//!
//! Offline, each strategy gets a scripted model that answers the prompts
//! the strategy's own machine writes (derived by driving the pure machine
//! with the canned answers below), so the run is deterministic.

use std::sync::Arc;
use std::time::Duration;

use jido::ai::client::{LlmClient, Script, ScriptedModel};
use jido::ai::react::machine::Turn;
use jido::ai::reasoning::machine::{Event, Machine, Step};
use jido::ai::reasoning::{
    AdaptiveReasoning, AlgorithmOfThoughts, ChainOfDraft, ChainOfThought, GraphOfThoughts,
    Reasoning, TinyRecursive, TreeOfThoughts,
};
use jido::ai::{AiRuntime, Role, Usage};
use jido::prelude::*;
use jido::server::{Jido, JidoConfig};
use jido::signal::Signal;
use jido::signal::dispatch::{ChannelTarget, DispatchConfig};
use serde_json::Value;

const QUESTION: &str = "A farmer has 17 sheep and all but 9 run away. How many are left?";

struct Reasoner(DynStrategy);

impl Agent for Reasoner {
    const NAME: &'static str = "reasoner";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        self.0.clone()
    }
}

type BoxError = Box<dyn std::error::Error>;

/// A client and its model's name.
type Live = (Arc<dyn LlmClient>, String);

/// The real model when `OPENAI_BASE_URL` is set (feature `ai-genai`).
fn live_model() -> Result<Option<Live>, BoxError> {
    #[cfg(feature = "ai-genai")]
    {
        let config = jido::ai::client::LlmConfig::from_env();
        if config.base_url().is_some() {
            let name = config.default_model().unwrap_or("gemma3-270m").to_owned();
            let config = config.with_default_model(name.clone());
            let client = jido::ai::client::GenaiClient::new(config)?;
            return Ok(Some((Arc::new(client), name)));
        }
    }
    if std::env::var_os("OPENAI_BASE_URL").is_some() && !cfg!(feature = "ai-genai") {
        println!("OPENAI_BASE_URL is set: build with --features ai-genai to use it");
    }
    Ok(None)
}

/// Scripts answering `answers`, in order, to the calls machine `M` makes
/// for the question (keyed by each call's last user message).
fn scripts<M: Machine>(config: &M::Config, answers: &[&str]) -> Vec<Script> {
    let mut m = M::default();
    let start = Event::Start {
        request_id: "script".into(),
        query: QUESTION.into(),
    };
    let mut steps = m.handle(config, start).steps;
    let mut out = Vec::new();
    for answer in answers {
        let Some(Step::CallLlm(call)) = steps.first() else {
            break;
        };
        let user = call
            .messages
            .iter()
            .rev()
            .find(|msg| msg.role == Role::User)
            .map(|msg| msg.content.clone())
            .unwrap_or_default();
        // Rough token counts, so the trace shows usage adding up.
        let usage = Usage {
            input_tokens: (user.len() / 4) as u64,
            output_tokens: (answer.len() / 4) as u64,
            total_tokens: ((user.len() + answer.len()) / 4) as u64,
        };
        out.push(Script::user(user).answer(*answer).usage(usage));
        let event = Event::LlmResult {
            call_id: call.call_id.clone(),
            result: Ok(Turn::answer(*answer)),
        };
        steps = m.handle(config, event).steps;
    }
    out
}

/// A line of the trace; the streamed text of a call is gathered in
/// `text` and printed with the call's usage.
fn line(signal: &Signal, text: &mut String) -> Option<String> {
    let data = signal.data().cloned().unwrap_or(Value::Null);
    let brief = match signal.ty() {
        "ai.llm.delta" => {
            text.push_str(data["delta"].as_str().unwrap_or_default());
            return None;
        }
        "ai.usage" => {
            let mut said: String = text.trim().replace('\n', " / ").chars().take(90).collect();
            if text.trim().chars().count() > 90 {
                said.push('…');
            }
            text.clear();
            format!(
                "call {} (in {}, out {}): {said}",
                data["metadata"]["iteration"], data["input_tokens"], data["output_tokens"]
            )
        }
        "ai.request.completed" => format!("{} ({})", data["result"], data["termination_reason"]),
        "ai.request.failed" => format!(
            "{} ({})",
            data["error"]["message"], data["termination_reason"]
        ),
        _ => data.to_string(),
    };
    Some(format!("  {:<22} {brief}", signal.ty()))
}

/// Asks the question with `strategy` and prints the trace.
async fn ask<M: Machine>(
    title: &str,
    strategy: Reasoning<M>,
    client: Arc<dyn LlmClient>,
    model: &str,
    details: &[&str],
) -> Result<(), Box<dyn std::error::Error>> {
    println!("== {title} ({})", strategy.short_name());
    let (tx, mut trace) = tokio::sync::mpsc::unbounded_channel();
    let query = strategy.query(QUESTION, Some("q1"));
    let strategy = strategy
        .model(model)
        .max_tokens(200)
        .temperature(0.0)
        .events(DispatchConfig::new(ChannelTarget::unbounded(tx))?);
    let ai = AiRuntime::new()
        .client_arc(client)
        .llm_timeout(Duration::from_secs(300));
    let jido = Jido::start(ai.register_instance(JidoConfig::new())).await?;
    let agent = jido
        .start_agent(
            AgentState::new(Reasoner(DynStrategy::new(strategy)), AgentOptions::new()),
            ServerOptions::new(),
        )
        .await?;
    agent.cast(query)?;
    let mut text = String::new();
    while let Some(signal) = trace.recv().await {
        if let Some(line) = line(&signal, &mut text) {
            println!("{line}");
        }
        if matches!(signal.ty(), "ai.request.completed" | "ai.request.failed") {
            break;
        }
    }
    let snapshot = agent.state().await?.strategy_snapshot();
    for key in ["llm_calls", "usage"].iter().chain(details) {
        if let Some(v) = snapshot.detail(key) {
            println!("  {key}: {v}");
        }
    }
    println!();
    jido.shutdown().await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let live = live_model()?;
    match &live {
        Some((_, name)) => println!("model: {name} (OPENAI_BASE_URL)\n"),
        None => println!("model: scripted (set OPENAI_BASE_URL for a real one)\n"),
    }
    println!("question: {QUESTION}\n");
    // The offline client of a strategy, or the real one.
    let client = |scripts: Vec<Script>| -> Result<Arc<dyn LlmClient>, Box<dyn std::error::Error>> {
        Ok(match &live {
            Some((c, _)) => Arc::clone(c),
            None => Arc::new(ScriptedModel::new(scripts)?),
        })
    };
    let model = live
        .as_ref()
        .map_or("scripted", |(_, n)| n.as_str())
        .to_owned();

    let cot = ChainOfThought::new();
    let s = scripts::<jido::ai::reasoning::cot::Cot>(
        cot.config(),
        &[
            "Step 1: \"All but 9 run away\" means 9 do not run away.\nStep 2: Those 9 are left.\nConclusion: 9",
        ],
    );
    ask(
        "Chain of Thought",
        cot,
        client(s)?,
        &model,
        &["steps", "conclusion"],
    )
    .await?;

    let cod = ChainOfDraft::new();
    let s =
        scripts::<jido::ai::reasoning::cot::Cod>(cod.config(), &["all but 9 flee\n9 stay\n#### 9"]);
    ask("Chain of Draft", cod, client(s)?, &model, &["steps"]).await?;

    let aot = AlgorithmOfThoughts::new();
    let s = scripts::<jido::ai::reasoning::aot::Aot>(
        aot.config(),
        &[
            "Trying a promising first operation:\n1. 17 - 9 : (8) misreads \"all but\"\nTrying another promising first operation:\n1. keep 9 : (9) -> found it!\nBacktracking the solution:\nStep 1: all but 9 run away, so 9 stay\nanswer: 9",
        ],
    );
    ask(
        "Algorithm of Thoughts",
        aot,
        client(s)?,
        &model,
        &["search"],
    )
    .await?;

    let tot = TreeOfThoughts::new().configure(|c| c.max_depth = 2);
    let s = scripts::<jido::ai::reasoning::tot::Tot>(
        tot.config(),
        &[
            r#"{"thoughts":[{"content":"Subtract: 17 - 9 = 8"},{"content":"Read it literally: all but 9 ran, so 9 remain"}]}"#,
            r#"{"scores":{"t1":0.2,"t2":0.9}}"#,
            r#"{"thoughts":[{"content":"So 9 sheep are left"},{"content":"Check: 8 ran away, 17 - 8 = 9"}]}"#,
            r#"{"scores":{"t1":1.0,"t2":0.8}}"#,
        ],
    );
    ask(
        "Tree of Thoughts",
        tot,
        client(s)?,
        &model,
        &["solution_path", "candidates", "node_count"],
    )
    .await?;

    let got = GraphOfThoughts::new().configure(|c| c.max_rounds = 1);
    let s = scripts::<jido::ai::reasoning::got::Got>(
        got.config(),
        &[
            "1. \"All but 9\" means 9 remain\n2. 17 - 9 = 8 sheep ran away",
            "CONNECTION: n1 -> n2 : consistent\nn1: 0.9\nn2: 0.7",
            "Both agree that 8 ran and 9 stayed.\nAnswer: 9",
        ],
    );
    ask(
        "Graph of Thoughts",
        got,
        client(s)?,
        &model,
        &["edges", "node_count"],
    )
    .await?;

    let trm = TinyRecursive::new();
    let s = scripts::<jido::ai::reasoning::trm::Trm>(
        trm.config(),
        &[
            "8",
            "ISSUE: \"all but 9\" means 9 stay\nSUGGESTION: reread the question\nSCORE: 0.2",
            "9",
            "9 is right: the 9 did not run.",
            "STRENGTH: correct\nSCORE: 0.95",
            "9 sheep are left.",
        ],
    );
    ask(
        "TRM",
        trm,
        client(s)?,
        &model,
        &["confidence_history", "answer_history"],
    )
    .await?;

    // "run away" reads as a tool word: Adaptive hands the question to ReAct.
    let adaptive = AdaptiveReasoning::new();
    let s = vec![Script::user(QUESTION).answer("9")];
    ask("Adaptive", adaptive, client(s)?, &model, &["selection"]).await?;
    Ok(())
}
