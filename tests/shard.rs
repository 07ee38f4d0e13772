//! One program over several processes (SHARDING.md), the ranks as threads
//! of this process over an in-process engine (`Hub`, below: the tests'
//! stand-in for torch.distributed or MPI): every rule of the contract (a
//! contraction and a reduction over a split axis, softmax along one, a
//! regrouping of one, `take` along one, replicated operands, the name
//! rule through calls and `as`) gives the unsharded program's values on
//! every back end, bounds-checked too; GPT-2's tensor-parallel layout is
//! Megatron's; each error is raised before anything runs; a rank that
//! fails ends the call on the others with an error, never a hang.

use nax::{Arg, Backend, CollectiveError, Collectives, DType, Engine, Group, HostTensor, Mesh, ReduceOp, Sharding};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The data ranks have deposited for one collective call of one group.
struct Slot {
    blocks: Vec<Option<Vec<u8>>>,
    readers: usize,
}

/// An in-process engine: ranks are threads, a collective is a rendezvous
/// of its group's ranks; a rank that does not come within the timeout
/// fails the others' call.
struct Hub {
    size: usize,
    slots: Mutex<HashMap<(Vec<usize>, u64), Slot>>,
    ready: Condvar,
    timeout: Duration,
}

/// One rank's handle on a [`Hub`].
pub(crate) struct Rank {
    hub: Arc<Hub>,
    rank: usize,
    calls: Mutex<HashMap<Vec<usize>, u64>>,
}

impl Rank {
    /// Deposits `data` for the next collective of `group` and gives every
    /// member's, in the group's order.
    fn rendezvous(&self, group: &[usize], data: &[u8]) -> Result<Vec<Vec<u8>>, CollectiveError> {
        let seq = {
            let mut calls = self.calls.lock().unwrap();
            let c = calls.entry(group.to_vec()).or_insert(0);
            *c += 1;
            *c
        };
        let key = (group.to_vec(), seq);
        let me = group
            .iter()
            .position(|&r| r == self.rank)
            .ok_or_else(|| CollectiveError { message: format!("rank {} is not in the group {group:?}", self.rank) })?;
        let mut slots = self.hub.slots.lock().unwrap();
        slots.entry(key.clone()).or_insert_with(|| Slot { blocks: vec![None; group.len()], readers: 0 }).blocks[me] = Some(data.to_vec());
        self.hub.ready.notify_all();
        let deadline = std::time::Instant::now() + self.hub.timeout;
        loop {
            let slot = slots.get(&key).expect("a slot stays until every member read it");
            if slot.blocks.iter().all(Option::is_some) {
                break;
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(CollectiveError { message: format!("rank {}: the group {group:?} did not meet within {:?}", self.rank, self.hub.timeout) });
            }
            slots = self.hub.ready.wait_timeout(slots, left).unwrap().0;
        }
        let slot = slots.get_mut(&key).expect("checked above");
        let all: Vec<Vec<u8>> = slot.blocks.iter().map(|b| b.clone().unwrap_or_default()).collect();
        slot.readers += 1;
        if slot.readers == group.len() {
            slots.remove(&key);
        }
        Ok(all)
    }
}

/// Elementwise `op` of `b` into `a`, as `dtype`s.
fn combine(dtype: DType, op: ReduceOp, a: &mut [u8], b: &[u8]) -> Result<(), CollectiveError> {
    fn each<const N: usize>(a: &mut [u8], b: &[u8], f: impl Fn([u8; N], [u8; N]) -> [u8; N]) {
        for (x, y) in a.chunks_exact_mut(N).zip(b.chunks_exact(N)) {
            let r = f(x.try_into().unwrap(), y.try_into().unwrap());
            x.copy_from_slice(&r);
        }
    }
    macro_rules! float {
        ($t:ty, $n:literal) => {
            each::<$n>(a, b, |x, y| {
                let (x, y) = (<$t>::from_le_bytes(x), <$t>::from_le_bytes(y));
                match op {
                    ReduceOp::Sum => x + y,
                    ReduceOp::Prod => x * y,
                    ReduceOp::Max => x.max(y),
                    ReduceOp::Min => x.min(y),
                }
                .to_le_bytes()
            })
        };
    }
    match dtype {
        DType::F32 => float!(f32, 4),
        DType::F64 => float!(f64, 8),
        DType::I64 => float!(i64, 8),
        DType::I32 => float!(i32, 4),
        other => return Err(CollectiveError { message: format!("the test engine does not reduce {}", other.as_str()) }),
    }
    Ok(())
}

impl Collectives for Rank {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.hub.size
    }

    fn all_reduce(&self, group: Group<'_>, dtype: DType, op: ReduceOp, data: &mut [u8]) -> Result<(), CollectiveError> {
        let all = self.rendezvous(group.ranks, data)?;
        data.copy_from_slice(&all[0]);
        for other in &all[1..] {
            combine(dtype, op, data, other)?;
        }
        Ok(())
    }

    fn all_gather(&self, group: Group<'_>, _dtype: DType, block: &[u8], out: &mut [u8]) -> Result<(), CollectiveError> {
        let all = self.rendezvous(group.ranks, block)?;
        let joined: Vec<u8> = all.concat();
        if joined.len() != out.len() {
            return Err(CollectiveError { message: format!("gathered {} bytes into {}", joined.len(), out.len()) });
        }
        out.copy_from_slice(&joined);
        Ok(())
    }

    /// The engine's own: only this rank's part is combined.
    fn reduce_scatter(&self, group: Group<'_>, dtype: DType, op: ReduceOp, data: &[u8], out: &mut [u8]) -> Result<(), CollectiveError> {
        let all = self.rendezvous(group.ranks, data)?;
        let me = group.ranks.iter().position(|&r| r == self.rank).unwrap_or_default();
        let len = out.len();
        let part = |d: &[u8]| d[me * len..(me + 1) * len].to_vec();
        out.copy_from_slice(&part(&all[0]));
        for other in &all[1..] {
            combine(dtype, op, out, &part(other))?;
        }
        Ok(())
    }
}

