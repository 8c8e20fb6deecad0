//! Dispatch: delivering signals to targets.
//!
//! (Stub: the adapters land with the signals work. `DispatchConfig` is
//! kept.)

/// Where and how to deliver a signal.
#[derive(Debug, Clone, Default)]
pub struct DispatchConfig {}
