//! Durable agents in the runtime (feature `persist`): restore on start and
//! on supervised restarts, checkpoints before replies, the journal and
//! `cast_durable`, poison entries to the dead letters, fencing, storage
//! failures as typed errors, migrations.
#![cfg(feature = "persist")]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::storage::{Hooked, Hooks, Op};
use common::*;
use jido::directive::{CustomDirective, Restart};
use jido::persist::{Checkpoint, Expect, MemoryStorage, Storage, StorageKey};
use jido::prelude::*;
use jido::server::{
    AgentEvent, DirectiveContext, DirectiveExec, DirectiveResult, Durability, ErrorPolicy,
    ExitReason, Jido, JidoConfig, ServerOptions,
};
use jido::signal::Signal;
use serde_json::{Map, Value, json};

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

fn key(ns: &str, id: &str) -> StorageKey {
    StorageKey::new(ns, "test_agent", id).unwrap()
}

async fn instance(name: &str, storage: Arc<dyn Storage>) -> Jido {
    Jido::start(
        JidoConfig::new()
            .name(name)
            .storage(storage)
            .directive_exec(CrashExec),
    )
    .await
    .unwrap()
}

fn total(agent: &AgentState) -> i64 {
    agent
        .state()
        .get("total")
        .and_then(|v| v.as_i64())
        .unwrap_or(0)
}

/// Waits for the `Started` event of `id` (a restart).
async fn started(events: &mut jido::server::AgentEvents, id: &str) {
    loop {
        if let AgentEvent::Started { id: got, .. } = within(events.recv()).await.unwrap()
            && got == id
        {
            return;
        }
    }
}

/// `counter.add` adds `n`; the fifth `counter.add` crashes the agent (a
/// directive whose executor panics) without changing the state.
fn crash_on_fifth(id: &str) -> AgentState {
    TestAgent::new()
        .route(
            "counter.add",
            act(|p, ctx| async move {
                let seen = ctx
                    .state()
                    .and_then(|s| s.get("seen")?.as_i64())
                    .unwrap_or(0);
                if seen == 4 {
                    ctx.push_effect(Directive::custom(Crash));
                    return Ok(json!({}));
                }
                let total = ctx
                    .state()
                    .and_then(|s| s.get("total")?.as_i64())
                    .unwrap_or(0);
                Ok(json!({"total": total + p["n"].as_i64().unwrap_or(0), "seen": seen + 1}))
            }),
        )
        .build(id)
}

