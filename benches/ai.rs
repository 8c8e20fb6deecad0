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
//!   `AgentState::cmd`: the query, the model's `ai.llm.response` and the
//!   tool's `ai.tool.result` fed back as the runtime sends them (signals
//!   with typed payloads, `LlmResultData` and `ToolResultData`, in the
//!   command's options, the command's params `null`), the directives it
//!   returns executed by the harness (the model through `LlmClient`, the
//!   tool through Exec). The agent is a clone of a fresh one each round
//!   (O(1): its state is shared), so the conversation does not grow.
//!
//! `(react_cmd − raw_hand_loop)` is the strategy's overhead per request
//! (an upper bound of its overhead per turn).
//!
//! Beside it, in the same group, Chain of Thought (input `cot`: one model
//! call) and Tree of Thoughts (input `tot`: depth 2, two thoughts per
//! node, four model calls), each timed *per model call* (a request's time
//! divided by its calls):
//!
//! * `raw_replay` (baseline): the same model requests the strategy makes,
//!   replayed by hand, and their answers parsed with the same parsers;
//! * `strategy_cmd`: the strategy driving those calls through
//!   `AgentState::cmd`, its `LlmGenerate` directives executed by the
//!   harness and the answers fed back as `ai.llm.response` payloads.
//!
//! Group `react_runtime`: the same request through the whole runtime,
//! the caller in a spawned task:
//!
//! * `raw_ractor_react` (baseline): a raw ractor actor doing the loop the
//!   way the runtime does it: the question arrives as a call, each model
//!   call and each tool run (Exec, same options) is a spawned tokio task
//!   whose result comes back to the actor as a message, the answer is the
//!   call's reply;
//! * `raw_task_loop`: the hand-written loop in the caller's task;
//! * `react_agent`: an `AgentServer` running ReAct on an `AiRuntime` with
//!   the scripted model: `cast` of `ai.react.query`, then
//!   `await_completion` of the request (ReAct with `keep_conversation(false)`,
//!   so that the state does not grow with the rounds).
//!
//! With `CI` set the runs are shorter.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group};
use jido::ai::client::{LlmClient, Script, ScriptedModel};
use jido::ai::envelope::ResultEnvelope;
use jido::ai::react::machine::Turn;
use jido::ai::react::{ReAct, commands};
use jido::ai::reasoning::machine::{Event, Machine, Step};
use jido::ai::reasoning::parse::{parse_scores, parse_thoughts, steps_and_conclusion};
use jido::ai::reasoning::{ChainOfThought, Reasoning, TreeOfThoughts};
use jido::ai::signals::{LlmResultData, ToolResultData};
use jido::ai::{
    LlmGenerate, LlmRequest, LlmResponse, Message, Messages, ToolExec, ToolSet, ToolSpecs,
};
use jido::exec::Exec;
use jido::prelude::*;
use jido::server::{Jido, JidoConfig};
use jido::strategy::Command;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::{Value, json};

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
    // No request log: the cases measure the loop, not the test aid.
    Arc::new(ScriptedModel::new([script]).expect("script").request_log(0))
}

fn inline() -> ExecOptions {
    ExecOptions::new().timeout(Duration::ZERO).max_retries(0)
}

/// The hand-written loop.
async fn hand_loop(model: &Arc<dyn LlmClient>, exec: &Exec, tools: &ToolSet) -> LlmResponse {
    let specs: ToolSpecs = tools.specs().into();
    let mut messages = Messages::from(vec![Message::user(QUESTION)]);
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
                .with_params(Value::clone(&call.arguments))
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
        // What the runtime sends back: a signal with a typed payload,
        // routed to the strategy command with `null` params.
        let (name, signal) = if let Some(d) = custom.downcast_ref::<LlmGenerate>() {
            let mut req = LlmRequest::new("scripted", d.context.clone());
            req.tools = d.tools.clone();
            let resp = model.generate(req).await.expect("model");
            let data = LlmResultData {
                call_id: d.id.clone(),
                result: Ok(resp),
                model: String::new(),
                duration_ms: 0,
                metadata: Default::default(),
            };
            (commands::LLM_RESULT, data.into_signal())
        } else if let Some(d) = custom.downcast_ref::<ToolExec>() {
            let action = d.action.clone().expect("tool action");
            let ins = Instruction::new(action)
                .with_params(Value::clone(&d.arguments))
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
                metadata: Default::default(),
            };
            (commands::TOOL_RESULT, data.into_signal())
        } else {
            continue;
        };
        let feedback = Command::strategy(name, Value::Null);
        pending.extend(agent.cmd(feedback, opts.clone().signal(signal)).await);
    }
    pending
}

