//! Behaviour-tree strategy: node truth tables, running/resume, ticks and
//! schedules, commands, blackboard, action nodes, errors, snapshots,
//! checkpoints, Mermaid.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jido::agent::{RouteTarget, STRATEGY_KEY};
use jido::directive::{ScheduledMessage, error_context};
use jido::effect::StateOp;
use jido::prelude::*;
use jido::strategy::behavior_tree::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------- helpers

struct BtAgent(BehaviorTree);

impl Agent for BtAgent {
    const NAME: &'static str = "bt_agent";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(self.0.clone())
    }
}

fn agent(bt: BehaviorTree) -> AgentState {
    AgentState::new(BtAgent(bt), AgentOptions::new().id("bt-1"))
}

fn agent_of(root: Node) -> AgentState {
    agent(BehaviorTree::new(root).unwrap())
}

async fn tick(agent: &mut AgentState) -> Vec<Directive> {
    agent.cmd(Vec::<Command>::new(), CmdOptions::new()).await
}

async fn command(agent: &mut AgentState, name: &str, params: Value) -> Vec<Directive> {
    agent
        .cmd(Command::strategy(name, params), CmdOptions::new())
        .await
}

/// The tree's status as a node status: an error shows as `failure` in the
/// snapshot with `details.error` set.
fn outcome(agent: &AgentState) -> &'static str {
    let snap = agent.strategy_snapshot();
    match snap.status {
        SnapshotStatus::Success => "success",
        SnapshotStatus::Running => "running",
        SnapshotStatus::Idle => "idle",
        SnapshotStatus::Failure if snap.details["error"].is_null() => "failure",
        SnapshotStatus::Failure => "error",
        other => panic!("unexpected status {other:?}"),
    }
}

fn bt_state(agent: &AgentState) -> &jido::state::StateMap {
    agent.state()[STRATEGY_KEY].as_object().unwrap()
}

fn tick_count(agent: &AgentState) -> u64 {
    agent.strategy_snapshot().details["tick_count"]
        .as_u64()
        .unwrap()
}

fn blackboard(agent: &AgentState) -> Value {
    bt_state(agent)["blackboard"].to_json()
}

/// The tick scheduled by `directives`: (delay, the `tick` token).
fn scheduled(directives: &[Directive]) -> Option<(Duration, u64)> {
    let mut found = None;
    for d in directives {
        if let Directive::Schedule { delay, message } = d {
            let ScheduledMessage::Signal(signal) = message else {
                continue;
            };
            assert_eq!(signal.ty(), "jido.bt.scheduled_tick");
            assert!(found.is_none(), "two schedules in one cmd");
            let tick = signal.data().unwrap()["tick"].as_u64().unwrap();
            found = Some((*delay, tick));
        }
    }
    found
}

fn schedule_delay(directives: &[Directive]) -> Option<Duration> {
    scheduled(directives).map(|(d, _)| d)
}

/// Feeds back the tick a previous cmd scheduled.
async fn scheduled_tick(agent: &mut AgentState, token: u64) -> Vec<Directive> {
    command(agent, CMD_SCHEDULED_TICK, json!({ "tick": token })).await
}

type Log = Arc<Mutex<Vec<String>>>;

fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

#[derive(Clone, Copy, Debug)]
enum St {
    /// Success.
    S,
    /// Failure.
    F,
    /// Running.
    R,
    /// A retryable error.
    E,
    /// A non-retryable error.
    X,
}

/// A leaf that plays `steps` (the last one repeats), logs every tick and
/// every halt of a running instance.
struct Script {
    name: &'static str,
    steps: Vec<St>,
    calls: AtomicUsize,
    log: Log,
}

impl Leaf for Script {
    fn name(&self) -> &str {
        self.name
    }

    fn tick(&self, memory: &mut Value, _ctx: &mut LeafContext<'_>) -> Status {
        let k = self.calls.fetch_add(1, Ordering::SeqCst);
        let step = self.steps[k.min(self.steps.len() - 1)];
        self.log.lock().unwrap().push(self.name.to_owned());
        *memory = if matches!(step, St::R) {
            json!("running")
        } else {
            Value::Null
        };
        match step {
            St::S => Status::Success,
            St::F => Status::Failure,
            St::R => Status::Running,
            St::E => Status::Error(Error::execution(format!("{} broke", self.name))),
            St::X => {
                Status::Error(Error::execution(format!("{} broke", self.name)).with_retry(false))
            }
        }
    }

    fn halt(&self, memory: &mut Value) {
        if *memory == json!("running") {
            self.log.lock().unwrap().push(format!("halt:{}", self.name));
        }
        *memory = Value::Null;
    }
}

fn script(log: &Log, name: &'static str, steps: &[St]) -> Node {
    leaf(Script {
        name,
        steps: steps.to_vec(),
        calls: AtomicUsize::new(0),
        log: Arc::clone(log),
    })
}

// ---------------------------------------------------------------- actions

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Empty {}

/// Outputs `{"echo": params}`.
struct Echo;
impl Action for Echo {
    type Params = Value;
    type Output = Value;
    const NAME: &'static str = "echo";
    async fn run(&self, p: Value, _: &Context) -> jido::Result<Value> {
        Ok(json!({ "echo": p }))
    }
}

