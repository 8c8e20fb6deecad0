//! How an agent reacts to its errors: [`ErrorPolicy`] and what it sees
//! ([`ErrorEvent`]) and decides ([`ErrorDecision`]).
//!
//! Data carried by options (an agent's, or a child's in
//! [`ChildOptions`](super::ChildOptions)); the runtime applies it. Also
//! reachable as `jido::server::ErrorPolicy`.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::StopReason;
use crate::error::{Error, Result};
use crate::signal::Signal;
use crate::signal::dispatch::DispatchConfig;

/// What the error policy decides about one error (see
/// [`ErrorPolicy::custom`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorDecision {
    /// Keep going.
    Continue,
    /// Stop the agent with this reason.
    Stop(StopReason),
}

/// One error handed to the error policy.
///
/// The error is the one of the [`Directive::Error`](crate::Directive::Error)
/// with its details unsanitised (the policy runs in the process). Its cause
/// is there too: a failed instruction is an execution error "instruction
/// failed" whose `reason` detail is the action's error envelope
/// (`{type, message, details, retryable}`: e.g. `validation_error` with the
/// failing field in `details.path`, or "action NAME panicked: MESSAGE").
/// [`signal`](ErrorEvent::signal) is the signal whose processing failed.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ErrorEvent<'a> {
    /// The agent's id.
    pub agent_id: &'a str,
    /// The error.
    pub error: &'a Error,
    /// Where it happened (the Error directive's context: `instruction`,
    /// `routing`, `cmd`, `directive`, …).
    pub context: &'a str,
    /// How many errors the agent has seen, this one included.
    pub error_count: u32,
    /// The signal whose processing failed (for a strategy's `init`, a
    /// signal `jido.strategy.init`).
    pub signal: &'a Signal,
}

type ErrorFn = dyn Fn(&ErrorEvent<'_>) -> Result<ErrorDecision> + Send + Sync;

/// How an agent reacts to [`Directive::Error`](crate::Directive::Error)s.
///
/// ```
/// use jido::directive::{ErrorDecision, ErrorPolicy, StopReason};
///
/// let policy = ErrorPolicy::custom(|ev| {
///     Ok(if ev.context == "routing" { ErrorDecision::Continue } else { ErrorDecision::Stop(StopReason::from("bad")) })
/// });
/// # let _ = policy;
/// let _ = ErrorPolicy::max_errors(3);
/// ```
#[non_exhaustive]
#[derive(Clone, Default)]
pub enum ErrorPolicy {
    /// Log `"agent <id> [<context>]: <message>"` at error level (the
    /// default). Every policy logs this line first (event
    /// `jido.agent_server.error`, fields `agent_id`, `context`, `policy`,
    /// `error_type`, `signal_id`, `signal_type`, `details`), with the
    /// details sanitised as in [`Error::to_envelope`] (secret-looking keys
    /// `"[REDACTED]"`, depth, item and string bounds) and the message cut
    /// like a sanitised string.
    #[default]
    LogOnly,
    /// Log, then stop with the reason `"agent_error: <message>"` (the
    /// message cut like a sanitised string).
    StopOnError,
    /// Log, then emit `jido.agent.error` through this dispatch (`None`:
    /// like an Emit without dispatch, e.g. back to the agent itself). Its
    /// data: Jido's `error` (the message), `context` and `agent_id`, plus
    /// `error_type` (the error kind, e.g. `"execution_error"`), `details`
    /// (sanitised as in [`Error::to_envelope`]: a failed instruction's
    /// cause is under `details.reason`), `retryable`, and `signal_id` /
    /// `signal_type` of the signal whose processing failed. Strings are
    /// cut to [`SANITIZE_MAX_STRING`](crate::error::SANITIZE_MAX_STRING)
    /// characters.
    ///
    /// No error loop: an error raised while processing a
    /// `jido.agent.error` signal is logged and counted but emits no
    /// further `jido.agent.error`, so one failure yields exactly one error
    /// signal even when it comes back to a catch-all route.
    EmitSignal(Option<DispatchConfig>),
    /// Log and count; stop with `"max_errors_exceeded: <count>"` once the
    /// count reaches `n` (≥ 1).
    MaxErrors(u32),
    /// A function deciding per error. Its panics and `Err` returns are
    /// logged and ignored (the agent continues).
    Custom(Arc<ErrorFn>),
}

impl ErrorPolicy {
    /// [`ErrorPolicy::MaxErrors`].
    pub fn max_errors(n: u32) -> Self {
        ErrorPolicy::MaxErrors(n)
    }

    /// [`ErrorPolicy::EmitSignal`] through `dispatch`.
    pub fn emit_signal(dispatch: DispatchConfig) -> Self {
        ErrorPolicy::EmitSignal(Some(dispatch))
    }

    /// [`ErrorPolicy::Custom`].
    pub fn custom(
        f: impl Fn(&ErrorEvent<'_>) -> Result<ErrorDecision> + Send + Sync + 'static,
    ) -> Self {
        ErrorPolicy::Custom(Arc::new(f))
    }

    /// Reads `"log_only"`, `"stop_on_error"`, `"emit_signal"` (to the
    /// default dispatch) or `{"max_errors": n}`.
    ///
    /// # Errors
    ///
    /// A configuration error "invalid error policy" for anything else.
    pub fn from_json(value: &Value) -> Result<Self> {
        match value {
            Value::String(s) if s == "log_only" => Ok(ErrorPolicy::LogOnly),
            Value::String(s) if s == "stop_on_error" => Ok(ErrorPolicy::StopOnError),
            Value::String(s) if s == "emit_signal" => Ok(ErrorPolicy::EmitSignal(None)),
            Value::Object(map) if map.len() == 1 => match map.get("max_errors") {
                Some(n) => n
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .map(ErrorPolicy::MaxErrors)
                    .ok_or_else(|| invalid_policy(value)),
                None => Err(invalid_policy(value)),
            },
            _ => Err(invalid_policy(value)),
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            ErrorPolicy::LogOnly => "log_only",
            ErrorPolicy::StopOnError => "stop_on_error",
            ErrorPolicy::EmitSignal(_) => "emit_signal",
            ErrorPolicy::MaxErrors(_) => "max_errors",
            ErrorPolicy::Custom(_) => "custom",
        }
    }
}

fn invalid_policy(value: &Value) -> Error {
    Error::configuration("invalid error policy")
        .with_detail("option", "error_policy")
        .with_detail("value", value.clone())
}

impl fmt::Debug for ErrorPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorPolicy::MaxErrors(n) => write!(f, "MaxErrors({n})"),
            ErrorPolicy::EmitSignal(d) => f.debug_tuple("EmitSignal").field(d).finish(),
            other => f.write_str(other.name()),
        }
    }
}
