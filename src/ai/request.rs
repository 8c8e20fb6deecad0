//! What every request-driven reasoning strategy shares: [`RequestCore`].
//!
//! A reasoning strategy (ReAct, Chain of Thought, Tree of Thoughts, …)
//! answers *requests*: a question arrives as a signal, the strategy calls
//! the model and tools through directives, and the request ends completed
//! or failed. What is common to all of them lives here, so that every
//! strategy behaves the same way:
//!
//! * **Typed state in the strategy ext, JSON in `__strategy__`.** The
//!   strategy's own state (its machine) is a Rust value implementing
//!   [`RequestState`], kept in the agent's
//!   [strategy ext](crate::agent::AgentData::strategy_ext) and read there
//!   on every signal ([`RequestCore::state`]): no JSON decoding on the hot
//!   path. After each change, [`RequestCore::commit`] brings the JSON
//!   mirror under `__strategy__` up to date ([`RequestState::write`] writes
//!   only what changed) and bumps `__strategy__.rev`. The JSON stays the
//!   source of truth: checkpoints hold it, and an agent whose ext is
//!   missing (restored, or built from a state) or does not match the JSON
//!   rebuilds the typed state from it on first use
//!   ([`RequestState::read`]). The ext keeps a handle on the
//!   `__strategy__` object the core last wrote, so any other write to it
//!   (an action's or a tool's effect, a state op, a replaced state) makes
//!   a new object and is seen, whether or not it touched `rev`. Apply a
//!   tool's effects after the commit of the turn that received them.
//! * **Requests tracked by id.** `__strategy__.requests.ID` `{query,
//!   status: pending | completed | failed, result, error,
//!   termination_reason, usage}` for the latest
//!   [`DEFAULT_REQUEST_HISTORY`] requests (oldest dropped), awaited with
//!   [`RequestCore::await_options`]; a rejected request is recorded as
//!   failed with a `rejected` error unless its id is known.
//! * **Completion as state.** [`RequestCore::start`] sets top-level
//!   `status: "running"`, `last_request_id`, `last_query`, `last_answer:
//!   ""`, `error: null`; [`RequestCore::finish`] sets `status:
//!   "completed"` and `last_answer`, or `status: "failed"` and `error`, so
//!   [`AgentRef::await_completion`] works with its defaults.
//! * **The busy policy.** A request arriving while another runs gets one
//!   `ai.request.error` `{reason: "busy"}` ([`RequestCore::busy`]) and
//!   nothing else changes.
//! * **Usage summed** across the model calls of a request (the strategy
//!   adds each call's [`Usage`]; the core records the sum).
//! * **Cancellation by request id** ([`RequestCore::cancel_params`],
//!   [`RequestCore::cancel_matches`], [`RequestCore::cancel`]: a
//!   [`CancelRequest`] directive that also stops the provider stream, and
//!   the `cancelled` error envelope).
//! * **Events.** With [`RequestCore::events`], `ai.request.started`
//!   `{request_id, query}`, then exactly one `ai.request.completed`
//!   `{request_id, result, termination_reason, usage}` or
//!   `ai.request.failed` `{request_id, error, termination_reason, usage}`
//!   per accepted request, and the request's own signals forwarded
//!   ([`RequestCore::forward`]).
//!
//! # A new strategy
//!
//! The state is a plain Rust value; the strategy reads it with
//! [`RequestCore::state`], changes it, commits, and records the request's
//! start and end through the core.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use jido::agent::AgentData;
//! use jido::ai::request::{RequestCore, RequestState, set_str};
//! use jido::ai::Usage;
//! use jido::prelude::*;
//! use jido::state::StateMap;
//! use jido::strategy::{Command, Strategy, StrategyContext};
//! use serde_json::json;
//!
//! /// The typed state: which request runs, the tokens it used.
//! #[derive(Clone, Default)]
//! struct Echo {
//!     running: Option<String>,
//!     usage: Usage,
//! }
//!
//! impl RequestState for Echo {
//!     fn read(from: &StateMap) -> Option<Self> {
//!         let running = from.get("running")?.as_str().map(str::to_owned);
//!         Some(Echo { running, usage: Usage::default() })
//!     }
//!     fn write(&self, into: &mut StateMap) {
//!         // Only what changed is written (`set_str` compares first).
//!         set_str(into, "running", self.running.as_deref());
//!     }
//!     fn active_request(&self) -> Option<&str> {
//!         self.running.as_deref()
//!     }
//! }
//!
//! /// A strategy answering "ask" with the question itself, on "answer".
//! struct EchoStrategy(RequestCore);
//!
//! impl Strategy for EchoStrategy {
//!     async fn cmd(&self, agent: &mut AgentData, commands: Vec<Command>, _ctx: &StrategyContext)
//!         -> Vec<Directive>
//!     {
//!         let core = &self.0;
//!         let mut out = Vec::new();
//!         for command in commands {
//!             let Command::Strategy { name, params, .. } = command else { continue };
//!             let id = RequestCore::request_id(&params);
//!             let state = core.state::<Echo>(agent);
//!             match name.as_str() {
//!                 "ask" => {
//!                     if state.running.is_some() {
//!                         out.push(core.busy(&id, "running"));
//!                         continue;
//!                     }
//!                     state.running = Some(id.clone());
//!                     core.commit::<Echo>(agent);
//!                     let query = params["query"].as_str().unwrap_or_default();
//!                     core.start(agent, &id, query, &mut out);
//!                 }
//!                 "answer" => {
//!                     let Some(id) = state.running.take() else { continue };
//!                     let usage = state.usage;
//!                     core.commit::<Echo>(agent);
//!                     let answer = params["text"].clone();
//!                     core.finish(agent, &id, Ok(answer), "final_answer", &usage, &mut out);
//!                 }
//!                 _ => {}
//!             }
//!         }
//!         out
//!     }
//! }
//!
//! struct Bot;
//! impl Agent for Bot {
//!     const NAME: &'static str = "echo_bot";
//!     type Schema = ();
//!     fn strategy(&self) -> DynStrategy {
//!         DynStrategy::new(EchoStrategy(RequestCore::new("echo")))
//!     }
//! }
//!
//! let mut agent = AgentState::new(Bot, AgentOptions::new());
//! let ask = |q: &str, id: &str| Command::strategy("ask", json!({"query": q, "request_id": id}));
//! agent.cmd(ask("hi?", "r1"), ExecOptions::new()).await;
//! assert_eq!(agent.state()["status"], "running");
//! assert_eq!(agent.state()["__strategy__"]["running"], "r1");
//!
//! // Busy: rejected, nothing changed.
//! let d = agent.cmd(ask("again?", "r2"), ExecOptions::new()).await;
//! assert_eq!(d[0].kind(), "ai.emit_request_error");
//! assert_eq!(agent.state()["__strategy__"]["running"], "r1");
//!
//! agent.cmd(Command::strategy("answer", json!({"text": "hi!"})), ExecOptions::new()).await;
//! assert_eq!(agent.state()["status"], "completed");
//! assert_eq!(agent.state()["last_answer"], "hi!");
//! assert_eq!(agent.state()["__strategy__"]["requests"]["r1"]["status"], "completed");
//! # }
//! ```
//!
//! [`AgentRef::await_completion`]: crate::server::AgentRef::await_completion

