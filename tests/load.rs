//! Load with accounting: many agents, concurrent callers and casters, a
//! share of signals that fail, time out, overflow the directive queue or
//! have no route. At the end every signal sent is accounted for exactly
//! once, from the agents' state, the error policy, the executed directives
//! and the callers' results. `JIDO_LOAD_LARGE=1` runs a larger load.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use jido::directive::CustomDirective;
use jido::prelude::*;
use jido::server::{
    AgentRef, DirectiveContext, DirectiveExec, DirectiveResult, ErrorDecision, ErrorPolicy, Jido,
    JidoConfig, ServerOptions,
};
use jido::signal::Signal;
use serde_json::json;

const MAX_QUEUE: usize = 8;

/// A no-op directive carrying the signal's sequence number.
#[derive(Debug)]
struct Mark(u64);
impl CustomDirective for Mark {}

/// Counts executed `Mark`s per sequence number.
#[derive(Clone, Default)]
struct Marks(Arc<Mutex<HashMap<u64, usize>>>);
impl DirectiveExec for Marks {
    type Directive = Mark;
    fn exec(&self, d: &Mark, _: &Signal, _: &DirectiveContext<'_>) -> DirectiveResult {
        *self.0.lock().unwrap().entry(d.0).or_default() += 1;
        DirectiveResult::Ok
    }
}

/// Error-policy tallies: by context and (for instructions) by reason.
#[derive(Clone, Default)]
struct Tally(Arc<Mutex<HashMap<String, usize>>>);
impl Tally {
    fn get(&self, k: &str) -> usize {
        self.0.lock().unwrap().get(k).copied().unwrap_or(0)
    }
}

fn counter(key: &'static str) -> DynAction {
    act(move |_, ctx| async move {
        let n = ctx.state().and_then(|s| s.get(key)?.as_u64()).unwrap_or(0);
        Ok(json!({key: n + 1}))
    })
}

fn load_agent(id: &str) -> AgentState {
    TestAgent::new()
        .route("ok", counter("ok"))
        .route("fail", fail())
        .route(
            "hang",
            act(|_, _| async {
                std::future::pending::<()>().await;
                Ok(json!({}))
            }),
        )
        // `burst`: counts itself in the state and returns `n` Marks.
        .route(
            "burst",
            act(|p, ctx| async move {
                let seq = p["seq"].as_u64().unwrap();
                for _ in 0..p["n"].as_u64().unwrap() {
                    ctx.push_effect(Directive::custom(Mark(seq)));
                }
                let n = ctx
                    .state()
                    .and_then(|s| s.get("burst")?.as_u64())
                    .unwrap_or(0);
                Ok(json!({"burst": n + 1}))
            }),
        )
        .build(id)
}

/// What a signal is meant to do.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Kind {
    Ok,
    Fail,
    Hang,
    /// A burst that fits the queue.
    Burst,
    /// A burst larger than the queue.
    Overflow,
    Unrouted,
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn plan(rng: &mut Rng, seq: u64) -> (Kind, Signal) {
    let r = rng.next() % 100;
    let kind = match r {
        0..60 => Kind::Ok,
        60..75 => Kind::Fail,
        75..80 => Kind::Hang,
        80..90 => Kind::Burst,
        90..95 => Kind::Overflow,
        _ => Kind::Unrouted,
    };
    let signal = match kind {
        Kind::Ok => sig("ok", json!({})),
        Kind::Fail => sig("fail", json!({"message": "planned failure"})),
        Kind::Hang => sig("hang", json!({})),
        Kind::Burst => sig(
            "burst",
            json!({"seq": seq, "n": 1 + rng.next() % MAX_QUEUE as u64}),
        ),
        Kind::Overflow => sig(
            "burst",
            json!({"seq": seq, "n": MAX_QUEUE as u64 + 1 + rng.next() % 4}),
        ),
        Kind::Unrouted => sig("nobody.listens", json!({})),
    };
    (kind, signal)
}

#[derive(Default, Debug)]
struct Sent {
    by_kind: HashMap<Kind, usize>,
    calls: usize,
    casts: usize,
    call_ok: usize,
    call_overflow: usize,
    call_routing: usize,
    call_failed: usize,
    call_other: usize,
    /// Sequence numbers of every burst sent, with its size.
    bursts: HashMap<u64, (usize, Kind)>,
}

