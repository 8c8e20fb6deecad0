//! Behaviour trees: a [`Strategy`] whose `cmd` ticks a tree of nodes.
//!
//! Build a tree with the node functions ([`sequence`], [`selector`],
//! [`action`], …), hand it to [`BehaviorTree::new`] and use that as the
//! agent's strategy. Every `cmd` runs **at most one tick**; while the tree
//! is running the strategy returns a Schedule directive for the next tick,
//! so a tree spread over many ticks never blocks the agent.
//!
//! ```
//! # use jido::prelude::*;
//! # #[derive(Clone, serde::Deserialize, schemars::JsonSchema)] struct P {}
//! # macro_rules! act { ($t:ident, $n:literal) => {
//! #   struct $t;
//! #   impl Action for $t {
//! #     type Params = P; type Output = ();
//! #     const NAME: &'static str = $n;
//! #     async fn run(&self, _: P, _: &Context) -> jido::Result<()> { Ok(()) }
//! #   }
//! # } }
//! # act!(CheckBattery, "check_battery"); act!(InvestigateAnomaly, "investigate_anomaly");
//! # act!(ContinuePatrol, "continue_patrol"); act!(ReportStatus, "report_status");
//! use jido::strategy::behavior_tree::*;
//! use serde_json::json;
//!
//! let patrol = BehaviorTree::new(sequence([
//!     action(CheckBattery),
//!     selector([
//!         sequence([condition("anomaly_seen", |bb, _| bb.contains_key("anomaly")), action(InvestigateAnomaly)]),
//!         action(ContinuePatrol).param("speed", 2),
//!     ]),
//!     action(ReportStatus).param("battery", Param::from_blackboard("battery")),
//! ]))?
//! .with_blackboard([("battery", json!(100))]);
//!
//! assert!(patrol.tree().to_mermaid().starts_with("flowchart TD\n    n0[\"Sequence\"]"));
//! # Ok::<(), jido::Error>(())
//! ```
//!
//! # Nodes
//!
//! A tick returns a [`Status`]: success, failure, running or error.
//!
//! | node | semantics |
//! |---|---|
//! | [`sequence`] | ticks children from the remembered index: success → next child; running → running, index remembered (earlier children are not ticked again); failure or error → that status, index back to 0; all done or empty → success |
//! | [`selector`] | mirror: failure → next child; success → success; running → remembered; **error stops it** (not read as failure); exhausted or empty → failure |
//! | [`parallel`], [`parallel_with`] | ticks each child not yet finished in this round, in order (one after the other: logical, not concurrent); see below |
//! | [`inverter`] | success ↔ failure; running and error pass through |
//! | [`succeeder`] / [`failer`] | success and failure → success / failure; running and error pass through |
//! | [`repeat`]`(n, child)` | child success → count + 1: at `n` → success (count 0), else halt child and running; failure or error → that status (count 0); running → running. `repeat(3, …)` needs 3 ticks |
//! | [`retry`]`(n, child)` | child success → success; failure, or an error that is [retryable](crate::Error::retryable), with fewer than `n` retries used → halt child, running, next tick re-runs it; else that status (retries back to 0); a non-retryable error passes at once |
//! | [`wait`]`(d)` | first tick: records the start ([`tokio::time::Instant`]) and returns running; later ticks: success once `d` has elapsed (start cleared), else running; halt clears the start |
//! | [`condition`] | predicate on blackboard and agent state: true → success, false → failure, panic → error |
//! | [`set_blackboard`] | writes its entries, success |
//! | [`action`] | see below |
//! | [`leaf`] | a custom [`Leaf`] |
//!
//! **Parallel rule.** With `S` the success threshold and `F` the failure
//! threshold (`parallel` uses `S` = all children, `F` = 1): after ticking
//! the unfinished children, the node returns *error* if a child returned an
//! error (the children after it are not ticked in that tick), else
//! *success* if at least `S` children have succeeded, else *failure* if at
//! least `F` have failed or no child is still running, else *running*
//! (finished children are remembered and not ticked again). When it
//! returns anything but running, every child still running is halted and
//! the node forgets the round. An empty parallel succeeds.
//!
//! **Action nodes.** Params are a JSON object; any `{"$bb": "key"}` in it
//! (at any depth), or [`Param::FromBlackboard`], is replaced by the
//! blackboard value under `key` (`null` when absent). The action runs
//! through [`Exec::execute`](crate::exec::Exec::execute) with the agent
//! state as it is at that point of the tick in its
//! [`Context`](crate::Context) (as under the Direct strategy, that includes
//! `__strategy__`, as stored before this `cmd`) and
//! the node's [`ExecOptions`](crate::exec::ExecOptions) over the `cmd`'s.
//! Success: the output is deep-merged into the agent state, the state
//! operations among its effects are applied in order, its other effects
//! are returned as directives, and the output is stored on the blackboard
//! as `last_result`. Failure: [`Status::Error`] with the run's error, whose
//! envelope is stored on the blackboard as `error`; as in the Direct
//! strategy, the failed run's state operations are dropped and the
//! directives among its effects are returned.
//!
//! **Halting** a node resets the memory of its whole subtree (sequence and
//! selector indexes, counts, wait starts, parallel results) and calls
//! [`Leaf::halt`] on its custom leaves. A panic inside a condition or a
//! custom leaf becomes [`Status::Error`] and leaves that node's memory as
//! it was.
//!
//! # The strategy
//!
//! Options: the tree, an initial blackboard ([`BehaviorTree::with_blackboard`]),
//! [`reset_on_completion`](BehaviorTree::reset_on_completion) (default
//! false) and [`tick_interval`](BehaviorTree::tick_interval) (default 0 ms).
//!
//! `cmd` first applies the strategy commands in order:
//!
//! | command | params | effect |
//! |---|---|---|
//! | `bt_blackboard_put` | `{key, value}` | sets one key (`value` absent → `null`) |
//! | `bt_blackboard_merge` | `{data}` | shallow-merges an object into the blackboard |
//! | `bt_halt` | — | halts the tree; status idle; error cleared |
//! | `bt_reset` | — | halts the tree; blackboard back to the initial one; status idle; `last_result` and error cleared (`tick_count` kept) |
//! | `bt_tick` | `{instructions?}` | forces a tick; a JSON `instructions` list is added to the pending ones |
//! | `bt_scheduled_tick` | `{tick}` | the tick a running tree scheduled: forces a tick only if the tree is still running and `tick` is the current `tick_count` (nothing ticked, halted or reset since); else nothing |
//!
//! A command with bad params (`"invalid bt_… params: …"`) or an unknown
//! name (`"unknown strategy command: …"`) gives an Error directive (context
//! `"strategy_command"`, validation error, `command` detail) and changes
//! nothing. Effects carried by a strategy command are applied first (state
//! operations) or returned (directives). Then **one tick** runs if
//! `bt_tick` (or a current `bt_scheduled_tick`) was given, if instructions ([`Command::Run`]) are pending, or
//! if the command list is empty; so `[bt_halt]` alone halts without
//! ticking. Before the tick the blackboard gets `instructions` (the pending
//! instructions as `{id, action, params}` JSON) and `agent_state` (the
//! agent state without `__strategy__`); both are removed after the tick.
//! The tree's actions run; pending instructions are data for the tree, not
//! run by the strategy.
//!
//! After the tick: success → status success; failure → failure; error →
//! **failure** with the error envelope kept as `error` (and in the
//! snapshot's `details.error`); running → running and a
//! [`Directive::Schedule`] of a `jido.bt.scheduled_tick` signal
//! `{"tick": tick_count}`, routed to `bt_scheduled_tick`: a halt, a reset
//! or any other tick in the meantime makes it a no-op, so a halted tree
//! stays halted and schedules never pile up. Its delay is the shortest
//! one asked for by the running nodes (the time left of a [`wait`], 0 after
//! a [`repeat`] or [`retry`] step, what a [`Leaf`] gave to
//! [`LeafContext::wake_in`]), else `tick_interval`. With
//! `reset_on_completion`, a tree that ended in success or failure is halted
//! so the next tick starts from the root (Jido's option; the blackboard is
//! kept). [`Strategy::tick`] is a forced tick.
//!
//! State under `__strategy__`:
//!
//! ```json
//! {"module": "behavior_tree", "status": "idle", "tick_count": 0,
//!  "last_result": null, "error": null, "blackboard": {},
//!  "tree": {"clock": "<process clock id>", "nodes": [ … one entry per node … ],
//!           "statuses": [ … each node's status at the last tick, or null … ]}}
//! ```
//!
//! Read it typed with [`BehaviorTree::state_of`] (status, tick count,
//! result, error, blackboard, node statuses), [`BehaviorTree::blackboard`]
//! and [`BehaviorTree::statuses`]. A halt or reset clears the node
//! statuses. To tick one node or subtree in a test, with no agent and no
//! strategy, use a [`TreeHarness`].
//!
//! The tree's runtime memory is plain JSON in `tree.nodes` (pre-order), so
//! it survives a checkpoint and restore. Two limits: wait start times are
//! tied to the process's monotonic clock, so a wait restored in another
//! process starts again; and memory written for a tree with a different
//! number of nodes is discarded (the tree starts fresh). [`Strategy::init`]
//! leaves an existing behaviour-tree state alone, so a restored agent keeps
//! its tree, blackboard and status; if that tree was running, `init`
//! returns a Schedule of an immediate tick so it resumes when the runtime
//! starts the agent.
//!
//! Snapshot: success and failure are done, running is running, idle is
//! idle, an unknown status reads as failure; `result` is `last_result`;
//! `details` are `tick_count`, `error` and `tree_depth`. No state yet →
//! idle with `tick_count` 0.
//!
//! Signal routes (priority 50): `jido.bt.tick` → strategy tick (a forced
//! tick), `jido.bt.blackboard.put`, `jido.bt.blackboard.merge`,
//! `jido.bt.halt`, `jido.bt.reset`, `jido.bt.scheduled_tick` → the matching
//! command.

