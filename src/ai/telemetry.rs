//! Telemetry of LLM calls and tool runs: `tracing` spans and events under
//! one namespace, `jido.ai.llm.*` and `jido.ai.tool.*` (target `jido::ai`).
//!
//! | event | level | fields |
//! |---|---|---|
//! | `jido.ai.llm.start` | debug | `call_id`, `request_id`, `iteration`, `model`, `origin`, `operation` |
//! | `jido.ai.llm.stop` | debug | the same, `duration_ms`, `input_tokens`, `output_tokens`, `total_tokens` (0 when not counted), `finish_reason` |
//! | `jido.ai.llm.exception` | warn | the start fields, `duration_ms`, `error_type`, `message`, `retryable` |
//! | `jido.ai.tool.start` | debug | `call_id`, `tool_name`, `request_id`, `iteration`, `origin`, `operation` |
//! | `jido.ai.tool.stop` | debug | the same, `duration_ms` |
//! | `jido.ai.tool.exception` | warn | the start fields, `duration_ms`, `error_type`, `message`, `retryable` |
//!
//! The work runs inside a span named `jido.ai.llm` or `jido.ai.tool` with
//! the start fields. `request_id` is `""` and `iteration` 0 when the call
//! has none.
//!
//! The directives of [`AiRuntime`](super::AiRuntime) report with `origin:
//! "directive"` and the operation `stream_text`, `generate_text`, `embed`
//! or `tool_execute`. An action that calls a model or runs a tool itself
//! reports through the same types with `origin: "action"`
//! ([`ORIGIN_ACTION`]), so one subscriber sees every call and tells them
//! apart by `origin` and `operation`:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use jido::ai::telemetry::{LlmTelemetry, ORIGIN_ACTION};
//! use jido::ai::signals::Correlation;
//! use jido::ai::{FinishReason, Usage};
//!
//! let call = LlmTelemetry::start(
//!     "summary_1", "local:tiny", ORIGIN_ACTION, "generate_text",
//!     &Correlation::new().request_id("req_7"),
//! );
//! // … the model call, inside `call.span()` …
//! call.stop(Some(&Usage { input_tokens: 12, output_tokens: 3, total_tokens: 15 }),
//!           Some(&FinishReason::Stop));
//! # }
//! ```

use std::borrow::Cow;

use tokio::time::Instant;

use super::client::{FinishReason, Usage};
use super::signals::{Correlation, SignalMetadata};
use crate::error::Error;

/// `origin` of calls made by the runtime's directives.
pub const ORIGIN_DIRECTIVE: &str = "directive";
/// `origin` of calls an action makes itself.
pub const ORIGIN_ACTION: &str = "action";

/// The origins and operations the crate reports with: kept as they are,
/// not copied, by every call's telemetry.
const KNOWN: [&str; 6] = [
    ORIGIN_DIRECTIVE,
    ORIGIN_ACTION,
    "stream_text",
    "generate_text",
    "embed",
    "tool_execute",
];

fn known(name: &str) -> Cow<'static, str> {
    match KNOWN.iter().find(|k| **k == name) {
        Some(k) => Cow::Borrowed(k),
        None => Cow::Owned(name.to_owned()),
    }
}

fn ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn finish_name(reason: &FinishReason) -> &str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(s) => s,
    }
}

/// The correlation ids a call's events carry (`request_id`: `""` when
/// none, `iteration`: 0 when none).
#[derive(Debug)]
enum Ids {
    /// Copied from the correlation given to `start`.
    Own { request_id: String, iteration: u64 },
    /// Read from the call's signal metadata (the runtime's calls: no id is
    /// copied).
    Shared(SignalMetadata),
}

impl Ids {
    fn own(correlation: &Correlation) -> Self {
        Ids::Own {
            request_id: correlation.request_id.clone().unwrap_or_default(),
            iteration: correlation.iteration.unwrap_or(0),
        }
    }

    fn request_id(&self) -> &str {
        match self {
            Ids::Own { request_id, .. } => request_id,
            Ids::Shared(metadata) => metadata.request_id().unwrap_or_default(),
        }
    }

    fn iteration(&self) -> u64 {
        match self {
            Ids::Own { iteration, .. } => *iteration,
            Ids::Shared(metadata) => metadata.iteration().unwrap_or(0),
        }
    }
}

/// One LLM call's telemetry: `jido.ai.llm.start` when made, then one
/// `stop` or `exception` (see the [module docs](self)).
#[derive(Debug)]
pub struct LlmTelemetry {
    call_id: String,
    ids: Ids,
    model: std::sync::Mutex<String>,
    origin: Cow<'static, str>,
    operation: Cow<'static, str>,
    started: Instant,
    span: tracing::Span,
}

impl LlmTelemetry {
    /// Emits `jido.ai.llm.start` and opens the span (not entered: run the
    /// call inside [`span`](LlmTelemetry::span)).
    pub fn start(
        call_id: &str,
        model: &str,
        origin: &str,
        operation: &str,
        correlation: &Correlation,
    ) -> Self {
        Self::begin(call_id, model, origin, operation, Ids::own(correlation))
    }

    /// As [`start`](Self::start), the ids read from the call's signal
    /// metadata.
    pub(crate) fn start_shared(
        call_id: &str,
        model: &str,
        origin: &str,
        operation: &str,
        metadata: &SignalMetadata,
    ) -> Self {
        Self::begin(
            call_id,
            model,
            origin,
            operation,
            Ids::Shared(metadata.clone()),
        )
    }

