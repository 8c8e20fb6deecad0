//! Effects of tools: the policy that filters them and their JSON form.
//!
//! A tool (an action run by a `ToolExec` directive) may push effects. They
//! travel back to the agent inside the `ai.tool.result` signal, so they
//! must be data: the [`EffectPolicy`] keeps the allowed ones and
//! [`encode`] writes them as JSON; the strategy [`decode`]s them and
//! returns them from its `cmd`.
//!
//! | effect | JSON |
//! |---|---|
//! | `StateOp::SetState(m)` | `{"op": "set_state", "value": {…}}` |
//! | `StateOp::ReplaceState(m)` | `{"op": "replace_state", "value": {…}}` |
//! | `StateOp::DeleteKeys(k)` | `{"op": "delete_keys", "keys": […]}` |
//! | `StateOp::SetPath{path, value}` | `{"op": "set_path", "path": […], "value": …}` |
//! | `StateOp::DeletePath(p)` | `{"op": "delete_path", "path": […]}` |
//! | `StateOp::Append{path, value}` | `{"op": "append", "path": […], "value": …}` |
//! | `Directive::Emit` (no dispatch) | `{"op": "emit", "signal": <CloudEvents JSON>}` |
//! | `Directive::Schedule` | `{"op": "schedule", "delay_ms": n, "signal": …}` or `{…, "message": <json>}` |
//!
//! ```
//! use jido::ai::effects::{self, EffectKind, EffectPolicy};
//! use jido::effect::{Effect, StateOp};
//! use jido::Directive;
//! use serde_json::json;
//!
//! let pushed: Vec<Effect> = vec![
//!     StateOp::set_path(["last"], json!(6)).into(),
//!     Directive::stop().into(),
//! ];
//! let (kept, denied) = EffectPolicy::default().filter(pushed);
//! assert_eq!(kept, vec![json!({"op": "set_path", "path": ["last"], "value": 6})]);
//! assert_eq!(denied, vec!["stop".to_owned()]);
//! assert!(matches!(effects::decode(&kept[0])?, Effect::State(StateOp::SetPath { .. })));
//!
//! let (kept, _) = EffectPolicy::deny_all().allow(EffectKind::SetPath)
//!     .filter(vec![StateOp::set_path(["a"], json!(1)).into(), StateOp::delete_keys(["b"]).into()]);
//! assert_eq!(kept.len(), 1);
//! # Ok::<(), jido::Error>(())
//! ```

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::directive::{Directive, ScheduledMessage};
use crate::effect::{Effect, StateOp};
use crate::error::{Error, Result};
use crate::signal::Signal;
use crate::state::StateMap;

/// The effects a tool may have: the ones that can travel as data.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EffectKind {
    /// `StateOp::SetState`.
    SetState,
    /// `StateOp::ReplaceState`.
    ReplaceState,
    /// `StateOp::DeleteKeys`.
    DeleteKeys,
    /// `StateOp::SetPath`.
    SetPath,
    /// `StateOp::DeletePath`.
    DeletePath,
    /// `StateOp::Append`.
    Append,
    /// `Directive::Emit` without a dispatch (the agent's default dispatch,
    /// else back to the agent).
    Emit,
    /// `Directive::Schedule`.
    Schedule,
}

impl EffectKind {
    /// Every kind, in the table's order.
    pub const ALL: [EffectKind; 8] = [
        EffectKind::SetState,
        EffectKind::ReplaceState,
        EffectKind::DeleteKeys,
        EffectKind::SetPath,
        EffectKind::DeletePath,
        EffectKind::Append,
        EffectKind::Emit,
        EffectKind::Schedule,
    ];

