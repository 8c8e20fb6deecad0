//! The state value: a JSON value whose containers share structure.

use std::borrow::Borrow;
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, LazyLock};

use indexmap::IndexMap;
use indexmap::map::raw_entry_v1::{RawEntryApiV1, RawEntryMut};
use serde_json::Number;
use std::hash::BuildHasher;

use super::lazy::LazyValue;

/// Arrays up to this length are a plain vector (compact, copied shallowly
/// on a shared write); longer ones are a persistent vector (`imbl`), where
/// a push or a write copies O(log n).
pub(crate) const SMALL_ARRAY: usize = 32;

/// A JSON value whose objects and arrays are shared between clones.
///
/// Cloning is O(1): strings, objects and arrays are reference-counted, and
/// a write through a clone copies only the containers on its path, each
/// shallowly (an object copies its entries' handles, a long array is a
/// persistent vector and copies O(log n)). Reads look like serde_json's:
/// `v["key"]`, `v.get("key")`, `v.as_i64()`, comparisons with
/// `serde_json::Value`s and literals.
///
/// ```
/// use jido::state::StateValue;
/// use serde_json::json;
///
/// let v = StateValue::from(json!({"a": {"b": [1, 2]}, "s": "x"}));
/// assert_eq!(v["a"]["b"][1], 2);
/// assert_eq!(v["s"], "x");
/// assert_eq!(v["a"], json!({"b": [1, 2]}));
/// assert!(v["missing"].is_null());
/// assert_eq!(serde_json::Value::from(v), json!({"a": {"b": [1, 2]}, "s": "x"}));
/// ```
///
/// A [`Lazy`](StateValue::Lazy) node reads as the value it builds: match
/// on the accessors (`as_object`, `as_str`, …) rather than on the variants,
/// or call [`resolved`](StateValue::resolved) first.
#[non_exhaustive]
#[derive(Clone, Default)]
pub enum StateValue {
    /// `null`.
    #[default]
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number (serde_json's).
    Number(Number),
    /// A string, shared.
    String(Arc<str>),
    /// An array, shared.
    Array(StateArray),
    /// An object, shared.
    Object(StateMap),
    /// A value built from a Rust value on first read (see [`LazyValue`]):
    /// every read sees the built value, a write replaces the node with it.
    Lazy(LazyValue),
}

/// A JSON object of the state: insertion-ordered, shared between clones.
/// A write to a shared map first copies its entries' handles (O(keys),
/// values are not copied).
#[derive(Clone)]
pub struct StateMap(Arc<Entries>);

impl Default for StateMap {
    /// An empty map: a handle on one shared empty map (no allocation; the
    /// first write makes the map its own).
    fn default() -> Self {
        static EMPTY: LazyLock<Arc<Entries>> = LazyLock::new(|| Arc::new(Entries::default()));
        Self(Arc::clone(&EMPTY))
    }
}

/// See [`StateMap::mark`].
pub(crate) struct MapMark(std::sync::Weak<Entries>);

impl MapMark {
    /// Whether `map` is the map marked, unwritten since.
    pub(crate) fn is(&self, map: &StateMap) -> bool {
        std::ptr::eq(self.0.as_ptr(), Arc::as_ptr(&map.0))
    }
}

/// A JSON array of the state, shared between clones. Short arrays are a
/// plain vector; from 33 elements on it is a persistent vector where
/// [`push`](StateArray::push) and writes cost O(log n) even when shared.
#[derive(Clone, Default)]
pub struct StateArray(Arc<Seq>);

#[derive(Clone)]
enum Seq {
    Small(Vec<StateValue>),
    Large(imbl::Vector<StateValue>),
}

impl Default for Seq {
    fn default() -> Self {
        Seq::Small(Vec::new())
    }
}

/// The entries of a [`StateMap`]. Keys are hashed with foldhash (randomly seeded per process):
/// SipHash, the standard library's default, was about 40 % of a state write.
type Entries = IndexMap<Arc<str>, StateValue, foldhash::fast::RandomState>;

static NULL: StateValue = StateValue::Null;
static EMPTY_MAP: LazyLock<StateMap> = LazyLock::new(StateMap::new);

// ---------------------------------------------------------------- StateMap

impl StateMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty map with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        Self(Arc::new(Entries::with_capacity_and_hasher(
            n,
            Default::default(),
        )))
    }

    fn inner_mut(&mut self) -> &mut Entries {
        Arc::make_mut(&mut self.0)
    }

    /// Whether both maps are the same shared object (no comparison of
    /// contents).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A marker of this very map that does not keep it shared: a write to
    /// the map moves it to a new allocation (its entries are not copied,
    /// unlike a write to a map another clone holds), after which
    /// [`MapMark::is`] no longer matches. The marker keeps the old
    /// allocation (not its entries) until it is dropped, so its address is
    /// never reused by another map meanwhile.
    pub(crate) fn mark(&self) -> MapMark {
        MapMark(Arc::downgrade(&self.0))
    }

    /// The value under `key`.
    pub fn get(&self, key: &str) -> Option<&StateValue> {
        self.0.get(key)
    }

    /// The value under `key`, mutably (the map is copied shallowly first if
    /// shared).
    pub fn get_mut(&mut self, key: &str) -> Option<&mut StateValue> {
        // One hash: the index found in the shared map is the same in its
        // copy.
        let index = self.0.get_index_of(key)?;
        self.inner_mut().get_index_mut(index).map(|(_, v)| v)
    }

    /// The value under `key` and its index, looked up at `hint` first (an
    /// index `key` had before): no hashing while the key stays where it
    /// was. Any other index (the map changed) falls back to the lookup.
    #[cfg(feature = "ai")]
    pub(crate) fn get_hinted(&self, key: &str, hint: usize) -> Option<(usize, &StateValue)> {
        match self.0.get_index(hint) {
            Some((k, v)) if **k == *key => Some((hint, v)),
            _ => self.0.get_full(key).map(|(i, _, v)| (i, v)),
        }
    }

    /// Whether another map shares this one's entries (a write copies
    /// them first).
    #[cfg(feature = "ai")]
    pub(crate) fn is_shared(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }

    /// Sets `key` to `value`, looked up at `hint` first (see
    /// [`get_hinted`](StateMap::get_hinted)), and returns the key's index.
    /// A key already holding the same `null`, boolean or string is left
    /// alone: nothing is written, so a map shared with a copy is not
    /// copied (any other value is written).
    #[cfg(feature = "ai")]
    pub(crate) fn set_shared_hinted(
        &mut self,
        key: &Arc<str>,
        hint: usize,
        value: StateValue,
    ) -> usize {
        fn same(current: &StateValue, value: &StateValue) -> bool {
            match (current, value) {
                (StateValue::Null, StateValue::Null) => true,
                (StateValue::Bool(a), StateValue::Bool(b)) => a == b,
                (StateValue::String(a), StateValue::String(b)) => Arc::ptr_eq(a, b) || a == b,
                _ => false,
            }
        }
        let found = match self.0.get_index(hint) {
            Some((k, v)) if Arc::ptr_eq(k, key) || **k == **key => Some((hint, v)),
            // A map no one shares: one hash finds the key or its slot.
            _ if !self.is_shared() => {
                return match Self::raw_entry(self.inner_mut(), key) {
                    (RawEntryMut::Occupied(mut slot), _) => {
                        if !same(slot.get(), &value) {
                            slot.insert(value);
                        }
                        slot.index()
                    }
                    (RawEntryMut::Vacant(vacant), hash) => {
                        let index = vacant.index();
                        vacant.insert_hashed_nocheck(hash, Arc::clone(key), value);
                        index
                    }
                };
            }
            _ => self.0.get_full(&**key).map(|(i, _, v)| (i, v)),
        };
        let Some((index, current)) = found else {
            return self.inner_mut().insert_full(Arc::clone(key), value).0;
        };
        if !same(current, &value)
            && let Some((_, slot)) = self.inner_mut().get_index_mut(index)
        {
            *slot = value;
        }
        index
    }

    /// [`get_mut`](StateMap::get_mut) looked up at `hint` first (see
    /// [`get_hinted`](StateMap::get_hinted)), with the index found.
    #[cfg(feature = "ai")]
    pub(crate) fn get_mut_hinted(
        &mut self,
        key: &str,
        hint: usize,
    ) -> Option<(usize, &mut StateValue)> {
        let index = match self.0.get_index(hint) {
            Some((k, _)) if **k == *key => hint,
            _ => self.0.get_index_of(key)?,
        };
        self.inner_mut()
            .get_index_mut(index)
            .map(|(_, v)| (index, v))
    }

    /// [`insert`](StateMap::insert), returning the key's index.
    #[cfg(feature = "ai")]
    pub(crate) fn insert_full(&mut self, key: &str, value: impl Into<StateValue>) -> usize {
        let value = value.into();
        let map = self.inner_mut();
        match Self::raw_entry(map, key) {
            (RawEntryMut::Occupied(mut slot), _) => {
                slot.insert(value);
                slot.index()
            }
            (RawEntryMut::Vacant(vacant), hash) => {
                let index = vacant.index();
                vacant.insert_hashed_nocheck(hash, Arc::from(key), value);
                index
            }
        }
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Sets `key` to `value` (kept in place when the key exists, last
    /// otherwise) and returns the previous value.
    pub fn insert(&mut self, key: &str, value: impl Into<StateValue>) -> Option<StateValue> {
        let value = value.into();
        match Self::raw_entry(self.inner_mut(), key) {
            (RawEntryMut::Occupied(mut slot), _) => Some(slot.insert(value)),
            (RawEntryMut::Vacant(vacant), hash) => {
                vacant.insert_hashed_nocheck(hash, Arc::from(key), value);
                None
            }
        }
    }

    /// Sets `key` to `value` as [`insert`](StateMap::insert) does, but a new
    /// key shares the handle `key` rather than copying its text: for keys
    /// written again and again (held in a `static`) or a key that is also
    /// a value (an id).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use jido::state::StateMap;
    ///
    /// let id: Arc<str> = Arc::from("r1");
    /// let mut m = StateMap::new();
    /// m.insert_shared(&id, Arc::clone(&id));
    /// assert_eq!(m["r1"], "r1");
    /// assert_eq!(m.insert_shared(&id, 2), Some("r1".into()));
    /// ```
    pub fn insert_shared(
        &mut self,
        key: &Arc<str>,
        value: impl Into<StateValue>,
    ) -> Option<StateValue> {
        let value = value.into();
        match Self::raw_entry(self.inner_mut(), key) {
            (RawEntryMut::Occupied(mut slot), _) => Some(slot.insert(value)),
            (RawEntryMut::Vacant(vacant), hash) => {
                vacant.insert_hashed_nocheck(hash, Arc::clone(key), value);
                None
            }
        }
    }

    /// Makes room for `additional` more entries (the map is copied first
    /// if shared): several new keys then grow it once.
    pub fn reserve(&mut self, additional: usize) {
        self.inner_mut().reserve(additional);
    }

    /// The slot of `key` and its hash: the key is hashed once whether it
    /// is there or gets inserted (`Arc<str>` and `str` hash alike).
    fn raw_entry<'a>(
        map: &'a mut Entries,
        key: &str,
    ) -> (
        RawEntryMut<'a, Arc<str>, StateValue, foldhash::fast::RandomState>,
        u64,
    ) {
        let hash = map.hasher().hash_one(key);
        (
            map.raw_entry_mut_v1().from_key_hashed_nocheck(hash, key),
            hash,
        )
    }

    /// Removes `key`, keeping the order of the other keys, and returns its
    /// value.
    pub fn remove(&mut self, key: &str) -> Option<StateValue> {
        if !self.0.contains_key(key) {
            return None;
        }
        self.inner_mut().shift_remove(key)
    }

    /// The value under `key`, inserted with `default()` when missing.
    pub fn entry_or_insert_with(
        &mut self,
        key: &str,
        default: impl FnOnce() -> StateValue,
    ) -> &mut StateValue {
        match Self::raw_entry(self.inner_mut(), key) {
            (RawEntryMut::Occupied(slot), _) => slot.into_mut(),
            (RawEntryMut::Vacant(vacant), hash) => {
                vacant
                    .insert_hashed_nocheck(hash, Arc::from(key), default())
                    .1
            }
        }
    }

    /// The object under `key`, created (or replacing a value that is not an
    /// object) when needed.
    pub fn object_mut(&mut self, key: &str) -> &mut StateMap {
        let slot = self.entry_or_insert_with(key, || StateValue::Object(StateMap::new()));
        if !slot.is_object() {
            *slot = StateValue::Object(StateMap::new());
        }
        match slot.as_object_mut() {
            Some(map) => map,
            None => unreachable!("the slot was just made an object"),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &StateValue)> + '_ {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.0.keys().map(AsRef::as_ref)
    }

    /// The values in order.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &StateValue> + '_ {
        self.0.values()
    }

    /// The entries with mutable values, in order (the map is copied
    /// shallowly first if shared): one pass, no key hashing, for updating
    /// several known keys at once.
    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = (&str, &mut StateValue)> + '_ {
        self.inner_mut().iter_mut().map(|(k, v)| (&**k, v))
    }

    /// Keeps the entries for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &StateValue) -> bool) {
        if self.0.iter().all(|(k, v)| keep(k, v)) {
            return;
        }
        // `keep` may be stateful: run it once per entry, on a fresh copy.
        let kept: Entries = self
            .0
            .iter()
            .filter(|(k, v)| keep(k, v))
            .map(|(k, v)| (Arc::clone(k), v.clone()))
            .collect();
        self.0 = Arc::new(kept);
    }

    /// Sets every entry of `other` (shallow: a key of `other` replaces).
    pub fn extend<K: AsRef<str>, V: Into<StateValue>>(
        &mut self,
        other: impl IntoIterator<Item = (K, V)>,
    ) {
        for (k, v) in other {
            self.insert(k.as_ref(), v);
        }
    }

    /// Deep-merges `src` into this map: where both sides hold an object the
    /// objects merge recursively, any other value of `src` replaces. Costs
    /// O(size of `src` × depth); nothing else is copied.
    pub fn deep_merge(&mut self, src: impl Into<StateMap>) {
        let src = src.into();
        if self.is_empty() {
            *self = src;
            return;
        }
        for (key, value) in src.iter() {
            let dst = self
                .get_mut(key)
                .filter(|d| d.is_object() && value.is_object())
                .and_then(StateValue::as_object_mut);
            match (dst, value.as_object()) {
                (Some(d), Some(s)) => d.deep_merge(s.clone()),
                _ => {
                    self.insert(key, value.clone());
                }
            }
        }
    }

    /// Deep-merges a serde_json map (see [`StateMap::deep_merge`]),
    /// converting only what it writes.
    pub fn deep_merge_json(&mut self, src: serde_json::Map<String, serde_json::Value>) {
        for (key, value) in src {
            let dst = self
                .get_mut(&key)
                .filter(|d| d.is_object() && value.is_object())
                .and_then(StateValue::as_object_mut);
            match (dst, value) {
                (Some(d), serde_json::Value::Object(s)) => d.deep_merge_json(s),
                (_, value) => {
                    self.insert(&key, value);
                }
            }
        }
    }

    /// The map as a serde_json map (a deep copy).
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        self.iter()
            .map(|(k, v)| (k.to_owned(), v.to_json()))
            .collect()
    }
}

