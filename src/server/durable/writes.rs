//! A restart waits for the writes of its earlier incarnation still in
//! flight.

use std::collections::HashMap;
use std::sync::Arc;

use crate::persist::{Storage, StorageKey};

/// One lock per stored agent (storage, key) that this process writes: a
/// write holds it while it runs, and a restore takes it before it reads.
/// A write still in flight when its agent crashed (its task outlives the
/// actor, and may answer its callers) thus lands before the restarted
/// agent reads, which then sees it instead of conflicting with it.
pub(super) type WriteLock = Arc<Writes>;

/// The writes of one stored agent in flight.
#[derive(Default)]
pub(crate) struct Writes {
    in_flight: std::sync::atomic::AtomicUsize,
    done: tokio::sync::Notify,
}

/// One write in flight, counted from the moment it is decided (in the
/// actor) until its task ends.
pub(super) struct Writing(WriteLock);

impl Writing {
    pub(super) fn start(lock: &WriteLock) -> Self {
        lock.in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self(Arc::clone(lock))
    }
}

impl Drop for Writing {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.done.notify_waiters();
    }
}

impl Writes {
    /// Waits until no write is in flight.
    pub(super) async fn settled(&self) {
        loop {
            let done = self.done.notified();
            if self.in_flight.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                return;
            }
            done.await;
        }
    }
}

type WriteMap = HashMap<(usize, String), std::sync::Weak<Writes>>;

static WRITES: std::sync::LazyLock<std::sync::Mutex<(WriteMap, usize)>> =
    std::sync::LazyLock::new(Default::default);

/// The write lock of `key` in `storage`.
pub(super) fn write_lock(storage: &Arc<dyn Storage>, key: &StorageKey) -> WriteLock {
    let id = (Arc::as_ptr(storage) as *const () as usize, key.to_string());
    let mut guard = WRITES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (map, prune_at) = &mut *guard;
    if let Some(lock) = map.get(&id).and_then(std::sync::Weak::upgrade) {
        return lock;
    }
    if map.len() >= *prune_at {
        // Amortised: entries of agents that are gone.
        map.retain(|_, weak| weak.strong_count() > 0);
        *prune_at = (map.len() * 2).max(64);
    }
    let lock = WriteLock::default();
    map.insert(id, Arc::downgrade(&lock));
    lock
}
