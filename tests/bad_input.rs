//! Bad input: every malformed signal, route, param and option gets a typed
//! error naming what is wrong, and an agent that receives bad input keeps
//! its state and keeps serving.

mod common;

use common::*;
use jido::directive::ChildOptions;
use jido::prelude::*;
use jido::server::{Jido, JidoConfig, ServerOptions};
use jido::signal::router::{Router, validate_path};
use jido::signal::{MAX_DATA_DEPTH, Signal};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{Value, json};

fn valid_json() -> Value {
    json!({"specversion": "1.0.2", "type": "order.placed", "source": "/shop", "id": "s1", "data": {"n": 1}})
}

fn parse(v: &Value) -> jido::Result<Signal> {
    Signal::from_json_slice(&serde_json::to_vec(v).unwrap())
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn malformed_signal_json_is_a_validation_error() {
    for text in ["", "{", "{\"type\": }", "nul", "\u{feff}{}", "{\"a\":1,}"] {
        let err = Signal::from_json_str(text).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation, "{text:?}");
        assert_eq!(err.message(), "invalid signal: malformed json", "{text:?}");
        assert_eq!(err.detail("reason"), Some(&json!("malformed_json")));
    }
    let err = Signal::from_json_slice(&[0xff, 0xfe, b'{']).unwrap_err();
    assert_eq!(err.message(), "invalid signal: malformed json");
    for (text, kind) in [
        ("[]", "array"),
        ("\"x\"", "string"),
        ("1", "number"),
        ("null", "null"),
    ] {
        let err = Signal::from_json_str(text).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation);
        assert_eq!(err.message(), "invalid signal: expected a json object");
        assert_eq!(err.detail("got"), Some(&json!(kind)), "{text}");
    }
}

#[test]
fn bad_attributes_name_their_field() {
    let cases: Vec<(Value, &str)> = vec![
        (json!({"specversion": "0.3"}), "specversion"),
        (json!({"specversion": null}), "specversion"),
        (json!({"type": ""}), "type"),
        (json!({"type": null}), "type"),
        (json!({"type": 7}), "type"),
        (json!({"source": ""}), "source"),
        (json!({"time": "yesterday"}), "time"),
    ];
    for (patch, field) in cases {
        let mut v = valid_json();
        for (k, x) in patch.as_object().unwrap() {
            if x.is_null() {
                v.as_object_mut().unwrap().remove(k);
            } else {
                v[k] = x.clone();
            }
        }
        let err = parse(&v).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation, "{patch}");
        assert_eq!(err.detail("field"), Some(&json!(field)), "{patch}: {err}");
    }
    let mut v = valid_json();
    v["specversion"] = json!("0.3");
    assert_eq!(
        parse(&v).unwrap_err().message(),
        "invalid signal: unexpected specversion 0.3"
    );
    let mut v = valid_json();
    v["type"] = json!("");
    assert_eq!(
        parse(&v).unwrap_err().message(),
        "invalid signal: missing type"
    );
    assert!(parse(&valid_json()).is_ok());
}

#[test]
fn deep_nesting_is_refused_without_overflowing_the_stack() {
    // Just inside the limit parses.
    let mut v = valid_json();
    v["data"] = serde_json::from_str(&nested(MAX_DATA_DEPTH - 1)).unwrap();
    assert!(parse(&v).is_ok());
    // Past the limit, and far past serde's own recursion limit.
    for depth in [MAX_DATA_DEPTH + 1, 127, 129, 10_000, 1_000_000] {
        let text = format!(
            r#"{{"specversion":"1.0.2","type":"a","source":"/s","id":"1","data":{}}}"#,
            nested(depth)
        );
        let err = Signal::from_json_str(&text).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation, "depth {depth}");
        assert_eq!(
            err.message(),
            format!("invalid signal: data nested deeper than {MAX_DATA_DEPTH} levels"),
            "depth {depth}"
        );
        assert_eq!(err.detail("field"), Some(&json!("data")));
    }
    // Deep in an extension.
    let text = format!(
        r#"{{"specversion":"1.0.2","type":"a","source":"/s","id":"1","ext":{}}}"#,
        nested(1000)
    );
    let err = Signal::from_json_str(&text).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
}

