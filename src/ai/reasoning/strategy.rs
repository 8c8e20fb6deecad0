//! [`Reasoning`]: one [`Strategy`] for every reasoning machine.
//!
//! It translates the strategy's signals into machine [`Event`]s and the
//! machine's [`Step`]s into AI directives; the request lifecycle (records,
//! completion, events, the typed machine in the strategy ext with its JSON
//! mirror) is the shared [`RequestCore`].

use std::borrow::Cow;
use std::marker::PhantomData;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::machine::{Event, Machine, Phase, Step};
use crate::agent::{AgentData, RouteTarget, SignalRoute};
use crate::ai::client::ToolSpecs;
use crate::ai::directive::{
    CancelRequest, DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, EmitToolError, LlmGenerate, LlmStream,
    ModelRef, ToolExec,
};
use crate::ai::envelope::ResultEnvelope;
use crate::ai::react::ReAct;
use crate::ai::react::machine::Turn;
use crate::ai::request::{RequestCore, RequestState, set_json};
use crate::ai::signals::{self, LlmDeltaData, ToolResultData};
use crate::ai::tool::ToolSet;
use crate::directive::{Directive, error_context};
use crate::error::Error;
use crate::server::AwaitOptions;
use crate::signal::Signal;
use crate::signal::dispatch::DispatchConfig;
use crate::state::StateMap;
use crate::strategy::{
    Command, Snapshot, SnapshotStatus, Strategy, StrategyContext, apply_outcome,
};

/// Default per-attempt timeout of a tool call (15 s, Jido's).
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = 15_000;
/// Default retries of a failed tool call (1, Jido's).
pub const DEFAULT_TOOL_MAX_RETRIES: u32 = 1;
/// Default delay between tool attempts (200 ms, Jido's).
pub const DEFAULT_TOOL_BACKOFF_MS: u64 = 200;
/// How many requests the strategy remembers (100, Jido's).
pub const DEFAULT_REQUEST_HISTORY: usize = crate::ai::request::DEFAULT_REQUEST_HISTORY;

/// The command suffixes the routes send (`<name>_<suffix>`, e.g.
/// `cot_query`).
pub mod commands {
    /// `ai.<name>.query`.
    pub const QUERY: &str = "query";
    /// `ai.<name>.cancel`.
    pub const CANCEL: &str = "cancel";
    /// `ai.llm.delta`.
    pub const LLM_DELTA: &str = "llm_delta";
    /// `ai.llm.response`.
    pub const LLM_RESULT: &str = "llm_result";
    /// `ai.usage`.
    pub const USAGE: &str = "usage";
    /// `ai.tool.started`.
    pub const TOOL_STARTED: &str = "tool_started";
    /// `ai.tool.result`.
    pub const TOOL_RESULT: &str = "tool_result";
    /// `ai.request.error`.
    pub const REQUEST_ERROR: &str = "request_error";
}

/// The machine as the request core keeps it: typed in the strategy ext,
/// mirrored field by field under `__strategy__` (each top-level field of
/// its JSON, written only when it changed).
#[derive(Clone, Default)]
struct State<M>(M);

impl<M: Machine> RequestState for State<M> {
    fn read(from: &StateMap) -> Option<Self> {
        serde_json::from_value(Value::Object(from.to_json()))
            .ok()
            .map(State)
    }

    fn write(&self, into: &mut StateMap) {
        if let Ok(Value::Object(fields)) = serde_json::to_value(&self.0) {
            for (key, value) in &fields {
                set_json(into, key, value);
            }
        }
    }

    fn active_request(&self) -> Option<&str> {
        let run = self.0.run();
        if run.phase.is_busy() {
            run.request_id.as_deref()
        } else {
            None
        }
    }
}

