//! Remote children as directives: an agent's `cmd` returns
//! [`RemoteChildDirective`]s, and the executor from
//! [`Cluster::child_directives`](super::Cluster::child_directives) runs
//! them with [`ClusterAgent::spawn_as_child`](super::ClusterAgent::spawn_as_child)
//! and [`RemoteChild::stop`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::handle::RemoteChild;
use super::{Cluster, Place};
use crate::directive::{CustomDirective, Directive, StopReason};
use crate::server::{DirectiveContext, DirectiveExec, DirectiveResult};
use crate::signal::Signal;

/// How long a directive's spawn or stop waits for the child's node.
const CHILD_TIMEOUT: Duration = Duration::from_secs(5);

/// A directive that starts or stops a **remote child** of the agent that
/// returns it (see [`ClusterAgent::spawn_as_child`](super::ClusterAgent::spawn_as_child)).
/// Executed by [`Cluster::child_directives`](super::Cluster::child_directives),
/// which the parent's options must register.
///
/// # Examples
///
/// ```
/// use jido::cluster::{Place, RemoteChildDirective};
/// use jido::directive::{Directive, StopReason};
///
/// let spawn: Directive = RemoteChildDirective::spawn("report:17", "report").into();
/// let pinned = RemoteChildDirective::spawn_on("report:18", "nightly", Place::Node("node-b".into()));
/// let stop: Directive = RemoteChildDirective::stop("report", StopReason::Shutdown).into();
/// assert_eq!(spawn.kind(), "remote_child");
/// # let _ = (pinned, stop);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RemoteChildDirective {
    /// Starts agent `id` on its owner (placed by `place`) as a child known
    /// as `tag`: once it runs and is watched the parent gets
    /// `jido.agent.child.started` `{parent_id, child_id, tag, node}`, and
    /// `jido.agent.child.exit` `{tag, id, node, reason}` when it ends or
    /// its node is lost. A start that fails is logged (warning) and leaves
    /// nothing, as a local SpawnAgent's.
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
    /// tag is ignored (debug log). The built-in [`Directive::StopChild`]
    /// does the same for a remote child's tag (the executor is the
    /// agent's child table's hook, [`DirectiveExec::stop_child`]).
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
    fn from(d: RemoteChildDirective) -> Self {
        Directive::custom(d)
    }
}

/// The remote children the directives made, by (parent id, tag).
#[derive(Default)]
pub(crate) struct Children(Mutex<HashMap<(String, String), Entry>>);

enum Entry {
    /// The spawn is in flight; stops asked meanwhile.
    Starting(Vec<StopReason>),
    Running(RemoteChild),
}

