//! The FSM strategy: a finite state machine that runs one instruction per
//! `RunInstruction` directive.

use std::collections::VecDeque;

use serde_json::Value;

use super::{
    Command, InstructionResult, Snapshot, SnapshotStatus, Strategy, StrategyContext,
    instruction_error_from_reason, parse_instruction_result, unknown_command,
};
use crate::agent_data::AgentData;
use crate::directive::{Directive, error_context};
use crate::effect::external_directives;
use crate::error::Error;
use crate::instruction::Instruction;
use crate::state::{StateArray, StateMap, StateValue};

/// The strategy command an FSM instruction result comes back as (the
/// `result_action` of the FSM's [`Directive::RunInstruction`]s).
pub const FSM_RESULT_ACTION: &str = "fsm_instruction_result";

const MODULE: &str = "fsm";
const PROCESSING: &str = "processing";

/// A finite-state-machine strategy.
///
/// Options (Jido's defaults): `initial_state` `"idle"`; `transitions`
/// `idle → [processing]`, `processing → [idle, completed, failed]`,
/// `completed → [idle]`, `failed → [idle]`; `auto_transition` `true`.
///
/// * `cmd` with instructions moves the machine to `"processing"` and
///   returns **one** [`Directive::RunInstruction`] (result action
///   `"fsm_instruction_result"`) for the first of them; the others wait.
/// * The runtime runs it and feeds the result back through `cmd` as the
///   strategy command `"fsm_instruction_result"` (see
///   [`instruction_feedback`](super::instruction_feedback)). A success is
///   deep-merged into the state and its state operations applied at once,
///   `processed_count` grows and `last_result` is set; a failure sets
///   `error` and records an Error directive (context `"instruction"`)
///   followed by the failed action's directives. The next instruction's
///   `RunInstruction` is returned.
/// * Directives from results are **deferred**: when the last result of
///   the batch arrives they are returned, in order, and with
///   `auto_transition` the machine goes back to the initial state.
///
/// Errors: a transition the table does not allow gives an Error directive
/// (context `"fsm_transition"`, execution error "fsm transition failed"
/// with `from` and `to` details) and changes nothing; a result payload
/// that is not a JSON object (or has no valid status) gives an Error
/// directive with context `"instruction_result"` and changes nothing; a
/// result when no batch is running likewise ("unexpected instruction
/// result"). Other strategy commands give an Error directive with context
/// `"strategy_command"`.
///
/// The machine lives in the agent state at `__strategy__.machine`
/// (`status`, `processed_count`, `last_result`, `error`, `history` — the
/// latest transitions as `{from, to}`, at most
/// [`history_limit`](Fsm::history_limit) — and `transitions`); read it
/// typed with [`Fsm::state_of`];
/// the pending instructions and deferred directives are kept outside the
/// JSON state ([`AgentData::strategy_ext`](crate::agent::AgentData::strategy_ext)) and are not checkpointed: an
/// agent restored from a checkpoint taken mid-batch goes back to the
/// initial state when the runtime runs `init` (a warning is logged).
///
/// Snapshot: `idle` (and the initial state) → idle, `processing` → running,
/// `completed` → success (done), `failed` → failure (done), any other
/// state → running; `result` = `last_result`; details `state`,
/// `processed_count`, `error`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use jido::prelude::*;
/// use jido::strategy::{instruction_feedback, Fsm};
/// use serde_json::json;
///
/// #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
/// struct P {}
/// struct Ping;
/// impl Action for Ping {
///     type Params = P;
///     type Output = serde_json::Value;
///     const NAME: &'static str = "ping";
///     async fn run(&self, _: P, _: &Context) -> jido::Result<serde_json::Value> { Ok(json!({"pong": true})) }
/// }
///
/// struct Machine;
/// impl Agent for Machine {
///     const NAME: &'static str = "machine";
///     type Schema = ();
///     fn strategy(&self) -> DynStrategy { DynStrategy::new(Fsm::new()) }
/// }
///
/// let mut agent = AgentState::new(Machine, AgentOptions::new());
/// let mut directives = agent.cmd(Ping, ExecOptions::new()).await;
/// assert!(agent.strategy_snapshot().is_running());
///
/// // What the runtime does with a RunInstruction:
/// let Some(Directive::RunInstruction { instruction, result_action, meta }) = directives.pop() else { unreachable!() };
/// let feedback = instruction_feedback(&agent, *instruction, &result_action, &meta, &jido::exec::Exec::new()).await;
/// let directives = agent.cmd(feedback, ExecOptions::new()).await;
/// assert!(directives.is_empty());
/// assert_eq!(agent.state()["pong"], true);
/// assert_eq!(agent.strategy_snapshot().result, Some(json!({"pong": true})));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Fsm {
    initial_state: String,
    transitions: Vec<(String, Vec<String>)>,
    auto_transition: bool,
    history_limit: usize,
}

