//! Per-workload run time of nax's native code (bench/WORKLOADS.md): one
//! criterion group per workload, the nax side (the LLVM back end, the
//! default) with id `nax`, so results land in
//! `target/criterion/<workload>/nax/`. Each group also records the compile
//! time (source to callable) of every native back end in
//! `target/criterion/<workload>/compile.json`, which
//! `benches/compare.py` reads for its table beside PyTorch.
//!
//!     cargo bench --bench workloads [-- NAME]
//!
//! Workloads: `gelu_bias`, `transpose_add`, `softmax_mid`, `gemm` from
//! `examples/workloads/`, at WORKLOADS.md sizes, plus `elementwise`
//! (`x + y` on two 4096 x 4096 tensors: one elementwise kernel with no
//! broadcasting, the memory-bandwidth reference). Each call allocates its
//! output, as a user's call does.

use criterion::{criterion_group, criterion_main, Criterion};

/// The allocator of the `nax` command: freed outputs' pages are reused.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use nax_front::check::sizes::Size;
use nax_front::check::types::Type;
use nax_ir::{Argument, Backend, Graph};
use nax_runtime::{HostTensor, TensorData};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

const WORKLOADS: [&str; 4] = ["gelu_bias", "transpose_add", "softmax_mid", "gemm"];
const ELEMENTWISE: &str = "dim n = 4096\ndim m = 4096\n\ndef elementwise(x: [n m], y: [n m]) -> [n m] {\n    return x + y\n}\n";

/// Source to graph.
fn graph(source: &str, function: &str) -> Graph {
    let checked = nax_front::check_source(source);
    assert!(!checked.has_errors(), "{function}: {:?}", checked.diagnostics);
    nax_ir::lower(&checked.module, function).expect("lower")
}

/// The function's arguments: seeded values in [-1, 1).
fn arguments(source: &str, function: &str) -> Vec<Argument> {
    let checked = nax_front::check_source(source);
    let f = checked.module.functions.iter().find(|f| f.name == function).expect("the workload's function");
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    };
    f.bindings[..f.params]
        .iter()
        .map(|b| match &b.ty {
            Type::Tensor(t) => {
                let shape: Vec<usize> = t.axes.iter().map(|a| match f.symbols.resolve(a.size) {
                    Size::Const(c) => c as usize,
                    Size::Sym(_) => panic!("{function}: workload sizes are constants"),
                }).collect();
                let data: Vec<f32> = (0..shape.iter().product::<usize>()).map(|_| next()).collect();
                let names = t.axes.iter().map(|a| a.name.clone()).collect();
                Argument::Tensor(HostTensor::new(TensorData::F32(data), shape, names).expect("tensor"))
            }
            _ => panic!("{function}: workload parameters are tensors"),
        })
        .collect()
}

fn workload(c: &mut Criterion, name: &str, source: &str) {
    let g = graph(source, name);
    let args = arguments(source, name);
    let weights = HashMap::new();
    let sizes = nax_ir::check_call(&g, &args, &weights).expect("sizes");
    let backends: [(&str, Box<dyn Backend>); 2] = [("llvm", Box::new(nax_back_llvm::Llvm)), ("cranelift", Box::new(nax_back_cranelift::Cranelift))];
    let mut compile_ms = Vec::new();
    for (label, backend) in &backends {
        // Source to callable: check, lower and compile.
        let start = Instant::now();
        let _ = backend.compile(&graph(source, name)).expect("compile");
        compile_ms.push(format!("\"{label}\": {:.3}", start.elapsed().as_secs_f64() * 1e3));
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/criterion").join(name);
    std::fs::create_dir_all(&dir).expect("criterion folder");
    std::fs::write(dir.join("compile.json"), format!("{{{}}}\n", compile_ms.join(", "))).expect("compile.json");
    let exe = nax_back_llvm::Llvm.compile(&g).expect("compile");
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    group.bench_function("nax", |b| b.iter(|| exe.run(&args, &weights, &sizes).expect("run")));
    group.finish();
}

fn workloads(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in WORKLOADS {
        let source = std::fs::read_to_string(root.join(format!("examples/workloads/{name}.nax"))).expect("workload source");
        workload(c, name, &source);
    }
    workload(c, "elementwise", ELEMENTWISE);
}

criterion_group!(benches, workloads);
criterion_main!(benches);