/// Reports what it saw of the agent state.
struct Inspect;
impl Action for Inspect {
    type Params = Empty;
    type Output = Value;
    const NAME: &'static str = "inspect";
    async fn run(&self, _: Empty, ctx: &Context) -> jido::Result<Value> {
        let state = ctx.state().cloned().unwrap_or_default();
        Ok(
            json!({"saw": {"count": state.get("count"), "has_strategy": state.contains_key(STRATEGY_KEY)}}),
        )
    }
}

/// Outputs `{"pos": {"x": 1}}`, sets `pos.y` with a state op and asks for
/// a schedule.
struct Move;
impl Action for Move {
    type Params = Empty;
    type Output = Value;
    const NAME: &'static str = "move";
    async fn run(&self, _: Empty, ctx: &Context) -> jido::Result<Value> {
        ctx.push_effect(StateOp::SetPath {
            path: vec!["pos".into(), "y".into()],
            value: json!(2).into(),
        });
        ctx.push_effect(Directive::schedule(Duration::from_secs(7), json!("ping")));
        Ok(json!({"pos": {"x": 1}}))
    }
}

/// Fails (not retryable) after pushing a state op and a directive.
struct NoFuel;
impl Action for NoFuel {
    type Params = Empty;
    type Output = Value;
    const NAME: &'static str = "no_fuel";
    async fn run(&self, _: Empty, ctx: &Context) -> jido::Result<Value> {
        ctx.push_effect(StateOp::set_state(
            json!({"touched": true}).as_object().unwrap(),
        ));
        ctx.push_effect(Directive::schedule(
            Duration::from_secs(1),
            json!("after_failure"),
        ));
        Err(Error::execution("no fuel").with_retry(false))
    }
}

// ---------------------------------------------------------------- truth tables

const ALL: [St; 4] = [St::S, St::F, St::R, St::E];

/// Builds a tree around one scripted child `c`, ticks once and returns
/// (outcome, log).
async fn one_tick(build: impl Fn(Node, &Log) -> Node, child: St) -> (&'static str, Vec<String>) {
    let log = log();
    let mut a = agent_of(build(script(&log, "c", &[child]), &log));
    tick(&mut a).await;
    (outcome(&a), take(&log))
}

#[tokio::test]
async fn sequence_truth_table() {
    let build = |c: Node, log: &Log| sequence([c, script(log, "next", &[St::S])]);
    let expected = [
        ("success", vec!["c", "next"]),
        ("failure", vec!["c"]),
        ("running", vec!["c"]),
        ("error", vec!["c"]),
    ];
    for (child, (out, log)) in ALL.into_iter().zip(expected) {
        assert_eq!(
            one_tick(build, child).await,
            (out, log.iter().map(|s| s.to_string()).collect()),
            "{child:?}"
        );
    }
    assert_eq!(
        outcome(&{
            let mut a = agent_of(sequence([]));
            tick(&mut a).await;
            a
        }),
        "success"
    );
}

#[tokio::test]
async fn selector_truth_table() {
    let build = |c: Node, log: &Log| selector([c, script(log, "next", &[St::S])]);
    let expected = [
        ("success", vec!["c"]),
        ("success", vec!["c", "next"]),
        ("running", vec!["c"]),
        // An error stops the selector: the next child is not tried.
        ("error", vec!["c"]),
    ];
    for (child, (out, log)) in ALL.into_iter().zip(expected) {
        assert_eq!(
            one_tick(build, child).await,
            (out, log.iter().map(|s| s.to_string()).collect()),
            "{child:?}"
        );
    }
    let mut a = agent_of(selector([]));
    tick(&mut a).await;
    assert_eq!(outcome(&a), "failure");
}

#[tokio::test]
async fn decorator_truth_tables() {
    type Build = fn(Node, &Log) -> Node;
    let table: [(&str, Build, [&str; 4]); 5] = [
        (
            "inverter",
            |c, _| inverter(c),
            ["failure", "success", "running", "error"],
        ),
        (
            "succeeder",
            |c, _| succeeder(c),
            ["success", "success", "running", "error"],
        ),
        (
            "failer",
            |c, _| failer(c),
            ["failure", "failure", "running", "error"],
        ),
        // One success of two: running until the second tick.
        (
            "repeat",
            |c, _| repeat(2, c),
            ["running", "failure", "running", "error"],
        ),
        // A failure or retryable error is retried on the next tick.
        (
            "retry",
            |c, _| retry(1, c),
            ["success", "running", "running", "running"],
        ),
    ];
    for (name, build, expected) in table {
        for (child, out) in ALL.into_iter().zip(expected) {
            let (got, log) = one_tick(build, child).await;
            assert_eq!(got, out, "{name} with {child:?}");
            assert_eq!(log, vec!["c"], "{name} with {child:?}");
        }
    }
    // A non-retryable error is not retried.
    assert_eq!(one_tick(|c, _| retry(5, c), St::X).await.0, "error");
}

