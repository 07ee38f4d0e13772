//! The ulp harness: every float built-in of the native back ends
//! (`nax_back_native::math` and the C math library the kernels call), in
//! f32 and f64, on llvm, mlir and cranelift (and, in f32, the CUDA
//! kernels' CPU emulation), measured in units in the last place against
//! a correctly rounded reference: CORE-MATH (the `core-math` crate) for
//! the transcendentals, and for the activations their stable formulas
//! evaluated over CORE-MATH in f64 (rounded once to f32: correctly
//! rounded but for rare double roundings) or, in f64, with the argument
//! of erfc carried in two floats (within about 1 ulp themselves). The
//! inputs: every 2^12-th f32 bit pattern (2^20 values, both signs,
//! subnormals, ±inf and nan) or every 2^46-th f64 pattern (2^18), plus a
//! window of consecutive floats around each function's thresholds (where
//! a formula switches or a result leaves the normal range). Each
//! function's largest error is asserted against its bound in [`F32`] and
//! [`F64`], so that any change of a coefficient shows; `-- --nocapture`
//! prints the table `docs/src/numerics.md` gives. nan must be nan exactly where the
//! reference is; an infinity counts as the float after the largest (so an
//! overflow is exact unless its bound allows a neighbour); ±0 are one value.
//!
//! The f64 math of a target without a C library (a GPU's, nax's own
//! `wide`) is measured against the interpreter below.

use crate::backends::{NATIVE_BACKENDS, run_on};
use nax::pipeline::Backend;
use nax_runtime::{HostTensor, TensorData};
use std::collections::HashMap;

/// A function measured: its name, the body computing it from `x` (and `y`),
/// and the largest error allowed, in ulps.
type Measured = (&'static str, &'static str, u64);

/// The f32 functions and their bounds: the largest errors measured (on
/// an x86-64 CPU with FMA), so that any change shows.
const F32: [Measured; 15] = [
    ("exp", "exp(x)", 1),
    ("log", "log(x)", 1),
    ("log1p", "log1p(x)", 1),
    ("expm1", "expm1(x)", 1),
    ("tanh", "tanh(x)", 1),
    ("erf", "erf(x)", 1),
    ("sin", "sin(x)", 0),
    ("cos", "cos(x)", 0),
    ("pow", "pow(x, y)", 1),
    ("sqrt", "sqrt(x)", 0),
    ("rsqrt", "rsqrt(x)", 1),
    ("sigmoid", "sigmoid(x)", 2),
    ("silu", "silu(x)", 3),
    // 3 on this sweep, and at most on every 7th float.
    ("gelu", "gelu(x)", 3),
    ("softplus", "softplus(x)", 2),
];

/// The f64 functions and their bounds.
const F64: [Measured; 15] = [
    ("exp", "exp(x)", 1),
    ("log", "log(x)", 1),
    ("log1p", "log1p(x)", 1),
    ("expm1", "expm1(x)", 1),
    ("tanh", "tanh(x)", 1),
    ("erf", "erf(x)", 1),
    ("sin", "sin(x)", 1),
    ("cos", "cos(x)", 1),
    ("pow", "pow(x, y)", 1),
    ("sqrt", "sqrt(x)", 0),
    ("rsqrt", "rsqrt(x)", 1),
    ("sigmoid", "sigmoid(x)", 2),
    ("silu", "silu(x)", 3),
    ("gelu", "gelu(x)", 3),
    ("softplus", "softplus(x)", 2),
];

/// The exponents `pow` is measured with, each against a sweep of bases.
const EXPONENTS: [f64; 16] = [0.0, -0.0, 1.0, -1.0, 2.0, 3.0, -3.0, 0.5, -0.5, 1.5, 10.0, -7.0, 100.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];

/// Points where a function's formula switches or its result leaves the
/// normal range; a window of consecutive floats around each is measured.
const THRESHOLDS: [f64; 24] = [
    0.0, 1.0, -1.0, 0.625, -0.625, 2.5, 4.0, -4.0, 10.0, -20.0, 20.0, -80.0, -87.3, -88.72, 88.72, -103.97, -104.0, -120.0, -700.0, -708.4, -745.1, 709.78,
    -37.6, -26.5,
];

/// `(x, y)` pairs: the sweep (`bits` patterns of `width` bits, `y` 0), or,
/// for `pow`, every 64th of them against each of [`EXPONENTS`].
fn pairs(sweep: &[f64], pow: bool) -> (Vec<f64>, Vec<f64>) {
    if pow { sweep.iter().step_by(64).flat_map(|&a| EXPONENTS.iter().map(move |&b| (a, b))).unzip() } else { (sweep.to_vec(), vec![0.0; sweep.len()]) }
}

