//! Persistence (feature `persist`): the [`Storage`] trait behind durable
//! agents, and its adapters.
//!
//! A storage keeps, per [`StorageKey`] (`namespace / kind / id`):
//!
//! * one **checkpoint** ([`Checkpoint`]): the agent's state and what the
//!   runtime must not forget (its outbox, timers, recently seen signal ids,
//!   the last journal entry folded in). Every write is conditional: on the
//!   checkpoint's **revision** ([`Expect`], compare-and-set) and on the
//!   **owner epoch** (fencing). A checkpoint may be written as a
//!   [`CheckpointDelta`] over the stored one (what changed: the runtime
//!   writes those after an agent's first checkpoint), which every read
//!   folds in;
//! * an append-only **journal** of incoming signals (their CloudEvents JSON
//!   bytes), numbered `1, 2, 3, …` without gaps: an append names the last
//!   sequence number it saw, so two writers cannot interleave;
//! * an **owner** ([`Owner`]): [`claim`](Storage::claim) makes a node the
//!   owner with a new epoch, and every later write carrying an older epoch
//!   fails with [`ErrorKind::Fenced`];
//! * **dead letters** ([`DeadLetter`]): journal entries that kept failing,
//!   moved aside with the error.
//!
//! | adapter | feature | durable when a write returns | for |
//! |---|---|---|---|
//! | [`MemoryStorage`] | `persist` | no (process memory) | tests, examples |
//! | [`RedbStorage`](redb::RedbStorage) | `persist-redb` | yes: fsync per commit, commits grouped across agents | one node, no server |
//! | [`PostgresStorage`](postgres::PostgresStorage) | `persist-postgres` | yes: WAL fsync (`synchronous_commit = on`) | several nodes |
//!
//! Every adapter, ours or yours, must pass the same [`conformance`] suite.
//!
//! # Errors
//!
//! Storage methods fail with the crate's one [`Error`]:
//!
//! * [`ErrorKind::Conflict`]: a compare-and-set lost (a stale revision, an
//!   append after a sequence that is not the last). Re-read, then decide.
//! * [`ErrorKind::Fenced`]: the write carried an epoch that is not the
//!   key's current one (another node claimed it). The writer must stop.
//! * [`ErrorKind::Storage`]: the backend failed. Retryable (I/O, a lost
//!   connection, a closed pool) unless the details say `retry: false`, as
//!   they do for data read back that does not decode (`"corrupt …"`).
//! * [`ErrorKind::NotFound`]: a journal entry named by its sequence number
//!   does not exist.
//! * [`ErrorKind::Validation`]: a key that cannot be stored.
//!
//! # Examples
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
//! use jido::persist::{Checkpoint, Expect, MemoryStorage, Storage, StorageKey};
//! use jido::signal::Signal;
//! use jido::ErrorKind;
//! use serde_json::json;
//!
//! let storage = MemoryStorage::new();
//! let key = StorageKey::new("shop", "order", "17")?;
//!
//! // Write ahead: the journal takes signals after the last sequence number.
//! let last = storage.append_journal(&key, 0, 0, &[Signal::new("order.placed", json!({"total": 9}))]).await?;
//! assert_eq!(last, 1);
//!
//! // Checkpoint the state that folds entry 1 in: the journal is truncated up to it.
//! let mut cp = Checkpoint::new("order", "1.0.0", "17");
//! cp.state.insert("total".into(), json!(9));
//! cp.applied_seq = 1;
//! let rev = storage.put_checkpoint(&key, &cp, Expect::Absent, 0).await?;
//! assert_eq!(rev, 1);
//! assert!(storage.load_journal(&key, 0, 10).await?.is_empty());
//!
//! // A write based on an old revision loses.
//! let err = storage.put_checkpoint(&key, &cp, Expect::Rev(0), 0).await.unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::Conflict);
//!
//! // Another node claims the key: writes with the old epoch are fenced.
//! let epoch = storage.claim(&key, "node-b").await?;
//! assert_eq!(epoch, 1);
//! let err = storage.put_checkpoint(&key, &cp, Expect::Any, 0).await.unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::Fenced);
//!
//! let stored = storage.get_checkpoint(&key).await?.expect("checkpoint");
//! assert_eq!((stored.rev, stored.epoch, &stored.value), (1, 1, &cp));
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[allow(unused_imports)] // for intra-doc links
use crate::error::ErrorKind;
use crate::error::{Error, Result};
use crate::signal::Signal;

