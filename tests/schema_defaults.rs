//! State schema defaults come from the schema's `Default` only: a missing
//! field takes the value a new agent starts with, with or without
//! `#[serde(default)]`; a `Default` that cannot be the defaults is a
//! configuration error when the agent starts.

use jido::effect::StateOp;
use jido::prelude::*;
use jido::server::{Jido, JidoConfig};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// No `#[serde(default)]`: the defaults come from the `Default` impl.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
struct Retry {
    attempts: u32,
    label: String,
    /// `#[serde(default)]` alone would give `0`, the field type's default.
    #[serde(default)]
    backoff_ms: u64,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 3,
            label: "retry".into(),
            backoff_ms: 250,
        }
    }
}

struct RetryAgent;
impl Agent for RetryAgent {
    const NAME: &'static str = "retry_agent";
    type Schema = Retry;
}

#[test]
fn a_new_agent_starts_with_the_default_value() {
    let agent = AgentState::new(RetryAgent, AgentOptions::new().id("r0"));
    assert_eq!(agent.state()["attempts"], 3);
    assert_eq!(agent.state()["backoff_ms"], 250);
    assert!(agent.check_definition().is_ok());
    assert_eq!(agent.state_as::<Retry>().unwrap(), Retry::default());
}

#[test]
fn a_deleted_field_validates_to_its_default_value() {
    let mut agent = AgentState::new(RetryAgent, AgentOptions::new().id("r1"));
    agent.state_mut().insert("attempts", 5);
    agent.apply_state_op(StateOp::DeleteKeys(vec![
        "label".into(),
        "backoff_ms".into(),
    ]));
    assert!(agent.state().get("label").is_none());

    // Typed reads see the defaults too.
    let typed: Retry = agent.state_as().unwrap();
    assert_eq!(
        typed,
        Retry {
            attempts: 5,
            label: "retry".into(),
            backoff_ms: 250,
        }
    );

    agent.validate().unwrap();
    assert_eq!(agent.state()["attempts"], 5);
    assert_eq!(agent.state()["label"], "retry");
    // The schema's Default, not u64's.
    assert_eq!(agent.state()["backoff_ms"], 250);
}

#[test]
fn a_replaced_state_validates_strictly_with_the_defaults() {
    let mut agent = AgentState::new(RetryAgent, AgentOptions::new().id("r2"));
    agent.replace_state(
        json!({"attempts": 1, "extra": true})
            .as_object()
            .cloned()
            .unwrap(),
    );
    agent.validate_strict().unwrap();
    assert_eq!(
        serde_json::to_value(agent.state()).unwrap(),
        json!({"attempts": 1, "label": "retry", "backoff_ms": 250})
    );
}

#[test]
fn an_old_checkpoint_missing_a_field_restores_and_validates() {
    let saved = json!({
        "version": "0.1.0",
        "agent": "retry_agent",
        "id": "r3",
        "state": {"attempts": 9},
    });
    let mut agent = AgentState::restore(RetryAgent, &saved).unwrap();
    agent.state_mut().remove("label");
    agent.validate().unwrap();
    assert_eq!(agent.state()["attempts"], 9);
    assert_eq!(agent.state()["label"], "retry");
}

#[test]
fn present_but_wrong_values_still_fail_with_their_path() {
    let mut agent = AgentState::new(RetryAgent, AgentOptions::new().id("r4"));
    // An explicit null is a value, not a missing field.
    agent.state_mut().insert("attempts", json!(null));
    let err = agent.validate().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.detail("path").unwrap(), "attempts");
    assert_eq!(
        err.message(),
        "state validation failed: attempts: invalid type: null, expected u32"
    );
    assert_eq!(agent.state()["attempts"], json!(null));
}

/// A field skipped when serialising but required when decoding: its
/// `Default` cannot be the state's defaults.
#[derive(Default, Serialize, Deserialize, schemars::JsonSchema)]
struct Vault {
    name: String,
    #[serde(skip_serializing)]
    #[allow(dead_code)] // only its (de)serialisation matters
    token: String,
}

struct VaultAgent;
impl Agent for VaultAgent {
    const NAME: &'static str = "vault";
    type Schema = Vault;
}

const VAULT_ERROR: &str = "invalid state schema of agent vault: its Default value does not decode back: token: missing field `token`";

#[test]
fn a_default_that_does_not_decode_back_is_a_configuration_error() {
    let mut agent = AgentState::new(VaultAgent, AgentOptions::new().id("v1"));
    let err = agent.check_definition().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), VAULT_ERROR);
    assert_eq!(err.detail("agent").unwrap(), "vault");
    assert_eq!(err.detail("path").unwrap(), "token");
    // Validation reports the same error instead of a misleading "missing field".
    let err = agent.validate().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), VAULT_ERROR);
}

struct NumberAgent;
impl Agent for NumberAgent {
    const NAME: &'static str = "number";
    type Schema = i64;
}

#[test]
fn a_default_that_is_not_an_object_is_a_configuration_error() {
    let agent = AgentState::new(NumberAgent, AgentOptions::new().id("n1"));
    let err = agent.check_definition().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(
        err.message(),
        "invalid state schema of agent number: its Default value must serialise to a JSON object, got a number"
    );
}

#[test]
fn no_schema_is_fine() {
    struct Plain;
    impl Agent for Plain {
        const NAME: &'static str = "plain";
        type Schema = ();
    }
    let mut agent = AgentState::new(Plain, AgentOptions::new().id("p1"));
    assert!(agent.check_definition().is_ok());
    assert!(agent.validate().is_ok());
}

#[tokio::test]
async fn the_runtime_refuses_to_start_an_agent_with_an_unusable_schema() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let err = jido
        .start_agent(
            AgentState::new(VaultAgent, AgentOptions::new().id("vault-start")),
            ServerOptions::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), VAULT_ERROR);
    assert!(jido.whereis("vault-start").is_none());
    assert!(jido.agents().is_empty());
    assert!(jido.supervisor_cell().get_children().is_empty());

    let ok = jido
        .start_agent(
            AgentState::new(RetryAgent, AgentOptions::new().id("retry-start")),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(ok.state().await.unwrap().state()["attempts"], 3);
    jido.shutdown().await;
}
