//! Dispatch: delivering signals to targets.
//!
//! A [`DispatchConfig`] names one or more targets, each an adapter
//! implementing [`Dispatch`] with its options:
//!
//! | adapter | type | delivers to |
//! |---|---|---|
//! | `actor` | [`ActorTarget`](crate::server::ActorTarget) | any ractor actor (an `ActorRef<M>` with `M: From<Signal>`, or any [`SignalSink`](crate::server::SignalSink)) |
//! | `pg` | [`GroupTarget`](crate::server::GroupTarget) | every member of a `ractor::pg` process group |
//! | `channel` | [`ChannelTarget`] | a tokio mpsc channel |
//! | `logger` | [`LoggerTarget`] | a `tracing` event |
//! | `console` | [`ConsoleTarget`] | a line on stdout |
//! | `noop` | [`NoopTarget`] | nowhere |
//! | `http` | `HttpTarget` (feature `http`) | an HTTP POST/PUT/PATCH with retries |
//! | `webhook` | `WebhookTarget` (feature `http`) | HTTP plus an HMAC-SHA256 signature |
//!
//! Several targets are delivered concurrently (at most
//! [`MAX_CONCURRENCY`] at once), results in target order; a failing target
//! never stops the others. [`DispatchConfig::dispatch_batch`] sends many
//! signals ([`BATCH_CONCURRENCY`] at once).
//!
//! # Errors
//!
//! Every failure is a [`crate::Error`] whose `reason` detail says what
//! happened and whose `retry` detail says whether trying again may help
//! (jido_signal's rules: timeouts, connection failures, an open circuit and
//! HTTP 408/425/429/5xx are retryable, nothing else is):
//!
//! | reason | kind | retry |
//! |---|---|---|
//! | `invalid_target` | Dispatch (Configuration when building the config) | false |
//! | `target_not_alive` | NotFound | false |
//! | `timeout` | Timeout | true |
//! | `connection_failed` | Dispatch | true |
//! | `status_error` (+ `status`, `body`) | Dispatch | 408, 425, 429, 5xx |
//! | `circuit_open` | Dispatch | true |
//! | `exception` (the adapter panicked) | Dispatch | false |
//!
//! # Circuit breaker
//!
//! Adapters that name a [`Dispatch::circuit_key`] (HTTP and webhook, one
//! key per adapter and URL) are guarded by a circuit breaker: after
//! [`CircuitSettings::max_failures`] failed deliveries within the window
//! (Jido: 5 in 10 s) the next failure opens it, deliveries then fail fast
//! with `circuit_open` until it resets (30 s). Breakers live in a
//! [`CircuitBreakers`] registry: each `Jido` instance owns one, used by its
//! agents; [`DispatchConfig::dispatch`] uses the process-wide default
//! ([`CircuitBreakers::global`], read with [`circuit_state`]) and
//! [`DispatchConfig::dispatch_with`] the one it is given. Closed breakers
//! unused for [`CIRCUIT_IDLE_TTL`] are evicted.
//!
//! # Delivering at once
//!
//! In-process targets can take a signal without waiting
//! ([`Dispatch::deliver_now`]): an actor or agent (cast), a process group,
//! an unbounded channel or a bounded one with room, the logger, the
//! console, noop. The agent runtime delivers Emit directives to them
//! inside the agent's handler, in directive order; targets that must wait
//! (HTTP, webhook, synchronous actor delivery, a full bounded channel)
//! are delivered in a task.
//!
//! # Telemetry
//!
//! Each delivery emits `tracing` events named `jido.dispatch.start`,
//! `jido.dispatch.stop` and `jido.dispatch.exception` (target
//! `jido::dispatch`) with `adapter`, `signal_type`, `target` (URLs without
//! userinfo, query or fragment), `target_kind`, and on completion
//! `latency_ms`, `outcome`, `success`; exceptions add `error_type`,
//! `retryable` and `retry_count`. The breaker emits
//! `jido.dispatch.circuit.melt`, `.rejected` and `.reset`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
//! use jido::signal::Signal;
//! use jido::signal::dispatch::{ChannelTarget, DispatchConfig, LoggerTarget};
//!
//! let (tx, mut rx) = tokio::sync::mpsc::channel::<Signal>(8);
//! let config = DispatchConfig::new(ChannelTarget::new(tx))?
//!     .with(LoggerTarget::new())?;
//!
//! let signal = Signal::new("order.placed", serde_json::json!({"id": 1}));
//! config.dispatch(&signal).await?;
//! assert_eq!(rx.recv().await, Some(signal));
//! # Ok(()) }
//! ```

