//! Why agents end, seen without a ractor supervisor: `AgentRef::wait_exit`
//! and the instance's event stream (`Jido::events`).

mod common;

use common::*;
use jido::prelude::*;
use jido::server::{
    AgentEvent, AgentServer, AgentServerArgs, ExitReason, Jido, JidoConfig, ServerOptions,
};
use jido::{ErrorKind, directive::Restart};
use serde_json::json;

async fn next(events: &mut jido::server::AgentEvents) -> AgentEvent {
    within(events.recv()).await.unwrap()
}

fn started_id(event: &AgentEvent) -> (&str, Option<&str>) {
    match event {
        AgentEvent::Started { id, parent, .. } => (id, parent.as_deref()),
        other => panic!("expected Started, got {other:?}"),
    }
}

fn exited(event: AgentEvent) -> (String, ExitReason, bool) {
    match event {
        AgentEvent::Exited {
            id,
            reason,
            restarting,
            ..
        } => (id, reason, restarting),
        other => panic!("expected Exited, got {other:?}"),
    }
}

#[tokio::test]
async fn wait_exit_says_why_each_agent_ended() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let start = |id: &str| {
        jido.start_agent(
            TestAgent::new().route("noop", noop()).build(id),
            ServerOptions::new().directive_exec(CrashExec),
        )
    };

    let stopped = start("w-stop").await.unwrap();
    let watcher = tokio::spawn({
        let a = stopped.clone();
        async move { a.wait_exit().await }
    });
    stopped.stop("done").await.unwrap();
    assert_eq!(watcher.await.unwrap(), ExitReason::Stopped("done".into()));

    let normal = start("w-normal").await.unwrap();
    normal.stop("normal").await.unwrap();
    assert_eq!(within(normal.wait_exit()).await, ExitReason::Normal);

    let shut = start("w-shutdown").await.unwrap();
    jido.stop_agent("w-shutdown").await.unwrap();
    // Asked after the exit: the instance remembers it.
    assert_eq!(within(shut.wait_exit()).await, ExitReason::Shutdown);

    let killed = start("w-kill").await.unwrap();
    killed.actor_ref().kill();
    let reason = within(killed.wait_exit()).await;
    assert_eq!(reason, ExitReason::Killed);
    assert_eq!(reason.to_string(), "killed");

    let by_signal = start("w-signal").await.unwrap();
    by_signal
        .cast(sig("jido.agent.stop", json!({"reason": "agent_error: x"})))
        .unwrap();
    let reason = within(by_signal.wait_exit()).await;
    assert_eq!(reason, ExitReason::Stopped("agent_error: x".into()));
    assert!(!reason.is_clean());

    jido.shutdown().await;
}

#[tokio::test]
async fn a_panicking_agent_is_failed_with_the_panic_message() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let mut events = jido.events();
    let doomed = AgentState::new(Doomed, AgentOptions::new().id("doomed-1"));
    let agent = jido
        .start_agent(doomed, ServerOptions::new().directive_exec(CrashExec))
        .await
        .unwrap();
    let reason = within(agent.wait_exit()).await;
    assert_eq!(reason.to_string(), crash_reason());
    assert!(matches!(reason, ExitReason::Failed(_)));
    assert_eq!(started_id(&next(&mut events).await), ("doomed-1", None));
    assert_eq!(
        exited(next(&mut events).await),
        ("doomed-1".to_owned(), reason, false)
    );
    jido.shutdown().await;
}

#[tokio::test]
async fn an_agent_without_an_instance_ends_with_an_unknown_reason() {
    let args = AgentServerArgs::new(TestAgent::new().build("loose"), ServerOptions::new());
    let (agent, handle) = AgentServer::start(args).await.unwrap();
    agent.stop("bye").await.unwrap();
    handle.await.unwrap();
    assert_eq!(within(agent.wait_exit()).await, ExitReason::Unknown);
}

#[tokio::test]
async fn events_show_restarts_and_the_limit() {
    let jido = Jido::start(JidoConfig::new().max_restarts(1, std::time::Duration::from_secs(60)))
        .await
        .unwrap();
    let mut events = jido.events();
    let agent = jido
        .start_agent(
            TestAgent::new().build("perm"),
            ServerOptions::new().restart(Restart::Permanent),
        )
        .await
        .unwrap();
    assert_eq!(started_id(&next(&mut events).await), ("perm", None));
    agent.actor_ref().kill();
    assert_eq!(
        exited(next(&mut events).await),
        ("perm".to_owned(), ExitReason::Killed, true)
    );
    assert_eq!(started_id(&next(&mut events).await), ("perm", None));
    // The restarted agent is a new actor; the old handle's agent ended.
    assert_eq!(within(agent.wait_exit()).await, ExitReason::Killed);
    let second = jido.whereis("perm").unwrap();
    assert_ne!(second, agent);
    second.actor_ref().kill();
    assert_eq!(
        exited(next(&mut events).await),
        ("perm".to_owned(), ExitReason::Killed, false)
    );
    match next(&mut events).await {
        AgentEvent::GivenUp { id, restarts } => assert_eq!((id.as_str(), restarts), ("perm", 1)),
        other => panic!("expected GivenUp, got {other:?}"),
    }
    jido.shutdown().await;
}