/// A reasoning strategy on machine `M` (see the [module docs](super)).
///
/// Settings common to all (defaults): [`model`](Reasoning::model) (alias
/// `"fast"`), [`streaming`](Reasoning::streaming) (on),
/// [`max_tokens`](Reasoning::max_tokens) (1024),
/// [`temperature`](Reasoning::temperature) (0.2),
/// [`llm_timeout`](Reasoning::llm_timeout) (the runtime's),
/// [`tools`](Reasoning::tools) (none; used by Tree of Thoughts and by
/// Adaptive when it picks ReAct or ToT) with
/// [`tool_timeout_ms`](Reasoning::tool_timeout_ms) (15 000),
/// [`tool_max_retries`](Reasoning::tool_max_retries) (1) and
/// [`tool_backoff_ms`](Reasoning::tool_backoff_ms) (200),
/// [`events`](Reasoning::events) (none),
/// [`request_history`](Reasoning::request_history) (100); the machine's own
/// settings through [`configure`](Reasoning::configure).
pub struct Reasoning<M: Machine> {
    config: M::Config,
    model: ModelRef,
    streaming: bool,
    max_tokens: u32,
    temperature: f64,
    llm_timeout: Option<Duration>,
    tools: ToolSet,
    specs: ToolSpecs,
    tool_timeout_ms: u64,
    tool_max_retries: u32,
    tool_backoff_ms: u64,
    core: RequestCore,
    machine: PhantomData<fn() -> M>,
}

impl<M: Machine> Clone for Reasoning<M> {
    fn clone(&self) -> Self {
        Reasoning {
            config: self.config.clone(),
            model: self.model.clone(),
            streaming: self.streaming,
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            llm_timeout: self.llm_timeout,
            tools: self.tools.clone(),
            specs: self.specs.clone(),
            tool_timeout_ms: self.tool_timeout_ms,
            tool_max_retries: self.tool_max_retries,
            tool_backoff_ms: self.tool_backoff_ms,
            core: self.core.clone(),
            machine: PhantomData,
        }
    }
}

impl<M: Machine> std::fmt::Debug for Reasoning<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reasoning")
            .field("name", &M::name(&self.config))
            .field("config", &self.config)
            .field("model", &self.model)
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

impl<M: Machine> Default for Reasoning<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Machine> Reasoning<M> {
    /// The machine's default configuration and the defaults above.
    pub fn new() -> Self {
        Self::with_config(M::default_config())
    }

    /// The machine configured with `config`.
    pub fn with_config(config: M::Config) -> Self {
        Reasoning {
            core: RequestCore::new(M::name(&config)),
            config,
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
            machine: PhantomData,
        }
    }

    /// Changes the machine's configuration.
    #[must_use]
    pub fn configure(mut self, f: impl FnOnce(&mut M::Config)) -> Self {
        f(&mut self.config);
        let name = M::name(&self.config);
        if name != self.core.module() {
            let mut core = RequestCore::new(name).history(self.core.history_len());
            if let Some(events) = self.core.events_dispatch() {
                core = core.events(events.clone());
            }
            self.core = core;
        }
        self
    }

    /// The machine's configuration.
    pub fn config(&self) -> &M::Config {
        &self.config
    }

