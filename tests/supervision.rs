//! Supervision: embedding under a user's ractor supervisor, the instance
//! (registry, isolation, restarts of top-level agents, shutdown).

mod common;

use std::sync::Arc;

use common::*;
use jido::directive::{CustomDirective, Restart};
use jido::prelude::*;
use jido::server::{
    AgentServer, AgentServerArgs, DirectiveContext, DirectiveExec, DirectiveResult, Jido,
    JidoConfig, ServerOptions,
};
use jido::signal::Signal;
use serde_json::json;
use tokio::sync::Semaphore;

#[derive(Debug)]
struct Crash;
impl CustomDirective for Crash {}
struct CrashExec;
impl DirectiveExec for CrashExec {
    type Directive = Crash;
    fn exec(&self, _: &Crash, _: &Signal, _: &DirectiveContext<'_>) -> DirectiveResult {
        panic!("boom")
    }
}

fn crashable(id: &str) -> AgentState {
    TestAgent::new()
        .route("crash", effects(|_| vec![Directive::custom(Crash)]))
        .route("counter.add", add())
        .build(id)
}

#[tokio::test]
async fn an_embedded_agent_reports_to_its_own_supervisor() {
    let (probe, mut seen) = probe().await;
    let opts = ServerOptions::new().directive_exec(CrashExec);
    // Started and a graceful stop.
    let (a, _) = AgentServer::start_linked(
        AgentServerArgs::new(crashable("a"), opts.clone()),
        probe.get_cell(),
    )
    .await
    .unwrap();
    assert_eq!(recv(&mut seen).await, Seen::Started(a.actor_ref().get_id()));
    a.stop("done").await.unwrap();
    assert_eq!(
        recv(&mut seen).await,
        Seen::Terminated(a.actor_ref().get_id(), Some("done".into()))
    );
    // A crash.
    let (b, _) = AgentServer::start_linked(
        AgentServerArgs::new(crashable("b"), opts.clone()),
        probe.get_cell(),
    )
    .await
    .unwrap();
    assert_eq!(recv(&mut seen).await, Seen::Started(b.actor_ref().get_id()));
    b.cast(sig("crash", json!({}))).unwrap();
    assert_eq!(
        recv(&mut seen).await,
        Seen::Failed(
            b.actor_ref().get_id(),
            "directive supervision::Crash panicked: boom".into()
        )
    );
    // A kill, through plain ractor.
    let (c, _) = ractor::Actor::spawn_linked(
        None,
        AgentServer,
        AgentServerArgs::new(crashable("c"), opts),
        probe.get_cell(),
    )
    .await
    .unwrap();
    assert_eq!(recv(&mut seen).await, Seen::Started(c.get_id()));
    c.kill();
    assert_eq!(
        recv(&mut seen).await,
        Seen::Terminated(c.get_id(), Some("killed".into()))
    );
    // The user's supervisor is still there.
    assert_eq!(probe.get_status(), ractor::ActorStatus::Running);
    probe.stop(None);
}

