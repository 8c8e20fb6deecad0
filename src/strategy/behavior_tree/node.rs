//! Tree nodes as written by users: the builder functions, [`Node`],
//! [`Status`], [`Param`] and the [`Leaf`] trait for custom leaves.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::action::DynAction;
use crate::directive::Directive;
use crate::error::Error;
use crate::exec::ExecOptions;
use crate::state::StateMap;

/// The blackboard: a JSON object shared by every node of a tree, persisted
/// under `__strategy__.blackboard`. A [`StateMap`]: loading and storing it
/// on every tick costs O(1), a write copies only what it changes.
pub type Blackboard = StateMap;

/// The key of a blackboard reference inside action params:
/// `{"$bb": "key"}` is replaced by the blackboard value under `key`.
pub const BLACKBOARD_REF: &str = "$bb";

/// The result of ticking a node.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    /// The node finished well.
    Success,
    /// The node finished badly (a condition was false, a selector ran out
    /// of children).
    Failure,
    /// The node needs more ticks.
    Running,
    /// Something broke: an action failed, a predicate panicked. Composites
    /// stop on an error (a selector does not try the next child).
    Error(Error),
}

impl Status {
    /// Whether the node finished (success, failure or error).
    pub fn is_done(&self) -> bool {
        !matches!(self, Status::Running)
    }

    /// Whether the status is [`Status::Failure`] or [`Status::Error`].
    pub fn is_failure(&self) -> bool {
        matches!(self, Status::Failure | Status::Error(_))
    }

    /// `"success"`, `"failure"`, `"running"` or `"error"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Failure => "failure",
            Status::Running => "running",
            Status::Error(_) => "error",
        }
    }
}

/// The kind of a [`Status`] without its error: what a node returned at
/// the last tick, as kept in the tree's memory (see
/// [`BehaviorTree::statuses`](super::BehaviorTree::statuses)).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TickStatus {
    /// [`Status::Success`].
    Success,
    /// [`Status::Failure`].
    Failure,
    /// [`Status::Running`].
    Running,
    /// [`Status::Error`].
    Error,
}

impl TickStatus {
    /// The kind of `status`.
    pub fn of(status: &Status) -> Self {
        match status {
            Status::Success => TickStatus::Success,
            Status::Failure => TickStatus::Failure,
            Status::Running => TickStatus::Running,
            Status::Error(_) => TickStatus::Error,
        }
    }

    /// `"success"`, `"failure"`, `"running"` or `"error"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TickStatus::Success => "success",
            TickStatus::Failure => "failure",
            TickStatus::Running => "running",
            TickStatus::Error => "error",
        }
    }

    /// Reads what [`as_str`](TickStatus::as_str) writes.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "success" => TickStatus::Success,
            "failure" => TickStatus::Failure,
            "running" => TickStatus::Running,
            "error" => TickStatus::Error,
            _ => return None,
        })
    }
}

impl From<&Status> for TickStatus {
    fn from(status: &Status) -> Self {
        TickStatus::of(status)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Error(e) => write!(f, "error: {e}"),
            other => f.write_str(other.as_str()),
        }
    }
}

/// One value of an action node's params: a literal, or a reference to a
/// blackboard key resolved when the node is ticked.
///
/// ```
/// use jido::strategy::behavior_tree::Param;
/// use serde_json::json;
///
/// assert_eq!(Param::from(5).into_value(), json!(5));
/// assert_eq!(Param::from_blackboard("target").into_value(), json!({"$bb": "target"}));
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// A literal JSON value.
    Value(Value),
    /// The blackboard value under this key (`null` when the key is absent).
    FromBlackboard(String),
}

impl Param {
    /// A reference to the blackboard key `key`.
    pub fn from_blackboard(key: impl Into<String>) -> Self {
        Param::FromBlackboard(key.into())
    }

    /// The JSON form: the literal, or `{"$bb": key}`.
    pub fn into_value(self) -> Value {
        match self {
            Param::Value(v) => v,
            Param::FromBlackboard(key) => {
                let mut m = Map::with_capacity(1);
                m.insert(BLACKBOARD_REF.into(), Value::String(key));
                Value::Object(m)
            }
        }
    }
}

impl<T: Into<Value>> From<T> for Param {
    fn from(v: T) -> Self {
        Param::Value(v.into())
    }
}

/// What a [`Leaf`] sees while it is ticked.
pub struct LeafContext<'a> {
    pub(crate) blackboard: &'a mut Blackboard,
    pub(crate) agent_state: &'a StateMap,
    pub(crate) sequence: u64,
    pub(crate) directives: &'a mut Vec<Directive>,
    pub(crate) wake: &'a mut Option<Duration>,
}

