//! Tools from actions: the description a model sees and the argument
//! normalisation a tool call goes through before the action decodes it.
//!
//! A [`Tool`] is an action plus its [`ToolSpec`]: the action's name (with an
//! optional prefix), its description, and the JSON Schema of its params
//! with every object closed (`"additionalProperties": false` where the
//! schema does not say otherwise; in the strict variant on every object,
//! and the provider is asked to enforce it). A [`ToolSet`] holds tools by
//! name, refusing duplicates.
//!
//! ```
//! use jido::ai::tool::{Tool, ToolSet};
//! use jido::prelude::*;
//! use serde_json::json;
//!
//! #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
//! struct Mul { a: i64, b: i64 }
//!
//! /// Multiplies two integers.
//! #[jido::action]
//! async fn multiply(p: Mul) -> jido::Result<serde_json::Value> {
//!     Ok(json!({"product": p.a * p.b}))
//! }
//!
//! let tools = ToolSet::new().with(Multiply)?;
//! let spec = tools.get("multiply").unwrap().spec();
//! assert_eq!(spec.description, "Multiplies two integers.");
//! assert_eq!(spec.parameters["additionalProperties"], false);
//! assert_eq!(spec.parameters["required"], json!(["a", "b"]));
//! // Models write numbers as strings at times: normalised before decoding.
//! let args = tools.get("multiply").unwrap().normalize_arguments(json!({"a": "2", "b": 3}))?;
//! assert_eq!(args, json!({"a": 2, "b": 3}));
//! # Ok::<(), jido::Error>(())
//! ```

use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::{Map, Value, json};

use super::client::ToolSpec;
use crate::action::{DynAction, validate_name};
use crate::error::{Error, Result};

/// An action offered to a model as a tool.
#[derive(Clone, Debug)]
pub struct Tool {
    action: DynAction,
    spec: std::sync::Arc<ToolSpec>,
}

impl Tool {
    /// The tool of `action`: its name, its description (an action without
    /// one is described as `"Runs the NAME action."`, so that every tool has
    /// a description), its closed params schema, not strict.
    pub fn from_action(action: impl Into<DynAction>) -> Self {
        let action = action.into();
        let meta = action.metadata();
        let description = if meta.description.trim().is_empty() {
            format!("Runs the {} action.", meta.name)
        } else {
            meta.description.to_owned()
        };
        let parameters = tool_schema(action.params_schema(), false);
        Tool {
            spec: std::sync::Arc::new(ToolSpec {
                name: meta.name.to_owned(),
                description,
                parameters,
                strict: false,
            }),
            action,
        }
    }

    /// The strict variant: every object of the schema is closed, explicit
    /// open objects included, and [`ToolSpec::strict`] asks the provider to
    /// enforce the schema.
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Self {
        let spec = std::sync::Arc::make_mut(&mut self.spec);
        spec.parameters = tool_schema(self.action.params_schema(), strict);
        spec.strict = strict;
        self
    }

    /// Names the tool `PREFIX` + the action's name (e.g. `"math_"`).
    #[must_use]
    pub fn prefixed(mut self, prefix: &str) -> Self {
        std::sync::Arc::make_mut(&mut self.spec).name = format!("{prefix}{}", self.action.name());
        self
    }

    /// Replaces the description.
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        std::sync::Arc::make_mut(&mut self.spec).description = description.into();
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// What the model is given.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The action the tool runs.
    pub fn action(&self) -> &DynAction {
        &self.action
    }

    /// Normalises arguments written by a model against the params schema,
    /// before the action decodes them (see [`normalize_arguments`]).
    ///
    /// # Errors
    ///
    /// As [`normalize_arguments`].
    pub fn normalize_arguments(&self, arguments: Value) -> Result<Value> {
        normalize_arguments(&self.spec.parameters, arguments)
    }
}

impl<A: Into<DynAction>> From<A> for Tool {
    fn from(action: A) -> Self {
        Tool::from_action(action)
    }
}

/// Tools by name, in insertion order; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct ToolSet {
    tools: Arc<IndexMap<String, Tool>>,
}

impl ToolSet {
    /// No tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// This set with `tool` added (an action converts).
    ///
    /// # Errors
    ///
    /// A configuration error "duplicate tool name NAME" (details `name`),
    /// or "invalid tool name" when a prefix made the name invalid.
    pub fn with(mut self, tool: impl Into<Tool>) -> Result<Self> {
        self.insert(tool)?;
        Ok(self)
    }

