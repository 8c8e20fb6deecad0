//! The handle to an agent wherever it runs.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ractor::ActorRef;
use serde_json::{Map, Value};

use super::batch::{BATCH_GROUP, Outbox};
use super::envelope::{BINARY_GROUP, Op, Outgoing, Reply, checkpoint_value};
use super::gateway::{
    GatewayMsg, UnwatchRequest, WatchRequest, call_gateway, call_gateway_bytes, noconnection,
};
use super::reply::CallReply;
use super::{Inner, Place, owner, telemetry};
use crate::agent::AgentState;
use crate::directive::StopReason;
use crate::error::{Error, Result};
use crate::server::AgentRef;
use crate::signal::Signal;

/// A handle to an agent by id, wherever it runs (see
/// [`Cluster::agent`](super::Cluster::agent)). Each request finds the
/// owner anew from the live members: the local registry when it is this
/// node, else the owner's gateway. Requests from one handle arrive in the
/// order they were made.
#[derive(Clone)]
pub struct ClusterAgent {
    inner: Arc<Inner>,
    gateway: ActorRef<GatewayMsg>,
    id: String,
    kind: Option<String>,
    place: Place,
    /// Once a local request went through the gateway (the agent was being
    /// started), later ones do too, so none overtakes it.
    via_gateway: Arc<AtomicBool>,
    /// The owner placed last and the membership epoch it was placed in
    /// (see [`ClusterAgent::route`]).
    placed: Arc<std::sync::Mutex<Option<Placed>>>,
}

/// A placement kept while the membership it was computed from holds.
struct Placed {
    epoch: u64,
    node: String,
    /// The owner's gateway (`None` when the owner is this node).
    gateway: Option<ActorRef<GatewayMsg>>,
    /// Whether that gateway reads requests in the binary form.
    binary: bool,
    /// The owner's outbox, when its gateway reads batches of casts.
    outbox: Option<Arc<Outbox>>,
}

impl fmt::Debug for ClusterAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterAgent")
            .field("id", &self.id)
            .field("place", &self.place)
            .finish()
    }
}

/// Where a request goes.
enum Route {
    Local(AgentRef),
    /// The gateway, its node, whether it reads requests in the binary
    /// form (see [`Outgoing::encode_binary`]), and its outbox when it
    /// reads batches of casts.
    Gateway(ActorRef<GatewayMsg>, String, bool, Option<Arc<Outbox>>),
}

impl ClusterAgent {
    pub(crate) fn new(
        inner: Arc<Inner>,
        gateway: ActorRef<GatewayMsg>,
        id: String,
        place: Place,
    ) -> Self {
        ClusterAgent {
            inner,
            gateway,
            id,
            kind: None,
            place,
            via_gateway: Arc::new(AtomicBool::new(false)),
            placed: Arc::default(),
        }
    }

