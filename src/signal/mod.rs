//! Signals: CloudEvents 1.0.2 envelopes, the router and dispatch.
//!
//! (Stub: the full envelope, parsing, router and dispatch land with the
//! signals work. The API below is kept.)

pub mod dispatch;

use serde_json::{Map, Value};

/// A CloudEvents 1.0.2 event.
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    id: String,
    source: String,
    ty: String,
    data: Option<Value>,
    extensions: Map<String, Value>,
}

impl Signal {
    /// A new signal of type `ty` carrying `data` (`Value::Null` for none).
    pub fn new(ty: impl Into<String>, data: impl Into<Value>) -> Self {
        let data = data.into();
        Self {
            id: uuid::Uuid::now_v7().to_string(),
            source: "jido".into(),
            ty: ty.into(),
            data: (!data.is_null()).then_some(data),
            extensions: Map::new(),
        }
    }

    /// The event type, e.g. `"order.placed"`.
    pub fn ty(&self) -> &str {
        &self.ty
    }

    /// The event id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The event source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The payload, if any.
    pub fn data(&self) -> Option<&Value> {
        self.data.as_ref()
    }
}
