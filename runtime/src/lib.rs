//! The nax runtime: what a host application links to call compiled nax code,
//! without the compiler. It is the hub every way of running nax goes
//! through (the JIT, AOT libraries, Python, each device):
//!
//! - what a compiled function is: its [`Signature`] (parameters, weights,
//!   result, the [`SizeTable`] of its symbolic sizes) and, for native code,
//!   its [`NativePlan`] (buffers, and each kernel's strategy), both plain
//!   serialisable values;
//! - the call boundary: arguments borrowed from the caller ([`TensorView`],
//!   any strides, named axes), bound by name by the rules of the host boundary
//!   ([`bind`]) and checked ([`CallBoundary::check`]) into a [`CheckedCall`],
//!   the only value that reaches compiled code;
//! - the driver ([`NativeFunction`]): runs a plan's kernels in a thread
//!   pool the caller owns, matrix products and flash attention included;
//! - the host data it takes and gives (host tensors, views, safetensors
//!   files: crate `nax-host`, below it) and the contract's dtypes and sizes
//!   (`nax-contract`), re-exported here so that a host needs one crate.
//!
//! Architecture invariant: this crate depends on no part of the compiler;
//! the compiler depends on it for the vocabulary both sides share (host
//! scalar types, signatures, the plan's kernel indices; dtypes and sizes
//! are `nax-contract`'s, below both, re-exported here). Nothing here panics on any
//! input: bad bindings, calls and plans are [`RuntimeError`]s (bad files,
//! shapes, names and views are `nax-host`'s [`HostError`]s, which it wraps).

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
mod sharded;
mod threads;

pub use binding::{bind, bind_owned, binding_order};
pub use call::{Arg, CallBoundary, CheckedCall, Value, check_work};
pub use driver::{CodeOwner, Execute, NativeFunction};
pub use error::{CallError, CollectiveError, MAX_ITERATIONS, RuntimeError, SizeSource, Subject};
pub use function::Function;
pub use gemm::matrix_tiles;
pub use nax_contract::DType;
pub use nax_contract::plan;
pub use nax_contract::plan::{KernelFn, MalformedPlan, NativePlan};
pub use nax_contract::{AxisSpec, HostType, Param, ParamType, ResultSpec, Scalar, Signature, TensorSpec, WeightSpec};
pub use nax_contract::{MAX_SIZE, Size, SizeError, SizeTable, SymDef, SymId, Symbol, clipped_position};
pub use nax_host::{
    AxisBlock, Element, HostError, HostTensor, StoredTensor, TensorData, TensorFile, TensorMut, TensorView, read_tensors, read_tensors_in_place,
    row_major_strides, shortened, shown_names, write_tensor_atomic, write_tensors_atomic,
};
pub use packed::{BoundWeights, PackedWeights, Weights};
pub use sharded::{
    Collectives, Group, ShardedFunction, ShardedResult, mesh_coordinates, rank_weights, read_block, read_rank_weights, reduce_scatter_by_all_reduce,
};
pub use threads::{MAX_THREADS, ThreadPool};

/// Helpers shared by the unit tests.
#[cfg(test)]
mod test_support {
    /// Axis names from `"b _ n"` (`_` is unnamed).
    pub fn names(s: &str) -> Vec<Option<String>> {
        s.split_whitespace().map(|n| (n != "_").then(|| n.to_string())).collect()
    }
}
