//! Broadcasts: an expansion is absorbed as an index map (stride 0) into the
//! elementwise maps and contractions that read it, expansions compose with
//! each other and with permutes, and a reduction of a broadcast is computed
//! on the unexpanded value (`sum` over new axes is a multiplication by
//! their count; `mean`, `max` and `min` over them are the value itself; a
//! reduction over the original axes runs before the expansion).

use crate::language::{EG, ENode, RuleError, Types, absorb_operands, add, as_type, is_identity, node_type, rule, tensor_of, unary_nodes, with_axes};
use egg::{Id, Rewrite};
use nax_contract::HostType;
use nax_ir::Type;
use nax_ir::{Literal, MapFn, Op};
use nax_ops::BinaryOp;
use nax_ops::Reduction;
use nax_values::Range;

fn is_expand(op: &Op) -> bool {
    matches!(op, Op::Expand { .. })
}

/// An expansion's map.
fn expand_map(op: &Op) -> Option<Vec<usize>> {
    match op {
        Op::Expand { map } => Some(map.clone()),
        _ => None,
    }
}

/// The expansions in a class: their map and operand.
fn expands(eg: &EG, class: Id) -> Vec<(Vec<usize>, Id)> {
    unary_nodes(eg, class, expand_map)
}

/// map(.., expand(x, e), ..) => map(.., x, ..) reading x with stride 0
/// along the new axes; contract(.., expand(x, e), ..) => contract(.., x,
/// ..) when every label the expansion adds (or widens from size 1) has its
/// extent from another operand: a broadcast operand does not depend on
/// those labels.
fn expand_into_operand(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let labels = match op {
        Op::Contract { labels, .. } => Some(labels),
        _ => None,
    };
    absorb_operands(eg, node, op, expand_map, |eg, k, list, map, x| {
        if let Some(labels) = labels {
            let (expanded, xt) = (tensor_of(eg, node.children[k])?, tensor_of(eg, x)?);
            let symbols = &eg.analysis.symbols;
            let backed = |axis: usize| map.iter().position(|&m| m == axis).is_some_and(|j| symbols.same(xt.axes[j].size, expanded.axes[axis].size));
            let elsewhere = |axis: usize| {
                node.children.iter().enumerate().any(|(o, &c)| {
                    o != k
                        && tensor_of(eg, c).is_some_and(|t| {
                            labels[o].iter().zip(&t.axes).any(|(&l, a)| l == labels[k][axis] && symbols.same(a.size, expanded.axes[axis].size))
                        })
                })
            };
            if !(0..expanded.axes.len()).all(|axis| backed(axis) || elsewhere(axis)) {
                return None;
            }
        }
        Some(map.iter().map(|&e| list[e]).collect())
    })
}

/// expand(expand(x, e1), e2) => expand(x, e2 . e1)
fn expand_of_expand(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Expand { map: outer } = op else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    expands(eg, node.children[0])
        .into_iter()
        .map(|(inner, x)| {
            let map = inner.iter().map(|&m| outer[m]).collect();
            add(eg, Op::Expand { map }, ty.clone(), vec![x])
        })
        .collect()
}

/// permute(expand(x, e), p) => expand(x, p^-1 . e)
fn permute_of_expand(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Permute { perm } = op else { return Vec::new() };
    let inv = crate::language::inverse(perm);
    let ty = node_type(eg, node).clone();
    expands(eg, node.children[0])
        .into_iter()
        .map(|(map, x)| {
            let map = map.iter().map(|&m| inv[m]).collect();
            add(eg, Op::Expand { map }, ty.clone(), vec![x])
        })
        .collect()
}

/// expand(x, identity) of the same sizes => x
fn identity_expand(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Expand { map } = op else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let x = node.children[0];
    let (Type::Tensor(t), Some(xt)) = (&ty, tensor_of(eg, x)) else { return Vec::new() };
    if is_identity(map) && eg.analysis.same_sizes(xt, t) { vec![as_type(eg, x, &ty)] } else { Vec::new() }
}

