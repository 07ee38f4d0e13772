//! The nax front end: source text to a checked program.
//!
//! The pipeline is visible in the modules: [`syntax`] (lexer, parser, syntax
//! tree), [`check`] (shapes, dtypes, kinds, ranges: LANGUAGE.md sections 4 to
//! 10), [`checked`] (the checked program the IR lowering reads) and
//! [`diagnostics`] (error codes and their rendering). The crate links no LLVM
//! or MLIR, so it builds and tests in seconds.
//!
//! Architecture invariant: [`check_source`] never panics, whatever the input,
//! and every diagnostic's span lies inside the source.

pub mod check;
pub mod checked;
pub mod diagnostics;
pub mod syntax;

pub use checked::CheckedModule;
pub use diagnostics::{Code, Diagnostic, Severity, Span};

/// The result of checking one source file.
#[derive(Debug)]
pub struct Checked {
    pub module: CheckedModule,
    /// Errors and warnings, in source order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Checked {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(|d| d.severity() == Severity::Error)
    }
}

/// Parses and checks a source file.
pub fn check_source(source: &str) -> Checked {
    check_source_timed(source).0
}

/// Parses and checks a source file, also giving the time of each stage
/// (parse, check) for `--timings`.
pub fn check_source_timed(source: &str) -> (Checked, [(&'static str, std::time::Duration); 2]) {
    let start = std::time::Instant::now();
    let mut diagnostics = Vec::new();
    let ast = syntax::parse(source, &mut diagnostics);
    let parsed = std::time::Instant::now();
    let module = check::check_module(&ast, &mut diagnostics);
    diagnostics.sort_by_key(|d| (d.span.start, d.span.end));
    let checked = std::time::Instant::now();
    (Checked { module, diagnostics }, [("parse", parsed - start), ("check", checked - parsed)])
}
