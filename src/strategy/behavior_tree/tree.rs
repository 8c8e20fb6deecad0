//! The compiled tree, its runtime memory and the tick engine.

use std::fmt::{self, Write as _};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::node::{
    BLACKBOARD_REF, Blackboard, Kind, Leaf, LeafContext, Node, Predicate, Status, TickStatus,
};
use super::runner::{ActionRunner, apply_outcome};
use crate::action::DynAction;
use crate::agent::AgentState;
use crate::directive::Directive;
use crate::error::{Error, Result};
use crate::exec::ExecOptions;
use crate::state::StateValue;

/// A validated behaviour tree: the nodes of a [`Node`] root numbered in
/// pre-order (the root is node 0). Cheap to clone.
///
/// ```
/// use jido::strategy::behavior_tree::{Tree, condition, inverter, sequence};
///
/// let tree = Tree::new(sequence([
///     condition("ready", |bb, _| bb.get("ready").is_some()),
///     inverter(condition("busy", |_, _| false)),
/// ]))
/// .unwrap();
/// assert_eq!(tree.len(), 4);
/// assert_eq!(tree.depth(), 3);
/// ```
#[derive(Clone)]
pub struct Tree {
    nodes: Arc<[Flat]>,
}

struct Flat {
    kind: FlatKind,
    name: Option<String>,
    children: Vec<usize>,
    /// One past the last node of this node's subtree.
    end: usize,
}

enum FlatKind {
    Sequence,
    Selector,
    Parallel {
        success: usize,
        failure: usize,
    },
    Inverter,
    Succeeder,
    Failer,
    Repeat(u32),
    Retry(u32),
    Wait(Duration),
    Condition(Predicate),
    SetBlackboard(Map<String, Value>),
    Action {
        action: DynAction,
        params: Value,
        opts: ExecOptions,
    },
    Leaf(Arc<dyn Leaf>),
}

impl FlatKind {
    fn type_name(&self) -> &'static str {
        match self {
            FlatKind::Sequence => "Sequence",
            FlatKind::Selector => "Selector",
            FlatKind::Parallel { .. } => "Parallel",
            FlatKind::Inverter => "Inverter",
            FlatKind::Succeeder => "Succeeder",
            FlatKind::Failer => "Failer",
            FlatKind::Repeat(_) => "Repeat",
            FlatKind::Retry(_) => "Retry",
            FlatKind::Wait(_) => "Wait",
            FlatKind::Condition(_) => "Condition",
            FlatKind::SetBlackboard(_) => "SetBlackboard",
            FlatKind::Action { .. } => "Action",
            FlatKind::Leaf(_) => "Leaf",
        }
    }
}

