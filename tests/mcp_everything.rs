//! MCP tools of the real third-party reference server
//! `@modelcontextprotocol/server-everything` (npm), started over stdio:
//!
//! ```sh
//! JIDO_MCP_EVERYTHING=$(scripts/mcp_server.sh install) cargo test --features mcp --test mcp_everything
//! ```
//!
//! Without `JIDO_MCP_EVERYTHING` the tests run it with `npx -y`; without
//! npx they are skipped with a message, except under `CI=true`, where that
//! is a failure.
#![cfg(feature = "mcp")]

mod ai_support;
mod mcp_support;

use ai_support::*;
use jido::ai::{AiRuntime, ToolExec, ToolSet};
use jido::signal::Signal;
use mcp_support::*;
use serde_json::json;

#[tokio::test]
async fn its_tools_are_listed_with_their_schemas_under_model_safe_names() {
    let Some(client) = everything("mcp_everything::list").await else {
        return;
    };
    let tools = ToolSet::new()
        .with_all(client.tools().await.unwrap())
        .unwrap();
    assert!(tools.len() >= 10, "{:?}", tools.names().collect::<Vec<_>>());
    let names: Vec<&str> = tools.names().collect();
    assert!(names.contains(&"get_sum") && names.contains(&"trigger_long_running_operation"));
    assert!(names.iter().all(|n| !n.contains('-')));

    let echo = tools.get("echo").unwrap().spec();
    assert_eq!(echo.description, "Echoes back the input string");
    assert_eq!(
        echo.parameters,
        json!({
            "type": "object",
            "properties": {"message": {"type": "string", "description": "Message to echo"}},
            "required": ["message"],
            "additionalProperties": false
        })
    );
    let sum = tools.get("get_sum").unwrap().spec();
    assert_eq!(sum.description, "Returns the sum of two numbers");
    assert_eq!(sum.parameters["required"], json!(["a", "b"]));
    assert_eq!(sum.parameters["properties"]["a"]["type"], "number");
    client.close().await;
}

#[tokio::test]
async fn its_tools_run_through_tool_exec_with_one_result_each() {
    let Some(client) = everything("mcp_everything::calls").await else {
        return;
    };
    let ai = AiRuntime::new().tools(
        ToolSet::new()
            .with_all(client.tools().await.unwrap())
            .unwrap(),
    );
    let (jido, agent, mut rx) = start(&ai, "mcp-everything-1", |p| {
        vec![
            ToolExec::new(
                p["id"].as_str().unwrap(),
                p["tool"].as_str().unwrap(),
                p["args"].clone(),
            )
            .timeout_ms(30_000)
            .into(),
        ]
    })
    .await;

    agent
        .cast(Signal::new(
            "go",
            json!({"id": "tc_1", "tool": "echo", "args": {"message": "hello mcp"}}),
        ))
        .unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, "ai.tool.started");
    assert_eq!(got[1].1["tool_name"], "echo");
    assert_eq!(
        got[1].1["result"],
        json!({"status": "ok", "result": {"text": "Echo: hello mcp"}, "effects": []})
    );

    // Arguments as a model writes them: normalised against the server's schema.
    agent
        .cast(Signal::new(
            "go",
            json!({"id": "tc_2", "tool": "get_sum", "args": "{\"a\": \"2\", \"b\": 3}"}),
        ))
        .unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(got[0].1["call_id"], "tc_2");
    assert_eq!(
        got[1].1["result"]["result"],
        json!({"text": "The sum of 2 and 3 is 5."})
    );

    // Arguments the server refuses: an error result.
    agent
        .cast(Signal::new(
            "go",
            json!({"id": "tc_3", "tool": "get_sum", "args": {"a": 2}}),
        ))
        .unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].1["result"]["status"], "error");
    nothing_more(&mut rx).await;
    client.close().await;
    jido.shutdown().await;
}

#[tokio::test]
async fn killing_it_mid_call_gives_an_error_result_and_the_next_call_restarts_it() {
    let Some(client) = everything("mcp_everything::kill").await else {
        return;
    };
    let pid = client.process_id().await.unwrap();
    let ai = AiRuntime::new().tools(
        ToolSet::new()
            .with_all(client.tools().await.unwrap())
            .unwrap(),
    );
    let (jido, agent, mut rx) = start(&ai, "mcp-everything-2", |p| {
        vec![
            ToolExec::new(
                p["id"].as_str().unwrap(),
                p["tool"].as_str().unwrap(),
                p["args"].clone(),
            )
            .timeout_ms(0)
            .into(),
        ]
    })
    .await;
    agent
        .cast(Signal::new(
            "go",
            json!({"id": "tc_1", "tool": "trigger_long_running_operation", "args": {"duration": 600, "steps": 1}}),
        ))
        .unwrap();
    assert_eq!(next(&mut rx).await.0, "ai.tool.started");
    // The whole process group (npx and the node process it started): the
    // server leads its own group.
    let pgid = std::process::Command::new("ps")
        .args(["-o", "pgid=", "-p", &pid.to_string()])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&pgid.stdout).trim(),
        pid.to_string()
    );
    let killed = std::process::Command::new("kill")
        .args(["-s", "KILL", "--", &format!("-{pid}")])
        .status()
        .unwrap();
    assert!(killed.success());
    let (ty, data) = next(&mut rx).await;
    assert_eq!(ty, "ai.tool.result");
    assert_eq!(data["call_id"], "tc_1");
    assert_eq!(data["result"]["reason"]["type"], "execution_error");
    assert_eq!(
        data["result"]["reason"]["message"],
        "mcp server everything closed the connection"
    );
    nothing_more(&mut rx).await;

    agent
        .cast(Signal::new(
            "go",
            json!({"id": "tc_2", "tool": "echo", "args": {"message": "again"}}),
        ))
        .unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(got[1].1["result"]["result"], json!({"text": "Echo: again"}));
    assert_ne!(client.process_id().await.unwrap(), pid);
    client.close().await;
    jido.shutdown().await;
}
