//! [`ToolSpecs`]: the tool descriptions of a model call, shared.

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ToolSpec;

/// The tools offered to a model: a shared, immutable list of
/// [`ToolSpec`]s. Cloning it (a strategy putting its tools into every
/// model call, the runtime copying a directive into its request) copies a
/// pointer, not the specs; an empty list allocates nothing.
///
/// It reads like a slice (`len`, `iter`, indexing), converts from a
/// `Vec<ToolSpec>` (`.into()`), compares with one, and serialises as a
/// JSON array.
///
/// ```
/// use jido::ai::{ToolSpec, ToolSpecs};
/// use serde_json::json;
///
/// let spec = ToolSpec {
///     name: "add".into(),
///     description: "Adds.".into(),
///     parameters: json!({"type": "object"}),
///     strict: false,
/// };
/// let specs = ToolSpecs::from(vec![spec.clone()]);
/// let copy = specs.clone(); // no spec copied
/// assert_eq!(copy.len(), 1);
/// assert_eq!(copy[0].name, "add");
/// assert_eq!(copy, vec![spec]);
/// assert!(ToolSpecs::default().is_empty());
/// ```
#[derive(Clone, Default)]
pub struct ToolSpecs(Option<Arc<[ToolSpec]>>);

impl ToolSpecs {
    /// No tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// The specs as a slice.
    pub fn as_slice(&self) -> &[ToolSpec] {
        self.0.as_deref().unwrap_or(&[])
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// The specs, copied into a `Vec`.
    pub fn to_vec(&self) -> Vec<ToolSpec> {
        self.as_slice().to_vec()
    }
}

impl std::ops::Deref for ToolSpecs {
    type Target = [ToolSpec];
    fn deref(&self) -> &[ToolSpec] {
        self.as_slice()
    }
}

impl From<Vec<ToolSpec>> for ToolSpecs {
    fn from(specs: Vec<ToolSpec>) -> Self {
        Self((!specs.is_empty()).then(|| Arc::from(specs)))
    }
}

impl FromIterator<ToolSpec> for ToolSpecs {
    fn from_iter<I: IntoIterator<Item = ToolSpec>>(iter: I) -> Self {
        Self::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl<'a> IntoIterator for &'a ToolSpecs {
    type Item = &'a ToolSpec;
    type IntoIter = std::slice::Iter<'a, ToolSpec>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl PartialEq for ToolSpecs {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) if Arc::ptr_eq(a, b) => true,
            _ => self.as_slice() == other.as_slice(),
        }
    }
}

impl PartialEq<Vec<ToolSpec>> for ToolSpecs {
    fn eq(&self, other: &Vec<ToolSpec>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl PartialEq<[ToolSpec]> for ToolSpecs {
    fn eq(&self, other: &[ToolSpec]) -> bool {
        self.as_slice() == other
    }
}

impl std::fmt::Debug for ToolSpecs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl Serialize for ToolSpecs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.as_slice().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ToolSpecs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<ToolSpec>::deserialize(d).map(Self::from)
    }
}