fn inputs32() -> Vec<f64> {
    let mut v: Vec<f64> = (0..(1u64 << 20)).map(|i| f64::from(f32::from_bits((i << 12) as u32))).collect();
    for t in THRESHOLDS {
        let t = t as f32;
        let mut up = t;
        let mut down = t;
        for _ in 0..256 {
            up = up.next_up();
            down = down.next_down();
            v.extend([f64::from(up), f64::from(down)]);
        }
    }
    v
}

fn inputs64() -> Vec<f64> {
    let mut v: Vec<f64> = (0..(1u64 << 18)).map(|i| f64::from_bits(i << 46)).collect();
    v.extend([f64::INFINITY, f64::NEG_INFINITY, f64::NAN]);
    for t in THRESHOLDS {
        let mut up = t;
        let mut down = t;
        for _ in 0..256 {
            up = up.next_up();
            down = down.next_down();
            v.extend([up, down]);
        }
    }
    v
}

/// Runs `body` on `backend` over `x` and `y` as tensors of `dtype` (f32 or f64).
fn run_body(backend: Backend, dtype: &str, body: &str, x: &[f64], y: &[f64]) -> Vec<f64> {
    let source = format!("dim n = {}\ndef f(x: {dtype}[n], y: {dtype}[n]) -> {dtype}[n] {{\n    return {body}\n}}\n", x.len());
    let checked = nax_front::check_source(&source);
    assert!(!checked.has_errors(), "{body}: {:?}", checked.diagnostics);
    let graph = nax_lower::lower(&checked.module, "f").expect("lower");
    let tensor = |v: &[f64]| {
        let data = if dtype == "f32" { TensorData::F32(v.iter().map(|&a| a as f32).collect()) } else { TensorData::F64(v.to_vec()) };
        nax_runtime::Value::Tensor(HostTensor::new(data, vec![v.len()], vec![Some("n".into())]).expect("tensor"))
    };
    let out = run_on(backend, &graph, &[tensor(x), tensor(y)], &HashMap::new()).unwrap_or_else(|e| panic!("{body} on {}: {e}", backend.name()));
    out.to_f64_vec()
}

/// The correctly rounded f32 value of a function (see the module's doc).
fn reference32(name: &str, x: f32, y: f32) -> f32 {
    use core_math as m;
    let w = f64::from(x);
    match name {
        "exp" => m::expf(x),
        "log" => m::logf(x),
        "log1p" => m::log1pf(x),
        "expm1" => m::expm1f(x),
        "tanh" => m::tanhf(x),
        "erf" => m::erff(x),
        "sin" => m::sinf(x),
        "cos" => m::cosf(x),
        "pow" => m::powf(x, y),
        "sqrt" => x.sqrt(),
        "rsqrt" => m::rsqrtf(x),
        _ => activation64(name, w) as f32,
    }
}

/// `e^x` as a value and a power of two, the value normal down to x = -1400
/// (`x + 600 ln 2` exact in its leading part, CORE-MATH's `exp` of it).
fn scaled_exp(x: f64) -> (f64, f64) {
    if x >= -700.0 {
        return (core_math::exp(x), 1.0);
    }
    let ln2_hi = f64::from_bits(0x3fe6_2e42_fee0_0000);
    let ln2_lo = f64::from_bits(0x3dea_39ef_3579_3c76);
    let product = 600.0 * ln2_hi;
    let hi = (product * 4096.0).round() / 4096.0;
    let lo = (product - hi) + 600.0 * ln2_lo;
    (core_math::exp(x + hi) * (lo.exp_m1() + 1.0), (-600f64).exp2())
}

/// An activation evaluated in f64 over CORE-MATH by its stable formula,
/// scaled where a result nears the subnormals so that it rounds once:
/// `x e^x / (1 + e^x)` for silu, and for gelu `x/2 erfc(z)` with `z =
/// -x/sqrt 2` in two floats (erfc corrected to first order for the
/// trailing part), erfc beyond z = 26 by its asymptotic series.
fn activation64(name: &str, x: f64) -> f64 {
    use core_math as m;
    let sigmoid = |x: f64| if x < 0.0 { m::exp(x) / (1.0 + m::exp(x)) } else { 1.0 / (1.0 + m::exp(-x)) };
    match name {
        "sigmoid" => sigmoid(x),
        "silu" if x == f64::NEG_INFINITY => -0.0,
        "silu" if x < 0.0 => {
            let (v, scale) = scaled_exp(x);
            x / (1.0 + v * scale) * v * scale
        }
        "silu" => x * sigmoid(x),
        "softplus" if x > nax_ops::SOFTPLUS_THRESHOLD => x,
        "softplus" => x.max(0.0) + m::log1p(m::exp(-x.abs())),
        // Below -40 gelu is under the smallest subnormal; above 40, x.
        "gelu" if x < -40.0 => -0.0,
        "gelu" if x > 40.0 => x,
        "gelu" => {
            let c = -std::f64::consts::FRAC_1_SQRT_2;
            let zh = x * c;
            let zl = x.mul_add(c, -zh) + x * 4.833_646_656_726_457e-17;
            let (erfc, r, scale) = if zh > 26.0 {
                let z2 = zh * zh;
                let z2_lo = zh.mul_add(zh, -z2);
                let (v, scale) = scaled_exp(-z2);
                let u = 1.0 / (2.0 * z2);
                let series = [1.0, -1.0, 3.0, -15.0, 105.0, -945.0, 10395.0, -135135.0, 2027025.0].iter().rev().fold(0.0, |acc, &c| acc * u + c);
                (v * (1.0 - z2_lo) * series / (zh * std::f64::consts::PI.sqrt()), 2.0 * zh + 1.0 / zh, scale)
            } else {
                let erfc = m::erfc(zh);
                (erfc, std::f64::consts::FRAC_2_SQRT_PI * m::exp(-zh * zh) / erfc, 1.0)
            };
            0.5 * x * (erfc * (1.0 - zl * r)) * scale
        }
        _ => panic!("no reference for {name}"),
    }
}

