//! Checkpoints: after a signal's `cmd`, before its reply; on a graceful stop.

use std::sync::Arc;

use ractor::ActorRef;
use serde_json::Value;
use tokio::task::JoinHandle;

use super::delta::{Record, Written, checkpoint_head, delta_of, json_len, with_state};
use super::writes::Writing;
use super::{
    Durability, DurableMsg, JOURNAL_CHECKPOINT_EVERY, Outcome, is_fencing, outbox, wall_now_ms,
};
use crate::directive::Directive;
use crate::persist::Expect;
use crate::server::actor::{AgentServerState, InFlight, Running};
use crate::server::msg::{AgentMsg, Internal};
use crate::signal::Signal;

impl AgentServerState {
    /// A signal's `cmd` settled: writes its checkpoint if the mode asks for
    /// one (the write becomes the work in flight), else answers its caller.
    pub(crate) fn signal_done(&mut self) {
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        if d.fenced {
            return;
        }
        let changed = !self.agent.state().ptr_eq(d.durable_agent.state());
        // The signal decided directives with a data form: they are part of
        // its durable result.
        let outbox = || self.queue.iter().any(|(_, d)| outbox::is_durable(d));
        let write = d.hibernating
            || match d.mode {
                Durability::Volatile => false,
                Durability::Checkpoint => changed || d.stale || outbox(),
                Durability::Journal => {
                    let behind = d.applied.saturating_sub(d.durable_applied);
                    (changed && (!d.held.is_empty() || d.unjournaled))
                        || behind >= JOURNAL_CHECKPOINT_EVERY
                        || (behind > 0 && d.durable_applied < d.replay_until)
                        || d.stale
                        || (d.unjournaled && outbox())
                }
                #[allow(unreachable_patterns)]
                _ => changed,
            };
        if !write {
            for (reply, answer) in d.held.drain(..) {
                let _ = reply.send(answer);
            }
            return;
        }
        self.next_id += 1;
        let generation = self.next_id;
        let Some(fut) = self.checkpoint_task(generation) else {
            return;
        };
        if let Ok(task) = self.exec.supervisor().spawn(fut) {
            self.in_flight = Some(InFlight::new(generation, Running::Persist(Some(task))));
        }
        // Else the instance is gone: the held callers were answered
        // `Cancelled` when the future was dropped.
    }

