//! Helpers shared by the suites: locating files, running `nax`, expectation headers.

use std::path::{Path, PathBuf};
use std::process::Output;

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shared folder beside the repository (override with `NAX_SHARED`).
pub fn shared() -> PathBuf {
    std::env::var_os("NAX_SHARED").map(PathBuf::from).unwrap_or_else(|| root().join("../shared"))
}

/// The `.nax` files of a folder, sorted; panics if the folder is missing or empty.
pub fn nax_files(dir: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "nax")).collect();
    files.sort();
    assert!(!files.is_empty(), "no .nax files in {}", dir.display());
    files
}

/// The files under `dir`, in it and every folder below, whose names end
/// in `.EXTENSION`, sorted.
pub fn files_under(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            found.extend(files_under(&path, extension));
        } else if path.extension().is_some_and(|e| e == extension) {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// A fresh folder under the system's temporary folder for a test's files.
pub fn tempdir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("nax-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the `nax` binary with these arguments.
pub fn nax(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_nax")).args(args).output().expect("run nax")
}

/// A command running `program` under an address-space limit (`ulimit -v`,
/// in KiB); its arguments are added to the command.
pub fn limited(limit_kib: u64, program: &Path) -> std::process::Command {
    let mut command = std::process::Command::new("sh");
    command.args(["-c", "ulimit -v \"$1\" && shift && exec \"$@\"", "sh", &limit_kib.to_string()]).arg(program);
    command
}

/// Runs the `nax` binary under an address-space limit (`ulimit -v`, in KiB).
pub fn nax_limited(limit_kib: u64, args: &[&str]) -> Output {
    limited(limit_kib, Path::new(env!("CARGO_BIN_EXE_nax"))).args(args).output().expect("run nax under a limit")
}

/// A diagnostic as the tests compare it: severity, code and line.
pub type Found = (String, String, usize);

/// The diagnostics `nax check --format json` reports for a file, and its parsed JSON.
pub fn check_json(path: &Path) -> (serde_json::Value, Vec<Found>) {
    let out = nax(&["check", "--format", "json", path.to_str().expect("utf-8 path")]);
    let code = out.status.code();
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{}: bad JSON ({e}): {}", path.display(), String::from_utf8_lossy(&out.stdout)));
    let found: Vec<Found> = json["diagnostics"]
        .as_array()
        .expect("diagnostics array")
        .iter()
        .map(|d| {
            (
                d["severity"].as_str().unwrap_or_default().to_string(),
                d["code"].as_str().unwrap_or_default().to_string(),
                d["line"].as_u64().unwrap_or_default() as usize,
            )
        })
        .collect();
    let has_error = found.iter().any(|f| f.0 == "error");
    assert_eq!(code, Some(if has_error { 1 } else { 0 }), "{}: exit code", path.display());
    (json, found)
}

/// Compares found diagnostics with the expected ones: every expected one is
/// found, and no unexpected error (warnings beyond the list are allowed).
pub fn compare_diagnostics(expected: &[Found], found: &[Found]) -> Result<(), String> {
    let mut problems = Vec::new();
    for e in expected {
        if !found.contains(e) {
            problems.push(format!("missing {} {} @{}", e.0, e.1, e.2));
        }
    }
    for f in found {
        if f.0 == "error" && !expected.contains(f) {
            problems.push(format!("unexpected {} {} @{}", f.0, f.1, f.2));
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join(", ")) }
}
