use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::error::{Error, Result};

/// How long [`TaskSupervisor::shutdown`] (and so `Exec::shutdown` and
/// `Jido::shutdown`) waits for cancelled tasks to end: 5 s.
///
/// A task at an await point ends as soon as it is cancelled, so the grace
/// period only matters for a task whose thread is blocked in synchronous
/// code (`std::thread::sleep`, a blocking `recv`, a busy loop): such a task
/// cannot be interrupted, and shutdown stops waiting for it after the
/// grace period. It keeps its worker thread until it returns; its result
/// is then discarded.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Owns the tasks Exec spawns, so that shutting it down cancels them all.
///
/// Each [`Exec`](crate::exec::Exec) (and so each `Jido` instance) has one;
/// supervisors never share tasks. Cloning gives another handle to the same
/// supervisor.
///
/// # What can be interrupted
///
/// Cancelling a task drops its future at its next await point: async
/// work is interrupted at once. A task whose thread is blocked in
/// synchronous code cannot be: it keeps its worker thread until the
/// blocking call returns, then ends (its result is discarded). Shutdown
/// waits for such tasks at most the [grace period](DEFAULT_SHUTDOWN_GRACE);
/// [`active`](TaskSupervisor::active) counts them until they end. On a
/// current-thread runtime a blocked task blocks everything else,
/// shutdown included.
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
#[derive(Clone, Debug)]
pub struct TaskSupervisor {
    tracker: TaskTracker,
    shutdown: Arc<Shutdown>,
    grace: Duration,
}

/// The shutdown signal of a supervisor: a flag read without a lock on
/// every spawn and poll, and a `Notify` that wakes the tasks and callers
/// that wait (they register with it only once they have to wait, so a task
/// that finishes in its first poll takes no lock).
#[derive(Debug, Default)]
struct Shutdown {
    flag: AtomicBool,
    notify: Notify,
}

impl Shutdown {
    fn is_set(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    fn set(&self) {
        self.flag.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }
}

impl Default for TaskSupervisor {
    fn default() -> Self {
        Self {
            tracker: TaskTracker::new(),
            shutdown: Arc::default(),
            grace: DEFAULT_SHUTDOWN_GRACE,
        }
    }
}

impl TaskSupervisor {
    /// A new, empty supervisor.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets how long [`shutdown`](TaskSupervisor::shutdown) waits for
    /// tasks blocked in synchronous code (default
    /// [`DEFAULT_SHUTDOWN_GRACE`]).
    #[must_use]
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// How long [`shutdown`](TaskSupervisor::shutdown) waits for tasks to
    /// end.
    pub fn shutdown_grace(&self) -> Duration {
        self.grace
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
        self.spawn_inner(future, None)
    }

    /// Spawns `future` in one wrapper, [`Supervised`] (each layer of async
    /// wrapping would copy the future once more): it ends with `None` at
    /// shutdown, and with `tracked`, records whether a thread is inside its
    /// `poll` (see [`spawn_tracked`](TaskSupervisor::spawn_tracked)).
    fn spawn_inner<F>(
        &self,
        future: F,
        tracked: Option<Arc<dyn PollFlag>>,
    ) -> Result<JoinHandle<Option<F::Output>>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if self.is_shut_down() {
            return Err(Error::cancelled("task supervisor is shut down"));
        }
        let shutdown = Arc::clone(&self.shutdown);
        Ok(tokio::spawn(Supervised {
            future,
            stopped: None,
            shutdown,
            tracked,
            _token: self.tracker.token(),
        }))
    }

    /// Number of tasks still running.
    pub fn active(&self) -> usize {
        self.tracker.len()
    }

