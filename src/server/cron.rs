//! Cron jobs of an agent (Cron / CronCancel directives).

use std::str::FromStr;

use chrono::{DateTime, Utc};
use croner::Cron;
use ractor::ActorRef;
use tokio::time::Instant;

use super::DirectiveResult;
use super::actor::{AbortOnDrop, AgentServerState};
use super::msg::{AgentMsg, Internal};
use crate::directive::ScheduledMessage;
use crate::error::{Error, Result};
use crate::signal::Signal;

/// Parses a cron expression (5 fields, or 6 with seconds first; `@daily`
/// style nicknames) and a time zone name (e.g. `"Etc/UTC"`,
/// `"Europe/Paris"`).
///
/// # Errors
///
/// A validation error "invalid cron expression" or "invalid time zone"
/// with the `cron` / `timezone` detail.
pub fn parse_cron(expr: &str, timezone: &str) -> Result<(Cron, chrono_tz::Tz)> {
    let cron = Cron::from_str(expr).map_err(|err| {
        Error::validation(format!("invalid cron expression: {err}"))
            .with_detail("cron", expr.to_owned())
    })?;
    let tz = chrono_tz::Tz::from_str(timezone).map_err(|_| {
        Error::validation(format!("invalid time zone: {timezone}"))
            .with_detail("timezone", timezone.to_owned())
    })?;
    Ok((cron, tz))
}

/// The first time strictly after `after` that matches `expr` in
/// `timezone`, in UTC.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use jido::server::cron::next_fire;
///
/// let after = Utc.with_ymd_and_hms(2026, 3, 1, 10, 15, 0).unwrap();
/// let next = next_fire("0 * * * *", "Etc/UTC", after).unwrap();
/// assert_eq!(next, Utc.with_ymd_and_hms(2026, 3, 1, 11, 0, 0).unwrap());
/// // 09:00 in Paris is 08:00 UTC in winter.
/// let next = next_fire("0 9 * * *", "Europe/Paris", after).unwrap();
/// assert_eq!(next, Utc.with_ymd_and_hms(2026, 3, 2, 8, 0, 0).unwrap());
/// ```
///
/// # Errors
///
/// The errors of [`parse_cron`], or a validation error "cron expression
/// never fires" when no time matches.
pub fn next_fire(expr: &str, timezone: &str, after: DateTime<Utc>) -> Result<DateTime<Utc>> {
    let (cron, tz) = parse_cron(expr, timezone)?;
    next_after(&cron, tz, after).ok_or_else(|| {
        Error::validation("cron expression never fires").with_detail("cron", expr.to_owned())
    })
}

