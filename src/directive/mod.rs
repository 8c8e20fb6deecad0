//! Directives: effects described as data, executed by the runtime.
//!
//! (The full set of built-in directives is added with the agent layer.)

use crate::error::Error;

/// An effect for the runtime to execute.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub enum Directive {
    /// Hand an error to the agent's error policy.
    Error {
        /// The error.
        error: Error,
        /// Where it happened, e.g. `"instruction"`.
        context: String,
    },
}