mod adapters;
mod circuit;
#[cfg(feature = "http")]
mod http;

pub use adapters::{ChannelTarget, ConsoleTarget, LogLevel, LoggerTarget, NoopTarget};
pub use circuit::{
    CIRCUIT_IDLE_TTL, CircuitBreakers, CircuitSettings, CircuitState, circuit_state, reset_circuit,
};
#[cfg(feature = "http")]
pub use http::{
    CLOUDEVENTS_JSON_CONTENT_TYPE, ContentMode, DEFAULT_HTTP_RETRY, DEFAULT_HTTP_TIMEOUT,
    DEFAULT_WEBHOOK_TOLERANCE, HttpMethod, HttpTarget, MAX_ATTEMPTS, MAX_HTTP_TIMEOUT,
    MAX_RETRY_DELAY, RetryPolicy, WebhookTarget, WebhookVerifier,
};

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, stream};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::signal::Signal;

/// How many targets of one config are delivered at once.
pub const MAX_CONCURRENCY: usize = 8;
/// How many signals of a batch are dispatched at once.
pub const BATCH_CONCURRENCY: usize = 5;
/// The default timeout of synchronous actor delivery and bounded channels.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// A dispatch adapter with its options: something that delivers signals
/// to one target.
///
/// Implement [`deliver`](Dispatch::deliver) and
/// [`adapter`](Dispatch::adapter); [`validate`](Dispatch::validate) checks
/// the options when the target is put in a [`DispatchConfig`].
///
/// ```
/// use futures::future::BoxFuture;
/// use jido::signal::Signal;
/// use jido::signal::dispatch::{Dispatch, DispatchConfig};
///
/// #[derive(Debug)]
/// struct Stdout;
/// impl Dispatch for Stdout {
///     fn adapter(&self) -> &'static str { "stdout" }
///     fn deliver<'a>(&'a self, signal: &'a Signal) -> BoxFuture<'a, jido::Result<()>> {
///         Box::pin(async move {
///             println!("{}", signal.ty());
///             Ok(())
///         })
///     }
/// }
/// let config = DispatchConfig::new(Stdout)?;
/// assert_eq!(config.len(), 1);
/// # Ok::<(), jido::Error>(())
/// ```
pub trait Dispatch: Send + Sync + fmt::Debug + 'static {
    /// The adapter's name (`"http"`, `"logger"`, …), for telemetry.
    fn adapter(&self) -> &'static str;

    /// The target, for telemetry and errors; must not reveal secrets
    /// (strip userinfo and queries from URLs).
    fn target(&self) -> String {
        String::new()
    }

    /// The kind of target (`"url"`, `"actor"`, `"group"`, …), for
    /// telemetry.
    fn target_kind(&self) -> &'static str {
        "custom"
    }

    /// Checks the options. Called by [`DispatchConfig::new`] and
    /// [`DispatchConfig::with`].
    ///
    /// # Errors
    ///
    /// A configuration error naming the bad option.
    fn validate(&self) -> Result<()> {
        Ok(())
    }

    /// The key of the circuit breaker guarding this target, if any.
    /// Targets with the same key share a breaker.
    fn circuit_key(&self) -> Option<String> {
        None
    }

    /// The settings of this target's circuit breaker.
    fn circuit_settings(&self) -> CircuitSettings {
        CircuitSettings::default()
    }

    /// Delivers `signal` at once when this target can take it without
    /// waiting: an in-process hand-over that never blocks (a cast to an
    /// actor, a send on an unbounded channel, a log line). `None` means the
    /// delivery has to wait (network I/O, a full bounded channel, a
    /// synchronous call): it then goes through
    /// [`deliver`](Dispatch::deliver), in a task.
    ///
    /// The agent runtime delivers an Emit to targets that answer `Some`
    /// inside the agent's handler, so such signals arrive in the order the
    /// agent emitted them and before anything the agent does next (its
    /// exit included). The default answers `None`.
    ///
    /// # Errors
    ///
    /// As [`deliver`](Dispatch::deliver).
    fn deliver_now(&self, signal: &Signal) -> Option<Result<()>> {
        let _ = signal;
        None
    }

    /// Delivers one signal.
    ///
    /// # Errors
    ///
    /// A [`crate::Error`] with `reason` and `retry` details (see the
    /// [module docs](self)).
    fn deliver<'a>(&'a self, signal: &'a Signal) -> BoxFuture<'a, Result<()>>;
}

