//! Where the AI directives run: [`AiRuntime`] holds the LLM client, the
//! tools, the model-alias hook and the effect policy, and registers the
//! executors of every AI directive.
//!
//! # Where the client and the tools live
//!
//! In the executors. [`AiRuntime::register`] adds them to an agent's
//! [`ServerOptions`]; [`AiRuntime::register_instance`] to a
//! [`JidoConfig`], so that every agent of the instance has them. Children
//! started with `SpawnAgent` inherit their parent's executors, so one
//! registration covers a whole agent tree; an agent registering its own
//! runtime overrides the instance's (its options win per directive type).
//!
//! # How a directive runs
//!
//! `LlmStream`, `LlmGenerate`, `LlmEmbed` and `ToolExec` never make the
//! agent wait. The executor polls the call's work once, in place: work
//! ready at once (a client answering from memory, a tool run inline)
//! completes there and sends its signals, with no task and no
//! registration. Work that waits is registered (for
//! [`CancelRequest`]) and moves into a task of the instance's task
//! supervisor, which finishes it: the agent's mailbox is never blocked by
//! a slow client (a client or tool doing long synchronous work before its
//! first `.await` holds the handler that long, as it would hold a tokio
//! worker). The signals go to the agent in order, and every call ends with
//! exactly one terminal signal, also when the provider fails, the stream
//! stalls, the client or the tool panics (on the first poll or a later
//! one), the call is cancelled, or the task cannot start (the supervisor
//! is shut down: the work is not polled and the terminal signal is sent
//! from the handler). `EmitToolError`, `EmitRequestError` and
//! `CancelRequest` act in the handler. The cases without a terminal
//! signal are those without a receiver: the agent stopping (its running
//! calls are dropped at once, their HTTP requests and tool tasks end, see
//! [`AiRuntime::running`]) and the instance shutting down (which cancels
//! the tasks and stops the agents that would receive them).
//!
//! Timeouts (tokio time):
//!
//! * `LlmGenerate` and `LlmEmbed`: the whole call, `timeout` or
//!   [`llm_timeout`](AiRuntime::llm_timeout) (30 s); then a `timeout` error
//!   "llm request timed out" / "embedding request timed out" (details
//!   `timeout_ms`).
//! * `LlmStream`: the longest wait for the stream to open and then for each
//!   next event (content, reasoning or a tool-call fragment all count),
//!   `timeout` or the same default; then "llm request timed out" (not
//!   opened) or "llm stream stalled" (opened; details `timeout_ms`).
//! * `ToolExec`: per attempt, `timeout_ms` or
//!   [`tool_timeout`](AiRuntime::tool_timeout) (30 s), through Exec
//!   (`timeout_ms: 0` runs without a limit).

use std::collections::HashMap;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Poll;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use ractor::ActorId;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::Instrument;

use super::client::{EmbedRequest, LlmClient, LlmEvent, LlmRequest, LlmResponse, Message};
use super::directive::{
    CancelRequest, EmitRequestError, EmitToolError, LlmCall, LlmEmbed, LlmGenerate, LlmStream,
    ModelRef, ToolExec, unknown_tool_error,
};
use super::effects::EffectPolicy;
use super::envelope::{ResultEnvelope, llm_error};
use super::signals::{
    self, ChunkType, Correlation, EmbedResultData, LlmDeltaData, LlmResponseData, LlmResultData,
    RequestErrorData, SignalMetadata, ToolResultData, ToolStartedData, UsageData, sanitize_delta,
};
use super::telemetry::{LlmTelemetry, ORIGIN_DIRECTIVE, ToolTelemetry};
use super::tool::{Tool, ToolSet};
use crate::context::Context;
use crate::error::{Error, Result, sanitize};
use crate::exec::{ExecOptions, panic_message};
use crate::instruction::Instruction;
use crate::server::{
    AgentRef, DirectiveContext, DirectiveExec, DirectiveResult, JidoConfig, ServerOptions,
};
use crate::signal::Signal;

/// Default wait of the LLM and embedding directives (30 s, Jido's).
pub const DEFAULT_LLM_TIMEOUT: Duration = Duration::from_secs(30);
/// Default per-attempt timeout of a tool call (30 s, Jido's).
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(30);

type ModelResolver = dyn Fn(&str) -> Result<String> + Send + Sync;

