//! The named-axis IR: a graph per function (lowered from the checked
//! program by `nax-lower`), with a verifier and a text form that prints
//! and parses back. The IR owns its vocabulary: value types from
//! `nax-values`, sizes in the runtime's frozen `SizeTable`; it links no
//! checker.
//!
//! Architecture invariant: every value in a graph carries its resolved axes
//! (names; sizes as constants or symbols of the graph's table), dtype, kind
//! and range, and the verifier accepts every graph the lowering produces.

pub mod algebra;
mod graph;
mod signature;
pub mod text;
mod verify;

pub use graph::{Graph, Literal, MapFn, Node, Op, Output, Type, value_dtype};
pub use signature::{signature, tensor_spec};
pub use verify::{Problem, verify};
