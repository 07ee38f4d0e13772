//! Checker speed: parse and check generated modules of 5,000, 10,000 and
//! 20,000 lines (functions using patterns, einsums, matmuls and calls).
//! The target is under 1 second for 20,000 lines on a 2-core machine; the
//! `docs/src/performance.md` records the measured times.
//!
//!     cargo bench --bench check

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[path = "../tests/support/generate.rs"]
#[allow(dead_code)] // the benchmark uses only the large-module generator
mod generate;

fn check_modules(c: &mut Criterion) {
    let mut group = c.benchmark_group("check");
    group.sample_size(10);
    for lines in [5_000, 10_000, 20_000] {
        let source = generate::large_module(lines, 7);
        let actual = source.lines().count();
        let checked = nax_front::check_source(&source);
        assert!(!checked.has_errors(), "the generated module must check clean");
        group.throughput(Throughput::Elements(actual as u64));
        group.bench_with_input(BenchmarkId::from_parameter(lines), &source, |b, src| {
            b.iter(|| nax_front::check_source(src));
        });
    }
    group.finish();
}

criterion_group!(benches, check_modules);
criterion_main!(benches);
