//! AOT shared libraries (`nax build --emit so`, ABI.md) end to end, from C.
//!
//! A C harness (`tests/aot/harness.c`, compiled with `cc -std=c99 -Wall
//! -Wextra -Werror -pedantic` against a generated header) loads each
//! library with `dlopen(RTLD_LOCAL)` and makes calls described by request
//! files; the results are compared with the interpreter (`nax run
//! --backend interp` for the shared execution cases, the same interpreter
//! in process for the backend suite's cases) at CLI.md's tolerances. Each
//! case runs with its tensors laid out three ways: row-major with NULL
//! strides; stored transposed, given through strides, at a nonzero
//! `byte_offset`, with an exact `capacity` and ending at a PROT_NONE page;
//! and fully named tensors given in another axis order, bound by name.

use crate::backends::{Case, compare, prepare, run_on};
use crate::support::nax_files;
use crate::support::{root, shared};
use nax::pipeline::Backend;
use nax::{DType, HostTensor, Scalar, TensorData, Value};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(label: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("nax-aot-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `nax build SOURCE --emit so -o DIR/libNAME.so EXTRA...`; the library's path.
pub(crate) fn build(source: &Path, dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let lib = dir.join(format!("lib{name}.so"));
    let out =
        Command::new(env!("CARGO_BIN_EXE_nax")).arg("build").arg(source).args(["--emit", "so", "-o"]).arg(&lib).args(extra).output().expect("run nax build");
    assert!(out.status.success(), "nax build {} --emit so failed:\n{}", source.display(), String::from_utf8_lossy(&out.stderr));
    assert!(dir.join(format!("{name}.h")).is_file(), "no header beside {}", lib.display());
    lib
}

/// Builds a library from source text.
fn build_text(source: &str, dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let file = dir.join(format!("{name}.nax"));
    std::fs::write(&file, source).unwrap();
    build(&file, dir, name, extra)
}

/// The compiled C harness (built once per test run), with the header of a
/// small library (every nax header declares the same types).
fn harness() -> &'static Path {
    static HARNESS: OnceLock<PathBuf> = OnceLock::new();
    HARNESS.get_or_init(|| build_harness("harness", "harness.c", &[]).unwrap_or_else(|e| panic!("the C harness does not compile:\n{e}")))
}

/// The harness compiled with AddressSanitizer, or why `cc` cannot build it
/// here (a compiler without libasan).
fn harness_asan() -> Result<&'static Path, &'static str> {
    static HARNESS: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    HARNESS.get_or_init(|| build_harness("harness-asan", "harness.c", &["-fsanitize=address", "-fno-omit-frame-pointer"])).as_deref().map_err(String::as_str)
}

/// Compiles `tests/aot/harness.c` with extra flags into a directory of its own.
fn build_harness(label: &str, source: &str, flags: &[&str]) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("nax-aot-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    build_text("def f(x: [n]) -> [n] {\n    return x\n}\n", &dir, "tiny", &[]);
    let exe = dir.join("harness");
    let out = Command::new("cc")
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1", "-I"])
        .arg(&dir)
        .arg("-DNAX_HEADER=\"tiny.h\"")
        .args(flags)
        .arg(root().join("tests/aot").join(source))
        .arg("-o")
        .arg(&exe)
        .args(["-ldl", "-lpthread"])
        .output()
        .expect("run cc");
    if out.status.success() { Ok(exe) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
}

/// One argument of a request: a DLTensor as the harness builds it.
#[derive(Clone, Debug)]
struct ArgSpec {
    name: String,
    code: u8,
    bits: u8,
    lanes: u16,
    device: i32,
    /// `None`: a NULL shape pointer (with `ndim` > 0).
    shape: Option<Vec<i64>>,
    ndim: i32,
    strides: Option<Vec<i64>>,
    axes: Option<Vec<Option<String>>>,
    byte_offset: u64,
    capacity: u64,
    /// `None`: a NULL data pointer.
    data: Option<Vec<u8>>,
}

/// How tensors are laid out in a request.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    /// Row-major, NULL strides, the parameter's axis names.
    Plain,
    /// Stored transposed (last axis slowest), given through strides, after
    /// a few bytes (`byte_offset`), with an exact `capacity`; host scalars
    /// as f32 and i32.
    Strided,
    /// Fully named tensors stored in reversed axis order, bound by name.
    ByName,
}

/// A dtype's DLPack code and bits.
fn dlpack(d: DType) -> (u8, u8) {
    let t = nax_capi::dl_dtype(d);
    (t.code, t.bits)
}

/// A tensor's elements as little-endian bytes, row-major.
fn bytes(t: &HostTensor) -> Vec<u8> {
    match t.data() {
        TensorData::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        TensorData::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
    }
}

/// A tensor from little-endian bytes.
fn from_bytes(dtype: DType, shape: Vec<usize>, names: Vec<Option<String>>, raw: &[u8]) -> HostTensor {
    fn chunks<const N: usize, T>(raw: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
        raw.chunks_exact(N).map(|c| f(c.try_into().unwrap())).collect()
    }
    let data = match dtype {
        DType::F16 => TensorData::F16(chunks(raw, half::f16::from_le_bytes)),
        DType::BF16 => TensorData::BF16(chunks(raw, half::bf16::from_le_bytes)),
        DType::F32 => TensorData::F32(chunks(raw, f32::from_le_bytes)),
        DType::F64 => TensorData::F64(chunks(raw, f64::from_le_bytes)),
        DType::I32 => TensorData::I32(chunks(raw, i32::from_le_bytes)),
        DType::I64 => TensorData::I64(chunks(raw, i64::from_le_bytes)),
        DType::Bool => TensorData::Bool(raw.iter().map(|&b| b != 0).collect()),
    };
    HostTensor::new(data, shape, names).unwrap()
}

/// A tensor argument laid out as `layout` says.
fn tensor_arg(name: &str, t: &HostTensor, layout: Layout) -> ArgSpec {
    let (code, bits) = dlpack(t.dtype());
    let rank = t.rank();
    let shape: Vec<i64> = t.shape().iter().map(|&n| n as i64).collect();
    let names = t.names().to_vec();
    let plain = ArgSpec {
        name: name.into(),
        code,
        bits,
        lanes: 1,
        device: 1,
        shape: Some(shape.clone()),
        ndim: rank as i32,
        strides: None,
        axes: Some(names.clone()),
        byte_offset: 0,
        capacity: 0,
        data: Some(bytes(t)),
    };
    let reversed: Vec<usize> = (0..rank).rev().collect();
    let fully_named = names.iter().all(Option::is_some) && {
        let mut n: Vec<_> = names.iter().flatten().collect();
        n.sort();
        n.dedup();
        n.len() == rank
    };
    match layout {
        Layout::Plain => plain,
        Layout::Strided => {
            let stored = t.permuted(&reversed).unwrap();
            let mut strides = vec![0i64; rank];
            let mut step = 1i64;
            for k in 0..rank {
                strides[k] = step;
                step *= shape[k].max(1);
            }
            let size = u64::from(bits / 8).max(1);
            let mut data = vec![0xAB; 3 * size as usize];
            data.extend(bytes(&stored));
            ArgSpec { strides: Some(strides), byte_offset: 3 * size, capacity: data.len() as u64, data: Some(data), ..plain }
        }
        Layout::ByName if fully_named && rank > 1 => {
            let stored = t.permuted(&reversed).unwrap();
            let shape = reversed.iter().map(|&k| shape[k]).collect();
            let axes = reversed.iter().map(|&k| names[k].clone()).collect();
            ArgSpec { shape: Some(shape), axes: Some(axes), data: Some(bytes(&stored)), ..plain }
        }
        Layout::ByName => plain,
    }
}

/// A host scalar as a rank-0 tensor (f64, i64, bool; f32 and i32 with `Strided`).
fn scalar_arg(name: &str, s: Scalar, layout: Layout) -> ArgSpec {
    let narrow = layout == Layout::Strided;
    let (code, bits, data) = match s {
        Scalar::Float(x) if narrow => (2, 32, (x as f32).to_le_bytes().to_vec()),
        Scalar::Float(x) => (2, 64, x.to_le_bytes().to_vec()),
        Scalar::Int(i) if narrow => (0, 32, (i as i32).to_le_bytes().to_vec()),
        Scalar::Int(i) => (0, 64, i.to_le_bytes().to_vec()),
        Scalar::Bool(b) => (6, 8, vec![u8::from(b)]),
    };
    ArgSpec {
        name: name.into(),
        code,
        bits,
        lanes: 1,
        device: 1,
        shape: Some(Vec::new()),
        ndim: 0,
        strides: None,
        axes: None,
        byte_offset: 0,
        capacity: 0,
        data: Some(data),
    }
}

/// The arguments of a call, each laid out as `layout` says.
fn request_args(names: &[String], values: &[Value], layout: Layout) -> Vec<ArgSpec> {
    names
        .iter()
        .zip(values)
        .map(|(n, v)| match v {
            Value::Tensor(t) => tensor_arg(n, t, layout),
            Value::Scalar(s) => scalar_arg(n, *s, layout),
        })
        .collect()
}

/// What the harness gave: the status, the message, the result.
#[derive(Debug)]
struct Outcome {
    status: i32,
    error: String,
    result: Option<HostTensor>,
    rss_growth_kib: Option<i64>,
    /// The harness's largest resident set, and how long its last call took.
    peak_rss_kib: i64,
    call_seconds: f64,
    /// With `nulls`: the statuses of the calls with NULL pointers, and
    /// with `nargs` of 2^30 and `SIZE_MAX`.
    nulls: Option<String>,
}

/// Options of one harness run.
#[derive(Default)]
struct RunOptions<'a> {
    weights: Option<&'a Path>,
    embedded: bool,
    guard: bool,
    nulls: bool,
    /// Threads and calls per thread, every result compared with the first.
    threads: Option<(usize, usize)>,
    rounds: Option<usize>,
    open_threads: Option<i64>,
    env: Vec<(&'a str, &'a str)>,
    clear_env: bool,
    /// An address-space limit (`ulimit -v`, KiB) the harness runs under.
    limit_kib: Option<u64>,
}