#[tokio::test]
async fn parallel_truth_table() {
    // `other` runs forever; with the default thresholds (all succeed, one
    // failure fails) the node's result is decided by `c`.
    let build = |c: Node, log: &Log| parallel([script(log, "other", &[St::R]), c]);
    let expected = [
        ("running", vec!["other", "c"]),
        ("failure", vec!["other", "c", "halt:other"]),
        ("running", vec!["other", "c"]),
        ("error", vec!["other", "c", "halt:other"]),
    ];
    for (child, (out, log)) in ALL.into_iter().zip(expected) {
        assert_eq!(
            one_tick(build, child).await,
            (out, log.iter().map(|s| s.to_string()).collect()),
            "{child:?}"
        );
    }
}

#[tokio::test]
async fn condition_truth_table() {
    let mut a = agent(
        BehaviorTree::new(sequence([
            condition("has_key", |bb, _| bb.contains_key("key")),
            condition("explodes", |bb, _| {
                if bb["key"] == json!("boom") {
                    panic!("kaboom")
                }
                true
            }),
        ]))
        .unwrap(),
    );
    tick(&mut a).await;
    assert_eq!(outcome(&a), "failure");
    command(
        &mut a,
        CMD_BLACKBOARD_PUT,
        json!({"key": "key", "value": "fine"}),
    )
    .await;
    tick(&mut a).await;
    assert_eq!(outcome(&a), "success");
    command(
        &mut a,
        CMD_BLACKBOARD_PUT,
        json!({"key": "key", "value": "boom"}),
    )
    .await;
    tick(&mut a).await;
    assert_eq!(outcome(&a), "error");
    let err = &a.strategy_snapshot().details["error"];
    assert_eq!(err["type"], "execution_error");
    assert_eq!(err["message"], "condition explodes panicked: kaboom");
    assert_eq!(
        err["details"],
        json!({"node": "explodes", "panic": "kaboom"})
    );
}

// ---------------------------------------------------------------- running and resume

#[tokio::test]
async fn sequence_resumes_at_the_running_child() {
    let log = log();
    let mut a = agent_of(sequence([
        script(&log, "a", &[St::S]),
        script(&log, "b", &[St::R, St::R, St::S]),
        script(&log, "c", &[St::S]),
    ]));
    tick(&mut a).await;
    assert_eq!(
        (outcome(&a), take(&log)),
        ("running", vec!["a".to_owned(), "b".to_owned()])
    );
    assert_eq!(bt_state(&a)["tree"]["nodes"][0], json!({"index": 1}));
    tick(&mut a).await;
    assert_eq!((outcome(&a), take(&log)), ("running", vec!["b".to_owned()]));
    tick(&mut a).await;
    assert_eq!(
        (outcome(&a), take(&log)),
        ("success", vec!["b".to_owned(), "c".to_owned()])
    );
    assert_eq!(bt_state(&a)["tree"]["nodes"][0], json!({"index": 0}));
    assert_eq!(tick_count(&a), 3);
}

#[tokio::test]
async fn selector_resumes_at_the_running_child() {
    let log = log();
    let mut a = agent_of(selector([
        script(&log, "a", &[St::F]),
        script(&log, "b", &[St::R, St::F]),
        script(&log, "c", &[St::S]),
    ]));
    tick(&mut a).await;
    assert_eq!(
        (outcome(&a), take(&log)),
        ("running", vec!["a".to_owned(), "b".to_owned()])
    );
    tick(&mut a).await;
    assert_eq!(
        (outcome(&a), take(&log)),
        ("success", vec!["b".to_owned(), "c".to_owned()])
    );
}

#[tokio::test]
async fn repeat_needs_one_tick_per_success() {
    let log = log();
    let mut a = agent_of(repeat(3, script(&log, "c", &[St::S])));
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        let d = tick(&mut a).await;
        outcomes.push((outcome(&a), schedule_delay(&d)));
    }
    assert_eq!(
        outcomes,
        vec![
            ("running", Some(Duration::ZERO)),
            ("running", Some(Duration::ZERO)),
            ("success", None)
        ]
    );
    assert_eq!(take(&log), vec!["c", "c", "c"]);
    // The count starts again after success.
    assert_eq!(bt_state(&a)["tree"]["nodes"][0], json!({"iteration": 0}));
}

#[tokio::test]
async fn retry_reruns_a_failing_child_once_per_tick() {
    let log = log();
    let mut a = agent_of(retry(2, script(&log, "c", &[St::F, St::E, St::S])));
    let mut outs = Vec::new();
    for _ in 0..3 {
        tick(&mut a).await;
        outs.push(outcome(&a));
    }
    assert_eq!(outs, vec!["running", "running", "success"]);

    // Out of retries: the last status passes.
    let mut a = agent_of(retry(1, script(&log, "d", &[St::F])));
    tick(&mut a).await;
    tick(&mut a).await;
    assert_eq!(outcome(&a), "failure");
    assert_eq!(bt_state(&a)["tree"]["nodes"][0], json!({"attempt": 0}));
}

