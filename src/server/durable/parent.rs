//! Parent links by id: the checkpoint keeps `{"id", "tag", "meta"}` of the
//! parent (an actor cannot be stored). A child restored without a parent
//! in its start options (a thaw, a start after the process died) finds the
//! parent again by id in the instance's registry and re-adopts it (the
//! parent re-tracks it from its `jido.agent.child.started`), or applies
//! its `on_parent_death` when the parent is not running (reason `noproc`).

use ractor::ActorRef;
use serde_json::{Map, Value, json};

use crate::server::actor::AgentServerState;
use crate::server::msg::AgentMsg;
use crate::server::options::{OnParentDeath, ParentRef};
use crate::server::signal_types;
use crate::signal::Signal;

impl AgentServerState {
    /// The parent link the checkpoint keeps.
    pub(super) fn parent_form(&self) -> Option<Value> {
        match &self.parent {
            Some(p) => Some(p.to_json()),
            None => self.durable.as_deref().and_then(|d| d.lost_parent.clone()),
        }
    }

    /// On restore: binds the stored parent when the start options gave
    /// none and it runs in the instance; else keeps it for
    /// [`apply_lost_parent`](Self::apply_lost_parent).
    pub(super) fn restore_parent(&mut self, stored: Option<Value>) {
        let Some(stored) = stored else {
            return;
        };
        if self.parent.is_some() {
            // The start options' parent wins (a restart binds the parent
            // found by id already).
            return;
        }
        let Some(id) = stored.get("id").and_then(Value::as_str) else {
            return;
        };
        let live = self
            .jido
            .as_ref()
            .and_then(|j| j.whereis(id))
            .filter(|p| p.actor_ref().get_id() != self.myself.get_id());
        let Some(parent) = live else {
            if let Some(d) = self.durable.as_deref_mut() {
                d.lost_parent = Some(stored);
            }
            return;
        };
        let parent = ParentRef {
            id: id.to_owned(),
            tag: stored
                .get("tag")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            meta: stored
                .get("meta")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_else(Map::new),
            actor: parent.actor_ref().clone(),
            ancestors: Vec::new(),
        };
        tracing::debug!(
            name: "jido.persist.parent.readopted",
            target: "jido::persist",
            agent_id = %self.id,
            parent_id = %parent.id,
            "jido.persist.parent.readopted"
        );
        let myself = self.myself.clone();
        if let Some(jido) = &self.jido {
            // A later restart binds it too.
            jido.set_restart_parent(myself.get_id(), Some(parent.clone()));
        }
        self.bind_parent(&myself, parent);
        self.sync_reserved();
    }

    /// After start: a stored parent that is gone gets the agent's
    /// `on_parent_death`, as a parent found dead at start does.
    pub(crate) fn apply_lost_parent(&mut self, myself: &ActorRef<AgentMsg>) {
        let Some(lost) = self.durable.as_deref().and_then(|d| d.lost_parent.clone()) else {
            return;
        };
        let field = |k: &str| lost.get(k).cloned().unwrap_or(Value::Null);
        self.record(
            "parent_down",
            || json!({"parent_id": field("id"), "tag": field("tag"), "reason": "noproc"}),
        );
        let policy = self.settings.on_parent_death;
        match policy {
            OnParentDeath::Stop => {
                // The link stays stored: the child is not an orphan.
                self.stop_self(myself, "shutdown: parent_down: noproc".to_owned());
            }
            OnParentDeath::Continue | OnParentDeath::EmitOrphan => {
                if let Some(d) = self.durable.as_deref_mut() {
                    d.lost_parent = None;
                }
                let data = json!({
                    "parent_id": field("id"),
                    "tag": field("tag"),
                    "meta": field("meta"),
                    "reason": "noproc",
                });
                self.extras_mut().orphaned_from =
                    Some(json!({"id": field("id"), "tag": field("tag"), "meta": field("meta")}));
                self.sync_reserved();
                self.record("orphaned", || data.clone());
                if policy == OnParentDeath::EmitOrphan {
                    let signal = Signal::builder(signal_types::ORPHANED)
                        .source(format!("/agent/{}", self.id))
                        .data(data.clone())
                        .build()
                        .unwrap_or_else(|_| Signal::new(signal_types::ORPHANED, data));
                    self.enqueue_signal(myself, signal, None);
                }
            }
        }
    }
}