impl LeafContext<'_> {
    /// The blackboard.
    pub fn blackboard(&self) -> &Blackboard {
        self.blackboard
    }

    /// The blackboard, to write to.
    pub fn blackboard_mut(&mut self) -> &mut Blackboard {
        self.blackboard
    }

    /// The agent state as it is at this point of the tick.
    pub fn agent_state(&self) -> &StateMap {
        self.agent_state
    }

    /// The number of the current tick (the strategy's `tick_count` before
    /// this tick: the first tick is 0).
    pub fn tick_sequence(&self) -> u64 {
        self.sequence
    }

    /// Adds a directive to those the tick returns.
    pub fn push_directive(&mut self, directive: Directive) {
        self.directives.push(directive);
    }

    /// Asks for the next tick within `delay` when this leaf returns
    /// [`Status::Running`] (the strategy schedules the next tick after the
    /// shortest delay asked for during the tick).
    pub fn wake_in(&mut self, delay: Duration) {
        *self.wake = Some(self.wake.map_or(delay, |w| w.min(delay)));
    }
}

impl fmt::Debug for LeafContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeafContext")
            .field("blackboard", &self.blackboard)
            .field("sequence", &self.sequence)
            .finish_non_exhaustive()
    }
}

/// A custom leaf node.
///
/// A leaf keeps its runtime memory in a JSON value (`null` at first) that
/// the strategy stores with the rest of the tree's state under
/// `__strategy__`, so it survives checkpoints. Ticking is synchronous: work
/// that has to wait belongs in an [`Action`](crate::Action) node. A panic
/// in [`tick`](Leaf::tick) becomes [`Status::Error`] and the leaf's memory
/// is left as it was before the tick.
///
/// ```
/// use jido::strategy::behavior_tree::{Leaf, LeafContext, Status, leaf, sequence};
/// use serde_json::Value;
///
/// /// Runs for `n` ticks, then succeeds.
/// struct Countdown(u64);
///
/// impl Leaf for Countdown {
///     fn name(&self) -> &str { "countdown" }
///     fn tick(&self, memory: &mut Value, _ctx: &mut LeafContext<'_>) -> Status {
///         let left = memory.as_u64().unwrap_or(self.0);
///         if left == 0 {
///             *memory = Value::Null;
///             Status::Success
///         } else {
///             *memory = Value::from(left - 1);
///             Status::Running
///         }
///     }
/// }
///
/// let tree = sequence([leaf(Countdown(2))]);
/// ```
pub trait Leaf: Send + Sync + 'static {
    /// The label used in diagrams and error details.
    fn name(&self) -> &str;

    /// Ticks the leaf with its memory.
    fn tick(&self, memory: &mut Value, ctx: &mut LeafContext<'_>) -> Status;

    /// Stops a running leaf: resets its memory. The default sets it to
    /// `null`. Called when a parent halts its subtree (a Repeat between
    /// iterations, a Parallel that completed, the `bt_halt` command); it
    /// must be idempotent.
    fn halt(&self, memory: &mut Value) {
        *memory = Value::Null;
    }
}

/// A predicate of a [`condition`] node.
pub(crate) type Predicate = Arc<dyn Fn(&Blackboard, &StateMap) -> bool + Send + Sync>;

/// A tree node as written by the user; turn the root into a
/// [`Tree`](super::Tree) to use it.
///
/// Build nodes with the functions of this module: [`sequence`],
/// [`selector`], [`parallel`], [`inverter`], [`succeeder`], [`failer`],
/// [`repeat`], [`retry`], [`wait`], [`condition`], [`set_blackboard`],
/// [`action`], [`leaf`].
#[derive(Clone)]
pub struct Node {
    pub(crate) kind: Kind,
    pub(crate) name: Option<String>,
}

#[derive(Clone)]
pub(crate) enum Kind {
    Sequence(Vec<Node>),
    Selector(Vec<Node>),
    Parallel {
        success: Option<usize>,
        failure: Option<usize>,
        children: Vec<Node>,
    },
    Inverter(Box<Node>),
    Succeeder(Box<Node>),
    Failer(Box<Node>),
    Repeat(u32, Box<Node>),
    Retry(u32, Box<Node>),
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

impl Kind {
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Kind::Sequence(_) => "Sequence",
            Kind::Selector(_) => "Selector",
            Kind::Parallel { .. } => "Parallel",
            Kind::Inverter(_) => "Inverter",
            Kind::Succeeder(_) => "Succeeder",
            Kind::Failer(_) => "Failer",
            Kind::Repeat(..) => "Repeat",
            Kind::Retry(..) => "Retry",
            Kind::Wait(_) => "Wait",
            Kind::Condition(_) => "Condition",
            Kind::SetBlackboard(_) => "SetBlackboard",
            Kind::Action { .. } => "Action",
            Kind::Leaf(_) => "Leaf",
        }
    }
}

