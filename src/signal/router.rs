//! The signal router: a trie over dot-separated type segments.
//!
//! A route is a path pattern, a target (any `T`), a priority in
//! [`MIN_PRIORITY`]`..=`[`MAX_PRIORITY`] (default 0) and an optional match
//! function on the signal. Path segments are `[a-zA-Z0-9_-]+` or a wildcard:
//!
//! * `*` matches exactly one segment;
//! * `**` matches **one or more** segments, so `"audit.**"` does not match
//!   `"audit"` and `"user.**.created"` does not match `"user.created"`; a
//!   bare `"**"` matches every type. (The free function [`matches()`] follows
//!   Jido's `matches?/2` instead, where `**` matches zero or more.)
//!
//! [`Router::route`] returns every matching target, ordered by complexity
//! (more specific patterns first), then priority (higher first), then
//! insertion order. Complexity is Jido's: for a pattern of `n` segments,
//! `2000·n + Σ_exact 3000·(n−i) − Σ_* (1000−100·i) − Σ_** (2000−200·i)` with
//! `i` the segment index from 0. As in Jido, a route with a match function
//! ranks with complexity 0, and a match function that returns `false` or
//! panics means "no match".
//!
//! Invalid paths and priorities are refused where the router is built, with
//! an [`ErrorKind::Configuration`](crate::ErrorKind::Configuration) error
//! naming the `rule` broken.
//!
//! ```
//! use jido::signal::{Route, Router, Signal};
//! use jido::ErrorKind;
//! use serde_json::json;
//!
//! let mut router = Router::new();
//! router.add("order.placed", "exact")?;
//! router.add("order.*", "one segment")?;
//! router.add("**", "everything")?;
//! router.add_route(Route::new("order.placed", "big orders").priority(10).when(|s| {
//!     s.data().and_then(|d| d["total"].as_u64()).is_some_and(|t| t > 100)
//! }))?;
//!
//! let small = Signal::new("order.placed", json!({"total": 5}));
//! assert_eq!(router.route(&small)?, vec![&"exact", &"one segment", &"everything"]);
//! let big = Signal::new("order.placed", json!({"total": 500}));
//! assert_eq!(router.route(&big)?, vec![&"exact", &"one segment", &"big orders", &"everything"]);
//!
//! let err = router.add("order..placed", "bad").unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::Configuration);
//! assert_eq!(err.message(), "path cannot contain consecutive dots");
//!
//! let mut empty: Router<&str> = Router::new();
//! let err = empty.route(&small).unwrap_err();
//! assert_eq!(err.kind(), ErrorKind::Routing);
//! assert_eq!(err.detail("signal_type"), Some(&json!("order.placed")));
//! # Ok::<(), jido::Error>(())
//! ```

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use super::Signal;
use crate::error::{Error, Result};

/// The lowest route priority.
pub const MIN_PRIORITY: i32 = -100;
/// The highest route priority.
pub const MAX_PRIORITY: i32 = 100;
/// The priority of a route that names none.
pub const DEFAULT_PRIORITY: i32 = 0;

/// A match function: a route only applies to signals for which it returns
/// `true`.
pub type MatchFn = Arc<dyn Fn(&Signal) -> bool + Send + Sync>;

/// One route: a path pattern, a target, a priority and an optional match
/// function.
///
/// ```
/// use jido::signal::Route;
///
/// let route = Route::new(" user.*.created ", 7).priority(-5);
/// assert_eq!(route.get_priority(), -5);
/// assert_eq!(*route.target(), 7);
/// ```
#[must_use]
pub struct Route<T> {
    path: String,
    target: T,
    priority: i32,
    matcher: Option<MatchFn>,
}

impl<T> Route<T> {
    /// A route from `path` (trimmed; checked when added to a router) to
    /// `target`, priority 0, no match function.
    pub fn new(path: impl Into<String>, target: T) -> Self {
        let path = path.into();
        let trimmed = path.trim();
        let path = if trimmed.len() == path.len() {
            path
        } else {
            trimmed.to_owned()
        };
        Self {
            path,
            target,
            priority: DEFAULT_PRIORITY,
            matcher: None,
        }
    }

