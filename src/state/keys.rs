//! The reserved keys of an agent state: the runtime and the strategies
//! keep their own data under them.

use super::StateMap;

/// Reserved state key holding the strategy's own state.
pub const STRATEGY_KEY: &str = "__strategy__";
/// Reserved state key holding the parent reference (`{id, tag, meta}`),
/// written by the runtime while the agent has a live parent.
pub const PARENT_KEY: &str = "__parent__";
/// Reserved state key holding the former parent reference after the
/// parent died and the agent continued as an orphan.
pub const ORPHANED_FROM_KEY: &str = "__orphaned_from__";
/// Every reserved state key. Strict validation keeps them.
pub const RESERVED_KEYS: [&str; 3] = [STRATEGY_KEY, PARENT_KEY, ORPHANED_FROM_KEY];

/// The id of the live parent recorded in an agent state (`__parent__.id`),
/// if any.
pub fn parent_id_of(state: &StateMap) -> Option<&str> {
    state
        .get(PARENT_KEY)?
        .get("id")?
        .as_str()
        .filter(|id| !id.is_empty())
}
