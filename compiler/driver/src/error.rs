//! The errors of the pipeline and of the host API: a program that does not
//! check (its rendered diagnostics), a function that does not exist, a
//! stage that failed (internal errors name the stage), and the runtime's
//! errors at the call boundary.

use nax_front::Diagnostic;
use nax_front::diagnostics::LineIndex;
use nax_runtime::RuntimeError;
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
    #[error("{message}")]
    Compile {
        /// The stage: `lower`, `rewrite`, `kernels`, `codegen`.
        stage: &'static str,
        /// What went wrong.
        message: String,
    },
    /// Packaging an AOT library failed: files could not be written, or
    /// the system's C compiler could not link.
    #[error("{message}")]
    Link {
        /// What went wrong.
        message: String,
    },
    /// The runtime refused a call, a tensor or a file.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

impl Error {
    /// A failure of `stage` with this message.
    pub(crate) fn stage(stage: &'static str) -> impl FnOnce(String) -> Error {
        move |message| Error::Compile { stage, message }
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
