//! Where a real client sends its requests: base URL, key, default model,
//! aliases and timeouts, from code or from the environment.

use std::fmt;
use std::time::Duration;

use super::aliases::CHAT_ALIASES;
use super::{LlmError, LlmErrorKind, ModelAliases};

/// Default whole-request timeout (a stream: until its first event).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Default stream inactivity timeout.
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Configuration of a real LLM client: an optional OpenAI-compatible base
/// URL and key, the default model, the alias table and default timeouts.
///
/// * With a **base URL** (`http://127.0.0.1:8080/v1` for llama.cpp,
///   `http://localhost:11434/v1` for Ollama, a vLLM server, a proxy, …),
///   every model without a provider prefix (or with `openai::`) is sent
///   there over the OpenAI wire format, with the key when one is set.
/// * Without one, or for a model with another prefix
///   (`anthropic::claude-haiku-4-5`, `gemini::gemini-2.0-flash`,
///   `ollama::llama3`), the provider comes from the model name and its key
///   from the provider's usual variable (`OPENAI_API_KEY`,
///   `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`, …).
///
/// A request's model is resolved by [`LlmConfig::resolve_model`]: empty →
/// the default model; an alias → its model; anything else unchanged.
/// A request's own timeouts win over the defaults here.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use jido::ai::client::LlmConfig;
///
/// let config = LlmConfig::new()
///     .with_base_url("http://127.0.0.1:8080/v1")
///     .with_default_model("gemma3")
///     .with_alias("fast", "gemma3")
///     .with_timeout(Some(Duration::from_secs(20)));
/// assert_eq!(config.resolve_model("").unwrap(), "gemma3");
/// assert_eq!(config.resolve_model("fast").unwrap(), "gemma3");
///
/// // The same from variables (`from_env` reads the process environment).
/// let config = LlmConfig::from_vars(|name| match name {
///     "OPENAI_BASE_URL" => Some("http://127.0.0.1:8080/v1".to_string()),
///     "JIDO_MODEL" => Some("gemma3".to_string()),
///     _ => None,
/// });
/// assert_eq!(config.base_url(), Some("http://127.0.0.1:8080/v1"));
/// assert_eq!(config.resolve_model("capable").unwrap(), "gemma3");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct LlmConfig {
    base_url: Option<String>,
    api_key: Option<String>,
    default_model: Option<String>,
    aliases: ModelAliases,
    timeout: Option<Duration>,
    stream_idle_timeout: Option<Duration>,
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("default_model", &self.default_model)
            .field("aliases", &self.aliases)
            .field("timeout", &self.timeout)
            .field("stream_idle_timeout", &self.stream_idle_timeout)
            .finish()
    }
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig::new()
    }
}

impl LlmConfig {
    /// No base URL, key or default model; Jido's default aliases; timeouts
    /// [`DEFAULT_TIMEOUT`] and [`DEFAULT_STREAM_IDLE_TIMEOUT`].
    pub fn new() -> Self {
        LlmConfig {
            base_url: None,
            api_key: None,
            default_model: None,
            aliases: ModelAliases::default(),
            timeout: Some(DEFAULT_TIMEOUT),
            stream_idle_timeout: Some(DEFAULT_STREAM_IDLE_TIMEOUT),
        }
    }

