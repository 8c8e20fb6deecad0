//! Durable agents that survive `kill -9`.
//!
//! The example runs itself as a child process three times on one redb file.
//! Each child restores two agents, prints what they hold, makes three
//! calls to a `Checkpoint` counter and two `cast_durable`s to a `Journal`
//! inbox, reports the acknowledgements, and is then killed with SIGKILL (no
//! shutdown, no flush). The next child finds every acknowledged effect.
//!
//! ```sh
//! cargo run --example durable --features persist-redb
//! # keep the file between runs to count across them:
//! JIDO_DURABLE_DB=/tmp/visits.redb cargo run --example durable --features persist-redb
//! ```

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;

use jido::agent::SignalRoute;
use jido::persist::redb::RedbStorage;
use jido::prelude::*;
use jido::server::{Durability, Jido, JidoConfig, ServerOptions};
use jido::signal::Signal;
use serde_json::{Value, json};

/// `count += 1`.
#[derive(Clone)]
struct Increment;
impl Action for Increment {
    type Params = Value;
    type Output = Value;
    const NAME: &'static str = "increment";
    async fn run(&self, _: Value, ctx: &Context) -> jido::Result<Value> {
        let count = ctx
            .state()
            .and_then(|s| s.get("count")?.as_i64())
            .unwrap_or(0);
        Ok(json!({"count": count + 1}))
    }
}

/// Appends `params.text` to `messages`.
#[derive(Clone)]
struct Receive;
impl Action for Receive {
    type Params = Value;
    type Output = Value;
    const NAME: &'static str = "receive";
    async fn run(&self, p: Value, ctx: &Context) -> jido::Result<Value> {
        let mut messages = ctx
            .state()
            .and_then(|s| s.get("messages").map(|v| v.to_json()))
            .unwrap_or_else(|| json!([]));
        if let Some(list) = messages.as_array_mut() {
            list.push(p["text"].clone());
        }
        Ok(json!({"messages": messages}))
    }
}

struct Visits;
impl Agent for Visits {
    const NAME: &'static str = "visits";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![SignalRoute::action("visit", DynAction::new(Increment))]
    }
}

struct Mailbox;
impl Agent for Mailbox {
    const NAME: &'static str = "mailbox";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![SignalRoute::action("mail", DynAction::new(Receive))]
    }
}

/// One run: restore, report, acknowledge, then wait to be killed.
async fn child(path: &str, run: u32) -> jido::Result<()> {
    let storage = Arc::new(RedbStorage::open(path)?);
    let jido = Jido::start(JidoConfig::new().name("durable-example").storage(storage)).await?;
    let visits = jido
        .start_agent(
            AgentState::new(Visits, AgentOptions::new().id("home")),
            ServerOptions::new().durability(Durability::Checkpoint),
        )
        .await?;
    let mailbox = jido
        .start_agent(
            AgentState::new(Mailbox, AgentOptions::new().id("alice")),
            ServerOptions::new().durability(Durability::Journal),
        )
        .await?;
    let count = visits
        .state()
        .await?
        .state()
        .get("count")
        .map_or(json!(0), |v| v.to_json());
    // The journal is replayed before this call is processed.
    let mail = mailbox
        .call(Signal::new(
            "mail",
            json!({"text": format!("hello from run {run}")}),
        ))
        .await?;
    let messages = mail
        .state()
        .get("messages")
        .map_or(json!([]), |v| v.to_json());
    println!("RESTORED {}", json!({"count": count, "messages": messages}));
    for _ in 0..3 {
        visits.call(Signal::new("visit", json!({}))).await?;
    }
    for i in 0..2 {
        mailbox
            .cast_durable(Signal::new(
                "mail",
                json!({"text": format!("run {run} note {i}")}),
            ))
            .await?;
    }
    println!("ACKED");
    // Killed here: nothing is flushed or stopped on the way out.
    std::future::pending::<()>().await;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, path, run] = args.as_slice()
        && flag == "--child"
    {
        let rt = tokio::runtime::Runtime::new()?;
        return rt.block_on(child(path, run.parse()?)).map_err(Into::into);
    }
    let dir = tempfile::tempdir()?;
    let path = std::env::var("JIDO_DURABLE_DB")
        .unwrap_or_else(|_| dir.path().join("durable.redb").display().to_string());
    println!("store: {path}");
    let mut last: Option<(i64, usize)> = None;
    for run in 1..=3 {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--child", &path, &run.to_string()])
            .stdout(Stdio::piped())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut restored = None;
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            if let Some(report) = line.strip_prefix("RESTORED ") {
                restored = Some(serde_json::from_str::<Value>(report)?);
            } else if line == "ACKED" {
                break;
            }
        }
        child.kill()?; // SIGKILL
        child.wait()?;
        let restored = restored.ok_or("the child reported nothing")?;
        let count = restored["count"].as_i64().unwrap_or(0);
        let messages = restored["messages"].as_array().map_or(0, Vec::len);
        println!(
            "run {run}: restored count {count}, {messages} messages; 3 visits and 2 notes acknowledged, then SIGKILL"
        );
        if let Some((count_before, messages_before)) = last {
            // Every acknowledged call and durable cast of the killed run is back
            // (the mailbox also got this run's call).
            if count != count_before + 3 || messages != messages_before + 3 {
                return Err(format!("lost work: {restored}").into());
            }
        }
        last = Some((count, messages));
    }
    println!("nothing acknowledged was lost");
    Ok(())
}
