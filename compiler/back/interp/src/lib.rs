//! The reference interpreter (`--backend interp`): simple, obviously correct
//! code over the named-axis graph, the oracle every other back end is
//! compared with.

mod backend;
mod eval;
mod value;

pub use backend::Interpreter;
