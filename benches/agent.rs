//! `AgentState::cmd` against the bare Exec runs it contains.
//!
//! Each group runs N no-op instructions (N = 1 and 10) once through
//! `cmd` (Direct strategy, a state of 100 keys) and once as N bare
//! `Exec::execute` calls, so the ratio `cmd / exec` is the agent layer's
//! overhead. Two groups: default options (each run in a supervised task
//! under a 30 s timeout) and inline runs (`timeout = 0`).
//!
//! With `CI` set the runs are shorter.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use jido::exec::Exec;
use jido::prelude::*;
use serde_json::{Map, Value};

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

struct Bench;
impl Agent for Bench {
    const NAME: &'static str = "bench";
    type Schema = ();
}

fn instructions(n: usize) -> Vec<Instruction> {
    let action = DynAction::new(Noop);
    (0..n).map(|_| Instruction::new(action.clone())).collect()
}

fn group(c: &mut Criterion, name: &str, opts: ExecOptions) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let exec = Exec::new();
    let state: Map<String, Value> = (0..100)
        .map(|i| (format!("key{i}"), Value::from(i)))
        .collect();
    let agent = AgentState::new(Bench, AgentOptions::new().id("bench").state(state));
    let ci = std::env::var_os("CI").is_some();

    let mut g = c.benchmark_group(name);
    if ci {
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(1));
    }
    for n in [1usize, 10] {
        g.bench_with_input(BenchmarkId::new("exec", n), &n, |b, &n| {
            b.to_async(&rt).iter_custom(|iters| {
                let exec = exec.clone();
                async move {
                    let start = Instant::now();
                    for _ in 0..iters {
                        for ins in instructions(n) {
                            let own = ins.opts;
                            let ins = ins.with_opts(opts.or(&own));
                            black_box(exec.execute(ins, Context::new()).await);
                        }
                    }
                    start.elapsed()
                }
            });
        });
        g.bench_with_input(BenchmarkId::new("cmd", n), &n, |b, &n| {
            b.to_async(&rt).iter_custom(|iters| {
                let mut agent = agent.clone();
                let cmd_opts = CmdOptions::new().exec(exec.clone()).exec_options(opts);
                async move {
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(agent.cmd(instructions(n), cmd_opts.clone()).await);
                    }
                    start.elapsed()
                }
            });
        });
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    group(c, "cmd_vs_exec_default", ExecOptions::new());
    group(
        c,
        "cmd_vs_exec_inline",
        ExecOptions::new().timeout(Duration::ZERO),
    );
}

criterion_group!(agent, benches);
criterion_main!(agent);
