//! [`RedbStorage`] (feature `persist-redb`): the embedded durable store, one
//! redb file, no server.
//!
//! * **Durable on every write.** Each commit uses redb's default
//!   `Durability::Immediate`: when a write returns `Ok`, its commit has
//!   been fsynced (checksummed, copy-on-write: a crash leaves the last
//!   commit or the one before, never a mix).
//! * **Group commit.** One writer thread owns every write. It takes the
//!   first waiting request, then every request queued behind it (up to
//!   [`MAX_BATCH`]), applies them in arrival order in **one** transaction
//!   and commits once: many agents share one fsync. Nothing waits for a
//!   batch to fill: an idle store commits a lone write at once, and under
//!   load the requests that arrive during one fsync form the next batch.
//!   A write that loses (a conflict, a fenced epoch) changes nothing and
//!   does not affect the others of its batch; a failed commit fails them
//!   all, and none of them took effect.
//! * **Reads** run in redb read transactions (MVCC snapshots that never
//!   wait for the writer) on tokio's blocking pool.
//! * **One process per file.** redb locks the file: a second
//!   [`open`](RedbStorage::open) of it (from this process or another) fails
//!   until the first storage is dropped. In a cluster, use PostgreSQL.
//!
//! # Examples
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
//! use jido::persist::redb::RedbStorage;
//! use jido::persist::{Checkpoint, Expect, Storage, StorageKey};
//!
//! let dir = std::env::temp_dir().join(format!("jido-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).map_err(|e| jido::Error::storage("no temp dir").with_source(e))?;
//! let path = dir.join("agents.redb");
//! let key = StorageKey::new("app", "counter", "c-1")?;
//! {
//!     let storage = RedbStorage::open(&path)?;
//!     storage.put_checkpoint(&key, &Checkpoint::new("counter", "1", "c-1"), Expect::Absent, 0).await?;
//! } // dropping the last handle stops the writer and releases the file
//! let storage = RedbStorage::open(&path)?;
//! assert_eq!(storage.get_checkpoint(&key).await?.map(|s| s.rev), Some(1));
//! # drop(storage); let _ = std::fs::remove_dir_all(&dir);
//! # Ok(()) }
//! ```

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use futures::future::{BoxFuture, FutureExt};
use redb::{Database, ReadableDatabase, ReadableTable, Table, TableDefinition};
use tokio::sync::oneshot;

use super::errors::{
    check_epoch, envelope_bytes, envelope_from, expect_holds, journal_conflict, no_entry, stale_rev,
};
use super::{
    Checkpoint, CheckpointDelta, DeadLetter, Expect, JournalEntry, Owner, Storage, StorageKey,
    Stored, TimerDue, corrupt,
};
use crate::error::{Error, Result};
use crate::signal::Signal;

/// The most writes one commit takes.
pub const MAX_BATCH: usize = 4096;

/// The layout of the tables below; stored under `format` in `jido_meta`.
/// Format 2 added `jido_checkpoint_deltas`; a format 1 file is the same
/// without it and is upgraded on open (older code then refuses the file,
/// which it could not read right). Format 3 added `jido_timers`, filled on
/// upgrade from the stored checkpoints.
const FORMAT: u64 = 3;

type K3<'a> = (&'a str, &'a str, &'a str);
type K4<'a> = (&'a str, &'a str, &'a str, u64);

/// A key's row: `(epoch, last revision, journal head, has a checkpoint, owner)`.
type KeyValue<'a> = (u64, u64, u64, bool, Option<&'a str>);
/// A dead letter: `(seq, attempts, signal JSON, error envelope JSON)`.
type DeadValue<'a> = (u64, u32, &'a [u8], &'a [u8]);