    /// The agent's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Starts the agent from this kind's factory (default: the id's
    /// prefix before `:`).
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into());
        self
    }

    /// The node that owns the agent now.
    ///
    /// # Errors
    ///
    /// [`NotFound`](crate::ErrorKind::NotFound) "cluster node not a
    /// member" for a [`Place::Node`] that is not a live member.
    pub fn owner(&self) -> Result<String> {
        // Borrowed, not cloned: every request asks.
        let members = self.inner.members.borrow();
        match &self.place {
            Place::Local => Ok(self.inner.node.clone()),
            Place::Node(node) if members.iter().any(|m| m == node) => Ok(node.clone()),
            Place::Node(node) => Err(Error::not_found("cluster node not a member")
                .with_detail("node", node.clone())
                .with_detail("agent_id", self.id.clone())),
            _ => Ok(owner(&self.id, &members)
                .unwrap_or(&self.inner.node)
                .to_owned()),
        }
    }

    /// Where the next request goes. The owner and its gateway are kept
    /// per handle (and its clones) while the membership is unchanged (its
    /// epoch, bumped after every change of the members and their
    /// gateways): no hash over the members and no gateway lookup per
    /// request. A request placed while the membership changes is placed
    /// again by the next one, as a request placed just before a change
    /// always was.
    fn route(&self) -> Result<Route> {
        let epoch = self.inner.epoch.load(Ordering::Acquire);
        let (node, gateway, binary, outbox) = {
            let mut placed = self
                .placed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match placed.as_ref() {
                Some(p) if p.epoch == epoch => (
                    p.node.clone(),
                    p.gateway.clone(),
                    p.binary,
                    p.outbox.clone(),
                ),
                _ => {
                    let node = self.owner()?;
                    let gateway = if node == self.inner.node {
                        None
                    } else {
                        Some(
                            self.inner
                                .gateway_of(&node)
                                .ok_or_else(|| noconnection(&node))?,
                        )
                    };
                    let binary = gateway
                        .as_ref()
                        .is_some_and(|g| self.in_group(g, BINARY_GROUP));
                    // Batches only to a peer that reads the binary form
                    // too: a JSON peer keeps single requests.
                    let outbox = gateway
                        .as_ref()
                        .filter(|g| binary && self.in_group(g, BATCH_GROUP))
                        .map(|g| self.inner.outboxes.of(&self.inner.node, &node, g));
                    *placed = Some(Placed {
                        epoch,
                        node: node.clone(),
                        gateway: gateway.clone(),
                        binary,
                        outbox: outbox.clone(),
                    });
                    (node, gateway, binary, outbox)
                }
            }
        };
        match gateway {
            Some(gateway) => Ok(Route::Gateway(gateway, node, binary, outbox)),
            None => self.route_here(node),
        }
    }

    /// Whether `gateway` is in the cluster's process group `group`.
    fn in_group(&self, gateway: &ActorRef<GatewayMsg>, group: &str) -> bool {
        let id = gateway.get_id();
        ractor::pg::get_scoped_members(&self.inner.scope, &group.to_owned())
            .iter()
            .any(|cell| cell.get_id() == id)
    }

    /// The route of a request whose owner is this node.
    fn route_here(&self, node: String) -> Result<Route> {
        if !self.via_gateway.load(Ordering::Acquire)
            && let Some(agent) = self.inner.jido.whereis(&self.id)
        {
            return Ok(Route::Local(agent));
        }
        self.via_gateway.store(true, Ordering::Release);
        Ok(Route::Gateway(self.gateway.clone(), node, true, None))
    }

    /// Sends `signal` and waits at most `timeout` (the remaining budget is
    /// carried to the owner) for the agent's answer: its checkpoint
    /// `{version, agent, id, state}` (restore it with
    /// [`AgentState::restore`](crate::AgentState::restore) if you hold the
    /// agent type). [`call_reply`](ClusterAgent::call_reply) answers the
    /// same without building the `Value` (cheaper when you only need to
    /// know the call was processed, forward the JSON, or read a type of
    /// yours).
    ///
    /// # Errors
    ///
    /// What [`AgentRef::call`] returns, rebuilt from the owner's answer;
    /// [`NotFound`](crate::ErrorKind::NotFound) "no such agent kind" when
    /// the owner cannot start it; [`Timeout`](crate::ErrorKind::Timeout);
    /// [`Cancelled`](crate::ErrorKind::Cancelled) "node connection lost"
    /// when the owner's node is not reachable (the signal may or may not
    /// have been processed).
    pub async fn call(&self, signal: Signal, timeout: Duration) -> Result<Value> {
        self.request(
            signal,
            timeout,
            |state| checkpoint_value(&state),
            |bytes| Reply::decode(&bytes),
        )
        .await
    }

    /// [`call`](ClusterAgent::call), the agent's checkpoint kept as it
    /// arrived and read when asked ([`CallReply`]): a reply from another
    /// node has its JSON syntax checked, no `Value` built.
    ///
    /// ```no_run
    /// # async fn f(cluster: jido::cluster::Cluster) -> jido::Result<()> {
    /// use std::time::Duration;
    /// use jido::signal::Signal;
    ///
    /// let order = cluster.agent("order:17");
    /// let reply = order.call_reply(Signal::new("order.pay", serde_json::json!({"amount": 42})),
    ///     Duration::from_secs(5)).await?;
    /// let checkpoint = reply.into_value()?; // only if a `Value` is needed
    /// # let _ = checkpoint;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`call`](ClusterAgent::call).
    pub async fn call_reply(&self, signal: Signal, timeout: Duration) -> Result<CallReply> {
        self.request(signal, timeout, CallReply::local, CallReply::remote)
            .await
    }

    /// A call, its answer read by `local` (from an agent of this node) or
    /// `remote` (a reply envelope).
    async fn request<T>(
        &self,
        signal: Signal,
        timeout: Duration,
        local: impl FnOnce(AgentState) -> T,
        remote: impl FnOnce(Vec<u8>) -> Result<T>,
    ) -> Result<T> {
        match self.route()? {
            Route::Local(agent) => agent.call_timeout(signal, timeout).await.map(local),
            Route::Gateway(gateway, node, binary, outbox) => {
                // The casts queued before it leave first (order).
                if let Some(outbox) = outbox {
                    let _ = outbox.flush();
                }
                let span = telemetry::CallSpan::start(
                    &self.inner.node,
                    &self.id,
                    &node,
                    signal.ty(),
                    telemetry::wire(binary),
                );
                let request = Outgoing::new(Op::Call, &self.id, self.kind.as_deref())
                    .signal(&signal)
                    .deadline(timeout);
                let request = if binary {
                    request.encode_binary()
                } else {
                    request.encode()
                };
                let result = call_gateway_bytes(&gateway, &node, request, timeout)
                    .await
                    .and_then(remote);
                span.finish(&result);
                result
            }
        }
    }

    /// Sends `signal` without waiting (at most once: lost if the owner's
    /// node is lost before it arrives).
    ///
    /// # Errors
    ///
    /// [`Cancelled`](crate::ErrorKind::Cancelled) "node connection lost"
    /// when the owner is not reachable; [`NotFound`](crate::ErrorKind::NotFound)
    /// when a local agent just stopped.
    pub fn cast(&self, signal: Signal) -> Result<()> {
        match self.route()? {
            Route::Local(agent) => agent.cast(signal),
            Route::Gateway(gateway, node, binary, outbox) => {
                telemetry::cast(
                    &self.inner.node,
                    &self.id,
                    &node,
                    &signal,
                    telemetry::wire(binary),
                );
                let request =
                    Outgoing::new(Op::Cast, &self.id, self.kind.as_deref()).signal(&signal);
                if let Some(outbox) = outbox {
                    return outbox
                        .cast(&request, &self.gateway)
                        .map_err(|_| noconnection(&node));
                }
                let request = if binary {
                    request.encode_binary()
                } else {
                    request.encode()
                };
                gateway
                    .send_message(GatewayMsg::Cast(request))
                    .map_err(|_| noconnection(&node))
            }
        }
    }

    /// Sends `watcher` (an agent on this node) an
    /// [`AGENT_DOWN`](super::AGENT_DOWN) signal `{id, node, reason}` once,
    /// when this agent ends (reason: its exit reason) or its node is lost
    /// (reason `noconnection`). The agent must be running.
    ///
    /// # Errors
    ///
    /// [`NotFound`](crate::ErrorKind::NotFound) "agent not running";
    /// [`Cancelled`](crate::ErrorKind::Cancelled) "node connection lost";
    /// a timeout when the owner did not answer in 5 s.
    pub async fn watch(&self, watcher: &AgentRef) -> Result<()> {
        let owner = self.owner()?;
        self.watch_on(owner, watcher, None, None, None, super::WATCH_TIMEOUT)
            .await
    }

    async fn watch_on(
        &self,
        owner: String,
        watcher: &AgentRef,
        tag: Option<String>,
        start: Option<Option<String>>,
        options: Option<Map<String, Value>>,
        timeout: Duration,
    ) -> Result<()> {
        let request = |reply| {
            GatewayMsg::Watch(Box::new(WatchRequest {
                agent: self.id.clone(),
                owner: owner.clone(),
                watcher: watcher.clone(),
                tag: tag.clone(),
                start: start.clone(),
                options: options.clone(),
                timeout,
                reply,
            }))
        };
        // The gateway answers within `timeout` (it asks the owner with it).
        let limit = timeout.saturating_add(super::WATCH_TIMEOUT);
        match self.gateway.call(request, Some(limit)).await {
            Ok(ractor::rpc::CallResult::Success(result)) => result,
            Ok(ractor::rpc::CallResult::Timeout) => Err(Error::timeout("cluster watch timed out")),
            _ => Err(cluster_down()),
        }
    }

    /// Removes `watcher`'s watch of this agent (on its current owner): once
    /// this returns, `watcher` gets no [`AGENT_DOWN`](super::AGENT_DOWN)
    /// for it. `Ok(false)` when there was no such watch (never made,
    /// already told, or made while another node owned the agent). The
    /// owner forgets this node's watch when its last watcher here is
    /// removed.
    ///
    /// # Errors
    ///
    /// [`NotFound`](crate::ErrorKind::NotFound) "cluster node not a
    /// member" for a [`Place::Node`] that is not a member;
    /// [`Cancelled`](crate::ErrorKind::Cancelled) "cluster is shut down".
    pub async fn unwatch(&self, watcher: &AgentRef) -> Result<bool> {
        let owner = self.owner()?;
        unwatch(&self.gateway, &self.id, owner, watcher).await
    }

    /// Starts this agent on its owner (if it does not run) as a **remote
    /// child** of `parent`, an agent on this node, known to it as `tag`:
    /// a watch plus a stop. The parent gets one
    /// [`CHILD_EXIT`](crate::server::signal_types::CHILD_EXIT) signal
    /// `{tag, id, node, reason}` when the child ends (its exit reason) or
    /// its node is lost (`noconnection`), like a local child's exit with
    /// the child's `node` added; [`RemoteChild::stop`] is its StopChild.
    /// When the parent ends (or this node is lost to the owner), the
    /// owner applies the child's `on_parent_death` as for a local parent
    /// (`stop` by default: reason `shutdown: parent_down: REASON`;
    /// `emit_orphan` sends it `jido.agent.orphaned`
    /// `{parent_id, tag, node, reason}`).
    ///
    /// The child is in the parent's child table while it starts and runs:
    /// `AgentStatus::children` / `child_details` list it, the built-in
    /// `StopChild` of `tag` stops it, and a SpawnAgent under `tag` is
    /// refused. It has no restart policy (you hold the handle);
    /// [`RemoteChild::forget`] takes it out of the table.
    ///
    /// # Errors
    ///
    /// A [`Validation`](crate::ErrorKind::Validation) error "tag in use"
    /// (details `reason: "tag_in_use"`, `tag`, `child_id`) when the parent
    /// already has a child so tagged; what the parent's `status` returns
    /// when it does not run; what a [`call`](ClusterAgent::call) returns
    /// for the start (no such kind, timeout, node connection lost); what
    /// [`watch`](ClusterAgent::watch) returns (the child ended at once:
    /// "agent not running").
    pub async fn spawn_as_child(
        &self,
        parent: &AgentRef,
        tag: impl Into<String>,
        timeout: Duration,
    ) -> Result<RemoteChild> {
        let tag = tag.into();
        // In the parent's child table (no restart policy: the caller
        // holds the handle), its tag taken while it starts.
        self.inner.children.reserve(parent.id(), &tag, &self.id)?;
        let local = match parent.status().await {
            Ok(status) => status.children.contains(&tag),
            Err(e) => {
                self.inner
                    .children
                    .settle(parent.id(), &tag, &Err(e.clone()));
                return Err(e);
            }
        };
        if local {
            let err = crate::server::tag_in_use(&tag, &self.id);
            self.inner
                .children
                .settle(parent.id(), &tag, &Err(err.clone()));
            return Err(err);
        }
        let started = self
            .spawn_child_of(parent, tag.clone(), None, timeout)
            .await;
        self.inner.children.settle(parent.id(), &tag, &started);
        started
    }

    /// [`spawn_as_child`](ClusterAgent::spawn_as_child), with `options`
    /// (the JSON form of `ChildOptions`) over the kind factory's when the
    /// owner starts the child.
    pub(crate) async fn spawn_child_of(
        &self,
        parent: &AgentRef,
        tag: String,
        options: Option<Map<String, Value>>,
        timeout: Duration,
    ) -> Result<RemoteChild> {
        let node = self.owner()?;
        self.watch_on(
            node.clone(),
            parent,
            Some(tag.clone()),
            Some(self.kind.clone()),
            options,
            timeout,
        )
        .await?;
        Ok(RemoteChild {
            inner: Arc::clone(&self.inner),
            gateway: self.gateway.clone(),
            id: self.id.clone(),
            node,
            tag,
            parent: parent.clone(),
        })
    }
}