#[tokio::test]
async fn parallel_thresholds_memory_and_halt() {
    let log = log();
    // Finished children are not ticked again in the same round.
    let mut a = agent_of(parallel([
        script(&log, "a", &[St::S]),
        script(&log, "b", &[St::R, St::S]),
    ]));
    tick(&mut a).await;
    assert_eq!(
        (outcome(&a), take(&log)),
        ("running", vec!["a".to_owned(), "b".to_owned()])
    );
    assert_eq!(
        bt_state(&a)["tree"]["nodes"][0],
        json!({"results": [true, null]})
    );
    tick(&mut a).await;
    assert_eq!((outcome(&a), take(&log)), ("success", vec!["b".to_owned()]));

    // One success is enough; the running child is halted.
    let mut a = agent_of(parallel_with(
        1,
        2,
        [
            script(&log, "r", &[St::R]),
            script(&log, "f", &[St::F]),
            script(&log, "s", &[St::S]),
        ],
    ));
    tick(&mut a).await;
    assert_eq!(
        (outcome(&a), take(&log)),
        (
            "success",
            vec!["r".into(), "f".into(), "s".into(), "halt:r".into()]
        )
    );

    // Thresholds out of reach once nothing runs: failure.
    let mut a = agent_of(parallel_with(
        3,
        3,
        [
            script(&log, "x", &[St::S]),
            script(&log, "y", &[St::S]),
            script(&log, "z", &[St::F]),
        ],
    ));
    tick(&mut a).await;
    assert_eq!(outcome(&a), "failure");

    // Empty: success.
    let mut a = agent_of(parallel([]));
    tick(&mut a).await;
    assert_eq!(outcome(&a), "success");
}

#[tokio::test(start_paused = true)]
async fn wait_follows_the_paused_clock_and_sets_the_schedule() {
    let log = log();
    let mut a = agent_of(sequence([
        wait(Duration::from_millis(500)),
        script(&log, "after", &[St::S]),
    ]));
    let d = tick(&mut a).await;
    assert_eq!(
        (outcome(&a), scheduled(&d)),
        ("running", Some((Duration::from_millis(500), 1)))
    );
    // An early forced tick: still running, the rest of the wait is scheduled.
    tokio::time::advance(Duration::from_millis(200)).await;
    let d = tick(&mut a).await;
    assert_eq!(
        (outcome(&a), scheduled(&d)),
        ("running", Some((Duration::from_millis(300), 2)))
    );
    assert!(take(&log).is_empty());
    // The scheduled tick, when it is due.
    tokio::time::advance(Duration::from_millis(300)).await;
    let d = scheduled_tick(&mut a, 2).await;
    assert_eq!((outcome(&a), scheduled(&d)), ("success", None));
    assert_eq!(take(&log), vec!["after"]);
    assert_eq!(tick_count(&a), 3);
}

#[tokio::test]
async fn schedule_delay_is_the_shortest_wake_else_tick_interval() {
    let log = log();
    let bt = BehaviorTree::new(script(&log, "poll", &[St::R])).unwrap();
    let mut a = agent(bt.clone());
    assert_eq!(schedule_delay(&tick(&mut a).await), Some(Duration::ZERO));
    let mut a = agent(bt.tick_interval(Duration::from_millis(250)));
    assert_eq!(
        schedule_delay(&tick(&mut a).await),
        Some(Duration::from_millis(250))
    );

    struct Polite;
    impl Leaf for Polite {
        fn name(&self) -> &str {
            "polite"
        }
        fn tick(&self, _: &mut Value, ctx: &mut LeafContext<'_>) -> Status {
            ctx.wake_in(Duration::from_secs(2));
            ctx.wake_in(Duration::from_secs(3));
            Status::Running
        }
    }
    let mut a = agent(
        BehaviorTree::new(parallel([leaf(Polite), wait(Duration::from_secs(5))]))
            .unwrap()
            .tick_interval(Duration::from_millis(250)),
    );
    assert_eq!(
        schedule_delay(&tick(&mut a).await),
        Some(Duration::from_secs(2))
    );
}

#[tokio::test]
async fn scheduled_ticks_run_only_while_current() {
    let log = log();
    let mut a = agent_of(sequence([
        script(&log, "a", &[St::S]),
        script(&log, "b", &[St::R]),
    ]));
    let first = scheduled(&tick(&mut a).await).unwrap();
    assert_eq!(first, (Duration::ZERO, 1));
    assert_eq!(take(&log), vec!["a", "b"]);

    // The current token ticks and schedules the next one.
    let second = scheduled(&scheduled_tick(&mut a, first.1).await).unwrap();
    assert_eq!(second, (Duration::ZERO, 2));
    assert_eq!(take(&log), vec!["b"]);

    // A stale token (another tick came in between) does nothing.
    let third = scheduled(&tick(&mut a).await).unwrap();
    take(&log);
    assert!(scheduled_tick(&mut a, second.1).await.is_empty());
    assert!(take(&log).is_empty());
    assert_eq!(tick_count(&a), 3);

    // After a halt, even the current token does nothing: a halted tree stays halted.
    command(&mut a, CMD_HALT, json!({})).await;
    take(&log);
    assert!(scheduled_tick(&mut a, third.1).await.is_empty());
    assert_eq!(
        (outcome(&a), take(&log), tick_count(&a)),
        ("idle", vec![], 3)
    );

    // A bad token is a command error.
    let d = command(&mut a, CMD_SCHEDULED_TICK, json!({"tick": "x"})).await;
    assert!(matches!(&d[..], [Directive::Error { error, .. }]
        if error.message() == "invalid bt_scheduled_tick params: tick must be a non-negative integer"));
}

