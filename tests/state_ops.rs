//! Deep merge and state operations: exact cases, their use through `cmd`,
//! and property tests against a flat reference model.

use std::collections::BTreeMap;

use jido::agent::{apply_state_op, deep_merge};
use jido::effect::StateOp;
use jido::prelude::*;
use jido::signal::Signal;
use jido::state::StateMap;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

fn applied(state: Value, ops: Vec<StateOp>) -> Value {
    let mut state = StateMap::from(obj(state));
    for op in ops {
        apply_state_op(&mut state, op);
    }
    Value::from(state)
}

// ---------------------------------------------------------------- exact cases

#[test]
fn deep_merge_recurses_into_objects_only() {
    let mut dst = StateMap::from(obj(
        json!({"a": {"b": {"c": 1, "d": 2}}, "l": [1, 2], "s": "x", "o": {"k": 1}}),
    ));
    deep_merge(
        &mut dst,
        obj(
            json!({"a": {"b": {"d": 3, "e": 4}}, "l": [3], "s": {"now": "object"}, "o": 7, "n": null}),
        ),
    );
    assert_eq!(
        Value::from(dst),
        json!({"a": {"b": {"c": 1, "d": 3, "e": 4}}, "l": [3], "s": {"now": "object"}, "o": 7, "n": null})
    );
}

#[test]
fn deep_merge_of_an_empty_object_keeps_the_existing_one() {
    let mut dst = StateMap::from(obj(json!({"a": {"x": 1}})));
    deep_merge(&mut dst, obj(json!({"a": {}, "b": {}})));
    assert_eq!(Value::from(dst), json!({"a": {"x": 1}, "b": {}}));
}

#[test]
fn set_state_deep_merges() {
    assert_eq!(
        applied(
            json!({"a": {"x": 1}}),
            vec![StateOp::set_state(obj(json!({"a": {"y": 2}})))]
        ),
        json!({"a": {"x": 1, "y": 2}})
    );
}

#[test]
fn replace_state_replaces_everything_reserved_keys_included() {
    assert_eq!(
        applied(
            json!({"a": 1, "__strategy__": {"s": 1}, "__parent__": {"id": "p"}}),
            vec![StateOp::replace_state(obj(json!({"b": 2})))]
        ),
        json!({"b": 2})
    );
}

#[test]
fn delete_keys_drops_top_level_keys_and_ignores_missing_ones() {
    assert_eq!(
        applied(
            json!({"a": 1, "b": {"a": 1}, "c": 3}),
            vec![StateOp::delete_keys(["a", "b", "zzz"])]
        ),
        json!({"c": 3})
    );
}

#[test]
fn set_path_creates_and_replaces_intermediates() {
    assert_eq!(
        applied(
            json!({}),
            vec![StateOp::set_path(["a", "b", "c"], json!(1))]
        ),
        json!({"a": {"b": {"c": 1}}})
    );
    assert_eq!(
        applied(
            json!({"a": {"keep": true, "b": 5}}),
            vec![StateOp::set_path(["a", "b", "c"], json!([1]))]
        ),
        json!({"a": {"keep": true, "b": {"c": [1]}}})
    );
    assert_eq!(
        applied(
            json!({"a": {"b": {"x": 1}}}),
            vec![StateOp::set_path(["a", "b"], json!({"y": 2}))]
        ),
        json!({"a": {"b": {"y": 2}}})
    );
    assert_eq!(
        applied(
            json!({"a": 1}),
            vec![StateOp::set_path(Vec::<String>::new(), json!({"z": 0}))]
        ),
        json!({"z": 0})
    );
    assert_eq!(
        applied(
            json!({"a": 1}),
            vec![StateOp::set_path(Vec::<String>::new(), json!(3))]
        ),
        json!({"a": 1})
    );
}

