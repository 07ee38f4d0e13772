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
//! the compiler depends on it for the vocabulary both sides share (host
//! scalar types, signatures, the plan's kernel indices; dtypes and sizes
//! are `nax-contract`'s, below both, re-exported here). Nothing here panics on any
//! input: bad files, shapes, names, views, bindings and plans are
//! [`RuntimeError`]s.

#![warn(missing_docs)]

mod binding;
mod call;
pub mod cuda;
mod driver;
mod error;
mod function;
mod gemm;
pub mod libm;
pub mod memory;
mod packed;
pub mod plan;
mod safetensors_io;
mod signature;
pub mod strided;
mod tensor;
mod threads;
mod view;

pub use binding::{bind, bind_owned};
pub use call::{Arg, CheckedCall, Value, check_work};
pub use driver::{CodeOwner, Execute, NativeFunction};
pub use error::{CallError, MAX_ITERATIONS, RuntimeError, SizeSource, Subject, shortened, shown_names};
pub use function::Function;
pub use gemm::matrix_tiles;
pub use nax_contract::DType;
pub use nax_contract::{MAX_SIZE, Size, SizeError, SizeTable, SymDef, SymId, Symbol, clipped_position};
pub use packed::{BoundWeights, PackedWeights, Weights};
pub use plan::KernelFn;
pub use plan::NativePlan;
pub use safetensors_io::{StoredTensor, read_tensors, read_tensors_in_place, write_tensor_atomic, write_tensors_atomic};
pub use signature::{AxisSpec, HostType, Param, ParamType, ResultSpec, Scalar, Signature, TensorSpec, WeightSpec};
pub use tensor::{HostTensor, TensorData, row_major_strides};
pub use threads::{MAX_THREADS, ThreadPool};
pub use view::{Element, TensorMut, TensorView};

/// Helpers shared by the unit tests.
#[cfg(test)]
mod test_support {
    /// Axis names from `"b _ n"` (`_` is unnamed).
    pub fn names(s: &str) -> Vec<Option<String>> {
        s.split_whitespace().map(|n| (n != "_").then(|| n.to_string())).collect()
    }

    use std::path::PathBuf;

    /// A fresh empty directory under the system's temporary directory.
    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> TempDir {
            static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            let dir =
                std::env::temp_dir().join(format!("nax_runtime_{tag}_{}_{}_{nanos}", std::process::id(), N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        pub fn path(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }

        pub fn entries(&self) -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(&self.0).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
            v.sort();
            v
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