/// Runs `f` on every rank of a `size`-process engine, each on a thread.
fn on_ranks<T: Send>(size: usize, timeout: Duration, f: impl Fn(Arc<Rank>) -> T + Sync) -> Vec<T> {
    let hub = Arc::new(Hub { size, slots: Mutex::default(), ready: Condvar::new(), timeout });
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..size)
            .map(|rank| {
                let handle = Arc::new(Rank { hub: Arc::clone(&hub), rank, calls: Mutex::default() });
                let f = &f;
                s.spawn(move || f(handle))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a rank panicked")).collect()
    })
}

/// A tensor of random values in [-1, 1) (integers in [0, bound) for `I64`).
fn random(rng: &mut SmallRng, dtype: DType, shape: &[usize], names: &str, bound: i64) -> HostTensor {
    let n: usize = shape.iter().product();
    let values: Vec<f64> = (0..n).map(|_| if dtype == DType::I64 { rng.random_range(0..bound) as f64 } else { rng.random_range(-1.0..1.0) }).collect();
    let names = names.split_whitespace().map(|s| Some(s.to_string())).collect();
    HostTensor::from_f64(dtype, shape.to_vec(), names, &values).unwrap()
}

/// The block of `t` that `rank` passes: along every axis whose name is
/// split, its coordinate's block.
fn block_for(t: &HostTensor, mesh: &Mesh, sharding: &Sharding, rank: usize) -> HostTensor {
    let coords = mesh.coordinates(rank).unwrap();
    let mut shape = t.shape().to_vec();
    let mut starts = vec![0; shape.len()];
    for (axis, name) in t.names().iter().enumerate() {
        let Some(m) = name.as_deref().and_then(|n| sharding.mesh_axis_of(n)).and_then(|m| mesh.axis(m)) else { continue };
        shape[axis] /= mesh.size(m);
        starts[axis] = coords[m] * shape[axis];
    }
    let values = t.to_f64_vec();
    let out: Vec<f64> = (0..shape.iter().product()).map(|flat| values[place(flat, &shape, &starts, t.shape())]).collect();
    HostTensor::from_f64(t.dtype(), shape, t.names().to_vec(), &out).unwrap()
}

/// Where element `flat` (row-major) of a block of shape `block`, starting
/// at `starts`, lies in the row-major whole of shape `whole`.
fn place(flat: usize, block: &[usize], starts: &[usize], whole: &[usize]) -> usize {
    let (mut rest, mut index, mut stride) = (flat, 0, 1);
    for a in (0..block.len()).rev() {
        index += (starts[a] + rest % block[a]) * stride;
        rest /= block[a];
        stride *= whole[a];
    }
    index
}

/// A whole result put together from every rank's block (each written
/// where its offsets say; ranks holding the same block agree).
fn assemble(blocks: &[nax::ShardedResult]) -> (Vec<usize>, Vec<f64>) {
    let shape = blocks[0].global_shape.clone();
    let mut out = vec![f64::NAN; shape.iter().product()];
    for b in blocks {
        let local = b.tensor.shape();
        let values = b.tensor.to_f64_vec();
        for (flat, v) in values.iter().enumerate() {
            out[place(flat, local, &b.offsets, &shape)] = *v;
        }
    }
    (shape, out)
}

/// Checks that `function` of `source`, split as `sharding` over `mesh`,
/// gives on every back end the unsharded values (within `tolerance`,
/// relative to the largest magnitude), every rank's results put together;
/// gives the plan.
fn agrees(source: &str, function: &str, split: (&str, &str), args: &[(&str, HostTensor)], weights: &[(&str, HostTensor)]) -> nax::ShardedPlan {
    let mesh = Mesh::parse(split.0).unwrap();
    let sharding = Sharding::parse(split.1).unwrap();
    let with = |backend: Backend, checked: bool| {
        let program = Engine::new().backend(backend).check_bounds(checked).threads(1).compile(source).unwrap();
        program.with_weights(weights.iter().map(|(n, t)| (n.to_string(), t.clone()))).unwrap()
    };
    let whole = with(Backend::Interp, false).function(function).unwrap();
    let expected = whole.call_results(args.iter().map(|(n, t)| (*n, Arg::from(t.view())))).unwrap();
    let mut failures = Vec::new();
    // Every rank's results, put together, against the unsharded ones.
    let mut compare = |label: String, per_rank: Vec<Vec<nax::ShardedResult>>| {
        for (i, (name, want)) in expected.iter().enumerate() {
            let blocks: Vec<nax::ShardedResult> = per_rank.iter().map(|out| out[i].clone()).collect();
            let (shape, got) = assemble(&blocks);
            assert_eq!(shape, want.shape(), "{function}'s {name} on {label}");
            let want = want.to_f64_vec();
            let scale = want.iter().filter(|v| v.is_finite()).fold(1e-30f64, |m, v| m.max(v.abs()));
            // Equal infinities and NaN where the unsharded value is NaN agree; nothing else does.
            let close = |g: f64, w: f64| g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-5 * scale;
            let bad: Vec<usize> = got.iter().zip(&want).enumerate().filter(|(_, (g, w))| !close(**g, **w)).map(|(k, _)| k).collect();
            if let Some(&k) = bad.first() {
                failures.push(format!(
                    "{name} on {label}: {} of {} elements differ, the first {k}: {}, unsharded {} (largest {scale})",
                    bad.len(),
                    want.len(),
                    got[k],
                    want[k]
                ));
            }
        }
    };
    let mut plan = None;
    for (backend, checked) in crate::backends::backends() {
        let program = with(backend, checked);
        let results = on_ranks(mesh.processes(), Duration::from_secs(60), |rank| {
            let r = rank.rank;
            let f = program.sharded(function, &mesh, &sharding, rank).unwrap_or_else(|e| panic!("{} ({}): {e}", function, backend.name()));
            let blocks: Vec<HostTensor> = args.iter().map(|(_, t)| block_for(t, &mesh, &sharding, r)).collect();
            let out = f
                .call_results(args.iter().zip(&blocks).map(|((n, _), b)| (*n, Arg::from(b.view()))))
                .unwrap_or_else(|e| panic!("{function} on {}: {e}", backend.name()));
            (out.into_iter().map(|(_, r)| r).collect(), f.plan().clone())
        });
        plan = Some(results[0].1.clone());
        compare(format!("{}{}", backend.name(), crate::backends::checked_label(checked)), results.into_iter().map(|(out, _)| out).collect());
    }
    // The same through the C ABI: a library built split, each rank reading its blocks of the weights file.
    let library = crate::shard_library::ShardedLibrary::build(source, &["--mesh", split.0, "--shard", split.1], weights);
    let results = on_ranks(mesh.processes(), Duration::from_secs(60), |rank| {
        let blocks: Vec<(&str, HostTensor)> = args.iter().map(|(n, t)| (*n, block_for(t, &mesh, &sharding, rank.rank))).collect();
        let mut calls = library.call(&rank, (function, expected.len()), &blocks, 1).unwrap_or_else(|e| panic!("{function} through the C library: {e:?}"));
        calls.remove(0)
    });
    compare("the C library (nax build --mesh)".into(), results);
    assert!(failures.is_empty(), "{function} split as {sharding} over {mesh}:\n{}", failures.join("\n"));
    plan.expect("at least one back end")
}