struct Thinker(DynStrategy);
impl Agent for Thinker {
    const NAME: &'static str = "bench_reasoning";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        self.0.clone()
    }
}

const COT_ANSWER: &str = "Step 1: 6 times 7 is 42.\nStep 2: Check 42 / 7 = 6.\nConclusion: 42";
const TOT_ANSWERS: [&str; 4] = [
    r#"{"thoughts":[{"content":"Multiply directly"},{"content":"Add 6 seven times"}]}"#,
    r#"{"scores":{"t1":0.9,"t2":0.4}}"#,
    r#"{"thoughts":[{"content":"6 * 7 = 42"},{"content":"7 * 6 = 42"}]}"#,
    r#"{"scores":{"t1":0.95,"t2":0.9}}"#,
];

/// A scripted model answering `answers` to the calls machine `M` makes,
/// and the requests it will get (system prompt first), for the replay.
fn reasoning_model<M: Machine>(
    config: &M::Config,
    answers: &[&str],
) -> (Arc<dyn LlmClient>, Vec<LlmRequest>) {
    let mut m = M::default();
    let start = Event::Start {
        request_id: "r1".into(),
        query: QUESTION.into(),
    };
    let mut steps = m.handle(config, start).steps;
    let (mut scripts, mut requests) = (Vec::new(), Vec::new());
    for answer in answers {
        let Some(Step::CallLlm(call)) = steps.first() else {
            panic!("no call")
        };
        let user = call.messages.last().expect("user").content.clone();
        scripts.push(Script::user(user).answer(*answer));
        let mut messages = Vec::new();
        if let Some(system) = &call.system_prompt {
            messages.push(Message::system(system.clone()));
        }
        messages.extend(call.messages.clone());
        requests.push(LlmRequest::new("scripted", messages));
        let event = Event::LlmResult {
            call_id: call.call_id.clone(),
            result: Ok(Turn::answer(*answer)),
        };
        steps = m.handle(config, event).steps;
    }
    (
        Arc::new(ScriptedModel::new(scripts).expect("script")),
        requests,
    )
}

/// The baseline: the same requests by hand, the answers parsed.
async fn raw_replay(model: &Arc<dyn LlmClient>, requests: &[LlmRequest]) -> usize {
    let ids = ["t1".to_string(), "t2".to_string()];
    let mut parsed = 0;
    for req in requests {
        let resp = model.generate(req.clone()).await.expect("model");
        parsed += steps_and_conclusion(&resp.text).0.len()
            + parse_thoughts(&resp.text).0.len()
            + parse_scores(&resp.text, &ids).map_or(0, |(s, _)| s.len());
    }
    parsed
}