/// Where and how to deliver a signal: one target or several. The default
/// (empty) config delivers nowhere and succeeds.
#[derive(Debug, Clone, Default)]
pub struct DispatchConfig {
    targets: Vec<Arc<dyn Dispatch>>,
}

impl DispatchConfig {
    /// A config with one target, after checking its options.
    ///
    /// # Errors
    ///
    /// The target's [`Dispatch::validate`] error.
    pub fn new(target: impl Dispatch) -> Result<Self> {
        Self::from_arc(Arc::new(target))
    }

    /// A config with one shared target, after checking its options.
    ///
    /// # Errors
    ///
    /// The target's [`Dispatch::validate`] error.
    pub fn from_arc(target: Arc<dyn Dispatch>) -> Result<Self> {
        target.validate()?;
        Ok(Self {
            targets: vec![target],
        })
    }

    /// A config that delivers nowhere ([`NoopTarget`]).
    pub fn noop() -> Self {
        Self {
            targets: vec![Arc::new(NoopTarget)],
        }
    }

    /// Adds another target, after checking its options.
    ///
    /// # Errors
    ///
    /// The target's [`Dispatch::validate`] error.
    pub fn with(mut self, target: impl Dispatch) -> Result<Self> {
        let target: Arc<dyn Dispatch> = Arc::new(target);
        target.validate()?;
        self.targets.push(target);
        Ok(self)
    }

    /// All the targets of several configs, in order.
    pub fn many(configs: impl IntoIterator<Item = DispatchConfig>) -> Self {
        Self {
            targets: configs.into_iter().flat_map(|c| c.targets).collect(),
        }
    }

    /// The targets, in order.
    pub fn targets(&self) -> &[Arc<dyn Dispatch>] {
        &self.targets
    }

    /// The number of targets.
    pub fn len(&self) -> usize {
        self.targets.len()
    }

    /// Whether there are no targets.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// Delivers `signal` to every target ([`MAX_CONCURRENCY`] at once).
    ///
    /// # Errors
    ///
    /// With one target, that target's error. With several, an
    /// [`ErrorKind::Dispatch`](crate::ErrorKind::Dispatch) error `dispatch failed for N of M targets`
    /// whose `failures` detail lists `{index, error}` (the error's
    /// envelope) for each failed target, in order; it is retryable when
    /// any failure is. The other targets are delivered all the same.
    ///
    /// Circuit breakers are those of the process-wide
    /// [default registry](CircuitBreakers::global); see
    /// [`dispatch_with`](DispatchConfig::dispatch_with).
    pub async fn dispatch(&self, signal: &Signal) -> Result<()> {
        self.dispatch_with(signal, CircuitBreakers::global()).await
    }

    /// As [`dispatch`](DispatchConfig::dispatch), with the circuit
    /// breakers of `breakers` (e.g. a `Jido` instance's,
    /// [`Jido::circuit_breakers`](crate::server::Jido::circuit_breakers)).
    ///
    /// # Errors
    ///
    /// As [`dispatch`](DispatchConfig::dispatch).
    pub async fn dispatch_with(&self, signal: &Signal, breakers: &CircuitBreakers) -> Result<()> {
        if let [target] = self.targets.as_slice() {
            return deliver_with(target.as_ref(), signal, breakers).await;
        }
        let results = self.dispatch_each_with(signal, breakers).await;
        aggregate(results, "targets")
    }

