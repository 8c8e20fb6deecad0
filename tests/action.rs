//! Actions: names, param decoding with paths, garde rules, JSON Schema,
//! output checks.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use jido::action::{ActionMetadata, Compensation, validate_name};
use jido::exec::ExecOptions;
use jido::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

fn once() -> ExecOptions {
    ExecOptions::new().max_retries(0)
}

// ---------------------------------------------------------------- names

#[derive(Clone, Deserialize, JsonSchema)]
struct Empty {}

macro_rules! named {
    ($ty:ident, $name:literal) => {
        struct $ty(Arc<AtomicUsize>);
        impl Action for $ty {
            type Params = Empty;
            type Output = ();
            const NAME: &'static str = $name;
            async fn run(&self, _: Empty, _: &Context) -> jido::Result<()> {
                self.0.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        }
    };
}

named!(StartsWithDigit, "2fast");
named!(HasDash, "send-mail");
named!(EmptyName, "");
named!(Underscore, "_private");
named!(HasSpace, "send mail");
named!(NonAscii, "café");
named!(Good, "Send_mail2");

#[test]
fn validate_name_follows_the_pattern() {
    for ok in ["a", "Z", "charge_card", "Send_mail2", "a_", "x1_2_3"] {
        assert!(validate_name(ok).is_ok(), "{ok} should be valid");
    }
    for bad in ["", "_a", "1a", "a-b", "a b", "a.b", "café", "a\n"] {
        let err = validate_name(bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Configuration, "{bad:?}");
        assert_eq!(
            err.message(),
            format!("invalid action name {bad:?}: must match ^[a-zA-Z][a-zA-Z0-9_]*$")
        );
        assert_eq!(err.detail("name"), Some(&json!(bad)));
        assert!(!err.retryable());
    }
}

#[tokio::test]
async fn invalid_name_is_a_configuration_error_at_run() {
    let exec = Exec::new();
    let runs = Arc::new(AtomicUsize::new(0));
    let cases: Vec<(DynAction, &str)> = vec![
        (StartsWithDigit(runs.clone()).into(), "2fast"),
        (HasDash(runs.clone()).into(), "send-mail"),
        (EmptyName(runs.clone()).into(), ""),
        (Underscore(runs.clone()).into(), "_private"),
        (HasSpace(runs.clone()).into(), "send mail"),
        (NonAscii(runs.clone()).into(), "café"),
    ];
    for (action, name) in cases {
        let outcome = exec.execute(Instruction::new(action), Context::new()).await;
        let err = outcome.result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Configuration);
        assert_eq!(
            err.message(),
            format!("invalid action name {name:?}: must match ^[a-zA-Z][a-zA-Z0-9_]*$")
        );
        assert_eq!(outcome.attempts, 0);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "no invalid action ran");

    let out = exec
        .run(Good(runs.clone()), json!({}), Context::new(), once())
        .await
        .unwrap();
    assert!(out.output.is_empty());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

// ---------------------------------------------------------------- params

#[derive(Clone, Debug, Deserialize, JsonSchema)]
struct Item {
    #[allow(dead_code)]
    sku: String,
    qty: u32,
}

#[derive(Clone, Debug, Deserialize, JsonSchema)]
struct OrderParams {
    customer: String,
    items: Vec<Item>,
    #[serde(default)]
    note: Option<String>,
}

struct PlaceOrder(Arc<AtomicUsize>);

impl Action for PlaceOrder {
    type Params = OrderParams;
    type Output = Value;
    const NAME: &'static str = "place_order";
    const DESCRIPTION: &'static str = "Places an order.";
    const CATEGORY: &'static str = "shop";
    const TAGS: &'static [&'static str] = &["orders", "write"];
    const VERSION: &'static str = "2.1.0";

    async fn run(&self, p: OrderParams, _: &Context) -> jido::Result<Value> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let total: u32 = p.items.iter().map(|i| i.qty).sum();
        Ok(json!({"customer": p.customer, "total": total, "note": p.note}))
    }
}

async fn order(params: Value) -> (jido::Result<jido::exec::ExecOutput>, usize) {
    let runs = Arc::new(AtomicUsize::new(0));
    let res = Exec::new()
        .run(PlaceOrder(runs.clone()), params, Context::new(), once())
        .await;
    (res, runs.load(Ordering::SeqCst))
}