    /// Sets the priority (checked when added to a router).
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Adds a match function: the route applies only when it returns
    /// `true`. A panic inside it counts as `false`.
    pub fn when(mut self, matcher: impl Fn(&Signal) -> bool + Send + Sync + 'static) -> Self {
        self.matcher = Some(Arc::new(matcher));
        self
    }

    /// The (trimmed) path pattern.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The target.
    pub fn target(&self) -> &T {
        &self.target
    }

    /// The target, consuming the route.
    pub fn into_target(self) -> T {
        self.target
    }

    /// The priority.
    pub fn get_priority(&self) -> i32 {
        self.priority
    }

    /// Whether the route has a match function.
    pub fn has_match_fn(&self) -> bool {
        self.matcher.is_some()
    }

    /// Jido's complexity score of the path (see the [module docs](self)).
    /// Routes with a match function still rank with 0.
    pub fn complexity(&self) -> i64 {
        complexity(&self.path)
    }

    fn accepts(&self, signal: &Signal) -> bool {
        match &self.matcher {
            None => true,
            Some(f) => match catch_unwind(AssertUnwindSafe(|| f(signal))) {
                Ok(matched) => matched,
                Err(_) => {
                    tracing::warn!(
                        path = %self.path,
                        signal_type = %signal.ty(),
                        "route match function panicked; treated as no match"
                    );
                    false
                }
            },
        }
    }
}

