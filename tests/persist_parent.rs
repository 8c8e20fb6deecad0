//! Parent links of durable agents (feature `persist`): a restored child
//! started without a parent finds its stored parent again by id and
//! re-adopts it, or applies its `on_parent_death` when the parent is not
//! running (reason `noproc`).
#![cfg(feature = "persist")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use jido::directive::OnParentDeath;
use jido::persist::{MemoryStorage, Storage, StorageKey};
use jido::prelude::*;
use jido::server::{AgentRef, Durability, ExitReason, Jido, JidoConfig, ParentRef, ServerOptions};
use serde_json::json;

async fn instance(name: &str) -> (Jido, Arc<dyn Storage>) {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let jido = Jido::start(JidoConfig::new().name(name).storage(Arc::clone(&storage)))
        .await
        .unwrap();
    (jido, storage)
}

fn count(agent: &AgentState, field: &str) -> i64 {
    agent
        .state()
        .get(field)
        .and_then(|v| v.as_i64())
        .unwrap_or(0)
}

fn bump(field: &'static str) -> DynAction {
    act(move |_, ctx| async move {
        let n = ctx
            .state()
            .and_then(|s| s.get(field)?.as_i64())
            .unwrap_or(0);
        Ok(json!({ field: n + 1 }))
    })
}

fn parent_agent() -> AgentState {
    TestAgent::new()
        .route("jido.agent.child.started", bump("started"))
        .route("jido.agent.child.exit", bump("exited"))
        .build("p")
}

fn child_agent() -> AgentState {
    TestAgent::new()
        .route("counter.add", add())
        .route("jido.agent.orphaned", append())
        .build("c")
}

/// Two calls: what was in the mailbox before the first one is processed
/// when the second is answered.
async fn sync(agent: &AgentRef) {
    for _ in 0..2 {
        let answer = agent.call(sig("probe", json!({}))).await;
        assert_eq!(answer.unwrap_err().kind(), jido::ErrorKind::Routing);
    }
}

/// Starts `c` as a durable child of `parent` under tag `kid`, gives it
/// some state (checkpointed with the link), then stops it.
async fn child_then_stop(jido: &Jido, parent: &AgentRef, policy: OnParentDeath) {
    let child = jido
        .start_agent(
            child_agent(),
            ServerOptions::new()
                .durability(Durability::Checkpoint)
                .on_parent_death(policy)
                .parent(ParentRef::new(parent, "kid")),
        )
        .await
        .unwrap();
    let state = child
        .call(sig("counter.add", json!({"n": 5})))
        .await
        .unwrap();
    assert_eq!(state.state().get("__parent__").unwrap()["id"], json!("p"));
    jido.stop_agent("c").await.unwrap();
}

fn unbound(policy: OnParentDeath) -> impl FnOnce() -> (AgentState, ServerOptions) {
    move || {
        (
            child_agent(),
            ServerOptions::new()
                .durability(Durability::Checkpoint)
                .on_parent_death(policy),
        )
    }
}

#[tokio::test(start_paused = true)]
async fn a_restored_child_re_adopts_its_running_parent_by_id() {
    let (jido, storage) = instance("readopt").await;
    let parent = jido
        .start_agent(parent_agent(), ServerOptions::new())
        .await
        .unwrap();
    child_then_stop(&jido, &parent, OnParentDeath::Stop).await;
    let cp = storage
        .get_checkpoint(&StorageKey::new("readopt", "test_agent", "c").unwrap())
        .await
        .unwrap()
        .unwrap()
        .value;
    assert_eq!(
        cp.parent,
        Some(json!({"id": "p", "tag": "kid", "meta": {}}))
    );
    assert!(!cp.state.contains_key("__parent__"));
    sync(&parent).await;
    assert!(parent.status().await.unwrap().children.is_empty());
    // Started again without a parent in its options: bound to `p` again.
    let child = jido
        .get_or_start("c", unbound(OnParentDeath::Stop))
        .await
        .unwrap();
    let state = child.state().await.unwrap();
    assert_eq!(count(&state, "total"), 5);
    assert_eq!(
        state.state().get("__parent__").map(|v| v.to_json()),
        Some(json!({"id": "p", "tag": "kid", "meta": {}}))
    );
    assert_eq!(
        child.status().await.unwrap().parent_id.as_deref(),
        Some("p")
    );
    // The parent tracks it again.
    sync(&parent).await;
    let status = parent.status().await.unwrap();
    assert_eq!(status.children, ["kid"]);
    assert_eq!(count(&status.agent, "started"), 2);
    assert_eq!(count(&status.agent, "exited"), 1);
    // Linked for real: the parent's end stops it (`on_parent_death: stop`).
    jido.stop_agent("p").await.unwrap();
    assert_eq!(
        within(child.wait_exit()).await,
        ExitReason::Stopped("shutdown: parent_down: shutdown".into())
    );
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_restored_child_whose_parent_is_gone_applies_on_parent_death() {
    for (name, policy) in [
        ("gone-stop", OnParentDeath::Stop),
        ("gone-continue", OnParentDeath::Continue),
        ("gone-emit", OnParentDeath::EmitOrphan),
    ] {
        let (jido, storage) = instance(name).await;
        let parent = jido
            .start_agent(parent_agent(), ServerOptions::new())
            .await
            .unwrap();
        child_then_stop(&jido, &parent, policy).await;
        jido.stop_agent("p").await.unwrap();
        within(parent.wait_exit()).await;
        let child = jido.get_or_start("c", unbound(policy)).await.unwrap();
        let key = StorageKey::new(name, "test_agent", "c").unwrap();
        match policy {
            OnParentDeath::Stop => {
                assert_eq!(
                    within(child.wait_exit()).await,
                    ExitReason::Stopped("shutdown: parent_down: noproc".into())
                );
                // The link stays stored: it is not an orphan.
                let cp = storage.get_checkpoint(&key).await.unwrap().unwrap().value;
                assert_eq!(
                    cp.parent,
                    Some(json!({"id": "p", "tag": "kid", "meta": {}}))
                );
            }
            _ => {
                sync(&child).await;
                let state = child.state().await.unwrap();
                assert_eq!(count(&state, "total"), 5, "{name}");
                assert!(state.state().get("__parent__").is_none());
                assert_eq!(
                    state.state().get("__orphaned_from__").map(|v| v.to_json()),
                    Some(json!({"id": "p", "tag": "kid", "meta": {}})),
                    "{name}"
                );
                let orphaned = state.state().get("log").map(|v| v.to_json());
                if policy == OnParentDeath::EmitOrphan {
                    // `append` logs `params.item`: the signal has none.
                    assert_eq!(
                        orphaned,
                        Some(json!([null])),
                        "exactly one jido.agent.orphaned"
                    );
                } else {
                    assert_eq!(orphaned, None, "{name}");
                }
                assert!(child.is_alive());
                tokio::time::sleep(Duration::from_secs(1)).await;
                assert!(child.is_alive());
            }
        }
        jido.shutdown().await;
    }
}