// -------------------------------------------------------------- StateArray

impl StateArray {
    /// An empty array.
    pub fn new() -> Self {
        Self::default()
    }

    fn seq_mut(&mut self) -> &mut Seq {
        Arc::make_mut(&mut self.0)
    }

    /// Whether both arrays are the same shared array.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match &*self.0 {
            Seq::Small(v) => v.len(),
            Seq::Large(v) => v.len(),
        }
    }

    /// Whether the array is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element at `index`.
    pub fn get(&self, index: usize) -> Option<&StateValue> {
        match &*self.0 {
            Seq::Small(v) => v.get(index),
            Seq::Large(v) => v.get(index),
        }
    }

    /// The element at `index`, mutably (copying O(log n) first if shared).
    pub fn get_mut(&mut self, index: usize) -> Option<&mut StateValue> {
        if index >= self.len() {
            return None;
        }
        match self.seq_mut() {
            Seq::Small(v) => v.get_mut(index),
            Seq::Large(v) => v.get_mut(index),
        }
    }

    /// The last element.
    pub fn last(&self) -> Option<&StateValue> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// Appends `value`: O(log n) on a long array, shared or not.
    pub fn push(&mut self, value: impl Into<StateValue>) {
        let value = value.into();
        let seq = self.seq_mut();
        match seq {
            Seq::Small(v) if v.len() < SMALL_ARRAY => v.push(value),
            Seq::Small(v) => {
                let mut large: imbl::Vector<StateValue> = std::mem::take(v).into_iter().collect();
                large.push_back(value);
                *seq = Seq::Large(large);
            }
            Seq::Large(v) => v.push_back(value),
        }
    }

    /// Removes and returns the last element.
    pub fn pop(&mut self) -> Option<StateValue> {
        if self.is_empty() {
            return None;
        }
        match self.seq_mut() {
            Seq::Small(v) => v.pop(),
            Seq::Large(v) => v.pop_back(),
        }
    }

    /// The elements in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &StateValue> + ExactSizeIterator + '_ {
        let (small, large) = match &*self.0 {
            Seq::Small(v) => (Some(v.iter()), None),
            Seq::Large(v) => (None, Some(v.iter())),
        };
        let len = self.len();
        SeqIter {
            small,
            large,
            left: len,
        }
    }

    /// The array as a serde_json vector (a deep copy).
    pub fn to_json(&self) -> Vec<serde_json::Value> {
        self.iter().map(StateValue::to_json).collect()
    }
}

