//! What every reasoning machine shares: the events it is told, the steps
//! it asks for, its phases and terminations, and [`Machine::handle`], the
//! request lifecycle common to all of them.
//!
//! A reasoning machine is pure: a function of (state, [`Event`]) to (new
//! state, [`Step`]s), testable without an agent. [`Machine::handle`] does
//! the part every strategy shares, in one place:
//!
//! | from | event | to | steps |
//! |---|---|---|---|
//! | idle, completed, error | `Start` | the strategy's first phase | the strategy's first `CallLlm` |
//! | any busy phase | `Start` | unchanged | `Reject` (`busy`, "agent is busy (status: PHASE)") |
//! | busy | `LlmDelta` of the awaited call | unchanged | none (accepted: the strategy forwards it) |
//! | busy | `LlmResult` error of the awaited call | error | `Failed` (the error, termination `error`) |
//! | busy | `LlmResult` ok with tool calls, tool rounds left | unchanged | `ExecTool` per call, in call order |
//! | busy | `LlmResult` ok, blank text, finish reason neither stop nor tool calls | error | `Failed` (`incomplete_response`) |
//! | busy | `LlmResult` ok | the strategy decides | the strategy's steps |
//! | busy | `ToolResult`, the last of the round | unchanged | `CallLlm` (the same call with the results appended in call order) |
//! | busy | `Cancel` (no id, or the running request's) | error | `CancelCalls`, `Failed` (`cancelled`) |
//! | any | anything else (stale call ids, unknown tool calls, other requests) | unchanged | none (not accepted) |
//!
//! Token usage is summed over every call of a request, whatever happens to
//! the call's answer.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::ai::client::{FinishReason, Message, ToolCall, Usage};
use crate::ai::envelope::{ErrorEnvelope, ResultEnvelope};
use crate::ai::react::machine::Turn;
use crate::error::Error;

/// Where a reasoning machine is. Each strategy uses some of these (its
/// module says which); `idle`, `completed` and `error` are common to all.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// No request yet.
    #[default]
    Idle,
    /// Chain of Thought / Draft, TRM: waiting for reasoning.
    Reasoning,
    /// Algorithm of Thoughts: waiting for the in-context search.
    Exploring,
    /// Tree / Graph of Thoughts: waiting for new thoughts.
    Generating,
    /// Tree of Thoughts: waiting for the thoughts' scores.
    Evaluating,
    /// Graph of Thoughts: waiting for the connections between thoughts.
    Connecting,
    /// Graph of Thoughts: waiting for the aggregation.
    Aggregating,
    /// TRM: waiting for the critique.
    Supervising,
    /// TRM: waiting for the improved answer.
    Improving,
    /// Adaptive delegating to ReAct: waiting for the model.
    AwaitingLlm,
    /// Adaptive delegating to ReAct: waiting for tools.
    AwaitingTool,
    /// The last request completed.
    Completed,
    /// The last request failed (or was cancelled).
    Error,
}

impl Phase {
    /// The phase's name (`"idle"`, `"reasoning"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Reasoning => "reasoning",
            Phase::Exploring => "exploring",
            Phase::Generating => "generating",
            Phase::Evaluating => "evaluating",
            Phase::Connecting => "connecting",
            Phase::Aggregating => "aggregating",
            Phase::Supervising => "supervising",
            Phase::Improving => "improving",
            Phase::AwaitingLlm => "awaiting_llm",
            Phase::AwaitingTool => "awaiting_tool",
            Phase::Completed => "completed",
            Phase::Error => "error",
        }
    }

    /// Whether a request is running (neither idle nor finished).
    pub fn is_busy(self) -> bool {
        !matches!(self, Phase::Idle | Phase::Completed | Phase::Error)
    }
}

