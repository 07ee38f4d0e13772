//! Accuracy of the native back ends' f32 math (the vectorisable
//! approximations of `nax_back_native::math`) against the reference
//! interpreter, which computes in f64 with the C math library: each
//! function over a sweep of the whole f32 range (every 2^14-th bit
//! pattern, both signs, subnormals included) plus 0, ±inf, nan and the
//! overflow boundaries. Every result must be within CLI.md's elementwise
//! tolerance, nan exactly where the reference has nan, and infinities
//! exact; the worst errors are printed (`-- --nocapture`): the relative
//! error and the distance in ulps over the results of magnitude 1e-6 or
//! more, the absolute error below that (where only the absolute error
//! counts against the tolerance: `gelu(-8)` is about -5e-15, and f32
//! arithmetic, torch's included, gives -0).

use crate::backends::{NATIVE_BACKENDS, run_on};
use nax::pipeline::Backend;
use nax_runtime::{DType, HostTensor, TensorData};
use std::collections::HashMap;

const FUNCTIONS: [&str; 13] = ["exp", "log", "log1p", "expm1", "tanh", "erf", "sigmoid", "gelu", "silu", "softplus", "sqrt", "sin", "round"];

fn inputs() -> Vec<f32> {
    let mut v: Vec<f32> = (0..(1u64 << 18)).map(|i| f32::from_bits((i << 14) as u32)).collect();
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        88.72,
        88.73,
        -87.3,
        -103.9,
        -104.0,
        1e-30,
        -1e-30,
        0.625,
        -0.625,
        1.0,
        -1.0,
        20.0,
        20.001,
    ]);
    v
}

fn run(backend: Backend, function: &str, x: &[f32]) -> Vec<f32> {
    let source = format!("dim n = {}\ndef f(x: [n]) -> [n] {{\n    return {function}(x)\n}}\n", x.len());
    let checked = nax_front::check_source(&source);
    assert!(!checked.has_errors(), "{function}: {:?}", checked.diagnostics);
    let graph = nax_ir::lower(&checked.module, "f").expect("lower");
    let t = HostTensor::new(TensorData::F32(x.to_vec()), vec![x.len()], vec![Some("n".into())]).expect("tensor");
    let out = run_on(backend, &graph, &[nax_runtime::Value::Tensor(t)], &HashMap::new()).unwrap_or_else(|e| panic!("{function} on {}: {e}", backend.name()));
    assert_eq!(out.dtype(), DType::F32);
    out.to_f64_vec().into_iter().map(|v| v as f32).collect()
}

/// The distance in units in the last place between two finite f32s.
fn ulps(a: f32, b: f32) -> u64 {
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        if i < 0 { i64::from(i32::MIN) - i64::from(i) } else { i64::from(i) }
    };
    (key(a) - key(b)).unsigned_abs()
}

#[test]
fn f32_math_is_accurate_over_the_whole_range() {
    let x = inputs();
    let mut failures = Vec::new();
    println!("{:<10} {:<10} {:>14} {:>9} {:>19}", "function", "backend", "max rel error", "max ulps", "max abs error < 1e-6");
    for function in FUNCTIONS {
        let reference = run(Backend::Interp, function, &x);
        for backend in NATIVE_BACKENDS {
            let got = run(backend, function, &x);
            let (mut worst_abs, mut worst_rel, mut worst_ulps) = (0.0f64, 0.0f64, 0u64);
            for ((&xi, &g), &r) in x.iter().zip(&got).zip(&reference) {
                let ok = if r.is_nan() || g.is_nan() {
                    r.is_nan() && g.is_nan()
                } else if r.is_infinite() || g.is_infinite() {
                    r == g
                } else {
                    let (g64, r64) = (f64::from(g), f64::from(r));
                    if r64.abs() >= 1e-6 {
                        worst_rel = worst_rel.max((g64 - r64).abs() / r64.abs());
                        worst_ulps = worst_ulps.max(ulps(g, r));
                    } else {
                        worst_abs = worst_abs.max((g64 - r64).abs());
                    }
                    (g64 - r64).abs() <= 1e-5 + 1e-4 * r64.abs()
                };
                if !ok && failures.len() < 20 {
                    failures.push(format!("{function} on {}: f({xi:e}) = {g:e}, expected {r:e}", backend.name()));
                }
            }
            println!("{function:<10} {:<10} {worst_rel:>14.2e} {worst_ulps:>9} {worst_abs:>19.2e}", backend.name());
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
