//! The one strategy glue of every request machine: ReAct and the
//! reasoning strategies.
//!
//! A request strategy ([`ReAct`](super::ReAct) and every
//! [`Reasoning`](crate::ai::reasoning::Reasoning) strategy) is a pure
//! machine run by this glue. It reads the strategy's signals (query,
//! cancel, the model's deltas and answers, usage, tool starts and results,
//! request errors) into machine events, runs the machine on the typed
//! state the [`RequestCore`] keeps, commits it, and lifts the machine's
//! steps into AI directives (`LlmStream` / `LlmGenerate`, `ToolExec` /
//! `EmitToolError`, `EmitRequestError`, `CancelRequest`) and request
//! records. A strategy says only what differs, through [`Driven`]: how its
//! query reads, its machine's events and steps, and its model calls. The
//! settings every strategy shares ([`Settings`]) come with one set of
//! builder methods ([`settings_builders!`]).
//!
//! It lives beside ReAct because the reasoning strategies build on ReAct's
//! types (the model's [`Turn`]) already: the dependency keeps one
//! direction.

use std::borrow::Cow;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::machine::Turn;
use super::{DEFAULT_TOOL_BACKOFF_MS, DEFAULT_TOOL_MAX_RETRIES, DEFAULT_TOOL_TIMEOUT_MS};
use crate::agent::{AgentData, RouteTarget, SignalRoute};
use crate::ai::client::{JsonSchemaFormat, Messages, ToolCall, ToolSpecs, Usage};
use crate::ai::directive::{
    CancelRequest, DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, EmitToolError, LlmGenerate, LlmStream,
    ModelRef, ToolExec,
};
use crate::ai::envelope::{ErrorEnvelope, ResultEnvelope};
use crate::ai::request::{RequestCore, RequestState, usage_json};
use crate::ai::signals::{self, Correlation, LlmDeltaData, ToolResultData};
use crate::ai::tool::ToolSet;
use crate::directive::{Directive, error_context};
use crate::error::Error;
use crate::exec::panic_message;
use crate::state::StateValue;
use crate::strategy::{Command, Snapshot, SnapshotStatus, StrategyContext, apply_outcome};

/// The command suffixes of a request strategy's routes: strategy `NAME`
/// gets `NAME_query`, `NAME_llm_result`, …
pub(crate) mod suffix {
    /// `ai.<name>.query`.
    pub(crate) const QUERY: &str = "query";
    /// `ai.<name>.cancel`.
    pub(crate) const CANCEL: &str = "cancel";
    /// `ai.llm.delta`.
    pub(crate) const LLM_DELTA: &str = "llm_delta";
    /// `ai.llm.response`.
    pub(crate) const LLM_RESULT: &str = "llm_result";
    /// `ai.usage`.
    pub(crate) const USAGE: &str = "usage";
    /// `ai.tool.started`.
    pub(crate) const TOOL_STARTED: &str = "tool_started";
    /// `ai.tool.result`.
    pub(crate) const TOOL_RESULT: &str = "tool_result";
    /// `ai.request.error`.
    pub(crate) const REQUEST_ERROR: &str = "request_error";
}

/// What every request strategy is configured with: its model calls, its
/// tools and tool calls, and its [`RequestCore`] (name, events, history).
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) model: ModelRef,
    pub(crate) streaming: bool,
    pub(crate) max_tokens: u32,
    pub(crate) temperature: f64,
    pub(crate) llm_timeout: Option<Duration>,
    pub(crate) tools: ToolSet,
    pub(crate) specs: ToolSpecs,
    pub(crate) tool_timeout_ms: u64,
    pub(crate) tool_max_retries: u32,
    pub(crate) tool_backoff_ms: u64,
    pub(crate) core: RequestCore,
}

