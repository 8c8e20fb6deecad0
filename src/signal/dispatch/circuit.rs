//! Circuit breakers for dispatch targets, keyed by [`Dispatch::circuit_key`](super::Dispatch::circuit_key).
//!
//! The semantics are those of Jido's `:fuse` `{:standard, 5, 10_000}` with
//! a 30 s reset: failed deliveries are counted in a sliding window; the
//! failure that makes the count exceed `max_failures` opens the breaker;
//! while open, deliveries fail fast with `circuit_open`; once `reset_after`
//! has passed, the breaker closes with its history cleared. Successes do
//! not clear failures (the window does). Time is `tokio::time::Instant`,
//! so tests can drive it with a paused clock.
//!
//! Breakers live in a [`CircuitBreakers`] registry: each `Jido` instance
//! owns one (its agents' dispatches use it), and dispatch outside an
//! instance uses [`CircuitBreakers::global`].

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
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

/// How long a closed breaker is kept after its last use (a delivery
/// checked against it, or a failure recorded): 60 s, or the breaker's
/// failure window when that is longer.
///
/// A closed breaker unused for that long holds no failure within its
/// window, so forgetting it changes nothing; evicting it keeps a registry
/// bounded by the targets in use instead of every URL ever dispatched to.
/// Open breakers are kept until their reset time has passed.
pub const CIRCUIT_IDLE_TTL: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Breaker {
    failures: VecDeque<Instant>,
    open_until: Option<Instant>,
    /// The last delivery checked against it or failure recorded.
    last_used: Instant,
    /// The failure window of the settings it was last used with.
    window: Duration,
}

impl Breaker {
    fn new(now: Instant, window: Duration) -> Self {
        Self {
            failures: VecDeque::new(),
            open_until: None,
            last_used: now,
            window,
        }
    }

    /// Whether forgetting it changes nothing: not open, and unused for
    /// [`CIRCUIT_IDLE_TTL`] (or its window, when longer).
    fn evictable(&self, now: Instant) -> bool {
        let open = self.open_until.is_some_and(|until| until > now);
        !open && now.saturating_duration_since(self.last_used) >= CIRCUIT_IDLE_TTL.max(self.window)
    }
}

#[derive(Debug, Default)]
struct Registry {
    breakers: HashMap<String, Breaker>,
    /// When the next sweep for idle breakers is due.
    next_sweep: Option<Instant>,
}

impl Registry {
    /// Amortised pruning: at most once per [`CIRCUIT_IDLE_TTL`], drops the
    /// evictable breakers (O(breakers) per sweep).
    fn sweep_if_due(&mut self, now: Instant) {
        if self.next_sweep.is_some_and(|at| now < at) {
            return;
        }
        self.breakers.retain(|_, b| !b.evictable(now));
        self.next_sweep = Some(now + CIRCUIT_IDLE_TTL);
    }
}

/// A registry of circuit breakers, keyed by
/// [`Dispatch::circuit_key`](super::Dispatch::circuit_key).
///
/// Each `Jido` instance owns one
/// ([`Jido::circuit_breakers`](crate::server::Jido::circuit_breakers)):
/// its agents' Emit dispatches use it, so instances never share a breaker.
/// [`DispatchConfig::dispatch`](super::DispatchConfig::dispatch) and
/// [`deliver`](super::deliver) use the process-wide
/// [`global`](CircuitBreakers::global) registry;
/// [`DispatchConfig::dispatch_with`](super::DispatchConfig::dispatch_with)
/// takes one explicitly. Closed breakers unused for
/// [`CIRCUIT_IDLE_TTL`] are evicted. Cloning gives another handle to the
/// same registry.
///
/// ```
/// use jido::signal::dispatch::{CircuitBreakers, CircuitState};
///
/// let breakers = CircuitBreakers::new();
/// assert_eq!(breakers.state("http:https://example.com/hook"), CircuitState::Closed { failures: 0 });
/// assert!(breakers.is_empty());
/// ```
#[derive(Clone, Default)]
pub struct CircuitBreakers {
    inner: Arc<Mutex<Registry>>,
}

impl fmt::Debug for CircuitBreakers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakers")
            .field("breakers", &self.len())
            .finish()
    }
}

impl CircuitBreakers {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The process-wide registry, used by dispatch outside a `Jido`
    /// instance.
    pub fn global() -> &'static CircuitBreakers {
        static GLOBAL: OnceLock<CircuitBreakers> = OnceLock::new();
        GLOBAL.get_or_init(CircuitBreakers::new)
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many breakers the registry holds (targets that failed recently
    /// or are open; evicted ones not counted).
    pub fn len(&self) -> usize {
        self.lock().breakers.len()
    }

    /// Whether the registry holds no breaker.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The state of the breaker with this key (closed with no failures when
    /// there is none). Reading it does not count as a use.
    pub fn state(&self, key: &str) -> CircuitState {
        let now = Instant::now();
        let registry = self.lock();
        match registry.breakers.get(key) {
            None => CircuitState::Closed { failures: 0 },
            Some(b) => match b.open_until {
                Some(until) if until > now => CircuitState::Open {
                    remaining: until - now,
                },
                Some(_) => CircuitState::Closed { failures: 0 },
                None => CircuitState::Closed {
                    failures: b
                        .failures
                        .iter()
                        .filter(|t| now.duration_since(**t) < b.window)
                        .count(),
                },
            },
        }
    }

    /// Closes the breaker with this key and forgets its failures.
    pub fn reset(&self, key: &str) {
        self.lock().breakers.remove(key);
    }

    /// Fails fast when the breaker is open; closes it (and emits `reset`)
    /// when its time is up.
    pub(crate) fn check(&self, key: &str, adapter: &str, settings: &CircuitSettings) -> Result<()> {
        let now = Instant::now();
        let mut registry = self.lock();
        registry.sweep_if_due(now);
        let Some(breaker) = registry.breakers.get_mut(key) else {
            return Ok(());
        };
        breaker.last_used = now;
        breaker.window = settings.window;
        match breaker.open_until {
            Some(until) if until > now => {
                drop(registry);
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
                registry.breakers.remove(key);
                drop(registry);
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
                    registry.breakers.remove(key);
                }
                Ok(())
            }
        }
    }

    /// Counts a failed delivery; opens the breaker when the count exceeds
    /// the tolerance.
    pub(crate) fn record_failure(&self, key: &str, adapter: &str, settings: &CircuitSettings) {
        let now = Instant::now();
        let mut registry = self.lock();
        registry.sweep_if_due(now);
        let breaker = registry
            .breakers
            .entry(key.to_owned())
            .or_insert_with(|| Breaker::new(now, settings.window));
        breaker.last_used = now;
        breaker.window = settings.window;
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
        drop(registry);
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
}

/// The state of the breaker with this key in the
/// [global](CircuitBreakers::global) registry (closed with no failures
/// when there is none).
pub fn circuit_state(key: &str) -> CircuitState {
    CircuitBreakers::global().state(key)
}

/// Closes the breaker with this key in the
/// [global](CircuitBreakers::global) registry and forgets its failures.
pub fn reset_circuit(key: &str) {
    CircuitBreakers::global().reset(key);
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
