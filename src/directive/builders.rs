//! Builders of the directives with several optional settings: [`Cron`]
//! and [`RunInstruction`] (the child agent's [`SpawnAgent`](super::SpawnAgent)
//! lives beside its options).

use serde_json::{Map, Value};

use super::{DEFAULT_RESULT_ACTION, DEFAULT_TIMEZONE, Directive, ScheduledMessage};
use crate::instruction::Instruction;

/// A [`Directive::Cron`] being built: returned by [`Directive::cron`],
/// turned into a [`Directive`] with `.into()`.
///
/// Defaults: a new UUIDv7 job id, the time zone `"Etc/UTC"`.
///
/// ```
/// use jido::directive::Directive;
/// use serde_json::json;
///
/// let d: Directive = Directive::cron("*/5 * * * *", json!({"poll": true})).into();
/// let Directive::Cron { job_id, timezone, .. } = &d else { unreachable!() };
/// assert_eq!(timezone, "Etc/UTC");
/// assert_eq!(uuid::Uuid::parse_str(job_id).unwrap().get_version_num(), 7);
/// ```
#[must_use = "a Cron does nothing until it is turned into a Directive"]
#[derive(Debug, Clone)]
pub struct Cron {
    cron: String,
    message: ScheduledMessage,
    job_id: Option<String>,
    timezone: String,
}

impl Cron {
    /// A job delivering `message` on the cron expression `cron`.
    pub fn new(cron: impl Into<String>, message: impl Into<ScheduledMessage>) -> Self {
        Self {
            cron: cron.into(),
            message: message.into(),
            job_id: None,
            timezone: DEFAULT_TIMEZONE.to_owned(),
        }
    }

    /// The job's id, for [`Directive::cron_cancel`] (default a new
    /// UUIDv7).
    pub fn job_id(mut self, job_id: impl Into<String>) -> Self {
        self.job_id = Some(job_id.into());
        self
    }

    /// The time zone of the expression, an IANA name (default
    /// `"Etc/UTC"`).
    pub fn timezone(mut self, timezone: impl Into<String>) -> Self {
        self.timezone = timezone.into();
        self
    }
}

impl From<Cron> for Directive {
    fn from(c: Cron) -> Self {
        Directive::Cron {
            cron: c.cron,
            message: c.message,
            job_id: c.job_id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
            timezone: c.timezone,
        }
    }
}

/// A [`Directive::RunInstruction`] being built: returned by
/// [`Directive::run_instruction`], turned into a [`Directive`] with
/// `.into()`.
///
/// Defaults: the result comes back as the strategy command
/// `"instruction_result"`, with empty meta.
///
/// ```
/// # use jido::prelude::*;
/// # #[derive(Clone, serde::Deserialize, schemars::JsonSchema)] struct P {}
/// # struct Ping;
/// # impl Action for Ping {
/// #     type Params = P; type Output = ();
/// #     const NAME: &'static str = "ping";
/// #     async fn run(&self, _: P, _: &Context) -> jido::Result<()> { Ok(()) }
/// # }
/// use serde_json::json;
///
/// let d: Directive = Directive::run_instruction(Instruction::new(Ping))
///     .result_action("ping_result")
///     .meta(json!({"step": 2}).as_object().unwrap().clone())
///     .into();
/// let Directive::RunInstruction { result_action, meta, .. } = &d else { unreachable!() };
/// assert_eq!(result_action, "ping_result");
/// assert_eq!(meta["step"], 2);
/// ```
#[must_use = "a RunInstruction does nothing until it is turned into a Directive"]
#[derive(Debug, Clone)]
pub struct RunInstruction {
    instruction: Instruction,
    result_action: String,
    meta: Map<String, Value>,
}

impl RunInstruction {
    /// Runs `instruction`, with the defaults.
    pub fn new(instruction: Instruction) -> Self {
        Self {
            instruction,
            result_action: DEFAULT_RESULT_ACTION.to_owned(),
            meta: Map::new(),
        }
    }

    /// The strategy command the result comes back as (default
    /// `"instruction_result"`).
    pub fn result_action(mut self, name: impl Into<String>) -> Self {
        self.result_action = name.into();
        self
    }

    /// Free metadata passed back with the result.
    pub fn meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta = meta;
        self
    }
}

impl From<RunInstruction> for Directive {
    fn from(r: RunInstruction) -> Self {
        Directive::RunInstruction {
            instruction: Box::new(r.instruction),
            result_action: r.result_action,
            meta: r.meta,
        }
    }
}
