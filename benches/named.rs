//! Eager named-tensor arithmetic against compiled code: an add of two
//! 4096 x 4096 f32 tensors, the right operand in the same layout (`[i j] +
//! [i j]`, one zip of two slices) or transposed by name (`[i j] + [j i]`,
//! read in cache tiles), and nax's compiled `transpose_add` workload (the
//! same transposed add, JIT-compiled by LLVM), measured in one process, one
//! after the other, so their ratio is not skewed by the machine's drift.
//! The eager transposed add is meant to stay within 1.5x of the compiled one.
//!
//!     cargo bench --bench named

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nax::{Arg, DType, Engine, HostTensor};
use nax_named::NamedTensor;

/// The allocator of the `nax` command, as in the workloads bench.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const N: usize = 4096;

/// A 4096 x 4096 f32 tensor named `[first second]`.
fn square(first: &str, second: &str) -> HostTensor {
    let values: Vec<f64> = (0..N * N).map(|k| (k % 1000) as f64).collect();
    HostTensor::from_f64(DType::F32, vec![N, N], vec![Some(first.to_string()), Some(second.to_string())], &values).expect("a valid tensor")
}

fn named_add(c: &mut Criterion) {
    let (x, y) = (square("n", "m"), square("m", "n"));
    let (xn, yn) = (NamedTensor::from(x.clone()), NamedTensor::from(y.clone()));
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/workloads/transpose_add.nax")).expect("the workload");
    let engine = Engine::new();
    let compiled = engine.compile(&source).expect("compile").function("transpose_add").expect("transpose_add");
    let add = engine.compile("def add(x: [n m], y: [n m]) -> [n m] {\n    return x + y\n}\n").expect("compile").function("add").expect("add");
    let mut group = c.benchmark_group("named_add_4096x4096_f32");
    group.sample_size(20);
    // Two operands read, one result written.
    group.throughput(Throughput::Bytes((3 * N * N * size_of::<f32>()) as u64));
    group.bench_function("eager_same_layout", |b| b.iter(|| xn.add(&xn).expect("aligned operands")));
    group.bench_function("eager_transposed", |b| b.iter(|| xn.add(&yn).expect("aligned operands")));
    group.bench_function("compiled_transpose_add", |b| b.iter(|| compiled.call([("x", Arg::from(x.view())), ("y", Arg::from(y.view()))]).expect("call")));
    group.bench_function("compiled_add_of_a_view_transposed_by_name", |b| {
        b.iter(|| add.call([("x", Arg::from(x.view())), ("y", Arg::from(y.view()))]).expect("call"))
    });
    group.finish();
}

criterion_group!(benches, named_add);
criterion_main!(benches);
