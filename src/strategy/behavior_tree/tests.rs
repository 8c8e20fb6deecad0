//! Engine tests with a fake action runner.

use std::collections::VecDeque;
use std::sync::Mutex;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::runner::{ActionRunner, apply_outcome};
use super::tree::{TickCx, TreeState, resolve_params};
use super::*;
use crate::action::DynAction;
use crate::context::Context;
use crate::effect::{Effect, StateOp};
use crate::exec::{ExecOptions, Outcome};

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Any {}

struct Named;
impl crate::Action for Named {
    type Params = Any;
    type Output = ();
    const NAME: &'static str = "named";
    async fn run(&self, _: Any, _: &Context) -> crate::Result<()> {
        Ok(())
    }
}

/// Returns scripted outcomes in order and records what it was given.
#[derive(Default)]
struct FakeRunner {
    outcomes: Mutex<VecDeque<Outcome>>,
    calls: Mutex<Vec<(String, Value, bool)>>,
}

impl FakeRunner {
    fn push_ok(&self, output: Value, effects: Vec<Effect>) {
        let Value::Object(output) = output else {
            panic!("object")
        };
        self.outcomes.lock().unwrap().push_back(Outcome {
            result: Ok(output),
            effects,
            attempts: 1,
        });
    }

    fn push_err(&self, error: Error, effects: Vec<Effect>) {
        self.outcomes.lock().unwrap().push_back(Outcome {
            result: Err(error),
            effects,
            attempts: 1,
        });
    }
}

impl ActionRunner for FakeRunner {
    fn run<'a>(
        &'a self,
        action: &'a DynAction,
        params: Value,
        _opts: ExecOptions,
        state: crate::state::StateMap,
    ) -> BoxFuture<'a, Outcome> {
        self.calls.lock().unwrap().push((
            action.name().to_owned(),
            params,
            state.contains_key("seen"),
        ));
        let next = self
            .outcomes
            .lock()
            .unwrap()
            .pop_front()
            .expect("scripted outcome");
        Box::pin(async move { next })
    }
}

fn agent_with(state: Value) -> AgentData {
    let Value::Object(state) = state else {
        panic!("object")
    };
    AgentData::new("plain", state)
}

async fn tick(
    tree: &Tree,
    ts: &mut TreeState,
    bb: &mut Blackboard,
    agent: &mut AgentData,
    runner: &FakeRunner,
) -> (Status, Vec<Directive>, Option<Duration>) {
    let mut cx = TickCx {
        blackboard: bb,
        agent,
        directives: Vec::new(),
        runner,
        sequence: 0,
        wake: None,
    };
    let status = tree.tick(ts, &mut cx).await;
    (status, cx.directives, cx.wake)
}

#[tokio::test]
async fn action_output_merges_and_effects_apply() {
    let tree = Tree::new(
        action(Named)
            .param("n", 1)
            .param("who", Param::from_blackboard("who")),
    )
    .unwrap();
    let runner = FakeRunner::default();
    runner.push_ok(
        json!({"pos": {"x": 1}}),
        vec![
            StateOp::SetPath {
                path: vec!["pos".into(), "y".into()],
                value: json!(2).into(),
            }
            .into(),
            Directive::Error {
                error: Error::execution("boom"),
                context: "x".into(),
            }
            .into(),
        ],
    );
    let mut ts = tree.new_state();
    let mut bb = Blackboard::new();
    bb.insert("who", json!("ann"));
    let mut state = agent_with(json!({"pos": {"z": 0}, "seen": true}));
    let (status, directives, wake) = tick(&tree, &mut ts, &mut bb, &mut state, &runner).await;
    assert_eq!(status, Status::Success);
    assert_eq!(wake, None);
    assert_eq!(
        Value::Object(state.state().to_json()),
        json!({"pos": {"z": 0, "x": 1, "y": 2}, "seen": true})
    );
    assert_eq!(bb["last_result"], json!({"pos": {"x": 1}}));
    assert_eq!(directives.len(), 1);
    let calls = runner.calls.lock().unwrap();
    assert_eq!(
        calls[0],
        ("named".to_owned(), json!({"n": 1, "who": "ann"}), true)
    );
}

#[tokio::test]
async fn action_error_sets_blackboard_error_and_keeps_only_directives() {
    let tree = Tree::new(action(Named)).unwrap();
    let runner = FakeRunner::default();
    let err = Error::execution("no fuel").with_detail("retry", false);
    runner.push_err(
        err.clone(),
        vec![
            StateOp::DeleteKeys(vec!["a".into()]).into(),
            Directive::Error {
                error: Error::execution("side"),
                context: "x".into(),
            }
            .into(),
        ],
    );
    let mut ts = tree.new_state();
    let mut bb = Blackboard::new();
    let mut state = agent_with(json!({"a": 1, "b": 2}));
    let (status, directives, _) = tick(&tree, &mut ts, &mut bb, &mut state, &runner).await;
    assert_eq!(status, Status::Error(err.clone()));
    assert_eq!(bb["error"], err.to_envelope());
    assert!(!bb.contains_key("last_result"));
    assert_eq!(
        Value::Object(state.state().to_json()),
        json!({"a": 1, "b": 2})
    );
    assert_eq!(directives.len(), 1);
}

