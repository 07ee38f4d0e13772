//! The core shared by nax's native back ends (LLVM, MLIR, Cranelift, and
//! MLIR's CUDA kernels): the [`Emitter`] interface a code generator
//! implements, the kernel lowering, the matrix-product microkernel and the
//! vector math written once against it (with f64 math of its own for
//! targets without a C math library), and the size slots and
//! plan of a program that the runtime's driver runs the compiled kernels
//! by (`nax_runtime::NativeFunction`).

mod bounds;
mod emitter;
mod lower;
pub mod math;
mod microkernel;
mod plan;
mod share;
mod wide;

pub use emitter::{Binary, Compare, Emitter, Kind, Unary};
pub use lower::{driver_values, lower_kernel};
pub use microkernel::lower_microkernel;
pub use nax_runtime::libm::NAMES as LIBM;
pub use plan::Slots;
pub use share::{Parameters, Sharing};

/// A code generator's own error (LLVM's, MLIR's, Cranelift's), kept as
/// its type: [`CodegenError::Backend`] shows it and gives it back by
/// downcasting.
pub type BackendFailure = std::sync::Arc<dyn std::error::Error + Send + Sync>;

/// Why code generation failed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum CodegenError {
    /// A kernel does not have the form its schedule needs (a bug of nax).
    #[error("internal error: kernel {kernel} of `{function}` does not have the form its schedule needs")]
    Plan { function: String, kernel: usize },
    /// A kernel would access a buffer as elements of another kind than its
    /// own (a bug of nax: its offsets would not measure what it touches).
    #[error("internal error: kernel {kernel} of `{function}` would access buffer {buffer} of {expected} elements as {accessed}")]
    Access { function: String, kernel: usize, buffer: usize, expected: String, accessed: String },
    /// The code generator, its engine or its target failed on `function`'s kernels.
    #[error("{error}")]
    Backend { backend: &'static str, function: String, error: BackendFailure },
}

impl CodegenError {
    /// A failure of `backend` on the kernels of `function`, with its own error.
    pub fn backend<E: std::error::Error + Send + Sync + 'static>(backend: &'static str, function: &str) -> impl FnOnce(E) -> CodegenError {
        let function = function.to_string();
        move |error| CodegenError::Backend { backend, function, error: std::sync::Arc::new(error) }
    }
}

/// Functions `0..count` split round-robin into one part per thread of the
/// current rayon pool (at most `count` parts, at least one): what a back
/// end builds and compiles in parallel, one module per part.
pub fn per_thread(count: usize) -> Vec<Vec<usize>> {
    let threads = rayon::current_num_threads().clamp(1, count.max(1));
    (0..threads).map(|t| (t..count).step_by(threads).collect()).collect()
}