    /// The write of the current agent's checkpoint, answering the held
    /// callers once it is durable (with the storage error if it failed):
    /// a delta over the last durable checkpoint when the bookkeeping
    /// allows one and it is smaller, else the full checkpoint.
    pub(super) fn checkpoint_task(
        &mut self,
        generation: u64,
    ) -> Option<impl Future<Output = Outcome> + Send + 'static> {
        let agent = self.agent.clone();
        let myself = self.myself.clone();
        let now = wall_now_ms();
        let outbox: Vec<Value> = self
            .queue
            .iter()
            .filter_map(|(input, d)| outbox::encode(&self.id, input, d, now))
            .collect();
        let timers = self.timer_forms();
        let parent = self.parent_form();
        let d = self.durable.as_deref_mut()?;
        // Once the outbox ran, its stored copy is stale.
        d.stale = !outbox.is_empty();
        let next_is_delta = d.deltas.next_is_delta();
        let mark = d.recent.mark();
        let recent = d
            .recent
            .snapshot(next_is_delta.then_some(d.deltas.recent).flatten());
        let record = Record {
            outbox,
            timers,
            recent_ids: recent.written(),
            parent,
        };
        let storage = Arc::clone(&d.storage);
        let key = Arc::clone(&d.key);
        let writing = Writing::start(&d.lock);
        let held = std::mem::take(&mut d.held);
        let applied = d.applied;
        let expect = d.rev.map_or(Expect::Absent, Expect::Rev);
        let epoch = d.epoch;
        let base = next_is_delta.then(|| {
            (
                d.durable_agent.state().clone(),
                d.deltas.bytes,
                d.deltas.full_bytes,
            )
        });
        Some(async move {
            let started = tokio::time::Instant::now();
            let head = checkpoint_head(&agent, applied, record);
            // A delta when the bookkeeping allows one and it keeps the
            // deltas smaller than the full checkpoint; else the full one.
            let delta = match base {
                Some((base, bytes, full)) => {
                    let mut delta = delta_of(&base, &agent, head);
                    delta.recent_ids_kept = recent.kept();
                    let len = json_len(&delta);
                    if bytes.saturating_add(len) <= full {
                        Ok((delta, len))
                    } else {
                        Err(delta.checkpoint)
                    }
                }
                None => Err(head),
            };
            let (result, written) = match delta {
                Ok((delta, len)) => (
                    storage
                        .put_checkpoint_delta(&key, &delta, expect, epoch)
                        .await,
                    Written::Delta(len),
                ),
                Err(mut head) => {
                    if recent.kept().is_some() {
                        head.recent_ids = recent.all();
                    }
                    let cp = with_state(head, &agent);
                    let len = json_len(&cp);
                    (
                        storage.put_checkpoint(&key, &cp, expect, epoch).await,
                        Written::Full(len),
                    )
                }
            };
            drop(writing);
            tracing::debug!(
                name: "jido.persist.checkpoint",
                target: "jido::persist",
                key = %key,
                applied,
                delta = matches!(written, Written::Delta(_)),
                duration_us = started.elapsed().as_micros() as u64,
                ok = result.is_ok(),
                "jido.persist.checkpoint"
            );
            match &result {
                Ok(_) => {
                    for (reply, answer) in held {
                        let _ = reply.send(answer);
                    }
                }
                Err(error) => {
                    for (reply, _) in held {
                        let _ = reply.send(Err(error.clone()));
                    }
                }
            }
            let outcome = Outcome {
                generation,
                result,
                agent,
                applied,
                written,
                recent: mark,
            };
            // The actor takes the outcome from its mailbox; a stopping
            // agent from the task's handle instead.
            let copy = Outcome {
                generation,
                result: outcome.result.clone(),
                agent: outcome.agent.clone(),
                applied,
                written,
                recent: mark,
            };
            let _ = myself.send_message(AgentMsg::internal(Internal::Durable(Box::new(
                DurableMsg::Persisted(Box::new(copy)),
            ))));
            outcome
        })
    }

    pub(super) fn on_persisted(&mut self, myself: &ActorRef<AgentMsg>, outcome: Outcome) {
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        match outcome.result {
            Ok(rev) => {
                d.rev = Some(rev);
                d.durable_applied = outcome.applied;
                d.durable_agent = outcome.agent;
                d.deltas.written(outcome.written, outcome.recent);
                d.unjournaled = false;
                if std::mem::take(&mut d.hibernating) && self.may_hibernate() {
                    self.hibernate(myself);
                }
            }
            Err(error) if is_fencing(&error) => self.fence(myself, &error),
            Err(error) => {
                d.hibernating = false;
                if d.mode == Durability::Checkpoint {
                    // The last durable state stays the truth; the signal's
                    // directives go with its state change.
                    self.agent = d.durable_agent.clone();
                    self.sync_reserved();
                    self.queue.clear();
                }
                // In Journal mode the journal still holds the signal's
                // signals: the state in memory is what replay gives.
                let signal = Arc::new(Signal::new("jido.persist.checkpoint", Value::Null));
                self.queue
                    .push_back((signal, Directive::error(error, "persist")));
            }
        }
    }

    /// Keeps the checkpoint write in flight of an agent that stops, so
    /// the stop can wait for it.
    pub(crate) fn detach_write(&mut self, task: Option<JoinHandle<Option<Outcome>>>) {
        if let Some(d) = self.durable.as_deref_mut() {
            d.detached = task;
        }
    }

    /// On a graceful stop: waits for the write in flight, then writes the
    /// last checkpoint (every mode) and answers the callers still held.
    pub(crate) async fn persist_on_stop(&mut self) {
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        if let Some(task) = d.detached.take()
            && let Ok(Some(outcome)) = task.await
        {
            self.on_persisted_stopping(outcome);
        }
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        if d.fenced {
            return;
        }
        let changed = !self.agent.state().ptr_eq(d.durable_agent.state())
            || d.applied > d.durable_applied
            || d.stale;
        if !changed {
            for (reply, answer) in d.held.drain(..) {
                let _ = reply.send(answer);
            }
            return;
        }
        self.next_id += 1;
        if let Some(fut) = self.checkpoint_task(self.next_id) {
            let outcome = fut.await;
            self.on_persisted_stopping(outcome);
        }
    }

    pub(super) fn on_persisted_stopping(&mut self, outcome: Outcome) {
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        match outcome.result {
            Ok(rev) => {
                d.rev = Some(rev);
                d.durable_applied = outcome.applied;
                d.durable_agent = outcome.agent;
                d.deltas.written(outcome.written, outcome.recent);
            }
            Err(error) => {
                if is_fencing(&error) {
                    d.fenced = true;
                }
                tracing::warn!(
                    target: "jido::persist",
                    key = %d.key,
                    error = %error.message(),
                    "checkpoint on stop failed"
                );
            }
        }
    }
}
