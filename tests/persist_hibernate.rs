//! Hibernation (feature `persist`): an idle agent checkpoints, stops and
//! leaves the registry; `get_or_start` thaws it by id with its state, once
//! for concurrent lookups. Under tokio's paused clock.
#![cfg(feature = "persist")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use jido::directive::Restart;
use jido::persist::{MemoryStorage, Storage, StorageKey};
use jido::prelude::*;
use jido::server::{
    AgentEvent, AwaitOptions, Durability, ExitReason, Jido, JidoConfig, ServerOptions,
};
use serde_json::json;

const IDLE: Duration = Duration::from_secs(60);

fn counter() -> (AgentState, ServerOptions) {
    (
        TestAgent::new()
            .route("counter.add", add())
            .build("ignored"),
        ServerOptions::new()
            .idle_timeout(IDLE)
            .restart(Restart::Permanent),
    )
}

fn total(agent: &AgentState) -> i64 {
    agent
        .state()
        .get("total")
        .and_then(|v| v.as_i64())
        .unwrap_or(0)
}

async fn instance(name: &str) -> (Jido, Arc<dyn Storage>) {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let jido = Jido::start(JidoConfig::new().name(name).storage(Arc::clone(&storage)))
        .await
        .unwrap();
    (jido, storage)
}