pub mod conformance;
mod delta;
mod memory;
#[cfg(feature = "persist-postgres")]
pub mod postgres;
#[cfg(feature = "persist-redb")]
pub mod redb;

pub use delta::CheckpointDelta;
pub use memory::MemoryStorage;

/// The layout version of [`Checkpoint`] that this crate writes. A stored
/// checkpoint with a higher format is refused as corrupt rather than
/// misread.
pub const CHECKPOINT_FORMAT: u32 = 1;

/// The longest part of a [`StorageKey`], in bytes.
pub const MAX_KEY_PART: usize = 512;

/// Where a storage keeps one agent (or any other journaled thing):
/// `namespace / kind / id`, e.g. `shop / order / 17`.
///
/// The three parts are kept apart by every adapter, so `("a/b", "c", "d")`
/// and `("a", "b/c", "d")` are different keys.
///
/// # Examples
///
/// ```
/// use jido::persist::StorageKey;
///
/// let key = StorageKey::new("shop", "order", "17")?;
/// assert_eq!(key.to_string(), "shop/order/17");
/// assert_eq!((key.namespace(), key.kind(), key.id()), ("shop", "order", "17"));
/// assert!(StorageKey::new("shop", "", "17").is_err());
/// # Ok::<(), jido::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StorageKey {
    namespace: String,
    kind: String,
    id: String,
}

impl StorageKey {
    /// A key from its three parts.
    ///
    /// # Errors
    ///
    /// A validation error (`field` detail: `namespace`, `kind` or `id`)
    /// when a part is empty, longer than [`MAX_KEY_PART`] bytes or holds a
    /// NUL character (PostgreSQL's `text` cannot store one).
    pub fn new(
        namespace: impl Into<String>,
        kind: impl Into<String>,
        id: impl Into<String>,
    ) -> Result<Self> {
        let key = Self {
            namespace: namespace.into(),
            kind: kind.into(),
            id: id.into(),
        };
        for (field, part) in [
            ("namespace", &key.namespace),
            ("kind", &key.kind),
            ("id", &key.id),
        ] {
            let problem = if part.is_empty() {
                "is empty"
            } else if part.len() > MAX_KEY_PART {
                "is too long"
            } else if part.contains('\0') {
                "holds a NUL character"
            } else {
                continue;
            };
            return Err(
                Error::validation(format!("invalid storage key: {field} {problem}"))
                    .with_detail("field", field),
            );
        }
        Ok(key)
    }

    /// The namespace (an instance, a tenant).
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The kind of thing stored (an agent's name, `"thread"`, …).
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The id within the kind.
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl fmt::Display for StorageKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.namespace, self.kind, self.id)
    }
}

/// What the runtime keeps of an agent between runs.
///
/// The storage reads only [`applied_seq`](Checkpoint::applied_seq) (it
/// truncates the journal up to it in the same transaction) and whether the
/// [`outbox`](Checkpoint::outbox) is empty (adapters index agents with
/// pending directives); the rest is kept as JSON, byte for byte as the
/// adapter's encoding allows (object key order included).
///
/// # Examples
///
/// ```
/// use jido::persist::Checkpoint;
/// use serde_json::json;
///
/// let mut cp = Checkpoint::new("counter", "1.0.0", "c-1");
/// cp.state.insert("n".into(), json!(3));
/// cp.applied_seq = 7;
/// assert!(!cp.outbox_pending());
///
/// let bytes = cp.to_json_vec();
/// assert_eq!(Checkpoint::from_json_slice(&bytes)?, cp);
/// # Ok::<(), jido::Error>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The agent's name (`Agent::NAME`).
    pub agent: String,
    /// The agent's version (`Agent::VERSION`), for migrations on restore.
    pub version: String,
    /// The agent's id.
    pub id: String,
    /// The agent's state, without runtime-only keys.
    pub state: Map<String, Value>,
    /// The strategy's own state, if it keeps any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy_ext: Option<Value>,
    /// The last journal entry folded into `state` (0: none).
    #[serde(default)]
    pub applied_seq: u64,
    /// Directives decided but not yet executed, in their data form.
    #[serde(default)]
    pub outbox: Vec<Value>,
    /// Pending schedules and cron specs, in their data form.
    #[serde(default)]
    pub timers: Vec<Value>,
    /// Recently processed signal ids, for de-duplication after a replay.
    #[serde(default)]
    pub recent_ids: Vec<String>,
    /// The agent's parent link, `{"id", "tag", "meta"}` (an actor cannot
    /// be stored): a restored child finds its parent again by id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Value>,
}

