//! HTTP and webhook adapters (feature `http`).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use hmac::{Hmac, Mac};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Client, Url};
use sha2::Sha256;

use super::{Dispatch, invalid_options, invalid_target, status_error, timeout};
use crate::error::{Error, Result};
use crate::signal::Signal;

/// The default timeout of one HTTP request.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest timeout an HTTP target accepts.
pub const MAX_HTTP_TIMEOUT: Duration = Duration::from_secs(60);
/// The most attempts a [`RetryPolicy`] accepts.
pub const MAX_ATTEMPTS: u32 = 10;
/// The longest delay a [`RetryPolicy`] accepts.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);
/// How much of an error response's body is kept in the error.
const MAX_ERROR_BODY: usize = 4096;

/// The HTTP method of an [`HttpTarget`].
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpMethod {
    /// `POST` (the default).
    #[default]
    Post,
    /// `PUT`.
    Put,
    /// `PATCH`.
    Patch,
}

impl HttpMethod {
    fn as_reqwest(self) -> reqwest::Method {
        match self {
            HttpMethod::Post => reqwest::Method::POST,
            HttpMethod::Put => reqwest::Method::PUT,
            HttpMethod::Patch => reqwest::Method::PATCH,
        }
    }
}

/// Retries of an HTTP delivery: at most `max_attempts` attempts, waiting
/// `min(base_delay · 2^(k−1), max_delay)` after failed attempt `k`. Only
/// retryable failures (timeouts, connection failures, 408/425/429/5xx) are
/// retried. The default is Jido's: 3 attempts, 1 s base, 5 s cap.
///
/// ```
/// use std::time::Duration;
/// use jido::signal::dispatch::RetryPolicy;
///
/// let p = RetryPolicy::default();
/// assert_eq!(p.max_attempts(), 3);
/// assert_eq!(p.delay(1), Duration::from_secs(1));
/// assert_eq!(p.delay(2), Duration::from_secs(2));
/// assert_eq!(p.delay(4), Duration::from_secs(5)); // capped
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: u32,
    base_delay: Duration,
    max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            base_delay: Duration::from_millis(1000),
            max_delay: Duration::from_millis(5000),
        }
    }
}

impl RetryPolicy {
    /// A policy of `max_attempts` attempts (1..=10) with delays from
    /// `base_delay` doubling up to `max_delay` (both at most 60 s,
    /// `max_delay >= base_delay`; checked by the target's validation).
    pub const fn new(max_attempts: u32, base_delay: Duration, max_delay: Duration) -> Self {
        Self {
            max_attempts,
            base_delay,
            max_delay,
        }
    }

    /// One attempt, no retry.
    pub const fn none() -> Self {
        Self::new(1, Duration::ZERO, Duration::ZERO)
    }

    /// The number of attempts.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The first delay.
    pub fn base_delay(&self) -> Duration {
        self.base_delay
    }

    /// The longest delay.
    pub fn max_delay(&self) -> Duration {
        self.max_delay
    }

    /// The delay after failed attempt `attempt` (1-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.base_delay
            .checked_mul(factor)
            .unwrap_or(Duration::MAX)
            .min(self.max_delay)
    }

    fn validate(&self, target: &str) -> Result<()> {
        if self.max_attempts == 0 {
            return Err(invalid_options(
                "retry max_attempts must be at least 1",
                target,
                "retry",
            ));
        }
        if self.max_attempts > MAX_ATTEMPTS {
            return Err(invalid_options(
                format!("retry max_attempts exceeds {MAX_ATTEMPTS}"),
                target,
                "retry",
            ));
        }
        if self.base_delay > MAX_RETRY_DELAY || self.max_delay > MAX_RETRY_DELAY {
            return Err(invalid_options(
                format!("retry delay exceeds {}ms", MAX_RETRY_DELAY.as_millis()),
                target,
                "retry",
            ));
        }
        if self.max_delay < self.base_delay {
            return Err(invalid_options(
                "retry max_delay must be at least base_delay",
                target,
                "retry",
            ));
        }
        Ok(())
    }
}

/// The URL without userinfo, query and fragment, for telemetry and errors.
pub(crate) fn strip_url(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => "<invalid url>".to_owned(),
    }
}

