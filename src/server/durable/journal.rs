//! The write-ahead journal: accepted signals appended before they are
//! queued; `cast_durable`.

use std::collections::HashSet;
use std::sync::Arc;

use ractor::{ActorRef, RpcReplyPort};

use super::writes::Writing;
use super::{Ack, Durable, DurableMsg, RECENT_IDS, is_fencing};
use crate::error::{Error, Result};
use crate::server::actor::AgentServerState;
use crate::server::inflight::Work;
use crate::server::msg::{AgentMsg, Internal};
use crate::signal::Signal;

impl AgentServerState {
    /// A signal accepted from outside, of a journaling agent: appended
    /// before it is queued. `false` when the agent does not journal (the
    /// caller queues it as usual).
    pub(crate) fn journal(&mut self, signal: Signal, ack: Ack) -> Option<(Signal, Ack)> {
        let Some(d) = self.durable.as_deref_mut().filter(|d| d.journals()) else {
            return Some((signal, ack));
        };
        if !d.recent.insert(signal.id()) && !matches!(ack, Ack::Call(_)) {
            // Seen already (an outbox run again after a crash re-sends its
            // Emits with their ids): accepted once.
            tracing::debug!(
                name: "jido.persist.duplicate",
                target: "jido::persist",
                agent_id = %self.id,
                signal_id = signal.id(),
                signal_type = signal.ty(),
                "jido.persist.duplicate"
            );
            if let Ack::Durable(port) = ack {
                let _ = port.send(Ok(()));
            }
            return None;
        }
        d.incoming.push((signal, ack));
        if d.appending.is_none() {
            self.start_append();
        }
        None
    }

    /// Appends every signal waiting, in one write.
    pub(super) fn start_append(&mut self) {
        let myself = self.myself.clone();
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        if d.incoming.is_empty() || d.fenced {
            return;
        }
        let (signals, acks): (Vec<Signal>, Vec<Ack>) = d.incoming.drain(..).unzip();
        let storage = Arc::clone(&d.storage);
        let key = Arc::clone(&d.key);
        let writing = Writing::start(&d.lock);
        let (epoch, after) = (d.epoch, d.head);
        d.appending = Some(acks);
        let fut = async move {
            let started = tokio::time::Instant::now();
            let result = storage.append_journal(&key, epoch, after, &signals).await;
            drop(writing);
            tracing::debug!(
                name: "jido.persist.journal.append",
                target: "jido::persist",
                key = %key,
                after,
                count = signals.len(),
                duration_us = started.elapsed().as_micros() as u64,
                ok = result.is_ok(),
                "jido.persist.journal.append"
            );
            let _ = myself.send_message(AgentMsg::internal(Internal::Durable(Box::new(
                DurableMsg::Appended {
                    after,
                    signals,
                    result,
                },
            ))));
        };
        if self.exec.supervisor().spawn(fut).is_err()
            && let Some(acks) = self.durable.as_deref_mut().and_then(|d| d.appending.take())
        {
            let error = Error::cancelled("jido instance is shut down");
            answer_acks(acks, &error);
        }
    }

    pub(super) fn cast_durable(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        signal: Signal,
        ack: RpcReplyPort<Result<()>>,
    ) {
        if !self.durable.as_deref().is_some_and(Durable::journals) {
            let _ = ack.send(Err(Error::configuration(
                "cast_durable needs an agent with durability journal",
            )
            .with_detail("agent_id", self.id.to_string())));
            return;
        }
        if self.stopping {
            let _ = ack
                .send(Err(Error::cancelled("agent is stopping")
                    .with_detail("agent_id", self.id.to_string())));
            return;
        }
        if let Some((error, context)) = self.admission_error(&signal) {
            let _ = ack.send(Err(error.clone()));
            return self.refuse(
                myself,
                Work {
                    signal: signal.into(),
                    reply: None,
                },
                error,
                context,
            );
        }
        let _ = self.journal(signal, Ack::Durable(ack));
    }

