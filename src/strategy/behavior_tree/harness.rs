//! Ticking one node or subtree in a test, with no agent and no strategy.

use std::time::Duration;

use serde_json::{Map, Value};

use super::node::{Blackboard, Node, Status};
use super::runner::ExecRunner;
use super::tree::{TickCx, Tree, TreeState};
use super::{NodeStatus, node_statuses};
use crate::agent_data::AgentData;
use crate::directive::Directive;
use crate::error::Result;
use crate::exec::{Exec, ExecOptions};
use crate::state::StateMap;
use crate::strategy::StrategyContext;

/// The name a harness runs its actions under (its strategy context's
/// agent name and its data's id).
const HARNESS: &str = "bt_harness";

/// Ticks a node, or a subtree of a tree, against a blackboard and an
/// agent state of its own, and shows what happened: the returned
/// [`Status`], every node's status, the blackboard, the agent state, the
/// directives produced and the delay a running node asked for. No agent
/// server and no strategy are involved; action nodes run through an
/// [`Exec`] with the harness's options, as the strategy runs them
/// (outputs deep-merged into the agent state, `last_result` / `error` on
/// the blackboard).
///
/// The memory of the nodes (sequence indexes, repeat counts, wait starts,
/// leaf memory) is kept between ticks, as in the strategy. Unlike the
/// strategy, a tick does not put `instructions` and `agent_state` on the
/// blackboard.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::strategy::behavior_tree::*;
/// use serde_json::json;
///
/// // One node.
/// let mut h = TreeHarness::new(condition("low", |bb, _| bb["battery"].as_i64() < Some(20)))?
///     .with_blackboard([("battery", json!(5))]);
/// assert_eq!(h.tick().await, Status::Success);
/// h.blackboard_mut().insert("battery", json!(80));
/// assert_eq!(h.tick().await, Status::Failure);
///
/// // A subtree of a bigger tree, by its pre-order number.
/// let mut h = TreeHarness::new(selector([
///     condition("never", |_, _| false),
///     sequence([set_blackboard([("a", json!(1))]), inverter(condition("yes", |_, _| true))]),
/// ]))?;
/// assert_eq!(h.tick_node(2).await, Status::Failure);
/// assert_eq!(h.blackboard()["a"], json!(1));
/// let ticked: Vec<_> = h.statuses().iter().map(|n| n.status.map(|s| s.as_str())).collect();
/// assert_eq!(ticked, [None, None, Some("failure"), Some("success"), Some("failure"), Some("success")]);
/// # Ok(()) }
/// ```
pub struct TreeHarness {
    tree: Tree,
    memory: TreeState,
    blackboard: Blackboard,
    agent: AgentData,
    exec: Exec,
    opts: ExecOptions,
    directives: Vec<Directive>,
    ticks: u64,
    wake: Option<Duration>,
}

impl TreeHarness {
    /// A harness for the tree under `root`, with an empty blackboard and
    /// agent state, a new [`Exec`] and default options.
    ///
    /// # Errors
    ///
    /// As [`Tree::new`]: a configuration error for an invalid tree.
    pub fn new(root: Node) -> Result<Self> {
        Ok(Self::from_tree(Tree::new(root)?))
    }

    /// A harness for an already built tree (e.g. a strategy's
    /// [`tree`](super::BehaviorTree::tree)).
    pub fn from_tree(tree: Tree) -> Self {
        let memory = tree.new_state();
        Self {
            tree,
            memory,
            blackboard: Blackboard::new(),
            agent: AgentData::new(HARNESS, StateMap::new()),
            exec: Exec::new(),
            opts: ExecOptions::new(),
            directives: Vec::new(),
            ticks: 0,
            wake: None,
        }
    }

    /// Adds entries to the blackboard.
    #[must_use]
    pub fn with_blackboard<K: AsRef<str>>(
        mut self,
        entries: impl IntoIterator<Item = (K, Value)>,
    ) -> Self {
        self.blackboard.extend(entries);
        self
    }