/// Jido's URL rules: http or https, a host, no userinfo, no whitespace.
fn validate_url(url: &str) -> Result<()> {
    let target = strip_url(url);
    let fail = |message: String| Err(invalid_options(message, &target, "url"));
    if url.chars().any(char::is_whitespace) {
        return fail("invalid url: whitespace not allowed".into());
    }
    let parsed = match Url::parse(url) {
        Ok(u) => u,
        Err(e) => return fail(format!("invalid url: {e}")),
    };
    if !matches!(parsed.scheme(), "http" | "https") {
        return fail("invalid url: scheme must be http or https".into());
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return fail("invalid url: missing host".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return fail("invalid url: userinfo not allowed".into());
    }
    Ok(())
}

fn header_pair(name: &str, value: &str, target: &str) -> Result<(HeaderName, HeaderValue)> {
    let n = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| invalid_options(format!("invalid header name {name:?}"), target, "headers"))?;
    let v = HeaderValue::from_str(value).map_err(|_| {
        invalid_options(
            format!("invalid value for header {name}"),
            target,
            "headers",
        )
    })?;
    Ok((n, v))
}

/// POSTs (or PUTs, PATCHes) each signal as CloudEvents JSON to a URL
/// (Jido's `:http` adapter).
///
/// Options and defaults: method POST, no extra headers, timeout 5 s (at
/// most 60 s), [`RetryPolicy::default`] (3 attempts, 1 s doubling to 5 s).
/// A 2xx answer is a success; anything else fails with `status_error`
/// (`status`, first 4 KiB of `body`). Redirects are not followed.
/// Generated headers (`content-type: application/json`) override the
/// caller's. The URL must be http or https with a host and no userinfo or
/// whitespace. A circuit breaker guards each URL (key `http:<url>`).
///
/// ```
/// use std::time::Duration;
/// use jido::signal::dispatch::{DispatchConfig, HttpMethod, HttpTarget, RetryPolicy};
///
/// let config = DispatchConfig::new(
///     HttpTarget::new("https://example.com/events")
///         .method(HttpMethod::Put)
///         .header("authorization", "Bearer t0k3n")
///         .timeout(Duration::from_secs(2))
///         .retry(RetryPolicy::new(5, Duration::from_millis(200), Duration::from_secs(2))),
/// )?;
///
/// let err = DispatchConfig::new(HttpTarget::new("ftp://example.com")).unwrap_err();
/// assert_eq!(err.message(), "invalid url: scheme must be http or https");
/// # Ok::<(), jido::Error>(())
/// ```
#[derive(Clone)]
pub struct HttpTarget {
    url: String,
    method: HttpMethod,
    headers: Vec<(String, String)>,
    timeout: Duration,
    retry: RetryPolicy,
    cloudevents: bool,
    client: Arc<OnceLock<Client>>,
}

impl fmt::Debug for HttpTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("HttpTarget")
            .field("url", &strip_url(&self.url))
            .field("method", &self.method)
            .field("headers", &headers)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .field("cloudevents", &self.cloudevents)
            .finish_non_exhaustive()
    }
}

