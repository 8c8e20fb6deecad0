//! The error type: kinds, retry rules, envelope and sanitising, source chains.

use std::error::Error as StdError;

use jido::error::{SANITIZE_MAX_DEPTH, SANITIZE_MAX_ITEMS, SANITIZE_MAX_STRING, sanitize};
use jido::{Error, ErrorKind};
use serde_json::{Value, json};

#[test]
fn limits_are_jidos() {
    assert_eq!(SANITIZE_MAX_DEPTH, 4);
    assert_eq!(SANITIZE_MAX_ITEMS, 20);
    assert_eq!(SANITIZE_MAX_STRING, 512);
}

#[test]
fn constructors_set_kind_and_message() {
    let cases: [(Error, ErrorKind, &str); 14] = [
        (
            Error::validation("v"),
            ErrorKind::Validation,
            "validation_error",
        ),
        (
            Error::configuration("c"),
            ErrorKind::Configuration,
            "configuration_error",
        ),
        (
            Error::execution("e"),
            ErrorKind::Execution,
            "execution_error",
        ),
        (Error::timeout("t"), ErrorKind::Timeout, "timeout"),
        (
            Error::compensation("c"),
            ErrorKind::Compensation,
            "compensation_error",
        ),
        (Error::routing("r"), ErrorKind::Routing, "routing_error"),
        (Error::dispatch("d"), ErrorKind::Dispatch, "dispatch_error"),
        (
            Error::queue_overflow("q"),
            ErrorKind::QueueOverflow,
            "queue_overflow",
        ),
        (Error::not_found("n"), ErrorKind::NotFound, "not_found"),
        (Error::cancelled("x"), ErrorKind::Cancelled, "cancelled"),
        (Error::internal("i"), ErrorKind::Internal, "internal"),
        (Error::storage("s"), ErrorKind::Storage, "storage_error"),
        (Error::conflict("c"), ErrorKind::Conflict, "conflict"),
        (Error::fenced("f"), ErrorKind::Fenced, "fenced"),
    ];
    for (err, kind, type_name) in cases {
        assert_eq!(err.kind(), kind);
        assert_eq!(kind.as_str(), type_name);
        assert_eq!(kind.to_string(), type_name);
        assert_eq!(ErrorKind::from_type(type_name), Some(kind));
        assert_eq!(err.to_envelope()["type"], type_name);
        assert!(err.details().is_empty());
        assert!(err.source().is_none());
    }
    let err = Error::new(ErrorKind::Routing, "no route for signal a.b");
    assert_eq!(err.message(), "no route for signal a.b");
    assert_eq!(err.to_string(), "no route for signal a.b");
}

#[test]
fn retryable_by_kind() {
    assert!(!Error::validation("x").retryable());
    assert!(!Error::configuration("x").retryable());
    assert!(!Error::cancelled("x").retryable());
    assert!(!Error::conflict("x").retryable());
    assert!(!Error::fenced("x").retryable());
    assert!(Error::timeout("x").retryable());
    assert!(!Error::storage("x").with_retry(false).retryable());
    for err in [
        Error::storage("x"),
        Error::execution("x"),
        Error::compensation("x"),
        Error::routing("x"),
        Error::dispatch("x"),
        Error::queue_overflow("x"),
        Error::not_found("x"),
        Error::internal("x"),
    ] {
        assert!(err.retryable(), "{:?} should retry by default", err.kind());
    }
}

#[test]
fn hints_cannot_override_fixed_kinds() {
    assert!(!Error::validation("x").with_retry(true).retryable());
    assert!(
        !Error::configuration("x")
            .with_detail("retryable", true)
            .retryable()
    );
    assert!(!Error::cancelled("x").with_retry(true).retryable());
    assert!(Error::timeout("x").with_retry(false).retryable());
    assert!(
        Error::timeout("x")
            .with_detail("retryable", false)
            .retryable()
    );
}

#[test]
fn retry_hints_in_details() {
    let e = || Error::execution("x");
    assert!(!e().with_detail("retry", false).retryable());
    assert!(!e().with_retry(false).retryable());
    assert_eq!(e().with_retry(false).detail("retry"), Some(&json!(false)));
    assert!(!e().with_detail("retryable", false).retryable());
    assert!(e().with_detail("retry", true).retryable());
    assert!(e().with_detail("retryable", true).retryable());
    // Any non-boolean hint means "retry", as in jido_action.
    assert!(e().with_detail("retry", "no").retryable());
    assert!(e().with_detail("retry", 0).retryable());
    // `retry` is read before `retryable`.
    assert!(
        e().with_details(json!({"retry": true, "retryable": false}))
            .retryable()
    );
    assert!(
        !e().with_details(json!({"retry": false, "retryable": true}))
            .retryable()
    );
    // null is "no hint here": look further.
    assert!(
        !e().with_details(json!({"retry": null, "retryable": false}))
            .retryable()
    );
}

