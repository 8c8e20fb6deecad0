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
            return self.signal_done();
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
        self.signal_done();
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

impl crate::server::Jido {
    /// Creates agents directly in their hibernated form: writes each one's
    /// initial checkpoint (its state as given, what its first start would
    /// otherwise restore from nothing) to the instance's storage, without
    /// starting it. Any later lookup by id
    /// ([`get_or_start`](crate::server::Jido::get_or_start)) thaws it as it
    /// would an agent that ran and hibernated.
    ///
    /// This is the bulk path to millions of addressable agents: the writes
    /// of one call (a claim of each agent by this process, then its
    /// checkpoint) go to the storage at once, and the redb adapter groups
    /// them into commits of up to
    /// [`MAX_BATCH`](crate::persist::redb::MAX_BATCH), where spawning each
    /// agent to hibernate it costs an actor start, a claim, a checkpoint and
    /// a stop each, one after the other. Pass batches of a few thousand
    /// agents.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
    /// use std::sync::Arc;
    /// use jido::persist::MemoryStorage;
    /// use jido::prelude::*;
    /// use jido::server::{Jido, JidoConfig, ServerOptions};
    /// use serde_json::{Map, json};
    ///
    /// struct Cart;
    /// impl Agent for Cart {
    ///     const NAME: &'static str = "cart";
    ///     type Schema = ();
    /// }
    /// let jido = Jido::start(JidoConfig::new().storage(Arc::new(MemoryStorage::new()))).await?;
    /// let carts = (0..3).map(|i| {
    ///     let mut state = Map::new();
    ///     state.insert("items".into(), json!(i));
    ///     AgentState::new(Cart, AgentOptions::new().id(format!("cart-{i}")).state(state))
    /// });
    /// assert_eq!(jido.create_hibernated(carts).await?, 3);
    /// assert_eq!(jido.registered_count(), 0); // none of them runs
    ///
    /// let make = || (AgentState::new(Cart, AgentOptions::new()), ServerOptions::new());
    /// let cart = jido.get_or_start("cart-2", make).await?; // thawed
    /// assert_eq!(cart.state().await?.state()["items"], 2);
    /// # jido.shutdown().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// A validation error `"no storage configured"` when the instance has
    /// no [`storage`](crate::server::JidoConfig::storage), or (nothing
    /// written) when an id cannot be a storage key; a conflict error
    /// `"agent is running"` (the `id` in the details, nothing written) when
    /// one of them runs in this instance. A storage error, or a conflict
    /// when a checkpoint of one of them exists already, fails the call
    /// with that error and the `id` and `created` (how many of this call
    /// were written) in its details: the others of the call may have been
    /// written, and calling again with the same agents fails on them.
    pub async fn create_hibernated(
        &self,
        agents: impl IntoIterator<Item = crate::agent::AgentState>,
    ) -> crate::error::Result<usize> {
        use crate::error::Error;
        use crate::persist::{Expect, StorageKey};

        let Some(storage) = self.defaults().storage.clone() else {
            return Err(Error::validation("no storage configured"));
        };
        let mut writes = Vec::new();
        for agent in agents {
            if self.whereis(agent.id()).is_some() {
                return Err(Error::conflict("agent is running").with_detail("id", agent.id()));
            }
            let key = StorageKey::new(self.namespace(), agent.name(), agent.id())?;
            writes.push((
                key,
                super::delta::checkpoint_of(&agent, 0, Default::default()),
            ));
        }
        // Claimed by this process first, as an agent that ran here and
        // hibernated is: its thaw then needs no write before it reads.
        let results = futures::future::join_all(writes.iter().map(|(key, cp)| {
            let storage = &storage;
            async move {
                let epoch = storage.claim(key, &super::restore::PROCESS_OWNER).await?;
                storage.put_checkpoint(key, cp, Expect::Absent, epoch).await
            }
        }))
        .await;
        let created = results.iter().filter(|r| r.is_ok()).count();
        for ((key, _), result) in writes.iter().zip(results) {
            if let Err(error) = result {
                return Err(error
                    .with_detail("id", key.id())
                    .with_detail("created", created));
            }
        }
        Ok(created)
    }
}