    /// The configuration from the process environment; see
    /// [`from_vars`](LlmConfig::from_vars).
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// The configuration from variables looked up with `var`:
    /// * `OPENAI_BASE_URL`: the OpenAI-compatible base URL;
    /// * `OPENAI_API_KEY`: its key;
    /// * `JIDO_MODEL`: the default model. With a base URL too (one local
    ///   server, one model), Jido's chat aliases (`fast`, `capable`,
    ///   `thinking`, `reasoning`, `planning`) and `embedding` stand for it.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let mut config = LlmConfig::new();
        config.base_url = var("OPENAI_BASE_URL");
        config.api_key = var("OPENAI_API_KEY");
        config.default_model = var("JIDO_MODEL");
        if let (Some(_), Some(model)) = (&config.base_url, &config.default_model) {
            for alias in CHAT_ALIASES.into_iter().chain(["embedding"]) {
                config.aliases = config.aliases.set(alias, model.clone());
            }
        }
        config
    }

    /// Send models without a provider prefix to this OpenAI-compatible
    /// base URL (ending in `/v1` for most servers).
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// The key sent to the base URL (`Authorization: Bearer …`).
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The model used when a request names none.
    pub fn with_default_model(mut self, model: impl Into<String>) -> Self {
        self.default_model = Some(model.into());
        self
    }

    /// Replace the alias table.
    pub fn with_aliases(mut self, aliases: ModelAliases) -> Self {
        self.aliases = aliases;
        self
    }

    /// Add or replace one alias.
    pub fn with_alias(mut self, alias: impl Into<String>, model: impl Into<String>) -> Self {
        self.aliases = self.aliases.set(alias, model);
        self
    }

    /// Default whole-request timeout (`None`: no limit).
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    /// Default stream inactivity timeout (`None`: no limit).
    pub fn with_stream_idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.stream_idle_timeout = timeout;
        self
    }

    /// The OpenAI-compatible base URL, if set.
    pub fn base_url(&self) -> Option<&str> {
        self.base_url.as_deref()
    }

    /// The key for the base URL, if set.
    pub fn api_key(&self) -> Option<&str> {
        self.api_key.as_deref()
    }

    /// The default model, if set.
    pub fn default_model(&self) -> Option<&str> {
        self.default_model.as_deref()
    }

    /// The alias table.
    pub fn aliases(&self) -> &ModelAliases {
        &self.aliases
    }

    /// The default whole-request timeout.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The default stream inactivity timeout.
    pub fn stream_idle_timeout(&self) -> Option<Duration> {
        self.stream_idle_timeout
    }

    /// The model spec a request's `model` stands for: the default model
    /// when empty, an alias's model, or the name unchanged.
    ///
    /// # Errors
    ///
    /// [`LlmErrorKind::InvalidRequest`] when `model` is empty and no
    /// default model is set.
    pub fn resolve_model(&self, model: &str) -> Result<String, LlmError> {
        let name = if model.is_empty() {
            self.default_model.as_deref().ok_or_else(|| {
                LlmError::new(
                    LlmErrorKind::InvalidRequest,
                    "no model given and no default model set (JIDO_MODEL)",
                )
            })?
        } else {
            model
        };
        Ok(self.aliases.resolve(name).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn env_without_base_url_keeps_default_aliases() {
        let c = LlmConfig::from_vars(vars(&[("JIDO_MODEL", "gpt-4o-mini")]));
        assert_eq!(c.base_url(), None);
        assert_eq!(c.resolve_model("").unwrap(), "gpt-4o-mini");
        assert_eq!(
            c.resolve_model("fast").unwrap(),
            "anthropic::claude-haiku-4-5"
        );
        assert_eq!(c.timeout(), Some(DEFAULT_TIMEOUT));
    }

    #[test]
    fn env_with_base_url_points_aliases_at_the_model() {
        let c = LlmConfig::from_vars(vars(&[
            ("OPENAI_BASE_URL", "http://127.0.0.1:1/v1"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("JIDO_MODEL", "gemma"),
        ]));
        assert_eq!(c.api_key(), Some("sk-secret"));
        for alias in [
            "fast",
            "capable",
            "thinking",
            "reasoning",
            "planning",
            "embedding",
        ] {
            assert_eq!(c.resolve_model(alias).unwrap(), "gemma");
        }
        assert_eq!(c.resolve_model("image").unwrap(), "openai::gpt-image-1");
        assert!(!format!("{c:?}").contains("sk-secret"));
    }

    #[test]
    fn empty_model_without_default_is_invalid() {
        let err = LlmConfig::new().resolve_model("").unwrap_err();
        assert_eq!(err.kind, LlmErrorKind::InvalidRequest);
        assert_eq!(
            err.message,
            "no model given and no default model set (JIDO_MODEL)"
        );
    }
}
