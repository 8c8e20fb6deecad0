//! Actions from functions: `#[jido::action]` and `action_fn`.
#![cfg(feature = "macros")]

use jido::action::action_fn;
use jido::agent::SignalRoute;
use jido::prelude::*;
use jido::server::{Jido, JidoConfig};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
struct AddParams {
    /// The amount to add.
    amount: i64,
    #[serde(default)]
    note: Option<String>,
}

#[derive(Serialize)]
struct Total {
    total: i64,
}

/// Adds `amount` to the agent's `total`.
///
/// Missing totals count as zero.
#[jido::action]
async fn add_to_total(p: AddParams, ctx: &Context) -> jido::Result<Total> {
    let total = ctx
        .state()
        .and_then(|s| s.get("total"))
        .and_then(|v| v.as_i64())
        .unwrap_or(0);
    let _note = p.note;
    Ok(Total {
        total: total + p.amount,
    })
}

#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
pub struct Nested {
    inner: Inner,
}

#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
pub struct Inner {
    count: u32,
}

/// Echoes the count.
#[jido::action(name = "echo_count", struct_name = EchoAction, category = "test", version = "2.0.0", tags = ["a", "b"])]
pub async fn echo(p: Nested) -> jido::Result<Value> {
    Ok(json!({"count": p.inner.count}))
}

#[jido::action]
async fn undocumented(_p: Nested, _: &Context) -> jido::Result<()> {
    Ok(())
}

#[test]
fn the_attribute_names_and_describes_the_action() {
    assert_eq!(AddToTotal::NAME, "add_to_total");
    assert_eq!(
        AddToTotal::DESCRIPTION,
        "Adds `amount` to the agent's `total`.\n\nMissing totals count as zero."
    );
    assert_eq!(AddToTotal::CATEGORY, "");
    assert_eq!(AddToTotal::VERSION, "0.1.0");
    let meta = DynAction::from(AddToTotal).metadata();
    assert_eq!(meta.name, "add_to_total");
    assert_eq!(meta.description, AddToTotal::DESCRIPTION);

    assert_eq!(EchoAction::NAME, "echo_count");
    assert_eq!(EchoAction::DESCRIPTION, "Echoes the count.");
    assert_eq!(EchoAction::CATEGORY, "test");
    assert_eq!(EchoAction::VERSION, "2.0.0");
    assert_eq!(EchoAction::TAGS, ["a", "b"]);

    assert_eq!(Undocumented::NAME, "undocumented");
    assert_eq!(Undocumented::DESCRIPTION, "");
}

#[test]
fn the_schema_is_the_params_schema() {
    let schema = AddToTotal::params_schema();
    assert_eq!(schema, schemars::schema_for!(AddParams).to_value());
    assert_eq!(schema["required"], json!(["amount"]));
    assert_eq!(
        schema["properties"]["amount"]["description"],
        "The amount to add."
    );
    assert_eq!(DynAction::from(AddToTotal).params_schema(), schema);
}

#[tokio::test]
async fn the_function_stays_callable() {
    let out = add_to_total(
        AddParams {
            amount: 4,
            note: None,
        },
        &Context::new(),
    )
    .await
    .unwrap();
    assert_eq!(out.total, 4);
    let out = echo(Nested {
        inner: Inner { count: 3 },
    })
    .await
    .unwrap();
    assert_eq!(out, json!({"count": 3}));
}

#[tokio::test]
async fn wrong_params_are_a_validation_error_with_the_field_path() {
    let err = jido::exec::run(
        EchoAction,
        json!({"inner": {"count": -1}}),
        Context::new(),
        ExecOptions::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.detail("path").unwrap(), "inner.count");
    assert_eq!(err.detail("action").unwrap(), "echo_count");
    assert!(
        err.message()
            .starts_with("invalid parameters for action echo_count: inner.count: "),
        "{}",
        err.message()
    );

    let err = jido::exec::run(
        AddToTotal,
        json!({"note": "x"}),
        Context::new(),
        ExecOptions::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.detail("path").unwrap(), "amount");
    assert_eq!(
        err.message(),
        "invalid parameters for action add_to_total: amount: missing field `amount`"
    );

    let out = jido::exec::run(
        EchoAction,
        json!({"inner": {"count": 7}}),
        Context::new(),
        ExecOptions::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        out.output,
        json!({"count": 7}).as_object().cloned().unwrap()
    );
}

#[derive(Clone, Default)]
struct Ledger;

impl Agent for Ledger {
    const NAME: &'static str = "ledger";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![
            SignalRoute::action("ledger.add", AddToTotal),
            SignalRoute::action(
                "ledger.double",
                action_fn("double_total", |_: Value, ctx: Context| async move {
                    let total = ctx.state().and_then(|s| s["total"].as_i64()).unwrap_or(0);
                    Ok(json!({"total": total * 2}))
                }),
            ),
            SignalRoute::action(
                "ledger.reset",
                action_fn("reset_total", |_: Value, _ctx: Context| async move {
                    Ok(json!({"total": 0, "resets": 1}))
                }),
            ),
        ]
    }
}

