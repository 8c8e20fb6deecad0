//! The gateway: one remotable actor per node, the only thing peers can
//! send to. It carries envelopes (bytes), resolves agent ids in the local
//! registry, starts agents on demand (one start per id, requests queued
//! meanwhile, in order), and keeps the watches across nodes.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use ractor::message::{BoxedDowncastErr, SerializedMessage};
use ractor::pg::GroupChangeMessage;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::time::Instant;

use super::batch::{BATCH_GROUP, Flush, Frames};
use super::envelope::{BINARY_GROUP, Down, Op, Outgoing, Reply, Request};
use super::{ClusterEvent, Inner, NODES_GROUP, telemetry};
use crate::error::{Error, Result};
use crate::server::AgentRef;
use crate::signal::Signal;

/// The gateway's messages. `Cast`, `Casts`, `Call` and `Down` cross nodes
/// as bytes (ractor's serialised message, with the variant name); the
/// others are local and refused by the serialiser. New variants may come
/// in any release (the enum is `#[non_exhaustive]`).
#[non_exhaustive]
pub enum GatewayMsg {
    /// A request envelope nobody waits for (`cast`, `unwatch`).
    Cast(Vec<u8>),
    /// Several cast requests from one node, in the order they were made
    /// (sent only to a gateway that advertises it reads them).
    Casts(Vec<u8>),
    /// A request envelope answered with a reply envelope (`call`,
    /// `watch`).
    Call(Vec<u8>, RpcReplyPort<Vec<u8>>),
    /// A watched agent ended (from its owner's gateway).
    Down(Vec<u8>),
    /// A heartbeat from a peer's gateway: its node name (UTF-8).
    Beat(Vec<u8>),
    /// Local: send the casts queued for a peer.
    #[doc(hidden)]
    Flush(Flush),
    /// Local: time to send beats and look for silent peers.
    #[doc(hidden)]
    Tick,
    /// Local: an activation finished.
    #[doc(hidden)]
    Activated(String, Result<AgentRef>),
    /// Local: an agent of this node ended.
    #[doc(hidden)]
    Exited(String, String),
    /// Local: a watcher on this node asks to be told when `agent` (owned
    /// by `owner`) ends.
    #[doc(hidden)]
    Watch(Box<WatchRequest>),
    /// Local: the owner refused a watch; forget it.
    #[doc(hidden)]
    DropWatch(String, String, String),
    /// Local: a watcher on this node no longer wants to be told.
    #[doc(hidden)]
    Unwatch(Box<UnwatchRequest>),
}

/// A local watch request (see [`GatewayMsg::Watch`]).
#[doc(hidden)]
pub struct WatchRequest {
    pub(crate) agent: String,
    pub(crate) owner: String,
    pub(crate) watcher: AgentRef,
    /// A remote child's tag: the watcher is its parent and gets
    /// `jido.agent.child.exit` instead of `jido.agent.down`.
    pub(crate) tag: Option<String>,
    /// Start the agent first if it does not run (from this kind, if
    /// given): a remote child's spawn.
    pub(crate) start: Option<Option<String>>,
    /// The child's options (JSON form), applied over its kind factory's
    /// when the start starts it.
    pub(crate) options: Option<serde_json::Map<String, serde_json::Value>>,
    /// How long the owner may take to answer.
    pub(crate) timeout: Duration,
    pub(crate) reply: RpcReplyPort<Result<()>>,
}

/// A local unwatch request (see [`GatewayMsg::Unwatch`]).
#[doc(hidden)]
pub struct UnwatchRequest {
    pub(crate) agent: String,
    pub(crate) owner: String,
    /// The watcher's agent id (watches are kept by id).
    pub(crate) watcher: String,
    /// Answered with whether a watch was removed, once it is.
    pub(crate) reply: RpcReplyPort<bool>,
}

/// A watcher on this node.
struct Watcher {
    agent: AgentRef,
    tag: Option<String>,
}

const CAST: &str = "Cast";
const CASTS: &str = "Casts";
const CALL: &str = "Call";
const DOWN: &str = "Down";
const BEAT: &str = "Beat";

impl ractor::Message for GatewayMsg {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> std::result::Result<SerializedMessage, BoxedDowncastErr> {
        match self {
            GatewayMsg::Cast(args) => Ok(SerializedMessage::Cast {
                variant: CAST.to_owned(),
                args,
                metadata: None,
            }),
            GatewayMsg::Casts(args) => Ok(SerializedMessage::Cast {
                variant: CASTS.to_owned(),
                args,
                metadata: None,
            }),
            GatewayMsg::Down(args) => Ok(SerializedMessage::Cast {
                variant: DOWN.to_owned(),
                args,
                metadata: None,
            }),
            GatewayMsg::Beat(args) => Ok(SerializedMessage::Cast {
                variant: BEAT.to_owned(),
                args,
                metadata: None,
            }),
            GatewayMsg::Call(args, reply) => Ok(SerializedMessage::Call {
                variant: CALL.to_owned(),
                args,
                reply,
                metadata: None,
            }),
            _ => Err(BoxedDowncastErr),
        }
    }

