//! The example models (`examples/`) check with no error and no warning.

use crate::support::{nax_files, root};
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