/// The LLM client, tools, model-alias hook and effect policy of the AI
/// directives, and the registry of their running calls (for
/// cancellation). Cheap to clone: clones share everything.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use futures::future::BoxFuture;
/// use jido::agent::SignalRoute;
/// use jido::ai::*;
/// use jido::prelude::*;
/// use jido::server::{Jido, JidoConfig};
/// use serde_json::{Value, json};
///
/// /// A model that always says "hi".
/// struct Hi;
/// impl LlmClient for Hi {
///     fn generate(&self, req: LlmRequest) -> BoxFuture<'static, Result<LlmResponse, LlmError>> {
///         Box::pin(async move {
///             Ok(LlmResponse { model: req.model, text: "hi".into(), thinking: None, tool_calls: vec![],
///                              finish_reason: FinishReason::Stop, usage: None })
///         })
///     }
///     fn stream(&self, _: LlmRequest) -> BoxFuture<'static, Result<LlmEventStream, LlmError>> {
///         Box::pin(async { Err(LlmError::new(LlmErrorKind::Other, "no streams here")) })
///     }
///     fn embed(&self, _: EmbedRequest) -> BoxFuture<'static, Result<EmbedResponse, LlmError>> {
///         Box::pin(async { Err(LlmError::new(LlmErrorKind::Other, "no embeddings here")) })
///     }
/// }
///
/// // `ask` starts an LLM call; its `ai.llm.response` comes back to the agent.
/// let ask = jido::action_fn("ask", |_: Value, ctx: Context| async move {
///     ctx.push_effect(LlmGenerate::new("call_1", ModelRef::alias("fast"), vec![Message::user("hello")]));
///     Ok(json!({"status": "running"}))
/// });
/// let answered = jido::action_fn("answered", |p: Value, _: Context| async move {
///     Ok(json!({"last_answer": p["result"]["result"]["text"], "status": "completed"}))
/// });
/// struct Chat(Vec<SignalRoute>);
/// impl Agent for Chat {
///     const NAME: &'static str = "chat";
///     type Schema = ();
///     fn signal_routes(&self) -> Vec<SignalRoute> { self.0.clone() }
/// }
///
/// let ai = AiRuntime::new().client(Hi).model_aliases([("fast", "local:tiny")]);
/// // Every agent of the instance (and their children) can run AI directives.
/// let jido = Jido::start(ai.register_instance(JidoConfig::new())).await?;
/// let agent = jido.start_agent(
///     AgentState::new(
///         Chat(vec![SignalRoute::action("ask", ask), SignalRoute::action("ai.llm.response", answered)]),
///         AgentOptions::new().id("chat-1"),
///     ),
///     ServerOptions::new(),
/// ).await?;
/// agent.cast(jido::Signal::new("ask", json!({})))?;
/// let done = agent.await_completion(Default::default()).await?;
/// assert_eq!(done.result, json!("hi"));
/// # jido.shutdown().await; Ok(()) }
/// ```
#[derive(Clone)]
pub struct AiRuntime {
    config: Arc<Config>,
    registry: Arc<Registry>,
}

#[derive(Clone)]
struct Config {
    client: Option<Arc<dyn LlmClient>>,
    tools: ToolSet,
    resolver: Option<Arc<ModelResolver>>,
    effect_policy: EffectPolicy,
    llm_timeout: Duration,
    tool_timeout: Duration,
}

impl Default for AiRuntime {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for AiRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AiRuntime")
            .field("client", &self.config.client.is_some())
            .field("tools", &self.config.tools.names().collect::<Vec<_>>())
            .field("model_resolver", &self.config.resolver.is_some())
            .field("effect_policy", &self.config.effect_policy)
            .field("llm_timeout", &self.config.llm_timeout)
            .field("tool_timeout", &self.config.tool_timeout)
            .finish_non_exhaustive()
    }
}

