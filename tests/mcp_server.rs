//! Our own action server ([`McpServer`]) driven by rmcp's client and by
//! [`McpClient`], in process over a pipe (paused clock) and over
//! streamable HTTP on 127.0.0.1; MCP tools through `ToolExec` in an agent.
#![cfg(feature = "mcp")]

mod ai_support;

use std::time::Duration;

use ai_support::*;
use jido::ai::mcp::rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ErrorCode, Implementation,
};
use jido::ai::mcp::rmcp::{ServiceError, ServiceExt};
use jido::ai::mcp::{McpClient, McpServer, McpServerConfig};
use jido::ai::tool::Tool;
use jido::ai::{AiRuntime, ToolExec, ToolSet};
use jido::prelude::*;
use jido::signal::Signal;
use serde_json::{Value, json};

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct Mul {
    a: i64,
    b: i64,
}

/// Multiplies two integers.
#[jido::action]
async fn multiply(p: Mul) -> jido::Result<Value> {
    Ok(json!({"product": p.a * p.b}))
}

#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
struct NapFor {
    secs: u64,
}

/// Sleeps, then answers.
#[jido::action]
async fn nap(p: NapFor) -> jido::Result<Value> {
    tokio::time::sleep(Duration::from_secs(p.secs)).await;
    Ok(json!({"slept": p.secs}))
}

fn tools() -> ToolSet {
    ToolSet::new().with(Multiply).unwrap().with(Nap).unwrap()
}