    /// The `op` name of the JSON form, e.g. `"set_path"`.
    pub fn as_str(self) -> &'static str {
        match self {
            EffectKind::SetState => "set_state",
            EffectKind::ReplaceState => "replace_state",
            EffectKind::DeleteKeys => "delete_keys",
            EffectKind::SetPath => "set_path",
            EffectKind::DeletePath => "delete_path",
            EffectKind::Append => "append",
            EffectKind::Emit => "emit",
            EffectKind::Schedule => "schedule",
        }
    }

    /// The kind of `effect`, or `None` for an effect no policy allows
    /// (spawn, stop, cron, run-instruction, error, custom directives, an
    /// Emit with an explicit dispatch, …).
    pub fn of(effect: &Effect) -> Option<EffectKind> {
        Some(match effect {
            Effect::State(StateOp::SetState(_)) => EffectKind::SetState,
            Effect::State(StateOp::ReplaceState(_)) => EffectKind::ReplaceState,
            Effect::State(StateOp::DeleteKeys(_)) => EffectKind::DeleteKeys,
            Effect::State(StateOp::SetPath { .. }) => EffectKind::SetPath,
            Effect::State(StateOp::DeletePath(_)) => EffectKind::DeletePath,
            Effect::State(StateOp::Append { .. }) => EffectKind::Append,
            Effect::Directive(Directive::Emit { dispatch: None, .. }) => EffectKind::Emit,
            Effect::Directive(Directive::Schedule { .. }) => EffectKind::Schedule,
            _ => return None,
        })
    }
}

/// Which tool effects reach the agent (jido_ai's effect policy, allow-list
/// mode).
///
/// The default allows every [`EffectKind`]: the state operations, Emit
/// (without an explicit dispatch) and Schedule. Everything else is always
/// denied: Spawn, SpawnAgent, AdoptChild, Stop, StopChild, Cron,
/// CronCancel, RunInstruction, Error, EmitToParent, custom directives, and
/// an Emit with its own dispatch (a dispatch is not data). Denied effects
/// are dropped and logged (warning `jido.ai.tool.effect_denied`), never
/// executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectPolicy {
    allowed: Vec<EffectKind>,
    emit_prefixes: Option<Vec<String>>,
}

impl Default for EffectPolicy {
    fn default() -> Self {
        EffectPolicy {
            allowed: EffectKind::ALL.to_vec(),
            emit_prefixes: None,
        }
    }
}

impl EffectPolicy {
    /// Nothing allowed.
    pub fn deny_all() -> Self {
        EffectPolicy {
            allowed: Vec::new(),
            emit_prefixes: None,
        }
    }

    /// Also allows `kind`.
    #[must_use]
    pub fn allow(mut self, kind: EffectKind) -> Self {
        if !self.allowed.contains(&kind) {
            self.allowed.push(kind);
        }
        self
    }

    /// Denies `kind`.
    #[must_use]
    pub fn deny(mut self, kind: EffectKind) -> Self {
        self.allowed.retain(|k| *k != kind);
        self
    }

    /// Allows Emit (and scheduled signals) only for signal types starting
    /// with one of `prefixes` (e.g. `"app."`).
    #[must_use]
    pub fn emit_types<I, S>(mut self, prefixes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.emit_prefixes = Some(prefixes.into_iter().map(Into::into).collect());
        self
    }

    /// Whether `kind` is allowed.
    pub fn allows(&self, kind: EffectKind) -> bool {
        self.allowed.contains(&kind)
    }

    /// Whether `effect` passes the policy.
    pub fn permits(&self, effect: &Effect) -> bool {
        let Some(kind) = EffectKind::of(effect) else {
            return false;
        };
        if !self.allows(kind) {
            return false;
        }
        let signal_type = match effect {
            Effect::Directive(Directive::Emit { signal, .. }) => Some(signal.ty()),
            Effect::Directive(Directive::Schedule {
                message: ScheduledMessage::Signal(signal),
                ..
            }) => Some(signal.ty()),
            _ => None,
        };
        match (&self.emit_prefixes, signal_type) {
            (Some(prefixes), Some(ty)) => prefixes.iter().any(|p| ty.starts_with(p.as_str())),
            _ => true,
        }
    }

    /// Splits `effects` into the allowed ones, [encoded](encode), and the
    /// names of the denied ones (an [`EffectKind`] name, or the directive's
    /// [`kind`](Directive::kind)).
    pub fn filter(&self, effects: Vec<Effect>) -> (Vec<Value>, Vec<String>) {
        let mut kept = Vec::with_capacity(effects.len());
        let mut denied = Vec::new();
        for effect in effects {
            if self.permits(&effect)
                && let Some(json) = encode(&effect)
            {
                kept.push(json);
                continue;
            }
            denied.push(effect_name(&effect).to_owned());
        }
        (kept, denied)
    }
}

