//! Durable writes: the storage adapters beside the raw engine doing the
//! same work.
//!
//! One iteration is one round: `N` agents (1, 100, 10 000; with `CI` set 1 and 100) each write one
//! 2 KiB checkpoint at the same time, each from its own task, and the round
//! ends when every write is durable. For `N = 1` the time is one write's
//! latency; for more, `N / time` is the throughput.
//!
//! * `persist_redb/N`: `redb_storage` (the [`RedbStorage`] writer thread
//!   with group commit, `put_checkpoint` with its fencing and journal
//!   truncation) beside `raw_redb_commit`: the same `N` upserts of the same
//!   bytes in **one** raw redb commit from one thread, the floor any group
//!   commit can reach.
//! * `persist_postgres/N` (needs `JIDO_TEST_PG`, see
//!   `scripts/pg_server.sh`): `postgres_storage` beside `raw_pg_upsert`:
//!   `N` concurrent `INSERT … ON CONFLICT DO UPDATE` of the same bytes
//!   through a pool of the same size (16), PostgreSQL grouping the commits.
//!
//! * `durable_call/N`: `N` agents with `Durability::Checkpoint` on one
//!   `RedbStorage` each answer one call at once (every call waits for its
//!   checkpoint); beside `volatile_call` (no storage) and `raw_redb_commit`.
//! * `durable_state/H`: one signal beside a 10 000-message history:
//!   `checkpoint_call` (a full checkpoint per call), `journal_cast_durable`
//!   (an append per signal, a checkpoint every 64), `volatile_call`.
//!
//! `cargo bench --bench persist --features persist-redb,persist-postgres`, then
//! `python3 scripts/bench_report.py`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use jido::agent::SignalRoute;
use jido::persist::postgres::{PostgresOptions, PostgresStorage};
use jido::persist::redb::RedbStorage;
use jido::persist::{Checkpoint, Expect, Storage, StorageKey};
use jido::prelude::*;
use jido::server::{AgentRef, Durability, Jido, JidoConfig, ServerOptions};
use jido::signal::Signal;
use redb::{Database, TableDefinition};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

/// Agents per round (with `CI` set: 1 and 100 only).
fn agents() -> Vec<usize> {
    if std::env::var_os("CI").is_some() {
        vec![1, 100]
    } else {
        vec![1, 100, 10_000]
    }
}
const POOL: usize = 16;
const RAW: TableDefinition<&str, &[u8]> = TableDefinition::new("raw");

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A checkpoint of about 2 KiB.
fn checkpoint(id: &str) -> Checkpoint {
    let mut cp = Checkpoint::new("bench", "1.0.0", id);
    cp.state.insert("blob".into(), json!("x".repeat(1900)));
    cp.state.insert("n".into(), json!(1));
    cp
}

fn keys(n: usize) -> Arc<Vec<StorageKey>> {
    Arc::new(
        (0..n)
            .map(|i| StorageKey::new("bench", "agent", format!("a-{i}")).expect("key"))
            .collect(),
    )
}

