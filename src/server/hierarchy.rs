//! Parents and children: SpawnAgent, AdoptChild, StopChild, child exits and
//! parent death, all through ractor monitors.

use ractor::{Actor, ActorId, ActorRef, ActorStatus};
use serde_json::{Map, Value, json};

use super::actor::{AgentServer, AgentServerState, spawn_error};
use super::msg::{AgentMsg, ChildStarted, Internal};
use super::options::{AgentServerArgs, OnParentDeath, ParentRef, ServerOptions};
use super::{DEFAULT_CALL_TIMEOUT, DirectiveResult, signal_types};
use crate::agent::AgentState;
use crate::directive::{Restart, StopReason};
use crate::error::{Error, Result};
use crate::signal::Signal;

/// A child tracked by its parent.
pub(crate) struct ChildInfo {
    pub(crate) id: String,
    pub(crate) actor: ActorRef<AgentMsg>,
}

/// The reason a StopChild passes to the child: always a shutdown, so the
/// instance never restarts it.
pub(crate) fn stop_child_reason(reason: &StopReason) -> String {
    match reason {
        StopReason::Normal | StopReason::Shutdown => "shutdown".to_owned(),
        StopReason::Custom(r) if r == "shutdown" || r.starts_with("shutdown:") => r.clone(),
        StopReason::Custom(r) => format!("shutdown: {r}"),
    }
}

impl AgentServerState {
    fn runtime_signal(&self, ty: &str, data: Value) -> Signal {
        Signal::builder(ty)
            .source(format!("/agent/{}", self.id))
            .data(data.clone())
            .build()
            .unwrap_or_else(|_| Signal::new(ty, data))
    }

    fn has_child(&self, tag: &str) -> bool {
        self.extras().is_some_and(|e| e.children.contains_key(tag))
    }

    /// Ties this agent to `parent`: each monitors the other.
    pub(crate) fn bind_parent(&mut self, myself: &ActorRef<AgentMsg>, parent: ParentRef) {
        let me = myself.get_cell();
        let them = parent.actor.get_cell();
        me.monitor(them.clone());
        them.monitor(me);
        self.parent = Some(Box::new(parent));
        if let Some(extras) = self.extras.as_mut() {
            extras.orphaned_from = None;
        }
    }

    /// Tells the parent this child runs (after every start, restarts
    /// included), so it (re)tracks it.
    pub(crate) fn announce_to_parent(&self) {
        if let Some(parent) = &self.parent {
            let _ = parent
                .actor
                .send_message(AgentMsg::internal(Internal::ChildStarted(Box::new(
                    ChildStarted {
                        tag: parent.tag.clone(),
                        child_id: self.id.to_string(),
                        child_type: self.agent.name(),
                        actor: self.myself.clone(),
                        meta: parent.meta.clone(),
                    },
                ))));
        }
    }

    /// Applies the parent policy at once when the parent is already gone
    /// (a monitor set on a dead actor never fires).
    pub(crate) fn check_parent_alive(&mut self, myself: &ActorRef<AgentMsg>) {
        let gone = self
            .parent
            .as_ref()
            .is_some_and(|p| p.actor.get_status() >= ActorStatus::Stopping);
        if gone {
            self.on_parent_down(myself, "noproc".to_owned());
        }
    }

    /// A monitored actor ended: the parent or a child.
    pub(crate) fn on_actor_down(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        actor: ActorId,
        reason: String,
    ) {
        if self
            .parent
            .as_ref()
            .is_some_and(|p| p.actor.get_id() == actor)
        {
            self.on_parent_down(myself, reason);
            return;
        }
        let tag = self.extras().and_then(|e| {
            e.children
                .iter()
                .find(|(_, c)| c.actor.get_id() == actor)
                .map(|(tag, _)| tag.clone())
        });
        if let Some(tag) = tag {
            self.on_child_exit(myself, tag, reason);
        }
    }

