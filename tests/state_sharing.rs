//! A signal that writes beside a large state does not copy it: the bytes
//! one `call` allocates do not grow with a 10 000-message history, for a
//! write of a small key and for an append to the history.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::{TestAgent, act, sig};
use jido::effect::StateOp;
use jido::prelude::*;
use jido::state::StateMap;
use serde_json::{Value, json};

/// Counts the bytes allocated on the current thread.
struct Counting;

thread_local! {
    static BYTES: Cell<u64> = const { Cell::new(0) };
}

fn count(n: usize) {
    // `try_with`: the thread-local may be gone while a thread exits.
    let _ = BYTES.try_with(|b| b.set(b.get() + n as u64));
}

// SAFETY: every call is forwarded to `System` unchanged; counting only
// touches a const-initialised thread-local (no allocation).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn allocated() -> u64 {
    BYTES.with(Cell::get)
}

/// A chat message of about 500 bytes.
fn message(i: usize) -> Value {
    json!({"role": if i.is_multiple_of(2) { "user" } else { "assistant" }, "content": "x".repeat(440), "n": i})
}

/// An agent whose `write` signal sets `count` and whose `append` signal
/// appends one message to `history`, started with `history_len` messages.
async fn agent_with_history(jido: &Jido, id: &str, history_len: usize) -> AgentRef {
    let write = act(|p: Value, _ctx| async move { Ok(json!({"count": p["n"]})) });
    let append = act(|p: Value, ctx: Context| async move {
        ctx.push_effect(StateOp::append(
            ["history"],
            message(p["n"].as_u64().unwrap_or(0) as usize),
        ));
        Ok(json!({}))
    });
    let mut agent = TestAgent::new()
        .route("write", write)
        .route("append", append)
        .build(id);
    let history: Vec<Value> = (0..history_len).map(message).collect();
    let mut state = StateMap::new();
    state.insert("history", Value::Array(history));
    state.insert("count", 0);
    agent.replace_state(state);
    jido.start_agent(agent, ServerOptions::new()).await.unwrap()
}

/// Bytes allocated on this thread by one `call` of `ty` (after one warm-up
/// call), with the reply dropped.
async fn bytes_of_one_call(agent: &AgentRef, ty: &str) -> u64 {
    drop(agent.call(sig(ty, json!({"n": 1}))).await.unwrap());
    let before = allocated();
    let reply = agent.call(sig(ty, json!({"n": 2}))).await.unwrap();
    let used = allocated() - before;
    drop(reply);
    used
}

/// The whole runtime runs on this (current-thread) runtime's thread, so the
/// counter sees every allocation the signal causes.
async fn compare(ty: &str) -> (u64, u64) {
    let jido = Jido::start(JidoConfig::new()).await.unwrap();
    let empty = agent_with_history(&jido, &format!("state-sharing-{ty}-0"), 0).await;
    let large = agent_with_history(&jido, &format!("state-sharing-{ty}-10k"), 10_000).await;
    let small_bytes = bytes_of_one_call(&empty, ty).await;
    let large_bytes = bytes_of_one_call(&large, ty).await;
    let state = large.state().await.unwrap();
    let history = state.state()["history"].as_array().unwrap().len();
    assert_eq!(history, if ty == "append" { 10_002 } else { 10_000 });
    assert_eq!(state.state()["count"], if ty == "write" { 2 } else { 0 });
    jido.shutdown().await;
    eprintln!("{ty}: empty state {small_bytes} B, beside 10 000 messages {large_bytes} B");
    (small_bytes, large_bytes)
}

#[tokio::test]
async fn writing_a_small_key_beside_a_large_history_allocates_as_beside_an_empty_state() {
    let (empty, large) = compare("write").await;
    assert!(
        large <= 2 * empty + 16 * 1024,
        "one write allocated {large} B beside 10 000 messages, {empty} B beside none"
    );
}

#[tokio::test]
async fn appending_to_a_large_history_allocates_as_appending_to_an_empty_one() {
    let (empty, large) = compare("append").await;
    assert!(
        large <= 2 * empty + 16 * 1024,
        "one append allocated {large} B beside 10 000 messages, {empty} B beside none"
    );
}

// ------------------------------------------------------- the value itself

use jido::state::StateValue;

struct Plain;
impl Agent for Plain {
    const NAME: &'static str = "plain";
    type Schema = ();
}

#[test]
fn a_snapshot_keeps_its_state_while_the_clone_is_written() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    agent.set(json!({"cfg": {"a": 1}, "log": [1, 2]}).as_object().unwrap());
    let snapshot = agent.clone();
    agent.set(json!({"cfg": {"b": 2}}).as_object().unwrap());
    agent.append(["log"], 3);
    agent.apply_state_op(StateOp::delete_path(["cfg", "a"]));
    assert_eq!(snapshot.state(), &json!({"cfg": {"a": 1}, "log": [1, 2]}));
    assert_eq!(agent.state(), &json!({"cfg": {"b": 2}, "log": [1, 2, 3]}));
}