struct SeqIter<'a> {
    small: Option<std::slice::Iter<'a, StateValue>>,
    large: Option<imbl::vector::Iter<'a, StateValue, imbl::shared_ptr::DefaultSharedPtr>>,
    left: usize,
}

impl<'a> Iterator for SeqIter<'a> {
    type Item = &'a StateValue;
    fn next(&mut self) -> Option<Self::Item> {
        let next = match (&mut self.small, &mut self.large) {
            (Some(it), _) => it.next(),
            (_, Some(it)) => it.next(),
            _ => None,
        };
        if next.is_some() {
            self.left -= 1;
        }
        next
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl DoubleEndedIterator for SeqIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let next = match (&mut self.small, &mut self.large) {
            (Some(it), _) => it.next_back(),
            (_, Some(it)) => it.next_back(),
            _ => None,
        };
        if next.is_some() {
            self.left -= 1;
        }
        next
    }
}

impl ExactSizeIterator for SeqIter<'_> {}

impl FromIterator<StateValue> for StateArray {
    fn from_iter<I: IntoIterator<Item = StateValue>>(iter: I) -> Self {
        let v: Vec<StateValue> = iter.into_iter().collect();
        if v.len() <= SMALL_ARRAY {
            Self(Arc::new(Seq::Small(v)))
        } else {
            Self(Arc::new(Seq::Large(v.into_iter().collect())))
        }
    }
}

