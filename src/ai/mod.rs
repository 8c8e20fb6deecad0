//! The AI layer (feature `ai`): LLM and tool directives with their signal
//! contracts, the [`LlmClient`] interface and reasoning
//! strategies.
//!
//! Work in progress: [`client`] holds the model interface every other part
//! builds on.

pub mod client;

pub use client::{
    EmbedRequest, EmbedResponse, FinishReason, JsonSchemaFormat, LlmClient, LlmError, LlmErrorKind,
    LlmEvent, LlmEventStream, LlmRequest, LlmResponse, Message, Role, ToolCall, ToolChoice,
    ToolSpec, Usage,
};
