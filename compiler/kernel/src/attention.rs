//! Attention fusion, after kernels are formed: a matrix product of scores
//! (`s = q k`), a softmax of an expression of `s` along the keys (the
//! logits: a scale, a mask), and a matrix product of the probabilities with
//! values (`p v`, summed over the keys) become one kernel with
//! [`Body::Attention`], run tile by tile with an online softmax (as
//! FlashAttention does): the scores and probabilities, `n x m` per head,
//! are never stored, and a tile whose logits are all masked skips its
//! product with the values.

use crate::kernel::{AttentionLoops, Body, Buffer, BufferKind, Expr, GemmLoops, Index, Kernel, Loop, Program, Role, RowReduction, Schedule};
use crate::rows::Readers;
use nax_ir::{Literal, MapFn};
use nax_ops::UnaryOp;
use nax_ops::{AlongAxis, Elementwise, Reduction};
use nax_runtime::DType;

/// The tiles: 64 queries by 64 keys. A tile's scores (16 KiB of f32) and
/// its rows' accumulated outputs stay in the first two cache levels
/// between the two products; small tiles skip most of what a causal mask
/// hides.
const TILE: (u64, u64) = (64, 64);

/// Fuses each attention pattern into one kernel.
pub fn fuse(p: &mut Program) {
    while let Some((scores, softmax, product, fused)) = next_fusion(p) {
        // The scratch buffers next_fusion numbered from the end of the list.
        if let Some(a) = &fused.schedule.attention {
            for shape in a.scratch_shapes(&fused.loops) {
                p.buffers.push(Buffer { dtype: DType::F32, shape, kind: BufferKind::Tile });
            }
        }
        let checks = std::mem::take(&mut p.kernels[product].checks);
        p.kernels[product] = Kernel { checks, ..fused };
        // The scores' kernel comes before the softmax's (it writes what the softmax reads).
        p.remove_kernel(softmax);
        p.remove_kernel(scores);
    }
}

/// The product of two loads of a GEMM kernel's body, when it is one in f32.
fn f32_product(p: &Program, k: &Kernel) -> Option<(GemmLoops, [Expr; 2])> {
    let g = k.schedule.gemm.clone().filter(|g| g.epilogue.is_none())?;
    let Body::Reduce { op: Reduction::Sum, value: Expr::Apply { args, compute: DType::F32, .. } } = &k.body else { return None };
    let [a @ Expr::Load { .. }, b @ Expr::Load { .. }] = args.as_slice() else { return None };
    (p.buffers[k.output].dtype == DType::F32 && k.rows.is_empty()).then(|| (g, [a.clone(), b.clone()]))
}

