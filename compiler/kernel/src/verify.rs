//! The kernel verifier: every load names an existing buffer with one index
//! per axis, every loop index is in the nest, every indexed axis has the
//! extent of its loop (or size 1 for index 0), and the schedule's order is
//! an order of the loops with the parallel loop outermost, a transposed
//! read is one the tiled store can stage through its output, row
//! reductions read only rows computed before them, and every product has
//! a microkernel of its dtype (one per dtype, of a shape the driver runs).

use crate::kernel::{Body, Expr, Index, Program};

/// A problem the verifier found (a bug of nax): where, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A product's microkernel.
    #[error("microkernel {microkernel}: {what}")]
    Microkernel { microkernel: usize, what: String },
    /// A buffer.
    #[error("buffer %{buffer}: {what}")]
    Buffer { buffer: usize, what: String },
    /// A kernel.
    #[error("kernel {kernel}: {what}")]
    Kernel { kernel: usize, what: String },
}

/// Every problem found; empty when the program is well formed.
pub fn verify(p: &Program) -> Vec<Problem> {
    let mut errors = Vec::new();
    for (i, product) in p.products.iter().enumerate() {
        let (m, b) = (product.micro, product.blocking);
        let fits = m.is_valid() && m.fits(&b) && p.products[..i].iter().all(|q| q.micro.dtype != m.dtype);
        if !fits {
            errors.push(Problem::Microkernel { microkernel: i, what: format!("{m:?} with {b:?} is not a microkernel the driver runs") });
        }
    }
    // An alias reads its target's memory: the element's size is the same
    // (an i64 view of an f32 buffer reads twice the bytes it has).
    for (b, buffer) in p.buffers.iter().enumerate() {
        if let crate::kernel::BufferKind::Alias(a) = buffer.kind
            && p.buffers.get(a).is_none_or(|target| target.dtype.size_bytes() != buffer.dtype.size_bytes())
        {
            errors.push(Problem::Buffer { buffer: b, what: format!("an alias of %{a} with elements of another size") });
        }
    }
    for (k, kernel) in p.kernels.iter().enumerate() {
        let Some(out) = p.buffers.get(kernel.output) else {
            errors.push(Problem::Kernel { kernel: k, what: format!("no output buffer %{}", kernel.output) });
            continue;
        };
        // The output's loops come first; any after them reduce.
        let rank = out.shape.len();
        let extra = kernel.loops.len().checked_sub(rank);
        let extra_ok = matches!(
            (&kernel.body, extra),
            (Body::Store(_) | Body::Along { .. }, Some(0))
                | (Body::Reduce { .. } | Body::Scatter { .. }, Some(_))
                | (Body::Along { func: nax_ops::AlongAxis::LogSumExp, .. }, Some(1))
                | (Body::Attention { .. }, Some(2))
        );
        if !extra_ok || kernel.loops[rank.min(kernel.loops.len())..].iter().any(|l| l.role != crate::kernel::Role::Reduce) {
            errors.push(Problem::Kernel { kernel: k, what: format!("{} loops do not fit a rank-{rank} output and its body", kernel.loops.len()) });
        }
        for (i, (&s, l)) in out.shape.iter().zip(&kernel.loops).enumerate() {
            if !p.symbols.same(s, l.extent) {
                errors.push(Problem::Kernel { kernel: k, what: format!("loop {i} does not cover output axis {i}") });
            }
        }
        let order = kernel.order();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        if sorted != (0..kernel.loops.len()).collect::<Vec<_>>() {
            errors.push(Problem::Kernel { kernel: k, what: format!("the order {order:?} is not an order of its {} loops", kernel.loops.len()) });
        } else if kernel.parallel_loop() && order.first() != Some(&0) {
            errors.push(Problem::Kernel { kernel: k, what: "the parallel loop is not outermost".to_string() });
        }
        let flat = kernel.schedule.flat;
        let rank = p.buffers[kernel.output].shape.len();
        if flat > 0
            && (flat > rank || !kernel.parallel_loop() || kernel.order() != (0..kernel.loops.len()).collect::<Vec<_>>() || kernel.schedule.tile.is_some())
        {
            errors.push(Problem::Kernel {
                kernel: k,
                what: "a flat parallel loop covers leading output loops of a parallel kernel whose loops run in order, untiled".to_string(),
            });
        }
        if kernel.schedule.tile.is_some() && !(matches!(kernel.body, Body::Store(_)) && kernel.loops.len() >= 2) {
            errors.push(Problem::Kernel { kernel: k, what: "only a store over two or more loops can be tiled".to_string() });
        }
        if let Some(g) = &kernel.schedule.gemm {
            let mut all: Vec<usize> = g.batch.iter().copied().chain(g.rows).chain(g.cols).chain([g.inner]).collect();
            all.sort_unstable();
            let product_of_two_loads = matches!(&kernel.body, Body::Reduce { value: Expr::Apply { args, .. }, .. } if args.len() == 2 && args.iter().all(|a| matches!(a, Expr::Load { .. })));
            if all != (0..kernel.loops.len()).collect::<Vec<_>>() || g.inner + 1 != kernel.loops.len() || !product_of_two_loads {
                errors.push(Problem::Kernel { kernel: k, what: "the GEMM loops do not fit the kernel".to_string() });
            }
            if g.epilogue.as_ref().is_some_and(|e| e.reads_loop(g.inner)) {
                errors.push(Problem::Kernel { kernel: k, what: "a GEMM's epilogue reads its inner loop".to_string() });
            }
        }
        if let Some(dtype) = p.product_dtype(kernel)
            && p.product_kernel(dtype).is_none()
        {
            errors.push(Problem::Kernel { kernel: k, what: format!("no {} microkernel for its products", dtype.as_str()) });
        }
        let takes_columns = match kernel.body {
            Body::Along { func, axis, .. } => crate::kernel::Schedule::takes_columns(&p.symbols, out.dtype, &kernel.loops, func, axis),
            _ => false,
        };
        if kernel.schedule.columns.is_some_and(|c| c == 0 || !takes_columns) {
            errors.push(Problem::Kernel {
                kernel: k,
                what: "only a softmax along a middle axis of two or more positions runs in column blocks (of one or more)".to_string(),
            });
        }
        if kernel.schedule.tile.is_some_and(|(a, b)| a == 0 || b == 0) {
            errors.push(Problem::Kernel { kernel: k, what: "a tile of edge 0".to_string() });
        }
        if let Some(t) = &kernel.schedule.transpose
            && !stages_transposed(p, kernel, t)
        {
            errors.push(Problem::Kernel { kernel: k, what: format!(
                "a transposed read is a load of the tiled store, of the output's element width, whose last axis alone the tile's outer loop indexes and another its inner loop (the output's last two), in blocks of a power of two (two or more) lanes, and its tile's scratch holds at most {} bytes",
                crate::kernel::MAX_SCRATCH_BYTES
            ) });
        }
        if let Some(lanes) = kernel.schedule.stream
            && !streams(p, kernel, lanes)
        {
            errors.push(Problem::Kernel { kernel: k, what: "only a store in its loops' order, untiled (after its row reductions, if any) or tiled with a transposed read, streams its results, in vectors of a power of two lanes (of the transposed read's blocks, if any)".to_string() });
        }
        if let Body::Scatter { axis, init, position, .. } = &kernel.body {
            if *axis >= rank || !kernel.schedule.order.is_empty() || kernel.schedule.flat > 0 || !position_is_int(p, position) {
                errors.push(Problem::Kernel {
                    kernel: k,
                    what: "a scatter adds along an output axis, at an integer position, with its loops in order".to_string(),
                });
            }
            // In place: an earlier kernel wrote the output; else the
            // initial value reads other buffers at the output's loops.
            let in_place = kernel.body.scatters_in_place(kernel.output);
            let earlier = p.kernels[..k].iter().any(|e| e.output == kernel.output);
            let reads_output = init.as_ref().is_some_and(|e| e.loads().iter().any(|(b, _)| *b == kernel.output));
            let init_loops = init.as_ref().is_none_or(|e| (rank..kernel.loops.len()).all(|l| !e.reads_loop(l)));
            if (in_place && !earlier) || (!in_place && reads_output) || !init_loops {
                errors.push(Problem::Kernel {
                    kernel: k,
                    what: "a scatter starts from zeros, from values at its output's loops, or in place from what an earlier kernel wrote".to_string(),
                });
            }
        }
        let attention = matches!(kernel.body, Body::Attention { .. });
        if attention != kernel.schedule.attention.is_some() {
            errors.push(Problem::Kernel { kernel: k, what: "an attention body and a flash schedule go together".to_string() });
        }
        if let (Body::Attention { keys, logit, visible, value }, Some(a)) = (&kernel.body, &kernel.schedule.attention) {
            let mut all: Vec<usize> = a.batch.iter().copied().chain([a.rows, a.cols]).collect();
            all.sort_unstable();
            let depth = rank + 1;
            // The score is a product of two loads, the first not reading the
            // keys and the second not the rows; the value is a load; all
            // three of the output's element type.
            let of_output = |b: &usize| p.buffers.get(*b).is_some_and(|b| b.dtype == out.dtype);
            let single_sum = matches!(kernel.rows.as_slice(), [r] if r.op == nax_ops::Reduction::Sum && matches!(&r.value, Expr::Apply { func: nax_ir::MapFn::Binary(nax_ops::BinaryOp::Mul), args, .. } if matches!(args.as_slice(), [q @ Expr::Load { buffer: qb, .. }, k @ Expr::Load { buffer: kb, .. }] if !q.reads_loop(*keys) && !k.reads_loop(a.rows) && of_output(qb) && of_output(kb))))
                && matches!(value, Expr::Load { buffer, .. } if of_output(buffer));
            if all != (0..rank).collect::<Vec<_>>()
                || *keys != rank
                || !single_sum
                || !matches!(out.dtype, nax_contract::DType::F32 | nax_contract::DType::BF16 | nax_contract::DType::F16)
                || kernel.schedule.gemm.is_some()
                || kernel.schedule.columns.is_some()
                || kernel.schedule.tile.is_some()
            {
                errors.push(Problem::Kernel { kernel: k, what: "the attention loops do not fit the kernel (batch and rows and columns are the output's loops, f32, bf16 or f16, then keys, then the depth of its one summed score, a product of two loads, and its value a load, of the output's element type)".to_string() });
            } else if a.scratch.iter().zip(a.scratch_shapes(&kernel.loops)).any(|(&b, shape)| {
                p.buffers.get(b).is_none_or(|b| {
                    b.kind != crate::kernel::BufferKind::Tile
                        || b.dtype != nax_contract::DType::F32
                        || b.shape.len() != shape.len()
                        || !b.shape.iter().zip(&shape).all(|(&s, &t)| p.symbols.same(s, t))
                })
            }) {
                errors.push(Problem::Kernel { kernel: k, what: "an attention's scratch buffers are f32 tile buffers of its tile's shapes".to_string() });
            } else if [Some(logit), visible.as_ref()].into_iter().flatten().any(|e| e.reads_loop(a.cols) || e.reads_loop(depth))
                || visible.as_ref().is_some_and(crate::attention::reads_score)
                || value.reads_loop(a.rows)
                || value.reads_loop(depth)
                || a.tile.0 == 0
                || a.tile.1 == 0
            {
                errors.push(Problem::Kernel { kernel: k, what: "an attention's logit and mask read only its batch, rows and keys (the mask not the score), its value only its batch, keys and columns, and its tiles are not empty".to_string() });
            }
        }
        if !kernel.rows.is_empty() && !attention && !crate::rows::takes_rows(kernel) {
            errors.push(Problem::Kernel { kernel: k, what: "row reductions need a plain store whose last loop is not parallel".to_string() });
        }
        if kernel.schedule.stream_ahead.is_some_and(|bytes| bytes == 0 || kernel.schedule.stream.is_none() || kernel.schedule.tile.is_some()) {
            errors.push(Problem::Kernel { kernel: k, what: "only an untiled streamed store asks for its operands ahead (one byte or more)".to_string() });
        }
        if kernel.schedule.prefetch.is_some_and(|rows| rows == 0 || (kernel.rows.is_empty() && kernel.schedule.columns.is_none()) || attention) {
            errors.push(Problem::Kernel {
                kernel: k,
                what: "only a store with row reductions or a softmax in column blocks prefetches rows ahead (one or more)".to_string(),
            });
        }
        // Row reduction j reads rows before it; the body reads any.
        for (j, value) in kernel.values().enumerate() {
            check_expr(p, kernel, value, j, &mut |what| errors.push(Problem::Kernel { kernel: k, what }));
        }
    }
    errors
}