    /// Delivers `signal` to every target and returns each target's result,
    /// in target order (circuit breakers of the
    /// [default registry](CircuitBreakers::global)).
    pub async fn dispatch_each(&self, signal: &Signal) -> Vec<Result<()>> {
        self.dispatch_each_with(signal, CircuitBreakers::global())
            .await
    }

    /// As [`dispatch_each`](DispatchConfig::dispatch_each), with the circuit
    /// breakers of `breakers`.
    pub async fn dispatch_each_with(
        &self,
        signal: &Signal,
        breakers: &CircuitBreakers,
    ) -> Vec<Result<()>> {
        // Boxed and collected first: a stream over a closure held across
        // an await trips rustc's higher-ranked lifetime check in spawned
        // tasks.
        let deliveries: Vec<BoxFuture<'_, Result<()>>> = self
            .targets
            .iter()
            .map(|t| deliver_with(t.as_ref(), signal, breakers).boxed())
            .collect();
        stream::iter(deliveries)
            .buffered(MAX_CONCURRENCY)
            .collect()
            .await
    }

    /// Delivers `signal` at once to every target that can take it without
    /// waiting ([`Dispatch::deliver_now`]), in target order, and returns
    /// their errors (with the target's index) and the config of the other
    /// targets, to deliver in a task (empty when every target was served).
    pub(crate) fn deliver_now_with(
        &self,
        signal: &Signal,
        breakers: &CircuitBreakers,
    ) -> (Vec<(usize, Error)>, DispatchConfig) {
        let mut errors = Vec::new();
        let mut later = Vec::new();
        for (index, target) in self.targets.iter().enumerate() {
            match deliver_now_with(target.as_ref(), signal, breakers) {
                Some(Ok(())) => {}
                Some(Err(err)) => errors.push((index, err)),
                None => later.push(Arc::clone(target)),
            }
        }
        (errors, DispatchConfig { targets: later })
    }

    /// Dispatches `signal` in a spawned task.
    pub fn dispatch_async(&self, signal: Signal) -> JoinHandle<Result<()>> {
        let config = self.clone();
        tokio::spawn(async move { config.dispatch(&signal).await })
    }

    /// Dispatches every signal ([`BATCH_CONCURRENCY`] at once).
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::Dispatch`](crate::ErrorKind::Dispatch) error `dispatch failed for N of M
    /// signals` whose `failures` detail lists `{index, error}` for each
    /// signal that failed (index into `signals`). The other signals are
    /// dispatched all the same.
    pub async fn dispatch_batch(&self, signals: &[Signal]) -> Result<()> {
        let results = self.dispatch_batch_each(signals).await;
        aggregate(results, "signals")
    }

    /// Dispatches every signal and returns each signal's result, in order.
    pub async fn dispatch_batch_each(&self, signals: &[Signal]) -> Vec<Result<()>> {
        let dispatches: Vec<BoxFuture<'_, Result<()>>> =
            signals.iter().map(|s| self.dispatch(s).boxed()).collect();
        stream::iter(dispatches)
            .buffered(BATCH_CONCURRENCY)
            .collect()
            .await
    }
}

fn aggregate(results: Vec<Result<()>>, what: &str) -> Result<()> {
    let total = results.len();
    let failures: Vec<(usize, Error)> = results
        .into_iter()
        .enumerate()
        .filter_map(|(i, r)| r.err().map(|e| (i, e)))
        .collect();
    if failures.is_empty() {
        return Ok(());
    }
    let retry = failures.iter().any(|(_, e)| e.retryable());
    let listed: Vec<Value> = failures
        .iter()
        .map(|(index, e)| json!({"index": index, "error": e.to_envelope()}))
        .collect();
    Err(Error::dispatch(format!(
        "dispatch failed for {} of {total} {what}",
        failures.len()
    ))
    .with_detail("reason", "partial_failure")
    .with_detail("failures", listed)
    .with_detail("retry", retry))
}

