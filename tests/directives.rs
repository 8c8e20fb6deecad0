//! Directive execution: Emit, Error (policies), Spawn, Schedule, Cron,
//! RunInstruction, Stop, custom directives, queue overflow.

mod common;

use std::time::Duration;

use common::*;
use jido::directive::{ChildSpec, CustomDirective, StopReason};
use jido::prelude::*;
use jido::server::ActorTarget;
use jido::server::{
    AgentServerArgs, DirectiveContext, DirectiveExec, DirectiveResult, ErrorDecision, ErrorPolicy,
    Jido, JidoConfig, ServerOptions,
};
use jido::signal::Signal;
use jido::signal::dispatch::{ChannelTarget, DispatchConfig};
use serde_json::{Value, json};
use tokio::sync::mpsc;

fn signal_channel() -> (DispatchConfig, mpsc::UnboundedReceiver<Signal>) {
    let (tx, rx) = mpsc::unbounded_channel::<Signal>();
    (
        DispatchConfig::new(ChannelTarget::unbounded(tx)).unwrap(),
        rx,
    )
}

async fn recv_signal(rx: &mut mpsc::UnboundedReceiver<Signal>) -> Signal {
    within(rx.recv()).await.expect("closed")
}

/// An agent whose "go" signal returns the directives built by `f`, plus
/// a "noop" route (a call to it returns once earlier directives ran).
fn go_agent<F>(id: &str, f: F) -> AgentState
where
    F: Fn(&Value) -> Vec<Directive> + Send + Sync + 'static,
{
    TestAgent::new()
        .route("go", effects(f))
        .route("noop", noop())
        .route("counter.add", add())
        .route("log.append", append())
        .build(id)
}

