//! Exec keeps its time promises (issue #11): a nested run leaves its
//! enclosing action a margin, a blocking action does not hold its caller
//! past the timeout, and shutdown does not wait for a blocked thread
//! beyond its grace period.
//!
//! Virtual-time tests run on a paused clock with exact instants. The
//! blocking tests need a multi-thread runtime (the blocked action holds a
//! worker); they are deterministic without wall-clock bounds: the action
//! is released only after the test saw the answer it expects, so a runtime
//! that waited for the action would deadlock, and a generous real-time
//! `tokio::time::timeout` turns that deadlock into a failure.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use common::act;
use jido::exec::{
    DEFAULT_SHUTDOWN_GRACE, NESTED_MARGIN_DIVISOR, NESTED_MARGIN_MAX, TaskSupervisor, nested_margin,
};
use jido::prelude::*;
use serde_json::{Value, json};
use tokio::time::Instant;

// ====================================================================
// 1. Nested Exec margin
// ====================================================================

#[test]
fn the_nested_margin_is_a_tenth_of_the_budget_capped_at_100ms() {
    assert_eq!(NESTED_MARGIN_MAX, Duration::from_millis(100));
    assert_eq!(NESTED_MARGIN_DIVISOR, 10);
    for (budget_ms, margin_ms) in [(50, 5), (200, 20), (1000, 100), (5000, 100), (30_000, 100)] {
        assert_eq!(
            nested_margin(Duration::from_millis(budget_ms)),
            Duration::from_millis(margin_ms),
            "budget {budget_ms}ms"
        );
    }
    assert_eq!(
        nested_margin(Duration::from_millis(1)),
        Duration::from_micros(100)
    );
    assert_eq!(nested_margin(Duration::ZERO), Duration::ZERO);
}

/// What the outer action of the nested tests recorded.
#[derive(Default)]
struct Seen {
    /// (virtual time since start, message) of the inner error.
    inner: Mutex<Option<(Duration, String)>>,
}

/// An outer action running a hanging inner action with `ctx`, recording
/// the inner error and returning it as its own output.
fn outer(seen: Arc<Seen>, t0: Instant, inner_opts: ExecOptions) -> DynAction {
    act(move |_, ctx| {
        let seen = Arc::clone(&seen);

        async move {
            let hang = act(|_, _| async {
                std::future::pending::<()>().await;
                Ok(json!({}))
            });
            let err = jido::exec::run(hang, json!({}), ctx.clone(), inner_opts)
                .await
                .expect_err("the inner action hangs");
            *seen.inner.lock().unwrap() = Some((t0.elapsed(), err.message().to_owned()));
            Ok(json!({"inner_error": err.message(), "inner_kind": err.kind().as_str()}))
        }
    })
}

