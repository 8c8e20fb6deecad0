//! The FSM strategy: one RunInstruction at a time, results fed back,
//! deferred directives, transitions, snapshots.

use std::time::Duration;

use jido::directive::error_context;
use jido::effect::StateOp;
use jido::exec::Exec;
use jido::prelude::*;
use jido::signal::Signal;
use jido::strategy::{FSM_RESULT_ACTION, Fsm, STRATEGY_KEY, run_instruction_directive};
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
    #[serde(default)]
    fail: bool,
}

/// Appends `item` to `state.log`, emits `"<item>.done"` and sets
/// `last_item` through a state op; with `fail` it emits `"<item>.failed"`,
/// pushes a state op, and fails.
struct Step;
impl Action for Step {
    type Params = Item;
    type Output = Value;
    const NAME: &'static str = "step";
    async fn run(&self, p: Item, ctx: &Context) -> jido::Result<Value> {
        if p.fail {
            ctx.push_effect(Directive::emit(Signal::new(
                format!("{}.failed", p.item),
                Value::Null,
            )));
            ctx.push_effect(StateOp::set_state(obj(json!({"not": "applied"}))));
            return Err(Error::execution(format!("{} failed", p.item)).with_retry(false));
        }
        let mut log = ctx
            .state()
            .and_then(|s| s.get("log"))
            .and_then(jido::state::StateValue::as_array)
            .map(jido::state::StateArray::to_json)
            .unwrap_or_default();
        log.push(Value::String(p.item.clone()));
        ctx.push_effect(Directive::emit(Signal::new(
            format!("{}.done", p.item),
            Value::Null,
        )));
        ctx.push_effect(StateOp::set_state(obj(json!({"last_item": p.item}))));
        Ok(json!({ "log": log }))
    }
}

fn step(item: &str) -> Instruction {
    Instruction::new(Step).with_params(json!({ "item": item }))
}

fn failing(item: &str) -> Instruction {
    Instruction::new(Step).with_params(json!({ "item": item, "fail": true }))
}

struct Machine;
impl Agent for Machine {
    const NAME: &'static str = "machine";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(Fsm::new())
    }
}

/// An FSM configured by the definition's fields.
struct Custom(Fsm);
impl Agent for Custom {
    const NAME: &'static str = "custom";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(self.0.clone())
    }
}

fn machine(agent: &AgentState) -> Value {
    agent.state()[STRATEGY_KEY]["machine"].to_json()
}

/// What a directive is, in a word: `run:<item>`, `emit:<type>`,
/// `error:<context>`.
fn label(d: &Directive) -> String {
    match d {
        Directive::RunInstruction {
            instruction,
            result_action,
            ..
        } => {
            assert_eq!(result_action, FSM_RESULT_ACTION);
            format!("run:{}", instruction.params["item"].as_str().unwrap())
        }
        Directive::Emit { signal, .. } => format!("emit:{}", signal.ty()),
        Directive::Error { context, .. } => format!("error:{context}"),
        other => format!("{other:?}"),
    }
}

fn labels(ds: &[Directive]) -> Vec<String> {
    ds.iter().map(label).collect()
}

/// Does what the runtime does with the single RunInstruction among
/// `directives`: runs it and feeds the result back.
async fn feed(agent: &mut AgentState, directives: Vec<Directive>) -> Vec<Directive> {
    assert_eq!(
        directives.len(),
        1,
        "expected one RunInstruction: {directives:?}"
    );
    let feedback = run_instruction_directive(agent, &directives[0], &Exec::new())
        .await
        .expect("a RunInstruction");
    agent.cmd(feedback, ExecOptions::new()).await
}

#[test]
fn init_writes_the_machine_at_new() {
    let agent = AgentState::new(Machine, AgentOptions::new());
    assert_eq!(
        agent.state()[STRATEGY_KEY],
        json!({
            "module": "fsm",
            "machine": {
                "status": "idle",
                "processed_count": 0,
                "last_result": null,
                "error": null,
                "history": [],
                "transitions": {
                    "idle": ["processing"],
                    "processing": ["idle", "completed", "failed"],
                    "completed": ["idle"],
                    "failed": ["idle"]
                }
            }
        })
    );
    assert_eq!(agent.strategy().name(), "fsm");
    let snap = agent.strategy_snapshot();
    assert_eq!(
        (snap.status, snap.done, snap.result.clone()),
        (SnapshotStatus::Idle, false, None)
    );
    assert_eq!(
        Value::Object(snap.details),
        json!({"state": "idle", "processed_count": 0, "error": null})
    );
}

