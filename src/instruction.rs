//! Instructions: an action with the params, context and options to run it
//! with.
//!
//! Strategies run instructions; users write them in whatever shape is
//! handy and [`IntoInstructions`] normalises the shapes:
//!
//! ```
//! # use jido::prelude::*;
//! # #[derive(Clone, serde::Deserialize, schemars::JsonSchema)] struct P {}
//! # struct Ping;
//! # impl Action for Ping {
//! #     type Params = P; type Output = ();
//! #     const NAME: &'static str = "ping";
//! #     async fn run(&self, _: P, _: &Context) -> jido::Result<()> { Ok(()) }
//! # }
//! use serde_json::json;
//!
//! let one = Ping.into_instructions();
//! let with_params = (Ping, json!({"n": 1})).into_instructions();
//! let many = vec![Instruction::new(Ping), Instruction::new(Ping).with_params(json!({"n": 2}))]
//!     .into_instructions();
//! assert_eq!(one.len() + with_params.len() + many.len(), 4);
//! ```
//!
//! Instructions that come as JSON (from an LLM or a wire protocol) are read
//! with [`Instruction::from_json`] against the actions that are allowed.

use serde_json::{Map, Value};
use uuid::Uuid;

use crate::action::{Action, DynAction, json_type_name};
use crate::error::{Error, Result};
use crate::executor::ExecOptions;

/// One action to run, with its params, context values and options.
#[derive(Debug, Clone)]
pub struct Instruction {
    /// A UUIDv7: new for every instruction built with
    /// [`Instruction::new`]; an instruction the runtime builds for a routed
    /// signal takes that signal's id when it is a UUIDv7 (the signal and
    /// its instructions share one id; several routes of one signal share
    /// it too), and a new one otherwise.
    pub id: Uuid,
    /// The action.
    pub action: DynAction,
    /// The params, as JSON. Exec checks they form an object (`null` is read
    /// as `{}`).
    pub params: Value,
    /// Context values for the run.
    pub context: Map<String, Value>,
    /// Options for the run.
    pub opts: ExecOptions,
}

impl Instruction {
    /// An instruction for `action` with empty params, context and options.
    pub fn new(action: impl Into<DynAction>) -> Self {
        Self {
            id: Uuid::now_v7(),
            action: action.into(),
            params: Value::Object(Map::new()),
            context: Map::new(),
            opts: ExecOptions::new(),
        }
    }

    /// An instruction with a known id (the routed signal's): no new
    /// UUIDv7 is made.
    pub(crate) fn with_id(id: Uuid, action: DynAction, params: Value) -> Self {
        Self {
            id,
            action,
            params,
            context: Map::new(),
            opts: ExecOptions::new(),
        }
    }

    /// Sets the params.
    #[must_use]
    pub fn with_params(mut self, params: Value) -> Self {
        self.params = params;
        self
    }

    /// Sets the context values.
    #[must_use]
    pub fn with_context(mut self, context: Map<String, Value>) -> Self {
        self.context = context;
        self
    }

    /// Sets the options.
    #[must_use]
    pub fn with_opts(mut self, opts: ExecOptions) -> Self {
        self.opts = opts;
        self
    }

    /// Normalises any accepted shape into instructions and applies the
    /// shared context and options: shared context values win over an
    /// instruction's own, and so do the shared options.
    pub fn normalize(
        input: impl IntoInstructions,
        context: &Map<String, Value>,
        opts: &ExecOptions,
    ) -> Vec<Instruction> {
        let mut list = input.into_instructions();
        for ins in &mut list {
            ins.context
                .extend(context.iter().map(|(k, v)| (k.clone(), v.clone())));
            ins.opts = opts.or(&ins.opts);
        }
        list
    }

    /// Reads instructions written as JSON, resolving action names against
    /// `allowed`. Accepted shapes: `"name"`, `["name", {params}]`,
    /// `{"action": "name", "params": {..}, "context": {..}, "opts": {..}}`,
    /// or a list of those. A list of two whose first item is a string and
    /// second is not (`["ping", {..}]`) is always read as a `[name, params]`
    /// pair; write a list of two instructions as objects.
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
    /// use serde_json::json;
    ///
    /// let allowed = [DynAction::new(Ping)];
    /// let list = Instruction::from_json(&json!([{"action": "ping", "params": {"n": 1}}, "ping"]), &allowed).unwrap();
    /// assert_eq!(list.len(), 2);
    /// let err = Instruction::from_json(&json!("pong"), &allowed).unwrap_err();
    /// assert_eq!(err.kind(), jido::ErrorKind::Configuration);
    /// ```
    ///
    /// # Errors
    ///
    /// A configuration error for an action not in `allowed` ("actions not
    /// allowed: …"), a validation error for any other bad shape: nested
    /// lists, params or context that are not objects, bad options. A list
    /// stops at its first error.
    pub fn from_json(value: &Value, allowed: &[DynAction]) -> Result<Vec<Instruction>> {
        match value {
            Value::Array(items) if is_pair(items) => Ok(vec![one_from_json(value, allowed)?]),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Value::Array(inner) if !is_pair(inner) => Err(Error::validation(
                        "invalid instruction format: nested lists are not allowed",
                    )
                    .with_detail("index", i)),
                    _ => one_from_json(item, allowed).map_err(|e| e.with_detail("index", i)),
                })
                .collect(),
            _ => Ok(vec![one_from_json(value, allowed)?]),
        }
    }
}