/// The correctly rounded f64 value of a function (the activations within about an ulp).
fn reference64(name: &str, x: f64, y: f64) -> f64 {
    use core_math as m;
    match name {
        "exp" => m::exp(x),
        "log" => m::log(x),
        "log1p" => m::log1p(x),
        "expm1" => m::expm1(x),
        "tanh" => m::tanh(x),
        "erf" => m::erf(x),
        "sin" => m::sin(x),
        "cos" => m::cos(x),
        "pow" => m::pow(x, y),
        "sqrt" => x.sqrt(),
        "rsqrt" => m::rsqrt(x),
        _ => activation64(name, x),
    }
}

/// The distance in ulps between two f32s, as the distance of their bit
/// patterns in order: ±0 are one value, an infinity is the float after the
/// largest; nan must meet nan (`u64::MAX` otherwise).
fn ulps32(a: f32, b: f32) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() { 0 } else { u64::MAX };
    }
    let key = |x: f32| {
        let i = x.to_bits() as i32;
        if i < 0 { i64::from(i32::MIN) - i64::from(i) } else { i64::from(i) }
    };
    (key(a) - key(b)).unsigned_abs()
}

/// [`ulps32`] for f64s.
fn ulps64(a: f64, b: f64) -> u64 {
    if a.is_nan() || b.is_nan() {
        return if a.is_nan() && b.is_nan() { 0 } else { u64::MAX };
    }
    let key = |x: f64| {
        let i = x.to_bits() as i64;
        if i < 0 { i128::from(i64::MIN) - i128::from(i) } else { i128::from(i) }
    };
    u64::try_from((key(a) - key(b)).unsigned_abs()).unwrap_or(u64::MAX)
}

/// Measures every function of `table` in `dtype` on `backends` against
/// `reference`, printing each one's largest error and where; returns the
/// functions over their bounds.
fn measure(dtype: &str, table: &[Measured], backends: &[Backend], sweep: &[f64], error: impl Fn(&str, f64, f64, f64) -> u64) -> Vec<String> {
    let mut failures = Vec::new();
    println!("{dtype}: {:<10} {:<10} {:>10} {:>6}  at", "function", "backend", "max ulps", "bound");
    for &(name, body, bound) in table {
        let (xs, ys) = pairs(sweep, name == "pow");
        for &backend in backends {
            let got = run_body(backend, dtype, body, &xs, &ys);
            let mut worst = (0u64, 0.0, 0.0);
            for ((&x, &y), &g) in xs.iter().zip(&ys).zip(&got) {
                // A GPU's `sin` and `cos` reduce by pi/2 in three parts: accurate while |x| < 2^50.
                if backend == Backend::CudaEmulation && matches!(name, "sin" | "cos") && x.abs() >= 2f64.powi(50) {
                    continue;
                }
                let d = error(name, x, y, g);
                if d > worst.0 {
                    worst = (d, x, y);
                }
            }
            let (d, x, y) = worst;
            let at = if name == "pow" { format!("{x:e}, {y:e}") } else { format!("{x:e}") };
            let shown = if d == u64::MAX { "nan".to_string() } else { d.to_string() };
            println!("{dtype}: {name:<10} {:<10} {shown:>10} {bound:>6}  {at}", backend.name());
            if d > bound {
                failures.push(format!("{dtype} {name} on {}: {shown} ulps at ({at}), over its bound of {bound}", backend.name()));
            }
        }
    }
    failures
}