mod harness;
mod node;
mod runner;
mod tree;

pub use harness::TreeHarness;
pub use node::{
    BLACKBOARD_REF, Blackboard, Leaf, LeafContext, Node, Param, Status, TickStatus, action,
    condition, failer, inverter, leaf, parallel, parallel_with, repeat, retry, selector, sequence,
    set_blackboard, succeeder, wait,
};
pub use tree::Tree;

use std::time::Duration;

use serde_json::{Map, Value};

use self::runner::ExecRunner;
use self::tree::TickCx;
use crate::agent_data::AgentData;
use crate::directive::{Directive, error_context};
use crate::error::{Error, Result};
use crate::signal::Signal;
use crate::state::{StateMap, StateValue};
use crate::strategy::{Command, STRATEGY_KEY, Snapshot, SnapshotStatus, Strategy, StrategyContext};
use crate::strategy::{RouteTarget, SignalRoute};

/// The signal type of a forced tick (routed to a strategy tick).
pub const TICK_SIGNAL: &str = "jido.bt.tick";
/// Command: force a tick (`{instructions?}`).
pub const CMD_TICK: &str = "bt_tick";
/// Command: set one blackboard key (`{key, value}`).
pub const CMD_BLACKBOARD_PUT: &str = "bt_blackboard_put";
/// Command: shallow-merge an object into the blackboard (`{data}`).
pub const CMD_BLACKBOARD_MERGE: &str = "bt_blackboard_merge";
/// Command: halt the tree, status idle, no tick.
pub const CMD_HALT: &str = "bt_halt";
/// Command: halt, restore the initial blackboard, clear result and error.
pub const CMD_RESET: &str = "bt_reset";
/// Command: the tick a running tree scheduled (`{tick}`). It ticks only
/// when the tree is still running and `tick` equals the current
/// `tick_count`, i.e. no other tick, halt or reset came in between; else
/// it does nothing.
pub const CMD_SCHEDULED_TICK: &str = "bt_scheduled_tick";
/// The signal type of the Schedule directive of a running tree (routed to
/// [`CMD_SCHEDULED_TICK`]).
pub const SCHEDULED_TICK_SIGNAL: &str = "jido.bt.scheduled_tick";

