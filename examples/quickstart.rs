//! Quickstart: a small order-processing system on the agent runtime.
//!
//! ```text
//! cargo run --example quickstart
//! ```
//!
//! * The `desk` agent routes `order.placed` signals: it records the order,
//!   spawns one `worker` child agent per order (SpawnAgent) and schedules a
//!   deadline check (Schedule).
//! * Each worker starts on its own (its strategy's `init` schedules
//!   `work.start`), charges the order and reports back with EmitToParent.
//! * The desk stops finished workers (StopChild), sees their exits
//!   (`jido.agent.child.exit`) and sets `status: "completed"` once every
//!   order is settled; `main` waits for that with `await_completion`.

use std::time::Duration;

use jido::agent::SignalRoute;
use jido::prelude::*;
use jido::server::AwaitOptions;
use jido::strategy::{Direct, Strategy, StrategyContext};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

// ---------- the desk ----------

#[derive(Clone, Deserialize, JsonSchema)]
struct Placed {
    order_id: String,
    amount_cents: u64,
}

/// Records an order, spawns its worker, schedules a deadline check.
#[jido::action]
async fn place_order(p: Placed, ctx: &Context) -> jido::Result<Value> {
    println!(
        "desk     order {} placed ({} cents)",
        p.order_id, p.amount_cents
    );
    let order = json!({"order_id": p.order_id, "amount_cents": p.amount_cents});
    let worker = AgentState::new(
        Worker,
        AgentOptions::new().state(order.as_object().cloned().unwrap_or_default()),
    );
    ctx.push_effect(Directive::spawn_agent(worker, p.order_id.clone()));
    ctx.push_effect(Directive::schedule(
        Duration::from_secs(2),
        Signal::new("order.deadline", json!({"order_id": p.order_id})),
    ));
    Ok(json!({"orders": {p.order_id: {"status": "processing"}}}))
}

#[derive(Clone, Deserialize, JsonSchema)]
struct Settled {
    order_id: String,
    outcome: String,
    charged_cents: u64,
}

/// A worker reported: record it, stop the worker, complete when all are in.
#[jido::action]
async fn order_settled(p: Settled, ctx: &Context) -> jido::Result<Value> {
    let state = ctx.state().cloned().unwrap_or_default();
    let expected = state
        .get("expected")
        .and_then(jido::state::StateValue::as_u64)
        .unwrap_or(0);
    let settled = state
        .get("settled")
        .and_then(jido::state::StateValue::as_u64)
        .unwrap_or(0)
        + 1;
    let revenue = state
        .get("revenue_cents")
        .and_then(jido::state::StateValue::as_u64)
        .unwrap_or(0)
        + p.charged_cents;
    println!("desk     order {} {}", p.order_id, p.outcome);
    ctx.push_effect(Directive::stop_child(p.order_id.clone()));
    let mut out = json!({
        "orders": {p.order_id: {"status": p.outcome}},
        "settled": settled,
        "revenue_cents": revenue,
    });
    if settled == expected {
        out["status"] = json!("completed");
        out["last_answer"] = json!({"orders": settled, "revenue_cents": revenue});
    }
    Ok(out)
}

#[derive(Clone, Deserialize, JsonSchema)]
struct Deadline {
    order_id: String,
}

/// The scheduled deadline check.
#[jido::action]
async fn check_deadline(p: Deadline, ctx: &Context) -> jido::Result<Value> {
    let status = ctx
        .state()
        .and_then(|s| {
            s.get("orders")?
                .get(&p.order_id)?
                .get("status")?
                .as_str()
                .map(str::to_owned)
        })
        .unwrap_or_default();
    if status == "processing" {
        println!("desk     order {} missed its deadline", p.order_id);
        return Ok(json!({"orders": {p.order_id: {"status": "late"}}}));
    }
    Ok(json!({}))
}

#[derive(Clone, Deserialize, JsonSchema)]
struct ChildExit {
    tag: String,
    reason: String,
}

/// `jido.agent.child.exit`.
#[jido::action]
async fn worker_exited(p: ChildExit, _ctx: &Context) -> jido::Result<()> {
    println!("desk     worker {} exited ({})", p.tag, p.reason);
    Ok(())
}

struct Desk;
impl Agent for Desk {
    const NAME: &'static str = "desk";
    type Schema = ();
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![
            SignalRoute::action("order.placed", PlaceOrder),
            SignalRoute::action("order.settled", OrderSettled),
            SignalRoute::action("order.deadline", CheckDeadline),
            SignalRoute::action("jido.agent.child.exit", WorkerExited),
        ]
    }
}

// ---------- the worker ----------

#[derive(Clone, Deserialize, JsonSchema)]
struct Start {}

/// Charges the order (orders above 500.00 are rejected) and reports to the
/// desk.
#[jido::action]
async fn process_order(_: Start, ctx: &Context) -> jido::Result<Value> {
    let state = ctx.state().cloned().unwrap_or_default();
    let order_id = state
        .get("order_id")
        .and_then(jido::state::StateValue::as_str)
        .unwrap_or("?")
        .to_owned();
    let amount = state
        .get("amount_cents")
        .and_then(jido::state::StateValue::as_u64)
        .unwrap_or(0);
    println!("worker   {order_id}: charging {amount} cents");
    tokio::time::sleep(Duration::from_millis(100 + amount % 300)).await;
    let (outcome, charged) = if amount > 50_000 {
        ("rejected", 0)
    } else {
        ("paid", amount)
    };
    let report = Signal::new(
        "order.settled",
        json!({"order_id": order_id, "outcome": outcome, "charged_cents": charged}),
    );
    if let Some(emit) = Directive::emit_to_parent_of(&state, report) {
        ctx.push_effect(emit);
    }
    Ok(json!({"outcome": outcome}))
}

/// Direct, plus a first `work.start` right after the worker starts.
struct Kickoff;
impl Strategy for Kickoff {
    fn init(&self, _: &mut AgentData, _: &StrategyContext) -> Vec<Directive> {
        vec![Directive::schedule(
            Duration::ZERO,
            Signal::new("work.start", json!({})),
        )]
    }
    async fn cmd(
        &self,
        agent: &mut AgentData,
        commands: Vec<Command>,
        ctx: &StrategyContext,
    ) -> Vec<Directive> {
        Direct.cmd(agent, commands, ctx).await
    }
}

struct Worker;
impl Agent for Worker {
    const NAME: &'static str = "worker";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(Kickoff)
    }
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![SignalRoute::action("work.start", ProcessOrder)]
    }
}

#[tokio::main]
async fn main() -> jido::Result<()> {
    let jido = Jido::start(JidoConfig::new().name("orders")).await?;
    let orders = [("A-1", 1_250), ("A-2", 89_900), ("A-3", 4_000)];
    let desk = jido
        .start_agent(
            AgentState::new(Desk, AgentOptions::new().id("desk")),
            ServerOptions::new().initial_state(
                json!({"expected": orders.len()})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        )
        .await?;

    for (id, amount) in orders {
        desk.cast(Signal::new(
            "order.placed",
            json!({"order_id": id, "amount_cents": amount}),
        ))?;
    }

    let done = desk
        .await_completion(AwaitOptions::new().timeout(Duration::from_secs(5)))
        .await?;
    println!("main     completed: {}", done.result);

    let status = desk.status().await?;
    println!("main     desk orders: {}", status.agent.state()["orders"]);

    jido.shutdown().await;
    println!("main     shut down");
    Ok(())
}
