//! What a compensation ([`Action::on_error`](super::Action::on_error))
//! runs under.

use std::time::Duration;

use crate::executor::ExecOptions;

/// The options a compensation runs under, handed to
/// [`Action::on_error`](super::Action::on_error): its own time limit and
/// the options of the run whose attempt failed.
///
/// The compensation's deadline is also in its context
/// ([`Context::deadline`](crate::Context::deadline)): `timeout` after it
/// started.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use jido::action::CompensationOptions;
/// use jido::prelude::*;
/// use serde_json::{Value, json};
///
/// #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
/// struct P {}
/// struct Charge;
/// impl Action for Charge {
///     type Params = P;
///     type Output = Value;
///     const NAME: &'static str = "charge";
///     const COMPENSATION: Compensation = Compensation::with_timeout(Duration::from_secs(2));
///     async fn run(&self, _: P, _: &Context) -> jido::Result<Value> {
///         Err(Error::execution("card declined").with_retry(false))
///     }
///     async fn on_error(&self, _: P, _: &Error, _: &Context, opts: &CompensationOptions) -> jido::Result<Value> {
///         Ok(json!({
///             "timeout_ms": opts.timeout.as_millis() as u64,
///             "run_timeout_ms": opts.exec.get_timeout().as_millis() as u64,
///             "attempt": opts.attempt,
///         }))
///     }
/// }
///
/// let opts = ExecOptions::new().timeout(Duration::from_secs(7));
/// let err = jido::exec::run(Charge, json!({}), Context::new(), opts).await.unwrap_err();
/// assert_eq!(
///     err.detail("compensation_result"),
///     Some(&json!({"timeout_ms": 2000, "run_timeout_ms": 7000, "attempt": 1}))
/// );
/// # }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompensationOptions {
    /// How long this compensation may run: the run's
    /// [`ExecOptions::compensation_timeout`] when set (by the caller or
    /// the executor's defaults), else the action's
    /// [`Compensation::timeout`](super::Compensation::timeout) (default
    /// 5 s).
    pub timeout: Duration,
    /// The options of the run whose attempt failed: the caller's, with
    /// every unset one taken from the executor's defaults (read them with
    /// the `get_*` methods, which give Jido's defaults for what neither
    /// set).
    pub exec: ExecOptions,
    /// The attempt that failed (1 for the first; a retried run compensates
    /// after each failed attempt).
    pub attempt: u32,
}

impl CompensationOptions {
    /// Options of a compensation with `timeout`, after attempt `attempt` of
    /// a run under `exec` (for calling [`on_error`](super::Action::on_error)
    /// directly, e.g. in a test).
    pub fn new(timeout: Duration, exec: ExecOptions, attempt: u32) -> Self {
        Self {
            timeout,
            exec,
            attempt,
        }
    }
}
