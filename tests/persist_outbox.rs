//! Durable directives (feature `persist`): the outbox stored with a
//! `cmd`'s checkpoint and run again after a restore, duplicates dropped
//! by a journaling receiver, custom directives that opt in. Crashes are
//! forced with a directive whose executor panics (the agent dies between
//! its checkpoint and the directives behind the panicking one); storage
//! is a `MemoryStorage`; tokio's clock is paused.
#![cfg(feature = "persist")]

mod common;

use std::sync::{Arc, Mutex};

use common::storage::{Hooked, Hooks, Op};
use common::*;
use jido::directive::{CustomDirective, Restart};
use jido::persist::{Checkpoint, CheckpointDelta, MemoryStorage, Storage, StorageKey};
use jido::prelude::*;
use jido::server::{
    ActorTarget, AgentEvent, DirectiveContext, DirectiveExec, DirectiveResult, Durability,
    ExitReason, Jido, JidoConfig, ServerOptions,
};
use jido::signal::Signal;
use jido::signal::dispatch::DispatchConfig;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// A directive whose executor panics: the agent crashes where it runs.
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

/// A custom directive that opts in to durability.
#[derive(Debug)]
struct Notify {
    channel: String,
}
impl CustomDirective for Notify {
    fn durable(&self) -> Option<Value> {
        Some(json!({"channel": self.channel}))
    }
}
/// A custom directive that does not.
#[derive(Debug)]
struct Volatile(String);
impl CustomDirective for Volatile {}

struct NotifyExec(mpsc::UnboundedSender<String>);
impl DirectiveExec for NotifyExec {
    type Directive = Notify;
    fn exec(&self, d: &Notify, _: &Signal, _: &DirectiveContext<'_>) -> DirectiveResult {
        let _ = self.0.send(format!("notify:{}", d.channel));
        DirectiveResult::Ok
    }
    fn decode(&self, data: &Value) -> Option<jido::Result<Notify>> {
        let channel = data.get("channel")?.as_str()?.to_owned();
        Some(Ok(Notify { channel }))
    }
}
struct VolatileExec(mpsc::UnboundedSender<String>);
impl DirectiveExec for VolatileExec {
    type Directive = Volatile;
    fn exec(&self, d: &Volatile, _: &Signal, _: &DirectiveContext<'_>) -> DirectiveResult {
        let _ = self.0.send(format!("volatile:{}", d.0));
        DirectiveResult::Ok
    }
}

/// A memory storage that, once a checkpoint of agent `watch` with a
/// pending outbox landed, refuses that agent's later writes (until
/// `watch` is cleared): what a process that died right after running the
/// outbox would not have written.
struct Frozen {
    watch: Mutex<Option<String>>,
    frozen: std::sync::atomic::AtomicBool,
}