/// A reasoning strategy's request, its model calls executed by hand.
async fn strategy_request<M: Machine>(
    agent: &mut AgentState,
    strategy: &Reasoning<M>,
    model: &Arc<dyn LlmClient>,
    exec: &Exec,
) {
    let opts = CmdOptions::new().exec(exec.clone());
    let mut pending = agent
        .cmd(strategy.query_command(QUESTION, Some("r1")), opts.clone())
        .await;
    while let Some(directive) = pending.pop() {
        let Directive::Custom(custom) = &directive else {
            continue;
        };
        let Some(d) = custom.downcast_ref::<LlmGenerate>() else {
            continue;
        };
        let mut messages = Vec::with_capacity(d.context.len() + 1);
        if let Some(system) = &d.system_prompt {
            messages.push(Message::system(system.clone()));
        }
        messages.extend(d.context.iter().cloned());
        let resp = model
            .generate(LlmRequest::new("scripted", messages))
            .await
            .expect("model");
        let turn = Turn {
            text: resp.text,
            tool_calls: resp.tool_calls,
            finish_reason: Some(resp.finish_reason),
            usage: resp.usage,
        };
        pending.extend(
            agent
                .cmd(strategy.llm_result_command(&d.id, Ok(turn)), opts.clone())
                .await,
        );
    }
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

    // Chain of Thought and Tree of Thoughts, per model call.
    let cot = ChainOfThought::new().model("scripted").streaming(false);
    let tot = TreeOfThoughts::new()
        .model("scripted")
        .streaming(false)
        .configure(|c| {
            c.max_depth = 2;
            c.branching_factor = 2;
        });
    let (cot_model, cot_requests) =
        reasoning_model::<jido::ai::reasoning::cot::Cot>(cot.config(), &[COT_ANSWER]);
    let (tot_model, tot_requests) =
        reasoning_model::<jido::ai::reasoning::tot::Tot>(tot.config(), &TOT_ANSWERS);
    let cot_agent = AgentState::new(
        Thinker(DynStrategy::new(cot.clone())),
        AgentOptions::new().id("bench-cot"),
    );
    let tot_agent = AgentState::new(
        Thinker(DynStrategy::new(tot.clone())),
        AgentOptions::new().id("bench-tot"),
    );
    // Both paths make the same calls and the strategies answer.
    for (agent, model, requests, calls, answer) in [
        (&cot_agent, &cot_model, &cot_requests, 1usize, "42"),
        (&tot_agent, &tot_model, &tot_requests, 4, "6 * 7 = 42"),
    ] {
        assert_eq!(requests.len(), calls);
        assert!(rt.block_on(raw_replay(model, requests)) > 0);
        let mut check = agent.clone();
        if calls == 1 {
            rt.block_on(strategy_request(&mut check, &cot, model, &exec));
        } else {
            rt.block_on(strategy_request(&mut check, &tot, model, &exec));
        }
        assert_eq!(check.state()["last_answer"], answer);
    }

    /// Times `round` per model call: a request's time over its calls.
    fn per_call<F, Fut>(rt: &tokio::runtime::Runtime, iters: u64, calls: u32, round: F) -> Duration
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future + Send,
    {
        in_task(rt, iters, round) / calls
    }

    for (name, model, requests) in [
        ("cot", &cot_model, &cot_requests),
        ("tot", &tot_model, &tot_requests),
    ] {
        let calls = requests.len() as u32;
        g.bench_function(BenchmarkId::new("raw_replay", name), |b| {
            b.iter_custom(|iters| {
                let (model, requests) = (model.clone(), requests.clone());
                per_call(&rt, iters, calls, move || {
                    let (model, requests) = (model.clone(), requests.clone());
                    async move { raw_replay(&model, &requests).await }
                })
            });
        });
    }
    g.bench_function(BenchmarkId::new("strategy_cmd", "cot"), |b| {
        b.iter_custom(|iters| {
            let (model, exec, agent, cot) = (
                cot_model.clone(),
                exec.clone(),
                cot_agent.clone(),
                cot.clone(),
            );
            per_call(&rt, iters, 1, move || {
                let (model, exec, cot) = (model.clone(), exec.clone(), cot.clone());
                let mut agent = agent.clone();
                async move {
                    strategy_request(&mut agent, &cot, &model, &exec).await;
                    agent
                }
            })
        });
    });
    g.bench_function(BenchmarkId::new("strategy_cmd", "tot"), |b| {
        b.iter_custom(|iters| {
            let (model, exec, agent, tot) = (
                tot_model.clone(),
                exec.clone(),
                tot_agent.clone(),
                tot.clone(),
            );
            per_call(&rt, iters, 4, move || {
                let (model, exec, tot) = (model.clone(), exec.clone(), tot.clone());
                let mut agent = agent.clone();
                async move {
                    strategy_request(&mut agent, &tot, &model, &exec).await;
                    agent
                }
            })
        });
    });
    g.finish();
}

/// The raw ractor shape of a ReAct agent (see the module docs).
struct RawReact {
    model: Arc<dyn LlmClient>,
    exec: Exec,
    tools: ToolSet,
}

enum RawMsg {
    Ask(String, RpcReplyPort<String>),
    ModelDone(LlmResponse),
    ToolDone(usize, ResultEnvelope),
}

#[cfg(feature = "cluster")]
impl ractor::Message for RawMsg {}

struct RawState {
    messages: Messages,
    pending: Vec<(jido::ai::ToolCall, Option<ResultEnvelope>)>,
    reply: Option<RpcReplyPort<String>>,
}

impl RawReact {
    fn call_model(&self, myself: &ActorRef<RawMsg>, messages: &Messages) {
        let mut req = LlmRequest::new("scripted", messages.clone());
        req.tools = self.tools.specs().into();
        let model = self.model.clone();
        let me = myself.clone();
        tokio::spawn(async move {
            let resp = model.generate(req).await.expect("model");
            let _ = me.cast(RawMsg::ModelDone(resp));
        });
    }
}