/// Why a request ended (Jido's names).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// The strategy reached its answer.
    Success,
    /// Algorithm of Thoughts: the search says it solved the problem but
    /// gave no `answer:` line.
    MissingExplicitAnswer,
    /// Algorithm of Thoughts: no solution.
    NoSolution,
    /// Tree of Thoughts: a thought scored at least the early-success
    /// threshold.
    Threshold,
    /// Tree / Graph of Thoughts: the depth limit.
    MaxDepth,
    /// Tree / Graph of Thoughts: the node limit.
    MaxNodes,
    /// Tree of Thoughts: the best score stopped improving.
    Converged,
    /// TRM: the supervision step limit.
    MaxSteps,
    /// TRM: the confidence reached the ACT threshold.
    ActThreshold,
    /// TRM: the scores stopped changing.
    ConvergenceDetected,
    /// Adaptive delegating to ReAct: the model answered.
    FinalAnswer,
    /// Adaptive delegating to ReAct: the iteration limit.
    MaxIterations,
    /// A model call failed or its answer could not be used.
    Error,
    /// The request was cancelled.
    Cancelled,
}

impl Termination {
    /// The name (`"success"`, `"max_depth"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Termination::Success => "success",
            Termination::MissingExplicitAnswer => "missing_explicit_answer",
            Termination::NoSolution => "no_solution",
            Termination::Threshold => "threshold",
            Termination::MaxDepth => "max_depth",
            Termination::MaxNodes => "max_nodes",
            Termination::Converged => "converged",
            Termination::MaxSteps => "max_steps",
            Termination::ActThreshold => "act_threshold",
            Termination::ConvergenceDetected => "convergence_detected",
            Termination::FinalAnswer => "final_answer",
            Termination::MaxIterations => "max_iterations",
            Termination::Error => "error",
            Termination::Cancelled => "cancelled",
        }
    }
}

/// What a machine is told.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A request: its id and the question.
    Start {
        /// The request id.
        request_id: String,
        /// The question.
        query: String,
    },
    /// A piece of a streamed answer arrived (`ai.llm.delta`).
    LlmDelta {
        /// Its LLM call id.
        call_id: String,
    },
    /// The model answered (`ai.llm.response`).
    LlmResult {
        /// The LLM call id.
        call_id: String,
        /// The turn, or the call's error.
        result: Result<Turn, ErrorEnvelope>,
    },
    /// A tool call ended (`ai.tool.result`).
    ToolResult {
        /// The tool-call id.
        call_id: String,
        /// Its result.
        result: ResultEnvelope,
    },
    /// Cancel the running request (`None`: whichever runs).
    Cancel {
        /// The request to cancel.
        request_id: Option<String>,
        /// Why.
        reason: String,
    },
}

/// One model call a machine asks for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LlmCall {
    /// The new LLM call id (`call_<request id>_<n>`).
    pub call_id: String,
    /// The request.
    pub request_id: String,
    /// The phase the call serves.
    pub phase: Phase,
    /// The call's system prompt.
    pub system_prompt: Option<String>,
    /// The messages (without the system prompt).
    pub messages: Vec<Message>,
    /// The request's model calls so far, this one included (1-based).
    pub iteration: u64,
}

/// What a machine asks for (the strategy lifts these into directives).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Call the model.
    CallLlm(LlmCall),
    /// Run a tool call the model made.
    ExecTool {
        /// The model's call.
        call: ToolCall,
        /// The request.
        request_id: String,
        /// The model call that asked for it.
        iteration: u64,
    },
    /// Reject a request (the machine is unchanged).
    Reject {
        /// The rejected request.
        request_id: String,
        /// `busy`.
        reason: String,
        /// For the caller.
        message: String,
    },
    /// Cancel the running model and tool calls of a request.
    CancelCalls {
        /// The request.
        request_id: String,
        /// Why.
        reason: String,
    },
    /// The request completed.
    Completed {
        /// The request.
        request_id: String,
        /// The answer.
        answer: Value,
        /// Why it ended.
        termination: Termination,
    },
    /// The request failed.
    Failed {
        /// The request.
        request_id: String,
        /// The error envelope.
        error: Value,
        /// Why it ended.
        termination: Termination,
    },
}

