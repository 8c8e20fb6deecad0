//! One behaviour-tree tick of N action nodes, against the same N actions
//! run through `Exec::execute` directly and through the Direct strategy.
//! Every action runs inline (timeout 0) so the numbers show the strategy's
//! own cost. Sizes shrink when `CI` is set.

use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use jido::prelude::*;
use jido::strategy::behavior_tree::{BehaviorTree, Node, action, condition, sequence};
use serde_json::{Value, json};

struct Echo;
impl Action for Echo {
    type Params = Value;
    type Output = Value;
    const NAME: &'static str = "echo";
    async fn run(&self, p: Value, _: &Context) -> jido::Result<Value> {
        Ok(json!({ "echo": p }))
    }
}

struct Plain;
impl Agent for Plain {
    const NAME: &'static str = "plain";
    type Schema = ();
}

struct Tree(BehaviorTree);
impl Agent for Tree {
    const NAME: &'static str = "tree";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(self.0.clone())
    }
}

fn inline() -> ExecOptions {
    ExecOptions::new().timeout(Duration::ZERO).max_retries(0)
}

fn sizes() -> Vec<usize> {
    if std::env::var_os("CI").is_some() {
        vec![4]
    } else {
        vec![1, 10, 50]
    }
}

fn actions(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let exec = Exec::new();
    let mut group = c.benchmark_group("bt_actions");
    for n in sizes() {
        group.bench_with_input(BenchmarkId::new("exec_execute", n), &n, |b, &n| {
            b.to_async(&rt).iter(|| async {
                for _ in 0..n {
                    let ins = Instruction::new(Echo)
                        .with_params(json!({"n": 1}))
                        .with_opts(inline());
                    let out = exec.execute(ins, Context::new()).await;
                    assert!(out.result.is_ok());
                }
            });
        });

        let direct = AgentState::new(Plain, AgentOptions::new());
        let opts = CmdOptions::new().exec_options(inline()).exec(exec.clone());
        group.bench_with_input(BenchmarkId::new("direct_cmd", n), &n, |b, &n| {
            b.to_async(&rt).iter_batched(
                || direct.clone(),
                |mut a| {
                    let opts = opts.clone();
                    async move {
                        let list: Vec<Instruction> = (0..n)
                            .map(|_| Instruction::new(Echo).with_params(json!({"n": 1})))
                            .collect();
                        let d = a.cmd(list, opts).await;
                        assert!(d.is_empty());
                        a
                    }
                },
                BatchSize::SmallInput,
            );
        });

        let nodes: Vec<Node> = (0..n).map(|_| action(Echo).param("n", 1)).collect();
        let bt = BehaviorTree::new(sequence(nodes)).unwrap();
        let tree = AgentState::new(Tree(bt), AgentOptions::new());
        group.bench_with_input(BenchmarkId::new("bt_tick", n), &n, |b, _| {
            b.to_async(&rt).iter_batched(
                || tree.clone(),
                |mut a| {
                    let opts = opts.clone();
                    async move {
                        let d = a.tick(opts).await;
                        assert!(d.is_empty());
                        a
                    }
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

/// Control-flow cost alone: N conditions in a sequence, ticked, against
/// calling the same N predicates in a loop.
fn conditions(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let n = if std::env::var_os("CI").is_some() {
        10
    } else {
        100
    };
    let mut group = c.benchmark_group("bt_conditions");
    let pred = |bb: &jido::state::StateMap, _: &jido::state::StateMap| !bb.contains_key("stop");
    let bb = jido::state::StateMap::new();
    let state = jido::state::StateMap::new();
    group.bench_function(BenchmarkId::new("closure_loop", n), |b| {
        b.iter(|| {
            let mut all = true;
            for _ in 0..n {
                all &= std::hint::black_box(pred)(&bb, &state);
            }
            assert!(all);
        });
    });
    let bt = BehaviorTree::new(sequence((0..n).map(|i| condition(format!("c{i}"), pred)))).unwrap();
    let tree = AgentState::new(Tree(bt), AgentOptions::new());
    group.bench_function(BenchmarkId::new("bt_tick", n), |b| {
        b.to_async(&rt).iter_batched(
            || tree.clone(),
            |mut a| async move {
                a.tick(CmdOptions::new()).await;
                a
            },
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

criterion_group!(benches, actions, conditions);
criterion_main!(benches);
