use std::any::Any;
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::{Action, ActionMetadata, CompensationOptions, validate_name};
use crate::action_metadata::HasMetadata;
use crate::context::Context;
use crate::error::{Error, Result, json_type_name};
use crate::executor::{PollFlag, TaskSupervisor, TrackedTask};

/// Any action, type-erased, cheap to clone.
///
/// Instructions, routers, tool lists and agents hold actions as
/// `DynAction` so that lists of different actions work. Build one with
/// [`DynAction::new`] or `From` on any [`Action`].
///
/// ```
/// # use jido::prelude::*;
/// # #[derive(Clone, serde::Deserialize, schemars::JsonSchema)] struct P {}
/// # struct Ping;
/// # impl Action for Ping {
/// #     type Params = P; type Output = ();
/// #     const NAME: &'static str = "ping";
/// #     async fn run(&self, _: P, _: &Context) -> jido::Result<()> { Ok(()) }
/// # }
/// let actions: Vec<DynAction> = vec![Ping.into()];
/// assert_eq!(actions[0].name(), "ping");
/// ```
#[derive(Clone)]
pub struct DynAction(Arc<dyn Erased>);

/// Params decoded and checked for one particular action, owned by the run:
/// attempts borrow them, and a spawned attempt or compensation takes a
/// clone of the typed params (the action's `Params: Clone`). Boxed, not
/// shared, so zero-sized params (the usual `struct Empty {}`) allocate
/// nothing.
pub(crate) struct Prepared(pub(super) Box<dyn Any + Send + Sync>);

pub(crate) trait Erased: HasMetadata {
    /// Checks the action's name (`^[a-zA-Z][a-zA-Z0-9_]*$`).
    fn check_name(&self) -> Result<()> {
        validate_name(self.metadata().name)
    }

    fn params_schema(&self) -> Value;
    fn prepare(&self, params: Value) -> Result<Prepared>;
    /// One attempt as a `'static` future owning a copy of the params (for
    /// a task).
    fn run_owned(
        self: Arc<Self>,
        prepared: &Prepared,
        ctx: Context,
    ) -> BoxFuture<'static, Result<Map<String, Value>>>;

    /// The compensation of a failed attempt as a `'static` future owning a
    /// copy of the params (it runs in a task); by default none (`null`).
    fn compensate(
        self: Arc<Self>,
        prepared: &Prepared,
        error: Error,
        ctx: Context,
        opts: CompensationOptions,
    ) -> BoxFuture<'static, Result<Value>> {
        let _ = (prepared, error, ctx, opts);
        Box::pin(async { Ok(Value::Null) })
    }

    /// One attempt in a task of `supervisor`, with the poll flag `flag`
    /// (which also carries the attempt's span, see
    /// [`TaskSupervisor::spawn_tracked`]). Typed actions
    /// override it so that the action's own future is the task's: no box
    /// per run.
    fn spawn_run(
        self: Arc<Self>,
        prepared: &Prepared,
        ctx: Context,
        supervisor: &TaskSupervisor,
        flag: Arc<dyn PollFlag>,
    ) -> Result<TrackedTask<Result<Map<String, Value>>>> {
        supervisor.spawn_tracked_with(self.run_owned(prepared, ctx), flag)
    }
}

/// An action with its metadata, computed once when it is erased.
struct Typed<A> {
    action: A,
    meta: ActionMetadata,
    /// Whether the name is valid, checked once when erased (Exec checks
    /// it on every run).
    name_ok: bool,
}

impl<A: Action> Typed<A> {
    fn new(action: A) -> Self {
        Self {
            action,
            meta: A::metadata(),
            name_ok: validate_name(A::NAME).is_ok(),
        }
    }
}

impl<A: Action> Typed<A> {
    async fn run_with(&self, params: A::Params, ctx: &Context) -> Result<Map<String, Value>> {
        let output = self.action.run(params, ctx).await?;
        self.action.validate_output(&output).map_err(|err| {
            let message = format!("invalid output of action {}: {}", A::NAME, err.message());
            Error::validation(message)
                .with_details(Value::Object(err.details().clone()))
                .with_detail("action", A::NAME)
        })?;
        output_to_map(A::NAME, &output)
    }

    fn params<'p>(&self, prepared: &'p Prepared) -> Result<&'p A::Params> {
        prepared.0.downcast_ref::<A::Params>().ok_or_else(|| {
            Error::internal(format!(
                "params prepared for another action were given to {}",
                A::NAME
            ))
        })
    }
}

impl<A: Action> HasMetadata for Typed<A> {
    fn metadata(&self) -> &ActionMetadata {
        &self.meta
    }
}

impl<A: Action> Erased for Typed<A> {
    fn check_name(&self) -> Result<()> {
        if self.name_ok {
            Ok(())
        } else {
            validate_name(A::NAME)
        }
    }

