//! The request records every reasoning strategy keeps in agent state, and
//! the request signals it emits (ReAct's contract):
//!
//! * on start: top-level `status: "running"`, `last_request_id`,
//!   `last_query`, `last_answer: ""`, `error: null`;
//!   `__strategy__.requests.ID = {query, status: "pending"}` (the latest
//!   `history` requests); `ai.request.started {request_id, query}`;
//! * on completion: `status: "completed"`, `last_answer`; the record gets
//!   `status: "completed"`, `result`, `termination_reason`, `usage`;
//!   `ai.request.completed {request_id, result, termination_reason,
//!   usage}`;
//! * on failure: `status: "failed"`, `error`; the record gets `status:
//!   "failed"`, `error`, `termination_reason`, `usage`;
//!   `ai.request.failed {request_id, error, termination_reason, usage}`;
//! * a rejected request (`ai.request.error`) is recorded as failed with
//!   `{type: "rejected", message, details: {reason}}` unless its id is
//!   known.

use serde_json::{Value, json};

use crate::agent::{AgentData, STRATEGY_KEY};
use crate::ai::client::Usage;
use crate::directive::Directive;
use crate::signal::Signal;
use crate::signal::dispatch::DispatchConfig;
use crate::state::{StateMap, StateValue};

/// `ai.request.started`.
pub const REQUEST_STARTED: &str = "ai.request.started";
/// `ai.request.completed`.
pub const REQUEST_COMPLETED: &str = "ai.request.completed";
/// `ai.request.failed`.
pub const REQUEST_FAILED: &str = "ai.request.failed";

/// Where the records go and where the request signals are sent.
#[derive(Clone, Debug)]
pub(crate) struct Records<'a> {
    pub(crate) events: Option<&'a DispatchConfig>,
    pub(crate) history: usize,
}

impl Records<'_> {
    pub(crate) fn emit(&self, ty: &str, data: Value, out: &mut Vec<Directive>) {
        if let Some(events) = self.events {
            out.push(Directive::emit_to(Signal::new(ty, data), events.clone()));
        }
    }

    fn trim(&self, requests: &mut StateMap) {
        while requests.len() > self.history.max(1) {
            let Some(oldest) = requests.keys().next().map(str::to_owned) else {
                break;
            };
            requests.remove(&oldest);
        }
    }

    pub(crate) fn start(
        &self,
        agent: &mut AgentData,
        request_id: &str,
        query: &str,
        out: &mut Vec<Directive>,
    ) {
        let state = agent.state_mut();
        state.insert("status", "running");
        state.insert("last_request_id", request_id);
        state.insert("last_query", query);
        state.insert("last_answer", "");
        state.insert("error", StateValue::Null);
        let mut entry = StateMap::with_capacity(6);
        entry.insert("query", query);
        entry.insert("status", "pending");
        let requests = agent.strategy_state_mut().object_mut("requests");
        requests.remove(request_id);
        requests.insert(request_id, entry);
        self.trim(requests);
        self.emit(
            REQUEST_STARTED,
            json!({"request_id": request_id, "query": query}),
            out,
        );
    }

    pub(crate) fn end(
        &self,
        agent: &mut AgentData,
        request_id: &str,
        outcome: Result<Value, Value>,
        termination: &str,
        usage: &Usage,
        out: &mut Vec<Directive>,
    ) {
        let usage = json!(usage);
        let state = agent.state_mut();
        {
            let entry = state
                .object_mut(STRATEGY_KEY)
                .object_mut("requests")
                .object_mut(request_id);
            entry.insert("termination_reason", termination);
            entry.insert("usage", StateValue::from(&usage));
            match &outcome {
                Ok(answer) => {
                    entry.insert("status", "completed");
                    entry.insert("result", StateValue::from(answer));
                }
                Err(error) => {
                    entry.insert("status", "failed");
                    entry.insert("error", StateValue::from(error));
                }
            }
        }
        match outcome {
            Ok(answer) => {
                state.insert("status", "completed");
                state.insert("last_answer", StateValue::from(&answer));
                self.emit(
                    REQUEST_COMPLETED,
                    json!({"request_id": request_id, "result": answer,
                           "termination_reason": termination, "usage": usage}),
                    out,
                );
            }
            Err(error) => {
                state.insert("status", "failed");
                state.insert("error", StateValue::from(&error));
                self.emit(
                    REQUEST_FAILED,
                    json!({"request_id": request_id, "error": error,
                           "termination_reason": termination, "usage": usage}),
                    out,
                );
            }
        }
    }

    pub(crate) fn rejection(&self, agent: &mut AgentData, params: &Value) {
        let Some(request_id) = params.get("request_id").and_then(Value::as_str) else {
            return;
        };
        let known = agent
            .strategy_state()
            .and_then(|s| s.get("requests"))
            .and_then(|r| r.get(request_id))
            .is_some();
        if known {
            return;
        }
        let error = json!({
            "type": "rejected",
            "message": params.get("message").cloned().unwrap_or(Value::Null),
            "details": {"reason": params.get("reason").cloned().unwrap_or(Value::Null)},
            "retryable": false,
        });
        let mut entry = StateMap::with_capacity(3);
        entry.insert("status", "failed");
        entry.insert("error", StateValue::from(&error));
        let requests = agent.strategy_state_mut().object_mut("requests");
        requests.insert(request_id, entry);
        self.trim(requests);
    }
}
