//! The cluster's `tracing` events (target `jido::cluster`), all named
//! `jido.cluster.*` and carrying `node` (this node):
//!
//! * `jido.cluster.node.up` / `jido.cluster.node.down` (`peer`), info;
//! * `jido.cluster.call.start` / `.stop` (`duration_us`) / `.exception`
//!   (`duration_us`, `error_type`, `error`) around a remote call, debug
//!   (`.exception` is a warning), with `agent_id`, `owner`, `signal_type`;
//! * `jido.cluster.cast` (`agent_id`, `owner`, `signal_type`, `wire`),
//!   debug;
//! * `jido.cluster.cast.batch` (`owner`, `casts`, `bytes`): casts queued
//!   for a peer leave as one message, debug;
//! * `jido.cluster.activation.start` / `.stop` (`duration_us`) /
//!   `.exception` around an on-demand start or thaw on the owner, with
//!   `agent_id` (debug; the exception a warning);
//! * `jido.cluster.fenced` (`agent_id`): an agent of this node stopped
//!   because a newer owner holds it, warning.

use std::time::Instant;

use crate::error::Result;
use crate::signal::Signal;

pub(crate) fn node_up(node: &str, peer: &str) {
    tracing::info!(
        name: "jido.cluster.node.up",
        target: "jido::cluster",
        node,
        peer,
        "jido.cluster.node.up"
    );
}

pub(crate) fn node_down(node: &str, peer: &str) {
    tracing::info!(
        name: "jido.cluster.node.down",
        target: "jido::cluster",
        node,
        peer,
        "jido.cluster.node.down"
    );
}

pub(crate) fn fenced(node: &str, agent_id: &str) {
    tracing::warn!(
        name: "jido.cluster.fenced",
        target: "jido::cluster",
        node,
        agent_id,
        "jido.cluster.fenced"
    );
}

/// The request form named in the `wire` field: `"binary"` to a gateway
/// that reads it, `"json"` to any other.
pub(crate) fn wire(binary: bool) -> &'static str {
    if binary { "binary" } else { "json" }
}

pub(crate) fn cast(node: &str, agent_id: &str, owner: &str, signal: &Signal, wire: &str) {
    // The type is read only when the event is on.
    if !tracing::enabled!(target: "jido::cluster", tracing::Level::DEBUG) {
        return;
    }
    let signal_type = signal.ty();
    tracing::debug!(
        name: "jido.cluster.cast",
        target: "jido::cluster",
        node,
        agent_id,
        owner,
        signal_type,
        wire,
        "jido.cluster.cast"
    );
}

/// A batch of `casts` cast requests (`bytes` long) leaves for `owner`.
pub(crate) fn batch(node: &str, owner: &str, casts: u32, bytes: usize) {
    tracing::debug!(
        name: "jido.cluster.cast.batch",
        target: "jido::cluster",
        node,
        owner,
        casts,
        bytes,
        "jido.cluster.cast.batch"
    );
}

/// A remote call in progress: `start` reports `.start`, `finish` `.stop`
/// or `.exception` with the time since.
pub(crate) struct CallSpan<'a> {
    node: &'a str,
    agent_id: &'a str,
    owner: &'a str,
    signal_type: &'a str,
    started: Option<Instant>,
}

impl<'a> CallSpan<'a> {
    pub(crate) fn start(
        node: &'a str,
        agent_id: &'a str,
        owner: &'a str,
        signal_type: &'a str,
        wire: &str,
    ) -> Self {
        tracing::debug!(
            name: "jido.cluster.call.start",
            target: "jido::cluster",
            node,
            agent_id,
            owner,
            signal_type,
            wire,
            "jido.cluster.call.start"
        );
        CallSpan {
            node,
            agent_id,
            owner,
            signal_type,
            // The clock is read only when someone may hear of the call's
            // end (`.exception` is a warning): this runs on every call.
            started: tracing::enabled!(target: "jido::cluster", tracing::Level::WARN)
                .then(Instant::now),
        }
    }

    pub(crate) fn finish<T>(self, result: &Result<T>) {
        let duration_us = self
            .started
            .map_or(0, |started| started.elapsed().as_micros() as u64);
        let CallSpan {
            node,
            agent_id,
            owner,
            signal_type,
            ..
        } = self;
        match result {
            Ok(_) => tracing::debug!(
                name: "jido.cluster.call.stop",
                target: "jido::cluster",
                node,
                agent_id,
                owner,
                signal_type,
                duration_us,
                "jido.cluster.call.stop"
            ),
            Err(e) => tracing::warn!(
                name: "jido.cluster.call.exception",
                target: "jido::cluster",
                node,
                agent_id,
                owner,
                signal_type,
                duration_us,
                error_type = e.kind().as_str(),
                error = %e,
                "jido.cluster.call.exception"
            ),
        }
    }
}

/// An activation (start or thaw on demand) on the owner.
pub(crate) struct ActivationSpan<'a> {
    node: &'a str,
    agent_id: &'a str,
    started: Instant,
}

impl<'a> ActivationSpan<'a> {
    pub(crate) fn start(node: &'a str, agent_id: &'a str) -> Self {
        tracing::debug!(
            name: "jido.cluster.activation.start",
            target: "jido::cluster",
            node,
            agent_id,
            "jido.cluster.activation.start"
        );
        ActivationSpan {
            node,
            agent_id,
            started: Instant::now(),
        }
    }

    pub(crate) fn finish<T>(self, result: &Result<T>) {
        let duration_us = self.started.elapsed().as_micros() as u64;
        let (node, agent_id) = (self.node, self.agent_id);
        match result {
            Ok(_) => tracing::debug!(
                name: "jido.cluster.activation.stop",
                target: "jido::cluster",
                node,
                agent_id,
                duration_us,
                "jido.cluster.activation.stop"
            ),
            Err(e) => tracing::warn!(
                name: "jido.cluster.activation.exception",
                target: "jido::cluster",
                node,
                agent_id,
                duration_us,
                error_type = e.kind().as_str(),
                error = %e,
                "jido.cluster.activation.exception"
            ),
        }
    }
}