impl Node {
    fn new(kind: Kind) -> Self {
        Self { kind, name: None }
    }

    /// Names the node (shown in diagrams and error details).
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The node's name: the one given with [`named`](Node::named), else
    /// the action's or leaf's name, else the condition's name.
    pub fn name(&self) -> Option<&str> {
        if let Some(n) = &self.name {
            return Some(n);
        }
        match &self.kind {
            Kind::Action { action, .. } => Some(action.name()),
            Kind::Leaf(leaf) => Some(leaf.name()),
            _ => None,
        }
    }

    /// The node type, e.g. `"Sequence"`.
    pub fn type_name(&self) -> &'static str {
        self.kind.type_name()
    }

    /// Sets all params of an action node (a JSON object whose values may be
    /// `{"$bb": "key"}` references, at any depth). No effect on other
    /// nodes.
    #[must_use]
    pub fn with_params(mut self, new_params: Value) -> Self {
        if let Kind::Action { params, .. } = &mut self.kind {
            *params = new_params;
        }
        self
    }

    /// Sets one param of an action node. No effect on other nodes.
    ///
    /// ```
    /// use jido::strategy::behavior_tree::{Param, action};
    /// # use jido::prelude::*;
    /// # #[derive(Clone, serde::Deserialize, schemars::JsonSchema)] struct P {}
    /// # struct MoveTo;
    /// # impl Action for MoveTo {
    /// #     type Params = P; type Output = ();
    /// #     const NAME: &'static str = "move_to";
    /// #     async fn run(&self, _: P, _: &Context) -> jido::Result<()> { Ok(()) }
    /// # }
    /// let node = action(MoveTo).param("speed", 2).param("target", Param::from_blackboard("target"));
    /// ```
    #[must_use]
    pub fn param(mut self, key: impl Into<String>, value: impl Into<Param>) -> Self {
        if let Kind::Action { params, .. } = &mut self.kind {
            if !params.is_object() {
                *params = Value::Object(Map::new());
            }
            if let Value::Object(map) = params {
                map.insert(key.into(), value.into().into_value());
            }
        }
        self
    }

    /// Sets the Exec options of an action node; they win over the options
    /// of the `cmd`. No effect on other nodes.
    #[must_use]
    pub fn with_opts(mut self, new_opts: ExecOptions) -> Self {
        if let Kind::Action { opts, .. } = &mut self.kind {
            *opts = new_opts;
        }
        self
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct(self.type_name());
        if let Some(name) = self.name() {
            d.field("name", &name);
        }
        match &self.kind {
            Kind::Sequence(c) | Kind::Selector(c) => {
                d.field("children", c);
            }
            Kind::Parallel {
                success,
                failure,
                children,
            } => {
                d.field("success", success)
                    .field("failure", failure)
                    .field("children", children);
            }
            Kind::Inverter(c) | Kind::Succeeder(c) | Kind::Failer(c) => {
                d.field("child", c);
            }
            Kind::Repeat(n, c) | Kind::Retry(n, c) => {
                d.field("count", n).field("child", c);
            }
            Kind::Wait(t) => {
                d.field("duration", t);
            }
            Kind::SetBlackboard(e) => {
                d.field("entries", e);
            }
            Kind::Action { params, .. } => {
                d.field("params", params);
            }
            Kind::Condition(_) | Kind::Leaf(_) => {}
        }
        d.finish()
    }
}

impl<A: crate::Action> From<A> for Node {
    fn from(a: A) -> Self {
        action(a)
    }
}

/// Runs children in order from where it stopped: a success moves on, the
/// first failure or error ends it, a running child makes it running and is
/// where the next tick resumes (earlier children are not ticked again).
/// Succeeds when every child has (an empty sequence succeeds).
pub fn sequence(children: impl IntoIterator<Item = Node>) -> Node {
    Node::new(Kind::Sequence(children.into_iter().collect()))
}

/// Tries children in order from where it stopped: the first success ends
/// it, a failure moves on, an error stops it with that error, a running
/// child makes it running and is where the next tick resumes. Fails when
/// every child has failed (an empty selector fails).
pub fn selector(children: impl IntoIterator<Item = Node>) -> Node {
    Node::new(Kind::Selector(children.into_iter().collect()))
}

