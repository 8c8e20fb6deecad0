//! Parents and children: SpawnAgent, AdoptChild, StopChild, child exits and
//! parent death, all through ractor monitors.
//!
//! No handler here awaits another actor: spawning and adoption are a
//! request and a confirmation message, with the child's tag reserved in
//! between. Supervision events are re-posted to the agent's own mailbox
//! ([`Internal::Down`]) before they are acted on, so the exit of an actor
//! is processed after every message it sent before it ended.

use std::collections::HashMap;

use ractor::{Actor, ActorCell, ActorId, ActorRef, ActorStatus, MessagingErr};
use serde_json::{Map, Value, json};

use super::actor::{AbortOnDrop, AgentServer, AgentServerState, spawn_error};
use super::msg::{AgentMsg, ChildStarted, HierarchyMsg, Internal};
use super::options::{AgentServerArgs, OnParentDeath, ParentRef, ServerOptions};
use super::{ChildSpawn, ChildStatus, DEFAULT_CALL_TIMEOUT, DirectiveResult, signal_types};
use crate::directive::{ChildAgent, ChildKind, ChildOptions, Restart, StopReason};
use crate::error::Error;
use crate::signal::Signal;

/// A child tracked by its parent.
pub(crate) struct ChildInfo {
    pub(crate) id: String,
    pub(crate) actor: ActorRef<AgentMsg>,
}

/// The hierarchy bookkeeping that is not a tracked child: tags reserved by
/// a SpawnAgent or AdoptChild in progress, child starts waiting for their
/// tag, and given-up notices waiting for the exit they follow.
#[derive(Default)]
pub(crate) struct Pending {
    reserved: HashMap<String, Reservation>,
    /// Starts of children whose tag is still held by another actor (the
    /// previous incarnation, whose exit has not been processed yet).
    waiting: Vec<ChildStarted>,
    /// `jido.agent.child.given_up` signals, by the incarnation whose exit
    /// they must follow.
    given_up: Vec<(ActorId, Signal)>,
}

/// A tag taken by a child that is not tracked yet.
enum Reservation {
    /// A SpawnAgent child being started (`actor` once the start task
    /// reported it).
    Spawn {
        child_id: String,
        actor: Option<ActorId>,
    },
    /// An adopt request waiting for the child's answer.
    Adopt {
        child_id: String,
        request: u64,
        actor: ActorRef<AgentMsg>,
        watch: Watch,
        _timer: AbortOnDrop<Result<(), MessagingErr<AgentMsg>>>,
    },
}

impl Reservation {
    fn child_id(&self) -> &str {
        match self {
            Reservation::Spawn { child_id, .. } | Reservation::Adopt { child_id, .. } => child_id,
        }
    }

    fn is_actor(&self, id: ActorId) -> bool {
        match self {
            Reservation::Spawn { actor, .. } => *actor == Some(id),
            Reservation::Adopt { actor, .. } => actor.get_id() == id,
        }
    }
}

/// A parent's monitor of an agent it asked to adopt: removed when dropped
/// (refusal, timeout, the parent's end) unless the adoption went through.
struct Watch(Option<(ActorCell, ActorCell)>);

impl Watch {
    fn new(watcher: ActorCell, target: ActorCell) -> Self {
        watcher.monitor(target.clone());
        Watch(Some((watcher, target)))
    }

    /// Keeps the monitor (the child is tracked now).
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some((watcher, target)) = self.0.take() {
            watcher.unmonitor(target);
        }
    }
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

fn hierarchy_msg(msg: HierarchyMsg) -> AgentMsg {
    AgentMsg::internal(Internal::Hierarchy(Box::new(msg)))
}

impl AgentServerState {
    fn runtime_signal(&self, ty: &str, data: Value) -> Signal {
        Signal::builder(ty)
            .source(format!("/agent/{}", self.id))
            .data(data.clone())
            .build()
            .unwrap_or_else(|_| Signal::new(ty, data))
    }

    fn pending(&self) -> Option<&Pending> {
        self.extras().map(|e| &e.pending)
    }

    fn pending_mut(&mut self) -> &mut Pending {
        &mut self.extras_mut().pending
    }

