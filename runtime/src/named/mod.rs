//! Named tensors at run time: [`NamedTensor`], a host tensor with optional
//! coordinate labels per axis, and its eager pointwise arithmetic and
//! comparisons, which line operands up by name, by position and by label
//! as LANGUAGE.md section 12 says. The rules and the examples below are
//! the user documentation, `docs/src/named-tensors.md`, included here so that
//! its examples run as doctests.
//!
//! The pieces: `named_tensor` (the type and its invariants), `alignment`
//! (the pairing rules), `element` (torch's arithmetic per element type),
//! `kernel` (the vectorised, tiled and parallel loops) and `pointwise` (the
//! ops that tie them together).
//!
#![doc = include_str!("../../../docs/src/named-tensors.md")]

mod alignment;
mod element;
mod kernel;
mod named_tensor;
mod pointwise;
#[cfg(test)]
mod reference_tests;

pub use alignment::Operand;
pub(crate) use kernel::{Geometry, pointwise};
pub use named_tensor::NamedTensor;
pub use pointwise::BinaryOp;
