//! Math written once against the emitter, branch-free so that loops using
//! it vectorise: f32 approximations of `exp`, `log`, `log1p`, `expm1`,
//! `tanh`, `erf` (through `erfc`); the activations from their stable
//! forms in f32 and f64 (`sigmoid` and `silu` through `e^x / (1 + e^x)`
//! for negative x, `softplus` as `max(x, 0) + log1p(e^-|x|)`, `gelu`
//! through `erfc`), their exponentials scaled so that results near the
//! subnormals round once ([`exp_parts`]); f64 `tanh` from the C library's
//! `exp` in two-float arithmetic; half-float conversions with integer
//! operations, and integer powers. The other f64 functions, and `sin`,
//! `cos` and `pow` at any width, call the C math library (`crate::LIBM`) for full accuracy
//! (those loops stay scalar), or, on a target without one (a GPU), nax's
//! own f64 math ([`crate::wide`]). Every function's error in ulps against
//! CORE-MATH, over the whole range, is asserted by the suite's ulp harness
//! (`tests/native_math.rs`).

use crate::emitter::{Binary, Compare, Emitter, Kind, Unary};
use crate::wide::{LN2_HI, LN2_LO};
use nax_ops::Elementwise;

/// Horner's rule: `c[0] + x*(c[1] + x*(...))`.
fn poly<E: Emitter>(e: &mut E, k: Kind, x: E::Value, c: &[f64]) -> E::Value {
    let mut acc = e.float(k, c[c.len() - 1]);
    for &ci in c[..c.len() - 1].iter().rev() {
        let cv = e.float(k, ci);
        acc = e.multiply_add(k, acc, x, cv);
    }
    acc
}

fn f<E: Emitter>(e: &mut E, k: Kind, v: f64) -> E::Value {
    e.float(k, v)
}

fn mul<E: Emitter>(e: &mut E, k: Kind, a: E::Value, b: E::Value) -> E::Value {
    e.binary(Binary::Mul, k, a, b)
}

fn add<E: Emitter>(e: &mut E, k: Kind, a: E::Value, b: E::Value) -> E::Value {
    e.binary(Binary::Add, k, a, b)
}

fn sub<E: Emitter>(e: &mut E, k: Kind, a: E::Value, b: E::Value) -> E::Value {
    e.binary(Binary::Sub, k, a, b)
}

fn div<E: Emitter>(e: &mut E, k: Kind, a: E::Value, b: E::Value) -> E::Value {
    e.binary(Binary::Div, k, a, b)
}

fn is_nan<E: Emitter>(e: &mut E, k: Kind, x: E::Value) -> E::Value {
    e.compare(Compare::Ne, k, x, x)
}

/// `then` where `x == at`, else `r`.
fn where_equal<E: Emitter>(e: &mut E, k: Kind, x: E::Value, at: f64, then: E::Value, r: E::Value) -> E::Value {
    let c = f(e, k, at);
    let t = e.compare(Compare::Eq, k, x, c);
    e.select(k, t, then, r)
}

/// `libm(x)` for an f32 or f64 `x`: the C library's where the emitter
/// has one, else nax's own f64 math ([`crate::wide`]).
fn libm<E: Emitter>(e: &mut E, k: Kind, name: &'static str, args: &[E::Value]) -> E::Value {
    let wide: Vec<E::Value> = args.iter().map(|&a| e.convert(k, Kind::F64, a)).collect();
    let r = match e.has_libm() {
        true => e.call_libm(name, &wide),
        false => crate::wide::call(e, name, &wide).unwrap_or_else(|| e.call_libm(name, &wide)),
    };
    e.convert(Kind::F64, k, r)
}

/// `2^n` for an I32 `n` in the normal exponent range, as an f32.
fn pow2<E: Emitter>(e: &mut E, n: E::Value) -> E::Value {
    let bias = e.int(Kind::I32, 127);
    let b = e.binary(Binary::Add, Kind::I32, n, bias);
    let sh = e.int(Kind::I32, 23);
    let bits = e.binary(Binary::Shl, Kind::I32, b, sh);
    e.bitcast(Kind::I32, Kind::F32, bits)
}

/// x clamped to [lo, hi] with compares, nan kept: cheaper than the
/// nan-propagating min/max of the language.
fn clamp<E: Emitter>(e: &mut E, k: Kind, x: E::Value, lo: f64, hi: f64) -> E::Value {
    let (lo, hi) = (f(e, k, lo), f(e, k, hi));
    let below = e.compare(Compare::Lt, k, x, lo);
    let xc = e.select(k, below, lo, x);
    let above = e.compare(Compare::Gt, k, xc, hi);
    e.select(k, above, hi, xc)
}

/// e^x. f32: Cody-Waite reduction to |r| <= ln2/2, a degree-6 polynomial
/// (Cephes `expf`), and scaling by 2^n in two steps so that subnormal
/// results are right ([`exp_parts`]); f64: the C library's.
pub fn exp<E: Emitter>(e: &mut E, k: Kind, x: E::Value) -> E::Value {
    if k == Kind::F64 {
        return libm(e, k, "exp", &[x]);
    }
    let (p, s1, s2) = exp_parts(e, k, x);
    let p = mul(e, k, p, s1);
    let p = mul(e, k, p, s2);
    let nan = is_nan(e, k, x);
    e.select(k, nan, x, p)
}

