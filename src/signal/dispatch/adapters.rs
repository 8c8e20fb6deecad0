//! The plain adapters: noop, logger, console and tokio channels.

use std::fmt;
use std::io::Write;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::mpsc;

use super::{DEFAULT_TIMEOUT, Dispatch, invalid_options, target_not_alive, timeout};
use crate::error::{Error, Result};
use crate::signal::Signal;

/// Delivers nowhere and succeeds (Jido's `:noop`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopTarget;

impl Dispatch for NoopTarget {
    fn adapter(&self) -> &'static str {
        "noop"
    }

    fn target_kind(&self) -> &'static str {
        "noop"
    }

    fn deliver_now(&self, _signal: &Signal) -> Option<Result<()>> {
        Some(Ok(()))
    }

    fn deliver<'a>(&'a self, _signal: &'a Signal) -> BoxFuture<'a, Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// The level of a [`LoggerTarget`] event.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogLevel {
    /// `TRACE`.
    Trace,
    /// `DEBUG`.
    Debug,
    /// `INFO` (the default).
    #[default]
    Info,
    /// `WARN` (Jido's `:warning`).
    Warn,
    /// `ERROR`.
    Error,
}

/// The text Jido logs for a signal: `SIGNAL: <type> from <source>` and, with
/// data, ` with data=<json>`.
fn signal_line(signal: &Signal, include_data: bool) -> String {
    match signal.data() {
        Some(data) if include_data => format!(
            "SIGNAL: {} from {} with data={}",
            signal.ty(),
            signal.source(),
            data
        ),
        _ => format!("SIGNAL: {} from {}", signal.ty(), signal.source()),
    }
}

/// Logs each signal as a `tracing` event (target `jido::dispatch::logger`).
///
/// Options (Jido's defaults): `level` info, `structured` false,
/// `include_data` true. Unstructured events carry the message `SIGNAL:
/// <type> from <source> with data=<json>`; structured ones carry the
/// fields `signal_id`, `signal_type`, `signal_source`, `subject` and
/// `data`, with the message `signal dispatched`.
///
/// ```
/// use jido::signal::dispatch::{DispatchConfig, LogLevel, LoggerTarget};
///
/// let config = DispatchConfig::new(
///     LoggerTarget::new().level(LogLevel::Debug).structured(true).include_data(false),
/// )?;
/// # Ok::<(), jido::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct LoggerTarget {
    level: LogLevel,
    structured: bool,
    include_data: bool,
}

impl Default for LoggerTarget {
    fn default() -> Self {
        Self {
            level: LogLevel::Info,
            structured: false,
            include_data: true,
        }
    }
}

impl LoggerTarget {
    /// A logger target with the defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the level.
    #[must_use]
    pub fn level(mut self, level: LogLevel) -> Self {
        self.level = level;
        self
    }

    /// Logs fields instead of a formatted line.
    #[must_use]
    pub fn structured(mut self, structured: bool) -> Self {
        self.structured = structured;
        self
    }

    /// Includes the data (default true).
    #[must_use]
    pub fn include_data(mut self, include_data: bool) -> Self {
        self.include_data = include_data;
        self
    }
}

macro_rules! log_at {
    ($level:expr, $($rest:tt)*) => {
        match $level {
            LogLevel::Trace => tracing::trace!(target: "jido::dispatch::logger", $($rest)*),
            LogLevel::Debug => tracing::debug!(target: "jido::dispatch::logger", $($rest)*),
            LogLevel::Info => tracing::info!(target: "jido::dispatch::logger", $($rest)*),
            LogLevel::Warn => tracing::warn!(target: "jido::dispatch::logger", $($rest)*),
            LogLevel::Error => tracing::error!(target: "jido::dispatch::logger", $($rest)*),
        }
    };
}

impl LoggerTarget {
    fn log(&self, signal: &Signal) -> Result<()> {
        if self.structured {
            let data = if self.include_data {
                signal.data().map(ToString::to_string)
            } else {
                None
            };
            log_at!(
                self.level,
                signal_id = signal.id(),
                signal_type = signal.ty(),
                signal_source = signal.source(),
                subject = signal.subject(),
                data = data.as_deref(),
                "signal dispatched"
            );
        } else {
            let line = signal_line(signal, self.include_data);
            log_at!(self.level, "{line}");
        }
        Ok(())
    }
}

impl Dispatch for LoggerTarget {
    fn adapter(&self) -> &'static str {
        "logger"
    }

    fn target_kind(&self) -> &'static str {
        "log"
    }

    fn deliver_now(&self, signal: &Signal) -> Option<Result<()>> {
        Some(self.log(signal))
    }

    fn deliver<'a>(&'a self, signal: &'a Signal) -> BoxFuture<'a, Result<()>> {
        let result = self.log(signal);
        Box::pin(async move { result })
    }
}

/// Prints each signal as a line on stdout: `SIGNAL: <type> from <source>
/// with data=<json>` (`include_data` true by default).
#[derive(Debug, Clone, Copy)]
pub struct ConsoleTarget {
    include_data: bool,
}

impl Default for ConsoleTarget {
    fn default() -> Self {
        Self { include_data: true }
    }
}

impl ConsoleTarget {
    /// A console target with the defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Includes the data (default true).
    #[must_use]
    pub fn include_data(mut self, include_data: bool) -> Self {
        self.include_data = include_data;
        self
    }

