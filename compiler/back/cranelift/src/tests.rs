//! End-to-end checks of the Cranelift back end against the reference
//! interpreter: small programs covering the float math (approximations and
//! C math library calls), the softmax, reduction and matmul kernels,
//! integers, half floats, masks, special values, host scalars, and a
//! run-time size large enough for the driver to split the parallel loop
//! across threads.

use crate::Cranelift;
use nax_back_interp::Interpreter;
use nax_ir::{Argument, Backend};
use nax_runtime::{DType, HostTensor};
use std::collections::HashMap;

/// Deterministic inputs in [-2, 2) (integers in [-5, 5], masks alternating
/// in an irregular pattern); with `special`, every third value is nan, inf
/// or -inf.
fn tensor(dtype: DType, shape: &[usize], names: &str, seed: u64, special: bool) -> Argument {
    let count: usize = shape.iter().product();
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let values: Vec<f64> = (0..count)
        .map(|k| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
            match dtype {
                DType::Bool => f64::from(unit < 0.5),
                DType::I32 | DType::I64 => (unit * 11.0).floor() - 5.0,
                _ if special && k % 3 == 0 => [f64::NAN, f64::INFINITY, f64::NEG_INFINITY][(k / 3) % 3],
                _ => unit * 4.0 - 2.0,
            }
        })
        .collect();
    let names = names.split_whitespace().map(|n| Some(n.to_string())).collect();
    Argument::Tensor(HostTensor::from_f64(dtype, shape.to_vec(), names, &values).expect("a well-formed test tensor"))
}

/// Runs `f` of `source` on both back ends and compares the results: exactly
/// for integers and masks, at the suite's tolerances for floats (nan must
/// meet nan).
fn agrees(source: &str, args: &[Argument]) {
    let checked = nax_front::check_source(source);
    assert!(!checked.has_errors(), "{:?}\n{source}", checked.diagnostics);
    let graph = nax_ir::lower(&checked.module, "f").expect("lowering");
    let weights = HashMap::new();
    let sizes = nax_ir::check_call(&graph, args, &weights).expect("the arguments fit");
    let got = Cranelift.compile(&graph).and_then(|x| x.run(args, &weights, &sizes)).unwrap_or_else(|e| panic!("cranelift: {e}\n{source}"));
    let want = Interpreter.compile(&graph).and_then(|x| x.run(args, &weights, &sizes)).unwrap_or_else(|e| panic!("interp: {e}\n{source}"));
    assert_eq!((got.shape(), got.dtype(), got.names()), (want.shape(), want.dtype(), want.names()), "{source}");
    let (rtol, atol) = match got.dtype() {
        DType::F16 | DType::BF16 => (1e-2, 1e-3),
        DType::F32 | DType::F64 => (1e-4, 1e-5),
        _ => (0.0, 0.0),
    };
    for (i, (a, b)) in got.to_f64_vec().into_iter().zip(want.to_f64_vec()).enumerate() {
        let same = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
        assert!(same, "element {i} is {a}, expected {b}\n{source}");
    }
}

#[test]
fn elementwise_f32_math() {
    let source = "dim n = 1029\ndef f(x: [n], y: [n]) -> [n] {\n    return exp(x) * y + tanh(x) - erf(y) + sigmoid(x) + 1.0\n}\n";
    agrees(source, &[tensor(DType::F32, &[1029], "n", 1, false), tensor(DType::F32, &[1029], "n", 2, false)]);
}

#[test]
fn library_calls_and_rounding() {
    let source = "dim n = 23\ndef f(x: [n], y: [n]) -> [n] {\n    return sin(x) + cos(y) + pow(abs(x) + 0.5, y) + floor(x * 3.0) + ceil(y * 3.0) + round(x * 2.0) + log(abs(y) + 0.5)\n}\n";
    agrees(source, &[tensor(DType::F32, &[23], "n", 3, false), tensor(DType::F32, &[23], "n", 4, false)]);
}

#[test]
fn f64_math() {
    let source = "dim n = 7\ndef f(x: f64[n]) -> f64[n] {\n    return exp(x) * 1.5 + log1p(abs(x)) + expm1(x) + tanh(x) + erf(x)\n}\n";
    agrees(source, &[tensor(DType::F64, &[7], "n", 5, false)]);
}

