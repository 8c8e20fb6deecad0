//! Instructions: ids, accepted shapes, normalisation, JSON input.

use std::time::Duration;

use jido::exec::ExecOptions;
use jido::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

#[derive(Clone, Deserialize, JsonSchema)]
struct Anything {}

struct Ping;
impl Action for Ping {
    type Params = Anything;
    type Output = ();
    const NAME: &'static str = "ping";
    async fn run(&self, _: Anything, _: &Context) -> jido::Result<()> {
        Ok(())
    }
}

struct Pong;
impl Action for Pong {
    type Params = Anything;
    type Output = ();
    const NAME: &'static str = "pong";
    async fn run(&self, _: Anything, _: &Context) -> jido::Result<()> {
        Ok(())
    }
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn names(list: &[Instruction]) -> Vec<&'static str> {
    list.iter().map(|i| i.action.name()).collect()
}

#[test]
fn new_instruction_defaults() {
    let ins = Instruction::new(Ping);
    assert_eq!(ins.action.name(), "ping");
    assert_eq!(ins.params, json!({}));
    assert!(ins.context.is_empty());
    assert_eq!(ins.opts, ExecOptions::new());
    assert_eq!(ins.id.get_version_num(), 7);
    assert_eq!(ins.id.get_version(), Some(uuid::Version::SortRand));
}

#[test]
fn ids_are_fresh_and_time_ordered_uuid_v7() {
    let ids: Vec<Uuid> = (0..200).map(|_| Instruction::new(Ping).id).collect();
    assert!(ids.iter().all(|id| id.get_version_num() == 7));
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, ids, "unique and increasing within the process");
    // A clone keeps the id (it is the same instruction).
    let ins = Instruction::new(Ping);
    assert_eq!(ins.clone().id, ins.id);
}

#[test]
fn builders_set_fields() {
    let opts = ExecOptions::new().timeout(Duration::from_secs(1));
    let ins = Instruction::new(Ping)
        .with_params(json!({"n": 1}))
        .with_context(obj(json!({"tenant": "acme"})))
        .with_opts(opts);
    assert_eq!(ins.params, json!({"n": 1}));
    assert_eq!(ins.context, obj(json!({"tenant": "acme"})));
    assert_eq!(ins.opts, opts);
}

#[test]
fn every_accepted_shape() {
    let opts = ExecOptions::new().max_retries(4);

    let list = Ping.into_instructions();
    assert_eq!(names(&list), ["ping"]);
    assert_eq!(list[0].params, json!({}));

    let list = DynAction::new(Pong).into_instructions();
    assert_eq!(names(&list), ["pong"]);

    let ins = Instruction::new(Ping).with_params(json!({"a": 1}));
    let id = ins.id;
    let list = ins.into_instructions();
    assert_eq!(list[0].id, id, "an instruction is kept as is");
    assert_eq!(list[0].params, json!({"a": 1}));

    let list = (Ping, json!({"a": 2})).into_instructions();
    assert_eq!(names(&list), ["ping"]);
    assert_eq!(list[0].params, json!({"a": 2}));
    assert!(list[0].context.is_empty());

    let list = (DynAction::new(Pong), json!({"a": 3})).into_instructions();
    assert_eq!(names(&list), ["pong"]);

    let list = (Ping, json!({"a": 4}), obj(json!({"c": 1}))).into_instructions();
    assert_eq!(list[0].params, json!({"a": 4}));
    assert_eq!(list[0].context, obj(json!({"c": 1})));
    assert_eq!(list[0].opts, ExecOptions::new());

    let list = (Ping, json!({"a": 5}), obj(json!({"c": 2})), opts).into_instructions();
    assert_eq!(list[0].params, json!({"a": 5}));
    assert_eq!(list[0].context, obj(json!({"c": 2})));
    assert_eq!(list[0].opts, opts);

    let list = vec![Ping, Ping].into_instructions();
    assert_eq!(names(&list), ["ping", "ping"]);

    let list = vec![DynAction::new(Ping), DynAction::new(Pong)].into_instructions();
    assert_eq!(names(&list), ["ping", "pong"]);

    let list = vec![
        (DynAction::new(Pong), json!({"x": 1})),
        (DynAction::new(Ping), json!({"x": 2})),
    ]
    .into_instructions();
    assert_eq!(names(&list), ["pong", "ping"]);
    assert_eq!(list[1].params, json!({"x": 2}));

    let list = vec![
        Instruction::new(Ping),
        Instruction::new(Pong).with_params(json!({"n": 2})),
    ]
    .into_instructions();
    assert_eq!(names(&list), ["ping", "pong"]);
    assert_ne!(list[0].id, list[1].id);

    let list = Vec::<Instruction>::new().into_instructions();
    assert!(list.is_empty());
}