impl Tree {
    /// Validates and numbers the tree under `root`.
    ///
    /// # Errors
    ///
    /// A configuration error ("invalid behaviour tree: …", with the `node`
    /// detail naming the node's pre-order number) for a `repeat` count of
    /// 0, or a `parallel_with` threshold outside `1..=children` on a
    /// parallel node that has children.
    pub fn new(root: Node) -> Result<Self> {
        let mut nodes = Vec::new();
        flatten(root, &mut nodes)?;
        Ok(Self {
            nodes: nodes.into(),
        })
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a tree has a root.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The number of levels (a lone leaf has depth 1).
    pub fn depth(&self) -> usize {
        fn at(t: &Tree, id: usize) -> usize {
            1 + t.nodes[id]
                .children
                .iter()
                .map(|&c| at(t, c))
                .max()
                .unwrap_or(0)
        }
        at(self, 0)
    }

    /// The tree as a Mermaid flowchart: `flowchart TD`, one node `n<i>` per
    /// tree node (pre-order), labelled `Type`, `Type(arg)` for Repeat,
    /// Retry, Wait and Parallel, and `: name` when the node has a name
    /// (actions and leaves are named after themselves), then one edge per
    /// parent–child pair in order.
    ///
    /// ```
    /// use std::time::Duration;
    /// use jido::strategy::behavior_tree::{Tree, condition, repeat, selector, wait};
    ///
    /// let tree = Tree::new(
    ///     selector([condition("done", |_, _| false), repeat(2, wait(Duration::from_millis(50)))]).named("main"),
    /// )
    /// .unwrap();
    /// assert_eq!(
    ///     tree.to_mermaid(),
    ///     "flowchart TD\n    \
    ///      n0[\"Selector: main\"]\n    \
    ///      n1[\"Condition: done\"]\n    \
    ///      n2[\"Repeat(2)\"]\n    \
    ///      n3[\"Wait(50ms)\"]\n    \
    ///      n0 --> n1\n    \
    ///      n0 --> n2\n    \
    ///      n2 --> n3\n"
    /// );
    /// ```
    pub fn to_mermaid(&self) -> String {
        let mut out = String::from("flowchart TD\n");
        for (id, node) in self.nodes.iter().enumerate() {
            let _ = writeln!(
                out,
                "    n{id}[\"{}\"]",
                mermaid_escape(&self.label(id, node))
            );
        }
        for (id, node) in self.nodes.iter().enumerate() {
            for c in &node.children {
                let _ = writeln!(out, "    n{id} --> n{c}");
            }
        }
        out
    }

    fn label(&self, id: usize, node: &Flat) -> String {
        let mut label = String::from(node.kind.type_name());
        match &node.kind {
            FlatKind::Repeat(n) | FlatKind::Retry(n) => {
                let _ = write!(label, "({n})");
            }
            FlatKind::Wait(d) => {
                let _ = write!(label, "({d:?})");
            }
            FlatKind::Parallel { success, failure } => {
                let _ = write!(
                    label,
                    "(success {success}/{}, failure {failure})",
                    node.children.len()
                );
            }
            FlatKind::SetBlackboard(entries) => {
                let keys: Vec<&str> = entries.keys().map(String::as_str).collect();
                let _ = write!(label, "({})", keys.join(", "));
            }
            _ => {}
        }
        if let Some(name) = self.name_of(id) {
            let _ = write!(label, ": {name}");
        }
        label
    }

    fn name_of(&self, id: usize) -> Option<&str> {
        let node = &self.nodes[id];
        if let Some(n) = &node.name {
            return Some(n);
        }
        match &node.kind {
            FlatKind::Action { action, .. } => Some(action.name()),
            FlatKind::Leaf(leaf) => Some(leaf.name()),
            _ => None,
        }
    }

    /// Fresh runtime memory for this tree.
    pub(crate) fn new_state(&self) -> TreeState {
        TreeState {
            mem: (0..self.nodes.len()).map(|id| self.fresh(id)).collect(),
            last: vec![None; self.nodes.len()],
        }
    }

    fn fresh(&self, id: usize) -> Mem {
        match &self.nodes[id].kind {
            FlatKind::Sequence | FlatKind::Selector => Mem::Index(0),
            FlatKind::Parallel { .. } => Mem::Results(vec![None; self.nodes[id].children.len()]),
            FlatKind::Repeat(_) | FlatKind::Retry(_) => Mem::Count(0),
            FlatKind::Wait(_) => Mem::Wait(None),
            FlatKind::Leaf(_) => Mem::Leaf(Value::Null),
            _ => Mem::None,
        }
    }

    /// Reads memory written by [`Tree::state_to_json`]. Memory of another
    /// shape of tree (a different node count) gives fresh memory; a node
    /// entry of the wrong shape gives that node fresh memory. Wait start
    /// times written by another process are dropped (the wait starts again).
    pub(crate) fn state_from_json(&self, value: Option<&Value>) -> TreeState {
        let Some(Value::Object(obj)) = value else {
            return self.new_state();
        };
        let same_clock = obj.get("clock").and_then(Value::as_str) == Some(clock_id());
        let Some(Value::Array(items)) = obj.get("nodes") else {
            return self.new_state();
        };
        if items.len() != self.nodes.len() {
            return self.new_state();
        }
        let mem = items
            .iter()
            .enumerate()
            .map(|(id, v)| {
                self.mem_from_json(id, v, same_clock)
                    .unwrap_or_else(|| self.fresh(id))
            })
            .collect();
        let last = match obj.get("statuses") {
            Some(Value::Array(s)) if s.len() == self.nodes.len() => s
                .iter()
                .map(|v| v.as_str().and_then(TickStatus::parse))
                .collect(),
            _ => vec![None; self.nodes.len()],
        };
        TreeState { mem, last }
    }

    fn mem_from_json(&self, id: usize, v: &Value, same_clock: bool) -> Option<Mem> {
        let node = &self.nodes[id];
        let field = |k: &str| v.as_object().and_then(|o| o.get(k));
        Some(match &node.kind {
            FlatKind::Sequence | FlatKind::Selector => {
                let i = usize::try_from(field("index")?.as_u64()?).ok()?;
                if i > node.children.len() {
                    return None;
                }
                Mem::Index(i)
            }
            FlatKind::Parallel { .. } => {
                let arr = field("results")?.as_array()?;
                if arr.len() != node.children.len() {
                    return None;
                }
                let results = arr
                    .iter()
                    .map(|r| match r {
                        Value::Null => Some(None),
                        Value::Bool(b) => Some(Some(*b)),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?;
                Mem::Results(results)
            }
            FlatKind::Repeat(_) => Mem::Count(u32::try_from(field("iteration")?.as_u64()?).ok()?),
            FlatKind::Retry(_) => Mem::Count(u32::try_from(field("attempt")?.as_u64()?).ok()?),
            FlatKind::Wait(_) => match field("started_at") {
                Some(Value::Number(n)) if same_clock => Mem::Wait(Some(from_stamp(n.as_i64()?)?)),
                _ => Mem::Wait(None),
            },
            FlatKind::Leaf(_) => Mem::Leaf(v.clone()),
            _ => Mem::None,
        })
    }

    /// The JSON form of `state`: `{"clock": <process clock id>, "nodes":
    /// [one entry per node, pre-order], "statuses": [each node's status at
    /// the last tick, or null]}`.
    pub(crate) fn state_to_json(&self, state: &TreeState) -> Value {
        let nodes = state
            .mem
            .iter()
            .zip(self.nodes.iter())
            .map(|(m, node)| match (m, &node.kind) {
                (Mem::Index(i), _) => json_obj("index", Value::from(*i)),
                (Mem::Results(r), _) => json_obj(
                    "results",
                    Value::Array(
                        r.iter()
                            .map(|x| x.map_or(Value::Null, Value::Bool))
                            .collect(),
                    ),
                ),
                (Mem::Count(n), FlatKind::Retry(_)) => json_obj("attempt", Value::from(*n)),
                (Mem::Count(n), _) => json_obj("iteration", Value::from(*n)),
                (Mem::Wait(Some(t)), _) => json_obj("started_at", Value::from(stamp(*t))),
                (Mem::Wait(None), _) => json_obj("started_at", Value::Null),
                (Mem::Leaf(v), _) => v.clone(),
                (Mem::None, _) => Value::Null,
            })
            .collect();
        let statuses = state
            .last
            .iter()
            .map(|s| s.map_or(Value::Null, |s| Value::from(s.as_str())))
            .collect();
        let mut obj = Map::with_capacity(3);
        obj.insert("clock".into(), Value::String(clock_id().to_owned()));
        obj.insert("nodes".into(), Value::Array(nodes));
        obj.insert("statuses".into(), Value::Array(statuses));
        Value::Object(obj)
    }

    /// Halts the whole tree: every node's memory is reset and every custom
    /// leaf's [`halt`](Leaf::halt) runs.
    pub(crate) fn halt(&self, state: &mut TreeState) {
        self.halt_subtree(0, state);
    }

    fn halt_subtree(&self, id: usize, state: &mut TreeState) {
        for i in id..self.nodes[id].end {
            self.halt_one(i, state);
        }
    }

    fn halt_one(&self, id: usize, state: &mut TreeState) {
        match (&self.nodes[id].kind, &mut state.mem[id]) {
            (FlatKind::Leaf(leaf), Mem::Leaf(v)) => {
                let before = v.clone();
                if std::panic::catch_unwind(AssertUnwindSafe(|| leaf.halt(v))).is_err() {
                    *v = before;
                }
            }
            _ => state.mem[id] = self.fresh(id),
        }
    }

    /// Ticks the tree once.
    pub(crate) fn tick<'a>(
        &'a self,
        state: &'a mut TreeState,
        cx: &'a mut TickCx<'_>,
    ) -> BoxFuture<'a, Status> {
        self.tick_subtree(0, state, cx)
    }

    /// Ticks the subtree under node `id` once (the whole tree for 0); the
    /// statuses of the previous tick are forgotten first.
    pub(crate) fn tick_subtree<'a>(
        &'a self,
        id: usize,
        state: &'a mut TreeState,
        cx: &'a mut TickCx<'_>,
    ) -> BoxFuture<'a, Status> {
        state.clear_statuses();
        self.tick_node(id, state, cx)
    }

    /// The nodes as (type name, name), pre-order.
    pub(crate) fn describe(&self, id: usize) -> (&'static str, Option<&str>) {
        (self.nodes[id].kind.type_name(), self.name_of(id))
    }

    /// Ticks node `id` and records its status.
    fn tick_node<'a, 'c: 'a>(
        &'a self,
        id: usize,
        st: &'a mut TreeState,
        cx: &'a mut TickCx<'c>,
    ) -> BoxFuture<'a, Status> {
        Box::pin(async move {
            let status = self.tick_node_once(id, st, cx).await;
            st.last[id] = Some(TickStatus::of(&status));
            status
        })
    }

    /// Ticks node `id` (its children through [`tick_node`](Tree::tick_node),
    /// which boxes the recursion).
    async fn tick_node_once(&self, id: usize, st: &mut TreeState, cx: &mut TickCx<'_>) -> Status {
        let node = &self.nodes[id];
        match &node.kind {
            FlatKind::Sequence | FlatKind::Selector => {
                // A sequence moves on while its children succeed, a
                // selector while they fail; running out of children
                // gives that same status, any other result ends it.
                let advance = if matches!(node.kind, FlatKind::Sequence) {
                    Status::Success
                } else {
                    Status::Failure
                };
                let mut i = st.index(id);
                loop {
                    let Some(&child) = node.children.get(i) else {
                        st.mem[id] = Mem::Index(0);
                        return advance;
                    };
                    match self.tick_node(child, st, cx).await {
                        status if status == advance => i += 1,
                        Status::Running => {
                            st.mem[id] = Mem::Index(i);
                            return Status::Running;
                        }
                        other => {
                            st.mem[id] = Mem::Index(0);
                            return other;
                        }
                    }
                }
            }
            FlatKind::Parallel { success, failure } => {
                let mut results = match &st.mem[id] {
                    Mem::Results(r) => r.clone(),
                    _ => vec![None; node.children.len()],
                };
                let mut error = None;
                for (k, &child) in node.children.iter().enumerate() {
                    if results[k].is_some() {
                        continue;
                    }
                    match self.tick_node(child, st, cx).await {
                        Status::Success => results[k] = Some(true),
                        Status::Failure => results[k] = Some(false),
                        Status::Running => {}
                        Status::Error(e) => {
                            // The errored child is finished: mark it so it is not halted.
                            results[k] = Some(false);
                            error = Some(e);
                            break;
                        }
                    }
                }
                let succeeded = results.iter().filter(|r| **r == Some(true)).count();
                let failed = results.iter().filter(|r| **r == Some(false)).count();
                let unfinished = results.len() - succeeded - failed;
                let status = if let Some(e) = error {
                    Status::Error(e)
                } else if succeeded >= *success {
                    Status::Success
                } else if failed >= *failure || unfinished == 0 {
                    Status::Failure
                } else {
                    st.mem[id] = Mem::Results(results);
                    return Status::Running;
                };
                for (k, &child) in node.children.iter().enumerate() {
                    if results[k].is_none() {
                        self.halt_subtree(child, st);
                    }
                }
                st.mem[id] = self.fresh(id);
                status
            }
            FlatKind::Inverter => match self.tick_node(node.children[0], st, cx).await {
                Status::Success => Status::Failure,
                Status::Failure => Status::Success,
                other => other,
            },
            FlatKind::Succeeder => match self.tick_node(node.children[0], st, cx).await {
                Status::Failure => Status::Success,
                other => other,
            },
            FlatKind::Failer => match self.tick_node(node.children[0], st, cx).await {
                Status::Success => Status::Failure,
                other => other,
            },
            FlatKind::Repeat(count) => {
                let child = node.children[0];
                let done = st.count(id);
                match self.tick_node(child, st, cx).await {
                    Status::Success => {
                        let done = done + 1;
                        if done >= *count {
                            st.mem[id] = Mem::Count(0);
                            Status::Success
                        } else {
                            self.halt_subtree(child, st);
                            st.mem[id] = Mem::Count(done);
                            cx.wake_in(Duration::ZERO);
                            Status::Running
                        }
                    }
                    Status::Running => Status::Running,
                    other => {
                        st.mem[id] = Mem::Count(0);
                        other
                    }
                }
            }
            FlatKind::Retry(retries) => {
                let child = node.children[0];
                let attempt = st.count(id);
                let status = self.tick_node(child, st, cx).await;
                let again = match &status {
                    Status::Failure => true,
                    Status::Error(e) => e.retryable(),
                    _ => false,
                };
                match status {
                    Status::Running => Status::Running,
                    _ if again && attempt < *retries => {
                        self.halt_subtree(child, st);
                        st.mem[id] = Mem::Count(attempt + 1);
                        cx.wake_in(Duration::ZERO);
                        Status::Running
                    }
                    other => {
                        st.mem[id] = Mem::Count(0);
                        other
                    }
                }
            }
            FlatKind::Wait(duration) => {
                let now = Instant::now();
                match st.mem[id] {
                    Mem::Wait(Some(started)) => {
                        let elapsed = now.saturating_duration_since(started);
                        if elapsed >= *duration {
                            st.mem[id] = Mem::Wait(None);
                            Status::Success
                        } else {
                            cx.wake_in(*duration - elapsed);
                            Status::Running
                        }
                    }
                    _ => {
                        st.mem[id] = Mem::Wait(Some(now));
                        cx.wake_in(*duration);
                        Status::Running
                    }
                }
            }
            FlatKind::Condition(predicate) => {
                let (bb, state) = (&*cx.blackboard, cx.agent.state());
                match std::panic::catch_unwind(AssertUnwindSafe(|| predicate(bb, state))) {
                    Ok(true) => Status::Success,
                    Ok(false) => Status::Failure,
                    Err(panic) => {
                        let name = self.name_of(id).unwrap_or("condition");
                        let msg = crate::exec::panic_message(&*panic);
                        Status::Error(
                            Error::execution(format!("condition {name} panicked: {msg}"))
                                .with_detail("node", name.to_owned())
                                .with_detail("panic", msg),
                        )
                    }
                }
            }
            FlatKind::SetBlackboard(entries) => {
                cx.blackboard
                    .extend(entries.iter().map(|(k, v)| (k, StateValue::from(v))));
                Status::Success
            }
            FlatKind::Action {
                action,
                params,
                opts,
            } => {
                let params = resolve_params(params, cx.blackboard);
                let snapshot = cx.agent.state().clone();
                let outcome = cx.runner.run(action, params, *opts, snapshot).await;
                let (result, directives) = apply_outcome(cx.agent, outcome);
                cx.directives.extend(directives);
                match result {
                    Ok(output) => {
                        cx.blackboard.insert("last_result", Value::Object(output));
                        Status::Success
                    }
                    Err(error) => {
                        cx.blackboard.insert("error", error.to_envelope());
                        Status::Error(error)
                    }
                }
            }
            FlatKind::Leaf(leaf) => {
                let Mem::Leaf(memory) = &mut st.mem[id] else {
                    return Status::Error(Error::internal("leaf memory missing"));
                };
                let before = memory.clone();
                let mut lcx = LeafContext {
                    blackboard: &mut *cx.blackboard,
                    agent_state: cx.agent.state(),
                    sequence: cx.sequence,
                    directives: &mut cx.directives,
                    wake: &mut cx.wake,
                };
                match std::panic::catch_unwind(AssertUnwindSafe(|| leaf.tick(memory, &mut lcx))) {
                    Ok(status) => status,
                    Err(panic) => {
                        *memory = before;
                        let name = leaf.name().to_owned();
                        let msg = crate::exec::panic_message(&*panic);
                        Status::Error(
                            Error::execution(format!("leaf {name} panicked: {msg}"))
                                .with_detail("node", name)
                                .with_detail("panic", msg),
                        )
                    }
                }
            }
        }
    }
}