#[tokio::test]
async fn params_decode_and_unknown_fields_pass() {
    let (res, runs) = order(json!({
        "customer": "ann",
        "items": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 3, "gift": true}],
        "coupon": "XMAS"
    }))
    .await;
    let out = res.unwrap();
    assert_eq!(
        Value::Object(out.output),
        json!({"customer": "ann", "total": 5, "note": null})
    );
    assert_eq!(runs, 1);
}

#[tokio::test]
async fn wrong_type_reports_the_field_path() {
    let (res, runs) = order(json!({"customer": 7, "items": []})).await;
    let err = res.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(
        err.message(),
        "invalid parameters for action place_order: customer: invalid type: integer `7`, expected a string"
    );
    assert_eq!(err.detail("path"), Some(&json!("customer")));
    assert_eq!(err.detail("action"), Some(&json!("place_order")));
    assert_eq!(
        err.detail("reason"),
        Some(&json!("invalid type: integer `7`, expected a string"))
    );
    assert!(!err.retryable());
    assert_eq!(runs, 0);
}

#[tokio::test]
async fn nested_wrong_type_reports_the_nested_path() {
    let (res, runs) = order(json!({
        "customer": "ann",
        "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 1}, {"sku": "c", "qty": "two"}]
    }))
    .await;
    let err = res.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.detail("path"), Some(&json!("items[2].qty")));
    assert_eq!(
        err.message(),
        "invalid parameters for action place_order: items[2].qty: invalid type: string \"two\", expected u32"
    );
    assert_eq!(runs, 0);
}

#[tokio::test]
async fn missing_fields_name_the_missing_field() {
    let (res, _) = order(json!({"items": []})).await;
    let err = res.unwrap_err();
    assert_eq!(err.detail("path"), Some(&json!("customer")));
    assert_eq!(
        err.message(),
        "invalid parameters for action place_order: customer: missing field `customer`"
    );

    let (res, runs) =
        order(json!({"customer": "ann", "items": [{"sku": "a", "qty": 1}, {"sku": "b"}]})).await;
    let err = res.unwrap_err();
    assert_eq!(err.detail("path"), Some(&json!("items[1].qty")));
    assert_eq!(
        err.message(),
        "invalid parameters for action place_order: items[1].qty: missing field `qty`"
    );
    assert_eq!(runs, 0);
}

#[tokio::test]
async fn non_object_params_are_refused_before_decoding() {
    for (params, got) in [
        (json!([1, 2]), "an array"),
        (json!("x"), "a string"),
        (json!(3), "a number"),
        (json!(true), "a boolean"),
    ] {
        let (res, runs) = order(params).await;
        let err = res.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation);
        assert_eq!(
            err.message(),
            format!("invalid params type: expected a JSON object, got {got}")
        );
        assert_eq!(err.detail("action"), Some(&json!("place_order")));
        assert_eq!(runs, 0);
    }
}

#[tokio::test]
async fn null_params_read_as_empty_object() {
    #[derive(Clone, Deserialize, JsonSchema)]
    struct Defaults {
        #[serde(default = "five")]
        n: i64,
    }
    fn five() -> i64 {
        5
    }
    struct Echo;
    impl Action for Echo {
        type Params = Defaults;
        type Output = Value;
        const NAME: &'static str = "echo";
        async fn run(&self, p: Defaults, _: &Context) -> jido::Result<Value> {
            Ok(json!({"n": p.n}))
        }
    }
    let out = Exec::new()
        .run(Echo, Value::Null, Context::new(), once())
        .await
        .unwrap();
    assert_eq!(Value::Object(out.output), json!({"n": 5}));
}

#[tokio::test]
async fn unknown_fields_are_named_when_denied() {
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Strict {
        #[allow(dead_code)]
        a: i64,
    }
    struct Picky;
    impl Action for Picky {
        type Params = Strict;
        type Output = ();
        const NAME: &'static str = "picky";
        async fn run(&self, _: Strict, _: &Context) -> jido::Result<()> {
            Ok(())
        }
    }
    let err = Exec::new()
        .run(Picky, json!({"a": 1, "b": 2}), Context::new(), once())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.detail("path"), Some(&json!("b")));
    assert_eq!(
        err.message(),
        "invalid parameters for action picky: b: unknown field `b`, expected `a`"
    );
}

