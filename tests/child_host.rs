//! Children described by a kind ([`ChildKind`]) and the instance's
//! [`ChildHost`]: the built-in SpawnAgent hands them to the host, the
//! parent's child table asks it about tags, StopChild and the status, and
//! a child that does not start gives the parent
//! `jido.agent.child.start_failed`, wherever it was to run.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use common::*;
use jido::directive::{ChildKind, ChildOptions, Placement, StopReason};
use jido::prelude::*;
use jido::server::{
    AgentRef, ChildHost, ChildSpawn, ChildStatus, DirectiveContext, DirectiveResult, Jido,
    JidoConfig, ServerOptions,
};
use jido::signal::Signal;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

/// What the test host saw, and the children it keeps: (parent, tag) →
/// (id, node, the parent's handle).
#[derive(Default)]
struct Book {
    spawns: Vec<(String, String, String, Option<String>, Placement, Value)>,
    stops: Vec<(String, String)>,
    kept: BTreeMap<(String, String), (String, String, AgentRef)>,
}

/// A host that "starts" each child on the node its placement names
/// ("node-x" for a hashed one) by recording it, and reports its exit on a
/// stop, as a real host does.
#[derive(Clone, Default)]
struct TestHost(Arc<Mutex<Book>>);

impl ChildHost for TestHost {
    fn spawn(&self, spawn: ChildSpawn, ctx: &DirectiveContext<'_>) -> DirectiveResult {
        let node = match spawn.spec.placement() {
            Placement::Node(node) => node.clone(),
            Placement::Local => "here".to_owned(),
            _ => "node-x".to_owned(),
        };
        let options = Value::Object(spawn.options.to_json().expect("data form"));
        let mut book = self.0.lock().unwrap();
        book.spawns.push((
            ctx.agent_id().to_owned(),
            spawn.tag.clone(),
            spawn.id.clone(),
            spawn.spec.kind().map(str::to_owned),
            spawn.spec.placement().clone(),
            options,
        ));
        book.kept.insert(
            (ctx.agent_id().to_owned(), spawn.tag.clone()),
            (spawn.id.clone(), node, ctx.myself()),
        );
        DirectiveResult::Async(Some(spawn.id))
    }

    fn stop_child(
        &self,
        tag: &str,
        reason: &StopReason,
        ctx: &DirectiveContext<'_>,
    ) -> Option<DirectiveResult> {
        let mut book = self.0.lock().unwrap();
        let (id, node, parent) = book
            .kept
            .remove(&(ctx.agent_id().to_owned(), tag.to_owned()))?;
        book.stops.push((tag.to_owned(), reason.to_string()));
        let _ = parent.cast(Signal::new(
            "jido.agent.child.exit",
            json!({"tag": tag, "id": id, "node": node, "reason": "shutdown"}),
        ));
        Some(DirectiveResult::Ok)
    }

    fn holds_child(&self, tag: &str, ctx: &DirectiveContext<'_>) -> bool {
        self.0
            .lock()
            .unwrap()
            .kept
            .contains_key(&(ctx.agent_id().to_owned(), tag.to_owned()))
    }