    /// The strategy's short name (`"cot"`, `"tot"`, …).
    pub fn short_name(&self) -> &'static str {
        M::name(&self.config)
    }

    /// The model: a spec (`"provider:model"`) or [`ModelRef::alias`].
    #[must_use]
    pub fn model(mut self, model: impl Into<ModelRef>) -> Self {
        self.model = model.into();
        self
    }

    /// Streamed model calls ([`LlmStream`], the default) or not
    /// ([`LlmGenerate`]).
    #[must_use]
    pub fn streaming(mut self, on: bool) -> Self {
        self.streaming = on;
        self
    }

    /// `max_tokens` of each model call.
    #[must_use]
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }

    /// Temperature of each model call.
    #[must_use]
    pub fn temperature(mut self, t: f64) -> Self {
        self.temperature = t;
        self
    }

    /// Timeout of each model call (else the runtime's).
    #[must_use]
    pub fn llm_timeout(mut self, timeout: Duration) -> Self {
        self.llm_timeout = Some(timeout);
        self
    }

    /// The tools offered on calls that may use them.
    #[must_use]
    pub fn tools(mut self, tools: ToolSet) -> Self {
        self.specs = tools.specs().into();
        self.tools = tools;
        self
    }

    /// Per-attempt timeout of a tool call, in ms (0: none).
    #[must_use]
    pub fn tool_timeout_ms(mut self, ms: u64) -> Self {
        self.tool_timeout_ms = ms;
        self
    }

    /// Retries of a tool call failing with a retryable error.
    #[must_use]
    pub fn tool_max_retries(mut self, n: u32) -> Self {
        self.tool_max_retries = n;
        self
    }

    /// Delay between tool attempts, in ms.
    #[must_use]
    pub fn tool_backoff_ms(mut self, ms: u64) -> Self {
        self.tool_backoff_ms = ms;
        self
    }

    /// Where the request signals go (`ai.request.started`, forwarded
    /// deltas, usage and tool signals of the running request,
    /// `ai.request.completed` / `ai.request.failed`).
    #[must_use]
    pub fn events(mut self, dispatch: DispatchConfig) -> Self {
        self.core = self.core.events(dispatch);
        self
    }

    /// How many requests `__strategy__.requests` keeps (oldest dropped).
    #[must_use]
    pub fn request_history(mut self, n: usize) -> Self {
        self.core = self.core.history(n);
        self
    }

    /// The query signal type, `ai.<name>.query`.
    pub fn query_type(&self) -> String {
        format!("ai.{}.query", self.short_name())
    }

    /// The cancel signal type, `ai.<name>.cancel`.
    pub fn cancel_type(&self) -> String {
        format!("ai.{}.cancel", self.short_name())
    }

    /// The strategy command for `suffix` (one of [`commands`]), e.g.
    /// `cot_llm_result`.
    pub fn command_name(&self, suffix: &str) -> String {
        format!("{}_{suffix}", self.short_name())
    }

    /// A query signal (`ai.<name>.query {query, request_id?}`).
    pub fn query(&self, query: &str, request_id: Option<&str>) -> Signal {
        Signal::new(self.query_type(), query_params(query, request_id))
    }

    /// A cancel signal (`ai.<name>.cancel {request_id?, reason?}`).
    pub fn cancel(&self, request_id: Option<&str>, reason: Option<&str>) -> Signal {
        let mut m = Map::new();
        if let Some(id) = request_id {
            m.insert("request_id".into(), id.into());
        }
        if let Some(r) = reason {
            m.insert("reason".into(), r.into());
        }
        Signal::new(self.cancel_type(), Value::Object(m))
    }

    /// The strategy command of a query (to drive an agent without the
    /// runtime).
    pub fn query_command(&self, query: &str, request_id: Option<&str>) -> Command {
        Command::strategy(
            self.command_name(commands::QUERY),
            query_params(query, request_id),
        )
    }

    /// The strategy command of an `ai.llm.response` for call `call_id`
    /// (what the runtime sends; to drive an agent without it).
    pub fn llm_result_command(&self, call_id: &str, result: Result<Turn, &Error>) -> Command {
        Command::strategy(
            self.command_name(commands::LLM_RESULT),
            ReAct::llm_response_payload(call_id, result),
        )
    }

    /// The strategy command of an `ai.tool.result`.
    pub fn tool_result_command(
        &self,
        call_id: &str,
        tool: &str,
        result: ResultEnvelope,
    ) -> Command {
        Command::strategy(
            self.command_name(commands::TOOL_RESULT),
            json!({"call_id": call_id, "tool_name": tool, "result": result.to_value(), "metadata": {}}),
        )
    }

    /// Options for [`AgentRef::await_completion`] waiting for request
    /// `request_id` (its entry in `__strategy__.requests`).
    ///
    /// [`AgentRef::await_completion`]: crate::server::AgentRef::await_completion
    pub fn await_options(request_id: &str) -> AwaitOptions {
        RequestCore::await_options(request_id)
    }

    /// The machine of `agent`, if it runs this strategy.
    pub fn machine_of(&self, agent: &AgentData) -> Option<M> {
        self.core.peek::<State<M>>(agent).map(|s| s.into_owned().0)
    }

    fn on_command(
        &self,
        agent: &mut AgentData,
        name: &str,
        params: Value,
        ctx: &StrategyContext,
    ) -> Vec<Directive> {
        let mut out = Vec::new();
        let Some(suffix) = name
            .strip_prefix(self.short_name())
            .and_then(|s| s.strip_prefix('_'))
        else {
            return vec![crate::strategy::unknown_command(&Command::strategy(
                name,
                Value::Null,
            ))];
        };
        let event = match suffix {
            commands::QUERY => match Query::deserialize(&params) {
                Ok(q) => Event::Start {
                    request_id: q
                        .request_id
                        .filter(|id| !id.is_empty())
                        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
                    query: q.query,
                },
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
            commands::CANCEL => {
                let (request_id, reason) = RequestCore::cancel_params(&params);
                Event::Cancel { request_id, reason }
            }
            commands::LLM_DELTA => {
                let call_id = match signals::typed_payload::<LlmDeltaData>(ctx, &params) {
                    Some(d) => d.call_id.as_str(),
                    None => params.get("call_id").and_then(Value::as_str).unwrap_or(""),
                };
                let awaited = self
                    .core
                    .peek::<State<M>>(agent)
                    .is_some_and(|s| s.0.run().awaits(call_id));
                if awaited {
                    self.core.forward(ctx, &mut out);
                }
                return out;
            }
            commands::USAGE | commands::TOOL_STARTED => {
                let request_id = signals::correlated_request(ctx, &params);
                let current = self.core.peek::<State<M>>(agent).is_some_and(|s| {
                    let run = s.0.run();
                    run.phase.is_busy() && run.request_id.as_deref() == request_id
                });
                if current {
                    self.core.forward(ctx, &mut out);
                }
                return out;
            }
            commands::REQUEST_ERROR => {
                self.core.record_rejection(agent, &params);
                self.core.forward(ctx, &mut out);
                return out;
            }
            commands::LLM_RESULT => match signals::read_llm_response(ctx, params) {
                Ok((call_id, result)) => Event::LlmResult { call_id, result },
                Err(e) => return vec![bad_payload(name, &e)],
            },
            commands::TOOL_RESULT => {
                match signals::command_payload(ctx, params, ToolResultData::from_value)
                    .map(Cow::into_owned)
                {
                    Ok(data) => {
                        let effects = data.result.decode_effects();
                        let m = &mut self.core.state::<State<M>>(agent).0;
                        let t = m.handle(
                            &self.config,
                            Event::ToolResult {
                                call_id: data.call_id,
                                result: data.result,
                            },
                        );
                        if !t.accepted {
                            return out;
                        }
                        let facts = Facts::of(m, &self.config);
                        self.core.forward(ctx, &mut out);
                        self.finish(agent, facts, t.steps, false, Some(effects), &mut out);
                        return out;
                    }
                    Err(e) => return vec![bad_payload(name, &e)],
                }
            }
            _ => {
                return vec![crate::strategy::unknown_command(&Command::strategy(
                    name,
                    Value::Null,
                ))];
            }
        };
        let started = matches!(event, Event::Start { .. });
        let m = &mut self.core.state::<State<M>>(agent).0;
        let t = m.handle(&self.config, event);
        if !t.accepted {
            return out;
        }
        let facts = Facts::of(m, &self.config);
        if let [Step::Reject { .. }] = t.steps.as_slice() {
            // A rejected request leaves the state untouched.
            let mut steps = t.steps;
            if let Some(Step::Reject {
                request_id,
                reason,
                message,
            }) = steps.pop()
            {
                out.push(RequestCore::reject(&request_id, &reason, message));
            }
            return out;
        }
        self.finish(agent, facts, t.steps, started, None, &mut out);
        out
    }

    /// Commits the machine's changes, applies a tool's effects (after the
    /// commit: a write of theirs to `__strategy__` is then what the
    /// machine reads next) and lifts its steps.
    fn finish(
        &self,
        agent: &mut AgentData,
        facts: Facts,
        steps: Vec<Step>,
        started: bool,
        effects: Option<crate::error::Result<Vec<crate::effect::Effect>>>,
        out: &mut Vec<Directive>,
    ) {
        let core = &self.core;
        core.commit::<State<M>>(agent);
        match effects {
            Some(Ok(effects)) => out.extend(agent.apply_effects(effects)),
            Some(Err(err)) => out.push(Directive::error(err, "tool_effects")),
            None => {}
        }
        if started {
            core.start(agent, &facts.request_id, &facts.query, out);
        }
        let (wants_tools, usage) = (facts.wants_tools, facts.usage);
        for step in steps {
            match step {
                Step::CallLlm(call) => out.push(self.llm_directive(call, wants_tools)),
                Step::ExecTool {
                    call,
                    request_id,
                    iteration,
                } => out.push(match self.tools.get(&call.name) {
                    Some(tool) => ToolExec::new(call.id, call.name, call.arguments)
                        .tool(tool)
                        .request_id(request_id)
                        .iteration(iteration)
                        .timeout_ms(self.tool_timeout_ms)
                        .max_retries(self.tool_max_retries)
                        .retry_backoff_ms(self.tool_backoff_ms)
                        .meta("strategy", self.short_name())
                        .into(),
                    None => EmitToolError::unknown_tool(call.id, call.name)
                        .meta("request_id", request_id)
                        .meta("iteration", iteration)
                        .meta("strategy", self.short_name())
                        .into(),
                }),
                Step::Reject {
                    request_id,
                    reason,
                    message,
                } => out.push(RequestCore::reject(&request_id, &reason, message)),
                Step::CancelCalls { request_id, reason } => {
                    out.push(CancelRequest::new(request_id).reason(reason).into());
                }
                Step::Completed {
                    request_id,
                    answer,
                    termination,
                } => core.finish(
                    agent,
                    &request_id,
                    Ok(answer),
                    termination.as_str(),
                    &usage,
                    out,
                ),
                Step::Failed {
                    request_id,
                    error,
                    termination,
                } => core.finish(
                    agent,
                    &request_id,
                    Err(error),
                    termination.as_str(),
                    &usage,
                    out,
                ),
                #[allow(unreachable_patterns)]
                _ => {}
            }
        }
    }

    fn llm_directive(&self, call: super::machine::LlmCall, wants_tools: bool) -> Directive {
        let mut metadata = Map::with_capacity(4);
        metadata.insert("request_id".into(), call.request_id.into());
        metadata.insert("iteration".into(), call.iteration.into());
        metadata.insert("strategy".into(), self.short_name().into());
        metadata.insert("phase".into(), call.phase.as_str().into());
        let tools = if wants_tools {
            self.specs.clone()
        } else {
            ToolSpecs::new()
        };
        macro_rules! build {
            ($ty:ident) => {{
                let mut d = $ty::new(call.call_id, self.model.clone(), call.messages)
                    .tools(tools)
                    .max_tokens(self.max_tokens)
                    .temperature(self.temperature)
                    .metadata(metadata);
                d.system_prompt = call.system_prompt;
                d.timeout = self.llm_timeout;
                d.into()
            }};
        }
        if self.streaming {
            build!(LlmStream)
        } else {
            build!(LlmGenerate)
        }
    }
}