/// Delivers one signal to one target: circuit breaker (of the
/// [default registry](CircuitBreakers::global)), panic guard and
/// telemetry around [`Dispatch::deliver`].
///
/// # Errors
///
/// The target's error, `circuit_open` while its breaker is open, or
/// `exception` when it panicked.
pub async fn deliver(target: &dyn Dispatch, signal: &Signal) -> Result<()> {
    deliver_with(target, signal, CircuitBreakers::global()).await
}

/// As [`deliver`], with the circuit breakers of `breakers`.
///
/// # Errors
///
/// As [`deliver`].
pub async fn deliver_with(
    target: &dyn Dispatch,
    signal: &Signal,
    breakers: &CircuitBreakers,
) -> Result<()> {
    let started = Instant::now();
    start_event(target, signal);
    let circuit = target
        .circuit_key()
        .map(|key| (key, target.circuit_settings()));
    let result = match &circuit {
        Some((key, settings)) => match breakers.check(key, target.adapter(), settings) {
            Err(err) => Err(err),
            Ok(()) => {
                let result = guarded(target, signal).await;
                if result.is_err() {
                    breakers.record_failure(key, target.adapter(), settings);
                }
                result
            }
        },
        None => guarded(target, signal).await,
    };
    stop_event(target, signal, started, &result);
    result
}

/// As [`deliver_with`], at once: `None` when the target cannot take the
/// signal without waiting ([`Dispatch::deliver_now`]), then nothing
/// happened (no telemetry, no failure counted). An open breaker answers
/// `circuit_open` at once for any target.
///
/// # Errors
///
/// As [`deliver`].
pub fn deliver_now_with(
    target: &dyn Dispatch,
    signal: &Signal,
    breakers: &CircuitBreakers,
) -> Option<Result<()>> {
    let started = Instant::now();
    let circuit = target
        .circuit_key()
        .map(|key| (key, target.circuit_settings()));
    if let Some((key, settings)) = &circuit
        && let Err(err) = breakers.check(key, target.adapter(), settings)
    {
        let result = Err(err);
        start_event(target, signal);
        stop_event(target, signal, started, &result);
        return Some(result);
    }
    let result = match catch_unwind(AssertUnwindSafe(|| target.deliver_now(signal))) {
        Ok(None) => return None,
        Ok(Some(result)) => result,
        Err(panic) => Err(adapter_panicked(target, &*panic)),
    };
    if result.is_err()
        && let Some((key, settings)) = &circuit
    {
        breakers.record_failure(key, target.adapter(), settings);
    }
    start_event(target, signal);
    stop_event(target, signal, started, &result);
    Some(result)
}

fn start_event(target: &dyn Dispatch, signal: &Signal) {
    let adapter = target.adapter();
    let target_name = target.target();
    let target_kind = target.target_kind();
    let signal_type = signal.ty();
    tracing::debug!(
        name: "jido.dispatch.start",
        target: "jido::dispatch",
        adapter,
        runtime_surface = "dispatch",
        signal_type,
        signal_id = signal.id(),
        target = %target_name,
        target_kind,
        "jido.dispatch.start"
    );
}

fn stop_event(target: &dyn Dispatch, signal: &Signal, started: Instant, result: &Result<()>) {
    let adapter = target.adapter();
    let target_name = target.target();
    let target_kind = target.target_kind();
    let signal_type = signal.ty();
    let latency_ms = started.elapsed().as_millis() as u64;
    match result {
        Ok(()) => tracing::debug!(
            name: "jido.dispatch.stop",
            target: "jido::dispatch",
            adapter,
            runtime_surface = "dispatch",
            signal_type,
            target = %target_name,
            target_kind,
            latency_ms,
            outcome = "ok",
            success = true,
            "jido.dispatch.stop"
        ),
        Err(err) => {
            let retry_count = err
                .detail("attempts")
                .and_then(Value::as_u64)
                .map_or(0, |a| a.saturating_sub(1));
            let reason = err.detail("reason").and_then(Value::as_str).unwrap_or("");
            tracing::warn!(
                name: "jido.dispatch.exception",
                target: "jido::dispatch",
                adapter,
                runtime_surface = "dispatch",
                signal_type,
                target = %target_name,
                target_kind,
                latency_ms,
                outcome = "error",
                success = false,
                retry_count,
                error_type = err.kind().as_str(),
                reason,
                retryable = err.retryable(),
                error = %err,
                "jido.dispatch.exception"
            );
        }
    }
}