/// One round of `n` concurrent writes, each in its own task, timed from a
/// spawned task.
fn round<S: Storage + Clone>(
    rt: &Runtime,
    storage: &S,
    keys: &Arc<Vec<StorageKey>>,
    iters: u64,
) -> Duration {
    let (storage, keys) = (storage.clone(), keys.clone());
    rt.block_on(async move {
        tokio::spawn(async move {
            let started = Instant::now();
            for _ in 0..iters {
                let tasks: Vec<_> = keys
                    .iter()
                    .cloned()
                    .map(|key| {
                        let storage = storage.clone();
                        tokio::spawn(async move {
                            let cp = checkpoint(key.id());
                            storage
                                .put_checkpoint(&key, &cp, Expect::Any, 0)
                                .await
                                .expect("write");
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.expect("task");
                }
            }
            started.elapsed()
        })
        .await
        .expect("bench task")
    })
}

fn redb(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("temp dir");
    let storage = RedbStorage::open(dir.path().join("storage.redb")).expect("open");
    let raw = Database::create(dir.path().join("raw.redb")).expect("raw db");
    let mut group = c.benchmark_group("persist_redb");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for n in agents() {
        let keys = keys(n);
        let bytes = checkpoint("a-0").to_json_vec();
        group.bench_with_input(BenchmarkId::new("raw_redb_commit", n), &n, |b, _| {
            b.iter_custom(|iters| {
                let started = Instant::now();
                for _ in 0..iters {
                    let txn = raw.begin_write().expect("begin");
                    {
                        let mut table = txn.open_table(RAW).expect("table");
                        for key in keys.iter() {
                            table.insert(key.id(), bytes.as_slice()).expect("insert");
                        }
                    }
                    txn.commit().expect("commit");
                }
                started.elapsed()
            })
        });
        let before = storage.stats();
        group.bench_with_input(BenchmarkId::new("redb_storage", n), &n, |b, _| {
            b.iter_custom(|iters| round(&rt, &storage, &keys, iters))
        });
        let after = storage.stats();
        eprintln!(
            "redb_storage/{n}: {} writes in {} commits ({:.1} writes per commit)",
            after.writes - before.writes,
            after.commits - before.commits,
            (after.writes - before.writes) as f64 / (after.commits - before.commits).max(1) as f64
        );
    }
    group.finish();
}

fn postgres(c: &mut Criterion) {
    let Ok(conn) = std::env::var("JIDO_TEST_PG") else {
        eprintln!("persist_postgres skipped: JIDO_TEST_PG is not set (scripts/pg_server.sh start)");
        return;
    };
    let rt = runtime();
    let schema = format!("bench_{}", std::process::id());
    let storage = rt.block_on(async {
        let s = PostgresStorage::connect(
            &conn,
            PostgresOptions::new().schema(&schema).pool_size(POOL),
        )
        .await
        .expect("connect");
        s.migrate().await.expect("migrate");
        s
    });
    let config: tokio_postgres::Config = conn.parse().expect("connection string");
    let manager = Manager::from_config(
        config,
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager).max_size(POOL).build().expect("pool");
    let upsert = format!(
        "INSERT INTO \"{schema}\".raw (key, data) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET data = EXCLUDED.data"
    );
    rt.block_on(async {
        let client = pool.get().await.expect("client");
        client
            .batch_execute(&format!("CREATE TABLE IF NOT EXISTS \"{schema}\".raw (key text PRIMARY KEY, data bytea NOT NULL)"))
            .await
            .expect("raw table");
    });
    let mut group = c.benchmark_group("persist_postgres");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for n in agents() {
        let keys = keys(n);
        let bytes = Arc::new(checkpoint("a-0").to_json_vec());
        group.bench_with_input(BenchmarkId::new("raw_pg_upsert", n), &n, |b, _| {
            b.iter_custom(|iters| {
                let (pool, keys, bytes, upsert) =
                    (pool.clone(), keys.clone(), bytes.clone(), upsert.clone());
                rt.block_on(async move {
                    tokio::spawn(async move {
                        let started = Instant::now();
                        for _ in 0..iters {
                            let tasks: Vec<_> = keys
                                .iter()
                                .map(|key| {
                                    let (pool, bytes, upsert, id) = (
                                        pool.clone(),
                                        bytes.clone(),
                                        upsert.clone(),
                                        key.id().to_owned(),
                                    );
                                    tokio::spawn(async move {
                                        let client = pool.get().await.expect("client");
                                        let stmt =
                                            client.prepare_cached(&upsert).await.expect("prepare");
                                        client
                                            .execute(&stmt, &[&id, &*bytes])
                                            .await
                                            .expect("upsert");
                                    })
                                })
                                .collect();
                            for task in tasks {
                                task.await.expect("task");
                            }
                        }
                        started.elapsed()
                    })
                    .await
                    .expect("bench task")
                })
            })
        });
        group.bench_with_input(BenchmarkId::new("postgres_storage", n), &n, |b, _| {
            b.iter_custom(|iters| round(&rt, &storage, &keys, iters))
        });
    }
    group.finish();
}

/// A counter agent: `add` sets `n += 1`; `note` appends to `history`.
struct Durable;
impl Agent for Durable {
    const NAME: &'static str = "durable_bench";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![
            SignalRoute::action("add", DynAction::new(Add)),
            SignalRoute::action("note", DynAction::new(Note)),
        ]
    }
}

#[derive(Clone)]
struct Add;
impl Action for Add {
    type Params = Value;
    type Output = Value;
    const NAME: &'static str = "add";
    async fn run(&self, _: Value, ctx: &Context) -> jido::Result<Value> {
        let n = ctx.state().and_then(|s| s.get("n")?.as_i64()).unwrap_or(0);
        Ok(json!({"n": n + 1}))
    }
}

/// Sets `last` (a small change beside a large `history`).
#[derive(Clone)]
struct Note;
impl Action for Note {
    type Params = Value;
    type Output = Value;
    const NAME: &'static str = "note";
    async fn run(&self, p: Value, _: &Context) -> jido::Result<Value> {
        Ok(json!({"last": p}))
    }
}

/// Inline actions (no task per action): the cost measured is the
/// runtime's and the storage's.
fn config() -> JidoConfig {
    JidoConfig::new().exec_options(jido::exec::ExecOptions::new().timeout(Duration::ZERO))
}

fn inline() -> ServerOptions {
    ServerOptions::new()
}

/// `durable_call/N`: `N` agents with `Durability::Checkpoint` on one
/// `RedbStorage` each answer one `call` at once (each call waits for its
/// checkpoint, the writer groups them); beside `volatile_call` (the same
/// agents without storage) and `raw_redb_commit` (the `N` upserts in one
/// raw commit, as in `persist_redb`).
fn durable_calls(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("temp dir");
    let storage: Arc<dyn Storage> =
        Arc::new(RedbStorage::open(dir.path().join("calls.redb")).expect("open"));
    let raw = Database::create(dir.path().join("raw-calls.redb")).expect("raw db");
    let mut group = c.benchmark_group("durable_call");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for n in agents() {
        let (durable, volatile, jidos) = rt.block_on(async {
            let jido = Jido::start(config().name("bench").storage(Arc::clone(&storage)))
                .await
                .expect("instance");
            let plain = Jido::start(config()).await.expect("instance");
            let mut durable = Vec::with_capacity(n);
            let mut volatile = Vec::with_capacity(n);
            for i in 0..n {
                let id = format!("a-{i}");
                durable.push(
                    jido.start_agent(
                        AgentState::new(Durable, AgentOptions::new().id(id.clone())),
                        inline().durability(Durability::Checkpoint),
                    )
                    .await
                    .expect("start"),
                );
                volatile.push(
                    plain
                        .start_agent(
                            AgentState::new(Durable, AgentOptions::new().id(id)),
                            inline(),
                        )
                        .await
                        .expect("start"),
                );
            }
            (Arc::new(durable), Arc::new(volatile), (jido, plain))
        });
        let bytes = checkpoint("a-0").to_json_vec();
        group.bench_with_input(BenchmarkId::new("raw_redb_commit", n), &n, |b, _| {
            b.iter_custom(|iters| {
                let started = Instant::now();
                for _ in 0..iters {
                    let txn = raw.begin_write().expect("begin");
                    {
                        let mut table = txn.open_table(RAW).expect("table");
                        for i in 0..n {
                            table
                                .insert(format!("a-{i}").as_str(), bytes.as_slice())
                                .expect("insert");
                        }
                    }
                    txn.commit().expect("commit");
                }
                started.elapsed()
            })
        });
        for (name, agents) in [
            ("volatile_call", &volatile),
            ("durable_call_redb", &durable),
        ] {
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter_custom(|iters| calls(&rt, agents, "add", iters))
            });
        }
        rt.block_on(async {
            jidos.0.shutdown().await;
            jidos.1.shutdown().await;
        });
    }
    group.finish();
}