#[tokio::test]
async fn registry_whereis_agents_and_stop_agent() {
    let jido = Jido::start(JidoConfig::new().directive_exec(CrashExec))
        .await
        .unwrap();
    let a = jido
        .start_agent(crashable("a"), ServerOptions::new())
        .await
        .unwrap();
    jido.start_agent(crashable("b"), ServerOptions::new())
        .await
        .unwrap();
    assert_eq!(jido.whereis("a"), Some(a.clone()));
    assert_eq!(
        jido.agents().iter().map(|r| r.id()).collect::<Vec<_>>(),
        vec!["a", "b"]
    );
    // One id per instance.
    let err = jido
        .start_agent(crashable("a"), ServerOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), "agent id already registered");
    assert_eq!(err.detail("agent_id"), Some(&json!("a")));
    // stop_agent; then the id is free again.
    jido.stop_agent("a").await.unwrap();
    assert!(!a.is_alive());
    assert!(jido.whereis("a").is_none());
    let err = jido.stop_agent("a").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let a2 = jido
        .start_agent(crashable("a"), ServerOptions::new())
        .await
        .unwrap();
    assert_ne!(a2, a);
    // A crashed (temporary) agent leaves the registry.
    a2.cast(sig("crash", json!({}))).unwrap();
    within(async {
        while jido.whereis("a").is_some() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert_eq!(
        jido.agents().iter().map(|r| r.id()).collect::<Vec<_>>(),
        vec!["b"]
    );
    jido.shutdown().await;
}

#[tokio::test]
async fn instances_are_isolated() {
    let one = Jido::start(JidoConfig::new().name("one")).await.unwrap();
    let two = Jido::start(JidoConfig::new().name("two")).await.unwrap();
    let a1 = one
        .start_agent(crashable("same"), ServerOptions::new())
        .await
        .unwrap();
    let a2 = two
        .start_agent(crashable("same"), ServerOptions::new())
        .await
        .unwrap();
    assert_ne!(a1, a2);
    a1.call(sig("counter.add", json!({"n": 1}))).await.unwrap();
    a2.call(sig("counter.add", json!({"n": 2}))).await.unwrap();
    one.shutdown().await;
    assert!(!a1.is_alive());
    assert!(a2.is_alive());
    assert_eq!(
        two.whereis("same").unwrap().state().await.unwrap().state()["total"],
        2
    );
    assert_eq!((one.name(), two.name()), ("one", "two"));
    two.shutdown().await;
}

#[tokio::test]
async fn a_permanent_top_level_agent_is_restarted_until_shutdown() {
    let jido = Jido::start(JidoConfig::new().directive_exec(CrashExec))
        .await
        .unwrap();
    let a = jido
        .start_agent(
            crashable("keeper"),
            ServerOptions::new().restart(Restart::Permanent),
        )
        .await
        .unwrap();
    a.call(sig("counter.add", json!({"n": 3}))).await.unwrap();
    a.actor_ref().kill();
    let b = within(async {
        loop {
            if let Some(b) = jido.whereis("keeper")
                && b != a
            {
                return b;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    // Restarted from its initial value.
    assert_eq!(b.state().await.unwrap().state().get("total"), None);
    jido.shutdown().await;
    assert!(!b.is_alive());
    tokio::task::yield_now().await;
    assert!(jido.whereis("keeper").is_none());
    assert!(jido.agents().is_empty());
}

#[tokio::test]
async fn shutdown_stops_agents_cancels_tasks_and_refuses_new_work() {
    let gate = Arc::new(Semaphore::new(0));
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let busy = jido
        .start_agent(
            TestAgent::new()
                .route("work", gated(Arc::clone(&gate)))
                .build("busy"),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    let idle = jido
        .start_agent(crashable("idle"), ServerOptions::new())
        .await
        .unwrap();
    busy.cast(sig("work", json!({"item": 1}))).unwrap();
    within(async {
        while !busy.status().await.unwrap().in_flight {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(jido.exec().supervisor().active() >= 1);
    within(jido.shutdown()).await;
    assert!(jido.is_shut_down());
    assert!(!busy.is_alive() && !idle.is_alive());
    assert_eq!(jido.exec().supervisor().active(), 0);
    assert!(jido.agents().is_empty());
    let err = jido
        .start_agent(crashable("late"), ServerOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(err.message(), "jido instance is shut down");
    // Twice is fine.
    within(jido.shutdown()).await;
}

#[tokio::test]
async fn shutdown_stops_every_one_of_many_agents() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let mut agents = Vec::new();
    for i in 0..200 {
        let agent = jido
            .start_agent(crashable(&format!("a{i}")), ServerOptions::new())
            .await
            .unwrap();
        agents.push(agent);
    }
    assert_eq!(jido.agents().len(), 200);
    within(jido.shutdown()).await;
    assert_eq!(agents.iter().filter(|a| a.is_alive()).count(), 0);
    assert!(jido.agents().is_empty());
    assert!((0..200).all(|i| jido.whereis(&format!("a{i}")).is_none()));
}
