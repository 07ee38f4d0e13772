//! The example models (`examples/`) check with no error and no warning.

use crate::support::{files_under, nax_files, root};
use nax_front::check_source;

#[test]
fn examples_check_clean() {
    let mut files = nax_files(&root().join("examples"));
    files.extend(nax_files(&root().join("examples/workloads")));
    for path in files {
        let source = std::fs::read_to_string(&path).expect("read example");
        let checked = check_source(&source);
        assert!(checked.diagnostics.is_empty(), "{}: {:?}", path.display(), checked.diagnostics);
        assert!(checked.module.functions.iter().all(|f| f.ok), "{}", path.display());
    }
}

/// Every nax block of the book (`docs/src`, its reference part included): ```` ```nax,ok ```` checks
/// with no error and no warning, ```` ```nax,E0404 ```` reports that code.
#[test]
fn the_books_examples_check_as_they_say() {
    let mut checked = 0;
    for path in files_under(&root().join("docs/src"), "md") {
        let text = std::fs::read_to_string(&path).expect("read a chapter");
        for block in text.split("```nax,").skip(1) {
            let (label, rest) = block.split_once('\n').expect("a block");
            let source = rest.split("```").next().unwrap_or_default();
            let diagnostics = check_source(source).diagnostics;
            let codes: Vec<String> = diagnostics.iter().map(|d| d.code.to_string()).collect();
            match label.trim() {
                "ok" => assert!(diagnostics.is_empty(), "{}: a block marked ok reports {codes:?}\n{source}", path.display()),
                code => assert!(codes.iter().any(|c| c == code), "{}: a block marked {code} reports {codes:?}\n{source}", path.display()),
            }
            checked += 1;
        }
    }
    assert!(checked >= 100, "only {checked} nax blocks found in the book");
}