impl fmt::Debug for Tree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels: Vec<String> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(id, n)| self.label(id, n))
            .collect();
        f.debug_struct("Tree").field("nodes", &labels).finish()
    }
}

fn flatten(node: Node, out: &mut Vec<Flat>) -> Result<usize> {
    let id = out.len();
    let invalid = |msg: &str| {
        Error::configuration(format!("invalid behaviour tree: {msg}")).with_detail("node", id)
    };
    let (kind, children): (FlatKind, Vec<Node>) = match node.kind {
        Kind::Sequence(c) => (FlatKind::Sequence, c),
        Kind::Selector(c) => (FlatKind::Selector, c),
        Kind::Parallel {
            success,
            failure,
            children,
        } => {
            let n = children.len();
            let success = success.unwrap_or(n);
            let failure = failure.unwrap_or(1);
            if n > 0 && !(1..=n).contains(&success) {
                return Err(invalid(&format!(
                    "parallel success threshold {success} is outside 1..={n}"
                )));
            }
            if n > 0 && !(1..=n).contains(&failure) {
                return Err(invalid(&format!(
                    "parallel failure threshold {failure} is outside 1..={n}"
                )));
            }
            (FlatKind::Parallel { success, failure }, children)
        }
        Kind::Inverter(c) => (FlatKind::Inverter, vec![*c]),
        Kind::Succeeder(c) => (FlatKind::Succeeder, vec![*c]),
        Kind::Failer(c) => (FlatKind::Failer, vec![*c]),
        Kind::Repeat(n, c) => {
            if n == 0 {
                return Err(invalid("repeat count must be at least 1"));
            }
            (FlatKind::Repeat(n), vec![*c])
        }
        Kind::Retry(n, c) => (FlatKind::Retry(n), vec![*c]),
        Kind::Wait(d) => (FlatKind::Wait(d), Vec::new()),
        Kind::Condition(p) => (FlatKind::Condition(p), Vec::new()),
        Kind::SetBlackboard(e) => (FlatKind::SetBlackboard(e), Vec::new()),
        Kind::Action {
            action,
            params,
            opts,
        } => (
            FlatKind::Action {
                action,
                params,
                opts,
            },
            Vec::new(),
        ),
        Kind::Leaf(l) => (FlatKind::Leaf(l), Vec::new()),
    };
    out.push(Flat {
        kind,
        name: node.name,
        children: Vec::new(),
        end: id + 1,
    });
    let mut ids = Vec::with_capacity(children.len());
    for child in children {
        ids.push(flatten(child, out)?);
    }
    let end = out.len();
    out[id].children = ids;
    out[id].end = end;
    Ok(id)
}

