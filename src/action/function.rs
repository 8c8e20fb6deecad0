//! Actions from closures: [`action_fn`], and [`json_action`] for actions
//! known only at run time (a remote tool described by a name and a JSON
//! Schema).

use std::collections::HashSet;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::dynamic::{Erased, Prepared, decode_params, output_to_map};
use super::{ActionMetadata, Compensation, DynAction};
use crate::action_metadata::HasMetadata;
use crate::context::Context;
use crate::error::{Error, Result, json_type_name};

/// An action made of a closure, with its own name.
///
/// `f` receives the decoded params and (a clone of) the run's [`Context`]
/// (owned, so that `async move` blocks can keep it); effects pushed on it go
/// to the run as usual. Params are decoded exactly as for an [`Action`]
/// (a bad field is a validation error naming it in its `path` detail) and
/// their JSON Schema is `P`'s; the output must serialise to a JSON object
/// (or `null`).
///
/// Each call makes a distinct action keeping its own `name`, so two
/// closures in one agent have two names. Names are interned: each distinct
/// name is allocated once for the life of the process (names are meant to
/// be a fixed set, as the `&'static str` names of typed actions).
///
/// The name is checked like every action name
/// (`^[a-zA-Z][a-zA-Z0-9_]*$`, [`validate_name`](super::validate_name)) by
/// Exec when the action runs: an invalid name never panics; running the
/// action fails with a configuration error (`invalid action name ...`),
/// as for a typed action with a bad [`NAME`](super::Action::NAME).
///
/// Meant for tests and small glue; an action with a description, retries
/// rules or compensation is an [`Action`] (or `#[jido::action]`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::prelude::*;
/// use jido::action::action_fn;
/// use serde_json::{Value, json};
///
/// #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
/// struct N { n: i64 }
///
/// let double = action_fn("double", |p: N, _ctx: Context| async move {
///     Ok(json!({"n": p.n * 2}))
/// });
/// let negate = action_fn("negate", |p: N, _ctx: Context| async move {
///     Ok(json!({"n": -p.n}))
/// });
/// assert_eq!(double.name(), "double");
/// assert_eq!(negate.name(), "negate");
///
/// let out = jido::exec::run(double, json!({"n": 4}), Context::new(), ExecOptions::new()).await?;
/// assert_eq!(out.output["n"], 8);
///
/// let err = jido::exec::run(negate, json!({"n": "x"}), Context::new(), ExecOptions::new())
///     .await
///     .unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Validation);
/// assert_eq!(err.detail("path").unwrap(), "n");
///
/// let bad = action_fn("2bad", |_: N, _: Context| async { Ok(Value::Null) });
/// let err = jido::exec::run(bad, json!({"n": 1}), Context::new(), ExecOptions::new())
///     .await
///     .unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Configuration);
/// # Ok(()) }
/// ```
///
/// [`Action`]: super::Action
pub fn action_fn<P, O, F, Fut>(name: impl Into<String>, f: F) -> DynAction
where
    P: DeserializeOwned + JsonSchema + Clone + Send + Sync + 'static,
    O: Serialize + Send + 'static,
    F: Fn(P, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O>> + Send + 'static,
{
    let name = intern(name.into());
    DynAction::from_erased(Arc::new(FnAction {
        f,
        meta: ActionMetadata {
            name,
            description: "",
            category: "",
            tags: &[],
            version: "0.1.0",
            compensation: Compensation::DISABLED,
        },
        _types: PhantomData,
    }))
}

/// What a [`json_action`] runs: the params object, the run's context.
pub type JsonActionFn = dyn Fn(Map<String, Value>, Context) -> BoxFuture<'static, Result<Map<String, Value>>>
    + Send
    + Sync;

/// An action known only at run time: a name, the JSON Schema of its params
/// and a function from a params object to an output object. What a tool
/// served by another process is (an MCP server's tool, see
/// `jido::ai::mcp`): it runs through Exec like any action (timeouts,
/// retries, telemetry, a panic caught).
///
/// `name` is interned as in [`action_fn`] and checked when the action
/// runs; `schema` is returned as is by
/// [`DynAction::params_schema`]. Params must be a JSON object (`null`
/// reads as `{}`): anything else is a validation error "invalid parameters
/// for action NAME: expected a JSON object" (details `action`, `path`
/// `""`, `reason`); the schema is not checked here (the function or the
/// remote side does). No compensation.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::prelude::*;
/// use jido::action::json_action;
/// use serde_json::json;
///
/// let shout = json_action(
///     "shout",
///     json!({"type": "object", "properties": {"text": {"type": "string"}}}),
///     |params, _ctx| Box::pin(async move {
///         let text = params.get("text").and_then(|t| t.as_str()).unwrap_or_default();
///         let mut out = serde_json::Map::new();
///         out.insert("text".into(), json!(text.to_uppercase()));
///         Ok(out)
///     }),
/// );
/// assert_eq!(shout.params_schema()["properties"]["text"]["type"], "string");
/// let out = jido::exec::run(shout.clone(), json!({"text": "hi"}), Context::new(), ExecOptions::new()).await?;
/// assert_eq!(out.output["text"], "HI");
/// let err = jido::exec::run(shout, json!([1]), Context::new(), ExecOptions::new()).await.unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Validation);
/// # Ok(()) }
/// ```
pub fn json_action<F>(name: impl Into<String>, schema: Value, run: F) -> DynAction
where
    F: Fn(Map<String, Value>, Context) -> BoxFuture<'static, Result<Map<String, Value>>>
        + Send
        + Sync
        + 'static,
{
    let name = intern(name.into());
    DynAction::from_erased(Arc::new(JsonAction {
        run: Box::new(run),
        schema,
        meta: ActionMetadata {
            name,
            description: "",
            category: "",
            tags: &[],
            version: "0.1.0",
            compensation: Compensation::DISABLED,
        },
    }))
}

struct JsonAction {
    run: Box<JsonActionFn>,
    schema: Value,
    meta: ActionMetadata,
}

impl HasMetadata for JsonAction {
    fn metadata(&self) -> &ActionMetadata {
        &self.meta
    }
}

impl Erased for JsonAction {
    fn params_schema(&self) -> Value {
        self.schema.clone()
    }

    fn prepare(&self, params: Value) -> Result<Prepared> {
        let params = match params {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                let reason = format!("expected a JSON object, got {}", json_type_name(&other));
                return Err(Error::validation(format!(
                    "invalid parameters for action {}: {reason}",
                    self.meta.name
                ))
                .with_detail("action", self.meta.name)
                .with_detail("path", "")
                .with_detail("reason", reason));
            }
        };
        Ok(Prepared(Box::new(params)))
    }

    fn run_owned(
        self: Arc<Self>,
        prepared: &Prepared,
        ctx: Context,
    ) -> BoxFuture<'static, Result<Map<String, Value>>> {
        match prepared.0.downcast_ref::<Map<String, Value>>() {
            Some(params) => (self.run)(params.clone(), ctx),
            None => {
                let name = self.meta.name;
                Box::pin(async move {
                    Err(Error::internal(format!(
                        "params prepared for another action were given to {name}"
                    )))
                })
            }
        }
    }
}