use std::any::Any;
use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::client::Usage;
use super::directive::{CancelRequest, DEFAULT_CANCEL_REASON, EmitRequestError};
use crate::agent::{AgentData, STRATEGY_KEY};
use crate::directive::Directive;
use crate::error::Error;
use crate::server::AwaitOptions;
use crate::signal::Signal;
use crate::signal::dispatch::DispatchConfig;
use crate::state::{StateMap, StateValue};
use crate::strategy::StrategyContext;

/// How many requests a strategy remembers by default (100, Jido's).
pub const DEFAULT_REQUEST_HISTORY: usize = 100;
/// `ai.request.started`.
pub const REQUEST_STARTED: &str = "ai.request.started";
/// `ai.request.completed`.
pub const REQUEST_COMPLETED: &str = "ai.request.completed";
/// `ai.request.failed`.
pub const REQUEST_FAILED: &str = "ai.request.failed";
/// The key of the mirror's revision in `__strategy__`.
pub const REV_KEY: &str = "rev";

/// Where a tracked request is (`__strategy__.requests.ID.status`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestStatus {
    /// Running.
    Pending,
    /// Answered.
    Completed,
    /// Failed, cancelled or rejected.
    Failed,
}

impl RequestStatus {
    /// `"pending"`, `"completed"` or `"failed"`.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestStatus::Pending => "pending",
            RequestStatus::Completed => "completed",
            RequestStatus::Failed => "failed",
        }
    }

    /// Reads [`RequestStatus::as_str`]'s names.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => RequestStatus::Pending,
            "completed" => RequestStatus::Completed,
            "failed" => RequestStatus::Failed,
            _ => return None,
        })
    }
}

