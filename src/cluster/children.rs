//! Children on other nodes: the cluster's [`ChildHost`], which starts the
//! children of the built-in `SpawnAgent` that a [`ChildKind`] describes on
//! the node its [`Placement`] names (a watch plus a start on the owner,
//! [`ClusterAgent::spawn_as_child`](super::ClusterAgent::spawn_as_child)),
//! keeps them in the parent's child table and stops them for the built-in
//! `StopChild`. [`RemoteChildDirective`] is a shorthand for those two
//! built-ins.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use ractor::ActorRef;
use serde_json::{Map, Value, json};

use super::gateway::GatewayMsg;
use super::handle::{ClusterAgent, RemoteChild};
use super::{Cluster, Inner, Place};
use crate::directive::{
    ChildKind, ChildOptions, CustomDirective, Directive, Placement, Restart, SpawnAgent, StopReason,
};
use crate::error::Error;
use crate::server::{
    AgentRef, ChildHost, ChildSpawn, ChildStatus, DirectiveContext, DirectiveExec, DirectiveResult,
    signal_types,
};
use crate::signal::Signal;

/// How long a directive's spawn or stop waits for the child's node.
const CHILD_TIMEOUT: Duration = Duration::from_secs(5);

/// A shorthand for the built-in directives of a **remote child** of the
/// agent that returns it: `spawn` is a [`Directive::SpawnAgent`] of a
/// [`ChildKind::by_id`] child (its kind is its id's prefix) placed by
/// `place`, `stop` a [`Directive::StopChild`]. `.into()` gives those
/// built-ins, which the cluster's child host executes (installed by
/// [`Cluster::start`](super::Cluster::start): nothing to register). A
/// `RemoteChildDirective` wrapped as a custom directive
/// (`Directive::custom`) is executed the same way by
/// [`Cluster::child_directives`](super::Cluster::child_directives).
///
/// # Examples
///
/// ```
/// use jido::cluster::{Place, RemoteChildDirective};
/// use jido::directive::{Directive, Placement, StopReason};
///
/// let spawn: Directive = RemoteChildDirective::spawn("report:17", "report").into();
/// assert_eq!(spawn.kind(), "spawn_agent");
/// let Directive::SpawnAgent { agent, tag, options, .. } = &spawn else { unreachable!() };
/// assert_eq!((tag.as_str(), options.get_id()), ("report", Some("report:17")));
/// assert_eq!(agent.spec().map(|s| s.placement()), Some(&Placement::Hash));
///
/// let pinned = RemoteChildDirective::spawn_on("report:18", "nightly", Place::Node("node-b".into()));
/// let stop: Directive = RemoteChildDirective::stop("report", StopReason::Shutdown).into();
/// assert_eq!(stop.kind(), "stop_child");
/// # let _ = pinned;
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RemoteChildDirective {
    /// Starts agent `id` on its owner (placed by `place`) as a child known
    /// as `tag`, with the SpawnAgent defaults (restart `transient`): once
    /// it runs and is watched the parent gets
    /// `jido.agent.child.started` `{parent_id, child_id, child_type, tag,
    /// node, meta}`,
    /// and `jido.agent.child.exit` `{tag, id, node, reason}` when it ends
    /// or its node is lost; a start that fails gives
    /// `jido.agent.child.start_failed` `{parent_id, child_id, tag, node?,
    /// error}` and leaves nothing.
    Spawn {
        /// The child's id (its kind is the prefix before `:`).
        id: String,
        /// The parent's tag for it.
        tag: String,
        /// Where it runs.
        place: Place,
    },
    /// StopChild for a remote child: stops the child tagged `tag` with a
    /// shutdown reason (as a local StopChild). A stop that arrives while
    /// the child is still starting is applied once it started; an unknown
    /// tag is ignored (debug log).
    Stop {
        /// The child's tag.
        tag: String,
        /// Why.
        reason: StopReason,
    },
}