/// Runs the harness on `lib` (NAME `name`) with a call of `function`.
fn call(lib: &Path, name: &str, function: &str, args: &[ArgSpec], options: &RunOptions<'_>) -> Outcome {
    call_with(harness(), lib, name, function, args, options)
}

fn call_with(exe: &Path, lib: &Path, name: &str, function: &str, args: &[ArgSpec], options: &RunOptions<'_>) -> Outcome {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = lib.parent().unwrap().join(format!("call{}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
    std::fs::create_dir_all(&dir).unwrap();
    let mut request = format!("call {function}\n");
    for (i, a) in args.iter().enumerate() {
        let file = match &a.data {
            Some(d) => {
                let path = dir.join(format!("arg{i}.bin"));
                std::fs::write(&path, d).unwrap();
                path.display().to_string()
            }
            None => "-".into(),
        };
        request += &format!("arg {} {} {} {} {} {} {} {} {file}\n", a.name, a.code, a.bits, a.lanes, a.device, a.ndim, a.byte_offset, a.capacity);
        request += &match &a.shape {
            Some(s) => format!("shape {}\n", s.iter().map(i64::to_string).collect::<Vec<_>>().join(" ")),
            None => "shape -\n".into(),
        };
        request += &match &a.strides {
            Some(s) => format!("strides {}\n", s.iter().map(i64::to_string).collect::<Vec<_>>().join(" ")),
            None => "strides null\n".into(),
        };
        request += &match &a.axes {
            Some(names) if !names.is_empty() => format!("axes {}\n", names.iter().map(|n| n.as_deref().unwrap_or("_")).collect::<Vec<_>>().join(" ")),
            _ => "axes null\n".into(),
        };
    }
    std::fs::write(dir.join("request"), request).unwrap();
    let mut command = match options.limit_kib {
        Some(limit) => crate::support::limited(limit, exe),
        None => Command::new(exe),
    };
    command.arg(lib).arg(name).arg(dir.join("request")).arg(dir.join("out"));
    if let Some(w) = options.weights {
        command.arg("--weights").arg(w);
    }
    if options.embedded {
        command.arg("--embedded");
    }
    if options.guard {
        command.arg("--guard");
    }
    if options.nulls {
        command.arg("--nulls");
    }
    if let Some((t, c)) = options.threads {
        command.args(["--threads", &t.to_string(), "--calls", &c.to_string()]);
    }
    if let Some(r) = options.rounds {
        command.args(["--rounds", &r.to_string()]);
    }
    if let Some(t) = options.open_threads {
        command.args(["--open-threads", &t.to_string()]);
    }
    if options.clear_env {
        command.env_clear();
    }
    command.envs(options.env.iter().copied());
    let out = command.output().expect("run the harness");
    let nulls = String::from_utf8_lossy(&out.stdout).lines().find_map(|l| l.strip_prefix("nulls ").map(str::to_string));
    assert!(out.status.success(), "the harness failed on {} `{function}` ({:?}):\n{}", lib.display(), out.status, String::from_utf8_lossy(&out.stderr));
    let meta = std::fs::read_to_string(dir.join("out.meta")).unwrap();
    let field = |key: &str| meta.lines().find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()));
    let status: i32 = field("status ").unwrap().parse().unwrap();
    let error = field("error").unwrap_or_default();
    let rss_growth_kib = field("rss_growth_kib ").map(|v| v.parse().unwrap());
    let peak_rss_kib = field("peak_rss_kib ").unwrap().parse().unwrap();
    let call_seconds = field("call_seconds ").unwrap().parse().unwrap();
    let result = (status == 0).then(|| {
        let text = field("dtype ").unwrap();
        let (code, bits) = text.split_once(' ').map(|(c, b)| (c.parse().unwrap(), b.parse().unwrap())).unwrap();
        let dtype = nax_capi::nax_dtype(nax_capi::DLDataType { code, bits, lanes: 1 }).unwrap_or_else(|| panic!("unknown result dtype {text}"));
        let shape: Vec<usize> = field("shape").unwrap().split_whitespace().map(|s| s.parse().unwrap()).collect();
        let names = field("axes").unwrap().split_whitespace().map(|n| (n != "_").then(|| n.to_string())).collect();
        from_bytes(dtype, shape, names, &std::fs::read(dir.join("out.bin")).unwrap())
    });
    let _ = std::fs::remove_dir_all(&dir);
    Outcome { status, error, result, rss_growth_kib, peak_rss_kib, call_seconds, nulls }
}

/// Writes weights to a safetensors file.
fn write_weights(path: &Path, weights: &HashMap<String, HostTensor>) {
    let tensors: Vec<(&str, &HostTensor)> = weights.iter().map(|(k, v)| (k.as_str(), v)).collect();
    nax::write_tensors_atomic(path, &tensors).unwrap();
}

