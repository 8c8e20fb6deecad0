//! The conformance suite every [`Storage`] adapter must pass: ours
//! ([`MemoryStorage`](super::MemoryStorage), redb, PostgreSQL) and yours.
//!
//! [`run`] takes a factory that makes a fresh, empty storage (a new
//! temporary file, a new schema) and runs every [case](cases) on its own
//! storage, one after the other. It returns `Ok(())` when all pass, or an
//! [`ErrorKind::Storage`] error `"storage conformance failed"` whose
//! details list each failed case with what was expected and what came
//! back.
//!
//! What the cases check: exact round trips of checkpoints (every field,
//! the state's key order, NUL characters, large numbers, a 1 MiB state),
//! revisions (1, 2, 3, …, never reused after a delete) and compare-and-set
//! conflicts, keys kept apart part by part, claims and epoch fencing of
//! every write, the journal's numbering, order, `after` conflicts and
//! truncation (by a checkpoint, in the same transaction, and on its own),
//! replay attempts and dead letters, and concurrency: of 16 writers racing
//! on one key exactly one wins, 16 claims get 16 distinct epochs, writes
//! to 64 keys at once all land; checkpoint deltas fold into the
//! checkpoint exactly (set, kept, removed, reordered and appended keys,
//! every other field replaced), count revisions, truncate the journal,
//! obey the same conditions and fencing, and are dropped by a full write
//! and by a delete; [`list_timers`](Storage::list_timers) lists exactly
//! the keys of a namespace and kind whose checkpoint holds timers, with
//! the earliest due time after every full write, delta and delete, in id
//! order, page by page.
//!
//! # Examples
//!
//! A user's adapter test (here with [`MemoryStorage`](super::MemoryStorage)):
//!
//! ```
//! # #[tokio::main] async fn main() -> jido::Result<()> {
//! use jido::persist::{MemoryStorage, conformance};
//!
//! conformance::run(|| async { Ok(MemoryStorage::new()) }).await?;
//! assert!(conformance::cases().len() >= 18);
//! # Ok(()) }
//! ```
//!
//! The cases spawn tokio tasks: run them on a multi-threaded runtime
//! (`#[tokio::test(flavor = "multi_thread")]`) so that the concurrency
//! cases race for real.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use serde_json::{Map, Value, json};

use super::{Checkpoint, CheckpointDelta, Expect, Storage, StorageKey};
use crate::error::{Error, ErrorKind, Result};
use crate::signal::Signal;

/// One check of the suite.
#[derive(Clone, Copy)]
pub struct Case {
    name: &'static str,
    run: fn(Arc<dyn Storage>) -> BoxFuture<'static, Result<()>>,
}

impl Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case").field("name", &self.name).finish()
    }
}