/// Default number of transitions an FSM keeps in its history (20).
pub const DEFAULT_FSM_HISTORY: usize = 20;

impl Default for Fsm {
    fn default() -> Self {
        Self::new()
    }
}

impl Fsm {
    /// An FSM with Jido's defaults.
    pub fn new() -> Self {
        let t = |from: &str, to: &[&str]| {
            (
                from.to_owned(),
                to.iter().map(|s| (*s).to_owned()).collect(),
            )
        };
        Self {
            initial_state: "idle".to_owned(),
            transitions: vec![
                t("idle", &["processing"]),
                t("processing", &["idle", "completed", "failed"]),
                t("completed", &["idle"]),
                t("failed", &["idle"]),
            ],
            auto_transition: true,
            history_limit: DEFAULT_FSM_HISTORY,
        }
    }

    /// How many of the latest transitions the machine keeps in its
    /// history (default [`DEFAULT_FSM_HISTORY`], 20; 0 keeps none).
    #[must_use]
    pub fn history_limit(mut self, n: usize) -> Self {
        self.history_limit = n;
        self
    }

    /// The machine of `agent`, typed: current state, recent transitions,
    /// counters, last result and error, pending instructions; `None` when
    /// the agent holds no FSM state (another strategy's; an FSM agent has
    /// its machine from the start).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use jido::prelude::*;
    /// use jido::strategy::{Fsm, FsmTransition};
    /// use serde_json::json;
    /// # #[derive(Clone, serde::Deserialize, schemars::JsonSchema)] struct P {}
    /// # struct Ping;
    /// # impl Action for Ping {
    /// #     type Params = P; type Output = serde_json::Value;
    /// #     const NAME: &'static str = "ping";
    /// #     async fn run(&self, _: P, _: &Context) -> jido::Result<serde_json::Value> { Ok(json!({})) }
    /// # }
    /// # struct Machine;
    /// # impl Agent for Machine {
    /// #     const NAME: &'static str = "machine"; type Schema = ();
    /// #     fn strategy(&self) -> DynStrategy { DynStrategy::new(Fsm::new()) }
    /// # }
    /// let mut agent = AgentState::new(Machine, AgentOptions::new());
    /// let fsm = Fsm::state_of(&agent).unwrap();
    /// assert_eq!((fsm.current.as_str(), fsm.history.len()), ("idle", 0));
    /// agent.cmd(vec![Instruction::new(Ping), Instruction::new(Ping)], ExecOptions::new()).await;
    ///
    /// let fsm = Fsm::state_of(&agent).unwrap();
    /// assert_eq!(fsm.current, "processing");
    /// assert_eq!(fsm.history, [FsmTransition::new("idle", "processing")]);
    /// assert_eq!((fsm.processed_count, fsm.pending), (0, 1));
    /// # }
    /// ```
    pub fn state_of(agent: &AgentData) -> Option<FsmState> {
        let machine = read_machine(agent)?;
        let history = machine
            .history
            .iter()
            .filter_map(|t| {
                let t = t.as_object()?;
                Some(FsmTransition::new(
                    t.get("from")?.as_str()?,
                    t.get("to")?.as_str()?,
                ))
            })
            .collect();
        let transitions = machine
            .transitions
            .iter()
            .map(|(from, to)| {
                let to = to
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|s| s.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                (from.to_owned(), to)
            })
            .collect();
        let pending = agent
            .strategy_ext::<FsmRun>()
            .map_or(0, |run| run.pending.len());
        Some(FsmState {
            current: machine.status,
            history,
            processed_count: machine.processed_count,
            last_result: (!machine.last_result.is_null()).then(|| machine.last_result.to_json()),
            error: (!machine.error.is_null()).then(|| machine.error.to_json()),
            transitions,
            pending,
        })
    }