fn cluster_down() -> Error {
    Error::cancelled("cluster is shut down")
}

async fn unwatch(
    gateway: &ActorRef<GatewayMsg>,
    agent: &str,
    owner: String,
    watcher: &AgentRef,
) -> Result<bool> {
    let request = |reply| {
        GatewayMsg::Unwatch(Box::new(UnwatchRequest {
            agent: agent.to_owned(),
            owner: owner.clone(),
            watcher: watcher.id().to_owned(),
            reply,
        }))
    };
    match gateway.call(request, Some(super::WATCH_TIMEOUT)).await {
        Ok(ractor::rpc::CallResult::Success(removed)) => Ok(removed),
        Ok(ractor::rpc::CallResult::Timeout) => Err(Error::timeout("cluster unwatch timed out")),
        _ => Err(cluster_down()),
    }
}

/// A child agent of a local parent that runs on another node (or on this
/// one): see [`ClusterAgent::spawn_as_child`].
#[derive(Clone)]
pub struct RemoteChild {
    inner: Arc<Inner>,
    gateway: ActorRef<GatewayMsg>,
    id: String,
    node: String,
    tag: String,
    parent: AgentRef,
}

impl fmt::Debug for RemoteChild {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteChild")
            .field("id", &self.id)
            .field("node", &self.node)
            .field("tag", &self.tag)
            .finish()
    }
}

