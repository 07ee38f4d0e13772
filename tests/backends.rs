//! One backend-agnostic suite (burn's style): every case runs on every back
//! end through the pipeline and the runtime's call boundary, and the results are compared with a
//! reference at CLI.md's tolerances. The reference is the interpreter for
//! the other back ends, and PyTorch running the `--emit torch` code for all
//! of them when `torch` is importable; without torch the test says that it
//! skipped those comparisons, and why.
//!
//! Inputs are generated from each parameter's type (seeded); symbolic sizes
//! take the values a case gives.

use nax::pipeline::Backend;
use nax_front::check::types::Type;
use nax_front::syntax::ast::HostType;
use nax_runtime::CallBoundary;
use nax_runtime::{DType, HostTensor, Scalar, ThreadPool, Value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// A case: a module, the function to run, values for its symbolic sizes and
/// host scalars, and whether its inputs include nan and inf.
pub(crate) struct Case {
    pub name: String,
    pub source: String,
    pub function: String,
    pub sizes: Vec<(&'static str, u64)>,
    pub special_values: bool,
    /// The values of `int` parameters by name (3 for any other).
    pub ints: Vec<(&'static str, i64)>,
}

pub(crate) fn case(name: &str, source: &str) -> Case {
    Case { name: name.into(), source: source.into(), function: "f".into(), sizes: Vec::new(), special_values: false, ints: Vec::new() }
}

/// A model file with its large dims scaled down, so the interpreter runs it quickly.
fn reduced(path: &Path, function: &str) -> Case {
    let text = std::fs::read_to_string(path).expect("read example");
    let source: String = text
        .lines()
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["dim", name, "=", value, ..] => match value.parse::<u64>() {
                    Ok(v) if v > 16 => format!("dim {name} = {}", (v / 64).max(4)),
                    _ => line.to_string(),
                },
                _ => line.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let name = format!("model_{}", path.file_stem().unwrap_or_default().to_string_lossy());
    Case { name, source, function: function.into(), sizes: vec![("b", 2), ("n", 3)], special_values: false, ints: Vec::new() }
}

/// The cases: every operator and built-in, every pattern operation, both
/// broadcasting modes, every matmul rank case, size-1 axes, rank 0,
/// run-time sizes, lengths 1, 7, 23, 1029 and 65,537, rank-5 permutes,
/// empty axes, integer wrapping, every dtype, nan and inf.
pub(crate) fn cases() -> Vec<Case> {
    vec![
        case("arith_by_name_transpose", "dim n = 7\ndim m = 5\ndef f(x: [n m], y: [m n]) -> [n m] {\n    return x + y * 2.0 - x / (abs(y) + 1.0)\n}\n"),
        case("left_order_wins", "dim n = 3\ndim m = 4\ndef f(x: [m n], y: [n m]) -> [m n] {\n    return x - y\n}\n"),
        case("repeated_names", "dim b = 2\ndim n = 3\ndef f(x: [b n n], y: [n n], v: [n]) -> [b n n] {\n    return x * y + v\n}\n"),
        case("from_the_right_size_one", "dim n = 4\ndef f(x: [n 1], y: [3], u: [1 3]) -> [n 3] {\n    return x + y * u\n}\n"),
        case("rank0_and_host", "dim n = 23\ndef f(x: [n], z: [], s: float = 0.5, k: int = 3) -> [n] {\n    return x * z + s * k - k / 2\n}\n"),
        case("comparisons_and_logic", "dim n = 7\ndef f(x: [n], y: [n]) -> Mask[n] {\n    return (x > y and !(x == 0.0)) or x <= -1.0\n}\n"),
        case(
            "where_clamp_masked_fill",
            "dim n = 7\ndim m = 3\ndef f(x: [n m], mk: Mask[m]) -> [n m] {\n    a = where(x > 0.0, x, 0.5 * x)\n    c = clamp(a, -0.5, 0.75)\n    return masked_fill(c, mk, -2.0)\n}\n",
        ),
        case(
            "unary_builtins",
            "dim n = 1029\ndef f(x: [n]) -> [n] {\n    a = exp(x) + log1p(abs(x)) + expm1(x * 0.1) + sqrt(abs(x)) + rsqrt(abs(x) + 1.0)\n    c = sin(x) + cos(x) + tanh(x) + erf(x) + sigmoid(x) + relu(x) + gelu(x) + silu(x) + softplus(x * 30.0)\n    e = floor(x * 3.0) + ceil(x * 3.0) + round(x * 2.0) + sign(x)\n    return a + c + e + log(abs(x) + 0.5)\n}\n",
        ),
        case("binary_builtins", "dim n = 23\ndef f(x: [n], y: [n]) -> [n] {\n    return pow(abs(x) + 0.5, y) + maximum(x, y) - minimum(x, 0.25)\n}\n"),
        case("nan_and_inf", "dim n = 7\ndef f(x: [n]) -> [n] {\n    return exp(x) - relu(x) + maximum(x, 0.0) + tanh(x)\n}\n"),
        case(
            "softmax_family",
            "dim b = 2\ndim n = 7\ndim m = 5\ndef f(x: [b n m]) -> [b n] {\n    p = softmax(x, n)\n    q = log_softmax(x, m)\n    return logsumexp(x, m) + sum(p * q, m)\n}\n",
        ),
        case(
            "row_fusion",
            "dim b = 3\ndim D = 1029\ndef f(x: [b D], g: [D], h: f16[b D]) -> [b D] {\n    mu = reduce(x, b D -> b, mean)\n    xc = x - mu\n    v = reduce(xc * xc, b D -> b, mean)\n    y = xc * rsqrt(v + 1e-5) * g\n    m = reduce(h, b D -> b, max)\n    return y + float(h - m) + sum(x, D) / prod(abs(x) * 0.0 + 1.0, D)\n}\n",
        ),
        case(
            "strided_softmax",
            "dim b = 2\ndim n = 7\ndim t = 2\ndim m = 1029\ndef f(x: [b n m], y: [b t m]) -> [b m] {\n    p = softmax(x, n)\n    q = log_softmax(x, n)\n    r = softmax(y, t) + log_softmax(y, t)\n    return sum(p * q, n) + sum(r, t)\n}\n",
        ),
        case(
            "ellipsis_patterns",
            "dim b = 2\ndim h = 3\ndim n = 5\ndim d = 4\ndef f(x: [b h n d], y: [b h n d], v: [b n]) -> [b d n h] {\n    t = rearrange(x, b ... d -> b d ...)\n    s = reduce(y, b ... -> b, \"max\")\n    m = reduce(x, ... n d -> ... d, mean)\n    e = einsum(x, y: ... n d, ... n d -> ... n)\n    r = repeat(v, ... -> ... u, u=3)\n    p, q = split(x, ... (2 c) -> ... c)\n    return rearrange(t, b d h n -> b d n h) + s + m + einsum(e, r: b h n, b n u -> b n h) + sum(p * q, c)\n}\n",
        ),
        // A softmax over a middle axis of an f64 value (a cumsum's) into an
        // f32 result: its kernel kept f64 running sums in the f32 output, past
        // its end (seed 13's generated program 158 corrupted the heap;
        // `--check-bounds` now sees accesses of another width by their bytes).
        case(
            "softmax_mid_of_an_f64_value",
            "dim b = 5\ndim n = 20\ndim m = 42\ndef f(x: [b n m]) -> [b n m] {\n    return log(softmax(cumsum(x, m), n)) + log_softmax(cumsum(x, m), n)\n}\n",
        ),
        // einops' `...` over unnamed axes (by position; in einsum from the
        // right, the shorter operand's axes missing), and in output groups.
        case(
            "ellipsis_over_unnamed_axes_and_in_groups",
            "dim b = 2\ndef f(x: [2 3 4], a: [5 2 3], c: [5 3 4], d: [3 4], y: [b 3 4], z: [b 2 3]) -> [b 12] {\n    i = rearrange(x, ... -> ...)\n    s = reduce(i, ... -> , sum)\n    g = rearrange(x, ... -> (...))\n    e = einsum(a, c: ... i j, ... j k -> ... i k)\n    e2 = einsum(a, d: ... i j, ... j k -> ... i k)\n    h = rearrange(y, b ... -> (b ...))\n    m = rearrange(z, b ... -> ... b)\n    q = rearrange(z, b ... -> b (...) ())\n    t = reduce(e, ... -> , sum) + reduce(e2 * 0.5, ... -> , max) + reduce(g, ... -> , min) + reduce(h, ... -> , sum) + reduce(m * m, ... -> , sum)\n    return rearrange(y, b ... -> b (...)) * s + t + reduce(q, b r () -> b, sum)\n}\n",
        ),
        case(
            "unit_axes",
            "dim a = 3\ndim b = 5\ndef f(x: [a b], y: [a () b]) -> [a () b] {\n    u = rearrange(x, a b -> a () b)\n    v = rearrange(y, a () b -> b a)\n    return u * 2.0 + rearrange(v, b a -> a () b) + reduce(y, a () b -> a () b, sum)\n}\n",
        ),
        case("reductions", "dim b = 3\ndim n = 7\ndef f(x: [b n]) -> [b] {\n    return sum(x, n) + mean(x, n) * max(x, n) - min(x, n) + prod(x * 0.5, n)\n}\n"),
        case(
            "reduce_patterns",
            "dim b = 2\ndim n = 6\ndim D = 4\ndef f(x: [b n D]) -> [D b] {\n    a = reduce(x, b (n2 2) D -> D b n2, max)\n    return reduce(a, D b n2 -> D b, \"mean\")\n}\n",
        ),
        case(
            "mask_reductions",
            "dim n = 7\ndim m = 23\ndef f(x: [n m]) -> [n] {\n    mk = x > 0.0\n    c = sum(mk, m)\n    a = reduce(mk, n m -> n, mean)\n    z = reduce(mk, n m -> n, min)\n    return float(c) + a + float(z)\n}\n",
        ),
        case(
            "rearrange",
            "dim b = 2\ndim n = 3\ndim D = 8\ndef f(x: [b n D]) -> [b h n d] {\n    t = rearrange(x, b n D -> D b n)\n    u = rearrange(t, (h d) b n -> b h n d, h=2)\n    return rearrange(u, b h n d -> b h n d)\n}\n",
        ),
        case(
            "grouped_size_and_groups",
            "dim b = 2\ndim n = 3\ndim D = 32\ndef f(x: [b n D]) -> [b 96] {\n    u = rearrange(x, b n 16gh -> b n gh 16)\n    return rearrange(u, b n gh s -> b (n gh s))\n}\n",
        ),
        case(
            "repeat",
            "dim b = 2\ndim D = 3\ndef f(x: [b D]) -> [b r D 2] {\n    a = repeat(x, b D -> b r D, r=4)\n    return repeat(a, b r D -> b r D 2)\n}\n",
        ),
        case(
            "einsum_three_operands",
            "dim i = 5\ndim j = 4\ndim k = 3\ndef f(a: [i j], b: [j k], c: [k]) -> [i] {\n    return einsum(a, b, c: i j, j k, k -> i)\n}\n",
        ),
        case(
            "einsum_attention",
            "dim b = 2\ndim H = 2\ndim n = 3\ndim m = 4\ndim Dh = 5\ndef f(q: [b H n Dh], k: [b H m Dh], v: [b H m Dh]) -> [b H n Dh] {\n    s = einsum(q, k: b H n Dh, b H m Dh -> b H n m) / sqrt(Dh)\n    p = softmax(s, m)\n    return einsum(p, v: b H n m, b H m Dh -> b H n Dh)\n}\n",
        ),
        // Attention runs as one flash kernel: tiles of 64 queries by 128
        // keys, here with partial tiles on both edges, tiles masked whole
        // (skipped), a first row masked whole (nan, as the softmax of only
        // -inf is), and a logit that adds a bias.
        case(
            "flash_attention",
            "dim b = 2\ndim H = 2\ndim n = 70\ndim m = 131\ndim d = 9\ndim e = 6\ndef f(q: [b H n d], k: [b H m d], v: [b H m e], bias: [n m]) -> [b H n e] {\n    causal = rearrange(arange(n), n -> n 1) > arange(m)\n    s = einsum(q, k: b H n d, b H m d -> b H n m) / sqrt(d)\n    p = softmax(masked_fill(s, !causal, -inf), m)\n    r = softmax(s * 0.5 + bias, m)\n    return einsum(p, v: b H n m, b H m e -> b H n e) + einsum(r, v: b H n m, b H m e -> b H n e)\n}\n",
        ),
        // f16 attention fuses too (queries, keys and values widened to
        // f32, the output rounded once), here a decode step's few rows,
        // whose products run unpacked on widened tiles.
        case(
            "flash_attention_f16_few_rows",
            "dim H = 3\ndim n = 2\ndim m = 100\ndim d = 17\ndef f(q: f16[n H d], k: f16[m H d], v: f16[m H d]) -> f16[n H d] {\n    p = softmax(einsum(q, k: n H d, m H d -> H n m) * 0.25, m)\n    return einsum(p, v: H n m, m H d -> n H d)\n}\n",
        ),
        // A softmax-like function along the last axis runs the loops before
        // it as one flat parallel loop: a batch of one in front of heads
        // and rows splits across threads (here, past the work that splits).
        // (The bf16 rows are their own case, one rounding from the result: a
        // bf16 softmax added into an f32 result carries a bf16 ulp, rounded
        // either way, past f32's tolerance, and a sum of two bf16 results
        // rounded three times may land two ulps from PyTorch's; `* 1.0`,
        // exact, makes the Prob a bf16 Real.)
        case(
            "softmax_rows_of_a_batch_of_one",
            "dim b = 1\ndim H = 3\ndim n = 50\ndim m = 301\ndef f(x: [b H n m]) -> [b H n m] {\n    p = softmax(x * 2.0, m) + log_softmax(x, m)\n    return p + logsumexp(x, m)\n}\n",
        ),
        case(
            "softmax_rows_of_a_batch_of_one_bf16",
            "dim b = 1\ndim H = 3\ndim n = 50\ndim m = 301\ndef f(y: bf16[b H n m]) -> bf16[b H n m] {\n    return softmax(y * 2.0, m) * 1.0\n}\n",
        ),
        case(
            "split",
            "dim b = 2\ndim n = 3\ndim H = 2\ndim Dh = 4\ndef f(x: [b n (3 H Dh)]) -> [b H n Dh] {\n    q, k, v = split(x, b n (3 H Dh) -> b H n Dh)\n    return q * 2.0 + k - v\n}\n",
        ),
        case("matmul_1_1", "dim k = 7\ndef f(x: [k], y: [k]) -> [] {\n    return x @ y\n}\n"),
        case("matmul_1_2_and_2_1", "dim k = 7\ndim m = 3\ndef f(x: [k], w: [k m], v: [m]) -> [] {\n    return (x @ w) @ v\n}\n"),
        case("matmul_2_2", "dim n = 23\ndim k = 7\ndim m = 5\ndef f(x: [n k], w: [k m]) -> [n m] {\n    return x @ w\n}\n"),
        // A product's elementwise consumer becomes its epilogue, run in place.
        case(
            "gemm_epilogues",
            "dim b = 2\ndim n = 23\ndim k = 7\ndim m = 5\ndef f(x: [b n k], w: [k m], c: [m]) -> [b n m] {\n    h = gelu(x @ w + c)\n    return (h @ rearrange(w, k m -> m k)) * 0.5 @ w + 1.0\n}\n",
        ),
        case("gemm_epilogue_of_a_dot_product", "dim k = 7\ndef f(x: f64[k], y: f64[k]) -> f64[] {\n    return tanh(x @ y) * 2.0 + 1.0\n}\n"),
        case(
            "matmul_batched",
            "dim b = 2\ndim H = 3\ndim n = 4\ndim k = 5\ndim m = 2\ndef f(x: [b H n k], y: [b k m], w: [k m]) -> [b H n m] {\n    return x @ y + matmul(x, w)\n}\n",
        ),
        case("matmul_batch_broadcast_from_right", "dim n = 4\ndim k = 5\ndim m = 2\ndef f(x: [3 n k], y: [1 k m]) -> [3 n m] {\n    return x @ y\n}\n"),
        case("matmul_rank3_rank1", "dim b = 2\ndim n = 4\ndim k = 5\ndef f(x: [b n k], v: [k]) -> [b n] {\n    return x @ v\n}\n"),
        case("int_arith", "dim n = 7\ndef f(i: Int[n], j: Int[n]) -> [n] {\n    a = i * j + 3 - j\n    return a / 2 + float(int(a * 0.7))\n}\n"),
        case("i32_wrapping", "dim n = 7\ndef f(i: i32[n]) -> i32[n] {\n    return i * 1000003 * 1000003\n}\n"),
        case("f16_math", "dim n = 23\ndef f(x: f16[n], y: f16[n]) -> f16[n] {\n    return x * y + 0.5\n}\n"),
        case("bf16_math", "dim n = 23\ndef f(x: bf16[n], y: bf16[n]) -> bf16[n] {\n    return x * 3.0 - y\n}\n"),
        case("f16_bf16_promote", "dim n = 7\ndef f(x: f16[n], y: bf16[n]) -> [n] {\n    return x + y\n}\n"),
        case("f64_math", "dim n = 7\ndef f(x: f64[n]) -> f64[n] {\n    return exp(x) * 1.5\n}\n"),
        case(
            "constructors",
            "dim n = 4\ndim m = 3\ndef f(x: [n m]) -> [n m] {\n    z = zeros([n m]) + ones([m]) * 2.0 + full([n 1], 0.25)\n    return x * z + float(arange(m))\n}\n",
        ),
        case("as_rename", "dim n = 3\ndim k = 3\ndef f(x: [n k], y: [k k]) -> [n k] {\n    return x + (y as [n k])\n}\n"),
        case(
            "calls_inline",
            "dim n = 7\ndim m = 3\ndef g(t: [r c], s: float = 2.0) -> [c r] {\n    return rearrange(t * s, r c -> c r)\n}\ndef f(x: [n m]) -> [n m] {\n    return g(g(x), s=0.5)\n}\n",
        ),
        case("return_permuted", "dim n = 2\ndim m = 3\ndef f(x: [n m]) -> [m n] {\n    return x * 2.0\n}\n"),
        case("length_one", "dim n = 1\ndef f(x: [n], y: [1]) -> Prob(n)[n] {\n    return softmax(x + y, n)\n}\n"),
        Case {
            sizes: vec![("V", 46)],
            ..case(
                "runtime_sizes",
                "dim V\ndim W = V / 2\ndef f(x: [V], y: [W]) -> [W] {\n    h = rearrange(x, (a 2) -> a 2)\n    return (reduce(h, a t -> a, sum) as [W]) * y\n}\n",
            )
        },
        // Flash attention with sizes known only at the call (tile edges
        // against run-time extents), and with nan and inf among its inputs.
        Case {
            sizes: vec![("n", 67), ("m", 130), ("d", 3), ("e", 5)],
            ..case(
                "flash_attention_run_time_sizes",
                "dim b = 2\ndim n\ndim m\ndim d\ndim e\ndef f(q: [b n d], k: [b m d], v: [b m e]) -> [b n e] {\n    shown = rearrange(arange(n), n -> n 1) * 2 >= arange(m)\n    p = softmax(masked_fill(einsum(q, k: b n d, b m d -> b n m), !shown, -inf), m)\n    return einsum(p, v: b n m, b m e -> b n e)\n}\n",
            )
        },
        Case {
            sizes: vec![("n", 3), ("m", 0), ("d", 0), ("e", 2)],
            ..case(
                "flash_attention_no_keys",
                "dim b = 2\ndim n\ndim m\ndim d\ndim e\ndef f(q: [b n d], k: [b m d], v: [b m e]) -> [b n e] {\n    shown = rearrange(arange(n), n -> n 1) * 2 >= arange(m)\n    p = softmax(masked_fill(einsum(q, k: b n d, b m d -> b n m), !shown, -inf), m)\n    return einsum(p, v: b n m, b m e -> b n e)\n}\n",
            )
        },
        Case {
            special_values: true,
            ..case(
                "flash_attention_nan_inf",
                "dim n = 5\ndim m = 7\ndim d = 3\ndef f(q: [n d], k: [m d], v: [m d]) -> [n d] {\n    p = softmax(einsum(q, k: n d, m d -> n m), m)\n    return einsum(p, v: n m, m d -> n d)\n}\n",
            )
        },
        Case {
            sizes: vec![("e", 12)],
            ..case("run_time_keyword", "dim n = 3\ndef f(x: [n e], k: int) -> [n h d] {\n    return rearrange(x, n (h d) -> n h d, h=k)\n}\n")
        },
        // A host int or bool repeated into a tensor keeps its dtype (an int's
        // repeat was an f32 buffer read through an i64 alias: twice its
        // size, garbage past the first row on every native back end).
        case(
            "host_scalars_repeated",
            "def f(x: Int[a b]) -> Int[a p] {\n    z = repeat(0, -> a p, p=2) + x[b = 0:2 as p]\n    m = repeat(true, -> a p)\n    return where(m, z, repeat(7, -> a p)) + int(repeat(1.5, -> a p))\n}\n",
        ),
        // A literal returned, or given axes of size 1: stored with the
        // result's dtype (the interpreter returned it as f64, and the
        // kernels of a literal given axes did not verify).
        case("a_literal_given_axes", "def f() -> [1 1] {\n    return rearrange(1.5, -> 1 1)\n}\n"),
        case("a_literal_returned", "def f() -> [] {\n    return 2.5 + 0.25\n}\n"),
        // A maximum far above the rest of its row: its log_softmax is the
        // tiny negative the exponentials below it make, not 0 (along the
        // last axis, a middle one and a reduction; with ties of the maximum).
        case(
            "log_softmax_of_a_dominant_maximum",
            "dim b = 3\ndim n = 5\ndim m = 4\ndef f(x: [b n m]) -> [b n m] {\n    y = x * 40.0 + where(x > 0.9, 20.0, 0.0)\n    t = rearrange(arange(m), m -> 1 m) == 0\n    z = where(t, 3.0, y)\n    return log_softmax(y, m) * 1e8 + log_softmax(y, n) * 1e8 + log_softmax(z, n) + rearrange(logsumexp(y, n) - 20.0, b m -> b 1 m) * 1e8\n}\n",
        ),
        // A keyword size that only the call confirms: `hwc` is w * h * c_out,
        // each derived from the arguments' sizes (einops' flax model chain).
        Case {
            sizes: vec![("b", 10), ("G1", 4), ("G2", 9), ("c", 4), ("h2", 2), ("w2", 3), ("c_out", 5)],
            ..case(
                "keyword_size_over_derived_product",
                "def f(X: [b G1 G2 c], Y: [h2 w2 c c_out], Z: [c_out]) -> [b] {\n    y = rearrange(X, b (h h2) (w w2) c -> b h h2 w w2 c)\n    z = einsum(y, Y: b h h2 w w2 c, h2 w2 c c_out -> b h w c_out) + Z\n    u = rearrange(z, b h w c_out -> b (w h c_out))\n    return reduce(u, b hwc -> b, mean, hwc=30)\n}\n",
            )
        },
        Case { sizes: vec![("b", 7), ("n", 23)], ..case("parameter_sizes", "def f(x: [b n], y: [n]) -> [b n] {\n    return x * y\n}\n") },
        // Edge cases of native code: vector tails and thread splits, stride-0
        // and size-1 axes, rank-5 permutes, empty axes, wrapping, half floats.
        case("length_65537", "dim n = 65537\ndef f(x: [n], y: [n]) -> [n] {\n    return gelu(x * 1.5 + y) - sum(y, n) / 65537.0\n}\n"),
        case("length_65537_rows", "dim r = 3\ndim n = 65537\ndef f(x: [r n], y: [n]) -> [r] {\n    return max(x * y, n) + mean(x, n)\n}\n"),
        case(
            "stride_zero_and_size_one",
            "dim a = 23\ndim b = 7\ndef f(x: [a 1], y: [1 b], z: [b]) -> [a b] {\n    return x * y + z + repeat(z, b -> a b)\n}\n",
        ),
        case(
            "permute_rank5",
            "dim a = 2\ndim b = 3\ndim c = 4\ndim d = 5\ndim e = 6\ndef f(x: [a b c d e], y: [e c a d b]) -> [e c a d b] {\n    return rearrange(x, a b c d e -> e c a d b) + y\n}\n",
        ),
        Case { sizes: vec![("b", 0)], ..case("empty_axis", "dim n = 5\ndef f(x: [b n], y: [n]) -> [b n] {\n    return softmax(x * y, n) + relu(x)\n}\n") },
        Case { sizes: vec![("b", 0)], ..case("empty_reduction", "dim n = 5\ndef f(x: [n b]) -> [n] {\n    return sum(x, b) + float(sum(x > 0.0, b))\n}\n") },
        Case { sizes: vec![("k", 0)], ..case("matmul_empty_inner", "dim n = 5\ndim m = 3\ndef f(x: [n k], w: [k m]) -> [n m] {\n    return x @ w + 1.0\n}\n") },
        Case {
            sizes: vec![("b", 0)],
            ..case("matmul_empty_batch", "dim n = 5\ndim k = 4\ndim m = 3\ndef f(x: [b n k], w: [k m]) -> [b n m] {\n    return x @ w\n}\n")
        },
        // Transposed reads staged through the output in blocks of the
        // vector lanes: edges of blocks, tiles and thread chunks; f64, i64,
        // f16 and masks; transposed reads of another width than the
        // output's (not staged).
        case("transposed_read_edges", "dim n = 300\ndim m = 270\ndef f(x: [n m], y: [m n]) -> [n m] {\n    return x + gelu(y * 2.0)\n}\n"),
        case(
            "transposed_reads_of_every_width",
            "dim b = 3\ndim n = 37\ndim m = 20\ndef f(x: f64[b n m], y: f64[b m n], i: Int[m b n], j: Int[b n m], h: f16[b m n], g: f16[b n m]) -> f64[b n m] {\n    return x * y + float(i * j) + float(h + g)\n}\n",
        ),
        case(
            "transposed_self_and_masks",
            "dim a = 70\ndim b = 70\ndef f(x: [a b], p: Mask[a b], q: Mask[b a]) -> [a b] {\n    return x - rearrange(x, a b -> b a) as [a b] + float(p and q) + float(x > rearrange(x, a b -> b a) as [a b])\n}\n",
        ),
        case("transposed_mask", "dim a = 70\ndim b = 45\ndef f(p: Mask[a b], q: Mask[b a]) -> Mask[a b] {\n    return p and !q\n}\n"),
        case("i64_wrapping", "dim n = 7\ndef f(i: Int[n]) -> Int[n] {\n    return i * 6000000000 * 6000000000 + i * -9000000000000000000\n}\n"),
        case("int_pow_and_compare", "dim n = 23\ndef f(i: Int[n], j: i32[n]) -> Int[n] {\n    return pow(i, 3) + where(j > 1, int(j), -1)\n}\n"),
        Case { special_values: true, ..case("f16_specials", "dim n = 1029\ndef f(x: f16[n]) -> f16[n] {\n    return x * 0.001 + exp(x) + x * 40000.0\n}\n") },
        Case { special_values: true, ..case("bf16_specials", "dim n = 1029\ndef f(y: bf16[n]) -> bf16[n] {\n    return y * 1e38 + sqrt(abs(y)) * 0.001\n}\n") },
        // Column blocks narrower than the rows (64 columns for 600
        // positions along the axis), the last one partial.
        case(
            "softmax_middle_column_blocks",
            "dim b = 2\ndim n = 600\ndim m = 150\ndef f(x: [b n m]) -> [b n m] {\n    return softmax(x, n) + log_softmax(x, n)\n}\n",
        ),
        Case {
            special_values: true,
            ..case(
                "along_strided_axes",
                "dim b = 3\ndim n = 7\ndim m = 5\ndef f(x: [b n m]) -> [b n m] {\n    return softmax(x, n) + log_softmax(x, b) + logsumexp(x, n)\n}\n",
            )
        },
        Case {
            special_values: true,
            ..case("nan_inf_inputs", "dim n = 7\ndef f(x: [n]) -> [n] {\n    return softmax(x, n) + sigmoid(x) + maximum(x, 0.0)\n}\n")
        },
        // Section 13: indexing, slices (steps, negative bounds, empty,
        // run-time axes, of a fused map), concat, take, scans, arg-reductions.
        case("index_elements", "dim n = 7\ndim m = 9\ndef f(x: [n m]) -> [m] {\n    return x[n = 2] + x[n = -1] * 2.0\n}\n"),
        case("index_several_axes", "dim b = 3\ndim n = 7\ndim m = 9\ndef f(x: [b n m]) -> [n] {\n    return x[b = 1, m = -2] - x[m = 0, b = 2]\n}\n"),
        case("slice_steps", "dim n = 7\ndim m = 23\ndef f(x: [n m]) -> [n k] {\n    return x[m = 1:20:3 as k] * 2.0\n}\n"),
        case("slice_negative_bounds", "dim n = 7\ndim m = 9\ndef f(x: [n m]) -> [3 j] {\n    return x[n = -3:, m = :-5 as j] + 1.0\n}\n"),
        case("slice_empty", "dim n = 7\ndim m = 9\ndef f(x: [n m]) -> [n k] {\n    return exp(x[m = 5:2 as k])\n}\n"),
        case("slice_of_a_map", "dim n = 7\ndim m = 1029\ndef f(x: [n m], y: [m]) -> [n k] {\n    return (exp(x) * y)[m = 2:1000:7 as k] + 1.0\n}\n"),
        Case {
            sizes: vec![("b", 3), ("n", 11)],
            ..case("slice_run_time_axis", "def f(x: [b n]) -> [b k] {\n    return x[n = 2: as k] + x[n = -4:-1 as k2][k2 = 0:1, b = 1]\n}\n")
        },
        case("slice_then_element", "dim n = 7\ndim m = 9\ndef f(x: [n m]) -> [k] {\n    return x[m = 1:9:2 as k][n = 3]\n}\n"),
        case("concat_two", "dim b = 2\ndim n = 5\ndim m = 3\ndim d = 4\ndef f(a: [b n d], c: [d m b]) -> [b t d] {\n    return concat(a, c: n, m -> t)\n}\n"),
        Case {
            sizes: vec![("n", 6), ("m", 1), ("p", 0)],
            ..case(
                "concat_run_time_sizes",
                "dim d = 1029\ndef f(a: [n d], c: [m d], e: [p d]) -> [t d] {\n    return concat(a * 2.0, c, exp(e): n, m, p -> t) + 1.0\n}\n",
            )
        },
        case(
            "concat_masks_and_ints",
            "dim n = 5\ndim m = 3\ndef f(a: Mask[n], c: Mask[m], i: Int[n], j: Int[m]) -> Int[t] {\n    return where(concat(a, c: n, m -> t), concat(i, j: n, m -> t), -1)\n}\n",
        ),
        case(
            "take_rows",
            "dim V = 11\ndim D = 6\ndim b = 2\ndim n = 5\ndef f(w: [V D], i: Int[b n]) -> [b n D] {\n    return take(w, where(i < 0, -i, i), V)\n}\n",
        ),
        case(
            "take_middle_axis_of_a_map",
            "dim a = 3\ndim V = 7\ndim c = 4\ndim n = 9\ndef f(w: [a V c], i: i32[n]) -> [a n c] {\n    return take(exp(w) * 2.0, where(i < 0, -i, i), V)\n}\n",
        ),
        case("take_host_index", "dim V = 7\ndim D = 4\ndef f(w: [V D], k: int = 3) -> [D] {\n    return take(w, k, V) + take(w, 6, V)\n}\n"),
        case(
            "take_of_take",
            "dim V = 7\ndim D = 4\ndim n = 6\ndef f(w: [V D], i: Int[n], j: Int[n]) -> [n D] {\n    return take(take(w, where(i < 0, -i, i), V), where(j < 0, -j, j), n)\n}\n",
        ),
        Case {
            sizes: vec![("b", 3), ("n", 5), ("V", 7)],
            ..case(
                "take_scan_arg_run_time_sizes",
                "dim D = 4\ndef f(w: [V D], i: Int[b n], x: [b n]) -> [b n D] {\n    return take(w, where(i < 0, -i, i), V) + rearrange(cumsum(x, n) + float(argmax(x, n)), b n -> b n 1)\n}\n",
            )
        },
        case("index_at_int_parameter", "dim L = 5\ndim D = 7\ndef f(w: [L D], l: int = 3) -> [D] {\n    return w[L = l] + w[L = -1] * 2.0\n}\n"),
        case(
            "index_at_inlined_literal",
            "dim L = 5\ndim D = 7\ndef layer(w: [L D], i: int) -> [D] {\n    return w[L = i] * 2.0\n}\ndef f(w: [L D], x: [D]) -> [D] {\n    return layer(w, 0) + layer(w, -2) + x @ rearrange(w, L D -> D L)[L = 4]\n}\n",
        ),
        case(
            "cumsum_cumprod",
            "dim b = 3\ndim n = 23\ndef f(x: [b n], i: Int[b n]) -> [b n] {\n    return cumsum(x, n) + cumsum(x, b) + cumprod(x * 0.5, n) + float(cumsum(i, n) + cumprod(i, b))\n}\n",
        ),
        case("cumsum_long_rows", "dim b = 3\ndim n = 1029\ndef f(x: [n b]) -> [n b] {\n    return cumsum(x * 2.0, n)\n}\n"),
        case(
            "argmax_argmin_ties",
            "dim b = 4\ndim n = 9\ndef f(i: Int[b n], x: [n b]) -> Int[b] {\n    return argmax(i, n) * 100 + argmin(i, n) * 10 + argmax(x, n) + argmin(x, n)\n}\n",
        ),
        case(
            "loop_carried_and_stacked",
            "dim b = 3\ndim D = 5\ndim L = 4\nparam w: [L D D]\ndef layer(x: [b D], l: int) -> (y: [b D], h: [b D]) {\n    h = x @ w[L = l]\n    return tanh(h) * 0.5 + x, h\n}\ndef f(x: [b D]) -> [L b D] {\n    hs = for l in L {\n        x, h = layer(x, l)\n        yield h\n    }\n    return hs + x\n}\n",
        ),
        case(
            "loop_nested_range_and_empty",
            "dim n = 6\ndef f(x: [n]) -> [2 n] {\n    e = for i in 1..3 {\n        for j in 0..i {\n            x = x * 0.5 + float(j)\n        }\n        yield x\n    }\n    z = for i in 4..2 {\n        x = x + 100.0\n        yield x\n    }\n    return e + x\n}\n",
        ),
        case(
            "loop_empty_stack_and_return_all",
            "dim n = 5\ndim v = 3\ndef g(x: [n v]) -> (p: Prob(v)[n v], q: [n v]) {\n    return softmax(x, v), x * 2.0\n}\ndef h(x: [n v]) -> (p: Prob(v)[n v], q: [n v]) {\n    return g(x)\n}\ndef f(x: [n v]) -> [0 n v] {\n    a, c = h(x)\n    z = for i in 0..0 {\n        yield a + c\n    }\n    return z\n}\n",
        ),
        case(
            "loop_results_from_every_turn",
            "dim n = 4\ndim v = 3\ndef g(x: [n v]) -> (p: Prob(v)[n v], q: [n v]) {\n    return softmax(x, v), x * 2.0\n}\ndef f(x: [n v]) -> [v n] {\n    for i in 0..3 {\n        p, x = g(x)\n        x = x - p\n    }\n    return x\n}\n",
        ),
        case(
            "float_width_conversions",
            "dim n = 9\ndef f(x: [n], h: bf16[n]) -> [n] {\n    return float(bf16(x * 3.0) * h) + float(f16(x)) - float(f64(x) * 2.0) + float(bf16(float(h) + 0.5))\n}\n",
        ),
        case(
            "several_results",
            "dim b = 3\ndim D = 5\ndim L = 2\nparam w: [L D D]\ndef f(x: [b D], m: Int[b]) -> (y: [b D], hs: [L b D], again: [b D], first: [b D], same: [b D], ids: Int[b]) {\n    hs = for l in L {\n        x = tanh(x @ w[L = l])\n        yield x\n    }\n    return x, hs, x, hs[L = 0], x, m + 1\n}\n",
        ),
        case("several_results_arguments", "dim n = 7\ndef f(x: [n], y: [n]) -> (a: [n], b: [n], c: [n]) {\n    return x, y, x\n}\n"),
        Case {
            special_values: true,
            ..case("argmax_nan_inf", "dim b = 5\ndim n = 7\ndef f(x: [b n]) -> Int[n] {\n    return argmax(x, b) * 10 + argmin(x, b)\n}\n")
        },
    ]
}

/// The example transformer block and every WORKLOADS.md workload, at reduced sizes.
pub(crate) fn model_cases() -> Vec<Case> {
    let root = crate::support::root();
    let mut out = vec![reduced(&root.join("examples/transformer_block.nax"), "block")];
    for path in crate::support::nax_files(&root.join("examples/workloads")) {
        let function = path.file_stem().unwrap_or_default().to_string_lossy().to_string();
        out.push(reduced(&path, &function));
    }
    out
}

/// A shape in `f`'s sizes, with the symbols' values for this call.
fn shape_of(f: &nax_front::checked::CheckedFn, solved: &[Option<u64>], axes: &[nax_front::check::types::Axis]) -> Result<Vec<usize>, String> {
    use nax_front::check::sizes::Size;
    axes.iter()
        .map(|a| match f.symbols.resolve(a.size) {
            Size::Const(c) => Ok(c as usize),
            Size::Sym(id) => solved[id.0 as usize].map(|v| v as usize).ok_or_else(|| format!("no value for `{}`", f.symbols.display(a.size))),
        })
        .collect()
}

/// Seeded values for every weight of a module, sized for `f`'s call.
fn weights_for(
    module: &nax_front::CheckedModule,
    f: &nax_front::checked::CheckedFn,
    solved: &[Option<u64>],
    rng: &mut SmallRng,
) -> Result<HashMap<String, HostTensor>, String> {
    module
        .weights
        .iter()
        .map(|w| {
            let shape = shape_of(f, solved, &w.ty.axes)?;
            let values: Vec<f64> = (0..shape.iter().product::<usize>()).map(|_| rng.random_range(-0.5..0.5)).collect();
            let names = w.ty.axes.iter().map(|a| a.name.clone()).collect();
            Ok((w.name.clone(), HostTensor::from_f64(w.ty.dtype, shape, names, &values).map_err(|e| e.to_string())?))
        })
        .collect()
}

/// The value of every size symbol of `f` for a case: the case's values by
/// name, 4 for any other free symbol, and what follows from them.
fn case_sizes(case: &Case, f: &nax_front::checked::CheckedFn) -> Result<Vec<Option<u64>>, String> {
    use nax_front::check::sizes::{Size, SymDef};
    let given: Vec<(Size, u64)> = f
        .symbols
        .all()
        .filter(|(id, s)| s.def == SymDef::Free && f.symbols.class_of(*id) == *id && f.symbols.constant(Size::Sym(*id)).is_none())
        .map(|(id, s)| (Size::Sym(id), case.sizes.iter().find(|(n, _)| *n == s.name).map_or(crate::generate::PARAMETER_SIZE, |(_, v)| *v)))
        .collect();
    f.symbols.table().solve(&given).map_err(|e| e.message)
}

/// The thread pool every test call runs in.
pub(crate) fn pool() -> &'static ThreadPool {
    static POOL: std::sync::OnceLock<ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| ThreadPool::new(0).expect("a thread pool"))
}

/// Compiles `g` with `backend` through the pipeline and calls it on `args`
/// through the runtime's call boundary.
pub fn run_on(backend: Backend, g: &nax_ir::Graph, args: &[Value], weights: &HashMap<String, HostTensor>) -> Result<HostTensor, String> {
    run_with(backend, false, g, args, weights)
}

/// [`run_on`], with every load and store bounds-checked when `check_bounds` (`--check-bounds`).
pub fn run_with(backend: Backend, check_bounds: bool, g: &nax_ir::Graph, args: &[Value], weights: &HashMap<String, HostTensor>) -> Result<HostTensor, String> {
    let mut results = run_all(backend, check_bounds, g, args, weights)?;
    if results.len() != 1 {
        return Err(format!("{} results where one was expected", results.len()));
    }
    Ok(results.remove(0))
}

/// [`run_with`] for a function of any number of results: each, in order.
pub fn run_all(
    backend: Backend,
    check_bounds: bool,
    g: &nax_ir::Graph,
    args: &[Value],
    weights: &HashMap<String, HostTensor>,
) -> Result<Vec<HostTensor>, String> {
    let machine = backend.machine(nax::pipeline::Machine::host());
    let options = nax::pipeline::FormOptions { check_bounds };
    let f = nax::pipeline::compile_graph_for(g.clone(), &[], backend, &machine, options, &mut nax::Timings::start()).map_err(|e| e.to_string())?;
    let call = f.signature().check(args.iter().map(Value::arg).collect(), weights).map_err(|e| e.to_string())?;
    f.run_results(&call, pool()).map_err(|e| e.to_string())
}

/// Inputs for a case: one argument per parameter, from its type.
fn arguments(case: &Case, f: &nax_front::checked::CheckedFn, solved: &[Option<u64>], rng: &mut SmallRng) -> Result<Vec<Value>, String> {
    f.bindings[..f.params]
        .iter()
        .map(|b| match &b.ty {
            Type::Tensor(t) => {
                let shape = shape_of(f, solved, &t.axes)?;
                let n: usize = shape.iter().product();
                let values: Vec<f64> = (0..n)
                    .map(|k| match t.dtype {
                        DType::Bool => f64::from(rng.random_bool(0.5)),
                        DType::I32 | DType::I64 => rng.random_range(-5i64..=5) as f64,
                        _ if case.special_values && k % 3 == 0 => [f64::NAN, f64::INFINITY, f64::NEG_INFINITY][(k / 3) % 3],
                        _ => rng.random_range(-2.0..2.0),
                    })
                    .collect();
                let names = t.axes.iter().map(|a| a.name.clone()).collect();
                HostTensor::from_f64(t.dtype, shape, names, &values).map(Value::Tensor).map_err(|e| e.to_string())
            }
            Type::Host(HostType::Float, _) => Ok(Value::Scalar(Scalar::Float(0.75))),
            Type::Host(HostType::Int, _) => Ok(Value::Scalar(Scalar::Int(case.ints.iter().find(|(n, _)| *n == b.name).map_or(3, |&(_, v)| v)))),
            Type::Host(HostType::Bool, _) => Ok(Value::Scalar(Scalar::Bool(true))),
            Type::Error => Err("a parameter did not check".into()),
        })
        .collect()
}

/// The back ends under test (the interpreter, first, is also the
/// reference), the CUDA target's kernels emulated on the CPU, and, on a
/// machine with NVIDIA's driver, the same kernels on its GPU (a line says
/// when that is skipped); then the CPU back ends and the emulation with
/// bounds-checked kernels (`true`).
pub(crate) fn backends() -> Vec<(Backend, bool)> {
    let mut all = vec![Backend::Interp, Backend::Llvm, Backend::Mlir, Backend::Cranelift, Backend::CudaEmulation];
    match nax_runtime::cuda::driver() {
        Ok(()) => all.push(Backend::Cuda),
        Err(e) => println!("skipped the GPU back end: {e}"),
    }
    let checked = [Backend::Llvm, Backend::Mlir, Backend::Cranelift, Backend::CudaEmulation].map(|b| (b, true));
    // NAX_BACKENDS=name,name (a `--check-bounds` suffix for the checked runs)
    // keeps those beside the interpreter, the reference (to find one that
    // crashes the process).
    let only: Option<Vec<String>> = std::env::var("NAX_BACKENDS").ok().map(|v| v.split(',').map(str::to_string).collect());
    all.into_iter()
        .map(|b| (b, false))
        .chain(checked)
        .filter(|&(b, c)| b == Backend::Interp || only.as_ref().is_none_or(|o| o.contains(&format!("{}{}", b.name(), checked_label(c)))))
        .collect()
}

/// How a run's back end is named in a failure: ` --check-bounds` when checked.
pub(crate) fn checked_label(check_bounds: bool) -> &'static str {
    if check_bounds { " --check-bounds" } else { "" }
}

