//! The host API's own cost: a call of a tiny compiled function (`x + 1.0`
//! on four elements) through `nax::Function::call`, arguments by name, a
//! borrowed view, the call-boundary check, the driver and the returned
//! tensor included; then the check alone and a checked call's run alone,
//! to see where the time goes. The engine has its default pool (one
//! thread per core); a call this small runs on the calling thread.
//!
//!     cargo bench --bench api

use criterion::{Criterion, criterion_group, criterion_main};
use nax::{Arg, Engine, TensorView};

fn overhead(c: &mut Criterion) {
    let program = Engine::new().compile("def tiny(x: [n]) -> [n] {\n    return x + 1.0\n}\n").expect("compile");
    let f = program.function("tiny").expect("tiny");
    let x = [1f32, 2.0, 3.0, 4.0];
    let names = vec![Some("n".to_string())];
    let mut group = c.benchmark_group("api");
    group.bench_function("call_tiny", |b| b.iter(|| f.call([("x", Arg::from(TensorView::new(&x, vec![4], names.clone()).expect("view")))]).expect("call")));
    group.bench_function("check_tiny", |b| {
        b.iter(|| f.check(vec![Arg::from(TensorView::new(&x, vec![4], names.clone()).expect("view"))]).expect("check").sizes().len())
    });
    let call = f.check(vec![Arg::from(TensorView::new(&x, vec![4], names.clone()).expect("view"))]).expect("check");
    group.bench_function("run_tiny", |b| b.iter(|| f.run(&call).expect("run")));
    group.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
