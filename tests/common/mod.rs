//! Helpers shared by the runtime tests.
#![allow(dead_code)]

#[cfg(feature = "persist")]
pub mod storage;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use jido::agent::{RouteTarget, SignalRoute};
use jido::prelude::*;
use jido::server::{AgentMsg, AgentServer, AgentServerArgs};
use jido::signal::Signal;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use serde_json::{Value, json};
use tokio::sync::mpsc;

type DoFn = dyn Fn(Value, Context) -> BoxFuture<'static, jido::Result<Value>> + Send + Sync;

/// An action running a closure: params as JSON, output a JSON object.
#[derive(Clone)]
pub struct Do(pub Arc<DoFn>);

impl Action for Do {
    type Params = Value;
    type Output = Value;
    const NAME: &'static str = "do";
    async fn run(&self, params: Value, ctx: &Context) -> jido::Result<Value> {
        (self.0)(params, ctx.clone()).await
    }
}

/// An action from a closure.
pub fn act<F, Fut>(f: F) -> DynAction
where
    F: Fn(Value, Context) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = jido::Result<Value>> + Send + 'static,
{
    DynAction::new(Do(Arc::new(move |p, c| Box::pin(f(p, c)))))
}

/// An action returning `directives(params)` as effects and no output.
pub fn effects<F>(f: F) -> DynAction
where
    F: Fn(&Value) -> Vec<Directive> + Send + Sync + 'static,
{
    let f = Arc::new(f);
    act(move |p, ctx| {
        let f = Arc::clone(&f);
        async move {
            for d in f(&p) {
                ctx.push_effect(d);
            }
            Ok(json!({}))
        }
    })
}

/// `total += params.n`.
pub fn add() -> DynAction {
    act(|p, ctx| async move {
        let total = ctx
            .state()
            .and_then(|s| s.get("total")?.as_i64())
            .unwrap_or(0);
        Ok(json!({"total": total + p["n"].as_i64().unwrap_or(0)}))
    })
}

/// Appends `params.item` to the `log` list.
pub fn append() -> DynAction {
    act(|p, ctx| async move {
        let mut log = ctx
            .state()
            .and_then(|s| s.get("log").cloned())
            .unwrap_or_else(|| json!([]).into());
        if let Some(list) = log.as_array_mut() {
            list.push(p["item"].clone());
        }
        Ok(json!({"log": log}))
    })
}

/// An action that waits until the gate opens (one permit per run).
pub fn gated(gate: Arc<tokio::sync::Semaphore>) -> DynAction {
    act(move |p, ctx| {
        let gate = Arc::clone(&gate);
        async move {
            let permit = gate
                .acquire()
                .await
                .map_err(|_| Error::cancelled("gate closed"))?;
            permit.forget();
            let mut log = ctx
                .state()
                .and_then(|s| s.get("log").cloned())
                .unwrap_or_else(|| json!([]).into());
            if let Some(list) = log.as_array_mut() {
                list.push(p["item"].clone());
            }
            Ok(json!({"log": log}))
        }
    })
}

/// Fails with a non-retryable execution error `params.message`.
pub fn fail() -> DynAction {
    act(|p, _| async move {
        Err(Error::execution(p["message"].as_str().unwrap_or("boom").to_owned()).with_retry(false))
    })
}

/// Sends every signal it gets to a channel.
pub fn forward(tx: mpsc::UnboundedSender<Value>) -> DynAction {
    act(move |p, _| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(p);
            Ok(json!({}))
        }
    })
}

/// An agent whose routes are given at run time.
#[derive(Clone, Default)]
pub struct TestAgent {
    pub routes: Vec<SignalRoute>,
}

impl Agent for TestAgent {
    const NAME: &'static str = "test_agent";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        self.routes.clone()
    }
}

impl TestAgent {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn route(mut self, path: &str, action: DynAction) -> Self {
        self.routes.push(SignalRoute::action(path, action));
        self
    }

    pub fn route_target(mut self, path: &str, target: RouteTarget) -> Self {
        self.routes.push(SignalRoute::new(path, target));
        self
    }