/// Every case of the backend suite (every operator and built-in, patterns,
/// dtypes, masks, host scalars, empty axes, flash attention, the example
/// models scaled down): built into a library, called from C with each
/// layout, compared with the interpreter.
#[test]
fn every_backend_case_agrees_through_its_library_from_c() {
    let scratch = Scratch::new("cases");
    let mut rng = SmallRng::seed_from_u64(13);
    let mut failures = Vec::new();
    let mut ran = 0;
    for (i, case) in crate::backends::cases().into_iter().chain(crate::backends::model_cases()).enumerate() {
        let Some((checked, lowered, _, args, weights)) = prepare(&case, &mut rng, false) else { continue };
        // The harness takes one result (`NAME_call`); functions of several
        // are `several_results_leave_through_call_n_and_the_typed_entry`'s.
        if lowered.outputs.len() != 1 {
            continue;
        }
        let want = run_on(Backend::Interp, &lowered, &args, &weights).unwrap_or_else(|e| panic!("{}: interp: {e}", case.name));
        let dir = scratch.0.join(format!("c{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = build_text(&case.source, &dir, "t", &[]);
        let weights_file = dir.join("w.safetensors");
        if !weights.is_empty() {
            write_weights(&weights_file, &weights);
        }
        let f = checked.module.functions.iter().find(|f| f.name == case.function).unwrap();
        let names: Vec<String> = f.bindings[..f.params].iter().map(|b| b.name.clone()).collect();
        for layout in [Layout::Plain, Layout::Strided, Layout::ByName] {
            let options =
                RunOptions { weights: (!weights.is_empty()).then_some(weights_file.as_path()), guard: layout == Layout::Strided, ..RunOptions::default() };
            let got = call(&lib, "t", &case.function, &request_args(&names, &args, layout), &options);
            let what = format!("{} ({layout:?})", case.name);
            match &got.result {
                None => failures.push(format!("{what}: status {}: {}", got.status, got.error)),
                Some(r) => {
                    if let Err(e) = compare(&what, r, &want, 0) {
                        failures.push(e);
                    }
                    if r.names() != want.names() {
                        failures.push(format!("{what}: result axes {:?}, expected {:?}", r.names(), want.names()));
                    }
                }
            }
        }
        ran += 1;
    }
    assert!(ran >= 20, "only {ran} cases ran");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `nax run --backend BACKEND` on files: the reference result.
fn reference_run(
    backend: &str,
    source: &Path,
    function: &str,
    inputs: &Path,
    weights: Option<&Path>,
    args: &[(String, String)],
    out: &Path,
) -> Result<HostTensor, String> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_nax"));
    command.arg("run").arg(source).args(["--fn", function, "--inputs"]).arg(inputs).arg("--out").arg(out).args(["--backend", backend]);
    if let Some(w) = weights {
        command.arg("--weights").arg(w);
    }
    for (k, v) in args {
        command.args(["--arg", &format!("{k}={v}")]);
    }
    let o = command.output().expect("run nax run");
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into_owned());
    }
    Ok(nax::read_tensors(out).map_err(|e| e.to_string())?.into_iter().find(|(n, _)| n == "out").ok_or("no `out` tensor")?.1)
}

/// The shared execution cases (`../shared/exec`), their inputs written by
/// the cases' own code (with the host-boundary axis names): each built into
/// a library and called from C with each layout; compared with `nax run
/// --backend interp`; a rejection case must be refused with its code.
#[test]
fn shared_execution_cases_agree_through_their_libraries_from_c() {
    let scratch = Scratch::new("exec");
    let exec = shared().join("exec");
    let dumped = Command::new("python3").arg(root().join("tests/aot/exec_inputs.py")).arg(&exec).arg(&scratch.0).output().expect("run python3");
    assert!(dumped.status.success(), "exec_inputs.py needs python3 with numpy and safetensors:\n{}", String::from_utf8_lossy(&dumped.stderr));
    let mut failures = Vec::new();
    let mut ran = 0;
    for entry in std::fs::read_dir(&scratch.0).unwrap() {
        let dir = entry.unwrap().path();
        let case_name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let spec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).unwrap()).unwrap();
        let function = spec["fn"].as_str().unwrap();
        let source = exec.join(format!("{case_name}.nax"));
        let lib = build(&source, &dir, "t", &[]);
        let weights = dir.join("weights.safetensors");
        let weights = weights.is_file().then_some(weights);
        let inputs = nax::read_tensors(&dir.join("in.safetensors")).unwrap();
        let host_args: Vec<(String, String)> = spec["args"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.to_string())).collect();
        assert!(host_args.is_empty(), "{case_name}: host arguments are not passed through the harness yet");
        let want = reference_run("interp", &source, function, &dir.join("in.safetensors"), weights.as_deref(), &host_args, &dir.join("want.safetensors"));
        let names: Vec<String> = inputs.iter().map(|(n, _)| n.clone()).collect();
        let values: Vec<Value> = inputs.iter().map(|(_, t)| Value::Tensor(t.clone())).collect();
        for layout in [Layout::Plain, Layout::Strided, Layout::ByName] {
            let options = RunOptions { weights: weights.as_deref(), guard: layout == Layout::Strided, ..RunOptions::default() };
            let got = call(&lib, "t", function, &request_args(&names, &values, layout), &options);
            let what = format!("{case_name} ({layout:?})");
            match (&want, &got.result) {
                (Err(_), None) if spec["reject"].as_bool() == Some(true) => {
                    if got.status != 1 || !got.error.contains(function) {
                        failures.push(format!("{what}: refused with status {}: {}", got.status, got.error));
                    }
                }
                (Ok(w), Some(r)) => {
                    if let Err(e) = compare(&what, r, w, 0) {
                        failures.push(e);
                    }
                    if r.names() != w.names() {
                        failures.push(format!("{what}: result axes {:?}, expected {:?}", r.names(), w.names()));
                    }
                }
                (w, _) => {
                    failures.push(format!("{what}: interp gave {:?}, the library status {}: {}", w.as_ref().map(HostTensor::shape), got.status, got.error))
                }
            }
        }
        ran += 1;
    }
    assert!(ran >= 7, "only {ran} execution cases ran");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A small program with host scalars of every type, a mask in and a mask
/// out, an int result, zero-size axes and weights.
const KINDS: &str = "dim D = 3
param w: [D]

def scaled(x: [n D], alpha: float, k: int, flip: bool) -> [n D] {
    y = x * alpha + k * w
    return where(flip, -y, y)
}

def masked(x: [n D], keep: Mask[n D]) -> [n D] {
    return masked_fill(x, !keep, 0.0)
}

def positive(x: [n D]) -> Mask[n D] {
    return x > 0.0
}

def count(x: [n D]) -> Int[n] {
    return sum(x > 0.0, D)
}

def total(x: [n D]) -> [D] {
    return sum(x, n)
}
";

/// The cases of a model file: each function with `b` = 1 and `n` = 3.
fn file_cases(path: &Path) -> Vec<Case> {
    let source = std::fs::read_to_string(path).unwrap();
    let checked = nax_front::check_source(&source);
    checked
        .module
        .functions
        .iter()
        .map(|f| Case {
            name: format!("{}:{}", path.file_stem().unwrap().to_string_lossy(), f.name),
            source: source.clone(),
            function: f.name.clone(),
            sizes: vec![("b", 1), ("n", 3)],
            special_values: false,
            ints: Vec::new(),
        })
        .collect()
}

