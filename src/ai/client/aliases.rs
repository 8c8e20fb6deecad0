//! Model aliases (`fast`, `capable`, …) resolved through a table users set.

use std::collections::BTreeMap;

use super::{LlmError, LlmErrorKind};

/// A table of model aliases: short names such as `fast` or `capable` that
/// stand for a model spec (`"provider::model"` or a bare model name).
///
/// [`ModelAliases::default`] holds Jido's defaults, written as `genai`
/// model specs:
///
/// | alias | model |
/// |---|---|
/// | `fast` | `anthropic::claude-haiku-4-5` |
/// | `capable`, `thinking`, `reasoning`, `planning` | `anthropic::claude-sonnet-4-20250514` |
/// | `image` | `openai::gpt-image-1` |
/// | `embedding` | `openai::text-embedding-3-small` |
///
/// [`set`](ModelAliases::set) adds or replaces entries on top.
///
/// # Examples
///
/// ```
/// use jido::ai::client::ModelAliases;
///
/// let aliases = ModelAliases::default().set("fast", "ollama::llama3.2");
/// assert_eq!(aliases.resolve("fast"), "ollama::llama3.2");
/// // A name that is not an alias is a model spec: it passes unchanged.
/// assert_eq!(aliases.resolve("gpt-4o-mini"), "gpt-4o-mini");
/// // `alias` is the strict lookup.
/// assert!(aliases.alias("fastest").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelAliases {
    table: BTreeMap<String, String>,
}

/// The chat aliases of Jido's default table.
pub(crate) const CHAT_ALIASES: [&str; 5] = ["fast", "capable", "thinking", "reasoning", "planning"];

impl Default for ModelAliases {
    fn default() -> Self {
        let sonnet = "anthropic::claude-sonnet-4-20250514";
        ModelAliases::empty()
            .set("fast", "anthropic::claude-haiku-4-5")
            .set("capable", sonnet)
            .set("thinking", sonnet)
            .set("reasoning", sonnet)
            .set("planning", sonnet)
            .set("image", "openai::gpt-image-1")
            .set("embedding", "openai::text-embedding-3-small")
    }
}

impl ModelAliases {
    /// A table without any alias.
    pub fn empty() -> Self {
        ModelAliases {
            table: BTreeMap::new(),
        }
    }

    /// The table with `alias` standing for `model` (replacing any earlier
    /// entry).
    pub fn set(mut self, alias: impl Into<String>, model: impl Into<String>) -> Self {
        self.table.insert(alias.into(), model.into());
        self
    }

    /// The table without `alias`.
    pub fn remove(mut self, alias: &str) -> Self {
        self.table.remove(alias);
        self
    }

    /// The model `alias` stands for, if it is one.
    pub fn get(&self, alias: &str) -> Option<&str> {
        self.table.get(alias).map(String::as_str)
    }

    /// The model `alias` stands for.
    ///
    /// # Errors
    ///
    /// [`LlmErrorKind::InvalidRequest`] naming the known aliases when
    /// `alias` is not in the table.
    pub fn alias(&self, alias: &str) -> Result<&str, LlmError> {
        self.get(alias).ok_or_else(|| {
            let known: Vec<&str> = self.table.keys().map(String::as_str).collect();
            LlmError::new(
                LlmErrorKind::InvalidRequest,
                format!(
                    "unknown model alias {alias:?} (known: {})",
                    known.join(", ")
                ),
            )
            .with_details(serde_json::json!({"alias": alias, "known": known}))
        })
    }

    /// `name` resolved: the model of the alias `name`, or `name` itself
    /// when it is not an alias (a model spec passes unchanged).
    pub fn resolve<'a>(&'a self, name: &'a str) -> &'a str {
        self.get(name).unwrap_or(name)
    }

    /// The aliases and their models, in alias order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.table.iter().map(|(a, m)| (a.as_str(), m.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_jido() {
        let a = ModelAliases::default();
        assert_eq!(a.resolve("fast"), "anthropic::claude-haiku-4-5");
        assert_eq!(a.resolve("planning"), "anthropic::claude-sonnet-4-20250514");
        assert_eq!(a.resolve("embedding"), "openai::text-embedding-3-small");
        assert_eq!(a.iter().count(), 7);
    }

    #[test]
    fn unknown_alias_lists_the_known_ones() {
        let a = ModelAliases::empty().set("b", "m1").set("a", "m2");
        let err = a.alias("c").unwrap_err();
        assert_eq!(err.kind, LlmErrorKind::InvalidRequest);
        assert_eq!(err.message, r#"unknown model alias "c" (known: a, b)"#);
        assert!(!err.retryable);
        assert_eq!(a.alias("a").unwrap(), "m2");
        assert_eq!(a.clone().remove("a").get("a"), None);
    }
}
