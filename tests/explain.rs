//! The error-code registry: every code has a long explanation whose
//! erroneous example gives that code and whose fix checks clean.

use nax_front::{Code, Severity, check_source};

/// The fenced blocks of a Markdown text: (info string, body).
fn fenced_blocks(md: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in md.lines() {
        if let Some(info) = line.strip_prefix("```") {
            match current.take() {
                Some(block) => out.push(block),
                None => current = Some((info.trim().to_string(), String::new())),
            }
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

#[test]
fn every_code_has_a_title_an_erroneous_example_and_a_fix() {
    for &code in Code::ALL {
        let md = code.explanation();
        assert!(md.starts_with(&format!("# {}: ", code.as_str())), "{code}: title line");
        let blocks = fenced_blocks(md);
        let errors: Vec<&String> = blocks.iter().filter(|(i, _)| i == &format!("nax,{}", code.as_str())).map(|(_, b)| b).collect();
        let fixes: Vec<&String> = blocks.iter().filter(|(i, _)| i == "nax,ok").map(|(_, b)| b).collect();
        assert_eq!(errors.len(), 1, "{code}: one erroneous example");
        assert_eq!(fixes.len(), 1, "{code}: one fix");

        let bad = check_source(errors[0]);
        assert!(bad.diagnostics.iter().any(|d| d.code == code), "{code}: the example gives {:?}", bad.diagnostics);
        if code.severity() == Severity::Warning {
            assert!(!bad.has_errors(), "{code}: the warning example has errors: {:?}", bad.diagnostics);
        }
        let good = check_source(fixes[0]);
        assert!(good.diagnostics.is_empty(), "{code}: the fix is not clean: {:?}", good.diagnostics);
    }
}

#[test]
fn codes_parse_back() {
    for &code in Code::ALL {
        assert_eq!(Code::parse(code.as_str()), Some(code));
        assert_eq!(Code::parse(&code.as_str().to_lowercase()), Some(code));
    }
    assert_eq!(Code::parse("E9999"), None);
}
