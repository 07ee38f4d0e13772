//! The LLVM back end's errors: its target, its builder, its optimiser, its
//! object writer and its JIT, each a variant (LLVM's own messages, which
//! it gives as text, kept as text); a failure of the shared lowering stays
//! the shared [`CodegenError`] it is.

use inkwell::builder::BuilderError;
use inkwell::values::InstructionValueError;
use nax_back_native::CodegenError;
use nax_runtime::RuntimeError;

/// Why the LLVM back end failed.
#[derive(Debug, thiserror::Error)]
pub enum LlvmError {
    /// LLVM cannot target the machine it runs on.
    #[error(transparent)]
    NativeTarget(#[from] NativeTargetError),
    /// LLVM has no target for a triple.
    #[error("LLVM has no target for {triple}: {message}")]
    NoTarget { triple: String, message: String },
    /// LLVM cannot make a target machine for a triple and CPU.
    #[error("LLVM cannot make a target machine for {triple} ({cpu})")]
    TargetMachine { triple: String, cpu: String },
    /// Building a kernel's instructions failed (a bug of nax).
    #[error("internal error: LLVM code generation: {0}")]
    Build(#[from] BuilderError),
    /// An instruction's alignment cannot be set (a bug of nax).
    #[error("internal error: LLVM code generation: {0}")]
    Align(#[from] InstructionValueError),
    /// The lowering asked for an operation the emitter has not on these
    /// operands (a bug of nax).
    #[error("internal error: LLVM code generation: {0}")]
    NoOperation(String),
    /// The lowering asked for an intrinsic LLVM does not have (a bug of nax).
    #[error("internal error: LLVM code generation: no intrinsic {0}")]
    NoIntrinsic(String),
    /// The lowering addressed a buffer the kernel has no parameter for (a bug of nax).
    #[error("internal error: LLVM code generation: buffer %{0} is not a parameter of the kernel")]
    NotAParameter(usize),
    /// LLVM returned no instruction for a `freeze`.
    #[error("internal error: LLVM code generation: LLVM could not freeze a value")]
    Freeze,
    /// Something the back end made itself is not where it put it (a bug of nax).
    #[error("internal error: {0}")]
    Missing(&'static str),
    /// The module does not verify (a bug of nax).
    #[error("internal error: the LLVM module does not verify: {0}")]
    Verify(String),
    /// LLVM's optimisation pipeline failed.
    #[error("internal error: LLVM optimisation failed: {0}")]
    Optimise(String),
    /// LLVM cannot write the object file.
    #[error("LLVM cannot write the object file: {0}")]
    Object(String),
    /// LLVM cannot read back the bitcode it wrote (a bug of nax).
    #[error("internal error: LLVM cannot read back its bitcode: {0}")]
    Bitcode(String),
    /// LLVM cannot make a JIT engine.
    #[error("LLVM cannot JIT-compile: {0}")]
    Jit(String),
    /// A kernel the JIT compiled has no address (a bug of nax).
    #[error("internal error: function {index} was not compiled: {message}")]
    Address { index: usize, message: String },
    /// The shared lowering failed.
    #[error(transparent)]
    Lower(#[from] CodegenError),
    /// The runtime refused the compiled function's plan (a bug of nax).
    #[error(transparent)]
    Plan(#[from] RuntimeError),
}

/// LLVM cannot target the machine it runs on (LLVM's reason); found once
/// per process and kept.
#[derive(Clone, Debug, thiserror::Error)]
#[error("LLVM cannot target this machine: {0}")]
pub struct NativeTargetError(pub String);

impl LlvmError {
    /// The error at the back end's boundary: a lowering failure as itself,
    /// any other as the back end's, on `function`'s kernels.
    pub fn into_codegen(self, function: &str) -> CodegenError {
        match self {
            LlvmError::Lower(e) => e,
            other => CodegenError::backend("llvm", function)(other),
        }
    }
}