#[test]
fn a_huge_payload_parses_and_round_trips() {
    let blob = "x".repeat(8 * 1024 * 1024);
    let mut v = valid_json();
    v["data"] = json!({"blob": blob});
    let s = parse(&v).unwrap();
    assert_eq!(
        s.data().unwrap()["blob"].as_str().unwrap().len(),
        8 * 1024 * 1024
    );
    let again = Signal::from_json_slice(&s.to_json_vec()).unwrap();
    assert_eq!(again.data(), s.data());
}

#[test]
fn invalid_route_patterns_are_configuration_errors() {
    let mut router: Router<u32> = Router::new();
    router.add("ok.path", 1).unwrap();
    for bad in ["", "a..b", ".a", "a.", "a.**.**", "a b", "a.*x"] {
        let err = router.add(bad, 2).unwrap_err();
        assert!(validate_path(bad).is_err(), "{bad:?}");
        assert_eq!(
            err.kind(),
            validate_path(bad).unwrap_err().kind(),
            "{bad:?}"
        );
    }
    // Fuzz regression (fuzz/artifacts/router, input "*\t"): a route's path is
    // trimmed, so a padded pattern is the pattern itself.
    let mut padded: Router<u32> = Router::new();
    padded.add("*\t", 7).unwrap();
    padded.add(" a.b ", 8).unwrap();
    assert_eq!(
        padded.list().iter().map(|r| r.path()).collect::<Vec<_>>(),
        vec!["*", "a.b"]
    );
    assert_eq!(
        padded.route(&Signal::new("x", json!({}))).unwrap(),
        vec![&7]
    );
    assert_eq!(
        padded.route(&Signal::new("a.b", json!({}))).unwrap(),
        vec![&8]
    );
    // The router is unchanged by refused routes.
    assert_eq!(router.len(), 1);
    assert_eq!(
        router.route(&Signal::new("ok.path", json!({}))).unwrap(),
        vec![&1]
    );
    let err = router.route(&Signal::new("other", json!({}))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Routing);
    assert_eq!(err.message(), "no matching handlers found for signal");
}

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct AddParams {
    n: i64,
}

/// A typed action: `total += n`.
struct TypedAdd;
impl Action for TypedAdd {
    type Params = AddParams;
    type Output = Value;
    const NAME: &'static str = "typed_add";
    async fn run(&self, p: AddParams, ctx: &Context) -> jido::Result<Value> {
        let total = ctx
            .state()
            .and_then(|s| s.get("total")?.as_i64())
            .unwrap_or(0);
        Ok(json!({"total": total + p.n}))
    }
}

#[tokio::test]
async fn an_agent_keeps_its_state_through_bad_input() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("add", DynAction::new(TypedAdd))
                .build("bi"),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    within(agent.call(sig("add", json!({"n": 5}))))
        .await
        .unwrap();
    // Invalid params: the call answers with the action's validation error
    // (the field path in its details), the error also goes to the error
    // policy, and the state is unchanged.
    for (bad, path, context) in [
        (json!({"n": "five"}), Some(json!("n")), "instruction"),
        (json!({}), Some(json!("n")), "instruction"),
        (json!([1]), None, "normalize"),
        (json!("x"), None, "normalize"),
        (json!({"n": 1.5}), Some(json!("n")), "instruction"),
    ] {
        let err = within(agent.call(sig("add", bad.clone())))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation, "{bad}");
        assert_eq!(err.details().get("path"), path.as_ref(), "{bad}: {err:?}");
        assert_eq!(err.details()["agent_id"], "bi");
        assert_eq!(err.details()["error_context"], context);
        let after = within(agent.state()).await.unwrap();
        assert_eq!(after.state()["total"], 5, "{bad}");
    }
    assert_eq!(within(agent.status()).await.unwrap().error_count, 5);
    // An unknown route: a routing error.
    let err = within(agent.call(sig("nope", json!({}))))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Routing);
    assert_eq!(err.message(), "no route for signal: nope");
    // A huge payload goes through the agent.
    let blob = "y".repeat(8 * 1024 * 1024);
    let after = within(agent.call(sig("add", json!({"n": 1, "blob": blob}))))
        .await
        .unwrap();
    assert_eq!(after.state()["total"], 6);
    // Deep data made in code (not parsed) is still handled.
    let deep: Value = serde_json::from_str(&nested(120)).unwrap_or(json!(null));
    let after = within(agent.call(sig("add", json!({"n": 1, "deep": deep}))))
        .await
        .unwrap();
    assert_eq!(after.state()["total"], 7);
    assert_eq!(within(agent.state()).await.unwrap().state()["total"], 7);
    assert_eq!(within(agent.status()).await.unwrap().error_count, 6);
    jido.shutdown().await;
}

