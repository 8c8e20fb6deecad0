//! Circuit breakers for dispatch targets, keyed by [`Dispatch::circuit_key`](super::Dispatch::circuit_key).
//!
//! The semantics are those of Jido's `:fuse` `{:standard, 5, 10_000}` with
//! a 30 s reset: failed deliveries are counted in a sliding window; the
//! failure that makes the count exceed `max_failures` opens the breaker;
//! while open, deliveries fail fast with `circuit_open`; once `reset_after`
//! has passed, the breaker closes with its history cleared. Successes do
//! not clear failures (the window does). Time is `tokio::time::Instant`,
//! so tests can drive it with a paused clock.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::Result;

/// The settings of a circuit breaker. The default is Jido's: open on the
/// 6th failure within 10 s, reset after 30 s.
///
/// ```
/// use std::time::Duration;
/// use jido::signal::dispatch::CircuitSettings;
///
/// let s = CircuitSettings::default();
/// assert_eq!(s.max_failures(), 5);
/// assert_eq!(s.window(), Duration::from_secs(10));
/// assert_eq!(s.reset_after(), Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitSettings {
    max_failures: u32,
    window: Duration,
    reset_after: Duration,
}

impl Default for CircuitSettings {
    fn default() -> Self {
        Self {
            max_failures: 5,
            window: Duration::from_secs(10),
            reset_after: Duration::from_secs(30),
        }
    }
}

impl CircuitSettings {
    /// Settings tolerating `max_failures` failures per `window`, the next
    /// one opening the breaker for `reset_after`.
    pub const fn new(max_failures: u32, window: Duration, reset_after: Duration) -> Self {
        Self {
            max_failures,
            window,
            reset_after,
        }
    }

    /// Failures tolerated within the window.
    pub fn max_failures(&self) -> u32 {
        self.max_failures
    }

    /// The sliding window in which failures are counted.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// How long the breaker stays open.
    pub fn reset_after(&self) -> Duration {
        self.reset_after
    }
}

/// The state of one circuit breaker.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitState {
    /// Deliveries go through; `failures` were counted in the current
    /// window.
    Closed {
        /// Failures within the window.
        failures: usize,
    },
    /// Deliveries fail fast for `remaining` more.
    Open {
        /// Time until the breaker resets.
        remaining: Duration,
    },
}

#[derive(Debug, Default)]
struct Breaker {
    failures: VecDeque<Instant>,
    open_until: Option<Instant>,
}

fn registry() -> MutexGuard<'static, HashMap<String, Breaker>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Breaker>>> = OnceLock::new();
    REGISTRY
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The state of the breaker with this key (closed with no failures when
/// there is none).
pub fn circuit_state(key: &str) -> CircuitState {
    let now = Instant::now();
    let breakers = registry();
    match breakers.get(key) {
        None => CircuitState::Closed { failures: 0 },
        Some(b) => match b.open_until {
            Some(until) if until > now => CircuitState::Open {
                remaining: until - now,
            },
            Some(_) => CircuitState::Closed { failures: 0 },
            None => CircuitState::Closed {
                failures: b.failures.len(),
            },
        },
    }
}

/// Closes the breaker with this key and forgets its failures.
pub fn reset_circuit(key: &str) {
    registry().remove(key);
}

/// Fails fast when the breaker is open; closes it (and emits `reset`) when
/// its time is up.
pub(crate) fn check(key: &str, adapter: &str, settings: &CircuitSettings) -> Result<()> {
    let now = Instant::now();
    let mut breakers = registry();
    let Some(breaker) = breakers.get_mut(key) else {
        return Ok(());
    };
    match breaker.open_until {
        Some(until) if until > now => {
            drop(breakers);
            tracing::debug!(
                name: "jido.dispatch.circuit.rejected",
                target: "jido::dispatch",
                adapter,
                circuit = key,
                "jido.dispatch.circuit.rejected"
            );
            Err(super::circuit_open(key))
        }
        Some(_) => {
            breakers.remove(key);
            drop(breakers);
            tracing::info!(
                name: "jido.dispatch.circuit.reset",
                target: "jido::dispatch",
                adapter,
                circuit = key,
                "jido.dispatch.circuit.reset"
            );
            Ok(())
        }
        None => {
            prune(breaker, now, settings);
            if breaker.failures.is_empty() {
                breakers.remove(key);
            }
            Ok(())
        }
    }
}

fn prune(breaker: &mut Breaker, now: Instant, settings: &CircuitSettings) {
    while breaker
        .failures
        .front()
        .is_some_and(|t| now.duration_since(*t) >= settings.window)
    {
        breaker.failures.pop_front();
    }
}

/// Counts a failed delivery; opens the breaker when the count exceeds the
/// tolerance.
pub(crate) fn record_failure(key: &str, adapter: &str, settings: &CircuitSettings) {
    let now = Instant::now();
    let mut breakers = registry();
    let breaker = breakers.entry(key.to_owned()).or_default();
    if breaker.open_until.is_some() {
        // Already open (a delivery that started before it opened).
        return;
    }
    prune(breaker, now, settings);
    breaker.failures.push_back(now);
    let failures = breaker.failures.len();
    let open = failures > settings.max_failures as usize;
    if open {
        breaker.open_until = Some(now + settings.reset_after);
        breaker.failures.clear();
    }
    drop(breakers);
    if open {
        tracing::warn!(
            name: "jido.dispatch.circuit.melt",
            target: "jido::dispatch",
            adapter,
            circuit = key,
            failures,
            open,
            "jido.dispatch.circuit.melt"
        );
    } else {
        tracing::debug!(
            name: "jido.dispatch.circuit.melt",
            target: "jido::dispatch",
            adapter,
            circuit = key,
            failures,
            open,
            "jido.dispatch.circuit.melt"
        );
    }
}
