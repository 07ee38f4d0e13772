//! Per-workload run time of nax's native code (bench/WORKLOADS.md): one
//! criterion group per workload, the nax side (the LLVM back end, the
//! default) with id `nax`, so results land in
//! `target/criterion/<workload>/nax/`. Each group also records the compile
//! time (source to callable) of every native back end in
//! `target/criterion/<workload>/compile.json`, which
//! `benches/compare.py` reads for its table beside PyTorch.
//!
//!     cargo bench --bench workloads [-- NAME]
//!     NAX_WORKLOAD=NAME cargo bench --bench workloads   # that one alone
//!
//! Workloads: every file of `examples/workloads/` (the WORKLOADS.md
//! workloads at their sizes; weights, as `block` has, are seeded values),
//! plus `elementwise` (`x + y` on two 4096 x 4096 tensors: one elementwise
//! kernel with no broadcasting, the memory-bandwidth reference). Each call
//! allocates its output, as a user's call does.

use criterion::{Criterion, criterion_group, criterion_main};

/// The allocator of the `nax` command: freed outputs' pages are reused.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use nax::Timings;
use nax::pipeline::{self, Backend};
use nax_front::check::sizes::Size;
use nax_front::check::types::Type;
use nax_ir::Graph;
use nax_runtime::{Arg, HostTensor, TensorData, ThreadPool};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

const ELEMENTWISE: &str = "dim n = 4096\ndim m = 4096\n\ndef elementwise(x: [n m], y: [n m]) -> [n m] {\n    return x + y\n}\n";

/// Source to graph, rewritten by the optimizer, through the pipeline (as `nax run` does).
fn graph(source: &str, function: &str) -> Graph {
    let timings = &mut Timings::start();
    let module = pipeline::check(function, source, timings).expect("the workload checks");
    pipeline::lower(&module, function, true, timings).expect("lower").into_graph()
}

/// A seeded tensor of values in [-1, 1) for each of these types, by name.
fn seeded(symbols: &nax_front::check::sizes::Symbols, typed: &[(String, &nax_front::check::types::TensorType)], state: &mut u64) -> Vec<(String, HostTensor)> {
    let mut next = move || {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        (*state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    };
    typed
        .iter()
        .map(|(name, t)| {
            let shape: Vec<usize> = t
                .axes
                .iter()
                .map(|a| match symbols.resolve(a.size) {
                    Size::Const(c) => c as usize,
                    Size::Sym(_) => panic!("{name}: workload sizes are constants"),
                })
                .collect();
            let data: Vec<f32> = (0..shape.iter().product::<usize>()).map(|_| next()).collect();
            let names = t.axes.iter().map(|a| a.name.clone()).collect();
            (name.clone(), HostTensor::new(TensorData::F32(data), shape, names).expect("tensor"))
        })
        .collect()
}

/// The function's arguments and the module's weights, seeded.
fn arguments(source: &str, function: &str) -> (Vec<HostTensor>, HashMap<String, HostTensor>) {
    let checked = nax_front::check_source(source);
    let f = checked.module.functions.iter().find(|f| f.name == function).expect("the workload's function");
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let params: Vec<(String, &nax_front::check::types::TensorType)> = f.bindings[..f.params]
        .iter()
        .map(|b| match &b.ty {
            Type::Tensor(t) => (b.name.clone(), t),
            _ => panic!("{function}: workload parameters are tensors"),
        })
        .collect();
    let args = seeded(&f.symbols, &params, &mut state).into_iter().map(|(_, t)| t).collect();
    let weights: Vec<(String, &nax_front::check::types::TensorType)> = checked.module.weights.iter().map(|w| (w.name.clone(), &w.ty)).collect();
    (args, seeded(&f.symbols, &weights, &mut state).into_iter().collect())
}

fn workload(c: &mut Criterion, name: &str, source: &str) {
    let (args, weights) = arguments(source, name);
    let mut compile_ms = Vec::new();
    for backend in [Backend::Llvm, Backend::Cranelift] {
        // Source to callable: check, lower and compile.
        let start = Instant::now();
        let _ = pipeline::compile_graph(graph(source, name), &[], backend, &mut Timings::start()).expect("compile");
        compile_ms.push(format!("\"{}\": {:.3}", backend.name(), start.elapsed().as_secs_f64() * 1e3));
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/criterion").join(name);
    std::fs::create_dir_all(&dir).expect("criterion folder");
    std::fs::write(dir.join("compile.json"), format!("{{{}}}\n", compile_ms.join(", "))).expect("compile.json");
    let f = pipeline::compile_graph(graph(source, name), &[], Backend::Llvm, &mut Timings::start()).expect("compile");
    let pool = ThreadPool::new(0).expect("a thread pool");
    let call = f.signature().check(args.iter().map(|t| Arg::Tensor(t.view())).collect(), &weights).expect("the arguments fit");
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    group.bench_function("nax", |b| b.iter(|| f.run(&call, &pool).expect("run")));
    group.finish();
}

fn workloads(c: &mut Criterion) {
    // NAX_WORKLOAD=NAME prepares and measures that workload alone, so that
    // no other workload's memory shapes its page layout (compare.py runs
    // each in its own process).
    let only = std::env::var("NAX_WORKLOAD").ok();
    let wanted = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(root.join("examples/workloads"))
        .expect("examples/workloads")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "nax"))
        .collect();
    files.sort();
    for path in files {
        let name = path.file_stem().and_then(|s| s.to_str()).expect("a workload file name").to_string();
        if wanted(&name) {
            let source = std::fs::read_to_string(&path).expect("workload source");
            workload(c, &name, &source);
        }
    }
    if wanted("elementwise") {
        workload(c, "elementwise", ELEMENTWISE);
    }
}

criterion_group!(benches, workloads);
criterion_main!(benches);
