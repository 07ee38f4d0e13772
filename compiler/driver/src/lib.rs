//! nax as a library: the one compilation pipeline ([`pipeline`]) that the
//! `nax` command, the benchmarks and the tests go through, and the API for
//! host applications that JIT-compile nax programs ([`Engine`] ->
//! [`Program`] -> [`Function`]) and call them with named host tensors.
//!
//! Everything a call needs at run time (signatures, the call-boundary
//! check, the driver, thread pools, host tensors and views) is the
//! runtime's (`nax-runtime`, re-exported here), which a host that only
//! runs ahead-of-time compiled code links alone.

pub mod aot;
mod backward;
pub mod emit;
mod engine;
mod error;
pub mod pipeline;
mod timings;

pub use engine::{Engine, Function, Program, ShardedFunction};
pub use error::{Error, StageError, diagnostics_json};
pub use nax_contract::shard::{Mesh, MeshError, ReduceOp, ShardedPlan, Sharding};
pub use nax_runtime::{
    Arg, CallBoundary, DType, HostError, HostTensor, HostType, MAX_THREADS, Param, ParamType, RuntimeError, Scalar, Signature, Size, TensorData, TensorMut,
    TensorSpec, TensorView, ThreadPool, Value, bind, bind_owned, read_tensors, write_tensor_atomic, write_tensors_atomic,
};
pub use nax_runtime::{CollectiveError, Collectives, Group, ShardedResult};
pub use nax_shard::ShardError;
pub use pipeline::Backend;
pub use timings::Timings;