impl Settings {
    /// The defaults of strategy `module`: model alias `"fast"`, streamed
    /// calls, Jido's token, temperature and tool-call defaults, no tools.
    pub(crate) fn new(module: &'static str) -> Self {
        Settings {
            model: ModelRef::alias("fast"),
            streaming: true,
            max_tokens: DEFAULT_MAX_TOKENS,
            temperature: DEFAULT_TEMPERATURE,
            llm_timeout: None,
            tools: ToolSet::new(),
            specs: ToolSpecs::new(),
            tool_timeout_ms: DEFAULT_TOOL_TIMEOUT_MS,
            tool_max_retries: DEFAULT_TOOL_MAX_RETRIES,
            tool_backoff_ms: DEFAULT_TOOL_BACKOFF_MS,
            core: RequestCore::new(module),
        }
    }

    /// The correlation of a model call: `request_id`, `iteration`,
    /// `strategy` (typed: no JSON map per call).
    pub(crate) fn call_correlation(&self, request_id: String, iteration: u64) -> Correlation {
        Correlation {
            request_id: Some(request_id),
            run_id: None,
            iteration: Some(iteration),
            strategy: Some(self.core.module().to_owned()),
        }
    }

    /// A model call ([`LlmStream`] when streaming, else [`LlmGenerate`])
    /// with the configured model, limits and timeout, its typed
    /// correlation and free metadata.
    pub(crate) fn llm_call(
        &self,
        call_id: String,
        context: Messages,
        system_prompt: Option<String>,
        tools: ToolSpecs,
        (correlation, metadata): (Correlation, Map<String, Value>),
        format: Option<JsonSchemaFormat>,
    ) -> Directive {
        // Fields set in place: a chain of builder calls would move the
        // (large) directive at each step.
        macro_rules! build {
            ($ty:ident) => {{
                let mut d = $ty::new(call_id, self.model.clone(), context);
                d.tools = tools;
                d.max_tokens = self.max_tokens;
                d.temperature = self.temperature;
                d.metadata = metadata;
                d.correlation = correlation;
                d.system_prompt = system_prompt;
                d.timeout = self.llm_timeout;
                d.response_format = format;
                d.into()
            }};
        }
        if self.streaming {
            build!(LlmStream)
        } else {
            build!(LlmGenerate)
        }
    }

    /// The run of a tool call the model made ([`ToolExec`] with the
    /// configured timeout and retries), or [`EmitToolError`] for a tool the
    /// strategy does not have.
    pub(crate) fn tool_call(
        &self,
        call: ToolCall,
        request_id: String,
        iteration: u64,
    ) -> Directive {
        let strategy = self.core.module();
        match self.tools.get(&call.name) {
            Some(tool) => {
                // Fields set in place (see `llm_call`); the tool through
                // its builder (it sets what running the tool needs).
                let mut d = ToolExec::new(call.id, call.name, call.arguments).tool(tool);
                d.request_id = Some(request_id);
                d.iteration = Some(iteration);
                d.timeout_ms = Some(self.tool_timeout_ms);
                d.max_retries = self.tool_max_retries;
                d.retry_backoff_ms = self.tool_backoff_ms;
                d.strategy = Some(strategy.to_owned());
                d.into()
            }
            None => EmitToolError::unknown_tool(call.id, call.name)
                .meta("request_id", request_id)
                .meta("iteration", iteration)
                .meta("strategy", strategy)
                .into(),
        }
    }
}