impl HttpTarget {
    /// A POST to `url` with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            method: HttpMethod::Post,
            headers: Vec::new(),
            timeout: DEFAULT_HTTP_TIMEOUT,
            retry: RetryPolicy::default(),
            cloudevents: false,
            client: Arc::new(OnceLock::new()),
        }
    }

    /// Sets the method.
    #[must_use]
    pub fn method(mut self, method: HttpMethod) -> Self {
        self.method = method;
        self
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the timeout of each attempt (default 5 s, at most 60 s).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the retry policy.
    #[must_use]
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sends `specversion` `"1.0"` (the CloudEvents specification's value)
    /// instead of Jido's `"1.0.2"`.
    #[must_use]
    pub fn cloudevents_specversion(mut self, yes: bool) -> Self {
        self.cloudevents = yes;
        self
    }

    /// Uses this client (shares its connection pool). By default each
    /// target (and its clones) builds one on first use.
    #[must_use]
    pub fn client(mut self, client: Client) -> Self {
        let lock = OnceLock::new();
        let _ = lock.set(client);
        self.client = Arc::new(lock);
        self
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn body(&self, signal: &Signal) -> Vec<u8> {
        if self.cloudevents {
            serde_json::to_vec(&signal.as_cloudevent()).unwrap_or_default()
        } else {
            signal.to_json_vec()
        }
    }

    fn get_client(&self) -> Result<Client> {
        if let Some(client) = self.client.get() {
            return Ok(client.clone());
        }
        let client = Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Error::internal("could not build the http client").with_source(e))?;
        let _ = self.client.set(client.clone());
        Ok(self.client.get().cloned().unwrap_or(client))
    }

    fn check(&self) -> Result<()> {
        validate_url(&self.url)?;
        let target = strip_url(&self.url);
        if self.timeout.is_zero() {
            return Err(invalid_options(
                "timeout must be positive",
                &target,
                "timeout",
            ));
        }
        if self.timeout > MAX_HTTP_TIMEOUT {
            return Err(invalid_options(
                format!("timeout exceeds {}ms", MAX_HTTP_TIMEOUT.as_millis()),
                &target,
                "timeout",
            ));
        }
        self.retry.validate(&target)?;
        for (name, value) in &self.headers {
            header_pair(name, value, &target)?;
        }
        Ok(())
    }

    /// Sends `body` with the caller's headers, then the generated ones
    /// (which win), retrying retryable failures.
    async fn send(&self, body: Vec<u8>, generated: Vec<(HeaderName, HeaderValue)>) -> Result<()> {
        let target = strip_url(&self.url);
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            let (n, v) = header_pair(name, value, &target)
                .map_err(|e| invalid_target(e.message().to_owned(), &target))?;
            headers.append(n, v);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (n, v) in generated {
            headers.insert(n, v);
        }
        let client = self.get_client()?;
        let mut attempt = 1;
        loop {
            match self
                .attempt(&client, headers.clone(), body.clone(), &target)
                .await
            {
                Ok(()) => return Ok(()),
                Err(err) => {
                    if attempt >= self.retry.max_attempts || !err.retryable() {
                        return Err(err.with_detail("attempts", attempt));
                    }
                    let delay = self.retry.delay(attempt);
                    tracing::debug!(
                        target: "jido::dispatch",
                        url = %target,
                        attempt,
                        max_attempts = self.retry.max_attempts,
                        delay_ms = delay.as_millis() as u64,
                        error = %err,
                        "retrying http dispatch"
                    );
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
            }
        }
    }

    async fn attempt(
        &self,
        client: &Client,
        headers: HeaderMap,
        body: Vec<u8>,
        target: &str,
    ) -> Result<()> {
        let request = client
            .request(self.method.as_reqwest(), &self.url)
            .headers(headers)
            .body(body)
            .timeout(self.timeout);
        let mut response = match request.send().await {
            Ok(r) => r,
            Err(e) => return Err(transport_error(e, target, self.timeout)),
        };
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let mut body = Vec::new();
        while body.len() < MAX_ERROR_BODY {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
        body.truncate(MAX_ERROR_BODY);
        Err(status_error(
            target,
            status.as_u16(),
            String::from_utf8_lossy(&body),
        ))
    }
}

fn transport_error(err: reqwest::Error, target: &str, after: Duration) -> Error {
    let err = err.without_url();
    if err.is_builder() {
        invalid_target("http request could not be built", target).with_source(err)
    } else if err.is_timeout() {
        timeout(target, after).with_source(err)
    } else if err.is_connect() {
        Error::dispatch("http connection failed")
            .with_detail("reason", "connection_failed")
            .with_detail("target", target)
            .with_detail("retry", true)
            .with_source(err)
    } else {
        Error::dispatch("http request failed")
            .with_detail("reason", "request_failed")
            .with_detail("target", target)
            .with_detail("error", err.to_string())
            .with_detail("retry", true)
            .with_source(err)
    }
}

impl Dispatch for HttpTarget {
    fn adapter(&self) -> &'static str {
        "http"
    }

    fn target(&self) -> String {
        strip_url(&self.url)
    }

    fn target_kind(&self) -> &'static str {
        "url"
    }

    fn validate(&self) -> Result<()> {
        self.check()
    }

    fn circuit_key(&self) -> Option<String> {
        Some(format!("http:{}", strip_url(&self.url)))
    }

    fn deliver<'a>(&'a self, signal: &'a Signal) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.send(self.body(signal), Vec::new()))
    }
}

/// HTTP delivery plus webhook headers (Jido's `:webhook` adapter).
///
/// Each delivery sends `x-webhook-timestamp` (unix seconds),
/// `x-webhook-event` (the signal type, or its entry in the event type
/// map) and, with a secret, `x-webhook-signature`: the lowercase hex
/// HMAC-SHA256 of `"<timestamp>.<body>"` keyed by the secret. These
/// generated headers override the caller's. HTTP options and validation
/// are those of [`HttpTarget`]; the circuit key is `webhook:<url>`.
///
/// ```
/// use jido::signal::dispatch::{DispatchConfig, WebhookTarget};
///
/// let config = DispatchConfig::new(
///     WebhookTarget::new("https://example.com/hooks")
///         .secret("s3cret")
///         .event_type("order.placed", "order_created"),
/// )?;
/// # Ok::<(), jido::Error>(())
/// ```
#[derive(Clone)]
pub struct WebhookTarget {
    http: HttpTarget,
    secret: Option<String>,
    signature_header: String,
    timestamp_header: String,
    event_type_header: String,
    event_type_map: HashMap<String, String>,
}