    pub fn build(self, id: &str) -> AgentState {
        AgentState::new(self, AgentOptions::new().id(id))
    }
}

pub fn sig(ty: &str, data: Value) -> Signal {
    Signal::new(ty, data)
}

/// Awaits `fut` at most 5 s (tests never hang).
pub async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .expect("timed out")
}

/// Receives one item within 5 s.
pub async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    within(rx.recv()).await.expect("channel closed")
}

/// A supervision event as a probe saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Started(ActorId),
    Terminated(ActorId, Option<String>),
    Failed(ActorId, String),
}

/// A supervisor that records the events of its children.
pub struct Probe;

impl Actor for Probe {
    type Msg = ();
    type State = mpsc::UnboundedSender<Seen>;
    type Arguments = mpsc::UnboundedSender<Seen>;

    async fn pre_start(
        &self,
        _: ActorRef<()>,
        tx: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(tx)
    }

    async fn handle_supervisor_evt(
        &self,
        _: ActorRef<()>,
        evt: SupervisionEvent,
        tx: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let seen = match evt {
            SupervisionEvent::ActorStarted(c) => Seen::Started(c.get_id()),
            SupervisionEvent::ActorTerminated(c, _, r) => Seen::Terminated(c.get_id(), r),
            SupervisionEvent::ActorFailed(c, e) => Seen::Failed(c.get_id(), e.to_string()),
            _ => return Ok(()),
        };
        let _ = tx.send(seen);
        Ok(())
    }
}

pub async fn probe() -> (ActorRef<()>, mpsc::UnboundedReceiver<Seen>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (probe, _) = Actor::spawn(None, Probe, tx).await.unwrap();
    (probe, rx)
}

/// Spawns an agent under a probe; returns the agent and the probe's events.
pub async fn under_probe(
    args: AgentServerArgs,
) -> (
    jido::server::AgentRef,
    ActorRef<()>,
    mpsc::UnboundedReceiver<Seen>,
) {
    let (probe, mut rx) = probe().await;
    let (agent, _) = AgentServer::start_linked(args, probe.get_cell())
        .await
        .unwrap();
    assert_eq!(
        recv(&mut rx).await,
        Seen::Started(agent.actor_ref().get_id())
    );
    (agent, probe, rx)
}

/// Waits for the exit of `actor` among a probe's events.
pub async fn exit_of(rx: &mut mpsc::UnboundedReceiver<Seen>, actor: ActorId) -> Seen {
    loop {
        let seen = recv(rx).await;
        match &seen {
            Seen::Terminated(id, _) | Seen::Failed(id, _) if *id == actor => return seen,
            _ => {}
        }
    }
}

/// Records `tracing` events by name with their fields (for the current
/// thread; use a current-thread runtime).
pub type Recorded = Vec<(String, serde_json::Map<String, Value>)>;

#[derive(Clone, Default)]
pub struct Events(pub Arc<Mutex<Recorded>>);

impl Events {
    pub fn named(&self, name: &str) -> Vec<serde_json::Map<String, Value>> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, f)| f.clone())
            .collect()
    }
}

struct Visitor<'a>(&'a mut serde_json::Map<String, Value>);

impl tracing::field::Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), json!(value));
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().to_owned(), json!(value));
    }
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.0.insert(field.name().to_owned(), json!(value));
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.0.insert(field.name().to_owned(), json!(value));
    }
}

/// The process-wide layer: forwards events to the recorder of the current
/// thread, if any. A global subscriber keeps every callsite enabled, so
/// parallel tests cannot race on tracing's interest cache.
struct Forward;

thread_local! {
    static SINK: std::cell::RefCell<Option<Events>> = const { std::cell::RefCell::new(None) };
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Forward {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        SINK.with(|sink| {
            if let Some(events) = &*sink.borrow() {
                let mut fields = serde_json::Map::new();
                event.record(&mut Visitor(&mut fields));
                events
                    .0
                    .lock()
                    .unwrap()
                    .push((event.metadata().name().to_owned(), fields));
            }
        });
    }
}

/// Stops recording when dropped.
pub struct RecordGuard;