    /// Whether `tag` names a tracked child or one being spawned or
    /// adopted, in this agent's own table.
    pub(crate) fn local_tag_taken(&self, tag: &str) -> bool {
        self.extras()
            .is_some_and(|e| e.children.contains_key(tag) || e.pending.reserved.contains_key(tag))
    }

    /// Whether `tag` names a child: in this agent's own table, or one a
    /// registered executor keeps (a remote child).
    fn tag_taken(&self, tag: &str) -> bool {
        self.local_tag_taken(tag) || self.executor_holds_child(tag)
    }

    fn tracks_actor(&self, actor: ActorId) -> bool {
        self.extras()
            .is_some_and(|e| e.children.values().any(|c| c.actor.get_id() == actor))
    }

    /// The ids above this agent: its parent, grandparent, ...
    pub(crate) fn lineage(&self) -> Vec<String> {
        match &self.parent {
            Some(p) => std::iter::once(p.id.clone())
                .chain(p.ancestors.iter().cloned())
                .collect(),
            None => Vec::new(),
        }
    }

    /// The reference a child of this agent holds.
    fn parent_ref_for_child(
        &self,
        myself: &ActorRef<AgentMsg>,
        tag: String,
        meta: Map<String, Value>,
    ) -> ParentRef {
        ParentRef {
            id: self.id.to_string(),
            tag,
            meta,
            actor: myself.clone(),
            ancestors: self.lineage(),
        }
    }

