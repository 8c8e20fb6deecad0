//! A state value built from a Rust value on first read: [`LazyValue`].

use std::any::Any;
use std::fmt;
use std::sync::{Arc, OnceLock};

use super::value::StateValue;

/// A Rust value that a [`LazyValue`] turns into state on first read.
///
/// `to_state` must be a pure function of the value: every reader of the
/// lazy value sees what the first read built.
pub trait StateSource: Any + Send + Sync {
    /// The value as state (its JSON form).
    fn to_state(&self) -> StateValue;

    /// The entry `key` of the object [`to_state`](StateSource::to_state)
    /// builds, when the source holds it as it is (a path read then builds
    /// nothing); `None` when it does not (the value is built to answer).
    /// What it returns must be exactly that entry.
    fn get(&self, key: &str) -> Option<&StateValue> {
        let _ = key;
        None
    }
}

/// A node of the state whose JSON form is built from a Rust value the
/// first time anyone reads it, then kept.
///
/// A strategy that keeps a typed value as the truth (see
/// [`RequestCore`](crate::ai::request::RequestCore) with feature `ai`)
/// puts its state in the agent state this way: writing it costs one
/// allocation, and its JSON is built only when the state is read as JSON
/// (queries, checkpoints, serialisation, typed reads, comparisons).
/// Reads through [`StateValue`] see the built value (`as_object`, `get`,
/// indexing, `==`, serde); a write through a [`StateValue`] (`as_object_mut`,
/// a state op, a deep merge) first replaces the node with its built value,
/// so the node itself never changes. Clones share the node and its built
/// value.
///
/// ```
/// use jido::state::{LazyValue, StateSource, StateValue};
/// use serde_json::json;
///
/// struct Point(i64, i64);
/// impl StateSource for Point {
///     fn to_state(&self) -> StateValue {
///         StateValue::from(json!({"x": self.0, "y": self.1}))
///     }
/// }
///
/// let v = StateValue::Lazy(LazyValue::new(Point(1, 2)));
/// assert_eq!(v["x"], 1);
/// assert_eq!(v, json!({"x": 1, "y": 2}));
/// assert_eq!(serde_json::to_string(&v)?, r#"{"x":1,"y":2}"#);
///
/// let mut w = v.clone();
/// w.as_object_mut().unwrap().insert("z", 3);
/// assert!(w.is_object() && !matches!(w, StateValue::Lazy(_)));
/// assert_eq!(v, json!({"x": 1, "y": 2}));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone)]
pub struct LazyValue(Arc<Node<dyn StateSource>>);

struct Node<S: ?Sized> {
    built: OnceLock<StateValue>,
    source: S,
}

impl LazyValue {
    /// A node built from `source` on first read.
    pub fn new(source: impl StateSource) -> Self {
        LazyValue(Arc::new(Node {
            built: OnceLock::new(),
            source,
        }))
    }

    /// The value, built on the first call (never another lazy value).
    pub fn get(&self) -> &StateValue {
        self.0.built.get_or_init(|| {
            let mut value = self.0.source.to_state();
            while let StateValue::Lazy(inner) = value {
                value = inner.get().clone();
            }
            value
        })
    }

    /// The entry `key` of the value (an object): from the source when it
    /// holds it ([`StateSource::get`]), else from the built value.
    pub fn entry(&self, key: &str) -> Option<&StateValue> {
        if self.built().is_none()
            && let Some(found) = self.0.source.get(key)
        {
            return Some(found);
        }
        self.get().as_object()?.get(key)
    }

    /// The value if it was built already.
    pub fn built(&self) -> Option<&StateValue> {
        self.0.built.get()
    }

    /// The Rust value the node is built from, when it is a `T`.
    pub fn source<T: StateSource>(&self) -> Option<&T> {
        let source: &dyn Any = &self.0.source;
        source.downcast_ref::<T>()
    }

    /// The Rust value the node is built from, mutably, when it is a `T`,
    /// no one else holds the node (no clone of it, of a state holding it,
    /// or of a value read from it) and it was never built: no reader has
    /// seen it, so a change is as if the node had been made with it.
    #[cfg(feature = "ai")]
    pub(crate) fn source_mut<T: StateSource>(&mut self) -> Option<&mut T> {
        let node = Arc::get_mut(&mut self.0)?;
        if node.built.get().is_some() {
            return None;
        }
        let source: &mut dyn Any = &mut node.source;
        source.downcast_mut::<T>()
    }

    /// Whether both are the same node (no comparison of contents).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for LazyValue {
    /// The built value as compact JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.get(), f)
    }
}