impl<K: AsRef<str>, V: Into<StateValue>> FromIterator<(K, V)> for StateMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut map = Entries::with_capacity_and_hasher(iter.size_hint().0, Default::default());
        for (k, v) in iter {
            map.insert(Arc::from(k.as_ref()), v.into());
        }
        Self(Arc::new(map))
    }
}

// -------------------------------------------------------------- StateValue

impl StateValue {
    /// The value itself, or what a [`Lazy`](StateValue::Lazy) node builds
    /// (never a lazy node).
    pub fn resolved(&self) -> &StateValue {
        match self {
            StateValue::Lazy(lazy) => lazy.get(),
            v => v,
        }
    }

    /// Whether both are the same shared value: the same object, array,
    /// string or [`Lazy`](StateValue::Lazy) node (a pointer comparison),
    /// or both `null`. Equal values built apart are not.
    pub fn ptr_eq(&self, other: &Self) -> bool {
        match (self, other) {
            (StateValue::Null, StateValue::Null) => true,
            (StateValue::String(a), StateValue::String(b)) => Arc::ptr_eq(a, b),
            (StateValue::Array(a), StateValue::Array(b)) => a.ptr_eq(b),
            (StateValue::Object(a), StateValue::Object(b)) => a.ptr_eq(b),
            (StateValue::Lazy(a), StateValue::Lazy(b)) => a.ptr_eq(b),
            _ => false,
        }
    }