#[test]
fn invalid_exec_options_are_validation_errors() {
    for (bad, msg) in [
        (json!([1]), "invalid opts format: expected a JSON object"),
        (
            json!({"timeout": -1}),
            "invalid opts: timeout must be a non-negative integer",
        ),
        (
            json!({"max_retries": "3"}),
            "invalid opts: max_retries must be a non-negative integer",
        ),
        (
            json!({"backoff": 1.5}),
            "invalid opts: backoff must be a non-negative integer",
        ),
    ] {
        let err = ExecOptions::from_json(&bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation, "{bad}");
        assert_eq!(err.message(), msg);
    }
}

#[test]
fn invalid_server_options_are_errors() {
    for (bad, msg) in [
        (
            json!({"lifecycle_mod": "x"}),
            "unknown server option: lifecycle_mod",
        ),
        (
            json!({"on_parent_death": "explode"}),
            "invalid server option: on_parent_death",
        ),
        (
            json!({"max_queue_size": "big"}),
            "invalid server option: max_queue_size",
        ),
    ] {
        let err = ServerOptions::from_json(bad.as_object().unwrap()).unwrap_err();
        assert_eq!(err.message(), msg, "{bad}");
    }
}

#[test]
fn invalid_dispatch_options_are_errors() {
    use jido::signal::dispatch::{DispatchConfig, HttpTarget};
    for (url, msg) in [
        ("ftp://x", "invalid url: scheme must be http or https"),
        ("http://a b", "invalid url: whitespace not allowed"),
    ] {
        let err = DispatchConfig::new(HttpTarget::new(url)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Configuration, "{url}");
        assert_eq!(err.message(), msg, "{url}");
    }
}

#[test]
fn instruction_json_errors() {
    let allowed = [DynAction::new(TypedAdd)];
    let err = Instruction::from_json(&json!("nope"), &allowed).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), "actions not allowed: nope");
    let err = Instruction::from_json(&json!([["typed_add"]]), &allowed).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(
        err.message(),
        "invalid instruction format: nested lists are not allowed"
    );
    for bad in [
        json!(1),
        json!(null),
        json!({"params": {}}),
        json!({"action": "typed_add", "params": 3}),
    ] {
        let err = Instruction::from_json(&bad, &allowed).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation, "{bad}");
    }
}

// Proptest fallback for the fuzz targets in fuzz/ (same entry points):
// arbitrary input never panics, and what parses is consistent.

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z.*]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,12}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn signal_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = Signal::from_json_slice(&bytes);
    }

    #[test]
    fn signal_objects_parse_or_fail_typed(v in arb_json()) {
        match parse(&v) {
            Ok(s) => {
                let again = Signal::from_json_slice(&s.to_json_vec()).unwrap();
                prop_assert_eq!(again.ty(), s.ty());
                prop_assert_eq!(again.data(), s.data());
            }
            Err(e) => prop_assert_eq!(e.kind(), ErrorKind::Validation),
        }
    }

    #[test]
    fn routes_agree_with_matches(
        patterns in prop::collection::vec("[a-c*#. \t]{0,8}", 1..6),
        types in prop::collection::vec("[a-c.]{0,8}", 1..6),
    ) {
        let mut router: Router<usize> = Router::new();
        for (i, p) in patterns.iter().enumerate() {
            prop_assert_eq!(router.add(p.as_str(), i).is_ok(), validate_path(p.trim()).is_ok());
        }
        for ty in &types {
            if let Ok(found) = router.route(&Signal::new(ty.as_str(), Value::Null)) {
                for i in found {
                    prop_assert!(jido::signal::router::matches(patterns[*i].trim(), ty));
                }
            }
        }
    }

    #[test]
    fn instructions_never_panic(v in arb_json()) {
        let allowed = [DynAction::new(TypedAdd)];
        let _ = Instruction::from_json(&v, &allowed);
    }
}

