//! The examples give syntactically valid Python (when `python3` is present).

use super::emit_source;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Whether `python3` runs.
pub(super) fn have_python() -> bool {
    Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// The examples: the transformer block and every workload.
fn examples() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../examples");
    let mut files = vec![root.join("transformer_block.nax")];
    let mut workloads: Vec<PathBuf> = std::fs::read_dir(root.join("workloads"))
        .map(|dir| dir.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "nax")).collect())
        .unwrap_or_default();
    workloads.sort();
    files.extend(workloads);
    files
}

/// The shared conformance and execution cases that check without errors, with
/// their source (none when the shared folder is absent).
pub(super) fn shared_cases() -> Vec<(PathBuf, String)> {
    let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../../shared");
    let mut out = Vec::new();
    for dir in ["conformance", "exec"] {
        let Ok(entries) = std::fs::read_dir(shared.join(dir)) else { continue };
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "nax")).collect();
        files.sort();
        for f in files {
            let Ok(src) = std::fs::read_to_string(&f) else { continue };
            if !nax_front::check_source(&src).has_errors() {
                out.push((f, src));
            }
        }
    }
    out
}

#[test]
fn every_example_emits_python_that_parses() {
    let files = examples();
    assert!(files.len() > 1, "no workloads found");
    let mut texts: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|f| {
            let src = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let text = emit_source(&src);
            (f, text)
        })
        .collect();
    let shared = shared_cases();
    if shared.is_empty() {
        println!("the shared conformance and execution cases are absent: only the examples are emitted");
    }
    texts.extend(shared.into_iter().map(|(f, src)| (f, emit_source(&src))));
    if !have_python() {
        println!("skipped the Python syntax check: python3 is not available");
        return;
    }
    // One python3 for all: the sources separated by NUL bytes; it names the first that fails.
    let script = "import ast,sys\nfor i, s in enumerate(sys.stdin.read().split(chr(0))):\n    try:\n        ast.parse(s)\n    except SyntaxError as e:\n        sys.exit(f'{i}: {e}')\n";
    let mut child =
        Command::new("python3").args(["-c", script]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("python3 starts");
    let all: Vec<&str> = texts.iter().map(|(_, t)| t.as_str()).collect();
    child.stdin.take().expect("stdin").write_all(all.join("\0").as_bytes()).expect("write to python3");
    let out = child.wait_with_output().expect("python3 finishes");
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let which = err.split(':').next().and_then(|i| i.trim().parse::<usize>().ok()).and_then(|i| texts.get(i));
        match which {
            Some((file, text)) => panic!("{}: {err}\n{text}", file.display()),
            None => panic!("{err}"),
        }
    }
}