impl AiRuntime {
    /// No client, no tools, no aliases, the default effect policy and
    /// timeouts. An LLM directive without a client ends in a
    /// `configuration_error` "no llm client configured".
    pub fn new() -> Self {
        AiRuntime {
            config: Arc::new(Config {
                client: None,
                tools: ToolSet::new(),
                resolver: None,
                effect_policy: EffectPolicy::default(),
                llm_timeout: DEFAULT_LLM_TIMEOUT,
                tool_timeout: DEFAULT_TOOL_TIMEOUT,
            }),
            registry: Arc::default(),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(Arc::make_mut(&mut self.config));
        self
    }

    /// Sets the LLM client.
    #[must_use]
    pub fn client(self, client: impl LlmClient) -> Self {
        self.client_arc(Arc::new(client))
    }

    /// Sets the LLM client, shared.
    #[must_use]
    pub fn client_arc(self, client: Arc<dyn LlmClient>) -> Self {
        self.edit(|c| c.client = Some(client))
    }

    /// Sets the tools `ToolExec` looks names up in.
    #[must_use]
    pub fn tools(self, tools: ToolSet) -> Self {
        self.edit(|c| c.tools = tools)
    }

    /// Sets the hook resolving a model alias to a model spec (the only
    /// alias mechanism here: the alias table lives with the clients). An
    /// `Err` ends the call with that error.
    #[must_use]
    pub fn model_resolver(
        self,
        resolve: impl Fn(&str) -> Result<String> + Send + Sync + 'static,
    ) -> Self {
        self.edit(|c| c.resolver = Some(Arc::new(resolve)))
    }

    /// A [`model_resolver`](AiRuntime::model_resolver) from a fixed table;
    /// an unknown alias is a configuration error "unknown model alias:
    /// NAME" (details `alias`, `available`: the sorted aliases).
    #[must_use]
    pub fn model_aliases<I, K, V>(self, aliases: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let table: HashMap<String, String> = aliases
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        self.model_resolver(move |alias| {
            table.get(alias).cloned().ok_or_else(|| {
                let mut available: Vec<&String> = table.keys().collect();
                available.sort();
                Error::configuration(format!("unknown model alias: {alias}"))
                    .with_detail("alias", alias.to_owned())
                    .with_detail("available", json!(available))
            })
        })
    }

    /// Sets the policy filtering tool effects.
    #[must_use]
    pub fn effect_policy(self, policy: EffectPolicy) -> Self {
        self.edit(|c| c.effect_policy = policy)
    }

    /// Sets the default wait of the LLM and embedding directives.
    #[must_use]
    pub fn llm_timeout(self, timeout: Duration) -> Self {
        self.edit(|c| c.llm_timeout = timeout)
    }

    /// Sets the default per-attempt timeout of tool calls.
    #[must_use]
    pub fn tool_timeout(self, timeout: Duration) -> Self {
        self.edit(|c| c.tool_timeout = timeout)
    }

    /// The tools.
    pub fn tool_set(&self) -> &ToolSet {
        &self.config.tools
    }

    /// Resolves `model` to a model spec.
    ///
    /// # Errors
    ///
    /// The resolver's error; a configuration error "unknown model alias:
    /// NAME" for an alias without a resolver.
    pub fn resolve_model(&self, model: &ModelRef) -> Result<String> {
        match model {
            ModelRef::Spec(spec) => Ok(spec.clone()),
            ModelRef::Alias(alias) => match &self.config.resolver {
                Some(resolve) => resolve(alias),
                None => Err(
                    Error::configuration(format!("unknown model alias: {alias}"))
                        .with_detail("alias", alias.clone())
                        .with_detail("available", json!([])),
                ),
            },
        }
    }

    /// `opts` with the executors of every AI directive (see [where the
    /// client and the tools live](self#where-the-client-and-the-tools-live)).
    pub fn register(&self, opts: ServerOptions) -> ServerOptions {
        opts.directive_exec(AiExec::<LlmStream>::new(self))
            .directive_exec(AiExec::<LlmGenerate>::new(self))
            .directive_exec(AiExec::<LlmEmbed>::new(self))
            .directive_exec(AiExec::<ToolExec>::new(self))
            .directive_exec(AiExec::<EmitToolError>::new(self))
            .directive_exec(AiExec::<EmitRequestError>::new(self))
            .directive_exec(AiExec::<CancelRequest>::new(self))
    }

    /// `config` with the executors of every AI directive, for every agent
    /// of the instance.
    pub fn register_instance(&self, config: JidoConfig) -> JidoConfig {
        config
            .directive_exec(AiExec::<LlmStream>::new(self))
            .directive_exec(AiExec::<LlmGenerate>::new(self))
            .directive_exec(AiExec::<LlmEmbed>::new(self))
            .directive_exec(AiExec::<ToolExec>::new(self))
            .directive_exec(AiExec::<EmitToolError>::new(self))
            .directive_exec(AiExec::<EmitRequestError>::new(self))
            .directive_exec(AiExec::<CancelRequest>::new(self))
    }

    /// Cancels the running calls of `agent` whose request id or call id is
    /// `request_id` (what [`CancelRequest`] does). Returns how many were
    /// cancelled; each ends with its terminal signal carrying a `cancelled`
    /// error "request cancelled" (details `reason`).
    pub fn cancel(&self, agent: &AgentRef, request_id: &str, reason: &str) -> usize {
        self.registry
            .cancel(&agent.actor_ref().get_id(), request_id, reason)
    }

    /// How many calls of `agent` are running.
    pub fn running(&self, agent: &AgentRef) -> usize {
        self.registry.running(&agent.actor_ref().get_id())
    }
}

// ---------------------------------------------------------------------------
// Running calls, by agent, for cancellation.

/// The running calls by agent, hashed with foldhash (seeded per process):
/// every call that waits is registered and removed.
type CallMap = HashMap<ActorId, Vec<Running>, foldhash::fast::RandomState>;

#[derive(Default)]
struct Registry {
    next: AtomicU64,
    calls: Mutex<CallMap>,
}

struct Running {
    serial: u64,
    /// The call's ids and cancellation (shared with its task: no id is
    /// copied into the registry).
    call: Arc<dyn Registered>,
}

/// What the registry reads of a running call.
trait Registered: Send + Sync {
    fn call_id(&self) -> &str;
    fn request_id(&self) -> Option<&str>;
    /// Cancels the call with `reason`; `false` when it was already
    /// cancelled.
    fn cancel(&self, reason: &str) -> bool;
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, CallMap> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn register(self: &Arc<Self>, agent: ActorId, call: Arc<dyn Registered>) -> Registration {
        let serial = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock()
            .entry(agent)
            .or_default()
            .push(Running { serial, call });
        Registration {
            registry: Arc::clone(self),
            agent,
            serial,
        }
    }

