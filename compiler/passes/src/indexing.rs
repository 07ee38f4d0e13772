//! Indexing algebra (LANGUAGE.md section 13): a slice of an elementwise
//! map is the map of its operands' slices (the map then computes only the
//! elements kept); a slice that falls inside one operand of a
//! concatenation is that operand's slice; a gather of a gather gathers the
//! indices first (`take(take(t, i, V), j, n)` is `take(t, take(i, j, n),
//! V)`: the small index tensor is gathered, not the rows); a tensor added
//! to a scatter-add is its base (`x + scatter_add(v, i)` is
//! `scatter_add(v, i, x)`: the values are added into `x` rather than into
//! zeros that are then added to it); and a permute moves out through a
//! slice, a scan and an arg-reduction, where its consumers can absorb it.

use crate::language::{EG, ENode, RuleError, Types, add, node_type, nodes_of, rule, tensor_of, type_of, unary_nodes, with_axes};
use crate::permute::{permutation, reduction_through, then_permute};
use egg::{Id, Rewrite};
use nax_contract::Size;
use nax_ir::{Op, Type};
use nax_values::TensorType;

/// `t` with axis `axis` resized to `size`.
fn resized(t: &TensorType, axis: usize, size: Size) -> Type {
    let mut axes = t.axes.clone();
    axes[axis].size = size;
    with_axes(t, axes)
}

/// slice(map(xs), a) => map(slice(x) for each operand reading result axis a).
fn slice_of_map(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Slice { axis, start, step } = op else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let Some(len) = tensor_of(eg, node.children[0]).and(match &ty {
        Type::Tensor(t) => Some(t.axes[*axis].size),
        Type::Host(..) => None,
    }) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (inner, inner_op) in nodes_of(eg, node.children[0], |o| matches!(o, Op::Map { .. })) {
        let Op::Map { maps, .. } = &inner_op else { continue };
        let mut children = Vec::with_capacity(inner.children.len());
        for (&x, map) in inner.children.iter().zip(maps) {
            match map.iter().position(|&r| r == *axis) {
                Some(j) => {
                    let Some(t) = tensor_of(eg, x).cloned() else { return out };
                    // A size-1 operand axis broadcasts: it stays whole.
                    if eg.analysis.symbols.constant(t.axes[j].size) == Some(1) {
                        children.push(x);
                    } else {
                        let sliced = resized(&t, j, len);
                        children.push(add(eg, Op::Slice { axis: j, start: *start, step: *step }, sliced, vec![x]));
                    }
                }
                None => children.push(x),
            }
        }
        out.push(add(eg, inner_op.clone(), ty.clone(), children));
    }
    out
}

/// slice(concat(xs), a) => slice(x_k) when the slice's elements, known
/// when compiling, all lie in operand k.
fn slice_of_concat(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Slice { axis, start, step } = op else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let symbols = &eg.analysis.symbols;
    let (Some(first), Some(len)) = (
        symbols.constant(*start),
        tensor_of(eg, eg.find(node.children[0])).and(match &ty {
            Type::Tensor(t) => symbols.constant(t.axes[*axis].size),
            Type::Host(..) => None,
        }),
    ) else {
        return Vec::new();
    };
    if len == 0 {
        return Vec::new();
    }
    let last = first + (len - 1) * step;
    let mut out = Vec::new();
    for (inner, inner_op) in nodes_of(eg, node.children[0], |o| matches!(o, Op::Concat { .. })) {
        if !matches!(inner_op, Op::Concat { axis: a } if a == *axis) {
            continue;
        }
        let mut offset = 0u64;
        for &x in &inner.children {
            let Some(size) = tensor_of(eg, x).and_then(|t| eg.analysis.symbols.constant(t.axes[*axis].size)) else { break };
            if first >= offset && last < offset + size {
                out.push(add(eg, Op::Slice { axis: *axis, start: Size::Const(first - offset), step: *step }, ty.clone(), vec![x]));
                break;
            }
            offset += size;
        }
    }
    out
}