#[tokio::test]
async fn emit_goes_to_its_dispatch_then_the_default_then_back_to_the_agent() {
    // Explicit dispatch.
    let (cfg, mut rx) = signal_channel();
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(
            go_agent("e1", move |_| {
                vec![Directive::emit_to(
                    Signal::new("out.one", json!({"a": 1})),
                    cfg.clone(),
                )]
            }),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    agent.call(sig("go", json!({}))).await.unwrap();
    let s = recv_signal(&mut rx).await;
    assert_eq!((s.ty(), s.data()), ("out.one", Some(&json!({"a": 1}))));

    // The agent's default dispatch.
    let (cfg, mut rx) = signal_channel();
    let agent = jido
        .start_agent(
            go_agent("e2", |_| {
                vec![Directive::emit(Signal::new("out.two", json!({})))]
            }),
            ServerOptions::new().default_dispatch(cfg),
        )
        .await
        .unwrap();
    agent.call(sig("go", json!({}))).await.unwrap();
    assert_eq!(recv_signal(&mut rx).await.ty(), "out.two");
    jido.shutdown().await;

    // The instance's default dispatch.
    let (cfg, mut rx) = signal_channel();
    let jido = Jido::start(JidoConfig::new().default_dispatch(cfg))
        .await
        .unwrap();
    let agent = jido
        .start_agent(
            go_agent("e3", |_| {
                vec![Directive::emit(Signal::new("out.three", json!({})))]
            }),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    agent.call(sig("go", json!({}))).await.unwrap();
    assert_eq!(recv_signal(&mut rx).await.ty(), "out.three");
    jido.shutdown().await;

    // No dispatch anywhere: back into the agent's own routing, in order.
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(
            go_agent("e4", |_| {
                vec![
                    Directive::emit(Signal::new("log.append", json!({"item": "a"}))),
                    Directive::emit(Signal::new("log.append", json!({"item": "b"}))),
                ]
            }),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    agent.call(sig("go", json!({}))).await.unwrap();
    agent
        .call(sig("log.append", json!({"item": "c"})))
        .await
        .unwrap();
    let st = agent.state().await.unwrap();
    assert_eq!(st.state()["log"], json!(["a", "b", "c"]));
    jido.shutdown().await;
}

#[tokio::test]
async fn emit_to_another_agent_through_an_actor_target() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let target = jido
        .start_agent(go_agent("sink", |_| vec![]), ServerOptions::new())
        .await
        .unwrap();
    let cfg = DispatchConfig::new(ActorTarget::new(target.clone())).unwrap();
    let source = jido
        .start_agent(
            go_agent("src", move |_| {
                vec![Directive::emit_to(
                    Signal::new("counter.add", json!({"n": 4})),
                    cfg.clone(),
                )]
            }),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    source.call(sig("go", json!({}))).await.unwrap();
    within(async {
        loop {
            if target.state().await.unwrap().state()["total"] == 4 {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    jido.shutdown().await;
}

fn failing_agent(id: &str) -> AgentState {
    TestAgent::new()
        .route("fail", fail())
        .route("noop", noop())
        .build(id)
}

#[tokio::test]
async fn error_policy_log_only_logs_and_continues() {
    let (events, _guard) = record_events();
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(failing_agent("lo"), ServerOptions::new())
        .await
        .unwrap();
    let err = agent
        .call(sig("fail", json!({"message": "card declined"})))
        .await
        .unwrap_err();
    assert_eq!(err.message(), "card declined");
    agent.call(sig("noop", json!({}))).await.unwrap();
    assert!(agent.is_alive());
    assert_eq!(agent.status().await.unwrap().error_count, 1);
    let logged = events.named("jido.agent_server.error");
    assert_eq!(logged.len(), 1);
    assert_eq!(
        logged[0]["message"],
        json!("agent lo [instruction]: instruction failed")
    );
    assert_eq!(logged[0]["policy"], json!("log_only"));
    jido.shutdown().await;
}

#[tokio::test]
async fn error_policy_stop_on_error_stops_with_the_error() {
    let args = AgentServerArgs::new(
        failing_agent("soe"),
        ServerOptions::new().error_policy(ErrorPolicy::StopOnError),
    );
    let (agent, _probe, mut rx) = under_probe(args).await;
    agent.cast(sig("fail", json!({}))).unwrap();
    assert_eq!(
        exit_of(&mut rx, agent.actor_ref().get_id()).await,
        Seen::Terminated(
            agent.actor_ref().get_id(),
            Some("agent_error: instruction failed".into())
        )
    );
}

#[tokio::test]
async fn error_policy_emit_signal_dispatches_jido_agent_error() {
    let (cfg, mut srx) = signal_channel();
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(
            failing_agent("es"),
            ServerOptions::new().error_policy(ErrorPolicy::emit_signal(cfg)),
        )
        .await
        .unwrap();
    let failing = sig("fail", json!({}));
    let failing_id = failing.id().to_owned();
    agent.call(failing).await.unwrap_err();
    let s = recv_signal(&mut srx).await;
    assert_eq!(s.ty(), "jido.agent.error");
    assert_eq!(s.source(), "/agent/es");
    // Jido's fields, then the cause and the failed signal
    // (tests/error_promises.rs).
    assert_eq!(
        s.data(),
        Some(&json!({
            "error": "instruction failed",
            "context": "instruction",
            "agent_id": "es",
            "error_type": "execution_error",
            "details": {"reason": {
                "type": "execution_error",
                "message": "boom",
                "details": {"retry": false},
                "retryable": false
            }},
            "retryable": false,
            "signal_id": failing_id,
            "signal_type": "fail"
        }))
    );
    // Back to itself without a dispatch: no route for jido.agent.error, so it
    // is ignored (no error loop).
    let agent = jido
        .start_agent(
            failing_agent("es2"),
            ServerOptions::new().error_policy(ErrorPolicy::EmitSignal(None)),
        )
        .await
        .unwrap();
    agent.call(sig("fail", json!({}))).await.unwrap_err();
    agent.call(sig("noop", json!({}))).await.unwrap();
    agent.call(sig("noop", json!({}))).await.unwrap();
    assert_eq!(agent.status().await.unwrap().error_count, 1);
    jido.shutdown().await;
}

#[tokio::test]
async fn error_policy_max_errors_stops_at_the_limit() {
    let args = AgentServerArgs::new(
        failing_agent("me"),
        ServerOptions::new().error_policy(ErrorPolicy::max_errors(2)),
    );
    let (agent, _probe, mut rx) = under_probe(args).await;
    agent.call(sig("fail", json!({}))).await.unwrap_err();
    agent.call(sig("noop", json!({}))).await.unwrap();
    assert_eq!(agent.status().await.unwrap().error_count, 1);
    assert!(agent.is_alive());
    agent.cast(sig("fail", json!({}))).unwrap();
    assert_eq!(
        exit_of(&mut rx, agent.actor_ref().get_id()).await,
        Seen::Terminated(
            agent.actor_ref().get_id(),
            Some("max_errors_exceeded: 2".into())
        )
    );
}

#[tokio::test]
async fn error_policy_custom_function_decides_and_its_failures_are_ignored() {
    let policy = ErrorPolicy::custom(|ev| match ev.error_count {
        1 => panic!("policy bug"),
        2 => Err(Error::internal("bad return")),
        3 => Ok(ErrorDecision::Continue),
        _ => Ok(ErrorDecision::Stop(StopReason::from(format!(
            "enough after {}",
            ev.context
        )))),
    });
    let args = AgentServerArgs::new(
        failing_agent("cu"),
        ServerOptions::new().error_policy(policy),
    );
    let (agent, _probe, mut rx) = under_probe(args).await;
    for _ in 0..3 {
        agent.call(sig("fail", json!({}))).await.unwrap_err();
    }
    agent.call(sig("noop", json!({}))).await.unwrap();
    assert!(agent.is_alive());
    assert_eq!(agent.status().await.unwrap().error_count, 3);
    agent.cast(sig("fail", json!({}))).unwrap();
    assert_eq!(
        exit_of(&mut rx, agent.actor_ref().get_id()).await,
        Seen::Terminated(
            agent.actor_ref().get_id(),
            Some("enough after instruction".into())
        )
    );
}

#[tokio::test]
async fn queue_overflow_drops_the_batch_keeps_the_state_and_is_reported() {
    let (events, _guard) = record_events();
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let three = act(|_, ctx| async move {
        for i in 0..3 {
            ctx.push_effect(Directive::schedule(
                Duration::from_secs(3600),
                json!({"i": i}),
            ));
        }
        Ok(json!({"total": 1}))
    });
    let two = act(|_, ctx| async move {
        for i in 0..2 {
            ctx.push_effect(Directive::schedule(
                Duration::from_secs(3600),
                json!({"i": i}),
            ));
        }
        Ok(json!({"fits": true}))
    });
    let agent = jido
        .start_agent(
            TestAgent::new()
                .route("three", three)
                .route("two", two)
                .build("ov"),
            ServerOptions::new().max_queue_size(2),
        )
        .await
        .unwrap();
    let err = agent.call(sig("three", json!({}))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QueueOverflow);
    assert_eq!(err.message(), "directive queue overflow");
    assert_eq!(err.detail("queue_size"), Some(&json!(2)));
    assert_eq!(err.detail("dropped"), Some(&json!(3)));
    let status = agent.status().await.unwrap();
    assert_eq!(status.agent.state()["total"], 1);
    assert_eq!((status.queue_length, status.scheduled), (0, 0));
    let overflow = events.named("jido.agent_server.queue.overflow");
    assert_eq!(overflow.len(), 1);
    assert_eq!(overflow[0]["queue_size"], json!(2));
    assert_eq!(overflow[0]["agent_id"], json!("ov"));
    // A batch that fits is executed.
    let after = agent.call(sig("two", json!({}))).await.unwrap();
    assert_eq!(after.state()["fits"], true);
    agent
        .call_timeout(sig("nope", json!({})), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(agent.status().await.unwrap().scheduled, 2);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn schedule_delivers_after_the_delay_and_wraps_json() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (state, mut seen) = echo_agent(
        "sch",
        vec![
            (
                "go",
                effects(|_| {
                    vec![
                        Directive::schedule(Duration::from_secs(10), json!({"check": "payment"})),
                        Directive::schedule(
                            Duration::from_secs(20),
                            Signal::new("reminder", json!({"n": 1})),
                        ),
                    ]
                }),
            ),
            ("jido.scheduled", noop()),
            ("reminder", noop()),
        ],
    );
    let agent = jido.start_agent(state, ServerOptions::new()).await.unwrap();
    agent.call(sig("go", json!({}))).await.unwrap();
    assert_eq!(recv(&mut seen).await.ty(), "go");
    tokio::time::sleep(Duration::from_millis(9_999)).await;
    assert!(seen.try_recv().is_err());
    assert_eq!(agent.status().await.unwrap().scheduled, 2);
    tokio::time::sleep(Duration::from_millis(1)).await;
    let s = recv(&mut seen).await;
    assert_eq!(s.ty(), "jido.scheduled");
    assert_eq!(s.source(), "/agent/sch");
    assert_eq!(s.data(), Some(&json!({"message": {"check": "payment"}})));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let s = recv(&mut seen).await;
    assert_eq!((s.ty(), s.data()), ("reminder", Some(&json!({"n": 1}))));
    assert_eq!(agent.status().await.unwrap().scheduled, 0);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn many_schedules_are_counted_and_all_fire() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (state, mut seen) = echo_agent(
        "many",
        vec![
            (
                "go",
                effects(|params| {
                    let (from, to) = (
                        params["from"].as_u64().unwrap(),
                        params["to"].as_u64().unwrap(),
                    );
                    (from..=to)
                        .map(|s| Directive::schedule(Duration::from_secs(s), json!({"at": s})))
                        .collect()
                }),
            ),
            ("jido.scheduled", noop()),
        ],
    );
    let agent = jido.start_agent(state, ServerOptions::new()).await.unwrap();
    // Arms `from..=to` Schedules, each due `at` seconds after it is armed.
    let arm = |from: u64, to: u64| {
        let agent = agent.clone();
        async move {
            agent
                .call(sig("go", json!({"from": from, "to": to})))
                .await
                .unwrap()
        }
    };
    // The `at` of every scheduled signal received so far, in order.
    let fired = |seen: &mut mpsc::UnboundedReceiver<Signal>| {
        let mut at = Vec::new();
        while let Ok(s) = seen.try_recv() {
            at.push(s.data().unwrap()["message"]["at"].as_u64().unwrap());
        }
        at
    };
    arm(1, 40).await;
    assert_eq!(recv(&mut seen).await.ty(), "go");
    assert_eq!(agent.status().await.unwrap().scheduled, 40);
    tokio::time::sleep(Duration::from_millis(20_500)).await;
    assert_eq!(fired(&mut seen), (1..=20).collect::<Vec<_>>());
    assert_eq!(agent.status().await.unwrap().scheduled, 20);
    // Arming more prunes the fired timers; the count stays exact.
    arm(41, 45).await;
    assert_eq!(recv(&mut seen).await.ty(), "go");
    assert_eq!(agent.status().await.unwrap().scheduled, 25);
    // 41..=45 were armed at 20.5 s: the last fires at 65.5 s.
    tokio::time::sleep(Duration::from_secs(46)).await;
    let rest = fired(&mut seen);
    assert_eq!(rest, (21..=45).collect::<Vec<_>>());
    assert_eq!(agent.status().await.unwrap().scheduled, 0);
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn pending_schedules_die_with_the_agent() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (state, mut seen) = echo_agent(
        "sch2",
        vec![
            (
                "go",
                effects(|_| vec![Directive::schedule(Duration::from_secs(10), json!({}))]),
            ),
            ("jido.scheduled", noop()),
        ],
    );
    let agent = jido.start_agent(state, ServerOptions::new()).await.unwrap();
    agent.call(sig("go", json!({}))).await.unwrap();
    assert_eq!(recv(&mut seen).await.ty(), "go");
    assert_eq!(agent.status().await.unwrap().scheduled, 1);
    jido.stop_agent("sch2").await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    // The strategy (and its sender) went with the agent; nothing arrived.
    assert!(matches!(
        seen.try_recv(),
        Err(mpsc::error::TryRecvError::Disconnected)
    ));
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn cron_ticks_on_schedule_until_cancelled() {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let (state, mut seen) = echo_agent(
        "cr",
        vec![
            (
                "go",
                effects(|_| {
                    vec![
                        Directive::cron("*/10 * * * * *", json!({"job": "poll"}))
                            .job_id("poller")
                            .timezone("Etc/UTC")
                            .into(),
                    ]
                }),
            ),
            (
                "stop.cron",
                effects(|_| vec![Directive::cron_cancel("poller")]),
            ),
            (
                "bad.cron",
                effects(|_| vec![Directive::cron("not a cron", json!({})).into()]),
            ),
            ("jido.cron_tick", noop()),
        ],
    );
    let agent = jido.start_agent(state, ServerOptions::new()).await.unwrap();
    agent.call(sig("go", json!({}))).await.unwrap();
    assert_eq!(recv(&mut seen).await.ty(), "go");
    assert_eq!(
        agent.status().await.unwrap().cron_jobs,
        vec!["poller".to_owned()]
    );
    // Every 10 s: exactly 6 ticks in 60 s (the first one within 10 s).
    tokio::time::sleep(Duration::from_secs(60)).await;
    agent
        .call(sig("jido.cron_tick", json!({"probe": true})))
        .await
        .unwrap();
    let mut ticks = Vec::new();
    loop {
        let s = recv(&mut seen).await;
        if s.data() == Some(&json!({"probe": true})) {
            break;
        }
        ticks.push(s);
    }
    assert_eq!(ticks.len(), 6);
    assert!(ticks.iter().all(|s| s.ty() == "jido.cron_tick"
        && s.source() == "/agent/cr"
        && s.data() == Some(&json!({"job_id": "poller", "message": {"job": "poll"}}))));
    agent.call(sig("stop.cron", json!({}))).await.unwrap();
    assert_eq!(recv(&mut seen).await.ty(), "stop.cron");
    tokio::time::sleep(Duration::from_secs(60)).await;
    agent.call(sig("noop.probe", json!({}))).await.unwrap_err();
    assert!(seen.try_recv().is_err());
    assert!(agent.status().await.unwrap().cron_jobs.is_empty());
    // An invalid expression is refused; the agent keeps going.
    agent.call(sig("bad.cron", json!({}))).await.unwrap();
    agent.call(sig("noop.probe", json!({}))).await.unwrap_err();
    let status = agent.status().await.unwrap();
    assert!(status.cron_jobs.is_empty());
    assert!(agent.is_alive());
    jido.shutdown().await;
}

#[test]
fn cron_next_fire_and_parse_errors() {
    use chrono::{TimeZone, Utc};
    use jido::server::cron::{next_fire, parse_cron};
    let after = Utc.with_ymd_and_hms(2026, 7, 1, 6, 30, 0).unwrap();
    // New York is UTC-4 in July.
    assert_eq!(
        next_fire("0 9 * * 1-5", "America/New_York", after).unwrap(),
        Utc.with_ymd_and_hms(2026, 7, 1, 13, 0, 0).unwrap()
    );
    assert_eq!(
        next_fire("@daily", "Etc/UTC", after).unwrap(),
        Utc.with_ymd_and_hms(2026, 7, 2, 0, 0, 0).unwrap()
    );
    let err = parse_cron("61 * * * *", "Etc/UTC").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(err.message().starts_with("invalid cron expression"));
    let err = parse_cron("* * * * *", "Mars/Olympus").unwrap_err();
    assert_eq!(err.message(), "invalid time zone: Mars/Olympus");
}

#[tokio::test]
async fn run_instruction_feeds_its_result_back_through_cmd() {
    let (tx, mut errors) = channel();
    let policy = ErrorPolicy::custom(move |ev| {
        let _ =
            tx.send(json!({"context": ev.context, "reason": ev.error.detail("reason").cloned()}));
        Ok(ErrorDecision::Continue)
    });
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(
            go_agent("ri", |p| {
                let n = p["n"].as_i64().unwrap_or(0);
                if n < 0 {
                    vec![
                        Directive::run_instruction(
                            Instruction::new(fail()).with_params(json!({"message": "nope"})),
                        )
                        .into(),
                    ]
                } else {
                    vec![
                        Directive::run_instruction(
                            Instruction::new(add()).with_params(json!({"n": n})),
                        )
                        .into(),
                    ]
                }
            }),
            ServerOptions::new().error_policy(policy),
        )
        .await
        .unwrap();
    let after = agent.call(sig("go", json!({"n": 5}))).await.unwrap();
    // Queued, not yet executed.
    assert_eq!(after.state().get("total"), None);
    let after = agent.call(sig("noop", json!({}))).await.unwrap();
    assert_eq!(after.state()["total"], 5);
    agent.call(sig("go", json!({"n": -1}))).await.unwrap();
    agent.call(sig("noop", json!({}))).await.unwrap();
    let e = recv(&mut errors).await;
    assert_eq!(e["context"], "instruction");
    assert_eq!(e["reason"]["message"], "nope");
    jido.shutdown().await;
}

#[tokio::test]
async fn stop_directive_stops_and_drops_the_rest_of_the_queue() {
    let (cfg, mut srx) = signal_channel();
    let args = AgentServerArgs::new(
        go_agent("sd", move |_| {
            vec![
                Directive::stop(),
                Directive::emit_to(Signal::new("late", json!({})), cfg.clone()),
            ]
        }),
        ServerOptions::new(),
    );
    let (agent, _probe, mut rx) = under_probe(args).await;
    agent.call(sig("go", json!({}))).await.unwrap();
    assert_eq!(
        exit_of(&mut rx, agent.actor_ref().get_id()).await,
        Seen::Terminated(agent.actor_ref().get_id(), Some("normal".into()))
    );
    assert!(matches!(
        srx.try_recv(),
        Err(mpsc::error::TryRecvError::Disconnected)
    ));
}

#[derive(Debug)]
struct Notify {
    channel: String,
}
impl CustomDirective for Notify {}

#[derive(Debug)]
struct Halt;
impl CustomDirective for Halt {}

#[derive(Debug)]
struct Unknown;
impl CustomDirective for Unknown {}

struct NotifyExec(Tx);
impl DirectiveExec for NotifyExec {
    type Directive = Notify;
    fn exec(&self, d: &Notify, input: &Signal, ctx: &DirectiveContext<'_>) -> DirectiveResult {
        if d.channel == "panic" {
            panic!("executor bug");
        }
        let _ = self
            .0
            .send(json!({"channel": d.channel, "input": input.ty(), "agent": ctx.agent_id()}));
        DirectiveResult::Async(Some(d.channel.clone()))
    }
}

struct HaltExec;
impl DirectiveExec for HaltExec {
    type Directive = Halt;
    fn exec(&self, _: &Halt, _: &Signal, _: &DirectiveContext<'_>) -> DirectiveResult {
        DirectiveResult::Stop(StopReason::from("halted"))
    }
}

#[tokio::test]
async fn custom_directives_run_through_their_executor_and_unknown_ones_go_on_to_the_next() {
    let (tx, mut rx) = channel();
    let jido = Jido::start(JidoConfig::new().directive_exec(NotifyExec(tx)))
        .await
        .unwrap();
    let agent = jido
        .start_agent(
            go_agent("cd", |_| {
                vec![
                    Directive::custom(Unknown),
                    Directive::custom(Notify {
                        channel: "ops".into(),
                    }),
                ]
            }),
            ServerOptions::new().directive_exec(HaltExec),
        )
        .await
        .unwrap();
    agent.call(sig("go", json!({}))).await.unwrap();
    assert_eq!(
        recv(&mut rx).await,
        json!({"channel": "ops", "input": "go", "agent": "cd"})
    );
    assert!(agent.is_alive());
    // The unknown one went to the error policy (log_only), then the queue
    // went on.
    assert_eq!(agent.status().await.unwrap().error_count, 1);
    jido.shutdown().await;

    let args = AgentServerArgs::new(
        go_agent("halt", |_| vec![Directive::custom(Halt)]),
        ServerOptions::new().directive_exec(HaltExec),
    );
    let (agent, _probe, mut rx) = under_probe(args).await;
    agent.cast(sig("go", json!({}))).unwrap();
    assert_eq!(
        exit_of(&mut rx, agent.actor_ref().get_id()).await,
        Seen::Terminated(agent.actor_ref().get_id(), Some("halted".into()))
    );
}

#[tokio::test]
async fn spawn_starts_an_untracked_child() {
    let (tx, mut rx) = channel();
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let agent = jido
        .start_agent(
            go_agent("sp", move |_| {
                let tx = tx.clone();
                vec![
                    Directive::spawn(ChildSpec::new("broken", || async {
                        Err(Error::execution("no"))
                    })),
                    Directive::spawn(ChildSpec::new("worker", move || {
                        let tx = tx.clone();
                        async move {
                            let _ = tx.send(json!("started"));
                            Ok(())
                        }
                    })),
                ]
            }),
            ServerOptions::new(),
        )
        .await
        .unwrap();
    agent.call(sig("go", json!({}))).await.unwrap();
    assert_eq!(recv(&mut rx).await, json!("started"));
    agent.call(sig("noop", json!({}))).await.unwrap();
    assert!(agent.status().await.unwrap().children.is_empty());
    jido.shutdown().await;
}

#[tokio::test]
async fn a_panicking_executor_crashes_the_agent() {
    let (tx, _rx) = channel();
    let args = AgentServerArgs::new(
        go_agent("crash", |_| {
            vec![Directive::custom(Notify {
                channel: "panic".into(),
            })]
        }),
        ServerOptions::new().directive_exec(NotifyExec(tx)),
    );
    let (agent, _probe, mut rx) = under_probe(args).await;
    agent.cast(sig("go", json!({}))).unwrap();
    match exit_of(&mut rx, agent.actor_ref().get_id()).await {
        Seen::Failed(_, message) => {
            assert!(message.starts_with("directive "), "{message}");
            assert!(
                message.ends_with("Notify panicked: executor bug"),
                "{message}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}