/// The `module` marker written under `__strategy__`.
const MARKER: &str = "behavior_tree";

/// The behaviour-tree strategy. See the [module docs](self).
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::prelude::*;
/// use jido::strategy::behavior_tree::*;
/// use serde_json::{Value, json};
///
/// #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
/// struct Charge { to: i64 }
///
/// struct ChargeBattery;
/// impl Action for ChargeBattery {
///     type Params = Charge;
///     type Output = Value;
///     const NAME: &'static str = "charge_battery";
///     async fn run(&self, p: Charge, _: &Context) -> jido::Result<Value> {
///         Ok(json!({"battery": p.to}))
///     }
/// }
///
/// struct Robot(BehaviorTree);
/// impl Agent for Robot {
///     const NAME: &'static str = "robot";
///     type Schema = ();
///     fn strategy(&self) -> DynStrategy { DynStrategy::new(self.0.clone()) }
/// }
///
/// let tree = BehaviorTree::new(selector([
///     condition("charged", |_, state| state["battery"].as_i64().unwrap_or(0) >= 20),
///     sequence([
///         wait(std::time::Duration::from_secs(1)).named("dock"),
///         action(ChargeBattery).param("to", Param::from_blackboard("full")),
///     ]),
/// ]))?
/// .with_blackboard([("full", json!(100))]);
///
/// let mut robot = AgentState::new(Robot(tree), AgentOptions::new().state(json!({"battery": 5}).as_object().unwrap().clone()));
/// // First tick: not charged, docking has begun; the strategy asks for the next tick in 1 s.
/// let directives = robot.tick(CmdOptions::new()).await;
/// assert!(matches!(&directives[..], [Directive::Schedule { delay, .. }] if delay.as_secs() == 1));
/// assert_eq!(robot.strategy_snapshot().status, SnapshotStatus::Running);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct BehaviorTree {
    tree: Tree,
    blackboard: Blackboard,
    reset_on_completion: bool,
    tick_interval: Duration,
}

