//! The client side: [`McpClient`] reaches one MCP server (a child process
//! over stdio, or streamable HTTP) and turns its tools into [`Tool`]s.

use std::fmt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    ErrorCode, Implementation,
};
use rmcp::service::{Peer, RunningService, ServiceError};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::sync::Mutex;

use super::tool_name;
use crate::action::json_action;
use crate::ai::envelope::ErrorEnvelope;
use crate::ai::tool::Tool;
use crate::error::{Error, ErrorKind, Result};

/// Default wait for a server to start and answer `initialize` (30 s).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How to reach an MCP server: a command started as a child process
/// speaking MCP on its stdin/stdout, or the URL of a streamable HTTP
/// endpoint.
///
/// ```
/// use jido::ai::mcp::McpServerConfig;
///
/// let everything = McpServerConfig::stdio("npx")
///     .args(["-y", "@modelcontextprotocol/server-everything"])
///     .env("NODE_ENV", "production")
///     .name("everything");
/// assert_eq!(everything.label(), "everything");
/// let remote = McpServerConfig::http("http://127.0.0.1:8000/mcp");
/// assert_eq!(remote.label(), "http://127.0.0.1:8000/mcp");
/// ```
#[derive(Clone, Debug)]
pub struct McpServerConfig {
    target: Target,
    name: Option<String>,
    connect_timeout: Duration,
}

#[derive(Clone, Debug)]
enum Target {
    Stdio {
        program: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
    },
}

impl McpServerConfig {
    /// A server started as `program` (found on `PATH`), speaking MCP on
    /// its stdin and stdout; its stderr lines are logged at debug level
    /// (target `jido::ai::mcp`). The process is its own process group:
    /// dropping the client kills it with its children (`npx` and the node
    /// process it starts).
    pub fn stdio(program: impl Into<String>) -> Self {
        McpServerConfig {
            target: Target::Stdio {
                program: program.into(),
                args: Vec::new(),
                env: Vec::new(),
                cwd: None,
            },
            name: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }

    /// A streamable HTTP server at `url`.
    pub fn http(url: impl Into<String>) -> Self {
        McpServerConfig {
            target: Target::Http { url: url.into() },
            name: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }

    /// Adds a command-line argument (stdio only).
    #[must_use]
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        if let Target::Stdio { args, .. } = &mut self.target {
            args.push(arg.into());
        }
        self
    }

    /// Adds command-line arguments (stdio only).
    #[must_use]
    pub fn args<I, S>(self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        args.into_iter().fold(self, Self::arg)
    }

    /// Sets an environment variable of the process (stdio only).
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let Target::Stdio { env, .. } = &mut self.target {
            env.push((key.into(), value.into()));
        }
        self
    }

    /// Sets the working directory of the process (stdio only).
    #[must_use]
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        if let Target::Stdio { cwd, .. } = &mut self.target {
            *cwd = Some(dir.into());
        }
        self
    }

    /// Names the server in errors and logs (default: the program or the
    /// URL).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The longest wait for the server to start and answer `initialize`
    /// (default 30 s), on the first connection and on every reconnection.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The name of the server in errors and logs.
    pub fn label(&self) -> &str {
        match (&self.name, &self.target) {
            (Some(name), _) => name,
            (None, Target::Stdio { program, .. }) => program,
            (None, Target::Http { url }) => url,
        }
    }
}

type Service = RunningService<RoleClient, ClientConfig>;

struct Session {
    service: Service,
    generation: u64,
    pid: Option<u32>,
}

struct Inner {
    label: String,
    config: Option<McpServerConfig>,
    session: Mutex<Option<Session>>,
    generation: AtomicU64,
}