#[test]
fn normalize_shared_context_and_opts_win() {
    let item_opts = ExecOptions::new()
        .timeout(Duration::from_secs(1))
        .max_retries(7);
    let list = vec![
        (
            DynAction::new(Ping),
            json!({"p": 1}),
            obj(json!({"tenant": "item", "trace": "t1"})),
            item_opts,
        ),
        (
            DynAction::new(Pong),
            json!({"p": 2}),
            obj(json!({})),
            ExecOptions::new(),
        ),
    ];
    let shared_ctx = obj(json!({"tenant": "shared", "user": "ann"}));
    let shared_opts = ExecOptions::new().timeout(Duration::from_secs(9));
    let out = Instruction::normalize(list, &shared_ctx, &shared_opts);

    assert_eq!(names(&out), ["ping", "pong"]);
    assert_eq!(out[0].params, json!({"p": 1}));
    assert_eq!(
        out[0].context,
        obj(json!({"tenant": "shared", "trace": "t1", "user": "ann"}))
    );
    // The shared timeout wins; the item's retries stay (not set in shared).
    assert_eq!(
        out[0].opts,
        ExecOptions::new()
            .timeout(Duration::from_secs(9))
            .max_retries(7)
    );
    assert_eq!(out[1].context, shared_ctx);
    assert_eq!(out[1].opts, shared_opts);

    // Nothing shared: nothing changes.
    let out = Instruction::normalize(Ping, &Map::new(), &ExecOptions::new());
    assert_eq!(out.len(), 1);
    assert!(out[0].context.is_empty());
    assert_eq!(out[0].opts, ExecOptions::new());
}

fn allowed() -> Vec<DynAction> {
    vec![Ping.into(), Pong.into()]
}

#[test]
fn from_json_shapes() {
    let allowed = allowed();

    let list = Instruction::from_json(&json!("ping"), &allowed).unwrap();
    assert_eq!(names(&list), ["ping"]);
    assert_eq!(list[0].params, json!({}));
    assert!(
        list[0].action.ptr_eq(&allowed[0]),
        "the allowed action is reused"
    );

    let list = Instruction::from_json(&json!(["pong", {"n": 1}]), &allowed).unwrap();
    assert_eq!(names(&list), ["pong"]);
    assert_eq!(list[0].params, json!({"n": 1}));

    let list = Instruction::from_json(&json!(["pong", null]), &allowed).unwrap();
    assert_eq!(list[0].params, json!({}));

    let list = Instruction::from_json(
        &json!({
            "action": "ping",
            "params": {"n": 2},
            "context": {"tenant": "acme"},
            "opts": {"timeout": 1500, "max_retries": 0, "backoff": 10, "max_backoff": 100, "compensation_timeout": 50, "unknown": true}
        }),
        &allowed,
    )
    .unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].params, json!({"n": 2}));
    assert_eq!(list[0].context, obj(json!({"tenant": "acme"})));
    assert_eq!(
        list[0].opts,
        ExecOptions::new()
            .timeout(Duration::from_millis(1500))
            .max_retries(0)
            .backoff(Duration::from_millis(10))
            .max_backoff(Duration::from_millis(100))
            .compensation_timeout(Duration::from_millis(50))
    );

    let list = Instruction::from_json(&json!({"action": "ping"}), &allowed).unwrap();
    assert_eq!(list[0].params, json!({}));
    assert!(list[0].context.is_empty());
    assert_eq!(list[0].opts, ExecOptions::new());

    let list = Instruction::from_json(
        &json!(["ping", ["pong", {"n": 3}], {"action": "ping", "params": {"n": 4}}, "pong"]),
        &allowed,
    )
    .unwrap();
    assert_eq!(names(&list), ["ping", "pong", "ping", "pong"]);
    assert_eq!(list[1].params, json!({"n": 3}));
    assert_eq!(list[2].params, json!({"n": 4}));

    // Two names are a list of two, not a (name, params) pair.
    let list = Instruction::from_json(&json!(["ping", "pong"]), &allowed).unwrap();
    assert_eq!(names(&list), ["ping", "pong"]);
    // A list of pairs.
    let list = Instruction::from_json(&json!([["ping", {}], ["pong", {}]]), &allowed).unwrap();
    assert_eq!(names(&list), ["ping", "pong"]);

    assert!(
        Instruction::from_json(&json!([]), &allowed)
            .unwrap()
            .is_empty()
    );
}

#[track_caller]
fn json_err(v: Value) -> Error {
    Instruction::from_json(&v, &allowed()).unwrap_err()
}