/// Per key: its row.
const KEYS: TableDefinition<K3, KeyValue> = TableDefinition::new("jido_keys");
/// Per key: the checkpoint's JSON.
const CHECKPOINTS: TableDefinition<K3, &[u8]> = TableDefinition::new("jido_checkpoints");
/// Per key and revision: a checkpoint delta's JSON, folded into the
/// checkpoint on read; removed by the next full checkpoint.
const DELTAS: TableDefinition<K4, &[u8]> = TableDefinition::new("jido_checkpoint_deltas");
/// Per key and sequence number: `(attempts, signal JSON)`.
const JOURNAL: TableDefinition<K4, (u32, &[u8])> = TableDefinition::new("jido_journal");
/// Per key and dead-letter number: `(seq, attempts, signal JSON, error envelope JSON)`.
const DEAD: TableDefinition<K4, DeadValue> = TableDefinition::new("jido_dead_letters");
/// Per key whose checkpoint holds timers: the earliest due time (Unix ms),
/// for [`Storage::list_timers`].
const TIMERS: TableDefinition<K3, i64> = TableDefinition::new("jido_timers");
/// `format`, `dead_letter_id`.
const META: TableDefinition<&str, u64> = TableDefinition::new("jido_meta");

/// A [`Storage`] in one redb file: durable on every write, with group
/// commit (see the [module docs](self)). Clones share the file and the
/// writer thread; dropping the last one lets the writer finish what is
/// queued, then releases the file.
#[derive(Clone)]
pub struct RedbStorage {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedbStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStorage")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

struct Inner {
    db: Arc<Database>,
    tx: Mutex<Option<mpsc::Sender<Request>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    stats: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    writes: AtomicU64,
}

/// What the writer thread has done so far.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedbStats {
    /// Transactions committed (one fsync each).
    pub commits: u64,
    /// Writes applied in them (`writes / commits` is the mean batch).
    pub writes: u64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the channel ends the writer's loop once the queue is empty.
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        if let Ok(mut writer) = self.writer.lock()
            && let Some(handle) = writer.take()
        {
            let _ = handle.join();
        }
    }
}

enum Op {
    Put {
        key: StorageKey,
        data: Vec<u8>,
        applied_seq: u64,
        next_due: Option<i64>,
        expect: Expect,
        epoch: u64,
    },
    PutDelta {
        key: StorageKey,
        data: Vec<u8>,
        applied_seq: u64,
        next_due: Option<i64>,
        expect: Expect,
        epoch: u64,
    },
    Delete {
        key: StorageKey,
        epoch: u64,
    },
    Append {
        key: StorageKey,
        epoch: u64,
        after: u64,
        signals: Vec<Vec<u8>>,
    },
    Truncate {
        key: StorageKey,
        epoch: u64,
        up_to: u64,
    },
    Bump {
        key: StorageKey,
        epoch: u64,
        seq: u64,
    },
    Claim {
        key: StorageKey,
        node: String,
    },
    DeadLetter {
        key: StorageKey,
        epoch: u64,
        seq: u64,
        error: Vec<u8>,
    },
}

struct Request {
    op: Op,
    reply: oneshot::Sender<Result<u64>>,
}

fn backend(e: impl Into<redb::Error>) -> Error {
    let e: redb::Error = e.into();
    let retry = matches!(e, redb::Error::Io(_) | redb::Error::WouldBlock);
    Error::storage("redb storage failed")
        .with_detail("reason", e.to_string())
        .with_retry(retry)
}

fn stopped() -> Error {
    Error::storage("redb writer stopped").with_retry(false)
}

fn k3(key: &StorageKey) -> K3<'_> {
    (key.namespace(), key.kind(), key.id())
}

fn k4(key: &StorageKey, n: u64) -> K4<'_> {
    (key.namespace(), key.kind(), key.id(), n)
}