/// The next (scores, softmax, product) kernels to fuse, and the kernel
/// they become: `product` is an f32 matrix product whose first operand
/// (its rows) is the softmax's output, read along the softmax's axis by
/// the product's inner loop; the softmax's value reads the scores once, at
/// its own position; the scores are an f32 matrix product; each
/// intermediate has no other reader; and, renamed, the scores' first
/// operand does not read the keys, their second and the values do not
/// read the queries.
fn next_fusion(p: &Program) -> Option<(usize, usize, usize, Kernel)> {
    let readers = Readers::new(p);
    for (pi, product) in p.kernels.iter().enumerate() {
        let Some((g, [Expr::Load { buffer: probs, index: at }, value])) = f32_product(p, product) else { continue };
        let (Some(rows), Some(cols)) = (g.rows, g.cols) else { continue };
        if !readers.only_reader(p, probs, pi, &at) {
            continue;
        }
        let Some(si) = readers.writer(probs) else { continue };
        let softmax = &p.kernels[si];
        let Body::Along { func: AlongAxis::Softmax, axis, value: logit } = &softmax.body else { continue };
        let distinct_loops = at.iter().enumerate().all(|(d, i)| matches!(i, Index::Loop(l) if !at[..d].contains(&Index::Loop(*l))));
        if p.buffers[probs].dtype != DType::F32 || !softmax.rows.is_empty() || !distinct_loops || at.get(*axis) != Some(&Index::Loop(g.inner)) {
            continue;
        }
        let own: Vec<Index> = (0..softmax.loops.len()).map(Index::Loop).collect();
        let loads = logit.loads();
        let Some(ki) =
            loads.iter().filter(|(_, index)| *index == own.as_slice()).find_map(|(b, _)| readers.writer(*b).filter(|&k| p.kernels[k].schedule.gemm.is_some()))
        else {
            continue;
        };
        let scores = &p.kernels[ki];
        if loads.iter().filter(|(b, _)| *b == scores.output).count() != 1 || !readers.only_reader(p, scores.output, si, &own) || !(ki < si && si < pi) {
            continue;
        }
        // Only loads are renumbered into the fused nest.
        if [scores, softmax, product].iter().any(|k| k.gathers()) {
            continue;
        }
        let Some((sg, [q, k])) = f32_product(p, scores) else { continue };
        // The softmax's loop d (and the scores' output loop d) is the
        // product's loop at[d]; the scores' inner loop is the new depth loop.
        let depth = product.loops.len();
        let rename = |e: &Expr, inner: Option<usize>| {
            let mut e = e.clone();
            e.rewrite(&mut |e| match e {
                Expr::Load { index, .. } => {
                    for i in index.iter_mut() {
                        if let Index::Loop(l) = i {
                            *i = if Some(*l) == inner { Index::Loop(depth) } else { at[*l] };
                        }
                    }
                }
                Expr::LoopIndex(l) => {
                    if let Index::Loop(to) = at[*l] {
                        *l = to;
                    }
                }
                _ => {}
            });
            e
        };
        let (q, k) = (rename(&q, Some(sg.inner)), rename(&k, Some(sg.inner)));
        if q.reads_loop(g.inner) || k.reads_loop(rows) || value.reads_loop(rows) {
            continue;
        }
        let mut logit = rename(logit, None);
        logit.rewrite(&mut |e| {
            if matches!(e, Expr::Load { buffer, .. } if *buffer == scores.output) {
                *e = Expr::Row(0);
            }
        });
        let (logit, visible) = split_mask(logit);
        let Body::Reduce { value: Expr::Apply { func, .. }, .. } = &scores.body else { continue };
        let score = Expr::Apply { func: *func, compute: DType::F32, args: vec![q, k] };
        let mut loops = product.loops.clone();
        loops.push(Loop { extent: scores.loops[sg.inner].extent, role: Role::Reduce });
        let fused = Kernel {
            output: product.output,
            loops,
            rows: vec![RowReduction { op: Reduction::Sum, dtype: DType::F32, value: score }],
            body: Body::Attention { keys: g.inner, logit, visible, value },
            schedule: Schedule {
                attention: Some(AttentionLoops { batch: g.batch, rows, cols, tile: TILE, scratch: [0, 1, 2].map(|i| p.buffers.len() + i) }),
                ..Schedule::default()
            },
            checks: Vec::new(),
        };
        return Some((ki, si, pi, fused));
    }
    None
}

/// A logit `where(c, x, -inf)` (or `where(c, -inf, x)`) whose condition
/// does not read the score: `x` and the mask `c` (or `not c`), so that a
/// tile the mask hides whole is skipped before its scores are computed.
fn split_mask(logit: Expr) -> (Expr, Option<Expr>) {
    let minus_infinity = |e: &Expr| match e {
        Expr::Literal(Literal::Float(v)) => *v == f64::NEG_INFINITY,
        Expr::Apply { func: MapFn::Unary(UnaryOp::Neg), args, .. } => matches!(args.as_slice(), [Expr::Literal(Literal::Float(v))] if *v == f64::INFINITY),
        _ => false,
    };
    let Expr::Apply { func: MapFn::Builtin(Elementwise::Where), args, .. } = &logit else { return (logit, None) };
    let [c, a, b] = args.as_slice() else { return (logit, None) };
    if reads_score(c) {
        return (logit, None);
    }
    if minus_infinity(b) {
        (a.clone(), Some(c.clone()))
    } else if minus_infinity(a) {
        (b.clone(), Some(Expr::Apply { func: MapFn::Unary(UnaryOp::Not), compute: DType::Bool, args: vec![c.clone()] }))
    } else {
        (logit, None)
    }
}

/// Whether an expression reads the score (`row0`).
pub(crate) fn reads_score(e: &Expr) -> bool {
    match e {
        Expr::Row(0) => true,
        Expr::Apply { args, .. } => args.iter().any(reads_score),
        _ => false,
    }
}
