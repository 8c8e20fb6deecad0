//! [`PostgresStorage`] (feature `persist-postgres`): the external store for
//! deployments of several nodes, on tokio-postgres with a deadpool pool.
//!
//! * **Durable** as PostgreSQL is with `synchronous_commit = on` (its
//!   default): a write returns after its commit's WAL record is fsynced.
//!   PostgreSQL groups the commits of concurrent connections itself.
//! * **Atomic.** A checkpoint (or a checkpoint delta) and the truncation
//!   of the journal up to its `applied_seq` commit in one statement; a dead letter leaves the
//!   journal and enters `jido_dead_letters` in one transaction.
//! * **Fenced by epoch.** Every write checks the key's epoch under the
//!   key's row lock, so a write by an old owner that races a
//!   [`claim`](Storage::claim) either lands before the claim or fails with
//!   [`ErrorKind::Fenced`](crate::ErrorKind::Fenced).
//! * **Schema.** [`migrate`](PostgresStorage::migrate) creates (idempotently,
//!   under an advisory lock, so several nodes may run it at once) the
//!   schema given in [`PostgresOptions::schema`] (default `public`) and its
//!   tables `jido_agents` (one row per key: epoch, owner, revision, journal
//!   head, the checkpoint as `bytea` JSON, `applied_seq`, `outbox_pending`
//!   with a partial index), `jido_journal` (`bytea` CloudEvents JSON per
//!   entry), `jido_checkpoint_deltas` (`bytea` JSON per revision of a
//!   [`put_checkpoint_delta`](Storage::put_checkpoint_delta), folded into
//!   the checkpoint by every read in the same snapshot, removed by a full
//!   write and by [`delete`](Storage::delete)), `jido_dead_letters` and
//!   `jido_schema` (the layout version, [`SCHEMA_VERSION`]; an older
//!   layout is upgraded in place).
//!   JSON is kept as bytes, exactly as written; inspect it with
//!   `convert_from(checkpoint, 'UTF8')::jsonb`.
//!
//! # Examples
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> jido::Result<()> {
//! use jido::persist::postgres::{PostgresOptions, PostgresStorage};
//! use jido::persist::{Checkpoint, Expect, Storage, StorageKey};
//!
//! let storage = PostgresStorage::connect(
//!     "host=/var/run/postgresql user=jido dbname=jido",
//!     PostgresOptions::new().schema("agents").pool_size(16),
//! )
//! .await?;
//! storage.migrate().await?;
//! let key = StorageKey::new("shop", "order", "17")?;
//! let epoch = storage.claim(&key, "node-a").await?;
//! storage.put_checkpoint(&key, &Checkpoint::new("order", "1", "17"), Expect::Any, epoch).await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures::future::{BoxFuture, FutureExt};
use tokio_postgres::NoTls;
use tokio_postgres::types::ToSql;

use super::errors::{
    check_epoch, envelope_bytes, envelope_from, expect_holds, journal_conflict, no_entry, stale_rev,
};
use super::{
    Checkpoint, CheckpointDelta, DeadLetter, Expect, JournalEntry, Owner, Storage, StorageKey,
    Stored, TimerDue,
};
use crate::error::{Error, Result};
use crate::signal::Signal;

/// The layout version [`PostgresStorage::migrate`] creates.
///
/// Version 2 added `jido_checkpoint_deltas` (a version 1 schema is
/// upgraded in place by [`migrate`](PostgresStorage::migrate)).
pub const SCHEMA_VERSION: i32 = 2;

/// Settings of [`PostgresStorage::connect`].
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    schema: String,
    pool_size: usize,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            schema: "public".into(),
            pool_size: 16,
        }
    }
}

impl PostgresOptions {
    /// Schema `public`, 16 connections.
    pub fn new() -> Self {
        Self::default()
    }

    /// The schema holding the tables (created by
    /// [`migrate`](PostgresStorage::migrate)). A lowercase SQL identifier:
    /// `[a-z_][a-z0-9_]*`, at most 63 bytes.
    #[must_use]
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The most connections the pool opens (at least 1).
    #[must_use]
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }
}

/// A [`Storage`] in PostgreSQL (see the [module docs](self)). Clones share
/// the pool.
#[derive(Clone)]
pub struct PostgresStorage {
    pool: Pool,
    sql: Arc<Sql>,
}

impl std::fmt::Debug for PostgresStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStorage")
            .field("schema", &self.sql.schema)
            .finish_non_exhaustive()
    }
}

