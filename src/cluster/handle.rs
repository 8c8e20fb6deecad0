//! The handle to an agent wherever it runs.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ractor::ActorRef;
use serde_json::Value;

use super::envelope::{Op, Request, checkpoint_value};
use super::gateway::{GatewayMsg, WatchRequest, call_gateway, noconnection};
use super::{Inner, Place, owner};
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
    Gateway(ActorRef<GatewayMsg>, String),
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
        let members = self.inner.members();
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

    fn route(&self) -> Result<Route> {
        let node = self.owner()?;
        if node == self.inner.node {
            if !self.via_gateway.load(Ordering::Acquire)
                && let Some(agent) = self.inner.jido.whereis(&self.id)
            {
                return Ok(Route::Local(agent));
            }
            self.via_gateway.store(true, Ordering::Release);
            return Ok(Route::Gateway(self.gateway.clone(), node));
        }
        let gateway = self
            .inner
            .gateway_of(&node)
            .ok_or_else(|| noconnection(&node))?;
        Ok(Route::Gateway(gateway, node))
    }

    /// Sends `signal` and waits at most `timeout` (the remaining budget is
    /// carried to the owner) for the agent's answer: its checkpoint
    /// `{version, agent, id, state}` (restore it with
    /// [`AgentState::restore`](crate::AgentState::restore) if you hold the
    /// agent type).
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
        match self.route()? {
            Route::Local(agent) => agent
                .call_timeout(signal, timeout)
                .await
                .map(|state| checkpoint_value(&state)),
            Route::Gateway(gateway, node) => {
                let request = Request::new(Op::Call, &self.id, self.kind.as_deref())
                    .signal(&signal)
                    .deadline(timeout)
                    .encode();
                call_gateway(&gateway, &node, request, timeout).await
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
            Route::Gateway(gateway, node) => {
                let request = Request::new(Op::Cast, &self.id, self.kind.as_deref())
                    .signal(&signal)
                    .encode();
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
        let request = |reply| {
            GatewayMsg::Watch(Box::new(WatchRequest {
                agent: self.id.clone(),
                owner: owner.clone(),
                watcher: watcher.clone(),
                reply,
            }))
        };
        match self.gateway.call(request, Some(super::WATCH_TIMEOUT)).await {
            Ok(ractor::rpc::CallResult::Success(result)) => result,
            Ok(ractor::rpc::CallResult::Timeout) => Err(Error::timeout("cluster watch timed out")),
            _ => Err(Error::cancelled("cluster is shut down")),
        }
    }
}
