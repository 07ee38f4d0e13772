//! nax's own f64 math, for targets without a C math library (GPUs): the
//! functions of [`crate::LIBM`] (`exp`, `log`, `sin`, `cos`, `erf`, `erfc`,
//! `pow`; `log1p`, `expm1` and `tanh` are [`crate::math`]'s formulas over these)
//! written once against the emitter, branch free, from f64 arithmetic and
//! bit manipulation, with no external symbol.
//! [`crate::math`] calls them where the emitter has no C library
//! ([`crate::Emitter::has_libm`]), for f64 and for the f32 functions
//! computed through f64 (`sin`, `cos`, `pow`).
//!
//! Accuracy, against the C library (measured by `tests/native_math.rs`
//! over a sweep of the f64 range on the CUDA target's CPU emulation):
//! `exp` and `log` a few ulps (Cody-Waite reduction, Taylor and `atanh`
//! series with fused multiply-adds); `log1p`, `expm1` and `tanh` through
//! them (Goldberg's and Kahan's corrections, a two-float quotient, in [`crate::math`]); `erf` a series of positive
//! terms below 2.5 and a continued fraction for `erfc` above; `sin` and
//! `cos` a three-part reduction by pi/2 (accurate while |x| < 2^50; beyond,
//! where a float's spacing is larger than pi, the result is still in
//! [-1, 1] but not the C library's); `pow` as `exp(y log|x|)` with C's
//! special cases (relative error up to about `|y log x|` ulps: 1e-13 for
//! results near the f64 limits).

use crate::emitter::{Binary, Compare, Emitter, Kind, Unary};

const K: Kind = Kind::F64;

fn c<E: Emitter>(e: &mut E, v: f64) -> E::Value {
    e.float(K, v)
}

fn op<E: Emitter>(e: &mut E, o: Binary, a: E::Value, b: E::Value) -> E::Value {
    e.binary(o, K, a, b)
}

/// `then` where `cond`, else `r`.
fn pick<E: Emitter>(e: &mut E, cond: E::Value, then: E::Value, r: E::Value) -> E::Value {
    e.select(K, cond, then, r)
}

fn test<E: Emitter>(e: &mut E, o: Compare, a: E::Value, b: f64) -> E::Value {
    let b = c(e, b);
    e.compare(o, K, a, b)
}

/// Horner's rule: `k[0] + x*(k[1] + x*(...))`, fused multiply-adds.
fn poly<E: Emitter>(e: &mut E, x: E::Value, k: &[f64]) -> E::Value {
    let mut acc = c(e, k[k.len() - 1]);
    for &ki in k[..k.len() - 1].iter().rev() {
        let kv = c(e, ki);
        acc = e.multiply_add(K, acc, x, kv);
    }
    acc
}

/// ln 2 in two parts (fdlibm's): the first has 32 significant bits, so
/// its product with an exponent is exact.
pub(crate) const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
pub(crate) const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);

/// pi/2 in four parts (fdlibm's), the first three of 33 significant bits.
const PIO2: [f64; 4] = [
    f64::from_bits(0x3ff9_21fb_5440_0000),
    f64::from_bits(0x3dd0_b461_1a60_0000),
    f64::from_bits(0x3ba3_198a_2e00_0000),
    f64::from_bits(0x397b_839a_2520_49c1),
];

/// `1.5 * 2^52`: added to a float of magnitude under 2^51, it rounds it to
/// an integer held in the low bits of the sum.
const ROUNDER: f64 = 6755399441055744.0;

/// `round(x * scale)`, as a float and as an `I64` (for |x * scale| < 2^51).
fn round_scaled<E: Emitter>(e: &mut E, x: E::Value, scale: f64) -> (E::Value, E::Value) {
    let (s, r) = (c(e, scale), c(e, ROUNDER));
    let shifted = e.multiply_add(K, x, s, r);
    let n = op(e, Binary::Sub, shifted, r);
    let bits = e.bitcast(K, Kind::I64, shifted);
    let rounder = e.int(Kind::I64, ROUNDER.to_bits() as i64);
    (n, e.binary(Binary::Sub, Kind::I64, bits, rounder))
}