#[test]
fn a_contraction_over_a_split_axis_is_summed_across_the_ranks() {
    let mut rng = SmallRng::seed_from_u64(1);
    let x = random(&mut rng, DType::F32, &[3, 8], "n k", 0);
    let w = random(&mut rng, DType::F32, &[8, 6], "k m", 0);
    let source = "def f(x: [n k], w: [k m]) -> [n m] {\n    return x @ w\n}\n";
    let plan = agrees(source, "f", ("tp=2", "k=tp"), &[("x", x.clone()), ("w", w.clone())], &[]);
    assert_eq!(plan.exchange_counts(), (1, 0, 0));
    // Split along a kept axis instead: nothing moves.
    let plan = agrees(source, "f", ("tp=2", "m=tp"), &[("x", x.clone()), ("w", w.clone())], &[]);
    assert_eq!(plan.exchange_counts(), (0, 0, 0));
    // A sum over the mesh axis whose result is then split on it (the
    // product's axis renamed, in a call, to a split name): a
    // reduce-scatter, each rank receiving only its block.
    let renamed = "def g(y: [n m]) -> [n m] {\n    return y * 2.0\n}\n\
        def f(x: [n k], w: [k j]) -> [n j] {\n    return g(x @ w) + mean(x, k)\n}\n";
    let w = HostTensor::from_f64(DType::F32, w.shape().to_vec(), vec![Some("k".into()), Some("j".into())], &w.to_f64_vec()).unwrap();
    for mesh in ["tp=2", "dp=2,tp=2"] {
        let plan = agrees(renamed, "f", (mesh, "k=tp,m=tp"), &[("x", x.clone()), ("w", w.clone())], &[]);
        assert_eq!((plan.exchange_counts(), plan.reduce_scatters()), ((1, 0, 0), 1), "{mesh}");
    }
    // An engine without a reduce-scatter of its own: the default, an
    // all-reduce of which each rank keeps its part, gives the same.
    struct NoScatter(Arc<Rank>);
    impl Collectives for NoScatter {
        fn rank(&self) -> usize {
            self.0.rank
        }
        fn size(&self) -> usize {
            self.0.size()
        }
        fn all_reduce(&self, group: Group<'_>, dtype: DType, op: ReduceOp, data: &mut [u8]) -> Result<(), CollectiveError> {
            self.0.all_reduce(group, dtype, op, data)
        }
        fn all_gather(&self, group: Group<'_>, dtype: DType, block: &[u8], out: &mut [u8]) -> Result<(), CollectiveError> {
            self.0.all_gather(group, dtype, block, out)
        }
    }
    let (mesh, sharding) = (Mesh::parse("tp=2").unwrap(), Sharding::parse("k=tp,m=tp").unwrap());
    let program = Engine::new().backend(Backend::Llvm).compile(renamed).unwrap();
    let blocks = on_ranks(2, Duration::from_secs(60), |rank| {
        let r = rank.rank;
        let f = program.sharded("f", &mesh, &sharding, Arc::new(NoScatter(rank))).unwrap();
        let (xb, wb) = (block_for(&x, &mesh, &sharding, r), block_for(&w, &mesh, &sharding, r));
        f.call_results([("x", Arg::from(xb.view())), ("w", Arg::from(wb.view()))]).unwrap().remove(0).1
    });
    let whole = Engine::new().backend(Backend::Interp).compile(renamed).unwrap().function("f").unwrap();
    let want = whole.call([("x", Arg::from(x.view())), ("w", Arg::from(w.view()))]).unwrap().to_f64_vec();
    let (_, got) = assemble(&blocks);
    assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-5), "{got:?} {want:?}");
}

#[test]
fn reductions_and_statistics_along_a_split_axis_come_from_all_reduced_partial_ones() {
    let mut rng = SmallRng::seed_from_u64(2);
    let x = random(&mut rng, DType::F32, &[2, 3, 8], "b n D", 0);
    let source = "dim D = 8\n\
        def norm(x: [b n D]) -> [b n D] {\n    xc = x - mean(x, D)\n    return xc * rsqrt(mean(xc * xc, D) + 1e-5)\n}\n\
        def peaks(x: [b n D]) -> (hi: [b n], lo: [b n], total: [b n]) {\n    return max(x, D), min(x, D), sum(x, D)\n}\n";
    let plan = agrees(source, "norm", ("tp=4", "D=tp"), &[("x", x.clone())], &[]);
    assert_eq!(plan.exchange_counts(), (2, 0, 0), "two statistics, each all-reduced");
    let plan = agrees(source, "peaks", ("tp=2", "D=tp"), &[("x", x)], &[]);
    assert_eq!(plan.exchange_counts(), (3, 0, 0));
}

