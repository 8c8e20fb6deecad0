//! Timers of hibernated agents across a restart of the process: the
//! instance's timer table is process memory, so at start the instance
//! lists, per registered kind, the stored agents with timers
//! ([`Storage::list_timers`](crate::persist::Storage::list_timers)) and
//! parks each one again, to be thawed from its kind's factory when due.

use std::sync::Arc;

use crate::agent::AgentState;
use crate::error::{Error, Result};
use crate::server::{Jido, JidoConfig, ServerOptions};

/// Makes the agent of one kind for an id: its state before any restore
/// and its server options (see [`JidoConfig::kind`]).
pub type KindFactory = dyn Fn(&str) -> Result<(AgentState, ServerOptions)> + Send + Sync;

/// How many listed agents one storage call returns at start.
const PAGE: usize = 1024;

impl JidoConfig {
    /// Registers how to make an agent of `kind` (its
    /// [`Agent::NAME`](crate::agent::Agent::NAME), the kind part of its
    /// storage key) from its id, so that the timers of hibernated agents
    /// outlive the process: at [`Jido::start`] the instance lists the
    /// stored agents of each registered kind whose checkpoint holds a
    /// schedule or a cron job
    /// ([`Storage::list_timers`](crate::persist::Storage::list_timers)) and
    /// puts each in its timer table, to be thawed from `factory(id)` at its
    /// next due time, as if it had hibernated in this process. An agent of
    /// a kind not registered is thawed by the next lookup of its id only.
    /// Replaces an earlier factory of the kind.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use jido::persist::MemoryStorage;
    /// use jido::prelude::*;
    /// use jido::server::{Jido, JidoConfig, ServerOptions};
    ///
    /// struct Reminder;
    /// impl Agent for Reminder {
    ///     const NAME: &'static str = "reminder";
    ///     type Schema = ();
    /// }
    /// let config = JidoConfig::new()
    ///     .name("app")
    ///     .storage(Arc::new(MemoryStorage::new()))
    ///     .kind("reminder", |id: &str| {
    ///         let options = ServerOptions::new().idle_timeout(Duration::from_secs(60));
    ///         Ok((AgentState::new(Reminder, AgentOptions::new().id(id)), options))
    ///     });
    /// let jido = Jido::start(config).await?; // re-arms the stored reminders
    /// # jido.shutdown().await;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn kind<F>(mut self, kind: impl Into<String>, factory: F) -> Self
    where
        F: Fn(&str) -> Result<(AgentState, ServerOptions)> + Send + Sync + 'static,
    {
        self.kinds.insert(kind.into(), Arc::new(factory));
        self
    }
}

impl Jido {
    /// Parks the stored agents with timers of every kind in `kinds` (at
    /// start). An agent its factory cannot make is left to its next lookup
    /// (with a warning); a storage failure fails the start.
    pub(crate) async fn rearm_timers(
        &self,
        kinds: &std::collections::HashMap<String, Arc<KindFactory>>,
    ) -> Result<()> {
        let Some(storage) = self.defaults().storage.clone() else {
            return Ok(());
        };
        let mut armed = 0usize;
        for (kind, factory) in kinds {
            let mut after: Option<String> = None;
            loop {
                let page = storage
                    .list_timers(self.namespace(), kind, after.as_deref(), PAGE)
                    .await
                    .map_err(|e| e.with_detail("kind", kind.clone()))?;
                for due in &page {
                    if self.whereis(&due.id).is_some() {
                        continue;
                    }
                    match made(factory.as_ref(), kind, &due.id) {
                        Ok((agent, options)) => {
                            self.park_agent(&due.id, due.due_ms, agent, options);
                            armed += 1;
                        }
                        Err(error) => tracing::warn!(
                            target: "jido::persist",
                            agent_id = %due.id,
                            kind = %kind,
                            error = %error,
                            "kind factory failed: timers not re-armed"
                        ),
                    }
                }
                match page.last() {
                    Some(last) if page.len() == PAGE => after = Some(last.id.clone()),
                    _ => break,
                }
            }
        }
        tracing::debug!(
            name: "jido.persist.timers.rearmed",
            target: "jido::persist",
            count = armed,
            "jido.persist.timers.rearmed"
        );
        Ok(())
    }
}

/// `factory(id)`, checked to make an agent of `kind`.
fn made(factory: &KindFactory, kind: &str, id: &str) -> Result<(AgentState, ServerOptions)> {
    let (agent, options) = factory(id)?;
    if agent.name() != kind {
        return Err(
            Error::configuration("kind factory made an agent of another kind")
                .with_detail("kind", kind.to_owned())
                .with_detail("made", agent.name()),
        );
    }
    Ok((agent, options))
}
