//! Dispatch: configs, fan-out, batches, adapters, the circuit breaker,
//! telemetry, and HTTP/webhook delivery against a real loopback server.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use jido::server::{ActorTarget, DeliveryMode, GroupTarget, SignalSink};
use jido::signal::Signal;
use jido::signal::dispatch::{
    BATCH_CONCURRENCY, ChannelTarget, CircuitSettings, CircuitState, ConsoleTarget, Dispatch,
    DispatchConfig, LogLevel, LoggerTarget, MAX_CONCURRENCY, NoopTarget, circuit_state,
    reset_circuit,
};
use jido::{Error, ErrorKind};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};

// ---------------------------------------------------------------- helpers

#[derive(Debug, Clone)]
struct Captured {
    name: String,
    target: String,
    level: tracing::Level,
    fields: Map<String, Value>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

impl Capture {
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(tracing_subscriber::registry().with(self.clone()))
    }

    fn named(&self, name: &str) -> Vec<Captured> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.name == name)
            .cloned()
            .collect()
    }

    fn with_target(&self, target: &str) -> Vec<Captured> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.target == target)
            .cloned()
            .collect()
    }
}

struct Fields<'a>(&'a mut Map<String, Value>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().into(), json!(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().into(), json!(value));
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().into(), json!(value));
    }
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.0.insert(field.name().into(), json!(value));
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.0.insert(field.name().into(), json!(value));
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Map::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Captured {
            name: event.metadata().name().to_owned(),
            target: event.metadata().target().to_owned(),
            level: *event.metadata().level(),
            fields,
        });
    }
}

fn sig(ty: &str) -> Signal {
    Signal::builder(ty)
        .source("/test")
        .data(json!({"n": 1}))
        .build()
        .unwrap()
}

fn reason(err: &Error) -> &str {
    err.detail("reason").and_then(Value::as_str).unwrap_or("")
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::now_v7())
}

/// Counts deliveries and how many run at once; fails when told to.
#[derive(Debug, Default)]
struct ProbeState {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    delivered: Mutex<Vec<(usize, String)>>,
}

#[derive(Debug)]
struct Probe {
    index: usize,
    fail: bool,
    state: Arc<ProbeState>,
}

impl Dispatch for Probe {
    fn adapter(&self) -> &'static str {
        "probe"
    }
    fn target(&self) -> String {
        format!("probe-{}", self.index)
    }
    fn deliver<'a>(&'a self, signal: &'a Signal) -> BoxFuture<'a, jido::Result<()>> {
        Box::pin(async move {
            let now = self.state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.state.max_in_flight.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
            self.state.in_flight.fetch_sub(1, Ordering::SeqCst);
            self.state
                .delivered
                .lock()
                .unwrap()
                .push((self.index, signal.id().to_owned()));
            let fail = self.fail || signal.data().is_some_and(|d| d["fail"] == true);
            if fail {
                Err(Error::dispatch(format!("probe {} failed", self.index))
                    .with_detail("retry", false))
            } else {
                Ok(())
            }
        })
    }
}

// ---------------------------------------------------------------- configs

#[tokio::test]
async fn an_empty_or_noop_config_succeeds() {
    DispatchConfig::default().dispatch(&sig("a")).await.unwrap();
    assert!(DispatchConfig::default().is_empty());
    let noop = DispatchConfig::noop();
    assert_eq!(noop.len(), 1);
    noop.dispatch(&sig("a")).await.unwrap();
    DispatchConfig::new(NoopTarget)
        .unwrap()
        .dispatch(&sig("a"))
        .await
        .unwrap();
    assert_eq!(noop.targets()[0].adapter(), "noop");
}

#[tokio::test(start_paused = true)]
async fn many_targets_are_delivered_concurrently_with_a_bound_and_in_order() {
    let state = Arc::new(ProbeState::default());
    let config = DispatchConfig::many((0..20).map(|index| {
        DispatchConfig::new(Probe {
            index,
            fail: index == 3 || index == 17,
            state: state.clone(),
        })
        .unwrap()
    }));
    assert_eq!(config.len(), 20);
    let started = Instant::now();
    let results = config.dispatch_each(&sig("fan.out")).await;
    assert_eq!(MAX_CONCURRENCY, 8);
    assert_eq!(state.max_in_flight.load(Ordering::SeqCst), 8);
    assert_eq!(started.elapsed(), Duration::from_secs(3)); // 8 + 8 + 4
    assert_eq!(results.len(), 20);
    let failed: Vec<usize> = results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_err())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(failed, vec![3, 17]);
    assert_eq!(results[3].as_ref().unwrap_err().message(), "probe 3 failed");
    assert_eq!(state.delivered.lock().unwrap().len(), 20);
}

#[tokio::test(start_paused = true)]
async fn dispatch_lists_each_failure_with_its_index_and_delivers_the_rest() {
    let state = Arc::new(ProbeState::default());
    let config = DispatchConfig::many((0..5).map(|index| {
        DispatchConfig::new(Probe {
            index,
            fail: index % 2 == 1,
            state: state.clone(),
        })
        .unwrap()
    }));
    let err = config.dispatch(&sig("x")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Dispatch);
    assert_eq!(err.message(), "dispatch failed for 2 of 5 targets");
    assert_eq!(reason(&err), "partial_failure");
    let failures = err.detail("failures").unwrap().as_array().unwrap();
    assert_eq!(failures.len(), 2);
    assert_eq!(failures[0]["index"], 1);
    assert_eq!(failures[0]["error"]["message"], "probe 1 failed");
    assert_eq!(failures[0]["error"]["type"], "dispatch_error");
    assert_eq!(failures[1]["index"], 3);
    assert!(!err.retryable(), "no member is retryable");
    assert_eq!(state.delivered.lock().unwrap().len(), 5);
}

