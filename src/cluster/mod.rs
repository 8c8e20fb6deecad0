//! Distribution (feature `cluster`, experimental): agents addressable by
//! id across nodes, over [`ractor_cluster`] used only as transport, cookie
//! authentication, membership and process groups.
//!
//! # The model
//!
//! * Each node runs one **gateway** actor, a member of the process group
//!   `jido.nodes` in scope `jido.<cluster>`. It is the only actor of jido
//!   that peers can reach. Agents stay local actors: **`AgentMsg` never
//!   crosses nodes**; what crosses is an envelope of bytes `{agent id,
//!   CloudEvents JSON signal, remaining deadline}` that the receiving
//!   gateway decodes into a `Result` (malformed bytes are an error reply,
//!   never a panic) and hands to the local agent.
//! * [`Cluster::agent`] gives a handle by id. The **owner** of an id is
//!   chosen by rendezvous hashing ([`owner`]) over the live members, or
//!   pinned with [`Place`]. On the owner the agent is found in the
//!   registry or started from the factory registered for its kind
//!   ([`Cluster::register_kind`]; the kind is the id's prefix before `:`),
//!   once for any number of concurrent first requests, which wait in
//!   order ([`Jido::get_or_start`], which also thaws a hibernated
//!   agent). With a storage on the `Jido` instance an owner taking the
//!   agent over from another node first claims the agent's storage key (a
//!   new owner epoch), and the agent restores
//!   its last durable state: a stale owner elsewhere is fenced on its
//!   next write and stops with reason `fenced`
//!   ([`ClusterEvent::Fenced`]).
//! * **Watches**: [`ClusterAgent::watch`] sends the watcher a
//!   [`AGENT_DOWN`] signal `{id, node, reason}` when the agent ends, or
//!   with reason `noconnection` when its node is lost;
//!   [`ClusterAgent::unwatch`] removes the watch. **Remote children**
//!   ([`ClusterAgent::spawn_as_child`]) are a watch whose notice is
//!   `jido.agent.child.exit` `{tag, id, node, reason}`, plus
//!   [`RemoteChild::stop`] (their StopChild). When the parent ends, or
//!   its node is lost, the child's owner applies the child's
//!   `on_parent_death` (`stop`: reason `shutdown: parent_down: REASON`).
//!   From an agent's `cmd`, the built-in `Directive::SpawnAgent` of a
//!   child described by its kind (`ChildKind::new(kind)` with a
//!   `Placement`: a named node, this node, or rendezvous hashing) starts
//!   one: `Cluster::start` installs the cluster's
//!   [`ChildHost`](crate::server::ChildHost) on the instance, so nothing
//!   is registered per agent. The parent's child table then knows it: its
//!   tag is taken, the built-in `Directive::StopChild` stops it,
//!   `AgentStatus::children` / `child_details` list it with its node, and
//!   a start that fails (no such kind, a node that is not a member) is
//!   `jido.agent.child.start_failed`. [`RemoteChildDirective`] is a
//!   shorthand for those built-ins.
//! * **Heartbeat**: the gateways beat to each other
//!   ([`ClusterConfig::heartbeat`], 1 s × 5 by default); a peer silent
//!   for that long is treated as lost (members, `noconnection`, failover)
//!   and its session closed, so it is redialled when reachable again.
//! * **Telemetry**: `tracing` events `jido.cluster.*` (target
//!   `jido::cluster`): node up / down, remote call start / stop /
//!   exception with `duration_us`, casts, activations, fencing (see
//!   `docs/cluster.md`).
//! * **Delivery** is at most once: ractor_cluster has no retransmission,
//!   a session lost with messages in flight loses them (a call then fails
//!   with a timeout or "node connection lost"). Casts from one handle
//!   arrive in order. Casts to a peer of this build leave in batches: a
//!   cast is queued in this node's outbox for the peer, and the casts
//!   queued before this node's gateway's next turn (or before the next
//!   other request to that peer, which flushes them first) travel as one
//!   message. Without storage an agent whose node is lost starts
//!   fresh on its new owner.
//!
//! # Message types
//!
//! `ractor/cluster` (which this feature turns on) removes ractor's
//! blanket `impl Message for T`. Every message type of jido implements
//! `ractor::Message` explicitly under this feature, as local-only
//! messages. **If anything in your build enables `ractor/cluster`, enable
//! `jido/cluster`**, and give your own actors' message types an
//! `impl ractor::Message for MyMsg {}` (Cargo gives a crate no way to
//! detect a dependency's feature).
//!
//! # Examples
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> jido::Result<()> {
//! use std::time::Duration;
//! use jido::prelude::*;
//! use jido::cluster::{Cluster, ClusterConfig};
//! use jido::server::{Jido, JidoConfig, ServerOptions};
//! use jido::signal::Signal;
//!
//! struct Order;
//! impl Agent for Order { const NAME: &'static str = "order"; type Schema = (); }
//!
//! let jido = Jido::start(JidoConfig::new()).await?;
//! let cluster = Cluster::start(&jido, ClusterConfig::new("node-a")
//!     .cookie("secret")
//!     .listen("127.0.0.1:4697".parse().unwrap())
//!     .seeds(["127.0.0.1:4698"])).await?;
//! cluster.register_kind("order", |id| {
//!     Ok((AgentState::new(Order, AgentOptions::new().id(id)), ServerOptions::new()))
//! });
//! let order = cluster.agent("order:17");
//! let checkpoint = order.call(Signal::new("order.pay", serde_json::json!({"amount": 42})),
//!     Duration::from_secs(5)).await?;
//! # let _ = checkpoint;
//! # Ok(()) }
//! ```

mod batch;
mod children;
mod config;
mod connector;
mod envelope;
mod gateway;
mod handle;
mod placement;
mod reply;
mod telemetry;

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use ractor::{Actor, ActorRef};
use ractor_cluster::node::NodeServerMessage;
use tokio::sync::{broadcast, watch};

pub use children::{RemoteChildDirective, RemoteChildExec};
pub use config::{ClusterConfig, ClusterTls};
pub use gateway::GatewayMsg;
pub use handle::{ClusterAgent, RemoteChild};
pub use placement::{Place, owner};
pub use reply::CallReply;

use crate::agent::AgentState;
use crate::error::{Error, Result};
use crate::server::{AgentRef, ExitReason, Jido, KindFactory, ServerOptions};

/// The signal a watcher gets when a watched agent ends: data `{id, node,
/// reason}`; `reason` is the agent's exit reason (`normal`, `shutdown`,
/// `fenced`, …) or `noconnection` when its node was lost.
pub const AGENT_DOWN: &str = "jido.agent.down";

/// The process group of the gateways.
pub(crate) const NODES_GROUP: &str = "jido.nodes";

/// How long a watch request waits for the owner's answer.
pub(crate) const WATCH_TIMEOUT: Duration = Duration::from_secs(5);

/// How many cluster events a slow subscriber may fall behind.
const EVENTS_CAPACITY: usize = 256;

/// Something that happened in the cluster, as this node saw it.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterEvent {
    /// A node's gateway became reachable.
    NodeUp {
        /// Its name.
        node: String,
    },
    /// A node's gateway was lost (its session ended).
    NodeDown {
        /// Its name.
        node: String,
    },
    /// An agent of this node stopped because a newer owner holds it.
    Fenced {
        /// The agent's id.
        agent: String,
    },
}