#[test]
fn delete_path_removes_nested_values_and_ignores_missing_paths() {
    assert_eq!(
        applied(
            json!({"a": {"b": 1, "c": 2}}),
            vec![StateOp::delete_path(["a", "b"])]
        ),
        json!({"a": {"c": 2}})
    );
    assert_eq!(
        applied(
            json!({"a": {"b": 1}}),
            vec![StateOp::delete_path(["a", "b"])]
        ),
        json!({"a": {}})
    );
    assert_eq!(
        applied(
            json!({"a": {"b": 1}, "s": "x"}),
            vec![
                StateOp::delete_path(["zz", "b"]),
                StateOp::delete_path(["s", "b"]),
                StateOp::delete_path(["a", "zz"]),
                StateOp::delete_path(Vec::<String>::new()),
            ]
        ),
        json!({"a": {"b": 1}, "s": "x"})
    );
}

#[test]
fn operations_apply_in_order() {
    assert_eq!(
        applied(
            json!({"a": 1}),
            vec![
                StateOp::set_path(["x", "y"], json!(1)),
                StateOp::delete_keys(["a"]),
                StateOp::set_state(obj(json!({"x": {"z": 2}}))),
                StateOp::delete_path(["x", "y"]),
                StateOp::set_path(["a"], json!("back")),
            ]
        ),
        json!({"x": {"z": 2}, "a": "back"})
    );
    // `apply` on the op itself does the same.
    let mut state = StateMap::new();
    StateOp::set_path(["k"], json!(true)).apply(&mut state);
    assert_eq!(Value::from(state), json!({"k": true}));
}

// ---------------------------------------------------------------- through cmd

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct OpsParams {
    output: Value,
    ops: Vec<Value>,
    #[serde(default)]
    fail: bool,
}

/// Pushes effects described as JSON (`{"set": {..}}`, `{"replace": {..}}`,
/// `{"delete_keys": [..]}`, `{"set_path": [[..], v]}`, `{"delete_path": [..]}`,
/// `{"emit": "type"}`), then returns `output` or fails.
struct Ops;
impl Action for Ops {
    type Params = OpsParams;
    type Output = Value;
    const NAME: &'static str = "ops";
    async fn run(&self, p: OpsParams, ctx: &Context) -> jido::Result<Value> {
        for op in p.ops {
            let (kind, arg) = op
                .as_object()
                .and_then(|m| m.iter().next())
                .map(|(k, v)| (k.clone(), v.clone()))
                .unwrap();
            let keys = |v: &Value| -> Vec<String> {
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|k| k.as_str().unwrap().to_owned())
                    .collect()
            };
            match kind.as_str() {
                "set" => ctx.push_effect(StateOp::set_state(obj(arg))),
                "replace" => ctx.push_effect(StateOp::replace_state(obj(arg))),
                "delete_keys" => ctx.push_effect(StateOp::DeleteKeys(keys(&arg))),
                "set_path" => ctx.push_effect(StateOp::SetPath {
                    path: keys(&arg[0]),
                    value: arg[1].clone().into(),
                }),
                "delete_path" => ctx.push_effect(StateOp::DeletePath(keys(&arg))),
                "emit" => ctx.push_effect(Directive::emit(Signal::new(
                    arg.as_str().unwrap(),
                    Value::Null,
                ))),
                other => panic!("unknown op {other}"),
            }
        }
        if p.fail {
            return Err(Error::execution("ops failed").with_retry(false));
        }
        Ok(p.output)
    }
}

struct Plain;
impl Agent for Plain {
    const NAME: &'static str = "plain";
    type Schema = ();
}