    /// This set with every tool of `tools` added, in order (e.g. the tools
    /// of an MCP server, `jido::ai::mcp::McpClient::tools`
    /// with feature `mcp`).
    ///
    /// # Errors
    ///
    /// As [`with`](ToolSet::with), for the first tool refused.
    pub fn with_all<T: Into<Tool>>(mut self, tools: impl IntoIterator<Item = T>) -> Result<Self> {
        for tool in tools {
            self.insert(tool)?;
        }
        Ok(self)
    }

    /// Adds `tool`.
    ///
    /// # Errors
    ///
    /// As [`with`](ToolSet::with).
    pub fn insert(&mut self, tool: impl Into<Tool>) -> Result<()> {
        let tool = tool.into();
        validate_name(tool.name()).map_err(|e| {
            Error::configuration(format!("invalid tool name {:?}", tool.name()))
                .with_detail("name", tool.name().to_owned())
                .with_detail("reason", e.message().to_owned())
        })?;
        if self.tools.contains_key(tool.name()) {
            return Err(
                Error::configuration(format!("duplicate tool name {}", tool.name()))
                    .with_detail("name", tool.name().to_owned()),
            );
        }
        Arc::make_mut(&mut self.tools).insert(tool.name().to_owned(), tool);
        Ok(())
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name)
    }

    /// The tools, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.tools.values()
    }

    /// The names, in insertion order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// The specs to offer a model, in insertion order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| (*t.spec).clone()).collect()
    }

    /// How many tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// The JSON Schema given to a model for params schema `schema` (as
/// [`Action::params_schema`](crate::Action::params_schema) returns it):
///
/// * `$schema` and the root `title` are dropped (noise for a model);
/// * the root is an object schema with `properties` and `required` (both
///   present, possibly empty);
/// * every object node (`"type": "object"` or with `properties`) gets
///   `"additionalProperties": false` unless it says otherwise; with
///   `strict`, every object node is closed.
///
/// ```
/// use jido::ai::tool::tool_schema;
/// use serde_json::json;
///
/// assert_eq!(
///     tool_schema(json!({"type": "object"}), false),
///     json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
/// );
/// let open = json!({"type": "object", "properties": {"extra": {"type": "object", "additionalProperties": true}}});
/// assert_eq!(tool_schema(open.clone(), false)["properties"]["extra"]["additionalProperties"], true);
/// assert_eq!(tool_schema(open, true)["properties"]["extra"]["additionalProperties"], false);
/// ```
pub fn tool_schema(schema: Value, strict: bool) -> Value {
    let mut schema = match schema {
        Value::Object(map) => map,
        // `true` / anything else: an object taking no arguments.
        _ => Map::new(),
    };
    schema.shift_remove("$schema");
    schema.shift_remove("title");
    if !schema.contains_key("type") {
        schema.insert("type".into(), json!("object"));
    }
    if !schema.contains_key("properties") {
        schema.insert("properties".into(), json!({}));
    }
    if !schema.contains_key("required") {
        schema.insert("required".into(), json!([]));
    }
    let mut schema = Value::Object(schema);
    close_objects(&mut schema, strict);
    schema
}

fn is_object_node(map: &Map<String, Value>) -> bool {
    let typed_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => false,
    };
    typed_object || map.contains_key("properties")
}

fn close_objects(schema: &mut Value, strict: bool) {
    let Value::Object(map) = schema else {
        return;
    };
    if is_object_node(map) && (strict || !map.contains_key("additionalProperties")) {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    for (key, child) in map.iter_mut() {
        match key.as_str() {
            // Maps of name → schema.
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Value::Object(schemas) = child {
                    schemas.values_mut().for_each(|s| close_objects(s, strict));
                }
            }
            // One schema.
            "items"
            | "additionalProperties"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "propertyNames"
            | "unevaluatedProperties" => close_objects(child, strict),
            // Lists of schemas.
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                if let Value::Array(schemas) = child {
                    schemas.iter_mut().for_each(|s| close_objects(s, strict));
                }
            }
            // Data and names (enum, const, default, required, examples,
            // description, …).
            _ => {}
        }
    }
}