async fn guarded(target: &dyn Dispatch, signal: &Signal) -> Result<()> {
    match AssertUnwindSafe(target.deliver(signal))
        .catch_unwind()
        .await
    {
        Ok(result) => result,
        Err(panic) => Err(adapter_panicked(target, &*panic)),
    }
}

fn adapter_panicked(target: &dyn Dispatch, panic: &(dyn std::any::Any + Send)) -> Error {
    let message = crate::executor::panic_message(panic);
    Error::dispatch(format!("dispatch adapter {} panicked", target.adapter()))
        .with_detail("reason", "exception")
        .with_detail("panic", message)
        .with_detail("target", target.target())
        .with_detail("retry", false)
}

/// `invalid_target` at delivery: the target cannot take the signal (e.g.
/// an actor of another message type). An
/// [`ErrorKind::Dispatch`](crate::ErrorKind::Dispatch) error (not
/// retryable).
pub fn invalid_target(message: impl Into<String>, target: &str) -> Error {
    Error::dispatch(message.into())
        .with_detail("reason", "invalid_target")
        .with_detail("target", target)
        .with_detail("retry", false)
}

/// `invalid_target` when checking options ([`Dispatch::validate`]): an
/// [`ErrorKind::Configuration`](crate::ErrorKind::Configuration) error (not
/// retryable) naming the `option`.
pub fn invalid_options(message: impl Into<String>, target: &str, option: &str) -> Error {
    Error::configuration(message.into())
        .with_detail("reason", "invalid_target")
        .with_detail("target", target)
        .with_detail("option", option)
        .with_detail("retry", false)
}

/// `target_not_alive`: the target actor, group member or channel is gone.
/// An [`ErrorKind::NotFound`](crate::ErrorKind::NotFound) error (not retryable).
pub fn target_not_alive(target: &str) -> Error {
    Error::not_found("dispatch target is not alive")
        .with_detail("reason", "target_not_alive")
        .with_detail("target", target)
        .with_detail("retry", false)
}

/// `timeout`: delivery took longer than `after`. An
/// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) error (retryable).
pub fn timeout(target: &str, after: Duration) -> Error {
    Error::timeout(format!("dispatch timed out after {}ms", after.as_millis()))
        .with_detail("reason", "timeout")
        .with_detail("target", target)
        .with_detail("timeout_ms", after.as_millis() as u64)
        .with_detail("retry", true)
}

/// `circuit_open`: the target's circuit breaker is open. An
/// [`ErrorKind::Dispatch`](crate::ErrorKind::Dispatch) error (retryable).
pub fn circuit_open(key: &str) -> Error {
    Error::dispatch("circuit breaker is open")
        .with_detail("reason", "circuit_open")
        .with_detail("circuit", key)
        .with_detail("retry", true)
}

/// Whether a failed HTTP status is worth retrying (jido_signal: 408, 425,
/// 429 and 5xx).
pub fn status_retryable(status: u16) -> bool {
    matches!(status, 408 | 425 | 429 | 500..=599)
}

/// `status_error`: the target answered with a non-2xx status. An
/// [`ErrorKind::Dispatch`](crate::ErrorKind::Dispatch) error, retryable for 408, 425, 429 and 5xx.
pub fn status_error(target: &str, status: u16, body: impl Into<String>) -> Error {
    Error::dispatch(format!("http status {status}"))
        .with_detail("reason", "status_error")
        .with_detail("status", status)
        .with_detail("body", body.into())
        .with_detail("target", target)
        .with_detail("retry", status_retryable(status))
}

/// Whether `err` is a dispatch error with this `reason` detail.
pub fn has_reason(err: &Error, reason: &str) -> bool {
    err.detail("reason").and_then(Value::as_str) == Some(reason)
}
