//! Durable timers (feature `persist`): Schedule and Cron stored with
//! wall-clock due times and re-armed on restore; missed cron runs are not
//! replayed; a hibernated agent with timers is thawed by the instance when
//! the next one is due, and a new instance re-arms the timers of the
//! hibernated agents of its registered kinds. Under tokio's paused clock (the runtime's wall
//! clock moves with it).
#![cfg(feature = "persist")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::storage::{Hooked, Hooks, Op};
use common::*;
use jido::directive::Restart;
use jido::persist::{MemoryStorage, Storage, StorageKey};
use jido::prelude::*;
use jido::server::{AgentEvent, AgentRef, Durability, ExitReason, Jido, JidoConfig, ServerOptions};
use jido::signal::Signal;
use serde_json::json;

fn ticks(agent: &AgentState) -> i64 {
    agent
        .state()
        .get("ticks")
        .and_then(|v| v.as_i64())
        .unwrap_or(0)
}

/// `arm` schedules a `tick` in `params.secs`; `cron` starts job `poll`
/// with `params.cron`; `tick` and `jido.cron_tick` count in `ticks`.
fn timed(id: &str) -> AgentState {
    let bump = || {
        act(|_, ctx| async move {
            let n = ctx
                .state()
                .and_then(|s| s.get("ticks")?.as_i64())
                .unwrap_or(0);
            Ok(json!({"ticks": n + 1}))
        })
    };
    TestAgent::new()
        .route(
            "arm",
            effects(|p| {
                vec![Directive::schedule(
                    Duration::from_secs(p["secs"].as_u64().unwrap_or(60)),
                    Signal::new("tick", json!({})),
                )]
            }),
        )
        .route(
            "cron",
            effects(|p| {
                vec![
                    Directive::cron(p["cron"].as_str().unwrap_or("*/10 * * * * *"), json!({}))
                        .job_id("poll")
                        .into(),
                ]
            }),
        )
        .route("tick", bump())
        .route("jido.cron_tick", bump())
        .build(id)
}

async fn instance(name: &str) -> (Jido, Arc<dyn Storage>) {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let jido = Jido::start(JidoConfig::new().name(name).storage(Arc::clone(&storage)))
        .await
        .unwrap();
    (jido, storage)
}

/// Two calls: what was in the mailbox before the first one is processed
/// when the second is answered.
async fn sync(agent: &AgentRef) {
    for _ in 0..2 {
        let answer = agent.call(sig("probe", json!({}))).await;
        assert_eq!(answer.unwrap_err().kind(), jido::ErrorKind::Routing);
    }
}

async fn ticks_of(agent: &AgentRef) -> i64 {
    sync(agent).await;
    ticks(&agent.state().await.unwrap())
}