#[tokio::test(start_paused = true)]
async fn a_single_target_returns_its_own_error() {
    let config = DispatchConfig::new(Probe {
        index: 0,
        fail: true,
        state: Arc::default(),
    })
    .unwrap();
    let err = config.dispatch(&sig("x")).await.unwrap_err();
    assert_eq!(err.message(), "probe 0 failed");
}

#[tokio::test(start_paused = true)]
async fn batches_run_five_at_a_time_and_list_failed_signals() {
    let state = Arc::new(ProbeState::default());
    let config = DispatchConfig::new(Probe {
        index: 0,
        fail: false,
        state: state.clone(),
    })
    .unwrap();
    let signals: Vec<Signal> = (0..12)
        .map(|i| {
            Signal::builder("batch.item")
                .data(json!({"i": i, "fail": i == 2 || i == 9}))
                .build()
                .unwrap()
        })
        .collect();
    let started = Instant::now();
    let err = config.dispatch_batch(&signals).await.unwrap_err();
    assert_eq!(BATCH_CONCURRENCY, 5);
    assert_eq!(state.max_in_flight.load(Ordering::SeqCst), 5);
    assert_eq!(started.elapsed(), Duration::from_secs(3)); // 5 + 5 + 2
    assert_eq!(err.message(), "dispatch failed for 2 of 12 signals");
    let indexes: Vec<u64> = err
        .detail("failures")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indexes, vec![2, 9]);
    assert_eq!(state.delivered.lock().unwrap().len(), 12);

    let ok: Vec<Signal> = (0..3).map(|_| sig("fine")).collect();
    config.dispatch_batch(&ok).await.unwrap();
    let each = config.dispatch_batch_each(&signals[..3]).await;
    assert_eq!(
        each.iter().map(Result::is_ok).collect::<Vec<_>>(),
        vec![true, true, false]
    );
}

#[tokio::test(start_paused = true)]
async fn dispatch_async_runs_in_a_task() {
    let (tx, mut rx) = mpsc::unbounded_channel::<Signal>();
    let config = DispatchConfig::new(ChannelTarget::unbounded(tx)).unwrap();
    let signal = sig("async.one");
    let handle = config.dispatch_async(signal.clone());
    handle.await.unwrap().unwrap();
    assert_eq!(rx.recv().await, Some(signal));
}

#[derive(Debug)]
struct Panics;
impl Dispatch for Panics {
    fn adapter(&self) -> &'static str {
        "panics"
    }
    fn deliver<'a>(&'a self, _: &'a Signal) -> BoxFuture<'a, jido::Result<()>> {
        Box::pin(async { panic!("adapter bug") })
    }
}

#[tokio::test]
async fn a_panicking_adapter_is_an_exception_and_spares_the_others() {
    let (tx, mut rx) = mpsc::unbounded_channel::<Signal>();
    let config = DispatchConfig::new(Panics)
        .unwrap()
        .with(ChannelTarget::unbounded(tx))
        .unwrap();
    let err = config.dispatch(&sig("boom")).await.unwrap_err();
    let failures = err.detail("failures").unwrap().as_array().unwrap();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0]["index"], 0);
    assert_eq!(
        failures[0]["error"]["message"],
        "dispatch adapter panics panicked"
    );
    assert_eq!(failures[0]["error"]["details"]["reason"], "exception");
    assert_eq!(failures[0]["error"]["details"]["panic"], "adapter bug");
    assert_eq!(failures[0]["error"]["retryable"], false);
    assert_eq!(rx.recv().await.unwrap().ty(), "boom");
}

// ---------------------------------------------------------------- channel

