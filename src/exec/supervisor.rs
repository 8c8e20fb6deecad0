use std::future::Future;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::{Error, Result};

/// Owns the tasks Exec spawns, so that shutting it down cancels them all.
///
/// Each [`Exec`](crate::exec::Exec) (and so each `Jido` instance) has one;
/// supervisors never share tasks. Cloning gives another handle to the same
/// supervisor.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use jido::exec::TaskSupervisor;
///
/// let sup = TaskSupervisor::new();
/// let task = sup.spawn(std::future::pending::<()>()).unwrap();
/// sup.shutdown().await;
/// assert_eq!(task.await.unwrap(), None); // cancelled
/// assert_eq!(sup.active(), 0);
/// assert!(sup.spawn(async {}).is_err());
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct TaskSupervisor {
    tracker: TaskTracker,
    token: CancellationToken,
}

impl TaskSupervisor {
    /// A new, empty supervisor.
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawns `future` on the current tokio runtime under this supervisor.
    /// The task's output is `None` when the supervisor was shut down before
    /// the future finished.
    ///
    /// # Errors
    ///
    /// A [`Cancelled`](crate::ErrorKind::Cancelled) error once the
    /// supervisor is shut down.
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime, as `tokio::spawn` does.
    pub fn spawn<F>(&self, future: F) -> Result<JoinHandle<Option<F::Output>>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if self.token.is_cancelled() {
            return Err(Error::cancelled("task supervisor is shut down"));
        }
        let token = self.token.clone();
        Ok(self.tracker.spawn(async move {
            tokio::select! {
                biased;
                () = token.cancelled() => None,
                out = future => Some(out),
            }
        }))
    }

    /// Number of tasks still running.
    pub fn active(&self) -> usize {
        self.tracker.len()
    }

    /// Whether [`shutdown`](TaskSupervisor::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Cancels every task, refuses new ones, and waits until all have
    /// ended.
    pub async fn shutdown(&self) {
        self.token.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

/// A join handle that aborts its task when dropped.
///
/// Exec awaits the task of an attempt (and of a compensation) through this
/// guard, so that a caller that stops waiting — a cancelled
/// [`AsyncHandle`](crate::exec::AsyncHandle), a dropped `run` future, an
/// outer timeout — also stops the action instead of leaving it running
/// until its own deadline.
pub(crate) struct AbortOnDrop<T>(pub(crate) JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