    /// Whether [`shutdown`](TaskSupervisor::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.shutdown.is_set()
    }

    /// Cancels every task, refuses new ones, and waits until all have
    /// ended, at most the [grace period](TaskSupervisor::shutdown_grace).
    /// Returns how many tasks were still running then (threads blocked in
    /// synchronous code, see [what can be interrupted](TaskSupervisor#what-can-be-interrupted)):
    /// 0 when every task ended.
    pub async fn shutdown(&self) -> usize {
        self.shutdown_timeout(self.grace).await
    }

    /// As [`shutdown`](TaskSupervisor::shutdown), waiting at most `grace`.
    pub async fn shutdown_timeout(&self, grace: Duration) -> usize {
        self.shutdown.set();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            let left = self.tracker.len();
            tracing::warn!(
                target: "jido::exec",
                tasks = left,
                grace_ms = super::millis(grace),
                "task supervisor shut down with tasks still running (blocked threads)"
            );
            return left;
        }
        0
    }

    /// Spawns `future` like [`spawn`](TaskSupervisor::spawn), tracking
    /// whether a thread is inside its `poll`, so that a caller giving up on
    /// it can tell an idle task (ended by an abort before it runs again)
    /// from a blocked one (which no abort can end).
    pub(crate) fn spawn_tracked<F>(&self, future: F) -> Result<TrackedTask<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_tracked_with(future, Arc::new(AtomicU8::new(IDLE)))
    }

    /// As [`spawn_tracked`](TaskSupervisor::spawn_tracked), keeping the
    /// poll flag in `flag` (a fresh [`PollFlag`] per task): a caller that
    /// allocates per-task state anyway (Exec's attempt, with its effect
    /// sink) shares that allocation instead of making another.
    pub(crate) fn spawn_tracked_with<F>(
        &self,
        future: F,
        flag: Arc<dyn PollFlag>,
    ) -> Result<TrackedTask<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = self.spawn_inner(future, Some(Arc::clone(&flag)))?;
        Ok(TrackedTask {
            handle,
            state: flag,
            shutdown: Arc::clone(&self.shutdown),
        })
    }
}

/// The poll flag of a tracked task (see
/// [`TaskSupervisor::spawn_tracked`]): [`IDLE`] when made, then set by the
/// task around each poll and by its caller when it gives up on it.
pub(crate) trait PollFlag: Send + Sync + 'static {
    /// The flag.
    fn poll_flag(&self) -> &AtomicU8;

    /// A span to enter around each poll of the task, if any.
    fn span(&self) -> Option<&tracing::Span> {
        None
    }
}

impl PollFlag for AtomicU8 {
    fn poll_flag(&self) -> &AtomicU8 {
        self
    }
}

pin_project_lite::pin_project! {
    /// A supervised task's future: `future` until it ends, or `None` once
    /// the supervisor shuts down. Built directly into the task (no async
    /// wrapper, whose captured future would be copied into a local on its
    /// first poll), and counted by the supervisor's tracker until dropped.
    struct Supervised<F> {
        #[pin]
        future: F,
        // Made (boxed: the wait is ~90 bytes that every task would carry
        // and tokio would copy on every spawn) only once `future` has to
        // wait: a task that ends in its first poll never registers with
        // the shutdown signal.
        stopped: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
        shutdown: Arc<Shutdown>,
        tracked: Option<Arc<dyn PollFlag>>,
        _token: TaskTrackerToken,
    }
}

impl<F: Future> Future for Supervised<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if this.shutdown.is_set() {
            return Poll::Ready(None);
        }
        let out = match this.tracked {
            None => this.future.poll(cx),
            Some(tracked) => {
                let state = tracked.poll_flag();
                if state
                    .compare_exchange(IDLE, POLLING, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    // Abandoned: the task is being aborted; never poll the
                    // future again.
                    return Poll::Pending;
                }
                let out = match tracked.span() {
                    Some(span) => {
                        let _entered = span.enter();
                        this.future.poll(cx)
                    }
                    None => this.future.poll(cx),
                };
                state.store(IDLE, Ordering::Release);
                out
            }
        };
        if let Poll::Ready(out) = out {
            return Poll::Ready(Some(out));
        }
        this.stopped
            .get_or_insert_with(|| Box::pin(stopped(Arc::clone(this.shutdown))))
            .as_mut()
            .poll(cx)
            .map(|()| None)
    }
}

/// Ends when `shutdown` is set. The wait is made before the flag is read,
/// so a shutdown in between completes it.
async fn stopped(shutdown: Arc<Shutdown>) {
    let notified = shutdown.notify.notified();
    if shutdown.is_set() {
        return;
    }
    notified.await;
}

/// A tracked task's flag before its first poll and between polls.
pub(crate) const IDLE: u8 = 0;
const POLLING: u8 = 1;
const ABANDONED: u8 = 2;