/// A connection to one MCP server, shared by the tools it made; cheap to
/// clone.
///
/// [`tools`](McpClient::tools) lists the server's tools as [`Tool`]s:
/// each is a [`json_action`] named after the MCP tool (see
/// [`tool_name`](super::tool_name)), described by the server's
/// description and input JSON Schema (closed as every tool schema, see
/// [`tool_schema`](crate::ai::tool::tool_schema)). A call goes through
/// `ToolExec` and Exec like any tool: the per-attempt timeout, retries and
/// the one `ai.tool.result` are theirs; dropping a timed-out call sends
/// the server a cancellation notification.
///
/// # Output and errors of a call
///
/// * A result with structured content that is a JSON object: that object.
///   Otherwise `{"text": …}`, the text blocks joined by newlines, with
///   `"content"` (the other blocks as MCP JSON) when there are any.
/// * A result with `isError: true`: an execution error "mcp tool NAME
///   failed: TEXT" (details `server`, `tool`, `content`); when its
///   structured content holds an error envelope under `"error"` (as
///   [`McpServer`](super::McpServer) sends) the envelope's type and
///   retryability are kept.
/// * JSON-RPC errors: invalid params (-32602) → validation error "mcp
///   server NAME refused the call: MESSAGE", other codes → execution
///   error, not retried (details `server`, `tool`, `code`, `data`).
/// * A server that is gone (process exited or killed, connection lost) →
///   execution error "mcp server NAME closed the connection" (retryable):
///   the next call starts the server again (or reconnects over HTTP)
///   before sending. A reply that is not MCP → execution error
///   "unexpected response from mcp server NAME" (not retried). A server
///   that never answers → the call's timeout.
///
/// ```no_run
/// # async fn demo() -> jido::Result<()> {
/// use jido::ai::mcp::{McpClient, McpServerConfig};
/// use jido::ai::{AiRuntime, ToolSet};
///
/// let everything = McpClient::connect(
///     McpServerConfig::stdio("npx").args(["-y", "@modelcontextprotocol/server-everything"]),
/// )
/// .await?;
/// let tools = ToolSet::new().with_all(everything.tools().await?)?;
/// assert!(tools.get("get_sum").is_some()); // MCP name `get-sum`
/// let ai = AiRuntime::new().tools(tools);
/// # let _ = ai; Ok(()) }
/// ```
#[derive(Clone)]
pub struct McpClient {
    inner: Arc<Inner>,
}

impl fmt::Debug for McpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.inner.label)
            .field("reconnects", &self.inner.config.is_some())
            .finish_non_exhaustive()
    }
}

impl McpClient {
    /// Starts (stdio) or reaches (HTTP) the server and runs the MCP
    /// handshake.
    ///
    /// # Errors
    ///
    /// An execution error "mcp server NAME could not be started: …" (the
    /// program is missing, …), "mcp server NAME failed to initialize: …"
    /// (it exited or answered something else), a timeout error "mcp server
    /// NAME did not initialize in time" (details `server`, `timeout_ms`).
    pub async fn connect(config: McpServerConfig) -> Result<Self> {
        let client = McpClient {
            inner: Arc::new(Inner {
                label: config.label().to_owned(),
                config: Some(config),
                session: Mutex::new(None),
                generation: AtomicU64::new(0),
            }),
        };
        client.peer().await?;
        Ok(client)
    }