#[tokio::test]
async fn strategy_tick_is_a_forced_tick() {
    let log = log();
    let mut a = agent_of(script(&log, "c", &[St::R, St::S]));
    let d = a.tick(CmdOptions::new()).await;
    assert_eq!(
        (outcome(&a), schedule_delay(&d)),
        ("running", Some(Duration::ZERO))
    );
    a.tick(CmdOptions::new()).await;
    assert_eq!(outcome(&a), "success");
    assert_eq!(tick_count(&a), 2);
}

// ---------------------------------------------------------------- commands

#[tokio::test]
async fn which_commands_tick() {
    let log = log();
    let mut a = agent_of(script(&log, "c", &[St::S]));
    let cases: Vec<(Vec<Command>, bool)> = vec![
        (vec![], true),
        (
            vec![Command::strategy(
                CMD_BLACKBOARD_PUT,
                json!({"key": "k", "value": 1}),
            )],
            false,
        ),
        (
            vec![Command::strategy(
                CMD_BLACKBOARD_MERGE,
                json!({"data": {"m": 1}}),
            )],
            false,
        ),
        (vec![Command::strategy(CMD_HALT, json!({}))], false),
        (vec![Command::strategy(CMD_RESET, json!({}))], false),
        (vec![Command::strategy(CMD_TICK, json!({}))], true),
        (vec![Command::run(Echo)], true),
        (
            vec![
                Command::strategy(CMD_HALT, json!({})),
                Command::strategy(CMD_TICK, Value::Null),
            ],
            true,
        ),
        (vec![Command::strategy("bt_nope", json!({}))], false),
    ];
    for (commands, ticks) in cases {
        let label = format!("{commands:?}");
        let before = tick_count(&a);
        a.cmd(commands, CmdOptions::new()).await;
        assert_eq!(tick_count(&a) - before, u64::from(ticks), "{label}");
        assert_eq!(take(&log).len(), usize::from(ticks), "{label}");
    }
}