fn is_pair(items: &[Value]) -> bool {
    items.len() == 2 && items[0].is_string() && !items[1].is_string()
}

fn resolve(name: &str, allowed: &[DynAction]) -> Result<DynAction> {
    allowed
        .iter()
        .find(|a| a.name() == name)
        .cloned()
        .ok_or_else(|| {
            Error::configuration(format!("actions not allowed: {name}"))
                .with_detail("action", name.to_owned())
        })
}

fn one_from_json(value: &Value, allowed: &[DynAction]) -> Result<Instruction> {
    match value {
        Value::String(name) => Ok(Instruction::new(resolve(name, allowed)?)),
        Value::Array(pair) if is_pair(pair) => {
            let name = pair[0].as_str().unwrap_or_default();
            Ok(Instruction::new(resolve(name, allowed)?)
                .with_params(object_or_empty(&pair[1], "params")?))
        }
        Value::Object(map) => {
            let name = map.get("action").and_then(Value::as_str).ok_or_else(|| {
                Error::validation("invalid instruction format: missing action name")
                    .with_detail("path", "action")
            })?;
            let params = object_or_empty(map.get("params").unwrap_or(&Value::Null), "params")?;
            let context =
                match object_or_empty(map.get("context").unwrap_or(&Value::Null), "context")? {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
            let opts = ExecOptions::from_json(map.get("opts").unwrap_or(&Value::Null))?;
            Ok(Instruction::new(resolve(name, allowed)?)
                .with_params(params)
                .with_context(context)
                .with_opts(opts))
        }
        other => Err(Error::validation(format!(
            "invalid instruction format: got {}",
            json_type_name(other)
        ))),
    }
}

fn object_or_empty(value: &Value, field: &str) -> Result<Value> {
    match value {
        Value::Object(_) => Ok(value.clone()),
        Value::Null => Ok(Value::Object(Map::new())),
        other => Err(Error::validation(format!(
            "invalid {field} format: expected a JSON object, got {}",
            json_type_name(other)
        ))
        .with_detail("path", field.to_owned())),
    }
}

/// The shapes accepted where instructions are expected: an action, an
/// [`Instruction`], `(action, params)`, `(action, params, context)`,
/// `(action, params, context, opts)`, or a `Vec` of any one of these.
pub trait IntoInstructions {
    /// The normalised list.
    fn into_instructions(self) -> Vec<Instruction>;
}

impl<A: Action> IntoInstructions for A {
    fn into_instructions(self) -> Vec<Instruction> {
        vec![Instruction::new(self)]
    }
}

impl IntoInstructions for DynAction {
    fn into_instructions(self) -> Vec<Instruction> {
        vec![Instruction::new(self)]
    }
}

impl IntoInstructions for Instruction {
    fn into_instructions(self) -> Vec<Instruction> {
        vec![self]
    }
}

impl<A: Into<DynAction>> IntoInstructions for (A, Value) {
    fn into_instructions(self) -> Vec<Instruction> {
        vec![Instruction::new(self.0).with_params(self.1)]
    }
}

impl<A: Into<DynAction>> IntoInstructions for (A, Value, Map<String, Value>) {
    fn into_instructions(self) -> Vec<Instruction> {
        vec![
            Instruction::new(self.0)
                .with_params(self.1)
                .with_context(self.2),
        ]
    }
}

impl<A: Into<DynAction>> IntoInstructions for (A, Value, Map<String, Value>, ExecOptions) {
    fn into_instructions(self) -> Vec<Instruction> {
        vec![
            Instruction::new(self.0)
                .with_params(self.1)
                .with_context(self.2)
                .with_opts(self.3),
        ]
    }
}

impl<T: IntoInstructions> IntoInstructions for Vec<T> {
    fn into_instructions(self) -> Vec<Instruction> {
        self.into_iter()
            .flat_map(IntoInstructions::into_instructions)
            .collect()
    }
}