#[tokio::test]
async fn enum_and_root_level_decode_errors() {
    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    #[serde(tag = "kind")]
    enum Tagged {
        A,
    }
    struct Tag;
    impl Action for Tag {
        type Params = Tagged;
        type Output = ();
        const NAME: &'static str = "tag";
        async fn run(&self, _: Tagged, _: &Context) -> jido::Result<()> {
            Ok(())
        }
    }
    let err = Exec::new()
        .run(Tag, json!({"kind": "B"}), Context::new(), once())
        .await
        .unwrap_err();
    assert_eq!(err.detail("path"), Some(&json!("kind")));
    assert_eq!(
        err.message(),
        "invalid parameters for action tag: kind: unknown variant `B`, expected `A`"
    );
    let err = Exec::new()
        .run(Tag, json!({}), Context::new(), once())
        .await
        .unwrap_err();
    assert_eq!(err.detail("path"), Some(&json!("kind")));
    assert_eq!(
        err.message(),
        "invalid parameters for action tag: kind: missing field `kind`"
    );

    #[derive(Clone, Debug, Deserialize, JsonSchema)]
    struct Unit;
    struct U;
    impl Action for U {
        type Params = Unit;
        type Output = ();
        const NAME: &'static str = "u";
        async fn run(&self, _: Unit, _: &Context) -> jido::Result<()> {
            Ok(())
        }
    }
    let err = Exec::new()
        .run(U, json!({}), Context::new(), once())
        .await
        .unwrap_err();
    assert_eq!(err.detail("path"), Some(&json!("")));
    assert_eq!(
        err.message(),
        "invalid parameters for action u: invalid type: map, expected unit struct Unit"
    );
}

// ---------------------------------------------------------------- metadata

#[tokio::test]
async fn metadata_is_static_and_injected_into_the_context() {
    let expected = ActionMetadata {
        name: "place_order",
        description: "Places an order.",
        category: "shop",
        tags: &["orders", "write"],
        version: "2.1.0",
        compensation: Compensation::DISABLED,
    };
    assert_eq!(PlaceOrder::metadata(), expected);
    let dynamic = DynAction::new(PlaceOrder(Arc::default()));
    assert_eq!(dynamic.metadata(), expected);
    assert_eq!(dynamic.name(), "place_order");
    assert_eq!(format!("{dynamic:?}"), r#"DynAction("place_order")"#);
    assert!(dynamic.ptr_eq(&dynamic.clone()));
    assert!(!dynamic.ptr_eq(&DynAction::new(PlaceOrder(Arc::default()))));
    assert_eq!(
        serde_json::to_value(expected).unwrap(),
        json!({
            "name": "place_order",
            "description": "Places an order.",
            "category": "shop",
            "tags": ["orders", "write"],
            "version": "2.1.0",
            "compensation": {"enabled": false, "timeout": 5000}
        })
    );

    struct Inspect;
    impl Action for Inspect {
        type Params = Empty;
        type Output = Value;
        const NAME: &'static str = "inspect";
        const VERSION: &'static str = "9.9.9";
        const COMPENSATION: Compensation = Compensation::with_timeout(Duration::from_secs(2));
        async fn run(&self, _: Empty, ctx: &Context) -> jido::Result<Value> {
            let meta = ctx.action().expect("metadata injected");
            Ok(json!({
                "name": meta.name,
                "version": meta.version,
                "comp_ms": meta.compensation.timeout.as_millis() as u64,
                "tenant": ctx.get("tenant"),
            }))
        }
    }
    let ctx = Context::new().with("tenant", "acme");
    assert!(ctx.action().is_none());
    let out = Exec::new()
        .run(Inspect, json!({}), ctx.clone(), once())
        .await
        .unwrap();
    assert_eq!(
        Value::Object(out.output),
        json!({"name": "inspect", "version": "9.9.9", "comp_ms": 2000, "tenant": "acme"})
    );
    // The caller's context is untouched.
    assert!(ctx.action().is_none());
}

#[test]
fn compensation_constants() {
    assert_eq!(
        Compensation::DISABLED,
        Compensation {
            enabled: false,
            timeout: Duration::from_secs(5)
        }
    );
    assert_eq!(Compensation::default(), Compensation::DISABLED);
    assert_eq!(
        Compensation::ENABLED,
        Compensation {
            enabled: true,
            timeout: Duration::from_secs(5)
        }
    );
    assert_eq!(
        Compensation::with_timeout(Duration::from_millis(10)),
        Compensation {
            enabled: true,
            timeout: Duration::from_millis(10)
        }
    );
}

// ---------------------------------------------------------------- schema

#[test]
fn params_schema_describes_params() {
    let schema = PlaceOrder::params_schema();
    assert_eq!(
        schema,
        DynAction::new(PlaceOrder(Arc::default())).params_schema()
    );
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["title"], "OrderParams");
    assert_eq!(schema["required"], json!(["customer", "items"]));
    assert_eq!(schema["properties"]["customer"], json!({"type": "string"}));
    assert_eq!(
        schema["properties"]["items"],
        json!({"type": "array", "items": {"$ref": "#/$defs/Item"}})
    );
    assert_eq!(
        schema["$defs"]["Item"]["properties"]["qty"],
        json!({"type": "integer", "format": "uint32", "minimum": 0})
    );
}

