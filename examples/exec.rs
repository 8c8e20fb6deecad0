//! Exec on its own: define two actions, run them validated, chain them.
//!
//! ```text
//! cargo run --example exec
//! ```

use std::time::Duration;

use jido::exec::{Chain, ChainOutcome};
use jido::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Params of [`PriceOrder`].
#[derive(Clone, Deserialize, JsonSchema)]
struct PriceParams {
    /// Number of items.
    quantity: u32,
    /// Price of one item, in cents.
    unit_cents: u64,
}

#[derive(Serialize)]
struct Priced {
    subtotal_cents: u64,
}

/// Computes the subtotal of an order.
struct PriceOrder;

impl Action for PriceOrder {
    type Params = PriceParams;
    type Output = Priced;
    const NAME: &'static str = "price_order";
    const DESCRIPTION: &'static str = "Computes an order's subtotal.";

    async fn run(&self, p: PriceParams, _ctx: &Context) -> jido::Result<Priced> {
        Ok(Priced {
            subtotal_cents: u64::from(p.quantity) * p.unit_cents,
        })
    }
}

/// Params of [`AddShipping`].
#[derive(Clone, Deserialize, JsonSchema)]
struct ShippingParams {
    subtotal_cents: u64,
    destination: String,
}

#[derive(Serialize)]
struct Shipped {
    shipping_cents: u64,
    total_cents: u64,
}

/// Adds shipping, free above 50.00 for domestic orders.
struct AddShipping;

impl Action for AddShipping {
    type Params = ShippingParams;
    type Output = Shipped;
    const NAME: &'static str = "add_shipping";
    const DESCRIPTION: &'static str = "Adds shipping costs to a subtotal.";

    async fn run(&self, p: ShippingParams, ctx: &Context) -> jido::Result<Shipped> {
        let tenant = ctx.get("tenant").and_then(|v| v.as_str()).unwrap_or("?");
        println!(
            "  add_shipping runs for tenant {tenant}, budget left: {:?}",
            ctx.remaining()
        );
        let shipping_cents = match p.destination.as_str() {
            "US" if p.subtotal_cents >= 5_000 => 0,
            "US" => 599,
            _ => 1_999,
        };
        Ok(Shipped {
            shipping_cents,
            total_cents: p.subtotal_cents + shipping_cents,
        })
    }
}

#[tokio::main]
async fn main() -> jido::Result<()> {
    let exec = Exec::new();
    let ctx = Context::new().with("tenant", "acme");

    // 1. One action, validated and run under a 30 s timeout with one retry.
    let priced = exec
        .run(
            PriceOrder,
            json!({"quantity": 3, "unit_cents": 1250}),
            ctx.clone(),
            ExecOptions::new(),
        )
        .await?;
    println!(
        "price_order   -> {}",
        serde_json::Value::Object(priced.output.clone())
    );

    // 2. Bad params are a typed validation error naming the field.
    let err = exec
        .run(
            PriceOrder,
            json!({"quantity": "three", "unit_cents": 1250}),
            ctx.clone(),
            ExecOptions::new(),
        )
        .await
        .expect_err("quantity is not a number");
    println!(
        "bad params    -> {:?}: {} (path {})",
        err.kind(),
        err,
        err.detail("path").unwrap_or(&json!(null))
    );

    // 3. Two actions chained: each output is merged into the next params.
    let opts = ExecOptions::new().timeout(Duration::from_secs(5));
    let chain = Chain::new()
        .instruction(Instruction::new(PriceOrder).with_opts(opts))
        .instruction(Instruction::new(AddShipping).with_opts(opts));
    let outcome = chain
        .run(
            &exec,
            json!({"quantity": 5, "unit_cents": 1250, "destination": "US"}),
            ctx,
        )
        .await?;
    if let ChainOutcome::Completed(out) = outcome {
        println!("chain         -> {}", serde_json::Value::Object(out));
    }

    exec.shutdown().await;
    Ok(())
}