#[test]
fn params_resolve_at_any_depth_and_missing_keys_are_null() {
    let mut bb = Blackboard::new();
    bb.insert("a", json!([1, 2]));
    let params = json!({"x": {"$bb": "a"}, "nested": {"list": [{"$bb": "missing"}, 3]}, "lit": {"$bb": "a", "other": 1}});
    assert_eq!(
        resolve_params(&params, &bb),
        json!({"x": [1, 2], "nested": {"list": [null, 3]}, "lit": {"$bb": "a", "other": 1}})
    );
}

#[test]
fn failed_outcome_applies_no_state_op() {
    let mut s = agent_with(json!({}));
    let (res, dirs) = apply_outcome(
        &mut s,
        Outcome {
            result: Err(Error::execution("x")),
            effects: vec![StateOp::set_state(json!({"k": 1}).as_object().unwrap()).into()],
            attempts: 1,
        },
    );
    assert!(res.is_err() && dirs.is_empty() && !s.state().contains_key("k"));
}

#[tokio::test(start_paused = true)]
async fn memory_round_trips_through_json() {
    let tree = Tree::new(sequence([
        wait(Duration::from_millis(100)),
        parallel([
            wait(Duration::from_millis(10)),
            repeat(2, set_blackboard([("x", json!(1))])),
        ]),
    ]))
    .unwrap();
    let runner = FakeRunner::default();
    let mut ts = tree.new_state();
    let mut bb = Blackboard::new();
    let mut state = agent_with(json!({}));
    let (status, _, wake) = tick(&tree, &mut ts, &mut bb, &mut state, &runner).await;
    assert_eq!(
        (status, wake),
        (Status::Running, Some(Duration::from_millis(100)))
    );
    let json = tree.state_to_json(&ts);
    let back = tree.state_from_json(Some(&json));
    assert_eq!(back, ts);
    assert!(json["nodes"][1]["started_at"].is_i64());
    assert_eq!(json["nodes"][0], json!({"index": 0}));

    tokio::time::advance(Duration::from_millis(100)).await;
    let (status, _, wake) = tick(&tree, &mut back.clone(), &mut bb, &mut state, &runner).await;
    // The wait is done; the parallel starts: its wait runs, the repeat needs another tick.
    assert_eq!((status, wake), (Status::Running, Some(Duration::ZERO)));

    // Memory from another process: wait starts are dropped, the rest kept.
    let mut foreign = json.clone();
    foreign["clock"] = json!("other");
    let mut restored = tree.state_from_json(Some(&foreign));
    // The node statuses of the last tick are kept too.
    assert_eq!(
        restored.statuses(),
        [
            Some(TickStatus::Running),
            Some(TickStatus::Running),
            None,
            None,
            None,
            None
        ]
    );
    restored.clear_statuses();
    assert_eq!(restored, tree.new_state());

    // Memory for another tree shape is discarded.
    let small = Tree::new(wait(Duration::ZERO)).unwrap();
    assert_eq!(small.state_from_json(Some(&json)), small.new_state());
}

#[test]
fn stamps_round_trip_on_both_sides_of_the_anchor() {
    use super::tree::{from_stamp as from, stamp as to};
    let now = tokio::time::Instant::now();
    for t in [now, now + Duration::from_secs(3)] {
        assert_eq!(from(to(t)), Some(t));
    }
    if let Some(early) = now.checked_sub(Duration::from_millis(5)) {
        let s = to(early);
        assert_eq!(from(s), Some(early));
    }
}

#[test]
fn invalid_trees_are_configuration_errors() {
    let err = Tree::new(sequence([repeat(0, wait(Duration::ZERO))])).unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::Configuration);
    assert_eq!(
        err.message(),
        "invalid behaviour tree: repeat count must be at least 1"
    );
    assert_eq!(err.detail("node"), Some(&json!(1)));
    let err = Tree::new(parallel_with(
        3,
        1,
        [wait(Duration::ZERO), wait(Duration::ZERO)],
    ))
    .unwrap_err();
    assert_eq!(
        err.message(),
        "invalid behaviour tree: parallel success threshold 3 is outside 1..=2"
    );
    let err = Tree::new(parallel_with(1, 0, [wait(Duration::ZERO)])).unwrap_err();
    assert_eq!(
        err.message(),
        "invalid behaviour tree: parallel failure threshold 0 is outside 1..=1"
    );
    assert!(Tree::new(parallel([])).is_ok());
}
