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
//! * `durable_call/N`: `N` agents with `Durability::Checkpoint` each answer
//!   one call at once (every call waits for its checkpoint), on redb
//!   (`durable_call_redb`) and with `JIDO_TEST_PG` on PostgreSQL
//!   (`durable_call_postgres`); beside `volatile_call` (no storage),
//!   `raw_redb_commit` and `raw_pg_upsert` (the same bytes written raw).
//! * `durable_state/H`: one signal beside a 10 000-message history:
//!   `checkpoint_call` (a checkpoint per call, a delta of what changed
//!   after the first), `journal_cast_durable` (an append per signal, a
//!   checkpoint every 64), `volatile_call`; with `JIDO_TEST_PG` also
//!   `checkpoint_call_postgres` and `checkpoint_call_append_postgres`
//!   (the deltas as rows of `jido_checkpoint_deltas`).
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

/// `N` concurrent `INSERT … ON CONFLICT DO UPDATE` of the same bytes
/// through a pool of [`POOL`] connections: the floor of a PostgreSQL
/// checkpoint.
#[derive(Clone)]
struct RawPg {
    pool: Pool,
    upsert: String,
}

impl RawPg {
    /// A pool on `conn` and a `raw` table in `schema`.
    fn open(rt: &Runtime, conn: &str, schema: &str) -> Self {
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
        Self { pool, upsert }
    }