    /// The state the machine starts in and returns to after a batch.
    #[must_use]
    pub fn initial_state(mut self, state: impl Into<String>) -> Self {
        self.initial_state = state.into();
        self
    }

    /// The allowed transitions, `from → [to, …]`, replacing the default
    /// table.
    ///
    /// ```
    /// use jido::strategy::Fsm;
    ///
    /// let fsm = Fsm::new().transitions([
    ///     ("idle", vec!["processing"]),
    ///     ("processing", vec!["idle"]),
    /// ]);
    /// # let _ = fsm;
    /// ```
    #[must_use]
    pub fn transitions<I, F, T, S>(mut self, transitions: I) -> Self
    where
        I: IntoIterator<Item = (F, T)>,
        F: Into<String>,
        T: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.transitions = transitions
            .into_iter()
            .map(|(from, to)| (from.into(), to.into_iter().map(Into::into).collect()))
            .collect();
        self
    }

    /// Whether the machine returns to the initial state after a batch
    /// (default `true`).
    #[must_use]
    pub fn auto_transition(mut self, auto: bool) -> Self {
        self.auto_transition = auto;
        self
    }

    fn fresh_machine(&self) -> Machine {
        Machine {
            status: self.initial_state.clone(),
            processed_count: 0,
            last_result: StateValue::Null,
            error: StateValue::Null,
            history: StateArray::new(),
            transitions: self
                .transitions
                .iter()
                .map(|(from, to)| {
                    let targets: Vec<StateValue> = to.iter().map(|t| t.as_str().into()).collect();
                    (from, StateValue::from(targets))
                })
                .collect(),
        }
    }

    fn ensure_machine(&self, agent: &mut AgentData) -> Machine {
        if let Some(machine) = read_machine(agent) {
            return machine;
        }
        let machine = self.fresh_machine();
        write_machine(agent, &machine);
        agent.clear_strategy_ext();
        machine
    }

    fn start_batch(&self, agent: &mut AgentData, batch: Vec<Instruction>) -> Vec<Directive> {
        let mut machine = self.ensure_machine(agent);
        if let Err(e) = machine.transition(PROCESSING, self.history_limit) {
            return vec![Directive::error(e, error_context::FSM_TRANSITION)];
        }
        machine.error = StateValue::Null;
        write_machine(agent, &machine);
        agent.set_strategy_ext(FsmRun {
            pending: batch.into(),
            deferred: Vec::new(),
        });
        self.next(agent, machine)
    }

    /// The next RunInstruction, or the end of the batch.
    fn next(&self, agent: &mut AgentData, mut machine: Machine) -> Vec<Directive> {
        let next = agent
            .strategy_ext_mut::<FsmRun>()
            .and_then(|run| run.pending.pop_front());
        if let Some(instruction) = next {
            return vec![
                Directive::run_instruction(instruction)
                    .result_action(FSM_RESULT_ACTION)
                    .into(),
            ];
        }
        let mut directives = agent
            .strategy_ext_mut::<FsmRun>()
            .map(|run| std::mem::take(&mut run.deferred))
            .unwrap_or_default();
        agent.clear_strategy_ext();
        if self.auto_transition {
            match machine.transition(&self.initial_state, self.history_limit) {
                Ok(()) => write_machine(agent, &machine),
                Err(e) => directives.push(Directive::error(e, error_context::FSM_TRANSITION)),
            }
        }
        directives
    }

    fn on_result(
        &self,
        agent: &mut AgentData,
        params: &Value,
        effects: Vec<crate::effect::Effect>,
    ) -> Vec<Directive> {
        let result = match parse_instruction_result(params) {
            Ok(r) => r,
            Err(e) => return vec![Directive::error(e, error_context::INSTRUCTION_RESULT)],
        };
        let mut machine = match read_machine(agent) {
            Some(m) if m.status == PROCESSING && agent.strategy_ext::<FsmRun>().is_some() => m,
            _ => {
                return vec![Directive::error(
                    Error::validation("unexpected instruction result")
                        .with_detail("reason", "no fsm batch is running"),
                    error_context::INSTRUCTION_RESULT,
                )];
            }
        };
        let deferred = match result {
            InstructionResult::Ok(output) => {
                machine.processed_count += 1;
                machine.last_result = StateValue::Object(StateMap::from(&output));
                agent.apply_output(output, effects)
            }
            InstructionResult::Failed(reason) => {
                machine.error = StateValue::from(&reason);
                let mut d = vec![instruction_error_from_reason(reason)];
                d.extend(external_directives(effects));
                d
            }
        };
        write_machine(agent, &machine);
        if let Some(run) = agent.strategy_ext_mut::<FsmRun>() {
            run.deferred.extend(deferred);
        }
        self.next(agent, machine)
    }
}