    /// Replaces a [`Lazy`](StateValue::Lazy) node with the value it builds
    /// (a no-op on any other value): what a write does first.
    pub fn force(&mut self) -> &mut StateValue {
        if let StateValue::Lazy(lazy) = self {
            *self = lazy.get().clone();
        }
        self
    }

    /// The value under `key` of an object, or the element at an index of
    /// an array.
    pub fn get<I: StateIndex>(&self, index: I) -> Option<&StateValue> {
        index.index_into(self)
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self.resolved(), StateValue::Null)
    }

    /// Whether this is an object.
    pub fn is_object(&self) -> bool {
        matches!(self.resolved(), StateValue::Object(_))
    }

    /// Whether this is an array.
    pub fn is_array(&self) -> bool {
        matches!(self.resolved(), StateValue::Array(_))
    }

    /// Whether this is a string.
    pub fn is_string(&self) -> bool {
        matches!(self.resolved(), StateValue::String(_))
    }

    /// Whether this is a number.
    pub fn is_number(&self) -> bool {
        matches!(self.resolved(), StateValue::Number(_))
    }

    /// Whether this is a boolean.
    pub fn is_boolean(&self) -> bool {
        matches!(self.resolved(), StateValue::Bool(_))
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self.resolved() {
            StateValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The number as an `i64`, if it is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self.resolved() {
            StateValue::Number(n) => n.as_i64(),
            _ => None,
        }
    }

    /// The number as a `u64`, if it is one.
    pub fn as_u64(&self) -> Option<u64> {
        match self.resolved() {
            StateValue::Number(n) => n.as_u64(),
            _ => None,
        }
    }

    /// The number as an `f64`, if this is a number.
    pub fn as_f64(&self) -> Option<f64> {
        match self.resolved() {
            StateValue::Number(n) => n.as_f64(),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self.resolved() {
            StateValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&StateMap> {
        match self.resolved() {
            StateValue::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The object, mutably, if this is one.
    pub fn as_object_mut(&mut self) -> Option<&mut StateMap> {
        match self.force() {
            StateValue::Object(m) => Some(m),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&StateArray> {
        match self.resolved() {
            StateValue::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The array, mutably, if this is one.
    pub fn as_array_mut(&mut self) -> Option<&mut StateArray> {
        match self.force() {
            StateValue::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The value as a serde_json value (a deep copy).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            StateValue::Null => serde_json::Value::Null,
            StateValue::Bool(b) => serde_json::Value::Bool(*b),
            StateValue::Number(n) => serde_json::Value::Number(n.clone()),
            StateValue::String(s) => serde_json::Value::String(s.as_ref().to_owned()),
            StateValue::Array(a) => serde_json::Value::Array(a.to_json()),
            StateValue::Object(m) => serde_json::Value::Object(m.to_json()),
            StateValue::Lazy(lazy) => lazy.get().to_json(),
        }
    }

    /// Takes the value out, leaving `null`.
    pub fn take(&mut self) -> StateValue {
        std::mem::take(self)
    }
}

/// What indexes a [`StateValue`]: a key (`&str`, `String`) for objects, a
/// `usize` for arrays.
pub trait StateIndex: private::Sealed {
    /// The value at this index of `v`, if any.
    fn index_into<'v>(&self, v: &'v StateValue) -> Option<&'v StateValue>;
}

mod private {
    pub trait Sealed {}
    impl Sealed for str {}
    impl Sealed for String {}
    impl Sealed for usize {}
    impl<T: ?Sized + Sealed> Sealed for &T {}
}

impl StateIndex for str {
    fn index_into<'v>(&self, v: &'v StateValue) -> Option<&'v StateValue> {
        match v {
            StateValue::Lazy(lazy) => lazy.entry(self),
            v => v.as_object()?.get(self),
        }
    }
}
impl StateIndex for String {
    fn index_into<'v>(&self, v: &'v StateValue) -> Option<&'v StateValue> {
        self.as_str().index_into(v)
    }
}
impl StateIndex for usize {
    fn index_into<'v>(&self, v: &'v StateValue) -> Option<&'v StateValue> {
        v.as_array()?.get(*self)
    }
}
impl<T: ?Sized + StateIndex> StateIndex for &T {
    fn index_into<'v>(&self, v: &'v StateValue) -> Option<&'v StateValue> {
        (**self).index_into(v)
    }
}

