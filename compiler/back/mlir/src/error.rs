//! The MLIR back end's errors: parsing and verifying its modules, the
//! rewrite of nax's dialect and the pass pipelines, PTX, the execution
//! engine; each with the diagnostics MLIR reported while it ran. A failure
//! of the shared lowering stays the shared [`CodegenError`] it is.

use nax_back_native::CodegenError;
use nax_runtime::RuntimeError;

/// Why the MLIR back end failed. `reported` is what MLIR's diagnostic
/// handler collected, one diagnostic per line.
#[derive(Debug, thiserror::Error)]
pub enum MlirError {
    /// nax's IRDL dialect does not parse (a bug of nax).
    #[error("internal error: nax's IRDL dialect does not parse: {reported}")]
    DialectParse { reported: String },
    /// nax's IRDL dialect does not load (a bug of nax).
    #[error("internal error: nax's IRDL dialect does not load: {reported}")]
    DialectLoad { reported: String },
    /// The kernels' MLIR does not parse (a bug of nax).
    #[error("internal error: the MLIR of the kernels does not parse: {reported}")]
    Parse { reported: String },
    /// The kernels' MLIR does not verify (a bug of nax).
    #[error("internal error: the MLIR of the kernels does not verify: {reported}")]
    Verify { reported: String },
    /// Rewriting nax's ops to the LLVM dialect failed (a bug of nax).
    #[error("internal error: lowering nax's dialect: {error}: {reported}")]
    Rewrite { error: melior::Error, reported: String },
    /// A pass pipeline does not parse (a bug of nax).
    #[error("internal error: the MLIR pipeline: {0}")]
    Pipeline(melior::Error),
    /// A pass pipeline failed on the module.
    #[error("internal error: the MLIR pipeline failed: {error}: {reported}")]
    Passes { error: melior::Error, reported: String },
    /// Kernels formed for a GPU that use the CPU runtime's products (a bug of nax).
    #[error("internal error: kernels for a GPU use the runtime's matrix products")]
    GpuProducts,
    /// GPU kernels asked to run on the host (a bug of nax).
    #[error("internal error: GPU kernels are compiled to PTX (`ptx`), not for the host")]
    GpuOnHost,
    /// Math functions a GPU has no implementation of.
    #[error(
        "internal error: the CUDA target cannot compute {}: a GPU has no C math library, and nax's own math has no such function",
        .functions.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
    )]
    NoGpuMath { functions: Vec<String> },
    /// The GPU pipeline left no PTX (a bug of nax).
    #[error("internal error: MLIR made no PTX: {reported}")]
    NoPtx { reported: String },
    /// The execution engine rejected the module (a bug of nax).
    #[error("internal error: MLIR's execution engine rejected the module (it does not translate to LLVM IR): {reported}")]
    Engine { reported: String },
    /// The execution engine has no such function (a bug of nax).
    #[error("internal error: MLIR's execution engine has no function `{0}`")]
    NoFunction(String),
    /// Something the back end made itself is not where it put it (a bug of nax).
    #[error("internal error: {0}")]
    Missing(&'static str),
    /// The shared lowering failed.
    #[error(transparent)]
    Lower(#[from] CodegenError),
    /// The runtime refused the compiled function's plan (a bug of nax).
    #[error(transparent)]
    Plan(#[from] RuntimeError),
}

impl MlirError {
    /// The error at the back end's boundary: a lowering failure as itself,
    /// any other as the back end's, on `function`'s kernels.
    pub fn into_codegen(self, function: &str) -> CodegenError {
        match self {
            MlirError::Lower(e) => e,
            other => CodegenError::backend("mlir", function)(other),
        }
    }
}