/// Runtime memory of a tree: one entry per node, pre-order, and each
/// node's status at the last tick.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TreeState {
    mem: Vec<Mem>,
    last: Vec<Option<TickStatus>>,
}

impl TreeState {
    /// Each node's status at the last tick (`None`: not ticked in it).
    pub(crate) fn statuses(&self) -> &[Option<TickStatus>] {
        &self.last
    }

    pub(crate) fn clear_statuses(&mut self) {
        self.last.fill(None);
    }

    fn index(&self, id: usize) -> usize {
        match self.mem[id] {
            Mem::Index(i) => i,
            _ => 0,
        }
    }

    fn count(&self, id: usize) -> u32 {
        match self.mem[id] {
            Mem::Count(n) => n,
            _ => 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Mem {
    None,
    /// Sequence / Selector: the child to resume at.
    Index(usize),
    /// Parallel: per child, `Some(succeeded?)` once finished this round.
    Results(Vec<Option<bool>>),
    /// Repeat: successes so far; Retry: failed attempts so far.
    Count(u32),
    /// Wait: when the wait started.
    Wait(Option<Instant>),
    /// Custom leaf memory.
    Leaf(Value),
}

/// Everything a tick threads through the nodes.
pub(crate) struct TickCx<'a> {
    pub(crate) blackboard: &'a mut Blackboard,
    pub(crate) agent: &'a mut AgentState,
    pub(crate) directives: Vec<Directive>,
    pub(crate) runner: &'a dyn ActionRunner,
    pub(crate) sequence: u64,
    /// The shortest delay a running node asked for before the next tick.
    pub(crate) wake: Option<Duration>,
}

impl TickCx<'_> {
    fn wake_in(&mut self, d: Duration) {
        self.wake = Some(self.wake.map_or(d, |w| w.min(d)));
    }
}

/// Replaces `{"$bb": "key"}` objects (at any depth) with the blackboard
/// value under `key`, or `null`.
pub(crate) fn resolve_params(params: &Value, bb: &Blackboard) -> Value {
    match params {
        Value::Object(map) => {
            if map.len() == 1
                && let Some(Value::String(key)) = map.get(BLACKBOARD_REF)
            {
                return bb.get(key).map_or(Value::Null, StateValue::to_json);
            }
            Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), resolve_params(v, bb)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| resolve_params(v, bb)).collect()),
        other => other.clone(),
    }
}