#[tokio::test]
async fn macro_and_closure_actions_run_inside_an_agent_route() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(
            AgentState::new(Ledger, AgentOptions::new().id("ledger-action-fn")),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    let after = agent
        .call(Signal::new("ledger.add", json!({"amount": 5})))
        .await
        .unwrap();
    assert_eq!(after.state()["total"], 5);
    let after = agent
        .call(Signal::new("ledger.double", json!({})))
        .await
        .unwrap();
    assert_eq!(after.state()["total"], 10);
    let after = agent
        .call(Signal::new("ledger.add", json!({"amount": 1, "note": "x"})))
        .await
        .unwrap();
    assert_eq!(after.state()["total"], 11);
    let after = agent
        .call(Signal::new("ledger.reset", json!({})))
        .await
        .unwrap();
    assert_eq!(after.state()["total"], 0);
    assert_eq!(after.state()["resets"], 1);
    jido.shutdown().await;
}

#[tokio::test]
async fn wrong_params_inside_an_agent_are_an_error_directive_with_the_path() {
    let mut agent = AgentState::new(Ledger, AgentOptions::new().id("ledger-cmd"));
    let directives = agent
        .cmd((AddToTotal, json!({"amount": "five"})), ExecOptions::new())
        .await;
    assert_eq!(directives.len(), 1);
    let Directive::Error { error, .. } = &directives[0] else {
        panic!("expected an error directive, got {directives:?}");
    };
    // Jido's shape: "instruction failed" with the action's error as `reason`.
    assert_eq!(error.kind(), ErrorKind::Execution);
    let reason = error.detail("reason").unwrap();
    assert_eq!(reason["type"], "validation_error");
    assert_eq!(reason["details"]["path"], "amount");
    assert_eq!(reason["details"]["action"], "add_to_total");
    assert!(agent.state().get("total").is_none());
}

#[tokio::test]
async fn closures_keep_their_own_names() {
    let a = action_fn("first_fn", |_: Value, _: Context| async {
        Ok(json!({"a": 1}))
    });
    let b = action_fn("second_fn", |_: Value, _: Context| async {
        Ok(json!({"b": 2}))
    });
    let a2 = action_fn("first_fn".to_owned(), |_: Value, _: Context| async {
        Ok(json!({}))
    });
    assert_eq!(a.name(), "first_fn");
    assert_eq!(b.name(), "second_fn");
    assert_eq!(a2.name(), "first_fn");
    assert!(!a.ptr_eq(&a2));
    assert_eq!(format!("{a:?}"), "DynAction(\"first_fn\")");

    // The name reaches the run's context, as for a typed action.
    let who = action_fn("who_am_i", |_: Value, ctx: Context| async move {
        Ok(json!({"me": ctx.action().map(|a| a.name)}))
    });
    let out = jido::exec::run(who, json!({}), Context::new(), ExecOptions::new())
        .await
        .unwrap();
    assert_eq!(out.output["me"], "who_am_i");
}

#[tokio::test]
async fn closure_params_are_validated_with_the_field_path() {
    let count = action_fn("count_fn", |p: Nested, _: Context| async move {
        Ok(json!({"count": p.inner.count}))
    });
    assert_eq!(
        count.params_schema(),
        schemars::schema_for!(Nested).to_value()
    );
    let err = jido::exec::run(
        count.clone(),
        json!({"inner": {}}),
        Context::new(),
        ExecOptions::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.detail("path").unwrap(), "inner.count");
    assert_eq!(err.detail("action").unwrap(), "count_fn");
    assert_eq!(
        err.message(),
        "invalid parameters for action count_fn: inner.count: missing field `count`"
    );
}

#[tokio::test]
async fn an_invalid_closure_name_is_a_configuration_error_when_it_runs() {
    let bad = action_fn("not valid", |_: Value, _: Context| async { Ok(json!({})) });
    assert_eq!(bad.name(), "not valid");
    let err = jido::exec::run(bad.clone(), json!({}), Context::new(), ExecOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(
        err.message(),
        "invalid action name \"not valid\": must match ^[a-zA-Z][a-zA-Z0-9_]*$"
    );

    let mut agent = AgentState::new(Ledger, AgentOptions::new().id("ledger-bad-name"));
    let directives = agent.cmd(bad, ExecOptions::new()).await;
    let [Directive::Error { error, .. }] = directives.as_slice() else {
        panic!("expected one error directive, got {directives:?}");
    };
    assert_eq!(error.kind(), ErrorKind::Execution);
    assert_eq!(
        error.detail("reason").unwrap()["type"],
        ErrorKind::Configuration.as_str()
    );
}

#[tokio::test]
async fn a_closure_output_that_is_not_an_object_is_an_execution_error() {
    let list = action_fn("list_fn", |_: Value, _: Context| async { Ok(vec![1, 2]) });
    let err = jido::exec::run(list, json!({}), Context::new(), ExecOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Execution);
    assert_eq!(
        err.message(),
        "output of action list_fn must serialise to a JSON object, got an array"
    );
}