#[test]
fn softmax_and_its_siblings_along_a_split_axis_come_from_the_ranks_statistics_and_keep_the_rank_block() {
    let mut rng = SmallRng::seed_from_u64(3);
    let mut values = random(&mut rng, DType::F32, &[4, 6], "n k", 0).to_f64_vec();
    // Masked entries, a row masked on one rank's block, a row masked whole.
    for k in [1, 3, 4] {
        values[k] = f64::NEG_INFINITY;
    }
    values[6..9].fill(f64::NEG_INFINITY);
    values[18..24].fill(f64::NEG_INFINITY);
    let x = HostTensor::from_f64(DType::F32, vec![4, 6], vec![Some("n".into()), Some("k".into())], &values).unwrap();
    let source = "def f(x: [n k]) -> (p: Prob(k)[n k], lp: LogProb(k)[n k], lse: [n]) {\n    return softmax(x, k), log_softmax(x, k), logsumexp(x, k)\n}\n";
    // One all-gather of one number per row and rank for each of the three.
    let plan = agrees(source, "f", ("tp=2", "k=tp"), &[("x", x.clone())], &[]);
    assert_eq!(plan.exchange_counts(), (0, 3, 0));
    let plan = agrees(source, "f", ("tp=3", "k=tp"), &[("x", x.clone())], &[]);
    assert_eq!(plan.exchange_counts(), (0, 3, 0));
    // Along another axis than the split one: nothing moves.
    let plan = agrees(source, "f", ("tp=2", "n=tp"), &[("x", x.clone())], &[]);
    assert_eq!(plan.exchange_counts(), (0, 0, 0));
    // bf16 values are gathered, the fused kernel keeping its precision.
    let bf16 = "def f(x: bf16[n k]) -> bf16[n] {\n    return logsumexp(x, k)\n}\n";
    let program = Engine::new().backend(Backend::Interp).compile(bf16).unwrap();
    let plan = program.plan("f", &Mesh::parse("tp=2").unwrap(), &Sharding::parse("k=tp").unwrap()).unwrap();
    assert!(plan.contains("all-gather") && plan.contains("collectives per call: 1 (0 all-reduces, 1 all-gathers)"), "{plan}");
}

#[test]
fn a_regrouping_keeps_a_split_that_lands_on_one_axis_and_gathers_one_that_does_not() {
    let mut rng = SmallRng::seed_from_u64(4);
    let x = random(&mut rng, DType::F32, &[4, 3, 2], "a b c", 0);
    let outer = "def f(x: [a b c]) -> [e c] {\n    return rearrange(x, a b c -> (a b) c) as [e c]\n}\n";
    let plan = agrees(outer, "f", ("tp=2", "a=tp"), &[("x", x.clone())], &[]);
    assert_eq!(plan.exchange_counts(), (0, 0, 0), "the outer axis of a group splits the group");
    let inner = "def f(x: [a b c]) -> [e c] {\n    return rearrange(x, a b c -> (b a) c) as [e c]\n}\n";
    let plan = agrees(inner, "f", ("tp=2", "a=tp"), &[("x", x)], &[]);
    assert_eq!(plan.exchange_counts().1, 1, "an inner axis is gathered first");
}

#[test]
fn take_along_a_split_axis_looks_up_each_rank_block_and_indices_keep_their_split() {
    let mut rng = SmallRng::seed_from_u64(5);
    let table = random(&mut rng, DType::F32, &[6, 4], "V D", 0);
    let ids = random(&mut rng, DType::I64, &[2, 4], "b n", 6);
    let source = "dim V = 6\ndim D = 4\nparam table: [V D]\ndef f(ids: Int[b n]) -> [b n D] {\n    return take(table, ids, V)\n}\n";
    // Megatron's vocabulary-parallel embedding: the rows each rank holds,
    // zeros for the others, summed; the block's first row from `arange`'s block.
    let plan = agrees(source, "f", ("tp=2", "V=tp"), &[("ids", ids.clone())], &[("table", table.clone())]);
    assert_eq!(plan.exchange_counts(), (1, 0, 1));
    assert_eq!(plan.weights[0].splits, [Some(nax_contract::shard::Split { mesh_axis: 0, parts: 2, outer: 1 }), None], "the rank binds its block of the table");
    let plan = agrees(source, "f", ("tp=3", "V=tp"), &[("ids", ids.clone())], &[("table", table.clone())]);
    assert_eq!(plan.exchange_counts(), (1, 0, 1));
    // Indices split too (over another mesh axis): still no table moves.
    let plan = agrees(source, "f", ("dp=2,tp=2", "b=dp,V=tp"), &[("ids", ids.clone())], &[("table", table.clone())]);
    assert_eq!(plan.exchange_counts().1, 0);
    let plan = agrees(source, "f", ("dp=2", "b=dp"), &[("ids", ids)], &[("table", table)]);
    assert_eq!(plan.exchange_counts(), (0, 0, 0));
}

#[test]
fn replicated_operands_are_read_at_the_rank_block_and_the_split_follows_calls_and_as() {
    let mut rng = SmallRng::seed_from_u64(6);
    let x = random(&mut rng, DType::F32, &[4, 6], "n K", 0);
    let bias = random(&mut rng, DType::F32, &[6], "K", 0);
    let source = "dim K = 6\nparam bias: [K]\n\
        def shift(v: [r c], b: [c]) -> [r c] {\n    return v + b\n}\n\
        def f(x: [n K]) -> [n j] {\n    y = shift(x, bias) * 2.0\n    return (y + arange(K) as [K]) as [n j]\n}\n";
    let plan = agrees(source, "f", ("tp=3", "K=tp"), &[("x", x)], &[("bias", bias)]);
    // `arange` is computed whole and cut; the bias is bound as the rank's block.
    assert_eq!(plan.exchange_counts(), (0, 0, 1));
    assert!(plan.weights.iter().all(|w| w.splits == [Some(nax_contract::shard::Split { mesh_axis: 0, parts: 3, outer: 1 })]));
}