impl<I: StateIndex> std::ops::Index<I> for StateValue {
    type Output = StateValue;
    /// The value at `index`, `null` when absent (as serde_json).
    fn index(&self, index: I) -> &StateValue {
        index.index_into(self).unwrap_or(&NULL)
    }
}

impl<Q: ?Sized + AsRef<str>> std::ops::Index<&Q> for StateMap {
    type Output = StateValue;
    /// The value under `key`, `null` when absent.
    fn index(&self, key: &Q) -> &StateValue {
        self.get(key.as_ref()).unwrap_or(&NULL)
    }
}

impl std::ops::Index<usize> for StateArray {
    type Output = StateValue;
    /// The element at `index`, `null` when absent.
    fn index(&self, index: usize) -> &StateValue {
        self.get(index).unwrap_or(&NULL)
    }
}

impl StateMap {
    /// An empty map, shared (no allocation).
    pub fn empty() -> &'static StateMap {
        &EMPTY_MAP
    }
}

// ------------------------------------------------------------- conversions

impl From<serde_json::Value> for StateValue {
    fn from(v: serde_json::Value) -> Self {
        match v {
            serde_json::Value::Null => StateValue::Null,
            serde_json::Value::Bool(b) => StateValue::Bool(b),
            serde_json::Value::Number(n) => StateValue::Number(n),
            serde_json::Value::String(s) => StateValue::String(Arc::from(s)),
            serde_json::Value::Array(a) => {
                StateValue::Array(a.into_iter().map(StateValue::from).collect())
            }
            serde_json::Value::Object(m) => StateValue::Object(StateMap::from(m)),
        }
    }
}

impl From<&serde_json::Value> for StateValue {
    fn from(v: &serde_json::Value) -> Self {
        match v {
            serde_json::Value::Null => StateValue::Null,
            serde_json::Value::Bool(b) => StateValue::Bool(*b),
            serde_json::Value::Number(n) => StateValue::Number(n.clone()),
            serde_json::Value::String(s) => StateValue::String(Arc::from(s.as_str())),
            serde_json::Value::Array(a) => {
                StateValue::Array(a.iter().map(StateValue::from).collect())
            }
            serde_json::Value::Object(m) => StateValue::Object(StateMap::from(m)),
        }
    }
}

impl From<serde_json::Map<String, serde_json::Value>> for StateMap {
    fn from(m: serde_json::Map<String, serde_json::Value>) -> Self {
        m.into_iter().collect()
    }
}

impl From<&serde_json::Map<String, serde_json::Value>> for StateMap {
    fn from(m: &serde_json::Map<String, serde_json::Value>) -> Self {
        m.iter().map(|(k, v)| (k, StateValue::from(v))).collect()
    }
}

impl From<StateValue> for serde_json::Value {
    fn from(v: StateValue) -> Self {
        v.to_json()
    }
}

impl From<&StateValue> for serde_json::Value {
    fn from(v: &StateValue) -> Self {
        v.to_json()
    }
}

impl From<StateMap> for serde_json::Value {
    fn from(m: StateMap) -> Self {
        serde_json::Value::Object(m.to_json())
    }
}

impl From<&StateMap> for serde_json::Value {
    fn from(m: &StateMap) -> Self {
        serde_json::Value::Object(m.to_json())
    }
}

impl From<StateMap> for serde_json::Map<String, serde_json::Value> {
    fn from(m: StateMap) -> Self {
        m.to_json()
    }
}

impl From<StateMap> for StateValue {
    fn from(m: StateMap) -> Self {
        StateValue::Object(m)
    }
}

impl From<StateArray> for StateValue {
    fn from(a: StateArray) -> Self {
        StateValue::Array(a)
    }
}

impl From<Vec<StateValue>> for StateValue {
    fn from(v: Vec<StateValue>) -> Self {
        StateValue::Array(v.into_iter().collect())
    }
}

impl From<&str> for StateValue {
    fn from(s: &str) -> Self {
        StateValue::String(Arc::from(s))
    }
}

impl From<String> for StateValue {
    fn from(s: String) -> Self {
        StateValue::String(Arc::from(s))
    }
}

impl From<Arc<str>> for StateValue {
    fn from(s: Arc<str>) -> Self {
        StateValue::String(s)
    }
}

impl From<bool> for StateValue {
    fn from(b: bool) -> Self {
        StateValue::Bool(b)
    }
}

impl From<()> for StateValue {
    fn from((): ()) -> Self {
        StateValue::Null
    }
}

impl From<Number> for StateValue {
    fn from(n: Number) -> Self {
        StateValue::Number(n)
    }
}

macro_rules! from_int {
    ($($t:ty)*) => {$(
        impl From<$t> for StateValue {
            fn from(n: $t) -> Self {
                StateValue::Number(Number::from(n))
            }
        }
    )*};
}
from_int!(i8 i16 i32 i64 isize u8 u16 u32 u64 usize);

impl From<f64> for StateValue {
    /// A number, or `null` for NaN and infinities (as serde_json).
    fn from(f: f64) -> Self {
        Number::from_f64(f).map_or(StateValue::Null, StateValue::Number)
    }
}