/// e^x as three factors, `e^x = (value * s1) * s2`, so that a factor
/// applied to `value` first is rounded once, at the end, even where e^x
/// alone would be subnormal (the tails of sigmoid, silu and gelu). f32:
/// `value` is Cody-Waite's `e^r` in [0.7, 1.5) and `s1`, `s2` powers of two
/// (x held to [-150, 89]: below, every product is 0; nan gives a nan
/// `value`). f64: the C library's e^x and two ones, or below -700
/// `e^(x + m ln 2)` (m = 600; the leading part of `m ln 2` a multiple of
/// 2^-12, so the shift is exact, and `e^` the remainder a constant factor)
/// and `2^-m`.
fn exp_parts<E: Emitter>(e: &mut E, k: Kind, x: E::Value) -> (E::Value, E::Value, E::Value) {
    if k == Kind::F64 {
        let one = f(e, k, 1.0);
        let m = 600;
        // m ln 2 = shift_hi + shift_lo, from ln 2 in two parts (the first of
        // 32 bits, so its product with m is exact).
        let product = f64::from(m) * LN2_HI;
        let shift_hi = (product * 4096.0).round() / 4096.0;
        let shift_lo = (product - shift_hi) + f64::from(m) * LN2_LO;
        let limit = f(e, k, -700.0);
        let tail = e.compare(Compare::Lt, k, x, limit);
        let hi = f(e, k, shift_hi);
        let shifted = add(e, k, x, hi);
        let argument = e.select(k, tail, shifted, x);
        let value = libm(e, k, "exp", &[argument]);
        let correction = f(e, k, shift_lo.exp_m1() + 1.0);
        let corrected = mul(e, k, value, correction);
        let value = e.select(k, tail, corrected, value);
        let small = f(e, k, (-f64::from(m)).exp2());
        let scale = e.select(k, tail, small, one);
        return (value, scale, one);
    }
    let xc = clamp(e, k, x, -150.0, 89.0);
    let (r, shifted) = reduce_ln2(e, xc, 0);
    let p = expm1_reduced(e, r, &EXPM1_REDUCED);
    let one = f(e, k, 1.0);
    let p = add(e, k, p, one);
    let (_, s1, s2) = powers_of_two(e, shifted);
    (p, s1, s2)
}

/// Cephes' `expf` polynomial `P`: `e^r - 1 = r + r^2 P(r)` for |r| <= ln2/2.
const EXPM1_REDUCED: [f64; 6] = [5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3, 1.3981999507e-3, 1.9875691500e-4];

/// `e^r - 1` for [`reduce_ln2`]'s `r`: `r + r^2 P(r)` (no cancellation
/// near 0), `P` [`EXPM1_REDUCED`] or, where less accuracy is enough, a
/// shorter fit.
fn expm1_reduced<E: Emitter>(e: &mut E, r: E::Value, p: &[f64]) -> E::Value {
    let k = Kind::F32;
    let p = poly(e, k, r, p);
    let r2 = mul(e, k, r, r);
    e.multiply_add(k, p, r2, r)
}

/// Cody-Waite's reduction of an f32 `x` (in [-150, 89]): `x = n ln 2 + r`
/// with |r| <= ln2/2, n = round(x log2 e) by the 1.5 * 2^23 trick; gives
/// `r`, and `n + bias` as the low bits of the shifted float
/// ([`powers_of_two`] reads them at a bias of 0; `bias` is at most 2^22
/// in size, so the shifted float's low bits hold `n + bias` whole).
fn reduce_ln2<E: Emitter>(e: &mut E, x: E::Value, bias: i32) -> (E::Value, E::Value) {
    let k = Kind::F32;
    let log2e = f(e, k, std::f64::consts::LOG2_E);
    let magic = f(e, k, 12582912.0 + f64::from(bias));
    let shifted = e.multiply_add(k, x, log2e, magic);
    let n = sub(e, k, shifted, magic);
    let c1 = f(e, k, -0.693359375);
    let c2 = f(e, k, 2.12194440e-4);
    let r = e.multiply_add(k, n, c1, x);
    (e.multiply_add(k, n, c2, r), shifted)
}

/// [`reduce_ln2`]'s `n` (an I32), and `2^n` as two normal f32 powers of two,
/// `2^(n >> 1)` and `2^(n - (n >> 1))`.
fn powers_of_two<E: Emitter>(e: &mut E, shifted: E::Value) -> (E::Value, E::Value, E::Value) {
    let bits = e.bitcast(Kind::F32, Kind::I32, shifted);
    let magic_bits = e.int(Kind::I32, 12582912.0f32.to_bits() as i64);
    let n = e.binary(Binary::Sub, Kind::I32, bits, magic_bits);
    let one = e.int(Kind::I32, 1);
    let n1 = e.binary(Binary::ShrS, Kind::I32, n, one);
    let n2 = e.binary(Binary::Sub, Kind::I32, n, n1);
    (n, pow2(e, n1), pow2(e, n2))
}

/// The natural logarithm. f32: the exponent from the bits, the mantissa
/// in [sqrt(1/2), sqrt(2)), and Cephes' `logf` polynomial; subnormals are
/// scaled first; 0 gives -inf, negatives nan, inf inf.
pub fn log<E: Emitter>(e: &mut E, k: Kind, x: E::Value) -> E::Value {
    if k == Kind::F64 {
        return libm(e, k, "log", &[x]);
    }
    let min_normal = f(e, k, f32::MIN_POSITIVE as f64);
    let small = e.compare(Compare::Lt, k, x, min_normal);
    let scale = f(e, k, 8388608.0);
    let scaled = mul(e, k, x, scale);
    let xs = e.select(k, small, scaled, x);
    let adj_small = f(e, k, -23.0);
    let zero = f(e, k, 0.0);
    let adj = e.select(k, small, adj_small, zero);
    let bits = e.bitcast(k, Kind::I32, xs);
    let sh = e.int(Kind::I32, 23);
    let ex = e.binary(Binary::ShrU, Kind::I32, bits, sh);
    let ff = e.int(Kind::I32, 0xff);
    let ex = e.binary(Binary::And, Kind::I32, ex, ff);
    let bias = e.int(Kind::I32, 126);
    let ex = e.binary(Binary::Sub, Kind::I32, ex, bias);
    let mant_mask = e.int(Kind::I32, 0x807f_ffff);
    let mb = e.binary(Binary::And, Kind::I32, bits, mant_mask);
    let half_bits = e.int(Kind::I32, 0x3f00_0000);
    let mb = e.binary(Binary::Or, Kind::I32, mb, half_bits);
    let m = e.bitcast(Kind::I32, k, mb);
    let sqrth = f(e, k, std::f64::consts::FRAC_1_SQRT_2);
    let lt = e.compare(Compare::Lt, k, m, sqrth);
    let fe = e.convert(Kind::I32, k, ex);
    let one = f(e, k, 1.0);
    let fe_minus = sub(e, k, fe, one);
    let fe = e.select(k, lt, fe_minus, fe);
    let fe = add(e, k, fe, adj);
    let m2 = add(e, k, m, m);
    let m_lo = sub(e, k, m2, one);
    let m_hi = sub(e, k, m, one);
    let m = e.select(k, lt, m_lo, m_hi);
    let z = mul(e, k, m, m);
    let p = poly(
        e,
        k,
        m,
        &[
            3.3333331174e-1,
            -2.4999993993e-1,
            2.0000714765e-1,
            -1.6668057665e-1,
            1.4249322787e-1,
            -1.2420140846e-1,
            1.1676998740e-1,
            -1.1514610310e-1,
            7.0376836292e-2,
        ],
    );
    let y = mul(e, k, p, m);
    let y = mul(e, k, y, z);
    let c2 = f(e, k, -2.12194440e-4);
    let t = mul(e, k, fe, c2);
    let y = add(e, k, y, t);
    let h = f(e, k, -0.5);
    let t = mul(e, k, z, h);
    let y = add(e, k, y, t);
    let c1 = f(e, k, 0.693359375);
    let t = mul(e, k, fe, c1);
    let r = add(e, k, m, y);
    let r = add(e, k, r, t);
    let r = where_equal(e, k, x, f64::INFINITY, x, r);
    let neg_inf = f(e, k, f64::NEG_INFINITY);
    let r = where_equal(e, k, x, 0.0, neg_inf, r);
    let negative = e.compare(Compare::Lt, k, x, zero);
    let nan = f(e, k, f64::NAN);
    let r = e.select(k, negative, nan, r);
    let x_nan = is_nan(e, k, x);
    e.select(k, x_nan, x, r)
}

