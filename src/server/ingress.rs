//! Untrusted ingress: what a signal marked untrusted (see "Trust" on
//! [`Signal`]) may not do to an agent.

use serde_json::json;

use super::actor::AgentServerState;
use super::signal_types;
use crate::error::Error;
use crate::signal::Signal;

/// Whether `ty` is in the runtime's reserved namespace (`jido.agent.*`):
/// types that stop the agent, report hierarchy events or errors.
fn is_reserved(ty: &str) -> bool {
    ty.starts_with(signal_types::RUNTIME_PREFIX)
}

impl AgentServerState {
    /// Screens a signal arriving by cast or call, before it is queued or
    /// routed: an untrusted signal of a reserved runtime type is refused
    /// unless the agent allows it
    /// ([`ServerOptions::allow_untrusted_runtime_signals`](super::ServerOptions::allow_untrusted_runtime_signals)).
    /// Returns the validation error to refuse it with (the caller and the
    /// error policy, context `routing`, get it at once).
    pub(crate) fn untrusted_refusal(&mut self, signal: &Signal) -> Option<Error> {
        if signal.is_trusted()
            || self.settings.allow_untrusted_runtime_signals
            || !is_reserved(signal.ty())
        {
            return None;
        }
        self.record(
            "signal_refused",
            || json!({"type": signal.ty(), "id": signal.id(), "reason": "untrusted"}),
        );
        Some(
            Error::validation(format!(
                "untrusted signal may not use reserved type {}",
                crate::error::sanitize_str(signal.ty())
            ))
            .with_detail("signal_type", signal.ty())
            .with_detail("agent_id", self.id.to_string()),
        )
    }
}