/// The back ends that compile to machine code.
pub const NATIVE_BACKENDS: [Backend; 3] = [Backend::Llvm, Backend::Mlir, Backend::Cranelift];

/// CLI.md's tolerance (relative, absolute) for results of `dtype` whose
/// longest sum has `terms` terms.
pub(crate) fn tolerance(dtype: DType, terms: usize) -> (f64, f64) {
    match dtype {
        DType::F16 | DType::BF16 => (1e-2, 1e-3),
        DType::F32 | DType::F64 if terms > 4096 => (1e-3, 1e-4),
        DType::F32 | DType::F64 => (1e-4, 1e-5),
        _ => (0.0, 0.0),
    }
}

/// Compares two results at CLI.md's tolerances; nan must meet nan.
pub(crate) fn compare(what: &str, got: &HostTensor, want: &HostTensor, terms: usize) -> Result<(), String> {
    compare_within(what, got, want, terms, &[])
}

/// [`compare`], each element's tolerance widened by [`SENSITIVITY_FACTOR`]
/// times its sensitivity (`spread[i]`, see [`sensitivity`]; none past the
/// slice's end): an ill-conditioned result (a sum that cancels, a product
/// of many terms) may differ between f32 and f64 arithmetic by far more
/// than CLI.md's tolerance, and a wrong answer by far more than that.
pub(crate) fn compare_within(what: &str, got: &HostTensor, want: &HostTensor, terms: usize, spread: &[f64]) -> Result<(), String> {
    if got.shape() != want.shape() || got.dtype() != want.dtype() {
        return Err(format!("{what}: {:?} {} vs {:?} {}", got.shape(), got.dtype().as_str(), want.shape(), want.dtype().as_str()));
    }
    let (rtol, atol) = tolerance(got.dtype(), terms);
    for (i, (a, b)) in got.to_f64_vec().into_iter().zip(want.to_f64_vec()).enumerate() {
        let widened = spread.get(i).map_or(0.0, |s| SENSITIVITY_FACTOR * s);
        // Where an ulp's move of the inputs makes the reference infinite or nan, anything goes.
        let same = (a.is_nan() && b.is_nan()) || a == b || widened == f64::INFINITY || (a - b).abs() <= atol + rtol * b.abs() + widened;
        if !same {
            return Err(format!("{what}: element {i} is {a}, expected {b}"));
        }
    }
    Ok(())
}

