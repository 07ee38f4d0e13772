//! The host API end to end (`nax::Engine` -> `Program` -> `Function`):
//! compile errors come back as diagnostics; views of the caller's memory
//! (strided, transposed, named) give what a contiguous copy gives; many
//! threads calling one program agree with one thread; programs with
//! different thread counts run side by side; bad calls fail with the
//! messages `nax run` prints and never read out of bounds; results written
//! into the caller's buffer; weights from safetensors files; and the
//! runtime's dependency tree holds no compiler crate.

use crate::support::nax;
use nax::{Arg, Backend, DType, Engine, Error, HostTensor, TensorMut, TensorView};
use std::path::PathBuf;
use std::sync::Arc;

const PROGRAM: &str = "dim n = 4
dim D = 3
param w: [D D]
def f(x: [b n D], m: [n], s: float = 1.0) -> [b n D] {
    return (x @ w) * s + rearrange(m, n -> n 1)
}
def tiny(x: [4]) -> [4] {
    return x + 1.0
}
";

fn names(s: &str) -> Vec<Option<String>> {
    s.split_whitespace().map(|n| (n != "_").then(|| n.to_string())).collect()
}

/// Values `i * scale + offset` for `count` elements.
fn ramp(count: usize, scale: f32, offset: f32) -> Vec<f32> {
    (0..count).map(|i| i as f32 * scale + offset).collect()
}

/// The weight `w` as a host tensor named `[D D]`.
fn weight() -> HostTensor {
    HostTensor::new(nax::TensorData::F32(ramp(9, 0.25, -1.0)), vec![3, 3], names("D D")).unwrap()
}

