//! Actions: validated, typed units of work.
//!
//! An [`Action`] declares its params (decoded from JSON, checked, described
//! by a JSON Schema), its output (serialised back to JSON) and static
//! metadata. Actions never run on their own: [`crate::exec`] runs them with
//! validation, deadlines, retries and compensation.
//!
//! ```
//! use jido::prelude::*;
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Clone, Deserialize, JsonSchema)]
//! struct AddParams {
//!     value: i64,
//!     #[serde(default = "one")]
//!     amount: i64,
//! }
//! fn one() -> i64 { 1 }
//!
//! #[derive(Serialize)]
//! struct AddOutput { value: i64 }
//!
//! struct Add;
//!
//! impl Action for Add {
//!     type Params = AddParams;
//!     type Output = AddOutput;
//!     const NAME: &'static str = "add";
//!     const DESCRIPTION: &'static str = "Adds `amount` to `value`.";
//!
//!     async fn run(&self, p: AddParams, _ctx: &Context) -> jido::Result<AddOutput> {
//!         Ok(AddOutput { value: p.value + p.amount })
//!     }
//! }
//! ```
//!
//! The same action from a function, with the `#[jido::action]` attribute
//! (feature `macros`, on by default; see [`macro@crate::action`]):
//!
//! ```
//! # use jido::prelude::*;
//! # #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
//! # struct AddParams { value: i64, #[serde(default = "one")] amount: i64 }
//! # fn one() -> i64 { 1 }
//! # #[derive(serde::Serialize)] struct AddOutput { value: i64 }
//! /// Adds `amount` to `value`.
//! #[jido::action]
//! async fn add(p: AddParams, _ctx: &Context) -> jido::Result<AddOutput> {
//!     Ok(AddOutput { value: p.value + p.amount })
//! }
//! assert_eq!(Add::NAME, "add");
//! ```
//!
//! and, for tests, from a closure with [`action_fn`].

mod compensation;
mod dynamic;
mod function;

pub use crate::action_metadata::{
    ActionMetadata, Compensation, DEFAULT_COMPENSATION_TIMEOUT, validate_name,
};
pub(crate) use crate::error::json_type_name;
pub use compensation::CompensationOptions;
pub use dynamic::DynAction;
pub(crate) use dynamic::Prepared;
pub use function::{JsonActionFn, action_fn, json_action};

use std::future::Future;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::context::Context;
use crate::error::{Error, Result};