impl BehaviorTree {
    /// A strategy for the tree under `root`, with an empty initial
    /// blackboard.
    ///
    /// # Errors
    ///
    /// As [`Tree::new`]: a configuration error for an invalid tree.
    pub fn new(root: Node) -> Result<Self> {
        Ok(Self::from_tree(Tree::new(root)?))
    }

    /// A strategy for an already built tree.
    pub fn from_tree(tree: Tree) -> Self {
        Self {
            tree,
            blackboard: Blackboard::new(),
            reset_on_completion: false,
            tick_interval: Duration::ZERO,
        }
    }

    /// Adds entries to the initial blackboard (what `init` and `bt_reset`
    /// start from).
    #[must_use]
    pub fn with_blackboard<K: AsRef<str>>(
        mut self,
        entries: impl IntoIterator<Item = (K, Value)>,
    ) -> Self {
        self.blackboard.extend(entries);
        self
    }

    /// Whether a tree that ended in success or failure is halted after the
    /// tick, so the next tick starts from the root (default false).
    #[must_use]
    pub fn reset_on_completion(mut self, yes: bool) -> Self {
        self.reset_on_completion = yes;
        self
    }

    /// The delay of the next scheduled tick when no running node asked for
    /// one (default 0 ms: the next turn).
    #[must_use]
    pub fn tick_interval(mut self, interval: Duration) -> Self {
        self.tick_interval = interval;
        self
    }

    /// The tree.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// The initial blackboard.
    pub fn initial_blackboard(&self) -> &Blackboard {
        &self.blackboard
    }

    /// The agent's current blackboard (the initial one when the strategy
    /// has no state in `agent` yet).
    pub fn blackboard(&self, agent: &AgentData) -> Blackboard {
        self.load(agent.state()).blackboard
    }