fn program(engine: &Engine) -> nax::Program {
    engine.compile(PROGRAM).expect("the program checks").with_weights([("w".to_string(), weight())]).expect("w binds")
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nax-api-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn compile_errors_come_back_as_diagnostics() {
    let engine = Engine::new();
    match engine.compile("def f(x: [n]) -> [n] {\n    return x + y\n}\n") {
        Err(Error::Diagnostics { diagnostics, rendered }) => {
            assert_eq!(diagnostics.len(), 1, "{rendered}");
            assert_eq!(diagnostics[0].code.as_str(), "E0201");
            assert!(rendered.contains("error[E0201]") && rendered.contains("return x + y"), "{rendered}");
        }
        Err(other) => panic!("expected diagnostics, got {other}"),
        Ok(_) => panic!("a program with an unknown name compiled"),
    }
    let dir = scratch("diagnostics");
    let bad = dir.join("bad.nax");
    std::fs::write(&bad, "def f(x: [n]) -> [n] {\n    return x + y\n}\n").unwrap();
    let rendered = engine.compile_file(&bad).err().expect("an error").to_string();
    assert!(rendered.contains(&format!("{}:2:", bad.display())), "{rendered}");
    let missing = engine.compile_file(&dir.join("missing.nax")).err().expect("an error").to_string();
    assert!(missing.starts_with("cannot read '") && missing.contains("missing.nax"), "{missing}");
    let p = program(&engine);
    assert_eq!(p.function_names(), ["f", "tiny"]);
    match p.function("g") {
        Err(Error::UnknownFunction { name, available }) => assert_eq!((name.as_str(), available), ("g", vec!["f".to_string(), "tiny".to_string()])),
        Err(other) => panic!("expected an unknown function, got {other}"),
        Ok(_) => panic!("found a function that does not exist"),
    }
}

#[test]
fn the_signature_names_parameters_dtypes_axes_and_defaults() {
    let f = program(&Engine::new()).function("f").unwrap();
    assert_eq!(f.signature().to_string(), "fn f(x: f32[b n=4 D=3], m: f32[n=4], s: float = 1.0) -> f32[b n=4 D=3]");
    assert_eq!(f.signature().weights.len(), 1);
}

#[test]
fn strided_transposed_and_named_views_give_what_a_contiguous_copy_gives() {
    for backend in [Backend::Llvm, Backend::Mlir, Backend::Cranelift, Backend::Interp] {
        let f = program(&Engine::new().backend(backend)).function("f").unwrap();
        let x = ramp(2 * 4 * 3, 0.5, -3.0);
        let m = ramp(4, 1.0, 0.0);
        let contiguous = f
            .call([
                ("x", TensorView::new(&x, vec![2, 4, 3], names("b n D")).unwrap().into()),
                ("m", TensorView::new(&m, vec![4], names("n")).unwrap().into()),
                ("s", 0.5.into()),
            ])
            .unwrap();
        // The same x stored as [D b n] (each element where its transpose
        // puts it), passed by name: bound by strides, no copy of the caller's.
        let mut xt = vec![0f32; x.len()];
        for (b, n, d) in (0..2).flat_map(|b| (0..4).flat_map(move |n| (0..3).map(move |d| (b, n, d)))) {
            xt[d * 8 + b * 4 + n] = x[b * 12 + n * 3 + d];
        }
        let transposed = TensorView::new(&xt, vec![3, 2, 4], names("D b n")).unwrap();
        // m as every other element of a longer buffer, read backwards.
        let wide: Vec<f32> = (0..8).map(|i| if i % 2 == 0 { m[3 - i / 2] } else { f32::NAN }).collect();
        let strided = TensorView::strided(&wide, 6, vec![4], vec![-2], names("n")).unwrap();
        let viewed = f.call([("x", Arg::from(transposed)), ("m", strided.into()), ("s", 0.5.into())]).unwrap();
        assert_eq!(viewed, contiguous, "{}", backend.name());
        // Unnamed views bind by position.
        let unnamed = f
            .call([
                ("x", TensorView::new(&x, vec![2, 4, 3], names("_ _ _")).unwrap().into()),
                ("m", TensorView::new(&m, vec![4], names("_")).unwrap().into()),
                ("s", 0.5.into()),
            ])
            .unwrap();
        assert_eq!(unnamed, contiguous);
    }
}

#[test]
fn eight_threads_of_two_hundred_calls_agree_with_one_thread() {
    let program = program(&Engine::new().threads(2));
    let f = program.function("f").unwrap();
    let inputs: Vec<(Vec<f32>, Vec<f32>)> = (0..8).map(|k| (ramp(5 * 4 * 3, 0.1 * (k + 1) as f32, -1.0), ramp(4, k as f32, 0.5))).collect();
    let call = |(x, m): &(Vec<f32>, Vec<f32>)| {
        f.call([("x", TensorView::new(x, vec![5, 4, 3], names("b n D")).unwrap().into()), ("m", TensorView::new(m, vec![4], names("n")).unwrap().into())])
            .unwrap()
    };
    let expected: Vec<HostTensor> = inputs.iter().map(call).collect();
    std::thread::scope(|s| {
        for t in 0..8 {
            let (inputs, expected, call) = (&inputs, &expected, &call);
            s.spawn(move || {
                for i in 0..200 {
                    let k = (t + i) % inputs.len();
                    assert_eq!(call(&inputs[k]), expected[k], "thread {t}, call {i}");
                }
            });
        }
    });
}

#[test]
fn functions_of_several_results_give_each_by_name() {
    let source = "dim L = 3\ndef f(x: [n]) -> (doubled: [n], steps: [L n]) {\n    s = for l in L {\n        x = x + 1.0\n        yield x\n    }\n    return x * 2.0, s\n}\n";
    let x = [1.0f32, 2.0];
    for backend in [Backend::Interp, Backend::Llvm, Backend::Cranelift, Backend::Mlir] {
        let f = Engine::new().backend(backend).compile(source).unwrap().function("f").unwrap();
        assert_eq!(f.signature().to_string(), "fn f(x: f32[n]) -> (doubled: f32[n], steps: f32[L=3 n])");
        let results = f.call_results([("x", TensorView::new(&x, vec![2], names("n")).unwrap().into())]).unwrap();
        let got: Vec<(&str, Vec<f64>)> = results.iter().map(|(name, t)| (name.as_str(), t.to_f64_vec())).collect();
        assert_eq!(got, [("doubled", vec![8.0, 10.0]), ("steps", vec![2.0, 3.0, 3.0, 4.0, 4.0, 5.0])], "{}", backend.name());
        assert_eq!(results[1].1.names(), names("L n"));
        // One result asked of a function of two: an error naming them.
        let e = f.call([("x", TensorView::new(&x, vec![2], names("n")).unwrap().into())]).unwrap_err().to_string();
        assert!(e.contains("`f` has 2 results (doubled, steps)"), "{e}");
        let mut out = [0.0f32; 2];
        let e = f.call_into([("x", TensorView::new(&x, vec![2], names("n")).unwrap().into())], &mut TensorMut::new(&mut out)).unwrap_err();
        assert!(e.to_string().contains("2 results"), "{e}");
    }
}

#[test]
fn programs_with_different_thread_counts_run_side_by_side() {
    // Large enough that each call splits its work across its pool.
    let source = "def g(x: [n k], y: [k m]) -> [n m] {\n    return gelu(x @ y) + 1.0\n}\n";
    let (one, three) = (Engine::new().threads(1).compile(source).unwrap(), Engine::new().threads(3).compile(source).unwrap());
    assert_eq!((one.threads(), three.threads()), (1, 3));
    let x = ramp(96 * 128, 0.001, -0.5);
    let y = ramp(128 * 80, -0.002, 0.7);
    let run = |p: &nax::Program| {
        let g = p.function("g").unwrap();
        (0..20)
            .map(|_| {
                g.call([
                    ("x", TensorView::new(&x, vec![96, 128], names("n k")).unwrap().into()),
                    ("y", TensorView::new(&y, vec![128, 80], names("k m")).unwrap().into()),
                ])
                .unwrap()
            })
            .collect::<Vec<_>>()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| run(&one));
        let b = s.spawn(|| run(&three));
        (a.join().unwrap(), b.join().unwrap())
    });
    for (r1, r3) in a.iter().zip(&b) {
        assert_eq!(r1.shape(), &[96, 80]);
        for (u, v) in r1.to_f64_vec().into_iter().zip(r3.to_f64_vec()) {
            assert!((u - v).abs() <= 1e-5 * v.abs().max(1.0), "{u} vs {v}");
        }
    }
}