#[tokio::test(start_paused = true)]
async fn a_nested_run_times_out_first_and_the_outer_action_returns_its_result() {
    let exec = Exec::new();
    let seen = Arc::new(Seen::default());
    let t0 = Instant::now();
    // Outer: 1 s, no retry. Inner: the default 30 s and one retry, bounded
    // by the inherited deadline.
    let out = exec
        .run(
            outer(Arc::clone(&seen), t0, ExecOptions::new()),
            json!({}),
            Context::new(),
            ExecOptions::new()
                .timeout(Duration::from_secs(1))
                .max_retries(0),
        )
        .await
        .expect("the outer action returns its own result");
    let margin = Duration::from_millis(100);
    assert_eq!(
        Value::Object(out.output),
        json!({"inner_error": "action do timed out after 900ms", "inner_kind": "timeout"})
    );
    assert_eq!(
        seen.inner.lock().unwrap().clone(),
        Some((
            Duration::from_secs(1) - margin,
            "action do timed out after 900ms".to_owned()
        )),
        "the inner run fails at exactly 1 s - margin"
    );
    assert_eq!(
        t0.elapsed(),
        Duration::from_secs(1) - margin,
        "the outer answered as soon as it handled the error, before its own deadline"
    );
    assert_eq!(exec.supervisor().active(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_margin_comes_from_the_enclosing_budget_and_nests() {
    // Outer 400 ms: margin 40 ms, the inner inherits 360 ms. The inner
    // itself runs a hanging innermost action: its budget is 360 ms, margin
    // 36 ms, so the innermost fails at 324 ms and the inner returns Ok.
    let exec = Exec::new();
    let t0 = Instant::now();
    let times: Arc<Mutex<Vec<(String, Duration)>>> = Arc::default();
    let inner = {
        let times = Arc::clone(&times);
        act(move |_, ctx| {
            let times = Arc::clone(&times);
            async move {
                let hang = act(|_, _| async {
                    std::future::pending::<()>().await;
                    Ok(json!({}))
                });
                let err = jido::exec::run(hang, json!({}), ctx.clone(), ExecOptions::new())
                    .await
                    .unwrap_err();
                times
                    .lock()
                    .unwrap()
                    .push((err.message().to_owned(), t0.elapsed()));
                Ok(json!({"innermost": err.message()}))
            }
        })
    };
    let outer = {
        let times = Arc::clone(&times);
        act(move |_, ctx| {
            let inner = inner.clone();
            let times = Arc::clone(&times);
            async move {
                assert_eq!(ctx.deadline(), Some(t0 + Duration::from_millis(400)));
                assert_eq!(ctx.nested_deadline(), Some(t0 + Duration::from_millis(360)));
                let out =
                    jido::exec::run(inner, json!({}), ctx.clone(), ExecOptions::new()).await?;
                times
                    .lock()
                    .unwrap()
                    .push(("inner ok".to_owned(), t0.elapsed()));
                Ok(Value::Object(out.output))
            }
        })
    };
    let out = exec
        .run(
            outer,
            json!({}),
            Context::new(),
            ExecOptions::new().timeout(Duration::from_millis(400)),
        )
        .await
        .unwrap();
    assert_eq!(
        Value::Object(out.output),
        json!({"innermost": "action do timed out after 324ms"})
    );
    assert_eq!(
        times.lock().unwrap().clone(),
        [
            (
                "action do timed out after 324ms".to_owned(),
                Duration::from_millis(324)
            ),
            ("inner ok".to_owned(), Duration::from_millis(324)),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_deadline_set_by_hand_is_inherited_without_margin() {
    let exec = Exec::new();
    let t0 = Instant::now();
    let hang = act(|_, _| async {
        std::future::pending::<()>().await;
        Ok(json!({}))
    });
    let err = exec
        .run(
            hang,
            json!({}),
            Context::new().with_deadline(t0 + Duration::from_secs(1)),
            ExecOptions::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.message(), "action do timed out after 1000ms");
    assert_eq!(t0.elapsed(), Duration::from_secs(1));
}

// ====================================================================
// 2. Blocking actions
// ====================================================================

/// Fails the test instead of hanging when the runtime waited for a
/// blocked thread (real time: these tests run on a multi-thread runtime).
const DEADLOCK_GUARD: Duration = Duration::from_secs(30);

/// The timeout of blocking attempts: real time, generous enough that the
/// action has certainly entered its blocking call when it fires (an
/// attempt not yet started when its deadline passes is simply dropped).
const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(500);

/// An action that blocks its thread on a std channel until the test
/// releases it; it says when it has entered the blocking call and counts
/// the runs that returned.
struct Blocker {
    action: DynAction,
    release: mpsc::Sender<()>,
    entered: tokio::sync::mpsc::UnboundedReceiver<()>,
    returned: Arc<AtomicUsize>,
}

fn blocker() -> Blocker {
    let (release, gate) = mpsc::channel::<()>();
    let gate = Arc::new(Mutex::new(gate));
    let (entered_tx, entered) = tokio::sync::mpsc::unbounded_channel();
    let returned = Arc::new(AtomicUsize::new(0));
    let done = Arc::clone(&returned);
    let action = act(move |_, _| {
        let gate = Arc::clone(&gate);
        let entered_tx = entered_tx.clone();
        let done = Arc::clone(&done);
        async move {
            let _ = entered_tx.send(());
            // Blocks the worker thread: no await point until released.
            let _ = gate.lock().unwrap().recv();
            done.fetch_add(1, Ordering::SeqCst);
            Ok(json!({"late": true}))
        }
    });
    Blocker {
        action,
        release,
        entered,
        returned,
    }
}

/// Waits (bounded by the deadlock guard of the caller) until the
/// supervisor has no task left.
async fn until_idle(sup: &TaskSupervisor) {
    while sup.active() > 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_action_is_answered_at_its_timeout_not_when_it_returns() {
    tokio::time::timeout(DEADLOCK_GUARD, async {
        let b = blocker();
        let exec = Exec::new();
        let err = exec
            .run(
                b.action.clone(),
                json!({}),
                Context::new(),
                ExecOptions::new().timeout(ATTEMPT_TIMEOUT).max_retries(0),
            )
            .await
            .unwrap_err();
        // Answered while the action is still blocked: it is released only
        // now.
        assert_eq!(err.kind(), ErrorKind::Timeout);
        assert_eq!(err.message(), "action do timed out after 500ms");
        assert_eq!(b.returned.load(Ordering::SeqCst), 0, "still blocked");
        assert_eq!(
            exec.supervisor().active(),
            1,
            "the blocked task keeps its worker until it returns"
        );
        b.release.send(()).unwrap();
        until_idle(exec.supervisor()).await;
        assert_eq!(
            b.returned.load(Ordering::SeqCst),
            1,
            "its result was discarded"
        );
    })
    .await
    .expect("the caller waited for the blocked action");
}

// Three workers: both attempts block one each, and a free worker must
// drive the timers.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_blocked_action_is_retried_at_its_timeout_without_waiting_for_it() {
    // Two attempts of 500 ms with a 10 ms backoff: both block, the caller
    // gets the second timeout while both threads are still blocked.
    tokio::time::timeout(DEADLOCK_GUARD, async {
        let mut b = blocker();
        let exec = Exec::new();
        let err = exec
            .run(
                b.action.clone(),
                json!({}),
                Context::new(),
                ExecOptions::new()
                    .timeout(ATTEMPT_TIMEOUT)
                    .max_retries(1)
                    .backoff(Duration::from_millis(10)),
            )
            .await
            .unwrap_err();
        assert_eq!(err.message(), "action do timed out after 500ms");
        assert_eq!(b.entered.recv().await, Some(()));
        assert_eq!(b.entered.recv().await, Some(()));
        assert_eq!(b.returned.load(Ordering::SeqCst), 0);
        assert_eq!(exec.supervisor().active(), 2);
        b.release.send(()).unwrap();
        b.release.send(()).unwrap();
        until_idle(exec.supervisor()).await;
        assert_eq!(b.returned.load(Ordering::SeqCst), 2);
    })
    .await
    .expect("the caller waited for a blocked attempt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_handle_wait_timeout_does_not_wait_for_a_blocked_inline_run() {
    // A zero timeout runs the action inline, in the run_async task itself.
    tokio::time::timeout(DEADLOCK_GUARD, async {
        let mut b = blocker();
        let exec = Exec::new();
        let handle = exec
            .run_async(
                Instruction::new(b.action.clone())
                    .with_opts(ExecOptions::new().timeout(Duration::ZERO)),
                Context::new(),
            )
            .unwrap();
        assert_eq!(b.entered.recv().await, Some(()));
        let err = handle
            .wait_timeout(Duration::from_millis(20))
            .await
            .unwrap_err();
        assert_eq!(err.message(), "async action timed out after 20ms");
        assert_eq!(exec.supervisor().active(), 1);
        b.release.send(()).unwrap();
        until_idle(exec.supervisor()).await;
        assert_eq!(b.returned.load(Ordering::SeqCst), 1);
    })
    .await
    .expect("wait_timeout waited for the blocked run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_shutdown_stops_waiting_for_a_blocked_task_after_its_grace_period() {
    tokio::time::timeout(DEADLOCK_GUARD, async {
        let mut b = blocker();
        let sup = TaskSupervisor::new().with_shutdown_grace(Duration::from_millis(50));
        assert_eq!(sup.shutdown_grace(), Duration::from_millis(50));
        let exec = Exec::with_supervisor(sup, ExecOptions::new());
        let run = {
            let exec = exec.clone();
            let action = b.action.clone();
            tokio::spawn(async move {
                exec.run(action, json!({}), Context::new(), ExecOptions::new())
                    .await
            })
        };
        assert_eq!(b.entered.recv().await, Some(()));
        // A cancellable task beside it ends at once.
        let pending = exec
            .supervisor()
            .spawn(std::future::pending::<()>())
            .unwrap();
        assert_eq!(exec.shutdown().await, 1, "the blocked task is left running");
        assert_eq!(pending.await.unwrap(), None, "the async task was cancelled");
        let err = run.await.unwrap().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Cancelled);
        let refused = exec
            .run(
                b.action.clone(),
                json!({}),
                Context::new(),
                ExecOptions::new(),
            )
            .await
            .unwrap_err();
        assert_eq!(refused.message(), "task supervisor is shut down");
        b.release.send(()).unwrap();
        until_idle(exec.supervisor()).await;
        assert_eq!(b.returned.load(Ordering::SeqCst), 1);
    })
    .await
    .expect("shutdown waited for the blocked task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_shutdown_timeout_takes_its_own_grace_period() {
    tokio::time::timeout(DEADLOCK_GUARD, async {
        let mut b = blocker();
        let exec = Exec::new();
        assert_eq!(exec.supervisor().shutdown_grace(), DEFAULT_SHUTDOWN_GRACE);
        assert_eq!(DEFAULT_SHUTDOWN_GRACE, Duration::from_secs(5));
        let _handle = exec
            .run_async(Instruction::new(b.action.clone()), Context::new())
            .unwrap();
        assert_eq!(b.entered.recv().await, Some(()));
        // The run_async task ends (cancelled); the attempt's blocked one
        // cannot.
        assert_eq!(exec.shutdown_timeout(Duration::from_millis(20)).await, 1);
        b.release.send(()).unwrap();
        until_idle(exec.supervisor()).await;
    })
    .await
    .expect("shutdown_timeout waited for the blocked task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jido_shutdown_does_not_wait_for_a_blocked_action_beyond_the_grace_period() {
    // Jido::shutdown returns after the grace period while the action is
    // still blocked, and the caller of the run is answered at once.
    tokio::time::timeout(DEADLOCK_GUARD, async {
        let mut b = blocker();
        let jido = jido::server::Jido::start(
            jido::server::JidoConfig::new().shutdown_grace(Duration::from_millis(50)),
        )
        .await
        .unwrap();
        assert_eq!(
            jido.exec().supervisor().shutdown_grace(),
            Duration::from_millis(50)
        );
        let run = {
            let exec = jido.exec().clone();
            let action = b.action.clone();
            tokio::spawn(async move {
                exec.run(action, json!({}), Context::new(), ExecOptions::new())
                    .await
            })
        };
        assert_eq!(b.entered.recv().await, Some(()));
        jido.shutdown().await;
        assert!(jido.is_shut_down());
        assert_eq!(b.returned.load(Ordering::SeqCst), 0, "still blocked");
        assert_eq!(run.await.unwrap().unwrap_err().kind(), ErrorKind::Cancelled);
        b.release.send(()).unwrap();
        until_idle(jido.exec().supervisor()).await;
        assert_eq!(b.returned.load(Ordering::SeqCst), 1);
    })
    .await
    .expect("Jido::shutdown waited for the blocked action");
}