/// The statements, with the schema filled in.
struct Sql {
    schema: String,
    migrate: String,
    migrate_v2: String,
    fill_v2: String,
    list_timers: String,
    lock: String,
    ensure: String,
    put_fast: String,
    put: String,
    put_delta_fast: String,
    put_delta: String,
    insert_delta: String,
    drop_deltas: String,
    truncate: String,
    delete_cp: String,
    append_fast: String,
    append: String,
    get: String,
    load: String,
    head: String,
    bump: String,
    claim: String,
    owner: String,
    take_entry: String,
    dead_insert: String,
    dead_load: String,
}

impl Sql {
    fn new(s: &str) -> Self {
        let a = format!("\"{s}\".jido_agents");
        let j = format!("\"{s}\".jido_journal");
        let d = format!("\"{s}\".jido_dead_letters");
        let x = format!("\"{s}\".jido_checkpoint_deltas");
        let key = "namespace = $1 AND kind = $2 AND id = $3";
        // Expect: $8 = 0 any, 1 absent, 2 revision $9.
        let expect = "CASE $8::int WHEN 0 THEN true WHEN 1 THEN a.checkpoint IS NULL \
                      ELSE a.checkpoint IS NOT NULL AND a.rev = $9::bigint END";
        Self {
            schema: s.to_owned(),
            migrate: format!(
                "CREATE SCHEMA IF NOT EXISTS \"{s}\";
                 CREATE TABLE IF NOT EXISTS \"{s}\".jido_schema (version integer NOT NULL);
                 CREATE TABLE IF NOT EXISTS {a} (
                   namespace text NOT NULL, kind text NOT NULL, id text NOT NULL,
                   epoch bigint NOT NULL DEFAULT 0, owner text,
                   rev bigint NOT NULL DEFAULT 0, last_seq bigint NOT NULL DEFAULT 0,
                   checkpoint bytea, applied_seq bigint NOT NULL DEFAULT 0,
                   outbox_pending boolean NOT NULL DEFAULT false,
                   updated_at timestamptz NOT NULL DEFAULT now(),
                   PRIMARY KEY (namespace, kind, id));
                 CREATE INDEX IF NOT EXISTS jido_agents_outbox_pending
                   ON {a} (namespace, kind) WHERE outbox_pending;
                 CREATE TABLE IF NOT EXISTS {j} (
                   namespace text NOT NULL, kind text NOT NULL, id text NOT NULL,
                   seq bigint NOT NULL, signal bytea NOT NULL, attempts integer NOT NULL DEFAULT 0,
                   PRIMARY KEY (namespace, kind, id, seq));
                 CREATE TABLE IF NOT EXISTS {d} (
                   dl_id bigserial PRIMARY KEY,
                   namespace text NOT NULL, kind text NOT NULL, id text NOT NULL,
                   seq bigint NOT NULL, signal bytea NOT NULL, attempts integer NOT NULL,
                   error text NOT NULL, at timestamptz NOT NULL DEFAULT now());
                 CREATE INDEX IF NOT EXISTS jido_dead_letters_key ON {d} (namespace, kind, id, dl_id);"
            ),
            // Version 2: checkpoint deltas, one row per revision, folded
            // into the checkpoint on read, removed by a full write.
            migrate_v2: format!(
                "CREATE TABLE IF NOT EXISTS {x} (
                   namespace text NOT NULL, kind text NOT NULL, id text NOT NULL,
                   rev bigint NOT NULL, delta bytea NOT NULL,
                   PRIMARY KEY (namespace, kind, id, rev));
                 ALTER TABLE {a} ADD COLUMN IF NOT EXISTS next_due_ms bigint;
                 CREATE INDEX IF NOT EXISTS jido_agents_timers
                   ON {a} (namespace, kind, (id COLLATE \"C\")) WHERE next_due_ms IS NOT NULL;"
            ),
            // Version 1 rows: the next due time from the checkpoint's
            // timers (a version 1 schema holds no deltas).
            fill_v2: format!(
                "UPDATE {a} SET next_due_ms = (
                   SELECT min(COALESCE((t->>'due_ms')::bigint, (t->>'next_ms')::bigint))
                   FROM jsonb_array_elements(convert_from(checkpoint, 'UTF8')::jsonb -> 'timers') AS t)
                 WHERE checkpoint IS NOT NULL"
            ),
            list_timers: format!(
                "SELECT id, next_due_ms FROM {a}
                 WHERE namespace = $1 AND kind = $2 AND id COLLATE \"C\" > $3 AND next_due_ms IS NOT NULL
                 ORDER BY id COLLATE \"C\" LIMIT $4"
            ),
            lock: format!(
                "SELECT epoch, rev, last_seq, checkpoint IS NOT NULL, owner FROM {a} WHERE {key} FOR UPDATE"
            ),
            ensure: format!(
                "INSERT INTO {a} (namespace, kind, id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"
            ),
            // One statement: the checkpoint and the journal truncation
            // commit together, or neither does.
            put_fast: format!(
                "WITH up AS (
                   UPDATE {a} AS a SET rev = a.rev + 1, checkpoint = $4, applied_seq = $5,
                     outbox_pending = $6, next_due_ms = $10, updated_at = now()
                   WHERE {key} AND a.epoch = $7 AND ({expect})
                   RETURNING a.rev),
                 del AS (DELETE FROM {j} WHERE {key} AND seq <= $5 AND EXISTS (SELECT 1 FROM up)),
                 dd AS (DELETE FROM {x} WHERE {key} AND EXISTS (SELECT 1 FROM up))
                 SELECT rev FROM up"
            ),
            put: format!(
                "UPDATE {a} SET rev = $4, checkpoint = $5, applied_seq = $6, outbox_pending = $7,
                   next_due_ms = $8, updated_at = now() WHERE {key}"
            ),
            // One statement: the delta, the revision and the journal
            // truncation commit together; only over a live checkpoint.
            put_delta_fast: format!(
                "WITH up AS (
                   UPDATE {a} AS a SET rev = a.rev + 1, applied_seq = $5,
                     outbox_pending = $6, next_due_ms = $10, updated_at = now()
                   WHERE {key} AND a.epoch = $7 AND a.checkpoint IS NOT NULL AND ({expect})
                   RETURNING a.rev),
                 ins AS (INSERT INTO {x} (namespace, kind, id, rev, delta)
                   SELECT $1, $2, $3, up.rev, $4 FROM up),
                 del AS (DELETE FROM {j} WHERE {key} AND seq <= $5 AND EXISTS (SELECT 1 FROM up))
                 SELECT rev FROM up"
            ),
            put_delta: format!(
                "UPDATE {a} SET rev = $4, applied_seq = $5, outbox_pending = $6,
                   next_due_ms = $7, updated_at = now() WHERE {key}"
            ),
            insert_delta: format!(
                "INSERT INTO {x} (namespace, kind, id, rev, delta) VALUES ($1, $2, $3, $4, $5)"
            ),
            drop_deltas: format!("DELETE FROM {x} WHERE {key}"),
            truncate: format!("DELETE FROM {j} WHERE {key} AND seq <= $4"),
            delete_cp: format!(
                "UPDATE {a} SET checkpoint = NULL, applied_seq = 0, outbox_pending = false,
                   next_due_ms = NULL, last_seq = 0, updated_at = now() WHERE {key}"
            ),
            append_fast: format!(
                "WITH up AS (
                   UPDATE {a} SET last_seq = last_seq + $6::bigint, updated_at = now()
                   WHERE {key} AND epoch = $4 AND last_seq = $5 RETURNING last_seq),
                 ins AS (
                   INSERT INTO {j} (namespace, kind, id, seq, signal)
                   SELECT $1, $2, $3, $5::bigint + t.n, t.s FROM unnest($7::bytea[]) WITH ORDINALITY AS t(s, n)
                   WHERE EXISTS (SELECT 1 FROM up))
                 SELECT last_seq FROM up"
            ),
            append: format!(
                "WITH up AS (UPDATE {a} SET last_seq = $5::bigint + $6::bigint, updated_at = now() WHERE {key}),
                 ins AS (
                   INSERT INTO {j} (namespace, kind, id, seq, signal)
                   SELECT $1, $2, $3, $5::bigint + t.n, t.s FROM unnest($7::bytea[]) WITH ORDINALITY AS t(s, n))
                 SELECT $4::bigint"
            ),
            // One statement, so one snapshot: the checkpoint and its deltas.
            get: format!(
                "SELECT a.epoch, a.rev, a.checkpoint,
                   ARRAY(SELECT x.delta FROM {x} AS x
                         WHERE x.namespace = $1 AND x.kind = $2 AND x.id = $3 ORDER BY x.rev)
                 FROM {a} AS a
                 WHERE a.namespace = $1 AND a.kind = $2 AND a.id = $3 AND a.checkpoint IS NOT NULL"
            ),
            load: format!(
                "SELECT seq, signal, attempts FROM {j} WHERE {key} AND seq > $4 ORDER BY seq LIMIT $5"
            ),
            head: format!("SELECT last_seq FROM {a} WHERE {key}"),
            bump: format!(
                "UPDATE {j} SET attempts = attempts + 1 WHERE {key} AND seq = $4 RETURNING attempts"
            ),
            claim: format!(
                "INSERT INTO {a} AS a (namespace, kind, id, epoch, owner) VALUES ($1, $2, $3, 1, $4)
                 ON CONFLICT (namespace, kind, id)
                 DO UPDATE SET epoch = a.epoch + 1, owner = EXCLUDED.owner, updated_at = now()
                 RETURNING epoch"
            ),
            owner: format!("SELECT owner, epoch FROM {a} WHERE {key} AND owner IS NOT NULL"),
            take_entry: format!(
                "DELETE FROM {j} WHERE {key} AND seq = $4 RETURNING signal, attempts"
            ),
            dead_insert: format!(
                "INSERT INTO {d} (namespace, kind, id, seq, signal, attempts, error)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)"
            ),
            dead_load: format!(
                "SELECT seq, signal, attempts, error FROM {d} WHERE {key} ORDER BY dl_id LIMIT $4"
            ),
        }
    }
}