/// A strategy's typed state, kept in the strategy ext and mirrored as
/// JSON under `__strategy__` (see the [module docs](self)).
pub trait RequestState: Clone + Default + Send + Sync + 'static {
    /// Rebuilds the state from its mirror (a restored agent); `None` when
    /// it cannot be read (the strategy then starts from `Default`).
    fn read(from: &StateMap) -> Option<Self>;

    /// Brings the mirror `into` (the `__strategy__` object) up to date.
    /// It holds what the previous `write` left (or whatever a restored
    /// state had): write only the fields that differ, so that a signal
    /// changing one field costs one write. Leave the keys `module`, `rev`
    /// and `requests` alone (the core's).
    fn write(&self, into: &mut StateMap);

    /// The id of the request that runs, if one does (busy).
    fn active_request(&self) -> Option<&str>;
}

/// The typed state in the ext, with the `__strategy__` object it matches.
///
/// `mirror` is a handle on the `__strategy__` map as the core last wrote
/// (or read) it. Holding it keeps the map shared, so any other write to
/// `__strategy__` (an action's effect, a state op, a replaced or restored
/// state) copies the map first and the pointers differ: the typed state
/// is then rebuilt from the JSON. The core's own writes release the
/// handle first (the write stays in place) and take a new one after.
#[derive(Clone)]
struct Typed {
    rev: u64,
    mirror: Option<StateMap>,
    state: Arc<dyn Any + Send + Sync>,
}

impl Typed {
    /// Whether `current` (the agent's `__strategy__`) is the map this
    /// typed state matches.
    fn matches(&self, current: Option<&StateMap>) -> bool {
        matches!((&self.mirror, current), (Some(m), Some(c)) if m.ptr_eq(c))
    }

    /// The state, mutably, when it is an `S` (copied first if shared with
    /// a clone of the agent).
    fn state_mut<S: RequestState>(&mut self) -> Option<&mut S> {
        if !self.state.is::<S>() {
            return None;
        }
        if Arc::get_mut(&mut self.state).is_none() {
            let copy: S = self.state.downcast_ref::<S>()?.clone();
            self.state = Arc::new(copy);
        }
        Arc::get_mut(&mut self.state)?.downcast_mut::<S>()
    }
}

/// The shared request handling of a reasoning strategy (see the
/// [module docs](self)). Cheap to clone; part of the strategy's
/// configuration.
#[derive(Clone, Debug)]
pub struct RequestCore {
    module: &'static str,
    events: Option<DispatchConfig>,
    history: usize,
}

impl RequestCore {
    /// The core of strategy `module` (its name, written as
    /// `__strategy__.module`): no events, the default history.
    pub fn new(module: &'static str) -> Self {
        RequestCore {
            module,
            events: None,
            history: DEFAULT_REQUEST_HISTORY,
        }
    }

