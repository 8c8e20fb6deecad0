//! What every request-driven reasoning strategy shares: [`RequestCore`].
//!
//! A reasoning strategy (ReAct, Chain of Thought, Tree of Thoughts, …)
//! answers *requests*: a question arrives as a signal, the strategy calls
//! the model and tools through directives, and the request ends completed
//! or failed. What is common to all of them lives here, so that every
//! strategy behaves the same way:
//!
//! * **Typed state in the strategy ext, JSON in `__strategy__`, built
//!   when read.** The strategy's own state (its machine) is a Rust value
//!   implementing [`RequestState`], kept in the agent's
//!   [strategy ext](crate::agent::AgentData::strategy_ext) and read there
//!   on every signal ([`RequestCore::state`]): no JSON decoding on the hot
//!   path. After each change, [`RequestCore::commit`] bumps the revision
//!   and sets `__strategy__` to a [lazy node](crate::state::LazyValue)
//!   holding a snapshot of the state: its JSON is built only when someone
//!   reads the state as JSON (a query, a checkpoint, serialisation), from
//!   the JSON built last, brought up to date with
//!   [`RequestState::write_since`] (only what changed is written, the rest
//!   stays shared). Readers see exactly the JSON an eager mirror would
//!   hold; an unchanged `__strategy__` is the same node. An agent whose
//!   ext is missing (restored, or built from a state) or does not match
//!   `__strategy__` rebuilds the typed state from its JSON on first use
//!   ([`RequestState::read`]). The ext keeps the value the core last
//!   wrote, so any other write to `__strategy__` (an action's or a tool's
//!   effect, a state op, a replaced state), which turns the node into
//!   plain JSON first, is seen. Apply a tool's effects after the commit of
//!   the turn that received them.
//! * **Requests tracked by id.** `__strategy__.requests.ID` `{query,
//!   status: pending | completed | failed, result, error,
//!   termination_reason, usage}` for the latest
//!   [`DEFAULT_REQUEST_HISTORY`] requests (oldest dropped), awaited with
//!   [`RequestCore::await_options`]; a rejected request is recorded as
//!   failed with a `rejected` error unless its id is known. The history is
//!   typed as well: a persistent structure in the ext (recording a start,
//!   an end or trimming the oldest copies one small chunk, never the
//!   map, even while a copy of the agent shares it), shown as a lazy
//!   `requests` object built when read whole and kept until it changes;
//!   one record read by path builds nothing.
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
use std::sync::{Arc, LazyLock};

use serde_json::{Map, Value, json};

use super::client::Usage;
use super::directive::{CancelRequest, DEFAULT_CANCEL_REASON, EmitRequestError};
use crate::agent::{AgentData, STRATEGY_KEY};
use crate::directive::Directive;
use crate::error::Error;
use crate::server::AwaitOptions;
use crate::signal::Signal;
use crate::signal::dispatch::DispatchConfig;
use crate::state::{LazyValue, StateMap, StateSource, StateValue};
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

/// A strategy's typed state, kept in the strategy ext and shown as JSON
/// under `__strategy__` (see the [module docs](self)).
pub trait RequestState: Clone + Default + Send + Sync + 'static {
    /// Rebuilds the state from its JSON (a restored agent, or one whose
    /// `__strategy__` was written from outside); `None` when it cannot be
    /// read (the strategy then starts from `Default`).
    fn read(from: &StateMap) -> Option<Self>;

    /// Brings the JSON `into` (the `__strategy__` object) up to date.
    /// It holds an earlier JSON of the state (or whatever a restored
    /// state had): write only the fields that differ, so that a signal
    /// changing one field costs one write. Leave the keys `module`, `rev`
    /// and `requests` alone (the core's).
    fn write(&self, into: &mut StateMap);

    /// As [`write`](RequestState::write), knowing that `into` is the JSON
    /// of `prev` (what the core built or read last): a state that grows
    /// (a conversation) can append what is new instead of comparing.
    /// `None` when the state `into` shows is not known. By default,
    /// `write`.
    fn write_since(&self, into: &mut StateMap, prev: Option<&Self>) {
        let _ = prev;
        self.write(into);
    }

    /// The id of the request that runs, if one does (busy).
    fn active_request(&self) -> Option<&str>;
}

type Shared = Arc<dyn Any + Send + Sync>;

/// Writes the typed state of a [`Mirror`] into a JSON map (one per
/// state type: `write_typed::<S>`).
type Writer = fn(&Mirror, &mut StateMap);

/// The latest JSON of `__strategy__` the core knows, and the typed state
/// it shows (`None`: not known, the next JSON is written in full).
#[derive(Clone, Default)]
struct Base {
    json: StateMap,
    state: Option<Shared>,
}

/// What a lazy `__strategy__` is built from: the base JSON, brought up to
/// date with the typed state, the module, the revision and the requests.
struct Mirror {
    module: &'static str,
    rev: u64,
    base: Base,
    /// `requests`: the [`HistoryNode`] of the ext's records.
    requests: Option<StateValue>,
    state: Shared,
    write: Writer,
}

impl StateSource for Mirror {
    fn to_state(&self) -> StateValue {
        let mut json = self.base.json.clone();
        set_str(&mut json, "module", Some(self.module));
        (self.write)(self, &mut json);
        set_u64(&mut json, REV_KEY, self.rev);
        if let Some(requests) = &self.requests {
            let same = json.get("requests").is_some_and(|r| r.ptr_eq(requests));
            if !same {
                json.insert("requests", requests.clone());
            }
        }
        StateValue::Object(json)
    }

