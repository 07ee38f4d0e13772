//! Matrix products through nax's microkernels (cache blocking, packing,
//! the microkernel's write-back, epilogues per tile) against the reference
//! interpreter, on LLVM and Cranelift, for the host's microkernel and
//! blocking and for a machine with tiny caches, whose blocking (64 deep,
//! two or three tiles tall and wide) makes sizes of a few dozen cross
//! every edge: depth passes, row and column blocks, partial tiles.
//! Shapes: odd sizes, batches (one per operand and
//! broadcast), operands and results transposed through strides, f32, f64,
//! f16 and bf16 (widened to f32 as they are packed), and each kind of epilogue (bias, activation, scale, residual, over
//! batch loops).

use crate::backends::{Case, case, compare, pool, prepare};
use nax::pipeline::{self, Backend, Target};
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
    ]
}

#[test]
fn products_agree_with_the_interpreter_across_blocking_edges() {
    let host = Target::host();
    let tiny_caches = Target { cache_bytes: [1 << 10, 8 << 10, 64 << 10], ..host };
    let mut rng = SmallRng::seed_from_u64(17);
    let mut failures = Vec::new();
    for case in cases() {
        let Some((_, graph, rewritten, args, weights)) = prepare(&case, &mut rng, false) else { unreachable!("the cases' sizes are constants") };
        let want = crate::backends::run_on(Backend::Interp, &graph, &args, &weights).unwrap_or_else(|e| panic!("{}: interp: {e}", case.name));
        for backend in [Backend::Llvm, Backend::Mlir, Backend::Cranelift] {
            for (machine, what) in [(host, "host"), (tiny_caches, "tiny caches")] {
                let target = backend.narrow(machine);
                let kernels = pipeline::kernels(&rewritten, &target).unwrap();
                assert!(!kernels.products.is_empty(), "{}: no kernel runs as a matrix product", case.name);
                let f = pipeline::compile_graph_for(rewritten.clone(), &[], backend, &target, &mut nax::Timings::start()).unwrap();
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
