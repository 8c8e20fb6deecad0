//! ReAct on the shared strategy glue ([`driver`](super::driver)): how its
//! query reads, its machine's events and steps, its model calls and its
//! snapshot.

use serde::Deserialize;
use serde_json::Value;

use super::ReAct;
use super::driver::{self, Driven, Finish, Start, lift_step};
use super::machine::{Event, Machine, Status, Step, Termination};
use super::output::OutputSchema;
use crate::agent::AgentData;
use crate::ai::client::Usage;
use crate::ai::request::RequestState;
use crate::directive::Directive;
use crate::state::StateMap;
use crate::strategy::{Snapshot, SnapshotStatus};

/// An `ai.react.query`'s data.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Query {
    query: String,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    output_schema: Option<String>,
}

impl RequestState for Machine {
    fn read(from: &StateMap) -> Option<Self> {
        Machine::read(from)
    }

    fn write(&self, into: &mut StateMap) {
        Machine::write(self, into);
    }

    fn write_since(&self, into: &mut StateMap, prev: Option<&Self>) {
        Machine::write_since(self, into, prev);
    }

    fn active_request(&self) -> Option<&str> {
        if self.status.is_busy() {
            self.request_id.as_deref()
        } else {
            None
        }
    }
}

impl Driven for ReAct {
    type State = Machine;
    driver::shared_vocabulary!(Event, Step);

    fn start(params: &Value) -> Result<Start<Event>, serde_json::Error> {
        let q = Query::deserialize(params)?;
        let output = q.output_schema;
        Ok(Start::new(q.request_id, q.query, |request_id, query| {
            Event::Start {
                request_id,
                query,
                output,
            }
        }))
    }

    fn awaits(m: &Machine, call_id: &str) -> bool {
        m.status == Status::AwaitingLlm && m.llm_call_id.as_deref() == Some(call_id)
    }

    fn usage(m: &Machine) -> Usage {
        m.usage
    }

    fn handle(&self, m: &mut Machine, event: Event) -> (bool, Vec<Step>) {
        let t = m.handle(&self.machine, event);
        (t.accepted, t.steps)
    }

    fn lift(&self, agent: &mut AgentData, step: Step, out: &mut Vec<Directive>) -> Option<Finish> {
        let s = &self.settings;
        lift_step!(s, step, out, Step {
            Step::CallLlm {
                call_id,
                request_id,
                iteration,
                output,
            } => {
                let format = output
                    .as_deref()
                    .and_then(|n| self.machine.outputs.get(n))
                    .map(OutputSchema::format);
                let m = driver::machine(self, agent);
                let context = if self.examples.is_empty() {
                    m.conversation.messages()
                } else {
                    let mut all = self.examples.clone();
                    all.append(m.conversation.messages());
                    all
                };
                s.llm_call(
                    call_id,
                    context,
                    self.system_prompt.clone(),
                    s.specs.clone(),
                    (
                        s.call_correlation(request_id, iteration),
                        serde_json::Map::new(),
                    ),
                    format,
                )
            }
        })
    }
}

/// ReAct's snapshot of machine `m` (see `Strategy::snapshot` on
/// [`ReAct`]).
pub(super) fn snapshot(m: &Machine) -> Snapshot {
    let status = match m.status {
        Status::Idle => SnapshotStatus::Idle,
        Status::AwaitingLlm | Status::AwaitingTool => SnapshotStatus::Running,
        Status::Completed => SnapshotStatus::Success,
        Status::Error => SnapshotStatus::Failure,
    };
    let mut snap = super::driver::snapshot(
        status,
        &m.result,
        m.status.as_str(),
        m.request_id.as_deref(),
        m.termination.map(Termination::as_str),
        &m.usage,
    );
    let d = &mut snap.details;
    d.shift_insert(1, "iteration".into(), m.iteration.into());
    d.insert("pending_tool_calls".into(), m.tool_calls.len().into());
    d.insert("conversation_length".into(), m.conversation.len().into());
    snap
}