/// A receiver of [`ClusterEvent`]s (see [`Cluster::events`]).
#[derive(Debug)]
pub struct ClusterEvents {
    rx: broadcast::Receiver<ClusterEvent>,
}

impl ClusterEvents {
    /// The next event. Events missed by a receiver that fell more than 256
    /// behind are skipped.
    ///
    /// # Errors
    ///
    /// [`Cancelled`](crate::ErrorKind::Cancelled) "cluster is shut down"
    /// once the cluster stopped and every event was read.
    pub async fn recv(&mut self) -> Result<ClusterEvent> {
        loop {
            match self.rx.recv().await {
                Ok(event) => return Ok(event),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "jido.cluster: events receiver lagged");
                }
                Err(broadcast::error::RecvError::Closed) => {
                    return Err(Error::cancelled("cluster is shut down"));
                }
            }
        }
    }
}

/// What the cluster handle, the gateway and the tasks share.
pub(crate) struct Inner {
    pub(crate) jido: Jido,
    pub(crate) node: String,
    pub(crate) scope: String,
    prefix: String,
    kinds: RwLock<HashMap<String, Arc<KindFactory>>>,
    pub(crate) events: broadcast::Sender<ClusterEvent>,
    pub(crate) members: watch::Sender<Vec<String>>,
    gateways: RwLock<HashMap<String, ActorRef<GatewayMsg>>>,
    /// The casts queued for each peer that reads batches.
    pub(crate) outboxes: batch::Outboxes,
    /// Bumped after every change of `members` and `gateways`: a handle
    /// keeps its placement while this is unchanged.
    pub(crate) epoch: std::sync::atomic::AtomicU64,
    /// The children this node's agents keep on nodes (the child host's).
    pub(crate) children: children::Children,
    /// The node server (the gateway closes a silent peer's session).
    pub(crate) server: ActorRef<NodeServerMessage>,
    /// The heartbeat's interval (zero: off) and misses.
    pub(crate) heartbeat: (Duration, u32),
}