/// reduce(expand(x, e), axes): over new axes only, the value itself (times
/// their count for `sum`), expanded to the kept axes; over x's own axes
/// only, the reduction of x, expanded.
fn reduce_of_expand(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Reduce { op: reduction, axes } = op else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let Type::Tensor(outer) = &ty else { return Vec::new() };
    let Some(expanded) = tensor_of(eg, node.children[0]).cloned() else { return Vec::new() };
    let kept: Vec<usize> = (0..expanded.axes.len()).filter(|a| !axes.contains(a)).collect();
    let mut out = Vec::new();
    for (map, x) in expands(eg, node.children[0]) {
        let Some(xt) = tensor_of(eg, x).cloned() else { continue };
        let symbols = &eg.analysis.symbols;
        if axes.iter().all(|a| !map.contains(a)) {
            // Only new axes are reduced: every x axis is kept.
            let count = axes.iter().try_fold(1u64, |p, &a| symbols.constant(expanded.axes[a].size).and_then(|c| p.checked_mul(c)));
            let to_kept: Vec<usize> = map.iter().map(|m| kept.iter().position(|k| k == m).unwrap_or(0)).collect();
            let value = match reduction {
                Reduction::Mean | Reduction::Max | Reduction::Min if count.is_some_and(|c| c > 0) => add(eg, Op::Expand { map: to_kept }, ty.clone(), vec![x]),
                Reduction::Sum if outer.range.is_some() && outer.dtype.is_float() => {
                    let Some(count) = count else { continue };
                    let wide = add(eg, Op::Expand { map: to_kept }, crate::language::plain(outer, outer.axes.clone()), vec![x]);
                    let n = count as f64;
                    let literal = add(eg, Op::Literal(Literal::Float(n)), Type::Host(HostType::Float, Some(Range::exact(n))), Vec::new());
                    let maps = vec![(0..outer.axes.len()).collect(), Vec::new()];
                    add(eg, Op::Map { func: MapFn::Binary(BinaryOp::Mul), maps, compute: outer.dtype }, ty.clone(), vec![wide, literal])
                }
                _ => continue,
            };
            out.push(value);
        } else if axes.iter().all(|a| map.iter().position(|m| m == a).is_some_and(|j| symbols.same(xt.axes[j].size, expanded.axes[*a].size))) {
            // Only x's own (full-size) axes are reduced: reduce first, expand after.
            let x_axes: Vec<usize> = (0..map.len()).filter(|&j| axes.contains(&map[j])).collect();
            let x_kept: Vec<usize> = (0..map.len()).filter(|j| !x_axes.contains(j)).collect();
            let inner_ty = with_axes(outer, x_kept.iter().map(|&j| xt.axes[j].clone()).collect());
            let reduced = add(eg, Op::Reduce { op: *reduction, axes: x_axes }, inner_ty, vec![x]);
            let to_kept: Vec<usize> = x_kept.iter().map(|&j| kept.iter().position(|&k| k == map[j]).unwrap_or(0)).collect();
            out.push(add(eg, Op::Expand { map: to_kept }, ty.clone(), vec![reduced]));
        }
    }
    out
}

/// The family's rules.
pub fn rules() -> Result<Vec<Rewrite<ENode, Types>>, RuleError> {
    Ok(vec![
        rule("expand-into-map", |o| matches!(o, Op::Map { .. }), expand_into_operand)?,
        rule("expand-of-expand", is_expand, expand_of_expand)?,
        rule("permute-of-expand", |o| matches!(o, Op::Permute { .. }), permute_of_expand)?,
        rule("identity-expand", is_expand, identity_expand)?,
        rule("expand-into-contraction", |o| matches!(o, Op::Contract { .. }), expand_into_operand)?,
        rule("reduce-of-expand", |o| matches!(o, Op::Reduce { .. }), reduce_of_expand)?,
    ])
}

#[cfg(test)]
mod tests {
    use crate::testing::function as f;

    // expand-into-map: add(expand(x, [0]), y) => add(x[0], y)
    #[test]
    fn expand_into_map() {
        assert_eq!(f("x: [a], y: [a b]) -> [a b]", "repeat(x, a -> a b) + y"), "(add x[0] y[0 1])");
    }

    // expand-of-expand: expand(expand(x, [0]), [0 1]) => expand(x, [0])
    #[test]
    fn expand_of_expand() {
        assert_eq!(f("x: [a]) -> [a b k]", "repeat(repeat(x, a -> a b), a b -> a b k)"), "(expand [0] x)");
    }

    // permute-of-expand: permute(expand(x, [0]), [1 0]) => expand(x, [1])
    #[test]
    fn permute_of_expand() {
        assert_eq!(f("x: [a]) -> [b a]", "rearrange(repeat(x, a -> a b), a b -> b a)"), "(expand [1] x)");
    }

    // expand-into-contraction: contract(expand(x, [0]), w) => contract(x, w) (b has its extent from w)
    #[test]
    fn expand_into_contraction() {
        assert_eq!(f("x: [a], w: [b k]) -> [a k]", "einsum(repeat(x, a -> a b), w: a b, b k -> a k)"), "(contract x[0] w[1 2] -> [0 2])");
    }

    // reduce-of-expand: sum(expand(x, [0]), [1]) => mul(x, 5.0)
    #[test]
    fn sum_of_a_broadcast_is_a_product() {
        assert_eq!(f("x: [a]) -> [a]", "reduce(repeat(x, a -> a b), a b -> a, sum)"), "(mul x[0] 5.0)");
    }

    // reduce-of-expand: max(expand(x, [0]), [1]) => x
    #[test]
    fn max_of_a_broadcast_is_the_value() {
        assert_eq!(f("x: [a]) -> [a]", "reduce(repeat(x, a -> a b), a b -> a, max)"), "x");
    }

    // reduce-of-expand: sum(expand(x, [0]), [0]) => expand(sum(x, [0]), [])
    #[test]
    fn a_reduction_over_the_original_axes_runs_before_the_broadcast() {
        assert_eq!(f("x: [a]) -> [b]", "reduce(repeat(x, a -> a b), a b -> b, sum)"), "(expand [] (sum [0] x))");
    }

    // identity-expand: expand(x, [0 1]) of x's own sizes => x
    #[test]
    fn identity_expand() {
        let text = "graph f\n%0 = input 0 \"x\" : f32 plain [a:4 b:5] range -inf inf\n%1 = expand [0 1] %0 : f32 plain [a:4 b:5] range -inf inf\ninputs %0\noutput %1\n";
        assert_eq!(crate::testing::optimized_text(text), "x");
    }
}