/// `2^n` for an `I64` `n` in the normal exponent range.
fn pow2<E: Emitter>(e: &mut E, n: E::Value) -> E::Value {
    let bias = e.int(Kind::I64, 1023);
    let biased = e.binary(Binary::Add, Kind::I64, n, bias);
    let shift = e.int(Kind::I64, 52);
    let bits = e.binary(Binary::Shl, Kind::I64, biased, shift);
    e.bitcast(Kind::I64, K, bits)
}

/// 1/k! for k = 0, 1, ...
fn inverse_factorials(count: usize) -> Vec<f64> {
    let mut v = Vec::with_capacity(count);
    let mut f = 1.0;
    for k in 0..count {
        if k > 0 {
            f *= k as f64;
        }
        v.push(1.0 / f);
    }
    v
}

/// e^x: n = round(x / ln 2), r = x - n ln 2 in two parts (|r| <= 0.35), the
/// Taylor polynomial of degree 13, and the scaling by 2^n in two steps (so
/// subnormal results round once).
pub fn exp<E: Emitter>(e: &mut E, x: E::Value) -> E::Value {
    let (lo, hi) = (c(e, -746.0), c(e, 710.0));
    let below = e.compare(Compare::Lt, K, x, lo);
    let xc = pick(e, below, lo, x);
    let above = e.compare(Compare::Gt, K, xc, hi);
    let xc = pick(e, above, hi, xc);
    let (n, ni) = round_scaled(e, xc, std::f64::consts::LOG2_E);
    let minus_n = e.unary(Unary::Neg, K, n);
    let (ln2_hi, ln2_lo) = (c(e, LN2_HI), c(e, LN2_LO));
    let r = e.multiply_add(K, minus_n, ln2_hi, xc);
    let r = e.multiply_add(K, minus_n, ln2_lo, r);
    let p = poly(e, r, &inverse_factorials(14));
    let one = e.int(Kind::I64, 1);
    let n1 = e.binary(Binary::ShrS, Kind::I64, ni, one);
    let n2 = e.binary(Binary::Sub, Kind::I64, ni, n1);
    let (s1, s2) = (pow2(e, n1), pow2(e, n2));
    let p = op(e, Binary::Mul, p, s1);
    let p = op(e, Binary::Mul, p, s2);
    let nan = e.compare(Compare::Ne, K, x, x);
    pick(e, nan, x, p)
}

/// The natural logarithm: x = m 2^k with m in [sqrt(1/2), sqrt(2)) (from
/// the bits, subnormals scaled first), `log(1 + f) = f - s (f - R)` with
/// `s = f / (2 + f)` and R the `atanh` series in s^2, plus k ln 2 in two
/// parts; 0 gives -inf, negatives nan, inf inf.
pub fn log<E: Emitter>(e: &mut E, x: E::Value) -> E::Value {
    let small = test(e, Compare::Lt, x, f64::MIN_POSITIVE);
    let scale = c(e, 2f64.powi(54));
    let scaled = op(e, Binary::Mul, x, scale);
    let xs = pick(e, small, scaled, x);
    let (adj_small, zero) = (c(e, -54.0), c(e, 0.0));
    let adj = pick(e, small, adj_small, zero);
    let bits = e.bitcast(K, Kind::I64, xs);
    let shift = e.int(Kind::I64, 52);
    let exponent = e.binary(Binary::ShrU, Kind::I64, bits, shift);
    let mask = e.int(Kind::I64, 0x7ff);
    let exponent = e.binary(Binary::And, Kind::I64, exponent, mask);
    let bias = e.int(Kind::I64, 1022);
    let exponent = e.binary(Binary::Sub, Kind::I64, exponent, bias);
    let mantissa_mask = e.int(Kind::I64, 0x800f_ffff_ffff_ffff_u64 as i64);
    let m = e.binary(Binary::And, Kind::I64, bits, mantissa_mask);
    let half = e.int(Kind::I64, 0x3fe0_0000_0000_0000);
    let m = e.binary(Binary::Or, Kind::I64, m, half);
    let m = e.bitcast(Kind::I64, K, m);
    let low = test(e, Compare::Lt, m, std::f64::consts::FRAC_1_SQRT_2);
    let k = e.convert(Kind::I64, K, exponent);
    let one = c(e, 1.0);
    let k_minus = op(e, Binary::Sub, k, one);
    let k = pick(e, low, k_minus, k);
    let k = op(e, Binary::Add, k, adj);
    let m2 = op(e, Binary::Add, m, m);
    let m = pick(e, low, m2, m);
    let f = op(e, Binary::Sub, m, one);
    let two = c(e, 2.0);
    let d = op(e, Binary::Add, two, f);
    let s = op(e, Binary::Div, f, d);
    let z = op(e, Binary::Mul, s, s);
    let series: Vec<f64> = (1..=11).map(|j| 2.0 / (2 * j + 1) as f64).collect();
    let p = poly(e, z, &series);
    let r = op(e, Binary::Mul, z, p);
    let f_minus_r = op(e, Binary::Sub, f, r);
    let t = op(e, Binary::Mul, s, f_minus_r);
    let log1p_f = op(e, Binary::Sub, f, t);
    let (ln2_hi, ln2_lo) = (c(e, LN2_HI), c(e, LN2_LO));
    let tail = e.multiply_add(K, k, ln2_lo, log1p_f);
    let y = e.multiply_add(K, k, ln2_hi, tail);
    let inf = test(e, Compare::Eq, x, f64::INFINITY);
    let y = pick(e, inf, x, y);
    let is_zero = test(e, Compare::Eq, x, 0.0);
    let neg_inf = c(e, f64::NEG_INFINITY);
    let y = pick(e, is_zero, neg_inf, y);
    let negative = test(e, Compare::Lt, x, 0.0);
    let nan = c(e, f64::NAN);
    let y = pick(e, negative, nan, y);
    let x_nan = e.compare(Compare::Ne, K, x, x);
    pick(e, x_nan, x, y)
}