    pub(super) fn on_appended(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        after: u64,
        signals: Vec<Signal>,
        result: Result<u64>,
    ) {
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        let acks = d.appending.take().unwrap_or_default();
        match result {
            Ok(last) => {
                d.head = last;
                let mut ready = Vec::with_capacity(signals.len());
                for (i, (signal, ack)) in signals.into_iter().zip(acks).enumerate() {
                    let seq = after + 1 + i as u64;
                    d.seqs.entry(signal.id().to_owned()).or_insert(seq);
                    let reply = match ack {
                        Ack::None => None,
                        Ack::Call(reply) => Some(reply),
                        Ack::Durable(port) => {
                            let _ = port.send(Ok(()));
                            None
                        }
                    };
                    ready.push((signal, reply));
                }
                for (signal, reply) in ready {
                    self.enqueue_signal(myself, signal, reply);
                }
                self.start_append();
            }
            Err(error) => {
                // Not accepted: a retry with the same ids is no duplicate.
                for signal in &signals {
                    d.recent.remove(signal.id());
                }
                answer_acks(acks, &error);
                if is_fencing(&error) {
                    return self.fence(myself, &error);
                }
                // Nothing of the signal was appended or acknowledged.
                if let Some(signal) = signals.first()
                    && let crate::server::DirectiveResult::Stop(reason) =
                        self.apply_error_policy(myself, signal, &error, "persist")
                {
                    return self.stop_self(myself, reason.to_string());
                }
                self.start_append();
            }
        }
    }
}

fn answer_acks(acks: Vec<Ack>, error: &Error) {
    for ack in acks {
        match ack {
            Ack::None => {}
            Ack::Call(reply) => {
                let _ = reply.send(Err(error.clone()));
            }
            Ack::Durable(port) => {
                let _ = port.send(Err(error.clone()));
            }
        }
    }
}

/// The ids of the last [`RECENT_IDS`] signals a journaling agent accepted
/// (allocated on first use). The list is a persistent vector, so a
/// checkpoint takes it in O(1) and writes only the ids accepted since the
/// last durable one ([`RecentIds::snapshot`]).
#[derive(Default)]
pub(crate) struct RecentIds {
    order: imbl::Vector<Arc<str>>,
    set: HashSet<Arc<str>>,
    /// Where the list stands: ids inserted and removed, ever.
    mark: RecentMark,
}

/// How many ids a [`RecentIds`] has had inserted and removed: two marks
/// with the same removals tell how many ids were appended between them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecentMark {
    inserted: u64,
    removed: u64,
}

/// The recent ids as a checkpoint takes them.
pub(super) struct RecentSnapshot {
    ids: imbl::Vector<Arc<str>>,
    /// With a delta: how many ids at the end of the stored list stay (the
    /// rest of `ids` follows them); `None` when the whole list is written.
    kept: Option<u32>,
}

impl RecentSnapshot {
    /// The ids a checkpoint or delta writes: all of them, or those after
    /// the kept ones.
    pub(super) fn written(&self) -> Vec<String> {
        let skip = self.kept.unwrap_or(0) as usize;
        self.ids.iter().skip(skip).map(|i| i.to_string()).collect()
    }

    /// Every id, oldest first (a full checkpoint).
    pub(super) fn all(&self) -> Vec<String> {
        self.ids.iter().map(|i| i.to_string()).collect()
    }

    /// How many stored ids a delta keeps.
    pub(super) fn kept(&self) -> Option<u32> {
        self.kept
    }
}

impl RecentIds {
    /// From a checkpoint's list, oldest first.
    pub(super) fn from_ids(ids: impl IntoIterator<Item = String>) -> Self {
        let mut recent = Self::default();
        for id in ids {
            recent.insert(&id);
        }
        recent
    }

