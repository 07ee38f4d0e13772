//! The CUDA target without a GPU: every case of the backend suite and every
//! workload compiles to PTX for `sm_90` (`nax build --target cuda --emit
//! ptx`), whose text is checked (the target, no external symbol, one
//! entry per kernel with its buffers, the size slots and the range as
//! parameters) and, where `ptxas` is at hand (on the PATH, `NAX_PTXAS`, or
//! PyPI's `nvidia-cuda-nvcc-cu12` wheel), assembled for `sm_90`. The same
//! kernels' index and guard logic run on the CPU against the interpreter in
//! the backend suite (`Backend::CudaEmulation`).

use crate::backends::{cases, model_cases, run_on};
use crate::support::{nax, nax_files, root, tempdir};
use nax::pipeline::{self, Backend, FormOptions, Machine};
use nax_runtime::CallBoundary;
use nax_runtime::cuda::CudaPlan;
use nax_runtime::{DType, HostTensor, Scalar, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Checks a function's CUDA plan: it validates, and its PTX is for
/// `sm_90`, has no `.extern`, and one entry per kernel with one parameter
/// per buffer the kernel takes and three more (the size slots, `begin`,
/// `end`).
fn check_plan(plan: &CudaPlan, inputs: usize, what: &str) {
    plan.validate(inputs).unwrap_or_else(|e| panic!("{what}: {e}"));
    let ptx = &plan.ptx;
    assert!(ptx.contains("\n.target sm_90\n"), "{what}: not for sm_90:\n{ptx}");
    assert!(!ptx.contains(".extern"), "{what}: an external symbol:\n{ptx}");
    for k in &plan.kernels {
        let entry = format!(".visible .entry {}(", k.entry);
        let at = ptx.find(&entry).unwrap_or_else(|| panic!("{what}: no {entry}:\n{ptx}"));
        let params = ptx[at..].split(')').next().unwrap_or_default().matches(".param").count();
        assert_eq!(params, k.buffers.len() + 3, "{what}: the parameters of {entry}");
    }
    assert_eq!(ptx.matches(".entry").count(), plan.kernels.len(), "{what}: the entries");
}

/// `ptxas`, when this machine has it: `NAX_PTXAS`, the PATH, or the one
/// in PyPI's `nvidia-cuda-nvcc-cu12` wheel.
fn ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NAX_PTXAS") {
        return Some(PathBuf::from(p));
    }
    if Command::new("ptxas").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Some(PathBuf::from("ptxas"));
    }
    let script = "import importlib.util as u; s = u.find_spec('nvidia.cuda_nvcc'); print(list(s.submodule_search_locations)[0])";
    let out = Command::new("python3").args(["-c", script]).output().ok()?;
    let path = Path::new(String::from_utf8_lossy(&out.stdout).trim()).join("bin/ptxas");
    path.is_file().then_some(path)
}