/// Runs the load; `timeout_ms` is the action deadline, `paused` says the
/// test runs on one thread with paused time (then tracing events are
/// recorded and checked too).
async fn run_load(agents: usize, per_agent: usize, timeout_ms: u64, paused: bool) {
    let marks = Marks::default();
    let tally = Tally::default();
    let policy = {
        let tally = tally.clone();
        ErrorPolicy::custom(move |ev| {
            let key = match ev.context {
                "instruction" => format!(
                    "instruction:{}",
                    ev.error
                        .detail("reason")
                        .and_then(|r| r.get("message"))
                        .and_then(|m| m.as_str())
                        .unwrap_or("?")
                ),
                other => other.to_owned(),
            };
            *tally.0.lock().unwrap().entry(key).or_default() += 1;
            Ok(ErrorDecision::Continue)
        })
    };
    let (events, _guard) = record_events();
    let jido = Jido::start(
        JidoConfig::new()
            .directive_exec(marks.clone())
            .exec_options(
                ExecOptions::new()
                    .timeout(Duration::from_millis(timeout_ms))
                    .max_retries(0),
            )
            .defaults(
                ServerOptions::new()
                    .max_queue_size(MAX_QUEUE)
                    .error_policy(policy),
            ),
    )
    .await
    .unwrap();
    let mut refs: Vec<AgentRef> = Vec::with_capacity(agents);
    for i in 0..agents {
        refs.push(
            jido.start_agent(load_agent(&format!("load-{i}")), ServerOptions::new())
                .await
                .unwrap(),
        );
    }
    // Per agent, one caller task and one caster task; both send their half.
    let mut tasks = Vec::new();
    for (i, agent) in refs.iter().enumerate() {
        for role in 0..2u64 {
            let agent = agent.clone();
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ ((i as u64) << 1 | role) ^ 0xabcdef);
                let mut sent = Sent::default();
                for k in 0..per_agent / 2 {
                    let seq = ((i as u64) << 32) | (role << 31) | k as u64;
                    let (kind, signal) = plan(&mut rng, seq);
                    *sent.by_kind.entry(kind).or_default() += 1;
                    if let Some(n) = signal.data().and_then(|d| d.get("n")) {
                        sent.bursts
                            .insert(seq, (n.as_u64().unwrap() as usize, kind));
                    }
                    if role == 0 {
                        sent.calls += 1;
                        match agent.call_timeout(signal, Duration::from_secs(600)).await {
                            Ok(_) => sent.call_ok += 1,
                            Err(e) if e.kind() == ErrorKind::QueueOverflow => {
                                assert_eq!(kind, Kind::Overflow);
                                assert_eq!(e.detail("queue_size"), Some(&json!(MAX_QUEUE)));
                                sent.call_overflow += 1
                            }
                            Err(e) if e.kind() == ErrorKind::Routing => {
                                assert_eq!(kind, Kind::Unrouted);
                                sent.call_routing += 1
                            }
                            // A failed action fails its call.
                            Err(e) if kind == Kind::Fail => {
                                assert_eq!(e.message(), "planned failure");
                                sent.call_failed += 1
                            }
                            Err(e) if kind == Kind::Hang => {
                                assert_eq!(e.kind(), ErrorKind::Timeout);
                                sent.call_failed += 1
                            }
                            Err(e) => {
                                eprintln!("unexpected call error: {e}");
                                sent.call_other += 1
                            }
                        }
                    } else {
                        sent.casts += 1;
                        agent.cast(signal).unwrap();
                        if k % 8 == 7 {
                            tokio::task::yield_now().await;
                        }
                    }
                }
                sent
            }));
        }
    }
    let mut sent = Sent::default();
    for t in tasks {
        let s = t.await.unwrap();
        for (k, n) in s.by_kind {
            *sent.by_kind.entry(k).or_default() += n;
        }
        sent.calls += s.calls;
        sent.casts += s.casts;
        sent.call_ok += s.call_ok;
        sent.call_overflow += s.call_overflow;
        sent.call_routing += s.call_routing;
        sent.call_failed += s.call_failed;
        sent.call_other += s.call_other;
        sent.bursts.extend(s.bursts);
    }
    // Load falls: a final call to every agent succeeds, and is taken only
    // after all its casts, so everything is processed.
    for agent in &refs {
        let after = agent
            .call_timeout(sig("ok", json!({})), Duration::from_secs(600))
            .await
            .unwrap();
        assert!(after.state()["ok"].as_u64().unwrap() >= 1);
    }
    // Wait until every directive queue has drained.
    for agent in &refs {
        while agent.status().await.unwrap().queue_length > 0 {
            tokio::task::yield_now().await;
        }
    }

    let count = |k: Kind| sent.by_kind.get(&k).copied().unwrap_or(0);
    let total: usize = sent.by_kind.values().sum();
    assert_eq!(total, sent.calls + sent.casts);
    assert_eq!(sent.calls, agents * (per_agent / 2));
    assert_eq!(sent.call_other, 0);
    assert_eq!(
        sent.call_ok + sent.call_overflow + sent.call_routing + sent.call_failed,
        sent.calls
    );

    // From the agents' state: every `ok` (+ the final calls) and every burst
    // (fitting or not: an overflow keeps the state change) was processed.
    let mut state_ok = 0;
    let mut state_burst = 0;
    let mut error_count = 0;
    for agent in &refs {
        let st = agent.status().await.unwrap();
        state_ok += st
            .agent
            .state()
            .get("ok")
            .and_then(|v| v.as_u64())
            .unwrap_or(0) as usize;
        state_burst += st
            .agent
            .state()
            .get("burst")
            .and_then(|v| v.as_u64())
            .unwrap_or(0) as usize;
        error_count += st.error_count as usize;
    }
    assert_eq!(state_ok, count(Kind::Ok) + agents);
    assert_eq!(state_burst, count(Kind::Burst) + count(Kind::Overflow));

    // From the error policy: failures, timeouts, unrouted signals and
    // overflowing bursts (a cast's overflow has no other trace).
    let failed = tally.get("instruction:planned failure");
    let timed_out = tally.get(&format!(
        "instruction:action do timed out after {timeout_ms}ms"
    ));
    let unrouted = tally.get("routing");
    let overflow_errors = tally.get("queue_overflow");
    assert_eq!(failed, count(Kind::Fail));
    assert_eq!(timed_out, count(Kind::Hang));
    assert_eq!(unrouted, count(Kind::Unrouted));
    assert_eq!(overflow_errors, count(Kind::Overflow));
    assert_eq!(error_count, failed + timed_out + unrouted + overflow_errors);

    // From the executed directives: a fitting burst ran every Mark, an
    // overflowing one none (the batch is dropped whole).
    let executed = marks.0.lock().unwrap().clone();
    let mut overflowed = 0;
    let mut marks_run = 0;
    for (seq, (n, kind)) in &sent.bursts {
        let ran = executed.get(seq).copied().unwrap_or(0);
        match kind {
            Kind::Burst => assert_eq!(ran, *n, "burst {seq}"),
            _ => {
                assert_eq!(ran, 0, "overflow {seq}");
                overflowed += 1;
            }
        }
        marks_run += ran;
    }
    assert_eq!(executed.len(), count(Kind::Burst));
    if paused {
        let overflow_events = events.named("jido.agent_server.queue.overflow");
        assert_eq!(overflow_events.len(), overflowed);
        let dropped: u64 = overflow_events
            .iter()
            .map(|e| e["dropped"].as_u64().unwrap())
            .sum();
        let overflow_sizes: usize = sent
            .bursts
            .values()
            .filter(|(_, k)| *k == Kind::Overflow)
            .map(|(n, _)| n)
            .sum();
        assert_eq!(dropped as usize, overflow_sizes);
    }
    assert_eq!(overflowed, count(Kind::Overflow));

    // Every signal exactly once.
    let processed = count(Kind::Ok) + count(Kind::Burst);
    let errored = failed + timed_out;
    assert_eq!(processed + errored + overflowed + unrouted, total);
    println!(
        "load: {agents} agents, {total} signals ({} calls, {} casts) + {agents} final calls: \
         processed {processed} (ok {}, bursts {} running {marks_run} directives), \
         errored {errored} (failed {failed}, timed out {timed_out}), \
         rejected with overflow {overflowed} ({} seen by callers), unrouted {unrouted}; \
         nothing lost",
        sent.calls,
        sent.casts,
        count(Kind::Ok),
        count(Kind::Burst),
        sent.call_overflow,
    );

    jido.shutdown().await;
    assert!(jido.agents().is_empty());
    assert_eq!(jido.exec().supervisor().active(), 0);
    assert!(jido.supervisor_cell().get_children().is_empty());
}

