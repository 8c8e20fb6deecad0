//! Exec overhead: a no-op action run through the whole pipeline, next to a
//! direct call of the action's body and to the raw tokio baseline Exec
//! builds on (`tokio::time::timeout(dur, tokio::spawn(..))`), in the same
//! group so the ratios come from one run. Every case runs inside a spawned
//! task (where an agent's `cmd` or a service calls Exec from), not as the
//! `block_on` future.
//!
//! `cargo bench --bench exec`; set `CI` for a short run.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use jido::exec::{DEFAULT_TIMEOUT, TaskSupervisor, Telemetry};
use jido::prelude::*;
use serde_json::{Map, Value};
use tokio::runtime::{Builder, Runtime};

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Empty {}

struct Noop;

impl Action for Noop {
    type Params = Empty;
    type Output = ();
    const NAME: &'static str = "noop";

    async fn run(&self, _: Empty, _: &Context) -> jido::Result<()> {
        Ok(())
    }
}

/// Runs `$body` (an expression that may `.await`) `$iters` times inside a
/// spawned task and evaluates to the time measured there; what the body
/// uses is moved into the task.
macro_rules! timed_in_task {
    ($rt:expr, $iters:expr, $body:expr) => {
        $rt.block_on(async move {
            tokio::spawn(async move {
                let started = std::time::Instant::now();
                for _ in 0..$iters {
                    let _ = black_box($body);
                }
                started.elapsed()
            })
            .await
            .expect("bench task")
        })
    };
}

fn params() -> Value {
    Value::Object(Map::new())
}

fn runtimes() -> Vec<(&'static str, Runtime)> {
    vec![
        (
            "current_thread",
            Builder::new_current_thread().enable_all().build().unwrap(),
        ),
        (
            "multi_thread",
            Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap(),
        ),
    ]
}

fn bench_exec(c: &mut Criterion) {
    for (flavor, rt) in runtimes() {
        let mut group = c.benchmark_group(format!("exec_overhead/{flavor}"));
        if std::env::var_os("CI").is_some() {
            group
                .sample_size(10)
                .warm_up_time(Duration::from_millis(200))
                .measurement_time(Duration::from_secs(1));
        }

        // The action's body, called directly: no validation, no task.
        group.bench_function("direct_call", |b| {
            b.iter_custom(|iters| {
                timed_in_task!(rt, iters, Noop.run(Empty {}, &Context::new()).await)
            });
        });

        // What a hand-written "run it in a task under a timeout" costs.
        group.bench_function("tokio_spawn_timeout", |b| {
            b.iter_custom(|iters| {
                timed_in_task!(
                    rt,
                    iters,
                    tokio::time::timeout(
                        DEFAULT_TIMEOUT,
                        tokio::spawn(async { Noop.run(Empty {}, &Context::new()).await })
                    )
                    .await
                )
            });
        });

        // The same through Exec's task supervisor (cancellable on shutdown).
        let sup = TaskSupervisor::new();
        group.bench_function("supervisor_spawn_timeout", |b| {
            b.iter_custom(|iters| {
                let sup = sup.clone();
                timed_in_task!(
                    rt,
                    iters,
                    tokio::time::timeout(
                        DEFAULT_TIMEOUT,
                        sup.spawn(async { Noop.run(Empty {}, &Context::new()).await })
                            .expect("supervisor")
                    )
                    .await
                )
            });
        });

        // Exec with default options: decode, validate, span, deadline,
        // supervised task under the 30 s timeout.
        let exec = Exec::new();
        group.bench_function("exec_default", |b| {
            b.iter_custom(|iters| {
                let exec = exec.clone();
                timed_in_task!(
                    rt,
                    iters,
                    exec.run(Noop, params(), Context::new(), ExecOptions::new())
                        .await
                )
            });
        });

        // Exec without spans.
        let silent = ExecOptions::new().telemetry(Telemetry::Silent);
        group.bench_function("exec_silent", |b| {
            b.iter_custom(|iters| {
                let exec = exec.clone();
                timed_in_task!(
                    rt,
                    iters,
                    exec.run(Noop, params(), Context::new(), silent).await
                )
            });
        });

        // Exec inline (timeout zero): the pipeline without a task.
        let inline = ExecOptions::new().timeout(Duration::ZERO);
        group.bench_function("exec_inline", |b| {
            b.iter_custom(|iters| {
                let exec = exec.clone();
                timed_in_task!(
                    rt,
                    iters,
                    exec.run(Noop, params(), Context::new(), inline).await
                )
            });
        });

        group.finish();
    }
}

criterion_group!(benches, bench_exec);
criterion_main!(benches);