/// The earliest `due_ms` / `next_ms` of stored timer forms.
pub(crate) fn next_due_of(timers: &[Value]) -> Option<i64> {
    timers
        .iter()
        .filter_map(|t| {
            t.get("due_ms")
                .or_else(|| t.get("next_ms"))
                .and_then(Value::as_i64)
        })
        .min()
}

/// A key whose checkpoint holds timers, and the earliest due time among
/// them: what [`Storage::list_timers`] returns.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerDue {
    /// The key's id.
    pub id: String,
    /// Unix milliseconds ([`Checkpoint::next_due_ms`]).
    pub due_ms: i64,
}

impl TimerDue {
    /// An entry (for adapters).
    pub fn new(id: impl Into<String>, due_ms: i64) -> Self {
        Self {
            id: id.into(),
            due_ms,
        }
    }
}

/// The stored layout: the fields of [`Checkpoint`] after a `format`.
#[derive(Serialize)]
struct CheckpointOut<'a> {
    format: u32,
    #[serde(flatten)]
    cp: &'a Checkpoint,
}

#[derive(Deserialize)]
struct FormatOnly {
    format: u32,
}

impl Checkpoint {
    /// An empty checkpoint of agent `agent` at `version` with id `id`.
    pub fn new(
        agent: impl Into<String>,
        version: impl Into<String>,
        id: impl Into<String>,
    ) -> Self {
        Self {
            agent: agent.into(),
            version: version.into(),
            id: id.into(),
            state: Map::new(),
            strategy_ext: None,
            applied_seq: 0,
            outbox: Vec::new(),
            timers: Vec::new(),
            recent_ids: Vec::new(),
            parent: None,
        }
    }

    /// The earliest due time (Unix ms) among the stored timers: a
    /// schedule's `due_ms`, a cron job's `next_ms`; `None` without timers.
    /// What [`Storage::list_timers`] lists the key by.
    ///
    /// # Examples
    ///
    /// ```
    /// use jido::persist::Checkpoint;
    /// use serde_json::json;
    ///
    /// let mut cp = Checkpoint::new("pinger", "1", "p-1");
    /// assert_eq!(cp.next_due_ms(), None);
    /// cp.timers.push(json!({"kind": "cron", "next_ms": 9_000}));
    /// cp.timers.push(json!({"kind": "schedule", "due_ms": 5_000}));
    /// assert_eq!(cp.next_due_ms(), Some(5_000));
    /// ```
    pub fn next_due_ms(&self) -> Option<i64> {
        next_due_of(&self.timers)
    }

    /// Whether directives are waiting in the outbox (the runtime restores
    /// such agents eagerly after a crash).
    pub fn outbox_pending(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// The stored JSON form: `{"format": 1, "agent": …, …}`.
    pub fn to_json_vec(&self) -> Vec<u8> {
        let out = CheckpointOut {
            format: CHECKPOINT_FORMAT,
            cp: self,
        };
        // Serialising maps with string keys, strings and numbers cannot fail.
        serde_json::to_vec(&out).unwrap_or_default()
    }

    /// Reads the stored JSON form back.
    ///
    /// # Errors
    ///
    /// A [`ErrorKind::Storage`] error `"corrupt checkpoint"` (not retryable)
    /// when the bytes are not a checkpoint: not JSON, a field of the wrong
    /// type (its `path` in the details), a missing or newer `format`.
    pub fn from_json_slice(bytes: &[u8]) -> Result<Self> {
        let format: FormatOnly =
            serde_json::from_slice(bytes).map_err(|e| corrupt("checkpoint", e))?;
        if format.format == 0 || format.format > CHECKPOINT_FORMAT {
            return Err(Error::storage("corrupt checkpoint")
                .with_detail("reason", "unsupported format")
                .with_detail("format", format.format)
                .with_retry(false));
        }
        let de = &mut serde_json::Deserializer::from_slice(bytes);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            corrupt("checkpoint", e.into_inner()).with_detail("path", path)
        })
    }
}

