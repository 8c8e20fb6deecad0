//! The framework overhead of one ReAct request with one tool call, against
//! the scripted model (in-process, no network).
//!
//! One request: the model asks for `multiply`, the tool runs, the model
//! answers (two model turns, one tool call). Three cases in group
//! `react_request`, each inside a spawned task:
//!
//! * `raw_hand_loop` (baseline): a hand-written loop doing the same calls:
//!   build the request, call the model, run the tool through Exec, append
//!   the messages, call the model again;
//! * `exec_tool_only`: the bare Exec run of the tool alone;
//! * `react_cmd`: the ReAct strategy driving the same calls through
//!   `AgentState::cmd`: the query, the model's `ai.llm.response` payloads
//!   and the tool's `ai.tool.result` payload fed back as the runtime would
//!   (payloads built as JSON, decoded by the strategy), the directives it
//!   returns executed by the harness (the model through `LlmClient`, the
//!   tool through Exec). The agent is a clone of a fresh one each round
//!   (O(1): its state is shared), so the conversation does not grow.
//!
//! `(react_cmd − raw_hand_loop)` is the strategy's overhead per request
//! (an upper bound of its overhead per turn). With `CI` set the runs are
//! shorter.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use jido::ai::client::{LlmClient, Script, ScriptedModel};
use jido::ai::envelope::ResultEnvelope;
use jido::ai::react::machine::Turn;
use jido::ai::react::{ReAct, commands};
use jido::ai::signals::ToolResultData;
use jido::ai::{LlmGenerate, LlmRequest, LlmResponse, Message, ToolExec, ToolSet};
use jido::exec::Exec;
use jido::prelude::*;
use jido::strategy::Command;
use serde_json::{Map, Value, json};

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

const QUESTION: &str = "What is 6 times 7?";

struct Bot(ReAct);
impl Agent for Bot {
    const NAME: &'static str = "bench_react";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(self.0.clone())
    }
}

fn model() -> Arc<dyn LlmClient> {
    let script = Script::user(QUESTION)
        .call("multiply", json!({"a": 6, "b": 7}))
        .answer("6 times 7 is 42.");
    Arc::new(ScriptedModel::new([script]).expect("script"))
}

fn inline() -> ExecOptions {
    ExecOptions::new().timeout(Duration::ZERO).max_retries(0)
}

/// The hand-written loop.
async fn hand_loop(model: &Arc<dyn LlmClient>, exec: &Exec, tools: &ToolSet) -> LlmResponse {
    let specs = tools.specs();
    let mut messages = vec![Message::user(QUESTION)];
    loop {
        let mut req = LlmRequest::new("scripted", messages.clone());
        req.tools = specs.clone();
        let resp = model.generate(req).await.expect("model");
        if resp.tool_calls.is_empty() {
            return resp;
        }
        messages.push(Message::assistant_tool_calls(
            resp.text.clone(),
            resp.tool_calls.clone(),
        ));
        for call in &resp.tool_calls {
            let tool = tools.get(&call.name).expect("tool");
            let ins = Instruction::new(tool.action().clone())
                .with_params(call.arguments.clone())
                .with_opts(inline());
            let outcome = exec.execute(ins, Context::new()).await;
            let result = match outcome.result {
                Ok(out) => ResultEnvelope::ok(Value::Object(out)),
                Err(err) => ResultEnvelope::error(&err),
            };
            messages.push(Message::tool_result(
                call.id.clone(),
                call.name.clone(),
                result.tool_content(),
            ));
        }
    }
}

