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
use nax_runtime::CallBoundary;
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

/// Calls whose longest loop nest runs more iterations than this (and
/// fewer than the runtime's bound, past which it refuses them) are checked
/// and compiled but not made: they are legal and would take minutes to hours.
const MAX_RUN_ITERATIONS: u128 = 1 << 30;

/// The address-space limit the extreme programs run under (`ulimit -v`, KiB): 4 GiB.
const RUN_LIMIT_KIB: u64 = 4 << 20;

/// Programs with extreme sizes, run (not only checked) on every back end:
/// this test runs [`extreme_programs_run_on_every_backend`] in a child
/// process of this binary under a 4 GiB address-space limit, so that an
/// abort, a signal, an out-of-memory kill or a hang (30 minutes) fails it,
/// with the program the child was running (which it prints first),
/// instead of taking the suite down.
#[test]
fn extreme_sizes_end_in_a_result_or_a_clean_error_under_a_memory_limit() {
    let exe = std::env::current_exe().expect("the test binary");
    let log = std::env::temp_dir().join(format!("nax-extreme-{}.log", std::process::id()));
    let file = std::fs::File::create(&log).expect("a log file");
    let mut child = crate::support::limited(RUN_LIMIT_KIB, &exe)
        .args(["--exact", "robustness::extreme_programs_run_on_every_backend", "--include-ignored", "--nocapture", "--test-threads=1"])
        .stdout(file.try_clone().expect("the log file"))
        .stderr(file)
        .spawn()
        .expect("run the child");
    // A hang is a failure too (it would otherwise hold CI until its limit).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30 * 60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let tail: Vec<&str> = output.lines().rev().take(60).collect::<Vec<_>>().into_iter().rev().collect();
    let passed = status.is_some_and(|s| s.success()) && output.contains("1 passed");
    assert!(passed, "the child ended with {status:?} (None: killed after 30 minutes):\n{}", tail.join("\n"));
    let summary = output.lines().find(|l| l.contains("extreme programs")).unwrap_or_default();
    println!("{summary}");
}

/// At least 1,000 extreme programs ([`generate::extreme_program`]) that
/// check are compiled and called on the interpreter, LLVM and Cranelift
/// with arguments of extreme sizes (real data when small, zero-size
/// tensors whose other axes are huge, `int` sizes up to 2^63 - 1): each
/// call ends in a result or an error, never a panic; when every back end
/// gives a result, the shapes agree. A call of between 2^30 and 2^53 loop
/// iterations is checked but not made (it is legal, and long). Run by the test above, in a child
/// under an address-space limit.
#[test]
#[ignore = "run by extreme_sizes_end_in_a_result_or_a_clean_error_under_a_memory_limit in a child process under an address-space limit"]
fn extreme_programs_run_on_every_backend() {
    use nax::pipeline::{self, Backend};
    let want = std::env::var("NAX_EXTREME_PROGRAMS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let mut rng = SmallRng::seed_from_u64(seed());
    let pool = nax::ThreadPool::new(2).expect("a pool");
    let (mut generated, mut refused_by_checker, mut results, mut errors, mut too_long) = (0usize, 0usize, 0usize, 0usize, 0usize);
    let mut ran = 0usize;
    while ran < want {
        generated += 1;
        let source = generate::extreme_program(&mut rng);
        let checked = check_safely(&source, &format!("extreme program #{generated}"));
        if checked.has_errors() {
            refused_by_checker += 1;
            continue;
        }
        let module = nax::pipeline::check("extreme.nax", &source, &mut nax::Timings::start()).expect("checks as check_source did");
        let Some(function) = module.functions.iter().map(|f| f.name.clone()).nth(rng.random_range(0..module.functions.len().max(1))) else { continue };
        let sizes_seed: u64 = rng.random();
        // Printed first: a crash leaves it as the child's last line.
        println!("program #{generated}, function {function}, sizes seed {sizes_seed}:\n{source}");
        let lowered = catch_unwind(AssertUnwindSafe(|| pipeline::lower(&module, &function, true, &mut nax::Timings::start())))
            .unwrap_or_else(|_| panic!("lowering panicked on program #{generated} (function {function}):\n{source}"));
        let graph = match lowered {
            Ok(l) => l.into_graph(),
            Err(e) => {
                assert!(!e.to_string().contains("internal error"), "program #{generated} (function {function}) checks but does not lower: {e}\n{source}");
                errors += 3;
                ran += 1;
                continue;
            }
        };
        let defaults = module.functions.iter().find(|f| f.name == function).map(pipeline::defaults).unwrap_or_default();
        let mut shapes = Vec::new();
        for backend in [Backend::Interp, Backend::Llvm, Backend::Mlir, Backend::Cranelift] {
            let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<Option<Vec<usize>>, String> {
                let f = pipeline::compile_graph(graph.clone(), &defaults, backend, &mut nax::Timings::start()).map_err(|e| e.to_string())?;
                let (args, weights) = extreme_arguments(f.signature(), sizes_seed);
                let views = args.iter().map(nax::Value::arg).collect();
                let call = f.signature().check(views, &weights).map_err(|e| e.to_string())?;
                // A legal call of hours (a reduction over 2^40 positions of
                // a repeated value) is not made here; beyond 2^53 the call
                // itself refuses, which this runs.
                let work = f.work(&call).map_err(|e| e.to_string())?;
                if work > MAX_RUN_ITERATIONS && work <= nax_runtime::MAX_ITERATIONS {
                    return Ok(None);
                }
                let out = f.run(&call, &pool).map_err(|e| e.to_string())?;
                Ok(Some(out.shape().to_vec()))
            }));
            match outcome {
                Err(_) => panic!("{} panicked on program #{generated} (function {function}, sizes seed {sizes_seed}):\n{source}", backend.name()),
                Ok(Ok(None)) => too_long += 1,
                Ok(Ok(Some(shape))) => {
                    results += 1;
                    shapes.push(shape);
                }
                Ok(Err(e)) => {
                    assert!(
                        !e.is_empty() && !e.contains("internal error"),
                        "{} on program #{generated} (function {function}, sizes seed {sizes_seed}): {e}\n{source}",
                        backend.name()
                    );
                    errors += 1;
                }
            }
        }
        if shapes.len() == 3 {
            assert!(shapes.windows(2).all(|w| w[0] == w[1]), "program #{generated}: the back ends' shapes differ: {shapes:?}\n{source}");
        }
        ran += 1;
    }
    println!(
        "{ran} extreme programs run on interp, llvm and cranelift ({results} results, {errors} clean errors, {too_long} calls of more than 2^30 iterations not made; {refused_by_checker} more refused by the checker; seed {})",
        seed()
    );
}