#[tokio::test(start_paused = true)]
async fn every_signal_is_accounted_for_under_load() {
    if std::env::var_os("JIDO_LOAD_LARGE").is_some() {
        run_load(2_000, 100, 20, true).await;
    } else {
        run_load(200, 50, 20, true).await;
    }
}

/// The same on two worker threads in real time: real parallelism between
/// callers, casters and agents. The action deadline is 1 s so that only
/// the hanging actions reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_signal_is_accounted_for_under_parallel_load() {
    if std::env::var_os("JIDO_LOAD_LARGE").is_some() {
        run_load(1_000, 100, 1_000, false).await;
    } else {
        run_load(100, 40, 1_000, false).await;
    }
}

#[tokio::test]
async fn an_overflowing_call_gets_queue_overflow_and_the_agent_recovers() {
    let marks = Marks::default();
    let jido = Jido::start(JidoConfig::new().directive_exec(marks.clone()))
        .await
        .unwrap();
    let agent = jido
        .start_agent(
            load_agent("q"),
            ServerOptions::new().max_queue_size(MAX_QUEUE),
        )
        .await
        .unwrap();
    let err = within(agent.call(sig("burst", json!({"seq": 1, "n": 9}))))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QueueOverflow);
    assert_eq!(err.message(), "directive queue overflow");
    assert_eq!(err.detail("queue_size"), Some(&json!(MAX_QUEUE)));
    assert_eq!(err.detail("dropped"), Some(&json!(9)));
    // The state change is kept, no directive ran.
    assert_eq!(within(agent.state()).await.unwrap().state()["burst"], 1);
    // Load falls: a fitting burst and a plain call succeed.
    within(agent.call(sig("burst", json!({"seq": 2, "n": 8}))))
        .await
        .unwrap();
    let after = within(agent.call(sig("ok", json!({})))).await.unwrap();
    assert_eq!(after.state()["burst"], 2);
    assert_eq!(after.state()["ok"], 1);
    assert_eq!(
        marks.0.lock().unwrap().clone(),
        HashMap::from([(2u64, 8usize)])
    );
    jido.shutdown().await;
}