#[test]
fn retry_hints_nested_under_reason() {
    let e = || Error::dispatch("x");
    assert!(
        !e().with_detail("reason", json!({"retry": false}))
            .retryable()
    );
    assert!(
        !e().with_detail("reason", json!({"retryable": false}))
            .retryable()
    );
    assert!(
        !e().with_detail("reason", json!({"reason": {"reason": {"retry": false}}}))
            .retryable()
    );
    // A top-level hint wins over the nested one.
    assert!(
        e().with_details(json!({"retry": true, "reason": {"retry": false}}))
            .retryable()
    );
    // A reason that is not an object carries no hint.
    assert!(e().with_detail("reason", "retry: false").retryable());
    assert!(e().with_detail("reason", json!({"code": 503})).retryable());
    // Other keys are not looked into.
    assert!(
        e().with_detail("error", json!({"retry": false}))
            .retryable()
    );
}

#[test]
fn with_details_merges_and_wraps_non_objects() {
    let err = Error::execution("x")
        .with_detail("a", 1)
        .with_details(json!({"a": 2, "b": 3}))
        .with_details(Value::Null)
        .with_details(json!([1, 2]));
    assert_eq!(
        Value::Object(err.details().clone()),
        json!({"a": 2, "b": 3, "value": [1, 2]})
    );
    assert_eq!(err.detail("b"), Some(&json!(3)));
    assert_eq!(err.detail("c"), None);
}

#[test]
fn envelope_has_four_fields() {
    let err = Error::execution("charge failed")
        .with_detail("order_id", "ord_1")
        .with_detail("card_token", "tok_123")
        .with_retry(false);
    assert_eq!(
        err.to_envelope(),
        json!({
            "type": "execution_error",
            "message": "charge failed",
            "details": {"order_id": "ord_1", "card_token": "[REDACTED]", "retry": false},
            "retryable": false
        })
    );
    assert_eq!(
        Error::timeout("slow").to_envelope(),
        json!({"type": "timeout", "message": "slow", "details": {}, "retryable": true})
    );
    // The error itself keeps the raw details.
    assert_eq!(err.detail("card_token"), Some(&json!("tok_123")));
}

#[test]
fn sanitize_redacts_secret_looking_keys() {
    let input = json!({
        "password": "p",
        "db_password": "p",
        "Secret": "s",
        "client_secret": "s",
        "token": "t",
        "access_token": "t",
        "X-Auth-Token": "t",
        "api_key": "k",
        "API-KEY": "k",
        "apiKey": "k",
        "Authorization": "Bearer abc",
        "credentials": {"user": "u"},
        "private_key": "-----BEGIN",
        "privateKey": "-----BEGIN",
        "stacktrace": ["frame 1", "frame 2"],
        "Stack_Trace": "frames",
        "username": "ann",
        "key": "not a secret by itself",
    });
    assert_eq!(
        sanitize(&input),
        json!({
            "password": "[REDACTED]",
            "db_password": "[REDACTED]",
            "Secret": "[REDACTED]",
            "client_secret": "[REDACTED]",
            "token": "[REDACTED]",
            "access_token": "[REDACTED]",
            "X-Auth-Token": "[REDACTED]",
            "api_key": "[REDACTED]",
            "API-KEY": "[REDACTED]",
            "apiKey": "[REDACTED]",
            "Authorization": "[REDACTED]",
            "credentials": "[REDACTED]",
            "private_key": "[REDACTED]",
            "privateKey": "[REDACTED]",
            "stacktrace": "[OMITTED]",
            "Stack_Trace": "[OMITTED]",
            "username": "ann",
            "key": "not a secret by itself",
        })
    );
}

#[test]
fn sanitize_redacts_inside_arrays_and_nested_objects() {
    let input = json!({"calls": [{"token": "a", "n": 1}, {"headers": {"authorization": "b"}}]});
    assert_eq!(
        sanitize(&input),
        json!({"calls": [{"token": "[REDACTED]", "n": 1}, {"headers": {"authorization": "[REDACTED]"}}]})
    );
}