fn emitted(directives: &[Directive]) -> Vec<String> {
    directives
        .iter()
        .map(|d| match d {
            Directive::Emit { signal, .. } => signal.ty().to_owned(),
            Directive::Error { context, .. } => format!("error:{context}"),
            other => format!("{other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn cmd_merges_output_then_applies_ops_in_order_and_returns_only_external_directives() {
    let mut agent = AgentState::new(
        Plain,
        AgentOptions::new().state(obj(json!({"old": 1, "cfg": {"a": 1}}))),
    );
    let directives = agent
        .cmd(
            (
                Ops,
                json!({
                    "output": {"cfg": {"b": 2}, "out": true},
                    "ops": [
                        {"emit": "first"},
                        {"set": {"cfg": {"c": 3}}},
                        {"delete_keys": ["old"]},
                        {"emit": "second"},
                        {"set_path": [["deep", "er"], 1]},
                        {"delete_path": ["cfg", "a"]},
                        {"emit": "third"}
                    ]
                }),
            ),
            ExecOptions::new(),
        )
        .await;
    assert_eq!(emitted(&directives), ["first", "second", "third"]);
    assert_eq!(
        Value::Object(agent.state().to_json()),
        json!({"cfg": {"b": 2, "c": 3}, "out": true, "deep": {"er": 1}})
    );
}

#[tokio::test]
async fn replace_state_from_an_action_replaces_the_merged_output_too() {
    let mut agent = AgentState::new(Plain, AgentOptions::new().state(obj(json!({"old": 1}))));
    let directives = agent
        .cmd(
            (Ops, json!({"output": {"out": 1}, "ops": [{"replace": {"fresh": true}}, {"set": {"more": 1}}]})),
            ExecOptions::new(),
        )
        .await;
    assert!(directives.is_empty());
    assert_eq!(
        Value::Object(agent.state().to_json()),
        json!({"fresh": true, "more": 1})
    );
}

#[tokio::test]
async fn a_failed_action_returns_error_then_its_directives_and_applies_no_state_op() {
    let mut agent = AgentState::new(Plain, AgentOptions::new().state(obj(json!({"old": 1}))));
    let directives = agent
        .cmd(
            (
                Ops,
                json!({
                    "output": {"out": 1},
                    "ops": [{"emit": "a"}, {"set": {"x": 1}}, {"delete_keys": ["old"]}, {"emit": "b"}],
                    "fail": true
                }),
            ),
            ExecOptions::new(),
        )
        .await;
    assert_eq!(emitted(&directives), ["error:instruction", "a", "b"]);
    assert_eq!(Value::Object(agent.state().to_json()), json!({"old": 1}));
}

// ---------------------------------------------------------------- reference model

/// A JSON object as a flat map from paths to leaves (a non-object value,
/// or `{}` for an empty object below the root).
type Flat = BTreeMap<Vec<String>, Value>;

fn flatten_into(flat: &mut Flat, prefix: &[String], value: &Value) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let mut p = prefix.to_vec();
                p.push(k.clone());
                flatten_into(flat, &p, v);
            }
        }
        Value::Object(_) if prefix.is_empty() => {}
        other => {
            flat.insert(prefix.to_vec(), other.clone());
        }
    }
}

fn flatten(value: &Value) -> Flat {
    let mut flat = Flat::new();
    flatten_into(&mut flat, &[], value);
    flat
}

fn unflatten(flat: &Flat) -> Value {
    fn insert(node: &mut BTreeMap<String, Node>, path: &[String], leaf: &Value) {
        if path.len() == 1 {
            node.insert(path[0].clone(), Node::Leaf(leaf.clone()));
            return;
        }
        let child = node
            .entry(path[0].clone())
            .or_insert_with(|| Node::Obj(BTreeMap::new()));
        if let Node::Obj(m) = child {
            insert(m, &path[1..], leaf);
        } else {
            panic!("model broken: leaf above {path:?}");
        }
    }
    enum Node {
        Leaf(Value),
        Obj(BTreeMap<String, Node>),
    }
    fn to_value(node: Node) -> Value {
        match node {
            Node::Leaf(v) => v,
            Node::Obj(m) => Value::Object(m.into_iter().map(|(k, v)| (k, to_value(v))).collect()),
        }
    }
    let mut root = BTreeMap::new();
    for (path, leaf) in flat {
        insert(&mut root, path, leaf);
    }
    to_value(Node::Obj(root))
}

fn is_prefix(p: &[String], of: &[String]) -> bool {
    of.len() >= p.len() && of[..p.len()] == *p
}

/// Whether an object lives at `p` (the root always is one).
fn has_object(flat: &Flat, p: &[String]) -> bool {
    p.is_empty()
        || flat.iter().any(|(k, v)| {
            (k.len() > p.len() && is_prefix(p, k)) || (k.as_slice() == p && *v == json!({}))
        })
}