#[test]
fn every_backend_agrees_on_every_case() {
    // NAX_CASE=NAME runs one case.
    let only = std::env::var("NAX_CASE").ok();
    let cases = cases().into_iter().chain(model_cases()).filter(|c| only.as_deref().is_none_or(|o| o == c.name)).collect();
    let failures = run_cases(cases, "cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Random well-formed programs (the last function of each, which calls the
/// others) on every back end and, when available, PyTorch.
#[test]
fn generated_programs_agree() {
    // NAX_GENERATED=N runs N programs (default 60), NAX_SEED picks the seed.
    let count = std::env::var("NAX_GENERATED").ok().and_then(|v| v.parse().ok()).unwrap_or(60);
    let seed = std::env::var("NAX_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(23);
    let mut rng = SmallRng::seed_from_u64(seed);
    let cases = (0..count)
        .map(|i| {
            let source = crate::generate::well_formed_program(&mut rng);
            let checked = nax_front::check_source(&source);
            let function = checked.module.functions.iter().max_by_key(|f| f.span.start).map(|f| f.name.clone()).unwrap_or_default();
            Case { name: format!("generated_{i}"), source, function, sizes: Vec::new(), special_values: false, ints: Vec::new() }
        })
        .collect();
    let failures = run_cases(cases, "generated");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A case ready to run: its checked module, its graphs as lowered and as
/// rewritten (through the pipeline, each verified), arguments and weights;
/// `None` for a generated program that cannot run (free sizes that do not
/// divide), with the reason printed.
pub(crate) type Prepared = (nax_front::Checked, nax_ir::Graph, nax_ir::Graph, Vec<Value>, HashMap<String, HostTensor>);

pub(crate) fn prepare(case: &Case, rng: &mut SmallRng, generated: bool) -> Option<Prepared> {
    let checked = nax_front::check_source(&case.source);
    assert!(!checked.has_errors(), "{}: {:?}\n{}", case.name, checked.diagnostics, case.source);
    let f = checked.module.functions.iter().find(|f| f.name == case.function).expect("function");
    let lowered = nax::pipeline::lower(&checked.module, &case.function, true, &mut nax::Timings::start())
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", case.name, case.source));
    let rewritten = lowered.graph().clone();
    let inputs = case_sizes(case, f).and_then(|solved| {
        let args = arguments(case, f, &solved, rng)?;
        Ok((args, weights_for(&checked.module, f, &solved, rng)?))
    });
    let (args, weights) = match inputs {
        Ok(x) => x,
        Err(e) if generated => {
            println!("{}: skipped ({e})", case.name);
            return None;
        }
        Err(e) => panic!("{}: {e}", case.name),
    };
    Some((checked, lowered.lowered, rewritten, args, weights))
}

/// Whether a run failed only because a generated run-time dim that no
/// tensor carries cannot be known (nothing to run).
fn unknowable(e: &str, generated: bool) -> bool {
    generated && e.contains("is not known at this call")
}

/// How many times its sensitivity a generated program's result may differ
/// from the interpreter's beyond CLI.md's tolerance.
const SENSITIVITY_FACTOR: f64 = 16.0;

/// How far each element of the interpreter's result moves when every float
/// argument and weight moves by one ulp of f32 (up or down, at random; the
/// largest move of two tries; infinite where a finite reference becomes
/// infinite or nan): a measure of the rounding error a result inherits in
/// f32 arithmetic, which the native back ends use. Empty where a perturbed
/// run fails.
fn sensitivity(graph: &nax_ir::Graph, args: &[Value], weights: &HashMap<String, HostTensor>, reference: &HostTensor, rng: &mut SmallRng) -> Vec<f64> {
    let nudge = |t: &HostTensor, rng: &mut SmallRng| -> HostTensor {
        if !t.dtype().is_float() {
            return t.clone();
        }
        let moved: Vec<f64> =
            t.to_f64_vec().into_iter().map(|v| f64::from(if rng.random_bool(0.5) { (v as f32).next_up() } else { (v as f32).next_down() })).collect();
        HostTensor::from_f64(t.dtype(), t.shape().to_vec(), t.names().to_vec(), &moved).unwrap_or_else(|_| t.clone())
    };
    let want = reference.to_f64_vec();
    let mut spread = vec![0.0f64; want.len()];
    for _ in 0..2 {
        let moved_args: Vec<Value> = args.iter().map(|a| if let Value::Tensor(t) = a { Value::Tensor(nudge(t, rng)) } else { a.clone() }).collect();
        let moved_weights: HashMap<String, HostTensor> = weights.iter().map(|(k, t)| (k.clone(), nudge(t, rng))).collect();
        let Ok(out) = run_with(Backend::Interp, false, graph, &moved_args, &moved_weights) else { return Vec::new() };
        for ((s, m), w) in spread.iter_mut().zip(out.to_f64_vec()).zip(&want) {
            // An infinity or a nan the reference has stays exact.
            if w.is_finite() {
                *s = s.max(if m.is_finite() { (m - w).abs() } else { f64::INFINITY });
            }
        }
    }
    spread
}

/// Runs cases on every back end and PyTorch; gives the disagreements.
pub(crate) fn run_cases(cases: Vec<Case>, label: &str) -> Vec<String> {
    let mut rng = SmallRng::seed_from_u64(5);
    let dir = std::env::temp_dir().join(format!("nax-backends-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut failures = Vec::new();
    let mut torch_jobs = Vec::new();
    let generated = label.starts_with("generated");
    let all = backends();
    // NAX_TRACE_CASES=1 names each case as it starts, with its source (to
    // find one that crashes the process).
    let trace = std::env::var_os("NAX_TRACE_CASES").is_some();
    for case in cases {
        if trace {
            eprintln!("{}: starting\n{}", case.name, case.source);
        }
        let Some((checked, graph, rewritten, args, weights)) = prepare(&case, &mut rng, generated) else { continue };
        let mut reference = None;
        let mut spread = Vec::new();
        // The interpreter runs the graph as lowered; the native back ends run
        // it rewritten by the optimizer, so every case also tests the
        // rewriting; the CPU back ends again with every load and store
        // bounds-checked (`--check-bounds`).
        for &(backend, check_bounds) in &all {
            let g = if backend == Backend::Interp { &graph } else { &rewritten };
            let out = match run_all(backend, check_bounds, g, &args, &weights) {
                Ok(out) => out,
                Err(e) if unknowable(&e, generated) => {
                    println!("{}: skipped ({e})", case.name);
                    break;
                }
                Err(e) => panic!("{}: {}{}: {e}\n{}", case.name, backend.name(), checked_label(check_bounds), case.source),
            };
            match &reference {
                None => {
                    // Generated programs are compared within their sensitivity.
                    if generated && let [single] = out.as_slice() {
                        spread = sensitivity(&graph, &args, &weights, single, &mut rng);
                    }
                    reference = Some(out);
                }
                Some(r) => {
                    for (i, (out, r)) in out.iter().zip(r).enumerate() {
                        let what = format!("{} on {}{} (result {i})", case.name, backend.name(), checked_label(check_bounds));
                        if let Err(e) = compare_within(&what, out, r, longest_sum(&graph), &spread) {
                            failures.push(format!("{e}\n{}", case.source));
                        }
                    }
                }
            }
        }
        let Some(reference) = reference else { continue };
        torch_jobs.push((case, checked, args, weights, reference, spread));
    }
    match torch_available() {
        Err(why) => println!("skipped the PyTorch comparisons: {why}"),
        Ok(()) => {
            failures.extend(compare_with_torch(&dir, &torch_jobs));
        }
    }
    failures
}

/// The most terms any reduction, scan or contraction of the graph sums (a size
/// known only at the call counts as many), for CLI.md's tolerance of long
/// sums.
pub(crate) fn longest_sum(g: &nax_ir::Graph) -> usize {
    use nax_ir::Op;
    let extent = |ty: &nax_ir::Type, axis: usize| -> usize {
        match ty {
            nax_ir::Type::Tensor(t) => t.axes.get(axis).and_then(|a| g.symbols.constant(a.size)).map_or(1 << 20, |c| c as usize),
            _ => 1,
        }
    };
    g.graph
        .node_indices()
        .map(|n| {
            let operands = g.operands(n);
            match &g.graph[n].op {
                Op::Reduce { axes, .. } => axes.iter().map(|&a| extent(&g.graph[operands[0]].ty, a)).fold(1, usize::saturating_mul),
                Op::Along { axis, .. } | Op::Scan { axis, .. } => extent(&g.graph[operands[0]].ty, *axis),
                Op::Contract { labels, output } => {
                    let mut summed: HashMap<usize, usize> = HashMap::new();
                    for (ls, &o) in labels.iter().zip(&operands) {
                        for (j, &l) in ls.iter().enumerate() {
                            if !output.contains(&l) {
                                summed.insert(l, extent(&g.graph[o].ty, j));
                            }
                        }
                    }
                    summed.values().fold(1usize, |p, &e| p.saturating_mul(e))
                }
                _ => 1,
            }
        })
        .max()
        .unwrap_or(1)
}

/// Random well-formed programs evaluated with and without rewriting, on
/// the interpreter and on LLVM: the four results agree (the interpreter on
/// the graph as lowered is the reference). At least 1,000 programs run
/// (`NAX_REWRITE_PROGRAMS=N` sets the count, `NAX_SEED` the seed).
#[test]
fn rewriting_preserves_meaning() {
    let want = std::env::var("NAX_REWRITE_PROGRAMS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let seed = std::env::var("NAX_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(101);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut data_rng = SmallRng::seed_from_u64(seed + 1);
    let (mut evaluated, mut rewritten_count, mut failures) = (0usize, 0usize, Vec::new());
    for i in 0..want * 2 {
        if evaluated == want {
            break;
        }
        let source = crate::generate::well_formed_program(&mut rng);
        let checked = nax_front::check_source(&source);
        let function = checked.module.functions.iter().max_by_key(|f| f.span.start).map(|f| f.name.clone()).unwrap_or_default();
        let case = Case { name: format!("rewrite_{i}"), source, function, sizes: Vec::new(), special_values: false, ints: Vec::new() };
        let Some((_, graph, rewritten, args, weights)) = prepare(&case, &mut data_rng, true) else { continue };
        let changed = nax_ir::text::print(&rewritten) != nax_ir::text::print(&graph);
        let run = |backend: Backend, g: &nax_ir::Graph| run_on(backend, g, &args, &weights);
        let reference = match run(Backend::Interp, &graph) {
            Ok(r) => r,
            Err(e) if unknowable(&e, true) => continue,
            Err(e) => panic!("{}: interp: {e}\n{}", case.name, case.source),
        };
        let mut runs: Vec<(&str, &nax_ir::Graph, Backend)> = vec![("llvm", &graph, Backend::Llvm)];
        if changed {
            runs.push(("interp rewritten", &rewritten, Backend::Interp));
            runs.push(("llvm rewritten", &rewritten, Backend::Llvm));
        }
        for (what, g, backend) in runs {
            match run(backend, g) {
                Ok(out) => {
                    let out = denormal_log_probabilities_as(&out, &reference);
                    if let Err(e) = compare(&format!("{} on {what}", case.name), &out, &reference, longest_sum(&graph)) {
                        failures.push(format!("{e}\n{}", case.source));
                    }
                }
                Err(e) => failures.push(format!("{} on {what}: {e}\n{}", case.name, case.source)),
            }
        }
        evaluated += 1;
        rewritten_count += usize::from(changed);
    }
    println!("{evaluated} generated programs evaluated with and without rewriting on interp and llvm ({rewritten_count} changed by the rewriting)");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(evaluated >= want, "only {evaluated} of {want} generated programs could run");
}

/// The least normal f32's logarithm: a log-probability below it is the
/// log of a denormal probability, which carries few bits.
const LN_LEAST_NORMAL_F32: f64 = -87.336;

/// `out` with each element where `reference` is a log of a denormal
/// probability replaced by the reference's when within 1% of it: there
/// the graph as lowered computes `log(softmax(x))` through a denormal f32
/// (a few bits, rounded where each back end's fused kernel rounds) and the
/// rewritten graph `log_softmax(x)` exactly (algebra.rs), so they differ
/// by design, not by a bug.
fn denormal_log_probabilities_as(out: &HostTensor, reference: &HostTensor) -> HostTensor {
    if !matches!(out.dtype(), DType::F32) || out.shape() != reference.shape() {
        return out.clone();
    }
    let want = reference.to_f64_vec();
    let got: Vec<f64> =
        out.to_f64_vec().into_iter().zip(&want).map(|(a, &b)| if b < LN_LEAST_NORMAL_F32 && (a - b).abs() <= 0.01 * b.abs() { b } else { a }).collect();
    HostTensor::from_f64(out.dtype(), out.shape().to_vec(), out.names().to_vec(), &got).unwrap_or_else(|_| out.clone())
}

/// `torch` with each NaN where nax's `reference` is exactly 0 replaced by 0:
/// a contraction over an empty axis of a product with an infinite factor
/// is a sum of no terms, 0 (nax, by the definition), where torch's einsum
/// sums the empty axis of one operand first and multiplies that 0 by the
/// infinity (NaN). Used only for programs that write `inf`.
fn empty_sums_of_infinities_as(torch: &HostTensor, reference: &HostTensor) -> HostTensor {
    if torch.shape() != reference.shape() {
        return torch.clone();
    }
    let want = reference.to_f64_vec();
    let got: Vec<f64> = torch.to_f64_vec().into_iter().zip(&want).map(|(t, &r)| if t.is_nan() && r == 0.0 { 0.0 } else { t }).collect();
    HostTensor::from_f64(torch.dtype(), torch.shape().to_vec(), torch.names().to_vec(), &got).unwrap_or_else(|_| torch.clone())
}

/// Whether `import torch` works.
fn torch_available() -> Result<(), String> {
    match Command::new("python3").args(["-c", "import torch, safetensors"]).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!("python3 cannot import torch and safetensors ({})", String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or(""))),
        Err(e) => Err(format!("python3 is not available ({e})")),
    }
}

/// What the PyTorch comparison needs of a case: the case, its checked module, its arguments, weights and result.
/// A case, its checked module, arguments, weights, the interpreter's result and its sensitivity.
type TorchJob = (Case, nax_front::Checked, Vec<Value>, HashMap<String, HostTensor>, Vec<HostTensor>, Vec<f64>);

/// Runs every case's `--emit torch` code in one Python process and compares.
fn compare_with_torch(dir: &Path, jobs: &[TorchJob]) -> Vec<String> {
    let mut driver = String::from(
        "import importlib.util, inspect, sys, torch\nfrom safetensors.torch import load_file, save_file\ntorch.set_num_threads(1)\n\
         def call(fn, args, weights):\n    wanted = inspect.signature(fn).parameters\n    return fn(*args, **{k: v for k, v in weights.items() if k in wanted})\n",
    );
    let mut emitted = Vec::new();
    for (case, checked, args, weights, reference, spread) in jobs {
        // The emitter refuses a few programs (a run-time size no tensor carries): say so.
        let module = match nax_back_torch::emit_module(&checked.module) {
            Ok(m) => m,
            Err(e) => {
                println!("{}: not compared with PyTorch: {e}", case.name);
                continue;
            }
        };
        emitted.push((case, reference, spread));
        let module_path = dir.join(format!("{}.py", case.name));
        std::fs::write(&module_path, module).unwrap();
        let mut call_args = Vec::new();
        for (i, a) in args.iter().enumerate() {
            match a {
                Value::Tensor(t) => {
                    let path = dir.join(format!("{}_{i}.safetensors", case.name));
                    nax_runtime::write_tensor_atomic(&path, "t", t).unwrap();
                    call_args.push(format!("load_file({:?})['t']", path.display().to_string()));
                }
                Value::Scalar(Scalar::Float(x)) => call_args.push(format!("{x:?}")),
                Value::Scalar(Scalar::Int(x)) => call_args.push(x.to_string()),
                Value::Scalar(Scalar::Bool(b)) => call_args.push(if *b { "True".into() } else { "False".into() }),
            }
        }
        let mut weight_loads = Vec::new();
        for (i, (name, t)) in weights.iter().enumerate() {
            let path = dir.join(format!("{}_w{i}.safetensors", case.name));
            nax_runtime::write_tensor_atomic(&path, "t", t).unwrap();
            weight_loads.push(format!("{name:?}: load_file({:?})['t']", path.display().to_string()));
        }
        driver.push_str(&format!(
            "spec = importlib.util.spec_from_file_location({n:?}, {p:?})\nm = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(m)\nr = call(m.{f}, [{a}], {{{w}}})\nrs = r if isinstance(r, tuple) else (r,)\nsave_file({{f'out{{i}}': (r if isinstance(r, torch.Tensor) else torch.tensor(r)).detach().contiguous().clone() for i, r in enumerate(rs)}}, {o:?})\n",
            n = case.name,
            p = module_path.display().to_string(),
            f = case.function,
            a = call_args.join(", "),
            w = weight_loads.join(", "),
            o = dir.join(format!("{}_out.safetensors", case.name)).display().to_string(),
        ));
    }
    let script = dir.join("driver.py");
    std::fs::write(&script, driver).unwrap();
    let out = Command::new("python3").arg(&script).output().expect("run python3");
    if !out.status.success() {
        return vec![format!("the PyTorch driver failed:\n{}", String::from_utf8_lossy(&out.stderr))];
    }
    let mut failures = Vec::new();
    println!("comparing {} cases with PyTorch running the --emit torch code", emitted.len());
    for (case, references, spread) in emitted {
        let tensors = nax_runtime::read_tensors(&dir.join(format!("{}_out.safetensors", case.name))).expect("torch output");
        for (i, reference) in references.iter().enumerate() {
            let Some((_, torch)) = tensors.iter().find(|(name, _)| *name == format!("out{i}")) else {
                failures.push(format!("{}: PyTorch gave no result {i}", case.name));
                continue;
            };
            let torch = if case.source.contains("inf") { empty_sums_of_infinities_as(torch, reference) } else { torch.clone() };
            if let Err(e) = compare_within(&format!("{} against PyTorch (result {i})", case.name), reference, &torch, 0, spread) {
                failures.push(format!("{e}\n{}", case.source));
            }
        }
    }
    failures
}

/// An index outside its axis (a gathered one, or an element's, counted from
/// the end when negative) fails the call on every back end, the message
/// naming the index as given.
#[test]
fn indices_outside_their_axis_fail_the_call_on_every_backend() {
    let source = "dim V = 4\ndim D = 3\ndef f(w: [V D], ids: Int[n], l: int) -> [n D] {\n    return take(w, ids, V) + w[V = l]\n}\n";
    let checked = nax_front::check_source(source);
    let graph = nax::pipeline::lower(&checked.module, "f", true, &mut nax::Timings::start()).unwrap().lowered;
    let names = |n: &[&str]| n.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>();
    let w = HostTensor::from_f64(DType::F32, vec![4, 3], names(&["V", "D"]), &[0.0; 12]).unwrap();
    let ids = |v: &[f64]| HostTensor::from_f64(DType::I64, vec![v.len()], names(&["n"]), v).unwrap();
    let cases: [(&[f64], i64, &str); 5] = [
        (&[0.0, 3.0, 4.0], 0, "index 4 is outside axis 'V' of size 4"),
        (&[-1.0], 0, "index -1 is outside axis 'V' of size 4"),
        (&[1.0], -5, "index -5 is outside axis 'V' of size 4"),
        (&[1.0], -9, "index -9 is outside axis 'V' of size 4"),
        (&[1.0], 4, "index 4 is outside axis 'V' of size 4"),
    ];
    for (backend, check_bounds) in backends() {
        for (values, l, message) in cases {
            let args = [Value::Tensor(w.clone()), Value::Tensor(ids(values)), Value::Scalar(Scalar::Int(l))];
            let e = run_with(backend, check_bounds, &graph, &args, &HashMap::new()).expect_err("an index outside the axis");
            assert!(e.contains(message), "{}{}: {e}", backend.name(), checked_label(check_bounds));
        }
        let args = [Value::Tensor(w.clone()), Value::Tensor(ids(&[3.0, 0.0])), Value::Scalar(Scalar::Int(-4))];
        run_with(backend, check_bounds, &graph, &args, &HashMap::new()).unwrap();
    }
}

/// A sum over an empty axis is +0.0 on every back end (as in PyTorch), not
/// the -0.0 that starting from negative zero gives.
#[test]
fn an_empty_sum_is_positive_zero_everywhere() {
    let source = "def f(x: [n m]) -> [n] {\n    return sum(x, m)\n}\n";
    let checked = nax_front::check_source(source);
    let graph = nax::pipeline::lower(&checked.module, "f", true, &mut nax::Timings::start()).unwrap().lowered;
    let x = HostTensor::from_f64(DType::F32, vec![3, 0], vec![Some("n".into()), Some("m".into())], &[]).unwrap();
    for (backend, check_bounds) in backends() {
        let out = run_with(backend, check_bounds, &graph, &[Value::Tensor(x.clone())], &HashMap::new()).unwrap();
        for v in out.to_f64_vec() {
            assert!(v == 0.0 && v.is_sign_positive(), "{}{}: {v:?}", backend.name(), checked_label(check_bounds));
        }
    }
}

/// Stores whose outputs outgrow the caches stream them (the kernel says
/// `stream`, non-temporal stores where LLVM emits them): a transposed add
/// (tiled), an elementwise function, an f32 one and a mask (bytes), and
/// a store after a row reduction (its rows' maxima subtracted, its operand
/// asked for ahead of the stores), with rows
/// a whole number of vectors (the streaming stores'
/// alignment) and rows that are not (plain stores where a vector
/// straddles), bit for bit on every native back end, bounds-checked too.
#[test]
fn outputs_larger_than_the_caches_stream_on_every_backend() {
    let names = |a: &str, b: &str| vec![Some(a.to_string()), Some(b.to_string())];
    let check = |source: &str, args: &[Value], want: &[f64]| {
        let checked = nax_front::check_source(source);
        let graph = nax::pipeline::lower(&checked.module, "f", true, &mut nax::Timings::start()).unwrap().lowered;
        let kernels = nax_kernel::text::print(&nax_kernel::form(&graph, &nax_contract::Machine::host(), nax_kernel::FormOptions::default()).unwrap());
        assert!(kernels.contains(" stream "), "not streamed:\n{kernels}");
        assert!(!source.contains("reduce") || kernels.contains(" row max "), "not a row reduction:\n{kernels}");
        // A store after row reductions asks for its operand ahead as it streams.
        assert!(!source.contains("reduce") || kernels.contains(" ahead "), "not asked for ahead:\n{kernels}");
        for backend in NATIVE_BACKENDS {
            for check_bounds in [false, true] {
                let got = run_with(backend, check_bounds, &graph, args, &HashMap::new()).unwrap().to_f64_vec();
                let wrong = got.iter().zip(want).position(|(g, w)| g != w);
                assert!(wrong.is_none(), "{source}on {}{}: element {wrong:?}", backend.name(), checked_label(check_bounds));
            }
        }
    };
    for (n, m) in [(4608usize, 4608usize), (4500, 4501)] {
        let x: Vec<f64> = (0..n * m).map(|i| (i % 1021) as f64 * 0.5).collect();
        let y: Vec<f64> = (0..n * m).map(|i| (i % 997) as f64 - 300.0).collect();
        let transposed: Vec<f64> = (0..n * m).map(|at| f64::from((x[at] as f32) + (y[(at % m) * n + at / m] as f32))).collect();
        let args = [
            Value::Tensor(HostTensor::from_f64(DType::F32, vec![n, m], names("n", "m"), &x).unwrap()),
            Value::Tensor(HostTensor::from_f64(DType::F32, vec![m, n], names("m", "n"), &y).unwrap()),
        ];
        check(&format!("dim n = {n}\ndim m = {m}\ndef f(x: [n m], y: [m n]) -> [n m] {{\n    return x + y\n}}\n"), &args, &transposed);
        let scaled: Vec<f64> = x.iter().map(|&v| f64::from(v as f32 * 2.0 + 1.0)).collect();
        check(&format!("dim n = {n}\ndim m = {m}\ndef f(x: [n m]) -> [n m] {{\n    return x * 2.0 + 1.0\n}}\n"), &args[..1], &scaled);
        let below_maxima: Vec<f64> = x
            .chunks(m)
            .flat_map(|row| {
                let top = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                row.iter().map(move |&v| v - top)
            })
            .collect();
        check(&format!("dim n = {n}\ndim m = {m}\ndef f(x: [n m]) -> [n m] {{\n    return x - reduce(x, n m -> n, max)\n}}\n"), &args[..1], &below_maxima);
        // Four thresholds: a mask's byte per element outgrows the caches too.
        let thresholds = [100.0, 200.0, 300.0, 400.0];
        let above: Vec<f64> = thresholds.iter().flat_map(|&t| x.iter().map(move |&v| f64::from(u8::from(t < v)))).collect();
        let args = [args[0].clone(), Value::Tensor(HostTensor::from_f64(DType::F32, vec![4], vec![Some("k".to_string())], &thresholds).unwrap())];
        check(
            &format!("dim n = {n}\ndim m = {m}\ndim k = 4\ndef f(x: [n m], t: [k]) -> Mask[k n m] {{\n    return rearrange(t, k -> k 1 1) < x\n}}\n"),
            &args,
            &above,
        );
    }
}