/// take(take(t, i, V), j, a) with a one of i's axes => take(t, take(i, j, a'), V).
fn take_of_take(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Take { axis: outer } = op else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let j = node.children[1];
    let Some(jt) = tensor_of(eg, j).cloned() else { return Vec::new() };
    let mut out = Vec::new();
    for (inner, inner_op) in nodes_of(eg, node.children[0], |o| matches!(o, Op::Take { .. })) {
        let Op::Take { axis: v } = inner_op else { continue };
        let i = inner.children[1];
        let Some(it) = tensor_of(eg, i).cloned() else { continue };
        // The outer take's axis must be one of the inner indices' axes.
        let Some(q) = outer.checked_sub(v).filter(|&q| q < it.axes.len()) else { continue };
        let mut axes = it.axes[..q].to_vec();
        axes.extend(jt.axes.iter().cloned());
        axes.extend(it.axes[q + 1..].iter().cloned());
        let ids = add(eg, Op::Take { axis: q }, with_axes(&it, axes), vec![i, j]);
        out.push(add(eg, Op::Take { axis: v }, ty.clone(), vec![inner.children[0], ids]));
    }
    out
}

/// add(x, scatter_add(v, i)) (either order, same types, no broadcast) =>
/// scatter_add(v, i, x).
fn add_of_scatter(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Map { func: nax_ir::MapFn::Binary(nax_ops::BinaryOp::Add), maps, compute } = op else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let Type::Tensor(t) = &ty else { return Vec::new() };
    let identity: Vec<usize> = (0..t.rank()).collect();
    if node.children.len() != 2 || maps.iter().any(|m| *m != identity) || *compute != t.dtype || node.children.iter().any(|&c| *type_of(eg, c) != ty) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (k, &c) in node.children.iter().enumerate() {
        let base = node.children[1 - k];
        for (scatter, scatter_op) in nodes_of(eg, c, |o| matches!(o, Op::ScatterAdd { .. })) {
            if scatter.children.len() == 2 {
                out.push(add(eg, scatter_op, ty.clone(), vec![scatter.children[0], scatter.children[1], base]));
            }
        }
    }
    out
}

/// slice(permute(x, p), a) => permute(slice(x, p[a]), p); likewise a scan.
fn through_permute(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let ty = node_type(eg, node).clone();
    let Type::Tensor(outer) = &ty else { return Vec::new() };
    let mut out = Vec::new();
    for (perm, x) in unary_nodes(eg, node.children[0], permutation) {
        let Some(xt) = tensor_of(eg, x).cloned() else { continue };
        let (inner_op, inner_ty) = match op {
            Op::Slice { axis, start, step } => (Op::Slice { axis: perm[*axis], start: *start, step: *step }, resized(&xt, perm[*axis], outer.axes[*axis].size)),
            Op::Scan { op: scan, axis } => (Op::Scan { op: *scan, axis: perm[*axis] }, type_of(eg, x).clone()),
            _ => return Vec::new(),
        };
        let inner = add(eg, inner_op, inner_ty, vec![x]);
        out.push(add(eg, Op::Permute { perm }, ty.clone(), vec![inner]));
    }
    out
}

/// arg(permute(x, p), a) => permute(arg(x, p[a]), q) of the remaining
/// axes, as a reduction moves out of a permute.
fn arg_of_permute(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::ArgReduce { op: reduction, axis } = op else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let mut out = Vec::new();
    for (perm, x) in unary_nodes(eg, node.children[0], permutation) {
        let (x_axes, kept, q) = reduction_through(&perm, &[*axis]);
        out.extend(then_permute(eg, Op::ArgReduce { op: *reduction, axis: x_axes[0] }, x, &kept, q, &ty));
    }
    out
}