fn next_after(cron: &Cron, tz: chrono_tz::Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let local = after.with_timezone(&tz);
    cron.find_next_occurrence(&local, false)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The runtime's wall clock: the wall time when it was first read, plus
/// tokio time since. Under tokio's paused clock (tests) it moves with
/// tokio time, so wall-clock due times (cron, durable schedules) and
/// tokio timers agree.
pub(crate) fn wall_now() -> DateTime<Utc> {
    static ANCHOR: std::sync::OnceLock<(DateTime<Utc>, Instant)> = std::sync::OnceLock::new();
    let (wall, at) = *ANCHOR.get_or_init(|| (Utc::now(), Instant::now()));
    let now = Instant::now();
    // Signed: a paused clock of another runtime may read before `at`.
    match now.checked_duration_since(at) {
        Some(d) => wall + chrono::Duration::from_std(d).unwrap_or_default(),
        None => wall - chrono::Duration::from_std(at - now).unwrap_or_default(),
    }
}

/// A running cron job.
pub(crate) struct CronJob {
    cron: Cron,
    expr: String,
    tz: chrono_tz::Tz,
    message: ScheduledMessage,
    generation: u64,
    /// The cron clock: wall time at creation plus tokio time since, so
    /// that paused-time tests see whole periods go by.
    anchor_wall: DateTime<Utc>,
    anchor: Instant,
    last_fire: DateTime<Utc>,
    _timer: Option<AbortOnDrop<std::result::Result<(), ractor::MessagingErr<AgentMsg>>>>,
}

impl CronJob {
    fn now(&self) -> DateTime<Utc> {
        let elapsed = chrono::Duration::from_std(self.anchor.elapsed()).unwrap_or_default();
        self.anchor_wall + elapsed
    }

    /// When it fires next.
    #[cfg_attr(not(feature = "persist"), allow(dead_code))]
    pub(crate) fn next_fire(&self) -> DateTime<Utc> {
        self.last_fire
    }

    /// `(expression, time zone, message)`.
    #[cfg_attr(not(feature = "persist"), allow(dead_code))]
    pub(crate) fn spec(&self) -> (&str, &str, &ScheduledMessage) {
        (&self.expr, self.tz.name(), &self.message)
    }
}

impl AgentServerState {
    pub(crate) fn add_cron(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        expr: String,
        message: ScheduledMessage,
        job_id: String,
        timezone: String,
    ) -> DirectiveResult {
        let (cron, tz) = match parse_cron(&expr, &timezone) {
            Ok(parsed) => parsed,
            Err(err) => {
                tracing::error!(target: "jido::agent_server", agent_id = %self.id, job_id, cron = %expr, error = %err, "cron refused");
                return DirectiveResult::Ok;
            }
        };
        self.next_id += 1;
        let now = wall_now();
        let mut job = CronJob {
            cron,
            expr,
            tz,
            message,
            generation: self.next_id,
            anchor_wall: now,
            anchor: Instant::now(),
            last_fire: now,
            _timer: None,
        };
        tracing::debug!(
            name: "jido.agent_server.cron.register",
            target: "jido::agent_server",
            agent_id = %self.id,
            job_id,
            cron_expression = %job.expr,
            timezone = %job.tz,
            "jido.agent_server.cron.register"
        );
        if arm(myself, &job_id, &mut job) {
            self.extras_mut().crons.insert(job_id.clone(), job);
            self.timers_changed();
            DirectiveResult::Async(Some(job_id))
        } else {
            tracing::error!(target: "jido::agent_server", agent_id = %self.id, job_id, "cron refused: expression never fires");
            DirectiveResult::Ok
        }
    }

    pub(crate) fn cancel_cron(&mut self, job_id: &str) -> DirectiveResult {
        if self
            .extras
            .as_mut()
            .and_then(|e| e.crons.remove(job_id))
            .is_some()
        {
            self.timers_changed();
            tracing::debug!(
                name: "jido.agent_server.cron.cancel",
                target: "jido::agent_server",
                agent_id = %self.id,
                job_id,
                "jido.agent_server.cron.cancel"
            );
        }
        DirectiveResult::Ok
    }

    pub(crate) fn on_cron_tick(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        job_id: &str,
        generation: u64,
    ) {
        let Some(job) = self.extras.as_mut().and_then(|e| e.crons.get_mut(job_id)) else {
            return;
        };
        if job.generation != generation {
            return;
        }
        let signal = cron_signal(&self.id, job_id, &job.message);
        if !arm(myself, job_id, job)
            && let Some(extras) = self.extras.as_mut()
        {
            extras.crons.remove(job_id);
        }
        self.enqueue_signal(myself, signal, None);
    }
}

/// The signal one tick of job `job_id` of agent `agent_id` delivers.
pub(crate) fn cron_signal(agent_id: &str, job_id: &str, message: &ScheduledMessage) -> Signal {
    let signal = message.to_cron_signal(job_id);
    match message {
        ScheduledMessage::Json(_) => signal
            .to_builder()
            .source(format!("/agent/{agent_id}"))
            .build()
            .unwrap_or(signal),
        _ => signal,
    }
}

/// Sets the job's timer for its next fire time.
fn arm(myself: &ActorRef<AgentMsg>, job_id: &str, job: &mut CronJob) -> bool {
    let now = job.now();
    let after = job.last_fire.max(now);
    let Some(next) = next_after(&job.cron, job.tz, after) else {
        return false;
    };
    job.last_fire = next;
    let delay = (next - now).to_std().unwrap_or_default();
    let id = job_id.to_owned();
    let generation = job.generation;
    job._timer = Some(AbortOnDrop(myself.send_after(delay, move || {
        AgentMsg::internal(Internal::CronTick(id, generation))
    })));
    true
}
