//! The CUDA target without a GPU: every case of the backend suite and every
//! workload compiles to PTX for `sm_90` (`nax build --target cuda --emit
//! ptx`), whose text is checked (the target, no external symbol, one
//! entry per kernel with its buffers, the size slots and the range as
//! parameters) and, where `ptxas` is at hand (on the PATH, `NAX_PTXAS`, or
//! PyPI's `nvidia-cuda-nvcc-cu12` wheel), assembled for `sm_90`. The same
//! kernels' index and guard logic run on the CPU against the interpreter in
//! the backend suite (`Backend::CudaEmulation`).

use crate::backends::{cases, model_cases};
use crate::support::{nax, nax_files, root, tempdir};
use nax::pipeline::{self, Target};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Checks the PTX of a program's kernels: `sm_90`, no `.extern`, and entry
/// `<program>_k<i>` with one parameter per buffer the kernel uses and three
/// more (the size slots, `begin`, `end`).
fn check_ptx(ptx: &str, program: &nax_kernel::Program, what: &str) {
    assert!(ptx.contains("\n.target sm_90\n"), "{what}: not for sm_90:\n{ptx}");
    assert!(!ptx.contains(".extern"), "{what}: an external symbol:\n{ptx}");
    for (i, k) in program.kernels.iter().enumerate() {
        let entry = format!(".visible .entry {}_k{i}(", program.name);
        let at = ptx.find(&entry).unwrap_or_else(|| panic!("{what}: no {entry}:\n{ptx}"));
        let params = ptx[at..].split(')').next().unwrap_or_default().matches(".param").count();
        assert_eq!(params, k.buffers().len() + 3, "{what}: the parameters of {entry}");
    }
    assert_eq!(ptx.matches(".entry").count(), program.kernels.len(), "{what}: the entries");
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
            let program = pipeline::kernels(lowered.graph(), &Target::CUDA).unwrap_or_else(|e| panic!("{name}: {e}"));
            let ptx = nax_back_mlir::ptx(std::slice::from_ref(&program)).unwrap_or_else(|e| panic!("{name}: {f}: {e}"));
            check_ptx(&ptx, &program, &name);
            let file = dir.join(format!("{}_{f}.ptx", written.len()));
            std::fs::write(&file, ptx).unwrap();
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
    // Running on CUDA: without a GPU, a clear message and exit 1.
    let out = nax(&["run", example.to_str().unwrap(), "--fn", "gelu_bias", "--out", dir.join("o.safetensors").to_str().unwrap(), "--target", "cuda"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("libcuda.so.1 cannot be loaded") || err.contains("does not launch them yet"), "{err}");
    // f64 math: nax's own, no external symbol.
    let source = dir.join("f64.nax");
    std::fs::write(&source, "dim n = 4\ndef f(x: f64[n]) -> f64[n] {\n    return pow(exp(x), 2.5) + sin(x)\n}\n").unwrap();
    let out = nax(&["build", source.to_str().unwrap(), "--target", "cuda", "--emit", "ptx", "-o", ptx.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&ptx).unwrap();
    assert!(!text.contains(".extern") && text.contains("fma.rn.f64"), "{text}");
}