/// The message `nax run` prints for `f` of PROGRAM on an `x` of `shape`.
fn nax_run_message(x_shape: &[usize]) -> String {
    let dir = scratch("message");
    let (source, inputs, weights, out) = (dir.join("p.nax"), dir.join("in.safetensors"), dir.join("w.safetensors"), dir.join("out.safetensors"));
    std::fs::write(&source, PROGRAM).unwrap();
    let count = x_shape.iter().product();
    let x = HostTensor::new(nax::TensorData::F32(ramp(count, 1.0, 0.0)), x_shape.to_vec(), names("b n D")).unwrap();
    let m = HostTensor::new(nax::TensorData::F32(ramp(4, 1.0, 0.0)), vec![4], names("n")).unwrap();
    nax::write_tensors_atomic(&inputs, &[("x", &x), ("m", &m)]).unwrap();
    nax::write_tensor_atomic(&weights, "w", &weight()).unwrap();
    let run = nax(&[
        "run",
        source.to_str().unwrap(),
        "--fn",
        "f",
        "--inputs",
        inputs.to_str().unwrap(),
        "--weights",
        weights.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr).trim_end().to_string();
    stderr.strip_prefix("error: ").unwrap_or(&stderr).to_string()
}

#[test]
fn wrong_sizes_fail_with_the_message_nax_run_gives() {
    let f = program(&Engine::new()).function("f").unwrap();
    let x = ramp(2 * 5 * 3, 1.0, 0.0);
    let m = ramp(4, 1.0, 0.0);
    let e = f
        .call([("x", TensorView::new(&x, vec![2, 5, 3], names("b n D")).unwrap().into()), ("m", TensorView::new(&m, vec![4], names("n")).unwrap().into())])
        .unwrap_err();
    assert_eq!(e.to_string(), "parameter 'x': axis 'n' has size 5, expected 4");
    assert_eq!(e.to_string(), nax_run_message(&[2, 5, 3]));
    // A size given twice differently, a wrong dtype, a wrong rank.
    let e = f
        .call([
            ("x", TensorView::new(&x[..24], vec![2, 4, 3], names("b n D")).unwrap().into()),
            ("m", TensorView::new(&m[..3], vec![3], names("n")).unwrap().into()),
        ])
        .unwrap_err();
    assert_eq!(e.to_string(), "parameter 'm': axis 'n' has size 3, expected 4");
    let ints = [1i64, 2, 3, 4];
    let e = f
        .call([
            ("x", TensorView::new(&x[..24], vec![2, 4, 3], names("b n D")).unwrap().into()),
            ("m", TensorView::new(&ints, vec![4], names("n")).unwrap().into()),
        ])
        .unwrap_err();
    assert_eq!(e.to_string(), "parameter 'm' is f32 but the tensor is i64");
    let e = f
        .call([("x", TensorView::new(&x[..24], vec![8, 3], names("_ _")).unwrap().into()), ("m", TensorView::new(&m, vec![4], names("n")).unwrap().into())])
        .unwrap_err();
    assert!(e.to_string().starts_with("parameter 'x': expected a tensor of rank 3"), "{e}");
    // Arguments by name: missing, unknown, twice, of the wrong kind.
    let xv = || Arg::from(TensorView::new(&x[..24], vec![2, 4, 3], names("b n D")).unwrap());
    assert_eq!(f.call([("x", xv())]).unwrap_err().to_string(), "parameter 'm' (f32[n=4]) needs a value");
    let mv = || Arg::from(TensorView::new(&m, vec![4], names("n")).unwrap());
    assert_eq!(f.call([("x", xv()), ("m", mv()), ("z", 1.0.into())]).unwrap_err().to_string(), "`f` has no parameter 'z'");
    assert_eq!(f.call([("x", xv()), ("m", mv()), ("m", mv())]).unwrap_err().to_string(), "parameter 'm' is given twice");
    assert_eq!(f.call([("x", xv()), ("m", 2.0.into())]).unwrap_err().to_string(), "parameter 'm' needs a tensor, not a host scalar");
    assert_eq!(f.call([("x", xv()), ("m", mv()), ("s", true.into())]).unwrap_err().to_string(), "parameter 's' is a host float, not bool");
    // A weight that was never bound.
    let bare = Engine::new().compile(PROGRAM).unwrap().function("f").unwrap();
    assert_eq!(bare.call([("x", xv()), ("m", mv())]).unwrap_err().to_string(), "the weight 'w' is missing");
}

#[test]
fn views_never_reach_outside_the_callers_memory() {
    let x = ramp(24, 1.0, 0.0);
    for (offset, shape, strides) in [
        (0, vec![2, 4, 3], vec![12, 3, 2]),
        (1, vec![2, 4, 3], vec![12, 3, 1]),
        (0, vec![2, 4, 3], vec![-12, 3, 1]),
        (0, vec![2, 4, 3], vec![isize::MAX, 3, 1]),
    ] {
        let e = TensorView::strided(&x, offset, shape.clone(), strides.clone(), names("b n D")).unwrap_err();
        assert!(e.to_string().contains("reaches outside the 24 elements it borrows"), "{shape:?} {strides:?}: {e}");
    }
    assert!(TensorView::new(&x, vec![2, 4, 4], names("b n D")).is_err());
}

#[test]
fn results_can_be_written_into_the_callers_buffer() {
    let f = program(&Engine::new()).function("f").unwrap();
    let x = ramp(24, 0.5, 1.0);
    let m = ramp(4, 1.0, 0.0);
    let args =
        || [("x", Arg::from(TensorView::new(&x, vec![2, 4, 3], names("b n D")).unwrap())), ("m", TensorView::new(&m, vec![4], names("n")).unwrap().into())];
    let expected = f.call(args()).unwrap();
    let mut out = vec![0f32; 24];
    f.call_into(args(), &mut TensorMut::new(&mut out)).unwrap();
    assert_eq!(HostTensor::new(nax::TensorData::F32(out), vec![2, 4, 3], names("b n D")).unwrap(), expected);
    let mut short = vec![0f32; 23];
    assert_eq!(
        f.call_into(args(), &mut TensorMut::new(&mut short)).unwrap_err().to_string(),
        "the result is 24 elements of f32, but the buffer given holds 23 elements of f32"
    );
    let mut doubles = vec![0f64; 24];
    assert!(f.call_into(args(), &mut TensorMut::new(&mut doubles)).is_err());
    // A result that is an argument itself (reshaped): no kernel writes it, so it is copied.
    let ident = Engine::new().compile("def ident(x: [n k]) -> [(n k)] {\n    return rearrange(x, n k -> (n k))\n}\n").unwrap().function("ident").unwrap();
    let mut flat = vec![0f32; 24];
    ident.call_into([("x", TensorView::new(&x, vec![6, 4], names("n k")).unwrap().into())], &mut TensorMut::new(&mut flat)).unwrap();
    assert_eq!(flat, x);
    let returned = ident.call([("x", TensorView::new(&x, vec![6, 4], names("n k")).unwrap().into())]).unwrap();
    assert_eq!(returned.to_f64_vec(), x.iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
}

#[test]
fn weights_bind_from_a_safetensors_file_by_name() {
    let dir = scratch("weights");
    let path = dir.join("w.safetensors");
    // Stored as [E D], fully named: bound by name to [D E], transposed.
    let source = "dim D = 3\ndim E = 2\nparam w: [D E]\ndef h(x: [D]) -> [E] {\n    return x @ w\n}\n";
    let stored = HostTensor::new(nax::TensorData::F32(ramp(6, 1.0, 0.0)), vec![2, 3], names("E D")).unwrap();
    nax::write_tensor_atomic(&path, "w", &stored).unwrap();
    let p = Engine::new().compile(source).unwrap().with_weights_file(&path).unwrap();
    let x = [1f32, 10.0, 100.0];
    let y = p.function("h").unwrap().call([("x", TensorView::new(&x, vec![3], names("D")).unwrap().into())]).unwrap();
    // w[d, e] = stored[e, d] = 3e + d.
    assert_eq!(y.to_f64_vec(), vec![210.0, 543.0]);
    assert_eq!(y.names(), names("E").as_slice());
    let wrong = HostTensor::new(nax::TensorData::F32(ramp(6, 1.0, 0.0)), vec![2, 3], names("E F")).unwrap();
    let e = Engine::new().compile(source).unwrap().with_weights([("w".into(), wrong)]).err().expect("a weight without axis D");
    assert_eq!(e.to_string(), "parameter 'w': axis 'D' is missing from the tensor's names [E F]");
}

#[test]
fn defaults_run_time_sizes_and_scalars() {
    let source = "dim V\ndim W = V / 2\ndef g(x: [V], y: [W], k: int = 3) -> [W] {\n    return y * float(k)\n}\n";
    let g = Engine::new().compile(source).unwrap().function("g").unwrap();
    let (x, y) = (ramp(8, 1.0, 0.0), ramp(4, 1.0, 0.0));
    let r = g.call([("x", TensorView::new(&x, vec![8], names("V")).unwrap().into()), ("y", TensorView::new(&y, vec![4], names("W")).unwrap().into())]).unwrap();
    assert_eq!(r.to_f64_vec(), vec![0.0, 3.0, 6.0, 9.0]);
    let r = g
        .call([
            ("x", TensorView::new(&x, vec![8], names("V")).unwrap().into()),
            ("y", TensorView::new(&y, vec![4], names("W")).unwrap().into()),
            ("k", 2i64.into()),
        ])
        .unwrap();
    assert_eq!(r.to_f64_vec(), vec![0.0, 2.0, 4.0, 6.0]);
    let e = g
        .call([("x", TensorView::new(&x[..7], vec![7], names("V")).unwrap().into()), ("y", TensorView::new(&y, vec![4], names("W")).unwrap().into())])
        .unwrap_err();
    assert!(e.to_string().starts_with("the sizes of the arguments do not fit `g`"), "{e}");
}

#[test]
fn the_engine_caches_programs_by_source_and_options() {
    let engine = Engine::new().threads(1);
    let a = engine.compile(PROGRAM).unwrap();
    let b = engine.compile(PROGRAM).unwrap();
    let (fa, fb) = (a.function("tiny").unwrap(), b.function("tiny").unwrap());
    assert!(fa.same_code(&fb), "one source, one options: one compiled program");
    let other = Engine::new().threads(2).compile(PROGRAM).unwrap();
    assert!(!fa.same_code(&other.function("tiny").unwrap()));
    let x = [1f32, 2.0, 3.0, 4.0];
    let r = fb.call([("x", TensorView::new(&x, vec![4], names("_")).unwrap().into())]).unwrap();
    assert_eq!((r.dtype(), r.to_f64_vec()), (DType::F32, vec![2.0, 3.0, 4.0, 5.0]));
}

#[test]
fn functions_and_programs_are_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<Engine>();
    shared::<nax::Program>();
    shared::<nax::Function>();
    let f = Arc::new(program(&Engine::new()).function("tiny").unwrap());
    let handle = std::thread::spawn(move || f.signature().name.clone());
    assert_eq!(handle.join().unwrap(), "tiny");
}

/// `cargo tree -p PACKAGE --prefix none --offline` with `options`: one
/// crate a line.
fn cargo_tree(package: &str, options: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["tree", "-p", package, "--prefix", "none", "--offline"])
        .args(options)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_runtime_depends_on_no_compiler_crate() {
    let tree = cargo_tree("nax-runtime", &["-e", "normal,build"]);
    assert!(tree.starts_with("nax-runtime "), "{tree}");
    // The nax crates it links are those below it: the contract (dtypes,
    // sizes, signatures, the plan's format, the machine) and the host data.
    let below = ["nax-runtime ", "nax-contract ", "nax-host "];
    let compiler: Vec<&str> = tree.lines().filter(|l| l.starts_with("nax") && !below.iter().any(|b| l.starts_with(b))).collect();
    assert!(compiler.is_empty(), "the runtime pulls in {compiler:?}");
    for heavy in ["inkwell", "melior", "cranelift", "egg ", "petgraph", "llvm-sys", "mlir-sys"] {
        assert!(!tree.lines().any(|l| l.starts_with(heavy)), "the runtime pulls in {heavy}");
    }
}

/// The command line is a client of the driver: it parses flags, calls
/// `nax` (the pipeline, `nax::emit`) and prints; of the compiler it links
/// directly only the front end (its diagnostics and `--types`).
#[test]
fn the_command_line_depends_on_the_driver_and_the_front_end_only() {
    let tree = cargo_tree("nax-cli", &["-e", "normal", "--depth", "1"]);
    let mut nax: Vec<&str> = tree.lines().filter(|l| l.starts_with("nax")).filter_map(|l| l.split(' ').next()).collect();
    nax.sort_unstable();
    assert_eq!(nax, ["nax", "nax-cli", "nax-front"], "{tree}");
}

/// The machine is described once (`nax_contract::Machine`): no other
/// source file asks the CPU what it has.
#[test]
fn only_the_machine_description_detects_the_cpu() {
    let root = crate::support::root();
    let mut offenders = Vec::new();
    let mut dirs = vec![root.join("compiler"), root.join("runtime"), root.join("python/src"), root.join("benches"), root.join("examples")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") && !path.starts_with(root.join("runtime/contract")) {
                let text = std::fs::read_to_string(&path).unwrap();
                if ["is_x86_feature_detected", "__cpuid", "get_host_cpu_features"].iter().any(|probe| text.contains(probe)) {
                    offenders.push(path.strip_prefix(&root).unwrap().display().to_string());
                }
            }
        }
    }
    assert_eq!(offenders, ["compiler/back/llvm/src/lib.rs"], "only the contract's machine description (and LLVM's own spelling of the host) detect the CPU");
}

