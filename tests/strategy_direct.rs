//! The Direct strategy: sequential runs, errors as directives, results of
//! RunInstruction, unknown strategy commands.

use std::time::Duration;

use jido::directive::error_context;
use jido::effect::StateOp;
use jido::exec::Exec;
use jido::prelude::*;
use jido::signal::Signal;
use jido::strategy::{Direct, instruction_feedback};
use serde_json::{Map, Value, json};

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Item {
    item: String,
}

/// Appends `item` to `state.log`.
struct Append;
impl Action for Append {
    type Params = Item;
    type Output = Value;
    const NAME: &'static str = "append";
    async fn run(&self, p: Item, ctx: &Context) -> jido::Result<Value> {
        let mut log = ctx
            .state()
            .and_then(|s| s.get("log"))
            .and_then(jido::state::StateValue::as_array)
            .map(jido::state::StateArray::to_json)
            .unwrap_or_default();
        log.push(Value::String(p.item));
        Ok(json!({ "log": log }))
    }
}

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct FailParams {
    message: String,
    #[serde(default)]
    emit: bool,
}

/// Fails without retry; optionally pushes an Emit and a SetState first.
struct Fail;
impl Action for Fail {
    type Params = FailParams;
    type Output = ();
    const NAME: &'static str = "fail";
    async fn run(&self, p: FailParams, ctx: &Context) -> jido::Result<()> {
        if p.emit {
            ctx.push_effect(Directive::emit(Signal::new("failing", Value::Null)));
            ctx.push_effect(StateOp::set_state(obj(json!({"should_not": "apply"}))));
        }
        Err(Error::execution(p.message).with_retry(false))
    }
}

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Empty {}

struct Panics;
impl Action for Panics {
    type Params = Empty;
    type Output = ();
    const NAME: &'static str = "panics";
    async fn run(&self, _: Empty, _: &Context) -> jido::Result<()> {
        panic!("kaboom")
    }
}

struct Sleepy;
impl Action for Sleepy {
    type Params = Empty;
    type Output = ();
    const NAME: &'static str = "sleepy";
    async fn run(&self, _: Empty, _: &Context) -> jido::Result<()> {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(())
    }
}

/// Asks the runtime to run `append {item: "later"}` through a RunInstruction.
struct Defer;
impl Action for Defer {
    type Params = Empty;
    type Output = Value;
    const NAME: &'static str = "defer";
    async fn run(&self, _: Empty, ctx: &Context) -> jido::Result<Value> {
        ctx.push_effect(Directive::run_instruction(
            Instruction::new(Append).with_params(json!({"item": "later"})),
        ));
        Ok(json!({"deferred": true}))
    }
}

/// Outputs `{emitted: <n>}` and emits a signal.
struct Emitter;
impl Action for Emitter {
    type Params = Empty;
    type Output = Value;
    const NAME: &'static str = "emitter";
    async fn run(&self, _: Empty, ctx: &Context) -> jido::Result<Value> {
        ctx.push_effect(Directive::emit(Signal::new("from_result", Value::Null)));
        ctx.push_effect(StateOp::set_path(["nested", "flag"], json!(true)));
        Ok(json!({"emitted": 1}))
    }
}

struct Plain;
impl Agent for Plain {
    const NAME: &'static str = "plain";
    type Schema = ();
}

struct Explicit;
impl Agent for Explicit {
    const NAME: &'static str = "explicit";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(Direct)
    }
}

fn append(item: &str) -> Instruction {
    Instruction::new(Append).with_params(json!({ "item": item }))
}

fn fail(message: &str) -> Instruction {
    Instruction::new(Fail).with_params(json!({ "message": message }))
}

#[tokio::test]
async fn runs_instructions_in_order() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let directives = agent
        .cmd(
            vec![append("a"), append("b"), append("c")],
            ExecOptions::new(),
        )
        .await;
    assert!(directives.is_empty());
    assert_eq!(agent.state()["log"], json!(["a", "b", "c"]));
}

#[tokio::test]
async fn the_default_strategy_is_direct() {
    let mut a = AgentState::new(Plain, AgentOptions::new());
    let mut b = AgentState::new(Explicit, AgentOptions::new());
    assert_eq!(a.strategy().name(), "direct");
    let da = a
        .cmd(vec![append("x"), fail("no")], ExecOptions::new())
        .await;
    let db = b
        .cmd(vec![append("x"), fail("no")], ExecOptions::new())
        .await;
    assert_eq!(a.state(), b.state());
    assert_eq!(format!("{da:?}"), format!("{db:?}"));
}