/// log(1 + x), accurate near 0 (Goldberg): `log(u) * x / (u - 1)` with
/// `u = 1 + x`; f64 calls the C library's where there is one.
pub fn log1p<E: Emitter>(e: &mut E, k: Kind, x: E::Value) -> E::Value {
    if k == Kind::F64 && e.has_libm() {
        return libm(e, k, "log1p", &[x]);
    }
    let one = f(e, k, 1.0);
    let u = add(e, k, one, x);
    let d = sub(e, k, u, one);
    let lu = log(e, k, u);
    // log(1 + x) = log(u) + log(1 + (x - d)/u): `x - d` is the rounding
    // error of u, exactly, and its log is its first-order term.
    let c = sub(e, k, x, d);
    let q = div(e, k, c, u);
    let r = add(e, k, lu, q);
    let minus_inf = f(e, k, f64::NEG_INFINITY);
    let r = where_equal(e, k, u, 0.0, minus_inf, r);
    where_equal(e, k, x, f64::INFINITY, x, r)
}

/// e^x - 1, accurate near 0 (Kahan: `(u - 1) * x / log(u)` with `u = e^x`);
/// f64 calls the C library's where there is one.
pub fn expm1<E: Emitter>(e: &mut E, k: Kind, x: E::Value) -> E::Value {
    if k == Kind::F64 && e.has_libm() {
        return libm(e, k, "expm1", &[x]);
    }
    if k == Kind::F32 {
        return expm1_f32(e, x);
    }
    let u = exp(e, k, x);
    let one = f(e, k, 1.0);
    let um1 = sub(e, k, u, one);
    let lu = log(e, k, u);
    let q = div(e, k, x, lu);
    let r = mul(e, k, um1, q);
    let r = where_equal(e, k, u, 1.0, x, r);
    let r = where_equal(e, k, um1, -1.0, um1, r);
    where_equal(e, k, u, f64::INFINITY, u, r)
}

/// f32 e^x - 1 as fdlibm computes it: x = n ln 2 + r (Cody-Waite, |r| <=
/// ln2/2), `e^r - 1` as `exp` computes it ([`expm1_reduced`]), then `2^n (e^r - 1) + (2^n - 1)` in one fused
/// multiply-add (`2^n - 1` is exact for the n that matter): within 1 ulp.
/// -1 below -88 (-inf included), +inf above 88.72, nan kept.
fn expm1_f32<E: Emitter>(e: &mut E, x: E::Value) -> E::Value {
    let k = Kind::F32;
    let xc = clamp(e, k, x, -88.0, 88.75);
    let (r, shifted) = reduce_ln2(e, xc, 0);
    let em1 = expm1_reduced(e, r, &EXPM1_REDUCED);
    // 2^n (e^r - 1) + (2^n - 1); 2^n is a normal float for n in [-127, 128)
    // (n = 128, at x near 88.72, in two halves).
    let (ni, s1, s2) = powers_of_two(e, shifted);
    let scale = mul(e, k, s1, s2);
    let one = f(e, k, 1.0);
    let scale_m1 = sub(e, k, scale, one);
    let r = e.multiply_add(k, scale, em1, scale_m1);
    // From n = 64 the 1 no longer counts, and 2^n may not be a float (2^128):
    // (2^n1 e^r) 2^n2.
    let er = add(e, k, em1, one);
    let big = mul(e, k, s1, er);
    let big = mul(e, k, big, s2);
    let sixty_four = e.int(Kind::I32, 64);
    let large = e.compare(Compare::Ge, Kind::I32, ni, sixty_four);
    let r = e.select(k, large, big, r);
    // Beyond the clamp: -1, or +inf; nan kept by the clamp and the arithmetic.
    let minus_one = f(e, k, -1.0);
    let low = f(e, k, -88.0);
    let below = e.compare(Compare::Lt, k, x, low);
    let r = e.select(k, below, minus_one, r);
    let high = f(e, k, 88.72283935546875);
    let above = e.compare(Compare::Gt, k, x, high);
    let inf = f(e, k, f64::INFINITY);
    e.select(k, above, inf, r)
}

