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
pub use crate::executor::RetryPolicy;
use crate::signal::Signal;
use crate::signal::http::{Encoded, encode_binary, encode_structured};
pub use crate::signal::{CLOUDEVENTS_JSON_CONTENT_TYPE, ContentMode};

/// The default timeout of one HTTP request.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest timeout an HTTP target accepts.
pub const MAX_HTTP_TIMEOUT: Duration = Duration::from_secs(60);
/// The most attempts (first try included) an HTTP target's [`RetryPolicy`] accepts.
pub const MAX_ATTEMPTS: u32 = 10;
/// The longest delay an HTTP target's [`RetryPolicy`] accepts.
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

/// The retry policy of HTTP targets unless they set one: Jido's 3 attempts
/// (2 retries), 1 s doubling to a 5 s cap.
pub const DEFAULT_HTTP_RETRY: RetryPolicy =
    RetryPolicy::new(2, Duration::from_millis(1000), Duration::from_millis(5000));

fn validate_retry(retry: &RetryPolicy, target: &str) -> Result<()> {
    if retry.max_retries >= MAX_ATTEMPTS {
        return Err(invalid_options(
            format!("retry attempts exceed {MAX_ATTEMPTS}"),
            target,
            "retry",
        ));
    }
    if retry.backoff > MAX_RETRY_DELAY || retry.max_backoff > MAX_RETRY_DELAY {
        return Err(invalid_options(
            format!("retry delay exceeds {}ms", MAX_RETRY_DELAY.as_millis()),
            target,
            "retry",
        ));
    }
    if retry.max_backoff < retry.backoff {
        return Err(invalid_options(
            "retry max_backoff must be at least backoff",
            target,
            "retry",
        ));
    }
    Ok(())
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

/// POSTs (or PUTs, PATCHes) each signal to a URL as a CloudEvent, in the
/// CloudEvents HTTP binding (Jido's `:http` adapter).
///
/// **Wire format.** By default a request is a *structured* CloudEvent:
/// `content-type: application/cloudevents+json; charset=utf-8`, the body
/// the event's JSON with `specversion` `"1.0"`, which every CloudEvents SDK
/// accepts. [`content_mode(ContentMode::Binary)`](HttpTarget::content_mode)
/// sends *binary* mode instead: `ce-*` headers for the attributes and
/// extensions, `content-type` = the event's `datacontenttype`, the data as
/// the body. [`jido_specversion(true)`](HttpTarget::jido_specversion)
/// writes Jido's `"1.0.2"` for Elixir Jido peers (in structured mode with
/// Jido's `content-type: application/json`, byte for byte what Jido
/// sends). Receivers read every one of these with [`Signal::from_http`].
///
/// Options and defaults: method POST, no extra headers, timeout 5 s (at
/// most 60 s), [`DEFAULT_HTTP_RETRY`] (3 attempts, 1 s doubling to 5 s).
/// A 2xx answer is a success; anything else fails with `status_error`
/// (`status`, first 4 KiB of `body`). Redirects are not followed.
/// Generated headers (`content-type` and, in binary mode, `ce-*`) override
/// the caller's; a caller's `content-type` is never sent. The URL must be
/// http or https with a host and no userinfo or whitespace. A circuit
/// breaker guards each URL (key `http:<url>`).
///
/// ```
/// use std::time::Duration;
/// use jido::signal::dispatch::{ContentMode, DispatchConfig, HttpMethod, HttpTarget, RetryPolicy};
///
/// let config = DispatchConfig::new(
///     HttpTarget::new("https://example.com/events")
///         .method(HttpMethod::Put)
///         .header("authorization", "Bearer t0k3n")
///         .timeout(Duration::from_secs(2))
///         .retry(RetryPolicy::new(5, Duration::from_millis(200), Duration::from_secs(2))),
/// )?;
///
/// // Binary mode, and Jido's "1.0.2" for an Elixir Jido peer:
/// let binary = HttpTarget::new("https://example.com/events").content_mode(ContentMode::Binary);
/// let jido_peer = HttpTarget::new("https://jido.example.com/signals").jido_specversion(true);
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
    mode: ContentMode,
    jido: bool,
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
            .field("mode", &self.mode)
            .field("jido_specversion", &self.jido)
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
            retry: DEFAULT_HTTP_RETRY,
            mode: ContentMode::Structured,
            jido: false,
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

    /// Sets the retry policy: at most 9 retries (10 attempts), delays at
    /// most 60 s, `max_backoff >= backoff`; checked when the config is
    /// built. [`RetryPolicy::none`] sends once.
    #[must_use]
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the CloudEvents content mode (default
    /// [`ContentMode::Structured`]).
    #[must_use]
    pub fn content_mode(mut self, mode: ContentMode) -> Self {
        self.mode = mode;
        self
    }

    /// With `true`, writes Jido's `specversion` `"1.0.2"` instead of the
    /// CloudEvents specification's `"1.0"` (default `false`), for Elixir
    /// Jido peers; in structured mode the `content-type` is then Jido's
    /// `application/json`. CloudEvents SDKs refuse such requests.
    #[must_use]
    pub fn jido_specversion(mut self, yes: bool) -> Self {
        self.jido = yes;
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

    /// The generated headers and the body of `signal`'s request.
    fn encode(&self, signal: &Signal) -> Result<Encoded> {
        match self.mode {
            ContentMode::Structured => Ok(encode_structured(signal, self.jido)),
            ContentMode::Binary => encode_binary(signal, self.jido).map_err(|e| {
                invalid_target(e.message().to_owned(), &strip_url(&self.url)).with_source(e)
            }),
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
        validate_retry(&self.retry, &target)?;
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
        headers.remove(CONTENT_TYPE);
        for (n, v) in generated {
            headers.insert(n, v);
        }
        let client = self.get_client()?;
        let mut delays = self.retry.delays();
        let mut attempt = 1;
        loop {
            match self
                .attempt(&client, headers.clone(), body.clone(), &target)
                .await
            {
                Ok(()) => return Ok(()),
                Err(err) => {
                    let next = if err.retryable() { delays.next() } else { None };
                    let Some(delay) = next else {
                        return Err(err.with_detail("attempts", attempt));
                    };
                    tracing::debug!(
                        target: "jido::dispatch",
                        url = %target,
                        attempt,
                        max_retries = self.retry.max_retries,
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
        Box::pin(async move {
            let (generated, body) = self.encode(signal)?;
            self.send(body, generated).await
        })
    }
}

/// HTTP delivery plus webhook headers (Jido's `:webhook` adapter).
///
/// Each delivery sends `x-webhook-timestamp` (unix seconds),
/// `x-webhook-event` (the signal type, or its entry in the event type
/// map) and, with a secret, `x-webhook-signature`: the lowercase hex
/// HMAC-SHA256 of `"<timestamp>.<body>"` keyed by the secret. These
/// generated headers override the caller's. HTTP options, the wire format
/// (structured CloudEvents by default) and validation are those of
/// [`HttpTarget`]; the circuit key is `webhook:<url>`. Receivers check
/// requests with [`WebhookVerifier`] and read them with
/// [`Signal::from_http`].
///
/// The signature covers the body only. In structured mode (the default)
/// that is the whole event; in [`ContentMode::Binary`] the `ce-*` headers
/// (type, source, extensions…) are **not** signed, so prefer structured
/// mode when the receiver relies on them.
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

    /// Names the timestamp header (default `x-webhook-timestamp`).
    #[must_use]
    pub fn timestamp_header(mut self, name: impl Into<String>) -> Self {
        self.timestamp_header = name.into();
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

    /// Sets the CloudEvents content mode; see [`HttpTarget::content_mode`].
    #[must_use]
    pub fn content_mode(mut self, mode: ContentMode) -> Self {
        self.http = self.http.content_mode(mode);
        self
    }

    /// Writes Jido's `"1.0.2"`; see [`HttpTarget::jido_specversion`].
    #[must_use]
    pub fn jido_specversion(mut self, yes: bool) -> Self {
        self.http = self.http.jido_specversion(yes);
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
            let (mut generated, body) = self.http.encode(signal)?;
            let timestamp = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let event = self
                .event_type_map
                .get(signal.ty())
                .map_or(signal.ty(), String::as_str);
            generated.push(header_pair(
                &self.timestamp_header,
                &timestamp.to_string(),
                &target,
            )?);
            generated.push(
                header_pair(&self.event_type_header, event, &target)
                    .map_err(|e| invalid_target(e.message().to_owned(), &target))?,
            );
            if let Some(secret) = &self.secret {
                let signature = Self::signature(secret, timestamp, &body);
                generated.push(header_pair(&self.signature_header, &signature, &target)?);
            }
            self.http.send(body, generated).await
        })
    }
}

/// How far a webhook's timestamp may be from the receiver's clock unless
/// a [`WebhookVerifier`] sets otherwise: 5 minutes.
pub const DEFAULT_WEBHOOK_TOLERANCE: Duration = Duration::from_secs(300);

/// Checks the signature a [`WebhookTarget`] writes, on the receiving end.
///
/// [`verify`](WebhookVerifier::verify) reads the timestamp and signature
/// headers (by default `x-webhook-timestamp` and `x-webhook-signature`),
/// recomputes the HMAC-SHA256 of `"<timestamp>.<body>"` with the shared
/// secret and compares it in constant time, then refuses timestamps more
/// than the tolerance ([`DEFAULT_WEBHOOK_TOLERANCE`]) away from now, so a
/// captured request cannot be replayed later. Pass the body exactly as
/// received, before any parsing.
///
/// ```
/// use jido::signal::dispatch::{WebhookTarget, WebhookVerifier};
/// use reqwest::header::{HeaderMap, HeaderValue};
///
/// let body = br#"{"specversion":"1.0"}"#;
/// let now = 1_700_000_000;
/// let mut headers = HeaderMap::new();
/// headers.insert("x-webhook-timestamp", HeaderValue::from(now));
/// let sig = WebhookTarget::signature("s3cret", now, body);
/// headers.insert("x-webhook-signature", HeaderValue::from_str(&sig).unwrap());
///
/// let verifier = WebhookVerifier::new("s3cret");
/// verifier.verify_at(&headers, body, now + 10)?;
///
/// let err = verifier.verify_at(&headers, b"{}", now).unwrap_err();
/// assert_eq!(err.message(), "webhook signature mismatch");
/// let err = verifier.verify_at(&headers, body, now + 301).unwrap_err();
/// assert_eq!(err.message(), "webhook timestamp outside tolerance");
/// # Ok::<(), jido::Error>(())
/// ```
#[derive(Clone)]
pub struct WebhookVerifier {
    secret: String,
    tolerance: Duration,
    signature_header: String,
    timestamp_header: String,
}

impl fmt::Debug for WebhookVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookVerifier")
            .field("secret", &"[REDACTED]")
            .field("tolerance", &self.tolerance)
            .field("signature_header", &self.signature_header)
            .field("timestamp_header", &self.timestamp_header)
            .finish()
    }
}

fn rejected(message: impl Into<String>, reason: &'static str) -> Error {
    Error::validation(message.into()).with_detail("reason", reason)
}

impl WebhookVerifier {
    /// A verifier for requests signed with `secret`, with the default
    /// header names and tolerance.
    pub fn new(secret: impl Into<String>) -> Self {
        Self {
            secret: secret.into(),
            tolerance: DEFAULT_WEBHOOK_TOLERANCE,
            signature_header: "x-webhook-signature".into(),
            timestamp_header: "x-webhook-timestamp".into(),
        }
    }

    /// Sets how far (either way) the timestamp may be from now.
    #[must_use]
    pub fn tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// Names the signature header (as in [`WebhookTarget::signature_header`]).
    #[must_use]
    pub fn signature_header(mut self, name: impl Into<String>) -> Self {
        self.signature_header = name.into();
        self
    }

    /// Names the timestamp header (as in [`WebhookTarget::timestamp_header`]).
    #[must_use]
    pub fn timestamp_header(mut self, name: impl Into<String>) -> Self {
        self.timestamp_header = name.into();
        self
    }

    /// Verifies a request received now (the system clock).
    ///
    /// # Errors
    ///
    /// As [`verify_at`](WebhookVerifier::verify_at).
    pub fn verify(&self, headers: &HeaderMap, body: &[u8]) -> Result<()> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.verify_at(headers, body, now)
    }

    /// Verifies a request as if received at `now` (unix seconds).
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::Validation`](crate::ErrorKind::Validation) error
    /// whose `reason` detail says why: `missing_header` ("missing webhook
    /// header NAME", detail `header`), `malformed_header` ("malformed
    /// webhook header NAME": more than one value, a timestamp that is not
    /// unix seconds, a signature that is not 64 hex digits),
    /// `bad_signature` ("webhook signature mismatch"), `stale_timestamp`
    /// ("webhook timestamp outside tolerance", details `timestamp`, `now`,
    /// `tolerance_secs`; checked after the signature, so it means an
    /// authentic but old or future-dated request). An empty secret is a
    /// [`ErrorKind::Configuration`](crate::ErrorKind::Configuration) error
    /// "webhook secret is empty".
    pub fn verify_at(&self, headers: &HeaderMap, body: &[u8], now: u64) -> Result<()> {
        if self.secret.is_empty() {
            return Err(Error::configuration("webhook secret is empty"));
        }
        let timestamp_text = self.header(headers, &self.timestamp_header)?;
        let signature_text = self.header(headers, &self.signature_header)?;
        let malformed = |name: &str| {
            rejected(
                format!("malformed webhook header {name}"),
                "malformed_header",
            )
            .with_detail("header", name)
        };
        let timestamp: u64 = if timestamp_text.bytes().all(|b| b.is_ascii_digit()) {
            timestamp_text
                .parse()
                .map_err(|_| malformed(&self.timestamp_header))?
        } else {
            return Err(malformed(&self.timestamp_header));
        };
        if signature_text.len() != 64 {
            return Err(malformed(&self.signature_header));
        }
        let signature =
            hex::decode(signature_text).map_err(|_| malformed(&self.signature_header))?;
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(self.secret.as_bytes()) else {
            return Err(Error::internal("could not key the webhook hmac"));
        };
        mac.update(timestamp_text.as_bytes());
        mac.update(b".");
        mac.update(body);
        // `verify_slice` compares in constant time.
        if mac.verify_slice(&signature).is_err() {
            return Err(rejected("webhook signature mismatch", "bad_signature"));
        }
        if now.abs_diff(timestamp) > self.tolerance.as_secs() {
            return Err(
                rejected("webhook timestamp outside tolerance", "stale_timestamp")
                    .with_detail("timestamp", timestamp)
                    .with_detail("now", now)
                    .with_detail("tolerance_secs", self.tolerance.as_secs()),
            );
        }
        Ok(())
    }

    /// The single value of header `name`, as visible ASCII.
    fn header<'h>(&self, headers: &'h HeaderMap, name: &str) -> Result<&'h str> {
        let malformed = || {
            rejected(
                format!("malformed webhook header {name}"),
                "malformed_header",
            )
            .with_detail("header", name)
        };
        let mut values = headers.get_all(name).iter();
        let Some(value) = values.next() else {
            return Err(
                rejected(format!("missing webhook header {name}"), "missing_header")
                    .with_detail("header", name),
            );
        };
        if values.next().is_some() {
            return Err(malformed());
        }
        value.to_str().map_err(|_| malformed())
    }
}