#[tokio::test]
async fn a_batch_runs_one_instruction_at_a_time_and_defers_directives() {
    let mut agent = AgentState::new(Machine, AgentOptions::new());

    let d = agent
        .cmd(vec![step("a"), step("b")], ExecOptions::new())
        .await;
    assert_eq!(labels(&d), ["run:a"]);
    let Directive::RunInstruction { meta, .. } = &d[0] else {
        panic!()
    };
    assert!(meta.is_empty());
    assert_eq!(machine(&agent)["status"], "processing");
    assert!(agent.state().get("log").is_none());
    let snap = agent.strategy_snapshot();
    assert_eq!((snap.status, snap.done), (SnapshotStatus::Running, false));

    let d = feed(&mut agent, d).await;
    assert_eq!(labels(&d), ["run:b"]);
    assert_eq!(agent.state()["log"], json!(["a"]));
    // State ops of a result apply at once.
    assert_eq!(agent.state()["last_item"], "a");
    assert_eq!(machine(&agent)["processed_count"], 1);
    assert_eq!(machine(&agent)["last_result"], json!({"log": ["a"]}));
    assert_eq!(machine(&agent)["status"], "processing");

    let d = feed(&mut agent, d).await;
    assert_eq!(labels(&d), ["emit:a.done", "emit:b.done"]);
    assert_eq!(agent.state()["log"], json!(["a", "b"]));
    assert_eq!(agent.state()["last_item"], "b");
    assert_eq!(
        machine(&agent),
        json!({
            "status": "idle",
            "processed_count": 2,
            "last_result": {"log": ["a", "b"]},
            "error": null,
            "history": [
                {"from": "idle", "to": "processing"},
                {"from": "processing", "to": "idle"}
            ],
            "transitions": machine(&agent)["transitions"].clone()
        })
    );
    let snap = agent.strategy_snapshot();
    assert_eq!(snap.status, SnapshotStatus::Idle);
    assert_eq!(snap.result, Some(json!({"log": ["a", "b"]})));
    assert_eq!(snap.details["processed_count"], 2);

    // The next batch counts on.
    let d = agent.cmd(step("c"), ExecOptions::new()).await;
    let d = feed(&mut agent, d).await;
    assert_eq!(labels(&d), ["emit:c.done"]);
    assert_eq!(machine(&agent)["processed_count"], 3);
}

#[tokio::test]
async fn the_final_state_matches_direct() {
    struct DirectAgent;
    impl Agent for DirectAgent {
        const NAME: &'static str = "direct_agent";
        type Schema = ();
    }
    let batch = || vec![step("a"), failing("b"), step("c")];
    let mut direct = AgentState::new(DirectAgent, AgentOptions::new());
    let direct_d = direct.cmd(batch(), ExecOptions::new()).await;

    let mut fsm = AgentState::new(Machine, AgentOptions::new());
    let mut d = fsm.cmd(batch(), ExecOptions::new()).await;
    while matches!(d.as_slice(), [Directive::RunInstruction { .. }]) {
        d = feed(&mut fsm, d).await;
    }
    assert_eq!(labels(&d), labels(&direct_d));
    assert_eq!(
        labels(&d),
        [
            "emit:a.done",
            "error:instruction",
            "emit:b.failed",
            "emit:c.done"
        ]
    );
    let mut fsm_state = fsm.state().clone();
    fsm_state.remove(STRATEGY_KEY);
    assert_eq!(&fsm_state, direct.state());
}

#[tokio::test]
async fn a_failed_instruction_sets_the_error_and_the_batch_goes_on() {
    let mut agent = AgentState::new(Machine, AgentOptions::new());
    let d = agent
        .cmd(vec![failing("x"), step("y")], ExecOptions::new())
        .await;
    let d = feed(&mut agent, d).await;
    assert_eq!(labels(&d), ["run:y"]);
    let reason = json!({
        "type": "execution_error",
        "message": "x failed",
        "details": {"retry": false},
        "retryable": false
    });
    assert_eq!(machine(&agent)["error"], reason);
    assert_eq!(machine(&agent)["processed_count"], 0);
    assert!(agent.state().get("not").is_none());

    let d = feed(&mut agent, d).await;
    assert_eq!(
        labels(&d),
        ["error:instruction", "emit:x.failed", "emit:y.done"]
    );
    let Directive::Error { error, .. } = &d[0] else {
        panic!()
    };
    assert_eq!(error.message(), "instruction failed");
    assert_eq!(error.detail("reason"), Some(&reason));
    assert_eq!(machine(&agent)["status"], "idle");
    assert_eq!(machine(&agent)["processed_count"], 1);
    // The error stays until the next batch starts.
    assert_eq!(agent.strategy_snapshot().details["error"], reason);
    let d = agent.cmd(step("z"), ExecOptions::new()).await;
    assert_eq!(machine(&agent)["error"], Value::Null);
    feed(&mut agent, d).await;
}