/// The "corrupt …" storage error for bytes read back that do not decode.
pub(crate) fn corrupt(what: &str, source: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::storage(format!("corrupt {what}"))
        .with_detail("reason", source.to_string())
        .with_retry(false)
        .with_source(source)
}

/// A stored value with its revision and the key's owner epoch.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct Stored<T> {
    /// The value.
    pub value: T,
    /// Its revision: 1 for the first write of a key, one more for each
    /// later one. Revisions are never reused, even after a delete.
    pub rev: u64,
    /// The key's current owner epoch (0 if never claimed).
    pub epoch: u64,
}

/// The condition a checkpoint write puts on the stored revision.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Write whatever is stored.
    Any,
    /// Write only if no checkpoint is stored.
    Absent,
    /// Write only if the stored checkpoint has this revision.
    Rev(u64),
}

impl<T> Stored<T> {
    /// A stored value (for adapters).
    pub fn new(value: T, rev: u64, epoch: u64) -> Self {
        Self { value, rev, epoch }
    }
}

/// One journal entry: an incoming signal written ahead.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalEntry {
    /// Its sequence number (1 for the first entry of a key).
    pub seq: u64,
    /// The signal's CloudEvents JSON bytes, as appended.
    pub signal: Vec<u8>,
    /// How often a replay of it was started ([`Storage::bump_attempts`]).
    pub attempts: u32,
}

impl JournalEntry {
    /// An entry (for adapters).
    pub fn new(seq: u64, signal: Vec<u8>, attempts: u32) -> Self {
        Self {
            seq,
            signal,
            attempts,
        }
    }

    /// The entry's signal, parsed and validated.
    ///
    /// # Errors
    ///
    /// A [`ErrorKind::Storage`] error `"corrupt journal entry"` (not
    /// retryable) when the bytes are not a valid signal.
    pub fn to_signal(&self) -> Result<Signal> {
        Signal::from_json_slice(&self.signal).map_err(|e| {
            Error::storage("corrupt journal entry")
                .with_detail("seq", self.seq)
                .with_detail("reason", e.message().to_owned())
                .with_retry(false)
                .with_source(e)
        })
    }
}

/// A journal entry moved aside because it kept failing.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    /// The entry's sequence number in its journal.
    pub seq: u64,
    /// The signal's CloudEvents JSON bytes.
    pub signal: Vec<u8>,
    /// Its attempts when it was moved.
    pub attempts: u32,
    /// The error's [envelope](Error::to_envelope) (sanitised).
    pub error: Value,
}

impl DeadLetter {
    /// A dead letter (for adapters); `error` is an error envelope.
    pub fn new(seq: u64, signal: Vec<u8>, attempts: u32, error: Value) -> Self {
        Self {
            seq,
            signal,
            attempts,
            error,
        }
    }
}

/// The node that owns a key, and since which epoch.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The node name given to [`Storage::claim`].
    pub node: String,
    /// Its epoch (1 for the first claim).
    pub epoch: u64,
}

impl Owner {
    /// An owner (for adapters).
    pub fn new(node: impl Into<String>, epoch: u64) -> Self {
        Self {
            node: node.into(),
            epoch,
        }
    }
}