#[tokio::test]
async fn blackboard_put_merge_and_bad_params() {
    let mut a = agent(
        BehaviorTree::new(wait(Duration::from_secs(1)))
            .unwrap()
            .with_blackboard([("mode", json!("patrol")), ("cfg", json!({"a": 1, "b": 2}))]),
    );
    assert_eq!(
        blackboard(&a),
        json!({"mode": "patrol", "cfg": {"a": 1, "b": 2}})
    );
    command(
        &mut a,
        CMD_BLACKBOARD_PUT,
        json!({"key": "target", "value": [1, 2]}),
    )
    .await;
    command(&mut a, CMD_BLACKBOARD_PUT, json!({"key": "nothing"})).await;
    // Shallow merge: `cfg` is replaced, not merged.
    command(
        &mut a,
        CMD_BLACKBOARD_MERGE,
        json!({"data": {"cfg": {"c": 3}, "mode": "rest"}}),
    )
    .await;
    assert_eq!(
        blackboard(&a),
        json!({"mode": "rest", "cfg": {"c": 3}, "target": [1, 2], "nothing": null})
    );
    let bt = BehaviorTree::new(wait(Duration::ZERO)).unwrap();
    assert_eq!(Value::from(bt.blackboard(&a)), blackboard(&a));

    let cases = [
        (
            CMD_BLACKBOARD_PUT,
            json!({"value": 1}),
            "invalid bt_blackboard_put params: key must be a string",
        ),
        (
            CMD_BLACKBOARD_MERGE,
            json!({"data": [1]}),
            "invalid bt_blackboard_merge params: data must be an object",
        ),
        (
            CMD_TICK,
            json!({"instructions": "x"}),
            "invalid bt_tick params: instructions must be a list",
        ),
        ("bt_nope", json!({}), "unknown strategy command: bt_nope"),
    ];
    for (name, params, message) in cases {
        let before = bt_state(&a).clone();
        let d = command(&mut a, name, params).await;
        match &d[..] {
            [Directive::Error { error, context }] => {
                assert_eq!(context, error_context::STRATEGY_COMMAND);
                assert_eq!(error.kind(), ErrorKind::Validation);
                assert_eq!(error.message(), message);
                assert_eq!(error.detail("command"), Some(&json!(name)));
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(bt_state(&a), &before, "{name} changed the state");
    }
}

#[tokio::test]
async fn halt_stops_the_running_tree_without_ticking() {
    let log = log();
    let mut a = agent_of(sequence([
        script(&log, "a", &[St::S]),
        script(&log, "b", &[St::R]),
    ]));
    tick(&mut a).await;
    assert_eq!(take(&log), vec!["a", "b"]);
    let d = command(&mut a, CMD_HALT, json!({})).await;
    assert!(d.is_empty());
    assert_eq!(outcome(&a), "idle");
    assert_eq!(take(&log), vec!["halt:b"]);
    assert_eq!(tick_count(&a), 1);
    // The next tick starts from the root.
    tick(&mut a).await;
    assert_eq!(take(&log), vec!["a", "b"]);
}

#[tokio::test]
async fn reset_restores_the_initial_blackboard_and_clears_result_and_error() {
    let mut a = agent(
        BehaviorTree::new(sequence([action(Echo).param("n", 1), action(NoFuel)]))
            .unwrap()
            .with_blackboard([("start", json!(true))]),
    );
    command(
        &mut a,
        CMD_BLACKBOARD_PUT,
        json!({"key": "extra", "value": 1}),
    )
    .await;
    tick(&mut a).await;
    assert_eq!(outcome(&a), "error");
    assert_eq!(
        a.strategy_snapshot().result,
        Some(json!({"echo": {"n": 1}}))
    );
    command(&mut a, CMD_RESET, json!({})).await;
    let st = bt_state(&a);
    assert_eq!(st["status"], "idle");
    assert_eq!(st["blackboard"], json!({"start": true}));
    assert_eq!(st["last_result"], Value::Null);
    assert_eq!(st["error"], Value::Null);
    assert_eq!(st["tick_count"], 1);
    let snap = a.strategy_snapshot();
    assert_eq!(
        (snap.status, snap.done, snap.result),
        (SnapshotStatus::Idle, false, None)
    );
}

#[tokio::test]
async fn reset_on_completion_halts_after_success_and_failure() {
    /// Counts its ticks in its own memory and writes the count to the
    /// blackboard; succeeds, or fails when the blackboard says so.
    struct Counter;
    impl Leaf for Counter {
        fn name(&self) -> &str {
            "counter"
        }
        fn tick(&self, memory: &mut Value, ctx: &mut LeafContext<'_>) -> Status {
            let n = memory.as_u64().unwrap_or(0) + 1;
            *memory = json!(n);
            ctx.blackboard_mut().insert("count", json!(n));
            if ctx.blackboard()["fail"] == true {
                Status::Failure
            } else {
                Status::Success
            }
        }
    }
    let bt = BehaviorTree::new(leaf(Counter)).unwrap();
    let mut keep = agent(bt.clone());
    let mut reset = agent(bt.reset_on_completion(true));
    for _ in 0..3 {
        tick(&mut keep).await;
        tick(&mut reset).await;
    }
    assert_eq!(blackboard(&keep)["count"], 3);
    assert_eq!(blackboard(&reset)["count"], 1);
    command(
        &mut reset,
        CMD_BLACKBOARD_PUT,
        json!({"key": "fail", "value": true}),
    )
    .await;
    tick(&mut reset).await;
    tick(&mut reset).await;
    assert_eq!(
        (outcome(&reset), blackboard(&reset)["count"].clone()),
        ("failure", json!(1))
    );
}

// ---------------------------------------------------------------- blackboard and actions

#[tokio::test]
async fn action_params_come_from_the_blackboard() {
    let mut a = agent(
        BehaviorTree::new(
            action(Echo)
                .param("n", Param::from_blackboard("n"))
                .param("lit", 5)
                .param(
                    "nested",
                    json!({"list": [{"$bb": "who"}, {"$bb": "missing"}]}),
                ),
        )
        .unwrap()
        .with_blackboard([("n", json!(42)), ("who", json!("ann"))]),
    );
    tick(&mut a).await;
    let echo = json!({"echo": {"n": 42, "lit": 5, "nested": {"list": ["ann", null]}}});
    assert_eq!(outcome(&a), "success");
    assert_eq!(a.state()["echo"], echo["echo"]);
    assert_eq!(blackboard(&a)["last_result"], echo);
    assert_eq!(a.strategy_snapshot().result, Some(echo));
}

#[tokio::test]
async fn action_results_merge_effects_apply_and_directives_return() {
    let mut a = agent(BehaviorTree::new(sequence([action(Move), action(Inspect)])).unwrap());
    a.set(
        json!({"count": 4, "pos": {"z": 0}})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let d = tick(&mut a).await;
    assert_eq!(a.state()["pos"], json!({"z": 0, "x": 1, "y": 2}));
    // The action saw the state as it was after the previous action (the
    // strategy's key included, as under Direct).
    assert_eq!(a.state()["saw"], json!({"count": 4, "has_strategy": true}));
    match &d[..] {
        [
            Directive::Schedule {
                delay,
                message: ScheduledMessage::Json(m),
            },
        ] => {
            assert_eq!((*delay, m), (Duration::from_secs(7), &json!("ping")));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(outcome(&a), "success");
}

#[tokio::test]
async fn action_errors_stop_the_tree_and_are_kept() {
    let log = log();
    let mut a = agent_of(selector([
        action(NoFuel),
        script(&log, "fallback", &[St::S]),
    ]));
    let before = a.state().clone();
    let d = tick(&mut a).await;
    // The selector stops on the error; the fallback is not tried.
    assert!(take(&log).is_empty());
    let snap = a.strategy_snapshot();
    assert_eq!((snap.status, snap.done), (SnapshotStatus::Failure, true));
    let env = json!({
        "type": "execution_error",
        "message": "no fuel",
        "details": {"retry": false},
        "retryable": false
    });
    assert_eq!(snap.details["error"], env);
    assert_eq!(blackboard(&a)["error"], env);
    // The failed run's state op is dropped, its directive kept; no schedule.
    assert!(!a.state().contains_key("touched"));
    let mut without_strategy = a.state().clone();
    without_strategy.remove(STRATEGY_KEY);
    let mut before = before;
    before.remove(STRATEGY_KEY);
    assert_eq!(without_strategy, before);
    match &d[..] {
        [
            Directive::Schedule {
                message: ScheduledMessage::Json(m),
                ..
            },
        ] => assert_eq!(m, &json!("after_failure")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_good_tick_clears_the_strategy_error_not_the_blackboard_error() {
    let mut a = agent_of(selector([
        sequence([
            condition("armed", |bb, _| bb["armed"] == true),
            action(NoFuel),
        ]),
        action(Echo),
    ]));
    command(
        &mut a,
        CMD_BLACKBOARD_PUT,
        json!({"key": "armed", "value": true}),
    )
    .await;
    tick(&mut a).await;
    assert_eq!(outcome(&a), "error");
    command(
        &mut a,
        CMD_BLACKBOARD_PUT,
        json!({"key": "armed", "value": false}),
    )
    .await;
    tick(&mut a).await;
    assert_eq!(outcome(&a), "success");
    assert_eq!(a.strategy_snapshot().details["error"], Value::Null);
    assert_eq!(blackboard(&a)["error"]["message"], "no fuel");
}

#[tokio::test]
async fn leaf_panics_are_errors_and_keep_memory() {
    struct Fragile;
    impl Leaf for Fragile {
        fn name(&self) -> &str {
            "fragile"
        }
        fn tick(&self, memory: &mut Value, ctx: &mut LeafContext<'_>) -> Status {
            let before = memory.clone();
            *memory = json!("scribbled");
            if ctx.blackboard().contains_key("explode") {
                panic!("snap");
            }
            *memory = json!(before.as_u64().unwrap_or(0) + 1);
            Status::Running
        }
    }
    let mut a = agent_of(leaf(Fragile));
    tick(&mut a).await;
    assert_eq!(bt_state(&a)["tree"]["nodes"][0], json!(1));
    command(
        &mut a,
        CMD_BLACKBOARD_PUT,
        json!({"key": "explode", "value": true}),
    )
    .await;
    tick(&mut a).await;
    assert_eq!(outcome(&a), "error");
    assert_eq!(
        a.strategy_snapshot().details["error"]["message"],
        "leaf fragile panicked: snap"
    );
    assert_eq!(bt_state(&a)["tree"]["nodes"][0], json!(1));
}

#[tokio::test]
async fn instructions_and_agent_state_are_on_the_blackboard_during_the_tick() {
    struct Peek;
    impl Leaf for Peek {
        fn name(&self) -> &str {
            "peek"
        }
        fn tick(&self, _: &mut Value, ctx: &mut LeafContext<'_>) -> Status {
            let seen = json!({
                "instructions": ctx.blackboard()["instructions"].clone(),
                "agent_state": ctx.blackboard()["agent_state"].clone(),
                "sequence": ctx.tick_sequence(),
                "live_count": ctx.agent_state().get("count").cloned(),
            });
            ctx.blackboard_mut().insert("seen", seen);
            Status::Success
        }
    }
    let mut a = agent_of(leaf(Peek));
    a.set(json!({"count": 1}).as_object().cloned().unwrap());
    let ins = Instruction::new(Echo).with_params(json!({"x": 1}));
    let id = ins.id.to_string();
    a.cmd(
        vec![
            Command::Run(ins),
            Command::strategy(CMD_TICK, json!({"instructions": [{"action": "extra"}]})),
        ],
        CmdOptions::new(),
    )
    .await;
    let bb = blackboard(&a);
    assert_eq!(
        bb["seen"],
        json!({
            "instructions": [{"id": id, "action": "echo", "params": {"x": 1}}, {"action": "extra"}],
            "agent_state": {"count": 1},
            "sequence": 0,
            "live_count": 1
        })
    );
    // Both are removed after the tick.
    assert!(!bb.as_object().unwrap().contains_key("instructions"));
    assert!(!bb.as_object().unwrap().contains_key("agent_state"));
    tick(&mut a).await;
    assert_eq!(blackboard(&a)["seen"]["sequence"], 1);
    assert_eq!(blackboard(&a)["seen"]["instructions"], json!([]));
}

// ---------------------------------------------------------------- snapshot, state, checkpoints

#[tokio::test]
async fn snapshot_fields() {
    let log = log();
    let mut a = agent_of(sequence([
        script(&log, "a", &[St::R, St::S]),
        inverter(script(&log, "b", &[St::F])),
    ]));
    let snap = a.strategy_snapshot();
    assert_eq!(
        (snap.status, snap.done, snap.result.clone()),
        (SnapshotStatus::Idle, false, None)
    );
    assert_eq!(
        Value::Object(snap.details),
        json!({"tick_count": 0, "error": null, "tree_depth": 3})
    );
    assert_eq!(bt_state(&a)["module"], "behavior_tree");

    tick(&mut a).await;
    let snap = a.strategy_snapshot();
    assert_eq!((snap.status, snap.done), (SnapshotStatus::Running, false));
    tick(&mut a).await;
    let snap = a.strategy_snapshot();
    assert_eq!((snap.status, snap.done), (SnapshotStatus::Success, true));
    assert_eq!(snap.details["tick_count"], 2);

    // No strategy state at all: idle, tick_count 0.
    a.state_mut().remove(STRATEGY_KEY);
    let snap = a.strategy_snapshot();
    assert_eq!(
        (snap.status, snap.done, snap.result),
        (SnapshotStatus::Idle, false, None)
    );
    assert_eq!(snap.details["tick_count"], 0);

    // An unknown stored status reads as failure.
    tick(&mut a).await;
    a.strategy_state_mut().insert("status", json!("weird"));
    assert_eq!(a.strategy_snapshot().status, SnapshotStatus::Failure);
}

#[tokio::test]
async fn tree_memory_survives_checkpoint_and_restore() {
    let log = log();
    let bt = BehaviorTree::new(sequence([
        script(&log, "a", &[St::S]),
        repeat(3, script(&log, "b", &[St::S])),
    ]))
    .unwrap();
    let mut a = agent(bt.clone());
    tick(&mut a).await;
    tick(&mut a).await;
    assert_eq!(take(&log), vec!["a", "b", "b"]);
    let checkpoint = a.checkpoint();
    let mut restored = AgentState::restore(BtAgent(bt.clone()), &checkpoint).unwrap();
    // The runtime's init after a restore keeps the tree's state and, as the
    // tree was running, schedules an immediate tick.
    let d = restored.init_strategy(CmdOptions::new());
    assert_eq!(scheduled(&d), Some((Duration::ZERO, 2)));
    assert_eq!(bt_state(&restored), bt_state(&a));
    tick(&mut restored).await;
    assert_eq!(
        (outcome(&restored), take(&log)),
        ("success", vec!["b".to_owned()])
    );
    assert_eq!(tick_count(&restored), 3);
}

#[test]
fn signal_routes_are_the_bt_routes() {
    let a = agent_of(wait(Duration::ZERO));
    let routes: Vec<(String, String, Option<i32>)> = a
        .signal_routes()
        .into_iter()
        .map(|r| {
            let target = match r.target {
                RouteTarget::StrategyTick => "tick".to_owned(),
                RouteTarget::StrategyCmd(c) => c,
                other => panic!("{other:?}"),
            };
            (r.path, target, r.priority)
        })
        .collect();
    let p = Some(50);
    assert_eq!(
        routes,
        vec![
            ("jido.bt.tick".into(), "tick".into(), p),
            (
                "jido.bt.blackboard.put".into(),
                "bt_blackboard_put".into(),
                p
            ),
            (
                "jido.bt.blackboard.merge".into(),
                "bt_blackboard_merge".into(),
                p
            ),
            ("jido.bt.halt".into(), "bt_halt".into(), p),
            ("jido.bt.reset".into(), "bt_reset".into(), p),
            (
                "jido.bt.scheduled_tick".into(),
                "bt_scheduled_tick".into(),
                p
            ),
        ]
    );
}

// ---------------------------------------------------------------- building and rendering

#[test]
fn mermaid_of_a_small_tree() {
    let tree = Tree::new(
        sequence([
            action(Inspect),
            selector([
                condition("anomaly_seen", |bb, _| bb.contains_key("anomaly")),
                retry(2, action(Echo).named("say \"hi\"")),
            ])
            .named("decide"),
            parallel_with(
                1,
                2,
                [
                    wait(Duration::from_millis(1500)),
                    set_blackboard([("done", json!(true))]),
                ],
            ),
        ])
        .named("patrol"),
    )
    .unwrap();
    assert_eq!(
        tree.to_mermaid(),
        "flowchart TD\n\
         \x20   n0[\"Sequence: patrol\"]\n\
         \x20   n1[\"Action: inspect\"]\n\
         \x20   n2[\"Selector: decide\"]\n\
         \x20   n3[\"Condition: anomaly_seen\"]\n\
         \x20   n4[\"Retry(2)\"]\n\
         \x20   n5[\"Action: say #quot;hi#quot;\"]\n\
         \x20   n6[\"Parallel(success 1/2, failure 2)\"]\n\
         \x20   n7[\"Wait(1.5s)\"]\n\
         \x20   n8[\"SetBlackboard(done)\"]\n\
         \x20   n0 --> n1\n\
         \x20   n0 --> n2\n\
         \x20   n0 --> n6\n\
         \x20   n2 --> n3\n\
         \x20   n2 --> n4\n\
         \x20   n4 --> n5\n\
         \x20   n6 --> n7\n\
         \x20   n6 --> n8\n"
    );
    assert_eq!((tree.len(), tree.depth()), (9, 4));
}

#[test]
fn invalid_trees_are_refused_where_built() {
    let err = BehaviorTree::new(sequence([
        wait(Duration::ZERO),
        repeat(0, wait(Duration::ZERO)),
    ]))
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(
        err.message(),
        "invalid behaviour tree: repeat count must be at least 1"
    );
    assert_eq!(err.detail("node"), Some(&json!(2)));
}

#[test]
fn builders_read_well() {
    let node: Node = Echo.into();
    assert_eq!((node.type_name(), node.name()), ("Action", Some("echo")));
    let node = sequence([
        action(Echo),
        inverter(succeeder(failer(wait(Duration::ZERO)))),
    ])
    .named("root");
    assert_eq!((node.type_name(), node.name()), ("Sequence", Some("root")));
    assert_eq!(Status::Error(Error::execution("x")).to_string(), "error: x");
    assert!(Status::Failure.is_failure() && Status::Error(Error::execution("x")).is_failure());
    assert!(!Status::Running.is_done() && Status::Success.is_done());
}

#[test]
fn strategy_is_send_sync_and_clone() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<BehaviorTree>();
    assert_send_sync::<Tree>();
    assert_send_sync::<Node>();
}
