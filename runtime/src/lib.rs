//! The nax runtime: what a host application links to call compiled nax code,
//! without the compiler. It is the hub every way of running nax goes
//! through (the JIT, AOT libraries, Python, each device):
//!
//! - what a compiled function is: its [`Signature`] (parameters, weights,
//!   result, the [`SizeTable`] of its symbolic sizes) and, for native code,
//!   its [`NativePlan`] (buffers, and each kernel's strategy), both plain
//!   serialisable values;
//! - the call boundary: arguments borrowed from the caller ([`TensorView`],
//!   any strides, named axes), bound by the rules of LANGUAGE.md section 12
//!   ([`bind`]) and checked ([`Signature::check`]) into a [`CheckedCall`],
//!   the only value that reaches compiled code;
//! - the driver ([`NativeFunction`]): runs a plan's kernels in a thread
//!   pool the caller owns, matrix products and flash attention included;
//! - element types ([`DType`]), host tensors ([`HostTensor`]), and
//!   safetensors I/O with axis names in the `NAME.axes` metadata
//!   ([`read_tensors`], [`write_tensor_atomic`]).
//!
//! Architecture invariant: this crate depends on no part of the compiler;
//! the compiler depends on it for the vocabulary both sides share (dtypes,
//! sizes, host scalar types, kernel indices). Nothing here panics on any
//! input: bad files, shapes, names, views, bindings and plans are
//! [`RuntimeError`]s.

#![warn(missing_docs)]

mod binding;
mod call;
pub mod cpu;
mod driver;
mod dtype;
mod error;
mod function;
mod gemm;
pub mod libm;
mod named;
pub mod plan;
mod safetensors_io;
mod signature;
mod sizes;
mod tensor;
mod threads;
mod view;

pub use binding::{bind, bind_owned};
pub use call::{Arg, CallError, CheckedCall, SizeSource, Subject, Value, Weights};
pub use driver::{CodeOwner, Execute, KernelFn, NativeFunction};
pub use dtype::DType;
pub use error::RuntimeError;
pub use function::Function;
pub use named::{BinaryOp, NamedTensor, Operand};
pub use plan::NativePlan;
pub use safetensors_io::{StoredTensor, read_tensors, read_tensors_in_place, write_tensor_atomic, write_tensors_atomic};
pub use signature::{AxisSpec, HostType, Param, ParamType, Scalar, Signature, TensorSpec, WeightSpec};
pub use sizes::{MAX_SIZE, Size, SizeError, SizeTable, SymDef, SymId, Symbol};
pub use tensor::{HostTensor, TensorData, row_major_strides};
pub use threads::ThreadPool;
pub use view::{Element, TensorMut, TensorView};

/// Helpers shared by the unit tests.
#[cfg(test)]
mod test_support {
    /// Axis names from `"b _ n"` (`_` is unnamed).
    pub fn names(s: &str) -> Vec<Option<String>> {
        s.split_whitespace().map(|n| (n != "_").then(|| n.to_string())).collect()
    }
}