/// Puts `value` at `p`, replacing whatever was there or on the way.
fn model_set(flat: &mut Flat, p: &[String], value: &Value) {
    // Drop what was at `p` or below, and leaves on the way to `p`.
    flat.retain(|k, _| !(is_prefix(p, k) || (k.len() < p.len() && is_prefix(k, p))));
    flatten_into(flat, p, value);
    if let Value::Object(m) = value
        && m.is_empty()
        && !p.is_empty()
    {
        flat.insert(p.to_vec(), json!({}));
    }
}

fn model_merge(flat: &mut Flat, prefix: &[String], src: &Map<String, Value>) {
    for (k, v) in src {
        let mut p = prefix.to_vec();
        p.push(k.clone());
        match v {
            Value::Object(inner) if has_object(flat, &p) => model_merge(flat, &p, inner),
            other => model_set(flat, &p, other),
        }
    }
}

fn model_delete(flat: &mut Flat, p: &[String]) {
    let Some((_, parent)) = p.split_last() else {
        return;
    };
    if !has_object(flat, parent) {
        return;
    }
    flat.retain(|k, _| !is_prefix(p, k));
    if !parent.is_empty() && !flat.keys().any(|k| is_prefix(parent, k)) {
        flat.insert(parent.to_vec(), json!({}));
    }
}

fn model_apply(flat: &mut Flat, op: &StateOp) {
    match op {
        StateOp::SetState(m) => model_merge(flat, &[], &m.to_json()),
        StateOp::ReplaceState(m) => *flat = flatten(&Value::from(m)),
        StateOp::DeleteKeys(keys) => {
            for k in keys {
                model_delete(flat, std::slice::from_ref(k));
            }
        }
        StateOp::SetPath { path, value } => {
            if path.is_empty() {
                if value.is_object() {
                    *flat = flatten(&value.to_json());
                }
            } else {
                model_set(flat, path, &value.to_json());
            }
        }
        StateOp::DeletePath(path) => model_delete(flat, path),
        other => panic!("unmodelled op {other:?}"),
    }
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![Just("a"), Just("b"), Just("c")].prop_map(str::to_owned)
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (0i64..5).prop_map(Value::from),
        "[xy]{0,2}".prop_map(Value::from),
        prop::collection::vec((0i64..3).prop_map(Value::from), 0..3).prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 3, |inner| {
        prop::collection::btree_map(key(), inner, 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    })
}

fn object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(key(), value(), 0..4).prop_map(|m| m.into_iter().collect())
}

fn path() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(key(), 0..4)
}

fn op() -> impl Strategy<Value = StateOp> {
    prop_oneof![
        3 => object().prop_map(StateOp::set_state),
        1 => object().prop_map(StateOp::replace_state),
        1 => prop::collection::vec(key(), 0..3).prop_map(StateOp::DeleteKeys),
        3 => (path(), value()).prop_map(|(path, value)| StateOp::set_path(path, value)),
        2 => path().prop_map(StateOp::DeletePath),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if std::env::var_os("CI").is_some() { 256 } else { 1024 }))]

    #[test]
    fn flat_model_round_trips(v in object()) {
        prop_assert_eq!(unflatten(&flatten(&Value::Object(v.clone()))), Value::Object(v));
    }

    #[test]
    fn deep_merge_matches_the_model(dst in object(), src in object()) {
        let mut flat = flatten(&Value::Object(dst.clone()));
        model_merge(&mut flat, &[], &src);
        let mut real = StateMap::from(dst);
        deep_merge(&mut real, src);
        prop_assert_eq!(Value::from(real), unflatten(&flat));
    }

    #[test]
    fn deep_merge_is_idempotent(dst in object(), src in object()) {
        let mut once = StateMap::from(dst);
        deep_merge(&mut once, src.clone());
        let mut twice = once.clone();
        deep_merge(&mut twice, src);
        prop_assert_eq!(once, twice);
    }

    #[test]
    fn state_ops_match_the_model(start in object(), ops in prop::collection::vec(op(), 0..8)) {
        let mut flat = flatten(&Value::Object(start.clone()));
        let mut real = StateMap::from(start);
        for op in ops {
            model_apply(&mut flat, &op);
            apply_state_op(&mut real, op);
            prop_assert_eq!(Value::from(&real), unflatten(&flat));
        }
    }
}