    /// A client over an already open byte stream (an in-process server on
    /// a `tokio::io::duplex`, a socket). It cannot reconnect: once the
    /// stream closes, every call fails with "mcp server NAME closed the
    /// connection".
    ///
    /// # Errors
    ///
    /// As [`connect`](McpClient::connect), with `name` in the messages.
    pub async fn connect_io<R, W>(name: impl Into<String>, read: R, write: W) -> Result<Self>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let label = name.into();
        let service = initialize(
            &label,
            DEFAULT_CONNECT_TIMEOUT,
            client_config().serve((read, write)),
        )
        .await?;
        let inner = Inner {
            label,
            config: None,
            session: Mutex::new(Some(Session {
                service,
                generation: 0,
                pid: None,
            })),
            generation: AtomicU64::new(0),
        };
        Ok(McpClient {
            inner: Arc::new(inner),
        })
    }

    /// The server's name in errors and logs.
    pub fn name(&self) -> &str {
        &self.inner.label
    }

    /// The process id of a stdio server while it runs.
    pub async fn process_id(&self) -> Option<u32> {
        self.inner.session.lock().await.as_ref().and_then(|s| s.pid)
    }

    /// Whether a live connection is open now (a closed one is reopened by
    /// the next call).
    pub async fn is_connected(&self) -> bool {
        self.inner
            .session
            .lock()
            .await
            .as_ref()
            .is_some_and(|s| alive(&s.service))
    }

    /// The server's tools, as [`Tool`]s (in the server's order, every page).
    ///
    /// # Errors
    ///
    /// As [`call_tool`](McpClient::call_tool) for the `tools/list` request.
    pub async fn tools(&self) -> Result<Vec<Tool>> {
        let (peer, generation) = self.peer().await?;
        let listed = peer
            .list_all_tools()
            .await
            .map_err(|e| self.failed(e, "tools/list", generation))?;
        Ok(listed
            .into_iter()
            .map(|t| {
                let schema = Value::Object((*t.input_schema).clone());
                let remote = t.name.to_string();
                let client = self.clone();
                let action = json_action(tool_name(&remote), schema, move |args, _ctx| {
                    let client = client.clone();
                    let remote = remote.clone();
                    Box::pin(async move { client.call_tool(&remote, Value::Object(args)).await })
                });
                let tool = Tool::from_action(action);
                match t.description {
                    Some(d) if !d.trim().is_empty() => tool.description(d.into_owned()),
                    _ => tool,
                }
            })
            .collect())
    }

    /// Calls tool `name` (its MCP name) with `arguments` (a JSON object or
    /// `null`), reconnecting first when the connection is closed. No
    /// timeout of its own: the caller's (Exec's) applies; dropping the
    /// future cancels the request.
    ///
    /// # Errors
    ///
    /// See [output and errors](McpClient#output-and-errors-of-a-call).
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<Map<String, Value>> {
        let arguments = match arguments {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(Error::validation("tool arguments must be a JSON object")
                    .with_detail("arguments", crate::error::sanitize(&other)));
            }
        };
        let (peer, generation) = self.peer().await?;
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        let result = peer
            .call_tool(params)
            .await
            .map_err(|e| self.failed(e, name, generation))?;
        self.output(name, result)
    }

    /// Closes the connection (stops a stdio server). A later call opens a
    /// new one, unless the client was made by
    /// [`connect_io`](McpClient::connect_io).
    pub async fn close(&self) {
        let session = self.inner.session.lock().await.take();
        if let Some(mut session) = session {
            let _ = session
                .service
                .close_with_timeout(Duration::from_secs(5))
                .await;
        }
    }

    /// The peer of a live session, opening one when there is none.
    async fn peer(&self) -> Result<(Peer<RoleClient>, u64)> {
        let mut guard = self.inner.session.lock().await;
        if let Some(session) = guard.as_ref()
            && alive(&session.service)
        {
            return Ok((session.service.peer().clone(), session.generation));
        }
        // Dropping a dead session kills what is left of its process.
        *guard = None;
        let Some(config) = &self.inner.config else {
            return Err(self.closed());
        };
        let generation = self.inner.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let (service, pid) = open(config).await?;
        let peer = service.peer().clone();
        *guard = Some(Session {
            service,
            generation,
            pid,
        });
        Ok((peer, generation))
    }

    fn closed(&self) -> Error {
        Error::execution(format!(
            "mcp server {} closed the connection",
            self.inner.label
        ))
        .with_detail("server", self.inner.label.clone())
    }

    /// The error of a failed request; a lost connection is forgotten so
    /// that the next call reconnects.
    fn failed(&self, error: ServiceError, tool: &str, generation: u64) -> Error {
        let label = &self.inner.label;
        match error {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                self.forget(generation);
                let err = self.closed().with_detail("tool", tool.to_owned());
                match error {
                    ServiceError::TransportSend(e) => err.with_source(e),
                    _ => err,
                }
            }
            ServiceError::McpError(e) => {
                let kind = if e.code == ErrorCode::INVALID_PARAMS {
                    ErrorKind::Validation
                } else {
                    ErrorKind::Execution
                };
                Error::new(
                    kind,
                    format!("mcp server {label} refused the call: {}", e.message),
                )
                .with_detail("server", label.clone())
                .with_detail("tool", tool.to_owned())
                .with_detail("code", e.code.0)
                .with_detail("data", e.data.clone().unwrap_or(Value::Null))
                .with_retry(false)
            }
            ServiceError::Timeout { timeout } => {
                Error::timeout(format!("mcp server {label} did not answer in time"))
                    .with_detail("server", label.clone())
                    .with_detail("tool", tool.to_owned())
                    .with_detail(
                        "timeout_ms",
                        u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                    )
            }
            ServiceError::Cancelled { reason } => {
                Error::cancelled(format!("mcp request to {label} was cancelled"))
                    .with_detail("server", label.clone())
                    .with_detail("reason", reason.unwrap_or_default())
            }
            other => Error::execution(format!("unexpected response from mcp server {label}"))
                .with_detail("server", label.clone())
                .with_detail("tool", tool.to_owned())
                .with_detail("reason", other.to_string())
                .with_retry(false),
        }
    }

    fn forget(&self, generation: u64) {
        // Only the session that failed: a newer one may already serve.
        if let Ok(mut guard) = self.inner.session.try_lock()
            && guard.as_ref().is_some_and(|s| s.generation == generation)
            && self.inner.config.is_some()
        {
            *guard = None;
        }
    }

    fn output(&self, tool: &str, result: CallToolResult) -> Result<Map<String, Value>> {
        let label = &self.inner.label;
        let text = result
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .map(|t| t.text.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        if result.is_error == Some(true) {
            let content = serde_json::to_value(&result.content).unwrap_or(Value::Null);
            let base = Error::execution(format!("mcp tool {tool} failed: {text}"))
                .with_detail("server", label.clone())
                .with_detail("tool", tool.to_owned())
                .with_detail("content", content);
            return Err(
                match result
                    .structured_content
                    .as_ref()
                    .and_then(|s| s.get("error"))
                {
                    Some(envelope @ Value::Object(_)) => from_envelope(envelope, base),
                    _ => base,
                },
            );
        }
        if let Some(Value::Object(map)) = result.structured_content {
            return Ok(map);
        }
        let mut out = Map::new();
        out.insert("text".into(), Value::String(text));
        let others: Vec<Value> = result
            .content
            .iter()
            .filter(|c| c.as_text().is_none())
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect();
        if !others.is_empty() {
            out.insert("content".into(), Value::Array(others));
        }
        Ok(out)
    }
}