impl RemoteChild {
    /// The child's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The node it was started on.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The parent's tag for it.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// StopChild: stops the child on its node with a shutdown reason
    /// (`"shutdown"` for [`StopReason::Normal`] and `Shutdown`, else
    /// `"shutdown: REASON"`, as a local StopChild), and waits until it
    /// ended. The parent then gets its
    /// [`CHILD_EXIT`](crate::server::signal_types::CHILD_EXIT) with that
    /// reason.
    ///
    /// # Errors
    ///
    /// [`NotFound`](crate::ErrorKind::NotFound) "agent not running" when it
    /// already ended; [`Cancelled`](crate::ErrorKind::Cancelled) "node
    /// connection lost" when its node is not reachable;
    /// [`Timeout`](crate::ErrorKind::Timeout) after `timeout`.
    pub async fn stop(&self, reason: impl Into<StopReason>, timeout: Duration) -> Result<()> {
        let reason = crate::server::stop_child_reason(&reason.into());
        let gateway = if self.node == self.inner.node {
            self.gateway.clone()
        } else {
            self.inner
                .gateway_of(&self.node)
                .ok_or_else(|| noconnection(&self.node))?
        };
        let request = Outgoing::new(Op::Stop, &self.id, None)
            .reason(&reason)
            .sender(&self.inner.node)
            .encode();
        // After the casts queued for its node (order).
        self.inner.outboxes.flush(&self.node);
        call_gateway(&gateway, &self.node, request, timeout)
            .await
            .map(|_| ())
    }

    /// Stops watching the child (the parent gets no exit signal for it
    /// any more) without stopping it, and takes it out of the parent's
    /// child table (its tag is free): `Ok(false)` when its exit was
    /// already delivered.
    ///
    /// # Errors
    ///
    /// [`Cancelled`](crate::ErrorKind::Cancelled) "cluster is shut down".
    pub async fn forget(&self) -> Result<bool> {
        // Out of the parent's child table too: its tag is free again.
        self.inner
            .children
            .ended(self.parent.id(), &self.tag, &self.id);
        unwatch(&self.gateway, &self.id, self.node.clone(), &self.parent).await
    }
}