    fn cancel(&self, agent: &ActorId, id: &str, reason: &str) -> usize {
        let calls = self.lock();
        let Some(list) = calls.get(agent) else {
            return 0;
        };
        let mut n = 0;
        for call in list
            .iter()
            .filter(|c| c.call.call_id() == id || c.call.request_id() == Some(id))
        {
            if call.call.cancel(reason) {
                n += 1;
            }
        }
        n
    }

    fn running(&self, agent: &ActorId) -> usize {
        self.lock().get(agent).map_or(0, Vec::len)
    }
}

/// Removes its call from the registry when the task ends (or is dropped).
struct Registration {
    registry: Arc<Registry>,
    agent: ActorId,
    serial: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut calls = self.registry.lock();
        if let Some(list) = calls.get_mut(&self.agent) {
            list.retain(|c| c.serial != self.serial);
            if list.is_empty() {
                calls.remove(&self.agent);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Executors.

struct AiExec<D> {
    rt: AiRuntime,
    _d: PhantomData<fn() -> D>,
}

impl<D> AiExec<D> {
    fn new(rt: &AiRuntime) -> Self {
        AiExec {
            rt: rt.clone(),
            _d: PhantomData,
        }
    }
}

impl DirectiveExec for AiExec<LlmStream> {
    type Directive = LlmStream;
    fn exec(&self, d: &LlmStream, _: &Signal, ctx: &DirectiveContext<'_>) -> DirectiveResult {
        self.rt.start_llm(d.to_call(), true, ctx)
    }
}

impl DirectiveExec for AiExec<LlmGenerate> {
    type Directive = LlmGenerate;
    fn exec(&self, d: &LlmGenerate, _: &Signal, ctx: &DirectiveContext<'_>) -> DirectiveResult {
        self.rt.start_llm(d.to_call(), false, ctx)
    }
}

impl DirectiveExec for AiExec<LlmEmbed> {
    type Directive = LlmEmbed;
    fn exec(&self, d: &LlmEmbed, _: &Signal, ctx: &DirectiveContext<'_>) -> DirectiveResult {
        self.rt.start_embed(d, ctx)
    }
}

impl DirectiveExec for AiExec<ToolExec> {
    type Directive = ToolExec;
    fn exec(&self, d: &ToolExec, _: &Signal, ctx: &DirectiveContext<'_>) -> DirectiveResult {
        self.rt.start_tool(d, ctx)
    }
}

impl DirectiveExec for AiExec<EmitToolError> {
    type Directive = EmitToolError;
    fn exec(&self, d: &EmitToolError, _: &Signal, ctx: &DirectiveContext<'_>) -> DirectiveResult {
        let signal = build(ToolResultData {
            call_id: d.id.clone(),
            tool_name: d.tool_name.clone(),
            result: ResultEnvelope::Error {
                reason: d.error.clone(),
                effects: Vec::new(),
            },
            metadata: d.correlation().metadata(OP_TOOL),
        });
        send(&ctx.myself(), signal);
        DirectiveResult::Ok
    }
}

impl DirectiveExec for AiExec<EmitRequestError> {
    type Directive = EmitRequestError;
    fn exec(
        &self,
        d: &EmitRequestError,
        _: &Signal,
        ctx: &DirectiveContext<'_>,
    ) -> DirectiveResult {
        let signal = build(RequestErrorData {
            request_id: d.request_id.clone(),
            reason: d.reason.clone(),
            message: d.message.clone(),
        });
        send(&ctx.myself(), signal);
        DirectiveResult::Ok
    }
}

impl DirectiveExec for AiExec<CancelRequest> {
    type Directive = CancelRequest;
    fn exec(&self, d: &CancelRequest, _: &Signal, ctx: &DirectiveContext<'_>) -> DirectiveResult {
        let n = self.rt.cancel(&ctx.myself(), &d.request_id, &d.reason);
        tracing::debug!(
            target: "jido::ai",
            agent_id = ctx.agent_id(),
            request_id = %d.request_id,
            cancelled = n,
            "ai calls cancelled"
        );
        DirectiveResult::Ok
    }
}

const OP_STREAM: &str = "stream_text";
const OP_GENERATE: &str = "generate_text";
const OP_EMBED: &str = "embed";
const OP_TOOL: &str = "tool_execute";

/// A typed signal (see `signals::signal_of`).
fn build<T: signals::Payload>(data: T) -> Signal {
    signals::signal_of(data)
}

/// Casts to the agent; a gone agent has nobody to tell.
fn send(agent: &AgentRef, signal: Signal) {
    if agent.cast(signal).is_err() {
        tracing::debug!(target: "jido::ai", agent_id = agent.id(), "ai signal dropped: agent gone");
    }
}

/// The error of a call whose client or tool panicked.
fn panicked(what: &str, panic: &(dyn std::any::Any + Send)) -> Error {
    Error::execution(format!("{what} panicked: {}", panic_message(panic))).with_retry(false)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What a call's work, its terminal and its registration share: the
/// signals' metadata (the correlation and the operation, shared by every
/// signal of the call: its JSON is built only if someone reads it), the
/// start, the telemetry (which holds the call id), the maker of the
/// call's error terminal (a plain function: nothing is allocated for a
/// terminal that is never sent) and the reason of a cancellation.
struct CallInfo<T> {
    metadata: SignalMetadata,
    started: Instant,
    telemetry: T,
    terminal: fn(&CallInfo<T>, Error) -> Signal,
    /// Why the call was cancelled, set once by [`Registry::cancel`],
    /// which then notifies `cancelled`.
    reason: OnceLock<String>,
    cancelled: Notify,
}

/// The telemetry of a call, which knows the call's id.
trait CallTelemetry: Send + Sync + 'static {
    fn call_id(&self) -> &str;
}

impl CallTelemetry for LlmTelemetry {
    fn call_id(&self) -> &str {
        LlmTelemetry::call_id(self)
    }
}

impl CallTelemetry for ToolTelemetry {
    fn call_id(&self) -> &str {
        ToolTelemetry::call_id(self)
    }
}

impl<T: CallTelemetry> CallInfo<T> {
    /// A call's info, its telemetry started by `telemetry` from the
    /// call's metadata.
    fn new(
        correlation: Correlation,
        operation: &'static str,
        telemetry: impl FnOnce(&SignalMetadata) -> T,
        terminal: fn(&CallInfo<T>, Error) -> Signal,
    ) -> Arc<Self> {
        let metadata = SignalMetadata::new(correlation, operation);
        Arc::new(CallInfo {
            telemetry: telemetry(&metadata),
            metadata,
            started: Instant::now(),
            terminal,
            reason: OnceLock::new(),
            cancelled: Notify::new(),
        })
    }

    fn id(&self) -> &str {
        self.telemetry.call_id()
    }

    /// The call's error terminal (reporting the error to the telemetry).
    fn fail(&self, error: Error) -> Signal {
        (self.terminal)(self, error)
    }
}

impl<T: CallTelemetry> Registered for CallInfo<T> {
    fn call_id(&self) -> &str {
        self.id()
    }

    fn request_id(&self) -> Option<&str> {
        self.metadata.request_id()
    }

    fn cancel(&self, reason: &str) -> bool {
        if self.reason.set(reason.to_owned()).is_err() {
            return false;
        }
        // A permit when the task is not waiting yet: it sees it when it
        // does.
        self.cancelled.notify_one();
        true
    }
}

/// The error terminal of an LLM call: `ai.llm.response` with the error's
/// envelope, the model as resolved so far and the time since the start.
fn llm_terminal(info: &CallInfo<LlmTelemetry>, error: Error) -> Signal {
    info.telemetry.exception(&error);
    build(LlmResponseData {
        call_id: info.id().to_owned(),
        result: ResultEnvelope::error(&error),
        model: info.telemetry.model_name(),
        duration_ms: ms(info.started.elapsed()),
        metadata: info.metadata.clone(),
    })
}

/// The error terminal of an embedding call: `ai.embed.result`, as
/// [`llm_terminal`].
fn embed_terminal(info: &CallInfo<LlmTelemetry>, error: Error) -> Signal {
    info.telemetry.exception(&error);
    build(EmbedResultData {
        call_id: info.id().to_owned(),
        result: ResultEnvelope::error(&error),
        model: info.telemetry.model_name(),
        duration_ms: ms(info.started.elapsed()),
        metadata: info.metadata.clone(),
    })
}

/// The error terminal of a tool call: `ai.tool.result` with the error's
/// envelope.
fn tool_terminal(info: &CallInfo<ToolTelemetry>, error: Error) -> Signal {
    info.telemetry.exception(&error);
    build(ToolResultData {
        call_id: info.id().to_owned(),
        tool_name: info.telemetry.tool_name().to_owned(),
        result: ResultEnvelope::error(&error),
        metadata: info.metadata.clone(),
    })
}

impl AiRuntime {
    /// Runs `work` (which sends its non-terminal signals itself and
    /// returns the terminal one), catching panics, and sends its signal.
    ///
    /// The work is polled once here, in the directive's handler: when it
    /// is ready at once (a client answering from memory, a tool run
    /// inline) its signal goes out now and neither a task nor a
    /// registration is made. Otherwise the call is registered (for
    /// cancellation) and the polled work moves, boxed, into a task of the
    /// agent's task supervisor, which drives it to its end; when that task
    /// cannot start (the supervisor is shut down), `info.fail(error)` is
    /// sent at once, and the work is not polled at all.
    fn launch<T, F>(
        &self,
        ctx: &DirectiveContext<'_>,
        info: Arc<CallInfo<T>>,
        what: &'static str,
        work: F,
    ) -> DirectiveResult
    where
        T: CallTelemetry,
        F: Future<Output = Signal> + Send + 'static,
    {
        let agent = ctx.myself();
        let supervisor = ctx.exec().supervisor();
        let mut work = Box::pin(AssertUnwindSafe(work).catch_unwind());
        if !supervisor.is_shut_down() {
            // A waker that does nothing: if the work is not ready, the task
            // polls it again at once with its own waker, which is the one
            // the work keeps (a future keeps the waker of its latest poll).
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            if let Poll::Ready(done) = work.as_mut().poll(&mut cx) {
                let signal = match done {
                    Ok(signal) => signal,
                    Err(panic) => info.fail(panicked(what, &*panic)),
                };
                send(&agent, signal);
                return DirectiveResult::Ok;
            }
        }
        let registration = self
            .registry
            .register(agent.actor_ref().get_id(), Arc::clone(&info) as _);
        let task_agent = agent.clone();
        let task_info = Arc::clone(&info);
        // The call belongs to the agent: when the agent stops, the call is
        // dropped (its HTTP request or tool task ends) and its registry
        // entry goes, instead of running on until its timeout.
        let agent_cell = agent.actor_ref().get_cell();
        let task = async move {
            let _registration = registration;
            let agent_stopped = agent_cell.wait(None);
            let outcome = tokio::select! {
                biased;
                _ = agent_stopped => {
                    tracing::debug!(
                        target: "jido::ai",
                        agent_id = task_agent.id(),
                        "{what} dropped: agent stopped"
                    );
                    return;
                }
                done = &mut work => done.map_err(|panic| panicked(what, &*panic)),
                () = task_info.cancelled.notified() => {
                    let reason = task_info.reason.get().cloned().unwrap_or_default();
                    Err(Error::cancelled("request cancelled").with_detail("reason", reason))
                }
            };
            let signal = match outcome {
                Ok(signal) => signal,
                Err(error) => task_info.fail(error),
            };
            send(&task_agent, signal);
        };
        match supervisor.spawn(task) {
            Ok(_) => DirectiveResult::Async(None),
            Err(err) => {
                let err = err.with_detail("call_id", info.id().to_owned());
                send(&agent, info.fail(err));
                DirectiveResult::Ok
            }
        }
    }

    fn start_llm(
        &self,
        mut call: LlmCall,
        stream: bool,
        ctx: &DirectiveContext<'_>,
    ) -> DirectiveResult {
        let operation = if stream { OP_STREAM } else { OP_GENERATE };
        let correlation = std::mem::take(&mut call.correlation);
        let telemetry = |metadata: &SignalMetadata| {
            LlmTelemetry::start_shared(
                &call.id,
                call.model.as_str(),
                ORIGIN_DIRECTIVE,
                operation,
                metadata,
            )
        };
        let info = CallInfo::new(correlation, operation, telemetry, llm_terminal);
        let span = info.telemetry.span().clone();
        let agent = ctx.myself();
        let rt = self.clone();
        let shared = Arc::clone(&info);
        let work = async move {
            let info = shared;
            // A spec moves out of the call (the call's copy of it is not
            // read again); an alias is resolved.
            let model = match &mut call.model {
                ModelRef::Spec(spec) => Ok(std::mem::take(spec)),
                alias @ ModelRef::Alias(_) => rt.resolve_model(alias),
            };
            let model = match model {
                Ok(model) => model,
                Err(err) => return info.fail(err),
            };
            info.telemetry.set_model(&model);
            let Some(client) = rt.config.client.clone() else {
                return info.fail(Error::configuration("no llm client configured"));
            };
            let timeout = call.timeout.unwrap_or(rt.config.llm_timeout);
            let (call_id, req) = llm_request(call, model.clone(), timeout, stream);
            let answer = if stream {
                stream_answer(client, req, timeout, &agent, &info).await
            } else {
                match tokio::time::timeout(timeout, client.generate(req)).await {
                    Ok(Ok(resp)) => Ok(resp),
                    Ok(Err(e)) => Err(llm_error(&e)),
                    Err(_) => Err(Error::timeout("llm request timed out")
                        .with_detail("timeout_ms", ms(timeout))),
                }
            };
            let resp = match answer {
                Ok(resp) => resp,
                Err(err) => return info.fail(err),
            };
            info.telemetry
                .stop(resp.usage.as_ref(), Some(&resp.finish_reason));
            if let Some(usage) = resp
                .usage
                .filter(|u| u.input_tokens > 0 || u.output_tokens > 0)
            {
                send(
                    &agent,
                    build(UsageData {
                        call_id: call_id.clone(),
                        model: if resp.model.is_empty() {
                            model.clone()
                        } else {
                            resp.model.clone()
                        },
                        input_tokens: usage.input_tokens,
                        output_tokens: usage.output_tokens,
                        total_tokens: usage.total_tokens,
                        duration_ms: ms(info.started.elapsed()),
                        metadata: info.metadata.clone(),
                    }),
                );
            }
            // Typed: the strategy reads the answer without JSON.
            LlmResultData {
                call_id,
                result: Ok(resp),
                model,
                duration_ms: ms(info.started.elapsed()),
                metadata: info.metadata.clone(),
            }
            .into_signal()
        };
        self.launch(ctx, info, "llm call", work.instrument(span))
    }

    fn start_embed(&self, d: &LlmEmbed, ctx: &DirectiveContext<'_>) -> DirectiveResult {
        let correlation = d.correlation();
        let telemetry = |metadata: &SignalMetadata| {
            LlmTelemetry::start_shared(
                &d.id,
                d.model.as_str(),
                ORIGIN_DIRECTIVE,
                OP_EMBED,
                metadata,
            )
        };
        let info = CallInfo::new(correlation, OP_EMBED, telemetry, embed_terminal);
        let span = info.telemetry.span().clone();
        let rt = self.clone();
        let shared = Arc::clone(&info);
        let (model, texts, dimensions, timeout) =
            (d.model.clone(), d.texts.clone(), d.dimensions, d.timeout);
        let work = async move {
            let info = shared;
            let model = match rt.resolve_model(&model) {
                Ok(model) => model,
                Err(err) => return info.fail(err),
            };
            info.telemetry.set_model(&model);
            let Some(client) = rt.config.client.clone() else {
                return info.fail(Error::configuration("no llm client configured"));
            };
            let timeout = timeout.unwrap_or(rt.config.llm_timeout);
            let req = EmbedRequest {
                model: model.clone(),
                texts,
                dimensions,
                timeout: Some(timeout),
            };
            let resp = match tokio::time::timeout(timeout, client.embed(req)).await {
                Ok(Ok(resp)) => resp,
                Ok(Err(e)) => return info.fail(llm_error(&e)),
                Err(_) => {
                    return info.fail(
                        Error::timeout("embedding request timed out")
                            .with_detail("timeout_ms", ms(timeout)),
                    );
                }
            };
            info.telemetry.stop(resp.usage.as_ref(), None);
            build(EmbedResultData {
                call_id: info.id().to_owned(),
                result: ResultEnvelope::ok(json!({
                    "embeddings": resp.embeddings,
                    "count": resp.embeddings.len(),
                    "usage": resp.usage,
                })),
                model,
                duration_ms: ms(info.started.elapsed()),
                metadata: info.metadata.clone(),
            })
        };
        self.launch(ctx, info, "embedding call", work.instrument(span))
    }

    fn start_tool(&self, d: &ToolExec, ctx: &DirectiveContext<'_>) -> DirectiveResult {
        let correlation = d.correlation();
        let telemetry = |metadata: &SignalMetadata| {
            ToolTelemetry::start_shared(&d.id, &d.tool_name, ORIGIN_DIRECTIVE, OP_TOOL, metadata)
        };
        let info = CallInfo::new(correlation, OP_TOOL, telemetry, tool_terminal);
        let span = info.telemetry.span().clone();
        let agent = ctx.myself();
        let rt = self.clone();
        let shared = Arc::clone(&info);
        // What the run needs of the directive (not the whole directive:
        // its metadata and context maps would be copied for nothing).
        let tool_name = d.tool_name.clone();
        let arguments = Arc::clone(&d.arguments);
        let (tool, action) = (d.tool.clone(), d.action.clone());
        // The runtime owns `state`: the action reads the agent's state
        // through `Context::state`.
        let values = (!d.context.is_empty()).then(|| {
            d.context
                .iter()
                .filter(|(k, _)| k.as_str() != "state")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<serde_json::Map<String, Value>>()
        });
        let (timeout_ms, max_retries, retry_backoff_ms) =
            (d.timeout_ms, d.max_retries, d.retry_backoff_ms);
        let exec = ctx.exec().clone();
        let state = ctx.agent().state().clone();
        let agent_id = ctx.agent_id().to_owned();
        let work = async move {
            let info = shared;
            send(
                &agent,
                build(ToolStartedData {
                    call_id: info.id().to_owned(),
                    tool_name: tool_name.clone(),
                    arguments: sanitize(&arguments),
                    metadata: info.metadata.clone(),
                }),
            );
            let tool = match (tool, action) {
                (Some(tool), _) => tool,
                (None, Some(action)) => Tool::from_action(action),
                (None, None) => match rt.config.tools.get(&tool_name) {
                    Some(tool) => tool.clone(),
                    None => return info.fail(unknown_tool_error(&tool_name)),
                },
            };
            let arguments = match tool.normalize_arguments(Value::clone(&arguments)) {
                Ok(args) => args,
                Err(err) => return info.fail(err.with_detail("tool_name", tool_name)),
            };
            let ctx = Context::from(values.unwrap_or_default())
                .with_state(state)
                .with_exec(exec.clone());
            let timeout = timeout_ms.map_or(rt.config.tool_timeout, Duration::from_millis);
            let backoff = Duration::from_millis(retry_backoff_ms);
            let opts = ExecOptions::new()
                .timeout(timeout)
                .max_retries(max_retries)
                .backoff(backoff)
                .max_backoff(backoff);
            let instruction = Instruction::new(tool.action().clone())
                .with_params(arguments)
                .with_opts(opts);
            let outcome = exec.execute(instruction, ctx).await;
            let (effects, denied) = rt.config.effect_policy.filter(outcome.effects);
            if !denied.is_empty() {
                tracing::warn!(
                    name: "jido.ai.tool.effect_denied",
                    target: "jido::ai",
                    agent_id = %agent_id,
                    tool_name = %tool_name,
                    call_id = %info.id(),
                    denied = ?denied,
                    "tool effects denied by the effect policy"
                );
            }
            let result = match outcome.result {
                Ok(output) => {
                    info.telemetry.stop();
                    ResultEnvelope::Ok {
                        result: Value::Object(output),
                        effects,
                    }
                }
                Err(err) => {
                    info.telemetry.exception(&err);
                    ResultEnvelope::Error {
                        reason: (&err).into(),
                        effects,
                    }
                }
            };
            build(ToolResultData {
                call_id: info.id().to_owned(),
                tool_name,
                result,
                metadata: info.metadata.clone(),
            })
        };
        self.launch(ctx, info, "tool call", work.instrument(span))
    }
}

/// The call's id and its request (the call's parts move into it).
fn llm_request(
    call: LlmCall,
    model: String,
    timeout: Duration,
    stream: bool,
) -> (String, LlmRequest) {
    let mut messages = call.context;
    if let Some(system) = call.system_prompt {
        messages.push_front(Message::system(system));
    }
    let mut req = LlmRequest::new(model, messages);
    req.tools = call.tools;
    req.tool_choice = call.tool_choice;
    req.max_tokens = Some(call.max_tokens);
    req.temperature = Some(call.temperature as f32);
    req.timeout = Some(timeout);
    req.response_format = call.response_format;
    if stream {
        req.stream_idle_timeout = Some(timeout);
    }
    (call.id, req)
}

/// Consumes a stream: a delta per piece of text, the assembled response at
/// the end.
async fn stream_answer(
    client: Arc<dyn LlmClient>,
    req: LlmRequest,
    timeout: Duration,
    agent: &AgentRef,
    info: &CallInfo<LlmTelemetry>,
) -> Result<LlmResponse> {
    let mut events = match tokio::time::timeout(timeout, client.stream(req)).await {
        Ok(Ok(events)) => events,
        Ok(Err(e)) => return Err(llm_error(&e)),
        Err(_) => {
            return Err(
                Error::timeout("llm request timed out").with_detail("timeout_ms", ms(timeout))
            );
        }
    };
    let mut seq = 0;
    loop {
        let event = match tokio::time::timeout(timeout, events.next()).await {
            Ok(Some(Ok(event))) => event,
            Ok(Some(Err(e))) => return Err(llm_error(&e)),
            Ok(None) => {
                return Err(Error::execution("llm stream ended without a response")
                    .with_detail("llm_error", "connect"));
            }
            Err(_) => {
                return Err(
                    Error::timeout("llm stream stalled").with_detail("timeout_ms", ms(timeout))
                );
            }
        };
        let (text, chunk_type) = match event {
            LlmEvent::Done(resp) => return Ok(resp),
            LlmEvent::Content(text) => (text, ChunkType::Content),
            LlmEvent::Thinking(text) => (text, ChunkType::Thinking),
            // Tool-call fragments count as activity; the assembled calls
            // arrive with the response.
            #[allow(unreachable_patterns)]
            _ => continue,
        };
        let delta = sanitize_delta(&text);
        if delta.is_empty() {
            continue;
        }
        seq += 1;
        send(
            agent,
            build(LlmDeltaData {
                call_id: info.id().to_owned(),
                delta,
                chunk_type,
                seq,
                metadata: info.metadata.clone(),
            }),
        );
    }
}