    fn deserialize(msg: SerializedMessage) -> std::result::Result<Self, BoxedDowncastErr> {
        match msg {
            SerializedMessage::Cast { variant, args, .. } if variant == CAST => {
                Ok(GatewayMsg::Cast(args))
            }
            SerializedMessage::Cast { variant, args, .. } if variant == CASTS => {
                Ok(GatewayMsg::Casts(args))
            }
            SerializedMessage::Cast { variant, args, .. } if variant == DOWN => {
                Ok(GatewayMsg::Down(args))
            }
            SerializedMessage::Cast { variant, args, .. } if variant == BEAT => {
                Ok(GatewayMsg::Beat(args))
            }
            SerializedMessage::Call {
                variant,
                args,
                reply,
                ..
            } if variant == CALL => Ok(GatewayMsg::Call(args, reply)),
            SerializedMessage::Call { reply, .. } => {
                // An unknown rpc still gets an answer, not a hang.
                let _ = reply.send(Reply::encode(&Err(Error::validation(
                    "unknown cluster message",
                ))));
                Err(BoxedDowncastErr)
            }
            _ => Err(BoxedDowncastErr),
        }
    }
}

pub(crate) struct Gateway;

/// When a call's budget (carried from the caller) runs out here.
#[derive(Clone, Copy)]
enum Due {
    /// Handed to the agent in the turn it arrived: all of it is left (no
    /// clock read on the way).
    Now(Duration),
    /// Queued behind the agent's start: at this instant (`None`: a budget
    /// past what the clock can represent, no limit).
    At(Option<Instant>),
}

impl Due {
    /// The budget of a call that waits from now on.
    fn queued(self) -> Due {
        match self {
            Due::Now(budget) => Due::At(Instant::now().checked_add(budget)),
            at => at,
        }
    }

    /// What is left of it.
    fn left(self) -> Duration {
        match self {
            Due::Now(budget) => budget,
            Due::At(Some(at)) => at.saturating_duration_since(Instant::now()),
            Due::At(None) => Duration::MAX,
        }
    }
}

/// A request waiting for its agent to start.
enum Pending {
    Cast(Arc<Signal>),
    Call(Arc<Signal>, Due, RpcReplyPort<Vec<u8>>),
    /// Only the start (a remote child's spawn): answered `{"node"}`, with
    /// the watch of the parent's node registered in the same turn.
    Start(RpcReplyPort<Vec<u8>>, Option<RemoteParent>),
}

/// The parent of a remote child of this node.
#[derive(Clone, PartialEq, Eq)]
struct RemoteParent {
    node: String,
    /// Its id (absent from an older sender).
    parent: Option<String>,
    tag: Option<String>,
}

pub(crate) struct GatewayState {
    inner: Arc<Inner>,
    /// Requests waiting for an activation in flight, by agent id.
    pending: HashMap<String, VecDeque<Pending>>,
    /// Agents of this node watched, with the nodes watching them.
    watched: HashMap<String, BTreeSet<String>>,
    /// Agents of this node started as remote children, with their
    /// parents (whose nodes are the only ones that may stop them).
    children: HashMap<String, Vec<RemoteParent>>,
    /// Watches held on this node: (owner node, agent) → watchers.
    watching: HashMap<(String, String), Vec<Watcher>>,
    /// The remote members last seen.
    members: BTreeSet<String>,
    /// When each remote member was last heard from (its beats).
    heard: HashMap<String, Instant>,
    /// Peers treated as down for their silence, until they are heard
    /// again (or leave the process group).
    silent: BTreeSet<String>,
    /// The heartbeat's timer.
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Pending {
    /// The request, waiting from now on (a call's budget starts to run
    /// down).
    fn queued(self) -> Pending {
        match self {
            Pending::Call(signal, due, reply) => Pending::Call(signal, due.queued(), reply),
            other => other,
        }
    }
}

impl Actor for Gateway {
    type Msg = GatewayMsg;
    type State = GatewayState;
    type Arguments = Arc<Inner>;