    fn on_child_exit(&mut self, myself: &ActorRef<AgentMsg>, tag: String, reason: String) {
        let Some(child) = self.extras.as_mut().and_then(|e| e.children.remove(&tag)) else {
            return;
        };
        self.record(
            "child_exit",
            json!({"tag": tag, "id": child.id, "reason": reason}),
        );
        let signal = self.runtime_signal(
            signal_types::CHILD_EXIT,
            json!({"tag": tag, "id": child.id, "reason": reason}),
        );
        self.enqueue_signal(myself, signal, None);
    }

    fn on_parent_down(&mut self, myself: &ActorRef<AgentMsg>, reason: String) {
        let Some(parent) = self.parent.take() else {
            return;
        };
        myself.get_cell().unmonitor(parent.actor.get_cell());
        self.record(
            "parent_down",
            json!({"parent_id": parent.id, "tag": parent.tag, "reason": reason}),
        );
        let policy = self.settings.on_parent_death;
        match policy {
            OnParentDeath::Stop => {
                self.parent = Some(parent);
                self.stop_self(myself, format!("shutdown: parent_down: {reason}"));
            }
            OnParentDeath::Continue | OnParentDeath::EmitOrphan => {
                let data = json!({
                    "parent_id": parent.id,
                    "tag": parent.tag,
                    "meta": parent.meta,
                    "reason": reason,
                });
                self.extras_mut().orphaned_from = Some(*parent);
                self.sync_reserved();
                self.record("orphaned", data.clone());
                if policy == OnParentDeath::EmitOrphan {
                    let signal = self.runtime_signal(signal_types::ORPHANED, data);
                    self.enqueue_signal(myself, signal, None);
                }
            }
        }
    }

    pub(crate) fn on_child_started(&mut self, myself: &ActorRef<AgentMsg>, started: ChildStarted) {
        let ChildStarted {
            tag,
            child_id,
            child_type,
            actor,
            meta,
        } = started;
        if actor.get_status() >= ActorStatus::Stopping {
            // Its exit is on the way (or was already handled).
            return;
        }
        self.extras_mut().children.insert(
            tag.clone(),
            ChildInfo {
                id: child_id.clone(),
                actor,
            },
        );
        self.record(
            "child_started",
            json!({"tag": tag, "id": child_id, "type": child_type}),
        );
        let signal = self.runtime_signal(
            signal_types::CHILD_STARTED,
            json!({
                "parent_id": &*self.id,
                "child_id": child_id,
                "child_type": child_type,
                "tag": tag,
                "meta": meta,
            }),
        );
        self.enqueue_signal(myself, signal, None);
    }

    /// SpawnAgent: starts the child under the instance supervisor (or
    /// unsupervised without an instance) and tracks it under `tag`.
    pub(crate) async fn spawn_child(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        agent: AgentState,
        tag: String,
        opts: Map<String, Value>,
        meta: Map<String, Value>,
        restart: Restart,
    ) -> DirectiveResult {
        if self.has_child(&tag) {
            tracing::warn!(target: "jido::agent_server", agent_id = %self.id, tag, "spawn_agent refused: tag in use");
            return DirectiveResult::Ok;
        }
        let mut options = match ServerOptions::from_json(&opts) {
            Ok(o) => o,
            Err(err) => {
                tracing::error!(target: "jido::agent_server", agent_id = %self.id, tag, error = %err, "spawn_agent refused: invalid options");
                return DirectiveResult::Ok;
            }
        };
        let child_id = options
            .id
            .clone()
            .unwrap_or_else(|| format!("{}/{}", self.id, tag));
        options.id = Some(child_id.clone());
        options.parent = Some(ParentRef {
            id: self.id.to_string(),
            tag: tag.clone(),
            meta,
            actor: myself.clone(),
        });
        options.restart = Some(restart);
        options.jido = self.jido.clone();
        let mut args = AgentServerArgs::new(agent, options);
        let spawned = match &self.jido {
            Some(jido) => {
                args.supervised = true;
                Actor::spawn_linked(None, AgentServer, args, jido.supervisor_cell()).await
            }
            None => Actor::spawn(None, AgentServer, args).await,
        };
        match spawned {
            Ok((actor, _)) => {
                self.extras_mut().children.insert(
                    tag.clone(),
                    ChildInfo {
                        id: child_id.clone(),
                        actor,
                    },
                );
                DirectiveResult::Async(Some(child_id))
            }
            Err(err) => {
                let err = spawn_error(err);
                tracing::error!(target: "jido::agent_server", agent_id = %self.id, tag, child_id, error = %err, "child agent failed to start");
                DirectiveResult::Ok
            }
        }
    }

