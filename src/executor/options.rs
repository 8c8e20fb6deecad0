use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Default per-attempt timeout (30 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default number of retries after the first attempt (1).
pub const DEFAULT_MAX_RETRIES: u32 = 1;
/// Default first backoff delay (250 ms); it doubles on each retry.
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(250);
/// Default cap on the backoff delay (30 s).
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Default timeout of an async handle's [`wait`](crate::exec::AsyncHandle::wait) (5 s).
pub const DEFAULT_AWAIT_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether Exec opens a `jido.action` span per attempt.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Telemetry {
    /// A span per attempt and retry logs (default).
    #[default]
    Full,
    /// No spans; retries are still logged.
    Silent,
}

/// Options of one Exec run. Every field left unset falls back to the
/// executor's defaults, which fall back to Jido's: timeout 30 s, 1 retry,
/// backoff 250 ms doubling up to 30 s, compensation timeout from the
/// action (5 s).
///
/// ```
/// use std::time::Duration;
/// use jido::exec::ExecOptions;
///
/// let opts = ExecOptions::new().timeout(Duration::from_secs(10)).max_retries(3);
/// let resolved = opts.or(&ExecOptions::default());
/// assert_eq!(resolved.get_timeout(), Duration::from_secs(10));
/// assert_eq!(resolved.get_backoff(), Duration::from_millis(250));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecOptions {
    timeout: Option<Duration>,
    max_retries: Option<u32>,
    backoff: Option<Duration>,
    max_backoff: Option<Duration>,
    compensation_timeout: Option<Duration>,
    telemetry: Option<Telemetry>,
}

impl ExecOptions {
    /// Options with nothing set.
    pub const fn new() -> Self {
        Self {
            timeout: None,
            max_retries: None,
            backoff: None,
            max_backoff: None,
            compensation_timeout: None,
            telemetry: None,
        }
    }

    /// Per-attempt timeout. `Duration::ZERO` runs the action inline in the
    /// caller with no limit (a deadline inherited from the context still
    /// applies).
    #[must_use]
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Retries after the first attempt (`0` = one attempt only).
    #[must_use]
    pub const fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = Some(n);
        self
    }

    /// First backoff delay; delay `k` (from 0) is `backoff · 2^k`, capped.
    #[must_use]
    pub const fn backoff(mut self, backoff: Duration) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// Cap on the backoff delay.
    #[must_use]
    pub const fn max_backoff(mut self, max: Duration) -> Self {
        self.max_backoff = Some(max);
        self
    }

    /// Timeout of compensation, overriding the action's setting.
    #[must_use]
    pub const fn compensation_timeout(mut self, timeout: Duration) -> Self {
        self.compensation_timeout = Some(timeout);
        self
    }

    /// Span emission.
    #[must_use]
    pub const fn telemetry(mut self, telemetry: Telemetry) -> Self {
        self.telemetry = Some(telemetry);
        self
    }

    /// These options, with every unset field taken from `fallback`.
    #[must_use]
    pub fn or(&self, fallback: &ExecOptions) -> ExecOptions {
        ExecOptions {
            timeout: self.timeout.or(fallback.timeout),
            max_retries: self.max_retries.or(fallback.max_retries),
            backoff: self.backoff.or(fallback.backoff),
            max_backoff: self.max_backoff.or(fallback.max_backoff),
            compensation_timeout: self.compensation_timeout.or(fallback.compensation_timeout),
            telemetry: self.telemetry.or(fallback.telemetry),
        }
    }

    /// The timeout, or the 30 s default.
    pub fn get_timeout(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT)
    }

    /// The retry count, or the default 1.
    pub fn get_max_retries(&self) -> u32 {
        self.max_retries.unwrap_or(DEFAULT_MAX_RETRIES)
    }

    /// The first backoff delay, or the 250 ms default.
    pub fn get_backoff(&self) -> Duration {
        self.backoff.unwrap_or(DEFAULT_BACKOFF)
    }

    /// The backoff cap, or the 30 s default.
    pub fn get_max_backoff(&self) -> Duration {
        self.max_backoff.unwrap_or(DEFAULT_MAX_BACKOFF)
    }

    /// The compensation timeout if set (else the action's applies).
    pub fn get_compensation_timeout(&self) -> Option<Duration> {
        self.compensation_timeout
    }

    /// The retry policy these options describe.
    pub fn retry_policy(&self) -> super::RetryPolicy {
        super::RetryPolicy::new(
            self.get_max_retries(),
            self.get_backoff(),
            self.get_max_backoff(),
        )
    }

    /// The telemetry mode, or [`Telemetry::Full`].
    pub fn get_telemetry(&self) -> Telemetry {
        self.telemetry.unwrap_or_default()
    }

    /// Reads options from JSON as written in instructions and tool calls:
    /// `timeout`, `backoff`, `max_backoff`, `compensation_timeout` in
    /// milliseconds, `max_retries` a count. Unknown keys are ignored.
    ///
    /// ```
    /// use jido::exec::ExecOptions;
    /// use serde_json::json;
    ///
    /// let opts = ExecOptions::from_json(&json!({"timeout": 1000, "max_retries": 0})).unwrap();
    /// assert_eq!(opts, ExecOptions::new().timeout(std::time::Duration::from_secs(1)).max_retries(0));
    /// ```
    ///
    /// # Errors
    ///
    /// A validation error naming the key when a value is not a
    /// non-negative integer, or when `value` is not an object.
    pub fn from_json(value: &Value) -> Result<Self> {
        let map = match value {
            Value::Object(map) => map,
            Value::Null => return Ok(Self::new()),
            _ => {
                return Err(Error::validation(
                    "invalid opts format: expected a JSON object",
                ));
            }
        };
        let millis = |key: &str| -> Result<Option<Duration>> {
            Ok(read_u64(map, key)?.map(Duration::from_millis))
        };
        Ok(Self {
            timeout: millis("timeout")?,
            max_retries: read_u64(map, "max_retries")?
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            backoff: millis("backoff")?,
            max_backoff: millis("max_backoff")?,
            compensation_timeout: millis("compensation_timeout")?,
            telemetry: None,
        })
    }
}

fn read_u64(map: &Map<String, Value>, key: &str) -> Result<Option<u64>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            Error::validation(format!(
                "invalid opts: {key} must be a non-negative integer"
            ))
            .with_detail("path", key.to_owned())
        }),
    }
}