/// What lifting a transition needs from the machine, taken before the
/// machine's borrow ends.
struct Facts {
    request_id: String,
    query: String,
    usage: crate::ai::client::Usage,
    wants_tools: bool,
}

impl Facts {
    fn of<M: Machine>(m: &M, config: &M::Config) -> Self {
        let run = m.run();
        Facts {
            request_id: run.request(),
            query: run.query.clone(),
            usage: run.usage,
            wants_tools: m.wants_tools(config),
        }
    }
}

fn query_params(query: &str, request_id: Option<&str>) -> Value {
    let mut m = Map::with_capacity(2);
    m.insert("query".into(), query.into());
    if let Some(id) = request_id {
        m.insert("request_id".into(), id.into());
    }
    Value::Object(m)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Query {
    #[serde(alias = "prompt")]
    query: String,
    #[serde(default)]
    request_id: Option<String>,
}

fn bad_payload(command: &str, e: &serde_json::Error) -> Directive {
    Directive::error(
        Error::validation(format!("invalid {command} payload: {e}"))
            .with_detail("command", command.to_owned()),
        error_context::STRATEGY_COMMAND,
    )
}

impl<M: Machine> Strategy for Reasoning<M> {
    fn name(&self) -> &'static str {
        self.short_name()
    }

    fn init(&self, agent: &mut AgentData, _ctx: &StrategyContext) -> Vec<Directive> {
        self.core.init::<State<M>>(agent);
        Vec::new()
    }

    async fn cmd(
        &self,
        agent: &mut AgentData,
        commands: Vec<Command>,
        ctx: &StrategyContext,
    ) -> Vec<Directive> {
        let mut out = Vec::new();
        for command in commands {
            match command {
                Command::Run(instruction) => {
                    let outcome = ctx.run(agent, instruction).await;
                    out.extend(apply_outcome(agent, outcome));
                }
                Command::Strategy { name, params, .. } => {
                    out.extend(self.on_command(agent, &name, params, ctx));
                }
            }
        }
        out
    }

    /// `idle` → idle, a busy phase → running, `completed` → success,
    /// `error` → failure; `result` the answer (or the error envelope);
    /// details `phase`, `request_id`, `termination_reason`, `usage`,
    /// `llm_calls` and the machine's own details.
    fn snapshot(&self, agent: &AgentData, _ctx: &StrategyContext) -> Snapshot {
        let Some(state) = self.core.peek::<State<M>>(agent) else {
            return Snapshot::default();
        };
        let m = &state.0;
        let run = m.run();
        let status = match run.phase {
            Phase::Idle => SnapshotStatus::Idle,
            Phase::Completed => SnapshotStatus::Success,
            Phase::Error => SnapshotStatus::Failure,
            _ => SnapshotStatus::Running,
        };
        let mut snap = Snapshot::new(status);
        snap.result = (!run.result.is_null()).then(|| run.result.clone());
        let d = &mut snap.details;
        d.insert("phase".into(), run.phase.as_str().into());
        d.insert("request_id".into(), run.request_id.clone().into());
        d.insert(
            "termination_reason".into(),
            run.termination.map(|t| t.as_str()).into(),
        );
        d.insert("usage".into(), json!(run.usage));
        d.insert("llm_calls".into(), run.llm_calls.into());
        d.extend(m.details());
        snap
    }

    fn signal_routes(&self, _ctx: &StrategyContext) -> Vec<SignalRoute> {
        let cmd = |path: &str, suffix: &str| {
            SignalRoute::new(path, RouteTarget::StrategyCmd(self.command_name(suffix)))
        };
        // The runtime's signals carry typed payloads, read without JSON.
        let typed = |path: &str, suffix: &str| {
            SignalRoute::new(
                path,
                RouteTarget::StrategyPayload(self.command_name(suffix)),
            )
        };
        vec![
            cmd(&self.query_type(), commands::QUERY),
            cmd(&self.cancel_type(), commands::CANCEL),
            typed(signals::LLM_DELTA, commands::LLM_DELTA),
            typed(signals::LLM_RESPONSE, commands::LLM_RESULT),
            typed(signals::USAGE, commands::USAGE),
            typed(signals::TOOL_STARTED, commands::TOOL_STARTED),
            typed(signals::TOOL_RESULT, commands::TOOL_RESULT),
            cmd(signals::REQUEST_ERROR, commands::REQUEST_ERROR),
        ]
    }
}