#[test]
fn every_case_and_workload_compiles_to_ptx_that_ptxas_accepts() {
    let dir = tempdir();
    let mut sources: Vec<(String, String, Option<String>)> = cases().into_iter().chain(model_cases()).map(|c| (c.name, c.source, Some(c.function))).collect();
    for path in nax_files(&root().join("examples/workloads")) {
        sources.push((path.display().to_string(), std::fs::read_to_string(&path).unwrap(), None));
    }
    let mut written = Vec::new();
    for (name, source, function) in sources {
        let checked = nax_front::check_source(&source);
        let functions: Vec<String> = match function {
            Some(f) => vec![f],
            None => checked.module.functions.iter().map(|f| f.name.clone()).collect(),
        };
        for f in functions {
            let lowered = pipeline::lower(&checked.module, &f, true, &mut nax::Timings::start()).unwrap_or_else(|e| panic!("{name}: {e}"));
            let program = pipeline::kernels(lowered.graph(), &Machine::CUDA, FormOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
            let plan = nax_back_mlir::cuda(&program).unwrap_or_else(|e| panic!("{name}: {f}: {e}"));
            check_plan(&plan, nax_ir::signature(lowered.graph(), &[]).params.len(), &name);
            let file = dir.join(format!("{}_{f}.ptx", written.len()));
            std::fs::write(&file, &plan.ptx).unwrap();
            written.push((name.clone(), file));
        }
    }
    println!("{} programs compiled to PTX", written.len());
    let Some(ptxas) = ptxas() else {
        println!("skipped assembling the PTX: no ptxas (pip install nvidia-cuda-nvcc-cu12, or set NAX_PTXAS)");
        return;
    };
    for (name, file) in &written {
        let out = Command::new(&ptxas).args(["-arch=sm_90", "-o", "/dev/null"]).arg(file).output().expect("ptxas runs");
        assert!(out.status.success(), "{name}: ptxas rejects {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    }
    println!("ptxas ({}) accepted all {} for sm_90", ptxas.display(), written.len());
}

#[test]
fn the_cuda_target_on_the_command_line() {
    let dir = tempdir();
    let example = root().join("examples/workloads/gelu_bias.nax");
    let ptx = dir.join("gelu_bias.ptx");
    let out = nax(&["build", example.to_str().unwrap(), "--target", "cuda", "--emit", "ptx", "-o", ptx.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&ptx).unwrap();
    assert!(text.contains(".visible .entry gelu_bias_k0("), "{text}");
    let mlir = dir.join("gelu_bias.mlir");
    let out = nax(&["build", example.to_str().unwrap(), "--target", "cuda", "--emit", "mlir", "-o", mlir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&mlir).unwrap();
    assert!(text.contains("gpu.module @gelu_bias") && text.contains("gpu.func @gelu_bias_k0(") && text.contains("gpu.global_id"), "{text}");
    for (args, message) in [
        (vec!["--emit", "ptx"], "--target cuda"),
        (vec!["--emit", "llvm-ir", "--target", "cuda"], "--emit ptx"),
        (vec!["--emit", "obj", "--target", "cuda"], "--emit ptx"),
    ] {
        let mut all = vec!["build", example.to_str().unwrap(), "-o", ptx.to_str().unwrap()];
        all.extend(args);
        let out = nax(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(message), "{all:?}: {err}");
    }
    // Running on CUDA: without a GPU, a clear message and exit 1 (with
    // one, the backend suite runs every case there).
    if nax_runtime::cuda::driver().is_err() {
        let out = nax(&["run", example.to_str().unwrap(), "--fn", "gelu_bias", "--out", dir.join("o.safetensors").to_str().unwrap(), "--target", "cuda"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.starts_with("error: no NVIDIA GPU driver on this machine: libcuda.so.1 cannot be loaded"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // f64 math: nax's own, no external symbol.
    let source = dir.join("f64.nax");
    std::fs::write(&source, "dim n = 4\ndef f(x: f64[n]) -> f64[n] {\n    return pow(exp(x), 2.5) + sin(x)\n}\n").unwrap();
    let out = nax(&["build", source.to_str().unwrap(), "--target", "cuda", "--emit", "ptx", "-o", ptx.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&ptx).unwrap();
    assert!(!text.contains(".extern") && text.contains("fma.rn.f64"), "{text}");
}

/// Bytes of values as a buffer of `dtype` holds them (little-endian).
fn encode(dtype: DType, values: &[f64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * dtype.size_bytes());
    for &v in values {
        match dtype {
            DType::F16 => out.extend(half::f16::from_f64(v).to_le_bytes()),
            DType::BF16 => out.extend(half::bf16::from_f64(v).to_le_bytes()),
            DType::F32 => out.extend((v as f32).to_le_bytes()),
            DType::F64 => out.extend(v.to_le_bytes()),
            DType::I32 => out.extend((v as i32).to_le_bytes()),
            DType::I64 => out.extend((v as i64).to_le_bytes()),
            DType::Bool => out.push(u8::from(v != 0.0)),
        }
    }
    out
}

/// What an exported launch plan checks: the interpreter's result (a
/// case), or nothing but the time (a workload, its inputs drawn on the GPU
/// and its PyTorch code beside it).
enum Check {
    Result(HostTensor, usize),
    Time { torch: String, function: String },
}

/// Writes one function's CUDA kernels for `.device/check.py`: `NAME.ptx`,
/// `NAME.json` (buffers with their element type, shape and origin, the
/// size slots' values at this call, each kernel's entry, buffers and
/// threads), the inputs' and weights' bytes for a case, and what to check.
fn export(dir: &Path, name: &str, graph: &nax_ir::Graph, args: &[Value], weights: &HashMap<String, HostTensor>, check: Check) {
    use nax_runtime::plan::{BufferKind, SizeRef};
    let program = pipeline::kernels(graph, &Machine::CUDA, FormOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let cuda = nax_back_mlir::cuda(&program).unwrap_or_else(|e| panic!("{name}: {e}"));
    let plan = &cuda.plan;
    let signature = nax_ir::signature(graph, &[]);
    let call = signature.check(args.iter().map(Value::arg).collect(), weights).unwrap_or_else(|e| panic!("{name}: {e}"));
    let slots: Vec<u64> = plan.slots.iter().map(|&id| call.size(nax_runtime::Size::Sym(id)).expect("every slot is known at a call")).collect();
    let value = |s: SizeRef| match s {
        SizeRef::Const(c) => c,
        SizeRef::Slot(i) => slots[i],
    };
    let with_data = matches!(check, Check::Result(..));
    let mut buffers = Vec::new();
    for (b, buffer) in plan.buffers.iter().enumerate() {
        let shape: Vec<u64> = buffer.shape.iter().map(|&s| value(s)).collect();
        let (kind, source, data): (&str, serde_json::Value, Option<Vec<f64>>) = match &buffer.kind {
            BufferKind::Input(i) => (
                "input",
                (*i).into(),
                Some(match &args[*i] {
                    Value::Tensor(t) => t.to_f64_vec(),
                    Value::Scalar(Scalar::Float(x)) => vec![*x],
                    Value::Scalar(Scalar::Int(x)) => vec![*x as f64],
                    Value::Scalar(Scalar::Bool(x)) => vec![f64::from(u8::from(*x))],
                }),
            ),
            BufferKind::Weight(w) => ("weight", w.clone().into(), Some(weights[w].to_f64_vec())),
            BufferKind::Temporary => ("temporary", serde_json::Value::Null, None),
            BufferKind::Alias(j) => ("alias", (*j).into(), None),
            BufferKind::Tile => panic!("{name}: attention tiles are not formed for a GPU"),
            BufferKind::Fault => panic!("{name}: bounds-checked kernels are not exported for a GPU"),
        };
        let mut entry =
            serde_json::json!({"dtype": buffer.dtype.as_str(), "elements": shape.iter().product::<u64>(), "shape": shape, "kind": kind, "source": source});
        if let (Some(values), true) = (data, with_data) {
            let file = format!("{name}.b{b}.bin");
            std::fs::write(dir.join(&file), encode(buffer.dtype, &values)).unwrap();
            entry["data"] = file.into();
        }
        buffers.push(entry);
    }
    let kernels: Vec<serde_json::Value> =
        cuda.kernels.iter().enumerate().map(|(i, k)| serde_json::json!({"entry": k.entry, "buffers": k.buffers, "threads": cuda.threads(i, &slots)})).collect();
    std::fs::write(dir.join(format!("{name}.ptx")), &cuda.ptx).unwrap();
    let mut description = serde_json::json!({"name": name, "ptx": format!("{name}.ptx"), "slots": slots, "buffers": buffers, "kernels": kernels});
    match check {
        Check::Result(expected, terms) => {
            let (rtol, atol) = crate::backends::tolerance(expected.dtype(), terms);
            std::fs::write(dir.join(format!("{name}.expected.bin")), encode(DType::F64, &expected.to_f64_vec())).unwrap();
            description["result"] = serde_json::json!({"buffer": plan.results[0], "expected": format!("{name}.expected.bin"), "rtol": rtol, "atol": atol});
            // The same call for the runtime's CUDA device (`cuda_run`).
            let mut tensors = Vec::new();
            let mut scalars = serde_json::Map::new();
            for (p, v) in signature.params.iter().zip(args) {
                match v {
                    Value::Tensor(t) => tensors.push((p.name.as_str(), t)),
                    Value::Scalar(s) => drop(scalars.insert(p.name.clone(), serde_json::to_value(s).unwrap())),
                }
            }
            let stored: Vec<(&str, &HostTensor)> = weights.iter().map(|(n, t)| (n.as_str(), t)).collect();
            nax_runtime::write_tensors_atomic(&dir.join(format!("{name}.inputs.safetensors")), &tensors).unwrap();
            nax_runtime::write_tensors_atomic(&dir.join(format!("{name}.weights.safetensors")), &stored).unwrap();
            let call = serde_json::json!({"signature": signature, "plan": cuda, "scalars": scalars});
            std::fs::write(dir.join(format!("{name}.call.json")), serde_json::to_string(&call).unwrap()).unwrap();
            description["rust"] = serde_json::json!({"call": format!("{name}.call.json"), "inputs": format!("{name}.inputs.safetensors"), "weights": format!("{name}.weights.safetensors")});
        }
        Check::Time { torch, function } => {
            std::fs::write(dir.join(format!("{name}.py")), torch).unwrap();
            let params: Vec<&str> = signature.params.iter().map(|p| p.name.as_str()).collect();
            description["workload"] = serde_json::json!({"torch": format!("{name}.py"), "function": function, "params": params});
        }
    }
    std::fs::write(dir.join(format!("{name}.json")), serde_json::to_string_pretty(&description).unwrap()).unwrap();
}

/// Zero arguments and weights of the shapes `signature` declares (every
/// size a constant, as the workloads' are); host floats 1.
fn zero_arguments(signature: &nax_runtime::Signature) -> (Vec<Value>, HashMap<String, HostTensor>) {
    let tensor = |spec: &nax_runtime::TensorSpec| {
        let shape: Vec<usize> = spec
            .axes
            .iter()
            .map(|a| match signature.sizes.resolve(a.size) {
                nax_runtime::Size::Const(c) => c as usize,
                nax_runtime::Size::Sym(_) => panic!("{}: a workload's sizes are constants", signature.name),
            })
            .collect();
        HostTensor::from_f64(spec.dtype, shape.clone(), spec.names(), &vec![0.0; shape.iter().product()]).expect("tensor")
    };
    let args = signature
        .params
        .iter()
        .map(|p| match &p.ty {
            nax_runtime::ParamType::Tensor(spec) => Value::Tensor(tensor(spec)),
            nax_runtime::ParamType::Host(_) => Value::Scalar(Scalar::Float(1.0)),
        })
        .collect();
    (args, signature.weights.iter().map(|w| (w.name.clone(), tensor(&w.ty))).collect())
}

/// Writes `.device/cases/` for `.device/check.sh` (run by
/// `.device/prepare.sh`, on a machine with Rust; the GPU machine has none):
/// every backend-suite case with its inputs and the interpreter's result,
/// and every workload of examples/workloads at its WORKLOADS.md sizes with
/// its PyTorch code (`--emit torch`), to time beside PyTorch eager and
/// `torch.compile`.
#[test]
#[ignore = "writes .device/cases for .device/check.sh; run by .device/prepare.sh"]
fn export_device_cases() {
    use rand::SeedableRng;
    let dir = root().join(".device/cases");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let mut cases_written = Vec::new();
    for case in cases().into_iter().chain(model_cases()) {
        let Some((_, graph, rewritten, args, weights)) = crate::backends::prepare(&case, &mut rng, false) else { continue };
        // The device check compares one result per case.
        if graph.outputs.len() != 1 {
            continue;
        }
        let expected = run_on(Backend::Interp, &graph, &args, &weights).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        let terms = crate::backends::longest_sum(&graph);
        export(&dir, &case.name, &rewritten, &args, &weights, Check::Result(expected, terms));
        cases_written.push(case.name);
    }
    let mut workloads = Vec::new();
    for path in nax_files(&root().join("examples/workloads")) {
        let source = std::fs::read_to_string(&path).unwrap();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let checked = nax_front::check_source(&source);
        let graph = pipeline::lower(&checked.module, &name, true, &mut nax::Timings::start()).unwrap_or_else(|e| panic!("{name}: {e}")).into_graph();
        let (args, weights) = zero_arguments(&nax_ir::signature(&graph, &[]));
        let torch = nax_back_torch::emit_module(&checked.module).unwrap_or_else(|e| panic!("{name}: {e}"));
        export(&dir, &format!("workload_{name}"), &graph, &args, &weights, Check::Time { torch, function: name.clone() });
        workloads.push(format!("workload_{name}"));
    }
    let index = serde_json::json!({"cases": cases_written, "workloads": workloads});
    std::fs::write(dir.join("index.json"), serde_json::to_string_pretty(&index).unwrap()).unwrap();
    println!("{} cases and {} workloads written to {}", cases_written.len(), workloads.len(), dir.display());
}
