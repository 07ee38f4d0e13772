//! The nax runtime: what a host application links to call compiled nax code,
//! without the compiler. Today: element types ([`DType`]), named host
//! tensors ([`HostTensor`]), the binding rules of the host boundary
//! (LANGUAGE.md section 12, [`bind`]), and safetensors I/O with axis names in
//! the `NAME.axes` metadata ([`read_tensors`], [`write_tensor_atomic`]).
//!
//! Architecture invariant: this crate depends on no part of the compiler;
//! the compiler depends on it for the types both sides share. Nothing here
//! panics on any input: bad files, shapes, names and bindings are
//! [`RuntimeError`]s.

#![warn(missing_docs)]

mod binding;
mod dtype;
mod error;
mod named;
mod safetensors_io;
mod tensor;

pub use binding::bind;
pub use dtype::DType;
pub use error::RuntimeError;
pub use named::{BinaryOp, NamedTensor, Operand};
pub use safetensors_io::{read_tensors, write_tensor_atomic};
pub use tensor::{row_major_strides, HostTensor, TensorData};

/// Helpers shared by the unit tests.
#[cfg(test)]
mod test_support {
    /// Axis names from `"b _ n"` (`_` is unnamed).
    pub fn names(s: &str) -> Vec<Option<String>> {
        s.split_whitespace().map(|n| (n != "_").then(|| n.to_string())).collect()
    }
}
