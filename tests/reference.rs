//! The book's reference part (`docs/src/reference`, `cli.md`, `python.md`)
//! against the contracts it restates (`../shared/spec`): where they part,
//! these fail, naming what the book lacks. The error codes and the CLI's
//! flags are checked beside their own tests (`explain`, `cli`).

use crate::support::{files_under, root, shared};

/// The text of a contract file of `../shared/spec`.
fn contract(name: &str) -> String {
    let path = shared().join("spec").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The text of the book's pages under `docs/src/SUB` (or one page), joined.
fn book(sub: &str) -> String {
    let path = root().join("docs/src").join(sub);
    let files = if path.is_dir() { files_under(&path, "md") } else { vec![path] };
    files.iter().map(|p| std::fs::read_to_string(p).expect("read a page")).collect::<Vec<_>>().join("\n")
}

/// The words of `text` that match `is_name` (runs of letters, digits, `_`
/// and `.`, with trailing dots dropped), deduplicated.
fn words(text: &str, is_name: impl Fn(&str) -> bool) -> Vec<String> {
    let mut found: Vec<String> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| is_name(w))
        .map(str::to_string)
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Fails naming every one of `names` that the book's page `page` (under
/// `docs/src`) does not contain.
fn assert_chapter_names(page: &str, names: &[String]) {
    let chapter = book(page);
    let missing: Vec<&String> = names.iter().filter(|n| !chapter.contains(n.as_str())).collect();
    assert!(missing.is_empty(), "docs/src/{page} does not name {missing:?}");
}

/// Every numbered section of the language (`## 5. Broadcasting by name`)
/// is a heading of the reference, by its title.
#[test]
fn the_reference_has_a_heading_for_every_section_of_the_language() {
    let headings: Vec<String> = book("reference").lines().filter(|l| l.starts_with('#')).map(|l| l.trim_start_matches('#').trim().to_lowercase()).collect();
    let mut sections = 0;
    for line in contract("LANGUAGE.md").lines() {
        let Some(rest) = line.strip_prefix("## ").or_else(|| line.strip_prefix("### ")) else { continue };
        let title = rest.split_once(". ").filter(|(n, _)| n.chars().all(|c| c.is_ascii_digit())).map_or(rest, |(_, t)| t);
        let title = title.replace("**(seed rule)**", "").trim().to_lowercase();
        assert!(headings.contains(&title), "the book's reference (docs/src/reference) has no heading \"{title}\", a section of the language");
        sections += 1;
    }
    assert!(sections >= 15, "only {sections} sections found in LANGUAGE.md");
}

/// Every name of the C ABI (`NAME_open`, `nax_arg`, `NAX_ERR_CPU`, ...) is
/// in the book's chapter on it.
#[test]
fn the_abi_chapter_names_every_name_of_the_abi() {
    let text = contract("ABI.md").replace('.', " ");
    let names = words(&text, |w| ["NAME_", "nax_", "NAX_"].iter().any(|p| w.starts_with(p) && w.len() > p.len()));
    assert!(names.len() >= 15, "only {} names found in ABI.md: {names:?}", names.len());
    assert_chapter_names("reference/abi.md", &names);
}

/// Every name of the Python package (`nax.compile`, `nax.Tensor`, ...)
/// and every attribute and method it names (`.names`, `.numpy()`, ...) is
/// in the book's chapter on it.
#[test]
fn the_python_chapter_names_every_name_of_the_package() {
    let text = contract("PYTHON.md");
    let mut names = words(&text, |w| w.starts_with("nax.") && w.len() > 4 && !w.ends_with("md"));
    for attribute in text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|a| a.starts_with('.') && a[1..].chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '(' || c == ')'))
    {
        names.push(attribute.to_string());
    }
    assert!(names.len() >= 10, "only {} names found in PYTHON.md: {names:?}", names.len());
    assert_chapter_names("python.md", &names);
}

/// Every command of the command line (`nax check`, ...) and every back end
/// and artifact it names is in the book's chapter on it.
#[test]
fn the_command_line_chapter_names_every_command_and_artifact() {
    let text = contract("CLI.md");
    let mut names = words(&text, |w| ["check", "run", "build", "explain"].contains(&w)).into_iter().map(|c| format!("nax {c}")).collect::<Vec<_>>();
    names.extend(["so", "obj", "llvm-ir", "mlir", "ptx", "graph", "torch", "llvm", "cranelift", "interp"].map(|w| format!("`{w}`")));
    assert_chapter_names("cli.md", &names);
}

/// Nothing a user reads points at the contracts' folder, which a clone of
/// the repository does not have: the README and the book point at the
/// book's reference instead.
#[test]
fn nothing_a_user_reads_points_outside_the_repository() {
    let mut read = files_under(&root().join("docs/src"), "md");
    read.push(root().join("README.md"));
    for page in read {
        let text = std::fs::read_to_string(&page).expect("read a page");
        for stray in ["../shared", "shared/spec", "LANGUAGE.md", "CLI.md", "ABI.md", "PYTHON.md", "SHARDING.md"] {
            assert!(!text.contains(stray), "{} mentions {stray}, which a user does not have", page.display());
        }
    }
}
