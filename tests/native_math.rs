//! Accuracy of the native back ends' f32 math (the vectorisable
//! approximations of `nax_back_native::math`, on every native back end
//! and the CUDA kernels' CPU emulation) and of nax's own f64 math (what a
//! GPU computes with) against the reference
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
    let graph = nax_lower::lower(&checked.module, "f").expect("lower");
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
        for backend in NATIVE_BACKENDS.into_iter().chain([Backend::CudaEmulation]) {
            let got = run(backend, function, &x);
            let (mut worst_abs, mut worst_rel, mut worst_ulps) = (0.0f64, 0.0f64, 0u64);
            for ((&xi, &g), &r) in x.iter().zip(&got).zip(&reference) {
                // A GPU's `sin` reduces by pi/2 in three parts: accurate while
                // |x| < 2^50 (documented in `nax_back_native`'s `wide`).
                if backend == Backend::CudaEmulation && function == "sin" && xi.abs() >= 2f32.powi(50) {
                    continue;
                }
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

/// f64 inputs: every 2^50-th bit pattern (both signs, subnormals, ±inf
/// and nan included) and the edges of the functions' ranges.
fn inputs64() -> Vec<f64> {
    let mut v: Vec<f64> = (0..(1u64 << 14)).map(|i| f64::from_bits(i << 50)).collect();
    v.extend([0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -2.5, 6.0, 709.78, 709.79, -745.1, -745.2, 1e-300, 1e-310, 20.0, 1e-9, -1e-9, 3.0, 1e5, -1e6, 1e15]);
    v
}

/// Runs `body` (an expression of `x` and `y`, f64 tensors of `n` elements).
fn run64(backend: Backend, body: &str, x: &[f64], y: &[f64]) -> Vec<f64> {
    let source = format!("dim n = {}\ndef f(x: f64[n], y: f64[n]) -> f64[n] {{\n    return {body}\n}}\n", x.len());
    let checked = nax_front::check_source(&source);
    assert!(!checked.has_errors(), "{body}: {:?}", checked.diagnostics);
    let graph = nax_lower::lower(&checked.module, "f").expect("lower");
    let tensor = |v: &[f64]| nax_runtime::Value::Tensor(HostTensor::new(TensorData::F64(v.to_vec()), vec![v.len()], vec![Some("n".into())]).expect("tensor"));
    let out = run_on(backend, &graph, &[tensor(x), tensor(y)], &HashMap::new()).unwrap_or_else(|e| panic!("{body} on {}: {e}", backend.name()));
    out.to_f64_vec()
}

/// The distance in units in the last place between two finite f64s.
fn ulps64(a: f64, b: f64) -> u64 {
    let key = |x: f64| {
        let i = x.to_bits() as i64;
        if i < 0 { i128::from(i64::MIN) - i128::from(i) } else { i128::from(i) }
    };
    u64::try_from((key(a) - key(b)).unsigned_abs()).unwrap_or(u64::MAX)
}

/// nax's own f64 math (`nax_back_native`'s `wide`, what the CUDA target
/// computes with: a GPU has no C library), on the CUDA kernels' CPU
/// emulation, against the interpreter (the C library's functions, from the
/// `libm` crate): within 2 ulps for `exp` and `log`, 4 for the
/// functions built from them and `sin`, `cos`, `erf` (1 or 2 measured),
/// 2048 for `pow` (`exp(y log|x|)`: 868 measured); nan and infinities exactly where
/// the reference has them. `sin` and `cos` are compared where |x| < 2^50.
#[test]
fn f64_math_without_a_c_library_is_accurate() {
    let x = inputs64();
    let ys = [0.0, -0.0, 1.0, -1.0, 2.0, 3.0, -3.0, 0.5, -0.5, 1.5, 10.0, -7.0, 100.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];
    // Function, body, the largest error allowed (ulps).
    let cases: [(&str, &str, u64); 9] = [
        ("exp", "exp(x)", 2),
        ("log", "log(x)", 2),
        ("log1p", "log1p(x)", 4),
        ("expm1", "expm1(x)", 4),
        ("tanh", "tanh(x)", 4),
        ("erf", "erf(x)", 4),
        ("sin", "sin(x)", 4),
        ("cos", "cos(x)", 4),
        ("pow", "pow(x, y)", 2048),
    ];
    let mut failures = Vec::new();
    println!("{:<8} {:>10} {:>14}", "function", "max ulps", "max rel error");
    for (name, body, bound) in cases {
        let (xs, yv): (Vec<f64>, Vec<f64>) =
            if name == "pow" { x.iter().step_by(16).flat_map(|&a| ys.iter().map(move |&b| (a, b))).unzip() } else { (x.clone(), vec![0.0; x.len()]) };
        let reference = run64(Backend::Interp, body, &xs, &yv);
        let got = run64(Backend::CudaEmulation, body, &xs, &yv);
        let (mut worst_ulps, mut worst_rel) = (0u64, 0.0f64);
        for (i, (&g, &r)) in got.iter().zip(&reference).enumerate() {
            if matches!(name, "sin" | "cos") && xs[i].abs() >= 2f64.powi(50) {
                continue;
            }
            let ok = if r.is_nan() || g.is_nan() {
                r.is_nan() && g.is_nan()
            } else if r.is_infinite() || g.is_infinite() {
                r == g
            } else if r == 0.0 {
                g.abs() < 1e-300
            } else {
                let d = ulps64(g, r);
                worst_ulps = worst_ulps.max(d);
                worst_rel = worst_rel.max((g - r).abs() / r.abs());
                d <= bound || (g - r).abs() < 1e-300
            };
            if !ok && failures.len() < 20 {
                failures.push(format!("{name}: f({:e}, {:e}) = {g:e}, expected {r:e}", xs[i], yv[i]));
            }
        }
        println!("{name:<8} {worst_ulps:>10} {worst_rel:>14.2e}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