/// min(|x|, cap), nan kept.
fn abs_capped<E: Emitter>(e: &mut E, x: E::Value, cap: f64) -> E::Value {
    let a = e.unary(Unary::Abs, K, x);
    let cap = c(e, cap);
    let over = e.compare(Compare::Gt, K, a, cap);
    pick(e, over, cap, a)
}

/// `r` with the sign of `x` (`r` of an odd function at |x|).
fn signed_like<E: Emitter>(e: &mut E, x: E::Value, r: E::Value) -> E::Value {
    let negative = test(e, Compare::Lt, x, 0.0);
    let nr = e.unary(Unary::Neg, K, r);
    pick(e, negative, nr, r)
}

/// erf: below |x| = 2.5 the series `2/sqrt(pi) x e^(-x^2) sum (2x^2)^n /
/// (2n + 1)!!` (positive terms: no cancellation; 40 of them), above it
/// `1 - erfc(|x|)` with erfc by its continued fraction (40 levels), then
/// the sign of x; ±1 beyond 6, x itself at ±0 and nan.
pub fn erf<E: Emitter>(e: &mut E, x: E::Value) -> E::Value {
    let (series, erfc, a) = erf_parts(e, x, 6.0);
    let one = c(e, 1.0);
    let tail = op(e, Binary::Sub, one, erfc);
    let near = test(e, Compare::Lt, a, 2.5);
    let r = pick(e, near, series, tail);
    let r = signed_like(e, x, r);
    let keep = test(e, Compare::Eq, x, 0.0);
    let x_nan = e.compare(Compare::Ne, K, x, x);
    let keep = e.binary(Binary::Or, Kind::Bool, keep, x_nan);
    pick(e, keep, x, r)
}

/// erfc: `1 - erf(x)` below |x| = 2.5 (its series; up to about 1e-12
/// relative near 2.5, where erfc is 4e-4), the continued fraction above
/// (to 27, where erfc is 0 in f64), and `2 - erfc(|x|)` for negative x.
pub fn erfc<E: Emitter>(e: &mut E, x: E::Value) -> E::Value {
    let (series, erfc, a) = erf_parts(e, x, 27.0);
    let one = c(e, 1.0);
    let near_value = op(e, Binary::Sub, one, series);
    let near = test(e, Compare::Lt, a, 2.5);
    let r = pick(e, near, near_value, erfc);
    let two = c(e, 2.0);
    let reflected = op(e, Binary::Sub, two, r);
    let negative = test(e, Compare::Lt, x, 0.0);
    let r = pick(e, negative, reflected, r);
    let x_nan = e.compare(Compare::Ne, K, x, x);
    pick(e, x_nan, x, r)
}