/// The example models, unchanged: the transformer block at D = 512 (every
/// function compared with `nax run --backend interp`) and every
/// WORKLOADS.md workload at its full size (compared with `nax run`'s JIT:
/// the interpreter is too slow there, and runs them scaled down in
/// `every_backend_case_agrees_through_its_library_from_c`); each built into
/// a library (the block also with `--cpu generic`), called from C with
/// each layout, inputs ending at a PROT_NONE page; each header also
/// compiles as C++17.
#[test]
fn the_example_models_agree_through_their_libraries_from_c() {
    let scratch = Scratch::new("examples");
    let mut rng = SmallRng::seed_from_u64(29);
    let mut files = vec![root().join("examples/transformer_block.nax")];
    files.extend(nax_files(&root().join("examples/workloads")));
    let mut failures = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let started = std::time::Instant::now();
        let dir = scratch.0.join(format!("e{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        // The block also for any x86-64 (16-byte vectors, the 6 x 8 microkernel).
        let mut libraries = vec![(build(file, &dir, "model", &[]), "model")];
        if i == 0 {
            libraries.push((build(file, &dir, "generic", &["--cpu", "generic"]), "generic"));
        }
        compiles_as_cpp(&dir.join("model.h"));
        for case in file_cases(file) {
            let Some((checked, _, _, args, weights)) = prepare(&case, &mut rng, false) else { continue };
            // Weights of a trained model's scale (1/20 of the suite's), so that
            // the block's 512-wide products do not saturate its softmax, where
            // any two f32 evaluations part.
            let weights: HashMap<String, HostTensor> = weights
                .into_iter()
                .map(|(k, t)| {
                    let small: Vec<f64> = t.to_f64_vec().iter().map(|v| v / 20.0).collect();
                    (k, HostTensor::from_f64(t.dtype(), t.shape().to_vec(), t.names().to_vec(), &small).unwrap())
                })
                .collect();
            let f = checked.module.functions.iter().find(|f| f.name == case.function).unwrap();
            let names: Vec<String> = f.bindings[..f.params].iter().map(|b| b.name.clone()).collect();
            if args.iter().any(|a| matches!(a, Value::Scalar(_))) {
                continue;
            }
            let inputs = dir.join("in.safetensors");
            let tensors: Vec<(&str, &HostTensor)> =
                names.iter().zip(&args).filter_map(|(n, a)| if let Value::Tensor(t) = a { Some((n.as_str(), t)) } else { None }).collect();
            nax::write_tensors_atomic(&inputs, &tensors).unwrap();
            let weights_file = dir.join("w.safetensors");
            if !weights.is_empty() {
                write_weights(&weights_file, &weights);
            }
            let weights_file = (!weights.is_empty()).then_some(weights_file.as_path());
            let reference = if i == 0 { "interp" } else { "llvm" };
            let want = reference_run(reference, file, &case.function, &inputs, weights_file, &[], &dir.join("want.safetensors"))
                .unwrap_or_else(|e| panic!("{}: {e}", case.name));
            // The workloads' large tensors once, row-major (the layouts are the other tests' work).
            let layouts: &[Layout] = if i == 0 { &[Layout::Plain, Layout::Strided, Layout::ByName] } else { &[Layout::Plain] };
            for (&layout, (lib, name)) in layouts.iter().flat_map(|l| libraries.iter().map(move |x| (l, x))) {
                let options = RunOptions { weights: weights_file, guard: true, ..RunOptions::default() };
                let got = call(lib, name, &case.function, &request_args(&names, &args, layout), &options);
                let what = format!("{} ({layout:?}, lib{name}.so)", case.name);
                match &got.result {
                    None => failures.push(format!("{what}: status {}: {}", got.status, got.error)),
                    Some(r) => {
                        if let Err(e) = compare(&what, r, &want, 1 << 20) {
                            failures.push(e);
                        }
                    }
                }
            }
        }
        println!("{}: {:.1} s", file.display(), started.elapsed().as_secs_f64());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Compiles a header alone as C++17, warnings as errors.
fn compiles_as_cpp(header: &Path) {
    let out = Command::new("c++")
        .args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only", "-x", "c++"])
        .arg(header)
        .output()
        .expect("run c++");
    assert!(out.status.success(), "{} does not compile as C++17:\n{}", header.display(), String::from_utf8_lossy(&out.stderr));
}

/// Host scalars of every type (f64/i64/bool, and f32/i32 for float and
/// int), masks in and out, int results, zero-size axes and weights.
#[test]
fn host_scalars_masks_and_empty_axes_agree_with_the_interpreter() {
    let scratch = Scratch::new("kinds");
    let lib = build_text(KINDS, &scratch.0, "kinds", &[]);
    let mut rng = SmallRng::seed_from_u64(3);
    let mut failures = Vec::new();
    for (function, n) in [("scaled", 4), ("scaled", 0), ("masked", 5), ("masked", 0), ("positive", 3), ("count", 4), ("count", 0), ("total", 0), ("total", 6)] {
        let case = Case {
            name: format!("{function} n={n}"),
            source: KINDS.into(),
            function: function.into(),
            sizes: vec![("n", n)],
            special_values: false,
            ints: Vec::new(),
        };
        let Some((checked, lowered, _, mut args, weights)) = prepare(&case, &mut rng, false) else { panic!("{}", case.name) };
        if function == "scaled" {
            args[1] = Value::Scalar(Scalar::Float(-1.5));
            args[2] = Value::Scalar(Scalar::Int(-2));
        }
        let w = scratch.0.join("w.safetensors");
        write_weights(&w, &weights);
        let f = checked.module.functions.iter().find(|f| f.name == function).unwrap();
        let names: Vec<String> = f.bindings[..f.params].iter().map(|b| b.name.clone()).collect();
        let flips: &[bool] = if function == "scaled" { &[true, false] } else { &[true] };
        for &flip in flips {
            if function == "scaled" {
                args[3] = Value::Scalar(Scalar::Bool(flip));
            }
            let want = run_on(Backend::Interp, &lowered, &args, &weights).unwrap();
            for layout in [Layout::Plain, Layout::Strided, Layout::ByName] {
                let got = call(
                    &lib,
                    "kinds",
                    function,
                    &request_args(&names, &args, layout),
                    &RunOptions { weights: Some(&w), guard: true, ..RunOptions::default() },
                );
                let what = format!("{} flip={flip} ({layout:?})", case.name);
                match &got.result {
                    Some(r) => {
                        if let Err(e) = compare(&what, r, &want, 0) {
                            failures.push(e);
                        }
                        if r.names() != want.names() {
                            failures.push(format!("{what}: axes {:?}, expected {:?}", r.names(), want.names()));
                        }
                    }
                    None => failures.push(format!("{what}: status {}: {}", got.status, got.error)),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The first argument of a call (`x`).
fn x(a: &mut [ArgSpec]) -> &mut ArgSpec {
    &mut a[0]
}

/// `scaled`'s arguments: x [n=2 D=3] f32 named, alpha, k, flip.
fn good_args() -> Vec<ArgSpec> {
    let x = HostTensor::from_f64(DType::F32, vec![2, 3], vec![Some("n".into()), Some("D".into())], &[1.0, -2.0, 3.0, 4.0, 5.0, -6.0]).unwrap();
    vec![
        tensor_arg("x", &x, Layout::Plain),
        scalar_arg("alpha", Scalar::Float(0.5), Layout::Plain),
        scalar_arg("k", Scalar::Int(2), Layout::Plain),
        scalar_arg("flip", Scalar::Bool(false), Layout::Plain),
    ]
}

/// Host scalars whose one element lies outside what the caller described:
/// past `capacity`, at a `byte_offset` that wraps the address space; each
/// is `NAX_ERR_ARGUMENT` naming the parameter.
fn host_scalar_cases() -> Vec<BadCall> {
    let with = |f: &dyn Fn(&mut ArgSpec)| {
        let mut a = good_args();
        f(&mut a[2]);
        a
    };
    vec![
        (
            "a host scalar past its capacity",
            "scaled",
            with(&|k| {
                k.capacity = 8;
                k.byte_offset = 8;
            }),
            1,
            vec!["scaled", "'k'", "capacity"],
        ),
        ("a host scalar at byte_offset 2^64 - 8", "scaled", with(&|k| k.byte_offset = u64::MAX - 7), 1, vec!["scaled", "'k'", "address space"]),
    ]
}

/// ABI.md allows any `byte_offset`: a tensor and a host scalar whose
/// element 0 is not aligned for their dtype are read (copied to aligned
/// memory) and give the aligned call's result.
#[test]
fn tensors_at_any_byte_offset_are_read() {
    let scratch = Scratch::new("offsets");
    let lib = build_text(KINDS, &scratch.0, "kinds", &[]);
    let w = scratch.0.join("w.safetensors");
    write_weights(&w, &HashMap::from([("w".to_string(), HostTensor::from_f64(DType::F32, vec![3], vec![None], &[1.0, 2.0, 3.0]).unwrap())]));
    let options = RunOptions { weights: Some(&w), ..RunOptions::default() };
    let want = call_with(harness(), &lib, "kinds", "scaled", &good_args(), &options);
    assert_eq!(want.status, 0, "{}", want.error);
    let mut args = good_args();
    for (a, shift) in [(0, 2), (2, 4), (1, 1)] {
        let spec = &mut args[a];
        let mut data = vec![0u8; shift];
        data.extend(spec.data.take().unwrap());
        (spec.capacity, spec.byte_offset, spec.data) = (data.len() as u64, shift as u64, Some(data));
    }
    let got = call_with(harness(), &lib, "kinds", "scaled", &args, &options);
    assert_eq!(got.status, 0, "{}", got.error);
    assert_eq!(got.result.unwrap().to_f64_vec(), want.result.unwrap().to_f64_vec());
}

/// One bool broadcast to 2^32 elements by a zero stride, under an 8 GiB
/// address-space limit: the 32 GiB result is refused (`NAX_ERR_MEMORY`)
/// before anything of the call's size is allocated or touched (the
/// broadcast was once packed, 4 GiB, before the memory plan decided).
#[test]
fn a_broadcast_too_large_for_memory_is_refused_before_it_is_packed() {
    let scratch = Scratch::new("broadcast");
    let lib = build_text("def cnt(x: Mask[n]) -> Int[n] {\n    return int(x) + 1\n}\n", &scratch.0, "cnt", &[]);
    let (code, bits) = dlpack(DType::Bool);
    let x = ArgSpec {
        name: "x".into(),
        code,
        bits,
        lanes: 1,
        device: 1,
        shape: Some(vec![1 << 32]),
        ndim: 1,
        strides: Some(vec![0]),
        axes: None,
        byte_offset: 0,
        capacity: 1,
        data: Some(vec![1]),
    };
    let out = call(&lib, "cnt", "cnt", &[x], &RunOptions { limit_kib: Some(8 << 20), ..RunOptions::default() });
    assert_eq!(out.status, 3, "NAX_ERR_MEMORY expected: {}", out.error);
    assert!(out.error.contains("bytes of memory at its peak"), "{}", out.error);
    assert!((1..1 << 20).contains(&out.peak_rss_kib), "the harness reached {} KiB resident", out.peak_rss_kib);
    assert!(out.call_seconds < 1.0, "the refusal took {} s", out.call_seconds);
}

/// The C ABI fuzzed (tests/aot/fuzz.c): 10,000 random calls
/// (`NAX_FUZZ_CALLS`; `NAX_SEED` picks the draw) of every function of a
/// library, every descriptor field at random and each tensor's memory
/// exactly its `capacity`, under AddressSanitizer: no report, every status
/// one of ABI.md's, none internal.
#[test]
fn random_calls_through_the_abi_under_address_sanitizer() {
    // Where AddressSanitizer is missing the harness does not build either
    // (that test says so); the fuzzer itself must compile.
    if harness_asan().is_err() {
        println!("skipped: cc cannot build with -fsanitize=address here");
        return;
    }
    let exe =
        build_harness("fuzzer", "fuzz.c", &["-fsanitize=address", "-fno-omit-frame-pointer"]).unwrap_or_else(|e| panic!("the fuzzer does not compile:\n{e}"));
    let scratch = Scratch::new("fuzz");
    let lib = build_text(KINDS, &scratch.0, "kinds", &[]);
    let w = scratch.0.join("w.safetensors");
    write_weights(&w, &HashMap::from([("w".to_string(), HostTensor::from_f64(DType::F32, vec![3], vec![None], &[1.0, 2.0, 3.0]).unwrap())]));
    let calls = std::env::var("NAX_FUZZ_CALLS").unwrap_or_else(|_| "10000".into());
    let seed = std::env::var("NAX_SEED").unwrap_or_else(|_| "1".into());
    let out = Command::new(&exe)
        .arg(&lib)
        .args(["kinds", w.to_str().unwrap(), &calls, &seed, "scaled", "masked", "positive"])
        .env("ASAN_OPTIONS", "detect_leaks=0")
        .output()
        .expect("run the fuzzer");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the fuzzer failed ({:?}):\n{stderr}", out.status);
    let statuses: Vec<u64> =
        stdout.lines().find_map(|l| l.strip_prefix("statuses ")).expect("the fuzzer's statuses").split(' ').map(|n| n.parse().unwrap()).collect();
    println!("{calls} random calls, by status (NAX_OK, ARGUMENT, WEIGHTS, MEMORY, CPU, INTERNAL): {:?}", &statuses[..6]);
    assert_eq!(statuses.iter().sum::<u64>(), calls.parse::<u64>().unwrap());
    assert_eq!(statuses[5], 0, "internal errors:\n{stderr}");
    assert!(statuses[0] > 0 && statuses[1] > 0, "the draw reaches both results and refusals: {statuses:?}");
}

/// The host-scalar cases through the harness built with AddressSanitizer
/// (tensors in `malloc`ed memory): each is refused, and nothing is read
/// outside the argument's bytes.
#[test]
fn host_scalars_outside_their_bytes_are_refused_under_address_sanitizer() {
    let exe = match harness_asan() {
        Ok(exe) => exe,
        Err(why) => {
            println!("skipped: cc cannot build the harness with -fsanitize=address here:\n{why}");
            return;
        }
    };
    let scratch = Scratch::new("asan");
    let lib = build_text(KINDS, &scratch.0, "kinds", &[]);
    let w = scratch.0.join("w.safetensors");
    write_weights(&w, &HashMap::from([("w".to_string(), HostTensor::from_f64(DType::F32, vec![3], vec![None], &[1.0, 2.0, 3.0]).unwrap())]));
    for (what, function, args, status, words) in host_scalar_cases() {
        let options = RunOptions { weights: Some(&w), env: vec![("ASAN_OPTIONS", "detect_leaks=0")], ..RunOptions::default() };
        let got = call_with(exe, &lib, "kinds", function, &args, &options);
        assert!(got.status == status && words.iter().all(|w| got.error.contains(w)) && got.result.is_none(), "{what}: status {}: {}", got.status, got.error);
    }
}

/// A bad call: what it is, the function, the arguments, the status
/// expected and words its message must contain.
type BadCall = (&'static str, &'static str, Vec<ArgSpec>, i32, Vec<&'static str>);

/// Every kind of bad input through the ABI gets its code and a message
/// naming the function, the parameter and the axis; none crashes (the
/// harness would fail). Inputs end at a PROT_NONE page.
#[test]
fn bad_input_through_the_abi_gets_its_code_and_message() {
    let scratch = Scratch::new("bad");
    let lib = build_text(KINDS, &scratch.0, "kinds", &[]);
    let w = scratch.0.join("w.safetensors");
    let good_w = HashMap::from([("w".to_string(), HostTensor::from_f64(DType::F32, vec![3], vec![None], &[1.0, 2.0, 3.0]).unwrap())]);
    write_weights(&w, &good_w);
    let with = |f: &dyn Fn(&mut Vec<ArgSpec>)| {
        let mut a = good_args();
        f(&mut a);
        a
    };
    let cases: Vec<BadCall> = vec![
        ("the good call", "scaled", good_args(), 0, vec![]),
        ("unknown function", "nope", good_args(), 1, vec!["nope", "scaled"]),
        ("missing argument", "scaled", with(&|a| drop(a.remove(1))), 1, vec!["scaled", "alpha"]),
        ("extra argument", "scaled", with(&|a| a.push(a[0].clone())), 1, vec!["scaled", "x"]),
        ("unknown argument", "scaled", with(&|a| a[1].name = "beta".into()), 1, vec!["scaled", "beta"]),
        ("wrong dtype", "scaled", with(&|a| x(a).bits = 64), 1, vec!["scaled", "'x'", "f64"]),
        (
            "an unaligned broadcast too large to copy",
            "scaled",
            with(&|a| {
                let t = x(a);
                (t.shape, t.strides, t.byte_offset, t.capacity) = (Some(vec![1 << 40, 3]), Some(vec![0, 0]), 1, 8);
            }),
            3,
            vec!["scaled", "'x'", "no memory"],
        ),
        (
            "wrong rank",
            "scaled",
            with(&|a| {
                x(a).shape = Some(vec![6]);
                x(a).ndim = 1;
                x(a).axes = None;
            }),
            1,
            vec!["scaled", "'x'", "rank"],
        ),
        (
            "wrong size",
            "scaled",
            with(&|a| {
                x(a).shape = Some(vec![3, 2]);
                x(a).axes = None;
            }),
            1,
            vec!["scaled", "'x'", "'D'", "2", "3"],
        ),
        ("wrong axis name", "scaled", with(&|a| x(a).axes = Some(vec![Some("n".into()), Some("E".into())])), 1, vec!["scaled", "'x'", "E"]),
        ("NULL data", "scaled", with(&|a| x(a).data = None), 1, vec!["scaled", "'x'", "NULL"]),
        ("NULL shape", "scaled", with(&|a| x(a).shape = None), 1, vec!["scaled", "'x'", "shape"]),
        ("capacity too small", "scaled", with(&|a| x(a).capacity = 20), 1, vec!["scaled", "'x'", "capacity"]),
        (
            "strides past the capacity",
            "scaled",
            with(&|a| {
                x(a).strides = Some(vec![4, 1]);
                x(a).capacity = 24;
            }),
            1,
            vec!["scaled", "'x'", "capacity"],
        ),
        (
            "negative strides before the data",
            "scaled",
            with(&|a| {
                x(a).strides = Some(vec![-3, 1]);
                x(a).capacity = 24;
            }),
            1,
            vec!["scaled", "'x'", "capacity"],
        ),
        ("negative size", "scaled", with(&|a| x(a).shape = Some(vec![-2, 3])), 1, vec!["scaled", "'x'", "negative", "-2"]),
        ("sizes whose bytes overflow", "scaled", with(&|a| x(a).shape = Some(vec![1 << 40, 1 << 40])), 1, vec!["scaled", "'x'"]),
        (
            "a size past memory",
            "scaled",
            with(&|a| {
                x(a).shape = Some(vec![1 << 40, 3]);
                x(a).strides = Some(vec![0, 1]);
            }),
            3,
            vec!["scaled"],
        ),
        ("a CUDA tensor", "scaled", with(&|a| x(a).device = 2), 1, vec!["scaled", "'x'", "device"]),
        ("vector lanes", "scaled", with(&|a| x(a).lanes = 4), 1, vec!["scaled", "'x'", "float32x4"]),
        (
            "a host scalar of rank 1",
            "scaled",
            with(&|a| {
                a[1].ndim = 1;
                a[1].shape = Some(vec![1]);
            }),
            1,
            vec!["scaled", "'alpha'", "rank"],
        ),
        (
            "a host float given as bool",
            "scaled",
            with(&|a| {
                a[1].code = 6;
                a[1].bits = 8;
            }),
            1,
            vec!["scaled", "'alpha'"],
        ),
        ("a NULL host scalar", "scaled", with(&|a| a[2].data = None), 1, vec!["scaled", "'k'", "NULL"]),
        ("a bool that is not 0 or 1", "scaled", with(&|a| a[3].data = Some(vec![2])), 1, vec!["scaled", "'flip'", "byte 2"]),
    ];
    let mut cases = cases;
    cases.extend(host_scalar_cases());
    let mut failures = Vec::new();
    for (what, function, args, status, words) in cases {
        let got = call(&lib, "kinds", function, &args, &RunOptions { weights: Some(&w), guard: true, ..RunOptions::default() });
        if got.status != status || words.iter().any(|w| !got.error.contains(w)) || (status != 0 && got.result.is_some()) {
            failures.push(format!("{what}: status {} (expected {status}): {}", got.status, got.error));
        }
    }
    // A mask whose bytes are not 0 or 1.
    let m = HostTensor::from_f64(DType::Bool, vec![2, 3], vec![Some("n".into()), Some("D".into())], &[1.0, 0.0, 1.0, 1.0, 0.0, 0.0]).unwrap();
    let mut keep = tensor_arg("keep", &m, Layout::Plain);
    keep.data = Some(vec![1, 0, 7, 1, 0, 0]);
    let got = call(&lib, "kinds", "masked", &[good_args().remove(0), keep], &RunOptions { weights: Some(&w), guard: true, ..RunOptions::default() });
    if got.status != 1 || !got.error.contains("byte 7") || !got.error.contains("'keep'") {
        failures.push(format!("a mask byte of 7: status {}: {}", got.status, got.error));
    }
    // NULL pointers for the model, the function, the result, the model to fill, the arguments.
    let got = call(&lib, "kinds", "scaled", &good_args(), &RunOptions { weights: Some(&w), nulls: true, ..RunOptions::default() });
    if got.nulls.as_deref() != Some("1 1 1 1 1 1 1") {
        failures.push(format!("NULL pointers gave statuses {:?}", got.nulls));
    }
    // Weights: missing, unreadable, malformed, of the wrong shape, without the tensor, none at all.
    let bad = scratch.0.join("bad.safetensors");
    std::fs::write(&bad, b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all").unwrap();
    let wrong = scratch.0.join("wrong.safetensors");
    write_weights(&wrong, &HashMap::from([("w".to_string(), HostTensor::from_f64(DType::F32, vec![4], vec![None], &[1.0; 4]).unwrap())]));
    let other = scratch.0.join("other.safetensors");
    write_weights(&other, &HashMap::from([("v".to_string(), HostTensor::from_f64(DType::F32, vec![3], vec![None], &[1.0; 3]).unwrap())]));
    let missing = scratch.0.join("missing.safetensors");
    for (what, file, words) in [
        ("a missing weights file", Some(missing.as_path()), vec!["missing.safetensors"]),
        ("a malformed weights file", Some(bad.as_path()), vec!["bad.safetensors", "not a valid safetensors"]),
        ("a weight of the wrong shape", Some(wrong.as_path()), vec!["'w'", "4", "3"]),
        ("a file without the weight", Some(other.as_path()), vec!["'w'", "other.safetensors"]),
        ("no weights", None, vec!["'w'", "kinds_open"]),
    ] {
        let got = call(&lib, "kinds", "scaled", &good_args(), &RunOptions { weights: file, ..RunOptions::default() });
        if got.status != 2 || words.iter().any(|w| !got.error.contains(w)) {
            failures.push(format!("{what}: status {}: {}", got.status, got.error));
        }
    }
    for threads in [-1, 5000] {
        let got = call(&lib, "kinds", "scaled", &good_args(), &RunOptions { weights: Some(&w), open_threads: Some(threads), ..RunOptions::default() });
        if got.status != 1 || !got.error.contains("threads") {
            failures.push(format!("threads = {threads}: status {}: {}", got.status, got.error));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The transformer block example built into `dir/libblock.so`, its weights
/// file, and an input `x` of b = 1, n = 8.
fn block_library(dir: &Path, extra: &[&str]) -> (PathBuf, PathBuf, ArgSpec) {
    let weights = dir.join("block.safetensors");
    write_block_weights(&weights);
    let mut extra: Vec<&str> = extra.to_vec();
    let w = weights.display().to_string();
    if extra.contains(&"--embed-weights") {
        extra.extend(["--weights", &w]);
    }
    let lib = build(&root().join("examples/transformer_block.nax"), dir, "block", &extra);
    let values: Vec<f64> = (0..8 * 512).map(|i| ((i * 37 % 101) as f64 - 50.0) / 25.0).collect();
    let x = HostTensor::from_f64(DType::F32, vec![1, 8, 512], vec![Some("b".into()), Some("n".into()), Some("D".into())], &values).unwrap();
    (lib, weights, tensor_arg("x", &x, Layout::Plain))
}

/// Seeded weights for the block at a trained model's scale.
fn write_block_weights(path: &Path) {
    let mut rng = SmallRng::seed_from_u64(41);
    let shapes: [(&str, Vec<usize>); 10] = [
        ("ln1_g", vec![512]),
        ("ln1_b", vec![512]),
        ("w_qkv", vec![512, 1536]),
        ("w_o", vec![512, 512]),
        ("ln2_g", vec![512]),
        ("ln2_b", vec![512]),
        ("w_1", vec![512, 2048]),
        ("b_1", vec![2048]),
        ("w_2", vec![2048, 512]),
        ("b_2", vec![512]),
    ];
    let weights: HashMap<String, HostTensor> = shapes
        .into_iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let values: Vec<f64> = (0..n).map(|_| rand::Rng::random_range(&mut rng, -0.03..0.03)).collect();
            (name.to_string(), HostTensor::from_f64(DType::F32, shape.clone(), vec![None; shape.len()], &values).unwrap())
        })
        .collect();
    write_weights(path, &weights);
}

/// The library's dynamic dependencies are the C library's alone, it exports
/// only `NAME_` symbols, and it runs with no toolchain on `PATH` or
/// `LD_LIBRARY_PATH`, loading nothing but the C library's objects.
#[test]
fn a_library_needs_only_the_c_library_and_exports_only_its_entries() {
    let scratch = Scratch::new("deps");
    let (lib, weights, x) = block_library(&scratch.0, &[]);
    let readelf = Command::new("readelf").arg("-d").arg(&lib).output().expect("run readelf");
    let needed: Vec<String> = String::from_utf8_lossy(&readelf.stdout)
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| l.split('[').nth(1).map(|s| s.trim_end_matches(']').to_string()))
        .collect();
    let allowed = ["libc.so", "libm.so", "libdl.so", "libpthread.so", "libgcc_s.so", "ld-linux"];
    assert!(!needed.is_empty() && needed.iter().all(|n| allowed.iter().any(|a| n.starts_with(a))), "NEEDED: {needed:?}");
    let nm = Command::new("nm").args(["-D", "--defined-only"]).arg(&lib).output().expect("run nm");
    let symbols: Vec<String> = String::from_utf8_lossy(&nm.stdout).lines().filter_map(|l| l.split_whitespace().nth(2).map(str::to_string)).collect();
    assert!(symbols.len() >= 6 && symbols.iter().all(|s| s.starts_with("block_")), "exported: {symbols:?}");
    for entry in [
        "block_open",
        "block_open_sharded",
        "block_close",
        "block_call",
        "block_call_n",
        "block_call_sharded",
        "block_manifest",
        "block_last_error",
        "block_abi_version",
        "block_block",
    ] {
        assert!(symbols.iter().any(|s| s == entry), "{entry} is not exported: {symbols:?}");
    }
    // No toolchain in the environment; the loader reports every object it loads.
    let log = scratch.0.join("loaded").display().to_string();
    let options = RunOptions {
        weights: Some(&weights),
        clear_env: true,
        env: vec![("PATH", "/nonexistent"), ("LD_DEBUG", "files"), ("LD_DEBUG_OUTPUT", &log)],
        ..RunOptions::default()
    };
    let got = call(&lib, "block", "block", &[x], &options);
    assert_eq!(got.status, 0, "{}", got.error);
    let logs: String = std::fs::read_dir(&scratch.0)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("loaded"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    let objects: Vec<&str> = logs.lines().filter_map(|l| l.split("file=").nth(1)).map(|f| f.split_whitespace().next().unwrap_or("")).collect();
    assert!(objects.iter().any(|o| o.contains("libblock.so")), "the loader's log lists no libblock.so:\n{logs}");
    let foreign: Vec<&&str> = objects.iter().filter(|o| !o.contains("libblock.so") && !allowed.iter().any(|a| o.contains(a))).collect();
    assert!(foreign.is_empty(), "the harness loaded more than the C library: {foreign:?}");
}

/// Two libraries whose programs both define `forward` load into one
/// process (`dlopen` with `RTLD_LOCAL`) and each gives its own result.
#[test]
fn two_libraries_with_the_same_function_names_load_side_by_side() {
    let scratch = Scratch::new("two");
    let a = build_text("def forward(x: [n]) -> [n] {\n    return x * 2.0\n}\n", &scratch.0, "first", &[]);
    let b_dir = scratch.0.join("b");
    std::fs::create_dir_all(&b_dir).unwrap();
    let b = build_text("def forward(x: [n]) -> [n] {\n    return exp(x) + 1.0\n}\n", &b_dir, "second", &[]);
    let exe = scratch.0.join("two");
    let out = Command::new("cc")
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(&scratch.0)
        .arg("-DNAX_HEADER=\"first.h\"")
        .arg(root().join("tests/aot/two.c"))
        .arg("-o")
        .arg(&exe)
        .arg("-ldl")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).arg(&a).arg("first").arg(&b).arg("second").output().unwrap();
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{text}{}", String::from_utf8_lossy(&run.stderr));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!([lines[0], lines[2]], ["first: 2 4 6 8"; 2], "{text}");
    let second: Vec<f64> = lines[1].strip_prefix("second: ").unwrap().split(' ').map(|v| v.parse().unwrap()).collect();
    for (i, v) in second.iter().enumerate() {
        let want = ((i + 1) as f64).exp() + 1.0;
        assert!((v - want).abs() < 1e-4 * want, "{text}");
    }
}

/// 8 threads making 200 calls each on one model (its pool of 2 workers
/// shared) all give the single-threaded result; 100 rounds of open, call
/// and close do not grow the process.
#[test]
fn threads_share_a_model_and_open_close_rounds_do_not_grow_the_process() {
    let scratch = Scratch::new("threads");
    let (lib, weights, x) = block_library(&scratch.0, &[]);
    let single =
        call(&lib, "block", "block", std::slice::from_ref(&x), &RunOptions { weights: Some(&weights), open_threads: Some(1), ..RunOptions::default() });
    let threaded = call(
        &lib,
        "block",
        "block",
        std::slice::from_ref(&x),
        &RunOptions { weights: Some(&weights), open_threads: Some(2), threads: Some((8, 200)), ..RunOptions::default() },
    );
    let (single, threaded) = (single.result.expect("a result"), threaded.result.expect("a result"));
    compare("8 threads x 200 calls", &threaded, &single, 1 << 20).unwrap();
    let rounds = call(&lib, "block", "block", &[x], &RunOptions { weights: Some(&weights), open_threads: Some(2), rounds: Some(100), ..RunOptions::default() });
    assert_eq!(rounds.status, 0, "{}", rounds.error);
    let growth = rounds.rss_growth_kib.expect("the harness measured");
    assert!(growth < 4096, "95 rounds of open/call/close grew the resident set by {growth} KiB");
}

/// `--embed-weights`: the library opens with NULL and gives the results of
/// the same weights from a file.
#[test]
fn embedded_weights_give_the_results_of_the_file() {
    let scratch = Scratch::new("embed");
    let (lib, weights, x) = block_library(&scratch.0, &["--embed-weights"]);
    let embedded = call(&lib, "block", "block", std::slice::from_ref(&x), &RunOptions { embedded: true, ..RunOptions::default() });
    let from_file = call(&lib, "block", "block", &[x], &RunOptions { weights: Some(&weights), ..RunOptions::default() });
    assert_eq!(embedded.result.expect("a result").to_f64_vec(), from_file.result.expect("a result").to_f64_vec());
    // They lie in the library page-aligned (in the file, and so in memory,
    // where a segment's addresses keep its offsets modulo the page size).
    let image = std::fs::read(&lib).unwrap();
    let file = std::fs::read(&weights).unwrap();
    let at = image.windows(256).position(|w| w == &file[..256]).expect("the weights are in the library");
    assert_eq!(at % 4096, 0, "the embedded weights start at file offset {at:#x}");
}

/// A library compiled for CPU features this machine lacks refuses to open
/// with `NAX_ERR_CPU`, naming them; `--cpu generic` runs anywhere.
#[test]
fn a_library_for_missing_cpu_features_refuses_to_open() {
    let scratch = Scratch::new("cpu");
    let source = "def forward(x: [n]) -> [n] {\n    return x * 2.0\n}\n";
    let generic = build_text(source, &scratch.0, "anycpu", &["--cpu", "generic"]);
    let x = HostTensor::from_f64(DType::F32, vec![3], vec![None], &[1.0, 2.0, 3.0]).unwrap();
    let got = call(&generic, "anycpu", "forward", &[tensor_arg("x", &x, Layout::Plain)], &RunOptions::default());
    assert_eq!(got.result.expect("a result").to_f64_vec(), [2.0, 4.0, 6.0]);
    let host = nax::pipeline::Machine::host();
    let lacking = nax::pipeline::NAMED_CPUS.iter().find(|c| !host.features.contains_all(c.features()));
    let Some(cpu) = lacking else {
        println!("skipped: this machine has every feature of every CPU nax names");
        return;
    };
    let lib = build_text(source, &scratch.0, "other", &["--cpu", cpu.name]);
    let got = call(&lib, "other", "forward", &[tensor_arg("x", &x, Layout::Plain)], &RunOptions::default());
    let missing = host.missing(cpu.features().names());
    assert_eq!(got.status, 4, "{}", got.error);
    assert!(missing.iter().all(|f| got.error.contains(f)), "{} does not name {missing:?}", got.error);
}

/// Headers: two nax headers and DLPack's own definitions (here a stand-in
/// behind DLPack's include guard, as dlpack/dlpack.h is) in one C99 file,
/// and each as C++17, without a warning.
#[test]
fn headers_combine_with_each_other_and_with_dlpack() {
    let scratch = Scratch::new("headers");
    build_text("def forward(x: [n], s: float, k: int, b: bool) -> [n] {\n    return x * s\n}\n", &scratch.0, "one", &[]);
    build_text("def forward(int: [n], model: [n]) -> [n] {\n    return int + model\n}\ndef open(x: [n]) -> [n] {\n    return x\n}\n", &scratch.0, "two", &[]);
    let two = std::fs::read_to_string(scratch.0.join("two.h")).unwrap();
    assert!(two.contains("int two_forward(two_model *model, const DLTensor *int_, const DLTensor *model_, nax_result *result);"), "{two}");
    assert!(two.contains("No typed entry: `two_open` is taken"), "{two}");
    let file = scratch.0.join("both.c");
    std::fs::write(
        &file,
        "#include <stdint.h>\n#define DLPACK_DLPACK_H_\ntypedef struct { uint32_t major, minor; } DLPackVersion;\n\
         typedef enum { kDLCPU = 1 } DLDeviceType;\ntypedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;\n\
         typedef enum { kDLInt = 0, kDLFloat = 2, kDLBool = 6 } DLDataTypeCode;\ntypedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;\n\
         typedef struct { void *data; DLDevice device; int32_t ndim; DLDataType dtype; int64_t *shape, *strides; uint64_t byte_offset; } DLTensor;\n\
         typedef struct DLManagedTensorVersioned { DLPackVersion version; void *manager_ctx; void (*deleter)(struct DLManagedTensorVersioned *); uint64_t flags; DLTensor dl_tensor; } DLManagedTensorVersioned;\n\
         #include \"one.h\"\n#include \"two.h\"\n#include \"one.h\"\nint main(void) { return one_abi_version() == two_abi_version() ? 0 : 1; }\n",
    )
    .unwrap();
    let out = Command::new("cc").args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    compiles_as_cpp(&scratch.0.join("one.h"));
    compiles_as_cpp(&scratch.0.join("two.h"));
}

/// A function of several results from C: its typed entry and
/// `NAME_call_n` give each result with its axis names; `NAME_call` on it,
/// and `NAME_call_n` with the wrong count, are `NAX_ERR_ARGUMENT` naming
/// the results and write nothing; a one-result function works through
/// `NAME_call_n` too. The header compiles as C99 `-pedantic -Werror` and C++17.
#[test]
fn several_results_leave_through_call_n_and_the_typed_entry() {
    let scratch = Scratch::new("results");
    let source = "dim n = 4\ndef f(x: [n]) -> (double: [n], plus: [n], total: []) {\n    return x * 2.0, x + 1.0, sum(x, n)\n}\ndef g(x: [n]) -> [n] {\n    return x - 1.0\n}\n";
    let lib = build_text(source, &scratch.0, "results", &[]);
    let header = std::fs::read_to_string(scratch.0.join("results.h")).unwrap();
    assert!(header.contains("int results_f(results_model *model, const DLTensor *x, nax_result *results);"), "{header}");
    assert!(header.contains("nax_result *results, size_t nresults);"), "{header}");
    compiles_as_cpp(&scratch.0.join("results.h"));
    let exe = scratch.0.join("results");
    let out = Command::new("cc")
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(&scratch.0)
        .arg(root().join("tests/aot/results.c"))
        .arg("-o")
        .arg(&exe)
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", scratch.0.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().unwrap();
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "exit {:?}:\n{text}", run.status.code());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..6],
        ["typed double [n] 2 4 6 8", "typed plus [n] 2 3 4 5", "typed total [] 10", "call_n [n] 2 4 6 8", "call_n [n] 2 3 4 5", "call_n [] 10"],
        "{text}"
    );
    assert!(lines[6].starts_with("call: 1 ") && lines[6].contains("3 results (double, plus, total)") && lines[6].contains("NAME_call_n"), "{text}");
    assert!(lines[7].starts_with("call_n 2: 1 ") && lines[7].contains("nresults is 2"), "{text}");
    assert_eq!(lines[8], "call_n g [n] 0 1 2 3", "{text}");
    let manifest: serde_json::Value = serde_json::from_str(lines[9].strip_prefix("manifest ").expect("the manifest")).unwrap();
    let f = &manifest["functions"][0];
    let names: Vec<&str> = f["results"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["double", "plus", "total"], "{manifest}");
    assert_eq!(f["result"], f["results"][0], "{manifest}");
    assert_eq!(manifest["functions"][1]["results"][0]["name"], "result", "{manifest}");
}

/// Free bytes on the file system of `dir`, from `df`.
fn free_bytes(dir: &Path) -> Option<u64> {
    let out = Command::new("df").args(["-B1", "--output=avail"]).arg(dir).output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().nth(1)?.trim().parse().ok()
}

/// A library with more than 2 GiB of embedded weights links (no 32-bit
/// relocation reaches across them: they sit in `.lrodata`, after all other
/// data, reached through a 64-bit pointer) and reads them in place.
#[test]
fn more_than_two_gib_of_embedded_weights_link_and_run() {
    let scratch = Scratch::new("large");
    let (rows, cols) = (16384usize, 32832usize);
    let bytes = (rows * cols * 4) as u64;
    assert!(bytes > 2 << 30);
    let need = 2 * bytes + (4 << 30);
    match free_bytes(&scratch.0) {
        Some(free) if free >= need => {}
        free => {
            println!("skipped: {} needs {} GiB free, {:?} bytes are", scratch.0.display(), need >> 30, free);
            return;
        }
    }
    // The safetensors file, written directly: a header, then ones.
    let weights = scratch.0.join("big.safetensors");
    {
        use std::io::Write;
        let header = format!("{{\"big\":{{\"dtype\":\"F32\",\"shape\":[{rows},{cols}],\"data_offsets\":[0,{bytes}]}}}}");
        let padded = format!("{header:<width$}", width = header.len().div_ceil(8) * 8);
        let mut f = std::io::BufWriter::new(std::fs::File::create(&weights).unwrap());
        f.write_all(&(padded.len() as u64).to_le_bytes()).unwrap();
        f.write_all(padded.as_bytes()).unwrap();
        let chunk: Vec<u8> = std::iter::repeat_n(1f32.to_le_bytes(), cols).flatten().collect();
        for _ in 0..rows {
            f.write_all(&chunk).unwrap();
        }
        f.flush().unwrap();
    }
    let source = format!("dim R = {rows}\ndim C = {cols}\nparam big: [R C]\ndef f(x: [C]) -> [C] {{\n    return x + sum(big, R)\n}}\n");
    let w = weights.display().to_string();
    let lib = build_text(&source, &scratch.0, "large", &["--weights", &w, "--embed-weights"]);
    assert!(std::fs::metadata(&lib).unwrap().len() > bytes);
    std::fs::remove_file(&weights).unwrap();
    let x = HostTensor::from_f64(DType::F32, vec![cols], vec![Some("C".into())], &vec![0.5; cols]).unwrap();
    let got = call(&lib, "large", "f", &[tensor_arg("x", &x, Layout::Plain)], &RunOptions { embedded: true, ..RunOptions::default() });
    let result = got.result.unwrap_or_else(|| panic!("status {}: {}", got.status, got.error));
    assert!(result.to_f64_vec().iter().all(|&v| v == rows as f64 + 0.5));
}

/// `examples/host_c` builds with `cc -std=c99 -Wall -Wextra -Werror
/// -pedantic` against the block's library and runs: a result, an error
/// with its code and message, four threads agreeing.
#[test]
fn the_c_example_builds_and_runs() {
    let scratch = Scratch::new("host_c");
    let (_, weights, _) = block_library(&scratch.0, &[]);
    let app = scratch.0.join("app");
    let out = Command::new("cc")
        .args(["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg(root().join("examples/host_c/main.c"))
        .arg("-I")
        .arg(&scratch.0)
        .arg("-L")
        .arg(&scratch.0)
        .args(["-lblock", "-lpthread", "-lm"])
        .arg(format!("-Wl,-rpath,{}", scratch.0.display()))
        .arg("-o")
        .arg(&app)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&app).arg(&weights).arg("3").output().unwrap();
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{text}{}", String::from_utf8_lossy(&run.stderr));
    for line in [
        "block(x) -> [b=2 n=16 D=512]",
        "status 1 (NAX_ERR_ARGUMENT is 1): in `block`: parameter 'x': axis 'D' has size 511, expected 512",
        "4 threads at once: the same result",
        "3 calls:",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
}