#[tokio::test]
async fn a_command_while_processing_is_a_refused_transition() {
    let mut agent = AgentState::new(Machine, AgentOptions::new());
    agent
        .cmd(vec![step("a"), step("b")], ExecOptions::new())
        .await;
    let before = agent.state().clone();
    let d = agent.cmd(step("c"), ExecOptions::new()).await;
    assert_eq!(d.len(), 1);
    let Directive::Error { error, context } = &d[0] else {
        panic!()
    };
    assert_eq!(context, error_context::FSM_TRANSITION);
    assert_eq!(error.kind(), ErrorKind::Execution);
    assert_eq!(error.message(), "fsm transition failed");
    assert_eq!(error.detail("from"), Some(&json!("processing")));
    assert_eq!(error.detail("to"), Some(&json!("processing")));
    assert_eq!(agent.state(), &before);
}

#[tokio::test]
async fn malformed_or_unexpected_results_give_instruction_result_errors() {
    let mut agent = AgentState::new(Machine, AgentOptions::new());

    // Idle: no batch is waiting for a result.
    let d = agent
        .cmd(
            Command::strategy(
                FSM_RESULT_ACTION,
                json!({"status": "ok", "result": {"x": 1}}),
            ),
            ExecOptions::new(),
        )
        .await;
    let Directive::Error { error, context } = &d[0] else {
        panic!()
    };
    assert_eq!(
        (context.as_str(), error.message()),
        ("instruction_result", "unexpected instruction result")
    );
    assert!(agent.state().get("x").is_none());

    // Processing: a payload that is not an object changes nothing.
    agent.cmd(step("a"), ExecOptions::new()).await;
    let before = agent.state().clone();
    let d = agent
        .cmd(
            Command::strategy(FSM_RESULT_ACTION, json!([1, 2])),
            ExecOptions::new(),
        )
        .await;
    assert_eq!(d.len(), 1);
    let Directive::Error { error, context } = &d[0] else {
        panic!()
    };
    assert_eq!(context, error_context::INSTRUCTION_RESULT);
    assert_eq!(error.message(), "invalid instruction result");
    assert_eq!(
        error.detail("reason"),
        Some(&json!("expected a JSON object, got an array"))
    );
    assert_eq!(agent.state(), &before);

    // A JSON result (e.g. from a signal) is accepted too.
    let d = agent
        .cmd(
            Command::strategy(
                FSM_RESULT_ACTION,
                json!({"status": "ok", "result": {"via": "json"}}),
            ),
            ExecOptions::new(),
        )
        .await;
    assert!(d.is_empty());
    assert_eq!(agent.state()["via"], "json");
    assert_eq!(machine(&agent)["status"], "idle");
}

#[tokio::test]
async fn unknown_strategy_commands_give_an_error() {
    let mut agent = AgentState::new(Machine, AgentOptions::new());
    let d = agent
        .cmd(
            Command::strategy("instruction_result", json!({})),
            ExecOptions::new(),
        )
        .await;
    let Directive::Error { error, context } = &d[0] else {
        panic!()
    };
    assert_eq!(context, "strategy_command");
    assert_eq!(
        error.message(),
        "unknown strategy command: instruction_result"
    );
    assert_eq!(machine(&agent)["status"], "idle");
}

#[tokio::test]
async fn without_auto_transition_the_machine_stays_processing() {
    let mut agent = AgentState::new(
        Custom(Fsm::new().auto_transition(false)),
        AgentOptions::new(),
    );
    let d = agent.cmd(step("a"), ExecOptions::new()).await;
    let d = feed(&mut agent, d).await;
    assert_eq!(labels(&d), ["emit:a.done"]);
    assert_eq!(machine(&agent)["status"], "processing");
    assert_eq!(agent.strategy_snapshot().status, SnapshotStatus::Running);
    let d = agent.cmd(step("b"), ExecOptions::new()).await;
    assert_eq!(labels(&d), ["error:fsm_transition"]);
}

#[tokio::test]
async fn custom_initial_state_and_transitions() {
    let fsm = Fsm::new()
        .initial_state("ready")
        .transitions([("ready", vec!["processing"]), ("processing", vec!["ready"])]);
    let mut agent = AgentState::new(Custom(fsm), AgentOptions::new());
    assert_eq!(machine(&agent)["status"], "ready");
    assert_eq!(
        machine(&agent)["transitions"],
        json!({"ready": ["processing"], "processing": ["ready"]})
    );
    assert_eq!(agent.strategy_snapshot().status, SnapshotStatus::Idle);
    let d = agent.cmd(step("a"), ExecOptions::new()).await;
    let d = feed(&mut agent, d).await;
    assert_eq!(labels(&d), ["emit:a.done"]);
    assert_eq!(machine(&agent)["status"], "ready");
}