#[test]
fn a_write_shares_every_untouched_value_with_the_snapshot() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let history: Vec<Value> = (0..100).map(message).collect();
    agent.set(
        json!({"history": history, "other": {"x": 1}})
            .as_object()
            .unwrap(),
    );
    let snapshot = agent.clone();
    agent.set(json!({"count": 1}).as_object().unwrap());
    let (StateValue::Array(a), StateValue::Array(b)) =
        (&agent.state()["history"], &snapshot.state()["history"])
    else {
        panic!("history is an array");
    };
    assert!(a.ptr_eq(b));
    let (Some(a), Some(b)) = (
        agent.state()["other"].as_object(),
        snapshot.state()["other"].as_object(),
    ) else {
        panic!("other is an object");
    };
    assert!(a.ptr_eq(b));
}

#[test]
fn append_creates_the_array_and_replaces_a_value_that_is_not_one() {
    let mut state = StateMap::new();
    StateOp::append(["a", "list"], 1).apply(&mut state);
    StateOp::append(["a", "list"], 2).apply(&mut state);
    StateOp::set_path(["s"], "text").apply(&mut state);
    StateOp::append(["s"], 3).apply(&mut state);
    StateOp::append(Vec::<String>::new(), 4).apply(&mut state);
    assert_eq!(state, json!({"a": {"list": [1, 2]}, "s": [3]}));
    // Past the short-array size the array is a persistent vector: same
    // contents, same JSON.
    for i in 0..100 {
        StateOp::append(["long"], i).apply(&mut state);
    }
    let long = state["long"].as_array().unwrap();
    assert_eq!(long.len(), 100);
    assert_eq!((long[0].as_i64(), long[99].as_i64()), (Some(0), Some(99)));
    assert_eq!(
        serde_json::to_value(&state["long"]).unwrap(),
        Value::Array((0..100).map(Value::from).collect())
    );
}

#[test]
fn typed_reads_and_json_interop_go_both_ways() {
    #[derive(serde::Deserialize, Debug, PartialEq)]
    enum Mode {
        Fast,
        Slow { factor: u32 },
    }
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Typed {
        name: String,
        missing: Option<i64>,
        nothing: Option<i64>,
        modes: Vec<Mode>,
        tags: std::collections::BTreeMap<String, bool>,
    }
    let source = json!({
        "name": "n", "nothing": null, "modes": ["Fast", {"Slow": {"factor": 2}}],
        "tags": {"a": true}, "extra": [1.5, -2, "x"]
    });
    let state = StateMap::from(source.as_object().unwrap());
    let typed: Typed = serde::Deserialize::deserialize(&state).unwrap();
    assert_eq!(
        typed,
        Typed {
            name: "n".into(),
            missing: None,
            nothing: None,
            modes: vec![Mode::Fast, Mode::Slow { factor: 2 }],
            tags: [("a".to_owned(), true)].into(),
        }
    );
    // To JSON and back, by serde and by conversion; key order kept.
    assert_eq!(serde_json::to_value(&state).unwrap(), source);
    assert_eq!(Value::from(&state), source);
    assert_eq!(
        serde_json::to_string(&state).unwrap(),
        serde_json::to_string(&source).unwrap()
    );
    let back: StateMap = serde_json::from_value(source.clone()).unwrap();
    assert_eq!(back, state);
    assert_eq!(format!("{:?}", state["extra"]), r#"[1.5,-2,"x"]"#);
    // Comparisons with serde_json values and literals, both ways.
    assert_eq!(state["extra"][1], -2);
    assert_eq!(state["name"], "n");
    assert_eq!(json!("n"), state["name"]);
    assert_ne!(state["name"], json!("m"));
    assert!(state["nothing"].is_null() && state["absent"].is_null());
}

#[tokio::test]
async fn state_as_names_the_failing_field() {
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Count {
        count: i64,
    }
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    agent.set(json!({"count": "seven"}).as_object().unwrap());
    let err = agent.state_as::<Count>().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.detail("path"), Some(&json!("count")));
    agent.set(json!({"count": 7}).as_object().unwrap());
    assert_eq!(agent.state_as::<Count>().unwrap().count, 7);
}

#[test]
fn empty_maps_allocate_nothing_until_written() {
    let first = StateMap::new();
    let before = allocated();
    let mut a = StateMap::new();
    let b = StateMap::default();
    assert_eq!(
        allocated() - before,
        0,
        "an empty map is a handle, not an allocation"
    );
    assert!(a.ptr_eq(&b) && a.ptr_eq(&first));
    // The first write makes the map its own; the other empty maps stay empty.
    a.insert("k", 1);
    assert!(!a.ptr_eq(&b));
    assert_eq!((a.len(), b.len(), first.len()), (1, 0, 0));
    assert_eq!(a["k"], 1);
    assert!(StateMap::new().is_empty());
}