/// The builder methods of the [`Settings`] every request strategy has, on
/// a strategy type with a `settings: Settings` field.
macro_rules! settings_builders {
    () => {
        /// The model: a spec (`"provider:model"`, a plain string) or
        /// [`ModelRef::alias`](crate::ai::directive::ModelRef::alias).
        #[must_use]
        pub fn model(mut self, model: impl Into<crate::ai::directive::ModelRef>) -> Self {
            self.settings.model = model.into();
            self
        }

        /// Streamed model calls
        /// ([`LlmStream`](crate::ai::directive::LlmStream), the default)
        /// or not ([`LlmGenerate`](crate::ai::directive::LlmGenerate)).
        #[must_use]
        pub fn streaming(mut self, on: bool) -> Self {
            self.settings.streaming = on;
            self
        }

        /// `max_tokens` of each model call.
        #[must_use]
        pub fn max_tokens(mut self, n: u32) -> Self {
            self.settings.max_tokens = n;
            self
        }

        /// Temperature of each model call.
        #[must_use]
        pub fn temperature(mut self, t: f64) -> Self {
            self.settings.temperature = t;
            self
        }

        /// Timeout of each model call (else the runtime's).
        #[must_use]
        pub fn llm_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.llm_timeout = Some(timeout);
            self
        }

        /// The tools offered to the model on the calls that may use them
        /// (run directly, without the runtime's tool set).
        #[must_use]
        pub fn tools(mut self, tools: crate::ai::tool::ToolSet) -> Self {
            self.settings.specs = tools.specs().into();
            self.settings.tools = tools;
            self
        }

        /// Per-attempt timeout of a tool call, in ms (0: none).
        #[must_use]
        pub fn tool_timeout_ms(mut self, ms: u64) -> Self {
            self.settings.tool_timeout_ms = ms;
            self
        }

        /// Retries of a tool call failing with a retryable error.
        #[must_use]
        pub fn tool_max_retries(mut self, n: u32) -> Self {
            self.settings.tool_max_retries = n;
            self
        }

        /// Delay between tool attempts, in ms.
        #[must_use]
        pub fn tool_backoff_ms(mut self, ms: u64) -> Self {
            self.settings.tool_backoff_ms = ms;
            self
        }

        /// Where the request signals go: `ai.request.started`, the
        /// `ai.llm.delta`, `ai.usage`, `ai.tool.started` and
        /// `ai.tool.result` signals of the running request (stale ones are
        /// not forwarded), `ai.request.error` for a rejected request, and
        /// exactly one `ai.request.completed` or `ai.request.failed` per
        /// accepted request.
        #[must_use]
        pub fn events(mut self, dispatch: crate::signal::dispatch::DispatchConfig) -> Self {
            self.settings.core = self.settings.core.events(dispatch);
            self
        }

        /// How many requests `__strategy__.requests` keeps (oldest dropped).
        #[must_use]
        pub fn request_history(mut self, n: usize) -> Self {
            self.settings.core = self.settings.core.history(n);
            self
        }
    };
}

pub(crate) use settings_builders;

/// A query read: the request's id (generated when missing or empty), its
/// question, and the machine's event starting it. The id and the question
/// are held as the state holds them (one copy each, shared by the
/// top-level keys and the request record).
pub(crate) struct Start<E> {
    pub(crate) request_id: Arc<str>,
    pub(crate) query: StateValue,
    pub(crate) event: E,
}

impl<E> Start<E> {
    /// `request_id`, or a new UUIDv7 when it is missing or empty, and the
    /// event `event` makes of the id and the question.
    pub(crate) fn new(
        request_id: Option<String>,
        query: String,
        event: impl FnOnce(String, String) -> E,
    ) -> Self {
        let request_id = request_id
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        Start {
            request_id: Arc::from(request_id.as_str()),
            query: StateValue::from(query.as_str()),
            event: event(request_id, query),
        }
    }
}

/// The end of a request, as a machine step says it: the glue records it
/// (request record, completion fields, `ai.request.completed` or
/// `ai.request.failed`).
pub(crate) struct Finish {
    pub(crate) request_id: String,
    pub(crate) outcome: Result<Value, Value>,
    pub(crate) termination: &'static str,
}