impl Actor for RawReact {
    type Msg = RawMsg;
    type State = RawState;
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<RawMsg>, _: ()) -> Result<RawState, ActorProcessingErr> {
        Ok(RawState {
            messages: Messages::new(),
            pending: Vec::new(),
            reply: None,
        })
    }
    async fn handle(
        &self,
        myself: ActorRef<RawMsg>,
        msg: RawMsg,
        state: &mut RawState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RawMsg::Ask(question, reply) => {
                state.messages = Messages::from(vec![Message::user(question)]);
                state.reply = Some(reply);
                self.call_model(&myself, &state.messages);
            }
            RawMsg::ModelDone(resp) => {
                if resp.tool_calls.is_empty() {
                    state.messages.push(Message::assistant(resp.text.clone()));
                    if let Some(reply) = state.reply.take() {
                        let _ = reply.send(resp.text);
                    }
                    return Ok(());
                }
                state.messages.push(Message::assistant_tool_calls(
                    resp.text.clone(),
                    resp.tool_calls.clone(),
                ));
                state.pending = resp.tool_calls.into_iter().map(|c| (c, None)).collect();
                for (i, (call, _)) in state.pending.iter().enumerate() {
                    let tool = self.tools.get(&call.name).expect("tool");
                    let ins = Instruction::new(tool.action().clone())
                        .with_params(Value::clone(&call.arguments))
                        .with_opts(tool_opts());
                    let exec = self.exec.clone();
                    let me = myself.clone();
                    tokio::spawn(async move {
                        let outcome = exec.execute(ins, Context::new()).await;
                        let result = match outcome.result {
                            Ok(out) => ResultEnvelope::ok(Value::Object(out)),
                            Err(err) => ResultEnvelope::error(&err),
                        };
                        let _ = me.cast(RawMsg::ToolDone(i, result));
                    });
                }
            }
            RawMsg::ToolDone(i, result) => {
                if let Some(slot) = state.pending.get_mut(i) {
                    slot.1 = Some(result);
                }
                if state.pending.iter().all(|(_, r)| r.is_some()) {
                    for (call, result) in std::mem::take(&mut state.pending) {
                        let result = result.expect("result");
                        state.messages.push(Message::tool_result(
                            call.id,
                            call.name,
                            result.tool_content(),
                        ));
                    }
                    self.call_model(&myself, &state.messages);
                }
            }
        }
        Ok(())
    }
}

/// The options ReAct's ToolExec runs a tool with (its defaults: 15 s per
/// attempt, one retry).
fn tool_opts() -> ExecOptions {
    ExecOptions::new()
        .timeout(Duration::from_millis(15_000))
        .max_retries(1)
}

/// Starts the raw ractor actor running the ReAct loop and a ReAct agent
/// `id` (no kept conversation), both on `model`.
fn start_pair(
    rt: &tokio::runtime::Runtime,
    model: &Arc<dyn LlmClient>,
    exec: &Exec,
    tools: &ToolSet,
    id: &str,
) -> (ActorRef<RawMsg>, Jido, AgentRef) {
    rt.block_on(async {
        let (raw, _) = Actor::spawn(
            None,
            RawReact {
                model: model.clone(),
                exec: exec.clone(),
                tools: tools.clone(),
            },
            (),
        )
        .await
        .expect("raw");
        let ai = jido::ai::AiRuntime::new().client_arc(model.clone());
        let jido = Jido::start(ai.register_instance(JidoConfig::new()))
            .await
            .expect("jido");
        let react = ReAct::new()
            .model("scripted")
            .streaming(false)
            .keep_conversation(false)
            .tools(tools.clone());
        let agent = jido
            .start_agent(
                AgentState::new(Bot(react), AgentOptions::new().id(id)),
                ServerOptions::new(),
            )
            .await
            .expect("agent");
        (raw, jido, agent)
    })
}