impl RedbStorage {
    /// Opens the redb file at `path`, creating it (not its directory) if
    /// missing, and starts the writer thread. Blocking: call it at start-up.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Storage`](crate::ErrorKind::Storage) when the file
    /// cannot be opened or created (including when another storage holds
    /// it), is not a redb database, or holds a newer jido layout.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let db = Database::create(path)
            .map_err(|e| backend(e).with_detail("path", path.display().to_string()))?;
        let txn = db.begin_write().map_err(backend)?;
        {
            txn.open_table(KEYS).map_err(backend)?;
            txn.open_table(CHECKPOINTS).map_err(backend)?;
            txn.open_table(JOURNAL).map_err(backend)?;
            txn.open_table(DELTAS).map_err(backend)?;
            txn.open_table(DEAD).map_err(backend)?;
            let mut meta = txn.open_table(META).map_err(backend)?;
            let format = meta.get("format").map_err(backend)?.map(|g| g.value());
            match format {
                None | Some(1) | Some(2) => {
                    fill_timers(&txn)?;
                    meta.insert("format", FORMAT).map_err(backend)?;
                }
                Some(f) if f == FORMAT => {}
                Some(f) => {
                    return Err(Error::storage("unsupported redb storage format")
                        .with_detail("format", f)
                        .with_detail("supported", FORMAT)
                        .with_retry(false));
                }
            }
        }
        txn.commit().map_err(backend)?;
        let db = Arc::new(db);
        let (tx, rx) = mpsc::channel();
        let stats = Arc::new(Counters::default());
        let writer = {
            let (db, stats) = (db.clone(), stats.clone());
            std::thread::Builder::new()
                .name("jido-redb-writer".into())
                .spawn(move || write_loop(&db, &rx, &stats))
                .map_err(|e| Error::storage("cannot start the redb writer").with_source(e))?
        };
        Ok(Self {
            inner: Arc::new(Inner {
                db,
                tx: Mutex::new(Some(tx)),
                writer: Mutex::new(Some(writer)),
                stats,
            }),
        })
    }

    /// Commits and writes so far.
    pub fn stats(&self) -> RedbStats {
        RedbStats {
            commits: self.inner.stats.commits.load(Ordering::Relaxed),
            writes: self.inner.stats.writes.load(Ordering::Relaxed),
        }
    }

    fn submit(&self, op: Op) -> BoxFuture<'static, Result<u64>> {
        let (reply, rx) = oneshot::channel();
        let sent = match self.inner.tx.lock() {
            Ok(tx) => tx
                .as_ref()
                .is_some_and(|tx| tx.send(Request { op, reply }).is_ok()),
            Err(_) => false,
        };
        async move {
            if !sent {
                return Err(stopped());
            }
            rx.await.unwrap_or_else(|_| Err(stopped()))
        }
        .boxed()
    }

    /// Runs a read transaction on the blocking pool (inline without a
    /// tokio runtime).
    fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T>> {
        let db = self.inner.db.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let task = handle.spawn_blocking(move || f(&db));
                async move {
                    task.await.map_err(|e| {
                        Error::storage("redb read failed").with_detail("reason", e.to_string())
                    })?
                }
                .boxed()
            }
            Err(_) => futures::future::ready(f(&db)).boxed(),
        }
    }
}

// ---- the writer thread -----------------------------------------------------

fn write_loop(db: &Database, rx: &mpsc::Receiver<Request>, stats: &Counters) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        let (ops, replies): (Vec<Op>, Vec<_>) = batch.into_iter().map(|r| (r.op, r.reply)).unzip();
        match commit(db, &ops) {
            Ok(outcomes) => {
                stats.commits.fetch_add(1, Ordering::Relaxed);
                stats.writes.fetch_add(ops.len() as u64, Ordering::Relaxed);
                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                    let _ = reply.send(outcome);
                }
            }
            Err(e) => {
                for reply in replies {
                    let _ = reply.send(Err(e.clone()));
                }
            }
        }
    }
}

struct Tables<'t> {
    keys: Table<'t, K3<'static>, KeyValue<'static>>,
    checkpoints: Table<'t, K3<'static>, &'static [u8]>,
    journal: Table<'t, K4<'static>, (u32, &'static [u8])>,
    deltas: Table<'t, K4<'static>, &'static [u8]>,
    timers: Table<'t, K3<'static>, i64>,
    dead: Table<'t, K4<'static>, DeadValue<'static>>,
    meta: Table<'t, &'static str, u64>,
}

