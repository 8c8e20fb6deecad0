//! Issue #11, hierarchy part: the order of exits against messages, every
//! end of a child reported, restarts bound to the current parent, adoption
//! and spawning without awaiting another actor, inherited executors,
//! children of agents embedded without an instance.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use jido::directive::{ChildOptions, CustomDirective, Restart};
use jido::prelude::*;
use jido::server::{
    AgentServer, AgentServerArgs, DEFAULT_CALL_TIMEOUT, DirectiveContext, DirectiveExec,
    DirectiveResult, ErrorDecision, ErrorPolicy, Jido, JidoConfig, ServerOptions,
};
use jido::signal::Signal;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

/// Casts `signal` to the agent `to` from inside the handler, then (with
/// `crash`) panics in the same handler: the message and the end leave
/// together.
#[derive(Debug)]
struct TellThen {
    to: String,
    signal: Signal,
    crash: bool,
}
impl CustomDirective for TellThen {}

struct TellThenExec;
impl DirectiveExec for TellThenExec {
    type Directive = TellThen;
    fn exec(&self, d: &TellThen, _: &Signal, ctx: &DirectiveContext<'_>) -> DirectiveResult {
        let target = ctx.jido().and_then(|j| j.whereis(&d.to)).expect("target");
        target.cast(d.signal.clone()).expect("cast");
        if d.crash {
            panic!("crash!")
        }
        DirectiveResult::Ok
    }
}

