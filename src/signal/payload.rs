//! A signal's data: JSON, or a typed Rust value whose JSON form is built on
//! first read (see "Typed payloads" on [`Signal`](super::Signal)).

use std::any::Any;
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use serde_json::Value;

/// The data of a signal that has some.
#[derive(Clone)]
pub(crate) enum Data {
    /// JSON (parsed, built with [`Signal::new`](super::Signal::new) or the
    /// builder's `data`).
    Json(Value),
    /// A typed value, shared by the signal's clones.
    Typed(Arc<Typed>),
}

/// A typed payload and its JSON form, built once when first asked for.
/// The value is the last field, unsized behind the `Arc`: a payload is one
/// allocation, the value in it.
pub(crate) struct Typed<V: ?Sized = dyn Any + Send + Sync> {
    json: OnceLock<Value>,
    to_json: fn(&(dyn Any + Send + Sync)) -> Value,
    value: V,
}

/// The JSON of a `T` behind `dyn Any`: what serde writes (`null` when it
/// cannot serialise, which the payload types of this crate never do).
fn json_of<T: Serialize + 'static>(value: &(dyn Any + Send + Sync)) -> Value {
    value
        .downcast_ref::<T>()
        .and_then(|v| serde_json::to_value(v).ok())
        .unwrap_or(Value::Null)
}

impl Data {
    /// A typed payload.
    pub(crate) fn typed<T: Serialize + Send + Sync + 'static>(value: T) -> Self {
        let typed: Arc<Typed> = Arc::new(Typed {
            json: OnceLock::new(),
            to_json: json_of::<T>,
            value,
        });
        Data::Typed(typed)
    }

    /// The JSON form (built and cached on first call for a typed payload);
    /// `None` when a typed payload serialises to `null`.
    pub(crate) fn json(&self) -> Option<&Value> {
        let value = match self {
            Data::Json(v) => v,
            Data::Typed(t) => t.json.get_or_init(|| (t.to_json)(&t.value)),
        };
        (!value.is_null()).then_some(value)
    }

    /// The JSON form, by value (moved out when nothing else shares it).
    pub(crate) fn into_json(self) -> Option<Value> {
        match self {
            Data::Json(v) => Some(v),
            Data::Typed(mut t) => {
                let value = match Arc::get_mut(&mut t) {
                    Some(only) => match only.json.take() {
                        Some(v) => v,
                        None => (only.to_json)(&only.value),
                    },
                    None => Data::Typed(t).json().cloned().unwrap_or(Value::Null),
                };
                (!value.is_null()).then_some(value)
            }
        }
    }

    /// The typed value when it is a `T`.
    pub(crate) fn payload<T: 'static>(&self) -> Option<&T> {
        match self {
            Data::Json(_) => None,
            Data::Typed(t) => t.value.downcast_ref::<T>(),
        }
    }

    /// Whether this is a typed payload.
    pub(crate) fn is_typed(&self) -> bool {
        matches!(self, Data::Typed(_))
    }
}

/// Two payloads are equal when their JSON forms are.
impl PartialEq for Data {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Data::Typed(a), Data::Typed(b)) if Arc::ptr_eq(a, b) => true,
            _ => self.json() == other.json(),
        }
    }
}

impl std::fmt::Debug for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.json() {
            Some(v) => v.fmt(f),
            None => f.write_str("null"),
        }
    }
}