/// The outcome of one event.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Transition {
    /// Whether the event was taken (false: stale or out of place, nothing
    /// changed).
    pub accepted: bool,
    /// What to do.
    pub steps: Vec<Step>,
}

impl Transition {
    /// An event that changed nothing.
    pub fn ignored() -> Self {
        Transition::default()
    }

    /// An event taken, with its steps.
    pub fn taken(steps: Vec<Step>) -> Self {
        Transition {
            accepted: true,
            steps,
        }
    }
}

/// A tool call of the current round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingTool {
    /// The model's call.
    pub call: ToolCall,
    /// Its result once it ended.
    pub result: Option<ResultEnvelope>,
}

/// The bookkeeping of the running (or last) request, common to every
/// reasoning machine: phase, ids, the awaited call, tool rounds, usage
/// and the outcome.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Run {
    /// Where the machine is.
    pub phase: Phase,
    /// The running (or last) request.
    pub request_id: Option<String>,
    /// Its question.
    pub query: String,
    /// The LLM call whose answer is awaited (none while tools run).
    pub llm_call_id: Option<String>,
    /// LLM calls made so far, by every request (makes call ids unique).
    pub call_seq: u64,
    /// LLM calls of this request.
    pub llm_calls: u64,
    /// The awaited call, kept to call again after a tool round.
    pub current: Option<LlmCall>,
    /// The tool calls of the current round, in call order.
    pub tools: Vec<PendingTool>,
    /// Tool rounds of the current call.
    pub tool_rounds: u32,
    /// Tokens of the request so far, summed over its calls.
    pub usage: Usage,
    /// The answer (completed) or the error envelope (error).
    pub result: Value,
    /// Why the last request ended.
    pub termination: Option<Termination>,
}

impl Run {
    /// Starts a request: clears the last one's outcome and usage.
    pub fn begin(&mut self, request_id: String, query: String) {
        self.request_id = Some(request_id);
        self.query = query;
        self.llm_call_id = None;
        self.llm_calls = 0;
        self.current = None;
        self.tools.clear();
        self.tool_rounds = 0;
        self.usage = Usage::default();
        self.result = Value::Null;
        self.termination = None;
    }

    /// The running request's id ("" before any).
    pub fn request(&self) -> String {
        self.request_id.clone().unwrap_or_default()
    }

    /// A new model call in `phase`.
    pub fn call(
        &mut self,
        phase: Phase,
        system_prompt: Option<String>,
        messages: Vec<Message>,
    ) -> Step {
        self.call_seq += 1;
        self.llm_calls += 1;
        let request_id = self.request();
        let call = LlmCall {
            call_id: crate::ai::react::machine::call_id(&request_id, self.call_seq),
            request_id,
            phase,
            system_prompt,
            messages,
            iteration: self.llm_calls,
        };
        self.phase = phase;
        self.llm_call_id = Some(call.call_id.clone());
        self.tool_rounds = 0;
        self.current = Some(call.clone());
        Step::CallLlm(call)
    }

    /// The awaited call again, with `extra` messages appended and a new id
    /// (a repair turn, or the turn after a tool round).
    pub fn call_again(&mut self, extra: Vec<Message>) -> Step {
        let Some(mut call) = self.current.clone() else {
            return self.fail(
                json!({"type": "internal", "message": "no call to repeat",
                       "details": {}, "retryable": false}),
                Termination::Error,
            );
        };
        let rounds = self.tool_rounds;
        call.messages.extend(extra);
        let step = self.call(call.phase, call.system_prompt, call.messages);
        self.tool_rounds = rounds;
        step
    }