impl RemoteChildDirective {
    /// Spawns `id` as child `tag`, placed by rendezvous hashing.
    pub fn spawn(id: impl Into<String>, tag: impl Into<String>) -> Self {
        Self::spawn_on(id, tag, Place::Hash)
    }

    /// Spawns `id` as child `tag` on `place`.
    pub fn spawn_on(id: impl Into<String>, tag: impl Into<String>, place: Place) -> Self {
        RemoteChildDirective::Spawn {
            id: id.into(),
            tag: tag.into(),
            place,
        }
    }

    /// Stops child `tag` with `reason`.
    pub fn stop(tag: impl Into<String>, reason: impl Into<StopReason>) -> Self {
        RemoteChildDirective::Stop {
            tag: tag.into(),
            reason: reason.into(),
        }
    }
}

impl CustomDirective for RemoteChildDirective {
    fn type_name(&self) -> &'static str {
        "remote_child"
    }
}

impl From<RemoteChildDirective> for Directive {
    /// The built-in it stands for.
    fn from(d: RemoteChildDirective) -> Self {
        match d {
            RemoteChildDirective::Spawn { id, tag, place } => {
                SpawnAgent::new(ChildKind::by_id().place(place.into()), tag)
                    .id(id)
                    .into()
            }
            RemoteChildDirective::Stop { tag, reason } => Directive::stop_child_with(tag, reason),
        }
    }
}

impl From<Place> for Placement {
    fn from(place: Place) -> Self {
        match place {
            Place::Hash => Placement::Hash,
            Place::Local => Placement::Local,
            Place::Node(node) => Placement::Node(node),
        }
    }
}

impl From<Placement> for Place {
    fn from(placement: Placement) -> Self {
        match placement {
            Placement::Hash => Place::Hash,
            Placement::Local => Place::Local,
            Placement::Node(node) => Place::Node(node),
        }
    }
}

/// The children this node's agents keep on nodes (started by the
/// cluster's child host, or by hand with `spawn_as_child`), by (parent
/// id, tag). Keyed by the parent's **id**, not its actor: a parent
/// restarted by its instance keeps its remote children.
#[derive(Default)]
pub(crate) struct Children(Mutex<HashMap<(String, String), Entry>>);

enum Entry {
    /// The spawn is in flight; stops asked meanwhile.
    Starting(Vec<StopReason>),
    /// It runs; `None`: no restart (a child made by hand).
    Running(RemoteChild, Option<Box<Respawn>>),
}

/// What the host needs to start a remote child again: the spawn as data,
/// its restart policy, and the times it was restarted within the window.
#[derive(Clone)]
struct Respawn {
    inner: Weak<Inner>,
    gateway: ActorRef<GatewayMsg>,
    id: String,
    spec: ChildKind,
    options: Option<Map<String, Value>>,
    meta: Map<String, Value>,
    restart: Restart,
    restarts: VecDeque<Instant>,
}

/// What follows a remote child's exit notice, once the parent was given
/// its `jido.agent.child.exit`: a restart, or the given-up notice.
pub(crate) struct AfterExit(AfterKind);

enum AfterKind {
    Restart(String, String, Box<Respawn>),
    GivenUp(AgentRef, Box<Signal>),
}

impl AfterExit {
    /// Runs it (after the exit signal was sent, so the parent processes
    /// the exit first).
    pub(crate) fn run(self) {
        match self.0 {
            AfterKind::Restart(parent_id, tag, respawn) => {
                let Some(inner) = respawn.inner.upgrade() else {
                    return;
                };
                tokio::spawn(start_child(inner, parent_id, tag, respawn));
            }
            AfterKind::GivenUp(parent, signal) => {
                let _ = parent.cast(*signal);
            }
        }
    }
}

impl Children {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Entry>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The child `id` of `parent` tagged `tag` is gone from the parent's
    /// view without a restart (the parent ended): forget it.
    pub(crate) fn ended(&self, parent: &str, tag: &str, id: &str) {
        let key = (parent.to_owned(), tag.to_owned());
        let mut map = self.lock();
        if matches!(map.get(&key), Some(Entry::Running(child, _)) if child.id() == id) {
            map.remove(&key);
        }
    }