/// The family's rules.
pub fn rules() -> Result<Vec<Rewrite<ENode, Types>>, RuleError> {
    Ok(vec![
        rule("slice-of-map", |o| matches!(o, Op::Slice { .. }), slice_of_map)?,
        rule("slice-of-concat", |o| matches!(o, Op::Slice { .. }), slice_of_concat)?,
        rule("take-of-take", |o| matches!(o, Op::Take { .. }), take_of_take)?,
        rule("add-of-scatter", |o| matches!(o, Op::Map { func: nax_ir::MapFn::Binary(nax_ops::BinaryOp::Add), .. }), add_of_scatter)?,
        rule("slice-of-permute", |o| matches!(o, Op::Slice { .. }), through_permute)?,
        rule("scan-of-permute", |o| matches!(o, Op::Scan { .. }), through_permute)?,
        rule("arg-of-permute", |o| matches!(o, Op::ArgReduce { .. }), arg_of_permute)?,
    ])
}

#[cfg(test)]
mod tests {
    use crate::testing::function as f;

    // slice-of-map: slice(add(x, y), m) => add(slice(x), slice(y))
    #[test]
    fn slice_of_map() {
        assert_eq!(f("x: [a c], y: [c]) -> [a s]", "(x + y)[c = 1:5:2 as s]"), "(add (slice 1 1 2 x)[0 1] (slice 0 1 2 y)[1])");
    }

    // slice-of-concat: slice(concat(x, y), 7..9) => slice(y, 2..4)
    #[test]
    fn slice_of_concat() {
        assert_eq!(f("x: [b], y: [c]) -> [s]", "concat(x, y: b, c -> t)[t = 7:9 as s]"), "(slice 0 2 1 y)");
    }

    // take-of-take: take(take(t, i, a), j, n) => take(t, take(i, j, 0), a)
    #[test]
    fn take_of_take() {
        assert_eq!(f("t: [a c], i: Int[n], j: Int[m]) -> [m c]", "take(take(t, i, a), j, n)"), "(take 0 t (take 0 i j))");
    }

    // add-of-scatter: add(x, scatter_add(v, i)) => scatter_add(v, i, x)
    #[test]
    fn add_of_scatter() {
        let graph = "graph f\n%0 = input 0 \"x\" : f32 plain [V:6 D:4] range -inf inf\n%1 = input 1 \"v\" : f32 plain [n:3 D:4] range -inf inf\n%2 = input 2 \"i\" : i64 plain [n:3] range -inf inf\n%3 = scatter_add 0 %1 %2 : f32 plain [V:6 D:4] range -inf inf\n%4 = map add compute f32 %0[0 1] %3[0 1] : f32 plain [V:6 D:4] range -inf inf\ninputs %0 %1 %2\noutput %4\n";
        assert_eq!(crate::testing::optimized_text(graph), "(scatter_add 0 v i x)");
    }

    // slice-of-permute: slice(permute(x, [1 0]), 0) => permute(slice(x, 1), [1 0])
    #[test]
    fn slice_of_permute() {
        assert_eq!(f("x: [a c], y: [k a]) -> [k a]", "rearrange(x, a c -> c a)[c = 0:3 as k] + y"), "(add (slice 1 0 1 x)[1 0] y[0 1])");
    }

    // scan-of-permute: cumsum(permute(x, [1 0]), 0) => permute(cumsum(x, 1), [1 0])
    #[test]
    fn scan_of_permute() {
        assert_eq!(f("x: [a c], y: [c a]) -> [c a]", "cumsum(rearrange(x, a c -> c a), c) + y"), "(add (scan sum 1 x)[1 0] y[0 1])");
    }

    // arg-of-permute: argmax(permute(x, [2 1 0]), c) => permute(argmax(x, 2), [1 0])
    #[test]
    fn arg_of_permute() {
        assert_eq!(f("x: [a b c]) -> Int[b a]", "argmax(rearrange(x, a b c -> c b a), c)"), "(permute [1 0] (argmax 2 x))");
    }
}