    /// Completes the request.
    pub fn complete(&mut self, answer: Value, termination: Termination) -> Step {
        self.phase = Phase::Completed;
        self.termination = Some(termination);
        self.result = answer.clone();
        self.llm_call_id = None;
        Step::Completed {
            request_id: self.request(),
            answer,
            termination,
        }
    }

    /// Fails the request with an error envelope.
    pub fn fail(&mut self, error: Value, termination: Termination) -> Step {
        self.phase = Phase::Error;
        self.termination = Some(termination);
        self.result = error.clone();
        self.llm_call_id = None;
        Step::Failed {
            request_id: self.request(),
            error,
            termination,
        }
    }

    /// Whether `call_id` is the awaited call of a running request.
    pub fn awaits(&self, call_id: &str) -> bool {
        self.phase.is_busy() && self.llm_call_id.as_deref() == Some(call_id)
    }
}

/// An error envelope `{type, message, details, retryable: false}`.
pub fn error_value(kind: &str, message: impl Into<String>, details: Value) -> Value {
    json!({
        "type": kind,
        "message": message.into(),
        "details": if details.is_object() { details } else { json!({}) },
        "retryable": false,
    })
}

/// A reasoning strategy's pure state machine.
///
/// Implement [`begin`](Machine::begin) and [`on_answer`](Machine::on_answer);
/// [`handle`](Machine::handle) does the rest (busy rejection, stale calls,
/// errors, usage, tool rounds, cancellation).
pub trait Machine:
    Clone + Default + std::fmt::Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// What the machine is configured with.
    type Config: Clone + std::fmt::Debug + Send + Sync + 'static;

    /// The strategy's short name (`"cot"`, `"tot"`, …): its signals are
    /// `ai.<name>.query` and `ai.<name>.cancel`.
    fn name(config: &Self::Config) -> &'static str;

    /// The configuration [`Reasoning::new`](super::Reasoning::new) uses.
    fn default_config() -> Self::Config;

    /// The request bookkeeping.
    fn run(&self) -> &Run;

    /// The request bookkeeping, mutably.
    fn run_mut(&mut self) -> &mut Run;

    /// A request was accepted ([`Run::begin`] already ran): reset the
    /// strategy's own fields and return its first steps.
    fn begin(&mut self, config: &Self::Config) -> Vec<Step>;

    /// The awaited call answered with `text` (after its tool rounds).
    fn on_answer(&mut self, config: &Self::Config, text: String) -> Vec<Step>;

    /// Most tool round trips per model call (0: tool calls are ignored and
    /// the text is taken).
    fn max_tool_rounds(_config: &Self::Config) -> u32 {
        0
    }

    /// Whether the strategy's tools are offered on this machine's calls
    /// (default: when it allows tool rounds).
    fn wants_tools(&self, config: &Self::Config) -> bool {
        Self::max_tool_rounds(config) > 0
    }

    /// The strategy's own state for snapshots and request records
    /// (steps, thoughts, scores, …).
    fn details(&self) -> Map<String, Value>;

    /// Applies `event`: the new state is `self`, the steps are returned.
    fn handle(&mut self, config: &Self::Config, event: Event) -> Transition {
        handle(self, config, event)
    }
}

