//! Contraction order: an einsum of three or more operands is a set of
//! pairwise contractions, and the order decides the cost
//! (`einsum(a, b, c: i j, j k, k -> i)` must contract `b` with `c` first).
//! The rule associates any two operands of a contraction of three or more
//! (keeping the labels the rest or the result still need), so the e-graph
//! holds every contraction tree; the cost model's multiply-adds pick the
//! cheapest, in the spirit of opt_einsum. A sum over a contraction's
//! output distributes into it, so the association sums that label as early
//! as it can.

use crate::language::{EG, ENode, RuleError, Types, add, node_type, nodes_of, plain, rule, tensor_of};
use egg::{Id, Rewrite};
use nax_ir::Op;
use nax_ir::Type;
use nax_ops::Reduction;
use nax_values::Axis;
use std::collections::BTreeMap;

/// Operands beyond which a contraction is left in its written order (the
/// e-graph would hold every subset of the operands).
pub const MAX_OPERANDS: usize = 8;

/// contract(a, b, c, ..) => contract(contract(a, b), c, ..) for every pair.
fn associate(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Contract { labels, output } = op else { return Vec::new() };
    let n = node.children.len();
    let ty = node_type(eg, node).clone();
    let Type::Tensor(outer) = &ty else { return Vec::new() };
    if !(3..=MAX_OPERANDS).contains(&n) || node.children.iter().any(|&c| tensor_of(eg, c).is_none_or(|t| t.dtype != outer.dtype)) {
        return Vec::new();
    }
    // Each label's axis: from an operand where it is not a broadcast size 1.
    let mut axis_of: BTreeMap<usize, Axis> = BTreeMap::new();
    for (k, &c) in node.children.iter().enumerate() {
        if let Some(t) = tensor_of(eg, c) {
            for (&l, a) in labels[k].iter().zip(&t.axes) {
                let is_one = |s| eg.analysis.symbols.constant(s) == Some(1);
                if axis_of.get(&l).is_none_or(|x| is_one(x.size) && !is_one(a.size)) {
                    axis_of.insert(l, a.clone());
                }
            }
        }
    }
    let mut out = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            let rest: Vec<usize> = (0..n).filter(|&k| k != i && k != j).collect();
            let mut pair_keep: Vec<usize> =
                labels[i].iter().chain(&labels[j]).copied().filter(|l| output.contains(l) || rest.iter().any(|&r| labels[r].contains(l))).collect();
            pair_keep.sort_unstable();
            pair_keep.dedup();
            let axes: Option<Vec<Axis>> = pair_keep.iter().map(|l| axis_of.get(l).cloned()).collect();
            let Some(axes) = axes else { continue };
            let pair_op = Op::Contract { labels: vec![labels[i].clone(), labels[j].clone()], output: pair_keep.clone() };
            let pair = add(eg, pair_op, plain(outer, axes), vec![node.children[i], node.children[j]]);
            let mut outer_labels = vec![pair_keep];
            let mut children = vec![pair];
            for &r in &rest {
                outer_labels.push(labels[r].clone());
                children.push(node.children[r]);
            }
            out.push(add(eg, Op::Contract { labels: outer_labels, output: output.clone() }, ty.clone(), children));
        }
    }
    out
}

/// sum(contract(..), axes) => contract(..) without those output labels:
/// the sum distributes into the contraction, which then sums them with its
/// own (and association can sum them early, inside a pair). Floats only,
/// in the contraction's own dtype; and only where the sum is the
/// contraction's one use: otherwise the product is computed anyway, and
/// the sum of its result is cheap where a second product, summing more
/// axes in a nest, is not (a layer norm's bias gradient, the sum over
/// batch and positions of an input gradient, which the extraction, costing
/// each use apart, would compute twice).
fn sum_of_contraction(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Reduce { op: Reduction::Sum, axes } = op else { return Vec::new() };
    if eg[node.children[0]].parents().len() > 1 {
        return Vec::new();
    }
    let ty = node_type(eg, node).clone();
    let Type::Tensor(outer) = &ty else { return Vec::new() };
    let mut out = Vec::new();
    for (inner, inner_op) in nodes_of(eg, node.children[0], |o| matches!(o, Op::Contract { .. })) {
        let Op::Contract { labels, output } = inner_op else { continue };
        if !outer.dtype.is_float() || tensor_of(eg, node.children[0]).is_none_or(|t| t.dtype != outer.dtype) {
            continue;
        }
        let kept: Vec<usize> = output.iter().enumerate().filter(|(a, _)| !axes.contains(a)).map(|(_, &l)| l).collect();
        out.push(add(eg, Op::Contract { labels, output: kept }, ty.clone(), inner.children.clone()));
    }
    out
}

