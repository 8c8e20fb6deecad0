//! Call latency under load: p50 / p99 / p999 of an AgentServer `call`
//! beside a raw ractor call, each while a background task casts to other
//! actors of the same kind (about 64 casts per millisecond).
//!
//! ```text
//! cargo run --release --example latency                 # 20 000 calls each
//! cargo run --release --example latency -- --calls 100000
//! ```
//!
//! With `CI` set it makes 500 calls each (`.ci/run` runs every example in
//! debug mode, where the figures mean nothing).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use jido::agent::SignalRoute;
use jido::prelude::*;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::json;

const LOAD_ACTORS: usize = 4;
const LOAD_BATCH: usize = 64;

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Nothing {}

struct Noop;
impl Action for Noop {
    type Params = Nothing;
    type Output = ();
    const NAME: &'static str = "noop";
    async fn run(&self, _: Nothing, _: &Context) -> jido::Result<()> {
        Ok(())
    }
}

struct Bench;
impl Agent for Bench {
    const NAME: &'static str = "bench";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![SignalRoute::action("noop", Noop)]
    }
}

enum RawMsg {
    Cast(Signal),
    Call(Signal, RpcReplyPort<u64>),
}

#[cfg(feature = "cluster")]
impl ractor::Message for RawMsg {}

struct Raw;
impl Actor for Raw {
    type Msg = RawMsg;
    type State = u64;
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<RawMsg>, _: ()) -> Result<u64, ActorProcessingErr> {
        Ok(0)
    }
    async fn handle(
        &self,
        _: ActorRef<RawMsg>,
        msg: RawMsg,
        n: &mut u64,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RawMsg::Cast(s) => *n += s.ty().len() as u64,
            RawMsg::Call(s, reply) => {
                *n += s.ty().len() as u64;
                let _ = reply.send(*n);
            }
        }
        Ok(())
    }
}

fn histogram() -> Histogram<u64> {
    // 1 µs .. 60 s, 3 significant digits.
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

fn report(who: &str, h: &Histogram<u64>) {
    println!(
        "{who:<28} p50 {:>6} µs  p99 {:>6} µs  p999 {:>6} µs  max {:>7} µs  ({} calls)",
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.max(),
        h.len()
    );
}

/// Casts `LOAD_BATCH` signals round-robin every millisecond until `stop`.
fn background_load(
    stop: Arc<AtomicBool>,
    cast: impl Fn(usize, Signal) + Send + 'static,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut sent = 0u64;
        let mut i = 0usize;
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..LOAD_BATCH {
                cast(i % LOAD_ACTORS, Signal::new("noop", json!({})));
                i += 1;
                sent += 1;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        sent
    })
}

async fn measure_raw(calls: usize) -> (Histogram<u64>, u64) {
    let mut load = Vec::new();
    for _ in 0..LOAD_ACTORS {
        let (a, _) = Actor::spawn(None, Raw, ()).await.expect("raw actor");
        load.push(a);
    }
    let (target, _) = Actor::spawn(None, Raw, ()).await.expect("raw actor");
    let stop = Arc::new(AtomicBool::new(false));
    let load2 = load.clone();
    let bg = background_load(stop.clone(), move |i, s| {
        let _ = load2[i].cast(RawMsg::Cast(s));
    });
    let mut h = histogram();
    for _ in 0..calls {
        let s = Signal::new("noop", json!({}));
        let t = Instant::now();
        target
            .call(|r| RawMsg::Call(s, r), None)
            .await
            .expect("raw call");
        let _ = h.record(t.elapsed().as_micros().max(1) as u64);
    }
    stop.store(true, Ordering::Relaxed);
    let sent = bg.await.unwrap_or(0);
    for a in load {
        a.stop(None);
    }
    target.stop(None);
    (h, sent)
}

async fn measure_jido(calls: usize) -> jido::Result<(Histogram<u64>, u64)> {
    let jido = Jido::start(JidoConfig::new()).await?;
    let mut load = Vec::new();
    for i in 0..LOAD_ACTORS {
        load.push(
            jido.start_agent(
                AgentState::new(Bench, AgentOptions::new().id(format!("load{i}"))),
                ServerOptions::new(),
            )
            .await?,
        );
    }
    let target = jido
        .start_agent(
            AgentState::new(Bench, AgentOptions::new().id("target")),
            ServerOptions::new(),
        )
        .await?;
    let stop = Arc::new(AtomicBool::new(false));
    let load2 = load.clone();
    let bg = background_load(stop.clone(), move |i, s| {
        let _ = load2[i].cast(s);
    });
    let mut h = histogram();
    for _ in 0..calls {
        let s = Signal::new("noop", json!({}));
        let t = Instant::now();
        target.call(s).await?;
        let _ = h.record(t.elapsed().as_micros().max(1) as u64);
    }
    stop.store(true, Ordering::Relaxed);
    let sent = bg.await.unwrap_or(0);
    jido.shutdown().await;
    Ok((h, sent))
}

fn main() -> jido::Result<()> {
    let mut calls = if std::env::var_os("CI").is_some() {
        500
    } else {
        20_000
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next().and_then(|v| v.parse().ok())) {
            ("--calls", Some(n)) if n > 0 => calls = n,
            _ => {
                eprintln!("usage: latency [--calls N]");
                std::process::exit(2);
            }
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| jido::Error::internal(format!("runtime: {e}")))?;
    rt.block_on(async {
        println!("{calls} calls each, background load {LOAD_BATCH} casts/ms to {LOAD_ACTORS} other actors");
        let (raw, raw_sent) = measure_raw(calls).await;
        report("raw ractor call", &raw);
        let (ours, our_sent) = measure_jido(calls).await?;
        report("AgentServer call", &ours);
        println!(
            "ratio (ours / raw): p50 {:.2}x  p99 {:.2}x  p999 {:.2}x; background casts sent: raw {raw_sent}, agents {our_sent}",
            ours.value_at_quantile(0.5) as f64 / raw.value_at_quantile(0.5).max(1) as f64,
            ours.value_at_quantile(0.99) as f64 / raw.value_at_quantile(0.99).max(1) as f64,
            ours.value_at_quantile(0.999) as f64 / raw.value_at_quantile(0.999).max(1) as f64,
        );
        Ok(())
    })
}
