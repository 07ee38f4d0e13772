//! nax's host data: what a program reads and writes on the host, apart
//! from running it.
//!
//! - host tensors ([`HostTensor`]): a dtype, a shape, a name or none per
//!   axis, contiguous elements;
//! - views of a caller's memory ([`TensorView`], any strides, named axes,
//!   bounds checked when made) and the buffers a call writes into
//!   ([`TensorMut`]);
//! - the strided pointwise kernel ([`strided`]) a view's copy and the eager
//!   named tensors (`nax-named`) share;
//! - safetensors files with axis names in the `NAME.axes` metadata
//!   ([`read_tensors`], [`write_tensor_atomic`]);
//! - their errors ([`HostError`]), each naming the file, tensor, axis or
//!   shape.
//!
//! Below the runtime (which binds these to a function's parameters and
//! runs calls) and the eager named tensors; above only the contract's
//! dtypes. Nothing here panics on any input.

#![warn(missing_docs)]

mod error;
mod safetensors_io;
pub mod strided;
mod tensor;
mod view;

pub use error::{HostError, shortened, shown_names};
pub use nax_contract::DType;
pub use safetensors_io::{AxisBlock, StoredInfo, StoredTensor, TensorFile, read_tensors, read_tensors_in_place, write_tensor_atomic, write_tensors_atomic};
pub use tensor::{HostTensor, TensorData, row_major_strides};
pub use view::{Element, TensorMut, TensorView, row_major_steps};

/// Helpers shared by the unit tests.
#[cfg(test)]
mod test_support {
    /// Axis names from `"b _ n"` (`_` is unnamed).
    pub fn names(s: &str) -> Vec<Option<String>> {
        s.split_whitespace().map(|n| (n != "_").then(|| n.to_string())).collect()
    }
}
