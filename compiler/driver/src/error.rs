//! The errors of the pipeline and of the host API: a program that does not
//! check (its rendered diagnostics), a function that does not exist, a
//! stage that failed (internal errors name the stage), and the runtime's
//! errors at the call boundary.

use nax_front::Diagnostic;
use nax_front::diagnostics::LineIndex;
use nax_runtime::{HostError, RuntimeError};
use serde_json::{Value, json};

/// An error of nax as a library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The source has errors: the diagnostics, and their text rendered the
    /// way `nax check` prints them.
    #[error("{rendered}")]
    Diagnostics {
        /// Every diagnostic (errors and warnings), in source order.
        diagnostics: Vec<Diagnostic>,
        /// Their rendering, with source snippets.
        rendered: String,
    },
    /// No function of this name in the module.
    #[error("no function `{name}` in the module (functions: {})", .available.join(", "))]
    UnknownFunction {
        /// The name asked for.
        name: String,
        /// The module's functions.
        available: Vec<String>,
    },
    /// A stage of the compiler failed: lowering (an unsupported construct,
    /// a graph too large), rewriting, kernel formation or code generation.
    /// Messages that begin `internal error:` are bugs of nax.
    #[error("{error}")]
    Compile {
        /// The stage: `lower`, `rewrite`, `kernels`, `codegen`, `emit`, `link`.
        stage: &'static str,
        /// What went wrong, as the stage's own error.
        error: StageError,
    },
    /// Packaging an AOT library failed: files could not be written, or
    /// the system's C compiler could not link.
    #[error("{message}")]
    Link {
        /// What went wrong.
        message: String,
    },
    /// A tensor given as a weight does not fit the weight's declared type
    /// (its dtype, rank or a constant size), found when it is bound.
    #[error("weight `{name}`: {problem}")]
    Weight {
        /// The weight.
        name: String,
        /// What does not fit, with both sides.
        problem: String,
    },
    /// A backward function was asked of a function that has none: no
    /// float result, or a name that is not a float tensor parameter or
    /// weight of it.
    #[error("no backward function of `{function}`: {problem}")]
    NotDifferentiable {
        /// The function.
        function: String,
        /// Why.
        problem: String,
    },
    /// An artifact that cannot be made as asked (`nax build --emit`).
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// A function cannot be split over a mesh as asked (SHARDING.md): a
    /// size the mesh axis does not divide, two axes of one value on one
    /// mesh axis, a name the module does not have, a mesh or sharding
    /// written wrong.
    #[error(transparent)]
    Shard(#[from] nax_shard::ShardError),
    /// One function of a library built split over a mesh cannot be split
    /// as asked (a library splits every function of its module).
    #[error("`{function}` cannot be split as asked: {source}")]
    SplitFunction {
        /// The function.
        function: String,
        /// Why.
        source: Box<Error>,
    },
    /// The runtime refused a call, a tensor or a file.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The error an earlier attempt met, kept (a function that failed to
    /// compile fails the same way at every use).
    #[error(transparent)]
    Shared(std::sync::Arc<Error>),
}

/// Host data the runtime refused (a file of weights, a tensor) is the
/// runtime's refusal: one variant, [`Error::Runtime`], for both.
impl From<HostError> for Error {
    fn from(e: HostError) -> Error {
        Error::Runtime(e.into())
    }
}

/// Why a stage of the compiler failed: each stage's own error type.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StageError {
    /// Lowering the checked program to a graph.
    #[error(transparent)]
    Lower(#[from] nax_lower::LowerError),
    /// Rewriting the graph.
    #[error(transparent)]
    Optimize(#[from] nax_passes::OptimizeError),
    /// Forming kernels.
    #[error(transparent)]
    Form(#[from] nax_kernel::FormError),
    /// Generating code.
    #[error(transparent)]
    Codegen(#[from] nax_back_native::CodegenError),
    /// Writing PyTorch code.
    #[error(transparent)]
    Emit(#[from] nax_back_torch::EmitError),
    /// A graph (as lowered, or rewritten) does not verify (a bug of nax):
    /// every problem found.
    #[error("internal error: the {what} of `{function}` does not verify: {}", joined(.problems))]
    VerifyGraph { what: &'static str, function: String, problems: Vec<nax_ir::Problem> },
    /// Formed kernels do not verify (a bug of nax): every problem found.
    #[error("internal error: the kernels of `{function}` do not verify: {}", joined(.problems))]
    VerifyKernels { function: String, problems: Vec<nax_kernel::Problem> },
    /// The plans or the manifest of a library do not serialise (a bug of nax).
    #[error("internal error: the {what} do not serialise: {message}")]
    Serialise { what: &'static str, message: String },
}

/// An artifact that cannot be made as asked, found before any work.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    /// PTX for the CPU.
    #[error("--emit ptx is GPU code: add --target cuda")]
    PtxForCpu,
    /// A CPU artifact for the GPU.
    #[error("--emit so, obj and llvm-ir are CPU code; for --target cuda, --emit ptx (or mlir) writes the kernels")]
    CpuCodeForGpu,
    /// A CPU artifact from another back end than LLVM.
    #[error("--emit so, obj and llvm-ir come from the llvm back end (--backend llvm)")]
    NotLlvm,
    /// A library's output path that is not `DIR/libNAME.so`.
    #[error(transparent)]
    LibraryName(#[from] LibraryNameError),
}

/// Why a path or a name is not a library's (`DIR/libNAME.so`, NAME a C
/// identifier that no runtime symbol starts with).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LibraryNameError {
    /// The file is not named `libNAME.so`.
    #[error("the output of --emit so must be named libNAME.so (NAME a C identifier), not `{}`", .0.display())]
    NotLibName(std::path::PathBuf),
    /// NAME is not a C identifier.
    #[error("the library name `{0}` (from libNAME.so) must be a C identifier: letters, digits and `_`, not starting with a digit")]
    NotIdentifier(String),
    /// NAME starts as the runtime's symbols do.
    #[error("the library name `{name}` is reserved: names starting `{prefix}` are the runtime's")]
    Reserved { name: String, prefix: &'static str },
    /// NAME is a system library's.
    #[error("the library name `{0}` is a system library's (lib{0}.so): linking with -l{0} would find one or the other; choose another name")]
    System(String),
}

/// Problems, `; ` between them.
fn joined<P: std::fmt::Display>(problems: &[P]) -> String {
    problems.iter().map(P::to_string).collect::<Vec<_>>().join("; ")
}

impl Error {
    /// A failure of `stage` with that stage's error.
    pub(crate) fn stage<E: Into<StageError>>(stage: &'static str) -> impl FnOnce(E) -> Error {
        move |error| Error::Compile { stage, error: error.into() }
    }
}

/// Diagnostics as the JSON objects of CLI.md (`nax check --format json`):
/// code, severity, the 1-based start and end lines and columns in
/// `source`, and the message.
pub fn diagnostics_json(source: &str, diagnostics: &[Diagnostic]) -> Vec<Value> {
    let lines = LineIndex::new(source);
    diagnostics
        .iter()
        .map(|d| {
            let (line, column) = lines.line_col(d.span.start);
            let (end_line, end_column) = lines.line_col(d.span.end);
            json!({
                "code": d.code.as_str(),
                "severity": d.severity().as_str(),
                "line": line, "column": column,
                "end_line": end_line, "end_column": end_column,
                "message": d.message,
            })
        })
        .collect()
}