#[tokio::test]
async fn children_from_spawn_agent_are_in_the_stream_with_their_parent() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let mut events = jido.events();
    let child = TestAgent::new().build("kid");
    let spawn = effects(move |_| vec![Directive::spawn_agent(child.clone(), "worker").into()]);
    let parent = jido
        .start_agent(
            TestAgent::new().route("spawn", spawn).build("mom"),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(started_id(&next(&mut events).await), ("mom", None));
    parent.call(sig("spawn", json!({}))).await.unwrap();
    assert_eq!(
        started_id(&next(&mut events).await),
        ("mom/worker", Some("mom"))
    );
    // The parent's stop takes the child (on_parent_death: stop) with it.
    parent.stop("normal").await.unwrap();
    let mut ends = [
        exited(next(&mut events).await),
        exited(next(&mut events).await),
    ];
    ends.sort_by(|a, b| a.0.cmp(&b.0).reverse());
    assert_eq!(ends[0].0, "mom/worker");
    assert!(
        ends[0].1.to_string().starts_with("shutdown: parent_down"),
        "{:?}",
        ends[0].1
    );
    assert_eq!(ends[1], ("mom".to_owned(), ExitReason::Normal, false));
    jido.shutdown().await;
}

#[tokio::test]
async fn a_slow_receiver_is_told_it_missed_events() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let mut events = jido.events();
    let n = jido::server::EVENTS_CAPACITY + 10;
    for i in 0..n {
        let a = jido
            .start_agent(
                TestAgent::new().build(&format!("lag-{i}")),
                ServerOptions::new(),
            )
            .await
            .unwrap();
        let _ = a;
    }
    let err = events.recv().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QueueOverflow);
    assert_eq!(err.details()["missed"], json!(10));
    // Then the oldest kept event.
    assert_eq!(started_id(&next(&mut events).await), ("lag-10", None));
    jido.shutdown().await;
    // Shutdown publishes the exits (more than the receiver keeps); once
    // the instance is shut down and they are read, the receiver says so.
    let mut exits = 0;
    let end = loop {
        match events.recv().await {
            Ok(AgentEvent::Exited { reason, .. }) => {
                assert_eq!(reason, ExitReason::Shutdown);
                exits += 1;
            }
            Ok(AgentEvent::Started { .. }) => {}
            Ok(other) => panic!("{other:?}"),
            Err(e) if e.kind() == ErrorKind::QueueOverflow => {}
            Err(e) => break e,
        }
    };
    assert_eq!(end.kind(), ErrorKind::Cancelled);
    assert!(exits > 0);
    assert_eq!(
        jido.events().recv().await.unwrap_err().kind(),
        ErrorKind::Cancelled
    );
}

/// What the user's supervisor reports: an agent it (re)started, or an
/// end it forgot, with how many specs it then holds.
type Report = (Option<jido::server::AgentRef>, usize);

/// A supervisor of the user's: restarts failed agents through `AgentSpecs`,
/// forgets the ones that stop.
struct SpecSupervisor;

impl ractor::Actor for SpecSupervisor {
    type Msg = ();
    type State = (
        jido::server::AgentSpecs,
        tokio::sync::mpsc::UnboundedSender<Report>,
    );
    type Arguments = tokio::sync::mpsc::UnboundedSender<Report>;

    async fn pre_start(
        &self,
        myself: ractor::ActorRef<()>,
        tx: Self::Arguments,
    ) -> Result<Self::State, ractor::ActorProcessingErr> {
        let mut specs = jido::server::AgentSpecs::new();
        let crash = effects(|_| vec![Directive::custom(Crash)]);
        let args = AgentServerArgs::new(
            TestAgent::new()
                .route("add", add())
                .route("crash", crash)
                .build("spec-1"),
            ServerOptions::new().directive_exec(CrashExec),
        );
        let agent = specs.spawn_linked(args, myself.get_cell()).await?;
        tx.send((Some(agent), specs.len()))?;
        Ok((specs, tx))
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ractor::ActorRef<()>,
        event: ractor::SupervisionEvent,
        (specs, tx): &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        match &event {
            ractor::SupervisionEvent::ActorFailed(..) => {
                let agent = specs.restart(&event, myself.get_cell()).await?;
                tx.send((agent, specs.len()))?;
            }
            ractor::SupervisionEvent::ActorTerminated(..) => {
                let forgotten = specs.take(&event);
                tx.send((None, specs.len() + usize::from(forgotten.is_none())))?;
            }
            _ => {}
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_users_supervisor_restarts_an_agent_from_its_specs() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (sup, _) = ractor::Actor::spawn(None, SpecSupervisor, tx)
        .await
        .unwrap();
    let (first, held) = recv(&mut rx).await;
    let first = first.unwrap();
    assert_eq!((first.id(), held), ("spec-1", 1));
    let after = first.call(sig("add", json!({"n": 3}))).await.unwrap();
    assert_eq!(after.state()["total"], 3);
    // It crashes: the supervisor starts it again from its first arguments.
    first.cast(sig("crash", json!({}))).unwrap();
    let (second, held) = recv(&mut rx).await;
    let second = second.unwrap();
    assert_eq!((second.id(), held), ("spec-1", 1));
    assert_ne!(second, first);
    assert!(!first.is_alive());
    let fresh = second.state().await.unwrap();
    assert_eq!(fresh.state().get("total"), None);
    // A stop on purpose: forgotten, nothing left.
    second.stop("normal").await.unwrap();
    assert_eq!(recv(&mut rx).await.1, 0);
    sup.stop(None);
}