fn backend(e: impl Into<BackendError>) -> Error {
    match e.into() {
        BackendError::Pg(e) => {
            let mut err = Error::storage("postgres storage failed");
            err = match e.as_db_error() {
                Some(db) => err
                    .with_detail("reason", db.message().to_owned())
                    .with_detail("sqlstate", db.code().code().to_owned()),
                None => err.with_detail("reason", e.to_string()),
            };
            err.with_source(e)
        }
        BackendError::Pool(e) => {
            Error::storage("postgres pool failed").with_detail("reason", e.to_string())
        }
    }
}

enum BackendError {
    Pg(tokio_postgres::Error),
    Pool(deadpool_postgres::PoolError),
}

impl From<tokio_postgres::Error> for BackendError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Pg(e)
    }
}

impl From<deadpool_postgres::PoolError> for BackendError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        Self::Pool(e)
    }
}

/// `limit` as a row count.
fn limit_i64(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// A `u64` as a PostgreSQL `bigint`.
fn big(n: u64, what: &'static str) -> Result<i64> {
    i64::try_from(n).map_err(|_| {
        Error::validation(format!("{what} is out of range for postgres")).with_detail("value", n)
    })
}

/// A `bigint` read back as a `u64`.
fn unbig(n: i64, what: &'static str) -> Result<u64> {
    u64::try_from(n).map_err(|_| {
        Error::storage(format!("corrupt {what}"))
            .with_detail("value", n)
            .with_retry(false)
    })
}

fn get_col<'r, T: tokio_postgres::types::FromSql<'r>>(
    row: &'r tokio_postgres::Row,
    i: usize,
) -> Result<T> {
    row.try_get(i).map_err(backend)
}

/// A key's row, locked.
struct KeyRow {
    epoch: u64,
    rev: u64,
    last_seq: u64,
    live: bool,
}

impl PostgresStorage {
    /// Connects a pool to the server named by `conn` (a libpq-style
    /// `key=value` string or a `postgresql://` URL; no TLS). Connections
    /// open lazily: the first operation finds out whether the server is
    /// there.
    ///
    /// # Errors
    ///
    /// A [`ErrorKind::Configuration`](crate::ErrorKind::Configuration)
    /// error for an unparsable connection string or an invalid schema name.
    pub async fn connect(conn: &str, options: PostgresOptions) -> Result<Self> {
        let schema = &options.schema;
        let valid = !schema.is_empty()
            && schema.len() <= 63
            && schema.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(Error::configuration("invalid postgres schema name")
                .with_detail("schema", schema.clone()));
        }
        let config: tokio_postgres::Config = conn.parse().map_err(|e: tokio_postgres::Error| {
            Error::configuration("invalid postgres connection string")
                .with_detail("reason", e.to_string())
        })?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size)
            .build()
            .map_err(|e| {
                Error::configuration("cannot build the postgres pool")
                    .with_detail("reason", e.to_string())
            })?;
        Ok(Self {
            pool,
            sql: Arc::new(Sql::new(schema)),
        })
    }

    /// The schema holding the tables.
    pub fn schema(&self) -> &str {
        &self.sql.schema
    }

    /// Creates the schema and the tables if missing (see the [module
    /// docs](self)). Idempotent; safe to run from several nodes at once.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Storage`](crate::ErrorKind::Storage) when the server
    /// fails or holds a newer layout (`"unsupported postgres schema
    /// version"`, not retryable).
    pub async fn migrate(&self) -> Result<()> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        // One migrator at a time (per database); released at commit.
        tx.execute("SELECT pg_advisory_xact_lock(7400310517)", &[])
            .await
            .map_err(backend)?;
        tx.batch_execute(&self.sql.migrate).await.map_err(backend)?;
        tx.batch_execute(&self.sql.migrate_v2)
            .await
            .map_err(backend)?;
        let version_sql = format!(
            "SELECT max(version) FROM \"{}\".jido_schema",
            self.sql.schema
        );
        let version: Option<i32> =
            get_col(&tx.query_one(&version_sql, &[]).await.map_err(backend)?, 0)?;
        match version {
            None => {
                let insert = format!(
                    "INSERT INTO \"{}\".jido_schema (version) VALUES ($1)",
                    self.sql.schema
                );
                tx.execute(&insert, &[&SCHEMA_VERSION])
                    .await
                    .map_err(backend)?;
            }
            Some(v) if v < SCHEMA_VERSION => {
                tx.batch_execute(&self.sql.fill_v2).await.map_err(backend)?;
                // The layout of every version is created above (each
                // step is idempotent): record the upgrade.
                let update = format!(
                    "UPDATE \"{}\".jido_schema SET version = $1",
                    self.sql.schema
                );
                tx.execute(&update, &[&SCHEMA_VERSION])
                    .await
                    .map_err(backend)?;
            }
            Some(v) if v == SCHEMA_VERSION => {}
            Some(v) => {
                return Err(Error::storage("unsupported postgres schema version")
                    .with_detail("version", v)
                    .with_detail("supported", SCHEMA_VERSION)
                    .with_retry(false));
            }
        }
        tx.commit().await.map_err(backend)
    }

    /// Runs `f` in a transaction holding the row lock of `key` (the row is
    /// created if missing), and commits if `f` succeeds.
    async fn locked<T>(
        &self,
        key: &StorageKey,
        f: impl AsyncFnOnce(&deadpool_postgres::Transaction<'_>, KeyRow) -> Result<T>,
    ) -> Result<T> {
        let mut client = self.pool.get().await.map_err(backend)?;
        let tx = client.transaction().await.map_err(backend)?;
        let k: [&(dyn ToSql + Sync); 3] = [&key.namespace(), &key.kind(), &key.id()];
        let lock = tx.prepare_cached(&self.sql.lock).await.map_err(backend)?;
        let row = match tx.query_opt(&lock, &k).await.map_err(backend)? {
            Some(row) => row,
            None => {
                let ensure = tx.prepare_cached(&self.sql.ensure).await.map_err(backend)?;
                tx.execute(&ensure, &k).await.map_err(backend)?;
                tx.query_one(&lock, &k).await.map_err(backend)?
            }
        };
        let state = KeyRow {
            epoch: unbig(get_col(&row, 0)?, "epoch")?,
            rev: unbig(get_col(&row, 1)?, "revision")?,
            last_seq: unbig(get_col(&row, 2)?, "journal head")?,
            live: get_col(&row, 3)?,
        };
        let out = f(&tx, state).await?;
        tx.commit().await.map_err(backend)?;
        Ok(out)
    }

    async fn put(
        &self,
        key: &StorageKey,
        cp: &Checkpoint,
        expect: Expect,
        epoch: u64,
    ) -> Result<u64> {
        let w = WriteArgs::new(cp.to_json_vec(), cp, expect, epoch)?;
        // Fast path: one statement when the key exists and the write holds.
        if let Some(rev) = self.put_fast(&self.sql.put_fast, key, &w).await? {
            return Ok(rev);
        }
        // Slow path: a new key, or a write that loses (find out why).
        let sql = &self.sql;
        self.locked(key, async |tx, row| {
            check_epoch(key, epoch, row.epoch)?;
            let current = row.live.then_some(row.rev);
            if !expect_holds(expect, current) {
                return Err(stale_rev(key, expect, current));
            }
            let rev = row.rev + 1;
            let put = tx.prepare_cached(&sql.put).await.map_err(backend)?;
            tx.execute(
                &put,
                &[
                    &key.namespace(),
                    &key.kind(),
                    &key.id(),
                    &big(rev, "revision")?,
                    &w.data,
                    &w.applied,
                    &w.pending,
                    &w.next_due,
                ],
            )
            .await
            .map_err(backend)?;
            let drop = tx.prepare_cached(&sql.drop_deltas).await.map_err(backend)?;
            tx.execute(&drop, &[&key.namespace(), &key.kind(), &key.id()])
                .await
                .map_err(backend)?;
            let truncate = tx.prepare_cached(&sql.truncate).await.map_err(backend)?;
            tx.execute(
                &truncate,
                &[&key.namespace(), &key.kind(), &key.id(), &w.applied],
            )
            .await
            .map_err(backend)?;
            Ok(rev)
        })
        .await
    }

    async fn put_delta(
        &self,
        key: &StorageKey,
        delta: &CheckpointDelta,
        expect: Expect,
        epoch: u64,
    ) -> Result<u64> {
        let w = WriteArgs::new(delta.to_json_vec(), &delta.checkpoint, expect, epoch)?;
        // Fast path: one statement when the checkpoint exists and the
        // write holds.
        if let Some(rev) = self.put_fast(&self.sql.put_delta_fast, key, &w).await? {
            return Ok(rev);
        }
        // Slow path: the write loses (find out why), or it raced a claim.
        let sql = &self.sql;
        self.locked(key, async |tx, row| {
            check_epoch(key, epoch, row.epoch)?;
            let current = row.live.then_some(row.rev);
            if current.is_none() || !expect_holds(expect, current) {
                return Err(stale_rev(key, expect, current));
            }
            let rev = big(row.rev + 1, "revision")?;
            let put = tx.prepare_cached(&sql.put_delta).await.map_err(backend)?;
            tx.execute(
                &put,
                &[
                    &key.namespace(),
                    &key.kind(),
                    &key.id(),
                    &rev,
                    &w.applied,
                    &w.pending,
                    &w.next_due,
                ],
            )
            .await
            .map_err(backend)?;
            let insert = tx
                .prepare_cached(&sql.insert_delta)
                .await
                .map_err(backend)?;
            tx.execute(
                &insert,
                &[&key.namespace(), &key.kind(), &key.id(), &rev, &w.data],
            )
            .await
            .map_err(backend)?;
            let truncate = tx.prepare_cached(&sql.truncate).await.map_err(backend)?;
            tx.execute(
                &truncate,
                &[&key.namespace(), &key.kind(), &key.id(), &w.applied],
            )
            .await
            .map_err(backend)?;
            Ok(row.rev + 1)
        })
        .await
    }

    async fn append(
        &self,
        key: &StorageKey,
        epoch: u64,
        after: u64,
        signals: &[Signal],
    ) -> Result<u64> {
        let bytes: Vec<Vec<u8>> = signals.iter().map(Signal::to_json_vec).collect();
        let n = big(bytes.len() as u64, "journal length")?;
        let epoch_i = big(epoch, "epoch")?;
        let after_i = big(after, "sequence number")?;
        big(after.saturating_add(bytes.len() as u64), "sequence number")?;
        {
            let client = self.pool.get().await.map_err(backend)?;
            let stmt = client
                .prepare_cached(&self.sql.append_fast)
                .await
                .map_err(backend)?;
            let row = client
                .query_opt(
                    &stmt,
                    &[
                        &key.namespace(),
                        &key.kind(),
                        &key.id(),
                        &epoch_i,
                        &after_i,
                        &n,
                        &bytes,
                    ],
                )
                .await
                .map_err(backend)?;
            if let Some(row) = row {
                return unbig(get_col(&row, 0)?, "journal head");
            }
        }
        let sql = &self.sql;
        self.locked(key, async |tx, row| {
            check_epoch(key, epoch, row.epoch)?;
            if row.last_seq != after {
                return Err(journal_conflict(key, after, row.last_seq));
            }
            let append = tx.prepare_cached(&sql.append).await.map_err(backend)?;
            tx.execute(
                &append,
                &[
                    &key.namespace(),
                    &key.kind(),
                    &key.id(),
                    &epoch_i,
                    &after_i,
                    &n,
                    &bytes,
                ],
            )
            .await
            .map_err(backend)?;
            Ok(after + bytes.len() as u64)
        })
        .await
    }

    /// A checkpoint write's fast path (`sql`: one statement when the
    /// key's checkpoint exists and the write holds): the new revision, or
    /// `None` when the statement did not apply.
    async fn put_fast(&self, sql: &str, key: &StorageKey, w: &WriteArgs) -> Result<Option<u64>> {
        let rows = self
            .query(
                sql,
                &[
                    &key.namespace(),
                    &key.kind(),
                    &key.id(),
                    &w.data,
                    &w.applied,
                    &w.pending,
                    &w.epoch,
                    &w.mode,
                    &w.want,
                    &w.next_due,
                ],
            )
            .await?;
        rows.first()
            .map(|row| unbig(get_col(row, 0)?, "revision"))
            .transpose()
    }

    async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>> {
        let client = self.pool.get().await.map_err(backend)?;
        let stmt = client.prepare_cached(sql).await.map_err(backend)?;
        client.query(&stmt, params).await.map_err(backend)
    }
}

