//! Tests: the emitted text of small programs ([`emit`]), that the examples
//! give valid Python ([`python`]), and that the generated code computes what
//! hand-written torch does ([`torch`]).

mod emit;
mod python;
mod torch;

/// Emits a module that must check without errors.
fn emit_source(src: &str) -> String {
    let checked = nax_front::check_source(src);
    assert!(!checked.has_errors(), "{src}\n{:#?}", checked.diagnostics);
    match crate::emit_module(&checked.module) {
        Ok(text) => text,
        Err(e) => panic!("{src}\n{e}"),
    }
}

/// The body of the generated function `name`: its lines, trimmed.
fn body(text: &str, name: &str) -> Vec<String> {
    let head = format!("def {name}(");
    let mut lines = text.lines().skip_while(|l| !l.starts_with(&head));
    let mut out: Vec<String> = lines.next().map(|l| vec![l.to_string()]).unwrap_or_default();
    out.extend(lines.take_while(|l| l.starts_with("    ") || l.is_empty()).map(|l| l.trim().to_string()));
    out
}

/// Asserts that function `name` of the emitted text has the line `line`.
#[track_caller]
fn assert_line(text: &str, name: &str, line: &str) {
    let lines = body(text, name);
    assert!(lines.iter().any(|l| l == line), "no line `{line}` in `{name}`:\n{}", lines.join("\n"));
}
