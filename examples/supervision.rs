//! Embedding an AgentServer under your own ractor supervisor.
//!
//! ```text
//! cargo run --example supervision
//! ```
//!
//! The supervisor spawns an agent with plain `Actor::spawn_linked`, prints
//! every supervision event it receives (`ActorStarted`, `ActorFailed`,
//! `ActorTerminated`), restarts the agent once after a crash, and finally
//! drains it with ractor's own `drain_children_and_wait`: the agent finishes
//! the signal it is processing and every signal it already accepted, then
//! stops with ractor's `"Drained"` reason (a normal end).

use std::time::Duration;

use jido::agent::SignalRoute;
use jido::directive::CustomDirective;
use jido::prelude::*;
use jido::server::{
    AgentMsg, AgentRef, AgentServerArgs, AgentSpecs, DirectiveContext, DirectiveExec,
    DirectiveResult, ServerOptions,
};
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use serde_json::json;

/// Counts: `count += by`.
#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct By {
    by: i64,
}

struct Count;
impl Action for Count {
    type Params = By;
    type Output = serde_json::Value;
    const NAME: &'static str = "count";
    async fn run(&self, p: By, ctx: &Context) -> jido::Result<serde_json::Value> {
        let count = ctx
            .state()
            .and_then(|s| s.get("count")?.as_i64())
            .unwrap_or(0);
        Ok(json!({"count": count + p.by}))
    }
}

/// Slow work: `count += 1` after 50 ms, printed.
struct Slow;
impl Action for Slow {
    type Params = Nothing;
    type Output = serde_json::Value;
    const NAME: &'static str = "slow";
    async fn run(&self, _: Nothing, ctx: &Context) -> jido::Result<serde_json::Value> {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let count = ctx
            .state()
            .and_then(|s| s.get("count")?.as_i64())
            .unwrap_or(0);
        println!("agent: slow work done, count = {}", count + 1);
        Ok(json!({"count": count + 1}))
    }
}

/// A directive whose executor panics: it crashes the agent on purpose.
#[derive(Debug)]
struct Explode;
impl CustomDirective for Explode {}

struct ExplodeExec;
impl DirectiveExec for ExplodeExec {
    type Directive = Explode;
    fn exec(&self, _: &Explode, _: &Signal, _: &DirectiveContext<'_>) -> DirectiveResult {
        panic!("asked to explode")
    }
}

/// Returns the Explode directive.
#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Nothing {}
struct Detonate;
impl Action for Detonate {
    type Params = Nothing;
    type Output = ();
    const NAME: &'static str = "detonate";
    async fn run(&self, _: Nothing, ctx: &Context) -> jido::Result<()> {
        ctx.push_effect(Directive::custom(Explode));
        Ok(())
    }
}

struct Counter;
impl Agent for Counter {
    const NAME: &'static str = "counter";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![
            SignalRoute::action("count", Count),
            SignalRoute::action("explode", Detonate),
            SignalRoute::action("slow", Slow),
        ]
    }
}

fn args() -> AgentServerArgs {
    AgentServerArgs::new(
        AgentState::new(Counter, AgentOptions::new().id("counter-1")),
        ServerOptions::new().directive_exec(ExplodeExec),
    )
}

/// The user's supervisor: prints events, restarts a failed agent once,
/// drains its agents when asked.
struct MySupervisor;

/// Asks the supervisor to drain its children and answer when they ended.
struct DrainAll(ractor::RpcReplyPort<()>);

#[cfg(feature = "cluster")]
impl ractor::Message for DrainAll {}

struct SupState {
    restarts: u32,
    /// The start arguments of each agent, by actor: the restart recipe.
    specs: AgentSpecs,
    agent_tx: tokio::sync::mpsc::UnboundedSender<ActorRef<AgentMsg>>,
}

impl Actor for MySupervisor {
    type Msg = DrainAll;
    type State = SupState;
    type Arguments = tokio::sync::mpsc::UnboundedSender<ActorRef<AgentMsg>>;

    async fn pre_start(
        &self,
        myself: ActorRef<DrainAll>,
        agent_tx: Self::Arguments,
    ) -> Result<SupState, ActorProcessingErr> {
        let mut specs = AgentSpecs::new();
        let agent = specs.spawn_linked(args(), myself.get_cell()).await?;
        let _ = agent_tx.send(agent.actor_ref().clone());
        Ok(SupState {
            restarts: 0,
            specs,
            agent_tx,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<DrainAll>,
        DrainAll(reply): DrainAll,
        _: &mut SupState,
    ) -> Result<(), ActorProcessingErr> {
        // ractor's own verb: each agent finishes its accepted signals first.
        myself
            .get_cell()
            .drain_children_and_wait(Some(Duration::from_secs(5)))
            .await;
        let _ = reply.send(());
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<DrainAll>,
        event: SupervisionEvent,
        state: &mut SupState,
    ) -> Result<(), ActorProcessingErr> {
        match &event {
            SupervisionEvent::ActorStarted(cell) => {
                println!("supervisor: ActorStarted    {}", cell.get_id());
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                println!("supervisor: ActorFailed     {} ({err})", cell.get_id());
                if state.restarts == 0 {
                    state.restarts += 1;
                    println!("supervisor: restarting the agent");
                    if let Some(agent) = state.specs.restart(&event, myself.get_cell()).await? {
                        let _ = state.agent_tx.send(agent.actor_ref().clone());
                    }
                } else {
                    state.specs.take(&event);
                }
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                println!(
                    "supervisor: ActorTerminated {} (reason: {})",
                    cell.get_id(),
                    reason.as_deref().unwrap_or("none")
                );
                // Ended on purpose (drained): nothing to restart.
                state.specs.take(&event);
            }
            _ => {}
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> jido::Result<()> {
    // The agent below crashes on purpose; print that panic as one line, not
    // as a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("non-string payload");
        eprintln!("(panic on purpose: {msg})");
    }));
    let (tx, mut agents) = tokio::sync::mpsc::unbounded_channel();
    let (sup, sup_handle) = Actor::spawn(None, MySupervisor, tx)
        .await
        .map_err(|e| Error::internal(e.to_string()))?;

    let first = agents
        .recv()
        .await
        .ok_or_else(|| Error::internal("no agent"))?;
    let agent = AgentRef::from_actor(first).await?;
    let after = agent.call(Signal::new("count", json!({"by": 2}))).await?;
    println!("agent {}: count = {}", agent.id(), after.state()["count"]);

    // Crash it: the supervisor sees ActorFailed and restarts it.
    agent.cast(Signal::new("explode", json!({})))?;
    let second = tokio::time::timeout(Duration::from_secs(5), agents.recv())
        .await
        .map_err(|_| Error::timeout("no restart"))?
        .ok_or_else(|| Error::internal("no agent"))?;
    let agent = AgentRef::from_actor(second).await?;
    let after = agent.call(Signal::new("count", json!({"by": 1}))).await?;
    println!(
        "restarted agent {}: count = {} (fresh state)",
        agent.id(),
        after.state()["count"]
    );

    // Three slow signals, then the supervisor drains: all three finish
    // before the agent ends with ActorTerminated (reason: Drained).
    for _ in 0..3 {
        agent.cast(Signal::new("slow", json!({})))?;
    }
    println!("supervisor: draining");
    ractor::call!(sup, DrainAll).map_err(|e| Error::internal(e.to_string()))?;
    println!("supervisor: drained, agent alive: {}", agent.is_alive());
    tokio::time::sleep(Duration::from_millis(50)).await;
    sup.stop(None);
    let _ = sup_handle.await;
    Ok(())
}