#[tokio::test]
async fn a_permanent_agent_that_panics_on_its_fifth_signal_resumes_after_its_fourth() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let jido = instance("restart", Arc::clone(&storage)).await;
    let mut events = jido.events();
    let agent = jido
        .start_agent(
            crash_on_fifth("c1"),
            ServerOptions::new()
                .restart(Restart::Permanent)
                .durability(Durability::Checkpoint),
        )
        .await
        .unwrap();
    started(&mut events, "c1").await;
    for n in 1..=4 {
        agent
            .call(sig("counter.add", json!({"n": n})))
            .await
            .unwrap();
    }
    // The fifth: answered (its state change, none, is durable), then the
    // directive crashes the agent.
    let fifth = agent
        .call(sig("counter.add", json!({"n": 5})))
        .await
        .unwrap();
    assert_eq!(total(&fifth), 10);
    assert!(matches!(
        within(agent.wait_exit()).await,
        ExitReason::Failed(m) if m.contains("boom")
    ));
    started(&mut events, "c1").await;
    let again = jido.whereis("c1").expect("restarted");
    assert_ne!(again.actor_ref().get_id(), agent.actor_ref().get_id());
    let state = again.state().await.unwrap();
    assert_eq!(total(&state), 10, "the state after the fourth signal");
    assert_eq!(state.state().get("seen").and_then(|v| v.as_i64()), Some(4));
    // The checkpoint holds it too.
    let cp = storage
        .get_checkpoint(&key("restart", "c1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cp.value.state.get("total"), Some(&json!(10)));
    jido.shutdown().await;
}

#[tokio::test]
async fn without_storage_a_restart_starts_from_the_initial_state() {
    let jido = Jido::start(JidoConfig::new().directive_exec(CrashExec))
        .await
        .unwrap();
    let mut events = jido.events();
    let agent = jido
        .start_agent(
            crash_on_fifth("v1"),
            ServerOptions::new().restart(Restart::Permanent),
        )
        .await
        .unwrap();
    started(&mut events, "v1").await;
    for n in 1..=5 {
        agent
            .call(sig("counter.add", json!({"n": n})))
            .await
            .unwrap();
    }
    within(agent.wait_exit()).await;
    started(&mut events, "v1").await;
    let state = jido.whereis("v1").unwrap().state().await.unwrap();
    assert_eq!(total(&state), 0);
    jido.shutdown().await;
}

#[tokio::test]
async fn a_checkpointed_agent_resumes_in_a_new_instance() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    for (round, mode) in [
        (0, Durability::Checkpoint),
        (1, Durability::Checkpoint),
        (2, Durability::Journal),
    ] {
        let jido = instance("resume", Arc::clone(&storage)).await;
        let agent = jido
            .start_agent(
                TestAgent::new().route("counter.add", add()).build("r1"),
                ServerOptions::new().durability(mode),
            )
            .await
            .unwrap();
        let before = total(&agent.state().await.unwrap());
        assert_eq!(before, round * 3);
        let after = agent
            .call(sig("counter.add", json!({"n": 3})))
            .await
            .unwrap();
        assert_eq!(total(&after), round * 3 + 3);
        // Killed: no stop-time checkpoint; the call's was durable already.
        agent.actor_ref().kill();
        within(agent.wait_exit()).await;
        jido.shutdown().await;
    }
    let cp = storage
        .get_checkpoint(&key("resume", "r1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cp.value.state.get("total"), Some(&json!(9)));
    assert_eq!(
        (cp.value.agent.as_str(), cp.value.version.as_str()),
        ("test_agent", "0.1.0")
    );
}

#[tokio::test]
async fn a_volatile_agent_with_storage_is_checkpointed_when_it_stops() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let jido = instance("volatile", Arc::clone(&storage)).await;
    let agent = jido
        .start_agent(
            TestAgent::new().route("counter.add", add()).build("v1"),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    agent
        .call(sig("counter.add", json!({"n": 2})))
        .await
        .unwrap();
    // No write on the signal path.
    assert!(
        storage
            .get_checkpoint(&key("volatile", "v1"))
            .await
            .unwrap()
            .is_none()
    );
    jido.stop_agent("v1").await.unwrap();
    let cp = storage
        .get_checkpoint(&key("volatile", "v1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cp.value.state.get("total"), Some(&json!(2)));
    let again = jido
        .start_agent(
            TestAgent::new().route("counter.add", add()).build("v1"),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    assert_eq!(total(&again.state().await.unwrap()), 2);
    jido.shutdown().await;
}

#[tokio::test]
async fn durable_casts_survive_a_kill_and_replay_in_order() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let jido = instance("journal", Arc::clone(&storage)).await;
    let opts = ServerOptions::new().durability(Durability::Journal);
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("hold", gated(Arc::clone(&gate)))
                .route("log.append", append())
                .build("j1"),
            opts.clone(),
        )
        .await
        .unwrap();
    // The first signal blocks; the rest are journaled and wait.
    agent.cast_durable(sig("hold", json!({}))).await.unwrap();
    for i in 0..5 {
        agent
            .cast_durable(sig("log.append", json!({"item": i})))
            .await
            .unwrap();
    }
    let k = key("journal", "j1");
    assert_eq!(storage.journal_head(&k).await.unwrap(), 6);
    agent.actor_ref().kill();
    within(agent.wait_exit()).await;
    // The next incarnation replays all six, in order.
    gate.add_permits(1);
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("hold", gated(Arc::clone(&gate)))
                .route("log.append", append())
                .build("j1"),
            opts,
        )
        .await
        .unwrap();
    let state = agent
        .call(sig("log.append", json!({"item": 5})))
        .await
        .unwrap();
    assert_eq!(
        state.state().get("log").map(|v| v.to_json()),
        // The held signal logs too (no item).
        Some(json!([null, 0, 1, 2, 3, 4, 5]))
    );
    // The call's checkpoint folded the journal in.
    let cp = storage.get_checkpoint(&k).await.unwrap().unwrap();
    assert_eq!(cp.value.applied_seq, 7);
    assert!(storage.load_journal(&k, 0, 10).await.unwrap().is_empty());
    jido.shutdown().await;
}

#[tokio::test]
async fn cast_durable_needs_a_journaling_agent() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let jido = instance("needs-journal", storage).await;
    let agent = jido
        .start_agent(
            TestAgent::new().route("counter.add", add()).build("n1"),
            ServerOptions::new().durability(Durability::Checkpoint),
        )
        .await
        .unwrap();
    let err = agent
        .cast_durable(sig("counter.add", json!({"n": 1})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(
        err.message(),
        "cast_durable needs an agent with durability journal"
    );
    // And a durable mode needs a storage.
    let err = Jido::start(JidoConfig::new())
        .await
        .unwrap()
        .start_agent(
            TestAgent::new().build("n2"),
            ServerOptions::new().durability(Durability::Journal),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), "durability needs a storage");
    jido.shutdown().await;
}

#[tokio::test]
async fn a_journal_entry_that_keeps_crashing_the_agent_goes_to_the_dead_letters() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let jido = instance("poison", Arc::clone(&storage)).await;
    let mut events = jido.events();
    let slot: Arc<Mutex<Option<Jido>>> = Arc::new(Mutex::new(Some(jido.clone())));
    let kills = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let build = {
        let slot = Arc::clone(&slot);
        let kills = Arc::clone(&kills);
        move || {
            let slot = Arc::clone(&slot);
            let kills = Arc::clone(&kills);
            TestAgent::new()
                .route("counter.add", add())
                // Kills its own agent mid-`cmd`: a crash before any write.
                .route(
                    "poison",
                    act(move |_, _| {
                        let slot = Arc::clone(&slot);
                        let kills = Arc::clone(&kills);
                        async move {
                            kills.fetch_add(1, Ordering::SeqCst);
                            let jido = slot.lock().unwrap().clone();
                            if let Some(agent) = jido.and_then(|j| j.whereis("p1")) {
                                agent.actor_ref().kill();
                            }
                            std::future::pending::<()>().await;
                            Ok(json!({}))
                        }
                    }),
                )
                .route(
                    "jido.agent.dead_letter",
                    act(|p, _| async move { Ok(json!({"dead": p})) }),
                )
                .build("p1")
        }
    };
    let agent = jido
        .start_agent(
            build(),
            ServerOptions::new()
                .restart(Restart::Permanent)
                .durability(Durability::Journal),
        )
        .await
        .unwrap();
    started(&mut events, "p1").await;
    agent
        .call(sig("counter.add", json!({"n": 7})))
        .await
        .unwrap();
    let poison = sig("poison", json!({}));
    let poison_id = poison.id().to_owned();
    agent.cast_durable(poison).await.unwrap();
    // Crashed live, then on two replays; the third restore moves it aside.
    for _ in 0..3 {
        started(&mut events, "p1").await;
    }
    let agent = jido.whereis("p1").unwrap();
    let state = agent
        .call(sig("counter.add", json!({"n": 1})))
        .await
        .unwrap();
    assert_eq!(kills.load(Ordering::SeqCst), 3);
    assert_eq!(total(&state), 8);
    let dead = state.state().get("dead").map(|v| v.to_json()).unwrap();
    assert_eq!(dead["seq"], json!(2));
    assert_eq!(dead["attempts"], json!(3));
    assert_eq!(dead["signal_type"], json!("poison"));
    assert_eq!(dead["signal_id"], json!(poison_id));
    assert_eq!(dead["key"], json!("poison/test_agent/p1"));
    let letters = storage
        .load_dead_letters(&key("poison", "p1"), 10)
        .await
        .unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!((letters[0].seq, letters[0].attempts), (2, 3));
    assert_eq!(
        letters[0].error["message"],
        json!("journal entry kept crashing the agent")
    );
    slot.lock().unwrap().take();
    jido.shutdown().await;
}

#[tokio::test]
async fn a_fenced_agent_stops_with_reason_fenced_and_is_not_restarted() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let jido = instance("fence", Arc::clone(&storage)).await;
    let agent = jido
        .start_agent(
            TestAgent::new().route("counter.add", add()).build("f1"),
            ServerOptions::new()
                .restart(Restart::Permanent)
                .durability(Durability::Checkpoint),
        )
        .await
        .unwrap();
    agent
        .call(sig("counter.add", json!({"n": 1})))
        .await
        .unwrap();
    // The agent claimed epoch 1 when it started; another node takes the
    // key over.
    let k = key("fence", "f1");
    assert_eq!(storage.owner(&k).await.unwrap().map(|o| o.epoch), Some(1));
    assert_eq!(storage.claim(&k, "node-b").await.unwrap(), 2);
    let err = agent
        .call(sig("counter.add", json!({"n": 1})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced);
    assert!(!err.retryable());
    assert_eq!(within(agent.wait_exit()).await, ExitReason::Fenced);
    assert_eq!(ExitReason::Fenced.to_string(), "fenced");
    assert!(jido.whereis("f1").is_none(), "not restarted");
    let cp = storage.get_checkpoint(&k).await.unwrap().unwrap();
    assert_eq!(cp.value.state.get("total"), Some(&json!(1)));
    jido.shutdown().await;
}

/// A memory storage whose writes fail while `failing` is set.
struct Flaky {
    failing: AtomicBool,
}

impl Hooks for Flaky {
    fn check(&self, op: Op, _: Option<&StorageKey>) -> jido::Result<()> {
        if op.is_agent_write() && self.failing.load(Ordering::SeqCst) {
            Err(jido::Error::storage("disk full"))
        } else {
            Ok(())
        }
    }
}

#[tokio::test]
async fn a_storage_failure_is_a_retryable_error_and_the_durable_state_stays_the_truth() {
    let flaky = Arc::new(Hooked::new(Flaky {
        failing: AtomicBool::new(false),
    }));
    let storage: Arc<dyn Storage> = flaky.clone();
    let (errors_tx, mut errors) = tokio::sync::mpsc::unbounded_channel();
    let jido = instance("flaky", storage).await;
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("counter.add", add())
                .route("log.append", append())
                .build("s1"),
            ServerOptions::new()
                .durability(Durability::Checkpoint)
                .error_policy(ErrorPolicy::custom(move |event| {
                    let _ = errors_tx
                        .send((event.error.message().to_owned(), event.context.to_owned()));
                    Ok(jido::directive::ErrorDecision::Continue)
                })),
        )
        .await
        .unwrap();
    agent
        .call(sig("counter.add", json!({"n": 1})))
        .await
        .unwrap();
    flaky.failing.store(true, Ordering::SeqCst);
    let err = agent
        .call(sig("counter.add", json!({"n": 10})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Storage);
    assert_eq!(err.message(), "disk full");
    assert!(err.retryable());
    // The error policy saw it too.
    assert_eq!(
        recv(&mut errors).await,
        ("disk full".to_owned(), "persist".to_owned())
    );
    // The state in memory went back to the durable one.
    assert_eq!(total(&agent.state().await.unwrap()), 1);
    flaky.failing.store(false, Ordering::SeqCst);
    let state = agent
        .call(sig("counter.add", json!({"n": 100})))
        .await
        .unwrap();
    assert_eq!(total(&state), 101);
    jido.shutdown().await;

    // Journal mode: a failed append refuses the durable cast.
    let flaky = Arc::new(Hooked::new(Flaky {
        failing: AtomicBool::new(true),
    }));
    let jido = instance("flaky-journal", flaky.clone()).await;
    let agent = jido
        .start_agent(
            TestAgent::new().route("counter.add", add()).build("s2"),
            ServerOptions::new().durability(Durability::Journal),
        )
        .await
        .unwrap();
    let err = agent
        .cast_durable(sig("counter.add", json!({"n": 1})))
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.message(), err.retryable()),
        (ErrorKind::Storage, "disk full", true)
    );
    let err = agent
        .call(sig("counter.add", json!({"n": 1})))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Storage);
    flaky.failing.store(false, Ordering::SeqCst);
    agent
        .cast_durable(sig("counter.add", json!({"n": 5})))
        .await
        .unwrap();
    let state = agent
        .call(sig("counter.add", json!({"n": 1})))
        .await
        .unwrap();
    assert_eq!(total(&state), 6, "refused signals were never processed");
    jido.shutdown().await;
}