/// For erf and erfc at `a = min(|x|, cap)`: erf's series (good below
/// 2.5), erfc's continued fraction (good above), and `a`.
fn erf_parts<E: Emitter>(e: &mut E, x: E::Value, cap: f64) -> (E::Value, E::Value, E::Value) {
    let a = abs_capped(e, x, cap);
    let a2 = op(e, Binary::Mul, a, a);
    let minus_a2 = e.unary(Unary::Neg, K, a2);
    let gauss = exp(e, minus_a2);
    // The series.
    let mut coefficients = Vec::with_capacity(40);
    let mut double_factorial = 1.0;
    for n in 0..40 {
        if n > 0 {
            double_factorial *= (2 * n + 1) as f64;
        }
        coefficients.push(1.0 / double_factorial);
    }
    let t = op(e, Binary::Add, a2, a2);
    let sum = poly(e, t, &coefficients);
    let scale = c(e, std::f64::consts::FRAC_2_SQRT_PI);
    let s = op(e, Binary::Mul, scale, a);
    let s = op(e, Binary::Mul, s, gauss);
    let series = op(e, Binary::Mul, s, sum);
    // The continued fraction, from its 40th level up.
    let mut cf = a;
    for level in (1..=40).rev() {
        let kv = c(e, f64::from(level) / 2.0);
        let q = op(e, Binary::Div, kv, cf);
        cf = op(e, Binary::Add, a, q);
    }
    let root_pi = c(e, std::f64::consts::PI.sqrt());
    let denominator = op(e, Binary::Mul, root_pi, cf);
    let erfc = op(e, Binary::Div, gauss, denominator);
    (series, erfc, a)
}

/// sin and cos: x = k pi/2 + r with pi/2 in three parts (fused
/// multiply-adds, so each step rounds once), the Taylor polynomials of
/// sin and cos on |r| <= pi/4, and the quadrant k mod 4; nan at ±inf.
fn sin_cos<E: Emitter>(e: &mut E, x: E::Value, cosine: bool) -> E::Value {
    let (k, ki) = round_scaled(e, x, std::f64::consts::FRAC_2_PI);
    let minus_k = e.unary(Unary::Neg, K, k);
    let mut r = x;
    for part in PIO2 {
        let p = c(e, part);
        r = e.multiply_add(K, minus_k, p, r);
    }
    let z = op(e, Binary::Mul, r, r);
    let factorials = inverse_factorials(19);
    let odd: Vec<f64> = (1..9).map(|j| if j % 2 == 1 { -factorials[2 * j + 1] } else { factorials[2 * j + 1] }).collect();
    let p = poly(e, z, &odd);
    let zr = op(e, Binary::Mul, z, r);
    let sin = e.multiply_add(K, zr, p, r);
    let even: Vec<f64> = (0..10).map(|j| if j % 2 == 1 { -factorials[2 * j] } else { factorials[2 * j] }).collect();
    let cos = poly(e, z, &even);
    let three = e.int(Kind::I64, 3);
    let quadrant = e.binary(Binary::And, Kind::I64, ki, three);
    let quadrant = if cosine {
        let one = e.int(Kind::I64, 1);
        let q = e.binary(Binary::Add, Kind::I64, quadrant, one);
        e.binary(Binary::And, Kind::I64, q, three)
    } else {
        quadrant
    };
    // sin(x) by quadrant: s, c, -s, -c; cos(x) is sin(x + pi/2).
    let (zero, one, two) = (e.int(Kind::I64, 0), e.int(Kind::I64, 1), e.int(Kind::I64, 2));
    let odd_quadrant = e.binary(Binary::And, Kind::I64, quadrant, one);
    let odd_quadrant = e.compare(Compare::Ne, Kind::I64, odd_quadrant, zero);
    let v = pick(e, odd_quadrant, cos, sin);
    let upper = e.binary(Binary::And, Kind::I64, quadrant, two);
    let upper = e.compare(Compare::Ne, Kind::I64, upper, zero);
    let nv = e.unary(Unary::Neg, K, v);
    let v = pick(e, upper, nv, v);
    let a = e.unary(Unary::Abs, K, x);
    let infinite = test(e, Compare::Eq, a, f64::INFINITY);
    let nan = c(e, f64::NAN);
    let v = pick(e, infinite, nan, v);
    let x_nan = e.compare(Compare::Ne, K, x, x);
    pick(e, x_nan, x, v)
}