impl<T: Clone> Clone for Route<T> {
    fn clone(&self) -> Self {
        Self {
            path: self.path.clone(),
            target: self.target.clone(),
            priority: self.priority,
            matcher: self.matcher.clone(),
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Route<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Route")
            .field("path", &self.path)
            .field("target", &self.target)
            .field("priority", &self.priority)
            .field("match_fn", &self.matcher.is_some())
            .finish()
    }
}

/// Jido's complexity of a (valid) path.
fn complexity(path: &str) -> i64 {
    let n = path.split('.').count() as i64;
    let mut score = 2000 * n;
    for (i, seg) in path.split('.').enumerate() {
        let i = i as i64;
        score += match seg {
            "**" => -(2000 - 200 * i),
            "*" => -(1000 - 100 * i),
            _ => 3000 * (n - i),
        };
    }
    score
}

fn path_error(path: &str, rule: &'static str, message: &'static str) -> Error {
    Error::configuration(message)
        .with_detail("path", path)
        .with_detail("rule", rule)
}

fn is_segment_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Checks a route path (already trimmed) against Jido's rules.
///
/// # Errors
///
/// An [`ErrorKind::Configuration`](crate::ErrorKind::Configuration) error
/// with details `path` and `rule`:
///
/// | rule | message |
/// |---|---|
/// | `empty` | path cannot be empty |
/// | `consecutive_dots` | path cannot contain consecutive dots |
/// | `edge_dot` | path cannot start or end with a dot |
/// | `multiple_wildcards` | path cannot contain multiple wildcards (`**.**`) |
/// | `wildcard_in_segment` | path cannot contain '*' within a segment |
/// | `invalid_characters` | path contains invalid characters |
pub fn validate_path(path: &str) -> Result<()> {
    if path.is_empty() {
        return Err(path_error(path, "empty", "path cannot be empty"));
    }
    if path.contains("..") {
        return Err(path_error(
            path,
            "consecutive_dots",
            "path cannot contain consecutive dots",
        ));
    }
    if path.starts_with('.') || path.ends_with('.') {
        return Err(path_error(
            path,
            "edge_dot",
            "path cannot start or end with a dot",
        ));
    }
    let mut previous_globstar = false;
    for seg in path.split('.') {
        match seg {
            "**" => {
                if previous_globstar {
                    return Err(path_error(
                        path,
                        "multiple_wildcards",
                        "path cannot contain multiple wildcards",
                    ));
                }
                previous_globstar = true;
                continue;
            }
            "*" => {}
            _ if seg.contains('*') => {
                return Err(path_error(
                    path,
                    "wildcard_in_segment",
                    "path cannot contain '*' within a segment",
                ));
            }
            _ if !seg.bytes().all(is_segment_byte) => {
                return Err(path_error(
                    path,
                    "invalid_characters",
                    "path contains invalid characters",
                ));
            }
            _ => {}
        }
        previous_globstar = false;
    }
    Ok(())
}

/// Checks that `ty` is a routable signal type: dot-separated segments of
/// `[a-zA-Z0-9_-]+`.
///
/// # Errors
///
/// A validation error `signal type is not routable` with details
/// `signal_type`.
pub fn validate_type(ty: &str) -> Result<()> {
    if is_routable(ty) {
        Ok(())
    } else {
        Err(Error::validation("signal type is not routable").with_detail("signal_type", ty))
    }
}

fn is_routable(ty: &str) -> bool {
    !ty.is_empty()
        && ty
            .split('.')
            .all(|s| !s.is_empty() && s.bytes().all(is_segment_byte))
}

/// Whether `pattern` matches the type `ty` with Jido's `matches?/2`
/// semantics, where `**` matches **zero** or more segments (unlike
/// [`Router::route`], where it needs one or more). An invalid pattern or
/// an unroutable type never matches.
///
/// ```
/// use jido::signal::router::matches;
///
/// assert!(matches("audit.**", "audit"));          // zero segments
/// assert!(matches("user.**.created", "user.created"));
/// assert!(matches("user.*", "user.created"));
/// assert!(!matches("user.*", "user"));
/// assert!(!matches("user..x", "user.x"));          // invalid pattern
/// ```
pub fn matches(pattern: &str, ty: &str) -> bool {
    let pattern = pattern.trim();
    if validate_path(pattern).is_err() || !is_routable(ty) {
        return false;
    }
    let p: Vec<&str> = pattern.split('.').collect();
    let t: Vec<&str> = ty.split('.').collect();
    // can[j] = pattern suffix p[i..] matches type suffix t[j..].
    let mut next = vec![false; t.len() + 1];
    next[t.len()] = true;
    for seg in p.iter().rev() {
        let mut cur = vec![false; t.len() + 1];
        for j in (0..=t.len()).rev() {
            cur[j] = match *seg {
                "**" => next[j] || (j < t.len() && cur[j + 1]),
                "*" => j < t.len() && next[j + 1],
                exact => j < t.len() && t[j] == exact && next[j + 1],
            };
        }
        next = cur;
    }
    next[0]
}

/// FxHash (as in rustc): fast hashing for short segment strings.
#[derive(Default, Clone, Copy)]
struct FxHasher {
    hash: u64,
}

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(FX_SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, mut bytes: &[u8]) {
        while bytes.len() >= 8 {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[..8]);
            self.add(u64::from_le_bytes(word));
            bytes = &bytes[8..];
        }
        if bytes.len() >= 4 {
            let mut word = [0u8; 4];
            word.copy_from_slice(&bytes[..4]);
            self.add(u64::from(u32::from_le_bytes(word)));
            bytes = &bytes[4..];
        }
        for b in bytes {
            self.add(u64::from(*b));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

type FxBuild = BuildHasherDefault<FxHasher>;

struct Entry<T> {
    route: Route<T>,
    seq: u64,
    /// Complexity used for ordering (0 for routes with a match function).
    rank: i64,
}

impl<T: Clone> Clone for Entry<T> {
    fn clone(&self) -> Self {
        Self {
            route: self.route.clone(),
            seq: self.seq,
            rank: self.rank,
        }
    }
}

/// The exact-segment children of a node: a short vector searched in order
/// while there are few (a one-route router of a million agents then takes
/// ~90 bytes per node, not a hash table's ~370), a hash map beyond.
enum Children<T> {
    Few(Vec<(Box<str>, Node<T>)>),
    Many(HashMap<Box<str>, Node<T>, FxBuild>),
}

/// Children kept in a vector up to this many.
const FEW_CHILDREN: usize = 8;

impl<T> Default for Children<T> {
    fn default() -> Self {
        Children::Few(Vec::new())
    }
}

impl<T: Clone> Clone for Children<T> {
    fn clone(&self) -> Self {
        match self {
            Children::Few(v) => Children::Few(v.clone()),
            Children::Many(m) => Children::Many(m.clone()),
        }
    }
}

impl<T> Children<T> {
    fn is_empty(&self) -> bool {
        match self {
            Children::Few(v) => v.is_empty(),
            Children::Many(m) => m.is_empty(),
        }
    }

    fn get(&self, seg: &str) -> Option<&Node<T>> {
        match self {
            Children::Few(v) => v.iter().find(|(k, _)| &**k == seg).map(|(_, n)| n),
            Children::Many(m) => m.get(seg),
        }
    }

    fn get_mut(&mut self, seg: &str) -> Option<&mut Node<T>> {
        match self {
            Children::Few(v) => v.iter_mut().find(|(k, _)| &**k == seg).map(|(_, n)| n),
            Children::Many(m) => m.get_mut(seg),
        }
    }

    fn get_or_default(&mut self, seg: &str) -> &mut Node<T> {
        if let Children::Few(v) = self
            && v.len() >= FEW_CHILDREN
            && !v.iter().any(|(k, _)| &**k == seg)
        {
            *self = Children::Many(std::mem::take(v).into_iter().collect());
        }
        match self {
            Children::Few(v) => {
                let at = match v.iter().position(|(k, _)| &**k == seg) {
                    Some(at) => at,
                    None => {
                        v.reserve_exact(1);
                        v.push((seg.into(), Node::default()));
                        v.len() - 1
                    }
                };
                &mut v[at].1
            }
            Children::Many(m) => m.entry(seg.into()).or_default(),
        }
    }

    fn remove(&mut self, seg: &str) {
        match self {
            Children::Few(v) => v.retain(|(k, _)| &**k != seg),
            Children::Many(m) => {
                m.remove(seg);
            }
        }
    }

    fn values(&self) -> Box<dyn Iterator<Item = &Node<T>> + '_> {
        match self {
            Children::Few(v) => Box::new(v.iter().map(|(_, n)| n)),
            Children::Many(m) => Box::new(m.values()),
        }
    }

    fn into_values(self) -> Vec<Node<T>> {
        match self {
            Children::Few(v) => v.into_iter().map(|(_, n)| n).collect(),
            Children::Many(m) => m.into_values().collect(),
        }
    }
}

struct Node<T> {
    exact: Children<T>,
    star: Option<Box<Node<T>>>,
    globstar: Option<Box<Node<T>>>,
    handlers: Vec<Entry<T>>,
}

impl<T> Default for Node<T> {
    fn default() -> Self {
        Self {
            exact: Children::default(),
            star: None,
            globstar: None,
            handlers: Vec::new(),
        }
    }
}

impl<T: Clone> Clone for Node<T> {
    fn clone(&self) -> Self {
        Self {
            exact: self.exact.clone(),
            star: self.star.clone(),
            globstar: self.globstar.clone(),
            handlers: self.handlers.clone(),
        }
    }
}

impl<T> Node<T> {
    fn is_empty(&self) -> bool {
        self.handlers.is_empty()
            && self.exact.is_empty()
            && self.star.is_none()
            && self.globstar.is_none()
    }

