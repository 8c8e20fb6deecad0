//! Three nodes as processes; an agent moves when its node is killed.
//!
//!     cargo run --features cluster,persist-postgres --example cluster
//!
//! This process is node-a; it starts node-b and node-c as child processes
//! (this example re-executed with `JIDO_NODE`), calls an agent owned by
//! one of them, kills that node with SIGKILL and calls the agent again: it
//! now runs on another node. With `JIDO_TEST_PG` set (a PostgreSQL server,
//! `scripts/pg_server.sh start`) the agent is durable and keeps its state
//! across the move; without it, it starts afresh.
//!
//! One node by hand (type `call <id> <n>` to call agent `<id>`):
//!
//!     JIDO_NODE=node-b JIDO_PORT=4702 JIDO_SEEDS=127.0.0.1:4701 cargo run --features cluster,persist-postgres --example cluster

use std::io::BufRead;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jido::cluster::{Cluster, ClusterConfig, ClusterEvent};
use jido::persist::postgres::{PostgresOptions, PostgresStorage};
use jido::prelude::*;
use jido::server::{Durability, Jido, JidoConfig, ServerOptions};
use jido::signal::Signal;
use serde_json::{Value, json};

const COOKIE: &str = "jido-example";

/// `counter:*` agents: `counter.add {n}` appends `n` to `log` and records
/// the node it ran on.
struct Counter {
    node: String,
}

impl Agent for Counter {
    const NAME: &'static str = "counter";
    type Schema = ();
    fn signal_routes(&self) -> Vec<jido::agent::SignalRoute> {
        let node = self.node.clone();
        vec![jido::agent::SignalRoute::action(
            "counter.add",
            jido::action_fn("add", move |p: Value, ctx: Context| {
                let node = node.clone();
                async move {
                    let mut log = ctx
                        .state()
                        .and_then(|s| s.get("log").cloned())
                        .map(Value::from)
                        .unwrap_or_else(|| json!([]));
                    if let Some(list) = log.as_array_mut() {
                        list.push(p["n"].clone());
                    }
                    Ok::<_, jido::Error>(json!({"log": log, "ran_on": node}))
                }
            }),
        )]
    }
}

async fn start(node: &str, port: u16, seeds: Vec<String>) -> jido::Result<(Jido, Cluster, bool)> {
    let mut config = JidoConfig::new().name("example");
    let durable = match std::env::var("JIDO_TEST_PG") {
        Ok(conn) if !conn.is_empty() => {
            let storage = PostgresStorage::connect(
                &conn,
                PostgresOptions::new().schema("jido_cluster_example"),
            )
            .await?;
            storage.migrate().await?;
            config = config.storage(Arc::new(storage));
            true
        }
        _ => false,
    };
    let jido = Jido::start(config).await?;
    let cluster = Cluster::start(
        &jido,
        ClusterConfig::new(node)
            .cookie(COOKIE)
            .listen(format!("127.0.0.1:{port}").parse().expect("address"))
            .seeds(seeds)
            .redial_backoff(Duration::from_millis(20), Duration::from_millis(500)),
    )
    .await?;
    let name = node.to_owned();
    cluster.register_kind("counter", move |id| {
        let agent = AgentState::new(Counter { node: name.clone() }, AgentOptions::new().id(id));
        let options = if durable {
            ServerOptions::new().durability(Durability::Checkpoint)
        } else {
            ServerOptions::new()
        };
        Ok((agent, options))
    });
    Ok((jido, cluster, durable))
}

fn add(n: i64) -> Signal {
    Signal::new("counter.add", json!({"n": n}))
}

/// One node, until stdin closes; `call <id> <n>` lines call an agent.
async fn serve(node: String) -> jido::Result<()> {
    let port: u16 = std::env::var("JIDO_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let seeds: Vec<String> = std::env::var("JIDO_SEEDS")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let (_jido, cluster, _) = start(&node, port, seeds).await?;
    let mut events = cluster.events();
    let watcher = cluster.clone();
    tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            eprintln!(
                "[{}] {event:?}; members {:?}",
                watcher.node(),
                watcher.members()
            );
        }
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = rx.recv().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["call", id, n] = words.as_slice() {
            let n = n.parse().unwrap_or(1);
            match cluster
                .agent(*id)
                .call(add(n), Duration::from_secs(5))
                .await
            {
                Ok(cp) => println!("{}", cp["state"]),
                Err(e) => println!("error: {e}"),
            }
        }
    }
    cluster.shutdown().await;
    Ok(())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[tokio::main]
async fn main() -> jido::Result<()> {
    if let Ok(node) = std::env::var("JIDO_NODE") {
        return serve(node).await;
    }
    let exe = std::env::current_exe().expect("this example");
    let ports = [free_port(), free_port()];
    let mut children = Vec::new();
    for (name, port) in ["node-b", "node-c"].iter().zip(ports) {
        let child = tokio::process::Command::new(&exe)
            .env("JIDO_NODE", name)
            .env("JIDO_PORT", port.to_string())
            .stdin(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("a node");
        children.push((name.to_string(), child));
    }
    let seeds = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let (jido, a, durable) = start("node-a", 0, seeds).await?;
    let mut events = a.events();
    println!(
        "members: {:?}",
        a.wait_for_members(3, Duration::from_secs(30)).await?
    );
    println!(
        "storage: {}",
        if durable {
            "PostgreSQL (durable agents)"
        } else {
            "none (set JIDO_TEST_PG for durable agents)"
        }
    );

    // An agent owned by one of the children.
    let id = (0..)
        .map(|i| format!("counter:{}-{i}", std::process::id()))
        .find(|id| a.owner_of(id) != "node-a")
        .expect("an id");
    let agent = a.agent(&id);
    let owner = agent.owner()?;
    for n in 1..=3 {
        agent.call(add(n), Duration::from_secs(5)).await?;
    }
    let cp = agent.call(add(4), Duration::from_secs(5)).await?;
    println!("{id} on {owner}: {}", cp["state"]);

    // Kill its node.
    let (_, child) = children
        .iter_mut()
        .find(|(name, _)| *name == owner)
        .expect("the owner is a child");
    let killed = Instant::now();
    child.start_kill().expect("SIGKILL");
    loop {
        if let ClusterEvent::NodeDown { node } = events.recv().await?
            && node == owner
        {
            break;
        }
    }
    let detected = killed.elapsed();
    let cp = agent.call(add(5), Duration::from_secs(5)).await?;
    let answered = killed.elapsed();
    println!(
        "{owner} killed; {id} now on {}: {}",
        agent.owner()?,
        cp["state"]
    );
    println!(
        "failover: node down seen after {:.1} ms, first answer on the new owner after {:.1} ms",
        detected.as_secs_f64() * 1e3,
        answered.as_secs_f64() * 1e3
    );
    if durable {
        assert_eq!(
            cp["state"]["log"],
            json!([1, 2, 3, 4, 5]),
            "state kept across the move"
        );
    } else {
        assert_eq!(
            cp["state"]["log"],
            json!([5]),
            "without storage it starts afresh"
        );
    }
    a.shutdown().await;
    jido.shutdown().await;
    Ok(())
}