/// Normalises the arguments of a tool call against the tool's params
/// schema before the action decodes them:
///
/// * arguments given as JSON text are parsed; `null` reads as `{}`;
/// * a string where the schema wants an integer or a number is parsed
///   (`"2"` → `2`, `"2.5"` → `2.5`), `"true"` / `"false"` where it wants a
///   boolean become booleans;
/// * a string where the schema lists string `enum` values is matched to
///   the listed value ignoring case (`"SUMMARY"` → `"summary"`);
/// * this applies through `properties`, `items`, `$ref` to `$defs` /
///   `definitions`, `anyOf` / `oneOf` / `allOf`.
///
/// Anything else is left for the action's decoding to accept or refuse
/// (with its field path).
///
/// # Errors
///
/// A validation error "tool arguments must be a JSON object" (details
/// `arguments`) when the arguments are not an object (or JSON text of
/// one).
pub fn normalize_arguments(schema: &Value, arguments: Value) -> Result<Value> {
    let arguments = match arguments {
        Value::Null => Value::Object(Map::new()),
        Value::String(text) => match serde_json::from_str::<Value>(&text) {
            Ok(v @ Value::Object(_)) => v,
            _ => return Err(not_object(Value::String(text))),
        },
        v @ Value::Object(_) => v,
        other => return Err(not_object(other)),
    };
    // Numbers, booleans and null are never changed, so an object of them
    // only is given back as it is, whatever the schema (its branches and
    // properties all keep it): no key is looked up.
    if let Value::Object(map) = &arguments
        && map
            .values()
            .all(|v| matches!(v, Value::Number(_) | Value::Bool(_) | Value::Null))
    {
        return Ok(arguments);
    }
    Ok(normalize_value(schema, schema, arguments, 0))
}

fn not_object(arguments: Value) -> Error {
    Error::validation("tool arguments must be a JSON object")
        .with_detail("arguments", crate::error::sanitize(&arguments))
}

/// Resolves `#/$defs/X` and `#/definitions/X`.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
        return schema;
    };
    let Some(pointer) = reference.strip_prefix('#') else {
        return schema;
    };
    root.pointer(pointer).unwrap_or(schema)
}

fn types_of(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn normalize_value(root: &Value, schema: &Value, value: Value, depth: usize) -> Value {
    // Numbers, booleans and null are never changed (by no schema, no
    // branch): nothing to look up for them.
    if depth > 32 || matches!(value, Value::Number(_) | Value::Bool(_) | Value::Null) {
        return value;
    }
    let schema = resolve(root, schema);
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = schema.get(key) {
            let mut value = value;
            for branch in branches {
                let next = normalize_value(root, branch, value.clone(), depth + 1);
                if next != value {
                    return next;
                }
                value = next;
            }
            return value;
        }
    }
    match value {
        Value::String(s) => {
            let types = types_of(schema);
            if let Some(Value::Array(choices)) = schema.get("enum") {
                if choices.iter().any(|c| c.as_str() == Some(s.as_str())) {
                    return Value::String(s);
                }
                if let Some(found) = choices
                    .iter()
                    .filter_map(Value::as_str)
                    .find(|c| c.eq_ignore_ascii_case(s.trim()))
                {
                    return Value::String(found.to_owned());
                }
            }
            if types.contains(&"string") {
                return Value::String(s);
            }
            let trimmed = s.trim();
            if types.contains(&"integer") {
                if let Ok(n) = trimmed.parse::<i64>() {
                    return Value::from(n);
                }
                if let Ok(n) = trimmed.parse::<u64>() {
                    return Value::from(n);
                }
            }
            if types.contains(&"number") {
                if let Ok(n) = trimmed.parse::<i64>() {
                    return Value::from(n);
                }
                if let Some(n) = trimmed
                    .parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                {
                    return Value::Number(n);
                }
            }
            if types.contains(&"boolean") {
                match trimmed.to_ascii_lowercase().as_str() {
                    "true" => return Value::Bool(true),
                    "false" => return Value::Bool(false),
                    _ => {}
                }
            }
            Value::String(s)
        }
        Value::Object(mut map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|v| v.is_object());
            // In place: the keys stay where they are (no new map, no rehash).
            for (k, v) in map.iter_mut() {
                if let Some(sub) = props.and_then(|p| p.get(k)).or(extra) {
                    *v = normalize_value(root, sub, std::mem::take(v), depth + 1);
                }
            }
            Value::Object(map)
        }
        Value::Array(items) => match schema.get("items") {
            Some(item_schema) if item_schema.is_object() => Value::Array(
                items
                    .into_iter()
                    .map(|v| normalize_value(root, item_schema, v, depth + 1))
                    .collect(),
            ),
            _ => Value::Array(items),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_of_numbers_booleans_and_nulls_are_kept_whatever_the_schema() {
        let schema = json!({
            "anyOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}},
                {"$ref": "#/$defs/x"}
            ],
            "$defs": {"x": {"type": "object", "additionalProperties": {"type": "boolean"}}}
        });
        let args = json!({"a": 6, "b": true, "c": null, "d": 1.5});
        let full = normalize_value(&schema, &schema, args.clone(), 0);
        assert_eq!(full, args);
        assert_eq!(normalize_arguments(&schema, args.clone()).ok(), Some(args));
        // A string still goes through the schema.
        let coerced = normalize_arguments(
            &json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
            json!({"a": "6", "b": 1}),
        );
        assert_eq!(coerced.ok(), Some(json!({"a": 6, "b": 1})));
    }
}