#[test]
fn a_large_product_left_whole_on_every_rank_is_split_along_its_contracted_axis() {
    // A tied embedding and head around a Megatron MLP: splitting `F` leaves
    // the head (`[b n D] x [V D]`, V odd) whole on every rank; the compiler
    // splits its `D` instead: each rank reads its columns of `wte`, the
    // looked-up rows are all-gathered, the head's partial products
    // all-reduced. Below 128 along `D` it is left whole.
    let source = |d: usize| {
        format!(
            "dim V = 601\ndim D = {d}\ndim F = 256\nparam wte: [V D]\nparam w1: [D F]\nparam w2: [F D]\n\
            def f(tokens: Int[b n]) -> [b n V] {{\n    x = take(wte, tokens, V)\n    h = x + relu(x @ w1) @ w2\n    return einsum(h, wte: b n D, V D -> b n V)\n}}\n"
        )
    };
    let mut rng = SmallRng::seed_from_u64(12);
    let tokens = random(&mut rng, DType::I64, &[2, 3], "b n", 601);
    for d in [128, 64] {
        let weights = [
            ("wte", random(&mut rng, DType::F32, &[601, d], "V D", 0)),
            ("w1", random(&mut rng, DType::F32, &[d, 256], "D F", 0)),
            ("w2", random(&mut rng, DType::F32, &[256, d], "F D", 0)),
        ];
        for (mesh, sharding, parts) in [("tp=2", "F=tp", 2), ("tp=4", "F=tp", 4), ("dp=2,tp=2", "b=dp,F=tp", 2)] {
            let plan = agrees(&source(d), "f", (mesh, sharding), &[("tokens", tokens.clone())], &weights);
            let wte = plan.weights.iter().find(|w| w.source == "wte").expect("wte is bound");
            let tp = mesh.split(',').count() - 1;
            if d == 128 {
                // The MLP's and the head's all-reduces, the rows gathered, the head's operand cut.
                assert_eq!(plan.exchange_counts(), (2, 1, 1), "{mesh}");
                assert_eq!(wte.splits, [None, Some(nax_contract::shard::Split { mesh_axis: tp, parts, outer: 1 })], "{mesh}");
                assert_eq!(plan.weights.iter().filter(|w| w.source == "wte").count(), 1, "{mesh}: wte is bound once, as the rank's block");
            } else {
                assert_eq!(plan.exchange_counts(), (1, 0, 0), "{mesh}");
                assert!(wte.splits.iter().all(Option::is_none), "{mesh}");
            }
        }
    }
}

