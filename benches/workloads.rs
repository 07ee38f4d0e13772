//! Per-workload run time of nax's native code (bench/WORKLOADS.md): one
//! criterion group per workload, the nax side (the LLVM back end, the
//! default, optimizer on) with id `nax`, so results land in
//! `target/criterion/<workload>/nax/`, and beside it the MLIR back end
//! (id `nax-mlir`) on the same kernels. `benches/compare.py` measures the
//! same workloads, set up by the same code (`benches/support/workloads.rs`),
//! through `benches/worker.rs`, interleaved with PyTorch.
//!
//!     cargo bench --bench workloads [-- NAME]
//!     NAX_WORKLOAD=NAME cargo bench --bench workloads   # that one alone
//!
//! Workloads: every file of `examples/workloads/` (the WORKLOADS.md
//! workloads at their sizes; weights, as `block` has, are seeded values),
//! plus `elementwise` (`x + y` on two 4096 x 4096 tensors: one elementwise
//! kernel with no broadcasting, the memory-bandwidth reference). Each call
//! allocates its output, as a user's call does.

use criterion::{Criterion, criterion_group, criterion_main};
use nax::pipeline::Backend;
use nax_runtime::ThreadPool;

#[path = "support/workloads.rs"]
mod workloads;

/// The allocator of the `nax` command: freed outputs' pages are reused.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn workload(c: &mut Criterion, w: &workloads::Workload) {
    let pool = ThreadPool::new(0).expect("a thread pool");
    let mut group = c.benchmark_group(&w.name);
    group.sample_size(10);
    for (id, backend) in [("nax", Backend::Llvm), ("nax-mlir", Backend::Mlir)] {
        let (f, _) = w.compile(backend);
        let program = w.program(f);
        let call = program.check();
        group.bench_function(id, |b| b.iter(|| program.run(&call, &pool)));
    }
    group.finish();
}

fn workloads(c: &mut Criterion) {
    // NAX_WORKLOAD=NAME prepares and measures that workload alone, so that
    // no other workload's memory shapes its page layout.
    let only = std::env::var("NAX_WORKLOAD").ok();
    for w in workloads::all() {
        if only.as_deref().is_none_or(|o| o == w.name) {
            workload(c, &w);
        }
    }
}

criterion_group!(benches, workloads);
criterion_main!(benches);