    /// Records `id`; `false` when it was there already.
    pub(super) fn insert(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        let id: Arc<str> = Arc::from(id);
        if self.order.len() == RECENT_IDS
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        self.order.push_back(Arc::clone(&id));
        self.set.insert(id);
        self.mark.inserted += 1;
        true
    }

    pub(super) fn remove(&mut self, id: &str) {
        if self.set.remove(id) {
            // Ids are unique: one position.
            if let Some(at) = self.order.iter().position(|i| &**i == id) {
                self.order.remove(at);
            }
            self.mark.removed += 1;
        }
    }

    /// Where the list stands now.
    pub(super) fn mark(&self) -> RecentMark {
        self.mark
    }

    /// The list for a checkpoint, and for a delta over the checkpoint
    /// written at `durable` when there is one: ids were only appended
    /// since (no removal), so the stored list's last ones are kept.
    pub(super) fn snapshot(&self, durable: Option<RecentMark>) -> RecentSnapshot {
        let kept = durable.filter(|d| d.removed == self.mark.removed).map(|d| {
            let appended = self.mark.inserted.saturating_sub(d.inserted);
            // Evictions come from the front: what is not appended was
            // the stored list's end.
            let len = self.order.len() as u64;
            len.saturating_sub(appended) as u32
        });
        RecentSnapshot {
            ids: self.order.clone(),
            kept,
        }
    }

    /// Oldest first.
    #[cfg(test)]
    pub(super) fn to_vec(&self) -> Vec<String> {
        self.order.iter().map(|i| i.to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_ids_keep_the_last_ones_in_order() {
        let mut recent = RecentIds::from_ids((0..RECENT_IDS).map(|i| format!("id-{i}")));
        assert!(!recent.insert("id-0"), "known");
        // One more evicts the oldest.
        assert!(recent.insert("new"));
        let ids = recent.to_vec();
        assert_eq!(ids.len(), RECENT_IDS);
        assert_eq!(ids.first().map(String::as_str), Some("id-1"));
        assert_eq!(ids.last().map(String::as_str), Some("new"));
        assert!(recent.insert("id-0"), "forgotten");
        assert!(!recent.insert("id-2"));
        recent.remove("id-2");
        assert!(recent.insert("id-2"));
        assert_eq!(recent.to_vec().len(), RECENT_IDS);
    }

    #[test]
    fn a_snapshot_keeps_the_stored_ids_that_were_not_evicted() {
        let mut recent = RecentIds::from_ids((0..3).map(|i| format!("id-{i}")));
        let stored = recent.mark();
        let full = recent.snapshot(None);
        assert_eq!(full.kept(), None);
        assert_eq!(full.written(), ["id-0", "id-1", "id-2"]);
        recent.insert("id-3");
        let delta = recent.snapshot(Some(stored));
        assert_eq!(delta.kept(), Some(3));
        assert_eq!(delta.written(), ["id-3"]);
        assert_eq!(delta.all(), ["id-0", "id-1", "id-2", "id-3"]);
        // A full list and evictions: the kept ids are the stored list's
        // end, the rest is new.
        let mut recent = RecentIds::from_ids((0..RECENT_IDS).map(|i| format!("id-{i}")));
        let stored = recent.mark();
        recent.insert("a");
        recent.insert("b");
        let delta = recent.snapshot(Some(stored));
        assert_eq!(delta.kept(), Some(RECENT_IDS as u32 - 2));
        assert_eq!(delta.written(), ["a", "b"]);
        // More new ids than the list holds: nothing is kept.
        for i in 0..RECENT_IDS + 5 {
            recent.insert(&format!("new-{i}"));
        }
        let delta = recent.snapshot(Some(stored));
        assert_eq!(delta.kept(), Some(0));
        assert_eq!(delta.written().len(), RECENT_IDS);
        // A removal since the stored list: the whole list is written.
        let stored = recent.mark();
        recent.remove("new-10");
        assert_eq!(recent.snapshot(Some(stored)).kept(), None);
    }
}
