//! No panics, whatever the input: at least 10,000 generated inputs per run
//! (random bytes, token-level mutations of the conformance cases, examples
//! and diagnostics inputs, and random well-formed programs), each checked
//! with panics caught. Every diagnostic's span must lie inside the file, and
//! every well-formed program must check without error. `NAX_SEED` picks the
//! seed (default fixed, so a failure reproduces); the failing input is printed.

use crate::generate;
use crate::support::{nax_files, root, shared};
use nax_front::diagnostics::render_text;
use nax_front::{Checked, check_source};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::panic::{AssertUnwindSafe, catch_unwind};

fn seed() -> u64 {
    std::env::var("NAX_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x6e61_7821)
}

/// Checks `source`, failing the test (with the input) on a panic or a span outside the file.
fn check_safely(source: &str, what: &str) -> Checked {
    let checked = match catch_unwind(AssertUnwindSafe(|| check_source(source))) {
        Ok(c) => c,
        Err(_) => panic!("the checker panicked on {what}:\n{source}"),
    };
    for d in &checked.diagnostics {
        let spans = std::iter::once(d.span).chain(d.labels.iter().map(|l| l.span));
        for s in spans {
            assert!(
                s.start <= s.end && s.end <= source.len() && source.is_char_boundary(s.start) && source.is_char_boundary(s.end),
                "{what}: span {s:?} of {} outside the file ({} bytes):\n{source}",
                d.code,
                source.len()
            );
        }
    }
    checked
}

fn corpus() -> Vec<String> {
    let mut dirs = vec![root().join("examples"), root().join("examples/workloads"), root().join("tests/diagnostics")];
    dirs.push(shared().join("conformance"));
    dirs.iter().flat_map(|d| nax_files(d)).map(|p| std::fs::read_to_string(p).expect("read corpus file")).collect()
}

#[test]
fn ten_thousand_generated_inputs_never_panic() {
    let mut rng = SmallRng::seed_from_u64(seed());
    let corpus = corpus();
    let mut total = 0;
    for i in 0..3000 {
        let bytes = generate::random_source_bytes(&mut rng, 400);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        check_safely(&text, &format!("random bytes #{i}"));
        total += 1;
    }
    for i in 0..4000 {
        let base = &corpus[rng.random_range(0..corpus.len())];
        let mutated = generate::mutate_tokens(&mut rng, base);
        let checked = check_safely(&mutated, &format!("mutation #{i}"));
        if i % 16 == 0 {
            let rendered = catch_unwind(AssertUnwindSafe(|| render_text("m.nax", &mutated, &checked.diagnostics)));
            assert!(rendered.is_ok(), "rendering panicked on mutation #{i}:\n{mutated}");
        }
        total += 1;
    }
    for i in 0..3000 {
        let program = generate::well_formed_program(&mut rng);
        let checked = check_safely(&program, &format!("generated program #{i}"));
        assert!(
            !checked.has_errors(),
            "generated program #{i} (seed {}) does not check:\n{}\n{program}",
            seed(),
            render_text("generated.nax", &program, &checked.diagnostics)
        );
        total += 1;
    }
    println!("{total} generated inputs checked without a panic (seed {})", seed());
    assert!(total >= 10_000);
}

#[test]
fn pathological_nesting_is_an_error_not_a_crash() {
    let deep_parens = format!("dim n = 4\ndef f(x: [n]) -> [n] {{\n    y = {}x\n    return y\n}}\n", "(".repeat(10_000));
    let long_chain = format!("dim n = 4\ndef f(x: [n]) -> [n] {{\n    y = x{}\n    return y\n}}\n", " + x".repeat(100_000));
    let deep_unary = format!("dim n = 4\ndef f(x: [n]) -> [n] {{\n    y = {}x\n    return y\n}}\n", "-".repeat(10_000));
    let deep_groups = format!("dim n = 4\ndef f(x: [n]) -> [n] {{\n    y = rearrange(x, {}n -> n)\n    return y\n}}\n", "(".repeat(10_000));
    for (what, src) in [("parens", deep_parens), ("chain", long_chain), ("unary", deep_unary), ("groups", deep_groups)] {
        let checked = check_safely(&src, what);
        assert!(checked.diagnostics.iter().any(|d| d.code == nax_front::Code::E0101), "{what}: expected E0101");
    }
}

#[test]
fn large_generated_modules_check_clean() {
    let module = generate::large_module(2_000, seed());
    let checked = check_safely(&module, "a large module");
    assert!(!checked.has_errors(), "{}", render_text("large.nax", &module, &checked.diagnostics));
}
