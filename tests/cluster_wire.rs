//! What a remote call's answer is on the caller's side (feature
//! `cluster`): `ClusterAgent::call_reply` keeps the owner's checkpoint JSON
//! as it arrived and reads it when asked; it answers what `call` answers.
//! Node A is this test process, node B a child process (the test binary
//! re-executed with `JIDO_WIRE_ROLE=node`); readiness is membership.
#![cfg(feature = "cluster")]

use std::time::Duration;

use jido::ErrorKind;
use jido::cluster::{Cluster, ClusterConfig, Place};
use jido::prelude::*;
use jido::server::{Jido, JidoConfig, ServerOptions};
use jido::signal::Signal;
use serde_json::{Value, json};
use tokio::process::Command;

const ROLE: &str = "JIDO_WIRE_ROLE";
const COOKIE: &str = "jido-wire-cookie";
const LIMIT: Duration = Duration::from_secs(20);

struct Wire;
impl Agent for Wire {
    const NAME: &'static str = "wire";
    const VERSION: &'static str = "2.1.0";
    type Schema = ();
    fn signal_routes(&self) -> Vec<jido::agent::SignalRoute> {
        vec![jido::agent::SignalRoute::action(
            "wire.set",
            jido::action_fn("set", |p: Value, _: Context| async move {
                // A string that needs escapes in JSON, and a nested value.
                Ok::<_, jido::Error>(
                    json!({"n": p["n"], "text": "a \"quoted\" é\n", "list": [1, {"k": null}]}),
                )
            }),
        )]
    }
}

async fn node(name: &str, port: u16, seeds: Vec<String>) -> (Jido, Cluster) {
    let jido = Jido::start(JidoConfig::new()).await.expect("jido");
    let config = ClusterConfig::new(name)
        .cookie(COOKIE)
        .cluster("wire")
        .listen(format!("127.0.0.1:{port}").parse().expect("addr"))
        .seeds(seeds);
    let cluster = Cluster::start(&jido, config).await.expect("cluster");
    cluster.register_kind("wire", |id| {
        Ok((
            AgentState::new(Wire, AgentOptions::new().id(id)),
            ServerOptions::new(),
        ))
    });
    (jido, cluster)
}

/// Node B: runs until its stdin closes.
#[test]
fn wire_node_main() {
    if std::env::var(ROLE).as_deref() != Ok("node") {
        return;
    }
    let port: u16 = std::env::var("JIDO_WIRE_PORT")
        .expect("port")
        .parse()
        .expect("port");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let (_jido, cluster) = node("node-b", port, Vec::new()).await;
        let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut tokio::io::sink()).await;
        cluster.shutdown().await;
    });
}

fn set(n: i64) -> Signal {
    Signal::new("wire.set", json!({"n": n}))
}

/// The parts of a checkpoint a caller of `decode` may want.
#[derive(Debug, PartialEq, serde::Deserialize)]
struct Checkpoint {
    version: String,
    agent: String,
    id: String,
    state: Value,
}

#[test]
fn a_call_reply_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    assert_send_sync::<jido::cluster::CallReply>();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_reply_reads_the_owners_checkpoint_as_call_does() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let mut b = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "wire_node_main",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, "node")
        .env("JIDO_WIRE_PORT", port.to_string())
        .stdin(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node-b");
    let (_jido, a) = node("node-a", 0, vec![format!("127.0.0.1:{port}")]).await;
    a.wait_for_members(2, LIMIT).await.expect("node-b joins");

    let expected_state = json!({"n": 7, "text": "a \"quoted\" é\n", "list": [1, {"k": null}]});
    for (place, node) in [("node-b", "remote"), ("node-a", "local")] {
        let agent = a.agent_on(format!("wire:{node}"), Place::Node(place.into()));
        let reply = agent.call_reply(set(7), LIMIT).await.expect("call_reply");
        let expected = json!({
            "version": "2.1.0", "agent": "wire", "id": format!("wire:{node}"),
            "state": expected_state,
        });
        // The JSON text, a type of the caller's, and the value `call` gives.
        assert_eq!(
            serde_json::from_str::<Value>(&reply.json()).expect("json"),
            expected,
            "{node}"
        );
        // Compact JSON, as the value prints.
        assert_eq!(
            reply.json(),
            reply.clone().into_value().expect("value").to_string(),
            "{node}"
        );
        assert_eq!(
            reply.decode::<Checkpoint>().expect("decode"),
            Checkpoint {
                version: "2.1.0".into(),
                agent: "wire".into(),
                id: format!("wire:{node}"),
                state: expected_state.clone(),
            }
        );
        let err = reply.decode::<Vec<u8>>().expect_err("not a list");
        assert_eq!(
            (err.kind(), err.message()),
            (ErrorKind::Validation, "invalid call reply")
        );
        assert_eq!(reply.clone().into_value().expect("value"), expected);
        assert_eq!(agent.call(set(7), LIMIT).await.expect("call"), expected);
        assert!(
            format!("{reply:?}").starts_with("CallReply(\"{"),
            "{reply:?}"
        );
    }

    // An error on the owner is the call's error, as for `call`.
    let nokind = a
        .agent_on("wire:nokind", Place::Node("node-b".into()))
        .kind("nope");
    let err = nokind.call_reply(set(1), LIMIT).await.expect_err("no kind");
    assert_eq!(
        (err.kind(), err.message()),
        (ErrorKind::NotFound, "no such agent kind")
    );
    let err = nokind.call(set(1), LIMIT).await.expect_err("no kind");
    assert_eq!(
        (err.kind(), err.message()),
        (ErrorKind::NotFound, "no such agent kind")
    );

    drop(b.stdin.take());
    let _ = b.wait().await;
}
