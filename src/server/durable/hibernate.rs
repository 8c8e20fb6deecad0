//! Hibernation: an idle agent checkpoints, stops and leaves the registry.

use ractor::ActorRef;

use super::{Durability, DurableMsg};
use crate::server::actor::{AbortOnDrop, AgentServerState};
use crate::server::exit::HIBERNATE;
use crate::server::msg::{AgentMsg, Internal};

impl AgentServerState {
    /// The agent has nothing to do: (re)arms its idle timer.
    pub(crate) fn idle(&mut self) {
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        if d.stale
            && d.mode != Durability::Volatile
            && !d.hibernating
            && !d.fenced
            && self.in_flight.is_none()
        {
            // The stored outbox ran or the timers moved: one checkpoint
            // now, so a restore does not run the outbox again.
            return self.batch_done();
        }
        let Some(timeout) = d.idle_timeout else {
            return;
        };
        if d.hibernating || d.fenced {
            return;
        }
        d.idle_gen += 1;
        let generation = d.idle_gen;
        d.idle_timer = Some(AbortOnDrop(self.myself.send_after(timeout, move || {
            AgentMsg::internal(Internal::Durable(Box::new(DurableMsg::Idle(generation))))
        })));
    }

    /// Whether nothing keeps the agent alive: no work, no waiter, no live
    /// child, schedule or cron job, no append in flight.
    pub(super) fn may_hibernate(&self) -> bool {
        let Some(d) = self.durable.as_deref() else {
            return false;
        };
        // Timers are stored (due times): the instance thaws the agent
        // when the next one is due, if it can start it again.
        let timers_ok = d.thaw.is_some() || !self.has_timers();
        let extras_idle = self.extras().is_none_or(|e| {
            e.waiters.is_empty()
                && e.children.is_empty()
                && e.timers.iter().all(|t| t.0.is_finished())
        });
        !self.stopping
            && !d.fenced
            && self.in_flight.is_none()
            && self.pending.is_empty()
            && self.queue.is_empty()
            && d.incoming.is_empty()
            && d.appending.is_none()
            && d.held.is_empty()
            && extras_idle
            && timers_ok
    }

    /// The idle timer fired: checkpoint (every mode), then hibernate.
    pub(super) fn on_idle(&mut self, myself: &ActorRef<AgentMsg>, generation: u64) {
        let current = self
            .durable
            .as_deref()
            .is_some_and(|d| d.idle_gen == generation && !d.hibernating);
        if !current {
            return;
        }
        if !self.may_hibernate() {
            // Checked again one idle period later (a waiter, a child or a
            // timer may be gone by then without any new work).
            if self.in_flight.is_none() && self.pending.is_empty() && self.queue.is_empty() {
                self.idle();
            }
            return;
        }
        if let Some(d) = self.durable.as_deref_mut() {
            d.idle_timer = None;
            let changed = !self.agent.state().ptr_eq(d.durable_agent.state())
                || d.applied > d.durable_applied
                || d.stale;
            if !changed {
                return self.hibernate(myself);
            }
            d.hibernating = true;
        }
        self.batch_done();
    }

    /// Leaves for good: the checkpoint is durable.
    pub(super) fn hibernate(&mut self, myself: &ActorRef<AgentMsg>) {
        tracing::debug!(
            name: "jido.persist.hibernate",
            target: "jido::persist",
            agent_id = %self.id,
            "jido.persist.hibernate"
        );
        let due = self.next_due_ms();
        let thaw = self.durable.as_deref_mut().and_then(|d| d.thaw.take());
        if let Some(jido) = &self.jido {
            jido.forget_restart(myself.get_id());
            jido.hibernating(myself.get_id());
            if let (Some(due), Some(thaw)) = (due, thaw) {
                // The instance's timer table wakes it when it is due.
                jido.park(&self.id, due, *thaw);
            }
        }
        self.stop_self(myself, HIBERNATE.to_owned());
    }
}
