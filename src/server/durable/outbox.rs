//! The outbox: the directives a batch decided, in their data form, stored
//! with the batch's checkpoint and queued again on restore (at least once).
//!
//! Durable: Emit without an explicit dispatch (the default dispatch, or
//! back to the agent itself), EmitToParent, StopChild, Schedule (with its
//! wall-clock due time), Cron, CronCancel, Stop, a SpawnAgent whose child
//! is a [`ChildKind`] (kind, placement, tag, options, meta and restart
//! policy as data, when its options have a data form:
//! [`ChildOptions::to_json`]), and a custom directive
//! whose [`CustomDirective::durable`] gives a data form that its
//! executor's [`DirectiveExec::decode`](crate::server::DirectiveExec::decode)
//! reads back. The others (an Emit with a dispatch, Error, Spawn, a
//! SpawnAgent of an agent value, AdoptChild, RunInstruction, other custom
//! directives) run but are volatile: one warning per type says so.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use crate::directive::{
    ChildKind, ChildOptions, CustomDirective, Directive, Restart, ScheduledMessage, StopReason,
};
use crate::server::options::Executors;
use crate::signal::Signal;

/// Whether `d` has a data form (without building it).
pub(super) fn is_durable(d: &Directive) -> bool {
    match d {
        Directive::Emit { dispatch, .. } => dispatch.is_none(),
        Directive::EmitToParent { .. }
        | Directive::StopChild { .. }
        | Directive::Schedule { .. }
        | Directive::Cron { .. }
        | Directive::CronCancel { .. }
        | Directive::Stop { .. } => true,
        Directive::Custom(c) => c.durable().is_some(),
        Directive::SpawnAgent { .. } => spawn_form(d).is_some(),
        _ => false,
    }
}

/// The data form of a SpawnAgent whose child is a [`ChildKind`]: `{"kind":
/// "spawn_agent", "child": {kind?, placement}, "tag", "options", "meta",
/// "restart"}`. `None` for an agent value, or options with code in them.
fn spawn_form(d: &Directive) -> Option<Value> {
    let Directive::SpawnAgent {
        agent,
        tag,
        options,
        meta,
        restart,
    } = d
    else {
        return None;
    };
    let spec = agent.spec()?;
    let options = options.to_json().ok()?;
    Some(json!({
        "kind": "spawn_agent",
        "child": serde_json::to_value(spec).ok()?,
        "tag": tag,
        "options": options,
        "meta": meta,
        "restart": serde_json::to_value(restart).ok()?,
    }))
}

/// The kinds already warned about as volatile.
static WARNED: LazyLock<Mutex<HashSet<&'static str>>> = LazyLock::new(Default::default);

fn warn_volatile(kind: &'static str) {
    let first = WARNED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(kind);
    if first {
        tracing::warn!(
            target: "jido::persist",
            directive_type = kind,
            "directive {kind} has no data form: it is not part of the durable outbox (lost if the process dies before it runs)"
        );
    }
}

pub(super) fn message_form(message: &ScheduledMessage) -> Value {
    match message {
        ScheduledMessage::Signal(s) => json!({"signal": s}),
        ScheduledMessage::Json(v) => json!({"json": v}),
    }
}

pub(super) fn message_from(v: &Value) -> Option<ScheduledMessage> {
    if let Some(s) = v.get("signal") {
        return serde_json::from_value(s.clone())
            .ok()
            .map(ScheduledMessage::Signal);
    }
    v.get("json").cloned().map(ScheduledMessage::Json)
}

/// The data form of one queued directive, `None` (with a warning, once per
/// type) when it has none. A Schedule is stored with its due time
/// (`now_ms` + its delay) and the signal it will deliver.
pub(super) fn encode(agent_id: &str, input: &Signal, d: &Directive, now_ms: i64) -> Option<Value> {
    let mut form = match d {
        Directive::Emit {
            signal,
            dispatch: None,
        } => json!({"kind": "emit", "signal": signal}),
        Directive::EmitToParent { signal, parent_id } => {
            json!({"kind": "emit_to_parent", "signal": signal, "parent_id": parent_id})
        }
        Directive::StopChild { tag, reason } => {
            json!({"kind": "stop_child", "tag": tag, "reason": reason})
        }
        Directive::Schedule { delay, message } => {
            let signal = crate::server::directives::scheduled_signal_of(agent_id, message.clone());
            let delay_ms = i64::try_from(delay.as_millis()).unwrap_or(i64::MAX);
            json!({"kind": "schedule", "due_ms": now_ms.saturating_add(delay_ms), "signal": signal})
        }
        Directive::Cron {
            cron,
            message,
            job_id,
            timezone,
        } => json!({
            "kind": "cron",
            "cron": cron,
            "message": message_form(message),
            "job_id": job_id,
            "timezone": timezone,
        }),
        Directive::CronCancel { job_id } => json!({"kind": "cron_cancel", "job_id": job_id}),
        Directive::Stop { reason } => json!({"kind": "stop", "reason": reason}),
        Directive::SpawnAgent { .. } => match spawn_form(d) {
            Some(form) => form,
            None => {
                warn_volatile(d.kind());
                return None;
            }
        },
        Directive::Custom(c) => match c.durable() {
            Some(data) => json!({"kind": "custom", "type": c.type_name(), "data": data}),
            None => {
                warn_volatile(c.type_name());
                return None;
            }
        },
        other => {
            warn_volatile(other.kind());
            return None;
        }
    };
    if let Value::Object(map) = &mut form {
        map.insert(
            "input".into(),
            json!({"id": input.id(), "type": input.ty(), "source": input.source()}),
        );
    }
    Some(form)
}