/// Where agents are kept between runs. Object-safe: the runtime holds an
/// `Arc<dyn Storage>`.
///
/// Every write names the owner `epoch` it acts under (0 for a key nobody
/// ever claimed, which is every key of a single node). A write whose epoch
/// is not the key's current one fails with [`ErrorKind::Fenced`] and
/// changes nothing. A write that returns `Ok` is durable as far as the
/// adapter promises (see the [module docs](self)); a write that fails
/// changed nothing.
///
/// Run the [`conformance`] suite on an implementation: it checks every
/// promise below.
pub trait Storage: Send + Sync + 'static {
    /// The checkpoint of `key`, with its revision and the key's epoch;
    /// `None` if there is none.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Storage`] when the backend fails or the stored bytes
    /// are corrupt.
    fn get_checkpoint<'a>(
        &'a self,
        key: &'a StorageKey,
    ) -> BoxFuture<'a, Result<Option<Stored<Checkpoint>>>>;

    /// Writes the checkpoint of `key` if `expect` holds and `epoch` is the
    /// key's epoch, and removes the journal entries up to
    /// `cp.applied_seq`, in one transaction. Returns the new revision.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Fenced`] for a stale epoch, [`ErrorKind::Conflict`]
    /// when `expect` does not hold, [`ErrorKind::Storage`] when the backend
    /// fails.
    fn put_checkpoint<'a>(
        &'a self,
        key: &'a StorageKey,
        cp: &'a Checkpoint,
        expect: Expect,
        epoch: u64,
    ) -> BoxFuture<'a, Result<u64>>;

    /// Writes a checkpoint as a [`CheckpointDelta`] over the stored one,
    /// under the same conditions as [`put_checkpoint`](Storage::put_checkpoint)
    /// (and removing the journal entries up to
    /// `delta.checkpoint.applied_seq` in the same transaction). Returns the
    /// new revision; [`get_checkpoint`](Storage::get_checkpoint) returns
    /// the stored checkpoint with every delta since folded in.
    ///
    /// The default implementation reads the checkpoint, folds the delta in
    /// and writes it whole with `Expect::Rev` of what it read: correct for
    /// any adapter, but O(state). Adapters override it to store the delta
    /// beside the checkpoint (as [`MemoryStorage`] and the redb adapter
    /// do), so that its cost is O(delta).
    ///
    /// # Errors
    ///
    /// As [`put_checkpoint`](Storage::put_checkpoint); a delta when no
    /// checkpoint is stored fails with [`ErrorKind::Conflict`] (the
    /// `actual` detail null), one that does not fit the stored checkpoint
    /// with the `"corrupt checkpoint delta"` storage error.
    fn put_checkpoint_delta<'a>(
        &'a self,
        key: &'a StorageKey,
        delta: &'a CheckpointDelta,
        expect: Expect,
        epoch: u64,
    ) -> BoxFuture<'a, Result<u64>> {
        Box::pin(async move {
            let Some(stored) = self.get_checkpoint(key).await? else {
                return Err(errors::stale_rev(key, expect, None));
            };
            if !errors::expect_holds(expect, Some(stored.rev)) {
                return Err(errors::stale_rev(key, expect, Some(stored.rev)));
            }
            let mut cp = stored.value;
            delta.clone().apply_to(&mut cp)?;
            self.put_checkpoint(key, &cp, Expect::Rev(stored.rev), epoch)
                .await
        })
    }

    /// Removes the checkpoint and the journal of `key` (the journal starts
    /// again at 1). The owner, the revision counter and the dead letters
    /// stay. Removing what is not there is not an error.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Fenced`], [`ErrorKind::Storage`].
    fn delete<'a>(&'a self, key: &'a StorageKey, epoch: u64) -> BoxFuture<'a, Result<()>>;

    /// Appends `signals` to the journal of `key` if its last sequence
    /// number is `after`; they get `after + 1, after + 2, …`. Returns the
    /// new last sequence number (`after` for no signals).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Conflict`] when `after` is not the last sequence
    /// number (details `expected`: `after`, `actual`: the last one),
    /// [`ErrorKind::Fenced`], [`ErrorKind::Storage`].
    fn append_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        after: u64,
        signals: &'a [Signal],
    ) -> BoxFuture<'a, Result<u64>>;

    /// Up to `limit` journal entries of `key` with a sequence number above
    /// `after`, in order.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Storage`].
    fn load_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<JournalEntry>>>;

    /// The last sequence number ever appended to the journal of `key`
    /// (0 if none, or since [`delete`](Storage::delete)); truncation and
    /// dead letters do not lower it.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Storage`].
    fn journal_head<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, Result<u64>>;

    /// Removes the journal entries of `key` up to and including `up_to`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Fenced`], [`ErrorKind::Storage`].
    fn truncate_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        up_to: u64,
    ) -> BoxFuture<'a, Result<()>>;

    /// Counts one more replay attempt of journal entry `seq` of `key`;
    /// returns the new count.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotFound`] when there is no such entry,
    /// [`ErrorKind::Fenced`], [`ErrorKind::Storage`].
    fn bump_attempts<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        seq: u64,
    ) -> BoxFuture<'a, Result<u32>>;

    /// Makes `node` the owner of `key` with a new epoch (one more than the
    /// last, 1 for the first claim) and returns it. The last claim wins.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Storage`].
    fn claim<'a>(&'a self, key: &'a StorageKey, node: &'a str) -> BoxFuture<'a, Result<u64>>;

    /// The owner of `key`, if it was ever claimed.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Storage`].
    fn owner<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, Result<Option<Owner>>>;

    /// Moves journal entry `seq` of `key` to the dead letters with
    /// `error`'s envelope, in one transaction.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::NotFound`] when there is no such entry,
    /// [`ErrorKind::Fenced`], [`ErrorKind::Storage`].
    fn dead_letter<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        seq: u64,
        error: &'a Error,
    ) -> BoxFuture<'a, Result<()>>;

    /// Up to `limit` dead letters of `key`, oldest first.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Storage`].
    fn load_dead_letters<'a>(
        &'a self,
        key: &'a StorageKey,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<DeadLetter>>>;

    /// The keys of `namespace` and `kind` whose stored checkpoint (deltas
    /// folded in) holds timers, each with the earliest due time among them
    /// ([`Checkpoint::next_due_ms`]), ordered by id, starting after the id
    /// `after` (exclusive; `None`: from the first), at most `limit`. A
    /// full write, a delta and a [`delete`](Storage::delete) update the
    /// listing in the same transaction as the checkpoint. The runtime
    /// calls it at the start of an instance to re-arm the timers of
    /// hibernated agents (see [`JidoConfig::kind`](crate::server::JidoConfig::kind)).
    ///
    /// The default implementation fails: an adapter that cannot list its
    /// keys by kind does not support re-arming at start.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Storage`]; the default: `"storage cannot list timers"`
    /// (not retryable).
    fn list_timers<'a>(
        &'a self,
        namespace: &'a str,
        kind: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TimerDue>>> {
        let _ = (namespace, kind, after, limit);
        Box::pin(async { Err(Error::storage("storage cannot list timers").with_retry(false)) })
    }
}