impl Strategy for Fsm {
    fn name(&self) -> &'static str {
        MODULE
    }

    fn init(&self, agent: &mut AgentData, _ctx: &StrategyContext) -> Vec<Directive> {
        let mut machine = self.ensure_machine(agent);
        if machine.status == PROCESSING && agent.strategy_ext::<FsmRun>().is_none() {
            // Restored from a checkpoint taken mid-batch: the pending
            // instructions were not saved, so the batch cannot finish.
            tracing::warn!(
                agent_id = agent.id(),
                "fsm batch lost on restore; returning to {}",
                self.initial_state
            );
            machine.record(&self.initial_state, self.history_limit);
            machine.status = self.initial_state.clone();
            write_machine(agent, &machine);
        }
        Vec::new()
    }

    async fn cmd(
        &self,
        agent: &mut AgentData,
        commands: Vec<Command>,
        _ctx: &StrategyContext,
    ) -> Vec<Directive> {
        self.ensure_machine(agent);
        let mut directives = Vec::new();
        let mut batch = Vec::new();
        for command in commands {
            match command {
                Command::Run(ins) => batch.push(ins),
                Command::Strategy {
                    name,
                    params,
                    effects,
                } if name == FSM_RESULT_ACTION => {
                    directives.extend(self.on_result(agent, &params, effects))
                }
                other => directives.push(unknown_command(&other)),
            }
        }
        if !batch.is_empty() {
            directives.extend(self.start_batch(agent, batch));
        }
        directives
    }

    fn snapshot(&self, agent: &AgentData, _ctx: &StrategyContext) -> Snapshot {
        let Some(machine) = read_machine(agent) else {
            return Snapshot::default();
        };
        let status = match machine.status.as_str() {
            "idle" => SnapshotStatus::Idle,
            s if s == self.initial_state => SnapshotStatus::Idle,
            PROCESSING => SnapshotStatus::Running,
            "completed" => SnapshotStatus::Success,
            "failed" => SnapshotStatus::Failure,
            _ => SnapshotStatus::Running,
        };
        let mut snapshot = Snapshot::new(status);
        snapshot.result = (!machine.last_result.is_null()).then(|| machine.last_result.to_json());
        snapshot
            .details
            .insert("state".into(), Value::String(machine.status));
        snapshot.details.insert(
            "processed_count".into(),
            Value::from(machine.processed_count),
        );
        snapshot
            .details
            .insert("error".into(), machine.error.to_json());
        snapshot
    }
}

/// The JSON part of the machine, at `__strategy__.machine`. Read and
/// written field by field: the values stay shared with the state, so a
/// `cmd` costs O(1) here whatever `last_result` holds.
#[derive(Debug, Clone)]
struct Machine {
    status: String,
    processed_count: u64,
    last_result: StateValue,
    error: StateValue,
    /// The latest transitions, oldest first: `{"from", "to"}` objects.
    history: StateArray,
    transitions: StateMap,
}