/// The one `&'static str` of each distinct name.
fn intern(name: String) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = names.get(name.as_str()) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.into_boxed_str());
    names.insert(leaked);
    leaked
}

struct FnAction<P, O, F> {
    f: F,
    meta: ActionMetadata,
    _types: PhantomData<fn(P) -> O>,
}

impl<P, O, F> HasMetadata for FnAction<P, O, F>
where
    P: 'static,
    O: 'static,
    F: Send + Sync + 'static,
{
    fn metadata(&self) -> &ActionMetadata {
        &self.meta
    }
}

impl<P, O, F, Fut> Erased for FnAction<P, O, F>
where
    P: DeserializeOwned + JsonSchema + Clone + Send + Sync + 'static,
    O: Serialize + Send + 'static,
    F: Fn(P, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O>> + Send + 'static,
{
    fn params_schema(&self) -> Value {
        schemars::schema_for!(P).to_value()
    }

    fn prepare(&self, params: Value) -> Result<Prepared> {
        let params: P = decode_params(self.meta.name, params)?;
        Ok(Prepared(Box::new(params)))
    }

    fn run_owned(
        self: Arc<Self>,
        prepared: &Prepared,
        ctx: Context,
    ) -> BoxFuture<'static, Result<Map<String, Value>>> {
        let params = prepared.0.downcast_ref::<P>().cloned();
        Box::pin(async move {
            let name = self.meta.name;
            let params = params.ok_or_else(|| {
                Error::internal(format!(
                    "params prepared for another action were given to {name}"
                ))
            })?;
            let output = (self.f)(params, ctx).await?;
            output_to_map(name, &output)
        })
    }
}