/// Lifts step `$step` of a request machine whose step enum is `$Step`,
/// with the strategy's [`Settings`] `$settings`, pushing its directive to
/// `$out` or giving the request's [`Finish`]: the arms given turn the
/// machine's own steps (its model calls) into a directive; the steps every
/// request machine has, with the same names and fields (`ExecTool`,
/// `Reject`, `CancelCalls`, `Completed`, `Failed`), are lifted here.
macro_rules! lift_step {
    ($settings:expr, $step:expr, $out:expr, $Step:ident { $($arm:pat => $lifted:expr),+ $(,)? }) => {{
        use $crate::ai::react::driver::Finish;
        match $step {
            $($arm => {
                $out.push($lifted);
                None
            })+
            $Step::ExecTool {
                call,
                request_id,
                iteration,
            } => {
                $out.push($settings.tool_call(call, request_id, iteration));
                None
            }
            $Step::Reject {
                request_id,
                reason,
                message,
            } => {
                $out.push($crate::ai::request::RequestCore::reject(&request_id, &reason, message));
                None
            }
            $Step::CancelCalls { request_id, reason } => {
                $out.push($crate::ai::directive::CancelRequest::new(request_id).reason(reason).into());
                None
            }
            $Step::Completed {
                request_id,
                answer,
                termination,
            } => Some(Finish {
                request_id,
                outcome: Ok(answer),
                termination: termination.as_str(),
            }),
            $Step::Failed {
                request_id,
                error,
                termination,
            } => Some(Finish {
                request_id,
                outcome: Err(error),
                termination: termination.as_str(),
            }),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }};
}

pub(crate) use lift_step;

/// The [`Driven`] items that read the same for every request strategy
/// (with a `settings: Settings` field) whose machine's `$Event` and
/// `$Step` enums share these variants (same names and fields): the event
/// and step types, the settings, the cancel, model-answer and tool-result
/// events, and the rejection step.
macro_rules! shared_vocabulary {
    ($Event:ident, $Step:ident) => {
        type Event = $Event;
        type Step = $Step;

        fn settings(&self) -> &$crate::ai::react::driver::Settings {
            &self.settings
        }

        fn cancel(request_id: Option<String>, reason: String) -> $Event {
            $Event::Cancel { request_id, reason }
        }

        fn llm_result(
            call_id: String,
            result: Result<$crate::ai::react::machine::Turn, $crate::ai::envelope::ErrorEnvelope>,
        ) -> $Event {
            $Event::LlmResult { call_id, result }
        }

        fn tool_result(call_id: String, result: $crate::ai::envelope::ResultEnvelope) -> $Event {
            $Event::ToolResult { call_id, result }
        }

        fn is_reject(step: &$Step) -> bool {
            matches!(step, $Step::Reject { .. })
        }
    };
}

pub(crate) use shared_vocabulary;

/// The `Strategy` methods every request strategy shares (all but
/// `snapshot`), inside `impl Strategy for X` where `X` is [`Driven`]: its
/// name is its request core's, `init` and `cmd` go through the glue, its
/// strategy commands run inline, and the routes are [`routes`] of its name.
macro_rules! strategy_methods {
    () => {
        fn name(&self) -> &'static str {
            $crate::ai::react::driver::Driven::settings(self)
                .core
                .module()
        }

        fn init(
            &self,
            agent: &mut $crate::agent::AgentData,
            _ctx: &$crate::strategy::StrategyContext,
        ) -> Vec<$crate::directive::Directive> {
            $crate::ai::react::driver::init(self, agent)
        }

        async fn cmd(
            &self,
            agent: &mut $crate::agent::AgentData,
            commands: Vec<$crate::strategy::Command>,
            ctx: &$crate::strategy::StrategyContext,
        ) -> Vec<$crate::directive::Directive> {
            $crate::ai::react::driver::cmd(self, agent, commands, ctx).await
        }

        /// `true`: a strategy command is a transition of the machine, which
        /// never awaits (a panicking transition fails its request).
        fn strategy_commands_inline(&self) -> bool {
            true
        }

        fn signal_routes(
            &self,
            _ctx: &$crate::strategy::StrategyContext,
        ) -> Vec<$crate::agent::SignalRoute> {
            let name = $crate::ai::react::driver::Driven::settings(self)
                .core
                .module();
            $crate::ai::react::driver::routes(name)
        }
    };
}

pub(crate) use strategy_methods;

/// What a request strategy tells the glue (see the [module docs](self)).
pub(crate) trait Driven: Sync {
    /// The machine, as the request core keeps it.
    type State: RequestState;
    /// What the machine is told.
    type Event;
    /// What the machine asks for.
    type Step;

    /// The shared settings (and the request core).
    fn settings(&self) -> &Settings;

    /// Reads a query's params.
    ///
    /// # Errors
    ///
    /// The params do not decode (the request is rejected with
    /// `invalid_request`).
    fn start(params: &Value) -> Result<Start<Self::Event>, serde_json::Error>;