    fn children(&self, ctx: &DirectiveContext<'_>) -> Vec<ChildStatus> {
        self.0
            .lock()
            .unwrap()
            .kept
            .iter()
            .filter(|((p, _), _)| p == ctx.agent_id())
            .map(|((_, tag), (id, node, _))| ChildStatus::new(tag, id, Some(node.clone())))
            .collect()
    }
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// A parent: "remote" spawns a `report` child by kind with the signal's
/// `tag`, `placement` and `opts`; "local" spawns a local child under
/// `tag` (with `opts`); "stop.child" stops `tag`; runtime signals are
/// reported.
fn parent(id: &str) -> (AgentState, UnboundedReceiver<Signal>) {
    echo_agent(
        id,
        vec![
            (
                "remote",
                act(|p, ctx| async move {
                    let placement: Placement =
                        serde_json::from_value(p["placement"].clone()).unwrap_or_default();
                    ctx.push_effect(
                        Directive::spawn_agent(
                            ChildKind::new("report").place(placement),
                            p["tag"].as_str().unwrap_or("r"),
                        )
                        .options(ChildOptions::from_json(&obj(p["opts"].clone()))?)
                        .meta(obj(json!({"role": "report"}))),
                    );
                    Ok(json!({}))
                }),
            ),
            (
                "local",
                act(|p, ctx| async move {
                    ctx.push_effect(
                        Directive::spawn_agent(
                            TestAgent::new().route("noop", noop()).build("unused"),
                            p["tag"].as_str().unwrap_or("l"),
                        )
                        .options(ChildOptions::from_json(&obj(p["opts"].clone()))?),
                    );
                    Ok(json!({}))
                }),
            ),
            (
                "stop.child",
                effects(|p| {
                    vec![Directive::stop_child_with(
                        p["tag"].as_str().unwrap_or("r"),
                        StopReason::from(p["reason"].as_str().unwrap_or("normal")),
                    )]
                }),
            ),
            ("jido.agent.child.started", noop()),
            ("jido.agent.child.exit", noop()),
            ("jido.agent.child.start_failed", noop()),
        ],
    )
}

async fn next_of(rx: &mut UnboundedReceiver<Signal>, ty: &str) -> Value {
    loop {
        let s = recv(rx).await;
        if s.ty() == ty {
            return s.data().cloned().unwrap_or(Value::Null);
        }
    }
}

#[tokio::test]
async fn a_child_spec_without_a_host_is_a_start_failed_signal() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (p, mut rx) = parent("spec-parent-1");
    let p = jido.start_agent(p, ServerOptions::new()).await.unwrap();
    p.call(Signal::new("remote", json!({"tag": "r"})))
        .await
        .unwrap();
    let failed = next_of(&mut rx, "jido.agent.child.start_failed").await;
    assert_eq!(
        (
            failed["parent_id"].clone(),
            failed["child_id"].clone(),
            failed["tag"].clone(),
            failed["error"]["type"].clone(),
            failed["error"]["message"].clone(),
        ),
        (
            json!("spec-parent-1"),
            json!("spec-parent-1/r"),
            json!("r"),
            json!("configuration_error"),
            json!("no child host for a child spec"),
        )
    );
    let status = p.status().await.unwrap();
    assert!(status.children.is_empty());
    assert_eq!(status.error_count, 1, "the error policy saw it");
    jido.shutdown().await;
}

#[tokio::test]
async fn a_local_child_that_fails_to_start_is_a_start_failed_signal() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (p, mut rx) = parent("spec-parent-2");
    let p = jido.start_agent(p, ServerOptions::new()).await.unwrap();
    p.call(Signal::new(
        "local",
        json!({"tag": "l", "opts": {"max_queue_size": 0}}),
    ))
    .await
    .unwrap();
    let failed = next_of(&mut rx, "jido.agent.child.start_failed").await;
    assert_eq!(
        (
            failed["child_id"].clone(),
            failed["tag"].clone(),
            failed["error"]["type"].clone(),
        ),
        (
            json!("spec-parent-2/l"),
            json!("l"),
            json!("configuration_error")
        )
    );
    assert!(p.status().await.unwrap().children.is_empty());
    jido.shutdown().await;
}