fn effect_name(effect: &Effect) -> &'static str {
    match (EffectKind::of(effect), effect) {
        (Some(kind), _) => kind.as_str(),
        (None, Effect::Directive(d)) => d.kind(),
        (None, Effect::State(_)) => "state_op",
    }
}

/// The JSON form of `effect` (see the [module docs](self)), or `None` for
/// an effect that has none.
pub fn encode(effect: &Effect) -> Option<Value> {
    Some(match effect {
        Effect::State(StateOp::SetState(m)) => json!({"op": "set_state", "value": m.to_json()}),
        Effect::State(StateOp::ReplaceState(m)) => {
            json!({"op": "replace_state", "value": m.to_json()})
        }
        Effect::State(StateOp::DeleteKeys(keys)) => json!({"op": "delete_keys", "keys": keys}),
        Effect::State(StateOp::SetPath { path, value }) => {
            json!({"op": "set_path", "path": path, "value": value.to_json()})
        }
        Effect::State(StateOp::DeletePath(path)) => json!({"op": "delete_path", "path": path}),
        Effect::State(StateOp::Append { path, value }) => {
            json!({"op": "append", "path": path, "value": value.to_json()})
        }
        Effect::Directive(Directive::Emit {
            signal,
            dispatch: None,
        }) => json!({"op": "emit", "signal": signal.to_json_value()}),
        Effect::Directive(Directive::Schedule { delay, message }) => {
            let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            match message {
                ScheduledMessage::Signal(s) => {
                    json!({"op": "schedule", "delay_ms": delay_ms, "signal": s.to_json_value()})
                }
                ScheduledMessage::Json(v) => {
                    json!({"op": "schedule", "delay_ms": delay_ms, "message": v})
                }
            }
        }
        _ => return None,
    })
}

/// Reads an effect written by [`encode`].
///
/// # Errors
///
/// A validation error "invalid tool effect: REASON" (details `effect`).
pub fn decode(value: &Value) -> Result<Effect> {
    let bad = |reason: &str| {
        Error::validation(format!("invalid tool effect: {reason}"))
            .with_detail("effect", value.clone())
    };
    let map = value.as_object().ok_or_else(|| bad("not an object"))?;
    let op = map
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("missing op"))?;
    let object = |key: &str| -> Result<Map<String, Value>> {
        match map.get(key) {
            Some(Value::Object(m)) => Ok(m.clone()),
            _ => Err(bad(&format!("{key} must be an object"))),
        }
    };
    let strings = |key: &str| -> Result<Vec<String>> {
        map.get(key)
            .and_then(Value::as_array)
            .and_then(|list| {
                list.iter()
                    .map(|v| v.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or_else(|| bad(&format!("{key} must be a list of strings")))
    };
    let value_of = || map.get("value").cloned().unwrap_or(Value::Null);
    let signal = |v: &Value| Signal::from_value(v.clone()).map_err(|e| bad(e.message()));
    Ok(match op {
        "set_state" => StateOp::SetState(StateMap::from(object("value")?)).into(),
        "replace_state" => StateOp::ReplaceState(StateMap::from(object("value")?)).into(),
        "delete_keys" => StateOp::DeleteKeys(strings("keys")?).into(),
        "set_path" => StateOp::SetPath {
            path: strings("path")?,
            value: value_of().into(),
        }
        .into(),
        "delete_path" => StateOp::DeletePath(strings("path")?).into(),
        "append" => StateOp::Append {
            path: strings("path")?,
            value: value_of().into(),
        }
        .into(),
        "emit" => Directive::emit(signal(
            map.get("signal").ok_or_else(|| bad("missing signal"))?,
        )?)
        .into(),
        "schedule" => {
            let delay = map
                .get("delay_ms")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad("delay_ms must be a non-negative integer"))?;
            let message = match (map.get("signal"), map.get("message")) {
                (Some(s), _) => ScheduledMessage::Signal(signal(s)?),
                (None, Some(m)) => ScheduledMessage::Json(m.clone()),
                (None, None) => return Err(bad("missing signal or message")),
            };
            Directive::schedule(Duration::from_millis(delay), message).into()
        }
        other => return Err(bad(&format!("unknown op {other}"))),
    })
}
