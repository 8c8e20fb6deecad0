//! [`Reasoning`]: one [`Strategy`] for every reasoning machine.
//!
//! It is the shared request-strategy glue (the one ReAct runs on too):
//! signals become machine [`Event`]s, the machine's [`Step`]s become AI
//! directives, and the request lifecycle (records, completion, events, the
//! typed machine in the strategy ext with its JSON mirror) is the shared
//! [`RequestCore`]. This file says only what a reasoning machine adds: its
//! query, its events and steps, its model calls and its snapshot.

use std::marker::PhantomData;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::machine::{Event, LlmCall, Machine, Phase, Step};
use crate::agent::AgentData;
use crate::ai::client::{ToolSpecs, Usage};
use crate::ai::envelope::ResultEnvelope;
use crate::ai::react::driver::{self, Driven, Finish, Settings, Start, lift_step};
use crate::ai::react::machine::Turn;
use crate::ai::react::{self, ReAct};
use crate::ai::request::{RequestCore, RequestState, set_json};
use crate::directive::Directive;
use crate::error::Error;
use crate::server::AwaitOptions;
use crate::signal::Signal;
use crate::state::StateMap;
use crate::strategy::{Command, Snapshot, SnapshotStatus, Strategy, StrategyContext};

/// Default per-attempt timeout of a tool call (15 s, Jido's).
pub const DEFAULT_TOOL_TIMEOUT_MS: u64 = react::DEFAULT_TOOL_TIMEOUT_MS;
/// Default retries of a failed tool call (1, Jido's).
pub const DEFAULT_TOOL_MAX_RETRIES: u32 = react::DEFAULT_TOOL_MAX_RETRIES;
/// Default delay between tool attempts (200 ms, Jido's).
pub const DEFAULT_TOOL_BACKOFF_MS: u64 = react::DEFAULT_TOOL_BACKOFF_MS;
/// How many requests the strategy remembers (100, Jido's).
pub const DEFAULT_REQUEST_HISTORY: usize = crate::ai::request::DEFAULT_REQUEST_HISTORY;

/// The command suffixes the routes send (`<name>_<suffix>`, e.g.
/// `cot_query`).
pub mod commands {
    use crate::ai::react::driver::suffix;

    /// `ai.<name>.query`.
    pub const QUERY: &str = suffix::QUERY;
    /// `ai.<name>.cancel`.
    pub const CANCEL: &str = suffix::CANCEL;
    /// `ai.llm.delta`.
    pub const LLM_DELTA: &str = suffix::LLM_DELTA;
    /// `ai.llm.response`.
    pub const LLM_RESULT: &str = suffix::LLM_RESULT;
    /// `ai.usage`.
    pub const USAGE: &str = suffix::USAGE;
    /// `ai.tool.started`.
    pub const TOOL_STARTED: &str = suffix::TOOL_STARTED;
    /// `ai.tool.result`.
    pub const TOOL_RESULT: &str = suffix::TOOL_RESULT;
    /// `ai.request.error`.
    pub const REQUEST_ERROR: &str = suffix::REQUEST_ERROR;
}

/// The machine as the request core keeps it: typed in the strategy ext,
/// mirrored field by field under `__strategy__` (each top-level field of
/// its JSON, written only when it changed).
#[derive(Clone, Default)]
pub(crate) struct State<M>(M);

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
    settings: Settings,
    machine: PhantomData<fn() -> M>,
}

impl<M: Machine> Clone for Reasoning<M> {
    fn clone(&self) -> Self {
        Reasoning {
            config: self.config.clone(),
            settings: self.settings.clone(),
            machine: PhantomData,
        }
    }
}

impl<M: Machine> std::fmt::Debug for Reasoning<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reasoning")
            .field("name", &M::name(&self.config))
            .field("config", &self.config)
            .field("model", &self.settings.model)
            .field("streaming", &self.settings.streaming)
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
            settings: Settings::new(M::name(&config)),
            config,
            machine: PhantomData,
        }
    }

    /// Changes the machine's configuration.
    #[must_use]
    pub fn configure(mut self, f: impl FnOnce(&mut M::Config)) -> Self {
        f(&mut self.config);
        let name = M::name(&self.config);
        let core = &self.settings.core;
        if name != core.module() {
            let mut renamed = RequestCore::new(name).history(core.history_len());
            if let Some(events) = core.events_dispatch() {
                renamed = renamed.events(events.clone());
            }
            self.settings.core = renamed;
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

    driver::settings_builders!();

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
        Signal::new(self.query_type(), react::query_params(query, request_id))
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
            react::query_params(query, request_id),
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
        self.settings
            .core
            .peek::<State<M>>(agent)
            .map(|s| s.into_owned().0)
    }
}

/// An `ai.<name>.query`'s data (`prompt` is accepted for `query`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Query {
    #[serde(alias = "prompt")]
    query: String,
    #[serde(default)]
    request_id: Option<String>,
}

impl<M: Machine> Driven for Reasoning<M> {
    type State = State<M>;
    driver::shared_vocabulary!(Event, Step);

    fn start(params: &Value) -> Result<Start<Event>, serde_json::Error> {
        let q = Query::deserialize(params)?;
        Ok(Start::new(q.request_id, q.query, |request_id, query| {
            Event::Start { request_id, query }
        }))
    }

    fn awaits(state: &State<M>, call_id: &str) -> bool {
        state.0.run().awaits(call_id)
    }

    fn usage(state: &State<M>) -> Usage {
        state.0.run().usage
    }

    fn handle(&self, state: &mut State<M>, event: Event) -> (bool, Vec<Step>) {
        let t = state.0.handle(&self.config, event);
        (t.accepted, t.steps)
    }

    fn lift(&self, agent: &mut AgentData, step: Step, out: &mut Vec<Directive>) -> Option<Finish> {
        lift_step!(self.settings, step, out, Step {
            Step::CallLlm(call) => {
                self.llm_call(call, driver::machine(self, agent).0.wants_tools(&self.config))
            }
        })
    }
}

impl<M: Machine> Reasoning<M> {
    /// The model call a machine asked for: its phase in the metadata, the
    /// strategy's tools when the machine uses them.
    fn llm_call(&self, call: LlmCall, wants_tools: bool) -> Directive {
        let s = &self.settings;
        let correlation = s.call_correlation(call.request_id, call.iteration);
        let mut metadata = serde_json::Map::with_capacity(1);
        metadata.insert("phase".into(), call.phase.as_str().into());
        let tools = if wants_tools {
            s.specs.clone()
        } else {
            ToolSpecs::new()
        };
        s.llm_call(
            call.call_id,
            call.messages.into(),
            call.system_prompt,
            tools,
            (correlation, metadata),
            None,
        )
    }
}

impl<M: Machine> Strategy for Reasoning<M> {
    driver::strategy_methods!();

    /// `idle` → idle, a busy phase → running, `completed` → success,
    /// `error` → failure; `result` the answer (or the error envelope);
    /// details `phase`, `request_id`, `termination_reason`, `usage`,
    /// `llm_calls` and the machine's own details.
    fn snapshot(&self, agent: &AgentData, _ctx: &StrategyContext) -> Snapshot {
        let Some(state) = self.settings.core.peek::<State<M>>(agent) else {
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
        let mut snap = driver::snapshot(
            status,
            &run.result,
            run.phase.as_str(),
            run.request_id.as_deref(),
            run.termination.map(|t| t.as_str()),
            &run.usage,
        );
        snap.details
            .insert("llm_calls".into(), run.llm_calls.into());
        snap.details.extend(m.details());
        snap
    }
}