    /// The tree's state in `agent`, typed: status, tick count, last result,
    /// error, blackboard and every node's status at the last tick; `None`
    /// when the agent holds no behaviour-tree state (another strategy's;
    /// `init`, run when the agent value is built, writes it).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
    /// use jido::prelude::*;
    /// use jido::strategy::behavior_tree::*;
    /// use serde_json::json;
    ///
    /// let bt = BehaviorTree::new(selector([
    ///     condition("charged", |bb, _| bb.get("battery").and_then(|b| b.as_i64()) >= Some(20)),
    ///     set_blackboard([("docking", json!(true))]),
    /// ]))?
    /// .with_blackboard([("battery", json!(5))]);
    ///
    /// struct Robot(BehaviorTree);
    /// impl Agent for Robot {
    ///     const NAME: &'static str = "robot";
    ///     type Schema = ();
    ///     fn strategy(&self) -> DynStrategy { DynStrategy::new(self.0.clone()) }
    /// }
    /// let mut robot = AgentState::new(Robot(bt.clone()), AgentOptions::new());
    /// robot.tick(CmdOptions::new()).await;
    ///
    /// let state = bt.state_of(&robot).unwrap();
    /// assert_eq!(state.status, SnapshotStatus::Success);
    /// assert_eq!((state.tick_count, state.error), (1, None));
    /// assert_eq!(state.blackboard["docking"], json!(true));
    /// let statuses: Vec<_> = state.nodes.iter().map(|n| (n.kind, n.status)).collect();
    /// assert_eq!(statuses, [
    ///     ("Selector", Some(TickStatus::Success)),
    ///     ("Condition", Some(TickStatus::Failure)),
    ///     ("SetBlackboard", Some(TickStatus::Success)),
    /// ]);
    /// # Ok(()) }
    /// ```
    pub fn state_of(&self, agent: &AgentData) -> Option<BehaviorTreeState> {
        if !has_state(agent) {
            return None;
        }
        let bt = self.load(agent.state());
        let nodes = self.node_statuses(&bt.tree);
        Some(BehaviorTreeState {
            status: SnapshotStatus::parse(&bt.status).unwrap_or(SnapshotStatus::Failure),
            tick_count: bt.tick_count,
            last_result: (!bt.last_result.is_null()).then(|| bt.last_result.to_json()),
            error: (!bt.error.is_null()).then(|| bt.error.to_json()),
            blackboard: bt.blackboard,
            nodes,
        })
    }

    /// Every node's status at the agent's last tick, pre-order (the root
    /// first); a node not ticked then (or any node before the first tick,
    /// or after a halt or reset) has none.
    pub fn statuses(&self, agent: &AgentData) -> Vec<NodeStatus> {
        let tree = if has_state(agent) {
            self.load(agent.state()).tree
        } else {
            StateValue::Null
        };
        self.node_statuses(&tree)
    }

    fn node_statuses(&self, tree: &StateValue) -> Vec<NodeStatus> {
        let ts = self.tree.state_from_json(Some(&tree.to_json()));
        node_statuses(&self.tree, ts.statuses())
    }

    fn fresh(&self) -> BtState {
        BtState {
            status: "idle".into(),
            tick_count: 0,
            last_result: StateValue::Null,
            error: StateValue::Null,
            blackboard: self.blackboard.clone(),
            tree: StateValue::Null,
        }
    }

    /// Reads the strategy state: O(1) (every value is shared, not copied).
    fn load(&self, state: &StateMap) -> BtState {
        let Some(s) = state.get(STRATEGY_KEY).and_then(StateValue::as_object) else {
            return self.fresh();
        };
        if s.get("module").and_then(StateValue::as_str) != Some(MARKER) {
            return self.fresh();
        }
        BtState {
            status: s
                .get("status")
                .and_then(StateValue::as_str)
                .unwrap_or("idle")
                .to_owned(),
            tick_count: s
                .get("tick_count")
                .and_then(StateValue::as_u64)
                .unwrap_or(0),
            last_result: s.get("last_result").cloned().unwrap_or_default(),
            error: s.get("error").cloned().unwrap_or_default(),
            blackboard: s
                .get("blackboard")
                .and_then(StateValue::as_object)
                .map_or_else(|| self.blackboard.clone(), StateMap::clone),
            tree: s.get("tree").cloned().unwrap_or_default(),
        }
    }

