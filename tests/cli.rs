//! The command line: exit codes, `--types`, `explain`, and bad invocations.

use crate::support::{nax, root, tempdir};

fn example() -> String {
    root().join("examples/transformer_block.nax").display().to_string()
}

#[test]
fn check_prints_types_of_the_example() {
    let out = nax(&["check", &example(), "--types"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.starts_with("def ")), "{text}");
    assert!(text.contains("sizes [") && text.contains("range ["), "{text}");
}

#[test]
fn errors_exit_1_with_rendered_diagnostics() {
    let dir = tempdir();
    let path = dir.join("bad.nax");
    std::fs::write(&path, "dim n = 8\ndim k = 8\ndef f(x: [n], y: [k]) -> [n] {\n    return x + y\n}\n").unwrap();
    let out = nax(&["check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error[E0404]") && err.contains("axis 'n' (size 8)"), "{err}");
}

#[test]
fn json_has_the_schema_of_cli_md() {
    let out = nax(&["check", "--format", "json", &example()]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["diagnostics"].as_array().unwrap().is_empty());
    let f = &v["functions"][0];
    assert!(f["signature"].as_str().unwrap().starts_with("def "));
    let b = &f["bindings"][0];
    for key in ["name", "line", "type", "sizes", "range"] {
        assert!(b.get(key).is_some(), "binding lacks {key}: {b}");
    }
}

#[test]
fn usage_and_io_problems_exit_2() {
    let dir = tempdir();
    let binary = dir.join("binary.nax");
    std::fs::write(&binary, [0x64, 0x69, 0x6d, 0xff, 0xfe]).unwrap();
    let cases: Vec<Vec<String>> = vec![
        vec!["check".into(), dir.join("missing.nax").display().to_string()],
        vec!["check".into(), binary.display().to_string()],
        vec!["check".into(), example(), "--frobnicate".into()],
        vec!["check".into(), example(), "--format".into(), "yaml".into()],
        vec!["explain".into(), "E9999".into()],
        vec!["frobnicate".into()],
        vec![],
    ];
    for args in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = nax(&args);
        assert_eq!(out.status.code(), Some(2), "nax {args:?}");
        assert!(!out.stderr.is_empty(), "nax {args:?} says nothing");
    }
}