impl Case {
    /// The case's name, e.g. `"stale_epoch_is_fenced"`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Runs the case on `storage` (which should be empty).
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::Storage`] error `"conformance: …"` naming what the
    /// adapter got wrong, or the adapter's own error where it failed.
    pub async fn run(&self, storage: Arc<dyn Storage>) -> Result<()> {
        (self.run)(storage).await
    }
}

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        const CASES: &[Case] = &[$(Case { name: stringify!($name), run: |s| $name(s).boxed() }),*];
    };
}

cases![
    empty_key_reads_nothing,
    checkpoint_round_trips_exactly,
    revisions_count_up,
    stale_revision_conflicts,
    keys_are_kept_apart,
    delete_keeps_revisions_unique,
    claim_bumps_epoch,
    stale_epoch_is_fenced,
    journal_appends_in_order,
    journal_append_after_wrong_seq_conflicts,
    checkpoint_truncates_journal,
    truncate_journal_keeps_head,
    attempts_count_and_dead_letters,
    concurrent_checkpoint_writers_one_wins,
    concurrent_appends_one_wins,
    concurrent_claims_get_distinct_epochs,
    many_keys_commit_together,
    large_checkpoint_round_trips,
    deltas_fold_into_the_checkpoint,
    delta_conditions_hold,
    timers_are_listed_by_kind,
];

/// Every case of the suite, in the order [`run`] runs them.
pub fn cases() -> &'static [Case] {
    CASES
}

/// Runs every case, each on a fresh storage from `factory`.
///
/// # Errors
///
/// An [`ErrorKind::Storage`] error `"storage conformance failed"` (not
/// retryable) whose details hold `failed`: `[{case, error}]` (the error's
/// envelope, unsanitised message) and `passed`: the names of the cases
/// that passed. An error of the factory is returned as it is.
pub async fn run<F, Fut, S>(mut factory: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<S>>,
    S: Storage,
{
    let mut failed = Vec::new();
    let mut passed = Vec::new();
    for case in CASES {
        let storage: Arc<dyn Storage> = Arc::new(factory().await?);
        match case.run(storage).await {
            Ok(()) => passed.push(Value::from(case.name)),
            Err(e) => failed.push(json!({
                "case": case.name,
                "kind": e.kind().as_str(),
                "message": e.message(),
                "details": e.details(),
            })),
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::storage("storage conformance failed")
            .with_detail("failed", failed)
            .with_detail("passed", passed)
            .with_retry(false))
    }
}

// ---- helpers ---------------------------------------------------------------

fn fail(what: impl Into<String>) -> Error {
    Error::storage(format!("conformance: {}", what.into())).with_retry(false)
}

fn check_eq<T: PartialEq + Debug>(what: &str, actual: T, expected: T) -> Result<()> {
    if actual == expected {
        Ok(())
    } else {
        Err(fail(what.to_owned())
            .with_detail("expected", format!("{expected:?}"))
            .with_detail("actual", format!("{actual:?}")))
    }
}

/// Expects `result` to be an error of `kind` whose details hold `details`.
fn check_err<T: Debug>(
    what: &str,
    result: Result<T>,
    kind: ErrorKind,
    details: Value,
) -> Result<()> {
    match result {
        Ok(v) => Err(fail(format!("{what}: expected a {kind} error"))
            .with_detail("actual", format!("Ok({v:?})"))),
        Err(e) if e.kind() != kind => Err(fail(format!("{what}: wrong error kind"))
            .with_detail("expected", kind.as_str())
            .with_detail("actual", e.kind().as_str())
            .with_detail("message", e.message().to_owned())),
        Err(e) => {
            if let Value::Object(want) = details {
                for (k, v) in want {
                    if e.detail(&k) != Some(&v) {
                        return Err(fail(format!("{what}: wrong detail `{k}`"))
                            .with_detail("expected", v)
                            .with_detail("actual", e.detail(&k).cloned().unwrap_or(Value::Null)));
                    }
                }
            }
            Ok(())
        }
    }
}

fn key() -> StorageKey {
    fresh_key("agent")
}

fn fresh_key(kind: &str) -> StorageKey {
    StorageKey::new("conformance", kind, uuid::Uuid::now_v7().to_string())
        .unwrap_or_else(|_| unreachable_key())
}

// A uuid is a valid id; kept total without a panic.
fn unreachable_key() -> StorageKey {
    StorageKey {
        namespace: "conformance".into(),
        kind: "agent".into(),
        id: "fallback".into(),
    }
}

/// Bytes shown as text in a failure.
fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn signal(n: u64) -> Signal {
    Signal::builder("conformance.tick")
        .id(format!("sig-{n}"))
        .source("/conformance")
        .time_rfc3339("2030-01-02T03:04:05.678Z")
        .data(json!({"n": n, "text": "é\u{0}✓"}))
        .build()
        .unwrap_or_else(|_| Signal::new("conformance.tick", json!({"n": n})))
}

fn signals(range: std::ops::RangeInclusive<u64>) -> Vec<Signal> {
    range.map(signal).collect()
}

/// A checkpoint with every field set and awkward values.
fn rich_checkpoint(id: &str) -> Checkpoint {
    let mut cp = Checkpoint::new("conformance_agent", "2.1.0", id);
    let mut state = Map::new();
    // Insertion order, not sorted: it must come back in this order.
    state.insert("zeta".into(), json!(1));
    state.insert("alpha".into(), json!({"nested": [1, 2, {"deep": true}]}));
    state.insert("nul".into(), json!("a\u{0}b"));
    state.insert("unicode".into(), json!("héllo ✓ 🎉"));
    state.insert("max".into(), json!(u64::MAX));
    state.insert("min".into(), json!(i64::MIN));
    state.insert("float".into(), json!(1.5));
    state.insert("null".into(), Value::Null);
    state.insert("mid".into(), json!([]));
    cp.state = state;
    cp.strategy_ext = Some(json!({"status": "running", "step": 3}));
    cp.applied_seq = 0;
    cp.outbox = vec![json!({"emit": {"type": "a.b"}}), json!({"stop": "normal"})];
    cp.timers = vec![json!({"schedule": {"due_at": "2030-01-01T00:00:00Z"}})];
    cp.recent_ids = vec!["sig-1".into(), "sig-2".into()];
    cp.parent = Some(json!({"id": "p-1", "tag": "t", "meta": {"k": 1}}));
    cp
}

fn small_checkpoint(id: &str, n: u64) -> Checkpoint {
    let mut cp = Checkpoint::new("conformance_agent", "1.0.0", id);
    cp.state.insert("n".into(), json!(n));
    cp
}

async fn journal_seqs(storage: &dyn Storage, key: &StorageKey) -> Result<Vec<u64>> {
    Ok(storage
        .load_journal(key, 0, usize::MAX)
        .await?
        .iter()
        .map(|e| e.seq)
        .collect())
}

// ---- cases -----------------------------------------------------------------

async fn empty_key_reads_nothing(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    check_eq("checkpoint of a new key", s.get_checkpoint(&k).await?, None)?;
    check_eq(
        "journal of a new key",
        s.load_journal(&k, 0, 10).await?,
        vec![],
    )?;
    check_eq("journal head of a new key", s.journal_head(&k).await?, 0)?;
    check_eq("owner of a new key", s.owner(&k).await?, None)?;
    check_eq(
        "dead letters of a new key",
        s.load_dead_letters(&k, 10).await?,
        vec![],
    )?;
    // Removing nothing is not an error.
    s.delete(&k, 0).await?;
    s.truncate_journal(&k, 0, 10).await?;
    check_eq(
        "checkpoint after deleting nothing",
        s.get_checkpoint(&k).await?,
        None,
    )
}

async fn checkpoint_round_trips_exactly(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    let cp = rich_checkpoint(k.id());
    check_eq(
        "first revision",
        s.put_checkpoint(&k, &cp, Expect::Absent, 0).await?,
        1,
    )?;
    let stored = s
        .get_checkpoint(&k)
        .await?
        .ok_or_else(|| fail("the checkpoint just written is missing"))?;
    check_eq("stored revision", stored.rev, 1)?;
    check_eq("stored epoch", stored.epoch, 0)?;
    check_eq("stored checkpoint", &stored.value, &cp)?;
    check_eq(
        "state key order",
        serde_json::to_string(&stored.value.state).unwrap_or_default(),
        serde_json::to_string(&cp.state).unwrap_or_default(),
    )?;
    check_eq("outbox pending", stored.value.outbox_pending(), true)
}

async fn revisions_count_up(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    check_eq(
        "rev 1",
        s.put_checkpoint(&k, &small_checkpoint(k.id(), 1), Expect::Any, 0)
            .await?,
        1,
    )?;
    check_eq(
        "rev 2",
        s.put_checkpoint(&k, &small_checkpoint(k.id(), 2), Expect::Any, 0)
            .await?,
        2,
    )?;
    check_eq(
        "rev 3",
        s.put_checkpoint(&k, &small_checkpoint(k.id(), 3), Expect::Rev(2), 0)
            .await?,
        3,
    )?;
    let stored = s
        .get_checkpoint(&k)
        .await?
        .ok_or_else(|| fail("checkpoint missing"))?;
    check_eq("last write wins", stored.value, small_checkpoint(k.id(), 3))?;
    check_eq("stored revision", stored.rev, 3)
}

async fn stale_revision_conflicts(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    check_err(
        "Rev(1) on no checkpoint",
        s.put_checkpoint(&k, &small_checkpoint(k.id(), 0), Expect::Rev(1), 0)
            .await,
        ErrorKind::Conflict,
        json!({"expected": 1, "actual": null}),
    )?;
    s.put_checkpoint(&k, &small_checkpoint(k.id(), 1), Expect::Absent, 0)
        .await?;
    s.put_checkpoint(&k, &small_checkpoint(k.id(), 2), Expect::Rev(1), 0)
        .await?;
    check_err(
        "Rev(1) when the revision is 2",
        s.put_checkpoint(&k, &small_checkpoint(k.id(), 9), Expect::Rev(1), 0)
            .await,
        ErrorKind::Conflict,
        json!({"expected": 1, "actual": 2}),
    )?;
    check_err(
        "Absent when a checkpoint exists",
        s.put_checkpoint(&k, &small_checkpoint(k.id(), 9), Expect::Absent, 0)
            .await,
        ErrorKind::Conflict,
        json!({"expected": null, "actual": 2}),
    )?;
    let stored = s
        .get_checkpoint(&k)
        .await?
        .ok_or_else(|| fail("checkpoint missing"))?;
    check_eq(
        "a lost write changes nothing",
        (stored.rev, stored.value),
        (2, small_checkpoint(k.id(), 2)),
    )
}

async fn keys_are_kept_apart(s: Arc<dyn Storage>) -> Result<()> {
    let u = uuid::Uuid::now_v7().to_string();
    let keys = [
        StorageKey::new(format!("{u}/a"), "b", "c")?,
        StorageKey::new(&u, "a/b", "c")?,
        StorageKey::new(&u, "a", "b/c")?,
        StorageKey::new(&u, "a", "b")?,
        StorageKey::new(&u, "a", "b ")?,
        StorageKey::new(&u, "A", "b")?,
    ];
    for (i, k) in keys.iter().enumerate() {
        let n = i as u64;
        s.put_checkpoint(k, &small_checkpoint(k.id(), n), Expect::Absent, 0)
            .await?;
        s.append_journal(k, 0, 0, &signals(1..=n + 1)).await?;
    }
    for (i, k) in keys.iter().enumerate() {
        let n = i as u64;
        let stored = s
            .get_checkpoint(k)
            .await?
            .ok_or_else(|| fail(format!("checkpoint of {k} missing")))?;
        check_eq(
            &format!("checkpoint of {k}"),
            (stored.rev, stored.value),
            (1, small_checkpoint(k.id(), n)),
        )?;
        check_eq(
            &format!("journal head of {k}"),
            s.journal_head(k).await?,
            n + 1,
        )?;
    }
    Ok(())
}

async fn delete_keeps_revisions_unique(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    s.put_checkpoint(&k, &small_checkpoint(k.id(), 1), Expect::Absent, 0)
        .await?;
    s.put_checkpoint(&k, &small_checkpoint(k.id(), 2), Expect::Any, 0)
        .await?;
    s.append_journal(&k, 0, 0, &signals(1..=3)).await?;
    s.delete(&k, 0).await?;
    check_eq("checkpoint after delete", s.get_checkpoint(&k).await?, None)?;
    check_eq("journal after delete", journal_seqs(&*s, &k).await?, vec![])?;
    check_eq("journal head after delete", s.journal_head(&k).await?, 0)?;
    check_err(
        "Rev(2) after delete",
        s.put_checkpoint(&k, &small_checkpoint(k.id(), 3), Expect::Rev(2), 0)
            .await,
        ErrorKind::Conflict,
        json!({"expected": 2, "actual": null}),
    )?;
    let rev = s
        .put_checkpoint(&k, &small_checkpoint(k.id(), 3), Expect::Absent, 0)
        .await?;
    check_eq("revision after delete is new", rev, 3)?;
    check_eq(
        "journal restarts at 1",
        s.append_journal(&k, 0, 0, &signals(1..=1)).await?,
        1,
    )
}

async fn claim_bumps_epoch(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    check_eq("first claim", s.claim(&k, "node-a").await?, 1)?;
    let owner = s
        .owner(&k)
        .await?
        .ok_or_else(|| fail("owner missing after a claim"))?;
    check_eq(
        "owner after first claim",
        (owner.node.as_str(), owner.epoch),
        ("node-a", 1),
    )?;
    s.put_checkpoint(&k, &small_checkpoint(k.id(), 1), Expect::Absent, 1)
        .await?;
    check_eq("second claim", s.claim(&k, "node-b").await?, 2)?;
    let owner = s
        .owner(&k)
        .await?
        .ok_or_else(|| fail("owner missing after a claim"))?;
    check_eq(
        "owner after second claim",
        (owner.node.as_str(), owner.epoch),
        ("node-b", 2),
    )?;
    let stored = s
        .get_checkpoint(&k)
        .await?
        .ok_or_else(|| fail("checkpoint missing"))?;
    check_eq(
        "checkpoint survives a claim",
        (stored.rev, stored.epoch),
        (1, 2),
    )?;
    check_eq("same node claims again", s.claim(&k, "node-b").await?, 3)?;
    check_eq(
        "the new owner writes",
        s.put_checkpoint(&k, &small_checkpoint(k.id(), 2), Expect::Rev(1), 3)
            .await?,
        2,
    )
}

async fn stale_epoch_is_fenced(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    s.put_checkpoint(&k, &small_checkpoint(k.id(), 1), Expect::Absent, 0)
        .await?;
    s.append_journal(&k, 0, 0, &signals(1..=2)).await?;
    s.claim(&k, "node-a").await?;
    s.claim(&k, "node-b").await?;
    let fenced = |epoch: u64| json!({"epoch": epoch, "current_epoch": 2, "key": k.to_string()});
    let cp = small_checkpoint(k.id(), 9);
    for epoch in [0, 1, 3] {
        check_err(
            &format!("put_checkpoint under epoch {epoch}"),
            s.put_checkpoint(&k, &cp, Expect::Any, epoch).await,
            ErrorKind::Fenced,
            fenced(epoch),
        )?;
    }
    check_err(
        "append_journal under epoch 1",
        s.append_journal(&k, 1, 2, &signals(3..=3)).await,
        ErrorKind::Fenced,
        fenced(1),
    )?;
    check_err(
        "truncate_journal under epoch 1",
        s.truncate_journal(&k, 1, 2).await,
        ErrorKind::Fenced,
        fenced(1),
    )?;
    check_err(
        "bump_attempts under epoch 1",
        s.bump_attempts(&k, 1, 1).await,
        ErrorKind::Fenced,
        fenced(1),
    )?;
    check_err(
        "dead_letter under epoch 1",
        s.dead_letter(&k, 1, 1, &Error::execution("x")).await,
        ErrorKind::Fenced,
        fenced(1),
    )?;
    check_err(
        "delete under epoch 1",
        s.delete(&k, 1).await,
        ErrorKind::Fenced,
        fenced(1),
    )?;
    let fresh = key();
    check_err(
        "a write under an epoch never claimed",
        s.put_checkpoint(&fresh, &cp, Expect::Any, 1).await,
        ErrorKind::Fenced,
        json!({"epoch": 1, "current_epoch": 0}),
    )?;
    // Nothing changed.
    let stored = s
        .get_checkpoint(&k)
        .await?
        .ok_or_else(|| fail("checkpoint missing"))?;
    check_eq(
        "fenced writes change nothing",
        (stored.rev, stored.value),
        (1, small_checkpoint(k.id(), 1)),
    )?;
    check_eq(
        "journal untouched",
        journal_seqs(&*s, &k).await?,
        vec![1, 2],
    )?;
    check_eq(
        "attempts untouched",
        s.load_journal(&k, 0, 1).await?.first().map(|e| e.attempts),
        Some(0),
    )?;
    check_eq("no dead letter", s.load_dead_letters(&k, 10).await?, vec![])?;
    check_eq(
        "never-claimed key untouched",
        s.get_checkpoint(&fresh).await?,
        None,
    )?;
    // The current epoch writes.
    check_eq(
        "current epoch writes",
        s.put_checkpoint(&k, &cp, Expect::Rev(1), 2).await?,
        2,
    )?;
    check_eq(
        "current epoch appends",
        s.append_journal(&k, 2, 2, &signals(3..=3)).await?,
        3,
    )
}

async fn journal_appends_in_order(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    check_eq("append nothing", s.append_journal(&k, 0, 0, &[]).await?, 0)?;
    let first = signals(1..=3);
    check_eq("append 3", s.append_journal(&k, 0, 0, &first).await?, 3)?;
    let second = signals(4..=5);
    check_eq(
        "append 2 more",
        s.append_journal(&k, 0, 3, &second).await?,
        5,
    )?;
    check_eq("journal head", s.journal_head(&k).await?, 5)?;
    let all = s.load_journal(&k, 0, 100).await?;
    check_eq(
        "sequence numbers",
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5],
    )?;
    check_eq(
        "attempts start at 0",
        all.iter().map(|e| e.attempts).collect::<Vec<_>>(),
        vec![0; 5],
    )?;
    let expected: Vec<Signal> = first.into_iter().chain(second).collect();
    for (entry, sig) in all.iter().zip(&expected) {
        check_eq(
            &format!("bytes of entry {}", entry.seq),
            text(&entry.signal),
            sig.to_json_string(),
        )?;
        check_eq(
            &format!("signal of entry {}", entry.seq),
            &entry.to_signal()?,
            sig,
        )?;
    }
    let page = s.load_journal(&k, 2, 2).await?;
    check_eq(
        "a page after 2 of 2",
        page.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![3, 4],
    )?;
    check_eq(
        "nothing after the head",
        s.load_journal(&k, 5, 10).await?,
        vec![],
    )?;
    check_eq("limit 0", s.load_journal(&k, 0, 0).await?, vec![])
}

async fn journal_append_after_wrong_seq_conflicts(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    s.append_journal(&k, 0, 0, &signals(1..=2)).await?;
    for after in [0, 1, 3] {
        check_err(
            &format!("append after {after} when the head is 2"),
            s.append_journal(&k, 0, after, &signals(9..=9)).await,
            ErrorKind::Conflict,
            json!({"expected": after, "actual": 2}),
        )?;
    }
    check_eq(
        "a lost append adds nothing",
        journal_seqs(&*s, &k).await?,
        vec![1, 2],
    )?;
    check_eq("head unchanged", s.journal_head(&k).await?, 2)
}

async fn checkpoint_truncates_journal(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    s.append_journal(&k, 0, 0, &signals(1..=5)).await?;
    let mut cp = small_checkpoint(k.id(), 3);
    cp.applied_seq = 3;
    s.put_checkpoint(&k, &cp, Expect::Absent, 0).await?;
    check_eq(
        "entries after applied_seq stay",
        journal_seqs(&*s, &k).await?,
        vec![4, 5],
    )?;
    check_eq("head unchanged", s.journal_head(&k).await?, 5)?;
    // A lost checkpoint write truncates nothing.
    let mut later = small_checkpoint(k.id(), 5);
    later.applied_seq = 5;
    check_err(
        "stale checkpoint",
        s.put_checkpoint(&k, &later, Expect::Rev(7), 0).await,
        ErrorKind::Conflict,
        json!({}),
    )?;
    check_eq(
        "a lost checkpoint truncates nothing",
        journal_seqs(&*s, &k).await?,
        vec![4, 5],
    )?;
    check_eq(
        "applied_seq stored",
        s.get_checkpoint(&k).await?.map(|c| c.value.applied_seq),
        Some(3),
    )
}

async fn truncate_journal_keeps_head(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    s.append_journal(&k, 0, 0, &signals(1..=5)).await?;
    s.truncate_journal(&k, 0, 4).await?;
    check_eq(
        "after truncating to 4",
        journal_seqs(&*s, &k).await?,
        vec![5],
    )?;
    s.truncate_journal(&k, 0, 10).await?;
    check_eq(
        "after truncating past the head",
        journal_seqs(&*s, &k).await?,
        vec![],
    )?;
    check_eq("head unchanged", s.journal_head(&k).await?, 5)?;
    check_err(
        "append after 0 once emptied",
        s.append_journal(&k, 0, 0, &signals(1..=1)).await,
        ErrorKind::Conflict,
        json!({"expected": 0, "actual": 5}),
    )?;
    check_eq(
        "append continues at 6",
        s.append_journal(&k, 0, 5, &signals(6..=6)).await?,
        6,
    )?;
    check_eq("journal", journal_seqs(&*s, &k).await?, vec![6])
}

async fn attempts_count_and_dead_letters(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    let sigs = signals(1..=3);
    s.append_journal(&k, 0, 0, &sigs).await?;
    check_eq("first attempt", s.bump_attempts(&k, 0, 2).await?, 1)?;
    check_eq("second attempt", s.bump_attempts(&k, 0, 2).await?, 2)?;
    let entries = s.load_journal(&k, 0, 10).await?;
    check_eq(
        "attempts stored",
        entries.iter().map(|e| e.attempts).collect::<Vec<_>>(),
        vec![0, 2, 0],
    )?;
    check_err(
        "bump a missing entry",
        s.bump_attempts(&k, 0, 9).await,
        ErrorKind::NotFound,
        json!({"seq": 9}),
    )?;
    let error = Error::execution("poison").with_detail("api_key", "secret");
    s.dead_letter(&k, 0, 2, &error).await?;
    check_eq(
        "entry left the journal",
        journal_seqs(&*s, &k).await?,
        vec![1, 3],
    )?;
    check_eq("head unchanged", s.journal_head(&k).await?, 3)?;
    let dead = s.load_dead_letters(&k, 10).await?;
    check_eq("one dead letter", dead.len(), 1)?;
    if let Some(d) = dead.first() {
        check_eq("dead letter seq", d.seq, 2)?;
        check_eq("dead letter attempts", d.attempts, 2)?;
        check_eq(
            "dead letter signal",
            text(&d.signal),
            sigs[1].to_json_string(),
        )?;
        check_eq("dead letter error", &d.error, &error.to_envelope())?;
    }
    check_err(
        "dead-letter a missing entry",
        s.dead_letter(&k, 0, 2, &error).await,
        ErrorKind::NotFound,
        json!({"seq": 2}),
    )?;
    s.dead_letter(&k, 0, 3, &Error::timeout("slow")).await?;
    let dead = s.load_dead_letters(&k, 10).await?;
    check_eq(
        "dead letters oldest first",
        dead.iter().map(|d| d.seq).collect::<Vec<_>>(),
        vec![2, 3],
    )?;
    check_eq(
        "dead letters limit",
        s.load_dead_letters(&k, 1).await?.len(),
        1,
    )
}

const RACERS: u64 = 16;

async fn concurrent_checkpoint_writers_one_wins(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    for (round, expect) in [(0, Expect::Absent), (1, Expect::Rev(1))] {
        let mut tasks = Vec::new();
        for i in 0..RACERS {
            let (s, k) = (s.clone(), k.clone());
            tasks.push(tokio::spawn(async move {
                let cp = small_checkpoint(k.id(), 100 * round + i);
                (i, s.put_checkpoint(&k, &cp, expect, 0).await)
            }));
        }
        let mut winners = Vec::new();
        for task in tasks {
            let (i, result) = task.await.map_err(|e| fail(format!("task failed: {e}")))?;
            match result {
                Ok(rev) => winners.push((i, rev)),
                Err(e) if e.kind() == ErrorKind::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        check_eq(&format!("winners of round {round}"), winners.len(), 1)?;
        let (i, rev) = winners[0];
        check_eq("the winner's revision", rev, round + 1)?;
        let stored = s
            .get_checkpoint(&k)
            .await?
            .ok_or_else(|| fail("checkpoint missing"))?;
        check_eq(
            "the winner's checkpoint is stored",
            stored.value,
            small_checkpoint(k.id(), 100 * round + i),
        )?;
    }
    Ok(())
}

async fn concurrent_appends_one_wins(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    let mut tasks = Vec::new();
    for i in 0..RACERS {
        let (s, k) = (s.clone(), k.clone());
        tasks.push(tokio::spawn(async move {
            (
                i,
                s.append_journal(&k, 0, 0, &signals(i * 10 + 1..=i * 10 + 2))
                    .await,
            )
        }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        let (i, result) = task.await.map_err(|e| fail(format!("task failed: {e}")))?;
        match result {
            Ok(last) => winners.push((i, last)),
            Err(e) if e.kind() == ErrorKind::Conflict => {}
            Err(e) => return Err(e),
        }
    }
    check_eq("appends that won", winners.len(), 1)?;
    let (i, last) = winners[0];
    check_eq("the winner's last seq", last, 2)?;
    let entries = s.load_journal(&k, 0, 10).await?;
    let got: Vec<String> = entries.iter().map(|e| text(&e.signal)).collect();
    let want: Vec<String> = signals(i * 10 + 1..=i * 10 + 2)
        .iter()
        .map(Signal::to_json_string)
        .collect();
    check_eq("only the winner's entries", got, want)
}

async fn concurrent_claims_get_distinct_epochs(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    let mut tasks = Vec::new();
    for i in 0..RACERS {
        let (s, k) = (s.clone(), k.clone());
        tasks.push(tokio::spawn(async move {
            s.claim(&k, &format!("node-{i}")).await
        }));
    }
    let mut epochs = Vec::new();
    for task in tasks {
        epochs.push(
            task.await
                .map_err(|e| fail(format!("task failed: {e}")))??,
        );
    }
    epochs.sort_unstable();
    check_eq("epochs", epochs, (1..=RACERS).collect::<Vec<_>>())?;
    let owner = s.owner(&k).await?.ok_or_else(|| fail("owner missing"))?;
    check_eq("the last claim's epoch", owner.epoch, RACERS)
}

async fn many_keys_commit_together(s: Arc<dyn Storage>) -> Result<()> {
    let keys: Vec<StorageKey> = (0..64).map(|_| key()).collect();
    let mut tasks = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let (s, k) = (s.clone(), k.clone());
        tasks.push(tokio::spawn(async move {
            let last = s.append_journal(&k, 0, 0, &signals(1..=2)).await?;
            let mut cp = small_checkpoint(k.id(), i as u64);
            cp.applied_seq = 1;
            let rev = s.put_checkpoint(&k, &cp, Expect::Absent, 0).await?;
            Ok::<_, Error>((last, rev))
        }));
    }
    for task in tasks {
        check_eq(
            "append and checkpoint",
            task.await
                .map_err(|e| fail(format!("task failed: {e}")))??,
            (2, 1),
        )?;
    }
    for (i, k) in keys.iter().enumerate() {
        let stored = s
            .get_checkpoint(k)
            .await?
            .ok_or_else(|| fail(format!("checkpoint of {k} missing")))?;
        let mut cp = small_checkpoint(k.id(), i as u64);
        cp.applied_seq = 1;
        check_eq(&format!("checkpoint of {k}"), stored.value, cp)?;
        check_eq(
            &format!("journal of {k}"),
            journal_seqs(&*s, k).await?,
            vec![2],
        )?;
    }
    Ok(())
}

async fn large_checkpoint_round_trips(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    let mut cp = small_checkpoint(k.id(), 0);
    let blob: String = (0..(1 << 20))
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    cp.state.insert("blob".into(), json!(blob));
    cp.state.insert(
        "items".into(),
        Value::Array((0..10_000).map(|i| json!({"i": i})).collect()),
    );
    s.put_checkpoint(&k, &cp, Expect::Absent, 0).await?;
    let stored = s
        .get_checkpoint(&k)
        .await?
        .ok_or_else(|| fail("checkpoint missing"))?;
    check_eq("a 1 MiB checkpoint", stored.value == cp, true)
}

/// A delta over `base` giving `next`: `appended` names keys whose arrays
/// grew (their tail is taken from `next`), every other key of `next` that
/// differs from `base` is set.
fn delta_between(base: &Checkpoint, next: &Checkpoint, appended: &[&str]) -> CheckpointDelta {
    let mut cp = next.clone();
    cp.state = Map::new();
    let mut tails = std::collections::BTreeMap::new();
    for (k, v) in &next.state {
        if appended.contains(&k.as_str()) {
            let old = base
                .state
                .get(k)
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let tail = v
                .as_array()
                .map(|a| a[old.min(a.len())..].to_vec())
                .unwrap_or_default();
            tails.insert(k.clone(), tail);
        } else if base.state.get(k) != Some(v) {
            cp.state.insert(k.clone(), v.clone());
        }
    }
    let mut delta = CheckpointDelta::new(cp, next.state.keys().cloned());
    delta.appended = tails;
    delta
}

async fn deltas_fold_into_the_checkpoint(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    s.append_journal(&k, 0, 0, &signals(1..=6)).await?;
    let base = rich_checkpoint(k.id());
    s.put_checkpoint(&k, &base, Expect::Absent, 0).await?;
    // Set one key, append to an array, remove one, reorder, add one; and
    // every other field changes.
    let mut next = rich_checkpoint(k.id());
    next.state.insert("zeta".into(), json!(2));
    next.state.insert("mid".into(), json!([1, {"x": "y"}]));
    next.state.shift_remove("nul");
    let alpha = next.state.shift_remove("alpha").unwrap_or(Value::Null);
    next.state.insert("alpha".into(), alpha);
    next.state.insert("fresh".into(), json!({"a": [1]}));
    next.strategy_ext = None;
    next.applied_seq = 4;
    next.outbox = Vec::new();
    next.recent_ids = vec!["sig-3".into()];
    let rev = s
        .put_checkpoint_delta(
            &k,
            &delta_between(&base, &next, &["mid"]),
            Expect::Rev(1),
            0,
        )
        .await?;
    check_eq("delta revision", rev, 2)?;
    let stored = s
        .get_checkpoint(&k)
        .await?
        .ok_or_else(|| fail("checkpoint missing"))?;
    check_eq("folded checkpoint", &stored.value, &next)?;
    check_eq(
        "folded key order",
        stored.value.state.keys().collect::<Vec<_>>(),
        next.state.keys().collect::<Vec<_>>(),
    )?;
    check_eq("revision after a delta", stored.rev, 2)?;
    check_eq(
        "a delta truncates the journal",
        journal_seqs(&*s, &k).await?,
        vec![5, 6],
    )?;
    // A second delta on top of the first.
    // It keeps the last stored recent id and appends two.
    let mut third = next.clone();
    third
        .state
        .insert("mid".into(), json!([1, {"x": "y"}, 3, 4]));
    third.applied_seq = 6;
    third.recent_ids = vec!["sig-3".into(), "sig-4".into(), "sig-5".into()];
    let mut delta = delta_between(&next, &third, &["mid"]);
    delta.checkpoint.recent_ids = vec!["sig-4".into(), "sig-5".into()];
    delta.recent_ids_kept = Some(1);
    s.put_checkpoint_delta(&k, &delta, Expect::Rev(2), 0)
        .await?;
    let stored = s.get_checkpoint(&k).await?.map(|c| (c.rev, c.value));
    check_eq("two deltas folded", stored, Some((3, third.clone())))?;
    check_eq("journal emptied", journal_seqs(&*s, &k).await?, vec![])?;
    // A full write replaces checkpoint and deltas.
    let full = small_checkpoint(k.id(), 7);
    s.put_checkpoint(&k, &full, Expect::Rev(3), 0).await?;
    let stored = s.get_checkpoint(&k).await?.map(|c| (c.rev, c.value));
    check_eq("full write after deltas", stored, Some((4, full.clone())))?;
    let mut after = full.clone();
    after.state.insert("n".into(), json!(8));
    s.put_checkpoint_delta(&k, &delta_between(&full, &after, &[]), Expect::Rev(4), 0)
        .await?;
    let stored = s.get_checkpoint(&k).await?.map(|c| (c.rev, c.value));
    check_eq("delta after a full write", stored, Some((5, after)))?;
    // A delete drops the deltas too.
    s.delete(&k, 0).await?;
    check_eq("deleted", s.get_checkpoint(&k).await?.map(|c| c.rev), None)?;
    s.put_checkpoint(&k, &full, Expect::Absent, 0).await?;
    let stored = s.get_checkpoint(&k).await?.map(|c| (c.rev, c.value));
    check_eq("no delta survives a delete", stored, Some((6, full)))
}

async fn delta_conditions_hold(s: Arc<dyn Storage>) -> Result<()> {
    let k = key();
    let base = small_checkpoint(k.id(), 1);
    let next = small_checkpoint(k.id(), 2);
    let delta = delta_between(&base, &next, &[]);
    check_err(
        "delta without a checkpoint",
        s.put_checkpoint_delta(&k, &delta, Expect::Any, 0).await,
        ErrorKind::Conflict,
        json!({"expected": "any", "actual": null}),
    )?;
    s.put_checkpoint(&k, &base, Expect::Absent, 0).await?;
    check_err(
        "delta with a stale revision",
        s.put_checkpoint_delta(&k, &delta, Expect::Rev(7), 0).await,
        ErrorKind::Conflict,
        json!({"expected": 7, "actual": 1}),
    )?;
    check_err(
        "delta expecting no checkpoint",
        s.put_checkpoint_delta(&k, &delta, Expect::Absent, 0).await,
        ErrorKind::Conflict,
        json!({"expected": null, "actual": 1}),
    )?;
    s.claim(&k, "node-b").await?;
    check_err(
        "delta with a stale epoch",
        s.put_checkpoint_delta(&k, &delta, Expect::Rev(1), 0).await,
        ErrorKind::Fenced,
        json!({"epoch": 0, "current_epoch": 1}),
    )?;
    let stored = s.get_checkpoint(&k).await?.map(|c| (c.rev, c.value));
    check_eq("lost deltas change nothing", stored, Some((1, base)))?;
    s.put_checkpoint_delta(&k, &delta, Expect::Any, 1).await?;
    let stored = s.get_checkpoint(&k).await?.map(|c| (c.rev, c.value));
    check_eq("delta under the new epoch", stored, Some((2, next)))
}

async fn timers_are_listed_by_kind(s: Arc<dyn Storage>) -> Result<()> {
    let ns = format!("timers-{}", uuid::Uuid::now_v7());
    let k = |kind: &str, id: &str| StorageKey::new(&ns, kind, id);
    let with_timers = |id: &str, timers: Vec<Value>| {
        let mut cp = Checkpoint::new("pinger", "1", id);
        cp.state.insert("n".into(), json!(1));
        cp.timers = timers;
        cp
    };
    let schedule = |due: i64| json!({"kind": "schedule", "due_ms": due, "signal": {}});
    let cron =
        |next: i64| json!({"kind": "cron", "job_id": "j", "cron": "* * * * *", "next_ms": next});

    let p1 = with_timers("p-1", vec![schedule(5_000), cron(3_000)]);
    s.put_checkpoint(&k("pinger", "p-1")?, &p1, Expect::Absent, 0)
        .await?;
    // A delta moves p-2's due time.
    let p2 = with_timers("p-2", vec![schedule(7_000)]);
    s.put_checkpoint(&k("pinger", "p-2")?, &p2, Expect::Absent, 0)
        .await?;
    let moved = with_timers("p-2", vec![schedule(6_000)]);
    s.put_checkpoint_delta(
        &k("pinger", "p-2")?,
        &delta_between(&p2, &moved, &[]),
        Expect::Rev(1),
        0,
    )
    .await?;
    s.put_checkpoint(
        &k("pinger", "p-10")?,
        &with_timers("p-10", vec![cron(9_000)]),
        Expect::Absent,
        0,
    )
    .await?;
    // No timers; timers dropped by a full write; a delta dropping them.
    s.put_checkpoint(
        &k("pinger", "p-3")?,
        &with_timers("p-3", vec![]),
        Expect::Absent,
        0,
    )
    .await?;
    s.put_checkpoint(
        &k("pinger", "p-4")?,
        &with_timers("p-4", vec![schedule(1)]),
        Expect::Absent,
        0,
    )
    .await?;
    s.put_checkpoint(
        &k("pinger", "p-4")?,
        &with_timers("p-4", vec![]),
        Expect::Rev(1),
        0,
    )
    .await?;
    let p5 = with_timers("p-5", vec![schedule(2)]);
    s.put_checkpoint(&k("pinger", "p-5")?, &p5, Expect::Absent, 0)
        .await?;
    s.put_checkpoint_delta(
        &k("pinger", "p-5")?,
        &delta_between(&p5, &with_timers("p-5", vec![]), &[]),
        Expect::Rev(1),
        0,
    )
    .await?;
    // Another kind, another namespace.
    s.put_checkpoint(&k("other", "p-1")?, &p1, Expect::Absent, 0)
        .await?;
    let elsewhere = StorageKey::new(format!("{ns}-x"), "pinger", "p-1")?;
    s.put_checkpoint(&elsewhere, &p1, Expect::Absent, 0).await?;

    let listed = |after: Option<&'static str>, limit: usize| {
        let s = Arc::clone(&s);
        let ns = ns.clone();
        async move {
            let due = s.list_timers(&ns, "pinger", after, limit).await?;
            Ok::<_, Error>(
                due.into_iter()
                    .map(|d| (d.id, d.due_ms))
                    .collect::<Vec<_>>(),
            )
        }
    };
    let all = vec![
        ("p-1".to_owned(), 3_000),
        ("p-10".to_owned(), 9_000),
        ("p-2".to_owned(), 6_000),
    ];
    check_eq("listed timers", listed(None, 100).await?, all.clone())?;
    check_eq("first page", listed(None, 2).await?, all[..2].to_vec())?;
    check_eq(
        "next page",
        listed(Some("p-10"), 2).await?,
        all[2..].to_vec(),
    )?;
    check_eq("last page", listed(Some("p-2"), 2).await?, vec![])?;

    s.delete(&k("pinger", "p-10")?, 0).await?;
    check_eq(
        "listed after a delete",
        listed(None, 100).await?,
        vec![all[0].clone(), all[2].clone()],
    )?;
    Ok(())
}
