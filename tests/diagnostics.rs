//! File-driven diagnostics tests, in the style of Cranelift's filetests:
//! `tests/diagnostics/NAME.nax` beside `NAME.stderr`, the rendered output of
//! `nax check`. `NAX_BLESS=1 cargo test` rewrites the expectations. Each
//! input's `# expect: CODE @LINE` header lines list its diagnostics
//! (exhaustively), and together the inputs cover every code.

use crate::support::{Found, compare_diagnostics, nax_files, root};
use nax_front::diagnostics::{LineIndex, render_text};
use nax_front::{Code, check_source};

fn expectations(text: &str) -> Vec<(String, String, usize)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# expect:"))
        .map(|rest| {
            let mut words = rest.split_whitespace();
            let code = words.next().expect("code").to_string();
            let line = words.next().expect("@line").trim_start_matches('@').parse().expect("line number");
            let severity = if code.starts_with('W') { "warning" } else { "error" };
            (severity.to_string(), code, line)
        })
        .collect()
}

#[test]
fn rendered_diagnostics_match_their_files() {
    let dir = root().join("tests/diagnostics");
    let bless = std::env::var_os("NAX_BLESS").is_some();
    let mut failures = Vec::new();
    let mut covered = std::collections::BTreeSet::new();
    for path in nax_files(&dir) {
        let source = std::fs::read_to_string(&path).expect("read input");
        let name = format!("tests/diagnostics/{}", path.file_name().unwrap_or_default().to_string_lossy());
        let checked = check_source(&source);
        let lines = LineIndex::new(&source);
        let found: Vec<Found> =
            checked.diagnostics.iter().map(|d| (d.severity().as_str().to_string(), d.code.as_str().to_string(), lines.line_col(d.span.start).0)).collect();
        let expected = expectations(&source);
        assert!(!expected.is_empty() || source.contains("# expect: nothing"), "{name}: no `# expect:` header");
        if let Err(e) = compare_diagnostics(&expected, &found) {
            failures.push(format!("{name}: {e}"));
        }
        // Warnings are listed exhaustively here too.
        for f in found.iter().filter(|f| f.0 == "warning") {
            if !expected.contains(f) {
                failures.push(format!("{name}: unexpected warning {} @{}", f.1, f.2));
            }
        }
        covered.extend(checked.diagnostics.iter().map(|d| d.code));
        let rendered = render_text(&name, &source, &checked.diagnostics);
        let expected_path = path.with_extension("stderr");
        if bless {
            std::fs::write(&expected_path, &rendered).expect("write expectation");
            continue;
        }
        match std::fs::read_to_string(&expected_path) {
            Ok(want) if want == rendered => {}
            Ok(want) => failures.push(format!("{name}: rendered output differs (NAX_BLESS=1 to update)\n--- expected\n{want}\n--- got\n{rendered}")),
            Err(_) => failures.push(format!("{name}: no {} (run with NAX_BLESS=1)", expected_path.display())),
        }
    }
    let missing: Vec<&str> = Code::ALL.iter().filter(|c| !covered.contains(c)).map(|c| c.as_str()).collect();
    assert!(missing.is_empty(), "codes with no diagnostics test: {missing:?}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