/// Regression: `JidoConfig::defaults` used to replace the directive
/// executor, error policy and dispatch set before it, so the load's
/// directives were silently skipped.
#[tokio::test]
async fn instance_defaults_keep_what_was_set_before() {
    let marks = Marks::default();
    let tally = Tally::default();
    let policy = {
        let tally = tally.clone();
        ErrorPolicy::custom(move |ev| {
            *tally
                .0
                .lock()
                .unwrap()
                .entry(ev.context.to_owned())
                .or_default() += 1;
            Ok(ErrorDecision::Continue)
        })
    };
    let jido = Jido::start(
        JidoConfig::new()
            .directive_exec(marks.clone())
            .error_policy(policy)
            .defaults(ServerOptions::new().max_queue_size(MAX_QUEUE)),
    )
    .await
    .unwrap();
    let agent = jido
        .start_agent(load_agent("d"), ServerOptions::new())
        .await
        .unwrap();
    within(agent.call(sig("burst", json!({"seq": 5, "n": 2}))))
        .await
        .unwrap();
    let err = within(agent.call(sig("burst", json!({"seq": 6, "n": 9}))))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::QueueOverflow);
    within(agent.call(sig("nobody", json!({}))))
        .await
        .unwrap_err();
    within(agent.call(sig("ok", json!({})))).await.unwrap();
    assert_eq!(
        marks.0.lock().unwrap().clone(),
        HashMap::from([(5u64, 2usize)])
    );
    assert_eq!(tally.get("routing"), 1);
    jido.shutdown().await;
}