/// Whether a kernel can stage this transposed read through a scratch
/// tile (see [`crate::kernel::Transpose`]) of at most
/// [`crate::kernel::MAX_SCRATCH_BYTES`].
fn stages_transposed(p: &Program, kernel: &crate::kernel::Kernel, t: &crate::kernel::Transpose) -> bool {
    let order = kernel.order();
    let (Some(&outer), Some(&inner)) = (order.len().checked_sub(2).and_then(|i| order.get(i)), order.last()) else { return false };
    let Some((last, rest)) = t.index.split_last() else { return false };
    let loaded = kernel.body.exprs().iter().any(|v| v.loads().contains(&(t.buffer, t.index.as_slice())));
    let Some(out) = p.buffers.get(kernel.output) else { return false };
    // The tile's rows are the output's last two axes, so that each row of
    // the scratch is contiguous in the output too.
    let rank = out.shape.len();
    rank >= 2
        && (outer, inner) == (rank - 2, rank - 1)
        && kernel.schedule.tile.is_some_and(|(a, b)| {
            a.checked_mul(b).and_then(|n| n.checked_mul(out.dtype.size_bytes() as u64)).is_some_and(|bytes| bytes <= crate::kernel::MAX_SCRATCH_BYTES)
        })
        && matches!(kernel.body, Body::Store(_))
        && kernel.rows.is_empty()
        && loaded
        && *last == Index::Loop(outer)
        && !rest.contains(&Index::Loop(outer))
        && rest.contains(&Index::Loop(inner))
        && t.lanes >= 2
        && t.lanes.is_power_of_two()
        && p.buffers.get(t.buffer).is_some_and(|b| b.dtype.size_bytes() == out.dtype.size_bytes())
}

