//! The named-axis IR: every function of the examples, the conformance cases
//! that check, and generated programs lowers to a graph that verifies, and
//! whose text form parses back to the same text; the graph, kernel and MLIR
//! text that `nax build --emit` writes for the files of tests/graphs and
//! tests/mlir matches the expected files.

use crate::generate;
use crate::support::{nax_files, root, shared};
use nax_front::check_source;
use rand::SeedableRng;
use rand::rngs::SmallRng;

/// Lowers every function of `source`, verifying and round-tripping each graph.
fn round_trip_all(source: &str, what: &str) -> usize {
    let checked = check_source(source);
    let mut count = 0;
    for f in checked.module.functions.iter().filter(|f| f.ok) {
        let g = nax_lower::lower(&checked.module, &f.name).unwrap_or_else(|e| panic!("{what}: {}: {e}", f.name));
        let problems = nax_ir::verify(&g);
        assert!(problems.is_empty(), "{what}: {}: {problems:?}\n{}", f.name, nax_ir::text::print(&g));
        let text = nax_ir::text::print(&g);
        let parsed = nax_ir::text::parse(&text).unwrap_or_else(|e| panic!("{what}: {}: {e}\n{text}", f.name));
        assert_eq!(nax_ir::text::print(&parsed), text, "{what}: {}: the text form does not round-trip", f.name);
        assert!(nax_ir::verify(&parsed).is_empty(), "{what}: {}: the parsed graph does not verify", f.name);
        count += 1;
    }
    count
}

#[test]
fn every_checked_function_lowers_verifies_and_round_trips() {
    let mut files = nax_files(&root().join("examples"));
    files.extend(nax_files(&root().join("examples/workloads")));
    files.extend(nax_files(&shared().join("conformance")));
    files.extend(nax_files(&shared().join("exec")));
    let mut count = 0;
    for path in files {
        let source = std::fs::read_to_string(&path).expect("read");
        count += round_trip_all(&source, &path.display().to_string());
    }
    let mut rng = SmallRng::seed_from_u64(11);
    for i in 0..300 {
        count += round_trip_all(&generate::well_formed_program(&mut rng), &format!("generated program #{i}"));
    }
    println!("{count} graphs verified and round-tripped");
}

#[test]
fn text_form_errors_name_the_line() {
    let err = nax_ir::text::parse("graph f\nsym $0 \"n\" free\n%0 = frobnicate : f32 plain [] norange\n").unwrap_err();
    assert_eq!(err.line, 3);
    assert!(err.message.contains("frobnicate"), "{err}");
}