/// The ReAct strategy, its directives executed by hand.
async fn react_request(
    agent: &mut AgentState,
    model: &Arc<dyn LlmClient>,
    exec: &Exec,
) -> Vec<Directive> {
    let opts = CmdOptions::new().exec(exec.clone());
    let mut pending = agent
        .cmd(ReAct::query_command(QUESTION, Some("r1")), opts.clone())
        .await;
    while let Some(directive) = pending.pop() {
        let Directive::Custom(custom) = &directive else {
            continue;
        };
        let feedback = if let Some(d) = custom.downcast_ref::<LlmGenerate>() {
            let mut req = LlmRequest::new("scripted", d.context.clone());
            req.tools = d.tools.clone();
            let resp = model.generate(req).await.expect("model");
            let turn = Turn {
                text: resp.text,
                tool_calls: resp.tool_calls,
                finish_reason: Some(resp.finish_reason),
                usage: resp.usage,
            };
            Command::strategy(
                commands::LLM_RESULT,
                ReAct::llm_response_payload(&d.id, Ok(turn)),
            )
        } else if let Some(d) = custom.downcast_ref::<ToolExec>() {
            let action = d.action.clone().expect("tool action");
            let ins = Instruction::new(action)
                .with_params(d.arguments.clone())
                .with_opts(inline());
            let outcome = exec.execute(ins, Context::new()).await;
            let result = match outcome.result {
                Ok(out) => ResultEnvelope::ok(Value::Object(out)),
                Err(err) => ResultEnvelope::error(&err),
            };
            let data = ToolResultData {
                call_id: d.id.clone(),
                tool_name: d.tool_name.clone(),
                result,
                metadata: Map::new(),
            };
            Command::strategy(
                commands::TOOL_RESULT,
                serde_json::to_value(data).expect("json"),
            )
        } else {
            continue;
        };
        pending.extend(agent.cmd(feedback, opts.clone()).await);
    }
    pending
}

fn in_task<F, Fut>(rt: &tokio::runtime::Runtime, iters: u64, round: F) -> Duration
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future + Send,
{
    let mut round = round;
    rt.block_on(async move {
        tokio::spawn(async move {
            let started = Instant::now();
            for _ in 0..iters {
                black_box(round().await);
            }
            started.elapsed()
        })
        .await
        .expect("bench task")
    })
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let exec = Exec::new();
    let tools = ToolSet::new().with(Multiply).expect("tools");
    let model = model();
    let template = AgentState::new(
        Bot(ReAct::new()
            .model("scripted")
            .streaming(false)
            .tools(tools.clone())),
        AgentOptions::new().id("bench"),
    );

    // Both paths give the same answer.
    let answer = rt.block_on(hand_loop(&model, &exec, &tools)).text;
    let mut check = template.clone();
    rt.block_on(react_request(&mut check, &model, &exec));
    assert_eq!(check.state()["last_answer"], answer.as_str());
    assert_eq!(answer, "6 times 7 is 42.");

    let mut g = c.benchmark_group("react_request");
    if std::env::var_os("CI").is_some() {
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(1));
    }
    g.bench_function("raw_hand_loop", |b| {
        b.iter_custom(|iters| {
            let (model, exec, tools) = (model.clone(), exec.clone(), tools.clone());
            in_task(&rt, iters, move || {
                let (model, exec, tools) = (model.clone(), exec.clone(), tools.clone());
                async move { hand_loop(&model, &exec, &tools).await }
            })
        });
    });
    g.bench_function("exec_tool_only", |b| {
        b.iter_custom(|iters| {
            let (exec, tools) = (exec.clone(), tools.clone());
            in_task(&rt, iters, move || {
                let (exec, tools) = (exec.clone(), tools.clone());
                async move {
                    let tool = tools.get("multiply").expect("tool");
                    let ins = Instruction::new(tool.action().clone())
                        .with_params(json!({"a": 6, "b": 7}))
                        .with_opts(inline());
                    exec.execute(ins, Context::new()).await
                }
            })
        });
    });
    g.bench_function("react_cmd", |b| {
        b.iter_custom(|iters| {
            let (model, exec, template) = (model.clone(), exec.clone(), template.clone());
            in_task(&rt, iters, move || {
                let (model, exec) = (model.clone(), exec.clone());
                let mut agent = template.clone();
                async move {
                    react_request(&mut agent, &model, &exec).await;
                    agent
                }
            })
        });
    });
    g.finish();
}

criterion_group!(ai, benches);
criterion_main!(ai);