impl From<f32> for StateValue {
    /// A number, or `null` for NaN and infinities (as serde_json).
    fn from(f: f32) -> Self {
        StateValue::from(f64::from(f))
    }
}

impl<T: Into<StateValue>> From<Option<T>> for StateValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(StateValue::Null, Into::into)
    }
}

// --------------------------------------------------------------- equality

impl StateValue {
    /// Whether `self` and `other` are the same value without looking into
    /// containers: scalars by value, strings by pointer or contents,
    /// objects and arrays only when they are the same shared container.
    /// `true` implies `self == other`; a `false` may still be equal.
    #[cfg(feature = "persist")]
    pub(crate) fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (StateValue::Null, StateValue::Null) => true,
            (StateValue::Bool(a), StateValue::Bool(b)) => a == b,
            (StateValue::Number(a), StateValue::Number(b)) => a == b,
            (StateValue::String(a), StateValue::String(b)) => Arc::ptr_eq(a, b) || a == b,
            (StateValue::Array(a), StateValue::Array(b)) => a.ptr_eq(b),
            (StateValue::Object(a), StateValue::Object(b)) => a.ptr_eq(b),
            (StateValue::Lazy(a), StateValue::Lazy(b)) => a.ptr_eq(b),
            _ => false,
        }
    }
}

impl StateValue {
    /// Whether `self` and `other` serialise to the same JSON: equal, with
    /// object keys in the same order. Shared containers cost one pointer
    /// comparison.
    #[cfg(feature = "persist")]
    pub(crate) fn identical(&self, other: &Self) -> bool {
        if let (StateValue::Lazy(a), StateValue::Lazy(b)) = (self, other)
            && a.ptr_eq(b)
        {
            return true;
        }
        match (self.resolved(), other.resolved()) {
            (StateValue::Array(a), StateValue::Array(b)) => {
                a.ptr_eq(b)
                    || (a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.identical(y)))
            }
            (StateValue::Object(a), StateValue::Object(b)) => {
                a.ptr_eq(b)
                    || (a.len() == b.len()
                        && a.iter()
                            .zip(b.iter())
                            .all(|((ka, va), (kb, vb))| ka == kb && va.identical(vb)))
            }
            (a, b) => a.same(b),
        }
    }
}

impl StateArray {
    /// When `self` is `old` with elements appended (every element of `old`
    /// is [`identical`](StateValue::identical) to the one at its index
    /// here), the appended elements; `None` otherwise. Elements still
    /// shared cost a pointer comparison each; only elements that are not
    /// (an array rebuilt from JSON) are compared by value.
    #[cfg(feature = "persist")]
    pub(crate) fn appended_since(&self, old: &StateArray) -> Option<Vec<&StateValue>> {
        if self.len() < old.len() {
            return None;
        }
        if !self.iter().zip(old.iter()).all(|(a, b)| a.identical(b)) {
            return None;
        }
        Some(
            (old.len()..self.len())
                .filter_map(|i| self.get(i))
                .collect(),
        )
    }
}

impl PartialEq for StateValue {
    fn eq(&self, other: &Self) -> bool {
        if let (StateValue::Lazy(a), StateValue::Lazy(b)) = (self, other)
            && a.ptr_eq(b)
        {
            return true;
        }
        match (self.resolved(), other.resolved()) {
            (StateValue::Null, StateValue::Null) => true,
            (StateValue::Bool(a), StateValue::Bool(b)) => a == b,
            (StateValue::Number(a), StateValue::Number(b)) => a == b,
            (StateValue::String(a), StateValue::String(b)) => a == b,
            (StateValue::Array(a), StateValue::Array(b)) => a == b,
            (StateValue::Object(a), StateValue::Object(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for StateValue {}

impl PartialEq for StateMap {
    /// Equal entries, in any order (as serde_json's maps).
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other)
            || (self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v)))
    }
}

impl Eq for StateMap {}

impl PartialEq for StateArray {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || (self.len() == other.len() && self.iter().eq(other.iter()))
    }
}

impl Eq for StateArray {}

impl PartialEq<serde_json::Value> for StateValue {
    fn eq(&self, other: &serde_json::Value) -> bool {
        use serde_json::Value as J;
        match (self.resolved(), other) {
            (StateValue::Null, J::Null) => true,
            (StateValue::Bool(a), J::Bool(b)) => a == b,
            (StateValue::Number(a), J::Number(b)) => a == b,
            (StateValue::String(a), J::String(b)) => a.as_ref() == b.as_str(),
            (StateValue::Array(a), J::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
            }
            (StateValue::Object(a), J::Object(b)) => a == b,
            _ => false,
        }
    }
}

impl PartialEq<serde_json::Map<String, serde_json::Value>> for StateMap {
    fn eq(&self, other: &serde_json::Map<String, serde_json::Value>) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .all(|(k, v)| other.get(k).is_some_and(|o| v == o))
    }
}

impl PartialEq<StateValue> for serde_json::Value {
    fn eq(&self, other: &StateValue) -> bool {
        other == self
    }
}

impl PartialEq<StateMap> for serde_json::Map<String, serde_json::Value> {
    fn eq(&self, other: &StateMap) -> bool {
        other == self
    }
}