/// After the lowering, no stage links the checker: the IR, the optimizer,
/// kernel formation and every code generator work from the IR's own types
/// and the contract's size table. The PyTorch emitter, an oracle, writes
/// from the checked program (ARCHITECTURE.md says why), and is the one
/// back end that does.
#[test]
fn the_stages_after_the_lowering_do_not_link_the_checker() {
    for stage in
        ["nax-ir", "nax-passes", "nax-shard", "nax-kernel", "nax-back-native", "nax-back-llvm", "nax-back-mlir", "nax-back-cranelift", "nax-back-interp"]
    {
        let tree = cargo_tree(stage, &["-e", "normal,build"]);
        assert!(tree.starts_with(&format!("{stage} ")), "{tree}");
        assert!(!tree.lines().any(|l| l.starts_with("nax-front ")), "{stage} links nax-front:\n{tree}");
    }
    let back_ends = std::fs::read_dir(crate::support::root().join("compiler/back")).unwrap().count();
    assert_eq!(back_ends, 6, "a new back end: list it above, or say why it reads the checked program");
}

/// The stages that only transform programs (the checker, the lowering,
/// the IR, the optimizer, the partitioner, kernel formation) link the contract, not the
/// runtime: they describe what runs, and share its vocabulary (dtypes,
/// sizes, signatures, the plan's format) from below both.
#[test]
fn the_stages_before_code_generation_link_the_contract_not_the_runtime() {
    for stage in ["nax-values", "nax-front", "nax-lower", "nax-ir", "nax-passes", "nax-shard", "nax-kernel"] {
        let tree = cargo_tree(stage, &["-e", "normal,build"]);
        assert!(tree.lines().any(|l| l.starts_with("nax-contract ")), "{stage} does not link the contract:\n{tree}");
        assert!(!tree.lines().any(|l| l.starts_with("nax-runtime ") || l.starts_with("nax-host ")), "{stage} links the runtime:\n{tree}");
    }
}