/// tanh. f32: Cephes' `tanhf` polynomial below |x| = 0.625, `1 - 2/(e^(2|x|)
/// + 1)` above. f64 ([`tanh64`]).
pub fn tanh<E: Emitter>(e: &mut E, k: Kind, x: E::Value) -> E::Value {
    if k == Kind::F64 {
        return tanh64(e, x);
    }
    let z = mul(e, k, x, x);
    let p = poly(e, k, z, &[-3.33332819422e-1, 1.33314422036e-1, -5.37397155531e-2, 2.06390887954e-2, -5.70498872745e-3]);
    let p = mul(e, k, p, z);
    let p = mul(e, k, p, x);
    let small_value = add(e, k, p, x);
    let a = e.unary(Unary::Abs, k, x);
    let two_a = add(e, k, a, a);
    let ex = exp(e, k, two_a);
    let one = f(e, k, 1.0);
    let d = add(e, k, ex, one);
    let two = f(e, k, 2.0);
    let q = div(e, k, two, d);
    let t = sub(e, k, one, q);
    with_sign_of(e, k, x, a, small_value, t)
}

/// `small` where |x| < 0.625, else `large` (computed from |x|) with the sign of x.
fn with_sign_of<E: Emitter>(e: &mut E, k: Kind, x: E::Value, a: E::Value, small: E::Value, large: E::Value) -> E::Value {
    let zero = f(e, k, 0.0);
    let negative = e.compare(Compare::Lt, k, x, zero);
    let negated = e.unary(Unary::Neg, k, large);
    let large = e.select(k, negative, negated, large);
    let limit = f(e, k, 0.625);
    let is_small = e.compare(Compare::Lt, k, a, limit);
    e.select(k, is_small, small, large)
}

/// f64 tanh within 1 ulp (the C library's is within 2): below |x| = 0.625
/// Cephes' `x + x^3 P(x^2)/Q(x^2)` (the correction under a tenth of the
/// result, so its error hardly counts), above `(1 - E)/(1 + E)` for `E =
/// e^(-2|x|)`, the C library's (correctly rounded but for rare cases),
/// numerator and denominator each in two floats and divided with the
/// remainder of the quotient, so that E's error (times `2E/(1 - E^2)`,
/// under 0.63) and one rounding are all: 1 at ±inf, nan kept.
fn tanh64<E: Emitter>(e: &mut E, x: E::Value) -> E::Value {
    let k = Kind::F64;
    let z = mul(e, k, x, x);
    let p = poly(e, k, z, &[-1614.6876844170845, -99.28772310019185, -0.9643991794250523]);
    let q = poly(e, k, z, &[4844.063053251255, 2235.4883906010045, 112.81167849163293, 1.0]);
    let ratio = div(e, k, p, q);
    let cube = mul(e, k, x, z);
    let small_value = e.multiply_add(k, cube, ratio, x);
    let a = e.unary(Unary::Abs, k, x);
    let minus_two_a = f(e, k, -2.0);
    let minus_two_a = mul(e, k, a, minus_two_a);
    let big_e = exp(e, k, minus_two_a);
    // 1 - E and 1 + E exactly, as a float and its error (E < 1).
    let one = f(e, k, 1.0);
    let minus_e = e.unary(Unary::Neg, k, big_e);
    let (numerator, numerator_lo) = fast_two_sum(e, k, one, minus_e);
    let (denominator, denominator_lo) = fast_two_sum(e, k, one, big_e);
    // q = n/d, and (n - q d + n_lo - q d_lo) / d its correction, q d exactly.
    let quotient = div(e, k, numerator, denominator);
    let (product, product_lo) = e.exact_product(k, quotient, denominator);
    let remainder = sub(e, k, numerator, product);
    let remainder = sub(e, k, remainder, product_lo);
    let remainder = add(e, k, remainder, numerator_lo);
    let minus_quotient = e.unary(Unary::Neg, k, quotient);
    let remainder = e.multiply_add(k, minus_quotient, denominator_lo, remainder);
    let correction = div(e, k, remainder, denominator);
    let large_value = add(e, k, quotient, correction);
    let r = with_sign_of(e, k, x, a, small_value, large_value);
    let x_nan = is_nan(e, k, x);
    e.select(k, x_nan, x, r)
}

/// erfc(z) for z >= 0 (or nan): Numerical Recipes' `erfcc`, a Chebyshev
/// fit of `erfc(z) e^(z^2)` with relative error under 1.2e-7 everywhere,
/// so tails as small as 1e-30 keep their relative accuracy.
fn erfc_positive<E: Emitter>(e: &mut E, k: Kind, z: E::Value) -> E::Value {
    let half = f(e, k, 0.5);
    let hz = mul(e, k, half, z);
    let one = f(e, k, 1.0);
    let d = add(e, k, one, hz);
    let t = div(e, k, one, d);
    let p = poly(e, k, t, &[-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277]);
    let z2 = mul(e, k, z, z);
    let ex = sub(e, k, p, z2);
    let ez = exp(e, k, ex);
    mul(e, k, t, ez)
}

/// erf: below |x| = 1 `x (2/sqrt pi) + x^3 Q(x^2)` ([`ERF_FIT`]), and
/// `1 - erfc(|x|)` with the sign of x above.
pub fn erf<E: Emitter>(e: &mut E, k: Kind, x: E::Value) -> E::Value {
    if k == Kind::F64 {
        return libm(e, k, "erf", &[x]);
    }
    // Below 1: x (2/sqrt pi) + x^3 Q(x^2), the leading product rounded once
    // (2/sqrt pi in two parts).
    let c = std::f64::consts::FRAC_2_SQRT_PI;
    let c_hi = f64::from(c as f32);
    let (c_hi, c_lo) = (f(e, k, c_hi), f(e, k, c - c_hi));
    let z = mul(e, k, x, x);
    let q = poly(e, k, z, &ERF_FIT);
    let cube = mul(e, k, x, z);
    let rest = mul(e, k, cube, q);
    let rest = e.multiply_add(k, x, c_lo, rest);
    let series = e.multiply_add(k, x, c_hi, rest);
    let a = e.unary(Unary::Abs, k, x);
    let tail = erfc_positive(e, k, a);
    let one = f(e, k, 1.0);
    let small = e.compare(Compare::Lt, k, a, one);
    let y = sub(e, k, one, tail);
    let zero = f(e, k, 0.0);
    let negative = e.compare(Compare::Lt, k, x, zero);
    let ny = e.unary(Unary::Neg, k, y);
    let large_value = e.select(k, negative, ny, y);
    let r = e.select(k, small, series, large_value);
    let x_nan = is_nan(e, k, x);
    e.select(k, x_nan, x, r)
}

