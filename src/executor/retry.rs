use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

use super::{DEFAULT_BACKOFF, DEFAULT_MAX_BACKOFF, DEFAULT_MAX_RETRIES};

/// How often a failed run is retried and how long to wait before each
/// retry: delay k (from 0) is `backoff · 2^k`, rounded to the millisecond
/// as Jido does, capped at `max_backoff`, without jitter.
///
/// The delays come from [`backon`]'s exponential backoff (the unmaintained
/// `backoff` crate names `backon` as its successor, RUSTSEC-2025-0012).
///
/// ```
/// use std::time::Duration;
/// use jido::exec::RetryPolicy;
///
/// let policy = RetryPolicy::new(5, Duration::from_millis(100), Duration::from_millis(1000));
/// let delays: Vec<u128> = policy.delays().map(|d| d.as_millis()).collect();
/// assert_eq!(delays, [100, 200, 400, 800, 1000]);
/// assert_eq!(RetryPolicy::default().delays().count(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first delay.
    pub backoff: Duration,
    /// The cap on any delay.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    /// Jido's defaults: 1 retry, 250 ms doubling, capped at 30 s.
    fn default() -> Self {
        Self::new(DEFAULT_MAX_RETRIES, DEFAULT_BACKOFF, DEFAULT_MAX_BACKOFF)
    }
}

impl RetryPolicy {
    /// A policy of `max_retries` retries, starting at `backoff`, capped at
    /// `max_backoff`.
    pub const fn new(max_retries: u32, backoff: Duration, max_backoff: Duration) -> Self {
        Self {
            max_retries,
            backoff,
            max_backoff,
        }
    }

    /// No retry at all.
    pub const fn none() -> Self {
        Self::new(0, Duration::ZERO, Duration::ZERO)
    }

    /// The delay before each retry, in order (`max_retries` items).
    pub fn delays(&self) -> impl Iterator<Item = Duration> + Send + use<> {
        let cap = self.max_backoff;
        ExponentialBuilder::default()
            .with_min_delay(self.backoff)
            .with_max_delay(cap)
            .with_factor(2.0)
            .with_max_times(usize::try_from(self.max_retries).unwrap_or(usize::MAX))
            .build()
            .map(move |d| round_to_millis(d).min(cap))
    }
}

/// backon multiplies in `f32`, which drifts by nanoseconds; Jido's delays
/// are whole milliseconds. Sub-millisecond delays are kept as they are.
fn round_to_millis(d: Duration) -> Duration {
    const MS: u128 = 1_000_000;
    let nanos = d.as_nanos();
    if nanos < MS {
        return d;
    }
    let ms = (nanos + MS / 2) / MS;
    u64::try_from(ms).map_or(Duration::MAX, Duration::from_millis)
}