#[test]
fn from_json_unknown_action_is_a_configuration_error() {
    let err = json_err(json!("launch"));
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), "actions not allowed: launch");
    assert_eq!(err.detail("action"), Some(&json!("launch")));
    assert!(!err.retryable());

    let err = json_err(json!({"action": "launch", "params": {}}));
    assert_eq!(err.message(), "actions not allowed: launch");

    let err = Instruction::from_json(&json!("ping"), &[]).unwrap_err();
    assert_eq!(err.message(), "actions not allowed: ping");

    // A list stops at its first error and says where.
    let err = json_err(json!(["ping", "launch", "nuke"]));
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), "actions not allowed: launch");
    assert_eq!(err.detail("index"), Some(&json!(1)));
}

#[test]
fn from_json_bad_shapes_are_validation_errors() {
    let cases = [
        (
            json!([["ping"]]),
            "invalid instruction format: nested lists are not allowed",
            Some(0),
        ),
        (
            json!(["ping", [["pong", {}]]]),
            "invalid params format: expected a JSON object, got an array",
            None,
        ),
        (
            json!(["pong", [[]], "ping"]),
            "invalid instruction format: nested lists are not allowed",
            Some(1),
        ),
        (
            json!(["ping", 5]),
            "invalid params format: expected a JSON object, got a number",
            None,
        ),
        (
            json!({"action": "ping", "params": [1]}),
            "invalid params format: expected a JSON object, got an array",
            None,
        ),
        (
            json!({"action": "ping", "context": "acme"}),
            "invalid context format: expected a JSON object, got a string",
            None,
        ),
        (
            json!({"action": "ping", "opts": 5}),
            "invalid opts format: expected a JSON object",
            None,
        ),
        (
            json!({"action": "ping", "opts": {"timeout": -1}}),
            "invalid opts: timeout must be a non-negative integer",
            None,
        ),
        (
            json!({"action": "ping", "opts": {"max_retries": "3"}}),
            "invalid opts: max_retries must be a non-negative integer",
            None,
        ),
        (
            json!({"action": "ping", "opts": {"backoff": 1.5}}),
            "invalid opts: backoff must be a non-negative integer",
            None,
        ),
        (
            json!({"params": {}}),
            "invalid instruction format: missing action name",
            None,
        ),
        (
            json!({"action": 5}),
            "invalid instruction format: missing action name",
            None,
        ),
        (json!(5), "invalid instruction format: got a number", None),
        (json!(null), "invalid instruction format: got null", None),
        (
            json!(true),
            "invalid instruction format: got a boolean",
            None,
        ),
        (
            json!(["pong", "ping", {"action": "ping", "params": 1}]),
            "invalid params format: expected a JSON object, got a number",
            Some(2),
        ),
    ];
    for (input, message, index) in cases {
        let err = json_err(input.clone());
        assert_eq!(err.kind(), ErrorKind::Validation, "{input}");
        assert_eq!(err.message(), message, "{input}");
        assert!(!err.retryable());
        if let Some(i) = index {
            assert_eq!(err.detail("index"), Some(&json!(i)), "{input}");
        }
    }
    // Paths name the bad field.
    assert_eq!(
        json_err(json!({"action": "ping", "context": 1})).detail("path"),
        Some(&json!("context"))
    );
    assert_eq!(
        json_err(json!({"action": "ping", "params": 1})).detail("path"),
        Some(&json!("params"))
    );
    assert_eq!(
        json_err(json!({"action": "ping", "opts": {"timeout": "x"}})).detail("path"),
        Some(&json!("timeout"))
    );
    assert_eq!(
        json_err(json!({"params": {}})).detail("path"),
        Some(&json!("action"))
    );
}

/// `[string, object]` is always read as a `(name, params)` pair, even when
/// the object looks like an instruction: lists of two must be written as
/// objects (or with a name second) to be read as lists.
#[test]
fn a_two_item_list_with_a_name_first_is_a_pair() {
    let list = Instruction::from_json(&json!(["ping", {"action": "pong"}]), &allowed()).unwrap();
    assert_eq!(names(&list), ["ping"]);
    assert_eq!(list[0].params, json!({"action": "pong"}));
    let list = Instruction::from_json(&json!([{"action": "ping"}, {"action": "pong"}]), &allowed())
        .unwrap();
    assert_eq!(names(&list), ["ping", "pong"]);
}

#[tokio::test]
async fn json_instructions_run() {
    let allowed = allowed();
    let list = Instruction::from_json(
        &json!([{"action": "ping", "context": {"k": 1}}, "pong"]),
        &allowed,
    )
    .unwrap();
    let exec = Exec::new();
    for ins in list {
        exec.run_instruction(ins).await.unwrap();
    }
}