#[test]
fn explain_prints_the_registry_entry() {
    let out = nax(&["explain", "E0404"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("# E0404") && text.contains("```nax,ok"), "{text}");
}

#[test]
fn build_emits_graph_and_torch_and_refuses_what_is_not_built() {
    let dir = tempdir();
    let py = dir.join("model.py");
    let out = nax(&["build", &example(), "--emit", "torch", "-o", py.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&py).unwrap();
    assert!(text.contains("import torch") && text.contains("def block("), "{text}");
    match std::process::Command::new("python3").args(["-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())"]).arg(&py).output() {
        Ok(o) => assert!(o.status.success(), "the emitted module does not parse: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => println!("skipped parsing the emitted module: python3 is not available ({e})"),
    }
    let graph = dir.join("model.graph");
    let out = nax(&["build", &example(), "--emit", "graph", "-o", graph.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(std::fs::read_to_string(&graph).unwrap().starts_with("# `layernorm` as lowered\ngraph layernorm\n"));
    let mlir = dir.join("model.mlir");
    let out = nax(&["build", &example(), "--emit", "mlir", "-o", mlir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&mlir).unwrap();
    assert!(text.starts_with("module {") && text.contains("func.func @layernorm_k0(") && text.contains("\"nax.load\""), "{text}");
    let out = nax(&["build", &example(), "--emit", "ptx", "-o", dir.join("x").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "--emit ptx");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--target cuda"), "--emit ptx");
    for kind in ["obj", "llvm-ir"] {
        let out = nax(&["build", &example(), "--emit", kind, "--backend", "cranelift", "-o", dir.join("x").to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "--emit {kind} --backend cranelift");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--backend llvm"), "--emit {kind}");
    }
}

#[test]
fn build_writes_an_object_file_and_vectorised_llvm_ir() {
    let dir = tempdir();
    let obj = dir.join("block.o");
    let out = nax(&["build", &example(), "--emit", "obj", "-o", obj.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&obj).unwrap();
    assert!(bytes.starts_with(b"\x7fELF"), "not an ELF object");
    let has = |name: &[u8]| bytes.windows(name.len()).any(|w| w == name);
    assert!(has(b"block_k0") && has(b"attention_k0"), "the object lacks the kernels' symbols");
    let source = dir.join("axpy.nax");
    std::fs::write(&source, "dim n = 1029\ndef axpy(x: [n], y: [n], a: float) -> [n] {\n    return x * a + exp(y)\n}\n").unwrap();
    let ir = dir.join("axpy.ll");
    let out = nax(&["build", source.to_str().unwrap(), "--emit", "llvm-ir", "-o", ir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&ir).unwrap();
    assert!(text.contains("define void @axpy_k"), "{text}");
    // The inner loops are vectorised, exp included (no call in the vector loop).
    assert!(text.contains(" x float>"), "no vector of floats in the optimised IR:\n{text}");
    assert!(!text.contains("call float @expf") && !text.contains("call double @exp"), "exp is a scalar call:\n{text}");
}

/// A loop's turns compile to one body per kind of kernel: the LLVM IR of
/// eight layers has as many kernel bodies as that of two (each layer's
/// kernels pass their slice of the stacked weights as a parameter), and
/// the library's kernels each keep their exported entry.
#[test]
fn the_turns_of_a_loop_share_their_code() {
    let dir = tempdir();
    let bodies = |layers: usize| {
        let source = dir.join(format!("layers{layers}.nax"));
        let program = format!(
            "dim L = {layers}\ndim D = 64\nparam w: [L D D]\nparam b: [L D]\n\
             def f(x: [n D]) -> [n D] {{\n    for l in L {{\n        h = tanh(x @ w[L = l] + b[L = l])\n        x = x + h * sigmoid(x) - mean(h, D)\n    }}\n    return x\n}}\n"
        );
        std::fs::write(&source, program).unwrap();
        let ir = dir.join(format!("layers{layers}.ll"));
        let out = nax(&["build", source.to_str().unwrap(), "--emit", "llvm-ir", "-o", ir.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let text = std::fs::read_to_string(&ir).unwrap();
        let count = |prefix: &str| text.lines().filter(|l| l.starts_with(prefix) && l.contains(" @f_k")).count();
        (count("define internal "), count("define void "))
    };
    let (two, eight) = (bodies(2), bodies(8));
    assert_eq!(two.0, eight.0, "bodies of 2 and 8 layers");
    assert!(two.0 > 0 && eight.1 > two.1, "entries of 2 and 8 layers: {} and {}", two.1, eight.1);
}

/// `--cpu generic` plans the products' microkernel for 16-byte vectors and
/// compiles for any x86-64: the microkernel's vectors are 4 floats, and
/// the code carries no CPU's features.
#[test]
fn build_for_the_generic_cpu() {
    let dir = tempdir();
    let gemm = crate::support::root().join("examples/workloads/gemm.nax");
    let emit = |kind: &str, cpu: &str| {
        let path = dir.join(format!("gemm-{kind}-{cpu}"));
        let out = nax(&["build", gemm.to_str().unwrap(), "--emit", kind, "--cpu", cpu, "-o", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        std::fs::read_to_string(path).unwrap()
    };
    assert!(emit("kernels", "generic").contains("microkernel f32 6x8 lanes 4 "));
    let ir = emit("llvm-ir", "generic");
    assert!(ir.contains("define void @gemm_m0(") && ir.contains("\"target-cpu\"=\"x86-64\""), "{ir}");
    assert!(ir.contains("<4 x float>") && !ir.contains("<16 x float>"), "{ir}");
    assert!(emit("llvm-ir", "native").contains("define void @gemm_m0("));
}

/// `--emit so`'s options: a named CPU (its features in the IR), and
/// exit 2 for an unknown CPU, an output not named libNAME.so (NAME a C
/// identifier, not a runtime prefix), --embed-weights without --weights,
/// and a back end other than LLVM. `--timings` prints the link stage.
#[test]
fn build_so_options() {
    let dir = tempdir();
    let gemm = crate::support::root().join("examples/workloads/gemm.nax");
    let gemm = gemm.to_str().unwrap();
    let ir = dir.join("gemm.ll");
    let out = nax(&["build", gemm, "--emit", "llvm-ir", "--cpu", "x86-64-v3", "-o", ir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&ir).unwrap();
    assert!(
        text.contains("+avx2") && text.contains("+fma") && !text.contains("+avx512f") && text.contains("\"tune-cpu\"=\"x86-64-v3\""),
        "{}",
        &text[..2000.min(text.len())]
    );
    let lib = dir.join("libgemm.so");
    let out = nax(&["build", gemm, "--emit", "so", "-o", lib.to_str().unwrap(), "--timings"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(lib.is_file() && dir.join("gemm.h").is_file());
    assert!(String::from_utf8_lossy(&out.stderr).lines().any(|l| l.trim_start().starts_with("link")));
    for (args, message) in [
        (vec!["--emit", "so", "--cpu", "pentium", "-o", lib.to_str().unwrap()], "--cpu pentium"),
        (vec!["--emit", "so", "-o", dir.join("gemm.so").to_str().unwrap()], "libNAME.so"),
        (vec!["--emit", "so", "-o", dir.join("lib2x.so").to_str().unwrap()], "C identifier"),
        (vec!["--emit", "so", "-o", dir.join("libnax_capi.so").to_str().unwrap()], "reserved"),
        (vec!["--emit", "so", "--embed-weights", "-o", lib.to_str().unwrap()], "--weights"),
        (vec!["--emit", "so", "--backend", "cranelift", "-o", lib.to_str().unwrap()], "llvm"),
        (vec!["--emit", "so", "-o", dir.join("libm.so").to_str().unwrap()], "a system library's"),
        (vec!["--emit", "so", "-o", dir.join("libpthread.so").to_str().unwrap()], "a system library's"),
        (vec!["--emit", "so", "-o", dir.join("missing/libgemm.so").to_str().unwrap()], "does not exist"),
        (vec!["--emit", "graph", "-o", dir.to_str().unwrap()], "is a directory"),
        (vec!["--emit", "so", "--mesh", "tp=2", "-o", lib.to_str().unwrap()], "--shard"),
        (vec!["--emit", "llvm-ir", "--mesh", "tp=2", "--shard", "k=tp", "-o", ir.to_str().unwrap()], "go with --emit so"),
        (vec!["--emit", "so", "--mesh", "tp=0", "--shard", "k=tp", "-o", lib.to_str().unwrap()], "--mesh tp=0"),
        (vec!["--emit", "so", "--mesh", "tp=2", "--shard", "k", "-o", lib.to_str().unwrap()], "--shard k"),
    ] {
        let mut all = vec!["build", gemm];
        all.extend(args);
        let out = nax(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(message), "{all:?}: {err}");
    }
    // A split the program cannot take names the function (a library splits every one).
    let out = nax(&["build", gemm, "--emit", "so", "--mesh", "tp=3", "--shard", "k=tp", "-o", lib.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("error: `") && err.contains("cannot be split as asked: the axis 'k' of size 1024"), "{err}");
}

#[test]
fn timings_print_every_stage() {
    let dir = tempdir();
    let graph = dir.join("t.graph");
    let out = nax(&["build", &example(), "--emit", "graph", "-o", graph.to_str().unwrap(), "--timings"]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    for stage in ["parse", "check", "lower", "total"] {
        assert!(err.lines().any(|l| l.trim_start().starts_with(stage) && l.ends_with(" ms")), "no {stage} line: {err}");
    }
    let source = dir.join("scale.nax");
    std::fs::write(&source, "dim n = 3\ndef f(s: float) -> [n] {\n    return ones([n]) * s\n}\n").unwrap();
    for (backend, stages) in [
        ("llvm", &["parse", "check", "lower", "kernels", "codegen", "link", "run", "total"][..]),
        ("mlir", &["kernels", "codegen", "link", "run"][..]),
        ("cranelift", &["kernels", "codegen", "link", "run"][..]),
        ("interp", &["codegen", "run"][..]),
    ] {
        let out_file = dir.join(format!("{backend}.safetensors"));
        let out = nax(&["run", source.to_str().unwrap(), "--fn", "f", "--arg", "s=2", "--out", out_file.to_str().unwrap(), "--backend", backend, "--timings"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(err.contains(&format!("({backend} back end)")), "{err}");
        for stage in stages {
            assert!(err.lines().any(|l| l.trim_start().starts_with(stage) && l.ends_with(" ms")), "--backend {backend}: no {stage} line: {err}");
        }
    }
}

/// What `nax build` of the einsum_chain workload writes for `--emit kind` at `level` (`-O0`, `-O1`).
fn emitted_chain(kind: &str, level: &str) -> String {
    let dir = tempdir();
    let chain = root().join("examples/workloads/einsum_chain.nax").display().to_string();
    let out_file = dir.join(format!("chain{level}.{kind}"));
    let out = nax(&["build", &chain, "--emit", kind, level, "-o", out_file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(out_file).unwrap()
}

#[test]
fn emit_graph_shows_the_graph_before_and_after_rewriting_and_its_kernels() {
    let emit = |level: &str| emitted_chain("graph", level);
    let text = emit("-O1");
    assert_eq!(text.matches("\ngraph einsum_chain\n").count() + usize::from(text.starts_with("graph ")), 2, "{text}");
    for want in [
        "# `einsum_chain` as lowered",
        "# `einsum_chain` rewritten",
        "# saturation stopped: Saturated",
        "# rules applied: associate-contraction x",
        "# kernels: 2",
        "#   k0 -> %",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    // Two matrix-vector products: 4096 x 256 and 256 x 4096, 2 FLOPs per multiply-add each.
    assert_eq!(text.matches(" moved, 2.10 MFLOP").count(), 2, "{text}");
    let off = emit("-O0");
    assert!(off.contains("# rewriting is off (-O0)") && off.contains("# kernels: 1") && !off.contains("rewritten"), "{off}");
}

#[test]
fn o0_turns_the_graph_rewriting_off() {
    let kernels = |level: &str| emitted_chain("kernels", level).lines().filter(|l| l.starts_with("kernel ")).count();
    // One three-operand kernel as written; two matrix-vector products when b and c are contracted first.
    assert_eq!(kernels("-O0"), 1);
    assert_eq!(kernels("-O1"), 2);
}

/// `CC` is split into words as a shell splits it (`ccache cc`, `cc -O2`);
/// a CC that writes nothing is named as the reason.
#[test]
fn cc_is_split_into_words_and_must_write_the_library() {
    let dir = tempdir();
    let gemm = crate::support::root().join("examples/workloads/gemm.nax");
    let lib = dir.join("libgemm.so");
    let build = |cc: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_nax"))
            .args(["build", gemm.to_str().unwrap(), "--emit", "so", "-o", lib.to_str().unwrap()])
            .env("CC", cc)
            .output()
            .expect("run nax")
    };
    let out = build("cc -O2");
    assert_eq!(out.status.code(), Some(0), "CC='cc -O2': {}", String::from_utf8_lossy(&out.stderr));
    assert!(lib.is_file());
    let out = build("true");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("wrote no library"), "{err}");
    let out = build("cc 'unclosed");
    assert!(String::from_utf8_lossy(&out.stderr).contains("quotes do not close"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `--out` writes a regular file or a new path: a FIFO, a device or a
/// directory is refused before anything runs and stays what it was; a
/// symbolic link to a regular file is followed and stays a link.
#[test]
fn out_writes_only_regular_files_and_new_paths() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempdir();
    let source = dir.join("f.nax");
    std::fs::write(&source, "def f() -> [3] {\n    return arange(3) * 1.5\n}\n").unwrap();
    let run = |out: &std::path::Path| nax(&["run", source.to_str().unwrap(), "--fn", "f", "--out", out.to_str().unwrap()]);
    let fifo = dir.join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for (path, what) in [(fifo.as_path(), "a FIFO"), (std::path::Path::new("/dev/null"), "a character device"), (dir.as_path(), "a directory")] {
        let out = run(path);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", path.display());
        assert!(err.contains(what), "{}: {err}", path.display());
    }
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO stays a FIFO");
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
    let target = dir.join("target.safetensors");
    std::fs::write(&target, b"old").unwrap();
    let link = dir.join("link.safetensors");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = run(&link);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link stays a link");
    assert!(nax::read_tensors(&target).unwrap().iter().any(|(name, _)| name == "out"), "the link's target holds the result");
    let dangling = dir.join("dangling");
    std::os::unix::fs::symlink(dir.join("nowhere/x"), &dangling).unwrap();
    let out = run(&dangling);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A reader that closes the pipe early (`nax check --types | head -1`)
/// ends the printing quietly: no panic, no "Broken pipe" message.
#[test]
fn a_closed_pipe_ends_printing_quietly() {
    use std::io::Read;
    let mut source = String::new();
    for i in 0..3000 {
        source.push_str(&format!("def f{i}(x: [n]) -> [n] {{\n    return x * 2.0\n}}\n"));
    }
    let dir = tempdir();
    let file = dir.join("many.nax");
    std::fs::write(&file, source).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_nax"))
        .args(["check", file.to_str().unwrap(), "--types"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The read end is closed here, with most of the output unread.
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{err}");
}

/// Every flag CLI.md names is a flag of `nax` (in a command's `--help`)
/// and is in the book: where the contract, the command and the book part,
/// this fails.
#[test]
fn every_flag_of_the_contract_is_in_the_help_and_the_book() {
    let contract = std::fs::read_to_string(crate::support::shared().join("spec/CLI.md")).expect("CLI.md");
    let mut help = String::new();
    for command in [&["--help"][..], &["check", "--help"], &["run", "--help"], &["build", "--help"], &["explain", "--help"]] {
        let out = crate::support::nax(command);
        assert!(out.status.success(), "nax {command:?}");
        help.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    let root = crate::support::root();
    let book: String = std::fs::read_dir(root.join("docs/src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let mut flags: Vec<&str> = contract
        .match_indices("--")
        .filter_map(|(i, _)| {
            let rest = &contract[i + 2..];
            let end = rest.find(|c: char| !(c.is_ascii_lowercase() || c == '-')).unwrap_or(rest.len());
            (end > 0 && rest.starts_with(|c: char| c.is_ascii_lowercase())).then(|| &contract[i..i + 2 + end])
        })
        .collect();
    flags.sort_unstable();
    flags.dedup();
    assert!(flags.len() >= 8, "CLI.md names only {flags:?}");
    for flag in flags {
        let word = |text: &str| text.match_indices(flag).any(|(i, _)| !text[i + flag.len()..].starts_with(|c: char| c.is_ascii_lowercase() || c == '-'));
        assert!(word(&help), "CLI.md's {flag} is no flag of `nax` (its --help)");
        assert!(word(&book), "CLI.md's {flag} is not in the book (docs/src)");
    }
}