    /// The agent state conditions see and actions run against (replacing
    /// the current one).
    #[must_use]
    pub fn with_agent_state(mut self, state: Map<String, Value>) -> Self {
        self.agent = AgentData::new(HARNESS, state);
        self
    }

    /// The executor actions run on (default a new one).
    #[must_use]
    pub fn with_exec(mut self, exec: Exec) -> Self {
        self.exec = exec;
        self
    }

    /// The options actions run with (each action node's own win).
    #[must_use]
    pub fn with_exec_options(mut self, opts: ExecOptions) -> Self {
        self.opts = opts;
        self
    }

    /// Ticks the whole tree once.
    pub async fn tick(&mut self) -> Status {
        self.tick_node(0).await
    }

    /// Ticks the subtree under node `id` (its pre-order number, as in
    /// [`Tree::to_mermaid`]; the root is 0) once. The statuses of the
    /// previous tick are forgotten first. An `id` out of range ticks
    /// nothing and returns an internal error status.
    pub async fn tick_node(&mut self, id: usize) -> Status {
        if id >= self.tree.len() {
            return Status::Error(
                crate::error::Error::internal(format!("no node {id} in the tree"))
                    .with_detail("node", id)
                    .with_detail("nodes", self.tree.len()),
            );
        }
        let ctx = StrategyContext::new(HARNESS).with_exec(self.exec.clone());
        let runner = ExecRunner {
            exec: &self.exec,
            opts: self.opts,
            base: ctx.action_context(&self.agent).with_state(StateMap::new()),
        };
        let mut cx = TickCx {
            blackboard: &mut self.blackboard,
            agent: &mut self.agent,
            directives: Vec::new(),
            runner: &runner,
            sequence: self.ticks,
            wake: None,
        };
        let status = self.tree.tick_subtree(id, &mut self.memory, &mut cx).await;
        let TickCx {
            directives, wake, ..
        } = cx;
        self.directives.extend(directives);
        self.wake = wake;
        self.ticks += 1;
        status
    }

    /// Halts the tree: every node's memory is reset and custom leaves'
    /// [`halt`](super::Leaf::halt) runs; the node statuses are cleared.
    pub fn halt(&mut self) {
        self.tree.halt(&mut self.memory);
        self.memory.clear_statuses();
    }

    /// Every node's status at the last tick, pre-order; `None` for a node
    /// not ticked then.
    pub fn statuses(&self) -> Vec<NodeStatus> {
        node_statuses(&self.tree, self.memory.statuses())
    }

    /// The blackboard.
    pub fn blackboard(&self) -> &Blackboard {
        &self.blackboard
    }

    /// The blackboard, to change between ticks.
    pub fn blackboard_mut(&mut self) -> &mut Blackboard {
        &mut self.blackboard
    }

    /// The agent state (action outputs are merged into it).
    pub fn agent_state(&self) -> &StateMap {
        self.agent.state()
    }

    /// The directives produced so far (by actions and leaves), taken.
    pub fn take_directives(&mut self) -> Vec<Directive> {
        std::mem::take(&mut self.directives)
    }

    /// The shortest delay a running node asked for at the last tick (a
    /// [`wait`](super::wait)'s time left, 0 after a repeat or retry step,
    /// what a leaf gave to [`LeafContext::wake_in`](super::LeafContext::wake_in)).
    pub fn wake(&self) -> Option<Duration> {
        self.wake
    }

    /// How many ticks ran.
    pub fn tick_count(&self) -> u64 {
        self.ticks
    }

    /// The tree.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }
}

impl std::fmt::Debug for TreeHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeHarness")
            .field("tree", &self.tree)
            .field("blackboard", &self.blackboard)
            .field("ticks", &self.ticks)
            .finish_non_exhaustive()
    }
}