/// GPT-2 (examples/gpt2) with small dims: the model's own source.
fn small_gpt2() -> String {
    let source = std::fs::read_to_string(crate::support::root().join("examples/gpt2/gpt2.nax")).unwrap();
    let dims = [("L", "2"), ("D", "32"), ("H", "4"), ("V", "40"), ("P", "16")];
    source
        .lines()
        .map(|line| match dims.iter().find(|(d, _)| line.starts_with(&format!("dim {d} "))) {
            Some((d, v)) => format!("dim {d} = {v}"),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Random GPT-2 weights for [`small_gpt2`]'s dims.
fn small_gpt2_weights(rng: &mut SmallRng) -> Vec<(&'static str, HostTensor)> {
    let (l, d, f, v, p) = (2, 32, 128, 40, 16);
    let mut w = |name: &'static str, shape: &[usize]| {
        let n: usize = shape.iter().product();
        let values: Vec<f64> = (0..n).map(|_| rng.random_range(-0.2..0.2)).collect();
        (name, HostTensor::from_f64(DType::F32, shape.to_vec(), vec![None; shape.len()], &values).unwrap())
    };
    vec![
        w("wte", &[v, d]),
        w("wpe", &[p, d]),
        w("ln1_g", &[l, d]),
        w("ln1_b", &[l, d]),
        w("attn_w", &[l, d, 3 * d]),
        w("attn_b", &[l, 3 * d]),
        w("proj_w", &[l, d, d]),
        w("proj_b", &[l, d]),
        w("ln2_g", &[l, d]),
        w("ln2_b", &[l, d]),
        w("fc_w", &[l, d, f]),
        w("fc_b", &[l, f]),
        w("out_w", &[l, f, d]),
        w("out_b", &[l, d]),
        w("lnf_g", &[d]),
        w("lnf_b", &[d]),
    ]
}

#[test]
fn gpt2_split_by_heads_and_features_is_the_megatron_layout_and_gives_the_unsharded_logits() {
    let source = small_gpt2();
    let mut rng = SmallRng::seed_from_u64(7);
    let weights = small_gpt2_weights(&mut rng);
    let tokens = random(&mut rng, DType::I64, &[2, 5], "b n", 40);
    for mesh in ["tp=2", "tp=4"] {
        let plan = agrees(&source, "gpt2", (mesh, "H=tp,F=tp"), &[("tokens", tokens.clone())], &weights);
        // Megatron: two all-reduces per layer (after the attention's output
        // projection and after the MLP), nothing gathered, nothing cut at run time.
        assert_eq!(plan.exchange_counts(), (4, 0, 0), "{mesh}");
        let split: Vec<&str> = plan.weights.iter().filter(|w| w.splits.iter().any(Option::is_some)).map(|w| w.source.as_str()).collect();
        for w in ["attn_w", "attn_b", "proj_w", "fc_w", "fc_b", "out_w"] {
            assert!(split.contains(&w), "{mesh}: {w} is read as the rank's block ({split:?})");
        }
    }
    let plan = agrees(&source, "gpt2", ("dp=2", "b=dp"), &[("tokens", tokens.clone())], &weights);
    assert_eq!(plan.exchange_counts(), (0, 0, 0));
    let plan = agrees(&source, "gpt2", ("dp=2,tp=2", "b=dp,H=tp,F=tp"), &[("tokens", tokens.clone())], &weights);
    assert_eq!(plan.exchange_counts(), (4, 0, 0));
    // The vocabulary split too: the embedding looked up in each rank's
    // rows (one more all-reduce), the head's logits each rank's columns.
    let plan = agrees(&source, "gpt2", ("tp=2", "H=tp,F=tp,V=tp"), &[("tokens", tokens.clone())], &weights);
    assert_eq!(plan.exchange_counts(), (5, 0, 1));
    assert!(plan.results[0].1[2].is_some(), "the logits are split along V");
    let plan = agrees(&source, "next_token", ("tp=2", "H=tp,F=tp,V=tp"), &[("tokens", tokens)], &weights);
    assert_eq!(plan.exchange_counts().1, 1, "the greedy token gathers the last position's logits");
}

#[test]
fn gpt2_cached_decoding_split_by_heads_keeps_each_rank_cache_of_its_heads() {
    let source = small_gpt2();
    let mut rng = SmallRng::seed_from_u64(9);
    let weights = small_gpt2_weights(&mut rng);
    let tokens = random(&mut rng, DType::I64, &[2, 1], "b n", 40);
    // Three cached positions of two layers, four heads of width 8.
    let k_cache = random(&mut rng, DType::F32, &[2, 2, 4, 3, 8], "L b H c Dh", 0);
    let v_cache = random(&mut rng, DType::F32, &[2, 2, 4, 3, 8], "L b H c Dh", 0);
    let args = [("tokens", tokens), ("k_cache", k_cache), ("v_cache", v_cache)];
    for (mesh, sharding) in [("tp=2", "H=tp,F=tp"), ("tp=4", "H=tp,F=tp"), ("dp=2,tp=2", "b=dp,H=tp,F=tp")] {
        let plan = agrees(&source, "step", (mesh, sharding), &args, &weights);
        assert_eq!(plan.exchange_counts(), (4, 0, 0), "{mesh}");
        // The new keys and values come back as the rank's heads.
        assert!(plan.results[1].1.iter().any(|s| s.is_some()), "{mesh}");
    }
}

#[test]
fn gpt2_training_split_over_the_batch_all_reduces_every_parameter_gradient() {
    let source = small_gpt2();
    let mut rng = SmallRng::seed_from_u64(10);
    let weights = small_gpt2_weights(&mut rng);
    let tokens = random(&mut rng, DType::I64, &[2, 4], "b n", 40);
    let targets = random(&mut rng, DType::I64, &[2, 4], "b n", 40);
    let args = [("tokens", tokens), ("targets", targets)];
    let plan = agrees(&source, "train_step", ("dp=2", "b=dp"), &args, &weights);
    let (reduces, gathers, _) = plan.exchange_counts();
    assert!(reduces >= 16 && gathers == 0, "the loss and each of the 16 parameters' gradients summed over the batch: {:?}", plan.exchange_counts());
    let plan = agrees(&source, "train_step", ("tp=2", "H=tp,F=tp"), &args, &weights);
    // Nothing is gathered but the q, k, v projection's gradients, split in
    // three runs (one per projection), regathered into one block each.
    assert_eq!(plan.exchange_counts().1, 2);
    // The vocabulary split too: the loss's one-hot comparison broadcasts
    // the targets' axis of size 1 along the split vocabulary (it stays whole).
    agrees(&source, "train_step", ("tp=2", "H=tp,F=tp,V=tp"), &args, &weights);
}

#[test]
fn errors_name_the_axis_its_size_and_the_mesh_axis_before_anything_runs() {
    let source = "dim D = 6\ndef f(x: [a D], y: [a b]) -> [a D] {\n    return x + sum(y, b)\n}\n";
    let program = Engine::new().backend(Backend::Interp).compile(source).unwrap();
    let err = |mesh: &str, sharding: &str| {
        let mesh = Mesh::parse(mesh).unwrap();
        program.plan("f", &mesh, &Sharding::parse(sharding).unwrap()).unwrap_err().to_string()
    };
    assert_eq!(err("tp=4", "D=tp"), "the axis 'D' of size 6 cannot be split over the mesh axis 'tp' of size 4: 6 is not a multiple of 4");
    assert_eq!(err("tp=2", "a=tp,b=tp"), "`f` has a value with the axes 'a' and 'b', both split over the mesh axis 'tp'");
    assert!(err("tp=2", "Q=tp").starts_with("the sharding splits 'Q', which is no axis name of the module (its names: D, a, b)"), "{}", err("tp=2", "Q=tp"));
    assert_eq!(err("tp=2", "D=dp"), "the axis name 'D' is split over the mesh axis 'dp', which the mesh (tp=2) does not have");
    // A mesh axis no name uses is allowed: its ranks hold the same values.
    assert!(program.plan("f", &Mesh::parse("dp=2,tp=3").unwrap(), &Sharding::parse("D=tp").unwrap()).is_ok());
    // The engine's group must be the mesh's size.
    let mesh = Mesh::parse("tp=2").unwrap();
    let refused = on_ranks(3, Duration::from_secs(1), |rank| program.sharded("f", &mesh, &Sharding::parse("D=tp").unwrap(), rank).err().map(|e| e.to_string()));
    assert_eq!(refused[0].as_deref(), Some("the mesh (tp=2) has 2 processes, the engine's group has 3"));
    // A run-time size the mesh axis does not divide: at the call.
    let runtime = "def g(x: [n k]) -> [n] {\n    return sum(x, k)\n}\n";
    let program = Engine::new().backend(Backend::Interp).compile(runtime).unwrap();
    let sharding = Sharding::parse("n=tp").unwrap();
    let x = HostTensor::from_f64(DType::F32, vec![3, 2], vec![Some("n".into()), Some("k".into())], &[0.0; 6]).unwrap();
    let results = on_ranks(2, Duration::from_secs(5), |rank| {
        let f = program.sharded("g", &mesh, &sharding, rank).unwrap();
        f.call_results([("x", Arg::from(x.view()))]).map(|r| r[0].1.global_shape.clone())
    });
    // Each rank's block of 3 rows: 6 rows in all.
    assert_eq!(results[0].as_ref().unwrap(), &[6]);
}

#[test]
fn a_rank_that_fails_ends_the_call_on_the_others_with_a_collective_error() {
    let source = "def f(x: [n k], w: [k m]) -> [n m] {\n    return x @ w\n}\n";
    let program = Engine::new().backend(Backend::Llvm).compile(source).unwrap();
    let (mesh, sharding) = (Mesh::parse("tp=2").unwrap(), Sharding::parse("k=tp").unwrap());
    let mut rng = SmallRng::seed_from_u64(8);
    let x = random(&mut rng, DType::F32, &[3, 4], "n k", 0);
    let w = random(&mut rng, DType::F32, &[4, 2], "k m", 0);
    for _ in 0..10 {
        let outcomes = on_ranks(2, Duration::from_millis(300), |rank| {
            let r = rank.rank;
            let f = program.sharded("f", &mesh, &sharding, rank).unwrap();
            if r == 1 {
                // This rank dies before its collective.
                return None;
            }
            Some(f.call_results([("x", Arg::from(x.view())), ("w", Arg::from(w.view()))]).map(drop))
        });
        let err = outcomes[0].as_ref().unwrap().as_ref().unwrap_err();
        assert!(matches!(err, nax::Error::Runtime(nax::RuntimeError::Collective(_))), "{err}");
        assert!(err.to_string().starts_with("a collective failed: rank 0: the group [0, 1] did not meet"), "{err}");
    }
}

#[test]
fn through_the_c_library_a_failed_collective_is_nax_err_collective_and_each_open_checks_the_library_and_the_engine() {
    use crate::shard_library::ShardedLibrary;
    let source = "def f(x: [n k], w: [k m]) -> [n m] {\n    return x @ w\n}\n";
    let library = ShardedLibrary::build(source, &["--mesh", "tp=2", "--shard", "k=tp"], &[]);
    let (mesh, sharding) = (Mesh::parse("tp=2").unwrap(), Sharding::parse("k=tp").unwrap());
    let mut rng = SmallRng::seed_from_u64(8);
    let x = random(&mut rng, DType::F32, &[3, 4], "n k", 0);
    let w = random(&mut rng, DType::F32, &[4, 2], "k m", 0);
    let blocks = |rank: usize| vec![("x", block_for(&x, &mesh, &sharding, rank)), ("w", block_for(&w, &mesh, &sharding, rank))];
    for _ in 0..10 {
        let outcomes = on_ranks(2, Duration::from_millis(300), |rank| (rank.rank == 0).then(|| library.call(&rank, ("f", 1), &blocks(0), 1)));
        let failed = outcomes[0].as_ref().unwrap().as_ref().unwrap_err();
        assert_eq!(failed.code, 6, "NAX_ERR_COLLECTIVE: {failed:?}");
        assert!(failed.message.contains("the host's all_reduce along mesh axis 'tp' returned 1: rank 0: the group [0, 1] did not meet"), "{failed:?}");
    }
    // The group rebuilt, the library opens and calls again, twice per model.
    let calls = on_ranks(2, Duration::from_secs(60), |rank| library.call(&rank, ("f", 1), &blocks(rank.rank), 2).unwrap());
    let want = Engine::new().backend(Backend::Interp).compile(source).unwrap().function("f").unwrap();
    let want = want.call([("x", Arg::from(x.view())), ("w", Arg::from(w.view()))]).unwrap().to_f64_vec();
    for call in 0..2 {
        let (_, got) = assemble(&calls.iter().map(|c| c[call][0].clone()).collect::<Vec<_>>());
        assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-5), "{got:?} {want:?}");
    }
    // A library built split opens only with the host's collectives, on an engine of the mesh's size.
    let whole_open = library.open_whole(None);
    assert_eq!(whole_open.code, 1, "{whole_open:?}");
    assert!(whole_open.message.contains("was built split over processes (mesh tp=2, split k=tp): open it with sharded_open_sharded"), "{whole_open:?}");
    let too_many = on_ranks(4, Duration::from_secs(60), |rank| library.call(&rank, ("f", 1), &blocks(0), 1).unwrap_err());
    assert!(too_many[0].message.contains("was built for the mesh tp=2 of 2 processes, but the host's engine has 4"), "{:?}", too_many[0]);
    let whole = ShardedLibrary::build(source, &[], &[]);
    let refused = on_ranks(1, Duration::from_secs(60), |rank| whole.call(&rank, ("f", 1), &blocks(0), 1).unwrap_err());
    assert_eq!(refused[0].code, 1);
    assert!(refused[0].message.contains("was built whole: open it with sharded_open"), "{:?}", refused[0]);
    assert_eq!(whole.open_whole(None).code, 0);
    // Hostile tables and weights: each refused with its code and a message naming it.
    let weighted = ShardedLibrary::build(
        "dim K = 4\nparam w: [K]\ndef f(x: [K]) -> [K] {\n    return x * w\n}\n",
        &["--mesh", "tp=2", "--shard", "K=tp"],
        &[("w", HostTensor::from_f64(DType::F32, vec![4], vec![None], &[1.0, 2.0, 3.0, 4.0]).unwrap())],
    );
    unsafe extern "C" fn seven(_: *mut std::ffi::c_void) -> i32 {
        7
    }
    let opened = on_ranks(2, Duration::from_secs(60), |rank| {
        let good = crate::shard_library::table(&rank);
        let no_reduce = nax_capi::NaxCollectives { all_reduce: None, ..good };
        let outside = nax_capi::NaxCollectives { rank: Some(seven), ..good };
        let missing = weighted.dir().join("missing.safetensors");
        let short = weighted.dir().join("short.safetensors");
        let three = HostTensor::from_f64(DType::F32, vec![3], vec![None], &[1.0, 2.0, 3.0]).unwrap();
        nax::write_tensors_atomic(&short, &[("w", &three)]).unwrap();
        [None, Some(&no_reduce), Some(&outside), Some(&good), Some(&good)]
            .into_iter()
            .zip([weighted.weights(), weighted.weights(), weighted.weights(), missing, short])
            .map(|(t, w)| weighted.open_with(t, &w))
            .collect::<Vec<_>>()
    });
    for (status, (code, message)) in opened[0].iter().zip([
        (1, "NULL `collectives`"),
        (1, "nax_collectives.all_reduce is NULL"),
        (1, "nax_collectives.rank gives 7, outside the engine's 2 processes"),
        (2, "missing.safetensors"),
        (2, "axis 0 of size 3 is not 1 runs of 2 equal blocks"),
    ]) {
        assert!(status.code == code && status.message.contains(message), "{status:?}: wanted {code} `{message}`");
    }
    // Weights embedded in the library: each rank copies out its block alone.
    let embedded = ShardedLibrary::build(
        "dim K = 4\nparam w: [K]\ndef f(x: [K]) -> [K] {\n    return x * w\n}\n",
        &["--mesh", "tp=2", "--shard", "K=tp", "--embed-weights"],
        &[("w", HostTensor::from_f64(DType::F32, vec![4], vec![None], &[1.0, 2.0, 3.0, 4.0]).unwrap())],
    );
    let x = HostTensor::from_f64(DType::F32, vec![2], vec![None], &[10.0, 100.0]).unwrap();
    let products = on_ranks(2, Duration::from_secs(60), |rank| embedded.call(&rank, ("f", 1), &[("x", x.clone())], 1).unwrap());
    for (rank, calls) in products.iter().enumerate() {
        let want = [[10.0, 200.0], [30.0, 400.0]][rank];
        assert_eq!(calls[0][0].tensor.to_f64_vec(), want, "rank {rank}");
    }
    // The header declares the sharded entries and types; the library exports them.
    let header = std::fs::read_to_string(library.dir().join("sharded.h")).unwrap();
    for declared in [
        "NAX_ERR_COLLECTIVE = 6",
        "} nax_collectives;",
        "int  sharded_open_sharded(",
        "int  sharded_call_sharded(",
        "Built split over processes: mesh tp=2, split k=tp",
    ] {
        assert!(header.contains(declared), "the header lacks `{declared}`");
    }
}

