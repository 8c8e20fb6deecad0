//! [`Hooked`]: a [`MemoryStorage`] with test hooks around its operations,
//! so that a fault or counting storage is a few lines of [`Hooks`] rather
//! than a forwarding implementation of every [`Storage`] method.

use std::ops::Deref;

use futures::future::BoxFuture;
use jido::persist::{
    Checkpoint, CheckpointDelta, DeadLetter, Expect, JournalEntry, MemoryStorage, Owner, Storage,
    StorageKey, Stored, TimerDue,
};
use jido::signal::Signal;

/// The operation a [`Hooks::check`] is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    GetCheckpoint,
    PutCheckpoint,
    PutDelta,
    Delete,
    AppendJournal,
    LoadJournal,
    JournalHead,
    TruncateJournal,
    BumpAttempts,
    Claim,
    Owner,
    DeadLetter,
    LoadDeadLetters,
    ListTimers,
}

impl Op {
    /// A checkpoint, a delta or a journal append: what a durable agent
    /// writes for a signal.
    pub fn is_agent_write(self) -> bool {
        matches!(self, Op::PutCheckpoint | Op::PutDelta | Op::AppendJournal)
    }
}

/// What a [`Hooked`] storage asks before and tells after its operations.
pub trait Hooks: Send + Sync + 'static {
    /// Before every operation; an error is the operation's result and the
    /// inner storage is not called. `key` is `None` for `list_timers`.
    fn check(&self, op: Op, key: Option<&StorageKey>) -> jido::Result<()> {
        let _ = (op, key);
        Ok(())
    }
    /// After a full checkpoint was stored.
    fn put(&self, key: &StorageKey, cp: &Checkpoint) {
        let _ = (key, cp);
    }
    /// After a delta was stored.
    fn delta(&self, key: &StorageKey, delta: &CheckpointDelta) {
        let _ = (key, delta);
    }
}

/// No hooks: a plain memory storage.
impl Hooks for () {}

/// A [`MemoryStorage`] behind [`Hooks`]; derefs to the hooks.
pub struct Hooked<H> {
    pub inner: MemoryStorage,
    pub hooks: H,
}

impl<H: Hooks> Hooked<H> {
    pub fn new(hooks: H) -> Self {
        Self {
            inner: MemoryStorage::new(),
            hooks,
        }
    }

    /// `run` unless the hooks refuse `op`.
    fn guard<'a, T: Send + 'a>(
        &'a self,
        op: Op,
        key: Option<&StorageKey>,
        run: impl FnOnce() -> BoxFuture<'a, jido::Result<T>>,
    ) -> BoxFuture<'a, jido::Result<T>> {
        match self.hooks.check(op, key) {
            Ok(()) => run(),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }
}

impl<H> Deref for Hooked<H> {
    type Target = H;
    fn deref(&self) -> &H {
        &self.hooks
    }
}

impl<H: Hooks> Storage for Hooked<H> {
    fn get_checkpoint<'a>(
        &'a self,
        key: &'a StorageKey,
    ) -> BoxFuture<'a, jido::Result<Option<Stored<Checkpoint>>>> {
        self.guard(Op::GetCheckpoint, Some(key), || {
            self.inner.get_checkpoint(key)
        })
    }
    fn put_checkpoint<'a>(
        &'a self,
        key: &'a StorageKey,
        cp: &'a Checkpoint,
        expect: Expect,
        epoch: u64,
    ) -> BoxFuture<'a, jido::Result<u64>> {
        self.guard(Op::PutCheckpoint, Some(key), || {
            Box::pin(async move {
                let rev = self.inner.put_checkpoint(key, cp, expect, epoch).await?;
                self.hooks.put(key, cp);
                Ok(rev)
            })
        })
    }
    fn put_checkpoint_delta<'a>(
        &'a self,
        key: &'a StorageKey,
        delta: &'a CheckpointDelta,
        expect: Expect,
        epoch: u64,
    ) -> BoxFuture<'a, jido::Result<u64>> {
        self.guard(Op::PutDelta, Some(key), || {
            Box::pin(async move {
                let rev = self
                    .inner
                    .put_checkpoint_delta(key, delta, expect, epoch)
                    .await?;
                self.hooks.delta(key, delta);
                Ok(rev)
            })
        })
    }
    fn delete<'a>(&'a self, key: &'a StorageKey, epoch: u64) -> BoxFuture<'a, jido::Result<()>> {
        self.guard(Op::Delete, Some(key), || self.inner.delete(key, epoch))
    }
    fn append_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        after: u64,
        signals: &'a [Signal],
    ) -> BoxFuture<'a, jido::Result<u64>> {
        self.guard(Op::AppendJournal, Some(key), || {
            self.inner.append_journal(key, epoch, after, signals)
        })
    }
    fn load_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'a, jido::Result<Vec<JournalEntry>>> {
        self.guard(Op::LoadJournal, Some(key), || {
            self.inner.load_journal(key, after, limit)
        })
    }
    fn journal_head<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, jido::Result<u64>> {
        self.guard(Op::JournalHead, Some(key), || self.inner.journal_head(key))
    }
    fn truncate_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        up_to: u64,
    ) -> BoxFuture<'a, jido::Result<()>> {
        self.guard(Op::TruncateJournal, Some(key), || {
            self.inner.truncate_journal(key, epoch, up_to)
        })
    }
    fn bump_attempts<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        seq: u64,
    ) -> BoxFuture<'a, jido::Result<u32>> {
        self.guard(Op::BumpAttempts, Some(key), || {
            self.inner.bump_attempts(key, epoch, seq)
        })
    }
    fn claim<'a>(&'a self, key: &'a StorageKey, node: &'a str) -> BoxFuture<'a, jido::Result<u64>> {
        self.guard(Op::Claim, Some(key), || self.inner.claim(key, node))
    }
    fn owner<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, jido::Result<Option<Owner>>> {
        self.guard(Op::Owner, Some(key), || self.inner.owner(key))
    }
    fn dead_letter<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        seq: u64,
        error: &'a jido::Error,
    ) -> BoxFuture<'a, jido::Result<()>> {
        self.guard(Op::DeadLetter, Some(key), || {
            self.inner.dead_letter(key, epoch, seq, error)
        })
    }
    fn load_dead_letters<'a>(
        &'a self,
        key: &'a StorageKey,
        limit: usize,
    ) -> BoxFuture<'a, jido::Result<Vec<DeadLetter>>> {
        self.guard(Op::LoadDeadLetters, Some(key), || {
            self.inner.load_dead_letters(key, limit)
        })
    }
    fn list_timers<'a>(
        &'a self,
        namespace: &'a str,
        kind: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, jido::Result<Vec<TimerDue>>> {
        self.guard(Op::ListTimers, None, || {
            self.inner.list_timers(namespace, kind, after, limit)
        })
    }
}
