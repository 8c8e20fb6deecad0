//! Checkpoint deltas in the runtime (feature `persist`): a signal beside a
//! large state writes what it changed, not the state; a restore rebuilds
//! the state exactly.
#![cfg(feature = "persist")]

mod common;

use std::sync::{Arc, Mutex};

use common::storage::{Hooked, Hooks};
use common::*;
use jido::persist::{Checkpoint, CheckpointDelta, MemoryStorage, Storage, StorageKey};
use jido::prelude::*;
use jido::server::{Durability, Jido, JidoConfig, ServerOptions};
use serde_json::{Map, Value, json};

/// What one checkpoint write was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    Full(usize),
    Delta(usize),
}

/// A memory storage that records the kind and the JSON bytes of every
/// checkpoint write.
#[derive(Clone, Default)]
struct Counting(Arc<Mutex<Vec<Write>>>);

impl Counting {
    fn take(&self) -> Vec<Write> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

impl Hooks for Counting {
    fn put(&self, _: &StorageKey, cp: &Checkpoint) {
        self.0
            .lock()
            .unwrap()
            .push(Write::Full(cp.to_json_vec().len()));
    }
    fn delta(&self, _: &StorageKey, delta: &CheckpointDelta) {
        self.0
            .lock()
            .unwrap()
            .push(Write::Delta(delta.to_json_vec().len()));
    }
}

/// `note` sets `last`; `say` appends to `history` with a state op (the
/// array stays shared); `echo` returns the whole `history` plus one entry
/// as output (rebuilt from JSON, no longer shared).
fn chat(id: &str, history: usize) -> AgentState {
    let agent = TestAgent::new()
        .route("note", act(|p, _| async move { Ok(json!({"last": p})) }))
        .route(
            "say",
            act(|p, ctx| async move {
                ctx.push_effect(StateOp::append(["history"], p));
                Ok(json!({}))
            }),
        )
        .route(
            "echo",
            act(|p, ctx| async move {
                let mut history: Value = ctx
                    .state()
                    .and_then(|s| s.get("history").map(|h| h.to_json()))
                    .unwrap_or_else(|| json!([]));
                if let Some(items) = history.as_array_mut() {
                    items.push(p);
                }
                Ok(json!({"history": history}))
            }),
        );
    let mut state = Map::new();
    state.insert(
        "history".into(),
        (0..history)
            .map(|i| json!({"role": "user", "content": format!("message number {i}")}))
            .collect(),
    );
    AgentState::new(agent, AgentOptions::new().id(id).state(state))
}

async fn instance(name: &str, storage: Arc<dyn Storage>) -> Jido {
    Jido::start(JidoConfig::new().name(name).storage(storage))
        .await
        .unwrap()
}

/// The writes of three calls of each kind to an agent with `history`
/// messages, after its first (full) checkpoint.
async fn writes_per_signal(history: usize, mode: Durability) -> Vec<Write> {
    let storage = Arc::new(Hooked::new(Counting::default()));
    let jido = instance(&format!("delta-bytes-{history}-{mode:?}"), storage.clone()).await;
    let agent = jido
        .start_agent(chat("c-1", history), ServerOptions::new().durability(mode))
        .await
        .unwrap();
    within(agent.call(sig("note", json!({"n": 0}))))
        .await
        .unwrap();
    let first = storage.take();
    assert!(
        matches!(first.as_slice(), [Write::Full(n)] if *n > history * 40),
        "{first:?}"
    );
    for ty in ["note", "say", "echo"] {
        within(agent.call(sig(ty, json!({"n": 1})))).await.unwrap();
    }
    jido.shutdown().await;
    storage.take()
}

#[tokio::test]
async fn a_signal_beside_a_long_history_writes_the_same_bytes_as_beside_a_short_one() {
    for mode in [Durability::Checkpoint, Durability::Journal] {
        let short = writes_per_signal(100, mode).await;
        let long = writes_per_signal(10_000, mode).await;
        // Every call wrote a delta: `last` set, then one message appended
        // (by a state op, then by an output rebuilding the whole history).
        assert_eq!(short.len(), 3, "{mode:?}: {short:?}");
        assert!(
            short
                .iter()
                .all(|w| matches!(w, Write::Delta(n) if *n < 400)),
            "{mode:?}: {short:?}"
        );
        assert_eq!(
            long, short,
            "{mode:?}: bytes per signal grew with the history"
        );
    }
}

#[tokio::test]
async fn a_restore_after_deltas_rebuilds_the_state_exactly() {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let jido = instance("delta-restore-a", Arc::clone(&storage)).await;
    let agent = jido
        .start_agent(
            chat("c-2", 50),
            ServerOptions::new().durability(Durability::Checkpoint),
        )
        .await
        .unwrap();
    for i in 0..20 {
        let ty = ["note", "say", "echo"][i % 3];
        within(agent.call(sig(ty, json!({"i": i})))).await.unwrap();
    }
    let live = agent.state().await.unwrap();
    // Every call's change was durable before its reply: the store holds
    // the live state (the stop adds nothing).
    jido.shutdown().await;
    let key = StorageKey::new("delta-restore-a", "test_agent", "c-2").unwrap();
    let stored = storage.get_checkpoint(&key).await.unwrap().unwrap();
    let live_json: Map<String, Value> = live.state().to_json();
    assert_eq!(
        serde_json::to_string(&stored.value.state).unwrap(),
        serde_json::to_string(&live_json).unwrap()
    );
    // 7 `say` and 6 `echo` calls appended a message each.
    assert_eq!(
        stored.value.state["history"].as_array().unwrap().len(),
        50 + 13
    );
    // A new instance restores it, and keeps writing deltas on top.
    let jido = instance("delta-restore-a", Arc::clone(&storage)).await;
    let agent = jido
        .start_agent(
            chat("c-2", 0),
            ServerOptions::new().durability(Durability::Checkpoint),
        )
        .await
        .unwrap();
    assert_eq!(agent.state().await.unwrap().state().to_json(), live_json);
    within(agent.call(sig("say", json!({"after": true}))))
        .await
        .unwrap();
    within(agent.call(sig("say", json!({"after": 2}))))
        .await
        .unwrap();
    let live = agent.state().await.unwrap().state().to_json();
    jido.shutdown().await;
    let stored = storage.get_checkpoint(&key).await.unwrap().unwrap();
    assert_eq!(stored.value.state, live);
    assert_eq!(stored.value.state["history"][64], json!({"after": 2}));
}

/// A journaling agent keeps the ids of its last 1 024 signals in its
/// checkpoints (to drop a cast it has already seen): a delta writes only
/// the ids accepted since the last write, so a call after hundreds of
/// others writes exactly the bytes of a call after a hundred.
#[tokio::test]
async fn a_journaling_agent_writes_only_its_new_signal_ids() {
    let storage = Arc::new(Hooked::new(Counting::default()));
    let jido = instance("delta-ids", storage.clone()).await;
    let agent = jido
        .start_agent(
            chat("c-3", 5_000),
            ServerOptions::new().durability(Durability::Journal),
        )
        .await
        .unwrap();
    let mut ids = Vec::new();
    let mut writes = Vec::new();
    // Payloads, sequence numbers and kept-id counts of the same width in
    // both measured calls (the 150th and the 650th).
    for i in 0..=650 {
        let signal = sig("note", json!({"n": 10_000 + i}));
        ids.push(signal.id().to_owned());
        within(agent.call(signal)).await.unwrap();
        if i == 150 || i == 650 {
            writes.push(storage.take().pop());
        } else {
            storage.take();
        }
    }
    assert!(
        matches!(writes[0], Some(Write::Delta(n)) if n < 400),
        "{writes:?}"
    );
    assert_eq!(
        writes[1], writes[0],
        "the ids written grew with the history"
    );
    jido.shutdown().await;
    // The folded checkpoint holds every id, in order.
    let key = StorageKey::new("delta-ids", "test_agent", "c-3").unwrap();
    let stored = storage.get_checkpoint(&key).await.unwrap().unwrap();
    assert_eq!(stored.value.recent_ids, ids);
}