async fn instance() -> Jido {
    Jido::start(
        JidoConfig::new()
            .directive_exec(CrashExec)
            .directive_exec(TellThenExec),
    )
    .await
    .unwrap()
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// `{to, type, crash, stop}`: a TellThen directive casting a `type`
/// signal (default `from.parent`) to `to`, then crashing or stopping.
fn tell_then() -> DynAction {
    effects(|p| {
        let tell = TellThen {
            to: p["to"].as_str().unwrap().into(),
            signal: Signal::new(p["type"].as_str().unwrap_or("from.parent"), json!({"n": 1})),
            crash: p["crash"].as_bool().unwrap_or(false),
        };
        let mut out = vec![Directive::custom(tell)];
        if p["stop"].as_bool().unwrap_or(false) {
            out.push(Directive::stop());
        }
        out
    })
}

/// A parent (echo agent): "spawn" starts `kid` with `{tag, opts,
/// restart}`; "adopt" `{id, tag}`; "crash"; every runtime signal and the
/// children's messages are routed (the echo reports them in order).
fn parent(id: &str, kid: AgentState) -> (AgentState, UnboundedReceiver<Signal>) {
    echo_agent(
        id,
        vec![
            (
                "spawn",
                effects(move |p| {
                    let restart = match p["restart"].as_str() {
                        Some("permanent") => Restart::Permanent,
                        Some("transient") => Restart::Transient,
                        _ => Restart::Temporary,
                    };
                    let options = ChildOptions::from_json(&obj(p["opts"].clone()))
                        .expect("valid child options");
                    vec![
                        Directive::spawn_agent(kid.clone(), p["tag"].as_str().unwrap_or("kid"))
                            .options(options)
                            .restart(restart)
                            .into(),
                    ]
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
            ("tell_then", tell_then()),
            ("crash", effects(|_| vec![Directive::custom(Crash)])),
            ("noop", noop()),
            ("jido.agent.child.started", noop()),
            ("jido.agent.child.exit", noop()),
            ("jido.agent.child.given_up", noop()),
            ("child.says", noop()),
            ("child.cast", noop()),
        ],
    )
}

/// A child: "crash"; "tell_and_stop" (EmitToParent, then Stop);
/// "cast_and_stop" (an action casts to its parent, then Stop); "adopt"
/// `{id, tag}`; "spawn" (a grandchild "g"); "from.parent"; orphaned.
fn child(id: &str, jido: &Jido) -> (AgentState, UnboundedReceiver<Signal>) {
    let jido = jido.clone();
    echo_agent(
        id,
        vec![
            ("crash", effects(|_| vec![Directive::custom(Crash)])),
            (
                "tell_and_stop",
                act(|_, ctx| async move {
                    let state = ctx.state().unwrap();
                    ctx.push_effect(
                        Directive::emit_to_parent_of(
                            state,
                            Signal::new("child.says", json!({"last": true})),
                        )
                        .unwrap(),
                    );
                    ctx.push_effect(Directive::stop());
                    Ok(json!({}))
                }),
            ),
            (
                "cast_and_stop",
                act(move |_, ctx| {
                    let jido = jido.clone();
                    async move {
                        let parent_id = ctx.state().unwrap()["__parent__"]["id"]
                            .as_str()
                            .unwrap()
                            .to_owned();
                        let parent = jido.whereis(&parent_id).unwrap();
                        parent
                            .cast(Signal::new("child.cast", json!({"last": true})))
                            .unwrap();
                        ctx.push_effect(Directive::stop());
                        Ok(json!({}))
                    }
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
            (
                "spawn",
                effects(|_| {
                    vec![
                        Directive::spawn_agent(
                            TestAgent::new()
                                .route(
                                    "adopt",
                                    effects(|p| {
                                        vec![Directive::adopt_child(
                                            p["id"].as_str().unwrap(),
                                            p["tag"].as_str().unwrap(),
                                        )]
                                    }),
                                )
                                .route("noop", noop())
                                .build("unused"),
                            "g",
                        )
                        .into(),
                    ]
                }),
            ),
            ("tell_then", tell_then()),
            ("from.parent", noop()),
            ("noop", noop()),
            ("jido.agent.orphaned", noop()),
            ("jido.agent.child.started", noop()),
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

/// The types of the signals received until one of type `last` (included),
/// leaving out `skip`.
async fn types_until(rx: &mut UnboundedReceiver<Signal>, last: &str, skip: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let s = recv(rx).await;
        if skip.contains(&s.ty()) {
            continue;
        }
        out.push(s.ty().to_owned());
        if s.ty() == last {
            return out;
        }
    }
}

/// Polls `f` (yielding in between, no timer) until it holds.
async fn until<F, Fut>(mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..10_000 {
        if f().await {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("condition never held");
}

/// The `reason` fields of the "adopt_child refused" warnings recorded.
fn refusals(events: &Events) -> Vec<String> {
    events
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, f)| f.get("message") == Some(&json!("adopt_child refused")))
        .map(|(_, f)| f["reason"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn with_message(events: &Events, message: &str) -> Vec<Map<String, Value>> {
    events
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, f)| f.get("message") == Some(&json!(message)))
        .map(|(_, f)| f.clone())
        .collect()
}

// 1. Ordering of exits -----------------------------------------------------

#[tokio::test]
async fn a_childs_last_messages_reach_its_parent_before_its_exit() {
    let jido = instance().await;
    let (kid, _krx) = child("unused", &jido);
    let (p, mut prx) = parent("p", kid);
    let p = jido.start_agent(p, ServerOptions::new()).await.unwrap();
    let started = &["jido.agent.child.started", "noop"];

    // EmitToParent, then Stop.
    p.call(sig("spawn", json!({"tag": "k1"}))).await.unwrap();
    next_of(&mut prx, "jido.agent.child.started").await;
    let k1 = jido.whereis("p/k1").unwrap();
    k1.cast(sig("tell_and_stop", json!({}))).unwrap();
    assert_eq!(
        types_until(&mut prx, "jido.agent.child.exit", started).await,
        ["child.says", "jido.agent.child.exit"]
    );

    // A cast to the parent's AgentRef from an action, then Stop.
    p.call(sig("spawn", json!({"tag": "k2"}))).await.unwrap();
    next_of(&mut prx, "jido.agent.child.started").await;
    let k2 = jido.whereis("p/k2").unwrap();
    k2.cast(sig("cast_and_stop", json!({}))).unwrap();
    assert_eq!(
        types_until(&mut prx, "jido.agent.child.exit", started).await,
        ["child.cast", "jido.agent.child.exit"]
    );

    // A cast from the child's handler, then a crash in the same handler.
    p.call(sig("spawn", json!({"tag": "k3"}))).await.unwrap();
    next_of(&mut prx, "jido.agent.child.started").await;
    let k3 = jido.whereis("p/k3").unwrap();
    k3.cast(sig(
        "tell_then",
        json!({"to": "p", "type": "child.says", "crash": true}),
    ))
    .unwrap();
    let exit = types_until(&mut prx, "jido.agent.child.exit", started).await;
    assert_eq!(exit, ["child.says", "jido.agent.child.exit"]);
    jido.shutdown().await;
}

#[tokio::test]
async fn a_parents_last_messages_reach_its_child_before_it_is_orphaned() {
    for (crash, stop) in [(true, false), (false, true)] {
        let jido = instance().await;
        let (kid, mut krx) = child("unused", &jido);
        let (p, mut prx) = parent("p", kid);
        let p = jido.start_agent(p, ServerOptions::new()).await.unwrap();
        p.call(sig(
            "spawn",
            json!({"tag": "kid", "opts": {"on_parent_death": "emit_orphan"}}),
        ))
        .await
        .unwrap();
        next_of(&mut prx, "jido.agent.child.started").await;
        p.cast(sig(
            "tell_then",
            json!({"to": "p/kid", "crash": crash, "stop": stop}),
        ))
        .unwrap();
        assert_eq!(
            types_until(&mut krx, "jido.agent.orphaned", &[]).await,
            ["from.parent", "jido.agent.orphaned"],
            "crash: {crash}, stop: {stop}"
        );
        jido.shutdown().await;
    }
}

// 2. Every end of a child is reported ----------------------------------------

#[tokio::test]
async fn every_end_of_a_crash_looping_child_reaches_its_parent_then_given_up() {
    let jido = instance().await;
    let (p, mut prx) = parent("p", AgentState::new(Doomed, AgentOptions::new()));
    let p = jido.start_agent(p, ServerOptions::new()).await.unwrap();
    p.call(sig("spawn", json!({"tag": "d", "restart": "permanent"})))
        .await
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let s = recv(&mut prx).await;
        if s.ty().starts_with("jido.agent.child.") {
            seen.push((s.ty().to_owned(), s.data().cloned().unwrap_or_default()));
        }
        if s.ty() == "jido.agent.child.given_up" {
            break;
        }
    }
    // The default limit (3 restarts): the first run and three restarts,
    // each started and ended, then given up.
    let started = (
        "jido.agent.child.started".to_owned(),
        json!({"parent_id": "p", "child_id": "p/d", "child_type": "doomed", "tag": "d", "meta": {}}),
    );
    let exit = (
        "jido.agent.child.exit".to_owned(),
        json!({"tag": "d", "id": "p/d", "reason": crash_reason()}),
    );
    let mut expected = Vec::new();
    for _ in 0..4 {
        expected.push(started.clone());
        expected.push(exit.clone());
    }
    expected.push((
        "jido.agent.child.given_up".to_owned(),
        json!({"tag": "d", "id": "p/d", "restarts": 3, "reason": crash_reason()}),
    ));
    assert_eq!(seen, expected);
    p.call(sig("noop", json!({}))).await.unwrap();
    assert!(p.status().await.unwrap().children.is_empty());
    assert!(jido.whereis("p/d").is_none());
    assert_eq!(jido.agents().len(), 1);
    jido.shutdown().await;
}

// 3. Restarts bind the current parent ----------------------------------------

#[tokio::test]
async fn a_restarted_child_is_bound_to_the_parent_that_adopted_it() {
    let jido = instance().await;
    let (k, _krx) = child("k", &jido);
    let k = jido
        .start_agent(k, ServerOptions::new().restart(Restart::Permanent))
        .await
        .unwrap();
    let (p2, mut prx) = parent("p2", TestAgent::new().build("unused"));
    let p2 = jido.start_agent(p2, ServerOptions::new()).await.unwrap();
    p2.call(sig("adopt", json!({"id": "k", "tag": "adoptee"})))
        .await
        .unwrap();
    until(|| async { k.status().await.unwrap().parent_id.is_some() }).await;
    k.cast(sig("crash", json!({}))).unwrap();
    assert_eq!(
        next_of(&mut prx, "jido.agent.child.exit").await.data(),
        Some(&json!({"tag": "adoptee", "id": "k", "reason": crash_reason()}))
    );
    assert_eq!(
        next_of(&mut prx, "jido.agent.child.started").await.data(),
        Some(
            &json!({"parent_id": "p2", "child_id": "k", "child_type": "echo_agent", "tag": "adoptee", "meta": {}})
        )
    );
    let k2 = jido.whereis("k").unwrap();
    assert_ne!(k2.actor_ref().get_id(), k.actor_ref().get_id());
    let st = k2.status().await.unwrap();
    assert_eq!(st.parent_id.as_deref(), Some("p2"));
    assert_eq!(
        st.agent.state()["__parent__"],
        json!({"id": "p2", "tag": "adoptee", "meta": {}})
    );
    assert_eq!(
        p2.status().await.unwrap().children,
        vec!["adoptee".to_owned()]
    );
    jido.shutdown().await;
}

#[tokio::test]
async fn a_restarted_child_is_bound_to_its_restarted_parent() {
    let jido = instance().await;
    let (kid, _krx) = child("unused", &jido);
    let (p, mut prx) = parent("p", kid);
    let p = jido
        .start_agent(p, ServerOptions::new().restart(Restart::Permanent))
        .await
        .unwrap();
    p.call(sig(
        "spawn",
        json!({"tag": "kid", "restart": "permanent", "opts": {"on_parent_death": "continue"}}),
    ))
    .await
    .unwrap();
    next_of(&mut prx, "jido.agent.child.started").await;
    let c = jido.whereis("p/kid").unwrap();
    // The parent crashes and is restarted (a new actor); the child goes on.
    p.cast(sig("crash", json!({}))).unwrap();
    until(|| async {
        jido.whereis("p")
            .is_some_and(|r| r.actor_ref().get_id() != p.actor_ref().get_id())
    })
    .await;
    until(|| async { c.status().await.unwrap().parent_id.is_none() }).await;
    let p_new = jido.whereis("p").unwrap();
    // Now the child crashes: its restart binds to the parent's new
    // incarnation, which tracks it.
    c.cast(sig("crash", json!({}))).unwrap();
    let started = next_of(&mut prx, "jido.agent.child.started").await;
    assert_eq!(started.data().unwrap()["child_id"], "p/kid");
    let c2 = jido.whereis("p/kid").unwrap();
    assert_ne!(c2.actor_ref().get_id(), c.actor_ref().get_id());
    let st = c2.status().await.unwrap();
    assert_eq!(st.parent_id.as_deref(), Some("p"));
    assert_eq!(st.agent.state().get("__orphaned_from__"), None);
    assert_eq!(
        p_new.status().await.unwrap().children,
        vec!["kid".to_owned()]
    );
    // Still bound to it: the parent's end reaches it.
    p_new.stop("shutdown").await.unwrap();
    until(|| async { c2.status().await.unwrap().parent_id.is_none() }).await;
    assert!(c2.is_alive());
    jido.shutdown().await;
}

// 4. Adoption: a request and a confirmation ----------------------------------

#[tokio::test(flavor = "current_thread")]
async fn an_agent_refuses_to_be_adopted_by_its_descendant() {
    let (events, _guard) = record_events();
    let jido = instance().await;
    let (kid, _krx) = child("unused", &jido);
    let (p, mut prx) = parent("p", kid);
    let p = jido.start_agent(p, ServerOptions::new()).await.unwrap();
    p.call(sig("spawn", json!({"tag": "kid"}))).await.unwrap();
    next_of(&mut prx, "jido.agent.child.started").await;
    let c = jido.whereis("p/kid").unwrap();
    c.call(sig("spawn", json!({}))).await.unwrap();
    until(|| async { jido.whereis("p/kid/g").is_some() }).await;
    let g = jido.whereis("p/kid/g").unwrap();
    until(|| async { c.status().await.unwrap().children == ["g"] }).await;

    // The child adopts its parent; the grandchild its grandparent.
    c.call(sig("adopt", json!({"id": "p", "tag": "up"})))
        .await
        .unwrap();
    until(|| async { refusals(&events).len() == 1 }).await;
    g.call(sig("adopt", json!({"id": "p", "tag": "up"})))
        .await
        .unwrap();
    until(|| async { refusals(&events).len() == 2 }).await;
    assert_eq!(
        refusals(&events),
        ["cannot_adopt_ancestor", "cannot_adopt_ancestor"]
    );
    assert_eq!(p.status().await.unwrap().parent_id, None);
    assert_eq!(c.status().await.unwrap().children, ["g"]);
    assert!(g.status().await.unwrap().children.is_empty());
    // The tags were released: the grandchild adopts an unrelated agent
    // under the same tag.
    let (other, _orx) = child("other", &jido);
    jido.start_agent(other, ServerOptions::new()).await.unwrap();
    g.call(sig("adopt", json!({"id": "other", "tag": "up"})))
        .await
        .unwrap();
    until(|| async { g.status().await.unwrap().children == ["up"] }).await;
    // "other" knows who is above it: it refuses to adopt p.
    let o = jido.whereis("other").unwrap();
    assert_eq!(
        o.status().await.unwrap().parent_id.as_deref(),
        Some("p/kid/g")
    );
    o.call(sig("adopt", json!({"id": "p", "tag": "up2"})))
        .await
        .unwrap();
    until(|| async { refusals(&events).len() == 3 }).await;
    assert_eq!(refusals(&events)[2], "cannot_adopt_ancestor");
    assert_eq!(p.status().await.unwrap().parent_id, None);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn mutual_adoption_never_blocks_and_never_makes_a_cycle() {
    let jido = instance().await;
    let (a, _arx) = child("a", &jido);
    let (b, _brx) = child("b", &jido);
    let a = jido.start_agent(a, ServerOptions::new()).await.unwrap();
    let b = jido.start_agent(b, ServerOptions::new()).await.unwrap();
    let t0 = Instant::now();
    a.cast(sig("adopt", json!({"id": "b", "tag": "t"})))
        .unwrap();
    b.cast(sig("adopt", json!({"id": "a", "tag": "t"})))
        .unwrap();
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    let (sa, sb) = (a.status().await.unwrap(), b.status().await.unwrap());
    // Served at once (no agent waits for the other inside a handler).
    assert_eq!(t0.elapsed(), Duration::ZERO);
    // At most one adopted the other, and both agree.
    assert!(sa.parent_id.is_none() || sb.parent_id.is_none());
    assert_eq!(sa.parent_id.is_some(), sb.children == ["t"]);
    assert_eq!(sb.parent_id.is_some(), sa.children == ["t"]);
    jido.shutdown().await;
}

/// Work for the side runtime.
type Job = Box<dyn FnOnce(&tokio::runtime::Runtime) + Send>;

/// A runtime on its own thread, driven only while `run` is waiting: its
/// actors make no progress in between.
struct Side {
    tx: Option<std::sync::mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Side {
    fn new() -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            for f in rx {
                f(&rt);
            }
        });
        Side {
            tx: Some(tx),
            thread: Some(thread),
        }
    }

    /// Runs `fut` on the side runtime; awaited without a timer (so a
    /// paused clock does not jump meanwhile).
    async fn run<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> T {
        let (otx, orx) = tokio::sync::oneshot::channel();
        self.tx
            .as_ref()
            .unwrap()
            .send(Box::new(move |rt| {
                let _ = otx.send(rt.block_on(fut));
            }))
            .unwrap();
        orx.await.unwrap()
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[tokio::test(start_paused = true)]
async fn adoption_never_waits_for_the_child_and_a_late_acceptance_is_undone() {
    let (events, _guard) = record_events();
    let jido = instance().await;
    let side = Side::new();
    // "loner" runs on the side runtime: it answers only when we drive it.
    let (loner, _lrx) = child("loner", &jido);
    let j = jido.clone();
    let loner = side
        .run(async move {
            let r = j
                .start_agent(loner, ServerOptions::new().debug(true))
                .await
                .unwrap();
            r.status().await.unwrap();
            r
        })
        .await;
    let (boss, _brx) = parent("boss", TestAgent::new().build("unused"));
    let boss = jido.start_agent(boss, ServerOptions::new()).await.unwrap();
    let (x, _xrx) = child("x", &jido);
    let x = jido.start_agent(x, ServerOptions::new()).await.unwrap();

    let t0 = Instant::now();
    boss.call(sig("adopt", json!({"id": "loner", "tag": "adoptee"})))
        .await
        .unwrap();
    // The boss serves while the adoption waits for the child's answer.
    let st = boss.status().await.unwrap();
    assert_eq!(t0.elapsed(), Duration::ZERO);
    assert!(st.children.is_empty());
    // The tag is reserved meanwhile.
    boss.call(sig("adopt", json!({"id": "x", "tag": "adoptee"})))
        .await
        .unwrap();
    boss.call(sig("noop", json!({}))).await.unwrap();
    assert_eq!(refusals(&events), ["tag_in_use"]);
    assert_eq!(x.status().await.unwrap().parent_id, None);

    // No answer within 5 s: the reservation goes.
    tokio::time::sleep(DEFAULT_CALL_TIMEOUT + Duration::from_millis(1)).await;
    assert_eq!(refusals(&events), ["tag_in_use", "adopt_timeout"]);
    assert!(boss.status().await.unwrap().children.is_empty());
    // The tag is free again.
    boss.call(sig("adopt", json!({"id": "x", "tag": "adoptee"})))
        .await
        .unwrap();
    until(|| async { boss.status().await.unwrap().children == ["adoptee"] }).await;
    assert_eq!(x.status().await.unwrap().parent_id.as_deref(), Some("boss"));

    // Now the loner answers: it accepts, the boss no longer expects it and
    // tells it to drop that parent.
    let l = loner.clone();
    let (parent_id, kinds) = side
        .run(async move {
            loop {
                let kinds: Vec<&'static str> = l
                    .recent_events(None)
                    .await
                    .unwrap()
                    .iter()
                    .rev()
                    .map(|e| e.kind)
                    .filter(|k| k.starts_with("parent_"))
                    .collect();
                if kinds.contains(&"parent_dropped") {
                    return (l.status().await.unwrap().parent_id, kinds);
                }
                tokio::task::yield_now().await;
            }
        })
        .await;
    assert_eq!(parent_id, None);
    assert_eq!(kinds, ["parent_adopted", "parent_dropped"]);
    let l = loner.clone();
    let state = side.run(async move { l.state().await.unwrap() }).await;
    assert_eq!(state.state().get("__parent__"), None);
    assert_eq!(
        boss.status().await.unwrap().children,
        vec!["adoptee".to_owned()]
    );
    let l = loner.clone();
    side.run(async move { l.stop("shutdown").await.unwrap() })
        .await;
    jido.shutdown().await;
    drop(side);
}

// 5. SpawnAgent: a request and a confirmation --------------------------------

#[tokio::test(start_paused = true)]
async fn a_child_that_fails_to_start_leaves_nothing_on_its_parent() {
    let (events, _guard) = record_events();
    let jido = instance().await;
    let (taken, _trx) = child("taken", &jido);
    jido.start_agent(taken, ServerOptions::new()).await.unwrap();
    let (kid, _krx) = child("unused", &jido);
    let (p, mut prx) = parent("p", kid);
    let p = jido.start_agent(p, ServerOptions::new()).await.unwrap();
    let t0 = Instant::now();

    // Its id is already registered.
    p.call(sig("spawn", json!({"tag": "w", "opts": {"id": "taken"}})))
        .await
        .unwrap();
    until(|| async { !with_message(&events, "child agent failed to start").is_empty() }).await;
    let failed = with_message(&events, "child agent failed to start");
    assert_eq!(failed[0]["tag"], "w");
    assert_eq!(failed[0]["child_id"], "taken");
    assert_eq!(failed[0]["error"], "agent id already registered");
    let st = p.status().await.unwrap();
    assert!(st.children.is_empty());
    assert_eq!(t0.elapsed(), Duration::ZERO);
    assert_eq!(jido.agents().len(), 2);
    assert_eq!(jido.supervisor_cell().get_children().len(), 2);
    assert_eq!(jido.exec().supervisor().active(), 0);

    // The tag is free: the same tag with a fresh id starts.
    p.call(sig("spawn", json!({"tag": "w", "opts": {"id": "fresh"}})))
        .await
        .unwrap();
    let s = next_of(&mut prx, "jido.agent.child.started").await;
    assert_eq!(s.data().unwrap()["child_id"], "fresh");
    assert_eq!(p.status().await.unwrap().children, ["w"]);
    assert_eq!(t0.elapsed(), Duration::ZERO);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_child_with_an_invalid_route_leaves_nothing_on_its_parent() {
    let (events, _guard) = record_events();
    let jido = instance().await;
    let bad = TestAgent::new().route("a..b", noop()).build("unused");
    let (p, _prx) = parent("p", bad);
    let p = jido.start_agent(p, ServerOptions::new()).await.unwrap();
    let t0 = Instant::now();
    p.call(sig("spawn", json!({"tag": "w"}))).await.unwrap();
    until(|| async { !with_message(&events, "child agent failed to start").is_empty() }).await;
    let failed = with_message(&events, "child agent failed to start");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid signal route a..b"),
        "{failed:?}"
    );
    assert!(p.status().await.unwrap().children.is_empty());
    assert_eq!(t0.elapsed(), Duration::ZERO);
    assert_eq!(jido.agents().len(), 1);
    assert_eq!(jido.supervisor_cell().get_children().len(), 1);
    assert_eq!(jido.exec().supervisor().active(), 0);
    jido.shutdown().await;
}

// 6. Children inherit the parent's executors ---------------------------------

#[derive(Debug)]
struct Mark;
impl CustomDirective for Mark {}

struct MarkExec(Tx);
impl DirectiveExec for MarkExec {
    type Directive = Mark;
    fn exec(&self, _: &Mark, _: &Signal, ctx: &DirectiveContext<'_>) -> DirectiveResult {
        let _ = self.0.send(json!(ctx.agent_id()));
        DirectiveResult::Ok
    }
}

#[tokio::test(start_paused = true)]
async fn a_spawned_child_inherits_its_parents_directive_executors() {
    let jido = instance().await;
    let (tx, mut rx) = channel();
    let kid = TestAgent::new()
        .route("mark", effects(|_| vec![Directive::custom(Mark)]))
        .build("unused");
    let (p, mut prx) = parent("p", kid);
    let p = jido
        .start_agent(p, ServerOptions::new().directive_exec(MarkExec(tx)))
        .await
        .unwrap();
    p.call(sig("spawn", json!({"tag": "kid"}))).await.unwrap();
    next_of(&mut prx, "jido.agent.child.started").await;
    let c = jido.whereis("p/kid").unwrap();
    c.call(sig("mark", json!({}))).await.unwrap();
    assert_eq!(recv(&mut rx).await, json!("p/kid"));
    jido.shutdown().await;
}

// 7. Agents embedded without an instance -------------------------------------

#[tokio::test]
async fn without_an_instance_children_are_linked_under_the_parents_supervisor() {
    let (probe, mut seen) = probe().await;
    let kid = TestAgent::new().route("noop", noop()).build("unused");
    let (p, mut prx) = parent("lone-p", kid);
    let (p, _) = AgentServer::start_linked(
        AgentServerArgs::new(p, ServerOptions::new()),
        probe.get_cell(),
    )
    .await
    .unwrap();
    assert_eq!(recv(&mut seen).await, Seen::Started(p.actor_ref().get_id()));
    p.call(sig(
        "spawn",
        json!({"tag": "kid", "opts": {"on_parent_death": "continue"}}),
    ))
    .await
    .unwrap();
    next_of(&mut prx, "jido.agent.child.started").await;
    let Seen::Started(kid) = recv(&mut seen).await else {
        panic!("expected the child's start")
    };
    let mut linked: Vec<_> = probe
        .get_cell()
        .get_children()
        .iter()
        .map(|c| c.get_id())
        .collect();
    linked.sort();
    let mut expected = vec![p.actor_ref().get_id(), kid];
    expected.sort();
    assert_eq!(linked, expected);
    // The parent ends; the child goes on, reachable through the
    // supervisor, which sees its end.
    p.stop("done").await.unwrap();
    assert_eq!(
        exit_of(&mut seen, p.actor_ref().get_id()).await,
        Seen::Terminated(p.actor_ref().get_id(), Some("done".into()))
    );
    let children = probe.get_cell().get_children();
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].get_id(), kid);
    children[0].stop(Some("bye".into()));
    assert_eq!(
        exit_of(&mut seen, kid).await,
        Seen::Terminated(kid, Some("bye".into()))
    );
    probe.stop(None);
}

#[tokio::test]
async fn without_an_instance_or_supervisor_an_orphan_surviving_child_is_refused() {
    let errors: Arc<Mutex<Vec<(String, Error)>>> = Arc::default();
    let seen = Arc::clone(&errors);
    let policy = ErrorPolicy::custom(move |ev| {
        seen.lock()
            .unwrap()
            .push((ev.context.to_owned(), ev.error.clone()));
        Ok(ErrorDecision::Continue)
    });
    let kid = TestAgent::new().route("noop", noop()).build("unused");
    let (p, mut prx) = parent("lone", kid);
    let (p, _) = AgentServer::start(AgentServerArgs::new(
        p,
        ServerOptions::new().error_policy(policy),
    ))
    .await
    .unwrap();
    for policy in ["continue", "emit_orphan"] {
        p.call(sig(
            "spawn",
            json!({"tag": "kid", "opts": {"on_parent_death": policy}}),
        ))
        .await
        .unwrap();
        p.call(sig("noop", json!({}))).await.unwrap();
        let (context, err) = errors.lock().unwrap().pop().expect("an error");
        assert_eq!(context, "spawn_agent");
        assert_eq!(err.kind(), ErrorKind::Configuration);
        assert_eq!(
            err.message(),
            "a child that outlives its parent needs a supervisor"
        );
        assert_eq!(err.detail("tag"), Some(&json!("kid")));
        assert_eq!(err.detail("on_parent_death"), Some(&json!(policy)));
        assert!(p.status().await.unwrap().children.is_empty());
    }
    assert_eq!(p.status().await.unwrap().error_count, 2);
    // A `stop` child is fine: it ends with its parent.
    p.call(sig("spawn", json!({"tag": "kid"}))).await.unwrap();
    next_of(&mut prx, "jido.agent.child.started").await;
    assert_eq!(p.status().await.unwrap().children, ["kid"]);
    assert!(errors.lock().unwrap().is_empty());
    p.stop("done").await.unwrap();
}