/// The values of a checkpoint or delta write as PostgreSQL takes them.
struct WriteArgs {
    /// The stored JSON (the checkpoint or the delta).
    data: Vec<u8>,
    applied: i64,
    pending: bool,
    next_due: Option<i64>,
    epoch: i64,
    /// The expectation: 0 any, 1 absent, 2 revision `want`.
    mode: i32,
    want: i64,
}

impl WriteArgs {
    fn new(data: Vec<u8>, cp: &Checkpoint, expect: Expect, epoch: u64) -> Result<Self> {
        let (mode, want) = match expect {
            Expect::Any => (0, 0),
            Expect::Absent => (1, 0),
            Expect::Rev(rev) => (2, big(rev, "revision")?),
        };
        Ok(Self {
            data,
            applied: big(cp.applied_seq, "applied_seq")?,
            pending: cp.outbox_pending(),
            next_due: cp.next_due_ms(),
            epoch: big(epoch, "epoch")?,
            mode,
            want,
        })
    }
}

impl Storage for PostgresStorage {
    fn get_checkpoint<'a>(
        &'a self,
        key: &'a StorageKey,
    ) -> BoxFuture<'a, Result<Option<Stored<Checkpoint>>>> {
        async move {
            let rows = self
                .query(&self.sql.get, &[&key.namespace(), &key.kind(), &key.id()])
                .await?;
            let Some(row) = rows.first() else {
                return Ok(None);
            };
            let data: Vec<u8> = get_col(row, 2)?;
            let deltas: Vec<Vec<u8>> = get_col(row, 3)?;
            let mut value = Checkpoint::from_json_slice(&data)?;
            for delta in deltas {
                CheckpointDelta::from_json_slice(&delta)?.apply_to(&mut value)?;
            }
            Ok(Some(Stored {
                value,
                rev: unbig(get_col(row, 1)?, "revision")?,
                epoch: unbig(get_col(row, 0)?, "epoch")?,
            }))
        }
        .boxed()
    }

    fn put_checkpoint<'a>(
        &'a self,
        key: &'a StorageKey,
        cp: &'a Checkpoint,
        expect: Expect,
        epoch: u64,
    ) -> BoxFuture<'a, Result<u64>> {
        self.put(key, cp, expect, epoch).boxed()
    }

    fn put_checkpoint_delta<'a>(
        &'a self,
        key: &'a StorageKey,
        delta: &'a CheckpointDelta,
        expect: Expect,
        epoch: u64,
    ) -> BoxFuture<'a, Result<u64>> {
        self.put_delta(key, delta, expect, epoch).boxed()
    }

    fn list_timers<'a>(
        &'a self,
        namespace: &'a str,
        kind: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TimerDue>>> {
        async move {
            let after = after.unwrap_or("");
            let rows = self
                .query(
                    &self.sql.list_timers,
                    &[&namespace, &kind, &after, &limit_i64(limit)],
                )
                .await?;
            rows.iter()
                .map(|row| Ok(TimerDue::new(get_col::<String>(row, 0)?, get_col(row, 1)?)))
                .collect()
        }
        .boxed()
    }

    fn delete<'a>(&'a self, key: &'a StorageKey, epoch: u64) -> BoxFuture<'a, Result<()>> {
        let sql = &self.sql;
        self.locked(key, async move |tx, row| {
            check_epoch(key, epoch, row.epoch)?;
            let k: [&(dyn ToSql + Sync); 3] = [&key.namespace(), &key.kind(), &key.id()];
            let delete = tx.prepare_cached(&sql.delete_cp).await.map_err(backend)?;
            tx.execute(&delete, &k).await.map_err(backend)?;
            let drop = tx.prepare_cached(&sql.drop_deltas).await.map_err(backend)?;
            tx.execute(&drop, &k).await.map_err(backend)?;
            let truncate = tx.prepare_cached(&sql.truncate).await.map_err(backend)?;
            tx.execute(
                &truncate,
                &[&key.namespace(), &key.kind(), &key.id(), &i64::MAX],
            )
            .await
            .map_err(backend)?;
            Ok(())
        })
        .boxed()
    }

    fn append_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        after: u64,
        signals: &'a [Signal],
    ) -> BoxFuture<'a, Result<u64>> {
        self.append(key, epoch, after, signals).boxed()
    }

    fn load_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<JournalEntry>>> {
        async move {
            let Ok(after) = i64::try_from(after) else {
                return Ok(Vec::new());
            };
            let rows = self
                .query(
                    &self.sql.load,
                    &[
                        &key.namespace(),
                        &key.kind(),
                        &key.id(),
                        &after,
                        &limit_i64(limit),
                    ],
                )
                .await?;
            rows.iter()
                .map(|row| {
                    let attempts: i32 = get_col(row, 2)?;
                    Ok(JournalEntry {
                        seq: unbig(get_col(row, 0)?, "sequence number")?,
                        signal: get_col(row, 1)?,
                        attempts: u32::try_from(attempts).unwrap_or(0),
                    })
                })
                .collect()
        }
        .boxed()
    }

    fn journal_head<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, Result<u64>> {
        async move {
            let rows = self
                .query(&self.sql.head, &[&key.namespace(), &key.kind(), &key.id()])
                .await?;
            match rows.first() {
                Some(row) => unbig(get_col(row, 0)?, "journal head"),
                None => Ok(0),
            }
        }
        .boxed()
    }

    fn truncate_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        up_to: u64,
    ) -> BoxFuture<'a, Result<()>> {
        let sql = &self.sql;
        self.locked(key, async move |tx, row| {
            check_epoch(key, epoch, row.epoch)?;
            let up_to = i64::try_from(up_to).unwrap_or(i64::MAX);
            let truncate = tx.prepare_cached(&sql.truncate).await.map_err(backend)?;
            tx.execute(
                &truncate,
                &[&key.namespace(), &key.kind(), &key.id(), &up_to],
            )
            .await
            .map_err(backend)?;
            Ok(())
        })
        .boxed()
    }

    fn bump_attempts<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        seq: u64,
    ) -> BoxFuture<'a, Result<u32>> {
        let sql = &self.sql;
        self.locked(key, async move |tx, row| {
            check_epoch(key, epoch, row.epoch)?;
            let Ok(seq_i) = i64::try_from(seq) else {
                return Err(no_entry(key, seq));
            };
            let bump = tx.prepare_cached(&sql.bump).await.map_err(backend)?;
            let row = tx
                .query_opt(&bump, &[&key.namespace(), &key.kind(), &key.id(), &seq_i])
                .await
                .map_err(backend)?
                .ok_or_else(|| no_entry(key, seq))?;
            let attempts: i32 = get_col(&row, 0)?;
            Ok(u32::try_from(attempts).unwrap_or(0))
        })
        .boxed()
    }

    fn claim<'a>(&'a self, key: &'a StorageKey, node: &'a str) -> BoxFuture<'a, Result<u64>> {
        async move {
            let rows = self
                .query(
                    &self.sql.claim,
                    &[&key.namespace(), &key.kind(), &key.id(), &node],
                )
                .await?;
            let row = rows
                .first()
                .ok_or_else(|| Error::storage("postgres claim returned no epoch"))?;
            unbig(get_col(row, 0)?, "epoch")
        }
        .boxed()
    }

    fn owner<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, Result<Option<Owner>>> {
        async move {
            let rows = self
                .query(&self.sql.owner, &[&key.namespace(), &key.kind(), &key.id()])
                .await?;
            match rows.first() {
                Some(row) => Ok(Some(Owner {
                    node: get_col(row, 0)?,
                    epoch: unbig(get_col(row, 1)?, "epoch")?,
                })),
                None => Ok(None),
            }
        }
        .boxed()
    }

    fn dead_letter<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        seq: u64,
        error: &'a Error,
    ) -> BoxFuture<'a, Result<()>> {
        let sql = &self.sql;
        self.locked(key, async move |tx, row| {
            check_epoch(key, epoch, row.epoch)?;
            let Ok(seq_i) = i64::try_from(seq) else {
                return Err(no_entry(key, seq));
            };
            let take = tx.prepare_cached(&sql.take_entry).await.map_err(backend)?;
            let entry = tx
                .query_opt(&take, &[&key.namespace(), &key.kind(), &key.id(), &seq_i])
                .await
                .map_err(backend)?
                .ok_or_else(|| no_entry(key, seq))?;
            let signal: Vec<u8> = get_col(&entry, 0)?;
            let attempts: i32 = get_col(&entry, 1)?;
            let error = String::from_utf8(envelope_bytes(error)).unwrap_or_default();
            let insert = tx.prepare_cached(&sql.dead_insert).await.map_err(backend)?;
            tx.execute(
                &insert,
                &[
                    &key.namespace(),
                    &key.kind(),
                    &key.id(),
                    &seq_i,
                    &signal,
                    &attempts,
                    &error,
                ],
            )
            .await
            .map_err(backend)?;
            Ok(())
        })
        .boxed()
    }

    fn load_dead_letters<'a>(
        &'a self,
        key: &'a StorageKey,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<DeadLetter>>> {
        async move {
            let rows = self
                .query(
                    &self.sql.dead_load,
                    &[&key.namespace(), &key.kind(), &key.id(), &limit_i64(limit)],
                )
                .await?;
            rows.iter()
                .map(|row| {
                    let attempts: i32 = get_col(row, 2)?;
                    let error: String = get_col(row, 3)?;
                    Ok(DeadLetter {
                        seq: unbig(get_col(row, 0)?, "sequence number")?,
                        signal: get_col(row, 1)?,
                        attempts: u32::try_from(attempts).unwrap_or(0),
                        error: envelope_from(error.as_bytes())?,
                    })
                })
                .collect()
        }
        .boxed()
    }
}
