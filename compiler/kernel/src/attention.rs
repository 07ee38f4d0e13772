//! Attention fusion, after kernels are formed: a matrix product of scores
//! (`s = q k`), a softmax of an expression of `s` along the keys (the
//! logits: a scale, a mask), and a matrix product of the probabilities with
//! values (`p v`, summed over the keys) become one kernel with
//! [`Body::Attention`], run tile by tile with an online softmax (as
//! FlashAttention does): the scores and probabilities, `n x m` per head,
//! are never stored, and a tile whose logits are all masked skips its
//! product with the values.
//!
//! Half-float attention (bf16, f16: queries, keys, values, scores,
//! probabilities and output of one element type) fuses too: the driver
//! widens the operands to f32 as it packs them, keeps the scores and
//! probabilities in f32 and rounds each output element once. The kernels
//! it replaces rounded the scores and the probabilities to the element
//! type as well; the fused result is the more accurate one, within a
//! rounding of the output of the exact attention.

use crate::kernel::{AttentionLoops, Body, Buffer, BufferKind, Expr, GemmLoops, Index, Kernel, Loop, Program, Role, RowReduction, Schedule};
use crate::rows::{Readers, remove_kernels};
use nax_contract::DType;
use nax_ir::{Literal, MapFn};
use nax_ops::UnaryOp;
use nax_ops::{AlongAxis, Elementwise, Reduction};
use std::collections::HashSet;

/// The tiles: 64 queries by 64 keys. A tile's scores (16 KiB of f32) and
/// its rows' accumulated outputs stay in the first two cache levels
/// between the two products; small tiles skip most of what a causal mask
/// hides.
const TILE: (u64, u64) = (64, 64);

/// Fuses each attention pattern into one kernel, in sweeps: a sweep finds
/// every pattern whose kernels no other of its patterns uses, and fuses
/// them together (patterns of a written-out loop's turns at once).
pub fn fuse(p: &mut Program) {
    loop {
        let found = fusions(p);
        if found.is_empty() {
            return;
        }
        let mut removed = Vec::new();
        for (scores, softmax, product, fused) in found {
            // The scratch buffers were numbered from the end of the list, pattern by pattern.
            if let Some(a) = &fused.schedule.attention {
                for shape in a.scratch_shapes(&fused.loops) {
                    p.buffers.push(Buffer { dtype: DType::F32, shape, kind: BufferKind::Tile });
                }
            }
            let checks = std::mem::take(&mut p.kernels[product].checks);
            p.kernels[product] = Kernel { checks, ..fused };
            removed.extend([softmax, scores]);
        }
        remove_kernels(p, removed);
    }
}

/// The patterns of one sweep, by their products in order, each with the
/// kernel it becomes; a pattern that shares a kernel with one found before
/// it waits for the next sweep.
fn fusions(p: &Program) -> Vec<(usize, usize, usize, Kernel)> {
    let readers = Readers::new(p);
    let mut used = HashSet::new();
    let mut found = Vec::new();
    for (pi, product) in p.kernels.iter().enumerate() {
        let scratch = p.buffers.len() + 3 * found.len();
        let Some((ki, si, fused)) = pattern(p, &readers, pi, product, scratch) else { continue };
        if [ki, si, pi].iter().any(|k| used.contains(k)) {
            continue;
        }
        used.extend([ki, si, pi]);
        found.push((ki, si, pi, fused));
    }
    found
}

/// The element types attention fuses in: f32, and the half floats whose
/// products the driver widens to f32 as it packs them.
fn fuses(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::BF16 | DType::F16)
}

/// The product of two loads of a GEMM kernel's body and its element type,
/// when the loads, the product and its output are of one type attention
/// fuses in.
fn matrix_product(p: &Program, k: &Kernel) -> Option<(GemmLoops, [Expr; 2], DType)> {
    let g = k.schedule.gemm.clone().filter(|g| g.epilogue.is_none())?;
    let Body::Reduce { op: Reduction::Sum, value: Expr::Apply { args, compute, .. } } = &k.body else { return None };
    let [a @ Expr::Load { buffer: x, .. }, b @ Expr::Load { buffer: y, .. }] = args.as_slice() else { return None };
    let dtype = p.buffers[k.output].dtype;
    let one_type = [*compute, p.buffers[*x].dtype, p.buffers[*y].dtype].iter().all(|&d| d == dtype);
    (fuses(dtype) && one_type && k.rows.is_empty()).then(|| (g, [a.clone(), b.clone()], dtype))
}