    fn params_schema(&self) -> Value {
        A::params_schema()
    }

    fn prepare(&self, params: Value) -> Result<Prepared> {
        let params: A::Params = decode_params(A::NAME, params)?;
        self.action.validate_params(&params).map_err(|err| {
            if err.detail("action").is_some() {
                err
            } else {
                err.with_detail("action", A::NAME)
            }
        })?;
        Ok(Prepared(Box::new(params)))
    }

    fn run_owned(
        self: Arc<Self>,
        prepared: &Prepared,
        ctx: Context,
    ) -> BoxFuture<'static, Result<Map<String, Value>>> {
        let params = self.params(prepared).cloned();
        Box::pin(async move { self.run_with(params?, &ctx).await })
    }

    fn spawn_run(
        self: Arc<Self>,
        prepared: &Prepared,
        ctx: Context,
        supervisor: &TaskSupervisor,
        flag: Arc<dyn PollFlag>,
    ) -> Result<TrackedTask<Result<Map<String, Value>>>> {
        let params = self.params(prepared)?.clone();
        supervisor.spawn_tracked_with(async move { self.run_with(params, &ctx).await }, flag)
    }

    fn compensate(
        self: Arc<Self>,
        prepared: &Prepared,
        error: Error,
        ctx: Context,
        opts: CompensationOptions,
    ) -> BoxFuture<'static, Result<Value>> {
        let params = self.params(prepared).cloned();
        Box::pin(async move { self.action.on_error(params?, &error, &ctx, &opts).await })
    }
}

/// Decodes the params of action `action`: a failure is a validation error
/// with `action`, `path` and `reason` details.
///
/// The path of a failure is tracked only when it is needed: params whose
/// copy is cheap (see [`copy_is_cheap`]) are first decoded from a borrow
/// without tracking, and decoded again, tracked, only when that fails.
/// Tracking costs on every decode (`serde_path_to_error` wraps every
/// visitor and copies every key it passes into a `String`), so it would
/// otherwise be paid on every run for an error that almost never comes.
pub(crate) fn decode_params<P: serde::de::DeserializeOwned + 'static>(
    action: &str,
    params: Value,
) -> Result<P> {
    // Params taken as JSON (`Value`, or a map of it) are the value itself:
    // moved, not decoded into a copy.
    let params = match json_as_is::<P>(params) {
        Ok(params) => return Ok(params),
        Err(params) => params,
    };
    if copy_is_cheap(&params)
        && let Ok(decoded) = P::deserialize(&params)
    {
        return Ok(decoded);
    }
    decode_tracked(action, params)
}

/// `params` as a `P` when `P` is `Value` itself, or `Map<String, Value>`
/// and the params are an object (what decoding would give, without the
/// copy); the params back otherwise.
fn json_as_is<P: 'static>(params: Value) -> std::result::Result<P, Value> {
    let mut value = Some(params);
    if let Some(p) = (&mut value as &mut dyn Any)
        .downcast_mut::<Option<P>>()
        .and_then(Option::take)
    {
        return Ok(p);
    }
    match value {
        Some(Value::Object(map)) => {
            let mut map = Some(map);
            match (&mut map as &mut dyn Any)
                .downcast_mut::<Option<P>>()
                .and_then(Option::take)
            {
                Some(p) => Ok(p),
                None => Err(map.map_or(Value::Null, Value::Object)),
            }
        }
        Some(other) => Err(other),
        None => Err(Value::Null),
    }
}

/// Whether decoding `params` from a borrow costs no more than decoding
/// it by value with path tracking: a borrow copies the strings it
/// decodes (by value they are moved) while tracking copies every key, so
/// an object of scalars and short strings is cheaper from a borrow, and
/// one holding long text or nested values (whose size is unknown without
/// walking them) is decoded by value.
fn copy_is_cheap(params: &Value) -> bool {
    /// Strings up to this length are copied at about the cost of a key.
    const SHORT: usize = 64;
    match params {
        Value::Object(map) => map.values().all(|v| match v {
            Value::Null | Value::Bool(_) | Value::Number(_) => true,
            Value::String(s) => s.len() <= SHORT,
            Value::Array(_) | Value::Object(_) => false,
        }),
        _ => false,
    }
}

/// [`decode_params`] with the path of a failure tracked.
fn decode_tracked<P: serde::de::DeserializeOwned>(action: &str, params: Value) -> Result<P> {
    serde_path_to_error::deserialize(params).map_err(|err| {
        let path = field_path(err.path());
        let reason = err.into_inner().to_string();
        let path = match named_field(&reason) {
            Some(field) if path.is_empty() => field.to_owned(),
            Some(field) => format!("{path}.{field}"),
            None => path,
        };
        let message = if path.is_empty() {
            format!("invalid parameters for action {action}: {reason}")
        } else {
            format!("invalid parameters for action {action}: {path}: {reason}")
        };
        Error::validation(message)
            .with_detail("action", action.to_owned())
            .with_detail("path", path)
            .with_detail("reason", reason)
    })
}