/// Arguments for a call of `signature`: each free size an [`generate::extreme_size`] (the same
/// for every use of a symbol), host `int`s too; a tensor whose elements would be more than a
/// few thousand gets a zero-size axis (a free one when it has one), and real data otherwise.
fn extreme_arguments(signature: &nax::Signature, seed: u64) -> (Vec<nax::Value>, std::collections::HashMap<String, nax::HostTensor>) {
    use nax::{HostTensor, HostType, ParamType, Scalar, Size, TensorSpec, Value};
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut chosen: std::collections::HashMap<Size, u64> = std::collections::HashMap::new();
    let mut tensor = |spec: &TensorSpec, rng: &mut SmallRng| -> HostTensor {
        let mut shape: Vec<u64> = spec
            .axes
            .iter()
            .map(|a| match signature.sizes.resolve(a.size) {
                Size::Const(c) => c,
                root => *chosen.entry(root).or_insert_with(|| generate::extreme_size(rng)),
            })
            .collect();
        let elements = shape.iter().fold(1u128, |n, &s| n.saturating_mul(u128::from(s)));
        if elements > 4096 {
            let free = spec.axes.iter().position(|a| matches!(signature.sizes.resolve(a.size), Size::Sym(_)));
            let axis = free.unwrap_or(0);
            if let Some(root) = free.map(|i| signature.sizes.resolve(spec.axes[i].size)) {
                chosen.insert(root, 0);
            }
            shape[axis] = 0;
        }
        let shape: Vec<usize> = shape.iter().map(|&s| usize::try_from(s).unwrap_or(usize::MAX)).collect();
        let n: usize = if shape.contains(&0) { 0 } else { shape.iter().product() };
        let values: Vec<f64> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
        HostTensor::from_f64(spec.dtype, shape, spec.names(), &values).expect("a host tensor")
    };
    let mut args = Vec::new();
    for p in &signature.params {
        args.push(match &p.ty {
            ParamType::Tensor(spec) => Value::Tensor(tensor(spec, &mut rng)),
            ParamType::Host(HostType::Int) => Value::Scalar(Scalar::Int(generate::extreme_size(&mut rng) as i64)),
            ParamType::Host(HostType::Float) => Value::Scalar(Scalar::Float(0.5)),
            ParamType::Host(HostType::Bool) => Value::Scalar(Scalar::Bool(true)),
        });
    }
    let weights = signature.weights.iter().map(|w| (w.name.clone(), tensor(&w.ty, &mut rng))).collect();
    (args, weights)
}
