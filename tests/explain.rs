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

/// The book's reference chapter shows every code's explanation (included
/// from the registry's files, so the two cannot differ), and every code
/// LANGUAGE.md names is a code of the registry: where the contract and
/// the book part, this fails.
#[test]
fn the_book_explains_every_code_the_language_names() {
    let root = crate::support::root();
    let chapter = std::fs::read_to_string(root.join("docs/src/error-codes.md")).expect("the book's error-code chapter");
    for &code in Code::ALL {
        let include = format!("{{{{#include ../../compiler/front/error_codes/{}.md}}}}", code.as_str());
        assert!(chapter.contains(&include), "docs/src/error-codes.md does not include {code}'s explanation");
    }
    let language = std::fs::read_to_string(crate::support::shared().join("spec/LANGUAGE.md")).expect("LANGUAGE.md");
    let mut named = 0;
    for word in language.split(|c: char| !c.is_ascii_alphanumeric()) {
        let is_code = word.len() == 5 && (word.starts_with('E') || word.starts_with('W')) && word[1..].chars().all(|c| c.is_ascii_digit());
        if is_code {
            assert!(Code::parse(word).is_some(), "LANGUAGE.md names {word}, which the registry (and so the book) lacks");
            named += 1;
        }
    }
    assert!(named >= Code::ALL.len(), "LANGUAGE.md names only {named} codes");
}