    /// Cancel request `request_id` (`None`: whichever runs).
    fn cancel(request_id: Option<String>, reason: String) -> Self::Event;

    /// The model answered call `call_id`.
    fn llm_result(call_id: String, result: Result<Turn, ErrorEnvelope>) -> Self::Event;

    /// Tool call `call_id` ended.
    fn tool_result(call_id: String, result: ResultEnvelope) -> Self::Event;

    /// Whether `call_id` is the model call the machine awaits (its deltas
    /// are forwarded).
    fn awaits(state: &Self::State, call_id: &str) -> bool;

    /// Tokens of the running (or last) request so far.
    fn usage(state: &Self::State) -> Usage;

    /// Runs the machine: whether it took the event, and its steps.
    fn handle(&self, state: &mut Self::State, event: Self::Event) -> (bool, Vec<Self::Step>);

    /// Whether `step` rejects a request (a transition of rejections only
    /// leaves the state untouched).
    fn is_reject(step: &Self::Step) -> bool;

    /// What `step` becomes: its directive pushed to `out`, or the
    /// request's end. A step that needs the machine (as it is after the
    /// event) reads it with [`machine`].
    fn lift(
        &self,
        agent: &mut AgentData,
        step: Self::Step,
        out: &mut Vec<Directive>,
    ) -> Option<Finish>;
}

/// `Strategy::init`: the typed state in the ext when `__strategy__` is
/// not this strategy's.
pub(crate) fn init<S: Driven>(strategy: &S, agent: &mut AgentData) -> Vec<Directive> {
    strategy.settings().core.init::<S::State>(agent);
    Vec::new()
}

/// `Strategy::cmd`: instructions run, strategy commands go through
/// [`on_command`].
pub(crate) async fn cmd<S: Driven>(
    strategy: &S,
    agent: &mut AgentData,
    commands: Vec<Command>,
    ctx: &StrategyContext,
) -> Vec<Directive> {
    let mut out = Vec::new();
    for command in commands {
        let directives = match command {
            // Boxed: an Exec run's future is large, and held inline it
            // would make every command's future (boxed by `DynStrategy`)
            // as large, though strategy commands never await.
            Command::Run(instruction) => {
                let outcome = Box::pin(ctx.run(agent, instruction)).await;
                apply_outcome(agent, outcome)
            }
            Command::Strategy { name, params, .. } => {
                on_command(strategy, agent, &name, params, ctx)
            }
        };
        // The usual command is one: its directives become the result as
        // they are, with no second vector.
        if out.is_empty() {
            out = directives;
        } else {
            out.extend(directives);
        }
    }
    out
}

/// `Strategy::signal_routes` of strategy `name`: its query and cancel
/// signals (`ai.NAME.query`, `ai.NAME.cancel`) and the runtime's signals,
/// each to its command `NAME_<suffix>`.
pub(crate) fn routes(name: &str) -> Vec<SignalRoute> {
    let command = |s: &str| format!("{name}_{s}");
    let cmd = |path: &str, s: &str| SignalRoute::new(path, RouteTarget::StrategyCmd(command(s)));
    // The runtime's signals carry typed payloads, read without JSON.
    let typed =
        |path: &str, s: &str| SignalRoute::new(path, RouteTarget::StrategyPayload(command(s)));
    vec![
        cmd(&format!("ai.{name}.query"), suffix::QUERY),
        cmd(&format!("ai.{name}.cancel"), suffix::CANCEL),
        typed(signals::LLM_DELTA, suffix::LLM_DELTA),
        typed(signals::LLM_RESPONSE, suffix::LLM_RESULT),
        typed(signals::USAGE, suffix::USAGE),
        typed(signals::TOOL_STARTED, suffix::TOOL_STARTED),
        typed(signals::TOOL_RESULT, suffix::TOOL_RESULT),
        cmd(signals::REQUEST_ERROR, suffix::REQUEST_ERROR),
    ]
}

