//! Permute algebra: a permute of a permute is one permute, an identity
//! permute is its operand, and permutes are absorbed as index maps into the
//! elementwise maps and contractions that read them or that they read;
//! permutes under reductions and softmaxes move outward, where their
//! consumers can absorb them. No kernel then materialises a transpose
//! unless the result itself is one.

use crate::language::{
    EG, ENode, RuleError, Types, absorb_operands, add, as_type, inverse, is_identity, node_type, nodes_of, rule, tensor_of, unary_nodes, with_axes,
};
use egg::{Id, Rewrite};
use nax_ir::Op;
use nax_ir::Type;
use nax_ops::AlongAxis;

fn is_permute(op: &Op) -> bool {
    matches!(op, Op::Permute { .. })
}

/// A permute's permutation.
pub(crate) fn permutation(op: &Op) -> Option<Vec<usize>> {
    match op {
        Op::Permute { perm } => Some(perm.clone()),
        _ => None,
    }
}

/// The permutes in a class: their permutation and operand.
fn permutes(eg: &EG, class: Id) -> Vec<(Vec<usize>, Id)> {
    unary_nodes(eg, class, permutation)
}

/// permute(permute(x, p1), p2) => permute(x, p1 . p2); an identity is `x`.
fn permute_of_permute(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Permute { perm: outer } = op else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    permutes(eg, node.children[0])
        .into_iter()
        .map(|(inner, x)| {
            let composed: Vec<usize> = outer.iter().map(|&i| inner[i]).collect();
            if is_identity(&composed) { as_type(eg, x, &ty) } else { add(eg, Op::Permute { perm: composed }, ty.clone(), vec![x]) }
        })
        .collect()
}

/// permute(x, identity) => x
fn identity_permute(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Permute { perm } = op else { return Vec::new() };
    if !is_identity(perm) {
        return Vec::new();
    }
    let ty = node_type(eg, node).clone();
    vec![as_type(eg, node.children[0], &ty)]
}

/// map(.., permute(x, p), ..) => map(.., x, ..) reading x through the
/// permutation; contract(.., permute(x, p), ..) => contract(.., x, ..)
/// with x's labels permuted.
fn permute_into_operand(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    // Permute-result axis j is x's axis perm[j]: x's axis perm[j] takes entry j.
    absorb_operands(eg, node, op, permutation, |_, _, list, perm, _| {
        let mut permuted = vec![0; perm.len()];
        for (j, &p) in perm.iter().enumerate() {
            permuted[p] = list[j];
        }
        Some(permuted)
    })
}

/// permute(map(xs), p) => map(xs) computing its result in the permuted order.
fn permute_of_map(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Permute { perm } = op else { return Vec::new() };
    let inv = inverse(perm);
    let ty = node_type(eg, node).clone();
    nodes_of(eg, node.children[0], |o| matches!(o, Op::Map { .. }))
        .into_iter()
        .filter_map(|(inner, inner_op)| match inner_op {
            Op::Map { func, maps, compute } => {
                let maps = maps.iter().map(|m| m.iter().map(|&r| inv[r]).collect()).collect();
                Some(add(eg, Op::Map { func, maps, compute }, ty.clone(), inner.children))
            }
            _ => None,
        })
        .collect()
}

/// permute(contract(xs), p) => contract(xs) with its output labels permuted.
fn permute_of_contraction(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Permute { perm } = op else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    nodes_of(eg, node.children[0], |o| matches!(o, Op::Contract { .. }))
        .into_iter()
        .filter_map(|(inner, inner_op)| match inner_op {
            Op::Contract { labels, output } => {
                let output = perm.iter().map(|&p| output[p]).collect();
                Some(add(eg, Op::Contract { labels, output }, ty.clone(), inner.children))
            }
            _ => None,
        })
        .collect()
}

/// For a reduction over `axes` of permute(x, p): the axes of x it reduces
/// (ascending), the axes of x it keeps (ascending), and the permutation
/// that puts the kept axes in the permute's order.
pub(crate) fn reduction_through(perm: &[usize], axes: &[usize]) -> (Vec<usize>, Vec<usize>, Vec<usize>) {
    let mut x_axes: Vec<usize> = axes.iter().map(|&a| perm[a]).collect();
    x_axes.sort_unstable();
    let kept: Vec<usize> = (0..perm.len()).filter(|a| !x_axes.contains(a)).collect();
    // Result axis t is the permute's t-th kept axis, x's axis perm[i].
    let q = (0..perm.len()).filter(|i| !axes.contains(i)).map(|i| kept.iter().position(|&k| k == perm[i]).unwrap_or(0)).collect();
    (x_axes, kept, q)
}

/// `op` applied to x in x's own axis order, then the kept axes permuted
/// by `q` into the type `ty` (no permute when `q` is the identity).
pub(crate) fn then_permute(eg: &mut EG, op: Op, x: Id, kept: &[usize], q: Vec<usize>, ty: &Type) -> Option<Id> {
    let Type::Tensor(outer) = ty else { return None };
    let xt = tensor_of(eg, x)?.clone();
    if is_identity(&q) {
        return Some(add(eg, op, ty.clone(), vec![x]));
    }
    let inner = add(eg, op, with_axes(outer, kept.iter().map(|&a| xt.axes[a].clone()).collect()), vec![x]);
    Some(add(eg, Op::Permute { perm: q }, ty.clone(), vec![inner]))
}