/// `(erf(x)/x - 2/sqrt pi) / x^2` as a polynomial in `x^2` on [0, 1], within
/// 1.5e-10 of erf (relative): a Chebyshev fit of degree 6 (by mpmath).
const ERF_FIT: [f64; 7] = [
    -0.37612638889246425,
    0.11283790294566688,
    -0.026865948147182912,
    0.0052226232005003195,
    -0.0008508777448648011,
    0.00011453795827159934,
    -1.0223598404734812e-05,
];

/// For sigmoid and silu: `d = 1 + e^-|x|`, and `e^-|x|` in [`exp_parts`].
fn sigmoid_parts<E: Emitter>(e: &mut E, k: Kind, x: E::Value) -> (E::Value, [E::Value; 3]) {
    let a = e.unary(Unary::Abs, k, x);
    let a = e.unary(Unary::Neg, k, a);
    let (p, s1, s2) = exp_parts(e, k, a);
    let ex = mul(e, k, p, s1);
    let ex = mul(e, k, ex, s2);
    let one = f(e, k, 1.0);
    let d = add(e, k, one, ex);
    (d, [p, s1, s2])
}

/// `factor e^a` for `e^a` in [`exp_parts`]: rounded once, at the end.
fn times_exp<E: Emitter>(e: &mut E, k: Kind, factor: E::Value, [p, s1, s2]: [E::Value; 3]) -> E::Value {
    let v = mul(e, k, factor, p);
    let v = mul(e, k, v, s1);
    mul(e, k, v, s2)
}

/// sigmoid, `1 / (1 + e^-x)` for x >= 0 and `e^x / (1 + e^x)` for x < 0
/// (no overflow, no cancellation), the tiny results rounded once: 0 at
/// -inf, 1 at +inf, nan kept.
pub fn sigmoid<E: Emitter>(e: &mut E, k: Kind, x: E::Value) -> E::Value {
    let (d, [p, s1, s2]) = sigmoid_parts(e, k, x);
    let one = f(e, k, 1.0);
    let high = div(e, k, one, d);
    // e^-|x| / d, the powers of two last.
    let low = div(e, k, p, d);
    let low = mul(e, k, low, s1);
    let low = mul(e, k, low, s2);
    let zero = f(e, k, 0.0);
    let negative = e.compare(Compare::Lt, k, x, zero);
    e.select(k, negative, low, high)
}

/// silu, `x sigmoid(x)`: `x / (1 + e^-x)` for x >= 0, `(x / (1 + e^x)) e^x`
/// for x < 0 rounded once; -0 where the true value is far below the
/// smallest subnormal (-inf included).
fn silu<E: Emitter>(e: &mut E, k: Kind, x: E::Value) -> E::Value {
    let (d, parts) = sigmoid_parts(e, k, x);
    let q = div(e, k, x, d);
    let low = times_exp(e, k, q, parts);
    let zero = f(e, k, 0.0);
    let negative = e.compare(Compare::Lt, k, x, zero);
    let r = e.select(k, negative, low, q);
    let vanishing = f(e, k, if k == Kind::F64 { -800.0 } else { -120.0 });
    let gone = e.compare(Compare::Lt, k, x, vanishing);
    let minus_zero = f(e, k, -0.0);
    e.select(k, gone, minus_zero, r)
}

/// softplus, `max(x, 0) + log1p(e^-|x|)`: no overflow for large x, the
/// small correction kept where x dominates, `e^x` itself for very
/// negative x; x itself above the threshold (+inf included).
fn softplus<E: Emitter>(e: &mut E, k: Kind, x: E::Value) -> E::Value {
    let a = e.unary(Unary::Abs, k, x);
    let a = e.unary(Unary::Neg, k, a);
    let ex = exp(e, k, a);
    let l = log1p(e, k, ex);
    let zero = f(e, k, 0.0);
    let positive = e.compare(Compare::Gt, k, x, zero);
    let base = e.select(k, positive, x, zero);
    let r = add(e, k, base, l);
    // nan is kept by the sum.
    let threshold = f(e, k, nax_ops::SOFTPLUS_THRESHOLD);
    let above = e.compare(Compare::Gt, k, x, threshold);
    e.select(k, above, x, r)
}

/// `a + b` exactly, as the rounded sum and its error, for `|a| >= |b|`
/// (Dekker's fast two-sum).
fn fast_two_sum<E: Emitter>(e: &mut E, k: Kind, a: E::Value, b: E::Value) -> (E::Value, E::Value) {
    let sum = add(e, k, a, b);
    let moved = sub(e, k, sum, a);
    (sum, sub(e, k, b, moved))
}

/// `a * b` exactly, as the rounded product and its error, by Dekker's
/// product over Veltkamp's splitting (no fused multiply-add needed; `a`
/// and `b` below 2^996 in magnitude, 2^115 in f32).
pub fn dekker_product<E: Emitter>(e: &mut E, k: Kind, a: E::Value, b: E::Value) -> (E::Value, E::Value) {
    let split = |e: &mut E, v: E::Value| {
        let factor = f(e, k, if k == Kind::F64 { 134_217_729.0 } else { 4097.0 });
        let c = mul(e, k, factor, v);
        let d = sub(e, k, c, v);
        let high = sub(e, k, c, d);
        let low = sub(e, k, v, high);
        (high, low)
    };
    let p = mul(e, k, a, b);
    let (ah, al) = split(e, a);
    let (bh, bl) = split(e, b);
    let hh = mul(e, k, ah, bh);
    let r = sub(e, k, hh, p);
    let hl = mul(e, k, ah, bl);
    let r = add(e, k, r, hl);
    let lh = mul(e, k, al, bh);
    let r = add(e, k, r, lh);
    let ll = mul(e, k, al, bl);
    (p, add(e, k, r, ll))
}