/// The part of a snapshot every request strategy shows: `status`,
/// `result` (unless null) and the details `phase`, `request_id`,
/// `termination_reason` and `usage`, in that order.
pub(crate) fn snapshot(
    status: SnapshotStatus,
    result: &Value,
    phase: &str,
    request_id: Option<&str>,
    termination: Option<&str>,
    usage: &Usage,
) -> Snapshot {
    let mut snap = Snapshot::new(status);
    snap.result = (!result.is_null()).then(|| result.clone());
    let d = &mut snap.details;
    d.insert("phase".into(), phase.into());
    d.insert("request_id".into(), request_id.into());
    d.insert("termination_reason".into(), termination.into());
    d.insert("usage".into(), usage_json(usage));
    snap
}

/// One strategy command: `NAME_<suffix>` read into a machine event (or
/// answered at once: deltas, usage and tool starts forwarded when they
/// belong to the running request, request errors recorded), the machine
/// run and committed, a tool's effects applied after the commit, and the
/// steps lifted.
fn on_command<S: Driven>(
    strategy: &S,
    agent: &mut AgentData,
    name: &str,
    params: Value,
    ctx: &StrategyContext,
) -> Vec<Directive> {
    let settings = strategy.settings();
    let core = &settings.core;
    let mut out = Vec::new();
    let Some(command) = name
        .strip_prefix(core.module())
        .and_then(|s| s.strip_prefix('_'))
    else {
        return vec![unknown(name)];
    };
    let mut effects = None;
    let mut started = None;
    let event = match command {
        suffix::QUERY => match S::start(&params) {
            Ok(start) => {
                started = Some((start.request_id, start.query));
                start.event
            }
            Err(e) => {
                let request_id = RequestCore::request_id(&params);
                out.push(RequestCore::reject(
                    &request_id,
                    "invalid_request",
                    format!("invalid query: {e}"),
                ));
                return out;
            }
        },
        suffix::CANCEL => {
            let (request_id, reason) = RequestCore::cancel_params(&params);
            S::cancel(request_id, reason)
        }
        // Without an events dispatch nothing is forwarded: a delta, a
        // usage report or a tool start changes nothing, and is not read.
        suffix::LLM_DELTA | suffix::USAGE | suffix::TOOL_STARTED
            if core.events_dispatch().is_none() =>
        {
            return out;
        }
        suffix::LLM_DELTA => {
            let call_id = match signals::typed_payload::<LlmDeltaData>(ctx, &params) {
                Some(d) => d.call_id.as_str(),
                None => params.get("call_id").and_then(Value::as_str).unwrap_or(""),
            };
            if S::awaits(core.state_ref::<S::State>(agent), call_id) {
                core.forward(ctx, &mut out);
            }
            return out;
        }
        suffix::USAGE | suffix::TOOL_STARTED => {
            let request_id = signals::correlated_request(ctx, &params);
            let state = core.state_ref::<S::State>(agent);
            if state
                .active_request()
                .is_some_and(|a| Some(a) == request_id)
            {
                core.forward(ctx, &mut out);
            }
            return out;
        }
        suffix::REQUEST_ERROR => {
            core.record_rejection(agent, &params);
            core.forward(ctx, &mut out);
            return out;
        }
        suffix::LLM_RESULT => match signals::read_llm_response(ctx, params) {
            Ok((call_id, result)) => S::llm_result(call_id, result),
            Err(e) => return vec![bad_payload(name, &e)],
        },
        suffix::TOOL_RESULT => {
            match signals::command_payload(ctx, params, ToolResultData::from_value) {
                Ok(data) => {
                    effects = Some(data.result.decode_effects());
                    // Only the id and the result go on: the rest of a
                    // payload shared with the signal is not copied.
                    let (call_id, result) = match data {
                        Cow::Borrowed(d) => (d.call_id.clone(), d.result.clone()),
                        Cow::Owned(d) => (d.call_id, d.result),
                    };
                    S::tool_result(call_id, result)
                }
                Err(e) => return vec![bad_payload(name, &e)],
            }
        }
        _ => return vec![unknown(name)],
    };
    // Changed in place when nothing else holds the published state, then
    // committed or settled at once.
    let state = core.state_in_place::<S::State>(agent);
    // A panicking transition leaves the machine half-changed (and lent:
    // the published node holds a placeholder). The request it ran fails,
    // the machine starts over, and the agent serves the next request.
    let handled = std::panic::catch_unwind(AssertUnwindSafe(|| strategy.handle(state, event)));
    let (accepted, steps) = match handled {
        Ok(handled) => handled,
        Err(panic) => {
            let request_id = state
                .active_request()
                .map(str::to_owned)
                .or(started.map(|(request_id, _)| request_id.to_string()));
            *state = S::State::default();
            core.commit_after_state::<S::State>(agent);
            let error = Error::execution(format!(
                "strategy transition panicked: {}",
                panic_message(&*panic)
            ))
            .with_retry(false);
            tracing::error!(
                target: "jido::ai",
                strategy = core.module(),
                command = name,
                request_id = request_id.as_deref().unwrap_or(""),
                error = %error,
                "strategy transition panicked: the request fails, the machine starts over"
            );
            if let Some(request_id) = request_id {
                let envelope =
                    serde_json::to_value(ErrorEnvelope::from(&error)).unwrap_or(Value::Null);
                out.push(
                    CancelRequest::new(request_id.clone())
                        .reason("strategy_panicked")
                        .into(),
                );
                core.finish(
                    agent,
                    &request_id,
                    Err(envelope),
                    "error",
                    &Usage::default(),
                    &mut out,
                );
            }
            return out;
        }
    };
    if !accepted {
        core.settle::<S::State>(agent);
        return out;
    }
    let usage = S::usage(state);
    // Room for the steps' directives (one each at most, a finish none) and
    // a forwarded signal at once: the list is not regrown step by step,
    // and is not given the spare room of a growth (a directive is large).
    out.reserve_exact(steps.len() + usize::from(effects.is_some()));
    // A rejection (busy, unknown schema) leaves the machine as it was: the
    // state stays untouched, revision included.
    if !steps.is_empty() && steps.iter().all(S::is_reject) {
        core.settle::<S::State>(agent);
        lift(strategy, agent, steps, &usage, &mut out);
        return out;
    }
    core.commit_after_state::<S::State>(agent);
    // The tool's effects after the commit: a write of theirs to
    // `__strategy__` is then what the machine reads next.
    if let Some(effects) = effects {
        core.forward(ctx, &mut out);
        match effects {
            Ok(effects) => out.extend(agent.apply_effects(effects)),
            Err(err) => out.push(Directive::error(err, "tool_effects")),
        }
    }
    if let Some((request_id, query)) = started {
        core.start_shared(agent, request_id, query, &mut out);
    }
    lift(strategy, agent, steps, &usage, &mut out);
    out
}