    /// `requests` without building the rest (what `await_completion`
    /// reads after every signal).
    fn get(&self, key: &str) -> Option<&StateValue> {
        match key {
            "requests" => self.requests.as_ref(),
            _ => None,
        }
    }
}

fn write_typed<S: RequestState>(mirror: &Mirror, into: &mut StateMap) {
    let Some(state) = mirror.state.downcast_ref::<S>() else {
        return;
    };
    let prev = mirror
        .base
        .state
        .as_deref()
        .and_then(|p| p.downcast_ref::<S>());
    state.write_since(into, prev);
}

/// What the snapshot and the published node hold while the typed state is
/// lent to a transition (see [`RequestCore::state_in_place`]): no state
/// (a node built meanwhile would show none of the machine; nothing reads
/// it before the commit or the settle puts the state back).
struct Lent;

/// The typed state in the ext, with the `__strategy__` value it matches.
///
/// `current` is `__strategy__` as the core last wrote it (a lazy node
/// built from `snapshot`, see [`Mirror`]) or read it (the object the
/// typed state was rebuilt from). Any other write to `__strategy__` (an
/// action's effect, a state op, a replaced or restored state) replaces
/// that value (a write to a lazy node replaces it with its JSON; a write
/// to a shared map copies it): the pointers differ and the typed state is
/// rebuilt from the JSON.
#[derive(Clone)]
struct Typed {
    /// The module of the core that set it.
    module: &'static str,
    rev: u64,
    current: Option<StateValue>,
    base: Base,
    /// The request records (`__strategy__.requests`), when known.
    requests: Option<Requests>,
    /// The state the strategy changes (through `state`).
    state: Shared,
    /// The state `current` shows, and how to write it: `None` until the
    /// first commit when `__strategy__` is not this strategy's.
    snapshot: Option<(Shared, Writer)>,
    /// Where `__strategy__` was in the agent's state when last looked up
    /// (a hint: checked against the key at every use).
    slot: usize,
}

impl Typed {
    /// Whether `current` (the agent's `__strategy__`) is the value this
    /// typed state matches.
    fn matches(&self, current: Option<&StateValue>) -> bool {
        match (&self.current, current) {
            (Some(StateValue::Lazy(a)), Some(StateValue::Lazy(b))) => a.ptr_eq(b),
            (Some(StateValue::Object(a)), Some(StateValue::Object(b))) => a.ptr_eq(b),
            _ => false,
        }
    }

    /// The state, mutably, when it is an `S` (copied first if shared with
    /// a clone of the agent or with the published snapshot).
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

