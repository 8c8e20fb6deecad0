//! The agent state's value type: JSON whose objects and arrays are shared
//! between clones, so a snapshot is O(1) and a write copies only what it
//! changes (see `docs/benchmarks.md`, "Agent state representation").

mod serde_impl;
mod value;

pub use value::{StateArray, StateIndex, StateMap, StateValue};