#[tokio::test]
async fn a_storage_failure_on_start_is_the_start_error() {
    /// Every operation fails.
    struct Down;
    impl Hooks for Down {
        fn check(&self, _: Op, _: Option<&StorageKey>) -> jido::Result<()> {
            Err(jido::Error::storage("connection refused"))
        }
    }
    let jido = instance("down", Arc::new(Hooked::new(Down))).await;
    let err = jido
        .start_agent(TestAgent::new().build("d1"), ServerOptions::new())
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.message(), err.retryable()),
        (ErrorKind::Storage, "connection refused", true)
    );
    assert!(jido.whereis("d1").is_none());
    jido.shutdown().await;
}

struct Versioned;
impl Agent for Versioned {
    const NAME: &'static str = "versioned";
    const VERSION: &'static str = "2.0.0";
    type Schema = ();
    fn migrate(
        &self,
        from: &str,
        mut state: Map<String, Value>,
    ) -> jido::Result<Map<String, Value>> {
        if from == "1.0.0" {
            let n = state.remove("n").unwrap_or(json!(0));
            state.insert("count".into(), n);
            return Ok(state);
        }
        Err(jido::Error::validation("unknown version").with_detail("got", from.to_owned()))
    }
}

#[tokio::test]
async fn migrate_brings_an_older_checkpoint_up_and_a_refused_one_stays_untouched() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let k = StorageKey::new("migrate", "versioned", "m1").unwrap();
    let mut old = Checkpoint::new("versioned", "1.0.0", "m1");
    old.state.insert("n".into(), json!(41));
    storage
        .put_checkpoint(&k, &old, Expect::Absent, 0)
        .await
        .unwrap();
    let jido = instance("migrate", Arc::clone(&storage)).await;
    let agent = jido
        .start_agent(
            AgentState::new(Versioned, AgentOptions::new().id("m1")),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    let state = agent.state().await.unwrap();
    assert_eq!(
        state.state().get("count").and_then(|v| v.as_i64()),
        Some(41)
    );
    assert!(state.state().get("n").is_none());
    jido.stop_agent("m1").await.unwrap();
    let cp = storage.get_checkpoint(&k).await.unwrap().unwrap();
    assert_eq!(cp.value.version, "2.0.0");

    // A version migrate refuses: the agent does not start, the checkpoint stays.
    let k2 = StorageKey::new("migrate", "versioned", "m2").unwrap();
    let mut old = Checkpoint::new("versioned", "0.1.0", "m2");
    old.state.insert("n".into(), json!(1));
    storage
        .put_checkpoint(&k2, &old, Expect::Absent, 0)
        .await
        .unwrap();
    let err = jido
        .start_agent(
            AgentState::new(Versioned, AgentOptions::new().id("m2")),
            ServerOptions::new().durability(Durability::Checkpoint),
        )
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.message()),
        (ErrorKind::Validation, "unknown version")
    );
    assert_eq!(err.detail("key"), Some(&json!("migrate/versioned/m2")));
    let cp = storage.get_checkpoint(&k2).await.unwrap().unwrap();
    assert_eq!((cp.rev, cp.value), (1, old));
    jido.shutdown().await;
}