#[tokio::test]
async fn typed_params_decode_or_fail_with_validation() {
    let exec = Exec::with_defaults(
        ExecOptions::new()
            .timeout(std::time::Duration::ZERO)
            .max_retries(0),
    );
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let values: Vec<Value> = (0..500)
        .map(|_| arb_json().new_tree(&mut runner).unwrap().current())
        .collect();
    let mut ok = 0;
    for v in values {
        let wrapped = [v.clone(), json!({"n": v})];
        for params in wrapped {
            match exec
                .run_instruction(Instruction::new(TypedAdd).with_params(params.clone()))
                .await
            {
                Ok(_) => ok += 1,
                Err(e) => assert_eq!(e.kind(), ErrorKind::Validation, "{params}: {e}"),
            }
        }
    }
    assert!(ok > 0);
}

#[test]
fn deep_or_mistyped_attributes_name_their_field() {
    for depth in [110, 300] {
        for field in ["type", "source", "subject"] {
            let text = format!(
                r#"{{"specversion":"1.0.2","type":"a","source":"/s","id":"1","{field}":{}}}"#,
                nested(depth)
            );
            let err = Signal::from_json_str(&text).unwrap_err();
            assert_eq!(
                err.message(),
                format!("invalid signal: {field} must be a string, got array")
            );
            assert_eq!(err.detail("field"), Some(&json!(field)));
        }
        let text = format!(
            r#"{{"specversion":"1.0.2","type":"a","source":"/s","id":"1","ext":{}}}"#,
            nested(depth)
        );
        let err = Signal::from_json_str(&text).unwrap_err();
        assert_eq!(
            err.message(),
            "invalid signal: ext nested deeper than 100 levels"
        );
        assert_eq!(err.detail("field"), Some(&json!("ext")));
    }
}

#[tokio::test]
async fn spawn_agent_with_invalid_options_starts_nothing_and_the_parent_keeps_serving() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let kid = TestAgent::new().build("unused");
    // The child's options arrive as data: the action reads them with
    // `ChildOptions::from_json` (a bad key or value fails the action), and
    // a value out of range reaches the runtime, where the child's start
    // fails.
    let parent = jido
        .start_agent(
            TestAgent::new()
                .route(
                    "spawn",
                    act(move |p, ctx| {
                        let kid = kid.clone();
                        async move {
                            let options = ChildOptions::from_json(p.as_object().unwrap())?;
                            ctx.push_effect(
                                Directive::spawn_agent(kid, "kid")
                                    .options(options)
                                    .restart(jido::directive::Restart::Temporary),
                            );
                            Ok(json!({}))
                        }
                    }),
                )
                .route("counter.add", add())
                .build("parent"),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    for (bad, refused) in [
        // Out of range: refused when the child starts (the call is fine).
        (json!({"max_queue_size": 0}), None),
        // Unreadable: refused where the action builds the directive.
        (
            json!({"on_parent_death": "explode"}),
            Some("invalid server option: on_parent_death"),
        ),
        (
            json!({"lifecycle_mod": "x"}),
            Some("unknown server option: lifecycle_mod"),
        ),
    ] {
        let answer = within(parent.call(sig("spawn", bad.clone()))).await;
        assert_eq!(
            answer.err().map(|e| e.message().to_owned()).as_deref(),
            refused,
            "{bad}"
        );
        let after = within(parent.call(sig("counter.add", json!({"n": 1}))))
            .await
            .unwrap();
        assert!(after.state().get("total").is_some(), "{bad}");
        assert!(
            within(parent.status()).await.unwrap().children.is_empty(),
            "{bad}"
        );
        assert!(jido.whereis("parent/kid").is_none(), "{bad}");
    }
    assert_eq!(within(parent.state()).await.unwrap().state()["total"], 3);
    assert_eq!(jido.agents().len(), 1);
    // A valid spawn still works afterwards.
    within(parent.call(sig("spawn", json!({})))).await.unwrap();
    within(async {
        while jido.whereis("parent/kid").is_none() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    jido.shutdown().await;
}
