//! The workloads of bench/WORKLOADS.md as the nax benchmarks run them,
//! shared by `benches/workloads.rs` (criterion) and `benches/worker.rs`
//! (the worker `benches/compare.py` measures beside PyTorch), each of
//! which includes this file with `#[path = "support/workloads.rs"] mod workloads;`.
//!
//! The workloads: every file of `examples/workloads/` (at their
//! WORKLOADS.md sizes), plus `elementwise` (`x + y` on two 4096 x 4096
//! tensors: one elementwise kernel with no broadcasting, the
//! memory-bandwidth reference), and GPT-2 small (examples/gpt2/gpt2.nax,
//! issue 15): `gpt2_prefill` (`gpt2` on 128 tokens, batch 1) and
//! `gpt2_decode` (`step`: one token after a cache of 127), and
//! `gpt2_train_step` (`train_step`: the loss and every gradient on 128
//! tokens, issue 39) and `block_train` (the block's gradients). Each is
//! compiled as `nax run` compiles it (checked, lowered with the optimizer
//! on, compiled by a native back end); its float arguments and weights are
//! seeded values in [-1, 1) (GPT-2's weights times 0.05, as PyTorch's side
//! draws them), its integer arguments (token ids) seeded in [0, 1000).

use nax::Timings;
use nax::pipeline::{self, Backend};
use nax_front::check::sizes::{Size, Symbols};
use nax_front::check::types::{DType, TensorType, Type};
use nax_ir::Graph;
use nax_runtime::CallBoundary;
use nax_runtime::{Arg, BoundWeights, CheckedCall, Function, HostTensor, TensorData, ThreadPool};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

#[path = "../../tests/support/variants.rs"]
mod variants;

/// The built-in memory-bandwidth workload (`benches/compare.py` has the same source).
const ELEMENTWISE: &str = "dim n = 4096\ndim m = 4096\n\ndef elementwise(x: [n m], y: [n m]) -> [n m] {\n    return x + y\n}\n";

/// The block's training step (`block_train`): appended to
/// examples/workloads/block.nax.
const BLOCK_TRAIN: &str = "
def block_train(x: [b n D], dy: [b n D]) -> (value: [], d_x: [b n D], d_ln1_g: [D], d_ln1_b: [D], d_w_qkv: [D (3 D)], d_w_o: [D D],
                                          d_ln2_g: [D], d_ln2_b: [D], d_w_1: [D F], d_b_1: [F], d_w_2: [F D], d_b_2: [D]) {
    return grad(sum(sum(sum(block(x) * dy, D), n), b), x, ln1_g, ln1_b, w_qkv, w_o, ln2_g, ln2_b, w_1, b_1, w_2, b_2)
}
";

/// A workload: its name, its source, the function it runs and the
/// sizes of that function's axes known only at the call.
pub struct Workload {
    pub name: String,
    pub source: String,
    pub function: String,
    pub sizes: Vec<(&'static str, u64)>,
    /// What the seeded weights are scaled by.
    pub weight_scale: f32,
}

/// Every workload: the files of `examples/workloads/` by name, then `elementwise`.
pub fn all() -> Vec<Workload> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(root.join("examples/workloads"))
        .expect("examples/workloads")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "nax"))
        .collect();
    files.sort();
    let mut all: Vec<Workload> = files
        .into_iter()
        .map(|path| {
            let name = path.file_stem().and_then(|s| s.to_str()).expect("a workload file name").to_string();
            Workload { function: name.clone(), name, source: std::fs::read_to_string(&path).expect("workload source"), sizes: Vec::new(), weight_scale: 1.0 }
        })
        .collect();
    all.push(Workload {
        name: "elementwise".to_string(),
        function: "elementwise".to_string(),
        source: ELEMENTWISE.to_string(),
        sizes: Vec::new(),
        weight_scale: 1.0,
    });
    let gpt2 = std::fs::read_to_string(root.join("examples/gpt2/gpt2.nax")).expect("examples/gpt2/gpt2.nax");
    for (name, function, sizes) in [("gpt2_prefill", "gpt2", vec![("b", 1), ("n", 128)]), ("gpt2_decode", "step", vec![("b", 1), ("n", 1), ("c", 127)])] {
        all.push(Workload { name: name.to_string(), function: function.to_string(), source: gpt2.clone(), sizes: sizes.clone(), weight_scale: 0.05 });
        all.push(Workload { name: format!("{name}_bf16"), function: function.to_string(), source: variants::bf16_variant(&gpt2), sizes, weight_scale: 0.05 });
    }
    // Training (issue 39): the block against a gradient of its output, and
    // GPT-2's cross entropy, each with every gradient.
    let block = all.iter().find(|w| w.name == "block").map(|w| w.source.clone()).expect("examples/workloads/block.nax");
    all.push(Workload { name: "block_train".into(), function: "block_train".into(), source: block + BLOCK_TRAIN, sizes: Vec::new(), weight_scale: 0.05 });
    all.push(Workload {
        name: "gpt2_train_step".into(),
        function: "train_step".into(),
        source: gpt2.clone(),
        sizes: vec![("b", 1), ("n", 128)],
        weight_scale: 0.05,
    });
    all
}

