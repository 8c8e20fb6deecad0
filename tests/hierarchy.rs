//! Parents and children: SpawnAgent, StopChild, AdoptChild, EmitToParent,
//! child.started / child.exit, on_parent_death for stop / crash / kill,
//! restarts and the restart limit.

mod common;

use std::time::Duration;

use common::*;
use jido::directive::{ChildOptions, Restart, SpawnAgent, StopReason};
use jido::prelude::*;
use jido::server::{AgentRef, Jido, JidoConfig, ServerOptions};
use jido::signal::Signal;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

async fn instance() -> Jido {
    Jido::start(JidoConfig::new().directive_exec(CrashExec))
        .await
        .unwrap()
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// A child (echo agent): "crash", "die" (Stop normal), "counter.add",
/// "spawn" (a grandchild, on_parent_death stop), "tell" (EmitToParent).
fn child(id: &str) -> (AgentState, UnboundedReceiver<Signal>) {
    echo_agent(
        id,
        vec![
            ("crash", effects(|_| vec![Directive::custom(Crash)])),
            ("die", effects(|_| vec![Directive::stop()])),
            ("counter.add", add()),
            ("noop", noop()),
            (
                "spawn",
                effects(|_| {
                    vec![
                        Directive::spawn_agent(
                            TestAgent::new().route("noop", noop()).build("unused"),
                            "grandkid",
                        )
                        .into(),
                    ]
                }),
            ),
            (
                "tell",
                act(|p, ctx| async move {
                    let state = ctx.state().unwrap();
                    ctx.push_effect(
                        Directive::emit_to_parent_of(state, Signal::new("child.says", p)).unwrap(),
                    );
                    Ok(json!({}))
                }),
            ),
            ("jido.agent.orphaned", noop()),
        ],
    )
}

/// The child's options arrive as data (the signal's `opts`): an invalid
/// one fails the action, and nothing is spawned.
fn spawn_directive(
    kid: &AgentState,
    tag: &str,
    opts: Value,
    restart: Restart,
) -> jido::Result<SpawnAgent> {
    Ok(Directive::spawn_agent(kid.clone(), tag)
        .options(ChildOptions::from_json(&obj(opts))?)
        .meta(obj(json!({"role": "worker"})))
        .restart(restart))
}

/// A parent (echo agent) spawning `kid` on "spawn" with the options and
/// restart policy in the signal data; "stop.child", "crash"; every runtime
/// signal routed to a no-op so the echo reports it.
fn parent(id: &str, kid: AgentState) -> (AgentState, UnboundedReceiver<Signal>) {
    echo_agent(
        id,
        vec![
            (
                "spawn",
                act(move |p, ctx| {
                    let kid = kid.clone();
                    async move {
                        let restart = match p["restart"].as_str() {
                            Some("permanent") => Restart::Permanent,
                            Some("temporary") => Restart::Temporary,
                            _ => Restart::Transient,
                        };
                        ctx.push_effect(spawn_directive(
                            &kid,
                            p["tag"].as_str().unwrap_or("kid"),
                            p["opts"].clone(),
                            restart,
                        )?);
                        Ok(json!({}))
                    }
                }),
            ),
            (
                "stop.child",
                effects(|p| {
                    vec![Directive::stop_child_with(
                        p["tag"].as_str().unwrap(),
                        StopReason::from(p["reason"].as_str().unwrap_or("normal")),
                    )]
                }),
            ),
            (
                "adopt",
                effects(|p| {
                    vec![Directive::adopt_child(
                        p["id"].as_str().unwrap(),
                        p["tag"].as_str().unwrap(),
                    )]
                }),
            ),
            ("crash", effects(|_| vec![Directive::custom(Crash)])),
            ("noop", noop()),
            ("jido.agent.child.started", noop()),
            ("jido.agent.child.exit", noop()),
            ("jido.agent.child.given_up", noop()),
            ("child.says", noop()),
        ],
    )
}

/// The next signal of type `ty`, skipping others.
async fn next_of(rx: &mut UnboundedReceiver<Signal>, ty: &str) -> Signal {
    loop {
        let s = recv(rx).await;
        if s.ty() == ty {
            return s;
        }
    }
}

/// Starts parent "p" and spawns its child "kid" with `opts`.
async fn family(
    jido: &Jido,
    opts: Value,
    restart: &str,
) -> (
    AgentRef,
    UnboundedReceiver<Signal>,
    AgentRef,
    UnboundedReceiver<Signal>,
) {
    let (kid, kid_rx) = child("unused");
    let (p, mut prx) = parent("p", kid);
    let p = jido.start_agent(p, ServerOptions::new()).await.unwrap();
    p.call(sig(
        "spawn",
        json!({"tag": "kid", "opts": opts, "restart": restart}),
    ))
    .await
    .unwrap();
    let started = next_of(&mut prx, "jido.agent.child.started").await;
    assert_eq!(started.data().unwrap()["child_id"], "p/kid");
    let c = jido.whereis("p/kid").expect("child registered");
    (p, prx, c, kid_rx)
}

#[tokio::test]
async fn spawn_agent_starts_and_tracks_a_child() {
    let jido = instance().await;
    let (p, _prx, c, _crx) = family(&jido, json!({}), "transient").await;
    let status = p.status().await.unwrap();
    assert_eq!(status.children, vec!["kid".to_owned()]);
    let cs = c.status().await.unwrap();
    assert_eq!(cs.parent_id.as_deref(), Some("p"));
    assert_eq!(
        cs.agent.state()["__parent__"],
        json!({"id": "p", "tag": "kid", "meta": {"role": "worker"}})
    );
    // The started signal, as the parent processed it.
    p.call(sig("noop", json!({}))).await.unwrap();
    jido.shutdown().await;
}

#[tokio::test]
async fn child_started_signal_carries_the_child() {
    let jido = instance().await;
    let (kid, _k) = child("unused");
    let (p, mut prx) = parent("p", kid);
    let p = jido.start_agent(p, ServerOptions::new()).await.unwrap();
    p.call(sig(
        "spawn",
        json!({"tag": "w1", "opts": {"id": "custom-id"}}),
    ))
    .await
    .unwrap();
    let s = next_of(&mut prx, "jido.agent.child.started").await;
    assert_eq!(s.source(), "/agent/p");
    assert_eq!(
        s.data(),
        Some(
            &json!({"parent_id": "p", "child_id": "custom-id", "child_type": "echo_agent", "tag": "w1", "meta": {"role": "worker"}})
        )
    );
    assert!(jido.whereis("custom-id").is_some());
    // A second spawn with the same tag is refused.
    p.call(sig("spawn", json!({"tag": "w1", "opts": {"id": "other"}})))
        .await
        .unwrap();
    p.call(sig("noop", json!({}))).await.unwrap();
    assert!(jido.whereis("other").is_none());
    // Invalid options are refused.
    let err = p
        .call(sig("spawn", json!({"tag": "w2", "opts": {"pool": "x"}})))
        .await
        .unwrap_err();
    assert_eq!(err.message(), "unknown server option: pool");
    p.call(sig("noop", json!({}))).await.unwrap();
    assert_eq!(p.status().await.unwrap().children, vec!["w1".to_owned()]);
    jido.shutdown().await;
}

#[tokio::test]
async fn stop_child_stops_it_with_shutdown_and_the_parent_gets_child_exit() {
    let jido = instance().await;
    let (p, mut prx, c, _crx) = family(&jido, json!({}), "permanent").await;
    let (probe, mut seen) = probe().await;
    probe.get_cell().monitor(c.actor_ref().get_cell());
    p.call(sig("stop.child", json!({"tag": "kid", "reason": "normal"})))
        .await
        .unwrap();
    assert_eq!(
        exit_of(&mut seen, c.actor_ref().get_id()).await,
        Seen::Terminated(c.actor_ref().get_id(), Some("shutdown".into()))
    );
    let exit = next_of(&mut prx, "jido.agent.child.exit").await;
    assert_eq!(
        exit.data(),
        Some(&json!({"tag": "kid", "id": "p/kid", "reason": "shutdown"}))
    );
    p.call(sig("noop", json!({}))).await.unwrap();
    assert!(p.status().await.unwrap().children.is_empty());
    // Permanent, but a StopChild is a shutdown: not restarted.
    assert!(jido.whereis("p/kid").is_none());
    // Unknown tag: nothing happens.
    p.call(sig("stop.child", json!({"tag": "ghost"})))
        .await
        .unwrap();
    p.call(sig("noop", json!({}))).await.unwrap();
    assert!(p.is_alive());
    jido.shutdown().await;
}

#[tokio::test]
async fn stop_child_with_a_custom_reason_wraps_it_in_shutdown() {
    let jido = instance().await;
    let (p, mut prx, _c, _crx) = family(&jido, json!({}), "transient").await;
    p.call(sig("stop.child", json!({"tag": "kid", "reason": "quota"})))
        .await
        .unwrap();
    let exit = next_of(&mut prx, "jido.agent.child.exit").await;
    assert_eq!(exit.data().unwrap()["reason"], "shutdown: quota");
    jido.shutdown().await;
}

#[tokio::test]
async fn emit_to_parent_reaches_the_parent() {
    let jido = instance().await;
    let (_p, mut prx, c, _crx) = family(&jido, json!({}), "transient").await;
    c.call(sig("tell", json!({"done": 3}))).await.unwrap();
    let s = next_of(&mut prx, "child.says").await;
    assert_eq!(s.data(), Some(&json!({"done": 3})));
    jido.shutdown().await;
}

/// How the parent ends in the matrix.
#[derive(Clone, Copy, Debug)]
enum End {
    Stop,
    Crash,
    Kill,
}

async fn end_parent(p: &AgentRef, how: End) -> String {
    match how {
        End::Stop => {
            p.stop("normal").await.unwrap();
            "normal".to_owned()
        }
        End::Crash => {
            p.cast(sig("crash", json!({}))).unwrap();
            crash_reason()
        }
        End::Kill => {
            p.actor_ref().kill();
            "killed".to_owned()
        }
    }
}

#[tokio::test]
async fn on_parent_death_stop_for_stop_crash_and_kill() {
    for how in [End::Stop, End::Crash, End::Kill] {
        let jido = instance().await;
        let (p, _prx, c, _crx) =
            family(&jido, json!({"on_parent_death": "stop"}), "permanent").await;
        let (probe, mut seen) = probe().await;
        probe.get_cell().monitor(c.actor_ref().get_cell());
        let reason = end_parent(&p, how).await;
        assert_eq!(
            exit_of(&mut seen, c.actor_ref().get_id()).await,
            Seen::Terminated(
                c.actor_ref().get_id(),
                Some(format!("shutdown: parent_down: {reason}"))
            ),
            "{how:?}"
        );
        // Never restarted (a parent-down stop is a shutdown), even permanent.
        tokio::task::yield_now().await;
        assert!(jido.whereis("p/kid").is_none(), "{how:?}");
        jido.shutdown().await;
    }
}

async fn wait_orphaned(c: &AgentRef) {
    within(async {
        while c.status().await.unwrap().parent_id.is_some() {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

#[tokio::test]
async fn on_parent_death_continue_for_stop_crash_and_kill() {
    for how in [End::Stop, End::Crash, End::Kill] {
        let jido = instance().await;
        let (p, _prx, c, mut crx) =
            family(&jido, json!({"on_parent_death": "continue"}), "transient").await;
        end_parent(&p, how).await;
        wait_orphaned(&c).await;
        let st = c.state().await.unwrap();
        assert_eq!(st.state().get("__parent__"), None, "{how:?}");
        assert_eq!(
            st.state()["__orphaned_from__"],
            json!({"id": "p", "tag": "kid", "meta": {"role": "worker"}}),
            "{how:?}"
        );
        // It keeps working and got no orphaned signal.
        c.call(sig("counter.add", json!({"n": 1}))).await.unwrap();
        assert_eq!(next_of(&mut crx, "counter.add").await.ty(), "counter.add");
        assert!(crx.try_recv().is_err());
        assert!(c.is_alive());
        jido.shutdown().await;
    }
}

#[tokio::test]
async fn on_parent_death_emit_orphan_for_stop_crash_and_kill() {
    for how in [End::Stop, End::Crash, End::Kill] {
        let jido = instance().await;
        let (p, _prx, c, mut crx) = family(
            &jido,
            json!({"on_parent_death": "emit_orphan"}),
            "transient",
        )
        .await;
        let reason = end_parent(&p, how).await;
        let s = next_of(&mut crx, "jido.agent.orphaned").await;
        assert_eq!(s.source(), "/agent/p/kid");
        assert_eq!(
            s.data(),
            Some(
                &json!({"parent_id": "p", "tag": "kid", "meta": {"role": "worker"}, "reason": reason})
            ),
            "{how:?}"
        );
        let st = c.state().await.unwrap();
        assert_eq!(st.state()["__orphaned_from__"]["id"], "p");
        assert_eq!(st.state().get("__parent__"), None);
        // Exactly one.
        c.call(sig("noop", json!({}))).await.unwrap();
        assert_eq!(next_of(&mut crx, "noop").await.ty(), "noop");
        assert!(crx.try_recv().is_err());
        jido.shutdown().await;
    }
}

#[tokio::test]
async fn parent_down_stop_cascades_to_grandchildren() {
    let jido = instance().await;
    let (p, _prx, c, _crx) = family(&jido, json!({"on_parent_death": "stop"}), "transient").await;
    c.call(sig("spawn", json!({}))).await.unwrap();
    c.call(sig("noop", json!({}))).await.unwrap();
    let g = jido.whereis("p/kid/grandkid").expect("grandchild");
    let (probe, mut seen) = probe().await;
    probe.get_cell().monitor(c.actor_ref().get_cell());
    probe.get_cell().monitor(g.actor_ref().get_cell());
    p.actor_ref().kill();
    let mut exits = vec![
        exit_of(&mut seen, c.actor_ref().get_id()).await,
        exit_of(&mut seen, g.actor_ref().get_id()).await,
    ];
    exits.sort_by_key(|s| format!("{s:?}"));
    let mut expected = vec![
        Seen::Terminated(
            c.actor_ref().get_id(),
            Some("shutdown: parent_down: killed".into()),
        ),
        Seen::Terminated(
            g.actor_ref().get_id(),
            Some("shutdown: parent_down: shutdown: parent_down: killed".into()),
        ),
    ];
    expected.sort_by_key(|s| format!("{s:?}"));
    assert_eq!(exits, expected);
    jido.shutdown().await;
}

#[tokio::test]
async fn a_child_ending_never_takes_the_parent_down() {
    let jido = instance().await;
    let (p, mut prx, c, _crx) = family(&jido, json!({}), "temporary").await;
    c.cast(sig("crash", json!({}))).unwrap();
    let exit = next_of(&mut prx, "jido.agent.child.exit").await;
    assert_eq!(
        exit.data(),
        Some(&json!({"tag": "kid", "id": "p/kid", "reason": crash_reason()}))
    );
    // Temporary: not restarted.
    p.call(sig("noop", json!({}))).await.unwrap();
    assert!(p.is_alive());
    assert!(p.status().await.unwrap().children.is_empty());
    assert!(jido.whereis("p/kid").is_none());

    // Killed child: same.
    p.call(sig("spawn", json!({"tag": "k2", "restart": "temporary"})))
        .await
        .unwrap();
    next_of(&mut prx, "jido.agent.child.started").await;
    let k2 = jido.whereis("p/k2").unwrap();
    k2.actor_ref().kill();
    let exit = next_of(&mut prx, "jido.agent.child.exit").await;
    assert_eq!(
        exit.data(),
        Some(&json!({"tag": "k2", "id": "p/k2", "reason": "killed"}))
    );
    assert!(p.is_alive());
    jido.shutdown().await;
}

#[tokio::test]
async fn a_crashed_transient_child_is_restarted_with_its_id_and_retracked() {
    let jido = instance().await;
    let (p, mut prx, c, _crx) = family(&jido, json!({}), "transient").await;
    c.call(sig("counter.add", json!({"n": 5}))).await.unwrap();
    let old = c.actor_ref().get_id();
    c.cast(sig("crash", json!({}))).unwrap();
    let exit = next_of(&mut prx, "jido.agent.child.exit").await;
    assert_eq!(exit.data().unwrap()["reason"], crash_reason());
    let again = next_of(&mut prx, "jido.agent.child.started").await;
    assert_eq!(again.data().unwrap()["child_id"], "p/kid");
    let c2 = jido.whereis("p/kid").expect("restarted");
    assert_ne!(c2.actor_ref().get_id(), old);
    p.call(sig("noop", json!({}))).await.unwrap();
    assert_eq!(p.status().await.unwrap().children, vec!["kid".to_owned()]);
    let st = c2.status().await.unwrap();
    assert_eq!(st.parent_id.as_deref(), Some("p"));
    // Restarted from its initial value.
    assert_eq!(st.agent.state().get("total"), None);
    // The parent tracks the new incarnation: StopChild reaches it.
    p.call(sig("stop.child", json!({"tag": "kid"})))
        .await
        .unwrap();
    let exit = next_of(&mut prx, "jido.agent.child.exit").await;
    assert_eq!(exit.data().unwrap()["reason"], "shutdown");
    jido.shutdown().await;
}

#[tokio::test]
async fn restart_policies_after_normal_stops() {
    // Transient: a normal stop is final.
    let jido = instance().await;
    let (_p, mut prx, c, _crx) = family(&jido, json!({}), "transient").await;
    c.cast(sig("die", json!({}))).unwrap();
    let exit = next_of(&mut prx, "jido.agent.child.exit").await;
    assert_eq!(exit.data().unwrap()["reason"], "normal");
    tokio::task::yield_now().await;
    assert!(jido.whereis("p/kid").is_none());
    jido.shutdown().await;

    // Permanent: restarted even after a normal stop.
    let jido = instance().await;
    let (_p, mut prx, c, _crx) = family(&jido, json!({}), "permanent").await;
    let old = c.actor_ref().get_id();
    c.cast(sig("die", json!({}))).unwrap();
    next_of(&mut prx, "jido.agent.child.exit").await;
    next_of(&mut prx, "jido.agent.child.started").await;
    assert_ne!(jido.whereis("p/kid").unwrap().actor_ref().get_id(), old);
    jido.shutdown().await;
}

#[tokio::test]
async fn a_child_that_keeps_crashing_is_given_up() {
    let jido = Jido::start(
        JidoConfig::new()
            .directive_exec(CrashExec)
            .max_restarts(2, Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let doomed = AgentState::new(Doomed, AgentOptions::new());
    let (p, mut prx) = parent("p", doomed);
    let p = jido.start_agent(p, ServerOptions::new()).await.unwrap();
    p.call(sig("spawn", json!({"tag": "d", "restart": "permanent"})))
        .await
        .unwrap();
    let given_up = next_of(&mut prx, "jido.agent.child.given_up").await;
    assert_eq!(
        given_up.data(),
        Some(&json!({"tag": "d", "id": "p/d", "restarts": 2, "reason": crash_reason()}))
    );
    p.call(sig("noop", json!({}))).await.unwrap();
    assert!(jido.whereis("p/d").is_none());
    assert!(p.status().await.unwrap().children.is_empty());
    assert!(p.is_alive());
    jido.shutdown().await;
}

#[tokio::test]
async fn adopt_child_makes_an_agent_a_child() {
    let jido = instance().await;
    let (kid, _k) = child("unused");
    let (pa, mut prx) = parent("boss", kid);
    let boss = jido.start_agent(pa, ServerOptions::new()).await.unwrap();
    let (orphan, _orx) = child("loner");
    let loner = jido
        .start_agent(
            orphan,
            ServerOptions::new().on_parent_death(jido::server::OnParentDeath::Continue),
        )
        .await
        .unwrap();
    boss.call(sig("adopt", json!({"id": "loner", "tag": "adoptee"})))
        .await
        .unwrap();
    boss.call(sig("noop", json!({}))).await.unwrap();
    assert_eq!(
        boss.status().await.unwrap().children,
        vec!["adoptee".to_owned()]
    );
    let st = loner.status().await.unwrap();
    assert_eq!(st.parent_id.as_deref(), Some("boss"));
    assert_eq!(
        st.agent.state()["__parent__"],
        json!({"id": "boss", "tag": "adoptee", "meta": {}})
    );

    // Refusals: tag in use, self, unknown, already attached.
    let (kid2, _k2) = child("unused");
    let (pb, _pbrx) = parent("other", kid2);
    let other = jido.start_agent(pb, ServerOptions::new()).await.unwrap();
    other
        .call(sig("adopt", json!({"id": "loner", "tag": "x"})))
        .await
        .unwrap();
    other
        .call(sig("adopt", json!({"id": "other", "tag": "me"})))
        .await
        .unwrap();
    other
        .call(sig("adopt", json!({"id": "ghost", "tag": "g"})))
        .await
        .unwrap();
    other.call(sig("noop", json!({}))).await.unwrap();
    assert!(other.status().await.unwrap().children.is_empty());
    assert_eq!(
        loner.status().await.unwrap().parent_id.as_deref(),
        Some("boss")
    );
    boss.call(sig("adopt", json!({"id": "other", "tag": "adoptee"})))
        .await
        .unwrap();
    boss.call(sig("noop", json!({}))).await.unwrap();
    assert_eq!(
        boss.status().await.unwrap().children,
        vec!["adoptee".to_owned()]
    );

    // The adopted child's exit reaches the adopter.
    loner.cast(sig("die", json!({}))).unwrap();
    let exit = next_of(&mut prx, "jido.agent.child.exit").await;
    assert_eq!(
        exit.data(),
        Some(&json!({"tag": "adoptee", "id": "loner", "reason": "normal"}))
    );
    jido.shutdown().await;
}

#[tokio::test]
async fn an_adopted_child_applies_its_policy_when_the_adopter_dies() {
    let jido = instance().await;
    let (kid, _k) = child("unused");
    let (pa, _prx) = parent("boss", kid);
    let boss = jido.start_agent(pa, ServerOptions::new()).await.unwrap();
    let (orphan, mut orx) = child("loner");
    let loner = jido
        .start_agent(
            orphan,
            ServerOptions::new().on_parent_death(jido::server::OnParentDeath::EmitOrphan),
        )
        .await
        .unwrap();
    boss.call(sig("adopt", json!({"id": "loner", "tag": "adoptee"})))
        .await
        .unwrap();
    boss.call(sig("noop", json!({}))).await.unwrap();
    boss.actor_ref().kill();
    let s = next_of(&mut orx, "jido.agent.orphaned").await;
    assert_eq!(
        s.data(),
        Some(&json!({"parent_id": "boss", "tag": "adoptee", "meta": {}, "reason": "killed"}))
    );
    assert!(loner.is_alive());
    jido.shutdown().await;
}
