//! The server side: [`McpServer`] serves a [`ToolSet`] to MCP clients.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::ai::envelope::ErrorEnvelope;
use crate::ai::tool::ToolSet;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::exec::{Exec, ExecOptions};

/// Default per-attempt timeout of a call served by [`McpServer`] (30 s,
/// Exec's).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Actions served to MCP clients: every tool of a [`ToolSet`] with the
/// description and JSON Schema a model gets ([`ToolSpec`](crate::ai::ToolSpec)).
/// Cheap to clone.
///
/// A `tools/call` normalises the arguments against the tool's schema
/// ([`Tool::normalize_arguments`](crate::ai::Tool::normalize_arguments))
/// and runs the action through Exec with a fresh [`Context`] (no agent
/// state), [`timeout`](McpServer::timeout) per attempt and
/// [`max_retries`](McpServer::max_retries). Its answer:
///
/// * success: the output object as structured content, and its JSON text
///   as the text content;
/// * the action's error (invalid arguments included, so that a model can
///   correct them, as the MCP specification asks): a result with
///   `isError: true`, the message as text and `{"error": ENVELOPE}` as
///   structured content ([`ErrorEnvelope`]: type, message, details,
///   retryable) — [`McpClient`](super::McpClient) turns it back into an
///   error of the same kind;
/// * a tool it does not have: the JSON-RPC error invalid params (-32602)
///   "unknown tool: NAME" (data `{"name": NAME}`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::ai::mcp::{McpClient, McpServer};
/// use jido::ai::ToolSet;
/// use jido::prelude::*;
/// use serde_json::json;
///
/// #[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
/// struct Mul { a: i64, b: i64 }
/// /// Multiplies two integers.
/// #[jido::action]
/// async fn multiply(p: Mul) -> jido::Result<serde_json::Value> {
///     Ok(json!({"product": p.a * p.b}))
/// }
///
/// // In process, over a pipe; `serve_stdio` serves a real client.
/// let (client_end, server_end) = tokio::io::duplex(64 * 1024);
/// let (server_read, server_write) = tokio::io::split(server_end);
/// let serving = McpServer::new(ToolSet::new().with(Multiply)?).serve_io(server_read, server_write);
/// let (read, write) = tokio::io::split(client_end);
/// let client = McpClient::connect_io("math", read, write).await?;
/// let tools = client.tools().await?;
/// assert_eq!(tools[0].spec().description, "Multiplies two integers.");
/// let out = client.call_tool("multiply", json!({"a": 6, "b": 7})).await?;
/// assert_eq!(out["product"], 42);
/// let err = client.call_tool("multiply", json!({"a": "six"})).await.unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Validation);
/// client.close().await;
/// serving.wait().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct McpServer {
    tools: ToolSet,
    exec: Option<Exec>,
    timeout: Duration,
    max_retries: u32,
    name: String,
    version: String,
    instructions: Option<String>,
}

impl McpServer {
    /// Serves `tools`, named `"jido"` with this crate's version, 30 s per
    /// attempt, no retry, on the global executor.
    pub fn new(tools: ToolSet) -> Self {
        McpServer {
            tools,
            exec: None,
            timeout: DEFAULT_CALL_TIMEOUT,
            max_retries: 0,
            name: "jido".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            instructions: None,
        }
    }