impl Machine {
    /// The machine stored at `value`: `status` a string, the other fields
    /// optional (`processed_count` a non-negative integer, `transitions` an
    /// object); `None` when it is not of that shape.
    fn from_state(value: &StateValue) -> Option<Self> {
        let m = value.as_object()?;
        let processed_count = match m.get("processed_count") {
            None | Some(StateValue::Null) => 0,
            Some(v) => v.as_u64()?,
        };
        let transitions = match m.get("transitions") {
            None | Some(StateValue::Null) => StateMap::new(),
            Some(v) => v.as_object()?.clone(),
        };
        let history = match m.get("history") {
            None | Some(StateValue::Null) => StateArray::new(),
            Some(v) => v.as_array()?.clone(),
        };
        Some(Self {
            status: m.get("status")?.as_str()?.to_owned(),
            processed_count,
            last_result: m.get("last_result").cloned().unwrap_or_default(),
            error: m.get("error").cloned().unwrap_or_default(),
            history,
            transitions,
        })
    }

    fn to_state(&self) -> StateMap {
        let mut m = StateMap::with_capacity(6);
        m.insert("status", self.status.as_str());
        m.insert("processed_count", self.processed_count);
        m.insert("last_result", self.last_result.clone());
        m.insert("error", self.error.clone());
        m.insert("history", self.history.clone());
        m.insert("transitions", self.transitions.clone());
        m
    }
}

impl Machine {
    fn allows(&self, to: &str) -> bool {
        self.transitions
            .get(&self.status)
            .and_then(StateValue::as_array)
            .is_some_and(|targets| targets.iter().any(|t| t.as_str() == Some(to)))
    }

    fn transition(&mut self, to: &str, history_limit: usize) -> Result<(), Error> {
        if self.allows(to) {
            self.record(to, history_limit);
            self.status = to.to_owned();
            Ok(())
        } else {
            Err(Error::execution("fsm transition failed")
                .with_detail("from", self.status.clone())
                .with_detail("to", to.to_owned())
                .with_retry(false))
        }
    }
}

impl Machine {
    /// Adds `status → to` to the history, keeping the latest `limit`
    /// entries: O(1) until the limit is reached, then O(limit).
    fn record(&mut self, to: &str, limit: usize) {
        if limit == 0 {
            return;
        }
        let mut entry = StateMap::with_capacity(2);
        entry.insert("from", self.status.as_str());
        entry.insert("to", to);
        self.history.push(entry);
        let len = self.history.len();
        if len > limit {
            self.history = self.history.iter().skip(len - limit).cloned().collect();
        }
    }
}

/// One transition of an FSM: `from → to`.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FsmTransition {
    /// The state left.
    pub from: String,
    /// The state entered.
    pub to: String,
}

impl FsmTransition {
    /// `from → to`.
    pub fn new(from: impl Into<String>, to: impl Into<String>) -> Self {
        Self {
            from: from.into(),
            to: to.into(),
        }
    }
}

/// An FSM's machine in an agent, typed (see [`Fsm::state_of`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct FsmState {
    /// The current state, e.g. `"idle"` or `"processing"`.
    pub current: String,
    /// The latest transitions, oldest first (at most
    /// [`Fsm::history_limit`]); a state restored mid-batch going back to
    /// the initial state is recorded too.
    pub history: Vec<FsmTransition>,
    /// Instructions that succeeded so far.
    pub processed_count: u64,
    /// The last successful instruction's output, if any.
    pub last_result: Option<Value>,
    /// The failure reason of the batch's last failed instruction, if any
    /// (cleared when a batch starts).
    pub error: Option<Value>,
    /// The allowed transitions, `from → [to, …]`.
    pub transitions: Vec<(String, Vec<String>)>,
    /// Instructions of the running batch not started yet.
    pub pending: usize,
}

/// The non-JSON part of a running batch.
#[derive(Debug, Clone, Default)]
struct FsmRun {
    pending: VecDeque<Instruction>,
    deferred: Vec<Directive>,
}

fn read_machine(agent: &AgentData) -> Option<Machine> {
    let st = agent.strategy_state()?;
    if st.get("module").and_then(StateValue::as_str) != Some(MODULE) {
        return None;
    }
    Machine::from_state(st.get("machine")?)
}

fn write_machine(agent: &mut AgentData, machine: &Machine) {
    let value = machine.to_state();
    let st = agent.strategy_state_mut();
    if st.get("module").and_then(StateValue::as_str) != Some(MODULE) {
        st.insert("module", MODULE);
    }
    st.insert("machine", value);
}