/// Source to graph, rewritten by the optimizer, through the pipeline (as `nax run` does).
fn graph(source: &str, function: &str) -> Graph {
    let timings = &mut Timings::start();
    let module = pipeline::check(function, source, timings).expect("the workload checks");
    pipeline::lower(&module, function, true, timings).expect("lower").into_graph()
}

/// A seeded tensor for each of these types, by name: floats in [-1, 1)
/// times `scale`, integers in [0, 1000); `sizes` gives the axes known only
/// at the call, by name.
fn seeded(symbols: &Symbols, typed: &[(String, &TensorType)], sizes: &[(&str, u64)], scale: f32, state: &mut u64) -> Vec<(String, HostTensor)> {
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
                    Size::Sym(_) => {
                        let symbol = symbols.display(a.size);
                        let given = sizes.iter().find(|(n, _)| *n == symbol);
                        given.unwrap_or_else(|| panic!("{name}: the workload gives no size `{symbol}`")).1 as usize
                    }
                })
                .collect();
            let count = shape.iter().product::<usize>();
            let data = match t.dtype {
                dtype if dtype.is_int() => TensorData::I64((0..count).map(|_| ((next() + 1.0) * 500.0) as i64).collect()),
                DType::BF16 => TensorData::BF16((0..count).map(|_| half::bf16::from_f32(next() * scale)).collect()),
                DType::F16 => TensorData::F16((0..count).map(|_| half::f16::from_f32(next() * scale)).collect()),
                _ => TensorData::F32((0..count).map(|_| next() * scale).collect()),
            };
            let names = t.axes.iter().map(|a| a.name.clone()).collect();
            (name.clone(), HostTensor::new(data, shape, names).expect("tensor"))
        })
        .collect()
}

/// The function's arguments and the module's weights, seeded.
fn arguments(source: &str, function: &str, sizes: &[(&str, u64)], weight_scale: f32) -> (Vec<HostTensor>, HashMap<String, HostTensor>) {
    let checked = nax_front::check_source(source);
    let f = checked.module.functions.iter().find(|f| f.name == function).expect("the workload's function");
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let params: Vec<(String, &TensorType)> = f.bindings[..f.params]
        .iter()
        .map(|b| match &b.ty {
            Type::Tensor(t) => (b.name.clone(), t),
            _ => panic!("{function}: workload parameters are tensors"),
        })
        .collect();
    let args = seeded(&f.symbols, &params, sizes, 1.0, &mut state).into_iter().map(|(_, t)| t).collect();
    let weights: Vec<(String, &TensorType)> = checked.module.weights.iter().map(|w| (w.name.clone(), &w.ty)).collect();
    (args, seeded(&f.symbols, &weights, sizes, weight_scale, &mut state).into_iter().collect())
}

impl Workload {
    /// Source to callable (check, lower, compile) with this back end, and
    /// how long that took, in milliseconds.
    pub fn compile(&self, backend: Backend) -> (Function, f64) {
        let start = Instant::now();
        let f = pipeline::compile_graph(graph(&self.source, &self.function), &[], backend, &mut Timings::start()).expect("compile");
        (f, start.elapsed().as_secs_f64() * 1e3)
    }

    /// A compiled function ready to call on the seeded arguments and weights.
    pub fn program(&self, f: Function) -> Program {
        let (args, weights) = arguments(&self.source, &self.function, &self.sizes, self.weight_scale);
        Program { f, args, weights: BoundWeights::new(weights) }
    }
}

/// A workload's compiled function with its arguments and weights (bound
/// as a user's program binds them: their packed panels kept between calls).
pub struct Program {
    pub f: Function,
    args: Vec<HostTensor>,
    pub weights: BoundWeights,
}

impl Program {
    /// The call, checked once against the signature.
    pub fn check(&self) -> CheckedCall<'_> {
        self.f.signature().check(self.args.iter().map(|t| Arg::Tensor(t.view())).collect(), &self.weights).expect("the arguments fit")
    }

    /// One call in this pool, allocating its results, as a user's call does.
    pub fn run(&self, call: &CheckedCall<'_>, pool: &ThreadPool) -> Vec<HostTensor> {
        self.f.run_results(call, pool).expect("run")
    }
}