    /// Writes the strategy state: O(keys) (the values are moved in, shared).
    fn store(state: &mut StateMap, bt: BtState) {
        let mut s = StateMap::with_capacity(7);
        s.insert("module", MARKER);
        s.insert("status", bt.status);
        s.insert("tick_count", bt.tick_count);
        s.insert("last_result", bt.last_result);
        s.insert("error", bt.error);
        s.insert("blackboard", bt.blackboard);
        s.insert("tree", bt.tree);
        state.insert(STRATEGY_KEY, s);
    }

    /// Applies the commands, then ticks when asked to.
    async fn run(
        &self,
        agent: &mut AgentData,
        commands: Vec<Command>,
        ctx: &StrategyContext,
    ) -> Vec<Directive> {
        let mut bt = self.load(agent.state());
        let mut directives = Vec::new();
        let mut pending: Vec<Value> = Vec::new();
        let mut force = commands.is_empty();
        for command in commands {
            match command {
                Command::Run(ins) => {
                    let mut m = Map::with_capacity(3);
                    m.insert("id".into(), Value::String(ins.id.to_string()));
                    m.insert("action".into(), Value::String(ins.action.name().into()));
                    m.insert("params".into(), ins.params);
                    pending.push(Value::Object(m));
                }
                Command::Strategy {
                    name,
                    params,
                    effects,
                } => {
                    directives.extend(agent.apply_effects(effects));
                    match self.command(&mut bt, &name, params, &mut pending) {
                        Ok(tick) => force |= tick,
                        Err(error) => directives
                            .push(Directive::error(error, error_context::STRATEGY_COMMAND)),
                    }
                }
            }
        }
        if force || !pending.is_empty() {
            directives.extend(self.tick_once(agent, &mut bt, pending, ctx).await);
        }
        Self::store(agent.state_mut(), bt);
        directives
    }

    /// Applies one strategy command; `Ok(true)` forces a tick.
    fn command(
        &self,
        bt: &mut BtState,
        name: &str,
        params: Value,
        pending: &mut Vec<Value>,
    ) -> Result<bool> {
        let bad = |msg: &str| {
            Error::validation(format!("invalid {name} params: {msg}"))
                .with_detail("command", name.to_owned())
        };
        match name {
            CMD_TICK => {
                match params.get("instructions") {
                    Some(Value::Array(list)) => pending.extend(list.iter().cloned()),
                    None | Some(Value::Null) => {}
                    Some(_) => return Err(bad("instructions must be a list")),
                }
                Ok(true)
            }
            CMD_SCHEDULED_TICK => {
                let Some(tick) = params.get("tick").and_then(Value::as_u64) else {
                    return Err(bad("tick must be a non-negative integer"));
                };
                Ok(bt.status == "running" && tick == bt.tick_count)
            }
            CMD_BLACKBOARD_PUT => {
                let Some(key) = params.get("key").and_then(Value::as_str) else {
                    return Err(bad("key must be a string"));
                };
                let value = params.get("value").cloned().unwrap_or(Value::Null);
                bt.blackboard.insert(key, value);
                Ok(false)
            }
            CMD_BLACKBOARD_MERGE => {
                let Some(Value::Object(data)) = params.get("data") else {
                    return Err(bad("data must be an object"));
                };
                bt.blackboard
                    .extend(data.iter().map(|(k, v)| (k, StateValue::from(v))));
                Ok(false)
            }
            CMD_HALT => {
                self.halt(bt);
                Ok(false)
            }
            CMD_RESET => {
                self.halt(bt);
                bt.blackboard = self.blackboard.clone();
                bt.last_result = StateValue::Null;
                Ok(false)
            }
            other => Err(
                Error::validation(format!("unknown strategy command: {other}"))
                    .with_detail("command", other.to_owned()),
            ),
        }
    }

