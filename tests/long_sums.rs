//! Reductions over long axes stay accurate (issue 26): an f32 sum adds
//! blocks of its last loop in f32 and their sums in f64
//! (`nax_back_native`'s `sum_in_blocks`), so its error does not grow with
//! the axis. The terms are computed inside the kernel (`float(arange(n))`),
//! so that 1.5e9 of them need no memory; on every native back end and the
//! CUDA kernels' CPU emulation. (The interpreter sums in f64.)

use crate::backends::{NATIVE_BACKENDS, run_on};
use nax::pipeline::Backend;
use nax_runtime::{HostTensor, TensorData, Value};
use std::collections::HashMap;

/// `function` of `source` on a `[1]` f32 argument `v`, as an f64.
fn run(backend: Backend, source: &str, function: &str, v: f32) -> f64 {
    let checked = nax_front::check_source(source);
    assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
    let graph = nax_lower::lower(&checked.module, function).expect("lower");
    let arg = HostTensor::new(TensorData::F32(vec![v]), vec![1], vec![None]).expect("tensor");
    let out = run_on(backend, &graph, &[Value::Tensor(arg)], &HashMap::new()).unwrap_or_else(|e| panic!("{function} on {}: {e}", backend.name()));
    out.to_f64_vec()[0]
}

fn backends() -> impl Iterator<Item = Backend> {
    NATIVE_BACKENDS.into_iter().chain([Backend::CudaEmulation])
}

/// One f32 accumulator per vector lane stops at 2^24 (1073741824 with 64
/// lanes, 28% low; one scalar accumulator 16777216).
#[test]
fn a_sum_of_one_and_a_half_billion_ones_is_exact() {
    let source = "dim n = 1500000000\ndef f(s: [1]) -> [1] {\n    return rearrange(sum(float(arange(n)) * 0.0 + 1.0, n), -> 1) * s\n}\n";
    for backend in backends() {
        let got = run(backend, source, "f", 1.0);
        assert!((got - 1.5e9).abs() <= 1e-6 * 1.5e9, "{}: {got}", backend.name());
    }
}

/// The mean and the variance of `x_i = f32(i) 2^-30` over 2^30 terms,
/// against their values in exact arithmetic: `f32(i)` rounds to even, so
/// the rounding of the terms cancels in the sum (the mean is exactly
/// `(n - 1)/2 2^-30`) and moves the variance by under 1e-14 relative.
#[test]
fn a_mean_and_a_variance_over_two_to_the_thirty_terms_are_accurate() {
    let source = "dim n = 1073741824\n\
                  def mean_of(s: [1]) -> [1] {\n    x = float(arange(n)) * 0.000000000931322574615478515625\n    return rearrange(mean(x, n), -> 1) * s\n}\n\
                  def variance(m: [1]) -> [1] {\n    x = float(arange(n)) * 0.000000000931322574615478515625 - m\n    return rearrange(mean(x * x, n), -> 1)\n}\n";
    let n = (1u64 << 30) as f64;
    let c = 1.0 / n;
    let mean = (n - 1.0) / 2.0 * c;
    // c^2 sum i^2 / n - 2 m c sum i / n + m^2 with m = 1/2.
    let variance = c * c * (n - 1.0) * (2.0 * n - 1.0) / 6.0 - 0.5 * c * (n - 1.0) + 0.25;
    for backend in backends() {
        let m = run(backend, source, "mean_of", 1.0);
        assert!((m - mean).abs() <= 1e-6 * mean, "mean on {}: {m}, expected {mean}", backend.name());
        let v = run(backend, source, "variance", 0.5);
        assert!((v - variance).abs() <= 1e-6 * variance, "variance on {}: {v}, expected {variance}", backend.name());
    }
}

/// A sum along a middle axis, of a tensor in memory (the kernel adds
/// whole rows into the output, in place): 2^22 rows of 16 f16 values
/// `1 + 2^-10`, whose running sum in one f32 accumulator loses the 2^-10
/// once past 2^14 (0.1% low).
#[test]
fn a_sum_over_a_long_outer_axis_is_accurate() {
    let (rows, columns) = (1usize << 22, 16);
    let source = "def f(x: f16[b n m]) -> [b m] {\n    return sum(float(x), n)\n}\n";
    let checked = nax_front::check_source(source);
    assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
    let graph = nax_lower::lower(&checked.module, "f").expect("lower");
    let term = half::f16::from_f64(1.0 + 1.0 / 1024.0);
    let x = HostTensor::new(TensorData::F16(vec![term; rows * columns]), vec![1, rows, columns], vec![None, None, None]).expect("tensor");
    let exact = rows as f64 * (1.0 + 1.0 / 1024.0);
    for backend in backends() {
        let out = run_on(backend, &graph, &[Value::Tensor(x.clone())], &HashMap::new()).unwrap_or_else(|e| panic!("{}: {e}", backend.name()));
        for got in out.to_f64_vec() {
            assert!((got - exact).abs() <= 1e-6 * exact, "{}: {got}, expected {exact}", backend.name());
        }
    }
}
