//! The agent state's value type: JSON whose objects and arrays are shared
//! between clones, so a snapshot is O(1) and a write copies only what it
//! changes (see `docs/benchmarks.md`, "Agent state representation"),
//! the operations that edit it ([`StateOp`], [`deep_merge`]) and the keys an
//! agent state reserves ([`STRATEGY_KEY`], [`PARENT_KEY`], …).

mod keys;
mod lazy;
mod ops;
mod serde_impl;
mod value;

pub use keys::{ORPHANED_FROM_KEY, PARENT_KEY, RESERVED_KEYS, STRATEGY_KEY, parent_id_of};
pub use lazy::{LazyValue, StateSource};
pub use ops::{StateOp, apply_state_op, deep_merge};
pub(crate) use value::MapMark;
pub use value::{StateArray, StateIndex, StateMap, StateValue};