/// Inside every crate of `runtime/`, a file imports its own crate's names
/// from the module that defines them, never through the crate root's
/// re-exports (an arrow back up), and the modules' imports form no circle.
/// (`use crate::m::x` is an edge to module `m`; the test-only
/// `test_support` is exempt.)
#[test]
fn the_runtime_crates_import_down_only() {
    let root = crate::support::root();
    for krate in ["runtime/src", "runtime/host/src", "runtime/contract/src", "runtime/named/src", "runtime/capi/src"] {
        let src = root.join(krate);
        let module_of = |path: &std::path::Path| {
            let relative = path.strip_prefix(&src).expect("a file of the crate");
            let first = relative.components().next().expect("a component").as_os_str().to_string_lossy().into_owned();
            first.trim_end_matches(".rs").to_string()
        };
        let mut files = crate::support::files_under(&src, "rs");
        files.retain(|f| f.file_name().is_some_and(|n| n != "lib.rs"));
        let modules: std::collections::BTreeSet<String> = files.iter().map(|f| module_of(f)).collect();
        let mut edges: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = std::collections::BTreeMap::new();
        for file in &files {
            let from = module_of(file);
            let text = std::fs::read_to_string(file).expect("read a source file");
            let code = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                let targets: Vec<&str> = match rest.strip_prefix('{') {
                    Some(list) => list.split('}').next().unwrap_or_default().split(',').map(|t| t.trim().split("::").next().unwrap_or_default()).collect(),
                    None => vec![rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or_default()],
                };
                for target in targets.into_iter().filter(|t| !t.is_empty() && *t != "test_support") {
                    assert!(modules.contains(target), "{}: imports `{target}` through the crate root, not from its module", file.display());
                    if target != from {
                        edges.entry(from.clone()).or_default().insert(target.to_string());
                    }
                }
            }
        }
        // No circle: repeatedly remove the modules that import no remaining one.
        let mut left = modules.clone();
        while let Some(leaf) = left.iter().find(|m| edges.get(*m).is_none_or(|to| to.iter().all(|t| !left.contains(t)))).cloned() {
            left.remove(&leaf);
        }
        assert!(left.is_empty(), "{krate}: the modules {left:?} import each other in a circle");
    }
}

