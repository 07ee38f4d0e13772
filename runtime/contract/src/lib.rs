//! What the compiler and the runtime agree on, below both: the element
//! types ([`DType`]), symbolic sizes and the size table a compiled
//! function carries ([`SizeTable`], solved at each call), what a compiled
//! function takes and gives ([`Signature`]), the plan its native code runs
//! by ([`plan`]: buffers, kernels, each one's strategy), one program over
//! several processes ([`shard`]: the mesh, the sharding, the exchanges and
//! a rank's plan), and the
//! description of the machine code runs on ([`machine`]), read by kernel
//! formation, every back end, the ahead-of-time libraries' feature check
//! and the runtime's dispatch of its products. Nothing here compiles or
//! runs a program; it has no dependency on a compiler crate or a code
//! generator.

mod dtype;
pub mod machine;
pub mod plan;
pub mod shard;
mod signature;
mod sizes;

pub use dtype::DType;
pub use machine::{Feature, Features, Machine, NAMED_CPUS, NamedCpu, Processor, UnknownCpu};
pub use signature::{AxisSpec, HostType, Param, ParamType, ResultSpec, Scalar, Signature, TensorSpec, WeightSpec};
pub use sizes::{MAX_SIZE, Size, SizeError, SizeTable, SymDef, SymId, Symbol, clipped_position};
