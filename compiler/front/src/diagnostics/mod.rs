//! Diagnostics: stable error codes, spans, labels, and their rendering.
//!
//! Every problem the front end finds becomes a [`Diagnostic`] with a [`Code`]
//! from the registry in `error_codes/` (one Markdown file per code, printed by
//! `nax explain`), a primary span and optional secondary labels. Rendering to
//! rustc-style text is done by `codespan-reporting` in [`render`].

mod render;

pub use render::{LineIndex, render_text};

use std::fmt;

/// A byte range `start..end` in the source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span { start: self.start.min(other.start), end: self.end.max(other.end) }
    }
}

/// Whether a diagnostic stops compilation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

macro_rules! codes {
    ($($code:ident => $meaning:literal,)*) => {
        /// A stable diagnostic code. Each has a long explanation in `error_codes/CODE.md`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code { $($code,)* }

        impl Code {
            /// Every code the checker can emit.
            pub const ALL: &'static [Code] = &[$(Code::$code,)*];

            /// The code as written, e.g. `"E0404"`.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$code => stringify!($code),)* }
            }

            /// The one-line meaning of the code (LANGUAGE.md section 11).
            pub fn meaning(self) -> &'static str {
                match self { $(Code::$code => $meaning,)* }
            }

            /// The long explanation printed by `nax explain`.
            pub fn explanation(self) -> &'static str {
                match self {
                    $(Code::$code => include_str!(concat!("../../error_codes/", stringify!($code), ".md")),)*
                }
            }
        }
    };
}

codes! {
    E0101 => "syntax error",
    E0201 => "unknown name (a value, a function or a dim)",
    E0202 => "wrong number or kind of arguments to a built-in or function",
    E0203 => "recursion between functions",
    E0204 => "a name defined twice",
    E0401 => "size mismatch",
    E0402 => "a group with two unknown parts",
    E0403 => "wrong number of axes",
    E0404 => "named axes that don't line up",
    E0405 => "an output name not from the inputs",
    E0406 => "a bad keyword argument or reduction",
    E0407 => "a malformed pattern",
    E0408 => "a probable transposition",
    E0409 => "a size that can't be found",
    E0410 => "a domain's axis is not an axis of the type",
    E0411 => "the wrong number of names for several results (split, a call, a loop)",
    E0412 => "a string operand",
    E0413 => "a returned value differs from its declared result, or the wrong number of values",
    E0414 => "an index, a slice bound or a step outside its axis",
    E0415 => "an index tensor that is not `Int`",
    E0416 => "a loop whose bounds are not known when compiling, whose carried or yielded value changes type, or with a `return` inside",
    E0417 => "a `grad` of a value with axes or not a float, with respect to a name that is not a float param or argument, a name given twice, or a `grad` inside another",
    E0501 => "a logical operation on non-masks",
    E0502 => "operands of different dtypes",
    E0505 => "arithmetic on masks",
    W0601 => "log/sqrt/rsqrt of a value whose range allows negatives",
}

impl Code {
    /// Looks a code up by its name, case-insensitively (`e0404` works too).
    pub fn parse(text: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.as_str().eq_ignore_ascii_case(text.trim()))
    }

    /// Warnings start with `W`; everything else is an error.
    pub fn severity(self) -> Severity {
        if self.as_str().starts_with('W') { Severity::Warning } else { Severity::Error }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A secondary place involved in a diagnostic (the other operand, a declaration).
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// One problem found in a source file.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub code: Code,
    pub message: String,
    pub span: Span,
    /// What the primary underline says, if anything beyond the message.
    pub primary_label: String,
    pub labels: Vec<Label>,
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn new(code: Code, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic { code, message: message.into(), span, primary_label: String::new(), labels: Vec::new(), notes: Vec::new() }
    }

    pub fn severity(&self) -> Severity {
        self.code.severity()
    }

    /// Sets the text under the primary span.
    pub fn primary(mut self, text: impl Into<String>) -> Diagnostic {
        self.primary_label = text.into();
        self
    }

    /// Adds a secondary label.
    pub fn label(mut self, span: Span, text: impl Into<String>) -> Diagnostic {
        self.labels.push(Label { span, message: text.into() });
        self
    }

    /// Adds a note printed under the snippet.
    pub fn note(mut self, text: impl Into<String>) -> Diagnostic {
        self.notes.push(text.into());
        self
    }
}
