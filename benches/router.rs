//! Routing and signal JSON, each beside its raw baseline in one group:
//!
//! * `route/<n>`: routing one signal among `n` routes (mixed exact and
//!   wildcard) beside a `HashMap` lookup of the exact type among the same
//!   exact types. Target: within 10× at 10 000 routes.
//! * `signal_json`: encoding and decoding a signal beside `serde_json` on an
//!   equivalent plain struct. Target: within 1.5×.
//!
//! Sizes shrink when `CI` is set.

use std::collections::HashMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use jido::signal::{Route, Router, Signal};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `n` routes: mostly exact types, plus `*`, trailing `**` and leading `**`
/// patterns. Returns the router, the exact types and a type to route.
fn routes(n: usize) -> (Router<usize>, Vec<String>, String) {
    let mut router = Router::new();
    let mut exact = Vec::new();
    let domains = (n / 100).max(1);
    for i in 0..n {
        let d = i % domains;
        let e = (i / domains) % 10;
        let path = match i % 20 {
            0..=13 => {
                let ty = format!("svc{d}.entity{e}.action{i}");
                exact.push(ty.clone());
                ty
            }
            14..=16 => format!("svc{d}.*.action{i}"),
            17 | 18 => format!("svc{d}.entity{e}.**"),
            _ => format!("**.action{i}"),
        };
        router
            .add_route(Route::new(path, i).priority((i % 7) as i32 - 3))
            .unwrap();
    }
    let probe = exact[exact.len() / 2].clone();
    (router, exact, probe)
}

fn sizes() -> Vec<usize> {
    if std::env::var_os("CI").is_some() {
        vec![10, 100]
    } else {
        vec![10, 1_000, 10_000]
    }
}

fn bench_route(c: &mut Criterion) {
    let mut group = c.benchmark_group("route");
    for n in sizes() {
        let (router, exact, probe) = routes(n);
        let map: HashMap<String, usize> = exact
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, t)| (t, i))
            .collect();
        let signal = Signal::new(probe.clone(), Value::Null);
        assert!(!router.route(&signal).unwrap().is_empty());
        group.bench_with_input(BenchmarkId::new("hashmap_exact", n), &probe, |b, ty| {
            b.iter(|| black_box(map.get(black_box(ty.as_str()))))
        });
        group.bench_with_input(BenchmarkId::new("router", n), &signal, |b, s| {
            b.iter(|| black_box(router.route(black_box(s)).map(|t| t.len())))
        });
    }
    group.finish();
}

/// The same attributes as a signal, with plain serde derive.
#[derive(Serialize, Deserialize)]
struct Plain {
    specversion: String,
    id: String,
    source: String,
    #[serde(rename = "type")]
    ty: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    datacontenttype: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dataschema: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<Value>,
}

fn bench_json(c: &mut Criterion) {
    let signal = Signal::builder("order.placed")
        .source("/shop/checkout")
        .subject("order-123")
        .data(json!({
            "order_id": "o-123",
            "total": 99.5,
            "currency": "EUR",
            "items": [
                {"sku": "a-1", "qty": 2, "price": 10.0},
                {"sku": "b-2", "qty": 1, "price": 79.5}
            ],
            "customer": {"id": "c-1", "tier": "gold"}
        }))
        .build()
        .unwrap();
    let bytes = signal.to_json_vec();
    let plain: Plain = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(serde_json::to_vec(&plain).unwrap(), bytes);

    let mut group = c.benchmark_group("signal_json");
    group.bench_function("plain_serde/encode", |b| {
        b.iter(|| black_box(serde_json::to_vec(black_box(&plain)).unwrap()))
    });
    group.bench_function("signal/encode", |b| {
        b.iter(|| black_box(black_box(&signal).to_json_vec()))
    });
    group.bench_function("plain_serde/decode", |b| {
        b.iter(|| black_box(serde_json::from_slice::<Plain>(black_box(&bytes)).unwrap()))
    });
    group.bench_function("signal/decode", |b| {
        b.iter(|| black_box(Signal::from_json_slice(black_box(&bytes)).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, bench_route, bench_json);
criterion_main!(benches);
