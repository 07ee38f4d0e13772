//! The Cranelift back end's errors: its settings and host, its module
//! (declaring, compiling and linking functions), each a variant with
//! Cranelift's own error kept; a failure of the shared lowering stays the
//! shared [`CodegenError`] it is.

use cranelift_codegen::settings::SetError;
use cranelift_module::ModuleError;
use nax_back_native::CodegenError;
use nax_runtime::RuntimeError;

/// Why the Cranelift back end failed.
#[derive(Debug, thiserror::Error)]
pub enum CraneliftError {
    /// A Cranelift setting nax gives is refused (a bug of nax).
    #[error("internal error: the Cranelift setting {name}={value}: {error}")]
    Setting { name: &'static str, value: &'static str, error: SetError },
    /// Cranelift does not support the machine it runs on.
    #[error("Cranelift does not support this host: {0}")]
    Host(String),
    /// The host's pointers are not 64 bits wide.
    #[error("the Cranelift back end needs a 64-bit host, not {0}")]
    NotSixtyFourBits(String),
    /// A math function the lowering may call has no implementation (a bug of nax).
    #[error("internal error: no implementation of `{0}`")]
    NoMath(&'static str),
    /// Cranelift's module failed while nax was `doing` something.
    #[error("internal error: Cranelift failed {doing}: {error}")]
    Module { doing: String, error: Box<ModuleError> },
    /// Cranelift rejected a function nax built (a bug of nax), with its
    /// verifier's report on the function.
    #[error("internal error: Cranelift rejected {name}: {report}")]
    Rejected { name: String, report: String },
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

impl CraneliftError {
    /// The module's `error` while `doing` something.
    pub fn module(doing: impl Into<String>) -> impl FnOnce(ModuleError) -> CraneliftError {
        let doing = doing.into();
        move |error| CraneliftError::Module { doing, error: Box::new(error) }
    }

    /// The error at the back end's boundary: a lowering failure as itself,
    /// any other as the back end's, on `function`'s kernels.
    pub fn into_codegen(self, function: &str) -> CodegenError {
        match self {
            CraneliftError::Lower(e) => e,
            other => CodegenError::backend("cranelift", function)(other),
        }
    }
}
