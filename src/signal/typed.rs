//! Typed signals: a fixed `type` string and a typed data struct.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::router::validate_type;
use super::{DEFAULT_SOURCE, Signal, SignalBuilder, decode_data};
use crate::error::{Error, Result};

/// Declares a signal type: a fixed [`TYPE`](TypedSignal::TYPE) and a typed
/// [`Data`](TypedSignal::Data), checked when a signal is made and when one
/// is decoded.
///
/// Implement it on a marker type (or on the data struct itself, with
/// `type Data = Self`). [`validate`](TypedSignal::validate) holds extra
/// rules on the data.
///
/// ```
/// use jido::signal::{Signal, TypedSignal};
/// use jido::{Error, ErrorKind};
/// use serde::{Deserialize, Serialize};
/// use serde_json::json;
///
/// #[derive(Debug, PartialEq, Serialize, Deserialize)]
/// struct Order { id: String, total: u32 }
///
/// struct OrderPlaced;
/// impl TypedSignal for OrderPlaced {
///     const TYPE: &'static str = "order.placed";
///     const SOURCE: &'static str = "/shop";
///     type Data = Order;
///     fn validate(data: &Order) -> jido::Result<()> {
///         if data.total == 0 {
///             return Err(Error::validation("total must be positive"));
///         }
///         Ok(())
///     }
/// }
///
/// let signal = OrderPlaced::new(Order { id: "o-1".into(), total: 30 })?;
/// assert_eq!(signal.ty(), "order.placed");
/// assert_eq!(signal.source(), "/shop");
/// assert_eq!(signal.data(), Some(&json!({"id": "o-1", "total": 30})));
/// assert_eq!(OrderPlaced::decode(&signal)?, Order { id: "o-1".into(), total: 30 });
///
/// let err = OrderPlaced::new(Order { id: "o-2".into(), total: 0 }).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Validation);
///
/// let other = Signal::new("order.cancelled", json!({"id": "o-1", "total": 30}));
/// assert_eq!(OrderPlaced::decode(&other).unwrap_err().message(),
///            "signal type mismatch: expected order.placed, got order.cancelled");
/// # Ok::<(), jido::Error>(())
/// ```
pub trait TypedSignal {
    /// The signal `type`. Must be routable: dot-separated segments of
    /// `[a-zA-Z0-9_-]+`.
    const TYPE: &'static str;
    /// The default `source` of signals made by [`new`](TypedSignal::new).
    const SOURCE: &'static str = DEFAULT_SOURCE;
    /// The `dataschema` of signals made by [`new`](TypedSignal::new), if
    /// any.
    const DATASCHEMA: Option<&'static str> = None;

    /// The payload.
    type Data: Serialize + DeserializeOwned;

    /// Extra rules on the payload, run by [`new`](TypedSignal::new) and
    /// [`decode`](TypedSignal::decode).
    ///
    /// # Errors
    ///
    /// Whatever error describes the broken rule (usually a validation
    /// error).
    fn validate(data: &Self::Data) -> Result<()> {
        let _ = data;
        Ok(())
    }

    /// A builder preset with [`TYPE`](TypedSignal::TYPE),
    /// [`SOURCE`](TypedSignal::SOURCE), [`DATASCHEMA`](TypedSignal::DATASCHEMA)
    /// and the serialised, validated data, for setting further attributes.
    ///
    /// # Errors
    ///
    /// A configuration error when `TYPE` is not a routable type, the
    /// error of [`validate`](TypedSignal::validate), or a validation error
    /// when the data does not serialise.
    fn builder(data: &Self::Data) -> Result<SignalBuilder> {
        validate_type(Self::TYPE).map_err(|e| {
            Error::configuration(format!("invalid signal type {:?}", Self::TYPE))
                .with_detail("signal_type", Self::TYPE)
                .with_detail("reason", e.message().to_owned())
        })?;
        Self::validate(data)?;
        let value = serde_json::to_value(data).map_err(|e| {
            Error::validation(format!("invalid data for signal {}: {e}", Self::TYPE))
                .with_detail("signal_type", Self::TYPE)
        })?;
        let mut builder = Signal::builder(Self::TYPE).source(Self::SOURCE).data(value);
        if let Some(schema) = Self::DATASCHEMA {
            builder = builder.dataschema(schema);
        }
        Ok(builder)
    }

    /// A signal of this type carrying `data`.
    ///
    /// # Errors
    ///
    /// As [`builder`](TypedSignal::builder) and [`SignalBuilder::build`].
    #[allow(clippy::new_ret_no_self)] // a signal of this type, not the marker
    fn new(data: Self::Data) -> Result<Signal> {
        Self::builder(&data)?.build()
    }

    /// Reads the payload of `signal`, checking its type and the rules of
    /// [`validate`](TypedSignal::validate).
    ///
    /// # Errors
    ///
    /// A validation error `signal type mismatch: expected X, got Y`, a
    /// decoding error with the failing `path`, or the error of
    /// `validate`.
    fn decode(signal: &Signal) -> Result<Self::Data> {
        if !signal.is_type(Self::TYPE) {
            return Err(Error::validation(format!(
                "signal type mismatch: expected {}, got {}",
                Self::TYPE,
                signal.ty()
            ))
            .with_detail("expected", Self::TYPE)
            .with_detail("signal_type", signal.ty()));
        }
        let data: Self::Data = decode_data(Self::TYPE, signal.data())?;
        Self::validate(&data)?;
        Ok(data)
    }
}