#[tokio::test(start_paused = true)]
async fn an_idle_agent_checkpoints_leaves_and_thaws_with_its_state() {
    let (jido, storage) = instance("hib").await;
    let agent = jido.get_or_start("h1", counter).await.unwrap();
    assert_eq!(agent.id(), "h1");
    agent
        .call(sig("counter.add", json!({"n": 5})))
        .await
        .unwrap();
    // Not yet.
    tokio::time::sleep(IDLE - Duration::from_secs(1)).await;
    assert!(agent.is_alive());
    assert!(
        storage
            .get_checkpoint(&StorageKey::new("hib", "test_agent", "h1").unwrap())
            .await
            .unwrap()
            .is_none()
    );
    // Idle long enough: checkpointed, stopped (not restarted), unregistered.
    assert_eq!(within(agent.wait_exit()).await, ExitReason::Hibernated);
    assert!(jido.whereis("h1").is_none());
    assert_eq!(jido.registered_count(), 0);
    let cp = storage
        .get_checkpoint(&StorageKey::new("hib", "test_agent", "h1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cp.value.state.get("total"), Some(&json!(5)));
    // Thawed by id.
    let thawed = jido.get_or_start("h1", counter).await.unwrap();
    assert_ne!(thawed.actor_ref().get_id(), agent.actor_ref().get_id());
    let state = thawed
        .call(sig("counter.add", json!({"n": 1})))
        .await
        .unwrap();
    assert_eq!(total(&state), 6);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn work_restarts_the_idle_timer() {
    let (jido, _) = instance("hib-timer").await;
    let agent = jido.get_or_start("h2", counter).await.unwrap();
    tokio::time::sleep(Duration::from_secs(40)).await;
    agent
        .call(sig("counter.add", json!({"n": 1})))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(40)).await;
    assert!(
        agent.is_alive(),
        "80 s after start, 40 s after the last signal"
    );
    tokio::time::sleep(Duration::from_secs(21)).await;
    assert_eq!(within(agent.wait_exit()).await, ExitReason::Hibernated);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_completion_waiter_keeps_the_agent_awake() {
    let (jido, _) = instance("hib-waiter").await;
    let agent = jido.get_or_start("h3", counter).await.unwrap();
    let waiting = {
        let agent = agent.clone();
        tokio::spawn(async move {
            agent
                .await_completion(AwaitOptions::new().timeout(Duration::from_secs(300)))
                .await
        })
    };
    tokio::time::sleep(Duration::from_secs(200)).await;
    assert!(agent.is_alive());
    // Once the waiter timed out, the agent may hibernate.
    let err = waiting.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    // The next idle check (at most one period later) finds nothing
    // keeping it awake.
    tokio::time::sleep(IDLE).await;
    assert_eq!(within(agent.wait_exit()).await, ExitReason::Hibernated);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn concurrent_lookups_start_a_hibernated_agent_once() {
    let (jido, _) = instance("hib-many").await;
    let agent = jido.get_or_start("h4", counter).await.unwrap();
    agent
        .call(sig("counter.add", json!({"n": 3})))
        .await
        .unwrap();
    tokio::time::sleep(IDLE).await;
    within(agent.wait_exit()).await;
    let mut events = jido.events();
    let lookups: Vec<_> = (0..100)
        .map(|_| {
            let jido = jido.clone();
            tokio::spawn(async move { jido.get_or_start("h4", counter).await })
        })
        .collect();
    let mut refs = Vec::new();
    for lookup in lookups {
        refs.push(lookup.await.unwrap().unwrap());
    }
    assert!(refs.windows(2).all(|w| w[0] == w[1]), "one agent for all");
    assert_eq!(total(&refs[0].state().await.unwrap()), 3);
    let mut starts = 0;
    while let Ok(Some(event)) = events.try_recv() {
        if matches!(event, AgentEvent::Started { ref id, .. } if id == "h4") {
            starts += 1;
        }
    }
    assert_eq!(starts, 1);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_journaling_agent_hibernates_with_its_journal_folded_in() {
    let (jido, storage) = instance("hib-journal").await;
    let make = || {
        let (agent, opts) = counter();
        (agent, opts.durability(Durability::Journal))
    };
    let agent = jido.get_or_start("h5", make).await.unwrap();
    for n in 1..=3 {
        agent
            .cast_durable(sig("counter.add", json!({"n": n})))
            .await
            .unwrap();
    }
    tokio::time::sleep(IDLE).await;
    assert_eq!(within(agent.wait_exit()).await, ExitReason::Hibernated);
    let key = StorageKey::new("hib-journal", "test_agent", "h5").unwrap();
    let cp = storage.get_checkpoint(&key).await.unwrap().unwrap();
    assert_eq!(
        (cp.value.applied_seq, cp.value.state.get("total")),
        (3, Some(&json!(6)))
    );
    assert!(storage.load_journal(&key, 0, 10).await.unwrap().is_empty());
    let thawed = jido.get_or_start("h5", make).await.unwrap();
    assert_eq!(total(&thawed.state().await.unwrap()), 6);
    jido.shutdown().await;
}

#[tokio::test]
async fn idle_timeout_needs_a_storage() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let err = jido
        .start_agent(
            TestAgent::new().build("n"),
            ServerOptions::new().idle_timeout(IDLE),
        )
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.message()),
        (ErrorKind::Configuration, "idle_timeout needs a storage")
    );
    jido.shutdown().await;
}

fn counter_with_total(id: &str, total: i64) -> AgentState {
    let mut state = serde_json::Map::new();
    state.insert("total".into(), json!(total));
    AgentState::new(
        TestAgent::new().route("counter.add", add()),
        AgentOptions::new().id(id).state(state),
    )
}

#[tokio::test(start_paused = true)]
async fn agents_created_hibernated_thaw_by_id_with_their_state() {
    let storage = Arc::new(MemoryStorage::new());
    let jido = Jido::start(
        JidoConfig::new()
            .name("bulk-hibernated")
            .storage(storage.clone()),
    )
    .await
    .unwrap();
    let created = jido
        .create_hibernated((0..100).map(|i| counter_with_total(&format!("c-{i}"), i)))
        .await
        .unwrap();
    assert_eq!(created, 100);
    assert_eq!(jido.registered_count(), 0);
    let key = StorageKey::new("bulk-hibernated", "test_agent", "c-42").unwrap();
    let stored = storage.get_checkpoint(&key).await.unwrap().unwrap();
    assert_eq!(
        (stored.rev, stored.value.state["total"].clone()),
        (1, json!(42))
    );

    // Thawed by id: its state, and it works and hibernates as any other.
    let agent = jido.get_or_start("c-42", counter).await.unwrap();
    assert_eq!(total(&agent.state().await.unwrap()), 42);
    let after = agent
        .call(sig("counter.add", json!({"n": 1})))
        .await
        .unwrap();
    assert_eq!(total(&after), 43);
    agent.wait_exit().await;
    let agent = jido.get_or_start("c-42", counter).await.unwrap();
    assert_eq!(total(&agent.state().await.unwrap()), 43);

    // A running agent is refused before anything is written.
    let err = jido
        .create_hibernated([
            counter_with_total("c-new", 1),
            counter_with_total("c-42", 0),
        ])
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.message()),
        (jido::ErrorKind::Conflict, "agent is running")
    );
    assert_eq!(err.detail("id"), Some(&json!("c-42")));
    let new_key = StorageKey::new("bulk-hibernated", "test_agent", "c-new").unwrap();
    assert!(storage.get_checkpoint(&new_key).await.unwrap().is_none());

    // One that exists already: its conflict, the others written.
    let err = jido
        .create_hibernated([counter_with_total("c-new", 1), counter_with_total("c-7", 0)])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), jido::ErrorKind::Conflict);
    assert_eq!(err.detail("id"), Some(&json!("c-7")));
    assert_eq!(err.detail("created"), Some(&json!(1)));
    let agent = jido.get_or_start("c-7", counter).await.unwrap();
    assert_eq!(total(&agent.state().await.unwrap()), 7);

    // Without a storage there is nowhere to hibernate to.
    let plain = Jido::start(JidoConfig::new()).await.unwrap();
    let err = plain
        .create_hibernated([counter_with_total("x", 1)])
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.message()),
        (jido::ErrorKind::Validation, "no storage configured")
    );
    plain.shutdown().await;
    jido.shutdown().await;
}