/// reduce(permute(x, p), axes) => permute(reduce(x, p(axes)), q): the
/// reduction in x's own order, then the remaining axes permuted.
fn reduce_of_permute(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Reduce { op: reduction, axes } = op else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let mut out = Vec::new();
    for (perm, x) in permutes(eg, node.children[0]) {
        let (x_axes, kept, q) = reduction_through(&perm, axes);
        out.extend(then_permute(eg, Op::Reduce { op: *reduction, axes: x_axes }, x, &kept, q, &ty));
    }
    out
}

/// along(permute(x, p), a) => permute(along(x, p[a]), p) (for logsumexp,
/// which drops its axis, the permutation of the remaining axes).
fn along_of_permute(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Along { func, axis } = op else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let mut out = Vec::new();
    for (perm, x) in permutes(eg, node.children[0]) {
        let along = Op::Along { func: *func, axis: perm[*axis] };
        let (kept, q) = if *func == AlongAxis::LogSumExp {
            let (_, kept, q) = reduction_through(&perm, &[*axis]);
            (kept, q)
        } else {
            ((0..perm.len()).collect(), perm.clone())
        };
        out.extend(then_permute(eg, along, x, &kept, q, &ty));
    }
    out
}

/// The family's rules.
pub fn rules() -> Result<Vec<Rewrite<ENode, Types>>, RuleError> {
    Ok(vec![
        rule("permute-of-permute", is_permute, permute_of_permute)?,
        rule("identity-permute", is_permute, identity_permute)?,
        rule("permute-into-map", |o| matches!(o, Op::Map { .. }), permute_into_operand)?,
        rule("permute-of-map", is_permute, permute_of_map)?,
        rule("permute-into-contraction", |o| matches!(o, Op::Contract { .. }), permute_into_operand)?,
        rule("permute-of-contraction", is_permute, permute_of_contraction)?,
        rule("reduce-of-permute", |o| matches!(o, Op::Reduce { .. }), reduce_of_permute)?,
        rule("along-of-permute", |o| matches!(o, Op::Along { .. }), along_of_permute)?,
    ])
}

#[cfg(test)]
mod tests {
    use crate::testing::function as f;

    // permute-of-permute: permute(permute(x, [1 2 0]), [1 2 0]) => permute(x, [2 0 1])
    #[test]
    fn permute_of_permute() {
        assert_eq!(f("x: [a b c]) -> [c a b]", "rearrange(rearrange(x, a b c -> b c a), b c a -> c a b)"), "(permute [2 0 1] x)");
    }

    // identity-permute: permute(permute(x, [1 0]), [1 0]) => x
    #[test]
    fn identity_permute() {
        assert_eq!(f("x: [a b]) -> [a b]", "rearrange(rearrange(x, a b -> b a), b a -> a b)"), "x");
    }

    // permute-into-map: add(permute(x, [1 0]), y) => add(x[1 0], y)
    #[test]
    fn permute_into_map() {
        assert_eq!(f("x: [a b], y: [b a]) -> [b a]", "rearrange(x, a b -> b a) + y"), "(add x[1 0] y[0 1])");
    }

    // permute-of-map: permute(add(x, y), [1 0]) => add(x[1 0], y[1 0])
    #[test]
    fn permute_of_map() {
        assert_eq!(f("x: [a b], y: [a b]) -> [b a]", "rearrange(x + y, a b -> b a)"), "(add x[1 0] y[1 0])");
    }

    // permute-into-contraction: contract(permute(x, [1 0]), w) => contract(x with swapped labels, w)
    #[test]
    fn permute_into_contraction() {
        assert_eq!(f("x: [a k], w: [a b]) -> [k b]", "rearrange(x, a k -> k a) @ w"), "(contract x[2 0] w[2 1] -> [0 1])");
    }

    // permute-of-contraction: permute(contract(x, w), [1 0]) => contract(x, w) -> [1 0]
    #[test]
    fn permute_of_contraction() {
        assert_eq!(f("x: [k a], w: [a b]) -> [b k]", "rearrange(x @ w, k b -> b k)"), "(contract x[0 2] w[2 1] -> [1 0])");
    }

    // reduce-of-permute: sum(permute(x, [2 1 0]), [1]) => permute(sum(x, [1]), [1 0])
    #[test]
    fn reduce_of_permute() {
        assert_eq!(f("x: [a b c]) -> [c a]", "reduce(rearrange(x, a b c -> c b a), c b a -> c a, sum)"), "(permute [1 0] (sum [1] x))");
    }

    // along-of-permute: add(softmax(permute(x, [1 0]), 1), y) => add(softmax(x, 0)[1 0], y)
    #[test]
    fn along_of_permute() {
        assert_eq!(f("x: [a b], y: [b a]) -> [b a]", "softmax(rearrange(x, a b -> b a), a) + y"), "(add (softmax 0 x)[1 0] y[0 1])");
    }

    // along-of-permute: logsumexp(permute(x, [2 1 0]), c) => permute(logsumexp(x, 2), [1 0])
    #[test]
    fn logsumexp_of_permute() {
        assert_eq!(f("x: [a b c]) -> [b a]", "logsumexp(rearrange(x, a b c -> c b a), c)"), "(permute [1 0] (logsumexp 2 x))");
    }
}