    fn child_mut(&mut self, seg: &str) -> &mut Node<T> {
        match seg {
            "*" => self.star.get_or_insert_with(Box::default),
            "**" => self.globstar.get_or_insert_with(Box::default),
            _ => self.exact.get_or_default(seg),
        }
    }

    /// Collects the entries of routes matching `segs[i..]` from this node.
    /// `memo` records, per `**` node, the lowest segment index from which
    /// it was explored, once a path has passed a first `**` (only then can
    /// a state repeat). Each (node, index) state is explored at most once,
    /// so a route is collected at most once and long types stay linear.
    fn collect<'a>(
        &'a self,
        segs: &[&str],
        i: usize,
        nested: bool,
        out: &mut Matched<'a, T>,
        memo: &mut Option<HashMap<usize, usize, FxBuild>>,
    ) {
        let Some(seg) = segs.get(i) else {
            out.extend(self.handlers.iter());
            return;
        };
        if !self.exact.is_empty()
            && let Some(child) = self.exact.get(seg)
        {
            child.collect(segs, i + 1, nested, out, memo);
        }
        if let Some(child) = &self.star {
            child.collect(segs, i + 1, nested, out, memo);
        }
        if let Some(child) = &self.globstar {
            // `**` consumed segs[i..j] for every j > i: explore (child, j).
            let start = i + 1;
            let mut end = segs.len();
            if nested {
                // The results of (child, j) depend on j only: remember the
                // lowest start explored and skip what was done before.
                let id = &**child as *const Node<T> as usize;
                let memo = memo.get_or_insert_with(HashMap::default);
                match memo.get_mut(&id) {
                    Some(low) if *low <= start => return,
                    Some(low) => {
                        end = *low - 1;
                        *low = start;
                    }
                    None => {
                        memo.insert(id, start);
                    }
                }
            }
            for j in start..=end {
                child.collect(segs, j, true, out, memo);
            }
        }
    }