impl Children {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Entry>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The child `id` of `parent` tagged `tag` ended (its exit was
    /// delivered): forget it.
    pub(crate) fn ended(&self, parent: &str, tag: &str, id: &str) {
        let key = (parent.to_owned(), tag.to_owned());
        let mut map = self.lock();
        if matches!(map.get(&key), Some(Entry::Running(child)) if child.id() == id) {
            map.remove(&key);
        }
    }
}

/// The executor of [`RemoteChildDirective`]s: register it on the parent
/// (`ServerOptions::directive_exec`) or the instance
/// (`JidoConfig::directive_exec`). Made by
/// [`Cluster::child_directives`](super::Cluster::child_directives).
///
/// It also extends the parent's child table: the built-in
/// [`Directive::StopChild`] of a remote child's tag stops that child
/// ([`DirectiveExec::stop_child`]), and a tag held by a remote child
/// (running or starting) is taken for SpawnAgent and AdoptChild
/// ([`DirectiveExec::holds_child`]), as a local child's tag is taken for
/// a remote spawn: one tag names one child.
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
        let inner = std::sync::Arc::clone(&self.cluster.inner);
        let parent_id = ctx.agent_id().to_owned();
        match directive {
            RemoteChildDirective::Spawn { id, tag, place } => {
                let key = (parent_id, tag.clone());
                {
                    let mut map = inner.children.lock();
                    // One tag names one child, local or remote.
                    if map.contains_key(&key) || ctx.has_local_child(tag) {
                        tracing::warn!(target: "jido::cluster", agent_id = %key.0, tag, "remote child tag already taken");
                        return DirectiveResult::Ok;
                    }
                    map.insert(key.clone(), Entry::Starting(Vec::new()));
                }
                let agent = self.cluster.agent_on(id.clone(), place.clone());
                let parent = ctx.myself();
                let tag = tag.clone();
                tokio::spawn(async move {
                    let started = agent.spawn_as_child(&parent, &tag, CHILD_TIMEOUT).await;
                    let stops = {
                        let mut map = inner.children.lock();
                        let stops = match map.remove(&key) {
                            Some(Entry::Starting(stops)) => stops,
                            _ => Vec::new(),
                        };
                        match &started {
                            Ok(child) if stops.is_empty() => {
                                map.insert(key.clone(), Entry::Running(child.clone()));
                                // As a local child's start, with its node.
                                let _ = parent.cast(Signal::new(
                                    crate::server::signal_types::CHILD_STARTED,
                                    serde_json::json!({
                                        "parent_id": key.0,
                                        "child_id": child.id(),
                                        "tag": child.tag(),
                                        "node": child.node(),
                                    }),
                                ));
                            }
                            Ok(_) => {}
                            Err(e) => {
                                tracing::warn!(target: "jido::cluster", agent_id = %key.0, tag, child_id = %agent.id(), error = %e, "remote child start failed");
                            }
                        }
                        stops
                    };
                    if let (Ok(child), Some(reason)) = (started, stops.into_iter().next()) {
                        stop(child, reason).await;
                    }
                });
                DirectiveResult::Async(Some(format!("remote_child:{}", directive_tag(directive))))
            }
            RemoteChildDirective::Stop { tag, reason } => {
                self.stop_child(tag, reason, ctx).unwrap_or_else(|| {
                    tracing::debug!(target: "jido::cluster", agent_id = %ctx.agent_id(), tag, "stop of an unknown remote child");
                    DirectiveResult::Ok
                })
            }
        }
    }

    /// The built-in StopChild of a remote child: stops the child the
    /// agent started under `tag` (see [`RemoteChildDirective::Stop`]).
    fn stop_child(
        &self,
        tag: &str,
        reason: &StopReason,
        ctx: &DirectiveContext<'_>,
    ) -> Option<DirectiveResult> {
        let key = (ctx.agent_id().to_owned(), tag.to_owned());
        let child = {
            let mut map = self.cluster.inner.children.lock();
            match map.get_mut(&key) {
                Some(Entry::Starting(stops)) => {
                    stops.push(reason.clone());
                    return Some(DirectiveResult::Ok);
                }
                Some(Entry::Running(_)) => match map.remove(&key) {
                    Some(Entry::Running(child)) => child,
                    _ => return Some(DirectiveResult::Ok),
                },
                None => return None,
            }
        };
        tokio::spawn(stop(child, reason.clone()));
        Some(DirectiveResult::Async(Some(format!("remote_child:{tag}"))))
    }

    /// Whether the agent has a remote child tagged `tag` (running or
    /// starting): the tag is taken for its SpawnAgent and AdoptChild.
    fn holds_child(&self, tag: &str, ctx: &DirectiveContext<'_>) -> bool {
        self.cluster
            .inner
            .children
            .lock()
            .contains_key(&(ctx.agent_id().to_owned(), tag.to_owned()))
    }
}

fn directive_tag(d: &RemoteChildDirective) -> &str {
    match d {
        RemoteChildDirective::Spawn { tag, .. } | RemoteChildDirective::Stop { tag, .. } => tag,
    }
}

async fn stop(child: RemoteChild, reason: StopReason) {
    if let Err(e) = child.stop(reason, CHILD_TIMEOUT).await {
        tracing::warn!(target: "jido::cluster", child_id = %child.id(), tag = child.tag(), error = %e, "remote child stop failed");
    }
}