    /// The child `id` of `parent` tagged `tag` ended with `reason` on
    /// `node` (its exit notice is being delivered): forgotten, or, when
    /// its restart policy says so and its parent still runs, taken again
    /// (starting) and restarted by the returned [`AfterExit`], placed
    /// anew; past the instance's restart limit (`JidoConfig::max_restarts`)
    /// it is given up: `jido.agent.child.given_up` `{tag, id, node,
    /// restarts, reason}`.
    pub(crate) fn exited(
        &self,
        jido: &crate::server::Jido,
        parent: &str,
        tag: &str,
        id: &str,
        node: &str,
        reason: &str,
    ) -> Option<AfterExit> {
        let key = (parent.to_owned(), tag.to_owned());
        let mut map = self.lock();
        if !matches!(map.get(&key), Some(Entry::Running(child, _)) if child.id() == id) {
            return None;
        }
        let Some(Entry::Running(_, Some(mut respawn))) = map.remove(&key) else {
            return None;
        };
        if !crate::server::should_restart_after(respawn.restart, reason) {
            return None;
        }
        let live_parent = jido.whereis(parent)?;
        let now = Instant::now();
        let (max, window) = jido.restart_limits();
        while respawn
            .restarts
            .front()
            .is_some_and(|t| now.duration_since(*t) > window)
        {
            respawn.restarts.pop_front();
        }
        let max = max as usize;
        if respawn.restarts.len() >= max {
            tracing::error!(target: "jido::cluster", agent_id = %parent, tag, child_id = %id, restarts = max, reason, "remote child keeps failing: restart limit reached, given up");
            let signal = runtime_signal(
                signal_types::CHILD_GIVEN_UP,
                parent,
                json!({"tag": tag, "id": id, "node": node, "restarts": max, "reason": reason}),
            );
            return Some(AfterExit(AfterKind::GivenUp(live_parent, Box::new(signal))));
        }
        respawn.restarts.push_back(now);
        tracing::info!(target: "jido::cluster", agent_id = %parent, tag, child_id = %id, reason, "remote child restarted");
        map.insert(key, Entry::Starting(Vec::new()));
        Some(AfterExit(AfterKind::Restart(
            parent.to_owned(),
            tag.to_owned(),
            respawn,
        )))
    }

    /// Takes `tag` for a child of `parent` being started by hand.
    ///
    /// # Errors
    ///
    /// The [`tag_in_use`](crate::server::tag_in_use) validation error.
    pub(crate) fn reserve(&self, parent: &str, tag: &str, id: &str) -> crate::error::Result<()> {
        let key = (parent.to_owned(), tag.to_owned());
        let mut map = self.lock();
        if map.contains_key(&key) {
            return Err(crate::server::tag_in_use(tag, id));
        }
        map.insert(key, Entry::Starting(Vec::new()));
        Ok(())
    }

    /// Settles a start by hand that [`reserve`](Children::reserve) took
    /// the tag for: the child is kept (no restart), or the tag released.
    /// A stop asked while it started is applied now.
    pub(crate) fn settle(
        &self,
        parent: &str,
        tag: &str,
        started: &crate::error::Result<RemoteChild>,
    ) {
        let key = (parent.to_owned(), tag.to_owned());
        let stops = {
            let mut map = self.lock();
            let stops = match map.remove(&key) {
                Some(Entry::Starting(stops)) => stops,
                _ => Vec::new(),
            };
            if let (Ok(child), true) = (started, stops.is_empty()) {
                map.insert(key, Entry::Running(child.clone(), None));
            }
            stops
        };
        if let (Ok(child), Some(reason)) = (started, stops.into_iter().next()) {
            tokio::spawn(stop(child.clone(), reason));
        }
    }