    fn halt(&self, bt: &mut BtState) {
        let mut ts = self.tree.state_from_json(Some(&bt.tree.to_json()));
        self.tree.halt(&mut ts);
        ts.clear_statuses();
        bt.tree = self.tree.state_to_json(&ts).into();
        bt.status = "idle".into();
        bt.error = StateValue::Null;
    }

    async fn tick_once(
        &self,
        agent: &mut AgentData,
        bt: &mut BtState,
        pending: Vec<Value>,
        ctx: &StrategyContext,
    ) -> Vec<Directive> {
        // The base context of every action run; each run sets the state as
        // it is then (an O(1) snapshot).
        let base = ctx.action_context(agent).with_state(StateMap::new());
        // O(top-level keys): the values are shared, not copied.
        let mut visible = agent.state().clone();
        visible.remove(STRATEGY_KEY);
        bt.blackboard.insert("instructions", Value::Array(pending));
        bt.blackboard.insert("agent_state", visible);
        let mut ts = self.tree.state_from_json(Some(&bt.tree.to_json()));
        let runner = ExecRunner {
            exec: ctx.exec(),
            opts: *ctx.exec_options(),
            base,
        };
        let mut cx = TickCx {
            blackboard: &mut bt.blackboard,
            agent,
            directives: Vec::new(),
            runner: &runner,
            sequence: bt.tick_count,
            wake: None,
        };
        let status = self.tree.tick(&mut ts, &mut cx).await;
        let TickCx {
            mut directives,
            wake,
            ..
        } = cx;
        bt.blackboard.remove("instructions");
        bt.blackboard.remove("agent_state");

        bt.error = StateValue::Null;
        bt.status = match &status {
            Status::Success => "success",
            Status::Running => "running",
            Status::Failure => "failure",
            Status::Error(e) => {
                bt.error = e.to_envelope().into();
                "failure"
            }
        }
        .into();
        if self.reset_on_completion && status.is_done() {
            self.tree.halt(&mut ts);
        }
        bt.tree = self.tree.state_to_json(&ts).into();
        bt.tick_count += 1;
        bt.last_result = bt
            .blackboard
            .get("last_result")
            .cloned()
            .unwrap_or_default();
        if status == Status::Running {
            directives.push(schedule_tick(
                wake.unwrap_or(self.tick_interval),
                bt.tick_count,
            ));
        }
        directives
    }
}

/// Whether `agent` holds behaviour-tree state.
fn has_state(agent: &AgentData) -> bool {
    agent
        .state()
        .get(STRATEGY_KEY)
        .and_then(StateValue::as_object)
        .is_some_and(|s| s.get("module").and_then(StateValue::as_str) == Some(MARKER))
}

/// The nodes of `tree` with their `statuses`, pre-order.
fn node_statuses(tree: &Tree, statuses: &[Option<TickStatus>]) -> Vec<NodeStatus> {
    statuses
        .iter()
        .enumerate()
        .map(|(id, status)| {
            let (kind, name) = tree.describe(id);
            NodeStatus {
                id,
                kind,
                name: name.map(str::to_owned),
                status: *status,
            }
        })
        .collect()
}

/// A behaviour tree's state in an agent, typed (see
/// [`BehaviorTree::state_of`]).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct BehaviorTreeState {
    /// Idle, running, success or failure (an error tick ends in failure,
    /// with [`error`](BehaviorTreeState::error) set).
    pub status: SnapshotStatus,
    /// Ticks run so far.
    pub tick_count: u64,
    /// The last action node's output (`last_result`), if any.
    pub last_result: Option<Value>,
    /// The error envelope of a tick that ended in an error, if any.
    pub error: Option<Value>,
    /// The blackboard.
    pub blackboard: Blackboard,
    /// Every node's status at the last tick, pre-order.
    pub nodes: Vec<NodeStatus>,
}