#[tokio::test]
async fn an_error_becomes_a_directive_and_the_loop_continues() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let directives = agent
        .cmd(
            vec![append("a"), fail("boom"), append("b")],
            ExecOptions::new(),
        )
        .await;
    assert_eq!(agent.state()["log"], json!(["a", "b"]));
    assert_eq!(directives.len(), 1);
    let Directive::Error { error, context } = &directives[0] else {
        panic!("{directives:?}")
    };
    assert_eq!(context, error_context::INSTRUCTION);
    assert_eq!(error.kind(), ErrorKind::Execution);
    assert_eq!(error.message(), "instruction failed");
    assert_eq!(
        Value::Object(error.details().clone()),
        json!({"reason": {
            "type": "execution_error",
            "message": "boom",
            "details": {"retry": false},
            "retryable": false
        }})
    );
    // Retryability follows the cause.
    assert!(!error.retryable());
}

#[tokio::test]
async fn a_failed_action_gives_error_then_its_directives_without_state_ops() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let directives = agent
        .cmd(
            vec![
                Instruction::new(Fail).with_params(json!({"message": "x", "emit": true})),
                append("after"),
            ],
            ExecOptions::new(),
        )
        .await;
    assert_eq!(directives.len(), 2);
    assert!(matches!(&directives[0], Directive::Error { context, .. } if context == "instruction"));
    assert!(
        matches!(&directives[1], Directive::Emit { signal, dispatch: None } if signal.ty() == "failing")
    );
    assert_eq!(
        Value::Object(agent.state().to_json()),
        json!({"log": ["after"]})
    );
}

#[tokio::test]
async fn validation_and_panics_are_reported_per_instruction() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let directives = agent
        .cmd(
            vec![
                Instruction::new(Append).with_params(json!({"item": 5})),
                Instruction::new(Panics),
                append("ok"),
            ],
            ExecOptions::new().max_retries(0),
        )
        .await;
    assert_eq!(agent.state()["log"], json!(["ok"]));
    let reasons: Vec<Value> = directives
        .iter()
        .map(|d| match d {
            Directive::Error { error, context } if context == "instruction" => {
                error.detail("reason").unwrap().clone()
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(reasons.len(), 2);
    assert_eq!(reasons[0]["type"], "validation_error");
    assert_eq!(reasons[0]["details"]["path"], "item");
    assert_eq!(reasons[0]["retryable"], false);
    assert_eq!(reasons[1]["type"], "execution_error");
    assert_eq!(reasons[1]["message"], "action panics panicked: kaboom");
}

#[tokio::test(start_paused = true)]
async fn timeouts_are_reported_and_retried_per_options() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let started = tokio::time::Instant::now();
    let directives = agent
        .cmd(
            Sleepy,
            ExecOptions::new()
                .timeout(Duration::from_millis(100))
                .max_retries(1)
                .backoff(Duration::from_millis(10)),
        )
        .await;
    assert_eq!(directives.len(), 1);
    let Directive::Error { error, .. } = &directives[0] else {
        panic!()
    };
    assert_eq!(error.detail("reason").unwrap()["type"], "timeout");
    // Two attempts of 100 ms and one 10 ms backoff, in virtual time.
    assert_eq!(started.elapsed(), Duration::from_millis(210));
}

#[tokio::test]
async fn unknown_strategy_commands_give_an_error_and_the_rest_runs() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let directives = agent
        .cmd(
            vec![Command::strategy("halt", json!({})), append("a").into()],
            ExecOptions::new(),
        )
        .await;
    assert_eq!(agent.state()["log"], json!(["a"]));
    assert_eq!(directives.len(), 1);
    let Directive::Error { error, context } = &directives[0] else {
        panic!()
    };
    assert_eq!(context, error_context::STRATEGY_COMMAND);
    assert_eq!(error.kind(), ErrorKind::Validation);
    assert_eq!(error.message(), "unknown strategy command: halt");
    assert_eq!(error.detail("command"), Some(&json!("halt")));
}