/// A typed unit of work.
///
/// Implement [`run`](Action::run) and the [`NAME`](Action::NAME); every
/// other item has a default. Run it through [`crate::exec`] (or an agent),
/// never by calling `run` directly: Exec is what validates, times out,
/// retries and compensates.
///
/// Params arrive as JSON and are decoded into [`Action::Params`]; a decode
/// failure is an [`ErrorKind::Validation`](crate::ErrorKind::Validation)
/// error whose `path` detail names the failing field. Extra rules go in
/// [`validate_params`](Action::validate_params) (see [`validate_garde`] for
/// `garde`). Unknown fields are accepted unless `Params` says
/// `#[serde(deny_unknown_fields)]`, as in Jido's open validation.
pub trait Action: Send + Sync + 'static {
    /// What the action takes. `Clone` because a retried action runs again
    /// with the same params and compensation sees them too.
    type Params: DeserializeOwned + JsonSchema + Clone + Send + Sync + 'static;
    /// What the action returns. It must serialise to a JSON object (or
    /// `null`, read as an empty object): agents deep-merge it into their
    /// state.
    type Output: Serialize + Send + 'static;

    /// The action's name, matching `^[a-zA-Z][a-zA-Z0-9_]*$`. Exec refuses
    /// an action with an invalid name with a configuration error.
    const NAME: &'static str;
    /// What the action does, for people and for LLM tool descriptions.
    const DESCRIPTION: &'static str = "";
    /// A free-form category.
    const CATEGORY: &'static str = "";
    /// Free-form tags.
    const TAGS: &'static [&'static str] = &[];
    /// The action's version.
    const VERSION: &'static str = "0.1.0";
    /// Whether and how long compensation ([`on_error`](Action::on_error))
    /// runs when the action fails. Disabled by default.
    const COMPENSATION: Compensation = Compensation::DISABLED;

    /// Does the work.
    ///
    /// Effects (state operations and directives) are pushed with
    /// [`Context::push_effect`]; Exec returns those of the last attempt
    /// beside the output.
    ///
    /// # Cancellation and blocking
    ///
    /// Exec cancels a run by dropping this future: when it overruns its
    /// deadline, when its caller gives up (a dropped `run` future, a
    /// cancelled or timed-out [`AsyncHandle`](crate::exec::AsyncHandle)),
    /// when its agent stops, when the executor shuts down. An async action
    /// is interrupted at its next await point.
    ///
    /// A thread blocked in synchronous code (`std::thread::sleep`, a
    /// blocking `recv`, blocking I/O, a long computation) cannot be
    /// interrupted. Exec still answers the caller at the deadline (or at
    /// shutdown) without waiting for it, but the task keeps its worker
    /// thread until the blocking call returns, its result is then
    /// discarded, and shutdown waits for it only up to its grace period
    /// ([`DEFAULT_SHUTDOWN_GRACE`](crate::exec::DEFAULT_SHUTDOWN_GRACE)).
    /// On a current-thread runtime a blocking action blocks everything —
    /// timers, the caller, other agents — until it returns. Put blocking
    /// work in `tokio::task::spawn_blocking` (and await it) so that the
    /// action itself stays cancellable.
    fn run(
        &self,
        params: Self::Params,
        ctx: &Context,
    ) -> impl Future<Output = Result<Self::Output>> + Send;

    /// Extra checks on decoded params (ranges, lengths, cross-field rules).
    /// Return a validation error; give it a `path` detail to name the field.
    fn validate_params(&self, params: &Self::Params) -> Result<()> {
        let _ = params;
        Ok(())
    }

    /// Checks on the output before it is returned. A failure is a
    /// validation error and is not retried.
    fn validate_output(&self, output: &Self::Output) -> Result<()> {
        let _ = output;
        Ok(())
    }

    /// Compensation: undoes what a failed attempt may have done. Runs after
    /// each failed attempt (timeouts included) when
    /// [`COMPENSATION`](Action::COMPENSATION) is enabled, under its own
    /// timeout. The returned value is recorded in the final error's
    /// `compensation_result` detail.
    ///
    /// It gets the attempt's params, its error, a context like the
    /// attempt's (same values and metadata; the compensation's own
    /// deadline) and `opts`: its own timeout, the options of the failed
    /// run and the attempt number (see [`CompensationOptions`]).
    fn on_error(
        &self,
        params: Self::Params,
        error: &Error,
        ctx: &Context,
        opts: &CompensationOptions,
    ) -> impl Future<Output = Result<Value>> + Send {
        let _ = (params, error, ctx, opts);
        async { Ok(Value::Null) }
    }

    /// The action's static metadata.
    fn metadata() -> ActionMetadata
    where
        Self: Sized,
    {
        ActionMetadata {
            name: Self::NAME,
            description: Self::DESCRIPTION,
            category: Self::CATEGORY,
            tags: Self::TAGS,
            version: Self::VERSION,
            compensation: Self::COMPENSATION,
        }
    }

    /// The JSON Schema of [`Action::Params`], as given to LLMs.
    fn params_schema() -> Value
    where
        Self: Sized,
    {
        schemars::schema_for!(Self::Params).to_value()
    }
}

/// Runs `garde` validation on params and turns the report into one
/// validation error whose `errors` detail lists `{path, message}` per
/// failure and whose `path` detail is the first failing path.
///
/// Use it from [`Action::validate_params`]. `schemars` reads the same
/// `#[garde(...)]` attributes into the params' JSON Schema, so the rules
/// are written once.
///
/// ```
/// use jido::action::validate_garde;
///
/// #[derive(garde::Validate)]
/// struct P {
///     #[garde(range(min = 1, max = 10))]
///     n: u32,
/// }
///
/// let err = validate_garde(&P { n: 0 }).unwrap_err();
/// assert_eq!(err.kind(), jido::ErrorKind::Validation);
/// assert_eq!(err.detail("path").unwrap(), "n");
/// ```
///
/// # Errors
///
/// A validation error when any rule fails.
#[cfg(feature = "garde")]
pub fn validate_garde<T>(params: &T) -> Result<()>
where
    T: garde::Validate,
    T::Context: Default,
{
    let Err(report) = params.validate() else {
        return Ok(());
    };
    let errors: Vec<Value> = report
        .iter()
        .map(
            |(path, err)| serde_json::json!({"path": path.to_string(), "message": err.to_string()}),
        )
        .collect();
    let first = report
        .iter()
        .next()
        .map(|(path, err)| (path.to_string(), err.to_string()))
        .unwrap_or_default();
    let message = if first.0.is_empty() {
        format!("invalid parameters: {}", first.1)
    } else {
        format!("invalid parameters: {}: {}", first.0, first.1)
    };
    Err(Error::validation(message)
        .with_detail("path", first.0)
        .with_detail("errors", errors))
}
