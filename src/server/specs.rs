//! The restart recipe for agents supervised by your own ractor supervisor.

use std::collections::HashMap;

use ractor::{ActorCell, ActorId, SupervisionEvent};

use super::actor::AgentServer;
use super::agent_ref::AgentRef;
use super::options::AgentServerArgs;
use crate::error::Result;

/// The start arguments of the agents a supervisor of yours spawned, by
/// actor: what it needs to restart the one a supervision event names,
/// without its own actor-id → agent map or start-argument factory.
///
/// Spawn through [`spawn_linked`](AgentSpecs::spawn_linked); in
/// `handle_supervisor_evt`, [`restart`](AgentSpecs::restart) starts the
/// ended agent again from the arguments it was first started with (its
/// initial state, as a [`Jido`](super::Jido) instance restarts agents), or
/// [`take`](AgentSpecs::take) hands them to you to decide. An agent that
/// ends for good is forgotten by either call, so the map only holds live
/// agents.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::prelude::*;
/// use jido::server::{AgentRef, AgentServerArgs, AgentSpecs, ServerOptions};
/// use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
///
/// struct Worker;
/// impl Agent for Worker { const NAME: &'static str = "worker"; type Schema = (); }
///
/// struct MySupervisor;
/// impl Actor for MySupervisor {
///     type Msg = ();
///     type State = AgentSpecs;
///     type Arguments = tokio::sync::mpsc::UnboundedSender<AgentRef>;
///
///     async fn pre_start(&self, myself: ActorRef<()>, tx: Self::Arguments) -> Result<AgentSpecs, ActorProcessingErr> {
///         let mut specs = AgentSpecs::new();
///         let args = AgentServerArgs::new(AgentState::new(Worker, AgentOptions::new().id("w1")), ServerOptions::new());
///         tx.send(specs.spawn_linked(args, myself.get_cell()).await?)?;
///         Ok(specs)
///     }
///
///     async fn handle_supervisor_evt(&self, myself: ActorRef<()>, event: SupervisionEvent, specs: &mut AgentSpecs) -> Result<(), ActorProcessingErr> {
///         if let SupervisionEvent::ActorFailed(..) = event {
///             specs.restart(&event, myself.get_cell()).await?;
///         } else {
///             specs.take(&event); // ended on purpose: forget it
///         }
///         Ok(())
///     }
/// }
///
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
/// let (sup, _) = Actor::spawn(None, MySupervisor, tx).await.expect("supervisor");
/// let first = rx.recv().await.unwrap();
/// assert_eq!(first.id(), "w1");
/// # sup.stop(None);
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct AgentSpecs {
    by_actor: HashMap<ActorId, AgentServerArgs>,
}

impl AgentSpecs {
    /// No agents yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawns an AgentServer from `args` linked under `supervisor` (your
    /// supervisor's cell) and keeps `args` to restart it.
    ///
    /// # Errors
    ///
    /// As [`AgentServer::start_linked`]: a configuration error for invalid
    /// options or routes, an internal error when the actor cannot start.
    pub async fn spawn_linked(
        &mut self,
        args: AgentServerArgs,
        supervisor: ActorCell,
    ) -> Result<AgentRef> {
        let (agent, _) = AgentServer::start_linked(args.clone(), supervisor).await?;
        self.by_actor.insert(agent.actor_ref().get_id(), args);
        Ok(agent)
    }

    /// The arguments of the agent that `event` says ended
    /// (`ActorTerminated` or `ActorFailed`), removed from the map; `None`
    /// for other events and for actors not spawned through this map.
    pub fn take(&mut self, event: &SupervisionEvent) -> Option<AgentServerArgs> {
        let cell = match event {
            SupervisionEvent::ActorTerminated(cell, ..)
            | SupervisionEvent::ActorFailed(cell, _) => cell,
            _ => return None,
        };
        self.by_actor.remove(&cell.get_id())
    }

    /// Starts the agent that `event` says ended again, from its original
    /// arguments, linked under `supervisor`; `Ok(None)` when the event
    /// names no agent of this map.
    ///
    /// # Errors
    ///
    /// As [`spawn_linked`](AgentSpecs::spawn_linked) (the arguments are
    /// then forgotten).
    pub fn restart(
        &mut self,
        event: &SupervisionEvent,
        supervisor: ActorCell,
    ) -> impl Future<Output = Result<Option<AgentRef>>> + Send + '_ {
        // Taken before the future: it holds no reference to the event
        // (which is not `Sync`).
        let args = self.take(event);
        async move {
            match args {
                Some(args) => self.spawn_linked(args, supervisor).await.map(Some),
                None => Ok(None),
            }
        }
    }

    /// How many live agents the map holds.
    pub fn len(&self) -> usize {
        self.by_actor.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.by_actor.is_empty()
    }
}