#[test]
fn a_call_checked_for_one_function_is_refused_by_another() {
    let p = program(&Engine::new());
    let (f, tiny) = (p.function("f").unwrap(), p.function("tiny").unwrap());
    let x = [1f32, 2.0, 3.0, 4.0];
    let call = tiny.check(vec![Arg::from(TensorView::new(&x, vec![4], names("_")).unwrap())]).unwrap();
    assert_eq!(tiny.run(&call).unwrap().to_f64_vec(), vec![2.0, 3.0, 4.0, 5.0]);
    let e = f.run(&call).unwrap_err();
    assert_eq!(e.to_string(), "a call checked against `tiny` was given to `f`");
}

#[test]
fn signatures_and_native_plans_round_trip_through_json() {
    let root = crate::support::root();
    let mut files = crate::support::nax_files(&root.join("examples/workloads"));
    files.push(root.join("examples/transformer_block.nax"));
    let mut plans = 0;
    for path in files {
        let source = std::fs::read_to_string(&path).unwrap();
        let timings = &mut nax::Timings::start();
        let module = nax::pipeline::check(&path.display().to_string(), &source, timings).unwrap();
        for f in &module.functions {
            let graph = nax::pipeline::lower(&module, &f.name, true, timings).unwrap().into_graph();
            let signature = nax_ir::signature(&graph, &nax::pipeline::defaults(f));
            let text = serde_json::to_string(&signature).unwrap();
            assert_eq!(serde_json::from_str::<nax::Signature>(&text).unwrap(), signature, "{}", f.name);
            let program = nax::pipeline::kernels(&graph, &nax::pipeline::Machine::host(), nax::pipeline::FormOptions::default()).unwrap();
            let plan = nax_back_native::Slots::new(&program).plan(&program).unwrap();
            plan.validate(signature.params.len()).unwrap();
            let text = serde_json::to_string(&plan).unwrap();
            assert_eq!(serde_json::from_str::<nax_runtime::NativePlan>(&text).unwrap(), plan, "{}", f.name);
            plans += 1;
        }
    }
    assert!(plans >= 10, "{plans}");
}

