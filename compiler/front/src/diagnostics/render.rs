//! Rendering diagnostics: rustc-style text through `codespan-reporting`, and
//! line/column positions for the JSON form.

use super::{Diagnostic, Severity};
use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label as CsLabel};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term;

/// Renders diagnostics as rustc does (snippets, underlines, labels), without colour.
pub fn render_text(file_name: &str, source: &str, diagnostics: &[Diagnostic]) -> String {
    let file = SimpleFile::new(file_name, source);
    let config = term::Config::default();
    let mut out = String::new();
    for d in diagnostics {
        let mut labels = vec![CsLabel::primary((), clamp(d.span, source)).with_message(&d.primary_label)];
        for l in &d.labels {
            labels.push(CsLabel::secondary((), clamp(l.span, source)).with_message(&l.message));
        }
        let cs = match d.severity() {
            Severity::Error => CsDiagnostic::error(),
            Severity::Warning => CsDiagnostic::warning(),
        }
        .with_code(d.code.as_str())
        .with_message(&d.message)
        .with_labels(labels)
        .with_notes(d.notes.clone());
        // Spans are clamped to the file above, so rendering cannot fail.
        if let Ok(text) = term::emit_into_string(&config, &file, &cs) {
            out.push_str(&text);
        }
    }
    out
}

/// A span clamped to the source and to character boundaries, so rendering never fails.
fn clamp(span: super::Span, source: &str) -> std::ops::Range<usize> {
    let fix = |mut i: usize| {
        i = i.min(source.len());
        while !source.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = fix(span.start);
    start..fix(span.end).max(start)
}

/// Maps byte offsets to 1-based lines and columns (columns count characters).
pub struct LineIndex<'a> {
    source: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(source: &'a str) -> LineIndex<'a> {
        let mut line_starts = vec![0];
        line_starts.extend(source.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { source, line_starts }
    }

    /// The 1-based (line, column) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.source.len());
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        let column = self.source.get(start..offset).map_or(offset - start, |s| s.chars().count());
        (line + 1, column + 1)
    }
}