/// File tests: each `NAME.nax` of `folder` beside `NAME.EXT`, the text that
/// `nax build NAME.nax --emit KIND` writes (`NAX_BLESS=1` updates it).
fn emitted_text_matches_files(folder: &str, kind: &str, ext: &str, extra: &[&str]) {
    let bless = std::env::var_os("NAX_BLESS").is_some();
    let mut failures = Vec::new();
    for path in nax_files(&root().join(folder)) {
        let out_path = std::env::temp_dir().join(format!("nax-{kind}-{}-{}", std::process::id(), path.file_stem().unwrap().to_string_lossy()));
        // `--cpu generic`: the same text on every machine.
        let mut args = vec!["build", path.to_str().unwrap(), "--emit", kind, "--cpu", "generic", "-o", out_path.to_str().unwrap()];
        args.extend(extra);
        let out = crate::support::nax(&args);
        assert_eq!(out.status.code(), Some(0), "{}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
        let text = std::fs::read_to_string(&out_path).expect("output written");
        let expected_path = path.with_extension(ext);
        if bless {
            std::fs::write(&expected_path, &text).unwrap();
        } else if std::fs::read_to_string(&expected_path).ok().as_deref() != Some(text.as_str()) {
            failures.push(format!("{}: the output differs from {} (NAX_BLESS=1 to update):\n{text}", path.display(), expected_path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn graph_text_matches_its_files() {
    for path in nax_files(&root().join("tests/graphs")) {
        assert!(round_trip_all(&std::fs::read_to_string(&path).unwrap(), &path.display().to_string()) > 0);
    }
    emitted_text_matches_files("tests/graphs", "graph", "graph", &[]);
}

#[test]
fn kernel_text_matches_its_files() {
    emitted_text_matches_files("tests/graphs", "kernels", "kernels", &[]);
}

/// The MLIR back end's module before lowering (nax's dialect and upstream
/// dialects, parsed and verified by MLIR), for the CPU (`NAME.mlir`) and
/// for the CUDA target (`NAME.gpu.mlir`: `gpu.func` kernels, one position
/// of the parallel loop per thread).
#[test]
fn mlir_text_matches_its_files() {
    emitted_text_matches_files("tests/mlir", "mlir", "mlir", &[]);
    emitted_text_matches_files("tests/mlir", "mlir", "gpu.mlir", &["--target", "cuda"]);
}

#[test]
fn inlining_is_bounded_and_stack_safe() {
    // Each function calls the previous one twice: 2^40 nodes if inlined naively.
    let mut doubling = String::from("dim n = 4\ndef f0(x: [n]) -> [n] {\n    return x * 2.0\n}\n");
    for i in 1..40 {
        doubling.push_str(&format!("def f{i}(x: [n]) -> [n] {{\n    return f{}(x) + f{}(x)\n}}\n", i - 1, i - 1));
    }
    let checked = check_source(&doubling);
    assert!(!checked.has_errors());
    let err = nax_lower::lower(&checked.module, "f39").unwrap_err();
    assert!(matches!(&err, nax_lower::LowerError::TooLarge { function, .. } if function == "f39"), "{err}");
    // A chain of 2,000 calls inlines without overflowing the stack.
    let mut chain = String::from("dim n = 4\ndef f0(x: [n]) -> [n] {\n    return x * 2.0\n}\n");
    for i in 1..2000 {
        chain.push_str(&format!("def f{i}(x: [n]) -> [n] {{\n    return f{}(x) + 1.0\n}}\n", i - 1));
    }
    let checked = check_source(&chain);
    assert!(!checked.has_errors());
    let g = nax_lower::lower(&checked.module, "f1999").expect("lowers");
    assert!(nax_ir::verify(&g).is_empty());
}

/// Kernel formation: every graph of the examples, the conformance and exec
/// cases and generated programs forms kernels, for a CPU and for a GPU,
/// that verify, and whose text form parses back to the same text.
#[test]
fn every_graph_forms_kernels_that_verify() {
    let mut files = nax_files(&root().join("examples"));
    files.extend(nax_files(&root().join("examples/workloads")));
    files.extend(nax_files(&shared().join("conformance")));
    files.extend(nax_files(&shared().join("exec")));
    let mut sources: Vec<(String, String)> = files.iter().map(|p| (p.display().to_string(), std::fs::read_to_string(p).expect("read"))).collect();
    let mut rng = SmallRng::seed_from_u64(12);
    sources.extend((0..200).map(|i| (format!("generated program #{i}"), generate::well_formed_program(&mut rng))));
    let mut count = 0;
    for (what, source) in sources {
        let checked = check_source(&source);
        for f in checked.module.functions.iter().filter(|f| f.ok) {
            let g = nax_lower::lower(&checked.module, &f.name).expect("lower");
            // For a CPU and for a GPU (flat parallel loops, no library products).
            for machine in [nax_contract::Machine::GENERIC, nax_contract::Machine::CUDA] {
                let p = nax_kernel::form(&g, &machine, nax_kernel::FormOptions::default()).unwrap_or_else(|e| panic!("{what}: {}: {e}", f.name));
                let problems = nax_kernel::verify(&p);
                let text = nax_kernel::text::print(&p);
                assert!(problems.is_empty(), "{what}: {}: {problems:?}\n{text}", f.name);
                let parsed = nax_kernel::text::parse(&text).unwrap_or_else(|e| panic!("{what}: {}: {e}\n{text}", f.name));
                assert_eq!(nax_kernel::text::print(&parsed), text, "{what}: {}: the kernel text does not round-trip", f.name);
                let reparsed = nax_kernel::verify(&parsed);
                assert!(reparsed.is_empty(), "{what}: {}: {reparsed:?}\n{text}", f.name);
                count += p.kernels.len();
            }
        }
    }
    println!("{count} kernels formed and verified");
}

/// The first program of a kernel file of `tests/graphs`, which verifies
/// clean (the tests below break it in one place at a time).
fn first_program(file: &str) -> String {
    program(file, |_| true)
}

/// The first program of a kernel file of `tests/graphs` whose text
/// `wanted` accepts (its `program NAME` line first), which verifies clean.
fn program(file: &str, wanted: impl Fn(&str) -> bool) -> String {
    let text = std::fs::read_to_string(root().join("tests/graphs").join(file)).expect("kernels file");
    let mut programs: Vec<String> = Vec::new();
    for line in text.lines() {
        match programs.last_mut() {
            Some(p) if !line.starts_with("program ") => p.push_str(&format!("{line}\n")),
            _ => programs.push(format!("{line}\n")),
        }
    }
    let found = programs.into_iter().find(|p| wanted(p)).unwrap_or_else(|| panic!("{file}: no such program"));
    let problems = nax_kernel::verify(&nax_kernel::text::parse(&found).expect("parse"));
    assert!(problems.is_empty(), "{file}: {problems:?}");
    found
}

/// The verifier rejects transposed reads a tiled store cannot stage
/// through a scratch tile: a load the store does not make, one contiguous
/// along the inner loop, lanes that are not a power of two (or one), an
/// operand of another width than the output's, no tile, or a tile whose
/// scratch would outgrow a thread's share of the stack; and streamed
/// results without a transposed read.
#[test]
fn malformed_transposed_reads_are_rejected() {
    let transpose_add = first_program("schedules.kernels");
    for (from, to) in [
        ("transpose %0[i1 i0]", "transpose %0[i0 i1]"),
        ("transpose %0[i1 i0]", "transpose %1[i0 i1]"),
        ("by 4", "by 3"),
        ("by 4", "by 1"),
        ("buffer %0 f32[4096 4096]", "buffer %0 f64[4096 4096]"),
        ("tile 64x256 ", ""),
        ("tile 64x256 ", "tile 4096x4096 "),
    ] {
        assert!(transpose_add.contains(from), "{from}");
        let broken = nax_kernel::text::parse(&transpose_add.replace(from, to)).expect("parse");
        let problems = nax_kernel::verify(&broken);
        assert!(problems.iter().any(|p| p.to_string().contains("a transposed read")), "{to}: {problems:?}");
    }
}

/// A view keeps its operand's element size: the graph verifier rejects a
/// rename of a tensor to another dtype, the kernel verifier an alias of a
/// buffer with elements of another size (an i64 alias of an f32 buffer
/// reads twice the bytes it has: the repeat of an int once lowered so).
#[test]
fn views_of_another_element_size_are_rejected() {
    let graph = "graph f\n%0 = input 0 \"x\" : f32 plain [n:4] range -inf inf\n%1 = rename %0 : i64 plain [n:4] range -inf inf\ninputs %0\noutput %1\n";
    let g = nax_ir::text::parse(graph).expect("parse");
    assert!(nax_ir::verify(&g).iter().any(|p| p.to_string().contains("changes a tensor's dtype from f32 to i64")), "{:?}", nax_ir::verify(&g));
    let kernels = "program f\nbuffer %0 f32[4] temporary\nbuffer %1 i64[4] alias %0\nkernel %0 loops [4 parallel-vector] store 0.0\nresult %1\n";
    let p = nax_kernel::text::parse(kernels).expect("parse");
    assert!(nax_kernel::verify(&p).iter().any(|e| e.to_string().contains("an alias of %0 with elements of another size")), "{:?}", nax_kernel::verify(&p));
}

/// The verifier accepts streamed results only from a store in its loops'
/// order, untiled (after its row reductions, if any) or tiled with a
/// transposed read (in vectors of its blocks), in vectors of a power of
/// two lanes.
#[test]
fn streamed_results_need_a_plain_or_staged_store() {
    let transpose_add = first_program("schedules.kernels");
    let layernorm = first_program("rows.kernels");
    for broken in [
        transpose_add.replace("transpose %0[i1 i0] by 4 ", ""),
        transpose_add.replace("stream 4", "stream 8"),
        transpose_add.replace("tile 64x256 transpose %0[i1 i0] by 4 stream 4", "stream 3"),
        layernorm.replacen(" prefetch 1", " stream 3 prefetch 1", 1),
    ] {
        let problems = nax_kernel::verify(&nax_kernel::text::parse(&broken).expect("parse"));
        assert!(problems.iter().any(|p| p.to_string().contains("streams its results")), "{broken}: {problems:?}");
    }
    let plain = transpose_add.replace("tile 64x256 transpose %0[i1 i0] by 4 stream 4", "stream 4").replace("load %0[i1 i0]", "load %0[i0 i1]");
    let after_rows = layernorm.replacen(" prefetch 1", " stream 16 prefetch 1", 1);
    for accepted in [plain, after_rows] {
        let problems = nax_kernel::verify(&nax_kernel::text::parse(&accepted).expect("parse"));
        assert!(problems.is_empty(), "{accepted}: {problems:?}");
    }
}

/// The verifier accepts operands asked for ahead only in an untiled
/// streamed store, and at least a byte ahead.
#[test]
fn operands_ahead_need_an_untiled_streamed_store() {
    let transpose_add = first_program("schedules.kernels");
    let layernorm = first_program("rows.kernels");
    for broken in [
        layernorm.replacen(" prefetch 1", " ahead 3072 prefetch 1", 1),
        layernorm.replacen(" prefetch 1", " stream 16 ahead 0 prefetch 1", 1),
        transpose_add.replace("stream 4", "stream 4 ahead 3072"),
    ] {
        let problems = nax_kernel::verify(&nax_kernel::text::parse(&broken).expect("parse"));
        assert!(problems.iter().any(|p| p.to_string().contains("asks for its operands ahead")), "{broken}: {problems:?}");
    }
    let accepted = layernorm.replacen(" prefetch 1", " stream 16 ahead 3072 prefetch 1", 1);
    let problems = nax_kernel::verify(&nax_kernel::text::parse(&accepted).expect("parse"));
    assert!(problems.is_empty(), "{accepted}: {problems:?}");
}

/// The verifier accepts a prefetch of rows ahead only in a kernel with row
/// reductions or a softmax in column blocks, and of one row or more.
#[test]
fn prefetches_of_rows_need_row_reductions_or_column_blocks() {
    let layernorm = first_program("rows.kernels");
    let transpose_add = first_program("schedules.kernels");
    let softmax = program("schedules.kernels", |p| p.starts_with("program softmax_middle\n"));
    assert!(softmax.contains("columns 64 prefetch 8"), "{softmax}");
    for broken in [
        layernorm.replacen("prefetch 1", "prefetch 0", 1),
        transpose_add.replacen(" store", " prefetch 1 store", 1),
        softmax.replacen("columns 64 ", "", 1),
        softmax.replacen("prefetch 8", "prefetch 0", 1),
    ] {
        let problems = nax_kernel::verify(&nax_kernel::text::parse(&broken).expect("parse"));
        assert!(problems.iter().any(|p| p.to_string().contains("prefetches rows")), "{broken}: {problems:?}");
    }
}

/// The verifier rejects attention kernels the driver could not run: a value
/// that reads the rows, a score that is not a product of two loads, a
/// missing `flash` schedule, or scratch of the wrong shape.
#[test]
fn malformed_attention_kernels_are_rejected() {
    let causal = first_program("attention.kernels");
    for (from, to, needle) in [
        ("by load %3[i0 i1 i4 i3]", "by load %3[i0 i1 i2 i3]", "its value only"),
        (
            "row sum f32 mul(f32, load %6[i0 i1 i2 i5], load %4[i0 i1 i4 i5])",
            "row sum f32 add(f32, load %6[i0 i1 i2 i5], load %4[i0 i1 i4 i5])",
            "a product of two loads",
        ),
        (" flash [i0 i1] i2 i3 64x64 %9 %10 %11", "", "go together"),
        ("buffer %10 f32[64 16] tile", "buffer %10 f32[64 17] tile", "tile's shapes"),
    ] {
        assert!(causal.contains(from), "{from}");
        let broken = nax_kernel::text::parse(&causal.replace(from, to)).expect("parse");
        let problems = nax_kernel::verify(&broken);
        assert!(problems.iter().any(|p| p.to_string().contains(needle)), "{to}: {problems:?}");
    }
}

/// The verifier rejects a scatter the lowering could not run: along an
/// axis the output does not have, at a position that is not an integer,
/// or with its loops reordered.
#[test]
fn malformed_scatters_are_rejected() {
    let scatter = first_program("gather_adjoint.kernels");
    for (from, to) in [("scatter i0", "scatter i2"), ("at load %2[i2 i3]", "at load %1[i2 i3 i1]"), ("reduce] check", "reduce] order [i0 i1 i3 i2] check")] {
        assert!(scatter.contains(from), "{from}");
        let broken = nax_kernel::text::parse(&scatter.replace(from, to)).expect("parse");
        let problems = nax_kernel::verify(&broken);
        assert!(problems.iter().any(|p| p.to_string().contains("a scatter adds along an output axis")), "{to}: {problems:?}");
    }
}
