//! [`MemoryStorage`]: the storage in process memory.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::{BoxFuture, FutureExt, ready};

use super::errors::{check_epoch, expect_holds, journal_conflict, no_entry, stale_rev};
use super::{
    Checkpoint, CheckpointDelta, DeadLetter, Expect, JournalEntry, Owner, Storage, StorageKey,
    Stored, TimerDue,
};
use crate::error::{Error, Result};
use crate::signal::Signal;

/// A [`Storage`] in process memory, for tests and examples (as Jido's ETS
/// adapter). Nothing survives the process; everything else (revisions,
/// fencing, the journal's numbering, dead letters) behaves as in the
/// durable adapters. Clones share the same data.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::persist::{Checkpoint, Expect, MemoryStorage, Storage, StorageKey};
///
/// let storage = MemoryStorage::new();
/// let key = StorageKey::new("test", "counter", "c-1")?;
/// let rev = storage.put_checkpoint(&key, &Checkpoint::new("counter", "1", "c-1"), Expect::Any, 0).await?;
/// assert_eq!(rev, 1);
/// assert_eq!(storage.get_checkpoint(&key).await?.map(|s| s.rev), Some(1));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryStorage {
    slots: Arc<Mutex<HashMap<StorageKey, Slot>>>,
}

#[derive(Debug, Default)]
struct Slot {
    epoch: u64,
    owner: Option<String>,
    /// The last revision handed out (never reused).
    rev: u64,
    checkpoint: Option<(u64, Checkpoint)>,
    last_seq: u64,
    journal: BTreeMap<u64, JournalEntry>,
    dead: Vec<DeadLetter>,
}

