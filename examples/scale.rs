//! Scale: N agents on one machine, each sent one signal, every outcome
//! accounted for, memory per agent beside a raw ractor actor.
//!
//! ```text
//! cargo run --release --example scale                      # 100 000 agents
//! cargo run --release --example scale -- --agents 1000000  # a million
//! ```
//!
//! With `CI` set the default is 2 000 agents (`.ci/run` runs every example
//! in debug mode).
//!
//! `--hibernate` (feature `persist-redb`) measures addressable agents
//! instead: N agents on a redb store, each sent one signal, hibernate after
//! an idle second (checkpoint, stop, leave the registry); then a sample of
//! them is thawed by id (`Jido::get_or_start`) and checked. It prints the
//! resident set while they were live and once they hibernated, the store's
//! bytes per agent, and the thaw latency (p50/p99):
//!
//! ```text
//! cargo run --release --example scale --features persist-redb -- --hibernate --agents 1000000
//! ```
//!
//! `--bulk` (with `--hibernate`) measures the 10 000 000-agent target: all
//! but `--live L` (default 100 000) of the N agents are created hibernated
//! in batches of 10 000 (`Jido::create_hibernated`, each with its own state
//! `{"ticks": i}`), the L others are started and sent one signal each and
//! stay live; then a sample of the hibernated ones (`--sample S`, default
//! 10 000, spread over all ids) is thawed by id and checked, and a sample
//! of the live ones too. It prints the time to create, the resident set
//! with L live, the store's bytes per agent and the thaw latency. The
//! store goes to `--dir D` (default the temp directory) and is deleted at
//! the end:
//!
//! ```text
//! cargo run --release --example scale --features persist-redb -- --hibernate --bulk --agents 10000000 --dir target/scale
//! ```
//!
//! Phase 1 (a child process, so its memory is returned before phase 2):
//! N raw ractor actors holding the same state map as the agents. Phase 2
//! (this process): N agents. Each phase measures the resident set growth
//! while spawning (from `/proc/self/statm`), casts each one signal (every
//! 1 000th a failing one), waits until `processed + failed + rejected ==
//! sent`, and stops everything.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jido::agent::SignalRoute;
use jido::prelude::*;
use jido::server::{ErrorDecision, ErrorPolicy};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::{Map, Value, json};

static PROCESSED: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);

/// Every `FAIL_EVERY`th agent gets a signal whose action fails.
const FAIL_EVERY: usize = 1_000;
/// Give up waiting for outcomes after this long.
const WAIT_LIMIT: Duration = Duration::from_secs(600);

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Tick {
    n: u64,
}

/// Counts the signal and records it in the agent's state.
struct TickAction;
impl Action for TickAction {
    type Params = Tick;
    type Output = Value;
    const NAME: &'static str = "tick";
    async fn run(&self, p: Tick, _: &Context) -> jido::Result<Value> {
        PROCESSED.fetch_add(1, Ordering::Relaxed);
        Ok(json!({"ticks": p.n}))
    }
}

/// Always fails (its error reaches the error policy, which counts it).
struct BoomAction;
impl Action for BoomAction {
    type Params = Tick;
    type Output = Value;
    const NAME: &'static str = "boom";
    async fn run(&self, _: Tick, _: &Context) -> jido::Result<Value> {
        Err(jido::Error::execution("boom"))
    }
}

struct Counter;
impl Agent for Counter {
    const NAME: &'static str = "counter";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![
            SignalRoute::action("tick", TickAction),
            SignalRoute::action("boom", BoomAction),
        ]
    }
}

fn initial_state() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("ticks".into(), json!(0));
    m
}

// ---------- raw ractor actor holding the same state ----------