/// One round: every agent answers one call, each from its own task.
fn calls(rt: &Runtime, agents: &Arc<Vec<AgentRef>>, ty: &'static str, iters: u64) -> Duration {
    let agents = Arc::clone(agents);
    rt.block_on(async move {
        tokio::spawn(async move {
            let started = Instant::now();
            for _ in 0..iters {
                let tasks: Vec<_> = agents
                    .iter()
                    .cloned()
                    .map(|a| {
                        tokio::spawn(async move {
                            a.call(Signal::new(ty, json!({"x": 1})))
                                .await
                                .expect("call")
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.expect("task");
                }
            }
            started.elapsed()
        })
        .await
        .expect("bench task")
    })
}

/// `durable_state/H`: one signal beside a state holding a `history` of
/// `H` entries (0 and 10 000 short messages, about 600 KB of JSON): a
/// `call` to a `Checkpoint` agent (a full checkpoint per call: O(state)),
/// a `cast_durable` to a `Journal` agent followed every 64th time by the
/// checkpoint the journal mode writes (amortised), and a `call` without
/// storage.
fn durable_state(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("temp dir");
    let storage: Arc<dyn Storage> =
        Arc::new(RedbStorage::open(dir.path().join("state.redb")).expect("open"));
    let mut group = c.benchmark_group("durable_state");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for h in [0usize, 10_000] {
        let history: Vec<Value> = (0..h)
            .map(|i| json!({"role": "user", "content": format!("message number {i}")}))
            .collect();
        let mut state = serde_json::Map::new();
        state.insert("history".into(), Value::Array(history));
        let (jido, plain, checkpointed, journaled, volatile) = rt.block_on(async {
            let jido = Jido::start(
                config()
                    .name(format!("state-{h}"))
                    .storage(Arc::clone(&storage)),
            )
            .await
            .expect("instance");
            let plain = Jido::start(config()).await.expect("instance");
            let make = |id: &str| {
                AgentState::new(Durable, AgentOptions::new().id(id).state(state.clone()))
            };
            let checkpointed = jido
                .start_agent(make("cp"), inline().durability(Durability::Checkpoint))
                .await
                .expect("start");
            let journaled = jido
                .start_agent(make("j"), inline().durability(Durability::Journal))
                .await
                .expect("start");
            let volatile = plain.start_agent(make("v"), inline()).await.expect("start");
            (jido, plain, checkpointed, journaled, volatile)
        });
        for (name, agent) in [
            ("volatile_call", &volatile),
            ("checkpoint_call", &checkpointed),
        ] {
            group.bench_with_input(BenchmarkId::new(name, h), &h, |b, _| {
                b.iter_custom(|iters| calls(&rt, &Arc::new(vec![agent.clone()]), "note", iters))
            });
        }
        group.bench_with_input(BenchmarkId::new("journal_cast_durable", h), &h, |b, _| {
            let rt = &rt;
            let agent = journaled.clone();
            b.iter_custom(move |iters| {
                let agent = agent.clone();
                rt.block_on(async move {
                    tokio::spawn(async move {
                        let started = Instant::now();
                        for _ in 0..iters {
                            agent
                                .cast_durable(Signal::new("note", json!({"x": 1})))
                                .await
                                .expect("cast_durable");
                        }
                        // Processed (and the amortised checkpoints written).
                        agent.state().await.expect("state");
                        started.elapsed()
                    })
                    .await
                    .expect("bench task")
                })
            })
        });
        rt.block_on(async {
            jido.shutdown().await;
            plain.shutdown().await;
        });
    }
    group.finish();
}

criterion_group!(benches, redb, postgres, durable_calls, durable_state);
criterion_main!(benches);