    /// The line printed for `signal`.
    ///
    /// ```
    /// use jido::signal::{Signal, dispatch::ConsoleTarget};
    ///
    /// let s = Signal::builder("a.b").source("/src").data(serde_json::json!({"x": 1})).build()?;
    /// assert_eq!(ConsoleTarget::new().line(&s), r#"SIGNAL: a.b from /src with data={"x":1}"#);
    /// assert_eq!(ConsoleTarget::new().include_data(false).line(&s), "SIGNAL: a.b from /src");
    /// # Ok::<(), jido::Error>(())
    /// ```
    pub fn line(&self, signal: &Signal) -> String {
        signal_line(signal, self.include_data)
    }

    fn print(&self, signal: &Signal) -> Result<()> {
        let line = self.line(signal);
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}").map_err(|e| {
            Error::dispatch("could not write to stdout")
                .with_detail("reason", "io_error")
                .with_detail("retry", false)
                .with_source(e)
        })
    }
}

impl Dispatch for ConsoleTarget {
    fn adapter(&self) -> &'static str {
        "console"
    }

    fn target_kind(&self) -> &'static str {
        "stdout"
    }

    fn deliver_now(&self, signal: &Signal) -> Option<Result<()>> {
        Some(self.print(signal))
    }

    fn deliver<'a>(&'a self, signal: &'a Signal) -> BoxFuture<'a, Result<()>> {
        let result = self.print(signal);
        Box::pin(async move { result })
    }
}

enum Sender<M> {
    Bounded(mpsc::Sender<M>),
    Unbounded(mpsc::UnboundedSender<M>),
}

impl<M> Clone for Sender<M> {
    fn clone(&self) -> Self {
        match self {
            Sender::Bounded(s) => Sender::Bounded(s.clone()),
            Sender::Unbounded(s) => Sender::Unbounded(s.clone()),
        }
    }
}

/// Sends each signal (converted with `M: From<Signal>`) into a tokio mpsc
/// channel, for applications that embed the runtime.
///
/// A bounded channel waits for room at most `timeout` (default 5 s), then
/// fails with `timeout`; a closed channel fails with `target_not_alive`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::signal::{Signal, dispatch::{ChannelTarget, DispatchConfig}};
///
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Signal>();
/// let config = DispatchConfig::new(ChannelTarget::unbounded(tx))?;
/// config.dispatch(&Signal::new("ping", serde_json::Value::Null)).await?;
/// assert_eq!(rx.recv().await.unwrap().ty(), "ping");
///
/// drop(rx);
/// let err = config.dispatch(&Signal::new("ping", serde_json::Value::Null)).await.unwrap_err();
/// assert_eq!(err.kind(), jido::ErrorKind::NotFound);
/// # Ok(()) }
/// ```
pub struct ChannelTarget<M> {
    sender: Sender<M>,
    timeout: Duration,
}

impl<M> Clone for ChannelTarget<M> {
    fn clone(&self) -> Self {
        Self {
            sender: self.sender.clone(),
            timeout: self.timeout,
        }
    }
}

impl<M> fmt::Debug for ChannelTarget<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelTarget")
            .field("bounded", &matches!(self.sender, Sender::Bounded(_)))
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl<M> ChannelTarget<M> {
    /// Sends into a bounded channel.
    pub fn new(sender: mpsc::Sender<M>) -> Self {
        Self {
            sender: Sender::Bounded(sender),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Sends into an unbounded channel.
    pub fn unbounded(sender: mpsc::UnboundedSender<M>) -> Self {
        Self {
            sender: Sender::Unbounded(sender),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// How long to wait for room in a bounded channel (default 5 s).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl<M> Dispatch for ChannelTarget<M>
where
    M: From<Signal> + Send + 'static,
{
    fn adapter(&self) -> &'static str {
        "channel"
    }

    fn target(&self) -> String {
        "mpsc".to_owned()
    }

    fn target_kind(&self) -> &'static str {
        "channel"
    }

    fn validate(&self) -> Result<()> {
        if self.timeout.is_zero() {
            return Err(invalid_options(
                "channel timeout must be positive",
                "mpsc",
                "timeout",
            ));
        }
        Ok(())
    }

    /// An unbounded channel, or a bounded one with room, takes the signal
    /// at once; a full bounded channel answers `None` (delivery then waits
    /// for room, up to the timeout).
    fn deliver_now(&self, signal: &Signal) -> Option<Result<()>> {
        let message = M::from(signal.clone());
        match &self.sender {
            Sender::Unbounded(tx) => Some(tx.send(message).map_err(|_| target_not_alive("mpsc"))),
            Sender::Bounded(tx) => match tx.try_send(message) {
                Ok(()) => Some(Ok(())),
                Err(mpsc::error::TrySendError::Closed(_)) => Some(Err(target_not_alive("mpsc"))),
                Err(mpsc::error::TrySendError::Full(_)) => None,
            },
        }
    }

    fn deliver<'a>(&'a self, signal: &'a Signal) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let message = M::from(signal.clone());
            match &self.sender {
                Sender::Unbounded(tx) => tx.send(message).map_err(|_| target_not_alive("mpsc")),
                Sender::Bounded(tx) => {
                    match tokio::time::timeout(self.timeout, tx.send(message)).await {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(_)) => Err(target_not_alive("mpsc")),
                        Err(_) => Err(timeout("mpsc", self.timeout)),
                    }
                }
            }
        })
    }
}
