//! The signal routes an agent or a strategy declares: a signal type
//! pattern and what a matching signal becomes (an action to run, a
//! strategy command, a tick).

use serde_json::Value;

use crate::action::DynAction;

/// What a route sends a matching signal to.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub enum RouteTarget {
    /// Run this action with the signal's data as params.
    Action(DynAction),
    /// Run this action with these fixed params.
    ActionWithParams(DynAction, Value),
    /// Send a strategy command (the signal's data as its params).
    StrategyCmd(String),
    /// Send a strategy command that reads typed payloads: as
    /// [`StrategyCmd`](RouteTarget::StrategyCmd) for a signal with JSON
    /// data, but a signal carrying a [typed
    /// payload](crate::signal::Signal#typed-payloads) is not turned into
    /// JSON: the params are `Value::Null` and the strategy takes the value
    /// from the signal being handled ([`StrategyContext::signal`],
    /// [`Signal::payload`]). For a strategy's own routes of in-process
    /// signals (the AI runtime's `ai.*` signals).
    ///
    /// [`StrategyContext::signal`]: crate::strategy::StrategyContext::signal
    /// [`Signal::payload`]: crate::signal::Signal::payload
    StrategyPayload(String),
    /// Run one strategy tick.
    StrategyTick,
}

/// A signal route declared by an agent or a strategy.
#[derive(Debug, Clone)]
pub struct SignalRoute {
    /// The signal type pattern (`*` one segment, `**` one or more).
    pub path: String,
    /// Where matching signals go.
    pub target: RouteTarget,
    /// Priority in -100..=100; `None` takes the source's default (agent 0,
    /// strategy 50).
    pub priority: Option<i32>,
}

impl SignalRoute {
    /// A route from `path` to `target` with the source's default priority.
    pub fn new(path: impl Into<String>, target: RouteTarget) -> Self {
        Self {
            path: path.into(),
            target,
            priority: None,
        }
    }

    /// A route from `path` to `action` (the signal's data as params).
    pub fn action(path: impl Into<String>, action: impl Into<DynAction>) -> Self {
        Self::new(path, RouteTarget::Action(action.into()))
    }

    /// Sets the priority.
    #[must_use]
    pub fn with_priority(mut self, priority: i32) -> Self {
        self.priority = Some(priority);
        self
    }
}
