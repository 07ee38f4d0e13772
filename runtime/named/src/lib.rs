//! Named tensors at run time: [`NamedTensor`], a host tensor with optional
//! coordinate labels per axis, and its eager pointwise arithmetic and
//! comparisons, which line operands up by name, by position and by label
//! as LANGUAGE.md section 12 says. The rules and the examples below are
//! the user documentation, `docs/src/named-tensors.md`, included here so that
//! its examples run as doctests.
//!
//! The pieces: `named_tensor` (the type and its invariants), `alignment`
//! (the pairing rules), `element` (torch's arithmetic per element type),
//! `pointwise` (the ops, on the runtime's vectorised, tiled and parallel
//! loops, `nax_host::strided`) and `error` ([`NamedError`]). A crate of
//! its own: the Python package and Rust hosts use it; the runtime that
//! runs compiled code does not.
//!
#![doc = include_str!("../../../docs/src/named-tensors.md")]

mod alignment;
mod element;
mod error;
mod named_tensor;
mod pointwise;
#[cfg(test)]
mod reference_tests;

pub use error::NamedError;
pub use error::Operand;
pub use named_tensor::NamedTensor;
pub use nax_host::{DType, HostTensor};
pub use pointwise::BinaryOp;

/// Helpers shared by the unit tests.
#[cfg(test)]
mod test_support {
    /// Axis names from `"b _ n"` (`_` is unnamed).
    pub fn names(s: &str) -> Vec<Option<String>> {
        s.split_whitespace().map(|n| (n != "_").then(|| n.to_string())).collect()
    }
}