// ---------------------------------------------------------------- garde

#[cfg(feature = "garde")]
mod garde_rules {
    use super::*;
    use jido::action::validate_garde;

    #[derive(Clone, Debug, Deserialize, JsonSchema, garde::Validate)]
    pub struct Room {
        #[garde(range(min = 1, max = 4))]
        pub beds: u8,
    }

    #[derive(Clone, Debug, Deserialize, JsonSchema, garde::Validate)]
    pub struct Booking {
        #[garde(length(min = 2, max = 20))]
        pub name: String,
        #[garde(range(min = 1, max = 10))]
        pub guests: u32,
        #[garde(length(min = 1), dive)]
        pub rooms: Vec<Room>,
    }

    pub struct Book(pub Arc<AtomicUsize>);

    impl Action for Book {
        type Params = Booking;
        type Output = Value;
        const NAME: &'static str = "book";

        fn validate_params(&self, p: &Booking) -> jido::Result<()> {
            validate_garde(p)
        }

        async fn run(&self, p: Booking, _: &Context) -> jido::Result<Value> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"rooms": p.rooms.len()}))
        }
    }

    async fn book(params: Value) -> (jido::Result<jido::exec::ExecOutput>, usize) {
        let runs = Arc::new(AtomicUsize::new(0));
        let res = Exec::new()
            .run(Book(runs.clone()), params, Context::new(), once())
            .await;
        (res, runs.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn valid_params_pass() {
        let (res, runs) = book(json!({"name": "ann", "guests": 2, "rooms": [{"beds": 2}]})).await;
        assert_eq!(Value::Object(res.unwrap().output), json!({"rooms": 1}));
        assert_eq!(runs, 1);
    }

    #[tokio::test]
    async fn a_broken_rule_is_a_validation_error_with_a_path() {
        let (res, runs) = book(json!({"name": "ann", "guests": 11, "rooms": [{"beds": 2}]})).await;
        let err = res.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation);
        assert_eq!(err.message(), "invalid parameters: guests: greater than 10");
        assert_eq!(err.detail("path"), Some(&json!("guests")));
        assert_eq!(err.detail("action"), Some(&json!("book")));
        assert_eq!(
            err.detail("errors"),
            Some(&json!([{"path": "guests", "message": "greater than 10"}]))
        );
        assert!(!err.retryable());
        assert_eq!(runs, 0);
    }

    #[tokio::test]
    async fn nested_rules_report_nested_paths_and_every_failure() {
        let (res, runs) = book(json!({
            "name": "a",
            "guests": 3,
            "rooms": [{"beds": 1}, {"beds": 2}, {"beds": 9}]
        }))
        .await;
        let err = res.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation);
        assert_eq!(
            err.detail("errors"),
            Some(&json!([
                {"path": "name", "message": "length is lower than 2"},
                {"path": "rooms[2].beds", "message": "greater than 4"}
            ]))
        );
        assert_eq!(err.detail("path"), Some(&json!("name")));
        assert_eq!(
            err.message(),
            "invalid parameters: name: length is lower than 2"
        );
        assert_eq!(runs, 0);

        let err = validate_garde(&Booking {
            name: "bob".into(),
            guests: 1,
            rooms: vec![Room { beds: 1 }, Room { beds: 0 }],
        })
        .unwrap_err();
        assert_eq!(err.detail("path"), Some(&json!("rooms[1].beds")));
        assert_eq!(
            err.message(),
            "invalid parameters: rooms[1].beds: lower than 1"
        );
        assert!(
            validate_garde(&Booking {
                name: "bob".into(),
                guests: 1,
                rooms: vec![Room { beds: 1 }],
            })
            .is_ok()
        );
    }

    /// schemars 1 reads `#[garde(...)]` attributes: the rules are written
    /// once and show up in the schema given to LLMs.
    #[test]
    fn schema_reflects_garde_rules() {
        let schema = Book::params_schema();
        assert_eq!(
            schema["properties"]["name"],
            json!({"type": "string", "minLength": 2, "maxLength": 20})
        );
        assert_eq!(
            schema["properties"]["guests"],
            json!({"type": "integer", "format": "uint32", "minimum": 1, "maximum": 10})
        );
        assert_eq!(
            schema["properties"]["rooms"],
            json!({"type": "array", "items": {"$ref": "#/$defs/Room"}, "minItems": 1})
        );
        assert_eq!(
            schema["$defs"]["Room"]["properties"]["beds"],
            json!({"type": "integer", "format": "uint8", "minimum": 1, "maximum": 4})
        );
    }
}

