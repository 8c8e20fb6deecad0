use std::fmt;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::executor::{DEFAULT_AWAIT_TIMEOUT, TrackedTask, millis, panic_message};

/// The handle of a run started with [`Exec::run_async`](super::Exec::run_async)
/// or [`Chain::spawn`](super::Chain::spawn).
///
/// Only its owner can wait for or cancel the run: the handle is not
/// `Clone`, and [`wait`](AsyncHandle::wait) and
/// [`cancel`](AsyncHandle::cancel) take it by value. Dropping the handle
/// cancels the run, and so does a [`wait`](AsyncHandle::wait) that times
/// out: the action's own task is stopped too, not only the waiting.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::prelude::*;
/// use serde_json::json;
///
/// #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
/// struct N { n: i64 }
/// struct Square;
/// impl Action for Square {
///     type Params = N;
///     type Output = serde_json::Value;
///     const NAME: &'static str = "square";
///     async fn run(&self, p: N, _: &Context) -> jido::Result<serde_json::Value> {
///         Ok(json!({"n": p.n * p.n}))
///     }
/// }
///
/// let exec = Exec::new();
/// let handle = exec.run_async(Instruction::new(Square).with_params(json!({"n": 9})), Context::new())?;
/// let out = handle.wait().await?;
/// assert_eq!(out.output["n"], 81);
/// # Ok(()) }
/// ```
///
/// The handle cannot be shared, so nobody else can wait for or cancel the
/// run:
///
/// ```compile_fail
/// fn shareable<T: Clone>() {}
/// shareable::<jido::exec::AsyncHandle<jido::exec::ExecOutput>>();
/// ```
#[must_use = "dropping an AsyncHandle cancels the run"]
pub struct AsyncHandle<T> {
    task: TrackedTask<Result<T>>,
}

impl<T> AsyncHandle<T> {
    pub(crate) fn new(task: TrackedTask<Result<T>>) -> Self {
        Self { task }
    }

    /// Waits up to 5 s (Jido's default) for the result.
    ///
    /// # Errors
    ///
    /// As [`wait_timeout`](AsyncHandle::wait_timeout).
    pub async fn wait(self) -> Result<T> {
        self.wait_timeout(DEFAULT_AWAIT_TIMEOUT).await
    }

    /// Waits up to `timeout` for the result. When the time runs out the
    /// run is cancelled and a timeout error returned at once (a run whose
    /// thread is blocked in synchronous code is not waited for: it ends
    /// when the blocking call returns, its result discarded).
    ///
    /// # Errors
    ///
    /// The run's own error; a timeout error ("async action timed out after
    /// Nms"); an execution error if the task panicked; a cancelled error if
    /// the executor shut down first.
    pub async fn wait_timeout(mut self, timeout: Duration) -> Result<T> {
        let deadline = super::instant_after(tokio::time::Instant::now(), timeout);
        match self.task.join_until(deadline).await {
            Ok(Ok(Some(result))) => result,
            Ok(Ok(None)) => Err(Error::cancelled(
                "async action was cancelled: task supervisor shut down",
            )),
            Ok(Err(join)) if join.is_panic() => {
                let msg = panic_message(&*join.into_panic());
                Err(Error::execution(format!("async action panicked: {msg}"))
                    .with_detail("panic", msg))
            }
            Ok(Err(_)) => Err(Error::cancelled("async action was cancelled")),
            Err(_) => {
                self.task.abandon().await;
                Err(Error::timeout(format!(
                    "async action timed out after {}ms",
                    millis(timeout)
                ))
                .with_detail("timeout_ms", millis(timeout)))
            }
        }
    }

    /// Cancels the run and waits until its task has ended — unless its
    /// thread is blocked in synchronous code, which cannot be interrupted:
    /// then it returns at once and the run ends when the blocking call
    /// returns. Cancelling a run that already finished is fine.
    pub async fn cancel(mut self) {
        self.task.abandon().await;
    }

    /// Whether the run has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl<T> fmt::Debug for AsyncHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncHandle")
            .field("finished", &self.task.is_finished())
            .finish()
    }
}
