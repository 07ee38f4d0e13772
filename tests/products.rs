//! Matrix products through nax's microkernels (cache blocking, packing,
//! the microkernel's write-back, epilogues per tile) against the reference
//! interpreter, on LLVM and Cranelift, for the host's microkernel and
//! blocking and for a machine with tiny caches, whose blocking (64 deep,
//! two or three tiles tall and wide) makes sizes of a few dozen cross
//! every edge: depth passes, row and column blocks, partial tiles.
//! Shapes: odd sizes, batches (one per operand and
//! broadcast), operands and results transposed through strides, f32, f64,
//! f16 and bf16 (widened to f32 as they are packed, or on the bf16 dot
//! products, AMX tiles or `vdpbf16ps`, where the CPU has them: the suite
//! runs again with each turned off), and each
//! kind of epilogue (bias, activation, scale, residual, over batch loops).

use crate::backends::{Case, case, compare, pool, prepare};
use nax::pipeline::{self, Backend, FormOptions, Machine};
use nax_runtime::CallBoundary;
use rand::SeedableRng;
use rand::rngs::SmallRng;

const SIZES: &str = "dim n = 37\ndim k = 150\ndim m = 100\n";

fn product(name: &str, body: &str) -> Case {
    case(name, &format!("{SIZES}{body}"))
}

fn cases() -> Vec<Case> {
    vec![
        product("plain_f32", "def f(x: [n k], w: [k m]) -> [n m] {\n    return x @ w\n}\n"),
        product("plain_f64", "def f(x: f64[n k], w: f64[k m]) -> f64[n m] {\n    return x @ w\n}\n"),
        product("plain_bf16", "def f(x: bf16[n k], w: bf16[k m]) -> bf16[n m] {\n    return x @ w\n}\n"),
        product("f16_epilogue_transposed", "def f(x: f16[k n], w: f16[k m], c: f16[m]) -> f16[n m] {\n    return gelu(rearrange(x, k n -> n k) @ w + c)\n}\n"),
        product("b_transposed", "def f(x: [n k], w: [m k]) -> [n m] {\n    return x @ rearrange(w, m k -> k m)\n}\n"),
        product("a_transposed_f64", "def f(x: f64[k n], w: f64[k m]) -> f64[n m] {\n    return rearrange(x, k n -> n k) @ w\n}\n"),
        product("result_transposed", "def f(x: [n k], w: [k m]) -> [m n] {\n    return einsum(x, w: n k, k m -> m n)\n}\n"),
        product("batch_both", "def f(x: [3 n k], w: [3 k m]) -> [3 n m] {\n    return x @ w\n}\n"),
        product("batch_broadcast", "def f(x: [2 n k], w: [k m]) -> [2 n m] {\n    return x @ w\n}\n"),
        product("bias_gelu", "def f(x: [n k], w: [k m], c: [m]) -> [n m] {\n    return gelu(x @ w + c)\n}\n"),
        product("scale_tanh_f64", "def f(x: f64[n k], w: f64[k m]) -> f64[n m] {\n    return tanh((x @ w) * 0.25)\n}\n"),
        product("residual", "def f(x: [n k], w: [k m], r: [n m]) -> [n m] {\n    return x @ w + r\n}\n"),
        product("residual_over_batch", "def f(x: [2 n k], w: [k m], r: [2 n m], c: [m]) -> [2 n m] {\n    return relu(x @ w + c) + r\n}\n"),
        product("epilogue_transposed_result", "def f(x: [n k], w: [k m], c: [n]) -> [m n] {\n    return silu(einsum(x, w: n k, k m -> m n) + c)\n}\n"),
        // Tall enough that a CPU with AMX tiles splits B at the call.
        case(
            "tall_bf16",
            "dim n = 130\ndim k = 150\ndim m = 70\ndef f(x: bf16[n k], w: bf16[k m], c: bf16[m]) -> bf16[n m] {\n    return relu(x @ w + c)\n}\n",
        ),
        case(
            "tall_f16_transposed",
            "dim n = 130\ndim k = 150\ndim m = 70\ndef f(x: f16[n k], w: f16[m k]) -> f16[m n] {\n    return einsum(x, w: n k, m k -> m n)\n}\n",
        ),
    ]
}

