//! The connector: dials the seeds at start and redials a seed whenever no
//! session to it is left, with backoff. ractor_cluster never redials.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use ractor_cluster::node::{
    NodeEventSubscription, NodeServerMessage, NodeServerSessionInformation,
};
use tokio::sync::mpsc;

use super::config::ClusterConfig;

/// Forwards ractor_cluster's session events to the connector task (the
/// callbacks are synchronous and must not block).
pub(crate) struct Subscription(pub(crate) mpsc::UnboundedSender<()>);

impl NodeEventSubscription for Subscription {
    fn node_session_opened(&self, _: NodeServerSessionInformation) {}
    fn node_session_authenticated(&self, _: NodeServerSessionInformation) {}
    fn node_session_disconnected(&self, _: NodeServerSessionInformation) {
        let _ = self.0.send(());
    }
}

/// The addresses with a live, authenticated session: the connection
/// string peers announce (`host:port` of their listener) and, for the
/// sessions this node dialled, the address it dialled (a seed behind a
/// proxy or a NAT announces another address than the one dialled).
async fn connected(server: &ActorRef<NodeServerMessage>) -> HashSet<String> {
    let Ok(sessions) = ractor::call_t!(server, NodeServerMessage::GetSessions, 1_000) else {
        return HashSet::new();
    };
    let mut live = HashSet::new();
    for session in sessions.into_values() {
        let Some(name) = session.peer_name else {
            continue;
        };
        live.insert(name.connection_string);
        if !session.is_server {
            live.insert(session.peer_addr);
        }
    }
    live
}

/// Dials one seed (TLS when configured).
async fn dial(server: &ActorRef<NodeServerMessage>, config: &ClusterConfig, seed: &str) -> bool {
    let result = match &config.tls {
        Some(tls) => {
            ractor_cluster::client_connect_enc(
                server,
                seed,
                tls.connector.clone(),
                tls.server_name.clone(),
            )
            .await
        }
        None => ractor_cluster::client_connect(server, seed).await,
    };
    match result {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(seed, error = %e, "jido.cluster: dial failed");
            false
        }
    }
}

/// Runs until the node server stops: dials every seed without a session,
/// backing off while some stay unreachable, and again after each
/// disconnect.
pub(crate) async fn run(
    server: ActorRef<NodeServerMessage>,
    config: Arc<ClusterConfig>,
    mut wake: mpsc::UnboundedReceiver<()>,
) {
    if config.seeds.is_empty() {
        return;
    }
    let mut backoff = config.redial_min;
    loop {
        let live = connected(&server).await;
        let mut missing = false;
        for seed in &config.seeds {
            if !live.contains(seed) {
                missing = true;
                dial(&server, &config, seed).await;
            }
        }
        let wait = if missing {
            let wait = backoff;
            backoff = (backoff * 2).min(config.redial_max);
            wait
        } else {
            backoff = config.redial_min;
            Duration::MAX
        };
        tokio::select! {
            woke = wake.recv() => if woke.is_none() { return },
            () = sleep(wait) => {}
        }
        if server.get_status() >= ractor::ActorStatus::Stopping {
            return;
        }
    }
}

async fn sleep(wait: Duration) {
    match tokio::time::Instant::now().checked_add(wait) {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