impl Inner {
    /// The remote gateways in the process group, by node name.
    fn remote_gateways(&self) -> HashMap<String, ActorRef<GatewayMsg>> {
        ractor::pg::get_scoped_members(&self.scope, &NODES_GROUP.to_owned())
            .into_iter()
            .filter(|cell| !cell.get_id().is_local())
            .filter_map(|cell| {
                let name = cell.get_name()?;
                let node = name.strip_prefix(&self.prefix)?.to_owned();
                Some((node, ActorRef::<GatewayMsg>::from(cell)))
            })
            .collect()
    }

    fn set_members(&self, remote: HashMap<String, ActorRef<GatewayMsg>>) {
        let mut names: Vec<String> = remote.keys().cloned().collect();
        names.push(self.node.clone());
        names.sort();
        names.dedup();
        self.outboxes.retain(&remote);
        *self
            .gateways
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = remote;
        self.members.send_replace(names);
        self.epoch.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    pub(crate) fn gateway_of(&self, node: &str) -> Option<ActorRef<GatewayMsg>> {
        self.gateways
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(node)
            .cloned()
    }

    pub(crate) fn members(&self) -> Vec<String> {
        self.members.borrow().clone()
    }

    /// Finds or starts agent `id` on this node (see "The model").
    /// `options` (the JSON form of a remote child's `ChildOptions`) go
    /// over the kind factory's when the agent starts here; an agent
    /// already running keeps its own.
    pub(crate) async fn activate(
        &self,
        kind: Option<&str>,
        id: &str,
        options: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<AgentRef> {
        if let Some(agent) = self.jido.whereis(id) {
            return Ok(agent);
        }
        let span = telemetry::ActivationSpan::start(&self.node, id);
        let result = self.start_agent(kind, id, options).await;
        span.finish(&result);
        result
    }

    async fn start_agent(
        &self,
        kind: Option<&str>,
        id: &str,
        child: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<AgentRef> {
        // Checked before the factory runs: a bad option starts nothing.
        let child = child
            .map(crate::directive::ChildOptions::from_json)
            .transpose()?;
        let kind = kind.or_else(|| kind_of(id)).ok_or_else(|| {
            Error::not_found("agent not running and its id names no kind")
                .with_detail("agent_id", id.to_owned())
        })?;
        let factory = self
            .kinds
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(kind)
            .cloned()
            .ok_or_else(|| {
                Error::not_found("no such agent kind")
                    .with_detail("kind", kind.to_owned())
                    .with_detail("agent_id", id.to_owned())
                    .with_detail("node", self.node.clone())
            })?;
        let (agent, mut options) = factory(id)?;
        if let Some(child) = child {
            // The id is the request's (checked below), not the options'.
            options = options.overlaid(child.id(String::new()));
        }
        if agent.id() != id {
            return Err(
                Error::configuration("kind factory made an agent with another id")
                    .with_detail("agent_id", id.to_owned())
                    .with_detail("got", agent.id().to_owned()),
            );
        }
        // Taking the agent over from another node needs no step here: a
        // durable agent claims a new owner epoch when it starts in a process
        // that does not hold it (`server::durable`), which fences the other
        // copy on its next write.
        self.jido.get_or_start(id, move || (agent, options)).await
    }
}

/// The kind an id names: its prefix before `:`.
fn kind_of(id: &str) -> Option<&str> {
    id.split_once(':')
        .map(|(kind, _)| kind)
        .filter(|k| !k.is_empty())
}

/// A node of a cluster: its node server, its gateway and the connector
/// that keeps its seeds dialled. Cheap to clone; dropping it does not stop
/// the node (see [`shutdown`](Cluster::shutdown)). Run one per process:
/// ractor's process groups are global to a process.
///
/// # Examples
///
/// A single node (no seeds) owns every id:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use std::time::Duration;
/// use jido::prelude::*;
/// use jido::cluster::{Cluster, ClusterConfig};
/// use jido::server::{Jido, JidoConfig, ServerOptions};
/// use jido::signal::Signal;
///
/// struct Order;
/// impl Agent for Order { const NAME: &'static str = "order"; type Schema = (); }
///
/// let jido = Jido::start(JidoConfig::new()).await?;
/// let cluster = Cluster::start(&jido, ClusterConfig::new("solo").cookie("secret")).await?;
/// cluster.register_kind("order", |id| {
///     Ok((AgentState::new(Order, AgentOptions::new().id(id)), ServerOptions::new()))
/// });
/// assert_eq!(cluster.members(), ["solo"]);
/// let order = cluster.agent("order:17");
/// assert_eq!(order.owner()?, "solo");
/// // Started on demand by the first request; no route for the signal.
/// let err = order.call(Signal::new("order.pay", serde_json::json!({})), Duration::from_secs(5))
///     .await
///     .unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Routing);
/// assert!(jido.whereis("order:17").is_some());
/// cluster.shutdown().await;
/// jido.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
    server: ActorRef<NodeServerMessage>,
    gateway: ActorRef<GatewayMsg>,
    listen: SocketAddr,
    /// The child host installed on the instance (removed at shutdown).
    host: Arc<dyn crate::server::ChildHost>,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("node", &self.inner.node)
            .field("listen", &self.listen)
            .finish()
    }
}

impl Cluster {
    /// Starts this node for `jido`: the node server listening on the
    /// configured address, the gateway, and the connector dialling the
    /// seeds (in the background: use [`wait_for_members`](Cluster::wait_for_members)
    /// to wait for peers). Installs the cluster's
    /// [`ChildHost`](crate::server::ChildHost) on `jido`
    /// ([`Jido::set_child_host`]): a `SpawnAgent` of a `ChildKind` by any
    /// agent of the instance starts its child on the node its placement
    /// names.
    ///
    /// # Errors
    ///
    /// [`Configuration`](crate::ErrorKind::Configuration) for an empty
    /// node name or cookie, or a name containing `.`;
    /// [`Internal`](crate::ErrorKind::Internal) when the node server or the
    /// gateway did not start (a name already taken in this process).
    pub async fn start(jido: &Jido, config: ClusterConfig) -> Result<Cluster> {
        if config.node.is_empty() || config.node.contains(['.', '@', ':']) {
            return Err(Error::configuration("invalid cluster node name")
                .with_detail("node", config.node.clone()));
        }
        if config.cookie.is_empty() {
            return Err(Error::configuration("cluster cookie is empty"));
        }
        let encryption = config
            .tls
            .as_ref()
            .map(|tls| ractor_cluster::IncomingEncryptionMode::Tls(tls.acceptor.clone()));
        let port = config.listen.port();
        let server = ractor_cluster::NodeServer::new(
            port,
            config.cookie.clone(),
            config.node.clone(),
            config.listen.ip().to_string(),
            encryption,
            Some(ractor_cluster::node::NodeConnectionMode::Transitive),
        )
        .with_listen_addr(config.listen.ip());
        let (server, _) = Actor::spawn(None, server, ())
            .await
            .map_err(|e| Error::internal("cluster node server did not start").with_source(e))?;
        let (members, _) = watch::channel(vec![config.node.clone()]);
        let inner = Arc::new(Inner {
            jido: jido.clone(),
            node: config.node.clone(),
            scope: format!("jido.{}", config.cluster),
            prefix: format!("jido.node.{}.", config.cluster),
            kinds: RwLock::new(HashMap::new()),
            events: broadcast::channel(EVENTS_CAPACITY).0,
            members,
            gateways: RwLock::new(HashMap::new()),
            outboxes: batch::Outboxes::default(),
            epoch: std::sync::atomic::AtomicU64::new(0),
            children: children::Children::default(),
            server: server.clone(),
            heartbeat: (config.heartbeat_interval, config.heartbeat_misses),
        });
        let name = format!("{}{}", inner.prefix, inner.node);
        let (gateway, _) = Actor::spawn(Some(name), gateway::Gateway, Arc::clone(&inner))
            .await
            .map_err(|e| {
                server.stop(None);
                Error::internal("cluster gateway did not start").with_source(e)
            })?;
        let host: Arc<dyn crate::server::ChildHost> =
            Arc::new(children::ClusterChildHost::new(&inner, gateway.clone()));
        jido.set_child_host(Some(Arc::clone(&host)));
        tokio::spawn(forward_exits(
            jido.final_exits(),
            gateway.clone(),
            Arc::clone(&inner),
        ));
        let (wake, woken) = tokio::sync::mpsc::unbounded_channel();
        let _ = server.cast(NodeServerMessage::SubscribeToEvents {
            id: "jido.connector".to_owned(),
            subscription: Box::new(connector::Subscription(wake)),
        });
        tokio::spawn(connector::run(
            server.clone(),
            Arc::new(config.clone()),
            woken,
        ));
        Ok(Cluster {
            inner,
            server,
            gateway,
            listen: config.listen,
            host,
        })
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.inner.node
    }