#[test]
fn f32_math_is_within_its_ulp_bounds() {
    let backends: Vec<Backend> = NATIVE_BACKENDS.into_iter().chain([Backend::CudaEmulation]).collect();
    let failures = measure("f32", &F32, &backends, &inputs32(), |name, x, y, g| ulps32(g as f32, reference32(name, x as f32, y as f32)));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn f64_math_is_within_its_ulp_bounds() {
    let failures = measure("f64", &F64, &NATIVE_BACKENDS, &inputs64(), |name, x, y, g| ulps64(g, reference64(name, x, y)));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
        let (xs, yv) = pairs(&x, name == "pow");
        let reference = run_body(Backend::Interp, "f64", body, &xs, &yv);
        let got = run_body(Backend::CudaEmulation, "f64", body, &xs, &yv);
        let (mut worst_ulps, mut worst_rel) = (0u64, 0.0f64);
        for (i, (&g, &r)) in got.iter().zip(&reference).enumerate() {
            if matches!(name, "sin" | "cos") && xs[i].abs() >= 2f64.powi(50) {
                continue;
            }
            let ok = if r.is_nan() || g.is_nan() {
                r.is_nan() && g.is_nan()
            } else if r.is_infinite() || g.is_infinite() {
                ulps64(g, r) <= bound
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

/// softplus is x itself above its threshold, 20, as LANGUAGE.md (and
/// torch) say, on every back end, the interpreter included, in f32 and
/// f64 (in f64 `x + log1p(e^-x)` is 580,163 ulps above 20.000000000000004),
/// and the formula at and below it.
#[test]
fn softplus_is_x_above_its_threshold_on_every_backend() {
    let threshold = nax_ops::SOFTPLUS_THRESHOLD;
    let x = [threshold.next_up(), 21.0, 100.0, f64::INFINITY, threshold, threshold.next_down(), 19.5];
    for dtype in ["f32", "f64"] {
        let x: Vec<f64> = if dtype == "f32" { x.iter().map(|&v| f64::from(v as f32)).collect() } else { x.to_vec() };
        for backend in [Backend::Interp].into_iter().chain(NATIVE_BACKENDS).chain([Backend::CudaEmulation]) {
            let got = run_body(backend, dtype, "softplus(x)", &x, &vec![0.0; x.len()]);
            for (&xi, &g) in x.iter().zip(&got) {
                let want = activation64("softplus", xi);
                let at = format!("softplus({xi:e}) in {dtype} on {}: {g:e}, expected {want:e}", backend.name());
                if xi > threshold {
                    assert_eq!(g, xi, "{at}");
                } else if dtype == "f32" {
                    assert!(ulps32(g as f32, want as f32) <= 2, "{at}");
                } else {
                    assert!(ulps64(g, want) <= 2, "{at}");
                }
            }
        }
    }
}

/// The wrong answers issue 26 reported, on every back end, the interpreter
/// included, in f32 and f64: gelu's sign (it was positive near x = -5.2),
/// sigmoid and silu where `e^-x` overflows (they flushed normal and
/// subnormal results to 0), and the limits at ±inf (signed zeros exact).
#[test]
fn activations_keep_their_sign_their_tails_and_their_limits() {
    let inf = f64::INFINITY;
    // Function, inputs (rounded to f32 for both dtypes), expected (by
    // mpmath; each within 8 ulps; zeros and infinities exact, sign included).
    let cases: [(&str, Vec<f64>, Vec<f64>); 3] = [
        ("gelu", vec![-5.23566628, -5.17399931, -inf, inf, 0.0], vec![-4.303_475_6e-7, -5.927_739e-7, -0.0, inf, 0.0]),
        ("sigmoid", vec![-88.72284, -90.0, -inf, inf], vec![2.938_735_2e-39, 8.194_012_6e-40, 0.0, 1.0]),
        ("silu", vec![-88.72284, -inf, inf], vec![-2.607_329_3e-37, -0.0, inf]),
    ];
    for dtype in ["f32", "f64"] {
        for (name, x, expected) in &cases {
            let x: Vec<f64> = x.iter().map(|&v| f64::from(v as f32)).collect();
            for backend in [Backend::Interp].into_iter().chain(NATIVE_BACKENDS).chain([Backend::CudaEmulation]) {
                let got = run_body(backend, dtype, &format!("{name}(x)"), &x, &vec![0.0; x.len()]);
                for ((&xi, &g), &want) in x.iter().zip(&got).zip(expected) {
                    let at = format!("{name}({xi:e}) in {dtype} on {}: {g:e}, expected {want:e}", backend.name());
                    if want == 0.0 || want.is_infinite() {
                        assert!(g == want && g.is_sign_negative() == want.is_sign_negative(), "{at}");
                    } else {
                        // The expected values are f32s; in f64 they are compared to 1e-6.
                        let close = if dtype == "f32" { ulps32(g as f32, want as f32) <= 8 } else { ((g - want) / want).abs() < 1e-6 };
                        assert!(close, "{at}");
                    }
                }
            }
        }
    }
}