impl<S: Storage + ?Sized> Storage for Arc<S> {
    fn get_checkpoint<'a>(
        &'a self,
        key: &'a StorageKey,
    ) -> BoxFuture<'a, Result<Option<Stored<Checkpoint>>>> {
        (**self).get_checkpoint(key)
    }
    fn put_checkpoint<'a>(
        &'a self,
        key: &'a StorageKey,
        cp: &'a Checkpoint,
        expect: Expect,
        epoch: u64,
    ) -> BoxFuture<'a, Result<u64>> {
        (**self).put_checkpoint(key, cp, expect, epoch)
    }
    fn put_checkpoint_delta<'a>(
        &'a self,
        key: &'a StorageKey,
        delta: &'a CheckpointDelta,
        expect: Expect,
        epoch: u64,
    ) -> BoxFuture<'a, Result<u64>> {
        (**self).put_checkpoint_delta(key, delta, expect, epoch)
    }
    fn delete<'a>(&'a self, key: &'a StorageKey, epoch: u64) -> BoxFuture<'a, Result<()>> {
        (**self).delete(key, epoch)
    }
    fn list_timers<'a>(
        &'a self,
        namespace: &'a str,
        kind: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TimerDue>>> {
        (**self).list_timers(namespace, kind, after, limit)
    }
    fn append_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        after: u64,
        signals: &'a [Signal],
    ) -> BoxFuture<'a, Result<u64>> {
        (**self).append_journal(key, epoch, after, signals)
    }
    fn load_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<JournalEntry>>> {
        (**self).load_journal(key, after, limit)
    }
    fn journal_head<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, Result<u64>> {
        (**self).journal_head(key)
    }
    fn truncate_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        up_to: u64,
    ) -> BoxFuture<'a, Result<()>> {
        (**self).truncate_journal(key, epoch, up_to)
    }
    fn bump_attempts<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        seq: u64,
    ) -> BoxFuture<'a, Result<u32>> {
        (**self).bump_attempts(key, epoch, seq)
    }
    fn claim<'a>(&'a self, key: &'a StorageKey, node: &'a str) -> BoxFuture<'a, Result<u64>> {
        (**self).claim(key, node)
    }
    fn owner<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, Result<Option<Owner>>> {
        (**self).owner(key)
    }
    fn dead_letter<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        seq: u64,
        error: &'a Error,
    ) -> BoxFuture<'a, Result<()>> {
        (**self).dead_letter(key, epoch, seq, error)
    }
    fn load_dead_letters<'a>(
        &'a self,
        key: &'a StorageKey,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<DeadLetter>>> {
        (**self).load_dead_letters(key, limit)
    }
}