    async fn pre_start(
        &self,
        myself: ActorRef<GatewayMsg>,
        inner: Arc<Inner>,
    ) -> std::result::Result<GatewayState, ActorProcessingErr> {
        ractor::pg::monitor_scope(inner.scope.clone(), myself.get_cell());
        // Before the nodes group: a peer that sees this gateway as a
        // member sees (at the latest in the same change) that it reads
        // requests in the binary form and batches of casts.
        ractor::pg::join_scoped(
            inner.scope.clone(),
            BINARY_GROUP.to_owned(),
            vec![myself.get_cell()],
        );
        ractor::pg::join_scoped(
            inner.scope.clone(),
            BATCH_GROUP.to_owned(),
            vec![myself.get_cell()],
        );
        ractor::pg::join_scoped(
            inner.scope.clone(),
            NODES_GROUP.to_owned(),
            vec![myself.get_cell()],
        );
        let mut state = GatewayState {
            inner,
            pending: HashMap::new(),
            watched: HashMap::new(),
            children: HashMap::new(),
            watching: HashMap::new(),
            members: BTreeSet::new(),
            heard: HashMap::new(),
            silent: BTreeSet::new(),
            ticker: None,
        };
        let interval = state.inner.heartbeat.0;
        if !interval.is_zero() {
            state.ticker = Some(myself.send_interval(interval, || GatewayMsg::Tick));
        }
        state.refresh_members();
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<GatewayMsg>,
        msg: GatewayMsg,
        state: &mut GatewayState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        match msg {
            GatewayMsg::Cast(bytes) => match Request::decode(&bytes) {
                Ok(req) => state.on_request(&myself, req, None),
                Err(e) => tracing::warn!(error = %e, "jido.cluster: dropped a malformed cast"),
            },
            GatewayMsg::Casts(bytes) => state.on_casts(&myself, &bytes),
            GatewayMsg::Flush(Flush(outbox)) => {
                let _ = outbox.flush();
            }
            GatewayMsg::Call(bytes, reply) => match Request::decode(&bytes) {
                Ok(req) => state.on_request(&myself, req, Some(reply)),
                Err(e) => {
                    let _ = reply.send(Reply::encode(&Err(e)));
                }
            },
            GatewayMsg::Down(bytes) => match Down::decode(&bytes) {
                Ok(down) => state.notify(&down.node, &down.agent, &down.reason),
                Err(e) => tracing::warn!(error = %e, "jido.cluster: dropped a malformed down"),
            },
            GatewayMsg::Beat(bytes) => state.beat(&String::from_utf8_lossy(&bytes)),
            GatewayMsg::Tick => state.tick(),
            GatewayMsg::Activated(id, result) => state.activated(&id, result),
            GatewayMsg::Exited(id, reason) => state.exited(&id, &reason),
            GatewayMsg::Watch(req) => state.watch_local(&myself, *req),
            GatewayMsg::DropWatch(owner, agent, watcher) => {
                state.drop_watch(&owner, &agent, watcher);
            }
            GatewayMsg::Unwatch(req) => {
                let UnwatchRequest {
                    agent,
                    owner,
                    watcher,
                    reply,
                } = *req;
                let (removed, last) = state.drop_watch(&owner, &agent, watcher);
                if last {
                    state.unwatch_owner(&owner, &agent);
                }
                let _ = reply.send(removed);
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<GatewayMsg>,
        event: SupervisionEvent,
        state: &mut GatewayState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ProcessGroupChanged(change) = event {
            let group = match &change {
                GroupChangeMessage::Join(_, g, _) | GroupChangeMessage::Leave(_, g, _) => g,
            };
            // The binary and batch groups too: placements made before a
            // peer's forms were known are made again (the epoch moves).
            if group == NODES_GROUP || group == BINARY_GROUP || group == BATCH_GROUP {
                state.refresh_members();
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        myself: ActorRef<GatewayMsg>,
        state: &mut GatewayState,
    ) -> std::result::Result<(), ActorProcessingErr> {
        ractor::pg::demonitor_scope(state.inner.scope.clone(), myself.get_id());
        // Flushes asked of this gateway and still in its mailbox are not
        // served: what they would have sent leaves now.
        state.inner.outboxes.flush_all();
        if let Some(ticker) = state.ticker.take() {
            ticker.abort();
        }
        Ok(())
    }
}

impl GatewayState {
    /// Recomputes the members from the process group; announces joins and
    /// losses, and ends the watches on lost nodes with `noconnection`.
    fn refresh_members(&mut self) {
        let mut now = self.inner.remote_gateways();
        // A silent peer stays down until it is heard again; one that left
        // the group is forgotten (its next session is a fresh join).
        self.silent.retain(|node| now.contains_key(node));
        now.retain(|node, _| !self.silent.contains(node));
        let names: BTreeSet<String> = now.keys().cloned().collect();
        let joined: Vec<String> = names.difference(&self.members).cloned().collect();
        let lost: Vec<String> = self.members.difference(&names).cloned().collect();
        self.heard.retain(|node, _| names.contains(node));
        self.members = names;
        // Members first: a subscriber reading `members()` on an event sees
        // the membership the event announces.
        self.inner.set_members(now);
        let heard_at = Instant::now();
        for node in &joined {
            self.heard.insert(node.clone(), heard_at);
        }
        for node in joined {
            telemetry::node_up(&self.inner.node, &node);
            let _ = self.inner.events.send(ClusterEvent::NodeUp { node });
        }
        for node in lost {
            telemetry::node_down(&self.inner.node, &node);
            let _ = self
                .inner
                .events
                .send(ClusterEvent::NodeDown { node: node.clone() });
            let agents: Vec<String> = self
                .watching
                .keys()
                .filter(|(n, _)| *n == node)
                .map(|(_, a)| a.clone())
                .collect();
            for agent in agents {
                self.notify(&node, &agent, NOCONNECTION);
            }
            for watchers in self.watched.values_mut() {
                watchers.remove(&node);
            }
            // The remote children of the lost node's agents: their
            // parents are gone as far as this node can tell.
            let orphans: Vec<(String, RemoteParent)> = self
                .children
                .iter()
                .flat_map(|(child, parents)| {
                    parents
                        .iter()
                        .filter(|p| p.node == node)
                        .map(|p| (child.clone(), p.clone()))
                })
                .collect();
            for parents in self.children.values_mut() {
                parents.retain(|p| p.node != node);
            }
            self.children.retain(|_, parents| !parents.is_empty());
            for (child, parent) in orphans {
                self.parent_down(&child, &parent, NOCONNECTION);
            }
        }
    }

    /// Tells remote child `child` of this node that its parent ended.
    fn parent_down(&self, child: &str, parent: &RemoteParent, reason: &str) {
        let Some(agent) = self.inner.jido.whereis(child) else {
            return;
        };
        agent.remote_parent_down(serde_json::json!({
            "parent_id": parent.parent,
            "tag": parent.tag,
            "node": parent.node,
            "reason": reason,
        }));
    }

    /// Agent `parent` of this node ended: the owners of its remote
    /// children are told (each child's `on_parent_death` applies there),
    /// and its watches of them end without a notice.
    fn parent_exited(&mut self, parent: &str, reason: &str) {
        let keys: Vec<(String, String)> = self
            .watching
            .iter()
            .filter(|(_, list)| {
                list.iter()
                    .any(|w| w.tag.is_some() && w.agent.id() == parent)
            })
            .map(|(key, _)| key.clone())
            .collect();
        for (owner, child) in keys {
            let mut tags = Vec::new();
            let mut last = false;
            if let Some(list) = self.watching.get_mut(&(owner.clone(), child.clone())) {
                list.retain(|w| match &w.tag {
                    Some(tag) if w.agent.id() == parent => {
                        tags.push(tag.clone());
                        false
                    }
                    _ => true,
                });
                last = list.is_empty();
            }
            if last {
                self.watching.remove(&(owner.clone(), child.clone()));
            }
            for tag in &tags {
                self.inner.children.ended(parent, tag, &child);
                let request = Outgoing::new(Op::ParentDown, &child, None)
                    .sender(&self.inner.node)
                    .parent(parent, Some(tag))
                    .reason(reason)
                    .encode();
                if owner == self.inner.node {
                    if let Ok(req) = Request::decode(&request) {
                        self.on_parent_down(&req);
                    }
                } else if let Some(gateway) = self.inner.gateway_of(&owner) {
                    // After the casts queued for it (order).
                    self.inner.outboxes.flush(&owner);
                    let _ = gateway.send_message(GatewayMsg::Cast(request));
                }
            }
            if last {
                self.unwatch_owner(&owner, &child);
            }
        }
    }

    /// A parent-down request from the parent's node.
    fn on_parent_down(&mut self, req: &Request) {
        let (Some(from), Some(parent)) = (&req.from, &req.parent) else {
            tracing::warn!(agent = %req.agent, "jido.cluster: dropped a parent down without a parent");
            return;
        };
        let Some(parents) = self.children.get_mut(&req.agent) else {
            return;
        };
        let Some(at) = parents.iter().position(|p| {
            p.node == *from && p.parent.as_deref() == Some(parent) && p.tag == req.tag
        }) else {
            return;
        };
        let link = parents.remove(at);
        if parents.is_empty() {
            self.children.remove(&req.agent);
        }
        let reason = req.reason.as_deref().unwrap_or("noproc");
        self.parent_down(&req.agent, &link, reason);
    }

    /// A beat from `node`: it is alive (again).
    fn beat(&mut self, node: &str) {
        if self.silent.remove(node) {
            tracing::info!(target: "jido::cluster", node = %self.inner.node, peer = node, "jido.cluster: silent peer heard again");
            self.refresh_members();
            return;
        }
        if let Some(at) = self.heard.get_mut(node) {
            *at = Instant::now();
        }
    }

    /// The heartbeat: beats to every remote member, and peers silent for
    /// too long are treated as down and their sessions closed (the
    /// connector redials them).
    fn tick(&mut self) {
        let (interval, misses) = self.inner.heartbeat;
        let me = self.inner.node.as_bytes().to_vec();
        for node in &self.members {
            if let Some(gateway) = self.inner.gateway_of(node) {
                let _ = gateway.send_message(GatewayMsg::Beat(me.clone()));
            }
        }
        let limit = interval.saturating_mul(misses);
        let now = Instant::now();
        let silent: Vec<String> = self
            .heard
            .iter()
            .filter(|(_, at)| now.saturating_duration_since(**at) > limit)
            .map(|(node, _)| node.clone())
            .collect();
        if silent.is_empty() {
            return;
        }
        for node in &silent {
            tracing::warn!(target: "jido::cluster", node = %self.inner.node, peer = %node, missed = misses, "jido.cluster: peer silent, treated as down");
            self.silent.insert(node.clone());
        }
        self.refresh_members();
        let server = self.inner.server.clone();
        tokio::spawn(close_sessions(server, silent));
    }

    /// A batch of casts from a peer: each request in turn, as if it came
    /// alone (a malformed one is dropped with a log line); a batch that
    /// cannot be read further ends there.
    fn on_casts(&mut self, myself: &ActorRef<GatewayMsg>, bytes: &[u8]) {
        for frame in Frames::new(bytes) {
            match frame.map(Request::decode) {
                Ok(Ok(req)) => self.on_request(myself, req, None),
                Ok(Err(e)) => tracing::warn!(error = %e, "jido.cluster: dropped a malformed cast"),
                Err(e) => {
                    tracing::warn!(error = %e, bytes = bytes.len(), "jido.cluster: dropped a malformed cast batch");
                }
            }
        }
    }

    fn on_request(
        &mut self,
        myself: &ActorRef<GatewayMsg>,
        mut req: Request,
        reply: Option<RpcReplyPort<Vec<u8>>>,
    ) {
        match (req.op, reply) {
            (Op::Call, Some(reply)) => match req.take_signal() {
                Ok(signal) => {
                    let due = Due::Now(req.budget());
                    self.deliver(myself, &req, Pending::Call(signal, due, reply));
                }
                Err(e) => {
                    let _ = reply.send(Reply::encode(&Err(e)));
                }
            },
            (Op::Cast, reply) => {
                let result = req.take_signal().map(|signal| {
                    self.deliver(myself, &req, Pending::Cast(signal));
                    serde_json::Value::Null
                });
                if let Err(e) = &result {
                    tracing::warn!(error = %e, agent = %req.agent, "jido.cluster: dropped a cast");
                }
                if let Some(reply) = reply {
                    let _ = reply.send(Reply::encode(&result));
                }
            }
            (Op::Watch, reply) => {
                let result = match (&req.from, self.inner.jido.whereis(&req.agent)) {
                    (None, _) => Err(Error::validation("watch without a watcher node")),
                    (Some(_), None) => Err(Error::not_found("agent not running")
                        .with_detail("agent_id", req.agent.clone())
                        .with_detail("node", self.inner.node.clone())),
                    (Some(from), Some(_)) => {
                        self.watched
                            .entry(req.agent.clone())
                            .or_default()
                            .insert(from.clone());
                        Ok(serde_json::Value::from("watching"))
                    }
                };
                if let Some(reply) = reply {
                    let _ = reply.send(Reply::encode(&result));
                }
            }
            (Op::Unwatch, reply) => {
                if let (Some(from), Some(set)) = (&req.from, self.watched.get_mut(&req.agent)) {
                    set.remove(from);
                    if set.is_empty() {
                        self.watched.remove(&req.agent);
                    }
                }
                if let Some(reply) = reply {
                    let _ = reply.send(Reply::encode(&Ok(serde_json::Value::Null)));
                }
            }
            (Op::ParentDown, reply) => {
                self.on_parent_down(&req);
                if let Some(reply) = reply {
                    let _ = reply.send(Reply::encode(&Ok(serde_json::Value::Null)));
                }
            }
            (Op::Start, Some(reply)) => {
                let parent = req.from.clone().map(|node| RemoteParent {
                    node,
                    parent: req.parent.clone(),
                    tag: req.tag.clone(),
                });
                let item = Pending::Start(reply, parent);
                self.deliver(myself, &req, item);
            }
            (Op::Stop, reply) => {
                let reason = req.reason.clone().unwrap_or_else(|| "shutdown".to_owned());
                // Only the node that started the agent as its child may stop
                // it: a peer cannot stop any agent by id (signals from the
                // network may not either: `jido.agent.stop` is refused).
                let parent_here = req.from.as_ref().is_some_and(|from| {
                    self.children
                        .get(&req.agent)
                        .is_some_and(|parents| parents.iter().any(|p| p.node == *from))
                });
                let agent = self.inner.jido.whereis(&req.agent);
                let node = self.inner.node.clone();
                let id = req.agent.clone();
                tokio::spawn(async move {
                    let result = match agent {
                        Some(agent) if parent_here => {
                            agent.stop(reason).await.map(|()| serde_json::Value::Null)
                        }
                        Some(_) => Err(Error::validation("not a remote child of the sender")
                            .with_detail("agent_id", id)
                            .with_detail("node", node)),
                        None => Err(Error::not_found("agent not running")
                            .with_detail("agent_id", id)
                            .with_detail("node", node)),
                    };
                    if let Some(reply) = reply {
                        let _ = reply.send(Reply::encode(&result));
                    }
                });
            }
            (Op::Call | Op::Start, None) => {
                tracing::warn!(agent = %req.agent, "jido.cluster: dropped a call sent as a cast");
            }
        }
    }

    /// Hands a request to the agent, or queues it behind the agent's start
    /// (starting it when nobody did yet).
    fn deliver(&mut self, myself: &ActorRef<GatewayMsg>, req: &Request, item: Pending) {
        // Usually nothing is starting: no hash of the id for that.
        if !self.pending.is_empty()
            && let Some(queue) = self.pending.get_mut(&req.agent)
        {
            queue.push_back(item.queued());
            return;
        }
        if let Some(agent) = self.inner.jido.whereis(&req.agent) {
            self.hand(&req.agent, &agent, item);
            return;
        }
        self.pending
            .insert(req.agent.clone(), VecDeque::from([item.queued()]));
        let inner = Arc::clone(&self.inner);
        let (id, kind, options) = (req.agent.clone(), req.kind.clone(), req.options.clone());
        let gateway = myself.clone();
        tokio::spawn(async move {
            let result = inner.activate(kind.as_deref(), &id, options.as_ref()).await;
            let _ = gateway.send_message(GatewayMsg::Activated(id, result));
        });
    }

    /// Hands a request to the running agent `id`; a start with a watcher
    /// node registers its watch first, while the agent is still in the
    /// registry (so its exit notice is still to come).
    fn hand(&mut self, id: &str, agent: &AgentRef, item: Pending) {
        if let Pending::Start(reply, Some(from)) = item {
            if self.inner.jido.whereis(id).is_none() {
                let _ = reply.send(Reply::encode(&Err(Error::not_found("agent not running")
                    .with_detail("agent_id", id.to_owned())
                    .with_detail("node", self.inner.node.clone()))));
                return;
            }
            self.watched
                .entry(id.to_owned())
                .or_default()
                .insert(from.node.clone());
            let parents = self.children.entry(id.to_owned()).or_default();
            if !parents.contains(&from) {
                parents.push(from);
            }
            send(&self.inner.node, agent, Pending::Start(reply, None));
            return;
        }
        send(&self.inner.node, agent, item);
    }

    fn activated(&mut self, id: &str, result: Result<AgentRef>) {
        let Some(queue) = self.pending.remove(id) else {
            return;
        };
        match result {
            Ok(agent) => queue
                .into_iter()
                .for_each(|item| self.hand(id, &agent, item)),
            Err(e) => {
                tracing::warn!(error = %e, agent = %id, "jido.cluster: activation failed");
                for item in queue {
                    if let Pending::Call(_, _, reply) | Pending::Start(reply, _) = item {
                        let _ = reply.send(Reply::encode(&Err(e.clone())));
                    }
                }
            }
        }
    }

    /// An agent of this node ended: tell its watchers.
    fn exited(&mut self, id: &str, reason: &str) {
        self.children.remove(id);
        self.parent_exited(id, reason);
        let Some(watchers) = self.watched.remove(id) else {
            return;
        };
        let node = self.inner.node.clone();
        let down = Down {
            v: super::envelope::VERSION,
            agent: id.to_owned(),
            node: node.clone(),
            reason: reason.to_owned(),
        };
        for watcher in watchers {
            if watcher == node {
                self.notify(&node, id, reason);
            } else if let Some(gateway) = self.inner.gateway_of(&watcher) {
                let _ = gateway.send_message(GatewayMsg::Down(down.encode()));
            }
        }
    }

    /// Delivers `jido.agent.down` to the watchers on this node of `agent`
    /// on `node`, once.
    fn notify(&mut self, node: &str, agent: &str, reason: &str) {
        let Some(watchers) = self.watching.remove(&(node.to_owned(), agent.to_owned())) else {
            return;
        };
        for watcher in watchers {
            // The watcher as it runs now: a watch is kept by the watcher's
            // id, so an agent restarted by its instance (a new actor) is
            // still told.
            let target = self
                .inner
                .jido
                .whereis(watcher.agent.id())
                .unwrap_or(watcher.agent);
            let mut after = None;
            let signal = match watcher.tag {
                Some(tag) => {
                    after = self.inner.children.exited(
                        &self.inner.jido,
                        target.id(),
                        &tag,
                        agent,
                        node,
                        reason,
                    );
                    Signal::new(
                        crate::server::signal_types::CHILD_EXIT,
                        serde_json::json!({"tag": tag, "id": agent, "node": node, "reason": reason}),
                    )
                }
                None => Signal::new(
                    super::AGENT_DOWN,
                    serde_json::json!({"id": agent, "node": node, "reason": reason}),
                ),
            };
            let _ = target.cast(signal);
            if let Some(after) = after {
                after.run();
            }
        }
    }

    /// Removes `watcher`'s watch of `agent` on `owner`: whether one was
    /// removed, and whether it was the last watch of this node on it.
    fn drop_watch(&mut self, owner: &str, agent: &str, watcher: String) -> (bool, bool) {
        let key = (owner.to_owned(), agent.to_owned());
        let Some(list) = self.watching.get_mut(&key) else {
            return (false, false);
        };
        let Some(at) = list.iter().position(|w| w.agent.id() == watcher) else {
            return (false, false);
        };
        list.remove(at);
        if list.is_empty() {
            self.watching.remove(&key);
            return (true, true);
        }
        (true, false)
    }

    /// This node watches `agent` on `owner` no more: tell the owner.
    fn unwatch_owner(&mut self, owner: &str, agent: &str) {
        if owner == self.inner.node {
            if let Some(set) = self.watched.get_mut(agent) {
                set.remove(owner);
                if set.is_empty() {
                    self.watched.remove(agent);
                }
            }
            return;
        }
        if let Some(gateway) = self.inner.gateway_of(owner) {
            self.inner.outboxes.flush(owner);
            let request = Outgoing::new(Op::Unwatch, agent, None)
                .sender(&self.inner.node)
                .encode();
            let _ = gateway.send_message(GatewayMsg::Cast(request));
        }
    }

    fn watch_local(&mut self, myself: &ActorRef<GatewayMsg>, req: WatchRequest) {
        let WatchRequest {
            agent,
            owner,
            watcher,
            tag,
            start,
            options,
            timeout,
            reply,
        } = req;
        let tag_of_start = tag.clone();
        let entry = Watcher {
            agent: watcher.clone(),
            tag,
        };
        let key = (owner.clone(), agent.clone());
        if owner == self.inner.node && start.is_none() {
            if self.inner.jido.whereis(&agent).is_none() {
                let _ = reply.send(Err(Error::not_found("agent not running")
                    .with_detail("agent_id", agent)
                    .with_detail("node", owner)));
                return;
            }
            self.watched.entry(agent).or_default().insert(owner);
            self.watching.entry(key).or_default().push(entry);
            let _ = reply.send(Ok(()));
            return;
        }
        let gateway = if owner == self.inner.node {
            Some(myself.clone())
        } else {
            self.inner.gateway_of(&owner)
        };
        let Some(gateway) = gateway else {
            let _ = reply.send(Err(noconnection(&owner)));
            return;
        };
        // Registered before the owner is asked, so a Down that overtakes
        // the answer still finds it; a refusal takes it back.
        self.watching.entry(key).or_default().push(entry);
        // A start-and-watch (a remote child's spawn) starts the agent if
        // it must and registers the watch in the same turn on the owner.
        let request = match &start {
            Some(kind) => Outgoing::new(Op::Start, &agent, kind.as_deref())
                .parent(watcher.id(), tag_of_start.as_deref())
                .options(options.as_ref()),
            None => Outgoing::new(Op::Watch, &agent, None),
        }
        .sender(&self.inner.node)
        .encode();
        // After the casts queued for the owner (order).
        self.inner.outboxes.flush(&owner);
        let me = myself.clone();
        tokio::spawn(async move {
            let answer = call_gateway(&gateway, &owner, request, timeout).await;
            if let Err(e) = &answer {
                tracing::debug!(error = %e, "jido.cluster: watch refused");
                let id = watcher.id().to_owned();
                let _ = me.send_message(GatewayMsg::DropWatch(owner, agent, id));
            }
            let _ = reply.send(answer.map(|_| ()));
        });
    }
}

/// Sends a request to the agent (a call's answer is awaited in a task:
/// the signal is in the agent's mailbox before the gateway moves on, so
/// requests keep their order).
fn send(node: &str, agent: &AgentRef, item: Pending) {
    match item {
        Pending::Start(reply, _) => {
            let _ = reply.send(Reply::encode(&Ok(serde_json::json!({"node": node}))));
        }
        Pending::Cast(signal) => {
            if let Err(e) = agent.cast_shared(signal) {
                tracing::warn!(error = %e, "jido.cluster: cast to a stopped agent");
            }
        }
        Pending::Call(signal, due, reply) => {
            if due.left().is_zero() {
                let _ = reply.send(Reply::encode(&Err(Error::timeout(
                    "cluster call deadline passed before delivery",
                )
                .with_detail("agent_id", agent.id().to_owned()))));
                return;
            }
            // The agent writes the reply in its own turn: no task waits
            // for its answer here. The caller's own timeout bounds the
            // wait (the budget was carried in the envelope).
            let answer = Answer {
                port: Some(reply),
                agent: agent.clone(),
            };
            let then = Box::new(move |result: Result<crate::agent::AgentState>| {
                answer.send(&result);
            });
            if let Err(e) = agent.call_then(signal, then) {
                tracing::debug!(error = %e, "jido.cluster: call to a stopped agent");
            }
        }
    }
}

/// Closes the sessions to `nodes` (by their ractor node names): their
/// remote actors leave the process groups and the connector redials.
async fn close_sessions(
    server: ActorRef<ractor_cluster::node::NodeServerMessage>,
    nodes: Vec<String>,
) {
    let Ok(sessions) = ractor::call_t!(
        server,
        ractor_cluster::node::NodeServerMessage::GetSessions,
        1_000
    ) else {
        return;
    };
    for session in sessions.into_values() {
        let Some(name) = &session.peer_name else {
            continue;
        };
        if nodes.contains(&name.name) {
            session
                .actor
                .stop(Some("jido.cluster: heartbeat missed".to_owned()));
        }
    }
}

/// The reply port of a call from another node, answered by the agent in
/// its own turn; dropped unanswered (the agent ended first), it answers
/// `Cancelled` "agent stopped before replying".
struct Answer {
    port: Option<RpcReplyPort<Vec<u8>>>,
    /// The agent answering (for its id in the error).
    agent: AgentRef,
}

impl Answer {
    fn send(mut self, result: &Result<crate::agent::AgentState>) {
        if let Some(port) = self.port.take() {
            let _ = port.send(Reply::encode_checkpoint(result));
        }
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        if let Some(port) = self.port.take() {
            let _ = port.send(Reply::encode(&Err(Error::cancelled(
                "agent stopped before replying",
            )
            .with_detail("agent_id", self.agent.id().to_owned()))));
        }
    }
}

/// A call timeout from which on a call waits without a limit (a hundred
/// years: far below what the clock can add to now).
const NO_LIMIT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The reason a watch ends with when the owner's node is lost.
pub(crate) const NOCONNECTION: &str = "noconnection";

pub(crate) fn noconnection(node: &str) -> Error {
    Error::cancelled("node connection lost").with_detail("node", node.to_owned())
}

/// Calls a gateway (local or remote) with a request envelope and decodes
/// the reply.
///
/// # Errors
///
/// The remote error; `Timeout` "cluster call timed out"; `Cancelled`
/// "node connection lost" when the gateway or its session is gone.
pub(crate) async fn call_gateway(
    gateway: &ActorRef<GatewayMsg>,
    node: &str,
    request: Vec<u8>,
    timeout: Duration,
) -> Result<serde_json::Value> {
    let bytes = call_gateway_bytes(gateway, node, request, timeout).await?;
    Reply::decode(&bytes)
}

/// [`call_gateway`], the reply envelope left undecoded.
///
/// # Errors
///
/// `Timeout` "cluster call timed out"; `Cancelled` "node connection lost"
/// when the gateway or its session is gone.
pub(crate) async fn call_gateway_bytes(
    gateway: &ActorRef<GatewayMsg>,
    node: &str,
    request: Vec<u8>,
    timeout: Duration,
) -> Result<Vec<u8>> {
    use ractor::rpc::CallResult;
    // Beyond what the clock can represent (centuries): wait without a
    // limit. A bound, not a clock read: this runs on every call.
    let limit = (timeout < NO_LIMIT).then_some(timeout);
    match gateway
        .call(|reply| GatewayMsg::Call(request, reply), limit)
        .await
    {
        Ok(CallResult::Success(bytes)) => Ok(bytes),
        Ok(CallResult::Timeout) => Err(Error::timeout("cluster call timed out")
            .with_detail("timeout_ms", timeout.as_millis() as u64)),
        Ok(CallResult::SenderError) | Err(_) => Err(noconnection(node)),
    }
}
