//! The LLM client by hand: a question, a tool call, its result, the answer.
//!
//! With `OPENAI_BASE_URL` set it talks to that OpenAI-compatible server
//! (`JIDO_MODEL` names the model, `OPENAI_API_KEY` its key); without it, to a
//! scripted model, offline. For a real model on this machine:
//!
//! ```sh
//! export OPENAI_BASE_URL=$(scripts/llm_server.sh start) JIDO_MODEL=gemma3-270m
//! cargo run --features ai-genai --example llm_client
//! scripts/llm_server.sh stop
//! ```
//!
//! The local model is Gemma 3 270M, a small *base* model: it calls the tool
//! only because the conversation starts with three worked examples, and its
//! answers ramble (the `stop` sequences cut them). The loop below works
//! whatever it says: it runs the calls it gets, at most three rounds.

use std::sync::Arc;

use futures::StreamExt;
use jido::ai::client::{
    GenaiClient, LlmClient, LlmConfig, LlmError, LlmEvent, LlmRequest, Message, Script,
    ScriptedModel, ToolCall, ToolSpec, Usage,
};
use serde_json::{Value, json};

const QUESTION: &str = "What is 6 times 7?";

fn model() -> Result<Arc<dyn LlmClient>, LlmError> {
    let config = LlmConfig::from_env();
    if config.base_url().is_some() {
        let config = match config.default_model() {
            Some(_) => config,
            None => config.with_default_model("gemma3-270m"),
        };
        println!(
            "model: {:?} at {:?}",
            config.default_model(),
            config.base_url()
        );
        return Ok(Arc::new(GenaiClient::new(config)?));
    }
    println!("model: scripted (set OPENAI_BASE_URL for a real one)");
    Ok(Arc::new(ScriptedModel::new([Script::user(QUESTION)
        .call("multiply", json!({"a": 6, "b": 7}))
        .answer("6 times 7 is 42.")])?))
}

/// Question → tool call → tool result → answer, three times over.
fn few_shot() -> Vec<Message> {
    let mut messages = Vec::new();
    for (i, (a, b)) in [(2i64, 3i64), (4, 5), (8, 9)].into_iter().enumerate() {
        let id = format!("example_{i}");
        messages.push(Message::user(format!("What is {a} times {b}?")));
        messages.push(Message::assistant_tool_calls(
            "",
            vec![ToolCall {
                id: id.clone(),
                name: "multiply".into(),
                arguments: json!({"a": a, "b": b}).into(),
            }],
        ));
        messages.push(Message::tool_result(&id, "multiply", (a * b).to_string()));
        messages.push(Message::assistant(format!("{a} times {b} is {}.", a * b)));
    }
    messages
}

fn multiply(args: &Value) -> String {
    match (args["a"].as_i64(), args["b"].as_i64()) {
        (Some(a), Some(b)) => a.saturating_mul(b).to_string(),
        _ => json!({"error": "a and b must be integers"}).to_string(),
    }
}

#[tokio::main]
async fn main() -> Result<(), LlmError> {
    let model = model()?;
    let mut messages = few_shot();
    messages.push(Message::user(QUESTION));
    let mut total = Usage::default();

    for round in 1..=3 {
        let mut req = LlmRequest::new("", messages.clone());
        req.tools = vec![ToolSpec {
            name: "multiply".into(),
            description: "Multiply two integers".into(),
            parameters: json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"]
            }),
            strict: false,
        }]
        .into();
        req.temperature = Some(0.0);
        req.max_tokens = Some(40);
        if round > 1 {
            // After tool results: end the answer at the line (a stop
            // sequence would also cut a tool call, so not in round 1).
            req.stop = vec!["\n".into(), "<end_of_turn>".into()];
        }

        print!("round {round}: ");
        let mut stream = model.stream(req).await?;
        let mut done = None;
        while let Some(event) = stream.next().await {
            match event? {
                LlmEvent::Content(text) => print!("{text}"),
                LlmEvent::ToolCallDelta {
                    name: Some(name), ..
                } => print!("[calling {name}] "),
                LlmEvent::Done(response) => done = Some(response),
                _ => {}
            }
        }
        println!();
        let Some(response) = done else { break };
        if let Some(usage) = response.usage {
            total += usage;
        }
        if response.tool_calls.is_empty() {
            println!("answer: {:?} ({:?})", response.text, response.finish_reason);
            break;
        }
        messages.push(Message::assistant_tool_calls(
            response.text.clone(),
            response.tool_calls.clone(),
        ));
        for call in &response.tool_calls {
            let result = multiply(&call.arguments);
            println!("  {}({}) = {result}", call.name, call.arguments);
            messages.push(Message::tool_result(&call.id, &call.name, result));
        }
    }
    println!(
        "tokens: {} in, {} out, {} total",
        total.input_tokens, total.output_tokens, total.total_tokens
    );
    Ok(())
}