/// The errors every adapter returns, so that their kinds, messages and
/// details match.
#[cfg_attr(
    not(any(feature = "persist-redb", feature = "persist-postgres")),
    allow(dead_code)
)]
pub(crate) mod errors {
    use super::*;

    /// A write under `epoch` when the key's epoch is `current`.
    pub(crate) fn fenced(key: &StorageKey, epoch: u64, current: u64) -> Error {
        Error::fenced("fenced: the key has a newer owner")
            .with_detail("key", key.to_string())
            .with_detail("epoch", epoch)
            .with_detail("current_epoch", current)
    }

    /// A checkpoint write whose [`Expect`] does not hold; `current` is the
    /// stored revision (`None`: no checkpoint).
    pub(crate) fn stale_rev(key: &StorageKey, expect: Expect, current: Option<u64>) -> Error {
        let expected = match expect {
            Expect::Any => Value::from("any"),
            Expect::Absent => Value::Null,
            Expect::Rev(rev) => Value::from(rev),
        };
        Error::conflict("checkpoint revision conflict")
            .with_detail("key", key.to_string())
            .with_detail("expected", expected)
            .with_detail("actual", current.map_or(Value::Null, Value::from))
    }

    /// An append after `after` when the journal's last number is `actual`.
    pub(crate) fn journal_conflict(key: &StorageKey, after: u64, actual: u64) -> Error {
        Error::conflict("journal sequence conflict")
            .with_detail("key", key.to_string())
            .with_detail("expected", after)
            .with_detail("actual", actual)
    }

    /// No journal entry `seq` in `key`.
    pub(crate) fn no_entry(key: &StorageKey, seq: u64) -> Error {
        Error::not_found("no such journal entry")
            .with_detail("key", key.to_string())
            .with_detail("seq", seq)
    }

    /// Whether `expect` holds for a stored revision (`None`: absent).
    pub(crate) fn expect_holds(expect: Expect, current: Option<u64>) -> bool {
        match expect {
            Expect::Any => true,
            Expect::Absent => current.is_none(),
            Expect::Rev(rev) => current == Some(rev),
        }
    }

    /// Checks the epoch of a write.
    pub(crate) fn check_epoch(key: &StorageKey, epoch: u64, current: u64) -> Result<()> {
        if epoch == current {
            Ok(())
        } else {
            Err(fenced(key, epoch, current))
        }
    }

    /// The envelope stored with a dead letter.
    pub(crate) fn envelope_bytes(error: &Error) -> Vec<u8> {
        serde_json::to_vec(&error.to_envelope()).unwrap_or_default()
    }

    /// Reads a stored envelope back.
    pub(crate) fn envelope_from(bytes: &[u8]) -> Result<Value> {
        serde_json::from_slice(bytes).map_err(|e| corrupt("dead letter", e))
    }
}