/// Applies `ops` in one transaction and commits it. The outer error fails
/// the whole batch (nothing was committed); the inner results are each
/// write's own outcome.
fn commit(db: &Database, ops: &[Op]) -> Result<Vec<Result<u64>>> {
    let txn = db.begin_write().map_err(backend)?;
    let outcomes = {
        let mut t = Tables {
            keys: txn.open_table(KEYS).map_err(backend)?,
            checkpoints: txn.open_table(CHECKPOINTS).map_err(backend)?,
            journal: txn.open_table(JOURNAL).map_err(backend)?,
            deltas: txn.open_table(DELTAS).map_err(backend)?,
            timers: txn.open_table(TIMERS).map_err(backend)?,
            dead: txn.open_table(DEAD).map_err(backend)?,
            meta: txn.open_table(META).map_err(backend)?,
        };
        let mut outcomes = Vec::with_capacity(ops.len());
        for op in ops {
            outcomes.push(apply(&mut t, op).map_err(backend)?);
        }
        outcomes
    };
    txn.commit().map_err(backend)?;
    Ok(outcomes)
}

/// A key's row: `(epoch, last revision, journal head, has a checkpoint, owner)`.
#[derive(Default)]
struct Row {
    epoch: u64,
    rev: u64,
    last_seq: u64,
    live: bool,
    owner: Option<String>,
}

fn row(t: &Tables<'_>, key: &StorageKey) -> Result<Row, redb::StorageError> {
    Ok(t.keys
        .get(k3(key))?
        .map(|g| {
            let (epoch, rev, last_seq, live, owner) = g.value();
            Row {
                epoch,
                rev,
                last_seq,
                live,
                owner: owner.map(str::to_owned),
            }
        })
        .unwrap_or_default())
}

fn put_row(t: &mut Tables<'_>, key: &StorageKey, r: &Row) -> Result<(), redb::StorageError> {
    t.keys.insert(
        k3(key),
        (r.epoch, r.rev, r.last_seq, r.live, r.owner.as_deref()),
    )?;
    Ok(())
}

fn remove_journal(
    t: &mut Tables<'_>,
    key: &StorageKey,
    up_to: u64,
) -> Result<(), redb::StorageError> {
    t.journal
        .retain_in(k4(key, 0)..=k4(key, up_to), |_, _| false)
}

fn set_timers(
    t: &mut Tables<'_>,
    key: &StorageKey,
    next_due: Option<i64>,
) -> Result<(), redb::StorageError> {
    match next_due {
        Some(due) => t.timers.insert(k3(key), due).map(drop),
        None => t.timers.remove(k3(key)).map(drop),
    }
}

/// The `timers` of a stored checkpoint or delta (the rest skipped).
#[derive(serde::Deserialize)]
struct TimersOnly {
    #[serde(default)]
    timers: Vec<serde_json::Value>,
}

#[derive(serde::Deserialize)]
struct DeltaTimers {
    checkpoint: TimersOnly,
}

/// Fills `jido_timers` from the stored checkpoints (the upgrade to format
/// 3): the last delta's timers, else the checkpoint's.
fn fill_timers(txn: &redb::WriteTransaction) -> Result<()> {
    let checkpoints = txn.open_table(CHECKPOINTS).map_err(backend)?;
    let deltas = txn.open_table(DELTAS).map_err(backend)?;
    let mut timers = txn.open_table(TIMERS).map_err(backend)?;
    for item in checkpoints.iter().map_err(backend)? {
        let (k, bytes) = item.map_err(backend)?;
        let (ns, kind, id) = k.value();
        let last = deltas
            .range((ns, kind, id, 0)..=(ns, kind, id, u64::MAX))
            .map_err(backend)?
            .next_back()
            .transpose()
            .map_err(backend)?;
        let forms = match last {
            Some((_, delta)) => {
                serde_json::from_slice::<DeltaTimers>(delta.value())
                    .map_err(|e| corrupt("checkpoint delta", e))?
                    .checkpoint
                    .timers
            }
            None => {
                serde_json::from_slice::<TimersOnly>(bytes.value())
                    .map_err(|e| corrupt("checkpoint", e))?
                    .timers
            }
        };
        if let Some(due) = super::next_due_of(&forms) {
            timers.insert((ns, kind, id), due).map_err(backend)?;
        }
    }
    Ok(())
}