/// x^y as C's `pow`: `exp(y log|x|)`, negative for a negative x (or -0)
/// and an odd integer y; nan for a finite negative x and a finite non-integer y;
/// 1 where y is 0 or x is 1 (nan included); the infinite cases of C
/// (|x| = 1 with y = ±inf gives 1).
pub fn pow<E: Emitter>(e: &mut E, x: E::Value, y: E::Value) -> E::Value {
    let a = e.unary(Unary::Abs, K, x);
    let la = log(e, a);
    let t = op(e, Binary::Mul, y, la);
    let magnitude = exp(e, t);
    // y's kind of number: integer, and odd.
    let fy = e.unary(Unary::Floor, K, y);
    let integer = e.compare(Compare::Eq, K, fy, y);
    let half = c(e, 0.5);
    let hy = op(e, Binary::Mul, y, half);
    let fh = e.unary(Unary::Floor, K, hy);
    let even = e.compare(Compare::Eq, K, fh, hy);
    let not_even = e.unary(Unary::Not, Kind::Bool, even);
    let odd = e.binary(Binary::And, Kind::Bool, integer, not_even);
    // x's sign bit (so -0 counts as negative).
    let bits = e.bitcast(K, Kind::I64, x);
    let zero_i = e.int(Kind::I64, 0);
    let negative = e.compare(Compare::Lt, Kind::I64, bits, zero_i);
    let flip = e.binary(Binary::And, Kind::Bool, negative, odd);
    let nm = e.unary(Unary::Neg, K, magnitude);
    let r = pick(e, flip, nm, magnitude);
    // A finite negative x (not -0) and a finite non-integer y (-inf to
    // such a power is +inf or +0, as the magnitude is).
    let below = test(e, Compare::Lt, x, 0.0);
    let finite_x = test(e, Compare::Gt, x, f64::NEG_INFINITY);
    let below = e.binary(Binary::And, Kind::Bool, below, finite_x);
    let ay = e.unary(Unary::Abs, K, y);
    let finite_y = test(e, Compare::Lt, ay, f64::INFINITY);
    let fraction = e.unary(Unary::Not, Kind::Bool, integer);
    let bad = e.binary(Binary::And, Kind::Bool, below, finite_y);
    let bad = e.binary(Binary::And, Kind::Bool, bad, fraction);
    let nan = c(e, f64::NAN);
    let r = pick(e, bad, nan, r);
    // |x| = 1 and y = ±inf (log 0 times inf is nan): 1.
    let unit = test(e, Compare::Eq, a, 1.0);
    let infinite_y = e.unary(Unary::Not, Kind::Bool, finite_y);
    let y_nan = e.compare(Compare::Ne, K, y, y);
    let not_nan_y = e.unary(Unary::Not, Kind::Bool, y_nan);
    let infinite_y = e.binary(Binary::And, Kind::Bool, infinite_y, not_nan_y);
    let one_case = e.binary(Binary::And, Kind::Bool, unit, infinite_y);
    let one = c(e, 1.0);
    let r = pick(e, one_case, one, r);
    // y = 0 or x = 1: 1, whatever the other is.
    let y_zero = test(e, Compare::Eq, y, 0.0);
    let x_one = test(e, Compare::Eq, x, 1.0);
    let exact_one = e.binary(Binary::Or, Kind::Bool, y_zero, x_one);
    pick(e, exact_one, one, r)
}

/// The function `name` of [`crate::LIBM`] on f64 arguments; `None` for
/// a name it does not know.
pub fn call<E: Emitter>(e: &mut E, name: &str, args: &[E::Value]) -> Option<E::Value> {
    let (&x, rest) = args.split_first()?;
    Some(match (name, rest) {
        ("exp", []) => exp(e, x),
        ("log", []) => log(e, x),
        ("sin", []) => sin_cos(e, x, false),
        ("cos", []) => sin_cos(e, x, true),
        ("erf", []) => erf(e, x),
        ("erfc", []) => erfc(e, x),
        ("pow", &[y]) => pow(e, x, y),
        _ => return None,
    })
}