fn json_obj(key: &str, value: Value) -> Value {
    let mut m = Map::with_capacity(1);
    m.insert(key.into(), value);
    Value::Object(m)
}

fn mermaid_escape(s: &str) -> String {
    s.replace('"', "#quot;").replace('\n', " ")
}

// Instants are stored as signed nanoseconds from a process-wide anchor, with
// a process clock id beside them: a start time written by another process
// is meaningless here and is dropped.
static ANCHOR: LazyLock<std::time::Instant> = LazyLock::new(std::time::Instant::now);
static CLOCK_ID: LazyLock<String> = LazyLock::new(|| uuid::Uuid::now_v7().to_string());

fn clock_id() -> &'static str {
    &CLOCK_ID
}

pub(crate) fn stamp(t: Instant) -> i64 {
    let t = t.into_std();
    let anchor = *ANCHOR;
    if t >= anchor {
        i64::try_from((t - anchor).as_nanos()).unwrap_or(i64::MAX)
    } else {
        -i64::try_from((anchor - t).as_nanos()).unwrap_or(i64::MAX)
    }
}

pub(crate) fn from_stamp(nanos: i64) -> Option<Instant> {
    let anchor = *ANCHOR;
    let d = Duration::from_nanos(nanos.unsigned_abs());
    let t = if nanos >= 0 {
        anchor.checked_add(d)?
    } else {
        anchor.checked_sub(d)?
    };
    Some(Instant::from_std(t))
}