/// `a/2 erfc(a/sqrt 2) e^(a^2/2) = t K(t)` for `a` in [0, 17] and `t = a /
/// (a + 2)`: `K`'s coefficients, a polynomial fit (degree 11, within 3.2e-9
/// relative; by iterated least squares on mpmath's values). In `t`, which
/// stays in [0, 0.9), the polynomial rounds gently (its terms sum to under
/// 8 times its value), and the result depends on `t` no more than in
/// proportion (where the error of `t`, about an ulp, goes).
const GELU_TAIL: [f64; 12] = [
    1.00000000309726,
    -0.5957700843516329,
    -0.19148851801783842,
    0.08399173829054561,
    0.11672763650448104,
    -0.023080485321582616,
    0.24444482191857222,
    -0.6582718237907196,
    1.0138204368436585,
    -1.0598966843591422,
    0.6070774563743615,
    -0.13861245576751227,
];

/// [`expm1_reduced`]'s `P` for gelu's tail, one degree below
/// [`EXPM1_REDUCED`]: e^r within 3.1e-9 relative (a twentieth of an ulp of
/// the tail; weighted least squares on mpmath's values).
const GELU_EXPM1: [f64; 5] = [0.49999993446693963, 0.1666652061931586, 0.04166838825300325, 0.00836871813074032, 0.0013814590259392263];

/// gelu, `x/2 erfc(-x/sqrt 2)`: no cancellation at either end, so the
/// sign is always right and the negative tail keeps its relative accuracy
/// down to the subnormals. f32: the tail `|x|/2 erfc(|x|/sqrt 2)` is
/// `q e^(-x^2/2)`, `q = t K(t)` ([`GELU_TAIL`]) and `-x^2/2 = hi + lo` in
/// two floats (Dekker's product: halving is exact), `e^(hi + lo)` as `2^n
/// (1 + s)`, `s = e^r - 1 + lo + lo (e^r - 1)` (`e^r - 1` by
/// [`GELU_EXPM1`]), so the tail is `(q + q s) 2^n`, 2^n in two normal
/// factors, in f32 lanes throughout (within 3 ulps; a quotient of two
/// polynomials in |x|, up to 17, rounds to 7 in f32, and evaluated in f64
/// costs twice the time): `-0 - tail` for x < 0, `x - tail` above, the
/// second factor of 2^n fused into that subtraction (one rounding). |x| is
/// held to 17, where the tail is 0 in f32: -0 at -inf, +inf at +inf, nan
/// kept.
fn gelu<E: Emitter>(e: &mut E, k: Kind, x: E::Value) -> E::Value {
    if k == Kind::F64 {
        return gelu64(e, x);
    }
    // |x| held to 17: beyond, the tail is 0 (and x - 0 is x, -0 is -0, even
    // at ±inf), and the exponent -x^2/2 stays above -150, as
    // `reduce_ln2` needs.
    let a = e.unary(Unary::Abs, k, x);
    let limit = f(e, k, 17.0);
    let over = e.compare(Compare::Gt, k, a, limit);
    let a = e.select(k, over, limit, a);
    // q = t K(t), t = |x| / (|x| + 2).
    let two = f(e, k, 2.0);
    let shifted_a = add(e, k, a, two);
    let t = div(e, k, a, shifted_a);
    let kt = poly(e, k, t, &GELU_TAIL);
    let q = mul(e, k, t, kt);
    // -x^2/2 = hi + lo, exactly.
    let minus_half = f(e, k, -0.5);
    let minus_half_a = mul(e, k, a, minus_half);
    let (hi, lo) = e.exact_product(k, minus_half_a, a);
    // 2^n as 2^(n + 100) 2^-100: n >= -209 here, so the first is normal
    // and the product exact; the second rounds once. The shifted float's
    // low bits hold n + 227, the first factor's biased exponent (in [18,
    // 227]: below 256, so the shift leaves its sign bit clear).
    let (r, shifted) = reduce_ln2(e, hi, 227);
    let em1 = expm1_reduced(e, r, &GELU_EXPM1);
    let sum = add(e, k, em1, lo);
    let s = e.multiply_add(k, lo, em1, sum);
    let tail = e.multiply_add(k, q, s, q);
    let bits = e.bitcast(Kind::F32, Kind::I32, shifted);
    let twenty_three = e.int(Kind::I32, 23);
    let scale = e.binary(Binary::Shl, Kind::I32, bits, twenty_three);
    let scale = e.bitcast(Kind::I32, Kind::F32, scale);
    let tail = mul(e, k, tail, scale);
    // x - tail 2^-100 above 0, -tail 2^-100 below: one fused rounding
    // (-0 - 0 is -0, so the sign of a vanished tail is kept). The kept
    // part is `-0 > x ? -0 : x`: x itself at either zero and at nan, the
    // form of x86's `maxps` (one instruction where a compare and a blend
    // would be two).
    let minus_zero = f(e, k, -0.0);
    let negative = e.compare(Compare::Gt, k, minus_zero, x);
    let kept = e.select(k, negative, minus_zero, x);
    let minus_tiny = f(e, k, -(-100f64).exp2());
    e.multiply_add(k, tail, minus_tiny, kept)
}

/// `1/sqrt 2` minus its f64 value.
const FRAC_1_SQRT_2_LO: f64 = -4.833_646_656_726_457e-17;