#[tokio::test]
async fn the_host_starts_spec_children_and_the_child_table_knows_them() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let host = TestHost::default();
    assert!(jido.set_child_host(Some(Arc::new(host.clone()))).is_none());
    let (p, mut rx) = parent("spec-parent-3");
    let p = jido.start_agent(p, ServerOptions::new()).await.unwrap();

    // Spawned through the host, with the SpawnAgent's id, options and
    // placement as data.
    p.call(Signal::new(
        "remote",
        json!({
            "tag": "r",
            "placement": {"node": "node-b"},
            "opts": {"id": "report:1", "on_parent_death": "continue", "initial_state": {"day": 1}},
        }),
    ))
    .await
    .unwrap();
    p.call(Signal::new("local", json!({"tag": "l"})))
        .await
        .unwrap();
    // A local child's start, field by field (a remote child's gives the
    // same fields plus `node`: tests/cluster.rs).
    assert_eq!(
        next_of(&mut rx, "jido.agent.child.started").await,
        json!({
            "parent_id": "spec-parent-3",
            "child_id": "spec-parent-3/l",
            "child_type": "test_agent",
            "tag": "l",
            "meta": {},
        })
    );
    {
        let book = host.0.lock().unwrap();
        assert_eq!(
            book.spawns,
            [(
                "spec-parent-3".to_owned(),
                "r".to_owned(),
                "report:1".to_owned(),
                Some("report".to_owned()),
                Placement::Node("node-b".into()),
                json!({"id": "report:1", "on_parent_death": "continue", "initial_state": {"day": 1}}),
            )]
        );
    }

    // The status lists both children, with the hosted one's node.
    let status = p.status().await.unwrap();
    assert_eq!(status.children, ["l", "r"]);
    assert_eq!(
        status.child_details,
        [
            ChildStatus::new("l", "spec-parent-3/l", None),
            ChildStatus::new("r", "report:1", Some("node-b".into())),
        ]
    );

    // One tag names one child: a local spawn under the hosted child's tag,
    // a spec spawn under the local one's and a local spawn under the
    // local one's start nothing, and the parent learns why.
    p.call(Signal::new("local", json!({"tag": "r"})))
        .await
        .unwrap();
    p.call(Signal::new(
        "remote",
        json!({"tag": "l", "opts": {"id": "report:2"}}),
    ))
    .await
    .unwrap();
    p.call(Signal::new("local", json!({"tag": "l"})))
        .await
        .unwrap();
    let tag_in_use = |tag: &str, child_id: &str| {
        json!({
            "parent_id": "spec-parent-3",
            "child_id": child_id,
            "tag": tag,
            "error": {
                "type": "validation_error",
                "message": "tag in use",
                "details": {"reason": "tag_in_use", "tag": tag, "child_id": child_id},
                "retryable": false,
            },
        })
    };
    assert_eq!(
        next_of(&mut rx, "jido.agent.child.start_failed").await,
        tag_in_use("r", "spec-parent-3/r")
    );
    assert_eq!(
        next_of(&mut rx, "jido.agent.child.start_failed").await,
        tag_in_use("l", "report:2")
    );
    assert_eq!(
        next_of(&mut rx, "jido.agent.child.start_failed").await,
        tag_in_use("l", "spec-parent-3/l")
    );
    assert_eq!(host.0.lock().unwrap().spawns.len(), 1);
    assert!(jido.whereis("spec-parent-3/r").is_none());
    let status = p.status().await.unwrap();
    assert_eq!(status.children, ["l", "r"]);
    assert_eq!(
        status.error_count, 0,
        "a refused tag is not an action error"
    );

    // The built-in StopChild of the hosted tag goes to the host with its
    // reason; its exit reaches the parent.
    p.call(Signal::new(
        "stop.child",
        json!({"tag": "r", "reason": "quota"}),
    ))
    .await
    .unwrap();
    assert_eq!(
        host.0.lock().unwrap().stops,
        [("r".to_owned(), "quota".to_owned())]
    );
    assert_eq!(
        next_of(&mut rx, "jido.agent.child.exit").await,
        json!({"tag": "r", "id": "report:1", "node": "node-b", "reason": "shutdown"})
    );
    assert_eq!(p.status().await.unwrap().children, ["l"]);

    // Removed: a spec child fails again.
    assert!(jido.set_child_host(None).is_some());
    p.call(Signal::new("remote", json!({"tag": "r2"})))
        .await
        .unwrap();
    let failed = next_of(&mut rx, "jido.agent.child.start_failed").await;
    assert_eq!(failed["tag"], "r2");
    jido.shutdown().await;
}

#[test]
fn child_options_with_code_have_no_data_form() {
    let err = ChildOptions::new()
        .error_policy(jido::directive::ErrorPolicy::custom(|_| {
            Ok(jido::server::ErrorDecision::Continue)
        }))
        .to_json()
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.message()),
        (
            jido::ErrorKind::Configuration,
            "child option has no data form: error_policy"
        )
    );
    let all = json!({
        "id": "w", "initial_state": {"a": 1}, "on_parent_death": "emit_orphan",
        "max_queue_size": 5, "max_pending_signals": 6, "max_concurrent_dispatches": 7,
        "debug": true, "allow_untrusted_runtime_signals": false,
        "fail_calls_on_action_error": false, "error_policy": "stop_on_error",
    });
    let back = ChildOptions::from_json(&obj(all.clone()))
        .unwrap()
        .to_json()
        .unwrap();
    assert_eq!(Value::Object(back), all);
}