/// The path of a decode error, `""` at the root (as `garde` writes it).
fn field_path(path: &serde_path_to_error::Path) -> String {
    let path = path.to_string();
    if path == "." { String::new() } else { path }
}

/// The field of a serde "missing field `x`" message: serde reports it at
/// the enclosing object, so the path alone would not name the field.
fn named_field(reason: &str) -> Option<&str> {
    let rest = reason.strip_prefix("missing field `")?;
    rest.split_once('`').map(|(field, _)| field)
}

pub(crate) fn output_to_map<T: serde::Serialize>(
    action: &str,
    output: &T,
) -> Result<Map<String, Value>> {
    match serde_json::to_value(output) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(other) => Err(Error::execution(format!(
            "output of action {action} must serialise to a JSON object, got {}",
            json_type_name(&other)
        ))
        .with_detail("action", action.to_owned())
        .with_retry(false)),
        Err(err) => Err(Error::execution(format!(
            "output of action {action} could not be serialised: {err}"
        ))
        .with_detail("action", action.to_owned())
        .with_retry(false)
        .with_source(err)),
    }
}

impl DynAction {
    pub(crate) fn from_erased(erased: Arc<dyn Erased>) -> Self {
        Self(erased)
    }

    /// Erases `action`.
    pub fn new<A: Action>(action: A) -> Self {
        // Every value of a zero-sized action without drop glue is the same
        // value: one shared handle per type, so a million agents routing to
        // it do not hold a million copies (~160 B each) and an instruction
        // made from it allocates nothing.
        if std::mem::size_of::<A>() == 0 && !std::mem::needs_drop::<A>() {
            use std::any::TypeId;
            use std::collections::HashMap;
            use std::sync::{OnceLock, PoisonError, RwLock};
            type Shared = RwLock<HashMap<TypeId, Arc<dyn Erased>, foldhash::fast::RandomState>>;
            static SHARED: OnceLock<Shared> = OnceLock::new();
            let shared = SHARED.get_or_init(Shared::default);
            let id = TypeId::of::<A>();
            if let Some(found) = shared
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&id)
            {
                return Self(Arc::clone(found));
            }
            let erased: Arc<dyn Erased> = Arc::new(Typed::new(action));
            let mut map = shared.write().unwrap_or_else(PoisonError::into_inner);
            return Self(Arc::clone(map.entry(id).or_insert(erased)));
        }
        Self(Arc::new(Typed::new(action)))
    }

    /// The action's metadata.
    pub fn metadata(&self) -> ActionMetadata {
        *self.0.metadata()
    }

    /// The action's metadata, borrowed.
    pub(crate) fn meta(&self) -> &ActionMetadata {
        self.0.metadata()
    }

    /// The action's name.
    pub fn name(&self) -> &'static str {
        self.0.metadata().name
    }

    /// The JSON Schema of the action's params.
    pub fn params_schema(&self) -> Value {
        self.0.params_schema()
    }

    /// Whether two handles point at the same action value.
    pub fn ptr_eq(&self, other: &DynAction) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    pub(crate) fn erased(&self) -> &Arc<dyn Erased> {
        &self.0
    }
}

impl<A: Action> From<A> for DynAction {
    fn from(action: A) -> Self {
        Self::new(action)
    }
}

impl fmt::Debug for DynAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DynAction").field(&self.name()).finish()
    }
}

#[cfg(test)]
mod json_params {
    use super::*;
    use serde_json::json;

    #[test]
    fn value_and_map_params_are_the_params_themselves() {
        let params = json!({"n": 1, "s": "x".repeat(100), "nested": {"a": [1, 2]}});
        let got: Value = decode_params("a", params.clone()).expect("value");
        assert_eq!(got, params);
        let got: Map<String, Value> = decode_params("a", params.clone()).expect("map");
        assert_eq!(Value::Object(got), params);
    }

    #[test]
    fn a_map_from_a_non_object_is_still_a_decode_error() {
        let err = decode_params::<Map<String, Value>>("a", json!([1])).unwrap_err();
        assert_eq!(err.kind(), crate::error::ErrorKind::Validation);
        let got: Value = decode_params("a", json!([1])).expect("any value");
        assert_eq!(got, json!([1]));
    }

    #[test]
    fn typed_params_are_decoded_as_before() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct P {
            n: u32,
        }
        assert_eq!(
            decode_params::<P>("a", json!({"n": 3})).expect("p"),
            P { n: 3 }
        );
        let err = decode_params::<P>("a", json!({"n": "x"})).unwrap_err();
        assert_eq!(err.kind(), crate::error::ErrorKind::Validation);
        assert_eq!(err.detail("path"), Some(&json!("n")));
    }
}