    /// Ties this agent to `parent`: each monitors the other.
    pub(crate) fn bind_parent(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        parent: impl Into<Box<ParentRef>>,
    ) {
        let parent = parent.into();
        let me = myself.get_cell();
        let them = parent.actor.get_cell();
        me.monitor(them.clone());
        them.monitor(me);
        self.parent = Some(parent);
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
                        ancestors: parent.ancestors.clone(),
                    },
                ))));
        }
    }

    /// Tells every child the ids above it (after this agent's own parent
    /// changed).
    fn send_lineage_to_children(&self, myself: &ActorRef<AgentMsg>) {
        let Some(extras) = self.extras() else {
            return;
        };
        if extras.children.is_empty() {
            return;
        }
        let lineage = self.lineage();
        if lineage.iter().any(|id| **id == *self.id) {
            // A cycle formed by concurrent adoptions: do not go round it.
            tracing::warn!(target: "jido::agent_server", agent_id = %self.id, "agent is its own ancestor: lineage not propagated");
            return;
        }
        let chain: Vec<String> = std::iter::once(self.id.to_string())
            .chain(lineage)
            .collect();
        for child in extras.children.values() {
            let _ = child
                .actor
                .send_message(hierarchy_msg(HierarchyMsg::Lineage {
                    parent: myself.get_id(),
                    ancestors: chain.clone(),
                }));
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
        // A restored child whose stored parent is gone.
        self.apply_lost_parent(myself);
    }

    /// A supervision event said a monitored actor ended. It is re-posted
    /// to this agent's own mailbox and acted on when that message is
    /// handled: after every message the ended actor sent before its end
    /// (ractor serves supervision events before messages). When the agent
    /// is stopping or its mailbox refuses messages, it is handled at once.
    pub(crate) fn post_actor_down(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        actor: ActorId,
        reason: String,
    ) {
        if !self.stopping {
            let msg = AgentMsg::internal(Internal::Down {
                actor,
                reason: reason.clone(),
            });
            if myself.send_message(msg).is_ok() {
                return;
            }
        }
        self.on_actor_down(myself, actor, reason);
    }

    /// A monitored actor ended: the parent, a child, or one being spawned
    /// or adopted.
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
        } else if let Some(tag) = self.pending().and_then(|p| {
            p.reserved
                .iter()
                .find(|(_, r)| r.is_actor(actor))
                .map(|(tag, _)| tag.clone())
        }) {
            // Spawned or asked to be adopted, but it ended before it was
            // tracked.
            if let Some(reservation) = self.pending_mut().reserved.remove(&tag) {
                tracing::warn!(target: "jido::agent_server", agent_id = %self.id, tag, child_id = reservation.child_id(), reason, "child ended before it was tracked");
            }
            self.resume_waiting(myself, &tag);
        } else if let Some(pos) = self
            .pending()
            .and_then(|p| p.waiting.iter().position(|s| s.actor.get_id() == actor))
        {
            // Its start waited for the previous incarnation's exit: both
            // are reported, in order.
            let started = self.pending_mut().waiting.remove(pos);
            self.report_started(myself, &started);
            let signal = self.runtime_signal(
                signal_types::CHILD_EXIT,
                json!({"tag": started.tag, "id": started.child_id, "reason": reason}),
            );
            self.enqueue_signal(myself, signal, None);
        }
        self.flush_given_up(myself, actor);
    }

    fn on_child_exit(&mut self, myself: &ActorRef<AgentMsg>, tag: String, reason: String) {
        let Some(child) = self.extras.as_mut().and_then(|e| e.children.remove(&tag)) else {
            return;
        };
        self.record(
            "child_exit",
            || json!({"tag": tag, "id": child.id, "reason": reason}),
        );
        let signal = self.runtime_signal(
            signal_types::CHILD_EXIT,
            json!({"tag": tag, "id": child.id, "reason": reason}),
        );
        self.enqueue_signal(myself, signal, None);
        self.resume_waiting(myself, &tag);
    }

    /// Processes the given-up notice that waited for `actor`'s exit.
    fn flush_given_up(&mut self, myself: &ActorRef<AgentMsg>, actor: ActorId) {
        let Some(pos) = self
            .pending()
            .and_then(|p| p.given_up.iter().position(|(a, _)| *a == actor))
        else {
            return;
        };
        let (_, signal) = self.pending_mut().given_up.remove(pos);
        self.enqueue_signal(myself, signal, None);
    }

    /// The first start waiting for `tag`, now that the tag is free.
    fn resume_waiting(&mut self, myself: &ActorRef<AgentMsg>, tag: &str) {
        if self.local_tag_taken(tag) {
            return;
        }
        let Some(pos) = self
            .pending()
            .and_then(|p| p.waiting.iter().position(|s| s.tag == tag))
        else {
            return;
        };
        let started = self.pending_mut().waiting.remove(pos);
        self.on_child_started(myself, started);
    }

    /// A remote child's parent ended on its node, or that node was lost
    /// (`data` is `{parent_id, tag, node, reason}`): the child's
    /// `on_parent_death` applies as for a local parent (a remote child
    /// holds no local parent link; `orphaned_from` is not set).
    pub(crate) fn on_remote_parent_down(&mut self, myself: &ActorRef<AgentMsg>, data: Value) {
        let reason = data
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("noproc")
            .to_owned();
        self.record("parent_down", || data.clone());
        let policy = self.settings.on_parent_death;
        match policy {
            OnParentDeath::Stop => {
                self.stop_self(myself, format!("shutdown: parent_down: {reason}"));
            }
            OnParentDeath::Continue | OnParentDeath::EmitOrphan => {
                self.record("orphaned", || data.clone());
                if policy == OnParentDeath::EmitOrphan {
                    let signal = self.runtime_signal(signal_types::ORPHANED, data);
                    self.enqueue_signal(myself, signal, None);
                }
            }
        }
    }

    fn on_parent_down(&mut self, myself: &ActorRef<AgentMsg>, reason: String) {
        let Some(parent) = self.parent.take() else {
            return;
        };
        myself.get_cell().unmonitor(parent.actor.get_cell());
        self.record(
            "parent_down",
            || json!({"parent_id": parent.id, "tag": parent.tag, "reason": reason}),
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
                self.extras_mut().orphaned_from = Some(parent.to_json());
                self.sync_reserved();
                self.record("orphaned", || data.clone());
                self.send_lineage_to_children(myself);
                if policy == OnParentDeath::EmitOrphan {
                    let signal = self.runtime_signal(signal_types::ORPHANED, data);
                    self.enqueue_signal(myself, signal, None);
                }
            }
        }
    }

    /// A child announced its start (a SpawnAgent child, or any child after
    /// a restart): it is tracked, and `jido.agent.child.started` processed.
    /// While its tag is held by another actor (the previous incarnation,
    /// whose exit is still on its way) the start waits.
    pub(crate) fn on_child_started(&mut self, myself: &ActorRef<AgentMsg>, started: ChildStarted) {
        if self.stopping {
            return;
        }
        let actor = started.actor.get_id();
        let tracked = self
            .extras()
            .and_then(|e| e.children.get(&started.tag))
            .map(|c| c.actor.get_id());
        match tracked {
            Some(a) if a == actor => return,
            Some(_) => {
                self.pending_mut().waiting.push(started);
                return;
            }
            None => {}
        }
        match self.pending().and_then(|p| p.reserved.get(&started.tag)) {
            Some(Reservation::Spawn { child_id, .. }) if *child_id == started.child_id => {
                self.pending_mut().reserved.remove(&started.tag);
            }
            Some(_) => {
                self.pending_mut().waiting.push(started);
                return;
            }
            None => {}
        }
        // The ids above it, as this agent knows them now (a restarted child
        // starts with those of its spec).
        let lineage = self.lineage();
        if started.ancestors != lineage {
            let _ = started
                .actor
                .send_message(hierarchy_msg(HierarchyMsg::Lineage {
                    parent: myself.get_id(),
                    ancestors: lineage,
                }));
        }
        self.extras_mut().children.insert(
            started.tag.clone(),
            ChildInfo {
                id: started.child_id.clone(),
                actor: started.actor.clone(),
            },
        );
        self.report_started(myself, &started);
    }

    /// Records and processes `jido.agent.child.started`.
    fn report_started(&mut self, myself: &ActorRef<AgentMsg>, started: &ChildStarted) {
        self.record(
            "child_started",
            || json!({"tag": started.tag, "id": started.child_id, "type": started.child_type}),
        );
        let signal = self.runtime_signal(
            signal_types::CHILD_STARTED,
            json!({
                "parent_id": &*self.id,
                "child_id": started.child_id,
                "child_type": started.child_type,
                "tag": started.tag,
                "meta": started.meta,
            }),
        );
        self.enqueue_signal(myself, signal, None);
    }

    /// SpawnAgent: reserves `tag` and starts the child in a task of the
    /// executor's supervisor (never awaited here); the child is tracked
    /// when its start announcement arrives, and the tag released if the
    /// start fails (nothing of the child is left on this agent then).
    ///
    /// The child inherits this agent's instance and custom directive
    /// executors (its own options win per directive type). It runs linked
    /// under the instance supervisor (restarts by `restart`), or, without
    /// an instance, under this agent's own supervisor; with neither, a
    /// child whose `on_parent_death` is `continue` or `emit_orphan` is
    /// refused with a configuration error for the error policy (it would
    /// outlive its parent unreachable), while a `stop` child runs
    /// unsupervised. A tag in use starts nothing: the parent processes
    /// `jido.agent.child.start_failed` with a validation error "tag in
    /// use" (details `reason: "tag_in_use"`, `tag`, `child_id`); options
    /// out of range make the child's start fail (the same signal).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spawn_child(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        input: &Signal,
        agent: ChildAgent,
        tag: String,
        child_options: ChildOptions,
        meta: Map<String, Value>,
        restart: Restart,
    ) -> DirectiveResult {
        if self.tag_taken(&tag) {
            let child_id = child_options
                .get_id()
                .map_or_else(|| format!("{}/{}", self.id, tag), str::to_owned);
            tracing::warn!(target: "jido::agent_server", agent_id = %self.id, tag, child_id, "spawn_agent refused: tag in use");
            let err = super::tag_in_use(&tag, &child_id);
            self.report_start_failed(myself, &tag, &child_id, &err);
            return DirectiveResult::Ok;
        }
        if let Some(spec) = agent.spec() {
            return self.spawn_hosted(
                myself,
                input,
                spec.clone(),
                tag,
                child_options,
                meta,
                restart,
            );
        }
        let Some(agent) = agent.into_agent() else {
            let err = Error::internal("spawn_agent child is not an agent state")
                .with_detail("agent_id", self.id.to_string())
                .with_detail("tag", tag);
            return self.apply_error_policy(myself, input, &err, "spawn_agent");
        };
        let mut options = ServerOptions::from(child_options);
        let supervisor = match &self.jido {
            Some(jido) => Some(jido.supervisor_cell()),
            None => myself.get_cell().try_get_supervisor(),
        };
        let child_id = options
            .id
            .clone()
            .unwrap_or_else(|| format!("{}/{}", self.id, tag));
        let policy = options.on_parent_death.unwrap_or_default();
        if supervisor.is_none() && policy != OnParentDeath::Stop {
            let err = Error::configuration("a child that outlives its parent needs a supervisor")
                .with_detail("agent_id", self.id.to_string())
                .with_detail("tag", tag.clone())
                .with_detail("on_parent_death", policy.as_str());
            self.report_start_failed(myself, &tag, &child_id, &err);
            return self.apply_error_policy(myself, input, &err, "spawn_agent");
        }
        options.id = Some(child_id.clone());
        options.parent = Some(Box::new(self.parent_ref_for_child(
            myself,
            tag.clone(),
            meta,
        )));
        options.restart = Some(restart);
        options.jido = self.jido.clone();
        options.executors = options.executors.merged_over(&self.settings.executors);
        let mut args = AgentServerArgs::new(agent, options);
        args.supervised = self.jido.is_some();
        let back = myself.clone();
        let (task_tag, task_child) = (tag.clone(), child_id.clone());
        let started = self.exec.supervisor().spawn(async move {
            let spawned = match supervisor {
                Some(sup) => Actor::spawn_linked(None, AgentServer, args, sup).await,
                None => Actor::spawn(None, AgentServer, args).await,
            };
            let result = spawned.map(|(actor, _)| actor).map_err(spawn_error);
            let _ = back.send_message(hierarchy_msg(HierarchyMsg::SpawnResult {
                tag: task_tag,
                child_id: task_child,
                result,
            }));
        });
        if let Err(err) = started {
            tracing::error!(target: "jido::agent_server", agent_id = %self.id, tag, child_id, error = %err, "child agent failed to start");
            self.report_start_failed(myself, &tag, &child_id, &err);
            return DirectiveResult::Ok;
        }
        self.pending_mut().reserved.insert(
            tag,
            Reservation::Spawn {
                child_id: child_id.clone(),
                actor: None,
            },
        );
        DirectiveResult::Async(Some(child_id))
    }

    /// SpawnAgent of a child a [`ChildKind`] describes: handed to the
    /// instance's child host (see [`ChildHost`](super::ChildHost)), which
    /// starts it (feature `cluster`: on a node of the cluster) and reports
    /// its start, its failed start and its exit. Without a host the spawn
    /// fails at once: `jido.agent.child.start_failed` and a configuration
    /// error "no child host for a child spec" for the error policy.
    #[allow(clippy::too_many_arguments)]
    fn spawn_hosted(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        input: &Signal,
        spec: ChildKind,
        tag: String,
        options: ChildOptions,
        meta: Map<String, Value>,
        restart: Restart,
    ) -> DirectiveResult {
        let child_id = options
            .get_id()
            .map_or_else(|| format!("{}/{}", self.id, tag), str::to_owned);
        let Some(host) = self.jido.as_ref().and_then(super::Jido::child_host) else {
            let err = Error::configuration("no child host for a child spec")
                .with_detail("agent_id", self.id.to_string())
                .with_detail("tag", tag.clone())
                .with_detail("child_id", child_id.clone());
            self.report_start_failed(myself, &tag, &child_id, &err);
            return self.apply_error_policy(myself, input, &err, "spawn_agent");
        };
        let spawn = ChildSpawn {
            spec,
            tag,
            options: options.id(child_id.clone()),
            id: child_id,
            meta,
            restart,
        };
        self.host_spawn(&*host, spawn)
    }

    /// Processes `jido.agent.child.start_failed` for a child of this
    /// agent's own that did not start.
    fn report_start_failed(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        tag: &str,
        child_id: &str,
        err: &Error,
    ) {
        let signal = self.runtime_signal(
            signal_types::CHILD_START_FAILED,
            json!({
                "parent_id": &*self.id,
                "child_id": child_id,
                "tag": tag,
                "error": err.to_envelope(),
            }),
        );
        self.enqueue_signal(myself, signal, None);
    }

    /// The children for the status: this agent's own (tracked) and those
    /// the instance's child host keeps, by tag.
    pub(crate) fn child_details(&self) -> Vec<ChildStatus> {
        let mut out: Vec<ChildStatus> = self
            .extras()
            .map(|e| {
                e.children
                    .iter()
                    .map(|(tag, c)| ChildStatus::new(tag.clone(), c.id.clone(), None))
                    .collect()
            })
            .unwrap_or_default();
        out.extend(self.hosted_children());
        out.sort_by(|a, b| a.tag.cmp(&b.tag));
        out
    }

    fn on_spawn_result(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        tag: String,
        child_id: String,
        result: crate::error::Result<ActorRef<AgentMsg>>,
    ) {
        let ours = matches!(
            self.pending().and_then(|p| p.reserved.get(&tag)),
            Some(Reservation::Spawn { child_id: c, actor: None }) if *c == child_id
        );
        if !ours {
            // Already tracked (its start arrived first).
            return;
        }
        match result {
            Ok(actor) if actor.get_status() < ActorStatus::Stopped => {
                if let Some(Reservation::Spawn { actor: a, .. }) =
                    self.pending_mut().reserved.get_mut(&tag)
                {
                    *a = Some(actor.get_id());
                }
            }
            Ok(_) => {
                // It started and ended without announcing itself; a start
                // still on its way finds the tag free.
                self.pending_mut().reserved.remove(&tag);
                self.resume_waiting(myself, &tag);
            }
            Err(err) => {
                self.pending_mut().reserved.remove(&tag);
                tracing::error!(target: "jido::agent_server", agent_id = %self.id, tag, child_id, error = %err, "child agent failed to start");
                self.report_start_failed(myself, &tag, &child_id, &err);
                self.resume_waiting(myself, &tag);
            }
        }
    }

    /// StopChild: asks the child to stop with a shutdown reason; the entry
    /// goes when its exit arrives. A tag this agent's table does not hold
    /// is offered to the registered executors (a remote child,
    /// [`DirectiveExec::stop_child`](super::DirectiveExec::stop_child));
    /// one nobody holds is a no-op.
    pub(crate) fn stop_child(&mut self, tag: &str, reason: &StopReason) -> DirectiveResult {
        let Some(child) = self.extras().and_then(|e| e.children.get(tag)) else {
            if let Some(result) = self.offer_stop_child(tag, reason) {
                return result;
            }
            tracing::debug!(target: "jido::agent_server", agent_id = %self.id, tag, "stop_child: unknown tag");
            return DirectiveResult::Ok;
        };
        let signal = self.runtime_signal(
            signal_types::AGENT_STOP,
            json!({"reason": stop_child_reason(reason)}),
        );
        let _ = child.actor.send_message(AgentMsg::from(signal));
        DirectiveResult::Ok
    }

    fn refuse_adoption(&self, child_id: &str, tag: &str, reason: &str) {
        tracing::warn!(target: "jido::agent_server", agent_id = %self.id, child_id, tag, reason, "adopt_child refused");
    }

    /// AdoptChild: reserves `tag` and asks the agent `child_id` to take
    /// this agent as its parent; its answer (a message) settles it. The
    /// tag is released on a refusal, on the child's end, or when no answer
    /// came within 5 s. Refusals are logged (warn) with their reason:
    /// `tag_in_use`, `cannot_adopt_self`, `child_not_found`,
    /// `child_not_alive`, `already_attached`, `adoption_in_progress`, and
    /// from the child `already_attached`, `cannot_adopt_ancestor` (this
    /// agent descends from it), `adoption_cycle`, or `adopt_timeout`.
    pub(crate) fn adopt_child(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        child_id: &str,
        tag: String,
        meta: Map<String, Value>,
    ) -> DirectiveResult {
        if self.tag_taken(&tag) {
            self.refuse_adoption(child_id, &tag, "tag_in_use");
            return DirectiveResult::Ok;
        }
        if child_id == &*self.id {
            self.refuse_adoption(child_id, &tag, "cannot_adopt_self");
            return DirectiveResult::Ok;
        }
        let Ok(child) = self.lookup_agent(child_id) else {
            self.refuse_adoption(child_id, &tag, "child_not_found");
            return DirectiveResult::Ok;
        };
        let actor = child.actor_ref().clone();
        if actor.get_status() >= ActorStatus::Stopping {
            self.refuse_adoption(child_id, &tag, "child_not_alive");
            return DirectiveResult::Ok;
        }
        if self.tracks_actor(actor.get_id()) {
            self.refuse_adoption(child_id, &tag, "already_attached");
            return DirectiveResult::Ok;
        }
        if self
            .pending()
            .is_some_and(|p| p.reserved.values().any(|r| r.is_actor(actor.get_id())))
        {
            self.refuse_adoption(child_id, &tag, "adoption_in_progress");
            return DirectiveResult::Ok;
        }
        self.next_id += 1;
        let request = self.next_id;
        let parent = self.parent_ref_for_child(myself, tag.clone(), meta);
        let watch = Watch::new(myself.get_cell(), actor.get_cell());
        if actor
            .send_message(hierarchy_msg(HierarchyMsg::AdoptRequest(
                Box::new(parent),
                request,
            )))
            .is_err()
        {
            drop(watch);
            self.refuse_adoption(child_id, &tag, "child_not_alive");
            return DirectiveResult::Ok;
        }
        let timer_tag = tag.clone();
        let timer = myself.send_after(DEFAULT_CALL_TIMEOUT, move || {
            hierarchy_msg(HierarchyMsg::AdoptTimeout {
                tag: timer_tag,
                request,
            })
        });
        self.pending_mut().reserved.insert(
            tag,
            Reservation::Adopt {
                child_id: child_id.to_owned(),
                request,
                actor,
                watch,
                _timer: AbortOnDrop(timer),
            },
        );
        DirectiveResult::Async(Some(child_id.to_owned()))
    }

    fn on_adopt_answer(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        tag: String,
        request: u64,
        child_id: String,
        actor: ActorRef<AgentMsg>,
        result: std::result::Result<(), String>,
    ) {
        let ours = matches!(
            self.pending().and_then(|p| p.reserved.get(&tag)),
            Some(Reservation::Adopt { request: r, .. }) if *r == request
        );
        if !ours {
            if result.is_ok() {
                // Too late: the reservation is gone. The child must not
                // stay bound to a parent that does not track it.
                tracing::warn!(target: "jido::agent_server", agent_id = %self.id, child_id, tag, "adopt_child: late acceptance undone");
                let _ = actor.send_message(hierarchy_msg(HierarchyMsg::DropParent {
                    parent: myself.get_id(),
                    tag,
                }));
            }
            return;
        }
        let Some(Reservation::Adopt { watch, .. }) = self.pending_mut().reserved.remove(&tag)
        else {
            return;
        };
        match result {
            Ok(()) => {
                watch.keep();
                // The ids above this agent may have changed since the
                // request left.
                let _ = actor.send_message(hierarchy_msg(HierarchyMsg::Lineage {
                    parent: myself.get_id(),
                    ancestors: self.lineage(),
                }));
                self.extras_mut().children.insert(
                    tag.clone(),
                    ChildInfo {
                        id: child_id.clone(),
                        actor,
                    },
                );
                self.record("child_adopted", || json!({"tag": tag, "id": child_id}));
            }
            Err(reason) => {
                drop(watch);
                self.refuse_adoption(&child_id, &tag, &reason);
                self.resume_waiting(myself, &tag);
            }
        }
    }

    fn on_adopt_timeout(&mut self, myself: &ActorRef<AgentMsg>, tag: String, request: u64) {
        let ours = matches!(
            self.pending().and_then(|p| p.reserved.get(&tag)),
            Some(Reservation::Adopt { request: r, .. }) if *r == request
        );
        if !ours {
            return;
        }
        if let Some(reservation) = self.pending_mut().reserved.remove(&tag) {
            self.refuse_adoption(reservation.child_id(), &tag, "adopt_timeout");
        }
        self.resume_waiting(myself, &tag);
    }

    /// Why this agent refuses `parent` as its parent, if it does.
    fn adoption_refusal(&self, parent: &ParentRef) -> Option<&'static str> {
        if self.stopping {
            return Some("child_not_alive");
        }
        if self.parent.is_some() {
            return Some("already_attached");
        }
        if parent.id == *self.id || parent.ancestors.iter().any(|id| **id == *self.id) {
            return Some("cannot_adopt_ancestor");
        }
        // The would-be parent (or one above it) is a child of this agent,
        // tracked or being adopted: a cycle its lineage does not show yet.
        let extras = self.extras()?;
        let theirs = |id: &str| id == parent.id || parent.ancestors.iter().any(|a| a == id);
        let them = parent.actor.get_id();
        let cycle = extras
            .children
            .values()
            .any(|c| c.actor.get_id() == them || theirs(&c.id))
            || extras
                .pending
                .reserved
                .values()
                .any(|r| r.is_actor(them) || theirs(r.child_id()));
        cycle.then_some("adoption_cycle")
    }

    /// The child side of AdoptChild: accepted only without a parent and
    /// when the would-be parent does not descend from this agent. The
    /// answer goes back to the parent as a message.
    fn on_adopt_request(&mut self, myself: &ActorRef<AgentMsg>, parent: ParentRef, request: u64) {
        let answer_to = parent.actor.clone();
        let tag = parent.tag.clone();
        let result = match self.adoption_refusal(&parent) {
            Some(reason) => Err(reason.to_owned()),
            None => {
                self.record(
                    "parent_adopted",
                    || json!({"parent_id": parent.id, "tag": parent.tag}),
                );
                if let Some(jido) = &self.jido {
                    jido.set_restart_parent(myself.get_id(), Some(parent.clone()));
                }
                self.bind_parent(myself, parent);
                self.sync_reserved();
                self.send_lineage_to_children(myself);
                Ok(())
            }
        };
        let _ = answer_to.send_message(hierarchy_msg(HierarchyMsg::AdoptAnswer {
            tag,
            request,
            child_id: self.id.to_string(),
            actor: myself.clone(),
            result,
        }));
        self.check_parent_alive(myself);
    }

    /// Drops the parent (an adoption its parent no longer expected) if it
    /// is still `parent` under `tag`.
    fn on_drop_parent(&mut self, myself: &ActorRef<AgentMsg>, parent: ActorId, tag: &str) {
        let matches = self
            .parent
            .as_ref()
            .is_some_and(|p| p.actor.get_id() == parent && p.tag == tag);
        if !matches {
            return;
        }
        let Some(old) = self.parent.take() else {
            return;
        };
        let me = myself.get_cell();
        let them = old.actor.get_cell();
        me.unmonitor(them.clone());
        them.unmonitor(me);
        if let Some(jido) = &self.jido {
            jido.set_restart_parent(myself.get_id(), None);
        }
        self.record(
            "parent_dropped",
            || json!({"parent_id": old.id, "tag": old.tag}),
        );
        self.sync_reserved();
        self.send_lineage_to_children(myself);
    }

    fn on_lineage(&mut self, myself: &ActorRef<AgentMsg>, parent: ActorId, ancestors: Vec<String>) {
        let Some(p) = self.parent.as_mut().filter(|p| p.actor.get_id() == parent) else {
            return;
        };
        if p.ancestors == ancestors {
            return;
        }
        p.ancestors = ancestors;
        self.send_lineage_to_children(myself);
    }

    fn on_given_up(&mut self, myself: &ActorRef<AgentMsg>, actor: ActorId, signal: Signal) {
        let exit_pending = self.tracks_actor(actor)
            || self.pending().is_some_and(|p| {
                p.waiting.iter().any(|s| s.actor.get_id() == actor)
                    || p.reserved.values().any(|r| r.is_actor(actor))
            });
        if exit_pending && !self.stopping {
            self.pending_mut().given_up.push((actor, signal));
        } else {
            self.enqueue_signal(myself, signal, None);
        }
    }

    /// Handles one hierarchy message.
    pub(crate) fn on_hierarchy(&mut self, myself: &ActorRef<AgentMsg>, msg: HierarchyMsg) {
        match msg {
            HierarchyMsg::AdoptRequest(parent, request) => {
                self.on_adopt_request(myself, *parent, request)
            }
            HierarchyMsg::AdoptAnswer {
                tag,
                request,
                child_id,
                actor,
                result,
            } => self.on_adopt_answer(myself, tag, request, child_id, actor, result),
            HierarchyMsg::AdoptTimeout { tag, request } => {
                self.on_adopt_timeout(myself, tag, request)
            }
            HierarchyMsg::DropParent { parent, tag } => self.on_drop_parent(myself, parent, &tag),
            HierarchyMsg::SpawnResult {
                tag,
                child_id,
                result,
            } => self.on_spawn_result(myself, tag, child_id, result),
            HierarchyMsg::Lineage { parent, ancestors } => {
                self.on_lineage(myself, parent, ancestors)
            }
            HierarchyMsg::GivenUp { actor, signal } => self.on_given_up(myself, actor, signal),
        }
    }
}