#[tokio::test]
async fn a_table_without_processing_refuses_every_batch() {
    let fsm = Fsm::new().initial_state("draft").transitions([
        ("draft", vec!["pending_review"]),
        ("pending_review", vec!["approved"]),
    ]);
    let mut agent = AgentState::new(Custom(fsm), AgentOptions::new());
    let d = agent.cmd(step("a"), ExecOptions::new()).await;
    let Directive::Error { error, context } = &d[0] else {
        panic!()
    };
    assert_eq!(context, "fsm_transition");
    assert_eq!(error.detail("from"), Some(&json!("draft")));
    assert_eq!(error.detail("to"), Some(&json!("processing")));
    assert!(agent.state().get("log").is_none());
}

#[tokio::test]
async fn a_refused_return_to_the_initial_state_comes_after_the_deferred_directives() {
    let fsm = Fsm::new().transitions([
        ("idle", vec!["processing"]),
        ("processing", vec!["completed"]),
    ]);
    let mut agent = AgentState::new(Custom(fsm), AgentOptions::new());
    let d = agent.cmd(step("a"), ExecOptions::new()).await;
    let d = feed(&mut agent, d).await;
    assert_eq!(labels(&d), ["emit:a.done", "error:fsm_transition"]);
    let Directive::Error { error, .. } = &d[1] else {
        panic!()
    };
    assert_eq!(error.detail("from"), Some(&json!("processing")));
    assert_eq!(error.detail("to"), Some(&json!("idle")));
    assert_eq!(machine(&agent)["status"], "processing");
}

#[tokio::test]
async fn snapshot_maps_machine_states() {
    let mut agent = AgentState::new(Machine, AgentOptions::new());
    let cases = [
        ("idle", SnapshotStatus::Idle, false),
        ("processing", SnapshotStatus::Running, false),
        ("completed", SnapshotStatus::Success, true),
        ("failed", SnapshotStatus::Failure, true),
        ("elsewhere", SnapshotStatus::Running, false),
    ];
    for (state, status, done) in cases {
        agent.set(obj(json!({"__strategy__": {"machine": {"status": state, "last_result": {"r": 1}, "error": "e"}}})));
        let snap = agent.strategy_snapshot();
        assert_eq!((snap.status, snap.done), (status, done), "{state}");
        assert_eq!(snap.result, Some(json!({"r": 1})));
        assert_eq!(
            Value::Object(snap.details),
            json!({"state": state, "processed_count": 0, "error": "e"})
        );
    }
}

#[tokio::test(start_paused = true)]
async fn cmd_options_travel_with_the_run_instructions() {
    let mut agent = AgentState::new(Machine, AgentOptions::new());
    let opts = ExecOptions::new()
        .timeout(Duration::from_secs(2))
        .max_retries(0);
    let d = agent.cmd(vec![step("a"), step("b")], opts).await;
    let Directive::RunInstruction { instruction, .. } = &d[0] else {
        panic!()
    };
    assert_eq!(instruction.opts, opts);
    let d = feed(&mut agent, d).await;
    let Directive::RunInstruction { instruction, .. } = &d[0] else {
        panic!()
    };
    assert_eq!(instruction.opts, opts);
}

#[tokio::test]
async fn checkpoint_keeps_the_machine_but_not_the_pending_batch() {
    let mut agent = AgentState::new(Machine, AgentOptions::new().id("m1"));
    let d = agent.cmd(step("a"), ExecOptions::new()).await;
    feed(&mut agent, d).await;
    let saved = agent.checkpoint();
    let back = AgentState::restore(Machine, &saved).unwrap();
    assert_eq!(machine(&back), machine(&agent));
    assert_eq!(back.strategy_snapshot(), agent.strategy_snapshot());
}

#[tokio::test]
async fn a_batch_interrupted_by_a_checkpoint_returns_to_the_initial_state_on_init() {
    let mut agent = AgentState::new(Machine, AgentOptions::new().id("m2"));
    let d = agent
        .cmd(vec![step("a"), step("b")], ExecOptions::new())
        .await;
    let _ = feed(&mut agent, d).await;
    let saved = agent.checkpoint();
    let mut back = AgentState::restore(Machine, &saved).unwrap();
    assert_eq!(machine(&back)["status"], "processing");
    assert!(back.init_strategy(CmdOptions::new()).is_empty());
    assert_eq!(machine(&back)["status"], "idle");
    assert_eq!(machine(&back)["processed_count"], 1);
    assert_eq!(back.state()["log"], json!(["a"]));
    // It takes new work again.
    let d = back.cmd(step("c"), ExecOptions::new()).await;
    assert_eq!(labels(&d), ["run:c"]);
    // The live agent is not affected by init while its batch runs.
    assert!(agent.init_strategy(CmdOptions::new()).is_empty());
    assert_eq!(machine(&agent)["status"], "processing");
}