/// The directive (and the signal it was decided for) of a stored outbox
/// entry; `None`, with a warning, for one that cannot be read back (a
/// custom directive whose executor is not registered or does not decode).
pub(super) fn decode(
    form: &Value,
    executors: &Executors,
    now_ms: i64,
) -> Option<(Arc<Signal>, Directive)> {
    let directive = decode_directive(form, executors, now_ms);
    let Some(directive) = directive else {
        tracing::warn!(
            target: "jido::persist",
            entry = %crate::error::sanitize(form),
            "outbox entry dropped: it cannot be read back"
        );
        return None;
    };
    let input = form.get("input");
    let field = |k: &str| input.and_then(|i| i.get(k)).and_then(Value::as_str);
    let ty = field("type").unwrap_or("jido.persist.outbox");
    let mut builder = Signal::builder(ty);
    if let Some(id) = field("id") {
        builder = builder.id(id);
    }
    if let Some(source) = field("source") {
        builder = builder.source(source);
    }
    let input = builder
        .build()
        .unwrap_or_else(|_| Signal::new("jido.persist.outbox", Value::Null));
    Some((Arc::new(input), directive))
}

fn decode_directive(form: &Value, executors: &Executors, now_ms: i64) -> Option<Directive> {
    let s = |k: &str| form.get(k).and_then(Value::as_str).map(str::to_owned);
    let signal = || -> Option<Signal> { serde_json::from_value(form.get("signal")?.clone()).ok() };
    let reason = || s("reason").map_or(StopReason::Normal, StopReason::from);
    Some(match form.get("kind")?.as_str()? {
        "emit" => Directive::emit(signal()?),
        "emit_to_parent" => Directive::EmitToParent {
            signal: signal()?,
            parent_id: s("parent_id")?,
        },
        "stop_child" => Directive::StopChild {
            tag: s("tag")?,
            reason: reason(),
        },
        "schedule" => {
            let due = form.get("due_ms")?.as_i64()?;
            let delay = u64::try_from(due.saturating_sub(now_ms)).unwrap_or(0);
            Directive::Schedule {
                delay: Duration::from_millis(delay),
                message: ScheduledMessage::Signal(signal()?),
            }
        }
        "cron" => Directive::Cron {
            cron: s("cron")?,
            message: message_from(form.get("message")?)?,
            job_id: s("job_id")?,
            timezone: s("timezone")?,
        },
        "cron_cancel" => Directive::CronCancel {
            job_id: s("job_id")?,
        },
        "stop" => Directive::Stop { reason: reason() },
        "spawn_agent" => {
            let spec: ChildKind = serde_json::from_value(form.get("child")?.clone()).ok()?;
            let options = ChildOptions::from_json(form.get("options")?.as_object()?).ok()?;
            let restart: Restart = form
                .get("restart")
                .map_or(Ok(Restart::default()), |r| {
                    serde_json::from_value(r.clone())
                })
                .ok()?;
            let meta = form
                .get("meta")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            Directive::spawn_agent(spec, s("tag")?)
                .options(options)
                .meta(meta)
                .restart(restart)
                .into()
        }
        "custom" => {
            let ty = s("type")?;
            let data = form.get("data")?;
            let exec = executors
                .values()
                .find(|e| e.directive_type() == ty.as_str())?;
            match exec.decode(data)? {
                Ok(d) => Directive::Custom(d as Arc<dyn CustomDirective>),
                Err(error) => {
                    tracing::warn!(target: "jido::persist", directive_type = %ty, error = %error, "custom directive does not decode");
                    return None;
                }
            }
        }
        _ => return None,
    })
}