impl Drop for RecordGuard {
    fn drop(&mut self) {
        SINK.with(|sink| *sink.borrow_mut() = None);
    }
}

/// Records the `tracing` events of this thread (use a current-thread
/// runtime).
pub fn record_events() -> (Events, RecordGuard) {
    use tracing_subscriber::layer::SubscriberExt;
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        let subscriber = tracing_subscriber::registry().with(Forward);
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
    let events = Events::default();
    SINK.with(|sink| *sink.borrow_mut() = Some(events.clone()));
    (events, RecordGuard)
}

pub type Tx = mpsc::UnboundedSender<Value>;
pub type Rx = mpsc::UnboundedReceiver<Value>;

pub fn channel() -> (Tx, Rx) {
    mpsc::unbounded_channel()
}

pub fn agent_msg(s: Signal) -> AgentMsg {
    AgentMsg::from(s)
}

/// A strategy that reports every signal it handles, then runs Direct.
pub struct Echo(pub mpsc::UnboundedSender<Signal>);

impl jido::strategy::Strategy for Echo {
    fn name(&self) -> &'static str {
        "echo"
    }
    async fn cmd(
        &self,
        agent: &mut AgentData,
        commands: Vec<Command>,
        ctx: &jido::strategy::StrategyContext,
    ) -> Vec<Directive> {
        if let Some(s) = ctx.signal() {
            let _ = self.0.send(s.clone());
        }
        jido::strategy::Strategy::cmd(&jido::strategy::Direct, agent, commands, ctx).await
    }
}

/// An agent with run-time routes whose strategy reports every signal.
#[derive(Clone)]
pub struct EchoAgent {
    pub routes: Vec<SignalRoute>,
    pub tx: mpsc::UnboundedSender<Signal>,
}

impl Agent for EchoAgent {
    const NAME: &'static str = "echo_agent";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(Echo(self.tx.clone()))
    }
    fn signal_routes(&self) -> Vec<SignalRoute> {
        self.routes.clone()
    }
}

/// An echo agent with `routes` and the receiver of its signals.
pub fn echo_agent(
    id: &str,
    routes: Vec<(&str, DynAction)>,
) -> (AgentState, mpsc::UnboundedReceiver<Signal>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let def = EchoAgent {
        routes: routes
            .into_iter()
            .map(|(p, a)| SignalRoute::action(p, a))
            .collect(),
        tx,
    };
    (AgentState::new(def, AgentOptions::new().id(id)), rx)
}

/// An action with no effect.
pub fn noop() -> DynAction {
    act(|_, _| async { Ok(json!({})) })
}

/// A directive whose executor panics with "crash!": it crashes the agent.
#[derive(Debug)]
pub struct Crash;
impl jido::directive::CustomDirective for Crash {}

/// The executor of [`Crash`].
pub struct CrashExec;
impl jido::server::DirectiveExec for CrashExec {
    type Directive = Crash;
    fn exec(
        &self,
        _: &Crash,
        _: &Signal,
        _: &jido::server::DirectiveContext<'_>,
    ) -> jido::server::DirectiveResult {
        panic!("crash!")
    }
}

/// The exit reason of an agent crashed by [`Crash`].
pub fn crash_reason() -> String {
    format!(
        "failed: directive {} panicked: crash!",
        std::any::type_name::<Crash>()
    )
}

/// A strategy whose init crashes the agent at once (through [`Crash`]).
pub struct CrashOnStart;
impl jido::strategy::Strategy for CrashOnStart {
    fn init(&self, _: &mut AgentData, _: &jido::strategy::StrategyContext) -> Vec<Directive> {
        vec![Directive::custom(Crash)]
    }
    async fn cmd(
        &self,
        _: &mut AgentData,
        _: Vec<Command>,
        _: &jido::strategy::StrategyContext,
    ) -> Vec<Directive> {
        Vec::new()
    }
}

/// An agent that crashes as soon as it starts.
pub struct Doomed;
impl Agent for Doomed {
    const NAME: &'static str = "doomed";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(CrashOnStart)
    }
    fn signal_routes(&self) -> Vec<SignalRoute> {
        Vec::new()
    }
}