/// `base` with the kind, message and retryability of an error envelope
/// sent by the server.
fn from_envelope(envelope: &Value, base: Error) -> Error {
    let env = ErrorEnvelope::normalize(envelope, "execution_error", base.message());
    let kind = ErrorKind::from_type(&env.kind).unwrap_or(ErrorKind::Execution);
    let mut err = Error::new(kind, env.message)
        .with_details(Value::Object(base.details().clone()))
        .with_detail("remote", Value::Object(env.details));
    if !env.retryable {
        err = err.with_retry(false);
    }
    err
}

fn alive(service: &Service) -> bool {
    !service.is_closed() && !service.peer().is_transport_closed()
}

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("jido", env!("CARGO_PKG_VERSION")),
    )
}

async fn initialize<F, E>(label: &str, timeout: Duration, handshake: F) -> Result<Service>
where
    F: Future<Output = std::result::Result<Service, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(e)) => Err(Error::execution(format!(
            "mcp server {label} failed to initialize: {e}"
        ))
        .with_detail("server", label.to_owned())
        .with_source(e)),
        Err(_) => Err(
            Error::timeout(format!("mcp server {label} did not initialize in time"))
                .with_detail("server", label.to_owned())
                .with_detail(
                    "timeout_ms",
                    u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                ),
        ),
    }
}

/// Starts or reaches the server of `config` and runs the handshake.
async fn open(config: &McpServerConfig) -> Result<(Service, Option<u32>)> {
    let label = config.label();
    match &config.target {
        Target::Stdio {
            program,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args);
            cmd.envs(env.iter().map(|(k, v)| (k, v)));
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
            #[cfg(unix)]
            wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
            // rmcp kills the child from a task spawned on drop, which never
            // runs when the runtime is shutting down (a panicking test, a
            // service exiting): the kill-on-drop flag kills it synchronously.
            wrapped.wrap(process_wrap::tokio::KillOnDrop);
            let (process, stderr) = TokioChildProcess::builder(wrapped)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| {
                    Error::execution(format!("mcp server {label} could not be started: {e}"))
                        .with_detail("server", label.to_owned())
                        .with_detail("program", program.clone())
                        .with_retry(false)
                        .with_source(e)
                })?;
            let pid = process.id();
            if let Some(stderr) = stderr {
                let label = label.to_owned();
                tokio::spawn(async move {
                    let mut lines = BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tracing::debug!(target: "jido::ai::mcp", server = %label, "{line}");
                    }
                });
            }
            let service = initialize(
                label,
                config.connect_timeout,
                client_config().serve(process),
            )
            .await?;
            Ok((service, pid))
        }
        Target::Http { url } => {
            let transport = StreamableHttpClientTransport::from_uri(url.as_str());
            let service = initialize(
                label,
                config.connect_timeout,
                client_config().serve(transport),
            )
            .await?;
            Ok((service, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelopes_keep_their_kind_and_retryability() {
        let base = Error::execution("mcp tool t failed: x").with_detail("tool", "t");
        let err = from_envelope(
            &json!({"type": "validation_error", "message": "bad n", "details": {"path": "n"}, "retryable": false}),
            base.clone(),
        );
        assert_eq!(err.kind(), ErrorKind::Validation);
        assert_eq!(err.message(), "bad n");
        assert_eq!(err.detail("tool"), Some(&json!("t")));
        assert_eq!(err.detail("remote"), Some(&json!({"path": "n"})));
        assert!(!err.retryable());
        let err = from_envelope(&json!({"type": "weird", "message": "m"}), base);
        assert_eq!(err.kind(), ErrorKind::Execution);
    }
}