    fn begin(call_id: &str, model: &str, origin: &str, operation: &str, ids: Ids) -> Self {
        let (request_id, iteration) = (ids.request_id(), ids.iteration());
        tracing::debug!(
            name: "jido.ai.llm.start",
            target: "jido::ai",
            call_id,
            request_id,
            iteration,
            model,
            origin,
            operation,
            "jido.ai.llm.start"
        );
        let span = tracing::debug_span!(
            target: "jido::ai",
            "jido.ai.llm",
            call_id,
            request_id,
            iteration,
            model,
            origin,
            operation
        );
        LlmTelemetry {
            call_id: call_id.to_owned(),
            ids,
            model: std::sync::Mutex::new(model.to_owned()),
            origin: known(origin),
            operation: known(operation),
            started: Instant::now(),
            span,
        }
    }

    /// The call's span.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// The model once resolved (an alias becomes its model), for the end
    /// event.
    pub fn set_model(&self, model: &str) {
        model.clone_into(&mut self.model());
    }

    /// The call's id.
    pub(crate) fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The model as resolved so far.
    pub(crate) fn model_name(&self) -> String {
        self.model().clone()
    }

    fn model(&self) -> std::sync::MutexGuard<'_, String> {
        self.model
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Emits `jido.ai.llm.stop`.
    pub fn stop(&self, usage: Option<&Usage>, finish_reason: Option<&FinishReason>) {
        let usage = usage.copied().unwrap_or_default();
        tracing::debug!(
            name: "jido.ai.llm.stop",
            target: "jido::ai",
            call_id = self.call_id.as_str(),
            request_id = self.ids.request_id(),
            iteration = self.ids.iteration(),
            model = self.model().as_str(),
            origin = &*self.origin,
            operation = &*self.operation,
            duration_ms = ms(self.started),
            input_tokens = usage.input_tokens,
            output_tokens = usage.output_tokens,
            total_tokens = usage.total_tokens,
            finish_reason = finish_reason.map_or("", finish_name),
            "jido.ai.llm.stop"
        );
    }

    /// Emits `jido.ai.llm.exception`.
    pub fn exception(&self, error: &Error) {
        tracing::warn!(
            name: "jido.ai.llm.exception",
            target: "jido::ai",
            call_id = self.call_id.as_str(),
            request_id = self.ids.request_id(),
            iteration = self.ids.iteration(),
            model = self.model().as_str(),
            origin = &*self.origin,
            operation = &*self.operation,
            duration_ms = ms(self.started),
            error_type = error.kind().as_str(),
            message = error.message(),
            retryable = error.retryable(),
            "jido.ai.llm.exception"
        );
    }
}

/// One tool run's telemetry: `jido.ai.tool.start`, then one `stop` or
/// `exception` (see the [module docs](self)).
#[derive(Debug)]
pub struct ToolTelemetry {
    call_id: String,
    tool_name: String,
    ids: Ids,
    origin: Cow<'static, str>,
    operation: Cow<'static, str>,
    started: Instant,
    span: tracing::Span,
}

impl ToolTelemetry {
    /// Emits `jido.ai.tool.start` and opens the span.
    pub fn start(
        call_id: &str,
        tool_name: &str,
        origin: &str,
        operation: &str,
        correlation: &Correlation,
    ) -> Self {
        Self::begin(call_id, tool_name, origin, operation, Ids::own(correlation))
    }

    /// As [`start`](Self::start), the ids read from the call's signal
    /// metadata.
    pub(crate) fn start_shared(
        call_id: &str,
        tool_name: &str,
        origin: &str,
        operation: &str,
        metadata: &SignalMetadata,
    ) -> Self {
        Self::begin(
            call_id,
            tool_name,
            origin,
            operation,
            Ids::Shared(metadata.clone()),
        )
    }

    fn begin(call_id: &str, tool_name: &str, origin: &str, operation: &str, ids: Ids) -> Self {
        let (request_id, iteration) = (ids.request_id(), ids.iteration());
        tracing::debug!(
            name: "jido.ai.tool.start",
            target: "jido::ai",
            call_id,
            tool_name,
            request_id,
            iteration,
            origin,
            operation,
            "jido.ai.tool.start"
        );
        let span = tracing::debug_span!(
            target: "jido::ai",
            "jido.ai.tool",
            call_id,
            tool_name,
            request_id,
            iteration,
            origin,
            operation
        );
        ToolTelemetry {
            call_id: call_id.to_owned(),
            tool_name: tool_name.to_owned(),
            ids,
            origin: known(origin),
            operation: known(operation),
            started: Instant::now(),
            span,
        }
    }

    /// The run's span.
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// The run's id.
    pub(crate) fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The tool's name.
    pub(crate) fn tool_name(&self) -> &str {
        &self.tool_name
    }

    /// Emits `jido.ai.tool.stop`.
    pub fn stop(&self) {
        tracing::debug!(
            name: "jido.ai.tool.stop",
            target: "jido::ai",
            call_id = self.call_id.as_str(),
            tool_name = self.tool_name.as_str(),
            request_id = self.ids.request_id(),
            iteration = self.ids.iteration(),
            origin = &*self.origin,
            operation = &*self.operation,
            duration_ms = ms(self.started),
            "jido.ai.tool.stop"
        );
    }

    /// Emits `jido.ai.tool.exception`.
    pub fn exception(&self, error: &Error) {
        tracing::warn!(
            name: "jido.ai.tool.exception",
            target: "jido::ai",
            call_id = self.call_id.as_str(),
            tool_name = self.tool_name.as_str(),
            request_id = self.ids.request_id(),
            iteration = self.ids.iteration(),
            origin = &*self.origin,
            operation = &*self.operation,
            duration_ms = ms(self.started),
            error_type = error.kind().as_str(),
            message = error.message(),
            retryable = error.retryable(),
            "jido.ai.tool.exception"
        );
    }
}