    /// Where the request signals go (`ai.request.*` and the forwarded
    /// signals).
    #[must_use]
    pub fn events(mut self, dispatch: DispatchConfig) -> Self {
        self.events = Some(dispatch);
        self
    }

    /// How many requests `__strategy__.requests` keeps (at least 1).
    #[must_use]
    pub fn history(mut self, n: usize) -> Self {
        self.history = n.max(1);
        self
    }

    /// The strategy's name.
    pub fn module(&self) -> &'static str {
        self.module
    }

    /// The events dispatch, if any.
    pub fn events_dispatch(&self) -> Option<&DispatchConfig> {
        self.events.as_ref()
    }

    /// The request history length.
    pub fn history_len(&self) -> usize {
        self.history
    }

    // ------------------------------------------------------ typed state

    /// The mirror's revision when `__strategy__` belongs to this strategy.
    fn mirror_rev(&self, agent: &AgentData) -> Option<u64> {
        let st = agent.strategy_state()?;
        if st.get("module").and_then(StateValue::as_str) != Some(self.module) {
            return None;
        }
        Some(st.get(REV_KEY).and_then(StateValue::as_u64).unwrap_or(0))
    }

    /// Whether the ext holds an `S` matching `__strategy__` as it is now.
    fn is_fresh<S: RequestState>(agent: &AgentData) -> bool {
        agent
            .strategy_ext::<Typed>()
            .is_some_and(|t| t.state.is::<S>() && t.matches(agent.strategy_state()))
    }

    /// The typed state of `agent`, mutably: the ext's when `__strategy__`
    /// is the object the core last wrote, else rebuilt from `__strategy__`
    /// (or `Default` when the strategy state is not this strategy's). Any
    /// write to `__strategy__` not made through the core (an action's
    /// effect, a replaced or restored state) is seen here. Changes are not
    /// in the JSON until [`commit`](RequestCore::commit).
    pub fn state<'a, S: RequestState>(&self, agent: &'a mut AgentData) -> &'a mut S {
        if !Self::is_fresh::<S>(agent) {
            let rev = self.mirror_rev(agent);
            let state = match rev {
                Some(_) => agent.strategy_state().and_then(S::read).unwrap_or_default(),
                None => S::default(),
            };
            agent.set_strategy_ext(Typed {
                rev: rev.unwrap_or(0),
                mirror: agent.strategy_state().cloned(),
                state: Arc::new(state),
            });
        }
        match agent
            .strategy_ext_mut::<Typed>()
            .and_then(Typed::state_mut::<S>)
        {
            Some(state) => state,
            None => unreachable!("the typed state was just set"),
        }
    }

    /// The typed state of `agent` without changing it: borrowed from the
    /// ext when it matches `__strategy__`, else read from it; `None` when
    /// the strategy state is not this strategy's.
    pub fn peek<'a, S: RequestState>(&self, agent: &'a AgentData) -> Option<Cow<'a, S>> {
        self.mirror_rev(agent)?;
        let typed = agent
            .strategy_ext::<Typed>()
            .filter(|t| t.matches(agent.strategy_state()))
            .and_then(|t| t.state.downcast_ref::<S>());
        if let Some(typed) = typed {
            return Some(Cow::Borrowed(typed));
        }
        Some(Cow::Owned(
            agent.strategy_state().and_then(S::read).unwrap_or_default(),
        ))
    }

    /// Writes the typed state's changes into `__strategy__` (through
    /// [`RequestState::write`]) and bumps its revision. Call it after
    /// every change made through [`state`](RequestCore::state).
    pub fn commit<S: RequestState>(&self, agent: &mut AgentData) {
        if !agent
            .strategy_ext::<Typed>()
            .is_some_and(|t| t.state.is::<S>())
        {
            self.state::<S>(agent);
        }
        let module = self.module;
        Self::write_mirror(agent, true, |st, typed| {
            let Some(typed) = typed else {
                return;
            };
            if st.get("module").and_then(StateValue::as_str) != Some(module) {
                st.insert("module", module);
            }
            if let Some(state) = typed.state_mut::<S>() {
                state.write(st);
            }
            typed.rev += 1;
            st.insert(REV_KEY, typed.rev);
        });
    }

    /// Runs `f` on `__strategy__` (created when missing) and, when the
    /// typed state matched it before (or `always`), keeps it matching:
    /// the handle is released before the write, so that the write is in
    /// place, and taken again after it.
    fn write_mirror(
        agent: &mut AgentData,
        always: bool,
        f: impl FnOnce(&mut StateMap, Option<&mut Typed>),
    ) {
        let fresh = always
            || agent
                .strategy_ext::<Typed>()
                .is_some_and(|t| t.matches(agent.strategy_state()));
        let (state, ext) = agent.state_and_strategy_ext_mut::<Typed>();
        let mut typed = ext.filter(|_| fresh);
        if let Some(t) = typed.as_deref_mut() {
            t.mirror = None;
        }
        let st = state.object_mut(STRATEGY_KEY);
        f(st, typed.as_deref_mut());
        if let Some(t) = typed {
            t.mirror = Some(st.clone());
        }
    }

    /// Writes the module and the default state when `__strategy__` is not
    /// this strategy's yet (a strategy's `init`); a restored state is
    /// kept.
    pub fn init<S: RequestState>(&self, agent: &mut AgentData) {
        if self.mirror_rev(agent).is_none() {
            agent.set_strategy_ext(Typed {
                rev: 0,
                mirror: None,
                state: Arc::new(S::default()),
            });
            self.commit::<S>(agent);
        }
    }

    // --------------------------------------------------------- requests

    /// The request id of a request's params: `request_id` when it is a
    /// non-empty string, else a new UUID v7.
    pub fn request_id(params: &Value) -> String {
        params
            .get("request_id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map_or_else(|| uuid::Uuid::now_v7().to_string(), str::to_owned)
    }

    /// The busy rejection of `request_id`: one `ai.request.error`
    /// `{reason: "busy", message: "agent is busy (status: STATUS)"}`.
    /// Nothing else is to change.
    pub fn busy(&self, request_id: &str, status: &str) -> Directive {
        Self::reject(
            request_id,
            "busy",
            format!("agent is busy (status: {status})"),
        )
    }

    /// A rejection of `request_id` (`ai.request.error`), e.g.
    /// `invalid_request`.
    pub fn reject(request_id: &str, reason: &str, message: impl Into<String>) -> Directive {
        EmitRequestError::new(request_id, reason, message).into()
    }

    /// Records the start of `request_id` (`pending`, the history trimmed),
    /// sets the top-level `status: "running"`, `last_request_id`,
    /// `last_query`, `last_answer: ""` and `error: null`, and emits
    /// `ai.request.started`.
    pub fn start(
        &self,
        agent: &mut AgentData,
        request_id: &str,
        query: &str,
        out: &mut Vec<Directive>,
    ) {
        let state = agent.state_mut();
        state.insert("status", "running");
        state.insert("last_request_id", request_id);
        state.insert("last_query", query);
        state.insert("last_answer", "");
        state.insert("error", StateValue::Null);
        let mut entry = StateMap::with_capacity(6);
        entry.insert("query", query);
        entry.insert("status", RequestStatus::Pending.as_str());
        Self::write_mirror(agent, false, |st, _| {
            let requests = st.object_mut("requests");
            requests.remove(request_id);
            requests.insert(request_id, entry);
            self.trim(requests);
        });
        if self.events.is_some() {
            let mut data = Map::with_capacity(2);
            data.insert("request_id".into(), request_id.into());
            data.insert("query".into(), query.into());
            self.emit(REQUEST_STARTED, Value::Object(data), out);
        }
    }

    /// Records the end of `request_id`: `Ok(answer)` completes it
    /// (top-level `status: "completed"`, `last_answer`), `Err(error
    /// envelope)` fails it (`status: "failed"`, `error`); the record gets
    /// `termination_reason` and the summed `usage`; emits
    /// `ai.request.completed` or `ai.request.failed`.
    pub fn finish(
        &self,
        agent: &mut AgentData,
        request_id: &str,
        outcome: Result<Value, Value>,
        termination: &str,
        usage: &Usage,
        out: &mut Vec<Directive>,
    ) {
        Self::write_mirror(agent, false, |st, _| {
            let entry = st.object_mut("requests").object_mut(request_id);
            entry.insert("termination_reason", termination);
            entry.insert("usage", usage_state(usage));
            match &outcome {
                Ok(answer) => {
                    entry.insert("status", RequestStatus::Completed.as_str());
                    entry.insert("result", StateValue::from(answer));
                }
                Err(error) => {
                    entry.insert("status", RequestStatus::Failed.as_str());
                    entry.insert("error", StateValue::from(error));
                }
            }
        });
        let state = agent.state_mut();
        let (key, ty, status) = match &outcome {
            Ok(_) => ("result", REQUEST_COMPLETED, "completed"),
            Err(_) => ("error", REQUEST_FAILED, "failed"),
        };
        state.insert("status", status);
        match &outcome {
            Ok(answer) => state.insert("last_answer", StateValue::from(answer)),
            Err(error) => state.insert("error", StateValue::from(error)),
        };
        if self.events.is_some() {
            let value = match outcome {
                Ok(v) | Err(v) => v,
            };
            let mut data = Map::with_capacity(4);
            data.insert("request_id".into(), request_id.into());
            data.insert(key.into(), value);
            data.insert("termination_reason".into(), termination.into());
            data.insert("usage".into(), usage_json(usage));
            self.emit(ty, Value::Object(data), out);
        }
    }

    /// Records a request rejected with `ai.request.error` (its params):
    /// failed with `{type: "rejected", message, details: {reason},
    /// retryable: false}`, unless the id is already tracked (a busy
    /// rejection never touches the running or a finished request).
    pub fn record_rejection(&self, agent: &mut AgentData, params: &Value) {
        let Some(request_id) = params.get("request_id").and_then(Value::as_str) else {
            return;
        };
        let known = agent
            .strategy_state()
            .and_then(|s| s.get("requests"))
            .and_then(|r| r.get(request_id))
            .is_some();
        if known {
            return;
        }
        let error = json!({
            "type": "rejected",
            "message": params.get("message").cloned().unwrap_or(Value::Null),
            "details": {"reason": params.get("reason").cloned().unwrap_or(Value::Null)},
            "retryable": false,
        });
        let mut entry = StateMap::with_capacity(2);
        entry.insert("status", RequestStatus::Failed.as_str());
        entry.insert("error", StateValue::from(&error));
        Self::write_mirror(agent, false, |st, _| {
            let requests = st.object_mut("requests");
            requests.insert(request_id, entry);
            self.trim(requests);
        });
    }

    fn trim(&self, requests: &mut StateMap) {
        while requests.len() > self.history {
            let Some(oldest) = requests.keys().next().map(str::to_owned) else {
                break;
            };
            requests.remove(&oldest);
        }
    }

    /// The status of tracked request `request_id`, if tracked.
    pub fn request_status(agent: &AgentData, request_id: &str) -> Option<RequestStatus> {
        let st = agent.strategy_state()?.get("requests")?.get(request_id)?;
        RequestStatus::parse(st.get("status")?.as_str()?)
    }

    /// Options for [`AgentRef::await_completion`] waiting for request
    /// `request_id` (its entry in `__strategy__.requests`).
    ///
    /// [`AgentRef::await_completion`]: crate::server::AgentRef::await_completion
    pub fn await_options(request_id: &str) -> AwaitOptions {
        let at = |leaf: &str| {
            [STRATEGY_KEY, "requests", request_id, leaf]
                .map(str::to_owned)
                .to_vec()
        };
        AwaitOptions::new()
            .status_path(at("status"))
            .result_path(at("result"))
            .error_path(at("error"))
    }

    // ----------------------------------------------------- cancellation

    /// Reads cancel params `{request_id?, reason?}`: the request to cancel
    /// (`None`: whichever runs) and the reason (default
    /// `"user_cancelled"`).
    pub fn cancel_params(params: &Value) -> (Option<String>, String) {
        let request_id = params
            .get("request_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let reason = params
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_CANCEL_REASON)
            .to_owned();
        (request_id, reason)
    }

    /// Whether a cancel of `requested` (`None`: whichever runs) applies to
    /// the running request `active` (`None`: nothing runs).
    pub fn cancel_matches(active: Option<&str>, requested: Option<&str>) -> bool {
        match (active, requested) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(a), Some(r)) => a == r,
        }
    }

    /// The [`CancelRequest`] directive stopping the model stream and tool
    /// calls of `request_id`, and the error envelope to fail it with
    /// (`{type: "cancelled", message: "request cancelled", details:
    /// {reason}}`).
    pub fn cancel(request_id: &str, reason: &str) -> (Directive, Value) {
        let error = Error::cancelled("request cancelled").with_detail("reason", reason.to_owned());
        (
            CancelRequest::new(request_id).reason(reason).into(),
            error.to_envelope(),
        )
    }

    // ----------------------------------------------------------- events

    /// Re-emits the signal being handled to the events dispatch (when
    /// set).
    pub fn forward(&self, ctx: &StrategyContext, out: &mut Vec<Directive>) {
        if let (Some(events), Some(signal)) = (&self.events, ctx.signal()) {
            out.push(Directive::emit_to(signal.clone(), events.clone()));
        }
    }

    /// Emits a signal of type `ty` to the events dispatch (when set).
    pub fn emit(&self, ty: &str, data: Value, out: &mut Vec<Directive>) {
        if let Some(events) = &self.events {
            out.push(Directive::emit_to(Signal::new(ty, data), events.clone()));
        }
    }
}