    /// A new lazy `__strategy__` showing the snapshot: the base moves to
    /// the current node's JSON when someone built it.
    fn node(&mut self, module: &'static str) -> Option<LazyValue> {
        let (state, write) = self.snapshot.clone()?;
        if let Some(StateValue::Lazy(node)) = &self.current
            && let (Some(StateValue::Object(json)), Some(mirror)) =
                (node.built(), node.source::<Mirror>())
        {
            self.base = Base {
                json: json.clone(),
                state: Some(Arc::clone(&mirror.state)),
            };
        }
        Some(LazyValue::new(Mirror {
            module,
            rev: self.rev,
            base: self.base.clone(),
            requests: self.requests.as_ref().map(Requests::node),
            state,
            write,
        }))
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

    /// The mirror's revision when `__strategy__` belongs to this strategy
    /// (reads the JSON).
    fn mirror_rev(&self, agent: &AgentData) -> Option<u64> {
        let st = agent.strategy_state()?;
        if st.get("module").and_then(StateValue::as_str) != Some(self.module) {
            return None;
        }
        Some(st.get(REV_KEY).and_then(StateValue::as_u64).unwrap_or(0))
    }

    /// The ext when it matches `__strategy__` as it is now.
    fn fresh(agent: &AgentData) -> Option<&Typed> {
        agent.strategy_ext::<Typed>().filter(|t| {
            let current = agent.state().get_hinted(STRATEGY_KEY, t.slot);
            t.matches(current.map(|(_, v)| v))
        })
    }

    /// The typed state of `agent`, mutably: the ext's when `__strategy__`
    /// is the value the core last wrote, else rebuilt from `__strategy__`
    /// (or `Default` when the strategy state is not this strategy's). Any
    /// write to `__strategy__` not made through the core (an action's
    /// effect, a replaced or restored state) is seen here. Changes are not
    /// in `__strategy__` until [`commit`](RequestCore::commit).
    pub fn state<'a, S: RequestState>(&self, agent: &'a mut AgentData) -> &'a mut S {
        if !Self::fresh(agent).is_some_and(|t| t.state.is::<S>()) {
            self.rebuild::<S>(agent);
        }
        Self::typed_mut(agent)
    }

    /// The ext's typed state, mutably (copied first if shared), once the
    /// ext is known to hold an `S`.
    fn typed_mut<S: RequestState>(agent: &mut AgentData) -> &mut S {
        match agent
            .strategy_ext_mut::<Typed>()
            .and_then(Typed::state_mut::<S>)
        {
            Some(state) => state,
            None => unreachable!("the typed state was just set"),
        }
    }

    /// The typed state of `agent`, to read: as [`state`](Self::state)
    /// finds it, but never copied (after a commit the published snapshot
    /// shares it; only a write through `state` copies it).
    pub fn state_ref<'a, S: RequestState>(&self, agent: &'a mut AgentData) -> &'a S {
        if !Self::fresh(agent).is_some_and(|t| t.state.is::<S>()) {
            self.rebuild::<S>(agent);
        }
        match agent
            .strategy_ext::<Typed>()
            .and_then(|t| t.state.downcast_ref::<S>())
        {
            Some(state) => state,
            None => unreachable!("the typed state was just set"),
        }
    }

    /// Sets the ext from `__strategy__` as it is.
    fn rebuild<S: RequestState>(&self, agent: &mut AgentData) {
        let json = agent.strategy_state().cloned();
        let ours = self.mirror_rev(agent);
        let read = match (&json, ours) {
            (Some(json), Some(_)) => S::read(json),
            _ => None,
        };
        let known = read.is_some();
        let state: Shared = Arc::new(read.unwrap_or_default());
        let snapshot = known.then(|| (Arc::clone(&state), write_typed::<S> as Writer));
        let requests = Requests::read(json.as_ref().and_then(|j| j.get("requests")));
        agent.set_strategy_ext(Typed {
            module: self.module,
            rev: ours.unwrap_or(0),
            current: json.clone().map(StateValue::Object),
            base: Base {
                json: json.unwrap_or_default(),
                state: snapshot.as_ref().map(|(s, _)| Arc::clone(s)),
            },
            requests,
            state,
            snapshot,
            slot: 0,
        });
        // `current` must be the object in the state: a lazy node read
        // above is replaced by the JSON it built (the same contents).
        if let Some(Some(StateValue::Object(json))) =
            agent.strategy_ext::<Typed>().map(|t| t.current.clone())
        {
            let slot = agent.state().get(STRATEGY_KEY);
            if !matches!(slot, Some(StateValue::Object(m)) if m.ptr_eq(&json)) {
                agent.state_mut().insert(STRATEGY_KEY, json);
            }
        }
    }

    /// The typed state of `agent` without changing it: borrowed from the
    /// ext when it matches `__strategy__`, else read from it; `None` when
    /// the strategy state is not this strategy's.
    pub fn peek<'a, S: RequestState>(&self, agent: &'a AgentData) -> Option<Cow<'a, S>> {
        if let Some(t) = Self::fresh(agent)
            && t.snapshot.is_some()
            && t.module == self.module
            && let Some(typed) = t.state.downcast_ref::<S>()
        {
            return Some(Cow::Borrowed(typed));
        }
        self.mirror_rev(agent)?;
        Some(Cow::Owned(
            agent.strategy_state().and_then(S::read).unwrap_or_default(),
        ))
    }

    /// Publishes the typed state's changes as `__strategy__` (a lazy node
    /// built from a snapshot of the state, see [`RequestState::write`])
    /// and bumps its revision. Call it after every change made through
    /// [`state`](RequestCore::state).
    pub fn commit<S: RequestState>(&self, agent: &mut AgentData) {
        if !agent
            .strategy_ext::<Typed>()
            .is_some_and(|t| t.state.is::<S>())
        {
            self.state::<S>(agent);
        }
        let fresh = Self::fresh(agent).is_some();
        let (state, ext) = agent.state_and_strategy_ext_mut::<Typed>();
        let Some(typed) = ext else {
            return;
        };
        if !fresh {
            // Written from outside since the ext was set: the write is
            // kept (the base is the JSON as it is now).
            let json = state
                .get(STRATEGY_KEY)
                .and_then(StateValue::as_object)
                .cloned()
                .unwrap_or_default();
            typed.requests = Requests::read(json.get("requests"));
            typed.base = Base { json, state: None };
            typed.current = None;
        }
        if !typed.state.is::<S>() {
            return;
        }
        // The snapshot shares the state: the next write through `state`
        // copies it (a commit copies nothing).
        typed.snapshot = Some((Arc::clone(&typed.state), write_typed::<S>));
        typed.rev += 1;
        Self::publish(state, typed, self.module);
    }

    /// [`state`](Self::state) for a transition the caller commits at once
    /// ([`commit_after_state`](Self::commit_after_state)) or settles
    /// ([`settle`](Self::settle)) with nothing read or written in between
    /// (the driver). When `__strategy__` is the node this core published
    /// and nothing but the agent's state holds it (no clone of the state,
    /// never read), the node lends the typed state back, so the transition
    /// changes it in place rather than copying it; the commit or the
    /// settle gives the node its state again.
    pub(crate) fn state_in_place<'a, S: RequestState>(
        &self,
        agent: &'a mut AgentData,
    ) -> &'a mut S {
        let fresh = Self::fresh(agent).is_some_and(|t| t.state.is::<S>());
        if !fresh {
            self.rebuild::<S>(agent);
        }
        // One look at the ext for the lending and the state.
        let (state, ext) = agent.state_and_strategy_ext_mut::<Typed>();
        let typed = ext.and_then(|typed| {
            if fresh {
                Self::lend(state, typed);
            }
            typed.state_mut::<S>()
        });
        match typed {
            Some(s) => s,
            None => unreachable!("the typed state was just set"),
        }
    }

    /// Takes the typed state's handles from the snapshot and the published
    /// node when they are the state itself and the node is held by the
    /// agent's state alone (see [`LazyValue::source_mut`]).
    fn lend(state: &mut StateMap, typed: &mut Typed) {
        let shared = typed
            .snapshot
            .as_ref()
            .is_some_and(|(s, _)| Arc::ptr_eq(s, &typed.state));
        if !shared {
            return;
        }
        Self::with_sole_mirror(state, typed, |mirror, typed| {
            static LENT: LazyLock<Shared> = LazyLock::new(|| Arc::new(Lent));
            mirror.state = Arc::clone(&LENT);
            if let Some((snapshot, _)) = &mut typed.snapshot {
                *snapshot = Arc::clone(&LENT);
            }
            true
        });
    }

    /// Runs `f` on the source of `__strategy__` when it is the node this
    /// core published, never built, and held by the agent's state alone
    /// (see [`LazyValue::source_mut`]); `f`'s answer, `false` when it
    /// cannot run. `typed.current` is the same node afterwards.
    fn with_sole_mirror(
        state: &mut StateMap,
        typed: &mut Typed,
        f: impl FnOnce(&mut Mirror, &mut Typed) -> bool,
    ) -> bool {
        // A map shared with a copy of the state shares the node too (the
        // copy holds it as well once the map is made this state's own):
        // `f` could not run, and the map is not copied for nothing.
        if state.is_shared() {
            return false;
        }
        let ours = match typed.current.take() {
            Some(StateValue::Lazy(ours)) if ours.built().is_none() => ours,
            other => {
                typed.current = other;
                return false;
            }
        };
        let Some((index, StateValue::Lazy(slot))) = state.get_mut_hinted(STRATEGY_KEY, typed.slot)
        else {
            typed.current = Some(StateValue::Lazy(ours));
            return false;
        };
        typed.slot = index;
        if !slot.ptr_eq(&ours) {
            typed.current = Some(StateValue::Lazy(ours));
            return false;
        }
        // Our handle released, the state's may be the only one left.
        drop(ours);
        let done = match slot.source_mut::<Mirror>() {
            Some(mirror) => f(mirror, typed),
            None => false,
        };
        typed.current = Some(StateValue::Lazy(slot.clone()));
        done
    }

    /// Ends a transition of [`state_in_place`](Self::state_in_place) that
    /// is not committed (ignored, or a rejection): the node gets its state
    /// back, revision unchanged.
    pub(crate) fn settle<S: RequestState>(&self, agent: &mut AgentData) {
        let (state, ext) = agent.state_and_strategy_ext_mut::<Typed>();
        let Some(typed) = ext else {
            return;
        };
        let lent = typed.snapshot.as_ref().is_some_and(|(s, _)| s.is::<Lent>());
        if lent {
            typed.snapshot = Some((Arc::clone(&typed.state), write_typed::<S>));
            Self::publish(state, typed, self.module);
        }
    }

    /// [`commit`](Self::commit) right after [`state`](Self::state) with
    /// no write to the agent in between (the driver: the machine's
    /// transition only), so the ext is known to match `__strategy__`
    /// without looking it up again.
    pub(crate) fn commit_after_state<S: RequestState>(&self, agent: &mut AgentData) {
        let matched = agent
            .strategy_ext::<Typed>()
            .is_some_and(|t| t.current.is_some() && t.state.is::<S>());
        if !matched {
            return self.commit::<S>(agent);
        }
        let (state, ext) = agent.state_and_strategy_ext_mut::<Typed>();
        if let Some(typed) = ext {
            typed.snapshot = Some((Arc::clone(&typed.state), write_typed::<S>));
            typed.rev += 1;
            Self::publish(state, typed, self.module);
        }
    }

    /// Sets `__strategy__` to a node showing the ext: the current one,
    /// changed in place, when this core is all that holds it and no one
    /// read it (within one command: a commit, then the request record),
    /// else a new one.
    fn publish(state: &mut StateMap, typed: &mut Typed, module: &'static str) {
        if Self::republish(state, typed, module) {
            return;
        }
        if let Some(node) = typed.node(module) {
            typed.slot = state.insert_full(STRATEGY_KEY, StateValue::Lazy(node.clone()));
            typed.current = Some(StateValue::Lazy(node));
        }
    }

    /// Publishes by changing the current node in place (see
    /// [`LazyValue::source_mut`]); `false` when it cannot (the node is
    /// shared, built, or not the one in the state).
    fn republish(state: &mut StateMap, typed: &mut Typed, module: &'static str) -> bool {
        if typed.snapshot.is_none() {
            return false;
        }
        Self::with_sole_mirror(state, typed, |mirror, typed| {
            let Some((snapshot, write)) = &typed.snapshot else {
                return false;
            };
            if mirror.module != module {
                return false;
            }
            mirror.rev = typed.rev;
            mirror.requests = typed.requests.as_ref().map(Requests::node);
            mirror.state = Arc::clone(snapshot);
            mirror.write = *write;
            true
        })
    }

    /// Runs `f` on the request records: in the ext (then published) when
    /// it matches `__strategy__` and knows the state, else on the JSON
    /// (read into a history, changed, and written back as its node).
    fn update_requests(&self, agent: &mut AgentData, f: impl FnOnce(&mut History)) {
        let typed_path = Self::fresh(agent).is_some_and(|t| t.snapshot.is_some());
        if typed_path {
            let (state, ext) = agent.state_and_strategy_ext_mut::<Typed>();
            if let Some(typed) = ext {
                // The published node lets go of the records when it alone
                // holds them: the write below then changes them in place
                // (else it copies the chunk it touches and the vector's
                // path to it; the publish right after shows the new
                // records).
                Self::with_sole_mirror(state, typed, |mirror, _| {
                    mirror.requests = None;
                    true
                });
                f(typed
                    .requests
                    .get_or_insert_with(Requests::default)
                    .history_mut());
                Self::publish(state, typed, self.module);
            }
            return;
        }
        let fresh = Self::fresh(agent).is_some();
        let (state, ext) = agent.state_and_strategy_ext_mut::<Typed>();
        let mut typed = ext.filter(|_| fresh);
        if let Some(t) = typed.as_deref_mut() {
            // Release the handle: the write stays in place.
            t.current = None;
            t.base = Base::default();
        }
        let st = state.object_mut(STRATEGY_KEY);
        // Not an object (or missing): a new history, as a write into an
        // object made where there was none.
        let mut requests = Requests::read(st.get("requests")).unwrap_or_default();
        f(requests.history_mut());
        st.insert("requests", requests.node());
        if let Some(t) = typed {
            t.current = Some(StateValue::Object(st.clone()));
            t.requests = Some(requests);
            t.base = Base {
                json: st.clone(),
                state: t.snapshot.as_ref().map(|(s, _)| Arc::clone(s)),
            };
        }
    }

    /// The record of `request_id` (the ext's when current, else the
    /// JSON's).
    fn record<'a>(agent: &'a AgentData, request_id: &str) -> Option<&'a StateValue> {
        match Self::fresh(agent) {
            Some(t) if t.snapshot.is_some() => t.requests.as_ref()?.history().get(request_id),
            _ => agent.strategy_state()?.get("requests")?.get(request_id),
        }
    }

    /// Writes the module and the default state when `__strategy__` is not
    /// this strategy's yet (a strategy's `init`); a restored state is
    /// kept.
    pub fn init<S: RequestState>(&self, agent: &mut AgentData) {
        let ours = Self::fresh(agent)
            .is_some_and(|t| t.snapshot.is_some() && t.module == self.module)
            || self.mirror_rev(agent).is_some();
        if !ours {
            // Not this strategy's: the ext from `__strategy__` as it is
            // (the default typed state), then the default written.
            self.rebuild::<S>(agent);
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
        // One handle for the id: the top-level value and the record's key.
        self.start_shared(agent, Arc::from(request_id), StateValue::from(query), out);
    }

    /// [`start`](Self::start) with the id and the query (a string) as the
    /// state holds them.
    pub(crate) fn start_shared(
        &self,
        agent: &mut AgentData,
        id: Arc<str>,
        query_value: StateValue,
        out: &mut Vec<Directive>,
    ) {
        static RUNNING: LazyLock<StateValue> = LazyLock::new(|| StateValue::from("running"));
        static EMPTY: LazyLock<StateValue> = LazyLock::new(|| StateValue::from(""));
        let keys = &*TOP_KEYS;
        let state = agent.state_mut();
        if !keys.last_request_id.in_state(state) {
            // A first request: the five keys are new, the map grows once.
            state.reserve(5);
        }
        // Each written only when it changes (`error` stays null after a
        // success, a request id or query may repeat).
        keys.status.set(state, RUNNING.clone());
        keys.last_request_id.set(state, Arc::clone(&id));
        keys.last_query.set(state, query_value.clone());
        keys.last_answer.set(state, EMPTY.clone());
        keys.error.set(state, StateValue::Null);
        let event = self.events.is_some().then(|| {
            let mut data = Map::with_capacity(2);
            data.insert("request_id".into(), id.as_ref().into());
            data.insert("query".into(), query_value.as_str().unwrap_or("").into());
            Value::Object(data)
        });
        let entry = StateValue::Lazy(LazyValue::new(Record::new(query_value, None)));
        self.update_requests(agent, |history| {
            history.push(id, entry);
            history.trim(self.history);
        });
        if let Some(data) = event {
            self.emit(REQUEST_STARTED, data, out);
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
        let ok = outcome.is_ok();
        // The JSON is kept for the event when there is one, else the
        // value is moved into the state (not copied, then dropped).
        let (value, event_value) = match (outcome, &self.events) {
            (Ok(v) | Err(v), Some(_)) => (StateValue::from(&v), Some(v)),
            (Ok(v) | Err(v), None) => (StateValue::from(v), None),
        };
        self.update_requests(agent, |history| {
            // The record `start` wrote: finished as a new record; any
            // other entry (none, read from JSON, finished) in place.
            let at = history.find(request_id);
            let started = match at.and_then(|(c, i)| history.at(c, i)) {
                Some(StateValue::Lazy(node)) => node
                    .source::<Record>()
                    .filter(|r| r.end.is_none())
                    .map(|r| r.query.clone()),
                _ => None,
            };
            if let (Some(query), Some((c, i))) = (started, at) {
                let end = RecordEnd {
                    termination: StateValue::from(termination),
                    usage: *usage,
                    ok,
                    value: value.clone(),
                };
                let record = Record::new(query, Some(end));
                history.set_at(c, i, StateValue::Lazy(LazyValue::new(record)));
                return;
            }
            let entry = history.object_mut(request_id);
            entry.insert("termination_reason", termination);
            entry.insert("usage", usage_state(usage));
            if ok {
                entry.insert("status", RequestStatus::Completed.as_str());
                entry.insert("result", value.clone());
            } else {
                entry.insert("status", RequestStatus::Failed.as_str());
                entry.insert("error", value.clone());
            }
        });
        static ENDED: LazyLock<[StateValue; 2]> =
            LazyLock::new(|| ["completed", "failed"].map(StateValue::from));
        let keys = &*TOP_KEYS;
        let state = agent.state_mut();
        let (key, ty, status) = if ok {
            ("result", REQUEST_COMPLETED, &ENDED[0])
        } else {
            ("error", REQUEST_FAILED, &ENDED[1])
        };
        keys.status.set(state, status.clone());
        if ok {
            keys.last_answer.set(state, value);
        } else {
            keys.error.set(state, value);
        }
        if let Some(value) = event_value {
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
        let known = Self::record(agent, request_id).is_some();
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
        self.update_requests(agent, |history| {
            history.set(request_id, StateValue::Object(entry));
            history.trim(self.history);
        });
    }

    /// The status of tracked request `request_id`, if tracked.
    pub fn request_status(agent: &AgentData, request_id: &str) -> Option<RequestStatus> {
        let st = Self::record(agent, request_id)?;
        if let StateValue::Lazy(node) = st
            && let Some(record) = node.source::<Record>()
        {
            return Some(record.request_status());
        }
        RequestStatus::parse(st.get("status")?.as_str()?)
    }

    /// Options for [`AgentRef::await_completion`] waiting for request
    /// `request_id` (its entry in `__strategy__.requests`).
    ///
    /// [`AgentRef::await_completion`]: crate::server::AgentRef::await_completion
    pub fn await_options(request_id: &str) -> AwaitOptions {
        // The fixed keys borrowed: one copy of the id per path.
        let id: Cow<'static, str> = Cow::Owned(request_id.to_owned());
        let at = |leaf: &'static str| {
            Cow::Owned(vec![
                Cow::Borrowed(STRATEGY_KEY),
                Cow::Borrowed("requests"),
                id.clone(),
                Cow::Borrowed(leaf),
            ])
        };
        AwaitOptions::new().paths(at("status"), at("result"), at("error"))
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

/// The top-level keys `start` and `finish` write, held once (a new key
/// shares its handle instead of copying the text), each with the index it
/// had when last written (a hint: agents of one kind lay their state out
/// alike, so the key is found there without hashing).
struct TopKeys {
    status: TopKey,
    last_request_id: TopKey,
    last_query: TopKey,
    last_answer: TopKey,
    error: TopKey,
}

struct TopKey {
    name: Arc<str>,
    hint: std::sync::atomic::AtomicUsize,
}

impl TopKey {
    fn new(name: &str) -> Self {
        TopKey {
            name: Arc::from(name),
            hint: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Sets the key in `state` to `value` (left alone when it holds the
    /// same scalar already: see [`StateMap::set_shared_hinted`]).
    fn set(&self, state: &mut StateMap, value: impl Into<StateValue>) {
        use std::sync::atomic::Ordering::Relaxed;
        let hint = self.hint.load(Relaxed);
        let index = state.set_shared_hinted(&self.name, hint, value.into());
        if index != hint {
            self.hint.store(index, Relaxed);
        }
    }

    /// Whether `state` has the key.
    fn in_state(&self, state: &StateMap) -> bool {
        let hint = self.hint.load(std::sync::atomic::Ordering::Relaxed);
        state.get_hinted(&self.name, hint).is_some()
    }
}

static TOP_KEYS: LazyLock<TopKeys> = LazyLock::new(|| TopKeys {
    status: TopKey::new("status"),
    last_request_id: TopKey::new("last_request_id"),
    last_query: TopKey::new("last_query"),
    last_answer: TopKey::new("last_answer"),
    error: TopKey::new("error"),
});

/// The request records (`__strategy__.requests`): by id, in the order
/// they were added, oldest first. Persistent: records sit in chunks of
/// [`CHUNK`] entries held by a persistent vector, so a clone shares
/// everything and a write to a shared history (the published node and a
/// copy of the agent hold one) copies one chunk and the vector's O(log n)
/// path, never the whole history. Adding a request, trimming the oldest
/// and finishing one never rebuild a map; the JSON object is built from
/// it only when read ([`HistoryNode`]). An id is found by comparing
/// hashes newest first, skipping the chunks whose mask rules it out (no
/// index to copy on every write).
#[derive(Clone, Default)]
struct History {
    /// Oldest first; only the last chunk has room.
    chunks: imbl::Vector<Arc<Chunk>>,
    /// The entries of the first chunk already trimmed.
    skip: usize,
    /// Live records.
    len: usize,
    /// Removed entries (an id started again) not trimmed yet.
    dead: usize,
}

/// The entries of a [`History`] chunk (8: fewer records to copy when a
/// shared chunk is written, few chunks to index; measured against 4 and 16).
const CHUNK: usize = 8;

/// Up to [`CHUNK`] entries, and which ids they may hold.
struct Chunk {
    /// Bit `hash % 64` of every id added: an id whose bit is clear is not
    /// here (a miss skips the chunk).
    mask: u64,
    entries: Vec<Entry>,
}

impl Chunk {
    fn push(&mut self, entry: Entry) {
        self.mask |= 1 << (entry.hash & 63);
        self.entries.push(entry);
    }

    /// A copy with room for the whole chunk.
    fn copy(&self) -> Chunk {
        let mut entries = Vec::with_capacity(CHUNK);
        entries.extend(self.entries.iter().cloned());
        Chunk {
            mask: self.mask,
            entries,
        }
    }

    fn may_hold(&self, hash: u64) -> bool {
        self.mask & (1 << (hash & 63)) != 0
    }
}

impl std::ops::Deref for Chunk {
    type Target = [Entry];
    fn deref(&self) -> &[Entry] {
        &self.entries
    }
}

#[derive(Clone)]
struct Entry {
    hash: u64,
    id: Arc<str>,
    /// `None`: removed (the id was started again, later).
    record: Option<StateValue>,
}

fn id_hash(id: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::default().hash_one(id)
}

impl History {
    /// The records of a JSON object, in its order (any value kept as it
    /// is: a record that is not an object is shown as it was).
    fn from_map(map: &StateMap) -> Self {
        let mut history = History::default();
        for (id, record) in map.iter() {
            history.append(Arc::from(id), record.clone());
        }
        history
    }

    /// The first entry of chunk `c` still in the history.
    fn first(&self, c: usize) -> usize {
        if c == 0 { self.skip } else { 0 }
    }

    /// Where the record of `id` is (chunk, entry), looked up newest
    /// first.
    fn find(&self, id: &str) -> Option<(usize, usize)> {
        self.find_hashed(id_hash(id), id)
    }

    /// [`find`](Self::find) knowing the id's hash.
    fn find_hashed(&self, hash: u64, id: &str) -> Option<(usize, usize)> {
        for (c, chunk) in self.chunks.iter().enumerate().rev() {
            if !chunk.may_hold(hash) {
                continue;
            }
            let first = self.first(c).min(chunk.len());
            let found = chunk[first..]
                .iter()
                .rposition(|e| e.hash == hash && e.record.is_some() && *e.id == *id);
            if let Some(i) = found {
                return Some((c, first + i));
            }
        }
        None
    }

    /// The record of entry `i` of chunk `c`.
    fn at(&self, c: usize, i: usize) -> Option<&StateValue> {
        self.chunks.get(c)?.get(i)?.record.as_ref()
    }

    /// The record of `id`.
    fn get(&self, id: &str) -> Option<&StateValue> {
        let (c, i) = self.find(id)?;
        self.at(c, i)
    }

    /// Entry `i` of chunk `c`, to change: the chunk is copied first when
    /// shared.
    fn entry_mut(&mut self, c: usize, i: usize) -> Option<&mut Entry> {
        let chunk = self.chunks.get_mut(c)?;
        if Arc::get_mut(chunk).is_none() {
            *chunk = Arc::new(chunk.copy());
        }
        Arc::get_mut(chunk)?.entries.get_mut(i)
    }

    /// Adds `id` last (it must not be there).
    fn append(&mut self, id: Arc<str>, record: StateValue) {
        self.append_hashed(id_hash(&id), id, record);
    }

    /// [`append`](Self::append) knowing the id's hash.
    fn append_hashed(&mut self, hash: u64, id: Arc<str>, record: StateValue) {
        let entry = Entry {
            hash,
            id,
            record: Some(record),
        };
        self.len += 1;
        if let Some(last) = self.chunks.back_mut()
            && last.len() < CHUNK
        {
            match Arc::get_mut(last) {
                Some(chunk) => chunk.push(entry),
                None => {
                    let mut copy = last.copy();
                    copy.push(entry);
                    *last = Arc::new(copy);
                }
            }
            return;
        }
        let mut chunk = Chunk {
            mask: 0,
            entries: Vec::with_capacity(CHUNK),
        };
        chunk.push(entry);
        self.chunks.push_back(Arc::new(chunk));
    }

    /// Sets the record of `id`, last (moved there if it was tracked).
    fn push(&mut self, id: Arc<str>, record: StateValue) {
        let hash = id_hash(&id);
        if let Some((c, i)) = self.find_hashed(hash, &id)
            && let Some(old) = self.entry_mut(c, i)
        {
            old.record = None;
            self.len -= 1;
            self.dead += 1;
        }
        self.append_hashed(hash, id, record);
        if self.dead > self.len.max(CHUNK) {
            self.compact();
        }
    }

    /// Sets the record of `id`, in its place when tracked, else last.
    fn set(&mut self, id: &str, record: StateValue) {
        match self.find(id) {
            Some((c, i)) => self.set_at(c, i, record),
            None => self.append(Arc::from(id), record),
        }
    }

    /// Sets the record of entry `i` of chunk `c` (found by
    /// [`find`](Self::find)).
    fn set_at(&mut self, c: usize, i: usize, record: StateValue) {
        if let Some(e) = self.entry_mut(c, i) {
            e.record = Some(record);
        }
    }

    /// The record of `id` as an object to change: created last when
    /// missing, replaced by an empty object when not an object, built
    /// when lazy (as [`StateMap::object_mut`]).
    fn object_mut(&mut self, id: &str) -> &mut StateMap {
        let (c, i) = match self.find(id) {
            Some(at) => at,
            None => {
                self.append(Arc::from(id), StateValue::Object(StateMap::new()));
                let c = self.chunks.len() - 1;
                (c, self.chunks.back().map_or(0, |last| last.len() - 1))
            }
        };
        let Some(slot) = self.entry_mut(c, i).and_then(|e| e.record.as_mut()) else {
            unreachable!("the record was just found or added")
        };
        if !slot.is_object() {
            *slot = StateValue::Object(StateMap::new());
        }
        match slot.as_object_mut() {
            Some(map) => map,
            None => unreachable!("the record was just made an object"),
        }
    }

    /// Drops the oldest records until at most `n` are left.
    fn trim(&mut self, n: usize) {
        while self.len > n {
            let Some(front) = self.chunks.front() else {
                break;
            };
            match front.get(self.skip) {
                Some(e) => {
                    if e.record.is_some() {
                        self.len -= 1;
                    } else {
                        self.dead -= 1;
                    }
                    self.skip += 1;
                }
                None => {
                    self.chunks.pop_front();
                    self.skip = 0;
                }
            }
        }
        if self.chunks.front().is_some_and(|f| self.skip >= f.len()) {
            self.chunks.pop_front();
            self.skip = 0;
        }
    }

    /// The live entries, oldest first.
    fn entries(&self) -> impl Iterator<Item = (&Arc<str>, &StateValue)> {
        self.chunks.iter().enumerate().flat_map(move |(c, chunk)| {
            chunk[self.first(c).min(chunk.len())..]
                .iter()
                .filter_map(|e| Some((&e.id, e.record.as_ref()?)))
        })
    }

    /// The same records without the removed entries.
    fn compact(&mut self) {
        let mut fresh = History::default();
        for (id, record) in self.entries() {
            fresh.append(Arc::clone(id), record.clone());
        }
        *self = fresh;
    }

    /// The JSON object: the records by id, oldest first.
    fn to_map(&self) -> StateMap {
        let mut map = StateMap::with_capacity(self.len);
        for (id, record) in self.entries() {
            map.insert_shared(id, record.clone());
        }
        map
    }
}

/// The lazy node showing a [`History`] as `__strategy__.requests`: one
/// record read by path (`await_completion`) builds nothing; the object
/// is built on the first read of the whole (a checkpoint,
/// serialisation), then kept with the node.
struct HistoryNode(History);

impl StateSource for HistoryNode {
    fn to_state(&self) -> StateValue {
        StateValue::Object(self.0.to_map())
    }

    fn get(&self, key: &str) -> Option<&StateValue> {
        self.0.get(key)
    }
}

/// The request records of the ext: the [`HistoryNode`] the published
/// `__strategy__` shows, its history the only copy. A write changes it in
/// place when nothing else holds the node and no one read it whole, else
/// makes a new node from a clone of the history (cheap: persistent).
#[derive(Clone)]
struct Requests(LazyValue);

impl Default for Requests {
    fn default() -> Self {
        Requests(LazyValue::new(HistoryNode(History::default())))
    }
}

impl Requests {
    /// The records of `__strategy__.requests` as it is: `None` when it is
    /// missing or not an object (a new history replaces it on the first
    /// write).
    fn read(value: Option<&StateValue>) -> Option<Self> {
        let value = value?;
        if let StateValue::Lazy(node) = value
            && node.source::<HistoryNode>().is_some()
        {
            return Some(Requests(node.clone()));
        }
        let history = History::from_map(value.as_object()?);
        Some(Requests(LazyValue::new(HistoryNode(history))))
    }

    fn history(&self) -> &History {
        static EMPTY: LazyLock<History> = LazyLock::new(History::default);
        self.0.source::<HistoryNode>().map_or(&EMPTY, |h| &h.0)
    }

    /// The value showing the records.
    fn node(&self) -> StateValue {
        StateValue::Lazy(self.0.clone())
    }

    /// The records, to change: in place when the node is this handle's
    /// alone and unread, else in a new node.
    fn history_mut(&mut self) -> &mut History {
        if self.0.source_mut::<HistoryNode>().is_none() {
            let history = self.history().clone();
            self.0 = LazyValue::new(HistoryNode(history));
        }
        match self.0.source_mut::<HistoryNode>() {
            Some(HistoryNode(history)) => history,
            None => unreachable!("the node was just made"),
        }
    }
}

/// A request record (`__strategy__.requests.ID`) as `start` and `finish`
/// write it: its JSON is built when read.
struct Record {
    query: StateValue,
    status: StateValue,
    end: Option<RecordEnd>,
}

struct RecordEnd {
    termination: StateValue,
    usage: Usage,
    ok: bool,
    value: StateValue,
}

impl Record {
    fn new(query: StateValue, end: Option<RecordEnd>) -> Self {
        static WORDS: LazyLock<[StateValue; 3]> = LazyLock::new(|| {
            [
                RequestStatus::Pending,
                RequestStatus::Completed,
                RequestStatus::Failed,
            ]
            .map(|s| StateValue::from(s.as_str()))
        });
        let mut record = Record {
            query,
            status: StateValue::Null,
            end,
        };
        let i = match record.request_status() {
            RequestStatus::Pending => 0,
            RequestStatus::Completed => 1,
            RequestStatus::Failed => 2,
        };
        record.status = WORDS[i].clone();
        record
    }

    fn request_status(&self) -> RequestStatus {
        match &self.end {
            None => RequestStatus::Pending,
            Some(end) if end.ok => RequestStatus::Completed,
            Some(_) => RequestStatus::Failed,
        }
    }
}

impl StateSource for Record {
    /// `{query, status, termination_reason, usage, result | error}` (the
    /// last three once finished), in that order.
    fn to_state(&self) -> StateValue {
        let mut m = StateMap::with_capacity(5);
        m.insert("query", self.query.clone());
        m.insert("status", self.status.clone());
        if let Some(end) = &self.end {
            m.insert("termination_reason", end.termination.clone());
            m.insert("usage", usage_state(&end.usage));
            let key = if end.ok { "result" } else { "error" };
            m.insert(key, end.value.clone());
        }
        StateValue::Object(m)
    }

    /// `status`, `result` and `error` without building the record.
    fn get(&self, key: &str) -> Option<&StateValue> {
        match (key, &self.end) {
            ("status", _) => Some(&self.status),
            ("query", _) => Some(&self.query),
            ("result", Some(end)) if end.ok => Some(&end.value),
            ("error", Some(end)) if !end.ok => Some(&end.value),
            _ => None,
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