/// f64 gelu, `x/2 erfc(z)` with `z = -x/sqrt 2` carried in two floats:
/// the C library's `erfc` at the leading part, corrected to first order
/// for the trailing one (`d/dz log erfc(z) = -r(z)`, `r(z) = 2/sqrt(pi)
/// e^(-z^2) / erfc(z)`). Beyond z = 26, where erfc nears the subnormals,
/// erfc is its asymptotic series `e^(-z^2) / (z sqrt(pi)) sum (-1)^k
/// (2k-1)!! / (2z^2)^k` (eight terms: under 1e-18 relative), `e^(-z^2)`
/// from `z^2` in two floats and scaled, so that the final product rounds
/// once, and `r` is `2z + 1/z`. -0 below -40, x above 40, nan kept.
fn gelu64<E: Emitter>(e: &mut E, x: E::Value) -> E::Value {
    let k = Kind::F64;
    let c = f(e, k, -std::f64::consts::FRAC_1_SQRT_2);
    let (zh, zl) = e.exact_product(k, x, c);
    let c_lo = f(e, k, -FRAC_1_SQRT_2_LO);
    let zl = e.multiply_add(k, x, c_lo, zl);
    let one = f(e, k, 1.0);
    // Near: the C library's erfc, and r from it.
    let near_erfc = libm(e, k, "erfc", &[zh]);
    let (z2, z2_lo) = e.exact_product(k, zh, zh);
    let nz2 = e.unary(Unary::Neg, k, z2);
    let gauss = exp(e, k, nz2);
    let two_over_root_pi = f(e, k, std::f64::consts::FRAC_2_SQRT_PI);
    let r = mul(e, k, two_over_root_pi, gauss);
    let near_r = div(e, k, r, near_erfc);
    // Far: the asymptotic series over a scaled e^(-z^2).
    let (v, far_scale, _) = exp_parts(e, k, nz2);
    let low_part = sub(e, k, one, z2_lo);
    let v = mul(e, k, v, low_part);
    let two_z2 = add(e, k, z2, z2);
    let u = div(e, k, one, two_z2);
    let series = poly(e, k, u, &[1.0, -1.0, 3.0, -15.0, 105.0, -945.0, 10395.0, -135135.0, 2027025.0]);
    let root_pi = f(e, k, std::f64::consts::PI.sqrt());
    let denominator = mul(e, k, zh, root_pi);
    let far_erfc = mul(e, k, v, series);
    let far_erfc = div(e, k, far_erfc, denominator);
    let two_z = add(e, k, zh, zh);
    let inv = div(e, k, one, zh);
    let far_r = add(e, k, two_z, inv);
    let limit = f(e, k, 26.0);
    let far = e.compare(Compare::Gt, k, zh, limit);
    let erfc = e.select(k, far, far_erfc, near_erfc);
    let r = e.select(k, far, far_r, near_r);
    let scale = e.select(k, far, far_scale, one);
    let shift = mul(e, k, zl, r);
    let correction = sub(e, k, one, shift);
    let factor = mul(e, k, erfc, correction);
    let half = f(e, k, 0.5);
    let hx = mul(e, k, half, x);
    let g = mul(e, k, hx, factor);
    let g = mul(e, k, g, scale);
    // Beyond |x| = 40 gelu is -0 or x (and the splitting of x could overflow).
    let low = f(e, k, -40.0);
    let below = e.compare(Compare::Lt, k, x, low);
    let minus_zero = f(e, k, -0.0);
    let g = e.select(k, below, minus_zero, g);
    let high = f(e, k, 40.0);
    let above = e.compare(Compare::Gt, k, x, high);
    e.select(k, above, x, g)
}

/// A float elementwise built-in of one or two float operands of kind `k`.
pub fn elementwise<E: Emitter>(e: &mut E, func: Elementwise, k: Kind, v: &[E::Value]) -> E::Value {
    use Elementwise as F;
    let x = v[0];
    match func {
        F::Exp => exp(e, k, x),
        F::Log => log(e, k, x),
        F::Log1p => log1p(e, k, x),
        F::Expm1 => expm1(e, k, x),
        F::Sqrt => e.unary(Unary::Sqrt, k, x),
        F::Rsqrt => {
            let s = e.unary(Unary::Sqrt, k, x);
            let one = f(e, k, 1.0);
            div(e, k, one, s)
        }
        F::Abs => e.unary(Unary::Abs, k, x),
        F::Sin => libm(e, k, "sin", &[x]),
        F::Cos => libm(e, k, "cos", &[x]),
        F::Tanh => tanh(e, k, x),
        F::Erf => erf(e, k, x),
        F::Floor => e.unary(Unary::Floor, k, x),
        F::Ceil => e.unary(Unary::Ceil, k, x),
        F::Round => e.unary(Unary::RoundEven, k, x),
        F::Sign => {
            let zero = f(e, k, 0.0);
            let one = f(e, k, 1.0);
            let minus = f(e, k, -1.0);
            let pos = e.compare(Compare::Gt, k, x, zero);
            let s = e.select(k, pos, one, minus);
            let is_zero = e.compare(Compare::Eq, k, x, zero);
            let s = e.select(k, is_zero, zero, s);
            let nan = is_nan(e, k, x);
            e.select(k, nan, x, s)
        }
        F::Sigmoid => sigmoid(e, k, x),
        F::Relu => {
            let zero = f(e, k, 0.0);
            let neg = e.compare(Compare::Lt, k, x, zero);
            e.select(k, neg, zero, x)
        }
        F::Gelu => gelu(e, k, x),
        F::Silu => silu(e, k, x),
        F::Softplus => softplus(e, k, x),
        F::Pow => libm(e, k, "pow", &[x, v[1]]),
        F::Maximum => e.binary(Binary::Max, k, x, v[1]),
        F::Minimum => e.binary(Binary::Min, k, x, v[1]),
        // Handled by the lowering; not float functions of floats.
        F::Where | F::Clamp | F::MaskedFill | F::ToFloat | F::ToInt => x,
    }
}

/// x^y for integers (wrapping, as torch), 0 for a negative exponent:
/// square-and-multiply over the exponent's bits, unrolled.
pub fn int_pow<E: Emitter>(e: &mut E, k: Kind, x: E::Value, y: E::Value) -> E::Value {
    let width = if k == Kind::I32 { 32 } else { 64 };
    let mut result = e.int(k, 1);
    let mut base = x;
    let one = e.int(k, 1);
    let zero = e.int(k, 0);
    for bit in 0..width - 1 {
        let sh = e.int(k, bit);
        let b = e.binary(Binary::ShrU, k, y, sh);
        let b = e.binary(Binary::And, k, b, one);
        let set = e.compare(Compare::Ne, k, b, zero);
        let m = e.binary(Binary::Mul, k, result, base);
        result = e.select(k, set, m, result);
        base = e.binary(Binary::Mul, k, base, base);
    }
    let negative = e.compare(Compare::Lt, k, y, zero);
    e.select(k, negative, zero, result)
}

