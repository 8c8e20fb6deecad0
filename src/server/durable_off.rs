//! Without feature `persist`: no agent is durable. The same hooks as
//! `durable.rs`, each a no-op (the types are empty, so the branches that
//! would use them compile away).

use ractor::ActorRef;
use tokio::task::JoinHandle;

use super::actor::AgentServerState;
use super::inflight::Reply;
use super::msg::AgentMsg;
use super::options::AgentServerArgs;
use crate::agent::AgentState;
use crate::error::Result;
use crate::signal::Signal;

/// Never built.
pub(crate) enum Durable {}
/// Never built.
pub(crate) enum DurableMsg {}
/// Never built.
pub(crate) enum Outcome {}
/// Never built.
pub(crate) enum Loaded {}

/// Who waits for a journaled signal (unused without `persist`).
pub(crate) enum Ack {
    None,
    Call(Reply),
}

pub(crate) async fn load(_: &AgentServerArgs) -> Result<Option<Loaded>> {
    Ok(None)
}

impl AgentServerState {
    pub(crate) fn attach_durable(&mut self, _: Option<Loaded>) {}

    #[inline]
    pub(crate) fn answer(&mut self, reply: Reply, answer: Result<AgentState>) {
        let _ = reply.send(answer);
    }

    #[inline]
    pub(crate) fn consumed(&mut self, _: &Signal) {}

    #[inline]
    pub(crate) fn signal_done(&mut self) {}

    #[inline]
    pub(crate) fn idle(&mut self) {}

    pub(crate) fn journal(&mut self, signal: Signal, ack: Ack) -> Option<(Signal, Ack)> {
        Some((signal, ack))
    }

    pub(crate) fn on_durable(&mut self, _: &ActorRef<AgentMsg>, msg: DurableMsg) {
        match msg {}
    }

    pub(crate) fn detach_write(&mut self, _: Option<JoinHandle<Option<Outcome>>>) {}

    pub(crate) async fn persist_on_stop(&mut self) {}

    #[inline]
    pub(crate) fn schedule_durable(
        &mut self,
        _: std::time::Duration,
        signal: Signal,
    ) -> Option<Signal> {
        Some(signal)
    }

    #[inline]
    pub(crate) fn timers_changed(&mut self) {}

    #[inline]
    pub(crate) fn durable_schedules(&self) -> usize {
        0
    }

    #[inline]
    pub(crate) fn apply_lost_parent(&mut self, _: &ActorRef<AgentMsg>) {}
}