    fn visit<'a>(&'a self, out: &mut Vec<&'a Entry<T>>) {
        out.extend(self.handlers.iter());
        for child in self.exact.values() {
            child.visit(out);
        }
        if let Some(child) = &self.star {
            child.visit(out);
        }
        if let Some(child) = &self.globstar {
            child.visit(out);
        }
    }

    fn drain_into(self, out: &mut Vec<Entry<T>>) {
        out.extend(self.handlers);
        for child in self.exact.into_values() {
            child.drain_into(out);
        }
        if let Some(child) = self.star {
            child.drain_into(out);
        }
        if let Some(child) = self.globstar {
            child.drain_into(out);
        }
    }

    /// Removes the routes at `segs`; returns how many. Prunes empty nodes.
    fn remove(&mut self, segs: &[&str]) -> usize {
        let Some((first, rest)) = segs.split_first() else {
            let n = self.handlers.len();
            self.handlers.clear();
            return n;
        };
        match *first {
            "*" | "**" => {
                let slot = if *first == "*" {
                    &mut self.star
                } else {
                    &mut self.globstar
                };
                let Some(child) = slot else { return 0 };
                let n = child.remove(rest);
                if child.is_empty() {
                    *slot = None;
                }
                n
            }
            seg => {
                let Some(child) = self.exact.get_mut(seg) else {
                    return 0;
                };
                let n = child.remove(rest);
                if child.is_empty() {
                    self.exact.remove(seg);
                }
                n
            }
        }
    }
}

/// How many segments of a type are split without allocating.
const INLINE_SEGMENTS: usize = 16;

/// Where [`split_segments`] put a type's segments.
enum Split<'a> {
    /// The first `n` entries of the caller's buffer.
    Inline(usize),
    /// More than [`INLINE_SEGMENTS`] segments.
    Heap(Vec<&'a str>),
}