    /// The live members, this node included, sorted by name.
    pub fn members(&self) -> Vec<String> {
        self.inner.members()
    }

    /// Waits until at least `n` nodes (this one included) are members.
    ///
    /// # Errors
    ///
    /// [`Timeout`](crate::ErrorKind::Timeout) "cluster members not
    /// reached" after `timeout`.
    pub async fn wait_for_members(&self, n: usize, timeout: Duration) -> Result<Vec<String>> {
        let mut rx = self.inner.members.subscribe();
        let reached = tokio::time::timeout(timeout, rx.wait_for(|m| m.len() >= n)).await;
        match reached {
            Ok(Ok(members)) => Ok(members.clone()),
            _ => Err(Error::timeout("cluster members not reached")
                .with_detail("wanted", n as u64)
                .with_detail("members", self.members())),
        }
    }

    /// Node up / down and fenced-agent events from now on.
    pub fn events(&self) -> ClusterEvents {
        ClusterEvents {
            rx: self.inner.events.subscribe(),
        }
    }

    /// Registers how this node starts agents of `kind` (ids `kind:…`) it
    /// owns and does not run: `factory(id)` returns the agent, whose id
    /// must be `id`, and its options. Register the same kinds on every
    /// node. Replaces an earlier factory of the kind.
    pub fn register_kind<F>(&self, kind: impl Into<String>, factory: F)
    where
        F: Fn(&str) -> Result<(AgentState, ServerOptions)> + Send + Sync + 'static,
    {
        self.inner
            .kinds
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(kind.into(), Arc::new(factory));
    }