    /// StopChild: asks the child to stop with a shutdown reason; the entry
    /// goes when its exit arrives. An unknown tag is a no-op.
    pub(crate) fn stop_child(&mut self, tag: &str, reason: &StopReason) -> DirectiveResult {
        let Some(child) = self.extras().and_then(|e| e.children.get(tag)) else {
            tracing::debug!(target: "jido::agent_server", agent_id = %self.id, tag, "stop_child: unknown tag");
            return DirectiveResult::Ok;
        };
        let signal = self.runtime_signal(
            signal_types::AGENT_STOP,
            json!({"reason": stop_child_reason(reason)}),
        );
        let _ = child.actor.send_message(AgentMsg::Signal(signal));
        DirectiveResult::Ok
    }

    /// AdoptChild: asks the agent `child_id` to take this agent as its
    /// parent, then tracks it.
    pub(crate) async fn adopt_child(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        child_id: &str,
        tag: String,
        meta: Map<String, Value>,
    ) -> DirectiveResult {
        let refuse = |reason: &str| {
            tracing::warn!(target: "jido::agent_server", agent_id = %self.id, child_id, tag, reason, "adopt_child refused");
            DirectiveResult::Ok
        };
        if self.has_child(&tag) {
            return refuse("tag_in_use");
        }
        if child_id == &*self.id {
            return refuse("cannot_adopt_self");
        }
        let Ok(child) = self.lookup_agent(child_id) else {
            return refuse("child_not_found");
        };
        if !child.is_alive() {
            return refuse("child_not_alive");
        }
        let parent = ParentRef {
            id: self.id.to_string(),
            tag: tag.clone(),
            meta,
            actor: myself.clone(),
        };
        let answer = child
            .actor_ref()
            .call(
                |r| AgentMsg::internal(Internal::Adopt(Box::new(parent), r)),
                Some(DEFAULT_CALL_TIMEOUT),
            )
            .await;
        match answer {
            Ok(ractor::rpc::CallResult::Success(Ok(()))) => {
                self.extras_mut().children.insert(
                    tag.clone(),
                    ChildInfo {
                        id: child_id.to_owned(),
                        actor: child.actor_ref().clone(),
                    },
                );
                self.record("child_adopted", json!({"tag": tag, "id": child_id}));
                DirectiveResult::Ok
            }
            Ok(ractor::rpc::CallResult::Success(Err(err))) => {
                let reason = err.message().to_owned();
                refuse(&reason)
            }
            _ => refuse("child_not_alive"),
        }
    }

    /// The child side of AdoptChild: accepted only without a live parent.
    pub(crate) fn accept_parent(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        parent: ParentRef,
    ) -> Result<()> {
        if self.parent.is_some() {
            return Err(
                Error::validation("already_attached").with_detail("agent_id", self.id.to_string())
            );
        }
        self.record(
            "parent_adopted",
            json!({"parent_id": parent.id, "tag": parent.tag}),
        );
        self.bind_parent(myself, parent);
        self.sync_reserved();
        self.check_parent_alive(myself);
        Ok(())
    }
}