#[tokio::test(start_paused = true)]
async fn channels_deliver_time_out_when_full_and_fail_when_closed() {
    let (tx, mut rx) = mpsc::channel::<Signal>(1);
    let config =
        DispatchConfig::new(ChannelTarget::new(tx).timeout(Duration::from_secs(2))).unwrap();
    config.dispatch(&sig("one")).await.unwrap();

    let started = Instant::now();
    let err = config.dispatch(&sig("two")).await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(reason(&err), "timeout");
    assert_eq!(err.detail("retry"), Some(&json!(true)));
    assert!(err.retryable());

    assert_eq!(rx.recv().await.unwrap().ty(), "one");
    drop(rx);
    let err = config.dispatch(&sig("three")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(reason(&err), "target_not_alive");
    assert_eq!(err.message(), "dispatch target is not alive");
    assert!(!err.retryable());

    let err = DispatchConfig::new(
        ChannelTarget::<Signal>::unbounded(mpsc::unbounded_channel().0).timeout(Duration::ZERO),
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.message(), "channel timeout must be positive");
}

#[tokio::test]
async fn channels_convert_into_the_message_type() {
    #[derive(Debug, PartialEq)]
    struct Wrapped(String);
    impl From<Signal> for Wrapped {
        fn from(s: Signal) -> Self {
            Wrapped(s.ty().to_owned())
        }
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<Wrapped>();
    DispatchConfig::new(ChannelTarget::unbounded(tx))
        .unwrap()
        .dispatch(&sig("wrapped.up"))
        .await
        .unwrap();
    assert_eq!(rx.recv().await, Some(Wrapped("wrapped.up".into())));
}

// ---------------------------------------------------------------- actors

#[derive(Debug)]
enum Msg {
    Signal(Signal),
}

impl From<Signal> for Msg {
    fn from(s: Signal) -> Self {
        Msg::Signal(s)
    }
}

#[cfg(feature = "cluster")]
impl ractor::Message for Msg {}

struct Forward;

impl Actor for Forward {
    type Msg = Msg;
    type State = mpsc::UnboundedSender<Signal>;
    type Arguments = mpsc::UnboundedSender<Signal>;

    async fn pre_start(
        &self,
        _: ActorRef<Msg>,
        tx: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(tx)
    }

    async fn handle(
        &self,
        _: ActorRef<Msg>,
        msg: Msg,
        tx: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let Msg::Signal(signal) = msg;
        let _ = tx.send(signal);
        Ok(())
    }
}

struct OtherActor;

impl Actor for OtherActor {
    type Msg = u32;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<u32>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

#[tokio::test]
async fn actor_refs_receive_signals_and_dead_ones_are_not_found() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (actor, handle) = Actor::spawn(None, Forward, tx).await.unwrap();
    let target = ActorTarget::new(actor.clone());
    assert_eq!(target.adapter(), "actor");
    assert_eq!(target.target(), actor.get_id().to_string());
    let config = DispatchConfig::new(target).unwrap();
    let signal = sig("actor.hello");
    config.dispatch(&signal).await.unwrap();
    assert_eq!(rx.recv().await, Some(signal));

    actor.stop(None);
    handle.await.unwrap();
    let err = config.dispatch(&sig("actor.late")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_eq!(reason(&err), "target_not_alive");
    assert_eq!(
        err.detail("target"),
        Some(&json!(actor.get_id().to_string()))
    );
    assert_eq!(err.detail("retry"), Some(&json!(false)));
}

#[tokio::test]
async fn an_arc_dyn_sink_is_accepted() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (actor, handle) = Actor::spawn(None, Forward, tx).await.unwrap();
    let sink: Arc<dyn SignalSink> = Arc::new(actor.clone());
    DispatchConfig::new(ActorTarget::from_arc(sink))
        .unwrap()
        .dispatch(&sig("via.arc"))
        .await
        .unwrap();
    assert_eq!(rx.recv().await.unwrap().ty(), "via.arc");
    actor.stop(None);
    handle.await.unwrap();
}

struct NeverAnswers;
impl SignalSink for NeverAnswers {
    fn send_signal(&self, _: Signal) -> jido::Result<()> {
        Ok(())
    }
    fn call_signal(&self, _: Signal, _: Duration) -> BoxFuture<'_, jido::Result<()>> {
        Box::pin(futures::future::pending())
    }
    fn describe(&self) -> String {
        "never".into()
    }
}

#[tokio::test(start_paused = true)]
async fn sync_delivery_times_out() {
    let async_config = DispatchConfig::new(ActorTarget::new(NeverAnswers)).unwrap();
    async_config.dispatch(&sig("a")).await.unwrap();

    let config = DispatchConfig::new(
        ActorTarget::new(NeverAnswers)
            .mode(DeliveryMode::Sync)
            .timeout(Duration::from_secs(2)),
    )
    .unwrap();
    let started = Instant::now();
    let err = config.dispatch(&sig("a")).await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(err.message(), "dispatch timed out after 2000ms");
    assert_eq!(err.detail("target"), Some(&json!("never")));
}

#[tokio::test]
async fn process_groups_get_the_signal_on_every_member() {
    let group = unique("jido-dispatch-group");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (a, ha) = Actor::spawn(None, Forward, tx.clone()).await.unwrap();
    let (b, hb) = Actor::spawn(None, Forward, tx).await.unwrap();
    ractor::pg::join(group.clone(), vec![a.get_cell(), b.get_cell()]);

    let target = GroupTarget::<Msg>::new(group.clone());
    assert_eq!(target.target(), format!("pg:{group}"));
    let config = DispatchConfig::new(target).unwrap();
    config.dispatch(&sig("group.hello")).await.unwrap();
    assert_eq!(rx.recv().await.unwrap().ty(), "group.hello");
    assert_eq!(rx.recv().await.unwrap().ty(), "group.hello");

    // A member of another message type fails the delivery; the others still get it.
    let (other, ho) = Actor::spawn(None, OtherActor, ()).await.unwrap();
    ractor::pg::join(group.clone(), vec![other.get_cell()]);
    let err = config.dispatch(&sig("group.mixed")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Dispatch);
    assert_eq!(reason(&err), "invalid_target");
    assert_eq!(
        err.message(),
        "1 of 3 group members do not accept this message type"
    );
    assert_eq!(rx.recv().await.unwrap().ty(), "group.mixed");
    assert_eq!(rx.recv().await.unwrap().ty(), "group.mixed");

    for (actor, handle) in [
        (a.get_cell(), ha),
        (b.get_cell(), hb),
        (other.get_cell(), ho),
    ] {
        actor.stop(None);
        handle.await.unwrap();
    }
    // An empty group is a broadcast to nobody.
    DispatchConfig::new(GroupTarget::<Msg>::new(unique("empty")))
        .unwrap()
        .dispatch(&sig("nobody"))
        .await
        .unwrap();
    let scoped = GroupTarget::<Msg>::scoped("scope", "g");
    assert_eq!(scoped.target(), "pg:scope/g");
    let err = DispatchConfig::new(GroupTarget::<Msg>::new("")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Configuration);
    assert_eq!(err.detail("reason"), Some(&json!("invalid_target")));
}

// ---------------------------------------------------------------- logger / console

#[tokio::test]
async fn the_logger_writes_jidos_line_or_structured_fields() {
    let capture = Capture::default();
    let _guard = capture.install();
    let s = Signal::builder("order.placed")
        .source("/shop")
        .id("evt-9")
        .data(json!({"x": 1}))
        .build()
        .unwrap();

    DispatchConfig::new(LoggerTarget::new())
        .unwrap()
        .dispatch(&s)
        .await
        .unwrap();
    DispatchConfig::new(
        LoggerTarget::new()
            .level(LogLevel::Warn)
            .include_data(false),
    )
    .unwrap()
    .dispatch(&s)
    .await
    .unwrap();
    DispatchConfig::new(LoggerTarget::new().structured(true).level(LogLevel::Debug))
        .unwrap()
        .dispatch(&s)
        .await
        .unwrap();

    let logs = capture.with_target("jido::dispatch::logger");
    assert_eq!(logs.len(), 3);
    assert_eq!(logs[0].level, tracing::Level::INFO);
    assert_eq!(
        logs[0].fields["message"],
        r#"SIGNAL: order.placed from /shop with data={"x":1}"#
    );
    assert_eq!(logs[1].level, tracing::Level::WARN);
    assert_eq!(logs[1].fields["message"], "SIGNAL: order.placed from /shop");
    assert_eq!(logs[2].level, tracing::Level::DEBUG);
    assert_eq!(logs[2].fields["message"], "signal dispatched");
    assert_eq!(logs[2].fields["signal_id"], "evt-9");
    assert_eq!(logs[2].fields["signal_type"], "order.placed");
    assert_eq!(logs[2].fields["signal_source"], "/shop");
    assert_eq!(logs[2].fields["data"], r#"{"x":1}"#);
}

#[tokio::test]
async fn the_console_prints_a_line() {
    let s = sig("console.line");
    let console = ConsoleTarget::new();
    assert_eq!(
        console.line(&s),
        r#"SIGNAL: console.line from /test with data={"n":1}"#
    );
    DispatchConfig::new(console)
        .unwrap()
        .dispatch(&s)
        .await
        .unwrap();
}

// ---------------------------------------------------------------- telemetry

#[tokio::test]
async fn deliveries_emit_start_stop_and_exception_events() {
    let capture = Capture::default();
    let _guard = capture.install();
    let (tx, rx) = mpsc::unbounded_channel::<Signal>();
    let config = DispatchConfig::new(ChannelTarget::unbounded(tx)).unwrap();
    config.dispatch(&sig("telemetry.ok")).await.unwrap();
    drop(rx);
    config.dispatch(&sig("telemetry.fail")).await.unwrap_err();

    let starts = capture.named("jido.dispatch.start");
    assert_eq!(starts.len(), 2);
    assert_eq!(starts[0].target, "jido::dispatch");
    assert_eq!(starts[0].fields["adapter"], "channel");
    assert_eq!(starts[0].fields["signal_type"], "telemetry.ok");
    assert_eq!(starts[0].fields["target"], "mpsc");
    assert_eq!(starts[0].fields["target_kind"], "channel");
    assert_eq!(starts[0].fields["runtime_surface"], "dispatch");

    let stops = capture.named("jido.dispatch.stop");
    assert_eq!(stops.len(), 1);
    assert_eq!(stops[0].fields["outcome"], "ok");
    assert_eq!(stops[0].fields["success"], true);
    assert!(stops[0].fields.contains_key("latency_ms"));

    let exceptions = capture.named("jido.dispatch.exception");
    assert_eq!(exceptions.len(), 1);
    let e = &exceptions[0].fields;
    assert_eq!(exceptions[0].level, tracing::Level::WARN);
    assert_eq!(e["signal_type"], "telemetry.fail");
    assert_eq!(e["outcome"], "error");
    assert_eq!(e["success"], false);
    assert_eq!(e["error_type"], "not_found");
    assert_eq!(e["reason"], "target_not_alive");
    assert_eq!(e["retryable"], false);
    assert_eq!(e["retry_count"], 0);
}

// ---------------------------------------------------------------- circuit breaker

#[derive(Debug, Clone)]
struct Flaky {
    key: String,
    fail: Arc<AtomicBool>,
    calls: Arc<AtomicUsize>,
}

impl Flaky {
    fn new() -> Self {
        Self {
            key: unique("flaky"),
            fail: Arc::new(AtomicBool::new(true)),
            calls: Arc::default(),
        }
    }
}

impl Dispatch for Flaky {
    fn adapter(&self) -> &'static str {
        "flaky"
    }
    fn circuit_key(&self) -> Option<String> {
        Some(self.key.clone())
    }
    fn deliver<'a>(&'a self, _: &'a Signal) -> BoxFuture<'a, jido::Result<()>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if self.fail.load(Ordering::SeqCst) {
                Err(Error::dispatch("flaky failed").with_detail("retry", true))
            } else {
                Ok(())
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn the_breaker_opens_on_the_sixth_failure_and_resets_after_30s() {
    let capture = Capture::default();
    let _guard = capture.install();
    let flaky = Flaky::new();
    let config = DispatchConfig::new(flaky.clone()).unwrap();
    for i in 1..=5 {
        let err = config.dispatch(&sig("x")).await.unwrap_err();
        assert_eq!(err.message(), "flaky failed", "failure {i}");
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    assert_eq!(
        circuit_state(&flaky.key),
        CircuitState::Closed { failures: 5 }
    );
    let err = config.dispatch(&sig("x")).await.unwrap_err();
    assert_eq!(err.message(), "flaky failed", "the 6th failure still ran");
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 6);
    assert_eq!(
        circuit_state(&flaky.key),
        CircuitState::Open {
            remaining: Duration::from_secs(30)
        }
    );
    let melts = capture.named("jido.dispatch.circuit.melt");
    assert_eq!(melts.len(), 6);
    assert_eq!(melts[5].fields["open"], true);
    assert_eq!(melts[5].fields["adapter"], "flaky");
    assert_eq!(melts[4].fields["open"], false);

    // Open: fail fast without calling the adapter.
    flaky.fail.store(false, Ordering::SeqCst);
    let err = config.dispatch(&sig("x")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Dispatch);
    assert_eq!(err.message(), "circuit breaker is open");
    assert_eq!(reason(&err), "circuit_open");
    assert!(err.retryable());
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 6);
    assert_eq!(capture.named("jido.dispatch.circuit.rejected").len(), 1);

    tokio::time::advance(Duration::from_secs(29)).await;
    assert_eq!(
        reason(&config.dispatch(&sig("x")).await.unwrap_err()),
        "circuit_open"
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    config.dispatch(&sig("x")).await.unwrap();
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 7);
    assert_eq!(capture.named("jido.dispatch.circuit.reset").len(), 1);
    assert_eq!(
        circuit_state(&flaky.key),
        CircuitState::Closed { failures: 0 }
    );
}

#[tokio::test(start_paused = true)]
async fn failures_outside_the_window_do_not_count() {
    let flaky = Flaky::new();
    let config = DispatchConfig::new(flaky.clone()).unwrap();
    for _ in 0..5 {
        config.dispatch(&sig("x")).await.unwrap_err();
    }
    tokio::time::advance(Duration::from_secs(10)).await;
    config.dispatch(&sig("x")).await.unwrap_err();
    assert_eq!(
        circuit_state(&flaky.key),
        CircuitState::Closed { failures: 1 }
    );
    for _ in 0..5 {
        config.dispatch(&sig("x")).await.unwrap_err();
    }
    assert!(matches!(
        circuit_state(&flaky.key),
        CircuitState::Open { .. }
    ));
    reset_circuit(&flaky.key);
    assert_eq!(
        circuit_state(&flaky.key),
        CircuitState::Closed { failures: 0 }
    );
    assert_eq!(
        CircuitSettings::default(),
        CircuitSettings::new(5, Duration::from_secs(10), Duration::from_secs(30))
    );
}

#[test]
fn public_handles_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<DispatchConfig>();
    assert_send_sync::<ActorTarget>();
    assert_send_sync::<GroupTarget<Msg>>();
    assert_send_sync::<ChannelTarget<Signal>>();
    assert_send_sync::<LoggerTarget>();
    #[cfg(feature = "http")]
    {
        assert_send_sync::<jido::signal::dispatch::HttpTarget>();
        assert_send_sync::<jido::signal::dispatch::WebhookTarget>();
    }
}

// ---------------------------------------------------------------- HTTP

#[cfg(feature = "http")]
mod http {
    use std::collections::VecDeque;
    use std::net::SocketAddr;

    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::{HeaderMap, Method, StatusCode, Uri};
    use hmac::{Hmac, Mac};
    use jido::signal::dispatch::{
        HttpMethod, HttpTarget, RetryPolicy, WebhookTarget, WebhookVerifier,
    };
    use sha2::Sha256;

    use super::*;

    #[derive(Debug, Clone)]
    struct Hit {
        at: Instant,
        method: Method,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    }

    #[derive(Default)]
    struct Shared {
        hits: Mutex<Vec<Hit>>,
        script: Mutex<VecDeque<(u16, &'static str)>>,
        stall: Option<Duration>,
    }

    struct Server {
        addr: SocketAddr,
        shared: Arc<Shared>,
    }

    impl Server {
        /// A loopback server answering with `script` in order, then 200.
        async fn start(script: &[(u16, &'static str)]) -> Self {
            Self::start_with(script, None).await
        }

        async fn start_with(script: &[(u16, &'static str)], stall: Option<Duration>) -> Self {
            let shared = Arc::new(Shared {
                hits: Mutex::default(),
                script: Mutex::new(script.iter().copied().collect()),
                stall,
            });
            let app = axum::Router::new()
                .fallback(handle)
                .with_state(shared.clone());
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                axum::serve(listener, app).await.unwrap();
            });
            Self { addr, shared }
        }

        fn url(&self, path: &str) -> String {
            format!("http://{}{}", self.addr, path)
        }

        fn hits(&self) -> Vec<Hit> {
            self.shared.hits.lock().unwrap().clone()
        }
    }

    async fn handle(
        State(shared): State<Arc<Shared>>,
        method: Method,
        uri: Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> (StatusCode, &'static str) {
        shared.hits.lock().unwrap().push(Hit {
            at: Instant::now(),
            method,
            uri,
            headers,
            body,
        });
        if let Some(stall) = shared.stall {
            tokio::time::sleep(stall).await;
        }
        let (status, text) = shared
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or((200, "ok"));
        (StatusCode::from_u16(status).unwrap(), text)
    }

    fn fast_retry(attempts: u32) -> RetryPolicy {
        RetryPolicy::new(
            attempts - 1,
            Duration::from_millis(1),
            Duration::from_millis(2),
        )
    }

    fn header<'a>(hit: &'a Hit, name: &str) -> Vec<&'a str> {
        hit.headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect()
    }

    #[tokio::test]
    async fn posts_the_signal_json_with_headers() {
        let server = Server::start(&[]).await;
        let signal = sig("http.post");
        DispatchConfig::new(
            HttpTarget::new(server.url("/events?token=abc"))
                .header("x-custom", "yes")
                .header("Content-Type", "text/plain"),
        )
        .unwrap()
        .dispatch(&signal)
        .await
        .unwrap();
        let hits = server.hits();
        assert_eq!(hits.len(), 1);
        let hit = &hits[0];
        assert_eq!(hit.method, Method::POST);
        assert_eq!(hit.uri.path(), "/events");
        assert_eq!(hit.uri.query(), Some("token=abc"));
        assert_eq!(header(hit, "x-custom"), vec!["yes"]);
        // The CloudEvents HTTP binding's structured mode by default.
        assert_eq!(
            header(hit, "content-type"),
            vec!["application/cloudevents+json; charset=utf-8"]
        );
        assert_eq!(hit.body, signal.to_cloudevents_json_string().as_bytes());
        assert_eq!(Signal::from_json_slice(&hit.body).unwrap(), signal);
    }

    #[tokio::test]
    async fn put_patch_and_the_cloudevents_spec_version() {
        let server = Server::start(&[]).await;
        let signal = sig("http.methods");
        for method in [HttpMethod::Put, HttpMethod::Patch] {
            DispatchConfig::new(HttpTarget::new(server.url("/m")).method(method))
                .unwrap()
                .dispatch(&signal)
                .await
                .unwrap();
        }
        let hits = server.hits();
        assert_eq!(
            hits.iter().map(|h| h.method.clone()).collect::<Vec<_>>(),
            vec![Method::PUT, Method::PATCH]
        );
        let body: Value = serde_json::from_slice(&hits[0].body).unwrap();
        assert_eq!(body["specversion"], "1.0");
        let event: cloudevents::Event = serde_json::from_slice(&hits[1].body).unwrap();
        assert_eq!(cloudevents::AttributesReader::id(&event), signal.id());
    }

    #[tokio::test]
    async fn client_errors_are_not_retried() {
        let server = Server::start(&[(404, "not here")]).await;
        let err = DispatchConfig::new(HttpTarget::new(server.url("/missing")).retry(fast_retry(3)))
            .unwrap()
            .dispatch(&sig("http.404"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Dispatch);
        assert_eq!(err.message(), "http status 404");
        assert_eq!(reason(&err), "status_error");
        assert_eq!(err.detail("status"), Some(&json!(404)));
        assert_eq!(err.detail("body"), Some(&json!("not here")));
        assert_eq!(err.detail("retry"), Some(&json!(false)));
        assert_eq!(err.detail("attempts"), Some(&json!(1)));
        assert!(!err.retryable());
        assert_eq!(server.hits().len(), 1);
    }

    #[tokio::test]
    async fn retryable_statuses_are_retried_until_success() {
        let server = Server::start(&[(503, "busy"), (429, "slow down")]).await;
        DispatchConfig::new(HttpTarget::new(server.url("/flaky")).retry(fast_retry(3)))
            .unwrap()
            .dispatch(&sig("http.retry"))
            .await
            .unwrap();
        let hits = server.hits();
        assert_eq!(hits.len(), 3);
        assert_eq!(hits[0].body, hits[2].body);
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_policy_backs_off_one_then_two_seconds() {
        let server = Server::start(&[(500, "a"), (503, "b"), (502, "c")]).await;
        let started = Instant::now();
        let err = DispatchConfig::new(HttpTarget::new(server.url("/slow")))
            .unwrap()
            .dispatch(&sig("http.backoff"))
            .await
            .unwrap_err();
        assert_eq!(err.detail("attempts"), Some(&json!(3)));
        assert_eq!(err.detail("body"), Some(&json!("c")));
        let hits = server.hits();
        assert_eq!(hits.len(), 3);
        assert_eq!(hits[0].at - started, Duration::ZERO);
        assert_eq!(hits[1].at - hits[0].at, Duration::from_secs(1));
        assert_eq!(hits[2].at - hits[1].at, Duration::from_secs(2));
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test]
    async fn retries_stop_after_max_attempts() {
        let server = Server::start(&[(500, "e1"), (502, "e2"), (500, "e3"), (500, "e4")]).await;
        let err = DispatchConfig::new(HttpTarget::new(server.url("/down")).retry(fast_retry(3)))
            .unwrap()
            .dispatch(&sig("http.down"))
            .await
            .unwrap_err();
        assert_eq!(err.message(), "http status 500");
        assert_eq!(err.detail("body"), Some(&json!("e3")));
        assert_eq!(err.detail("attempts"), Some(&json!(3)));
        assert_eq!(err.detail("retry"), Some(&json!(true)));
        assert!(err.retryable());
        assert_eq!(server.hits().len(), 3);

        let one = Server::start(&[(500, "e")]).await;
        let err = DispatchConfig::new(HttpTarget::new(one.url("/")).retry(RetryPolicy::none()))
            .unwrap()
            .dispatch(&sig("http.once"))
            .await
            .unwrap_err();
        assert_eq!(err.detail("attempts"), Some(&json!(1)));
        assert_eq!(one.hits().len(), 1);
    }

    #[tokio::test]
    async fn retryable_status_codes_follow_jido_signal() {
        use jido::signal::dispatch::status_retryable;
        for s in [408, 425, 429, 500, 502, 503, 504, 599] {
            assert!(status_retryable(s), "{s}");
        }
        for s in [300, 400, 401, 403, 404, 409, 410, 422, 426, 499] {
            assert!(!status_retryable(s), "{s}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_server_times_out() {
        let server = Server::start_with(&[], Some(Duration::from_secs(3600))).await;
        let started = Instant::now();
        let err = DispatchConfig::new(
            HttpTarget::new(server.url("/stall"))
                .timeout(Duration::from_secs(2))
                .retry(RetryPolicy::none()),
        )
        .unwrap()
        .dispatch(&sig("http.stall"))
        .await
        .unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert_eq!(err.kind(), ErrorKind::Timeout);
        assert_eq!(err.message(), "dispatch timed out after 2000ms");
        assert_eq!(reason(&err), "timeout");
        assert!(err.retryable());
    }

    #[tokio::test]
    async fn a_refused_connection_is_retryable() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let err = DispatchConfig::new(
            HttpTarget::new(format!("http://{addr}/x")).retry(RetryPolicy::none()),
        )
        .unwrap()
        .dispatch(&sig("http.refused"))
        .await
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Dispatch);
        assert_eq!(err.message(), "http connection failed");
        assert_eq!(reason(&err), "connection_failed");
        assert!(err.retryable());
    }

    #[tokio::test]
    async fn the_breaker_guards_each_url() {
        let server = Server::start(&[
            (500, "1"),
            (500, "2"),
            (500, "3"),
            (500, "4"),
            (500, "5"),
            (500, "6"),
        ])
        .await;
        let url = server.url("/breaker?secret=zzz");
        let config = DispatchConfig::new(HttpTarget::new(&url).retry(RetryPolicy::none())).unwrap();
        for _ in 0..6 {
            assert_eq!(
                reason(&config.dispatch(&sig("b")).await.unwrap_err()),
                "status_error"
            );
        }
        let err = config.dispatch(&sig("b")).await.unwrap_err();
        assert_eq!(reason(&err), "circuit_open");
        let key = format!("http:{}", server.url("/breaker"));
        assert_eq!(err.detail("circuit"), Some(&json!(key)));
        assert!(matches!(circuit_state(&key), CircuitState::Open { .. }));
        assert_eq!(server.hits().len(), 6);
        // The webhook adapter has its own breaker for the same URL.
        DispatchConfig::new(WebhookTarget::new(&url).retry(RetryPolicy::none()))
            .unwrap()
            .dispatch(&sig("b"))
            .await
            .unwrap();
        assert_eq!(server.hits().len(), 7);
        reset_circuit(&key);
    }

    #[tokio::test]
    async fn telemetry_strips_userinfo_query_and_fragment() {
        let capture = Capture::default();
        let _guard = capture.install();
        let server = Server::start(&[(500, "x")]).await;
        let config = DispatchConfig::new(
            HttpTarget::new(server.url("/hook?token=abc#frag")).retry(fast_retry(2)),
        )
        .unwrap();
        config.dispatch(&sig("t")).await.unwrap();
        let stop = &capture.named("jido.dispatch.stop")[0];
        assert_eq!(stop.fields["target"], json!(server.url("/hook")));
        assert_eq!(stop.fields["target_kind"], "url");
        assert_eq!(stop.fields["adapter"], "http");

        let fail = Server::start(&[(503, "a"), (503, "b")]).await;
        DispatchConfig::new(HttpTarget::new(fail.url("/f")).retry(fast_retry(2)))
            .unwrap()
            .dispatch(&sig("t"))
            .await
            .unwrap_err();
        let exception = &capture.named("jido.dispatch.exception")[0];
        assert_eq!(exception.fields["retry_count"], 1);
        assert_eq!(exception.fields["error_type"], "dispatch_error");
        assert_eq!(exception.fields["reason"], "status_error");
        assert_eq!(exception.fields["retryable"], true);
    }

    #[tokio::test]
    async fn urls_and_options_are_validated() {
        let bad_urls = [
            (
                "ftp://example.com/x",
                "invalid url: scheme must be http or https",
            ),
            (
                "http://user:pw@example.com/",
                "invalid url: userinfo not allowed",
            ),
            (
                "http://user@example.com/",
                "invalid url: userinfo not allowed",
            ),
            (
                "http://exa mple.com/",
                "invalid url: whitespace not allowed",
            ),
            (
                " http://example.com/",
                "invalid url: whitespace not allowed",
            ),
            (
                "example.com/hook",
                "invalid url: relative URL without a base",
            ),
            ("http://", "invalid url: empty host"),
            (
                "mailto:me@example.com",
                "invalid url: scheme must be http or https",
            ),
        ];
        for (url, message) in bad_urls {
            let err = DispatchConfig::new(HttpTarget::new(url)).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Configuration, "{url}");
            assert_eq!(err.message(), message, "{url}");
            assert_eq!(reason(&err), "invalid_target", "{url}");
            assert_eq!(err.detail("option"), Some(&json!("url")), "{url}");
            assert!(!err.retryable());
        }
        let url = "https://example.com/hook";
        let bad_options: Vec<(HttpTarget, &str, &str)> = vec![
            (
                HttpTarget::new(url).timeout(Duration::ZERO),
                "timeout must be positive",
                "timeout",
            ),
            (
                HttpTarget::new(url).timeout(Duration::from_millis(60_001)),
                "timeout exceeds 60000ms",
                "timeout",
            ),
            (
                HttpTarget::new(url).retry(RetryPolicy::new(10, Duration::ZERO, Duration::ZERO)),
                "retry attempts exceed 10",
                "retry",
            ),
            (
                HttpTarget::new(url).retry(RetryPolicy::new(
                    3,
                    Duration::from_secs(61),
                    Duration::from_secs(61),
                )),
                "retry delay exceeds 60000ms",
                "retry",
            ),
            (
                HttpTarget::new(url).retry(RetryPolicy::new(
                    3,
                    Duration::from_secs(2),
                    Duration::from_secs(1),
                )),
                "retry max_backoff must be at least backoff",
                "retry",
            ),
            (
                HttpTarget::new(url).header("bad header", "x"),
                "invalid header name \"bad header\"",
                "headers",
            ),
            (
                HttpTarget::new(url).header("x-ok", "line\nbreak"),
                "invalid value for header x-ok",
                "headers",
            ),
        ];
        for (target, message, option) in bad_options {
            let err = DispatchConfig::new(target).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Configuration);
            assert_eq!(err.message(), message);
            assert_eq!(err.detail("option"), Some(&json!(option)));
        }
        DispatchConfig::new(
            HttpTarget::new("https://example.com:8443/p?q=1#f").timeout(Duration::from_secs(60)),
        )
        .unwrap();
        let err = DispatchConfig::new(WebhookTarget::new(url).secret("")).unwrap_err();
        assert_eq!(err.message(), "webhook secret is empty");
        let err = DispatchConfig::new(WebhookTarget::new(url).signature_header("bad header"))
            .unwrap_err();
        assert_eq!(err.detail("option"), Some(&json!("headers")));
        let defaults = jido::signal::dispatch::DEFAULT_HTTP_RETRY;
        assert_eq!(
            (defaults.max_retries, defaults.backoff, defaults.max_backoff),
            (2, Duration::from_millis(1000), Duration::from_millis(5000))
        );
        assert_eq!(
            defaults.delays().map(|d| d.as_millis()).collect::<Vec<_>>(),
            vec![1000, 2000]
        );
        let longer = RetryPolicy {
            max_retries: 4,
            ..defaults
        };
        assert_eq!(
            longer.delays().map(|d| d.as_millis()).collect::<Vec<_>>(),
            vec![1000, 2000, 4000, 5000]
        );
        DispatchConfig::new(HttpTarget::new(url).retry(RetryPolicy::new(
            9,
            Duration::ZERO,
            Duration::ZERO,
        )))
        .unwrap();
    }

    #[tokio::test]
    async fn an_unchecked_bad_url_fails_without_retrying() {
        let err = jido::signal::dispatch::deliver(&HttpTarget::new("not a url"), &sig("x"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Dispatch);
        assert_eq!(err.message(), "http request could not be built");
        assert_eq!(reason(&err), "invalid_target");
        assert_eq!(err.detail("attempts"), Some(&json!(1)));
        assert!(!err.retryable());
    }

    #[tokio::test]
    async fn debug_output_hides_secrets() {
        let target = WebhookTarget::new("https://example.com/h?token=abc")
            .secret("s3cret")
            .header("authorization", "Bearer xyz");
        let text = format!("{target:?}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(!text.contains("xyz"), "{text}");
        assert!(!text.contains("token=abc"), "{text}");
        assert!(text.contains("authorization"), "{text}");
    }

    fn hmac_hex(secret: &str, message: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(message);
        hex::encode(mac.finalize().into_bytes())
    }

    #[tokio::test]
    async fn webhooks_are_signed_and_generated_headers_win() {
        let server = Server::start(&[]).await;
        let signal = sig("order.placed");
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        DispatchConfig::new(
            WebhookTarget::new(server.url("/hook"))
                .secret("s3cret")
                .event_type("order.placed", "order_created")
                .header("x-webhook-signature", "forged")
                .header("X-Webhook-Event", "forged")
                .header("x-tenant", "acme"),
        )
        .unwrap()
        .dispatch(&signal)
        .await
        .unwrap();
        let hits = server.hits();
        assert_eq!(hits.len(), 1);
        let hit = &hits[0];
        assert_eq!(hit.method, Method::POST);
        assert_eq!(hit.body, signal.to_cloudevents_json_string().as_bytes());
        let ts = header(hit, "x-webhook-timestamp");
        assert_eq!(ts.len(), 1);
        let ts_num: u64 = ts[0].parse().unwrap();
        assert!(ts_num >= before && ts_num <= before + 60);
        let mut message = format!("{}.", ts[0]).into_bytes();
        message.extend_from_slice(&hit.body);
        let expected = hmac_hex("s3cret", &message);
        assert_eq!(header(hit, "x-webhook-signature"), vec![expected.as_str()]);
        assert_eq!(
            expected,
            WebhookTarget::signature("s3cret", ts_num, &hit.body)
        );
        assert_eq!(expected, expected.to_lowercase());
        assert_eq!(header(hit, "x-webhook-event"), vec!["order_created"]);
        assert_eq!(header(hit, "x-tenant"), vec!["acme"]);
        assert_eq!(
            header(hit, "content-type"),
            vec!["application/cloudevents+json; charset=utf-8"]
        );
        // The receiver's side of the signature.
        WebhookVerifier::new("s3cret")
            .verify(&hit.headers, &hit.body)
            .unwrap();
        let err = WebhookVerifier::new("other")
            .verify(&hit.headers, &hit.body)
            .unwrap_err();
        assert_eq!(err.message(), "webhook signature mismatch");
    }

    #[tokio::test]
    async fn webhooks_without_a_secret_are_unsigned() {
        let server = Server::start(&[]).await;
        DispatchConfig::new(
            WebhookTarget::new(server.url("/hook"))
                .method(HttpMethod::Put)
                .event_type_header("x-event"),
        )
        .unwrap()
        .dispatch(&sig("user.created"))
        .await
        .unwrap();
        let hit = &server.hits()[0];
        assert_eq!(hit.method, Method::PUT);
        assert!(header(hit, "x-webhook-signature").is_empty());
        assert_eq!(header(hit, "x-event"), vec!["user.created"]);
        assert_eq!(header(hit, "x-webhook-timestamp").len(), 1);
    }

    #[tokio::test]
    async fn webhook_failures_are_retried_like_http() {
        let server = Server::start(&[(503, "x")]).await;
        DispatchConfig::new(
            WebhookTarget::new(server.url("/h"))
                .secret("k")
                .retry(fast_retry(2)),
        )
        .unwrap()
        .dispatch(&sig("w"))
        .await
        .unwrap();
        let hits = server.hits();
        assert_eq!(hits.len(), 2);
        assert_eq!(
            header(&hits[0], "x-webhook-signature"),
            header(&hits[1], "x-webhook-signature")
        );
    }
}