/// Splits a routable type into segments, in one pass over its bytes: into
/// `buf` for up to [`INLINE_SEGMENTS`] segments, into a vector beyond. `None` when a segment is empty or holds other
/// characters than `[a-zA-Z0-9_-]`. The buffer belongs to the caller, so
/// nothing is moved on return.
fn split_segments<'a>(ty: &'a str, buf: &mut [&'a str; INLINE_SEGMENTS]) -> Option<Split<'a>> {
    let bytes = ty.as_bytes();
    let mut n = 0;
    let mut heap: Option<Vec<&'a str>> = None;
    let mut start = 0;
    for end in 0..=bytes.len() {
        if let Some(&b) = bytes.get(end)
            && b != b'.'
        {
            if !is_segment_byte(b) {
                return None;
            }
            continue;
        }
        if end == start {
            return None;
        }
        // Every byte so far is ASCII: any index is a char boundary.
        let seg = ty.get(start..end)?;
        start = end + 1;
        match &mut heap {
            Some(v) => v.push(seg),
            None if n < INLINE_SEGMENTS => {
                buf[n] = seg;
                n += 1;
            }
            None => {
                let mut v = buf.to_vec();
                v.push(seg);
                heap = Some(v);
            }
        }
    }
    Some(match heap {
        Some(v) => Split::Heap(v),
        None => Split::Inline(n),
    })
}

/// Routes signals to targets of type `T`. See the [module docs](self).
pub struct Router<T> {
    root: Node<T>,
    len: usize,
    next_seq: u64,
    /// A route with a `*` or `**` segment was ever added: until then a type
    /// matches by one walk down the exact segments (see
    /// [`Router::matched`]).
    wildcards: bool,
}

impl<T> Default for Router<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> Clone for Router<T> {
    fn clone(&self) -> Self {
        Self {
            root: self.root.clone(),
            len: self.len,
            next_seq: self.next_seq,
            wildcards: self.wildcards,
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Router<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Router")
            .field("routes", &self.list())
            .finish()
    }
}

fn check_route<T>(route: &Route<T>) -> Result<()> {
    validate_path(&route.path)?;
    if route.priority > MAX_PRIORITY {
        return Err(
            Error::configuration("priority value exceeds maximum allowed")
                .with_detail("path", route.path.as_str())
                .with_detail("priority", route.priority)
                .with_detail("max", MAX_PRIORITY),
        );
    }
    if route.priority < MIN_PRIORITY {
        return Err(Error::configuration("priority value below minimum allowed")
            .with_detail("path", route.path.as_str())
            .with_detail("priority", route.priority)
            .with_detail("min", MIN_PRIORITY));
    }
    Ok(())
}

impl<T> Router<T> {
    /// An empty router.
    pub fn new() -> Self {
        Self {
            root: Node::default(),
            len: 0,
            next_seq: 0,
            wildcards: false,
        }
    }

    /// A router holding `routes`, in order.
    ///
    /// # Errors
    ///
    /// The first invalid route's error (see [`add_route`](Router::add_route)).
    pub fn from_routes(routes: impl IntoIterator<Item = Route<T>>) -> Result<Self> {
        let mut router = Self::new();
        router.add_all(routes)?;
        Ok(router)
    }

    /// Adds a route from `path` to `target` with priority 0.
    ///
    /// # Errors
    ///
    /// As [`add_route`](Router::add_route).
    pub fn add(&mut self, path: impl Into<String>, target: T) -> Result<()> {
        self.add_route(Route::new(path, target))
    }

    /// Adds a route. A second route on the same path is kept beside the
    /// first, after it in insertion order.
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::Configuration`](crate::ErrorKind::Configuration)
    /// error: an invalid path (see [`validate_path`]) or a priority outside
    /// [`MIN_PRIORITY`]`..=`[`MAX_PRIORITY`] (`priority value exceeds
    /// maximum allowed`, `priority value below minimum allowed`).
    pub fn add_route(&mut self, route: Route<T>) -> Result<()> {
        check_route(&route)?;
        self.insert(route);
        Ok(())
    }

    /// Adds several routes, all or none.
    ///
    /// # Errors
    ///
    /// The first invalid route's error; the router is then unchanged.
    pub fn add_all(&mut self, routes: impl IntoIterator<Item = Route<T>>) -> Result<()> {
        let routes: Vec<Route<T>> = routes.into_iter().collect();
        for route in &routes {
            check_route(route)?;
        }
        for route in routes {
            self.insert(route);
        }
        Ok(())
    }

    fn insert(&mut self, route: Route<T>) {
        let rank = if route.matcher.is_some() {
            0
        } else {
            complexity(&route.path)
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut node = &mut self.root;
        for seg in route.path.split('.') {
            self.wildcards |= seg == "*" || seg == "**";
            node = node.child_mut(seg);
        }
        if node.handlers.capacity() == 0 {
            // Most paths have one handler; the default first growth (4)
            // would waste ~450 B per route in every agent's router.
            node.handlers.reserve_exact(1);
        }
        node.handlers.push(Entry { route, seq, rank });
        self.len += 1;
    }

    /// Removes every route on `path` (trimmed) and returns how many there
    /// were; a path with no routes (or an invalid one) removes nothing.
    pub fn remove(&mut self, path: &str) -> usize {
        let path = path.trim();
        if validate_path(path).is_err() {
            return 0;
        }
        let segs: Vec<&str> = path.split('.').collect();
        let n = self.root.remove(&segs);
        self.len -= n;
        n
    }

    /// Moves every route of `other` into this router, after the existing
    /// ones and in `other`'s insertion order.
    pub fn merge(&mut self, other: Router<T>) {
        let mut entries = Vec::with_capacity(other.len);
        other.root.drain_into(&mut entries);
        entries.sort_by_key(|e| e.seq);
        for entry in entries {
            self.insert(entry.route);
        }
    }

    /// Every route, in insertion order.
    pub fn list(&self) -> Vec<&Route<T>> {
        let mut entries = Vec::with_capacity(self.len);
        self.root.visit(&mut entries);
        entries.sort_by_key(|e| e.seq);
        entries.into_iter().map(|e| &e.route).collect()
    }

    /// The number of routes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no routes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The routes matching `signal`, in routing order (complexity, then
    /// priority, then insertion). Empty when nothing matches.
    pub fn matching(&self, signal: &Signal) -> Vec<&Route<T>> {
        self.matched(signal).into_iter().map(|e| &e.route).collect()
    }

    /// The entries matching `signal`, in routing order; no allocation for
    /// up to [`INLINE_MATCHES`] of them.
    fn matched(&self, signal: &Signal) -> Matched<'_, T> {
        let mut found = Matched::new();
        if !self.wildcards {
            // Only exact segments: the type's own path is the one place a
            // route can match. No check of the type is needed: a route's
            // segments are valid, so an empty segment or a character
            // outside `[a-zA-Z0-9_-]` finds no child.
            let mut node = &self.root;
            let mut rest = signal.ty();
            loop {
                // By hand: `str::split`'s searcher costs more than the
                // lookups for the usual one to three short segments.
                let end = rest.bytes().position(|b| b == b'.');
                let (seg, next) = match end {
                    Some(end) => (rest.get(..end), rest.get(end + 1..)),
                    None => (Some(rest), None),
                };
                match seg.and_then(|seg| node.exact.get(seg)) {
                    Some(child) => node = child,
                    None => return found,
                }
                match next {
                    Some(next) => rest = next,
                    None => break,
                }
            }
            found.extend(node.handlers.iter().filter(|e| e.route.accepts(signal)));
            sort_matched(&mut found);
            return found;
        }
        let mut buf = [""; INLINE_SEGMENTS];
        let heap;
        let segs: &[&str] = match split_segments(signal.ty(), &mut buf) {
            Some(Split::Inline(n)) => &buf[..n],
            Some(Split::Heap(v)) => {
                heap = v;
                &heap
            }
            None => return found,
        };
        let mut memo = None;
        self.root.collect(segs, 0, false, &mut found, &mut memo);
        found.retain(|e| e.route.accepts(signal));
        sort_matched(&mut found);
        found
    }

    /// [`route`](Router::route) without allocating for up to
    /// [`INLINE_MATCHES`] matches (the runtime routes every signal
    /// through this).
    pub(crate) fn targets(
        &self,
        signal: &Signal,
    ) -> Result<impl ExactSizeIterator<Item = &T> + use<'_, T>> {
        let started = tracing::enabled!(target: "jido::signal::router", tracing::Level::DEBUG)
            .then(std::time::Instant::now);
        let routes = self.matched(signal);
        if let Some(started) = started {
            tracing::debug!(
                name: "jido.signal.router.routed",
                target: "jido::signal::router",
                signal_type = %signal.ty(),
                match_count = routes.len(),
                matched = !routes.is_empty(),
                latency_us = started.elapsed().as_micros() as u64,
                "jido.signal.router.routed"
            );
        }
        if routes.is_empty() {
            return Err(no_route(signal));
        }
        Ok(routes.into_iter().map(|e| &e.route.target))
    }

    /// The targets of every route matching `signal`, in routing order
    /// (complexity, then priority, then insertion).
    ///
    /// # Errors
    ///
    /// An [`ErrorKind::Routing`](crate::ErrorKind::Routing) error `no
    /// matching handlers found for signal`, not retryable, with details
    /// `signal_type` and `reason` (`no_handlers_found`, or
    /// `invalid_signal_type` when the type has an empty segment or a
    /// character outside `[a-zA-Z0-9_-]`).
    pub fn route(&self, signal: &Signal) -> Result<Vec<&T>> {
        self.targets(signal).map(Iterator::collect)
    }
}

/// How many matched routes the router collects without allocating.
const INLINE_MATCHES: usize = 2;

/// Routes matched by one signal.
type Matched<'a, T> = smallvec::SmallVec<[&'a Entry<T>; INLINE_MATCHES]>;