/// The products above with the bf16 dot products chosen, in child
/// processes (the choice is made once per process): the AMX tiles off and
/// `vdpbf16ps` on (`NAX_AMX=0 NAX_DPBF16=1`: `vdpbf16ps` on any CPU with
/// AVX512_BF16, an Intel one included, where it does not pay), then
/// `vdpbf16ps` off too (`NAX_DPBF16=0`), so that the FMA path's half
/// floats are checked on a CPU that has either (and the CPU's own engine
/// by the test above).
#[test]
fn products_agree_with_the_interpreter_without_the_bf16_dot_products() {
    if std::env::var_os("NAX_AMX").is_some() || std::env::var_os("NAX_DPBF16").is_some() {
        return;
    }
    for (variables, path) in
        [(&[("NAX_AMX", "0"), ("NAX_DPBF16", "1")][..], "on vdpbf16ps where the CPU has it"), (&[("NAX_AMX", "0"), ("NAX_DPBF16", "0")], "on the FMA path")]
    {
        let status = std::process::Command::new(std::env::current_exe().expect("the test binary"))
            .args(["products::products_agree_with_the_interpreter_across_blocking_edges", "--exact", "--quiet"])
            .envs(variables.iter().copied())
            .status()
            .expect("the test binary runs");
        assert!(status.success(), "the products disagree {path} ({variables:?})");
    }
}