    /// The running children of `parent`, with their nodes.
    fn of(&self, parent: &str) -> Vec<ChildStatus> {
        self.lock()
            .iter()
            .filter(|((p, _), _)| p == parent)
            .filter_map(|((_, tag), entry)| match entry {
                Entry::Running(child, _) => Some(ChildStatus::new(
                    tag.clone(),
                    child.id(),
                    Some(child.node().to_owned()),
                )),
                Entry::Starting(_) => None,
            })
            .collect()
    }

    fn holds(&self, parent: &str, tag: &str) -> bool {
        self.lock()
            .contains_key(&(parent.to_owned(), tag.to_owned()))
    }
}

/// The cluster's [`ChildHost`], installed on the `Jido` instance by
/// [`Cluster::start`](super::Cluster::start): starts the children a
/// [`ChildKind`] describes on the node their placement names.
pub(crate) struct ClusterChildHost {
    /// Weak: the instance holds the host, and the cluster the instance.
    inner: Weak<Inner>,
    gateway: ActorRef<GatewayMsg>,
}

impl ClusterChildHost {
    pub(crate) fn new(inner: &Arc<Inner>, gateway: ActorRef<GatewayMsg>) -> Self {
        Self {
            inner: Arc::downgrade(inner),
            gateway,
        }
    }
}

impl ChildHost for ClusterChildHost {
    fn spawn(&self, spawn: ChildSpawn, ctx: &DirectiveContext<'_>) -> DirectiveResult {
        match self.inner.upgrade() {
            Some(inner) => spawn_remote(inner, self.gateway.clone(), spawn, ctx),
            None => {
                let err = Error::cancelled("cluster is shut down");
                start_failed(
                    &ctx.myself(),
                    ctx.agent_id(),
                    &spawn.tag,
                    &spawn.id,
                    None,
                    &err,
                );
                DirectiveResult::Ok
            }
        }
    }

    fn stop_child(
        &self,
        tag: &str,
        reason: &StopReason,
        ctx: &DirectiveContext<'_>,
    ) -> Option<DirectiveResult> {
        let inner = self.inner.upgrade()?;
        stop_remote(&inner, tag, reason, ctx)
    }

    fn holds_child(&self, tag: &str, ctx: &DirectiveContext<'_>) -> bool {
        self.inner
            .upgrade()
            .is_some_and(|inner| inner.children.holds(ctx.agent_id(), tag))
    }

    fn children(&self, ctx: &DirectiveContext<'_>) -> Vec<ChildStatus> {
        self.inner
            .upgrade()
            .map(|inner| inner.children.of(ctx.agent_id()))
            .unwrap_or_default()
    }
}

/// Starts the child `spawn` describes for the agent of `ctx`: its tag is
/// taken (starting) at once, the start and watch run in a task, and the
/// parent then gets `jido.agent.child.started` or
/// `jido.agent.child.start_failed` (a tag in use: at once, "tag in use").
fn spawn_remote(
    inner: Arc<Inner>,
    gateway: ActorRef<GatewayMsg>,
    spawn: ChildSpawn,
    ctx: &DirectiveContext<'_>,
) -> DirectiveResult {
    let ChildSpawn {
        spec,
        tag,
        id,
        options,
        meta,
        restart,
        ..
    } = spawn;
    let parent = ctx.myself();
    let parent_id = ctx.agent_id().to_owned();
    // What crosses to the owner: the options but the id (the envelope
    // names the agent).
    let options = match options.to_json() {
        Ok(mut data) => {
            data.remove("id");
            (!data.is_empty()).then_some(data)
        }
        Err(err) => {
            start_failed(&parent, &parent_id, &tag, &id, None, &err);
            return DirectiveResult::Ok;
        }
    };
    let key = (parent_id.clone(), tag.clone());
    {
        let mut map = inner.children.lock();
        // One tag names one child, local or remote.
        if map.contains_key(&key) || ctx.has_local_child(&tag) {
            tracing::warn!(target: "jido::cluster", agent_id = %parent_id, tag, "remote child tag already taken");
            let err = crate::server::tag_in_use(&tag, &id);
            start_failed(&parent, &parent_id, &tag, &id, None, &err);
            return DirectiveResult::Ok;
        }
        map.insert(key, Entry::Starting(Vec::new()));
    }
    let respawn = Respawn {
        inner: Arc::downgrade(&inner),
        gateway,
        id: id.clone(),
        spec,
        options,
        meta,
        restart,
        restarts: VecDeque::new(),
    };
    tokio::spawn(start_child(inner, parent_id, tag, Box::new(respawn)));
    DirectiveResult::Async(Some(id))
}