impl PartialEq<serde_json::Value> for StateMap {
    fn eq(&self, other: &serde_json::Value) -> bool {
        other.as_object().is_some_and(|o| self == o)
    }
}

impl PartialEq<StateMap> for serde_json::Value {
    fn eq(&self, other: &StateMap) -> bool {
        other == self
    }
}

impl PartialEq<serde_json::Value> for &StateValue {
    fn eq(&self, other: &serde_json::Value) -> bool {
        *self == other
    }
}

impl PartialEq<str> for StateValue {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == Some(other)
    }
}

impl PartialEq<&str> for StateValue {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == Some(*other)
    }
}

impl PartialEq<String> for StateValue {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == Some(other.as_str())
    }
}

impl PartialEq<bool> for StateValue {
    fn eq(&self, other: &bool) -> bool {
        self.as_bool() == Some(*other)
    }
}

macro_rules! eq_int {
    ($($t:ty => $as:ident as $conv:ty),*) => {$(
        impl PartialEq<$t> for StateValue {
            fn eq(&self, other: &$t) -> bool {
                self.$as().is_some_and(|v| v == <$conv>::from(*other))
            }
        }
        impl PartialEq<StateValue> for $t {
            fn eq(&self, other: &StateValue) -> bool {
                other == self
            }
        }
    )*};
}
eq_int!(i8 => as_i64 as i64, i16 => as_i64 as i64, i32 => as_i64 as i64, i64 => as_i64 as i64,
    u8 => as_u64 as u64, u16 => as_u64 as u64, u32 => as_u64 as u64, u64 => as_u64 as u64,
    f32 => as_f64 as f64, f64 => as_f64 as f64);

impl PartialEq<usize> for StateValue {
    fn eq(&self, other: &usize) -> bool {
        self.as_u64()
            .is_some_and(|v| u64::try_from(*other).is_ok_and(|o| o == v))
    }
}

impl PartialEq<isize> for StateValue {
    fn eq(&self, other: &isize) -> bool {
        self.as_i64()
            .is_some_and(|v| i64::try_from(*other).is_ok_and(|o| o == v))
    }
}

// ------------------------------------------------------------ debug/display

impl fmt::Debug for StateValue {
    /// The value as compact JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for StateValue {
    /// The value as compact JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(s) => f.write_str(&s),
            Err(_) => Err(fmt::Error),
        }
    }
}

impl fmt::Debug for StateMap {
    /// The map as compact JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for StateMap {
    /// The map as compact JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(s) => f.write_str(&s),
            Err(_) => Err(fmt::Error),
        }
    }
}

impl fmt::Debug for StateArray {
    /// The array as compact JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(s) => f.write_str(&s),
            Err(_) => Err(fmt::Error),
        }
    }
}

// Keys are `Arc<str>`: lookups by `&str` go through `Borrow<str>`.
const _: fn() = || {
    fn borrows<K: Borrow<str> + Hash + Eq>() {}
    borrows::<Arc<str>>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "ai")]
    #[test]
    fn set_shared_hinted_writes_only_changes() {
        let status: Arc<str> = Arc::from("status");
        let mut map = StateMap::new();
        map.insert("other", 1);
        // New key: appended, its index returned (whatever the hint).
        assert_eq!(map.set_shared_hinted(&status, 7, "running".into()), 1);
        let copy = map.clone();
        // The same string (hint right or wrong): the shared map stays shared.
        assert_eq!(map.set_shared_hinted(&status, 1, "running".into()), 1);
        assert_eq!(map.set_shared_hinted(&status, 0, "running".into()), 1);
        assert!(map.ptr_eq(&copy));
        // A change is written (the copy keeps the old value).
        assert_eq!(map.set_shared_hinted(&status, 0, "completed".into()), 1);
        assert!(!map.ptr_eq(&copy));
        assert_eq!(
            map.get("status").and_then(StateValue::as_str),
            Some("completed")
        );
        assert_eq!(
            copy.get("status").and_then(StateValue::as_str),
            Some("running")
        );
        // Not shared: written in place, found by hash when the hint misses.
        assert_eq!(map.set_shared_hinted(&status, 5, StateValue::Null), 1);
        assert_eq!(map.get("status"), Some(&StateValue::Null));
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn a_mark_matches_its_map_until_the_map_is_written() {
        let mut map = StateMap::new();
        map.insert("a", StateValue::from(1));
        let mark = map.mark();
        assert!(mark.is(&map));
        // A clone is the same map: it matches, and it is not held by the mark.
        let same = map.clone();
        assert!(mark.is(&same));
        drop(same);
        // A write moves the map (its entries are not copied): no match.
        map.insert("b", StateValue::from(2));
        assert!(!mark.is(&map));
        assert_eq!(map.get("a"), Some(&StateValue::from(1)));
        // A new mark matches again; another map never does.
        let mark = map.mark();
        assert!(mark.is(&map));
        let mut other = StateMap::new();
        other.insert("a", StateValue::from(1));
        assert!(!mark.is(&other));
    }
}