impl MemoryStorage {
    /// An empty storage.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<StorageKey, Slot>> {
        // A panic while holding the lock cannot leave a slot half-written:
        // every write checks first and then mutates infallibly.
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` on the slot of `key` (created if missing) after checking
    /// the epoch.
    fn write<T>(
        &self,
        key: &StorageKey,
        epoch: u64,
        f: impl FnOnce(&mut Slot) -> Result<T>,
    ) -> Result<T> {
        let mut slots = self.lock();
        let current = slots.get(key).map_or(0, |s| s.epoch);
        check_epoch(key, epoch, current)?;
        f(slots.entry(key.clone()).or_default())
    }

    fn read<T>(&self, key: &StorageKey, f: impl FnOnce(Option<&Slot>) -> T) -> T {
        f(self.lock().get(key))
    }
}

fn done<'a, T: Send + 'a>(result: Result<T>) -> BoxFuture<'a, Result<T>> {
    ready(result).boxed()
}

impl Storage for MemoryStorage {
    fn get_checkpoint<'a>(
        &'a self,
        key: &'a StorageKey,
    ) -> BoxFuture<'a, Result<Option<Stored<Checkpoint>>>> {
        done(Ok(self.read(key, |slot| {
            slot.and_then(|s| {
                s.checkpoint.as_ref().map(|(rev, cp)| Stored {
                    value: cp.clone(),
                    rev: *rev,
                    epoch: s.epoch,
                })
            })
        })))
    }

    fn put_checkpoint<'a>(
        &'a self,
        key: &'a StorageKey,
        cp: &'a Checkpoint,
        expect: Expect,
        epoch: u64,
    ) -> BoxFuture<'a, Result<u64>> {
        done(self.write(key, epoch, |slot| {
            let current = slot.checkpoint.as_ref().map(|(rev, _)| *rev);
            if !expect_holds(expect, current) {
                return Err(stale_rev(key, expect, current));
            }
            slot.rev += 1;
            slot.checkpoint = Some((slot.rev, cp.clone()));
            slot.journal.retain(|seq, _| *seq > cp.applied_seq);
            Ok(slot.rev)
        }))
    }

    fn put_checkpoint_delta<'a>(
        &'a self,
        key: &'a StorageKey,
        delta: &'a CheckpointDelta,
        expect: Expect,
        epoch: u64,
    ) -> BoxFuture<'a, Result<u64>> {
        done(self.write(key, epoch, |slot| {
            let current = slot.checkpoint.as_ref().map(|(rev, _)| *rev);
            let Some((rev, cp)) = slot.checkpoint.as_mut() else {
                return Err(stale_rev(key, expect, None));
            };
            if !expect_holds(expect, current) {
                return Err(stale_rev(key, expect, current));
            }
            // Folded in place: O(keys + delta), as a stored delta would be.
            delta.clone().apply_to(cp)?;
            slot.rev += 1;
            *rev = slot.rev;
            let applied = cp.applied_seq;
            slot.journal.retain(|seq, _| *seq > applied);
            Ok(slot.rev)
        }))
    }

    fn list_timers<'a>(
        &'a self,
        namespace: &'a str,
        kind: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TimerDue>>> {
        let mut due: Vec<TimerDue> = self
            .lock()
            .iter()
            .filter(|(key, _)| {
                key.namespace() == namespace
                    && key.kind() == kind
                    && after.is_none_or(|after| key.id() > after)
            })
            .filter_map(|(key, slot)| {
                let (_, cp) = slot.checkpoint.as_ref()?;
                Some(TimerDue::new(key.id(), cp.next_due_ms()?))
            })
            .collect();
        due.sort_by(|a, b| a.id.cmp(&b.id));
        due.truncate(limit);
        ready(Ok(due)).boxed()
    }

    fn delete<'a>(&'a self, key: &'a StorageKey, epoch: u64) -> BoxFuture<'a, Result<()>> {
        done(self.write(key, epoch, |slot| {
            slot.checkpoint = None;
            slot.journal.clear();
            slot.last_seq = 0;
            Ok(())
        }))
    }

    fn append_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        after: u64,
        signals: &'a [Signal],
    ) -> BoxFuture<'a, Result<u64>> {
        done(self.write(key, epoch, |slot| {
            if slot.last_seq != after {
                return Err(journal_conflict(key, after, slot.last_seq));
            }
            for signal in signals {
                slot.last_seq += 1;
                slot.journal.insert(
                    slot.last_seq,
                    JournalEntry {
                        seq: slot.last_seq,
                        signal: signal.to_json_vec(),
                        attempts: 0,
                    },
                );
            }
            Ok(slot.last_seq)
        }))
    }

    fn load_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<JournalEntry>>> {
        done(Ok(self.read(key, |slot| {
            slot.map(|s| {
                s.journal
                    .range(after.saturating_add(1)..)
                    .take(limit)
                    .map(|(_, e)| e.clone())
                    .collect()
            })
            .unwrap_or_default()
        })))
    }

    fn journal_head<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, Result<u64>> {
        done(Ok(self.read(key, |slot| slot.map_or(0, |s| s.last_seq))))
    }

    fn truncate_journal<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        up_to: u64,
    ) -> BoxFuture<'a, Result<()>> {
        done(self.write(key, epoch, |slot| {
            slot.journal.retain(|seq, _| *seq > up_to);
            Ok(())
        }))
    }

    fn bump_attempts<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        seq: u64,
    ) -> BoxFuture<'a, Result<u32>> {
        done(self.write(key, epoch, |slot| {
            let entry = slot
                .journal
                .get_mut(&seq)
                .ok_or_else(|| no_entry(key, seq))?;
            entry.attempts = entry.attempts.saturating_add(1);
            Ok(entry.attempts)
        }))
    }

    fn claim<'a>(&'a self, key: &'a StorageKey, node: &'a str) -> BoxFuture<'a, Result<u64>> {
        let mut slots = self.lock();
        let slot = slots.entry(key.clone()).or_default();
        slot.epoch += 1;
        slot.owner = Some(node.to_owned());
        done(Ok(slot.epoch))
    }

    fn owner<'a>(&'a self, key: &'a StorageKey) -> BoxFuture<'a, Result<Option<Owner>>> {
        done(Ok(self.read(key, |slot| {
            slot.and_then(|s| {
                s.owner.as_ref().map(|node| Owner {
                    node: node.clone(),
                    epoch: s.epoch,
                })
            })
        })))
    }

    fn dead_letter<'a>(
        &'a self,
        key: &'a StorageKey,
        epoch: u64,
        seq: u64,
        error: &'a Error,
    ) -> BoxFuture<'a, Result<()>> {
        done(self.write(key, epoch, |slot| {
            let entry = slot
                .journal
                .remove(&seq)
                .ok_or_else(|| no_entry(key, seq))?;
            slot.dead.push(DeadLetter {
                seq,
                signal: entry.signal,
                attempts: entry.attempts,
                error: error.to_envelope(),
            });
            Ok(())
        }))
    }

    fn load_dead_letters<'a>(
        &'a self,
        key: &'a StorageKey,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<DeadLetter>>> {
        done(Ok(self.read(key, |slot| {
            slot.map(|s| s.dead.iter().take(limit).cloned().collect())
                .unwrap_or_default()
        })))
    }
}
