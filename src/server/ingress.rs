//! Untrusted ingress: what a signal marked untrusted (see "Trust" on
//! [`Signal`]) may not do to an agent.

use ractor::{ActorRef, RpcReplyPort};
use serde_json::json;

use super::actor::AgentServerState;
use super::msg::AgentMsg;
use super::{DirectiveResult, signal_types};
use crate::agent::AgentState;
use crate::directive::error_context;
use crate::error::{Error, Result};
use crate::signal::Signal;

type Reply = RpcReplyPort<Result<AgentState>>;

/// Whether `ty` is in the runtime's reserved namespace (`jido.agent.*`):
/// types that stop the agent, report hierarchy events or errors.
fn is_reserved(ty: &str) -> bool {
    ty.starts_with(signal_types::RUNTIME_PREFIX)
}

/// The error of a refused untrusted signal.
fn untrusted_reserved(agent_id: &str, ty: &str) -> Error {
    Error::validation(format!(
        "untrusted signal may not use reserved type {}",
        crate::error::sanitize_str(ty)
    ))
    .with_detail("signal_type", ty)
    .with_detail("agent_id", agent_id)
}

impl AgentServerState {
    /// Screens a signal arriving by cast or call, before it is queued or
    /// routed. An untrusted signal of a reserved runtime type is refused
    /// unless the agent allows it
    /// ([`ServerOptions::allow_untrusted_runtime_signals`](super::ServerOptions::allow_untrusted_runtime_signals)):
    /// the caller gets a validation error at once, the error policy gets
    /// the same error (context `routing`) at once, and `None` comes back.
    /// Everything else is handed back unchanged.
    pub(crate) fn admit(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        signal: Signal,
        reply: Option<Reply>,
    ) -> Option<(Signal, Option<Reply>)> {
        if signal.is_trusted()
            || self.stopping
            || self.settings.allow_untrusted_runtime_signals
            || !is_reserved(signal.ty())
        {
            return Some((signal, reply));
        }
        let error = untrusted_reserved(&self.id, signal.ty());
        self.record(
            "signal_refused",
            json!({"type": signal.ty(), "id": signal.id(), "reason": "untrusted"}),
        );
        if let Some(reply) = reply {
            let _ = reply.send(Err(error.clone()));
        }
        // Applied at once rather than queued as an Error directive: a flood
        // of refused signals costs no queue space.
        if let DirectiveResult::Stop(reason) =
            self.apply_error_policy(myself, &signal, &error, error_context::ROUTING)
        {
            self.stop_self(myself, reason.to_string());
        }
        None
    }
}
