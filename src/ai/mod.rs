//! The AI layer (feature `ai`): LLM and tool directives with their signal
//! contracts, the [`LlmClient`] interface and reasoning
//! strategies.
//!
//! * [`client`]: the model interface every other part builds on.
//! * [`directive`]: `LlmStream`, `LlmGenerate`, `LlmEmbed`, `ToolExec`,
//!   `EmitToolError`, `EmitRequestError` and `CancelRequest`.
//! * [`signals`]: what those directives send back to the agent
//!   (`ai.llm.delta`, `ai.usage`, `ai.llm.response`, `ai.embed.result`,
//!   `ai.tool.started`, `ai.tool.result`, `ai.request.error`).
//! * [`envelope`]: the result and error envelopes, the tool-result content.
//! * [`tool`]: tools from actions; [`effects`]: the tool effect policy.
//! * [`telemetry`]: the `jido.ai.llm.*` / `jido.ai.tool.*` spans and events.
//! * [`runtime`]: [`AiRuntime`], which holds the client
//!   and the tools and executes the directives.
//! * [`request`]: what every request-driven reasoning strategy shares
//!   ([`RequestCore`]: requests by id, busy, cancellation, completion,
//!   typed state in the strategy ext with its JSON mirror).
//! * [`react`]: the ReAct strategy ([`ReAct`]) on its pure state machine.
//! * `mcp` (feature `mcp`): tools of MCP servers in a [`ToolSet`], and
//!   actions served to MCP clients.

pub mod client;
pub mod directive;
pub mod effects;
pub mod envelope;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod react;
pub mod reasoning;
pub mod request;
pub mod runtime;
pub mod signals;
pub mod telemetry;
pub mod tool;

#[cfg(feature = "ai-genai")]
pub use client::GenaiClient;
pub use client::{
    EmbedRequest, EmbedResponse, FinishReason, JsonSchemaFormat, LlmClient, LlmConfig, LlmError,
    LlmErrorKind, LlmEvent, LlmEventStream, LlmRequest, LlmResponse, Message, Messages,
    ModelAliases, Role, Script, ScriptedModel, ToolCall, ToolCallAssembler, ToolChoice, ToolSpec,
    ToolSpecs, Usage,
};
pub use directive::{
    AiDirective, CancelRequest, EmitRequestError, EmitToolError, LlmEmbed, LlmGenerate, LlmStream,
    ModelRef, ToolExec,
};
pub use envelope::{ErrorEnvelope, ResultEnvelope};
pub use react::{OutputSchema, ReAct};
pub use request::{RequestCore, RequestState};
pub use runtime::AiRuntime;
pub use tool::{Tool, ToolSet};
