//! Tools over the Model Context Protocol (feature `mcp`, on the official
//! `rmcp` SDK).
//!
//! * [`McpClient`]: the tools of an MCP server — a child process over
//!   stdio or a streamable HTTP endpoint, see [`McpServerConfig`] — as
//!   [`Tool`](crate::ai::Tool)s. They go in a [`ToolSet`](crate::ai::ToolSet)
//!   beside action tools and run through `ToolExec` with the same contract:
//!   `ai.tool.started`, then exactly one `ai.tool.result`, the per-attempt
//!   timeout and the retries of Exec. A server that exits, is killed or
//!   hangs gives tool errors, never a stall; the next call starts it again.
//! * [`McpServer`]: actions (a `ToolSet`) served to any MCP client, over
//!   stdio, any byte stream, or streamable HTTP (a tower service to mount
//!   in axum or hyper), with the tool descriptions and JSON Schemas a model
//!   gets from [`crate::ai::tool`].
//!
//! An MCP tool is an action like any other: a
//! [`json_action`](crate::action::json_action) (an action known at run
//! time by a name and a JSON Schema) whose run is the `tools/call` request.
//! Nothing in the runtime knows about MCP.
//!
//! ```no_run
//! # async fn demo() -> jido::Result<()> {
//! use jido::ai::mcp::{McpClient, McpServerConfig};
//! use jido::ai::{AiRuntime, ReAct, ToolSet};
//!
//! let server = McpClient::connect(
//!     McpServerConfig::stdio("npx").args(["-y", "@modelcontextprotocol/server-everything"]),
//! )
//! .await?;
//! // `get-sum` is offered to the model as `get_sum`.
//! let tools = ToolSet::new().with_all(server.tools().await?)?;
//! let strategy = ReAct::new().tools(tools);
//! # let _ = (strategy, AiRuntime::new()); Ok(()) }
//! ```
//!
//! The types of `rmcp` that appear in this API (the HTTP service of
//! [`McpServer::http_service`]) are those of the version re-exported as
//! [`rmcp`].

mod client;
mod server;

pub use client::{DEFAULT_CONNECT_TIMEOUT, McpClient, McpServerConfig};
pub use rmcp;
pub use server::{McpServer, McpServing};

/// The tool name a model sees for MCP tool `mcp_name`: every character
/// outside `[A-Za-z0-9_]` becomes `_`, and a name not starting with a
/// letter gets a `t` in front (tool names match
/// `^[a-zA-Z][a-zA-Z0-9_]*$`); valid names are kept. Calls still send the MCP name. Two MCP
/// names mapping to the same tool name (`a-b`, `a_b`) are refused by the
/// [`ToolSet`](crate::ai::ToolSet) as duplicates; give one a prefix with
/// [`Tool::prefixed`](crate::ai::Tool::prefixed).
///
/// ```
/// use jido::ai::mcp::tool_name;
///
/// assert_eq!(tool_name("echo"), "echo");
/// assert_eq!(tool_name("get-sum"), "get_sum");
/// assert_eq!(tool_name("fs.read"), "fs_read");
/// assert_eq!(tool_name("2fa"), "t2fa");
/// assert_eq!(tool_name(""), "t");
/// ```
pub fn tool_name(mcp_name: &str) -> String {
    let mut name: String = mcp_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name.insert(0, 't');
    }
    name
}