/// One node of a tree and its status at the last tick.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// The node's pre-order number (the root is 0), as in
    /// [`Tree::to_mermaid`].
    pub id: usize,
    /// The node's type: `"Sequence"`, `"Selector"`, `"Action"`, …
    pub kind: &'static str,
    /// Its name ([`Node::named`], or an action's or leaf's own name).
    pub name: Option<String>,
    /// What it returned at the last tick; `None` when it was not ticked.
    pub status: Option<TickStatus>,
}

struct BtState {
    status: String,
    tick_count: u64,
    last_result: StateValue,
    error: StateValue,
    blackboard: Blackboard,
    tree: StateValue,
}

/// The Schedule directive of the next tick: a `jido.bt.scheduled_tick`
/// signal `{"tick": tick_count}` to the agent itself, which the strategy's
/// route turns into the `bt_scheduled_tick` command.
fn schedule_tick(delay: Duration, tick_count: u64) -> Directive {
    let mut data = Map::with_capacity(1);
    data.insert("tick".into(), Value::from(tick_count));
    Directive::schedule(
        delay,
        Signal::new(SCHEDULED_TICK_SIGNAL, Value::Object(data)),
    )
}

impl Strategy for BehaviorTree {
    fn name(&self) -> &'static str {
        MARKER
    }

    fn init(&self, agent: &mut AgentData, _ctx: &StrategyContext) -> Vec<Directive> {
        if !has_state(agent) {
            let mut bt = self.fresh();
            bt.tree = self.tree.state_to_json(&self.tree.new_state()).into();
            Self::store(agent.state_mut(), bt);
            return Vec::new();
        }
        // A restored agent whose tree was running resumes on its own.
        let bt = self.load(agent.state());
        if bt.status == "running" {
            vec![schedule_tick(Duration::ZERO, bt.tick_count)]
        } else {
            Vec::new()
        }
    }

    async fn cmd(
        &self,
        agent: &mut AgentData,
        commands: Vec<Command>,
        ctx: &StrategyContext,
    ) -> Vec<Directive> {
        self.run(agent, commands, ctx).await
    }

    async fn tick(&self, agent: &mut AgentData, ctx: &StrategyContext) -> Vec<Directive> {
        self.run(agent, Vec::new(), ctx).await
    }

    fn snapshot(&self, agent: &AgentData, _ctx: &StrategyContext) -> Snapshot {
        let bt = self.load(agent.state());
        let status = if has_state(agent) {
            SnapshotStatus::parse(&bt.status).unwrap_or(SnapshotStatus::Failure)
        } else {
            SnapshotStatus::Idle
        };
        let mut details = Map::with_capacity(3);
        details.insert("tick_count".into(), Value::from(bt.tick_count));
        details.insert("error".into(), bt.error.to_json());
        details.insert("tree_depth".into(), Value::from(self.tree.depth()));
        let mut snapshot = Snapshot::new(status);
        snapshot.result = (!bt.last_result.is_null()).then(|| bt.last_result.to_json());
        snapshot.details = details;
        snapshot
    }

    fn signal_routes(&self, _ctx: &StrategyContext) -> Vec<SignalRoute> {
        let route = SignalRoute::new;
        vec![
            route(TICK_SIGNAL, RouteTarget::StrategyTick),
            route(
                "jido.bt.blackboard.put",
                RouteTarget::StrategyCmd(CMD_BLACKBOARD_PUT.into()),
            ),
            route(
                "jido.bt.blackboard.merge",
                RouteTarget::StrategyCmd(CMD_BLACKBOARD_MERGE.into()),
            ),
            route("jido.bt.halt", RouteTarget::StrategyCmd(CMD_HALT.into())),
            route("jido.bt.reset", RouteTarget::StrategyCmd(CMD_RESET.into())),
            route(
                SCHEDULED_TICK_SIGNAL,
                RouteTarget::StrategyCmd(CMD_SCHEDULED_TICK.into()),
            ),
        ]
    }
}

#[cfg(test)]
mod tests;
