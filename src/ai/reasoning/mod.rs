//! Jido's reasoning strategies beside ReAct: Chain of Thought, Chain of
//! Draft, Algorithm of Thoughts, Tree of Thoughts, Graph of Thoughts, TRM
//! and Adaptive, each a pure state machine ([`machine::Machine`]) driven
//! by the AI directives.

pub mod adaptive;
pub mod aot;
pub mod cot;
pub mod got;
pub mod machine;
pub mod parse;
pub mod tot;
pub mod trm;
