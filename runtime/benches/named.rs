//! Eager named-tensor arithmetic: an add of two 4096 x 4096 f32 tensors,
//! the right one either in the same layout (`[i j] + [i j]`, one zip of two
//! slices) or transposed by name (`[i j] + [j i]`, read in cache tiles).
//! The target is the transposed add within about 1.5x of the same-layout
//! one; docs/named-tensors.md records the times.
//!
//!     cargo bench -p nax-runtime --bench named

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nax_runtime::{DType, HostTensor, NamedTensor};

const N: usize = 4096;

/// A 4096 x 4096 f32 tensor named `[first second]`.
fn square(first: &str, second: &str) -> NamedTensor {
    let values: Vec<f64> = (0..N * N).map(|k| (k % 1000) as f64).collect();
    let names = vec![Some(first.to_string()), Some(second.to_string())];
    HostTensor::from_f64(DType::F32, vec![N, N], names, &values)
        .expect("a valid tensor")
        .into()
}

fn named_add(c: &mut Criterion) {
    let ij = square("i", "j");
    let ji = square("j", "i");
    let mut group = c.benchmark_group("named_add_4096x4096_f32");
    group.sample_size(20);
    // Two operands read, one result written.
    group.throughput(Throughput::Bytes((3 * N * N * size_of::<f32>()) as u64));
    group.bench_function("same_layout", |b| {
        b.iter(|| ij.add(&ij).expect("aligned operands"))
    });
    group.bench_function("transposed", |b| {
        b.iter(|| ij.add(&ji).expect("aligned operands"))
    });
    group.finish();
}

criterion_group!(benches, named_add);
criterion_main!(benches);
