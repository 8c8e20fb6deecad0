//! Children that run outside the parent's instance: the [`ChildHost`] an
//! extension installs on a [`Jido`](super::Jido) instance starts the
//! children a [`ChildKind`] describes (feature `cluster`: on any node),
//! and the parent's child table asks it about their tags, their stop and
//! the status list.

use serde_json::{Map, Value};

use super::{DirectiveContext, DirectiveResult};
use crate::directive::{ChildKind, ChildOptions, Restart, StopReason};
use crate::error::Error;

/// The error of a SpawnAgent whose tag already names a child of the
/// parent (tracked, starting, or kept by a child host): a validation error
/// "tag in use" with details `reason: "tag_in_use"`, `tag` and `child_id`
/// (the id the refused child would have had). The parent gets it in
/// `jido.agent.child.start_failed`; nothing is started.
pub(crate) fn tag_in_use(tag: &str, child_id: &str) -> Error {
    Error::validation("tag in use")
        .with_detail("reason", "tag_in_use")
        .with_detail("tag", tag.to_owned())
        .with_detail("child_id", child_id.to_owned())
}

/// A [`Directive::SpawnAgent`](crate::directive::Directive::SpawnAgent)
/// whose child is a [`ChildKind`], handed to the instance's
/// [`ChildHost`].
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct ChildSpawn {
    /// The child's kind and placement.
    pub spec: ChildKind,
    /// The parent's tag for it.
    pub tag: String,
    /// Its id: the options' id, or `"<parent id>/<tag>"`.
    pub id: String,
    /// Its options (the id included).
    pub options: ChildOptions,
    /// The SpawnAgent's metadata (carried by `jido.agent.child.started`).
    pub meta: Map<String, Value>,
    /// The SpawnAgent's restart policy: what the host does when the child
    /// ends (the cluster's host: see `docs/cluster.md`, "Remote
    /// children").
    pub restart: Restart,
}

/// One child of an agent, as [`AgentStatus::child_details`](super::AgentStatus::child_details)
/// lists it.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildStatus {
    /// The parent's tag for it.
    pub tag: String,
    /// Its id.
    pub id: String,
    /// The node it runs on; `None` for a child in the parent's own
    /// instance.
    pub node: Option<String>,
}

impl ChildStatus {
    /// A child `id` tagged `tag`, on `node` (`None`: in the parent's
    /// instance).
    pub fn new(tag: impl Into<String>, id: impl Into<String>, node: Option<String>) -> Self {
        Self {
            tag: tag.into(),
            id: id.into(),
            node,
        }
    }
}

/// Starts and keeps the children that [`ChildKind`]s describe, for every
/// agent of an instance: installed with
/// [`Jido::set_child_host`](super::Jido::set_child_host) (feature
/// `cluster`: `Cluster::start` installs the cluster's, which starts the
/// child on the node its [`Placement`](crate::directive::Placement)
/// names, from the kind factory registered there).
///
/// The agent's child table consults the host after its own children: a
/// tag the host [holds](ChildHost::holds_child) is taken for every
/// SpawnAgent and AdoptChild of the agent, the built-in StopChild of such
/// a tag goes to [`stop_child`](ChildHost::stop_child), and
/// [`children`](ChildHost::children) joins the status list. What the host
/// owes the parent, as for a child in its instance:
/// `jido.agent.child.started` `{parent_id, child_id, child_type, tag,
/// meta, …}` once the child runs (again after each restart its
/// [`ChildSpawn::restart`] policy makes),
/// `jido.agent.child.exit` `{tag, id, reason, …}` when it ends, and
/// `jido.agent.child.start_failed` `{parent_id, child_id, tag, error}` when
/// it could not start.
///
/// Each method runs inside the agent's handler: keep it short (start work
/// in a task). A panic in [`spawn`](ChildHost::spawn) or
/// [`stop_child`](ChildHost::stop_child) crashes the agent, as one in a
/// directive executor does; one in the queries counts as "none".
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use jido::server::{ChildHost, ChildSpawn, ChildStatus, DirectiveContext, DirectiveResult, Jido, JidoConfig};
/// use jido::server::signal_types::CHILD_START_FAILED;
/// use jido::directive::StopReason;
/// use jido::signal::Signal;
/// use serde_json::json;
///
/// /// Refuses every spec child, and tells the parent (a host that starts
/// /// them would record them and answer the queries from that record).
/// struct NoHost;
/// impl ChildHost for NoHost {
///     fn spawn(&self, spawn: ChildSpawn, ctx: &DirectiveContext<'_>) -> DirectiveResult {
///         let error = jido::Error::not_found("no such agent kind");
///         let _ = ctx.myself().cast(Signal::new(CHILD_START_FAILED, json!({
///             "parent_id": ctx.agent_id(), "child_id": spawn.id, "tag": spawn.tag,
///             "error": error.to_envelope(),
///         })));
///         DirectiveResult::Ok
///     }
///     fn stop_child(&self, _: &str, _: &StopReason, _: &DirectiveContext<'_>) -> Option<DirectiveResult> { None }
///     fn holds_child(&self, _: &str, _: &DirectiveContext<'_>) -> bool { false }
///     fn children(&self, _: &DirectiveContext<'_>) -> Vec<ChildStatus> { Vec::new() }
/// }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// let jido = Jido::start(JidoConfig::new()).await?;
/// assert!(jido.set_child_host(Some(Arc::new(NoHost))).is_none());
/// assert!(jido.child_host().is_some());
/// # jido.shutdown().await;
/// # Ok(()) }
/// ```
pub trait ChildHost: Send + Sync + 'static {
    /// Starts the child `spawn` describes, for the agent of `ctx`
    /// (tag already checked free). Returns what the directive led to
    /// (usually [`DirectiveResult::Async`] with the child's id).
    fn spawn(&self, spawn: ChildSpawn, ctx: &DirectiveContext<'_>) -> DirectiveResult;

    /// The built-in StopChild of `tag`, which the agent's own table does
    /// not hold: `Some` when the host keeps a child of the agent so
    /// tagged (and stops it: the shutdown reason a local StopChild gives),
    /// `None` when not.
    fn stop_child(
        &self,
        tag: &str,
        reason: &StopReason,
        ctx: &DirectiveContext<'_>,
    ) -> Option<DirectiveResult>;

    /// Whether the host keeps a child of the agent tagged `tag` (running
    /// or starting).
    fn holds_child(&self, tag: &str, ctx: &DirectiveContext<'_>) -> bool;

    /// The agent's running children that the host keeps.
    fn children(&self, ctx: &DirectiveContext<'_>) -> Vec<ChildStatus>;
}