#[test]
fn special_values() {
    let source = "dim n = 7\ndef f(x: [n]) -> [n] {\n    return softmax(x, n) + sigmoid(x) + maximum(x, 0.0) + exp(x) - relu(x)\n}\n";
    agrees(source, &[tensor(DType::F32, &[7], "n", 6, true)]);
}

#[test]
fn softmax_family() {
    let source = "dim n = 3\ndim m = 5\ndef f(x: [n m]) -> [n m] {\n    return softmax(x, m) + log_softmax(x, n) + logsumexp(x, m)\n}\n";
    agrees(source, &[tensor(DType::F32, &[3, 5], "n m", 7, false)]);
}

#[test]
fn reductions() {
    let source = "dim n = 4\ndim m = 7\ndef f(x: [n m]) -> [n] {\n    return sum(x, m) + mean(x, m) * max(x, m) - min(x, m) + prod(x * 0.5, m)\n}\n";
    agrees(source, &[tensor(DType::F32, &[4, 7], "n m", 8, false)]);
}

#[test]
fn matmul() {
    let source = "dim n = 5\ndim k = 7\ndim m = 3\ndef f(x: [n k], w: [k m]) -> [n m] {\n    return x @ w\n}\n";
    agrees(source, &[tensor(DType::F32, &[5, 7], "n k", 9, false), tensor(DType::F32, &[7, 3], "k m", 10, false)]);
}

#[test]
fn integers() {
    let source = "dim n = 7\ndef f(i: Int[n], j: Int[n]) -> Int[n] {\n    return i * j + 3\n}\n";
    agrees(source, &[tensor(DType::I64, &[7], "n", 11, false), tensor(DType::I64, &[7], "n", 12, false)]);
    let source = "dim n = 7\ndef f(i: Int[n], j: Int[n]) -> [n] {\n    a = i * j + 3 - j\n    return a / 2 + float(int(a * 0.7)) + float(pow(i, 3))\n}\n";
    agrees(source, &[tensor(DType::I64, &[7], "n", 13, false), tensor(DType::I64, &[7], "n", 14, false)]);
    let source = "dim n = 7\ndef f(i: i32[n]) -> i32[n] {\n    return i * 1000003 * 1000003\n}\n";
    agrees(source, &[tensor(DType::I32, &[7], "n", 15, false)]);
}

#[test]
fn half_floats() {
    let source = "dim n = 23\ndef f(x: f16[n], y: f16[n]) -> f16[n] {\n    return x * y + 0.5\n}\n";
    agrees(source, &[tensor(DType::F16, &[23], "n", 16, false), tensor(DType::F16, &[23], "n", 17, false)]);
    let source = "dim n = 7\ndef f(x: bf16[n], y: bf16[n]) -> bf16[n] {\n    return x * 3.0 - y\n}\n";
    agrees(source, &[tensor(DType::BF16, &[7], "n", 18, true), tensor(DType::BF16, &[7], "n", 19, false)]);
    let source = "dim n = 7\ndef f(x: f16[n], y: bf16[n]) -> [n] {\n    return x + y\n}\n";
    agrees(source, &[tensor(DType::F16, &[7], "n", 26, true), tensor(DType::BF16, &[7], "n", 27, false)]);
}

#[test]
fn masks() {
    let source = "dim n = 7\ndef f(x: [n], y: [n]) -> Mask[n] {\n    return x > y\n}\n";
    agrees(source, &[tensor(DType::F32, &[7], "n", 20, false), tensor(DType::F32, &[7], "n", 21, false)]);
    let source = "dim n = 7\ndim m = 3\ndef f(x: [n m], mk: Mask[m]) -> [n m] {\n    a = where(x > 0.0 and !(x == 1.0), x, 0.5 * x)\n    return masked_fill(clamp(a, -0.5, 0.75), mk, -2.0) + float(sum(x > 0.0, m))\n}\n";
    agrees(source, &[tensor(DType::F32, &[7, 3], "n m", 22, true), tensor(DType::Bool, &[3], "m", 23, false)]);
}

#[test]
fn host_scalars_and_threads() {
    // 40,000 elements: enough work for the driver to split the loop.
    let source = "dim b\ndim n = 4\ndef f(x: [b n], z: [], s: float = 0.5, k: int = 3) -> [b n] {\n    return x * z + s * k - k / 2\n}\n";
    let args = [tensor(DType::F32, &[10_000, 4], "b n", 24, false), tensor(DType::F32, &[], "", 25, false), Argument::Float(0.75), Argument::Int(3)];
    agrees(source, &args);
}