    /// The name and version given to clients (`serverInfo`).
    #[must_use]
    pub fn server_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.name = name.into();
        self.version = version.into();
        self
    }

    /// Instructions for the client's model (`instructions`).
    #[must_use]
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// The per-attempt timeout of a call (`Duration::ZERO`: none).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Retries of a call failing with a retryable error (default 0).
    #[must_use]
    pub fn max_retries(mut self, n: u32) -> Self {
        self.max_retries = n;
        self
    }

    /// Runs the actions on `exec` (default: the global executor).
    #[must_use]
    pub fn exec(mut self, exec: Exec) -> Self {
        self.exec = Some(exec);
        self
    }

    /// The tools served.
    pub fn tools(&self) -> &ToolSet {
        &self.tools
    }

    /// Serves one client on a byte stream (a socket, a pipe, a
    /// `tokio::io::duplex`) in a task, until the client closes it or
    /// [`McpServing::stop`].
    pub fn serve_io<R, W>(self, read: R, write: W) -> McpServing
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let token = CancellationToken::new();
        let ct = token.clone();
        let task =
            tokio::spawn(async move {
                let running = self.serve_with_ct((read, write), ct).await.map_err(|e| {
                    Error::execution(format!("mcp client failed to initialize: {e}")).with_source(e)
                })?;
                running.waiting().await.map(|_| ()).map_err(|e| {
                    Error::internal(format!("mcp server task failed: {e}")).with_source(e)
                })
            });
        McpServing { task, token }
    }

    /// Serves the client on this process's stdin and stdout (the process
    /// is the server a client started) until it closes them. Log to
    /// stderr only: stdout carries the protocol.
    ///
    /// # Errors
    ///
    /// As [`McpServing::wait`].
    pub async fn serve_stdio(self) -> Result<()> {
        self.serve_io(tokio::io::stdin(), tokio::io::stdout())
            .wait()
            .await
    }

    /// A streamable HTTP endpoint: a tower service to mount in axum
    /// (`Router::new().nest_service("/mcp", server.http_service())`) or
    /// hyper. One session per client (rmcp's `LocalSessionManager`), Host
    /// headers limited to localhost unless `config` says otherwise
    /// (see [`http_service_with`](McpServer::http_service_with)).
    pub fn http_service(self) -> StreamableHttpService<McpServer, LocalSessionManager> {
        self.http_service_with(StreamableHttpServerConfig::default())
    }

    /// [`http_service`](McpServer::http_service) with rmcp's options
    /// (allowed hosts and origins, keep-alive, JSON responses, …).
    pub fn http_service_with(
        self,
        config: StreamableHttpServerConfig,
    ) -> StreamableHttpService<McpServer, LocalSessionManager> {
        StreamableHttpService::new(
            move || Ok(self.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        )
    }

    fn describe(&self) -> Vec<rmcp::model::Tool> {
        self.tools
            .iter()
            .map(|tool| {
                let spec = tool.spec();
                let schema = match &spec.parameters {
                    Value::Object(map) => map.clone(),
                    _ => serde_json::Map::new(),
                };
                rmcp::model::Tool::new(spec.name.clone(), spec.description.clone(), schema)
            })
            .collect()
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
    ) -> std::result::Result<CallToolResult, ErrorData> {
        let name = request.name.as_ref();
        let Some(tool) = self.tools.get(name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {name}"),
                Some(json!({"name": name})),
            ));
        };
        let arguments = request.arguments.map_or(Value::Null, Value::Object);
        let outcome = match tool.normalize_arguments(arguments) {
            Ok(arguments) => {
                let exec = self.exec.clone().unwrap_or_else(|| Exec::global().clone());
                let opts = ExecOptions::new()
                    .timeout(self.timeout)
                    .max_retries(self.max_retries);
                let ctx = Context::new().with_exec(exec.clone());
                exec.run(tool.action().clone(), arguments, ctx, opts)
                    .await
                    .map(|out| out.output)
            }
            Err(err) => Err(err.with_detail("tool_name", name.to_owned())),
        };
        Ok(match outcome {
            Ok(output) => CallToolResult::structured(Value::Object(output)),
            Err(err) => {
                let envelope = ErrorEnvelope::from_error(&err);
                let mut result = CallToolResult::error(vec![ContentBlock::text(err.message())]);
                result.structured_content = Some(json!({"error": envelope}));
                result
            }
        })
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new(self.name.clone(), self.version.clone());
        info.instructions = self.instructions.clone();
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.describe()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        self.call(request).await.map(CallToolResponse::Complete)
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.tools.get(name)?;
        self.describe().into_iter().find(|t| t.name == name)
    }
}

/// A server serving one client ([`McpServer::serve_io`]).
#[derive(Debug)]
pub struct McpServing {
    task: JoinHandle<Result<()>>,
    token: CancellationToken,
}

impl McpServing {
    /// Waits until the client goes away (or [`stop`](McpServing::stop)).
    ///
    /// # Errors
    ///
    /// An execution error "mcp client failed to initialize: …" when the
    /// client's handshake failed; an internal error when the serving task
    /// panicked.
    pub async fn wait(self) -> Result<()> {
        match self.task.await {
            Ok(result) => result,
            Err(e) => Err(Error::internal(format!("mcp server task failed: {e}"))),
        }
    }

    /// Stops serving and waits for the task to end.
    ///
    /// # Errors
    ///
    /// As [`wait`](McpServing::wait).
    pub async fn stop(self) -> Result<()> {
        self.token.cancel();
        self.wait().await
    }
}