    /// The executor of [`RemoteChildDirective`]s wrapped as custom
    /// directives (`Directive::custom`): register it on the parents,
    /// `ServerOptions::new().directive_exec(cluster.child_directives())`.
    /// Not needed otherwise: `RemoteChildDirective(..).into()` and the
    /// built-in SpawnAgent of a `ChildKind` are executed by the child host
    /// this cluster installed on its instance.
    pub fn child_directives(&self) -> RemoteChildExec {
        RemoteChildExec {
            cluster: self.clone(),
        }
    }

    /// A handle to agent `id`, placed by rendezvous hashing.
    pub fn agent(&self, id: impl Into<String>) -> ClusterAgent {
        self.agent_on(id, Place::Hash)
    }

    /// A handle to agent `id` placed by `place`.
    pub fn agent_on(&self, id: impl Into<String>, place: Place) -> ClusterAgent {
        ClusterAgent::new(
            Arc::clone(&self.inner),
            self.gateway.clone(),
            id.into(),
            place,
        )
    }

    /// The node that owns `id` by rendezvous hashing over the current
    /// members.
    pub fn owner_of(&self, id: &str) -> String {
        let members = self.members();
        owner(id, &members).unwrap_or(&self.inner.node).to_owned()
    }

    /// This node's gateway (a raw ractor handle: send it [`GatewayMsg`]s).
    pub fn gateway_ref(&self) -> ActorRef<GatewayMsg> {
        self.gateway.clone()
    }

