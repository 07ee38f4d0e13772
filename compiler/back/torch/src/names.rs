//! Python names for nax names.
//!
//! nax identifiers are valid Python identifiers, but some are Python keywords
//! (`lambda`, `if`), and some would shadow what the generated code needs:
//! `torch`, `math`, the prelude's helpers, the builtins the emitted code calls,
//! the module's functions (a local named like a function would hide it) and
//! the weights (keyword arguments passed on to callees by name). A [`Namer`]
//! hands out unique names, appending `_` (then `_2`, `_3`, ...) on a clash.

use std::collections::HashSet;

/// Python's keywords: never usable as names.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else", "except", "finally", "for",
    "from", "global", "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
];

/// Names the generated code refers to: modules, prelude helpers, the device
/// variable and the builtins it calls.
const RESERVED: &[&str] = &[
    "torch",
    "math",
    "_dev",
    "_div",
    "_sub",
    "_position",
    "_size",
    "_host",
    "_extremum",
    "_log_sum",
    "_log_softmax",
    "_logsumexp",
    "float",
    "int",
    "max",
    "min",
    "ValueError",
];

/// Hands out unique Python identifiers.
#[derive(Clone, Debug)]
pub(crate) struct Namer {
    taken: HashSet<String>,
}

impl Namer {
    /// A namer with the keywords and reserved names taken.
    pub(crate) fn new() -> Namer {
        Namer { taken: KEYWORDS.iter().chain(RESERVED).map(|s| s.to_string()).collect() }
    }

    /// A fresh name as close to `want` as possible; `want` need not be an identifier.
    pub(crate) fn fresh(&mut self, want: &str) -> String {
        let base = identifier(want);
        let mut candidate = base.clone();
        let mut n = 1;
        while self.taken.contains(&candidate) {
            candidate = if n == 1 { format!("{base}_") } else { format!("{base}_{n}") };
            n += 1;
        }
        self.taken.insert(candidate.clone());
        candidate
    }
}

/// `want` as an identifier: runs of other characters become `_`, and a name
/// that would start with a digit (or be empty) gets the prefix `s_`.
fn identifier(want: &str) -> String {
    let mut out = String::with_capacity(want.len());
    for c in want.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let trimmed = if want.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') { out.as_str() } else { out.trim_matches('_') };
    match trimmed.chars().next() {
        Some(c) if !c.is_ascii_digit() => trimmed.to_string(),
        _ => format!("s_{trimmed}"),
    }
}

/// A Python string literal for `text`.
pub(crate) fn string_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_and_clashes_get_suffixes() {
        let mut n = Namer::new();
        assert_eq!(n.fresh("x"), "x");
        assert_eq!(n.fresh("x"), "x_");
        assert_eq!(n.fresh("x"), "x_2");
        assert_eq!(n.fresh("lambda"), "lambda_");
        assert_eq!(n.fresh("torch"), "torch_");
        assert_eq!(n.fresh("_div"), "_div_");
    }

    #[test]
    fn symbol_names_become_identifiers() {
        let mut n = Namer::new();
        assert_eq!(n.fresh("3*V"), "s_3_V");
        assert_eq!(n.fresh("b*n"), "b_n");
        assert_eq!(n.fresh("(3*D)/H"), "s_3_D_H");
        assert_eq!(n.fresh("_x"), "_x");
        assert_eq!(string_literal("a'b"), "'a\\'b'");
    }
}
