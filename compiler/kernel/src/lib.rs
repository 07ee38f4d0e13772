//! The kernel IR: loop nests formed once from the named-axis graph, with
//! their parallel, vectorised and reduction loops decided, so that every
//! code generator (LLVM, Cranelift, MLIR, CUDA) lowers from the same
//! structure. Elementwise chains fuse into their consumer's nest; each
//! kernel has an [`Estimate`] of the bytes it moves and its FLOPs.

mod attention;
mod epilogue;
mod form;
mod kernel;
mod product_kernel;
mod rows;
pub mod text;
mod verify;

pub use form::{FormError, FormOptions, form};
pub use kernel::{
    AttentionLoops, Body, Buffer, BufferKind, Estimate, Expr, GemmLoops, Index, Kernel, Loop, Program, Role, RowReduction, STREAM_BLOCK, Schedule, Transpose,
};
pub use product_kernel::ProductKernel;
pub use verify::{Problem, verify};