/// A supervised task whose caller may give up on it without waiting for a
/// blocked thread (see [`TaskSupervisor::spawn_tracked`]). Dropping it
/// aborts the task.
pub(crate) struct TrackedTask<T> {
    handle: JoinHandle<Option<T>>,
    state: Arc<dyn PollFlag>,
    /// The supervisor's: its shutdown answers the waiting caller at once.
    shutdown: Arc<Shutdown>,
}

/// What waiting for a [`TrackedTask`] gave: `Err` when the deadline
/// passed; `Ok(Ok(None))` when the supervisor shut down.
pub(crate) type Joined<T> = std::result::Result<std::result::Result<Option<T>, JoinError>, Elapsed>;

/// The deadline of a [`TrackedTask::join_until`] passed.
#[derive(Debug)]
pub(crate) struct Elapsed;

impl<T> TrackedTask<T> {
    /// Waits for the task until `deadline`. When the supervisor shuts down
    /// first, the task is [abandoned](TrackedTask::abandon) and the wait
    /// ends as if the task had been cancelled (`Ok(Ok(None))`), even when
    /// its thread is blocked; when the deadline passes, it returns
    /// `Err(Elapsed)` with the task still running (the caller abandons it).
    ///
    /// A hand-written future (the task, its timer and the shutdown wait
    /// side by side, ~200 bytes): the run future that holds it is
    /// allocated on every run, and an `async` version with the same parts
    /// was twice the size.
    pub(crate) fn join_until(&mut self, deadline: Instant) -> JoinUntil<'_, T> {
        let TrackedTask {
            handle,
            state,
            shutdown,
        } = self;
        JoinUntil {
            handle,
            state: &**state,
            shutdown,
            sleep: tokio::time::sleep_until(deadline),
            stopped: shutdown.notify.notified(),
            abandoned: false,
        }
    }

    /// Whether the task has ended.
    pub(crate) fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Aborts the task. When it is idle (at an await point) its future is
    /// never polled again, and this waits until it has been dropped, so
    /// what follows (compensation, a retry) starts after it is gone. When a
    /// thread is inside its `poll` — blocked in synchronous code, which
    /// nothing can interrupt — this returns at once: the task ends when the
    /// blocking call returns, and its result is discarded.
    pub(crate) async fn abandon(&mut self) {
        self.handle.abort();
        if self
            .state
            .poll_flag()
            .compare_exchange(IDLE, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            let _ = (&mut self.handle).await;
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`TrackedTask::join_until`].
    pub(crate) struct JoinUntil<'a, T> {
        handle: &'a mut JoinHandle<Option<T>>,
        state: &'a dyn PollFlag,
        shutdown: &'a Shutdown,
        #[pin]
        sleep: tokio::time::Sleep,
        // Made with the future (so a shutdown from then on completes it),
        // registered with the supervisor only when polled while waiting.
        #[pin]
        stopped: tokio::sync::futures::Notified<'a>,
        // Shut down while the task was idle: waiting for it to be dropped.
        abandoned: bool,
    }
}

impl<T> Future for JoinUntil<'_, T> {
    type Output = Joined<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if *this.abandoned {
            return Pin::new(&mut **this.handle).poll(cx).map(|_| Ok(Ok(None)));
        }
        if let Poll::Ready(joined) = Pin::new(&mut **this.handle).poll(cx) {
            return Poll::Ready(Ok(joined));
        }
        if this.sleep.poll(cx).is_ready() {
            return Poll::Ready(Err(Elapsed));
        }
        if !this.shutdown.is_set() && this.stopped.poll(cx).is_pending() {
            return Poll::Pending;
        }
        // Shut down: abandon the task (see `TrackedTask::abandon`), and
        // when it is idle wait until it has been dropped.
        this.handle.abort();
        if this
            .state
            .poll_flag()
            .compare_exchange(IDLE, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            *this.abandoned = true;
            return Pin::new(&mut **this.handle).poll(cx).map(|_| Ok(Ok(None)));
        }
        Poll::Ready(Ok(Ok(None)))
    }
}

impl<T> Drop for TrackedTask<T> {
    fn drop(&mut self) {
        // A finished task needs no abort (which would take the join
        // handle's slow path).
        if !self.handle.is_finished() {
            self.handle.abort();
        }
    }
}