/// Ticks every unfinished child once per tick; succeeds when all children
/// succeeded, fails as soon as one failed. See [`parallel_with`] for other
/// thresholds.
pub fn parallel(children: impl IntoIterator<Item = Node>) -> Node {
    Node::new(Kind::Parallel {
        success: None,
        failure: None,
        children: children.into_iter().collect(),
    })
}

/// A parallel node that succeeds once `success` children succeeded and
/// fails once `failure` children failed (both in `1..=children`, checked by
/// [`Tree::new`](super::Tree::new)). When it completes, children still
/// running are halted. See the [module docs](super) for the exact rule.
pub fn parallel_with(
    success: usize,
    failure: usize,
    children: impl IntoIterator<Item = Node>,
) -> Node {
    Node::new(Kind::Parallel {
        success: Some(success),
        failure: Some(failure),
        children: children.into_iter().collect(),
    })
}

/// Swaps success and failure of its child; running and errors pass through.
pub fn inverter(child: Node) -> Node {
    Node::new(Kind::Inverter(Box::new(child)))
}

/// Turns the child's failure into success; running and errors pass through.
pub fn succeeder(child: Node) -> Node {
    Node::new(Kind::Succeeder(Box::new(child)))
}

/// Turns the child's success into failure; running and errors pass through.
pub fn failer(child: Node) -> Node {
    Node::new(Kind::Failer(Box::new(child)))
}

/// Succeeds once its child has succeeded `count` times (`count >= 1`),
/// one success per tick: between successes it halts the child and returns
/// running, so `repeat(3, …)` needs 3 ticks. A failure or error of the
/// child ends it at once (and resets the count).
pub fn repeat(count: u32, child: Node) -> Node {
    Node::new(Kind::Repeat(count, Box::new(child)))
}

/// Re-runs a child that fails (or errors with a
/// [retryable](crate::Error::retryable) error) up to `retries` more times,
/// one attempt per tick: after a failed attempt it halts the child and
/// returns running. Succeeds as soon as the child does; after the last
/// attempt it returns the child's failure or error. A non-retryable error
/// passes through at once. Not in Jido.
pub fn retry(retries: u32, child: Node) -> Node {
    Node::new(Kind::Retry(retries, Box::new(child)))
}

/// Returns running on its first tick (and records when), then success on
/// the first tick at least `duration` later. Measured with
/// [`tokio::time::Instant`], so paused-clock tests control it.
pub fn wait(duration: Duration) -> Node {
    Node::new(Kind::Wait(duration))
}

/// Success when `predicate(blackboard, agent_state)` is true, failure when
/// false, [`Status::Error`] when it panics. Not in Jido (its guide builds
/// one as a custom node).
///
/// ```
/// use jido::strategy::behavior_tree::condition;
///
/// let low = condition("battery_low", |bb, _state| bb["battery"].as_i64().unwrap_or(0) < 20);
/// ```
pub fn condition(
    name: impl Into<String>,
    predicate: impl Fn(&Blackboard, &StateMap) -> bool + Send + Sync + 'static,
) -> Node {
    Node::new(Kind::Condition(Arc::new(predicate))).named(name)
}

/// Writes `entries` into the blackboard (later keys win) and succeeds.
///
/// ```
/// use jido::strategy::behavior_tree::set_blackboard;
/// use serde_json::json;
///
/// let node = set_blackboard([("mode", json!("patrol")), ("laps", json!(0))]);
/// ```
pub fn set_blackboard<K: Into<String>>(entries: impl IntoIterator<Item = (K, Value)>) -> Node {
    Node::new(Kind::SetBlackboard(
        entries.into_iter().map(|(k, v)| (k.into(), v)).collect(),
    ))
}

/// Runs an action through [`Exec`](crate::exec::Exec) with the agent state
/// in its context. Its output is deep-merged into the agent state, its
/// state operations applied, its other effects returned as directives, the
/// output stored on the blackboard as `last_result`: success. A failed run
/// is [`Status::Error`] and its error envelope goes to the blackboard as
/// `error`. Set params with [`Node::param`] or [`Node::with_params`].
pub fn action(action: impl Into<DynAction>) -> Node {
    Node::new(Kind::Action {
        action: action.into(),
        params: Value::Object(Map::new()),
        opts: ExecOptions::new(),
    })
}

/// A custom [`Leaf`].
pub fn leaf(leaf: impl Leaf) -> Node {
    Node::new(Kind::Leaf(Arc::new(leaf)))
}