struct Raw;
impl Actor for Raw {
    type Msg = Signal;
    type State = Map<String, Value>;
    type Arguments = Map<String, Value>;
    async fn pre_start(
        &self,
        _: ActorRef<Signal>,
        state: Map<String, Value>,
    ) -> Result<Map<String, Value>, ActorProcessingErr> {
        Ok(state)
    }
    async fn handle(
        &self,
        _: ActorRef<Signal>,
        signal: Signal,
        state: &mut Map<String, Value>,
    ) -> Result<(), ActorProcessingErr> {
        if signal.ty() == "boom" {
            FAILED.fetch_add(1, Ordering::Relaxed);
        } else {
            let n = signal
                .data()
                .and_then(|d| d.get("n"))
                .cloned()
                .unwrap_or(Value::Null);
            state.insert("ticks".into(), n);
            PROCESSED.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

// ---------- measuring ----------

/// Resident set size in bytes (Linux; 0 elsewhere). Assumes 4 KiB pages.
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn progress(label: &str, done: usize, total: usize, started: Instant) {
    eprintln!(
        "  {label}: {done}/{total} ({:.0}/s)",
        done as f64 / started.elapsed().as_secs_f64().max(1e-9)
    );
}

/// Waits until `processed + failed + rejected == sent`, showing progress;
/// returns the time taken and whether every signal was accounted for.
async fn wait_outcomes(sent: u64, rejected: u64) -> (Duration, bool) {
    let started = Instant::now();
    let mut last = Instant::now();
    loop {
        let done = PROCESSED.load(Ordering::Relaxed) + FAILED.load(Ordering::Relaxed) + rejected;
        if done >= sent {
            return (started.elapsed(), done == sent);
        }
        if started.elapsed() > WAIT_LIMIT {
            return (started.elapsed(), false);
        }
        if last.elapsed() >= Duration::from_secs(2) {
            eprintln!("  outcomes: {done}/{sent}");
            last = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn signal_for(i: usize) -> Signal {
    let ty = if i % FAIL_EVERY == FAIL_EVERY - 1 {
        "boom"
    } else {
        "tick"
    };
    Signal::new(ty, json!({"n": 1}))
}

fn every(n: usize) -> usize {
    (n / 10).max(1)
}

/// One phase's figures.
struct Figures {
    spawn: Duration,
    rss_per: f64,
    sent: u64,
    processed: u64,
    failed: u64,
    rejected: u64,
    signals: Duration,
    shutdown: Duration,
    complete: bool,
}

impl Figures {
    fn print(&self, who: &str, n: usize) {
        println!(
            "{who}: spawn {n} in {:.2?} ({:.0}/s); rss {:.0} B each; {} signals in {:.2?} ({:.0}/s): \
             processed {} + failed {} + rejected {} = {} {}; shutdown {:.2?}",
            self.spawn,
            n as f64 / self.spawn.as_secs_f64(),
            self.rss_per,
            self.sent,
            self.signals,
            self.sent as f64 / self.signals.as_secs_f64(),
            self.processed,
            self.failed,
            self.rejected,
            self.processed + self.failed + self.rejected,
            if self.complete {
                "(all accounted for)"
            } else {
                "(UNACCOUNTED SIGNALS)"
            },
            self.shutdown,
        );
    }
}

async fn jido_phase(n: usize) -> jido::Result<Figures> {
    let policy = ErrorPolicy::custom(|_| {
        FAILED.fetch_add(1, Ordering::Relaxed);
        Ok(ErrorDecision::Continue)
    });
    // One attempt, inline (no per-run task): the failing action is counted
    // once, with no backoff.
    let jido = Jido::start(
        JidoConfig::new()
            .error_policy(policy)
            .exec_options(ExecOptions::new().timeout(Duration::ZERO).max_retries(0)),
    )
    .await?;
    let base = rss_bytes();
    eprintln!("jido: starting {n} agents");
    let started = Instant::now();
    let mut agents = Vec::with_capacity(n);
    for i in 0..n {
        let state = AgentState::new(
            Counter,
            AgentOptions::new()
                .id(format!("a{i}"))
                .state(initial_state()),
        );
        agents.push(jido.start_agent(state, ServerOptions::new()).await?);
        if (i + 1) % every(n) == 0 {
            progress("started", i + 1, n, started);
        }
    }
    let spawn = started.elapsed();
    let rss_per = rss_bytes().saturating_sub(base) as f64 / n as f64;

    eprintln!("jido: one signal to each");
    let started = Instant::now();
    let mut rejected = 0u64;
    for (i, agent) in agents.iter().enumerate() {
        if agent.cast(signal_for(i)).is_err() {
            rejected += 1;
        }
    }
    let (_, complete) = wait_outcomes(n as u64, rejected).await;
    let signals = started.elapsed();
    // Spot check: the processed ones recorded the tick in their state.
    for i in [0, n / 2, n - 1] {
        if i % FAIL_EVERY != FAIL_EVERY - 1 {
            let st = agents[i].state().await?;
            assert_eq!(
                st.state()
                    .get("ticks")
                    .map(jido::state::StateValue::to_json),
                Some(json!(1)),
                "agent a{i}"
            );
        }
    }

    eprintln!("jido: shutdown");
    drop(agents);
    let started = Instant::now();
    jido.shutdown().await;
    let shutdown = started.elapsed();
    Ok(Figures {
        spawn,
        rss_per,
        sent: n as u64,
        processed: PROCESSED.load(Ordering::Relaxed),
        failed: FAILED.load(Ordering::Relaxed),
        rejected,
        signals,
        shutdown,
        complete,
    })
}

async fn raw_phase(n: usize) -> Figures {
    let base = rss_bytes();
    eprintln!("raw: starting {n} actors");
    let started = Instant::now();
    let mut actors = Vec::with_capacity(n);
    for i in 0..n {
        let (a, h) = Actor::spawn(None, Raw, initial_state())
            .await
            .expect("spawn raw actor");
        actors.push((a, h));
        if (i + 1) % every(n) == 0 {
            progress("started", i + 1, n, started);
        }
    }
    let spawn = started.elapsed();
    let rss_per = rss_bytes().saturating_sub(base) as f64 / n as f64;

    let started = Instant::now();
    let mut rejected = 0u64;
    for (i, (a, _)) in actors.iter().enumerate() {
        if a.cast(signal_for(i)).is_err() {
            rejected += 1;
        }
    }
    let (_, complete) = wait_outcomes(n as u64, rejected).await;
    let signals = started.elapsed();

    eprintln!("raw: shutdown");
    let started = Instant::now();
    let mut handles = Vec::with_capacity(n);
    for (a, h) in actors {
        a.stop(None);
        handles.push(h);
    }
    for h in handles {
        let _ = h.await;
    }
    let shutdown = started.elapsed();
    Figures {
        spawn,
        rss_per,
        sent: n as u64,
        processed: PROCESSED.load(Ordering::Relaxed),
        failed: FAILED.load(Ordering::Relaxed),
        rejected,
        signals,
        shutdown,
        complete,
    }
}

struct Args {
    agents: usize,
    raw_only: bool,
    hibernate: bool,
    bulk: bool,
    // The hibernation run (feature `persist`) reads these.
    #[cfg_attr(not(feature = "persist"), allow(dead_code))]
    live: usize,
    #[cfg_attr(not(feature = "persist"), allow(dead_code))]
    sample: usize,
    #[cfg_attr(not(feature = "persist"), allow(dead_code))]
    dir: Option<std::path::PathBuf>,
}

fn args() -> Args {
    let mut agents = if std::env::var_os("CI").is_some() {
        2_000
    } else {
        100_000
    };
    let mut raw_only = false;
    let mut hibernate = false;
    let mut bulk = false;
    let mut live = 100_000;
    let mut sample = 10_000;
    let mut dir = None;
    let number = |v: Option<String>, what: &str| -> usize {
        match v.and_then(|v| v.replace('_', "").parse().ok()) {
            Some(v) => v,
            None => {
                eprintln!("{what} needs a number");
                std::process::exit(2);
            }
        }
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--agents" => match it.next().and_then(|v| v.replace('_', "").parse().ok()) {
                Some(v) if v > 0 => agents = v,
                _ => {
                    eprintln!("--agents needs a positive number");
                    std::process::exit(2);
                }
            },
            "--raw-only" => raw_only = true,
            "--hibernate" => hibernate = true,
            "--bulk" => bulk = true,
            "--live" => live = number(it.next(), "--live"),
            "--sample" => sample = number(it.next(), "--sample"),
            "--dir" => dir = it.next().map(std::path::PathBuf::from),
            other => {
                eprintln!(
                    "unknown argument {other}; usage: scale [--agents N] [--hibernate [--bulk] [--live L] [--sample S] [--dir D]]"
                );
                std::process::exit(2);
            }
        }
    }
    Args {
        agents,
        raw_only,
        hibernate,
        bulk,
        live,
        sample,
        dir,
    }
}

/// `--hibernate`: N addressable agents, most of them on disk.
#[cfg(feature = "persist-redb")]
async fn hibernate_phase(n: usize) -> jido::Result<()> {
    use std::sync::Arc;

    use jido::persist::redb::RedbStorage;

    let dir = std::env::temp_dir().join(format!("jido-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| jido::Error::internal(e.to_string()))?;
    let path = dir.join("agents.redb");
    let storage = Arc::new(RedbStorage::open(&path)?);
    let jido = Jido::start(
        JidoConfig::new()
            .name("scale")
            .storage(storage)
            .exec_options(ExecOptions::new().timeout(Duration::ZERO).max_retries(0)),
    )
    .await?;
    let make = || {
        (
            AgentState::new(Counter, AgentOptions::new().state(initial_state())),
            ServerOptions::new().idle_timeout(Duration::from_secs(1)),
        )
    };
    let base = rss_bytes();
    eprintln!("hibernate: {n} agents, one signal each");
    let started = Instant::now();
    let mut peak_live = 0;
    for i in 0..n {
        let agent = jido.get_or_start(&format!("a{i}"), make).await?;
        agent.cast(Signal::new("tick", json!({"n": i as u64})))?;
        if (i + 1) % every(n) == 0 {
            progress("started", i + 1, n, started);
            peak_live = peak_live.max(jido.registered_count());
        }
    }
    let spawn = started.elapsed();
    let rss_live = rss_bytes().saturating_sub(base);
    let live = jido.registered_count();
    // Everyone processed their signal and hibernated.
    let deadline = Instant::now() + WAIT_LIMIT;
    while (PROCESSED.load(Ordering::Relaxed) < n as u64 || jido.registered_count() > 0)
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let hibernated = jido.registered_count() == 0;
    let rss_hibernated = rss_bytes().saturating_sub(base);
    let disk = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    // Thaw a sample by id and check its state.
    let sample = n.min(1_000);
    let step = (n / sample).max(1);
    let mut hist =
        hdrhistogram::Histogram::<u64>::new(3).map_err(|e| jido::Error::internal(e.to_string()))?;
    let mut intact = 0;
    for k in 0..sample {
        let i = k * step;
        let t = Instant::now();
        let agent = jido.get_or_start(&format!("a{i}"), make).await?;
        let state = agent.state().await?;
        hist.record(t.elapsed().as_micros() as u64).ok();
        if state.state().get("ticks").and_then(|v| v.as_u64()) == Some(i as u64) {
            intact += 1;
        }
    }
    println!(
        "hibernate: {n} agents started and signalled in {spawn:.2?} (at most {} live at once, {live} at the end); \
         rss {:.0} B per agent while starting, {:.0} B per agent once all hibernated ({}); \
         store {} B ({:.0} B per agent); thaw p50 {} us, p99 {} us; {intact}/{sample} thawed agents intact",
        peak_live.max(live),
        rss_live as f64 / n as f64,
        rss_hibernated as f64 / n as f64,
        if hibernated {
            "all left the registry"
        } else {
            "NOT ALL HIBERNATED"
        },
        disk,
        disk as f64 / n as f64,
        hist.value_at_quantile(0.5),
        hist.value_at_quantile(0.99),
    );
    jido.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    if !hibernated || intact != sample || PROCESSED.load(Ordering::Relaxed) < n as u64 {
        eprintln!("hibernation incomplete or state lost");
        std::process::exit(1);
    }
    Ok(())
}

/// `--hibernate --bulk`: N addressable agents, all but L created
/// hibernated in batches, L live.
#[cfg(feature = "persist-redb")]
async fn bulk_phase(args: &Args) -> jido::Result<()> {
    use std::sync::Arc;

    use jido::persist::redb::RedbStorage;

    const BATCH: usize = 10_000;
    let n = args.agents;
    let live = args.live.min(n);
    let cold = n - live;
    let err = |e: std::io::Error| jido::Error::internal(e.to_string());
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("jido-scale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(err)?;
    let path = dir.join("agents.redb");
    let storage = Arc::new(RedbStorage::open(&path)?);
    let jido = Jido::start(
        JidoConfig::new()
            .name("scale")
            .storage(storage.clone())
            .exec_options(ExecOptions::new().timeout(Duration::ZERO).max_retries(0)),
    )
    .await?;
    let state_of = |i: usize| {
        let mut m = Map::new();
        m.insert("ticks".into(), json!(i as u64));
        m
    };
    let base = rss_bytes();
    eprintln!("bulk: {n} agents, {cold} created hibernated, {live} live");

    // 1. The hibernated ones, in batches.
    let started = Instant::now();
    let mut next_report = Instant::now();
    for first in (0..cold).step_by(BATCH) {
        let batch = (first..(first + BATCH).min(cold)).map(|i| {
            AgentState::new(
                Counter,
                AgentOptions::new().id(format!("a{i}")).state(state_of(i)),
            )
        });
        jido.create_hibernated(batch).await?;
        if next_report.elapsed() >= Duration::from_secs(10) {
            progress("created hibernated", first + BATCH, cold, started);
            next_report = Instant::now();
        }
    }
    let create = started.elapsed();
    let disk_cold = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let rss_cold = rss_bytes().saturating_sub(base);

    // 2. The live ones: started (1 000 at a time, so that their claims
    // share commits), one signal each, no idle timeout.
    let started = Instant::now();
    let mut live_refs = Vec::with_capacity(live);
    for first in (cold..n).step_by(1_000) {
        let starts = (first..(first + 1_000).min(n)).map(|i| {
            let jido = jido.clone();
            async move {
                let agent = jido
                    .get_or_start(&format!("a{i}"), || {
                        (
                            AgentState::new(Counter, AgentOptions::new().state(initial_state())),
                            ServerOptions::new(),
                        )
                    })
                    .await?;
                agent.cast(Signal::new("tick", json!({"n": i as u64})))?;
                Ok::<_, jido::Error>(agent)
            }
        });
        for agent in futures::future::join_all(starts).await {
            live_refs.push(agent?);
        }
    }
    let (_, complete) = wait_outcomes(live as u64, 0).await;
    let start_live = started.elapsed();
    let rss_live = rss_bytes().saturating_sub(base);

    // 3. Thaw a sample of the hibernated ones by id (they hibernate again
    // after an idle second), spread over every id.
    let sample = args.sample.min(cold);
    let step = (cold / sample.max(1)).max(1);
    let mut hist =
        hdrhistogram::Histogram::<u64>::new(3).map_err(|e| jido::Error::internal(e.to_string()))?;
    let mut intact = 0;
    for k in 0..sample {
        let i = k * step + (k * 7919) % step;
        let t = Instant::now();
        let agent = jido
            .get_or_start(&format!("a{i}"), || {
                (
                    AgentState::new(Counter, AgentOptions::new()),
                    ServerOptions::new().idle_timeout(Duration::from_secs(1)),
                )
            })
            .await?;
        let state = agent.state().await?;
        hist.record(t.elapsed().as_micros() as u64).ok();
        if state.state().get("ticks").and_then(|v| v.as_u64()) == Some(i as u64) {
            intact += 1;
        }
    }
    // 4. And the live ones: their signal processed.
    let live_sample = live.min(1_000);
    let mut live_ok = 0;
    for k in 0..live_sample {
        let i = cold + k * (live / live_sample.max(1)).max(1);
        if let Some(agent) = live_refs.get(i - cold) {
            let state = agent.state().await?;
            if state.state().get("ticks").and_then(|v| v.as_u64()) == Some(i as u64) {
                live_ok += 1;
            }
        }
    }
    let disk = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    println!(
        "bulk: {n} addressable agents; {cold} created hibernated in {create:.2?} ({:.0}/s), \
         store {disk_cold} B after that ({:.0} B per hibernated agent), rss +{:.0} MiB; \
         {live} live started and signalled in {start_live:.2?} ({}), rss +{:.0} MiB with them live ({:.0} B per live agent); \
         store {disk} B at the end ({:.0} B per agent); \
         thaw p50 {} us, p90 {} us, p99 {} us, max {} us; {intact}/{sample} thawed agents intact, {live_ok}/{live_sample} live agents intact",
        cold as f64 / create.as_secs_f64().max(1e-9),
        disk_cold as f64 / cold.max(1) as f64,
        rss_cold as f64 / 1048576.0,
        if complete {
            "all processed"
        } else {
            "NOT ALL PROCESSED"
        },
        rss_live as f64 / 1048576.0,
        rss_live.saturating_sub(rss_cold) as f64 / live.max(1) as f64,
        disk as f64 / n as f64,
        hist.value_at_quantile(0.5),
        hist.value_at_quantile(0.9),
        hist.value_at_quantile(0.99),
        hist.max(),
    );
    drop(live_refs);
    jido.shutdown().await;
    drop(storage);
    let _ = std::fs::remove_dir_all(&dir);
    if !complete || intact != sample || live_ok != live_sample {
        eprintln!("state lost or signals not processed");
        std::process::exit(1);
    }
    Ok(())
}

#[cfg(not(feature = "persist-redb"))]
async fn bulk_phase(_: &Args) -> jido::Result<()> {
    eprintln!("--hibernate --bulk needs --features persist-redb");
    std::process::exit(2);
}

#[cfg(not(feature = "persist-redb"))]
async fn hibernate_phase(_: usize) -> jido::Result<()> {
    eprintln!("--hibernate needs --features persist-redb");
    std::process::exit(2);
}

fn main() -> jido::Result<()> {
    let args = args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| jido::Error::internal(format!("runtime: {e}")))?;
    let n = args.agents;
    if args.hibernate && args.bulk {
        return rt.block_on(bulk_phase(&args));
    }
    if args.hibernate {
        return rt.block_on(hibernate_phase(n));
    }
    if args.raw_only {
        let f = rt.block_on(raw_phase(n));
        f.print("raw ractor", n);
        // For the parent process.
        println!("RAW_RSS_PER_ACTOR {:.0}", f.rss_per);
        std::process::exit(if f.complete { 0 } else { 1 });
    }

    // Phase 1: raw ractor actors in a child process (its memory is gone
    // before phase 2 starts).
    let exe = std::env::current_exe().map_err(|e| jido::Error::internal(e.to_string()))?;
    let out = std::process::Command::new(exe)
        .args(["--raw-only", "--agents", &n.to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| jido::Error::internal(format!("raw phase: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut raw_rss = None;
    for line in text.lines() {
        match line.strip_prefix("RAW_RSS_PER_ACTOR ") {
            Some(v) => raw_rss = v.parse::<f64>().ok(),
            None => println!("{line}"),
        }
    }
    let _ = std::io::stdout().flush();

    // Phase 2: jido agents in this process.
    let f = rt.block_on(jido_phase(n))?;
    f.print("jido agents", n);
    drop(rt);
    if let Some(raw) = raw_rss.filter(|r| *r > 0.0) {
        println!(
            "memory per idle agent: {:.0} B vs {:.0} B per raw actor = {:.2}x",
            f.rss_per,
            raw,
            f.rss_per / raw
        );
    }
    if !f.complete || !out.status.success() {
        eprintln!("some signals were not accounted for");
        std::process::exit(1);
    }
    Ok(())
}