/// A program's weight read as a product's B is packed at the first call
/// and never again for that binding, from any number of threads (the
/// store's count of packings stays); binding other weights starts a new
/// store, whose panels are the new weights' (the results follow them).
#[test]
fn a_binding_packs_each_weight_once() {
    let source = "dim t = 64\ndim D = 96\ndim F = 200\nparam w: [D F]\ndef f(x: [t D]) -> [t F] {\n    return x @ w\n}\n";
    let program = Engine::new().threads(2).compile(source).unwrap();
    let x = ramp(64 * 96, 0.01, -1.0);
    let bind = |scale: f32| {
        let w = HostTensor::new(nax::TensorData::F32(ramp(96 * 200, 0.001 * scale, -0.5)), vec![96, 200], vec![None, None]).unwrap();
        program.with_weights([("w".to_string(), w)]).unwrap()
    };
    let (first, second) = (bind(1.0), bind(2.0));
    // x @ w in f64, for the weights of `bind(scale)`.
    let reference = |scale: f32| -> Vec<f64> {
        let w = ramp(96 * 200, 0.001 * scale, -0.5);
        let (x, w) = (&x, &w);
        (0..64).flat_map(|i| (0..200).map(move |j| (0..96).map(|k| f64::from(x[i * 96 + k]) * f64::from(w[k * 200 + j])).sum::<f64>())).collect()
    };
    let call = |p: &nax::Program| p.function("f").unwrap().call([("x", TensorView::new(&x, vec![64, 96], names("t D")).unwrap().into())]).unwrap();
    let want = call(&first);
    assert_eq!(first.packed_weights().packings(), 1, "the first call packs the weight");
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..10 {
                    assert_eq!(call(&first), want);
                }
            });
        }
    });
    assert_eq!(first.packed_weights().packings(), 1, "later calls pack nothing");
    let other = call(&second);
    assert_eq!(second.packed_weights().packings(), 1);
    assert_ne!(other, want, "a new binding reads its own weights");
    for (got, scale) in [(&want, 1.0), (&other, 2.0)] {
        for (g, r) in got.to_f64_vec().iter().zip(reference(scale)) {
            assert!((g - r).abs() <= 1e-4 * (1.0 + r.abs()), "weights scaled by {scale}: {g} for {r}");
        }
    }
}