/// The common lifecycle behind [`Machine::handle`] (see the module docs).
pub fn handle<M: Machine>(m: &mut M, config: &M::Config, event: Event) -> Transition {
    match event {
        Event::Start { request_id, query } => {
            let phase = m.run().phase;
            if phase.is_busy() {
                return Transition::taken(vec![busy(request_id, phase)]);
            }
            m.run_mut().begin(request_id, query);
            Transition::taken(m.begin(config))
        }
        Event::LlmDelta { call_id } => Transition {
            accepted: m.run().awaits(&call_id),
            steps: Vec::new(),
        },
        Event::LlmResult { call_id, result } => {
            if !m.run().awaits(&call_id) {
                return Transition::ignored();
            }
            match result {
                Err(error) => {
                    Transition::taken(vec![m.run_mut().fail(error.to_value(), Termination::Error)])
                }
                Ok(turn) => Transition::taken(on_turn(m, config, turn)),
            }
        }
        Event::ToolResult { call_id, result } => on_tool_result(m, &call_id, result),
        Event::Cancel { request_id, reason } => {
            let run = m.run_mut();
            let matches = match &request_id {
                None => true,
                Some(id) => run.request_id.as_deref() == Some(id.as_str()),
            };
            if !run.phase.is_busy() || !matches {
                return Transition::ignored();
            }
            let error = Error::cancelled("request cancelled").with_detail("reason", reason.clone());
            run.tools.clear();
            let active = run.request();
            let failed = run.fail(error.to_envelope(), Termination::Cancelled);
            Transition::taken(vec![
                Step::CancelCalls {
                    request_id: active,
                    reason,
                },
                failed,
            ])
        }
    }
}

/// The `busy` rejection of a request arriving while `phase` runs.
pub fn busy(request_id: String, phase: Phase) -> Step {
    Step::Reject {
        request_id,
        reason: "busy".into(),
        message: format!("agent is busy (status: {})", phase.as_str()),
    }
}

fn on_turn<M: Machine>(m: &mut M, config: &M::Config, turn: Turn) -> Vec<Step> {
    let run = m.run_mut();
    if let Some(usage) = turn.usage {
        run.usage += usage;
    }
    if !turn.tool_calls.is_empty() && run.tool_rounds < M::max_tool_rounds(config) {
        run.tool_rounds += 1;
        run.llm_call_id = None;
        if let Some(current) = run.current.as_mut() {
            current.messages.push(Message::assistant_tool_calls(
                turn.text,
                turn.tool_calls.clone(),
            ));
        }
        let request_id = run.request();
        let iteration = run.llm_calls;
        run.tools = turn
            .tool_calls
            .iter()
            .map(|call| PendingTool {
                call: call.clone(),
                result: None,
            })
            .collect();
        return turn
            .tool_calls
            .into_iter()
            .map(|call| Step::ExecTool {
                call,
                request_id: request_id.clone(),
                iteration,
            })
            .collect();
    }
    let truncated = !matches!(
        turn.finish_reason,
        None | Some(FinishReason::Stop) | Some(FinishReason::ToolCalls)
    );
    if turn.text.trim().is_empty() && truncated {
        let reason = match &turn.finish_reason {
            Some(FinishReason::Length) => "length".to_owned(),
            Some(FinishReason::ContentFilter) => "content_filter".to_owned(),
            Some(FinishReason::Other(s)) => s.clone(),
            _ => String::new(),
        };
        let error = error_value(
            "incomplete_response",
            format!("incomplete response (finish reason: {reason})"),
            json!({"finish_reason": reason}),
        );
        return vec![run.fail(error, Termination::Error)];
    }
    m.on_answer(config, turn.text)
}

fn on_tool_result<M: Machine>(m: &mut M, call_id: &str, result: ResultEnvelope) -> Transition {
    let run = m.run_mut();
    if !run.phase.is_busy() {
        return Transition::ignored();
    }
    let Some(entry) = run
        .tools
        .iter_mut()
        .find(|t| t.call.id == call_id && t.result.is_none())
    else {
        return Transition::ignored();
    };
    entry.result = Some(result);
    if run.tools.iter().any(|t| t.result.is_none()) {
        return Transition::taken(Vec::new());
    }
    let results: Vec<Message> = std::mem::take(&mut run.tools)
        .into_iter()
        .filter_map(|t| {
            t.result
                .map(|r| Message::tool_result(t.call.id, t.call.name, r.tool_content()))
        })
        .collect();
    Transition::taken(vec![run.call_again(results)])
}

/// Whether a step ends the request.
pub fn is_terminal(step: &Step) -> bool {
    matches!(step, Step::Completed { .. } | Step::Failed { .. })
}