#[tokio::test]
async fn run_instruction_results_feed_back_through_cmd() {
    let exec = Exec::new();
    let mut agent = AgentState::new(
        Plain,
        AgentOptions::new().state(obj(json!({"log": ["first"]}))),
    );
    let directives = agent.cmd(Defer, ExecOptions::new()).await;
    assert_eq!(directives.len(), 1);
    let Directive::RunInstruction {
        instruction,
        result_action,
        meta,
    } = directives.into_iter().next().unwrap()
    else {
        panic!()
    };
    assert_eq!(result_action, "instruction_result");
    assert_eq!(agent.state()["deferred"], true);

    let id = instruction.id.to_string();
    let feedback = instruction_feedback(&agent, *instruction, &result_action, &meta, &exec).await;
    let Command::Strategy {
        name,
        params,
        effects,
    } = &feedback
    else {
        panic!()
    };
    assert_eq!(name, "instruction_result");
    assert_eq!(
        params,
        &json!({
            "status": "ok",
            "result": {"log": ["first", "later"]},
            "instruction": {"id": id, "action": "append"},
            "meta": {}
        })
    );
    assert!(effects.is_empty());
    // Feedback does not touch the agent.
    assert_eq!(agent.state()["log"], json!(["first"]));

    let directives = agent.cmd(feedback, ExecOptions::new()).await;
    assert!(directives.is_empty());
    assert_eq!(agent.state()["log"], json!(["first", "later"]));
}

#[tokio::test]
async fn feedback_of_a_success_carries_its_effects() {
    let exec = Exec::new();
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let feedback = instruction_feedback(
        &agent,
        Instruction::new(Emitter),
        "instruction_result",
        &Map::new(),
        &exec,
    )
    .await;
    let Command::Strategy { effects, .. } = &feedback else {
        panic!()
    };
    assert_eq!(effects.len(), 2);
    let directives = agent.cmd(feedback, ExecOptions::new()).await;
    assert!(
        matches!(&directives[..], [Directive::Emit { signal, .. }] if signal.ty() == "from_result")
    );
    assert_eq!(
        Value::Object(agent.state().to_json()),
        json!({"emitted": 1, "nested": {"flag": true}})
    );
}

#[tokio::test]
async fn feedback_of_a_failure_becomes_an_instruction_error() {
    let exec = Exec::new();
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let meta = obj(json!({"step": 3}));
    let ins = Instruction::new(Fail).with_params(json!({"message": "nope", "emit": true}));
    let feedback = instruction_feedback(&agent, ins, "instruction_result", &meta, &exec).await;
    let Command::Strategy {
        params, effects, ..
    } = &feedback
    else {
        panic!()
    };
    assert_eq!(params["status"], "error");
    assert_eq!(
        params["reason"],
        json!({"type": "execution_error", "message": "nope", "details": {"retry": false}, "retryable": false})
    );
    assert_eq!(params["meta"], json!({"step": 3}));
    assert!(params.get("result").is_none());
    assert_eq!(effects.len(), 2);

    let directives = agent.cmd(feedback, ExecOptions::new()).await;
    assert_eq!(directives.len(), 2);
    let Directive::Error { error, context } = &directives[0] else {
        panic!()
    };
    assert_eq!(
        (context.as_str(), error.message()),
        ("instruction", "instruction failed")
    );
    assert_eq!(error.detail("reason").unwrap()["message"], "nope");
    assert!(matches!(&directives[1], Directive::Emit { signal, .. } if signal.ty() == "failing"));
    assert!(agent.state().is_empty());
}

#[tokio::test]
async fn malformed_instruction_results_give_an_instruction_result_error() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let cases = [
        (json!("ok"), "expected a JSON object, got a string"),
        (
            json!({"status": "maybe"}),
            "status must be \"ok\" or \"error\"",
        ),
        (
            json!({"status": "ok", "result": [1]}),
            "result must be a JSON object, got an array",
        ),
    ];
    for (params, reason) in cases {
        let directives = agent
            .cmd(
                Command::strategy("instruction_result", params),
                ExecOptions::new(),
            )
            .await;
        assert_eq!(directives.len(), 1);
        let Directive::Error { error, context } = &directives[0] else {
            panic!()
        };
        assert_eq!(context, error_context::INSTRUCTION_RESULT);
        assert_eq!(error.kind(), ErrorKind::Validation);
        assert_eq!(error.message(), "invalid instruction result");
        assert_eq!(error.detail("reason"), Some(&json!(reason)));
    }
    assert!(agent.state().is_empty());
}

#[tokio::test]
async fn direct_keeps_no_strategy_state() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    agent
        .cmd(vec![append("a"), fail("x")], ExecOptions::new())
        .await;
    assert!(agent.strategy_state().is_none());
    let snap = agent.strategy_snapshot();
    assert_eq!(
        (snap.status, snap.done, snap.result),
        (SnapshotStatus::Idle, false, None)
    );
    assert!(snap.details.is_empty());
}