/// The f32 value of f16 bits (an `I16`), exact, subnormals, inf and nan included.
pub fn f16_to_f32<E: Emitter>(e: &mut E, h: E::Value) -> E::Value {
    let i = |e: &mut E, v: i64| e.int(Kind::I32, v);
    let h = e.convert(Kind::I16, Kind::I32, h);
    let m16 = i(e, 0xffff);
    let h = e.binary(Binary::And, Kind::I32, h, m16);
    let low = i(e, 0x7fff);
    let o = e.binary(Binary::And, Kind::I32, h, low);
    let s13 = i(e, 13);
    let o = e.binary(Binary::Shl, Kind::I32, o, s13);
    let shifted_exp = i(e, 0x7c00 << 13);
    let ex = e.binary(Binary::And, Kind::I32, shifted_exp, o);
    let rebias = i(e, (127 - 15) << 23);
    let o = e.binary(Binary::Add, Kind::I32, o, rebias);
    // inf and nan: the exponent is all ones.
    let is_special = e.compare(Compare::Eq, Kind::I32, ex, shifted_exp);
    let extra = i(e, (128 - 16) << 23);
    let o_special = e.binary(Binary::Add, Kind::I32, o, extra);
    // Subnormal halves: renormalise through a float subtraction.
    let zero = i(e, 0);
    let is_sub = e.compare(Compare::Eq, Kind::I32, ex, zero);
    let one_exp = i(e, 1 << 23);
    let o_sub = e.binary(Binary::Add, Kind::I32, o, one_exp);
    let f_sub = e.bitcast(Kind::I32, Kind::F32, o_sub);
    let magic = e.float(Kind::F32, f32::from_bits(113 << 23) as f64);
    let f_sub = e.binary(Binary::Sub, Kind::F32, f_sub, magic);
    let o_sub = e.bitcast(Kind::F32, Kind::I32, f_sub);
    let o = e.select(Kind::I32, is_special, o_special, o);
    let o = e.select(Kind::I32, is_sub, o_sub, o);
    let sign_mask = i(e, 0x8000);
    let sign = e.binary(Binary::And, Kind::I32, h, sign_mask);
    let s16 = i(e, 16);
    let sign = e.binary(Binary::Shl, Kind::I32, sign, s16);
    let o = e.binary(Binary::Or, Kind::I32, o, sign);
    e.bitcast(Kind::I32, Kind::F32, o)
}

/// f32 to f16 bits (an `I16`), rounding to nearest even; overflow gives
/// inf, nan stays nan.
pub fn f32_to_f16<E: Emitter>(e: &mut E, x: E::Value) -> E::Value {
    let i = |e: &mut E, v: i64| e.int(Kind::I32, v);
    let bits = e.bitcast(Kind::F32, Kind::I32, x);
    let sign_mask = i(e, 0x8000_0000);
    let sign = e.binary(Binary::And, Kind::I32, bits, sign_mask);
    let a = e.binary(Binary::Xor, Kind::I32, bits, sign);
    // |x| >= 65520 (or inf, nan): 0x7c00, or 0x7e00 for nan.
    let f16max = i(e, (127 + 16) << 23);
    let big = e.compare(Compare::Ge, Kind::I32, a, f16max);
    let f32inf = i(e, 255 << 23);
    let nan = e.compare(Compare::Gt, Kind::I32, a, f32inf);
    let qnan = i(e, 0x7e00);
    let inf = i(e, 0x7c00);
    let big_value = e.select(Kind::I32, nan, qnan, inf);
    // Subnormal results: let a float addition do the rounding.
    let denorm_magic = i(e, ((127 - 15) + (23 - 10) + 1) << 23);
    let af = e.bitcast(Kind::I32, Kind::F32, a);
    let mf = e.bitcast(Kind::I32, Kind::F32, denorm_magic);
    let sum = e.binary(Binary::Add, Kind::F32, af, mf);
    let sb = e.bitcast(Kind::F32, Kind::I32, sum);
    let sub_value = e.binary(Binary::Sub, Kind::I32, sb, denorm_magic);
    let min_normal = i(e, 113 << 23);
    let subnormal = e.compare(Compare::Lt, Kind::I32, a, min_normal);
    // Normal results: rebias, round to nearest even, shift.
    let s13 = i(e, 13);
    let odd = e.binary(Binary::ShrU, Kind::I32, a, s13);
    let one = i(e, 1);
    let odd = e.binary(Binary::And, Kind::I32, odd, one);
    let rebias = i(e, ((15 - 127) << 23) + 0xfff);
    let n = e.binary(Binary::Add, Kind::I32, a, rebias);
    let n = e.binary(Binary::Add, Kind::I32, n, odd);
    let normal_value = e.binary(Binary::ShrU, Kind::I32, n, s13);
    let o = e.select(Kind::I32, subnormal, sub_value, normal_value);
    let o = e.select(Kind::I32, big, big_value, o);
    let s16 = i(e, 16);
    let sign16 = e.binary(Binary::ShrU, Kind::I32, sign, s16);
    let o = e.binary(Binary::Or, Kind::I32, o, sign16);
    e.convert(Kind::I32, Kind::I16, o)
}

/// The f32 value of bf16 bits (an `I16`): the high half of an f32.
pub fn bf16_to_f32<E: Emitter>(e: &mut E, h: E::Value) -> E::Value {
    let w = e.convert(Kind::I16, Kind::I32, h);
    let s16 = e.int(Kind::I32, 16);
    let bits = e.binary(Binary::Shl, Kind::I32, w, s16);
    e.bitcast(Kind::I32, Kind::F32, bits)
}

/// f32 to bf16 bits, rounding to nearest even; nan stays nan.
pub fn f32_to_bf16<E: Emitter>(e: &mut E, x: E::Value) -> E::Value {
    let bits = e.bitcast(Kind::F32, Kind::I32, x);
    let s16 = e.int(Kind::I32, 16);
    let hi = e.binary(Binary::ShrU, Kind::I32, bits, s16);
    let one = e.int(Kind::I32, 1);
    let odd = e.binary(Binary::And, Kind::I32, hi, one);
    let round = e.int(Kind::I32, 0x7fff);
    let b = e.binary(Binary::Add, Kind::I32, bits, round);
    let b = e.binary(Binary::Add, Kind::I32, b, odd);
    let r = e.binary(Binary::ShrU, Kind::I32, b, s16);
    let nan = is_nan(e, Kind::F32, x);
    let qnan = e.int(Kind::I32, 0x7fc0);
    let r = e.select(Kind::I32, nan, qnan, r);
    e.convert(Kind::I32, Kind::I16, r)
}