fn remove_deltas(t: &mut Tables<'_>, key: &StorageKey) -> Result<(), redb::StorageError> {
    t.deltas
        .retain_in(k4(key, 0)..=k4(key, u64::MAX), |_, _| false)
}

/// One write. `Err`: the backend failed (aborts the batch); `Ok(Err)`:
/// the write lost and changed nothing.
fn apply(t: &mut Tables<'_>, op: &Op) -> Result<Result<u64>, redb::StorageError> {
    match op {
        Op::Put {
            key,
            data,
            applied_seq,
            next_due,
            expect,
            epoch,
        } => {
            let mut r = row(t, key)?;
            if let Err(e) = check_epoch(key, *epoch, r.epoch) {
                return Ok(Err(e));
            }
            let current = r.live.then_some(r.rev);
            if !expect_holds(*expect, current) {
                return Ok(Err(stale_rev(key, *expect, current)));
            }
            r.rev += 1;
            r.live = true;
            put_row(t, key, &r)?;
            t.checkpoints.insert(k3(key), data.as_slice())?;
            remove_deltas(t, key)?;
            set_timers(t, key, *next_due)?;
            remove_journal(t, key, *applied_seq)?;
            Ok(Ok(r.rev))
        }
        Op::PutDelta {
            key,
            data,
            applied_seq,
            next_due,
            expect,
            epoch,
        } => {
            let mut r = row(t, key)?;
            if let Err(e) = check_epoch(key, *epoch, r.epoch) {
                return Ok(Err(e));
            }
            let current = r.live.then_some(r.rev);
            if current.is_none() || !expect_holds(*expect, current) {
                return Ok(Err(stale_rev(key, *expect, current)));
            }
            r.rev += 1;
            put_row(t, key, &r)?;
            t.deltas.insert(k4(key, r.rev), data.as_slice())?;
            set_timers(t, key, *next_due)?;
            remove_journal(t, key, *applied_seq)?;
            Ok(Ok(r.rev))
        }
        Op::Delete { key, epoch } => {
            let mut r = row(t, key)?;
            if let Err(e) = check_epoch(key, *epoch, r.epoch) {
                return Ok(Err(e));
            }
            r.live = false;
            r.last_seq = 0;
            put_row(t, key, &r)?;
            t.checkpoints.remove(k3(key))?;
            remove_deltas(t, key)?;
            set_timers(t, key, None)?;
            remove_journal(t, key, u64::MAX)?;
            Ok(Ok(0))
        }
        Op::Append {
            key,
            epoch,
            after,
            signals,
        } => {
            let mut r = row(t, key)?;
            if let Err(e) = check_epoch(key, *epoch, r.epoch) {
                return Ok(Err(e));
            }
            if r.last_seq != *after {
                return Ok(Err(journal_conflict(key, *after, r.last_seq)));
            }
            for signal in signals {
                r.last_seq += 1;
                t.journal
                    .insert(k4(key, r.last_seq), (0u32, signal.as_slice()))?;
            }
            put_row(t, key, &r)?;
            Ok(Ok(r.last_seq))
        }
        Op::Truncate { key, epoch, up_to } => {
            let r = row(t, key)?;
            if let Err(e) = check_epoch(key, *epoch, r.epoch) {
                return Ok(Err(e));
            }
            remove_journal(t, key, *up_to)?;
            Ok(Ok(0))
        }
        Op::Bump { key, epoch, seq } => {
            let r = row(t, key)?;
            if let Err(e) = check_epoch(key, *epoch, r.epoch) {
                return Ok(Err(e));
            }
            let Some((attempts, signal)) = t.journal.get(k4(key, *seq))?.map(|g| {
                let (a, s) = g.value();
                (a, s.to_vec())
            }) else {
                return Ok(Err(no_entry(key, *seq)));
            };
            let attempts = attempts.saturating_add(1);
            t.journal
                .insert(k4(key, *seq), (attempts, signal.as_slice()))?;
            Ok(Ok(u64::from(attempts)))
        }
        Op::Claim { key, node } => {
            let mut r = row(t, key)?;
            r.epoch += 1;
            r.owner = Some(node.clone());
            put_row(t, key, &r)?;
            Ok(Ok(r.epoch))
        }
        Op::DeadLetter {
            key,
            epoch,
            seq,
            error,
        } => {
            let r = row(t, key)?;
            if let Err(e) = check_epoch(key, *epoch, r.epoch) {
                return Ok(Err(e));
            }
            let Some((attempts, signal)) = t.journal.remove(k4(key, *seq))?.map(|g| {
                let (a, s) = g.value();
                (a, s.to_vec())
            }) else {
                return Ok(Err(no_entry(key, *seq)));
            };
            let id = t.meta.get("dead_letter_id")?.map_or(0, |g| g.value()) + 1;
            t.meta.insert("dead_letter_id", id)?;
            t.dead.insert(
                k4(key, id),
                (*seq, attempts, signal.as_slice(), error.as_slice()),
            )?;
            Ok(Ok(0))
        }
    }
}