async fn started(events: &mut jido::server::AgentEvents, id: &str) {
    loop {
        if let AgentEvent::Started { id: got, .. } = within(events.recv()).await.unwrap()
            && got == id
        {
            return;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_schedule_keeps_its_due_time_across_a_crash() {
    let (jido, _) = instance("t-crash").await;
    let mut events = jido.events();
    let agent = jido
        .start_agent(
            timed("t1"),
            ServerOptions::new()
                .durability(Durability::Checkpoint)
                .restart(Restart::Permanent),
        )
        .await
        .unwrap();
    started(&mut events, "t1").await;
    agent.call(sig("arm", json!({"secs": 60}))).await.unwrap();
    sync(&agent).await;
    assert_eq!(agent.status().await.unwrap().scheduled, 1);
    tokio::time::sleep(Duration::from_secs(10)).await;
    agent.actor_ref().kill();
    within(agent.wait_exit()).await;
    started(&mut events, "t1").await;
    let again = jido.whereis("t1").unwrap();
    assert_eq!(again.status().await.unwrap().scheduled, 1);
    // Due 60 s after it was armed, not 60 s after the restart.
    tokio::time::sleep(Duration::from_secs(49)).await;
    assert_eq!(ticks_of(&again).await, 0);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(ticks_of(&again).await, 1);
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(ticks_of(&again).await, 1, "once");
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_schedule_due_while_the_agent_was_down_fires_once_on_restore() {
    let (jido, storage) = instance("t-past").await;
    let opts = || ServerOptions::new().durability(Durability::Checkpoint);
    let agent = jido.start_agent(timed("t2"), opts()).await.unwrap();
    agent.call(sig("arm", json!({"secs": 30}))).await.unwrap();
    agent.stop("normal").await.unwrap();
    within(agent.wait_exit()).await;
    let cp = storage
        .get_checkpoint(&StorageKey::new("t-past", "test_agent", "t2").unwrap())
        .await
        .unwrap()
        .unwrap()
        .value;
    assert_eq!(cp.timers.len(), 1);
    assert_eq!(cp.timers[0]["kind"], json!("schedule"));
    assert_eq!(cp.timers[0]["signal"]["type"], json!("tick"));
    // Down past its due time.
    tokio::time::sleep(Duration::from_secs(120)).await;
    let agent = jido.start_agent(timed("t2"), opts()).await.unwrap();
    assert_eq!(ticks_of(&agent).await, 1);
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(ticks_of(&agent).await, 1, "once");
    // Fired: no longer stored.
    agent.stop("normal").await.unwrap();
    let cp = storage
        .get_checkpoint(&StorageKey::new("t-past", "test_agent", "t2").unwrap())
        .await
        .unwrap()
        .unwrap()
        .value;
    assert!(cp.timers.is_empty(), "{:?}", cp.timers);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn missed_cron_runs_are_not_replayed() {
    let (jido, storage) = instance("t-cron").await;
    let opts = || ServerOptions::new().durability(Durability::Checkpoint);
    let agent = jido.start_agent(timed("t3"), opts()).await.unwrap();
    agent
        .call(sig("cron", json!({"cron": "*/10 * * * * *"})))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(25)).await;
    let before = ticks_of(&agent).await;
    assert!((2..=3).contains(&before), "{before}");
    agent.stop("normal").await.unwrap();
    let cp = storage
        .get_checkpoint(&StorageKey::new("t-cron", "test_agent", "t3").unwrap())
        .await
        .unwrap()
        .unwrap()
        .value;
    assert_eq!(cp.timers.len(), 1);
    assert_eq!(cp.timers[0]["kind"], json!("cron"));
    assert_eq!(cp.timers[0]["job_id"], json!("poll"));
    assert_eq!(cp.timers[0]["cron"], json!("*/10 * * * * *"));
    // Down for 30 periods.
    tokio::time::sleep(Duration::from_secs(300)).await;
    let agent = jido.start_agent(timed("t3"), opts()).await.unwrap();
    assert_eq!(agent.status().await.unwrap().cron_jobs, ["poll"]);
    assert_eq!(ticks_of(&agent).await, before, "nothing replayed");
    // The next occurrence after now: one tick within a period, then one a
    // period later.
    let mut waited = 0;
    while ticks_of(&agent).await == before {
        assert!(waited < 11, "no tick within a period");
        tokio::time::sleep(Duration::from_secs(1)).await;
        waited += 1;
    }
    assert_eq!(ticks_of(&agent).await, before + 1);
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(ticks_of(&agent).await, before + 1);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(ticks_of(&agent).await, before + 2);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_agent_with_a_schedule_hibernates_and_the_instance_thaws_it_when_due() {
    let (jido, storage) = instance("t-hib").await;
    let make = || {
        (
            timed("ignored"),
            ServerOptions::new().idle_timeout(Duration::from_secs(60)),
        )
    };
    let agent = jido.get_or_start("t4", make).await.unwrap();
    agent.call(sig("arm", json!({"secs": 300}))).await.unwrap();
    // Idle with a live schedule: it hibernates all the same.
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert_eq!(within(agent.wait_exit()).await, ExitReason::Hibernated);
    assert!(jido.whereis("t4").is_none());
    let due = jido.parked_due("t4").expect("in the timer table");
    let cp = storage
        .get_checkpoint(&StorageKey::new("t-hib", "test_agent", "t4").unwrap())
        .await
        .unwrap()
        .unwrap()
        .value;
    assert_eq!(cp.timers[0]["due_ms"].as_i64(), Some(due));
    // Not before it is due.
    tokio::time::sleep(Duration::from_secs(200)).await;
    assert!(jido.whereis("t4").is_none());
    tokio::time::sleep(Duration::from_secs(45)).await;
    // Thawed at its due time (300 s after arming), the timer fired in it.
    let thawed = jido.whereis("t4").expect("thawed");
    assert_eq!(ticks_of(&thawed).await, 1);
    assert_eq!(jido.parked_due("t4"), None);
    // With nothing due any more, it hibernates and stays so.
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert_eq!(within(thawed.wait_exit()).await, ExitReason::Hibernated);
    assert_eq!(jido.parked_due("t4"), None);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(jido.whereis("t4").is_none());
    let thawed = jido.get_or_start("t4", make).await.unwrap();
    assert_eq!(ticks_of(&thawed).await, 1);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_hibernated_agent_with_a_cron_job_ticks_at_each_occurrence() {
    let (jido, storage) = instance("t-hib-cron").await;
    let make = || {
        (
            timed("ignored"),
            ServerOptions::new().idle_timeout(Duration::from_secs(60)),
        )
    };
    let agent = jido.get_or_start("t5", make).await.unwrap();
    agent
        .call(sig("cron", json!({"cron": "0 */5 * * * *"})))
        .await
        .unwrap();
    // Idle a minute (a tick may come first and restart the period).
    let exit = tokio::time::timeout(Duration::from_secs(400), agent.wait_exit()).await;
    assert_eq!(exit.unwrap(), ExitReason::Hibernated);
    let first_due = jido.parked_due("t5").expect("in the timer table");
    let key = StorageKey::new("t-hib-cron", "test_agent", "t5").unwrap();
    let stored_ticks = || async {
        storage.get_checkpoint(&key).await.unwrap().map_or(0, |cp| {
            cp.value
                .state
                .get("ticks")
                .and_then(|v| v.as_i64())
                .unwrap_or(0)
        })
    };
    let base = stored_ticks().await;
    // Each occurrence thaws it, ticks once, and it hibernates again.
    for round in base + 1..=base + 2 {
        let mut waited = 0;
        while stored_ticks().await < round {
            assert!(waited < 400, "round {round}: no tick");
            tokio::time::sleep(Duration::from_secs(1)).await;
            waited += 1;
        }
        assert_eq!(stored_ticks().await, round);
    }
    let due = jido
        .parked_due("t5")
        .expect("parked for the next occurrence");
    assert_eq!(due - first_due, 2 * 5 * 60 * 1000);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_new_instance_rearms_the_timers_of_hibernated_agents_of_registered_kinds() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let options = || ServerOptions::new().idle_timeout(Duration::from_secs(60));
    let config = || {
        JidoConfig::new()
            .name("t-boot")
            .storage(Arc::clone(&storage))
    };
    let jido = Jido::start(config()).await.unwrap();
    let agent = jido
        .get_or_start("t6", || (timed("ignored"), options()))
        .await
        .unwrap();
    agent.call(sig("arm", json!({"secs": 300}))).await.unwrap();
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert_eq!(within(agent.wait_exit()).await, ExitReason::Hibernated);
    let due = jido.parked_due("t6").expect("in the timer table");
    // The process ends: its timer table with it.
    jido.shutdown().await;
    tokio::time::sleep(Duration::from_secs(100)).await;

    // A kind not registered: nothing re-armed (thawed by a lookup only).
    let other = Jido::start(config().kind("other_kind", |id: &str| {
        Ok((timed(id), ServerOptions::new()))
    }))
    .await
    .unwrap();
    assert_eq!(other.parked_due("t6"), None);
    other.shutdown().await;

    let jido = Jido::start(config().kind("test_agent", move |id: &str| {
        Ok((
            timed(id),
            ServerOptions::new().idle_timeout(Duration::from_secs(60)),
        ))
    }))
    .await
    .unwrap();
    assert_eq!(jido.parked_due("t6"), Some(due));
    assert!(jido.whereis("t6").is_none());
    // Not before it is due (300 s after arming: 139 s from here).
    tokio::time::sleep(Duration::from_secs(130)).await;
    assert!(jido.whereis("t6").is_none());
    tokio::time::sleep(Duration::from_secs(10)).await;
    let thawed = jido.whereis("t6").expect("thawed at its due time");
    assert_eq!(ticks_of(&thawed).await, 1);
    assert_eq!(jido.parked_due("t6"), None);
    // Nothing due any more: it hibernates and is listed no longer.
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert_eq!(within(thawed.wait_exit()).await, ExitReason::Hibernated);
    assert!(
        storage
            .list_timers("t-boot", "test_agent", None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_kind_factory_making_another_kind_leaves_the_agent_to_its_next_lookup() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let config = || {
        JidoConfig::new()
            .name("t-boot-bad")
            .storage(Arc::clone(&storage))
    };
    let jido = Jido::start(config()).await.unwrap();
    let agent = jido
        .get_or_start("t7", || {
            (
                timed("ignored"),
                ServerOptions::new().idle_timeout(Duration::from_secs(60)),
            )
        })
        .await
        .unwrap();
    agent.call(sig("arm", json!({"secs": 300}))).await.unwrap();
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert_eq!(within(agent.wait_exit()).await, ExitReason::Hibernated);
    jido.shutdown().await;

    struct Other;
    impl Agent for Other {
        const NAME: &'static str = "other";
        type Schema = ();
    }
    let jido = Jido::start(config().kind("test_agent", |id: &str| {
        Ok((
            AgentState::new(Other, AgentOptions::new().id(id)),
            ServerOptions::new(),
        ))
    }))
    .await
    .unwrap();
    assert_eq!(jido.parked_due("t7"), None);
    jido.shutdown().await;
}

#[tokio::test]
async fn a_storage_that_cannot_list_timers_fails_the_start_with_kinds() {
    /// Fails `list_timers` as the trait's default does.
    struct NoListing;
    impl Hooks for NoListing {
        fn check(&self, op: Op, _: Option<&StorageKey>) -> jido::Result<()> {
            match op {
                Op::ListTimers => {
                    Err(jido::Error::storage("storage cannot list timers").with_retry(false))
                }
                _ => Ok(()),
            }
        }
    }
    let storage: Arc<dyn Storage> = Arc::new(Hooked::new(NoListing));
    // Without kinds the instance never asks.
    let jido = Jido::start(JidoConfig::new().storage(Arc::clone(&storage)))
        .await
        .unwrap();
    jido.shutdown().await;
    let err = Jido::start(
        JidoConfig::new()
            .storage(storage)
            .kind("test_agent", |id: &str| {
                Ok((timed(id), ServerOptions::new()))
            }),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), jido::ErrorKind::Storage);
    assert_eq!(err.message(), "storage cannot list timers");
    assert!(!err.retryable());
    assert_eq!(err.detail("kind"), Some(&json!("test_agent")));
}
