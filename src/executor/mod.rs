//! The executor: what runs actions (an [`Exec`] handle: a
//! [`TaskSupervisor`] plus default [`ExecOptions`]) and the options of a
//! run ([`ExecOptions`], [`RetryPolicy`]), as nouns.
//!
//! These sit low in the core because actions, contexts, instructions and
//! signal dispatch all carry them; how a run goes (validation, deadlines,
//! retries, compensation) is [`crate::exec`], which re-exports everything
//! here. Read it there: `jido::exec::{Exec, ExecOptions, RetryPolicy, TaskSupervisor}`.

mod options;
mod retry;
mod supervisor;

pub use options::{
    DEFAULT_AWAIT_TIMEOUT, DEFAULT_BACKOFF, DEFAULT_MAX_BACKOFF, DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT, ExecOptions, Telemetry,
};
pub use retry::RetryPolicy;
pub use supervisor::{DEFAULT_SHUTDOWN_GRACE, TaskSupervisor};
pub(crate) use supervisor::{IDLE, PollFlag, TrackedTask};

use std::any::Any;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// An executor: a task supervisor plus default options. A `Jido` instance
/// owns one; [`Exec::global`] serves the free functions.
///
/// Cloning gives another handle to the same executor.
#[derive(Clone, Debug)]
pub struct Exec {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    supervisor: TaskSupervisor,
    defaults: ExecOptions,
}

impl Default for Exec {
    fn default() -> Self {
        Self::new()
    }
}

impl Exec {
    /// An executor with its own supervisor and Jido's defaults.
    pub fn new() -> Self {
        Self::with_defaults(ExecOptions::new())
    }

    /// An executor with its own supervisor and `defaults` for every option a
    /// run leaves unset.
    pub fn with_defaults(defaults: ExecOptions) -> Self {
        Self::with_supervisor(TaskSupervisor::new(), defaults)
    }

    /// An executor spawning into `supervisor`.
    pub fn with_supervisor(supervisor: TaskSupervisor, defaults: ExecOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                supervisor,
                defaults,
            }),
        }
    }

    /// The process-wide executor used by [`run`](crate::exec::run) and friends when the
    /// context names none.
    pub fn global() -> &'static Exec {
        static GLOBAL: OnceLock<Exec> = OnceLock::new();
        GLOBAL.get_or_init(Exec::new)
    }

    /// The supervisor owning this executor's tasks.
    pub fn supervisor(&self) -> &TaskSupervisor {
        &self.inner.supervisor
    }

    /// The default options.
    pub fn defaults(&self) -> &ExecOptions {
        &self.inner.defaults
    }

    /// Cancels every task of this executor (runs, attempts, compensations,
    /// spawned chains), waits until they have ended, and refuses new runs,
    /// inline ones included, with a cancelled error. Other executors are
    /// not affected.
    ///
    /// Async work ends at once (at its next await point). A task whose
    /// thread is blocked in synchronous code cannot be interrupted: the
    /// wait for it ends after the supervisor's
    /// [grace period](TaskSupervisor::shutdown_grace) (default
    /// [`DEFAULT_SHUTDOWN_GRACE`], 5 s); it keeps its worker thread until
    /// the blocking call returns and its result is discarded. Returns how
    /// many tasks were still running when the wait ended (0: all ended).
    pub async fn shutdown(&self) -> usize {
        self.inner.supervisor.shutdown().await
    }

    /// As [`shutdown`](Exec::shutdown), waiting at most `grace` for the
    /// tasks to end.
    pub async fn shutdown_timeout(&self, grace: Duration) -> usize {
        self.inner.supervisor.shutdown_timeout(grace).await
    }
}

/// `d` in whole milliseconds, saturating (for logs and error details).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The message of a caught panic (its `&str` or `String` payload).
pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}
