//! Optimizer speed: equality saturation and extraction (`nax_passes::
//! optimize`) on the transformer block and on the last function of a chain
//! of N functions, each calling the one before and permuting, broadcasting
//! and normalising its result (N = 100, 200, 400 inlines to 4N graph
//! nodes, the long chains on which egg's own extractor was quadratic).
//!
//!     cargo bench --bench optimize

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::path::Path;

/// A chain of `n` functions; the last calls every other one, inlined.
fn chain(n: usize) -> String {
    let mut source = String::from("dim n = 64\ndim m = 32\ndef f0(x: [n m]) -> [n m] {\n    return x * 2.0\n}\n");
    for i in 1..n {
        source.push_str(&format!(
            "def f{i}(x: [n m]) -> [n m] {{\n    y = rearrange(f{}(x), n m -> m n)\n    return softmax(rearrange(y, m n -> n m), m) + repeat(sum(x, m), n -> n m)\n}}\n",
            i - 1
        ));
    }
    source
}

fn graph(source: &str, function: &str) -> nax_ir::Graph {
    let checked = nax_front::check_source(source);
    assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
    nax_lower::lower(&checked.module, function).expect("lower")
}

fn optimize(c: &mut Criterion) {
    let mut group = c.benchmark_group("optimize");
    group.sample_size(10);
    let block = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/transformer_block.nax")).expect("the example");
    let g = graph(&block, "block");
    group.bench_function("block", |b| b.iter(|| nax_passes::optimize(&g).expect("optimize")));
    for n in [100, 200, 400] {
        let g = graph(&chain(n), &format!("f{}", n - 1));
        group.bench_with_input(BenchmarkId::new("chain", n), &g, |b, g| b.iter(|| nax_passes::optimize(g).expect("optimize")));
    }
    group.finish();
}

criterion_group!(benches, optimize);
criterion_main!(benches);