/// `{input_tokens, output_tokens, total_tokens}` as state.
pub fn usage_state(u: &Usage) -> StateMap {
    let mut m = StateMap::with_capacity(3);
    m.insert("input_tokens", u.input_tokens);
    m.insert("output_tokens", u.output_tokens);
    m.insert("total_tokens", u.total_tokens);
    m
}

/// `{input_tokens, output_tokens, total_tokens}` as JSON.
pub fn usage_json(u: &Usage) -> Value {
    let mut m = Map::with_capacity(3);
    m.insert("input_tokens".into(), u.input_tokens.into());
    m.insert("output_tokens".into(), u.output_tokens.into());
    m.insert("total_tokens".into(), u.total_tokens.into());
    Value::Object(m)
}

/// Sets `key` to a string (or `null` for `None`) unless it already
/// holds it: a helper for [`RequestState::write`] (a comparison costs no
/// allocation, a write one).
pub fn set_str(map: &mut StateMap, key: &str, value: Option<&str>) {
    let same = match map.get(key) {
        Some(StateValue::Null) => value.is_none(),
        Some(StateValue::String(s)) => value == Some(&**s),
        _ => false,
    };
    if !same {
        map.insert(key, value);
    }
}

/// Sets `key` to a number unless it already holds it.
pub fn set_u64(map: &mut StateMap, key: &str, value: u64) {
    if map.get(key).and_then(StateValue::as_u64) != Some(value) {
        map.insert(key, value);
    }
}

/// Sets `key` to a boolean unless it already holds it.
pub fn set_bool(map: &mut StateMap, key: &str, value: bool) {
    if map.get(key).and_then(StateValue::as_bool) != Some(value) {
        map.insert(key, value);
    }
}

/// Sets `key` to a JSON value unless it already holds an equal one.
pub fn set_json(map: &mut StateMap, key: &str, value: &Value) {
    match map.get(key) {
        Some(old) if old == value => {}
        _ => {
            map.insert(key, StateValue::from(value));
        }
    }
}