impl fmt::Debug for WebhookTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookTarget")
            .field("http", &self.http)
            .field("secret", &self.secret.as_ref().map(|_| "[REDACTED]"))
            .field("signature_header", &self.signature_header)
            .field("timestamp_header", &self.timestamp_header)
            .field("event_type_header", &self.event_type_header)
            .field("event_type_map", &self.event_type_map)
            .finish()
    }
}

impl WebhookTarget {
    /// A webhook POST to `url` with the defaults and no secret.
    pub fn new(url: impl Into<String>) -> Self {
        Self::from_http(HttpTarget::new(url))
    }

    /// A webhook over a configured HTTP target.
    pub fn from_http(http: HttpTarget) -> Self {
        Self {
            http,
            secret: None,
            signature_header: "x-webhook-signature".into(),
            timestamp_header: "x-webhook-timestamp".into(),
            event_type_header: "x-webhook-event".into(),
            event_type_map: HashMap::new(),
        }
    }

    /// Signs each request with this secret.
    #[must_use]
    pub fn secret(mut self, secret: impl Into<String>) -> Self {
        self.secret = Some(secret.into());
        self
    }

    /// Names the signature header (default `x-webhook-signature`).
    #[must_use]
    pub fn signature_header(mut self, name: impl Into<String>) -> Self {
        self.signature_header = name.into();
        self
    }

    /// Names the event type header (default `x-webhook-event`).
    #[must_use]
    pub fn event_type_header(mut self, name: impl Into<String>) -> Self {
        self.event_type_header = name.into();
        self
    }

    /// Sends `event` as the event type of signals of type `signal_type`.
    #[must_use]
    pub fn event_type(mut self, signal_type: impl Into<String>, event: impl Into<String>) -> Self {
        self.event_type_map.insert(signal_type.into(), event.into());
        self
    }

    /// Sets the HTTP method.
    #[must_use]
    pub fn method(mut self, method: HttpMethod) -> Self {
        self.http = self.http.method(method);
        self
    }

    /// Adds a header (generated headers still win).
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.http = self.http.header(name, value);
        self
    }

    /// Sets the timeout of each attempt.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.http = self.http.timeout(timeout);
        self
    }

    /// Sets the retry policy.
    #[must_use]
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.http = self.http.retry(retry);
        self
    }

    /// Uses this HTTP client.
    #[must_use]
    pub fn client(mut self, client: Client) -> Self {
        self.http = self.http.client(client);
        self
    }

    /// The lowercase hex HMAC-SHA256 of `"<timestamp>.<body>"` keyed by
    /// `secret`, as sent in the signature header.
    ///
    /// ```
    /// use jido::signal::dispatch::WebhookTarget;
    ///
    /// let sig = WebhookTarget::signature("secret", 1_700_000_000, b"{}");
    /// assert_eq!(sig.len(), 64);
    /// assert!(sig.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    /// ```
    pub fn signature(secret: &str, timestamp: u64, body: &[u8]) -> String {
        // HMAC takes keys of any length.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
            return String::new();
        };
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        hex::encode(mac.finalize().into_bytes())
    }
}

impl Dispatch for WebhookTarget {
    fn adapter(&self) -> &'static str {
        "webhook"
    }

    fn target(&self) -> String {
        strip_url(&self.http.url)
    }

    fn target_kind(&self) -> &'static str {
        "url"
    }

    fn validate(&self) -> Result<()> {
        self.http.check()?;
        let target = strip_url(&self.http.url);
        for name in [
            &self.signature_header,
            &self.timestamp_header,
            &self.event_type_header,
        ] {
            header_pair(name, "x", &target)?;
        }
        if self.secret.as_deref() == Some("") {
            return Err(invalid_options(
                "webhook secret is empty",
                &target,
                "secret",
            ));
        }
        Ok(())
    }

    fn circuit_key(&self) -> Option<String> {
        Some(format!("webhook:{}", strip_url(&self.http.url)))
    }

    fn deliver<'a>(&'a self, signal: &'a Signal) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let target = strip_url(&self.http.url);
            let body = self.http.body(signal);
            let timestamp = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let event = self
                .event_type_map
                .get(signal.ty())
                .map_or(signal.ty(), String::as_str);
            let mut generated = vec![
                header_pair(&self.timestamp_header, &timestamp.to_string(), &target)?,
                header_pair(&self.event_type_header, event, &target)
                    .map_err(|e| invalid_target(e.message().to_owned(), &target))?,
            ];
            if let Some(secret) = &self.secret {
                let signature = Self::signature(secret, timestamp, &body);
                generated.push(header_pair(&self.signature_header, &signature, &target)?);
            }
            self.http.send(body, generated).await
        })
    }
}