/// The (scores, softmax) kernels that fuse with matrix product `pi`, and
/// the kernel they become, its scratch buffers numbered from `scratch`:
/// `product` is a matrix product (f32, bf16 or f16) whose first operand
/// (its rows) is the softmax's output, read along the softmax's axis by
/// the product's inner loop; the softmax's value reads the scores once, at
/// its own position; the scores are a matrix product; the scores, the
/// probabilities and both products are of one element type; each
/// intermediate has no other reader; and, renamed, the scores' first
/// operand does not read the keys, their second and the values do not
/// read the queries.
fn pattern(p: &Program, readers: &Readers, pi: usize, product: &Kernel, scratch: usize) -> Option<(usize, usize, Kernel)> {
    let Some((g, [Expr::Load { buffer: probs, index: at }, value], dtype)) = matrix_product(p, product) else { return None };
    let (Some(rows), Some(cols)) = (g.rows, g.cols) else { return None };
    if !readers.only_reader(p, probs, pi, &at) {
        return None;
    }
    let si = readers.writer(probs)?;
    let softmax = &p.kernels[si];
    let Body::Along { func: AlongAxis::Softmax, axis, value: logit } = &softmax.body else { return None };
    let distinct_loops = at.iter().enumerate().all(|(d, i)| matches!(i, Index::Loop(l) if !at[..d].contains(&Index::Loop(*l))));
    if p.buffers[probs].dtype != dtype || !softmax.rows.is_empty() || !distinct_loops || at.get(*axis) != Some(&Index::Loop(g.inner)) {
        return None;
    }
    let own: Vec<Index> = (0..softmax.loops.len()).map(Index::Loop).collect();
    let loads = logit.loads();
    let ki =
        loads.iter().filter(|(_, index)| *index == own.as_slice()).find_map(|(b, _)| readers.writer(*b).filter(|&k| p.kernels[k].schedule.gemm.is_some()))?;
    let scores = &p.kernels[ki];
    if loads.iter().filter(|(b, _)| *b == scores.output).count() != 1 || !readers.only_reader(p, scores.output, si, &own) || !(ki < si && si < pi) {
        return None;
    }
    // Only loads are renumbered into the fused nest.
    if [scores, softmax, product].iter().any(|k| k.gathers()) {
        return None;
    }
    let (sg, [q, k], scores_dtype) = matrix_product(p, scores)?;
    if scores_dtype != dtype {
        return None;
    }
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
        return None;
    }
    let mut logit = rename(logit, None);
    // The score is the row reduction; the logit computes in f32 (a half
    // float's logit rounded no more than its score).
    logit.rewrite(&mut |e| match e {
        Expr::Load { buffer, .. } if *buffer == scores.output => *e = Expr::Row(0),
        Expr::Apply { compute, .. } if matches!(compute, DType::BF16 | DType::F16) => *compute = DType::F32,
        _ => {}
    });
    let (logit, visible) = split_mask(logit);
    let Body::Reduce { value: Expr::Apply { func, .. }, .. } = &scores.body else { return None };
    let score = Expr::Apply { func: *func, compute: dtype, args: vec![q, k] };
    let mut loops = product.loops.clone();
    loops.push(Loop { extent: scores.loops[sg.inner].extent, role: Role::Reduce });
    let fused = Kernel {
        output: product.output,
        loops,
        rows: vec![RowReduction { op: Reduction::Sum, dtype: DType::F32, value: score }],
        body: Body::Attention { keys: g.inner, logit, visible, value },
        schedule: Schedule {
            attention: Some(AttentionLoops { batch: g.batch, rows, cols, tile: TILE, scratch: [0, 1, 2].map(|i| scratch + i) }),
            ..Schedule::default()
        },
        checks: Vec::new(),
    };
    Some((ki, si, fused))
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