/// Starts (or restarts) the remote child tagged `tag` of the agent
/// `parent_id` (its tag is held, starting), then tells the parent:
/// `jido.agent.child.started` `{parent_id, child_id, child_type, tag,
/// node, meta}` or `jido.agent.child.start_failed`.
async fn start_child(inner: Arc<Inner>, parent_id: String, tag: String, respawn: Box<Respawn>) {
    let key = (parent_id.clone(), tag.clone());
    let id = respawn.id.clone();
    // The parent as it runs now (a restarted parent is a new actor).
    let Some(parent) = inner.jido.whereis(&parent_id) else {
        inner.children.lock().remove(&key);
        return;
    };
    let mut agent = ClusterAgent::new(
        Arc::clone(&inner),
        respawn.gateway.clone(),
        id.clone(),
        respawn.spec.placement().clone().into(),
    );
    if let Some(kind) = respawn.spec.kind() {
        agent = agent.kind(kind);
    }
    // The child's type: its kind (named, or its id's prefix).
    let child_type = respawn
        .spec
        .kind()
        .or_else(|| super::kind_of(&id))
        .unwrap_or_default()
        .to_owned();
    let node = agent.owner().ok();
    let started = agent
        .spawn_child_of(&parent, tag.clone(), respawn.options.clone(), CHILD_TIMEOUT)
        .await;
    let stops = {
        let mut map = inner.children.lock();
        let stops = match map.remove(&key) {
            Some(Entry::Starting(stops)) => stops,
            _ => Vec::new(),
        };
        match &started {
            Ok(child) if stops.is_empty() => {
                let _ = parent.cast(runtime_signal(
                    signal_types::CHILD_STARTED,
                    &key.0,
                    json!({
                        "parent_id": key.0,
                        "child_id": child.id(),
                        "child_type": child_type,
                        "tag": child.tag(),
                        "node": child.node(),
                        "meta": respawn.meta,
                    }),
                ));
                map.insert(key.clone(), Entry::Running(child.clone(), Some(respawn)));
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(target: "jido::cluster", agent_id = %key.0, tag, child_id = %agent.id(), error = %e, "remote child start failed");
                start_failed(&parent, &key.0, &tag, agent.id(), node.as_deref(), e);
            }
        }
        stops
    };
    if let (Ok(child), Some(reason)) = (started, stops.into_iter().next()) {
        stop(child, reason).await;
    }
}

/// Sends the parent `jido.agent.child.start_failed`.
fn start_failed(
    parent: &AgentRef,
    parent_id: &str,
    tag: &str,
    child_id: &str,
    node: Option<&str>,
    err: &Error,
) {
    let mut data = Map::new();
    data.insert("parent_id".into(), Value::from(parent_id));
    data.insert("child_id".into(), Value::from(child_id));
    data.insert("tag".into(), Value::from(tag));
    if let Some(node) = node {
        data.insert("node".into(), Value::from(node));
    }
    data.insert("error".into(), err.to_envelope());
    let _ = parent.cast(runtime_signal(
        signal_types::CHILD_START_FAILED,
        parent_id,
        Value::Object(data),
    ));
}

/// A runtime signal about a child of `parent_id`, from `/agent/<parent_id>`
/// as the runtime's own.
fn runtime_signal(ty: &str, parent_id: &str, data: Value) -> Signal {
    Signal::builder(ty)
        .source(format!("/agent/{parent_id}"))
        .data(data.clone())
        .build()
        .unwrap_or_else(|_| Signal::new(ty, data))
}