impl Frozen {
    fn landed(&self, key: &StorageKey, cp: &Checkpoint) {
        if self.watch.lock().unwrap().as_deref() == Some(key.id()) && cp.outbox_pending() {
            self.frozen.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

impl Hooks for Frozen {
    fn check(&self, op: Op, key: Option<&StorageKey>) -> jido::Result<()> {
        let watched = key.is_some_and(|k| self.watch.lock().unwrap().as_deref() == Some(k.id()));
        if op.is_agent_write() && watched && self.frozen.load(std::sync::atomic::Ordering::SeqCst) {
            Err(jido::Error::storage("process gone"))
        } else {
            Ok(())
        }
    }
    fn put(&self, key: &StorageKey, cp: &Checkpoint) {
        self.landed(key, cp);
    }
    fn delta(&self, key: &StorageKey, delta: &CheckpointDelta) {
        self.landed(key, &delta.checkpoint);
    }
}

fn key(ns: &str, id: &str) -> StorageKey {
    StorageKey::new(ns, "test_agent", id).unwrap()
}

fn count(agent: &AgentState, field: &str) -> i64 {
    agent
        .state()
        .get(field)
        .and_then(|v| v.as_i64())
        .unwrap_or(0)
}

/// `field += 1`.
fn bump(field: &'static str) -> DynAction {
    act(move |_, ctx| async move {
        let n = ctx
            .state()
            .and_then(|s| s.get(field)?.as_i64())
            .unwrap_or(0);
        Ok(json!({ field: n + 1 }))
    })
}

/// Two calls: everything in the agent's mailbox before the first one is
/// processed when the second is answered (signals its directives sent to
/// itself included).
async fn sync(agent: &jido::server::AgentRef) {
    for _ in 0..2 {
        let answer = agent.call(sig("probe", json!({}))).await;
        assert_eq!(answer.unwrap_err().kind(), jido::ErrorKind::Routing);
    }
}

/// Waits for the `Started` event of `id`.
async fn started(events: &mut jido::server::AgentEvents, id: &str) {
    loop {
        if let AgentEvent::Started { id: got, .. } = within(events.recv()).await.unwrap()
            && got == id
        {
            return;
        }
    }
}

/// `order.place` changes the state and decides `directives()`, the first
/// time only (`placed` counts the runs); `order.placed` counts arrivals.
fn placing(id: &str, directives: fn() -> Vec<Directive>) -> AgentState {
    TestAgent::new()
        .route(
            "order.place",
            act(move |_, ctx| async move {
                let placed = ctx
                    .state()
                    .and_then(|s| s.get("placed")?.as_i64())
                    .unwrap_or(0);
                if placed == 0 {
                    for d in directives() {
                        ctx.push_effect(d);
                    }
                }
                Ok(json!({"placed": placed + 1}))
            }),
        )
        .route("order.placed", bump("arrived"))
        .build(id)
}

#[tokio::test(start_paused = true)]
async fn directives_behind_a_crash_run_after_the_restore() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let jido = Jido::start(
        JidoConfig::new()
            .name("outbox")
            .storage(Arc::clone(&storage))
            .directive_exec(CrashExec),
    )
    .await
    .unwrap();
    let mut events = jido.events();
    // The crash comes first: the Emit (back to the agent itself) was
    // decided and checkpointed, but never ran.
    let agent = jido
        .start_agent(
            placing("o1", || {
                vec![
                    Directive::custom(Crash),
                    Directive::emit(Signal::new("order.placed", json!({}))),
                ]
            }),
            ServerOptions::new()
                .durability(Durability::Checkpoint)
                .restart(Restart::Permanent),
        )
        .await
        .unwrap();
    started(&mut events, "o1").await;
    let answer = agent.call(sig("order.place", json!({}))).await.unwrap();
    assert_eq!(count(&answer, "placed"), 1);
    assert!(matches!(
        within(agent.wait_exit()).await,
        ExitReason::Failed(m) if m.contains("boom")
    ));
    started(&mut events, "o1").await;
    let again = jido.whereis("o1").expect("restarted");
    // The restored outbox runs before anything else; its Emit (back to
    // the agent) is in the mailbox before the second call.
    sync(&again).await;
    let state = again.state().await.unwrap();
    assert_eq!(count(&state, "placed"), 1);
    assert_eq!(count(&state, "arrived"), 1);
    // Once it ran, the stored outbox is emptied (a later restore does not
    // run it again).
    let cp = storage
        .get_checkpoint(&key("outbox", "o1"))
        .await
        .unwrap()
        .unwrap();
    assert!(cp.value.outbox.is_empty(), "{:?}", cp.value.outbox);
    assert_eq!(cp.value.state.get("arrived"), Some(&json!(1)));
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_checkpoint_holds_the_outbox_in_its_data_form() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let jido = Jido::start(
        JidoConfig::new()
            .name("outbox-form")
            .storage(Arc::clone(&storage))
            .directive_exec(CrashExec),
    )
    .await
    .unwrap();
    let emitted = Signal::new("order.placed", json!({"n": 1}));
    let id = emitted.id().to_owned();
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route(
                    "order.place",
                    effects(move |_| {
                        vec![
                            Directive::custom(Crash),
                            Directive::emit(emitted.clone()),
                            Directive::stop_child("worker"),
                            Directive::cron("0 0 * * * *", json!({"poll": 1}))
                                .job_id("hourly")
                                .into(),
                            Directive::stop(),
                        ]
                    }),
                )
                .build("o2"),
            // Temporary: not restarted, the outbox stays as written.
            ServerOptions::new().durability(Durability::Checkpoint),
        )
        .await
        .unwrap();
    agent.call(sig("order.place", json!({}))).await.unwrap();
    within(agent.wait_exit()).await;
    let cp = storage
        .get_checkpoint(&key("outbox-form", "o2"))
        .await
        .unwrap()
        .unwrap()
        .value;
    assert!(cp.outbox_pending());
    let kinds: Vec<&str> = cp
        .outbox
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    // The panicking custom directive has no data form.
    assert_eq!(kinds, ["emit", "stop_child", "cron", "stop"]);
    assert_eq!(cp.outbox[0]["signal"]["id"], json!(id));
    assert_eq!(cp.outbox[0]["input"]["type"], json!("order.place"));
    assert_eq!(cp.outbox[1]["tag"], json!("worker"));
    assert_eq!(cp.outbox[2]["job_id"], json!("hourly"));
    assert_eq!(cp.outbox[2]["message"], json!({"json": {"poll": 1}}));
    assert_eq!(cp.outbox[3]["reason"], json!("normal"));
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_journaling_receiver_drops_an_emit_sent_again_after_a_restore() {
    let frozen = Arc::new(Hooked::new(Frozen {
        watch: Mutex::new(Some("s1".into())),
        frozen: Default::default(),
    }));
    let storage: Arc<dyn Storage> = frozen.clone();
    let jido = Jido::start(
        JidoConfig::new()
            .name("dedupe")
            .storage(Arc::clone(&storage)),
    )
    .await
    .unwrap();
    let mut events = jido.events();
    let receiver = |id: &str| {
        TestAgent::new()
            .route("order.placed", bump("arrived"))
            .build(id)
    };
    // Journal mode drops duplicates; Checkpoint mode does not.
    let journaled = jido
        .start_agent(
            receiver("j1"),
            ServerOptions::new().durability(Durability::Journal),
        )
        .await
        .unwrap();
    let plain = jido
        .start_agent(
            receiver("p1"),
            ServerOptions::new().durability(Durability::Checkpoint),
        )
        .await
        .unwrap();
    let dispatch = DispatchConfig::new(ActorTarget::new(journaled.clone()))
        .unwrap()
        .with(ActorTarget::new(plain.clone()))
        .unwrap();
    let sender = jido
        .start_agent(
            placing("s1", || {
                vec![Directive::emit(Signal::new("order.placed", json!({})))]
            }),
            ServerOptions::new()
                .durability(Durability::Checkpoint)
                .restart(Restart::Permanent)
                .default_dispatch(dispatch),
        )
        .await
        .unwrap();
    started(&mut events, "s1").await;
    sender.call(sig("order.place", json!({}))).await.unwrap();
    sync(&plain).await;
    sync(&journaled).await;
    assert_eq!(count(&plain.state().await.unwrap(), "arrived"), 1);
    // The checkpoint emptying the outbox did not land.
    let cp = storage
        .get_checkpoint(&key("dedupe", "s1"))
        .await
        .unwrap()
        .unwrap()
        .value;
    assert_eq!(cp.outbox.len(), 1);
    sender.actor_ref().kill();
    within(sender.wait_exit()).await;
    *frozen.watch.lock().unwrap() = None;
    started(&mut events, "s1").await;
    let again = jido.whereis("s1").unwrap();
    assert_eq!(
        count(&again.state().await.unwrap(), "placed"),
        1,
        "the cmd is not run again"
    );
    // Its restored outbox ran before this call is answered, and the
    // receivers got its Emit before the calls below.
    again.call(sig("order.place", json!({}))).await.unwrap();
    sync(&plain).await;
    sync(&journaled).await;
    assert_eq!(
        count(&plain.state().await.unwrap(), "arrived"),
        2,
        "at least once"
    );
    assert_eq!(
        count(&journaled.state().await.unwrap(), "arrived"),
        1,
        "once"
    );
    // The receiver's checkpoint keeps the ids it saw.
    journaled.stop("normal").await.unwrap();
    let cp = storage
        .get_checkpoint(&StorageKey::new("dedupe", "test_agent", "j1").unwrap())
        .await
        .unwrap()
        .unwrap()
        .value;
    // The Emit and the four probes (at most `RECENT_IDS` are kept).
    assert_eq!(cp.recent_ids.len(), 5, "{:?}", cp.recent_ids);
    assert_eq!(jido::server::RECENT_IDS, 1024);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_journaling_agent_accepts_a_signal_id_once_across_a_restart() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let jido = Jido::start(JidoConfig::new().name("ids").storage(Arc::clone(&storage)))
        .await
        .unwrap();
    let start = |jido: Jido| async move {
        jido.start_agent(
            TestAgent::new().route("counter.add", add()).build("i1"),
            ServerOptions::new().durability(Durability::Journal),
        )
        .await
        .unwrap()
    };
    let agent = start(jido.clone()).await;
    let signal = sig("counter.add", json!({"n": 5}));
    agent.cast_durable(signal.clone()).await.unwrap();
    // Acknowledged, not processed twice.
    agent.cast_durable(signal.clone()).await.unwrap();
    agent.cast(signal.clone()).unwrap();
    let state = agent
        .call(sig("counter.add", json!({"n": 1})))
        .await
        .unwrap();
    assert_eq!(state.state().get("total").and_then(|v| v.as_i64()), Some(6));
    // Killed, restored from checkpoint and journal: the id is still known.
    agent.actor_ref().kill();
    within(agent.wait_exit()).await;
    let agent = start(jido.clone()).await;
    agent.cast_durable(signal).await.unwrap();
    let state = agent
        .call(sig("counter.add", json!({"n": 1})))
        .await
        .unwrap();
    assert_eq!(state.state().get("total").and_then(|v| v.as_i64()), Some(7));
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_custom_directive_that_opts_in_runs_after_the_restore_and_one_that_does_not_is_lost() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let jido = Jido::start(
        JidoConfig::new()
            .name("custom")
            .storage(Arc::clone(&storage))
            .directive_exec(CrashExec)
            .directive_exec(NotifyExec(tx.clone()))
            .directive_exec(VolatileExec(tx.clone())),
    )
    .await
    .unwrap();
    let mut events = jido.events();
    let agent = jido
        .start_agent(
            placing("c1", || {
                vec![
                    Directive::custom(Crash),
                    Directive::custom(Volatile("v".into())),
                    Directive::custom(Notify {
                        channel: "ops".into(),
                    }),
                ]
            }),
            ServerOptions::new()
                .durability(Durability::Checkpoint)
                .restart(Restart::Permanent),
        )
        .await
        .unwrap();
    started(&mut events, "c1").await;
    agent.call(sig("order.place", json!({}))).await.unwrap();
    within(agent.wait_exit()).await;
    started(&mut events, "c1").await;
    let again = jido.whereis("c1").unwrap();
    again.state().await.unwrap();
    assert_eq!(recv(&mut rx).await, "notify:ops");
    assert!(rx.try_recv().is_err(), "the volatile directive is lost");
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_schedule_in_the_outbox_keeps_its_due_time_across_the_restore() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let jido = Jido::start(
        JidoConfig::new()
            .name("outbox-schedule")
            .storage(Arc::clone(&storage))
            .directive_exec(CrashExec),
    )
    .await
    .unwrap();
    let start = |jido: Jido| async move {
        jido.start_agent(
            placing("q1", || {
                vec![
                    Directive::custom(Crash),
                    Directive::schedule(
                        std::time::Duration::from_secs(60),
                        Signal::new("order.placed", json!({})),
                    ),
                ]
            }),
            // Temporary: started again by hand, 30 s later.
            ServerOptions::new().durability(Durability::Checkpoint),
        )
        .await
        .unwrap()
    };
    let agent = start(jido.clone()).await;
    agent.call(sig("order.place", json!({}))).await.unwrap();
    within(agent.wait_exit()).await;
    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
    let again = start(jido.clone()).await;
    sync(&again).await;
    assert_eq!(again.status().await.unwrap().scheduled, 1);
    // Due 60 s after the call, as decided (30 s after the restore).
    tokio::time::sleep(std::time::Duration::from_secs(29)).await;
    sync(&again).await;
    assert_eq!(count(&again.state().await.unwrap(), "arrived"), 0);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    sync(&again).await;
    assert_eq!(count(&again.state().await.unwrap(), "arrived"), 1);
    jido.shutdown().await;
}

/// A child host that records every spawn it is handed (parent, tag, id,
/// kind, placement, options, meta, restart) and keeps no child.
struct RecordingHost(mpsc::UnboundedSender<Value>);

impl jido::server::ChildHost for RecordingHost {
    fn spawn(
        &self,
        spawn: jido::server::ChildSpawn,
        ctx: &DirectiveContext<'_>,
    ) -> DirectiveResult {
        let _ = self.0.send(json!({
            "parent": ctx.agent_id(),
            "tag": spawn.tag,
            "id": spawn.id,
            "kind": spawn.spec.kind(),
            "placement": spawn.spec.placement(),
            "options": spawn.options.to_json().expect("data form"),
            "meta": spawn.meta,
            "restart": spawn.restart,
        }));
        DirectiveResult::Ok
    }
    fn stop_child(
        &self,
        _: &str,
        _: &jido::directive::StopReason,
        _: &DirectiveContext<'_>,
    ) -> Option<DirectiveResult> {
        None
    }
    fn holds_child(&self, _: &str, _: &DirectiveContext<'_>) -> bool {
        false
    }
    fn children(&self, _: &DirectiveContext<'_>) -> Vec<jido::server::ChildStatus> {
        Vec::new()
    }
}

/// A SpawnAgent of a child described by its kind, with options, state,
/// meta and a restart policy.
fn kind_spawn() -> Directive {
    use jido::directive::{ChildKind, OnParentDeath};
    Directive::spawn_agent(ChildKind::new("report").on_node("node-b"), "nightly")
        .id("report:nightly")
        .on_parent_death(OnParentDeath::Continue)
        .initial_state(json!({"day": "mon"}).as_object().unwrap().clone())
        .meta(json!({"by": "planner"}).as_object().unwrap().clone())
        .restart(Restart::Permanent)
        .into()
}

#[tokio::test(start_paused = true)]
async fn a_spawn_agent_of_a_child_kind_is_durable_and_issued_again_after_the_restore() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let jido = Jido::start(
        JidoConfig::new()
            .name("kind-spawn")
            .storage(Arc::clone(&storage))
            .directive_exec(CrashExec),
    )
    .await
    .unwrap();
    jido.set_child_host(Some(Arc::new(RecordingHost(tx))));
    let mut events = jido.events();

    // Its data form, as stored (a temporary agent: not restarted, the
    // outbox stays as written).
    let kept = jido
        .start_agent(
            placing("k0", || vec![Directive::custom(Crash), kind_spawn()]),
            ServerOptions::new().durability(Durability::Checkpoint),
        )
        .await
        .unwrap();
    kept.call(sig("order.place", json!({}))).await.unwrap();
    within(kept.wait_exit()).await;
    let cp = storage
        .get_checkpoint(&key("kind-spawn", "k0"))
        .await
        .unwrap()
        .unwrap()
        .value;
    let mut form = cp.outbox[0].clone();
    form.as_object_mut().unwrap().remove("input");
    assert_eq!(
        form,
        json!({
            "kind": "spawn_agent",
            "child": {"kind": "report", "placement": {"node": "node-b"}},
            "tag": "nightly",
            "options": {"id": "report:nightly", "on_parent_death": "continue", "initial_state": {"day": "mon"}},
            "meta": {"by": "planner"},
            "restart": "permanent",
        })
    );
    assert!(rx.try_recv().is_err(), "the crash came before the spawn");

    // A permanent agent: restored after the crash, it issues the spawn
    // again, exactly as it was decided, once.
    let agent = jido
        .start_agent(
            placing("k1", || vec![Directive::custom(Crash), kind_spawn()]),
            ServerOptions::new()
                .durability(Durability::Checkpoint)
                .restart(Restart::Permanent),
        )
        .await
        .unwrap();
    started(&mut events, "k1").await;
    agent.call(sig("order.place", json!({}))).await.unwrap();
    within(agent.wait_exit()).await;
    started(&mut events, "k1").await;
    sync(&jido.whereis("k1").unwrap()).await;
    assert_eq!(
        recv(&mut rx).await,
        json!({
            "parent": "k1",
            "tag": "nightly",
            "id": "report:nightly",
            "kind": "report",
            "placement": {"node": "node-b"},
            "options": {"id": "report:nightly", "on_parent_death": "continue", "initial_state": {"day": "mon"}},
            "meta": {"by": "planner"},
            "restart": "permanent",
        })
    );
    assert!(rx.try_recv().is_err(), "issued once");
    let cp = storage
        .get_checkpoint(&key("kind-spawn", "k1"))
        .await
        .unwrap()
        .unwrap();
    assert!(cp.value.outbox.is_empty(), "{:?}", cp.value.outbox);
    jido.shutdown().await;
}