#[test]
fn sanitize_cuts_long_strings() {
    let exact = "a".repeat(512);
    let long = "b".repeat(513);
    // Cut by characters, not bytes.
    let wide = "é".repeat(600);
    let out =
        sanitize(&json!({"exact": exact, "long": long, "wide": wide, "list": ["c".repeat(1000)]}));
    assert_eq!(out["exact"], json!("a".repeat(512)));
    assert_eq!(
        out["long"],
        json!(format!("{}...(truncated)", "b".repeat(512)))
    );
    assert_eq!(
        out["wide"],
        json!(format!("{}...(truncated)", "é".repeat(512)))
    );
    assert_eq!(
        out["list"][0],
        json!(format!("{}...(truncated)", "c".repeat(512)))
    );
    // A bare string is cut too.
    assert_eq!(
        sanitize(&json!("d".repeat(600))),
        json!(format!("{}...(truncated)", "d".repeat(512)))
    );
}

#[test]
fn sanitize_keeps_twenty_items_per_level() {
    let mut obj = serde_json::Map::new();
    for i in 0..25 {
        obj.insert(format!("k{i:02}"), json!(i));
    }
    let list: Vec<Value> = (0..23).map(Value::from).collect();
    let exactly: Vec<Value> = (0..20).map(Value::from).collect();
    let out = sanitize(&json!({"obj": obj, "list": list, "twenty": exactly}));

    let out_obj = out["obj"].as_object().unwrap();
    assert_eq!(out_obj.len(), 21);
    let keys: Vec<&str> = out_obj.keys().map(String::as_str).collect();
    let mut expected: Vec<String> = (0..20).map(|i| format!("k{i:02}")).collect();
    expected.push("__truncated__".into());
    assert_eq!(keys, expected);
    assert_eq!(out_obj["k19"], 19);
    assert_eq!(out_obj["__truncated__"], 5);

    let mut expected_list: Vec<Value> = (0..20).map(Value::from).collect();
    expected_list.push(json!("...(3 more)"));
    assert_eq!(out["list"], Value::Array(expected_list));
    assert_eq!(
        out["twenty"],
        Value::Array((0..20).map(Value::from).collect())
    );
}

#[test]
fn sanitize_stops_at_depth_four() {
    // details (1) → a (2) → b (3) → c (4): kept, scalars at any depth kept.
    let four = json!({"a": {"b": {"c": {"d": 1}}}});
    assert_eq!(sanitize(&four), four);
    // A fifth level of nesting is replaced.
    let five = json!({"a": {"b": {"c": {"d": {"e": 1}}}}});
    assert_eq!(
        sanitize(&five),
        json!({"a": {"b": {"c": {"d": "[MAX_DEPTH]"}}}})
    );
    let arrays = json!([[[[["x"]], "y"]]]);
    assert_eq!(sanitize(&arrays), json!([[[["[MAX_DEPTH]"], "y"]]]));
    // Through an envelope: the details object is level 1.
    let err = Error::execution("deep").with_detail("a", json!({"b": {"c": {"d": {}}}}));
    assert_eq!(
        err.to_envelope()["details"],
        json!({"a": {"b": {"c": {"d": "[MAX_DEPTH]"}}}})
    );
}

#[test]
fn sanitize_leaves_scalars_alone() {
    for v in [
        json!(null),
        json!(true),
        json!(1.5),
        json!(-3),
        json!("short"),
    ] {
        assert_eq!(sanitize(&v), v);
    }
}

#[derive(Debug)]
struct Io(&'static str);
impl std::fmt::Display for Io {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}
impl StdError for Io {}

#[test]
fn source_chains_are_walkable() {
    let inner = Error::validation("bad field").with_source(Io("disk on fire"));
    let outer = Error::execution("step failed").with_source(inner.clone());

    let mut chain = Vec::new();
    let mut cur: Option<&(dyn StdError + 'static)> = Some(&outer);
    while let Some(e) = cur {
        chain.push(e.to_string());
        cur = e.source();
    }
    assert_eq!(chain, ["step failed", "bad field", "disk on fire"]);

    let src = outer.source().unwrap().downcast_ref::<Error>().unwrap();
    assert_eq!(src, &inner);
    assert_eq!(src.kind(), ErrorKind::Validation);
    // Clones share the source.
    assert_eq!(outer.clone().source().unwrap().to_string(), "bad field");
}

#[test]
fn equality_ignores_source() {
    let a = Error::execution("x").with_detail("k", 1);
    let b = Error::execution("x")
        .with_detail("k", 1)
        .with_source(Io("y"));
    assert_eq!(a, b);
    assert_ne!(a, Error::execution("x").with_detail("k", 2));
    assert_ne!(a, Error::internal("x").with_detail("k", 1));
}

#[test]
fn debug_shows_kind_message_details() {
    let err = Error::timeout("slow").with_detail("timeout_ms", 10);
    let s = format!("{err:?}");
    assert_eq!(
        s,
        r#"Error { kind: Timeout, message: "slow", details: {"timeout_ms": Number(10)} }"#
    );
}