/// The built-in StopChild of a remote child of the agent of `ctx`.
fn stop_remote(
    inner: &Inner,
    tag: &str,
    reason: &StopReason,
    ctx: &DirectiveContext<'_>,
) -> Option<DirectiveResult> {
    let key = (ctx.agent_id().to_owned(), tag.to_owned());
    let child = {
        let mut map = inner.children.lock();
        match map.get_mut(&key) {
            Some(Entry::Starting(stops)) => {
                stops.push(reason.clone());
                return Some(DirectiveResult::Ok);
            }
            Some(Entry::Running(..)) => match map.remove(&key) {
                Some(Entry::Running(child, _)) => child,
                _ => return Some(DirectiveResult::Ok),
            },
            None => return None,
        }
    };
    tokio::spawn(stop(child, reason.clone()));
    Some(DirectiveResult::Async(Some(format!("remote_child:{tag}"))))
}

/// The executor of [`RemoteChildDirective`]s wrapped as custom directives
/// (`Directive::custom`): register it on the parent
/// (`ServerOptions::directive_exec`). Made by
/// [`Cluster::child_directives`](super::Cluster::child_directives). Not
/// needed for `RemoteChildDirective(..).into()`, which gives the built-in
/// directives that the cluster's child host executes; both take the same
/// path (one child table, one StopChild).
#[derive(Clone)]
pub struct RemoteChildExec {
    pub(crate) cluster: Cluster,
}

impl std::fmt::Debug for RemoteChildExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteChildExec")
            .field("node", &self.cluster.node())
            .finish()
    }
}

impl DirectiveExec for RemoteChildExec {
    type Directive = RemoteChildDirective;

    fn exec(
        &self,
        directive: &RemoteChildDirective,
        _input: &Signal,
        ctx: &DirectiveContext<'_>,
    ) -> DirectiveResult {
        match directive {
            RemoteChildDirective::Spawn { id, tag, place } => {
                let spawn = ChildSpawn {
                    spec: ChildKind::by_id().place(place.clone().into()),
                    tag: tag.clone(),
                    id: id.clone(),
                    options: ChildOptions::new().id(id.clone()),
                    meta: Map::new(),
                    restart: Restart::default(),
                };
                spawn_remote(
                    Arc::clone(&self.cluster.inner),
                    self.cluster.gateway_ref(),
                    spawn,
                    ctx,
                )
            }
            RemoteChildDirective::Stop { tag, reason } => {
                stop_remote(&self.cluster.inner, tag, reason, ctx).unwrap_or_else(|| {
                    tracing::debug!(target: "jido::cluster", agent_id = %ctx.agent_id(), tag, "stop of an unknown remote child");
                    DirectiveResult::Ok
                })
            }
        }
    }
}

async fn stop(child: RemoteChild, reason: StopReason) {
    if let Err(e) = child.stop(reason, CHILD_TIMEOUT).await {
        tracing::warn!(target: "jido::cluster", child_id = %child.id(), tag = child.tag(), error = %e, "remote child stop failed");
    }
}

#[cfg(test)]
mod tests {
    use crate::directive::Restart;
    use crate::server::should_restart_after as restarts_after;

    #[test]
    fn restart_policies_read_a_remote_exit_reason_as_the_instance_does() {
        let reasons = [
            "normal",
            "shutdown",
            "shutdown: quota",
            "fenced",
            "noconnection",
            "crash",
            "hibernate",
            "failed: boom",
        ];
        let table =
            |restart| -> Vec<bool> { reasons.iter().map(|r| restarts_after(restart, r)).collect() };
        assert_eq!(
            table(Restart::Transient),
            [false, false, false, false, true, true, false, true]
        );
        assert_eq!(
            table(Restart::Permanent),
            [true, false, false, false, true, true, false, true]
        );
        assert_eq!(table(Restart::Temporary), [false; 8]);
    }
}