// ---- the trait ---------------------------------------------------------------

impl Storage for RedbStorage {
    fn get_checkpoint<'a>(
        &'a self,
        key: &'a StorageKey,
    ) -> BoxFuture<'a, Result<Option<Stored<Checkpoint>>>> {
        let key = key.clone();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let keys = txn.open_table(KEYS).map_err(backend)?;
            let Some((epoch, rev)) = keys.get(k3(&key)).map_err(backend)?.and_then(|g| {
                let (epoch, rev, _, live, _) = g.value();
                live.then_some((epoch, rev))
            }) else {
                return Ok(None);
            };
            let table = txn.open_table(CHECKPOINTS).map_err(backend)?;
            let guard = table.get(k3(&key)).map_err(backend)?.ok_or_else(|| {
                Error::storage("corrupt storage: checkpoint row missing").with_retry(false)
            })?;
            let mut value = Checkpoint::from_json_slice(guard.value())?;
            let deltas = txn.open_table(DELTAS).map_err(backend)?;
            for item in deltas
                .range(k4(&key, 0)..=k4(&key, u64::MAX))
                .map_err(backend)?
            {
                let (_, bytes) = item.map_err(backend)?;
                CheckpointDelta::from_json_slice(bytes.value())?.apply_to(&mut value)?;
            }
            Ok(Some(Stored { value, rev, epoch }))
        })
    }

    fn put_checkpoint<'a>(
        &'a self,
        key: &'a StorageKey,
        cp: &'a Checkpoint,
        expect: Expect,
        epoch: u64,
    ) -> BoxFuture<'a, Result<u64>> {
        self.submit(Op::Put {
            key: key.clone(),
            data: cp.to_json_vec(),
            applied_seq: cp.applied_seq,
            next_due: cp.next_due_ms(),
            expect,
            epoch,
        })
    }

    fn put_checkpoint_delta<'a>(
        &'a self,
        key: &'a StorageKey,
        delta: &'a CheckpointDelta,
        expect: Expect,
        epoch: u64,
    ) -> BoxFuture<'a, Result<u64>> {
        self.submit(Op::PutDelta {
            key: key.clone(),
            data: delta.to_json_vec(),
            applied_seq: delta.checkpoint.applied_seq,
            next_due: delta.checkpoint.next_due_ms(),
            expect,
            epoch,
        })
    }

    fn list_timers<'a>(
        &'a self,
        namespace: &'a str,
        kind: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TimerDue>>> {
        let (namespace, kind) = (namespace.to_owned(), kind.to_owned());
        let after = after.map(str::to_owned);
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let table = txn.open_table(TIMERS).map_err(backend)?;
            let start = (
                namespace.as_str(),
                kind.as_str(),
                after.as_deref().unwrap_or(""),
            );
            let mut out = Vec::new();
            for item in table.range(start..).map_err(backend)? {
                if out.len() >= limit {
                    break;
                }
                let (k, due) = item.map_err(backend)?;
                let (ns, kd, id) = k.value();
                if ns != namespace || kd != kind {
                    break;
                }
                if after.as_deref() == Some(id) {
                    continue;
                }
                out.push(TimerDue::new(id, due.value()));
            }
            Ok(out)
        })
    }

    fn delete<'a>(&'a self, key: &'a StorageKey, epoch: u64) -> BoxFuture<'a, Result<()>> {
        self.submit(Op::Delete {
            key: key.clone(),
            epoch,
        })
        .map(|r| r.map(drop))
        .boxed()
    }

    fn append_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        after: u64,
        signals: &'a [Signal],
    ) -> BoxFuture<'a, Result<u64>> {
        self.submit(Op::Append {
            key: key.clone(),
            epoch,
            after,
            signals: signals.iter().map(Signal::to_json_vec).collect(),
        })
    }

    fn load_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<JournalEntry>>> {
        let key = key.clone();
        self.read(move |db| {
            let Some(from) = after.checked_add(1) else {
                return Ok(Vec::new());
            };
            let txn = db.begin_read().map_err(backend)?;
            let table = txn.open_table(JOURNAL).map_err(backend)?;
            let mut out = Vec::new();
            for item in table
                .range(k4(&key, from)..=k4(&key, u64::MAX))
                .map_err(backend)?
                .take(limit)
            {
                let (k, v) = item.map_err(backend)?;
                let (attempts, signal) = v.value();
                out.push(JournalEntry {
                    seq: k.value().3,
                    signal: signal.to_vec(),
                    attempts,
                });
            }
            Ok(out)
        })
    }

    fn journal_head<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, Result<u64>> {
        let key = key.clone();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let keys = txn.open_table(KEYS).map_err(backend)?;
            Ok(keys
                .get(k3(&key))
                .map_err(backend)?
                .map_or(0, |g| g.value().2))
        })
    }

    fn truncate_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        up_to: u64,
    ) -> BoxFuture<'a, Result<()>> {
        self.submit(Op::Truncate {
            key: key.clone(),
            epoch,
            up_to,
        })
        .map(|r| r.map(drop))
        .boxed()
    }

    fn bump_attempts<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        seq: u64,
    ) -> BoxFuture<'a, Result<u32>> {
        self.submit(Op::Bump {
            key: key.clone(),
            epoch,
            seq,
        })
        .map(|r| r.map(|n| u32::try_from(n).unwrap_or(u32::MAX)))
        .boxed()
    }

    fn claim<'a>(&'a self, key: &'a StorageKey, node: &'a str) -> BoxFuture<'a, Result<u64>> {
        self.submit(Op::Claim {
            key: key.clone(),
            node: node.to_owned(),
        })
    }

    fn owner<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, Result<Option<Owner>>> {
        let key = key.clone();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let keys = txn.open_table(KEYS).map_err(backend)?;
            Ok(keys.get(k3(&key)).map_err(backend)?.and_then(|g| {
                let (epoch, _, _, _, owner) = g.value();
                owner.map(|node| Owner {
                    node: node.to_owned(),
                    epoch,
                })
            }))
        })
    }

    fn dead_letter<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        seq: u64,
        error: &'a Error,
    ) -> BoxFuture<'a, Result<()>> {
        self.submit(Op::DeadLetter {
            key: key.clone(),
            epoch,
            seq,
            error: envelope_bytes(error),
        })
        .map(|r| r.map(drop))
        .boxed()
    }

    fn load_dead_letters<'a>(
        &'a self,
        key: &'a StorageKey,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<DeadLetter>>> {
        let key = key.clone();
        self.read(move |db| {
            let txn = db.begin_read().map_err(backend)?;
            let table = txn.open_table(DEAD).map_err(backend)?;
            let mut out = Vec::new();
            for item in table
                .range(k4(&key, 0)..=k4(&key, u64::MAX))
                .map_err(backend)?
                .take(limit)
            {
                let (_, v) = item.map_err(backend)?;
                let (seq, attempts, signal, error) = v.value();
                out.push(DeadLetter {
                    seq,
                    signal: signal.to_vec(),
                    attempts,
                    error: envelope_from(error)?,
                });
            }
            Ok(out)
        })
    }
}