/// The family's rules.
pub fn rules() -> Result<Vec<Rewrite<ENode, Types>>, RuleError> {
    Ok(vec![
        rule("associate-contraction", |o| matches!(o, Op::Contract { labels, .. } if labels.len() >= 3), associate)?,
        rule("sum-of-contraction", |o| matches!(o, Op::Reduce { op: Reduction::Sum, .. }), sum_of_contraction)?,
    ])
}

#[cfg(test)]
mod tests {
    use crate::testing::optimized;

    // associate-contraction: einsum(a, b, c: i j, j k, k -> i) => contract(contract(b, c), a)
    #[test]
    fn a_chain_contracts_its_small_end_first() {
        let g =
            optimized("dim i = 4096\ndim j = 256\ndim k = 4096\ndef f(a: [i j], b: [j k], c: [k]) -> [i] {\n    return einsum(a, b, c: i j, j k, k -> i)\n}\n");
        assert_eq!(g, "(contract (contract b[1 2] c[2] -> [1])[1] a[0 1] -> [0])");
    }

    // associate-contraction: einsum(a, b, c: i j, j k, k l -> i l) with k = 2 => contract(contract(a, b), c)
    #[test]
    fn a_chain_with_a_small_middle_contracts_its_left_first() {
        let g = optimized(
            "dim i = 8\ndim j = 512\ndim k = 2\ndim l = 512\ndef f(a: [i j], b: [j k], c: [k l]) -> [i l] {\n    return einsum(a, b, c: i j, j k, k l -> i l)\n}\n",
        );
        assert_eq!(g, "(contract (contract a[0 1] b[1 2] -> [0 2])[0 2] c[2 3] -> [0 3])");
    }

    // associate-contraction: a two-operand contraction => unchanged
    #[test]
    fn a_binary_contraction_is_left_alone() {
        assert_eq!(optimized("dim i = 4\ndim j = 5\ndef f(a: [i j], b: [j]) -> [i] {\n    return a @ b\n}\n"), "(contract a[0 1] b[1] -> [0])");
    }

    // sum-of-contraction: sum(a @ b, k) => contract(a, b) -> [i]
    #[test]
    fn a_sum_of_a_product_is_one_contraction() {
        let g = optimized("dim i = 4\ndim j = 5\ndim k = 6\ndef f(a: [i j], b: [j k]) -> [i] {\n    return sum(a @ b, k)\n}\n");
        assert_eq!(g, "(contract a[0 2] b[2 1] -> [0])");
    }

    // sum-of-contraction, then associate-contraction: sum(einsum(a, b, c), l) sums l inside the cheap pair
    #[test]
    fn a_sum_of_a_product_used_again_stays_a_sum() {
        let g = optimized("dim i = 4\ndim j = 5\ndim k = 6\ndef f(a: [i j], b: [j k]) -> [i k] {\n    p = a @ b\n    return p + sum(p, k)\n}\n");
        assert!(g.contains("(sum [1] (contract a[0 2] b[2 1] -> [0 1]))"), "{g}");
    }

    #[test]
    fn a_sum_distributes_into_a_chain() {
        let g = optimized(
            "dim i = 8\ndim j = 512\ndim k = 512\ndim l = 512\ndef f(a: [i j], b: [j k], c: [k l]) -> [i] {\n    return sum(einsum(a, b, c: i j, j k, k l -> i l), l)\n}\n",
        );
        assert_eq!(g, "(contract (contract a[0 1] b[1 2] -> [0 2])[0 2] c[2 3] -> [0])");
    }

    #[test]
    fn extraction_is_deterministic() {
        let source = "dim i = 64\ndim j = 64\ndim k = 64\ndim l = 64\ndef f(a: [i j], b: [j k], c: [k l], d: [l]) -> [i] {\n    return einsum(a, b, c, d: i j, j k, k l, l -> i)\n}\n";
        let first = optimized(source);
        for _ in 0..3 {
            assert_eq!(optimized(source), first);
        }
    }
}