/// Whether a kernel can stream its results in vectors of `lanes` (see
/// [`crate::kernel::Schedule::stream`]).
fn streams(p: &Program, kernel: &crate::kernel::Kernel, lanes: u32) -> bool {
    let s = &kernel.schedule;
    let rank = p.buffers.get(kernel.output).map_or(0, |b| b.shape.len());
    let staged = match (&s.tile, &s.transpose) {
        (None, None) => true,
        (Some(_), Some(t)) => t.lanes == lanes,
        _ => false,
    };
    matches!(kernel.body, Body::Store(_))
        && rank >= 1
        && kernel.loops.len() == rank
        && kernel.order() == (0..rank).collect::<Vec<_>>()
        && s.flat < rank
        && s.gemm.is_none()
        && staged
        && lanes.is_power_of_two()
}

fn check_expr(p: &Program, kernel: &crate::kernel::Kernel, e: &Expr, rows: usize, report: &mut dyn FnMut(String)) {
    match e {
        Expr::Load { buffer, index } | Expr::Gather { buffer, index, .. } => {
            let Some(b) = p.buffers.get(*buffer) else { return report(format!("load of a missing buffer %{buffer}")) };
            if b.shape.len() != index.len() {
                return report(format!("load of %{buffer} with {} indices for rank {}", index.len(), b.shape.len()));
            }
            let computed: Vec<usize> = match e {
                Expr::Gather { computed, .. } => {
                    for (a, position) in computed {
                        if *a >= index.len() {
                            report(format!("a computed position on axis {a} of %{buffer}, of rank {}", index.len()));
                        }
                        check_expr(p, kernel, position, rows, report);
                    }
                    computed.iter().map(|(a, _)| *a).collect()
                }
                _ => Vec::new(),
            };
            for (a, (&i, &s)) in index.iter().zip(&b.shape).enumerate().filter(|(a, _)| !computed.contains(a)) {
                match i {
                    Index::Loop(l) => match kernel.loops.get(l) {
                        Some(lp) if p.symbols.same(lp.extent, s) => {}
                        Some(_) => report(format!("axis {a} of %{buffer} is indexed by loop {l} of another extent")),
                        None => report(format!("loop {l} is not in the nest")),
                    },
                    Index::Zero if p.symbols.constant(s) != Some(1) => report(format!("axis {a} of %{buffer} broadcasts but its size is not 1")),
                    Index::Const(c) if p.symbols.constant(s).is_some_and(|n| c as u64 >= n) => report(format!("index {c} out of range on %{buffer}")),
                    _ => {}
                }
            }
        }
        Expr::LoopIndex(l) if *l >= kernel.loops.len() => report(format!("loop {l} is not in the nest")),
        Expr::Row(r) if *r >= rows => report(format!("row {r} is read before it is computed")),
        Expr::Apply { args, .. } => args.iter().for_each(|a| check_expr(p, kernel, a, rows, report)),
        _ => {}
    }
}

/// Whether a scatter's position is an integer: a load of an integer
/// buffer, an integer's arithmetic, a size or a loop's position.
fn position_is_int(p: &Program, e: &Expr) -> bool {
    match e {
        Expr::Load { buffer, .. } | Expr::Gather { buffer, .. } => p.buffers.get(*buffer).is_some_and(|b| b.dtype.is_int()),
        Expr::Apply { compute, .. } => compute.is_int(),
        Expr::Literal(l) => matches!(l, nax_ir::Literal::Int(_)),
        Expr::Size(_) | Expr::LoopIndex(_) => true,
        Expr::Row(_) => false,
    }
}