/// Puts matched entries in routing order: complexity (0 for a route with
/// a match function), then priority, then insertion.
fn sort_matched<T>(found: &mut Matched<'_, T>) {
    if found.len() > 1 {
        found.sort_unstable_by(|a, b| {
            b.rank
                .cmp(&a.rank)
                .then(b.route.priority.cmp(&a.route.priority))
                .then(a.seq.cmp(&b.seq))
        });
    }
}

/// The routing error of a signal no route matches.
fn no_route(signal: &Signal) -> Error {
    let reason = if is_routable(signal.ty()) {
        "no_handlers_found"
    } else {
        "invalid_signal_type"
    };
    Error::routing("no matching handlers found for signal")
        .with_detail("signal_type", signal.ty())
        .with_detail("reason", reason)
        .with_detail("retry", false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_split_inline_and_past_the_buffer() {
        let mut buf = [""; INLINE_SEGMENTS];
        assert!(matches!(
            split_segments("a.b_c.d-1", &mut buf),
            Some(Split::Inline(3))
        ));
        assert_eq!(&buf[..3], ["a", "b_c", "d-1"]);
        let long: Vec<String> = (0..20).map(|i| format!("s{i}")).collect();
        let joined = long.join(".");
        match split_segments(&joined, &mut buf) {
            Some(Split::Heap(segs)) => assert_eq!(segs, long),
            _ => panic!("20 segments go to the heap"),
        }
        for bad in ["", ".", "a.", ".a", "a..b", "a.b c", "a.é", "a/b"] {
            assert!(split_segments(bad, &mut buf).is_none(), "{bad:?}");
        }
        // Past the buffer too: an invalid segment after the sixteenth.
        let bad = format!("{joined}.x!");
        assert!(split_segments(&bad, &mut buf).is_none());

        // Routing beyond 16 segments, exact and through `**`.
        let mut router = Router::new();
        router.add_route(Route::new(long.join("."), 1)).unwrap();
        router.add_route(Route::new("s0.**", 2)).unwrap();
        let signal = Signal::new(long.join("."), serde_json::Value::Null);
        assert_eq!(router.route(&signal).unwrap(), [&1, &2]);
    }

    #[test]
    fn complexity_follows_jido() {
        assert_eq!(complexity("**"), 0);
        assert_eq!(complexity("*"), 1000);
        assert_eq!(complexity("a"), 5000);
        // n=2: 4000 + 3000*2 + 3000*1
        assert_eq!(complexity("a.b"), 13000);
        // n=2: 4000 + 6000 - (1000 - 100)
        assert_eq!(complexity("a.*"), 9100);
        // n=2: 4000 + 6000 - (2000 - 200)
        assert_eq!(complexity("a.**"), 8200);
    }

    #[test]
    fn fx_hash_distinguishes_lengths() {
        use std::hash::BuildHasher;
        let b = FxBuild::default();
        assert_ne!(b.hash_one("abcd"), b.hash_one("abcd\0"));
        assert_ne!(b.hash_one("user"), b.hash_one("users"));
        assert_eq!(b.hash_one("order"), b.hash_one(String::from("order")));
    }
}