#[test]
fn the_plan_shows_each_rank_sizes_and_every_collective_with_its_bytes() {
    let source = small_gpt2();
    let program = Engine::new().backend(Backend::Interp).compile(&source).unwrap();
    let text = program.plan("gpt2", &Mesh::parse("tp=2").unwrap(), &Sharding::parse("H=tp,F=tp").unwrap()).unwrap();
    assert!(text.contains("mesh tp=2 (2 processes)"), "{text}");
    assert!(text.contains("  fc_w: f32[L:2 D:32 F:64 (split over tp)]"), "{text}");
    assert!(text.contains("  attn_w: f32[L:2 D:32 _:48 (split over tp in 3 runs)]"), "{text}");
    assert_eq!(text.matches("all_reduce sum over tp: 128*b*n bytes").count(), 4, "{text}");
    assert!(text.contains("collectives per call: 4 (4 all-reduces, 0 all-gathers)"), "{text}");
}

#[test]
fn a_rank_graph_verifies_and_its_text_form_with_the_exchanges_parses_back() {
    let source = small_gpt2();
    let module = nax::pipeline::check("gpt2.nax", &source, &mut nax::Timings::start()).unwrap();
    for (function, mesh, sharding) in [("train_step", "tp=2", "H=tp,F=tp"), ("train_step", "dp=2", "b=dp"), ("step", "dp=2,tp=2", "b=dp,H=tp,F=tp")] {
        let (mesh, sharding) = (Mesh::parse(mesh).unwrap(), Sharding::parse(sharding).unwrap());
        let sharded = nax::pipeline::shard(&module, function, &mesh, &sharding, &mut nax::Timings::start()).unwrap();
        let (rank, staged) = (&sharded.partitioned.graph, &sharded.staged);
        assert!(nax_ir::verify(rank).is_empty(), "{function}");
        let text = nax_ir::text::print(rank);
        assert!(text.contains("exchange all_reduce sum "), "{text}");
        let parsed = nax_ir::text::parse(&text).unwrap_or_else(|e| panic!("{function}: {e}"));
        assert_eq!(nax_ir::text::print(&parsed), text, "{function}: the text form does not round-trip");
        for stage in &staged.stages {
            assert!(nax_ir::verify(stage).is_empty(), "{}", stage.name);
            assert!(!nax_ir::text::print(stage).contains("exchange"), "a stage holds no exchange");
        }
    }
}