#[test]
fn products_agree_with_the_interpreter_across_blocking_edges() {
    let host = Machine::host();
    let tiny_caches = Machine { cache_bytes: [1 << 10, 8 << 10, 64 << 10], ..host };
    let mut rng = SmallRng::seed_from_u64(17);
    let mut failures = Vec::new();
    for case in cases() {
        let Some((_, graph, rewritten, args, weights)) = prepare(&case, &mut rng, false) else { unreachable!("the cases' sizes are constants") };
        let want = crate::backends::run_on(Backend::Interp, &graph, &args, &weights).unwrap_or_else(|e| panic!("{}: interp: {e}", case.name));
        for backend in [Backend::Llvm, Backend::Mlir, Backend::Cranelift] {
            for (machine, what) in [(host, "host"), (tiny_caches, "tiny caches")] {
                let target = backend.machine(machine);
                let kernels = pipeline::kernels(&rewritten, &target, FormOptions::default()).unwrap();
                assert!(!kernels.products.is_empty(), "{}: no kernel runs as a matrix product", case.name);
                let f = pipeline::compile_graph_for(rewritten.clone(), &[], backend, &target, FormOptions::default(), &mut nax::Timings::start()).unwrap();
                let call = f.signature().check(args.iter().map(nax_runtime::Value::arg).collect(), &weights).unwrap();
                let got = f.run(&call, pool()).unwrap_or_else(|e| panic!("{}: {}: {e}", case.name, backend.name()));
                if let Err(e) = compare(&format!("{} on {} ({what})", case.name, backend.name()), &got, &want, 150) {
                    failures.push(e);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A product whose B is a weight packs it at the first call and never
/// again (the store's count of packings stays), and the packed panels give
/// the interpreter's values at every call: split by rows (the parts share
/// B) and by columns (each part reads its own blocks of the panels, which
/// the split makes whole blocks), a transposed bf16 weight (a tied output
/// head), batches with an epilogue, on 2 threads, for the host's blocking
/// and tiny caches'. Where the product packs no B (a result transposed
/// through strides turns the weight into A, except on the AMX tiles, which
/// write C in any orientation; a product of one row reads B where it
/// lies), nothing is packed.
#[test]
fn weights_are_packed_once_and_read_packed_at_every_call() {
    let cases = [
        ("by_rows", "dim n = 130\ndim k = 150\ndim m = 100\nparam w: [k m]\ndef f(x: [n k]) -> [n m] {\n    return x @ w\n}\n", true),
        ("by_columns", "dim n = 37\ndim k = 150\ndim m = 700\nparam w: [k m]\ndef f(x: [n k]) -> [n m] {\n    return x @ w\n}\n", true),
        (
            "transposed_bf16_head",
            "dim n = 37\ndim k = 150\ndim m = 500\nparam w: bf16[m k]\ndef f(x: bf16[n k]) -> bf16[n m] {\n    return x @ rearrange(w, m k -> k m)\n}\n",
            true,
        ),
        (
            "batches_with_an_epilogue",
            "dim n = 37\ndim k = 150\ndim m = 100\nparam w: [k m]\nparam c: [m]\ndef f(x: [2 n k], r: [2 n m]) -> [2 n m] {\n    return gelu(x @ w + c) + r\n}\n",
            true,
        ),
        (
            "result_transposed",
            "dim n = 37\ndim k = 150\ndim m = 100\nparam w: [k m]\ndef f(x: [n k]) -> [m n] {\n    return einsum(x, w: n k, k m -> m n)\n}\n",
            nax_runtime::matrix_tiles(),
        ),
        // Products of at most four rows read a weight from strips packed once (`gemm/rows.rs`).
        ("one_row", "dim k = 150\ndim m = 100\nparam w: [k m]\ndef f(x: [1 k]) -> [1 m] {\n    return x @ w\n}\n", true),
        (
            "three_rows_transposed_bf16_head",
            "dim k = 150\ndim m = 200\nparam w: bf16[m k]\ndef f(x: bf16[3 k]) -> bf16[3 m] {\n    return x @ rearrange(w, m k -> k m)\n}\n",
            true,
        ),
    ];
    let host = Machine::host();
    let tiny_caches = Machine { cache_bytes: [1 << 10, 8 << 10, 64 << 10], ..host };
    let two = nax_runtime::ThreadPool::new(2).expect("a pool of 2 threads");
    let mut rng = SmallRng::seed_from_u64(29);
    let mut failures = Vec::new();
    for (name, source, packs) in cases {
        let Some((_, graph, rewritten, args, weights)) = prepare(&case(name, source), &mut rng, false) else { unreachable!("the cases' sizes are constants") };
        let want = crate::backends::run_on(Backend::Interp, &graph, &args, &weights).unwrap_or_else(|e| panic!("{name}: interp: {e}"));
        for backend in [Backend::Llvm, Backend::Mlir, Backend::Cranelift] {
            for (machine, what) in [(host, "host"), (tiny_caches, "tiny caches")] {
                let target = backend.machine(machine);
                let f = pipeline::compile_graph_for(rewritten.clone(), &[], backend, &target, FormOptions::default(), &mut nax::Timings::start()).unwrap();
                let bound = nax_runtime::BoundWeights::new(weights.clone());
                let mut packings = Vec::new();
                for call in 0..3 {
                    let checked = f.signature().check(args.iter().map(nax_runtime::Value::arg).collect(), &bound).unwrap();
                    let got = f.run(&checked, &two).unwrap_or_else(|e| panic!("{name}: {}: {e}", backend.name()));
                    if let Err(e) = compare(&format!("{name} on {} ({what}), call {call}", backend.name()), &got, &want, 150) {
                        failures.push(e);
                    }
                    packings.push(bound.packed_weights().packings());
                }
                let expected = if packs { packings[0] > 0 } else { packings[0] == 0 };
                if !expected || packings.iter().any(|&p| p != packings[0]) {
                    failures.push(format!("{name} on {} ({what}): packings after each call {packings:?}", backend.name()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A weight a program reads in both orientations (a training step's
/// `x @ w` and `dy @ w^T`) is packed once, in the orientation its first
/// product reads, as panels of its own size (not the AMX tiles' split of
/// an f32 into three bf16 parts, 1.5 times): the transposed product packs
/// it at its call. Both results match the interpreter at every call.
#[test]
fn a_weight_read_both_ways_is_packed_once_in_panels() {
    let source = "dim n = 130\ndim k = 150\ndim m = 100\nparam w: [k m]\ndef f(x: [n k], dy: [n m]) -> [n k] {\n    return einsum(dy, w: n m, k m -> n k) + tanh(x @ w) @ rearrange(w, k m -> m k)\n}\n";
    let mut rng = SmallRng::seed_from_u64(31);
    let Some((_, graph, rewritten, args, weights)) = prepare(&case("both_ways", source), &mut rng, false) else { unreachable!("the sizes are constants") };
    let want = crate::backends::run_on(Backend::Interp, &graph, &args, &weights).expect("interp");
    let two = nax_runtime::ThreadPool::new(2).expect("a pool of 2 threads");
    let f = pipeline::compile_graph_for(rewritten, &[], Backend::Llvm, &Machine::host(), FormOptions::default(), &mut nax::Timings::start()).unwrap();
    let bound = nax_runtime::BoundWeights::new(weights);
    for call in 0..3 {
        let checked = f.signature().check(args.iter().map(nax_runtime::Value::arg).collect(), &bound).unwrap();
        let got = f.run(&checked, &two).expect("run");
        compare(&format!("both ways, call {call}"), &got, &want, 150).unwrap();
        let store = bound.packed_weights();
        assert_eq!(store.packings(), 1, "call {call}: one packing of w");
        // f32 panels: 4 bytes an element, columns padded to the microkernel's;
        // the tiles' three bf16 parts: 6 at least.
        assert!(store.bytes() < 150 * 100 * 6, "call {call}: {} bytes of panels for 60000 of weight", store.bytes());
    }
}

/// Half-float attention runs fused (one flash kernel) and rounds only its
/// output: each element within one unit in the last place (of bf16 or
/// f16, at the exact value) of the exact attention of the same half-float
/// inputs, computed here in f64, plus f32's arithmetic where the sum
/// cancels (8 units of 2^-24 of its terms' magnitude). The kernels it
/// replaced rounded the scores and the probabilities too (as PyTorch
/// eager does): units of 2^-9 of the magnitude away. The scale, 1/3, is
/// not a power of two: it stays on the scores (the optimizer moves only a
/// power of two onto a half-float operand), where the kernel applies it in
/// f32. Causal, with partial and hidden tiles, and a decode step's three
/// rows (whose products run unpacked on widened tiles), on every CPU back
/// end.
#[test]
fn half_attention_rounds_only_its_output() {
    let attention = |dtype: &str, n: usize, mask: &str| {
        format!(
            "dim b = 2\ndim H = 2\ndim n = {n}\ndim m = 131\ndim d = 9\ndim e = 6\ndef f(q: {dtype}[b H n d], k: {dtype}[b H m d], v: {dtype}[b H m e]) -> {dtype}[b H n e] {{\n    shown = rearrange(arange(n), n -> n 1) + {mask} >= arange(m)\n    s = einsum(q, k: b H n d, b H m d -> b H n m) / sqrt(d)\n    p = softmax(masked_fill(s, !shown, -inf), m)\n    return einsum(p, v: b H n m, b H m e -> b H n e)\n}}\n"
        )
    };
    let mut rng = SmallRng::seed_from_u64(41);
    let mut failures = Vec::new();
    for (dtype, bits) in [("bf16", 8), ("f16", 11)] {
        for (n, mask) in [(70, 0), (3, 128)] {
            let name = format!("{dtype} attention of {n} rows");
            let Some((_, _, rewritten, args, weights)) = prepare(&case(&name, &attention(dtype, n, &mask.to_string())), &mut rng, false) else {
                unreachable!("the sizes are constants")
            };
            let [q, k, v] = [0, 1, 2].map(|i| match &args[i] {
                nax_runtime::Value::Tensor(t) => t.to_f64_vec(),
                nax_runtime::Value::Scalar(_) => unreachable!("q, k and v are tensors"),
            });
            let (heads, m, d, e) = (4, 131, 9, 6);
            let mut exact = Vec::new();
            for h in 0..heads {
                for i in 0..n {
                    let shown: Vec<usize> = (0..m).filter(|&j| i + mask >= j).collect();
                    let logits: Vec<f64> = shown.iter().map(|&j| (0..d).map(|c| q[(h * n + i) * d + c] * k[(h * m + j) * d + c]).sum::<f64>() / 3.0).collect();
                    let top = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let weights: Vec<f64> = logits.iter().map(|l| (l - top).exp()).collect();
                    let total: f64 = weights.iter().sum();
                    for c in 0..e {
                        let terms = shown.iter().zip(&weights).map(|(&j, w)| (w * v[(h * m + j) * e + c], w * v[(h * m + j) * e + c].abs()));
                        let (sum, magnitude) = terms.fold((0.0, 0.0), |(s, a), (t, u)| (s + t, a + u));
                        exact.push((sum / total, magnitude / total));
                    }
                }
            }
            // One unit in the last place of a float of `bits` significand bits at `x` (f16's subnormals' at the smallest).
            let ulp = |x: f64| 2f64.powi(x.abs().log2().floor().max(-14.0) as i32 + 1 - bits);
            let target = nax::pipeline::Backend::Llvm.machine(Machine::host());
            let kernels = pipeline::kernels(&rewritten, &target, FormOptions::default()).unwrap();
            assert!(kernels.kernels.iter().any(|k| k.schedule.attention.is_some()), "{name}: the attention is not fused");
            for backend in [Backend::Llvm, Backend::Mlir, Backend::Cranelift] {
                let target = backend.machine(Machine::host());
                let f = pipeline::compile_graph_for(rewritten.clone(), &[], backend, &target, FormOptions::default(), &mut nax::Timings::start()).unwrap();
                let call = f.signature().check(args.iter().map(nax_runtime::Value::arg).collect(), &weights).unwrap();
                let got = f.run(&call, pool()).unwrap_or_else(|e| panic!("{name}: {}: {e}", backend.name())).to_f64_vec();
                // Allowed: a unit at the value, and f32's arithmetic (a few
                // units of 2^-24 of the terms' magnitude, where the sum cancels).
                let worst = got
                    .iter()
                    .zip(&exact)
                    .map(|(g, (x, magnitude))| (g - x).abs() / (ulp(*x) + 8.0 * f64::from(f32::EPSILON) / 2.0 * magnitude))
                    .fold(0.0, f64::max);
                if worst.is_nan() || worst > 1.0 {
                    failures.push(format!("{name} on {}: {worst} units from the exact attention", backend.name()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
