//! The shared conformance cases (`../shared/conformance/*.nax`, CLI.md),
//! and the repository's own in the same form (`tests/conformance/*.nax`,
//! for the language's newer sections): each case's `#!` headers say what
//! `nax check` must find. Every case runs; the test fails listing every
//! case that failed.

use crate::support::{Found, check_json, compare_diagnostics, nax_files, root, shared};
use serde_json::Value;

/// One `#! type|sizes|range f.s = ...` assertion.
struct Assertion {
    what: String,
    function: String,
    binding: String,
    expected: String,
}

fn parse_headers(text: &str) -> (Vec<Found>, Vec<Assertion>) {
    let mut diags = Vec::new();
    let mut asserts = Vec::new();
    for line in text.lines().take_while(|l| l.starts_with('#')) {
        let Some(rest) = line.strip_prefix("#!") else { continue };
        let words: Vec<&str> = rest.split_whitespace().collect();
        match words.as_slice() {
            ["ok"] => {}
            [sev @ ("error" | "warning"), code, at] => {
                let line = at.trim_start_matches('@').parse().expect("line number");
                diags.push((sev.to_string(), code.to_string(), line));
            }
            [what @ ("type" | "sizes" | "range"), target, "=", value @ ..] => {
                let (function, binding) = target.split_once('.').expect("f.s");
                asserts.push(Assertion { what: what.to_string(), function: function.into(), binding: binding.into(), expected: value.join(" ") });
            }
            other => panic!("unknown header {other:?}"),
        }
    }
    (diags, asserts)
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if x.fract() == 0.0 && x.abs() < 1e15 { format!("{}", x as i64) } else { format!("{x}") }
        }
        other => other.to_string(),
    }
}

fn numbers_match(expected: &str, got: &str) -> bool {
    match (expected.parse::<f64>(), got.parse::<f64>()) {
        (Ok(a), Ok(b)) => a == b || (a - b).abs() <= 1e-9 * a.abs().max(1.0),
        _ => expected == got,
    }
}

fn check_assertion(json: &Value, a: &Assertion) -> Result<(), String> {
    let f = json["functions"]
        .as_array()
        .and_then(|fs| fs.iter().find(|f| f["name"] == a.function.as_str()))
        .ok_or_else(|| format!("function {} did not check", a.function))?;
    let b = f["bindings"]
        .as_array()
        .and_then(|bs| bs.iter().rev().find(|b| b["name"] == a.binding.as_str()))
        .ok_or_else(|| format!("no binding {}.{}", a.function, a.binding))?;
    let got: Vec<String> = match a.what.as_str() {
        "type" => vec![b["type"].as_str().unwrap_or_default().to_string()],
        "sizes" => b["sizes"].as_array().map(|v| v.iter().map(value_text).collect()).unwrap_or_default(),
        _ => b["range"].as_array().map(|v| v.iter().map(value_text).collect()).unwrap_or_default(),
    };
    let expected: Vec<&str> = if a.what == "type" { vec![a.expected.as_str()] } else { a.expected.split_whitespace().collect() };
    let ok = expected.len() == got.len() && expected.iter().zip(&got).all(|(e, g)| numbers_match(e, g));
    if ok { Ok(()) } else { Err(format!("{} {}.{}: expected `{}`, got `{}`", a.what, a.function, a.binding, a.expected, got.join(" "))) }
}

#[test]
fn shared_conformance_cases() {
    let mut files = nax_files(&shared().join("conformance"));
    files.extend(nax_files(&root().join("tests/conformance")));
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("read case");
        let (expected, asserts) = parse_headers(&text);
        let (json, found) = check_json(path);
        let name = path.file_name().unwrap_or_default().to_string_lossy().to_string();
        if let Err(e) = compare_diagnostics(&expected, &found) {
            failures.push(format!("{name}: {e}"));
        }
        for a in &asserts {
            if let Err(e) = check_assertion(&json, a) {
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    println!("{} conformance cases run, {} failures", files.len(), failures.len());
    assert!(failures.is_empty(), "conformance failures:\n{}", failures.join("\n"));
}