// ---------------------------------------------------------------- output

#[derive(Clone, Deserialize, JsonSchema)]
struct Shape {
    kind: String,
}

#[derive(Serialize)]
#[serde(untagged)]
enum AnyOut {
    Number(i64),
    List(Vec<i64>),
    Text(String),
    Unit(()),
    Map { total: i64 },
}

struct Emit(Arc<AtomicUsize>);

impl Action for Emit {
    type Params = Shape;
    type Output = AnyOut;
    const NAME: &'static str = "emit";

    async fn run(&self, p: Shape, _: &Context) -> jido::Result<AnyOut> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(match p.kind.as_str() {
            "number" => AnyOut::Number(1),
            "list" => AnyOut::List(vec![1]),
            "text" => AnyOut::Text("x".into()),
            "unit" => AnyOut::Unit(()),
            "negative" => AnyOut::Map { total: -1 },
            _ => AnyOut::Map { total: 3 },
        })
    }

    fn validate_output(&self, out: &AnyOut) -> jido::Result<()> {
        match out {
            AnyOut::Map { total } if *total < 0 => {
                Err(Error::validation("total must not be negative").with_detail("path", "total"))
            }
            _ => Ok(()),
        }
    }
}

async fn emit(kind: &str) -> (jido::exec::Outcome, usize) {
    let runs = Arc::new(AtomicUsize::new(0));
    let outcome = Exec::new()
        .execute(
            Instruction::new(Emit(runs.clone())).with_params(json!({ "kind": kind })),
            Context::new(),
        )
        .await;
    (outcome, runs.load(Ordering::SeqCst))
}

#[tokio::test]
async fn output_must_be_an_object() {
    let (ok, _) = emit("map").await;
    assert_eq!(Value::Object(ok.result.unwrap()), json!({"total": 3}));
    let (unit, _) = emit("unit").await;
    assert_eq!(unit.result.unwrap(), serde_json::Map::new());

    for (kind, got) in [
        ("number", "a number"),
        ("list", "an array"),
        ("text", "a string"),
    ] {
        let (outcome, runs) = emit(kind).await;
        let err = outcome.result.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Execution);
        assert_eq!(
            err.message(),
            format!("output of action emit must serialise to a JSON object, got {got}")
        );
        assert_eq!(err.detail("action"), Some(&json!("emit")));
        // Running again cannot change the output's type: not retried.
        assert!(!err.retryable());
        assert_eq!(outcome.attempts, 1);
        assert_eq!(runs, 1);
    }
}

#[tokio::test]
async fn output_validation_failure_is_a_validation_error() {
    let (outcome, runs) = emit("negative").await;
    let err = outcome.result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(
        err.message(),
        "invalid output of action emit: total must not be negative"
    );
    assert_eq!(err.detail("path"), Some(&json!("total")));
    assert_eq!(err.detail("action"), Some(&json!("emit")));
    assert_eq!(outcome.attempts, 1, "validation errors are not retried");
    assert_eq!(runs, 1);
}

#[tokio::test]
async fn unit_output_and_typed_output_structs() {
    #[derive(Serialize)]
    struct Sum {
        sum: i64,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    }
    #[derive(Clone, Deserialize, JsonSchema)]
    struct Pair {
        a: i64,
        b: i64,
    }
    struct Add;
    impl Action for Add {
        type Params = Pair;
        type Output = Sum;
        const NAME: &'static str = "add";
        async fn run(&self, p: Pair, _: &Context) -> jido::Result<Sum> {
            Ok(Sum {
                sum: p.a + p.b,
                note: None,
            })
        }
    }
    let out = jido::exec::run(
        Add,
        json!({"a": 2, "b": 40}),
        Context::new(),
        ExecOptions::new(),
    )
    .await
    .unwrap();
    assert_eq!(Value::Object(out.output), json!({"sum": 42}));
    assert!(out.effects.is_empty());
}