/// Our server on one end of a pipe, `McpClient` on the other.
async fn connected(server: McpServer) -> McpClient {
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    let (r, w) = tokio::io::split(server_end);
    let _serving = server.serve_io(r, w);
    let (r, w) = tokio::io::split(client_end);
    McpClient::connect_io("ours", r, w).await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn rmcp_client_lists_our_tools_with_their_schemas_and_calls_them() {
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    let (r, w) = tokio::io::split(server_end);
    let serving = McpServer::new(tools())
        .server_info("calc", "1.2.3")
        .serve_io(r, w);
    let (r, w) = tokio::io::split(client_end);
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("test", "0"),
    )
    .serve((r, w))
    .await
    .unwrap();

    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "calc");
    assert_eq!(info.server_info.as_ref().unwrap().version, "1.2.3");

    let listed = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["multiply", "nap"]);
    // Exactly what a model gets from the tool set.
    let spec = Tool::from_action(Multiply).spec().clone();
    assert_eq!(
        listed[0].description.as_deref(),
        Some("Multiplies two integers.")
    );
    assert_eq!(
        Value::Object((*listed[0].input_schema).clone()),
        spec.parameters
    );
    assert_eq!(listed[0].input_schema["required"], json!(["a", "b"]));
    assert_eq!(listed[0].input_schema["additionalProperties"], false);

    // A call: the output as structured content and as text.
    let ok = client
        .call_tool(
            CallToolRequestParams::new("multiply")
                .with_arguments(json!({"a": 6, "b": "7"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(ok.is_error, Some(false));
    assert_eq!(ok.structured_content, Some(json!({"product": 42})));
    assert_eq!(ok.content[0].as_text().unwrap().text, r#"{"product":42}"#);

    // Invalid arguments: a tool error the model can read, with the envelope.
    let bad = client
        .call_tool(
            CallToolRequestParams::new("multiply")
                .with_arguments(json!({"a": "six", "b": 7}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    let envelope = &bad.structured_content.as_ref().unwrap()["error"];
    assert_eq!(envelope["type"], "validation_error");
    assert_eq!(envelope["retryable"], false);
    assert_eq!(envelope["details"]["path"], "a");
    assert_eq!(
        bad.content[0].as_text().unwrap().text,
        envelope["message"].as_str().unwrap()
    );

    // An unknown tool: the JSON-RPC error invalid params.
    let err = client
        .call_tool(CallToolRequestParams::new("divide"))
        .await
        .unwrap_err();
    match err {
        ServiceError::McpError(e) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
            assert_eq!(e.message, "unknown tool: divide");
            assert_eq!(e.data, Some(json!({"name": "divide"})));
        }
        other => panic!("expected an MCP error, got {other:?}"),
    }

    client.cancel().await.unwrap();
    serving.wait().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn mcp_client_tools_round_trip_names_schemas_outputs_and_error_kinds() {
    let client = connected(McpServer::new(tools())).await;
    let listed = client.tools().await.unwrap();
    assert_eq!(listed.len(), 2);
    let remote = &listed[0];
    let local = Tool::from_action(Multiply);
    assert_eq!(remote.name(), "multiply");
    assert_eq!(remote.spec().description, local.spec().description);
    assert_eq!(remote.spec().parameters, local.spec().parameters);

    let out = client
        .call_tool("multiply", json!({"a": 3, "b": 4}))
        .await
        .unwrap();
    assert_eq!(Value::Object(out), json!({"product": 12}));

    let err = client
        .call_tool("multiply", json!({"a": 3}))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(!err.retryable());
    assert_eq!(err.detail("tool"), Some(&json!("multiply")));
    assert_eq!(err.detail("remote").unwrap()["path"], "b");

    let err = client.call_tool("divide", json!({})).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(
        err.message(),
        "mcp server ours refused the call: unknown tool: divide"
    );
    assert_eq!(err.detail("code"), Some(&json!(-32602)));
    assert!(!err.retryable());

    let err = client
        .call_tool("multiply", json!([1, 2]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.message(), "tool arguments must be a JSON object");
}

#[tokio::test(start_paused = true)]
async fn a_slow_mcp_tool_ends_in_one_timeout_result_through_tool_exec() {
    let client = connected(McpServer::new(tools()).timeout(Duration::ZERO)).await;
    let ai = AiRuntime::new().tools(
        ToolSet::new()
            .with_all(client.tools().await.unwrap())
            .unwrap(),
    );
    let (jido, agent, mut rx) = start(&ai, "mcp-slow-1", |p| {
        vec![
            ToolExec::new("tc_1", "nap", p.clone())
                .timeout_ms(1_000)
                .max_retries(1)
                .request_id("req_1")
                .into(),
        ]
    })
    .await;
    let t0 = tokio::time::Instant::now();
    agent
        .cast(Signal::new("go", json!({"secs": 3600})))
        .unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].0, "ai.tool.started");
    assert_eq!(got[0].1["arguments"], json!({"secs": 3600}));
    let result = &got[1].1;
    assert_eq!(result["call_id"], "tc_1");
    assert_eq!(result["tool_name"], "nap");
    assert_eq!(result["metadata"]["request_id"], "req_1");
    assert_eq!(result["result"]["status"], "error");
    assert_eq!(result["result"]["reason"]["type"], "timeout");
    // Two attempts of 1 s (virtual time).
    assert_eq!(t0.elapsed(), Duration::from_secs(2));
    nothing_more(&mut rx).await;

    // The connection is still good: a fast call answers.
    agent.cast(Signal::new("go", json!({"secs": 0}))).unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(
        got[1].1["result"],
        json!({"status": "ok", "result": {"slept": 0}, "effects": []})
    );
    jido.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_closed_connection_gives_an_error_result_never_a_stall() {
    let (client_end, server_end) = tokio::io::duplex(1 << 16);
    let (r, w) = tokio::io::split(server_end);
    let serving = McpServer::new(tools()).serve_io(r, w);
    let (r, w) = tokio::io::split(client_end);
    let client = McpClient::connect_io("ours", r, w).await.unwrap();
    let ai = AiRuntime::new().tools(
        ToolSet::new()
            .with_all(client.tools().await.unwrap())
            .unwrap(),
    );
    let (jido, agent, mut rx) = start(&ai, "mcp-closed-1", |p| {
        vec![
            ToolExec::new("tc_1", "multiply", p.clone())
                .timeout_ms(0)
                .into(),
        ]
    })
    .await;
    serving.stop().await.unwrap();
    agent
        .cast(Signal::new("go", json!({"a": 1, "b": 2})))
        .unwrap();
    let got = until(&mut rx, "ai.tool.result").await;
    assert_eq!(got.len(), 2);
    let reason = &got[1].1["result"]["reason"];
    assert_eq!(reason["type"], "execution_error");
    assert_eq!(reason["message"], "mcp server ours closed the connection");
    assert_eq!(reason["details"]["server"], "ours");
    nothing_more(&mut rx).await;
    assert!(!client.is_connected().await);
    jido.shutdown().await;
}

#[tokio::test]
async fn our_server_over_streamable_http_serves_mcp_client() {
    let service = McpServer::new(tools()).http_service();
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let client =
        McpClient::connect(McpServerConfig::http(format!("http://{addr}/mcp")).name("http"))
            .await
            .unwrap();
    let names: Vec<String> = client
        .tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    assert_eq!(names, ["multiply", "nap"]);
    let out = client
        .call_tool("multiply", json!({"a": 5, "b": 5}))
        .await
        .unwrap();
    assert_eq!(out["product"], 25);
    let err = client.call_tool("multiply", json!({})).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    client.close().await;
    server.abort();
}
