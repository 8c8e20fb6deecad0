//! The static description of an action ([`ActionMetadata`]: name,
//! description, category, tags, version, [`Compensation`] settings), as
//! data. It sits below [`crate::context`] so that a context can name the
//! action it runs; the [`Action`](crate::Action) trait fills it from its
//! constants. Read it at `jido::action::{ActionMetadata, Compensation}`.

use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};

/// Default compensation timeout (5 s).
pub const DEFAULT_COMPENSATION_TIMEOUT: Duration = Duration::from_secs(5);

/// Compensation settings of an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Compensation {
    /// Whether [`Action::on_error`](super::Action::on_error) runs after a
    /// failed attempt.
    pub enabled: bool,
    /// How long compensation may take (default 5 s). A per-call
    /// [`ExecOptions::compensation_timeout`](crate::exec::ExecOptions::compensation_timeout)
    /// wins over it.
    #[serde(serialize_with = "serialize_millis")]
    pub timeout: Duration,
}

impl Compensation {
    /// No compensation (the default).
    pub const DISABLED: Compensation = Compensation {
        enabled: false,
        timeout: DEFAULT_COMPENSATION_TIMEOUT,
    };
    /// Compensation on, with the default 5 s timeout.
    pub const ENABLED: Compensation = Compensation {
        enabled: true,
        timeout: DEFAULT_COMPENSATION_TIMEOUT,
    };

    /// Compensation on, with `timeout`.
    pub const fn with_timeout(timeout: Duration) -> Compensation {
        Compensation {
            enabled: true,
            timeout,
        }
    }
}

impl Default for Compensation {
    fn default() -> Self {
        Self::DISABLED
    }
}

fn serialize_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The static description of an action, injected into the run's
/// [`Context`](crate::Context) and used for tool descriptions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ActionMetadata {
    /// Name, matching `^[a-zA-Z][a-zA-Z0-9_]*$`.
    pub name: &'static str,
    /// Description.
    pub description: &'static str,
    /// Category (may be empty).
    pub category: &'static str,
    /// Tags.
    pub tags: &'static [&'static str],
    /// Version.
    pub version: &'static str,
    /// Compensation settings.
    pub compensation: Compensation,
}

/// Checks an action name against `^[a-zA-Z][a-zA-Z0-9_]*$`.
///
/// ```
/// assert!(jido::action::validate_name("charge_card").is_ok());
/// let err = jido::action::validate_name("2fast").unwrap_err();
/// assert_eq!(err.kind(), jido::ErrorKind::Configuration);
/// ```
///
/// # Errors
///
/// A configuration error naming the bad name.
pub fn validate_name(name: &str) -> Result<()> {
    let mut chars = name.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::configuration(format!(
            "invalid action name {name:?}: must match ^[a-zA-Z][a-zA-Z0-9_]*$"
        ))
        .with_detail("name", name))
    }
}

/// Something that carries an action's metadata: an erased action. The
/// context an action runs with holds the running action through it (see
/// [`Context::action`](crate::Context::action)).
pub(crate) trait HasMetadata: Send + Sync + 'static {
    /// The action's metadata.
    fn metadata(&self) -> &ActionMetadata;
}