fn runtime_benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let exec = Exec::new();
    let tools = ToolSet::new().with(Multiply).expect("tools");
    let model = model();
    let (raw, jido, agent) = start_pair(&rt, &model, &exec, &tools, "bench_react_agent");

    // All three give the same answer.
    let answer = rt.block_on(async {
        let raw_answer = raw
            .call(|r| RawMsg::Ask(QUESTION.into(), r), None)
            .await
            .expect("raw call")
            .expect("raw answer");
        agent
            .cast(ReAct::query(QUESTION, Some("check")))
            .expect("cast");
        let done = agent
            .await_completion(ReAct::await_options("check"))
            .await
            .expect("completion");
        assert_eq!(done.result, json!(raw_answer));
        raw_answer
    });
    assert_eq!(answer, "6 times 7 is 42.");

    let mut g = c.benchmark_group("react_runtime");
    if std::env::var_os("CI").is_some() {
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(1));
    }
    g.bench_function("raw_ractor_react", |b| {
        b.iter_custom(|iters| {
            let raw = raw.clone();
            in_task(&rt, iters, move || {
                let raw = raw.clone();
                async move {
                    raw.call(|r| RawMsg::Ask(QUESTION.into(), r), None)
                        .await
                        .expect("raw call")
                        .expect("raw answer")
                }
            })
        });
    });
    g.bench_function("raw_task_loop", |b| {
        b.iter_custom(|iters| {
            let (model, exec, tools) = (model.clone(), exec.clone(), tools.clone());
            in_task(&rt, iters, move || {
                let (model, exec, tools) = (model.clone(), exec.clone(), tools.clone());
                async move { hand_loop(&model, &exec, &tools).await }
            })
        });
    });
    let seq = Arc::new(std::sync::atomic::AtomicU64::new(0));
    g.bench_function("react_agent", |b| {
        b.iter_custom(|iters| {
            let (agent, seq) = (agent.clone(), seq.clone());
            in_task(&rt, iters, move || {
                let agent = agent.clone();
                let n = seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                async move {
                    let id = format!("q{n}");
                    agent.cast(ReAct::query(QUESTION, Some(&id))).expect("cast");
                    agent
                        .await_completion(ReAct::await_options(&id))
                        .await
                        .expect("completion")
                }
            })
        });
    });
    g.finish();
    rt.block_on(jido.shutdown());
}

criterion_group!(ai, benches, runtime_benches);

/// `JIDO_AI_PROBE=CASE:ROUNDS` runs one case ROUNDS times in a spawned
/// task and exits (for counting instructions with callgrind: the
/// difference of two round counts over the difference in rounds). Cases:
/// `hand` and `cmd` (current-thread runtime), `raw_actor` and `agent`
/// (2-worker runtime).
fn probe(spec: &str) {
    let (case, rounds) = spec.split_once(':').expect("CASE:ROUNDS");
    let rounds: u64 = rounds.parse().expect("rounds");
    let exec = Exec::new();
    let tools = ToolSet::new().with(Multiply).expect("tools");
    let model = model();
    match case {
        "hand" | "cmd" => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let template = AgentState::new(
                Bot(ReAct::new()
                    .model("scripted")
                    .streaming(false)
                    .tools(tools.clone())),
                AgentOptions::new().id("bench"),
            );
            let hand = case == "hand";
            in_task(&rt, rounds, move || {
                let (model, exec, tools) = (model.clone(), exec.clone(), tools.clone());
                let mut agent = template.clone();
                async move {
                    if hand {
                        hand_loop(&model, &exec, &tools).await;
                    } else {
                        react_request(&mut agent, &model, &exec).await;
                    }
                    agent
                }
            });
        }
        "raw_actor" | "agent" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            let (raw, jido, agent) = start_pair(&rt, &model, &exec, &tools, "probe_agent");
            let seq = Arc::new(std::sync::atomic::AtomicU64::new(0));
            let actor = case == "raw_actor";
            in_task(&rt, rounds, move || {
                let (raw, agent) = (raw.clone(), agent.clone());
                let n = seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                async move {
                    if actor {
                        raw.call(|r| RawMsg::Ask(QUESTION.into(), r), None)
                            .await
                            .expect("raw call")
                            .expect("raw answer");
                    } else {
                        let id = format!("q{n}");
                        agent.cast(ReAct::query(QUESTION, Some(&id))).expect("cast");
                        agent
                            .await_completion(ReAct::await_options(&id))
                            .await
                            .expect("completion");
                    }
                }
            });
            rt.block_on(jido.shutdown());
        }
        other => panic!("unknown probe case {other}"),
    }
}

fn main() {
    if let Ok(spec) = std::env::var("JIDO_AI_PROBE") {
        probe(&spec);
        return;
    }
    ai();
    Criterion::default().configure_from_args().final_summary();
}
