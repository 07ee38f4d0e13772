//! The reference interpreter (`--backend interp`): simple, obviously correct
//! code over the named-axis graph, the oracle every other back end is
//! compared with.

mod eval;
mod value;

pub use eval::{evaluate, Sizes};
pub use value::{Data, Value};