    /// The gateway of member `node`, if it is a live remote member.
    pub fn gateway_of(&self, node: &str) -> Option<ActorRef<GatewayMsg>> {
        self.inner.gateway_of(node)
    }

    /// Stops the gateway, the connector and the node server (sessions to
    /// peers end; they see this node down), and removes this cluster's
    /// child host from the instance (a `SpawnAgent` of a `ChildKind` then
    /// fails). The `Jido` instance and its agents keep running.
    pub async fn shutdown(&self) {
        // Ours only: another host installed since stays.
        let jido = &self.inner.jido;
        if jido
            .child_host()
            .is_some_and(|h| std::ptr::addr_eq(Arc::as_ptr(&h), Arc::as_ptr(&self.host)))
        {
            jido.set_child_host(None);
        }
        let _ = self
            .gateway
            .stop_and_wait(None, Some(Duration::from_secs(5)))
            .await;
        let _ = self
            .server
            .stop_and_wait(None, Some(Duration::from_secs(5)))
            .await;
    }
}

/// Tells the gateway about every agent of this node that ends for good,
/// and announces fenced ones. Reads the instance's lossless exit stream,
/// not [`Jido::events`]: a watch notice must not depend on how fast some
/// event receiver reads.
async fn forward_exits(
    mut exits: tokio::sync::mpsc::UnboundedReceiver<crate::server::FinalExit>,
    gateway: ActorRef<GatewayMsg>,
    inner: Arc<Inner>,
) {
    while let Some(exit) = exits.recv().await {
        // A hibernated agent is thawed by the next request: its watches
        // stay (they are by id).
        if exit.reason == ExitReason::Hibernated {
            continue;
        }
        if exit.reason == ExitReason::Fenced {
            telemetry::fenced(&inner.node, &exit.id);
            let _ = inner.events.send(ClusterEvent::Fenced {
                agent: exit.id.to_string(),
            });
        }
        if gateway
            .send_message(GatewayMsg::Exited(
                exit.id.to_string(),
                exit.reason.to_string(),
            ))
            .is_err()
        {
            return;
        }
    }
}