    /// One round: every key upserted once, each from its own task.
    fn round(
        &self,
        rt: &Runtime,
        keys: &Arc<Vec<StorageKey>>,
        bytes: &Arc<Vec<u8>>,
        iters: u64,
    ) -> Duration {
        let (raw, keys, bytes) = (self.clone(), keys.clone(), bytes.clone());
        rt.block_on(async move {
            tokio::spawn(async move {
                let started = Instant::now();
                for _ in 0..iters {
                    let tasks: Vec<_> = keys
                        .iter()
                        .map(|key| {
                            let (raw, bytes, id) =
                                (raw.clone(), bytes.clone(), key.id().to_owned());
                            tokio::spawn(async move {
                                let client = raw.pool.get().await.expect("client");
                                let stmt =
                                    client.prepare_cached(&raw.upsert).await.expect("prepare");
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
    }
}

/// A [`PostgresStorage`] in a fresh schema (migrated), with the raw
/// baseline's table beside it; `None` (and a message) without
/// `JIDO_TEST_PG`.
fn pg_backend(rt: &Runtime, what: &str) -> Option<(PostgresStorage, RawPg)> {
    let Ok(conn) = std::env::var("JIDO_TEST_PG") else {
        eprintln!(
            "{what}: PostgreSQL skipped: JIDO_TEST_PG is not set (JIDO_TEST_PG=$(scripts/pg_server.sh start))"
        );
        return None;
    };
    let schema = format!("bench_{what}_{}", std::process::id());
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
    let raw = RawPg::open(rt, &conn, &schema);
    Some((storage, raw))
}

fn postgres(c: &mut Criterion) {
    let rt = runtime();
    let Some((storage, raw)) = pg_backend(&rt, "persist_postgres") else {
        return;
    };
    let mut group = c.benchmark_group("persist_postgres");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for n in agents() {
        let keys = keys(n);
        let bytes = Arc::new(checkpoint("a-0").to_json_vec());
        group.bench_with_input(BenchmarkId::new("raw_pg_upsert", n), &n, |b, _| {
            b.iter_custom(|iters| raw.round(&rt, &keys, &bytes, iters))
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
            SignalRoute::action("say", DynAction::new(Say)),
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

/// Appends the params to `history` (a state op: the history stays shared).
#[derive(Clone)]
struct Say;
impl Action for Say {
    type Params = Value;
    type Output = Value;
    const NAME: &'static str = "say";
    async fn run(&self, p: Value, ctx: &Context) -> jido::Result<Value> {
        ctx.push_effect(jido::state::StateOp::append(["history"], p));
        Ok(json!({}))
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

/// `durable_call/N`: `N` agents with `Durability::Checkpoint` each answer
/// one `call` at once (each call waits for its checkpoint): on one
/// `RedbStorage` (`durable_call_redb`, the writer groups them) beside
/// `raw_redb_commit` (the `N` upserts in one raw commit, as in
/// `persist_redb`), and with `JIDO_TEST_PG` on one `PostgresStorage`
/// (`durable_call_postgres`, a pool of 16) beside `raw_pg_upsert` (the `N`
/// upserts of the same bytes, concurrently through a pool of 16); and
/// `volatile_call`, the same agents without storage.
fn durable_calls(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("temp dir");
    let redb: Arc<dyn Storage> =
        Arc::new(RedbStorage::open(dir.path().join("calls.redb")).expect("open"));
    let raw = Database::create(dir.path().join("raw-calls.redb")).expect("raw db");
    let pg = pg_backend(&rt, "durable_call");
    let mut group = c.benchmark_group("durable_call");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for n in agents() {
        let mut backends: Vec<(&str, Option<Arc<dyn Storage>>)> = vec![
            ("volatile_call", None),
            ("durable_call_redb", Some(Arc::clone(&redb))),
        ];
        if let Some((storage, _)) = &pg {
            let storage: Arc<dyn Storage> = Arc::new(storage.clone());
            backends.push(("durable_call_postgres", Some(storage)));
        }
        let started: Vec<(&str, Arc<Vec<AgentRef>>, Jido)> = backends
            .into_iter()
            .map(|(name, storage)| {
                let (agents, jido) = rt.block_on(start_agents(name, storage, n));
                (name, agents, jido)
            })
            .collect();
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
        if let Some((_, raw_pg)) = &pg {
            let (keys, bytes) = (keys(n), Arc::new(bytes.clone()));
            group.bench_with_input(BenchmarkId::new("raw_pg_upsert", n), &n, |b, _| {
                b.iter_custom(|iters| raw_pg.round(&rt, &keys, &bytes, iters))
            });
        }
        for (name, agents, _) in &started {
            group.bench_with_input(BenchmarkId::new(*name, n), &n, |b, _| {
                b.iter_custom(|iters| calls(&rt, agents, "add", iters))
            });
        }
        rt.block_on(async {
            for (_, _, jido) in started {
                jido.shutdown().await;
            }
        });
    }
    group.finish();
}

/// `n` counter agents (`Durability::Checkpoint` with a storage), started
/// 256 at a time.
async fn start_agents(
    name: &str,
    storage: Option<Arc<dyn Storage>>,
    n: usize,
) -> (Arc<Vec<AgentRef>>, Jido) {
    let durable = storage.is_some();
    let mut cfg = config().name(format!("bench-{name}"));
    if let Some(storage) = storage {
        cfg = cfg.storage(storage);
    }
    let jido = Jido::start(cfg).await.expect("instance");
    let mut agents = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(256) {
        let starts = chunk.iter().map(|i| {
            let opts = if durable {
                inline().durability(Durability::Checkpoint)
            } else {
                inline()
            };
            jido.start_agent(
                AgentState::new(Durable, AgentOptions::new().id(format!("a-{i}"))),
                opts,
            )
        });
        for agent in futures::future::join_all(starts).await {
            agents.push(agent.expect("start"));
        }
    }
    (Arc::new(agents), jido)
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
/// `call` to a `Checkpoint` agent that sets one key (`checkpoint_call`)
/// or appends one message to `history` (`checkpoint_call_append`), each
/// checkpointed as a delta of what changed (a full checkpoint when the
/// deltas outgrow the state); a `cast_durable` to a `Journal` agent
/// followed every 64th time by the checkpoint the journal mode writes
/// (amortised); and a `call` without storage.
fn durable_state(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("temp dir");
    let storage: Arc<dyn Storage> =
        Arc::new(RedbStorage::open(dir.path().join("state.redb")).expect("open"));
    let pg: Option<Arc<dyn Storage>> =
        pg_backend(&rt, "durable_state").map(|(s, _)| Arc::new(s) as Arc<dyn Storage>);
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
        let on_pg = pg.as_ref().map(|pg| {
            rt.block_on(async {
                let jido = Jido::start(
                    config()
                        .name(format!("state-pg-{h}"))
                        .storage(Arc::clone(pg)),
                )
                .await
                .expect("instance");
                let agent = jido
                    .start_agent(
                        AgentState::new(Durable, AgentOptions::new().id("cp").state(state.clone())),
                        inline().durability(Durability::Checkpoint),
                    )
                    .await
                    .expect("start");
                (jido, agent)
            })
        });
        if let Some((_, agent)) = &on_pg {
            for (name, ty) in [
                ("checkpoint_call_postgres", "note"),
                ("checkpoint_call_append_postgres", "say"),
            ] {
                group.bench_with_input(BenchmarkId::new(name, h), &h, |b, _| {
                    b.iter_custom(|iters| calls(&rt, &Arc::new(vec![agent.clone()]), ty, iters))
                });
            }
        }
        for (name, agent, ty) in [
            ("volatile_call", &volatile, "note"),
            ("checkpoint_call", &checkpointed, "note"),
            ("checkpoint_call_append", &checkpointed, "say"),
        ] {
            group.bench_with_input(BenchmarkId::new(name, h), &h, |b, _| {
                b.iter_custom(|iters| calls(&rt, &Arc::new(vec![agent.clone()]), ty, iters))
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
            if let Some((jido, _)) = on_pg {
                jido.shutdown().await;
            }
        });
    }
    group.finish();
}

criterion_group!(benches, redb, postgres, durable_calls, durable_state);
criterion_main!(benches);
