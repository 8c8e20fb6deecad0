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
//! `cargo bench --bench persist --features persist-redb,persist-postgres`, then
//! `python3 scripts/bench_report.py`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use jido::persist::postgres::{PostgresOptions, PostgresStorage};
use jido::persist::redb::RedbStorage;
use jido::persist::{Checkpoint, Expect, Storage, StorageKey};
use redb::{Database, TableDefinition};
use serde_json::json;
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

criterion_group!(benches, redb, postgres);
criterion_main!(benches);
