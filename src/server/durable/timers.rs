//! Durable timers: Schedules and cron jobs stored with wall-clock due
//! times and re-armed on restore; the instance thaws a hibernated agent
//! when its next timer is due.
//!
//! Stored forms (`Checkpoint::timers`):
//!
//! * `{"kind": "schedule", "due_ms": <unix ms>, "signal": <signal>}`: on
//!   restore it fires at its due time, at once (once) if that is past;
//! * `{"kind": "cron", "job_id", "cron", "timezone", "message", "next_ms"}`:
//!   on restore the job is registered again and fires at its next
//!   occurrence after now. Missed runs are not replayed (Jido's rule),
//!   except the one a thaw by the instance's timer table woke the agent
//!   for (`next_ms` at or before the thaw's due time), which fires once.

use std::time::Duration;

use ractor::ActorRef;
use serde_json::{Value, json};

use super::DurableMsg;
use super::outbox::{message_form, message_from};
use crate::server::actor::{AbortOnDrop, AgentServerState};
use crate::server::cron::{cron_signal, wall_now};
use crate::server::inflight::Work;
use crate::server::msg::{AgentMsg, Internal};
use crate::signal::Signal;

/// The runtime's wall clock in Unix milliseconds (see `cron::wall_now`).
pub(crate) fn wall_now_ms() -> i64 {
    wall_now().timestamp_millis()
}

/// A Schedule of a durable agent, armed.
pub(crate) struct Scheduled {
    due_ms: i64,
    signal: Signal,
    _timer: AbortOnDrop<std::result::Result<(), ractor::MessagingErr<AgentMsg>>>,
}

impl AgentServerState {
    /// A Schedule: a durable agent keeps it with its due time (the
    /// signal is handed back to arm it plainly otherwise).
    pub(crate) fn schedule_durable(&mut self, delay: Duration, signal: Signal) -> Option<Signal> {
        if self.durable.is_none() {
            return Some(signal);
        }
        let delay_ms = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
        self.arm_schedule(wall_now_ms().saturating_add(delay_ms), signal);
        None
    }

    fn arm_schedule(&mut self, due_ms: i64, signal: Signal) {
        let myself = self.myself.clone();
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        d.next_schedule += 1;
        let n = d.next_schedule;
        let delay = u64::try_from(due_ms.saturating_sub(wall_now_ms())).unwrap_or(0);
        let timer = myself.send_after(Duration::from_millis(delay), move || {
            AgentMsg::internal(Internal::Durable(Box::new(DurableMsg::Timer(n))))
        });
        d.schedules.insert(
            n,
            Scheduled {
                due_ms,
                signal,
                _timer: AbortOnDrop(timer),
            },
        );
        d.stale = true;
    }

    /// Schedule `n` is due: it leaves the table and its signal arrives
    /// like any other.
    pub(super) fn on_timer(&mut self, myself: &ActorRef<AgentMsg>, n: u64) {
        let Some(d) = self.durable.as_deref_mut() else {
            return;
        };
        let Some(scheduled) = d.schedules.remove(&n) else {
            return;
        };
        d.stale = true;
        // A schedule is no duplicate of an earlier signal with its id (a
        // strategy may schedule one signal value again and again).
        d.recent.remove(scheduled.signal.id());
        self.accept_signal(myself, scheduled.signal.into(), None);
    }

    /// How many schedules a durable agent keeps.
    pub(crate) fn durable_schedules(&self) -> usize {
        self.durable.as_deref().map_or(0, |d| d.schedules.len())
    }

    /// A cron job was added or cancelled.
    pub(crate) fn timers_changed(&mut self) {
        if let Some(d) = self.durable.as_deref_mut() {
            d.stale = true;
        }
    }

    /// Whether a schedule or cron job is live.
    pub(super) fn has_timers(&self) -> bool {
        self.durable
            .as_deref()
            .is_some_and(|d| !d.schedules.is_empty())
            || self.extras().is_some_and(|e| !e.crons.is_empty())
    }

    /// The stored forms of the live timers.
    pub(super) fn timer_forms(&self) -> Vec<Value> {
        let mut forms = Vec::new();
        if let Some(d) = self.durable.as_deref() {
            forms.extend(
                d.schedules
                    .values()
                    .map(|s| json!({"kind": "schedule", "due_ms": s.due_ms, "signal": s.signal})),
            );
        }
        if let Some(extras) = self.extras() {
            let mut jobs: Vec<_> = extras.crons.iter().collect();
            jobs.sort_by(|a, b| a.0.cmp(b.0));
            forms.extend(jobs.into_iter().map(|(job_id, job)| {
                let (cron, timezone, message) = job.spec();
                json!({
                    "kind": "cron",
                    "job_id": job_id,
                    "cron": cron,
                    "timezone": timezone,
                    "message": message_form(message),
                    "next_ms": job.next_fire().timestamp_millis(),
                })
            }));
        }
        forms
    }

    /// When the next live timer is due (Unix ms).
    pub(super) fn next_due_ms(&self) -> Option<i64> {
        let schedules = self
            .durable
            .as_deref()
            .into_iter()
            .flat_map(|d| d.schedules.values().map(|s| s.due_ms));
        let crons = self
            .extras()
            .into_iter()
            .flat_map(|e| e.crons.values().map(|j| j.next_fire().timestamp_millis()));
        schedules.chain(crons).min()
    }

    /// Re-arms the stored timers (on restore). `thaw_due`: the due time
    /// the instance's timer table thawed the agent for.
    pub(super) fn restore_timers(&mut self, forms: &[Value], thaw_due: Option<i64>) {
        let myself = self.myself.clone();
        for form in forms {
            let s = |k: &str| form.get(k).and_then(Value::as_str).map(str::to_owned);
            match form.get("kind").and_then(Value::as_str) {
                Some("schedule") => {
                    let due = form.get("due_ms").and_then(Value::as_i64);
                    let signal = form
                        .get("signal")
                        .and_then(|v| serde_json::from_value::<Signal>(v.clone()).ok());
                    if let (Some(due), Some(signal)) = (due, signal) {
                        self.arm_schedule(due, signal);
                        continue;
                    }
                }
                Some("cron") => {
                    let message = form.get("message").and_then(message_from);
                    if let (Some(expr), Some(job_id), Some(tz), Some(message)) =
                        (s("cron"), s("job_id"), s("timezone"), message)
                    {
                        let next = form.get("next_ms").and_then(Value::as_i64);
                        let woke_for = thaw_due.is_some_and(|t| next.is_some_and(|n| n <= t));
                        if woke_for {
                            let signal = cron_signal(&self.id, &job_id, &message);
                            self.pending.push_back(Work {
                                signal: signal.into(),
                                reply: None,
                            });
                        }
                        let _ = self.add_cron(&myself, expr, message, job_id, tz);
                        continue;
                    }
                }
                _ => {}
            }
            tracing::warn!(
                target: "jido::persist",
                agent_id = %self.id,
                timer = %crate::error::sanitize(form),
                "stored timer dropped: it cannot be read back"
            );
        }
        // Armed as stored: nothing to write for them.
        if let Some(d) = self.durable.as_deref_mut() {
            d.stale = false;
        }
    }
}
