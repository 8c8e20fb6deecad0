//! Structured output: a JSON answer checked against a Rust type.

use std::fmt;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ai::client::JsonSchemaFormat;
use crate::error::{Error, Result};

type Check = dyn Fn(&Value) -> Result<()> + Send + Sync;

/// The schema of a structured answer, made from a Rust type: its JSON
/// Schema (sent to the model as the response format) and a check that
/// the answer decodes into the type.
///
/// ```
/// use jido::ai::react::OutputSchema;
/// use serde_json::json;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Weather { city: String, celsius: f64 }
///
/// let schema = OutputSchema::of::<Weather>("weather");
/// assert_eq!(schema.schema()["required"], json!(["city", "celsius"]));
/// // Code fences around the JSON are tolerated.
/// let answer = schema.parse("```json\n{\"city\": \"Oslo\", \"celsius\": 4.5}\n```")?;
/// assert_eq!(answer, json!({"city": "Oslo", "celsius": 4.5}));
/// let err = schema.parse(r#"{"city": "Oslo"}"#).unwrap_err();
/// assert_eq!(err.message(), "answer does not match the schema weather: missing field `celsius`");
/// # Ok::<(), jido::Error>(())
/// ```
#[derive(Clone)]
pub struct OutputSchema {
    name: String,
    schema: Value,
    check: Arc<Check>,
}

impl fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutputSchema")
            .field("name", &self.name)
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl OutputSchema {
    /// The schema of `T`, named `name` (requests choose it by this name).
    pub fn of<T: DeserializeOwned + JsonSchema>(name: impl Into<String>) -> Self {
        let name = name.into();
        let mut schema = schemars::schema_for!(T).to_value();
        if let Value::Object(map) = &mut schema {
            map.remove("$schema");
        }
        let type_name = name.clone();
        OutputSchema {
            name,
            schema,
            check: Arc::new(move |value: &Value| {
                serde_path_to_error::deserialize::<_, T>(value)
                    .map(drop)
                    .map_err(|err| {
                        let path = err.path().to_string();
                        let reason = err.into_inner().to_string();
                        let at = if path == "." || path.is_empty() {
                            String::new()
                        } else {
                            format!("{path}: ")
                        };
                        Error::validation(format!(
                            "answer does not match the schema {type_name}: {at}{reason}"
                        ))
                        .with_detail("schema", type_name.clone())
                        .with_detail("reason", reason)
                    })
            }),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its JSON Schema.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The response format asking a model for it.
    pub fn format(&self) -> JsonSchemaFormat {
        JsonSchemaFormat {
            name: self.name.clone(),
            schema: self.schema.clone(),
        }
    }

    /// Reads a model's answer: the JSON text (inside a code fence or not)
    /// checked against the type.
    ///
    /// # Errors
    ///
    /// A validation error "answer is not valid json: REASON" or "answer
    /// does not match the schema NAME: \[PATH: \]REASON" (details `schema`,
    /// `reason`).
    pub fn parse(&self, text: &str) -> Result<Value> {
        let value: Value = serde_json::from_str(strip_fence(text)).map_err(|e| {
            Error::validation(format!("answer is not valid json: {e}"))
                .with_detail("schema", self.name.clone())
                .with_detail("reason", e.to_string())
        })?;
        (self.check)(&value)?;
        Ok(value)
    }
}

/// The text inside a Markdown code fence (```` ```json … ``` ````), else
/// the text trimmed.
fn strip_fence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return t;
    };
    // Drop the info string (`json`) on the opening line.
    match body.find('\n') {
        Some(nl) => body[nl + 1..].trim(),
        None => body.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_are_stripped() {
        assert_eq!(strip_fence(" {\"a\":1} "), "{\"a\":1}");
        assert_eq!(strip_fence("```json\n{\"a\":1}\n```"), "{\"a\":1}");
        assert_eq!(strip_fence("```\n[1]\n```"), "[1]");
        assert_eq!(strip_fence("```[1]```"), "[1]");
    }
}