/// Turns the machine's steps into directives and request records.
fn lift<S: Driven>(
    strategy: &S,
    agent: &mut AgentData,
    steps: Vec<S::Step>,
    usage: &Usage,
    out: &mut Vec<Directive>,
) {
    let settings = strategy.settings();
    let core = &settings.core;
    for step in steps {
        if let Some(finish) = strategy.lift(agent, step, out) {
            let Finish {
                request_id,
                outcome,
                termination,
            } = finish;
            core.finish(agent, &request_id, outcome, termination, usage, out);
        }
    }
}

/// The machine of `agent` as the strategy's request core keeps it (the
/// typed state in the ext; read only by the steps that need it: each read
/// checks the ext against `__strategy__`).
pub(crate) fn machine<'a, S: Driven>(strategy: &S, agent: &'a mut AgentData) -> &'a S::State {
    strategy.settings().core.state_ref::<S::State>(agent)
}

fn unknown(name: &str) -> Directive {
    crate::strategy::unknown_command(&Command::strategy(name, Value::Null))
}

fn bad_payload(command: &str, e: &serde_json::Error) -> Directive {
    Directive::error(
        Error::validation(format!("invalid {command} payload: {e}"))
            .with_detail("command", command.to_owned()),
        error_context::STRATEGY_COMMAND,
    )
}