#[test]
fn the_verifier_refuses_an_exchange_whose_sizes_do_not_match_its_parts() {
    let text = "graph f\n%0 = input 0 \"x\" : f32 plain [n:4 k:3] range -inf inf\n%1 = exchange all_gather 1 0 2 1 %0 : f32 plain [n:4 k:5] range -inf inf\ninputs %0\noutput %1\n";
    let g = nax_ir::text::parse(text).unwrap();
    let problems = nax_ir::verify(&g);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].to_string().contains("axis 1 of an exchange is 5 from 3"), "{}", problems[0]);
    let fixed = text.replace("k:5", "k:6");
    assert!(nax_ir::verify(&nax_ir::text::parse(&fixed).unwrap()).is_empty());
}

#[test]
fn an_argument_given_whole_along_a_dim_is_read_at_the_rank_block() {
    let source = "dim D = 8\ndef f(x: [n D]) -> [n D] {\n    return x - mean(x, D)\n}\n";
    let program = Engine::new().backend(Backend::Llvm).check_bounds(true).compile(source).unwrap();
    let (mesh, sharding) = (Mesh::parse("tp=2").unwrap(), Sharding::parse("D=tp").unwrap());
    let mut rng = SmallRng::seed_from_u64(11);
    let x = random(&mut rng, DType::F32, &[3, 8], "n D", 0);
    let want = program.function("f").unwrap().call([("x", Arg::from(x.view()))]).unwrap().to_f64_vec();
    // Whole on every rank, and transposed: the sizes say which was passed.
    let transposed = x.permuted(&[1, 0]).unwrap();
    for given in [&x, &transposed] {
        let blocks = on_ranks(2, Duration::from_secs(30), |rank| {
            let f = program.sharded("f", &mesh, &sharding, rank).unwrap();
            f.call_results([("x", Arg::from(given.view()))]).unwrap().remove(0).1
        });
        let (shape, got) = assemble(&blocks);
        assert_eq!(shape, [3, 8]);
        assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-6), "{got:?} {want:?}");
    }
    // Neither the block (4) nor the whole (8): refused at the call, naming the size.
    let wrong = random(&mut rng, DType::F32, &[3, 6], "n D", 0);
    let refused = on_ranks(2, Duration::from_secs(5), |rank| {
        let f = program.sharded("f", &mesh, &sharding, rank).unwrap();
        f.call_results([("x", Arg::from(wrong.view()))]).unwrap_err().to_string()
    });
    assert!(refused[0].contains('6') && refused[0].contains('4'), "{}", refused[0]);
}
