//! A stdio MCP server that dies, hangs or answers garbage gives tool
//! errors through `ToolExec` (one `ai.tool.result` each), never a stall or
//! a panic; the next call starts the server again. The server is
//! `tests/mcp_support/fake_server.py` (python3).
#![cfg(feature = "mcp")]

mod ai_support;
mod mcp_support;

use std::time::Duration;

use ai_support::*;
use jido::ai::mcp::McpClient;
use jido::ai::{AiRuntime, ToolExec, ToolSet};
use jido::prelude::*;
use jido::signal::Signal;
use mcp_support::*;
use serde_json::json;

async fn fake(test: &str) -> Option<McpClient> {
    let config = fake_config(test, &[])?;
    Some(McpClient::connect(config).await.unwrap())
}

fn runtime(tools: Vec<jido::ai::Tool>) -> AiRuntime {
    AiRuntime::new().tools(ToolSet::new().with_all(tools).unwrap())
}

/// Runs `go` with `data` (`{"tool", "args", "timeout_ms"}`) as one ToolExec.
fn tool_exec(p: &serde_json::Value) -> Vec<Directive> {
    vec![
        ToolExec::new(
            p["id"].as_str().unwrap_or("tc_1"),
            p["tool"].as_str().unwrap(),
            p["args"].clone(),
        )
        .timeout_ms(p["timeout_ms"].as_u64().unwrap_or(0))
        .into(),
    ]
}

#[tokio::test]
async fn a_server_dying_mid_call_gives_an_error_result_and_the_next_call_restarts_it() {
    let Some(client) = fake("mcp_faults::dying").await else {
        return;
    };
    let first_pid = client.process_id().await.unwrap();
    let ai = runtime(client.tools().await.unwrap());
    let (jido, agent, mut rx) = start(&ai, "mcp-die-1", tool_exec).await;

    agent
        .cast(Signal::new("go", json!({"tool": "die", "args": {}})))
        .unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, "ai.tool.started");
    let reason = &got[1].1["result"]["reason"];
    assert_eq!(reason["type"], "execution_error");
    assert_eq!(reason["message"], "mcp server fake closed the connection");
    assert_eq!(reason["details"]["tool"], "die");
    assert_eq!(reason["retryable"], true);
    nothing_more(&mut rx).await;

    agent
        .cast(Signal::new(
            "go",
            json!({"id": "tc_2", "tool": "echo", "args": {"message": "back"}}),
        ))
        .unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(
        got[1].1["result"],
        json!({"status": "ok", "result": {"text": "echo: back"}, "effects": []})
    );
    let second_pid = client.process_id().await.unwrap();
    assert_ne!(first_pid, second_pid);
    client.close().await;
    jido.shutdown().await;
}

#[tokio::test]
async fn retrying_a_call_that_kills_the_server_still_ends_in_one_result() {
    let Some(client) = fake("mcp_faults::retry").await else {
        return;
    };
    // `die` always dies: the retry restarts the server, which dies again.
    let first_pid = client.process_id().await.unwrap();
    let ai = runtime(client.tools().await.unwrap());
    let (jido, agent, mut rx) = start(&ai, "mcp-die-2", |_| {
        vec![
            ToolExec::new("tc_1", "die", json!({}))
                .timeout_ms(0)
                .max_retries(1)
                .into(),
        ]
    })
    .await;
    agent.cast(Signal::new("go", json!({}))).unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[1].1["result"]["reason"]["message"],
        "mcp server fake closed the connection"
    );
    nothing_more(&mut rx).await;
    let out = client
        .call_tool("echo", json!({"message": "x"}))
        .await
        .unwrap();
    assert_eq!(out["text"], "echo: x");
    let pid = client.process_id().await.unwrap();
    assert_ne!(pid, first_pid);
    client.close().await;
    jido.shutdown().await;
}

#[tokio::test]
async fn a_hanging_server_gives_one_timeout_result() {
    let Some(client) = fake("mcp_faults::hang").await else {
        return;
    };
    let ai = runtime(client.tools().await.unwrap());
    let (jido, agent, mut rx) = start(&ai, "mcp-hang-1", tool_exec).await;
    // Connected for real; the wait itself on the paused clock.
    tokio::time::pause();
    let t0 = tokio::time::Instant::now();
    agent
        .cast(Signal::new(
            "go",
            json!({"tool": "hang", "args": {}, "timeout_ms": 5_000}),
        ))
        .unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(got.len(), 2);
    let reason = &got[1].1["result"]["reason"];
    assert_eq!(reason["type"], "timeout");
    assert_eq!(reason["message"], "action hang timed out after 5000ms");
    // Paused mid-run, the clock keeps its sub-millisecond offset.
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_millis(5_010),
        "{waited:?}"
    );
    nothing_more(&mut rx).await;
    tokio::time::resume();
    // The server still answers other calls.
    let out = client
        .call_tool("echo", json!({"message": "still here"}))
        .await
        .unwrap();
    assert_eq!(out["text"], "echo: still here");
    client.close().await;
    jido.shutdown().await;
}

#[tokio::test]
async fn garbage_from_the_server_is_a_typed_error() {
    let Some(client) = fake("mcp_faults::garbage").await else {
        return;
    };
    let err = client.call_tool("garbage", json!({})).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Execution, "{err:?}");
    assert_eq!(err.message(), "unexpected response from mcp server fake");
    assert!(!err.retryable());
    // The line that was not JSON did not break the session.
    let out = client
        .call_tool("echo", json!({"message": "ok"}))
        .await
        .unwrap();
    assert_eq!(out["text"], "echo: ok");
    client.close().await;
}

#[tokio::test]
async fn a_server_answering_garbage_to_initialize_is_a_connect_error() {
    let Some(config) = fake_config("mcp_faults::garbage_init", &["--garbage-init"]) else {
        return;
    };
    let err = McpClient::connect(config).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Execution, "{err:?}");
    assert!(
        err.message()
            .starts_with("mcp server fake failed to initialize: "),
        "{}",
        err.message()
    );
}

#[tokio::test]
async fn a_missing_program_is_a_connect_error_not_a_panic() {
    let err = McpClient::connect(jido::ai::mcp::McpServerConfig::stdio(
        "/nonexistent/jido-mcp-server",
    ))
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Execution);
    assert!(
        err.message()
            .starts_with("mcp server /nonexistent/jido-mcp-server could not be started: "),
        "{}",
        err.message()
    );
    assert!(!err.retryable());
}

/// True once `pid` has exited (gone, or a zombie waiting to be reaped).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the parenthesised name.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => true,
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_server_does_not_outlive_the_runtime_that_started_it() {
    let Some(config) = fake_config("mcp_faults::outlive", &["--linger"]) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The client is held by a task when the runtime goes away, as in a
    // test that panics or a service that exits without closing it, and the
    // server does not exit when its stdin closes.
    let pid = rt.block_on(async {
        let client = McpClient::connect(config).await.unwrap();
        let pid = client.process_id().await.unwrap();
        tokio::spawn(async move {
            let _client = client;
            std::future::pending::<()>().await
        });
        tokio::task::yield_now().await;
        pid
    });
    assert!(!exited(pid), "the server ended before the runtime did");
    drop(rt);
    // The kill is sent synchronously on drop; the kernel takes a moment
    // to mark the process.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !exited(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(exited(pid), "mcp server {pid} outlived the runtime");
}
