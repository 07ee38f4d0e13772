//! Algebraic identities PyTorch users hit: `log(softmax(x, a))` is
//! `log_softmax(x, a)` (one pass, no underflow), `exp(log x)` is `x` where
//! x's range is non-negative, `log(exp x)` is `x` where exp cannot overflow
//! or underflow over x's range, `masked_fill(x, m, v)` is
//! `where(m, v, x)`, and a scale of a contraction by a scalar moves onto
//! its smallest operand (`einsum(q, k) / sqrt(d)` scales `q`): in f32 and
//! f64 by any scalar, in a half float (bf16, f16) only by a power of two,
//! which scales the operand exactly (any other scale rounds each scaled
//! element to 8 or 11 bits, a rounding the source did not have, as large
//! as the one of the result the contraction sums in f32).

use crate::language::{EG, ENode, RuleError, Types, add, as_type, node_type, nodes_of, plain, rule, tensor_of, type_of};
use egg::{Id, Rewrite};
use nax_contract::DType;
use nax_ir::Type;
use nax_ir::{MapFn, Op};
use nax_ops::BinaryOp;
use nax_ops::{AlongAxis, Elementwise};

/// The operand of a one-operand map that reads it element for element (no broadcast).
fn plain_operand(eg: &EG, node: &ENode, maps: &[Vec<usize>]) -> Option<Id> {
    let (Type::Tensor(out), [x]) = (node_type(eg, node), node.children.as_slice()) else { return None };
    let xt = tensor_of(eg, *x)?;
    (eg.analysis.same_sizes(xt, out) && maps.len() == 1 && crate::language::is_identity(&maps[0])).then_some(*x)
}

fn is_builtin(op: &Op, f: Elementwise) -> bool {
    matches!(op, Op::Map { func: MapFn::Builtin(g), .. } if *g == f)
}

/// The operands of the maps applying `f` element for element in a class.
fn applications(eg: &EG, class: Id, f: Elementwise) -> Vec<Id> {
    nodes_of(eg, class, |o| is_builtin(o, f))
        .into_iter()
        .filter_map(|(n, op)| match op {
            Op::Map { maps, .. } => plain_operand(eg, &n, &maps),
            _ => None,
        })
        .collect()
}

/// log(softmax(x, a)) => log_softmax(x, a)
fn log_of_softmax(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Map { maps, .. } = op else { return Vec::new() };
    let Some(s) = plain_operand(eg, node, maps) else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let softmaxes: Vec<(usize, Id)> = nodes_of(eg, s, |o| matches!(o, Op::Along { func: AlongAxis::Softmax, .. }))
        .into_iter()
        .filter_map(|(n, o)| match o {
            Op::Along { axis, .. } if tensor_of(eg, n.children[0]).map(|t| t.dtype) == Some(nax_ir::value_dtype(&ty)) => Some((axis, n.children[0])),
            _ => None,
        })
        .collect();
    softmaxes.into_iter().map(|(axis, x)| add(eg, Op::Along { func: AlongAxis::LogSoftmax, axis }, ty.clone(), vec![x])).collect()
}

/// exp(log x) => x where x >= 0
fn exp_of_log(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Map { maps, .. } = op else { return Vec::new() };
    let Some(l) = plain_operand(eg, node, maps) else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let xs: Vec<Id> = applications(eg, l, Elementwise::Log)
        .into_iter()
        .filter(|&x| tensor_of(eg, x).is_some_and(|t| Some(t.dtype) == Some(nax_ir::value_dtype(&ty)) && t.range.is_some_and(|r| r.lo >= 0.0)))
        .collect();
    xs.into_iter().map(|x| as_type(eg, x, &ty)).collect()
}

/// The largest |x| for which exp(x) is finite and non-zero in a dtype.
fn exp_safe_bound(dtype: DType) -> Option<f64> {
    match dtype {
        DType::F32 => Some(80.0),
        DType::F64 => Some(700.0),
        _ => None,
    }
}

/// log(exp x) => x where exp(x) neither overflows nor underflows
fn log_of_exp(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Map { maps, .. } = op else { return Vec::new() };
    let Some(e) = plain_operand(eg, node, maps) else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let Some(bound) = exp_safe_bound(nax_ir::value_dtype(&ty)) else { return Vec::new() };
    let xs: Vec<Id> = applications(eg, e, Elementwise::Exp)
        .into_iter()
        .filter(|&x| tensor_of(eg, x).is_some_and(|t| t.dtype == nax_ir::value_dtype(&ty) && t.range.is_some_and(|r| r.lo >= -bound && r.hi <= bound)))
        .collect();
    xs.into_iter().map(|x| as_type(eg, x, &ty)).collect()
}

/// masked_fill(x, m, v) => where(m, v, x)
fn masked_fill_to_where(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Map { maps, compute, .. } = op else { return Vec::new() };
    let [x, m, v] = node.children.as_slice() else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let maps = vec![maps[1].clone(), maps[2].clone(), maps[0].clone()];
    vec![add(eg, Op::Map { func: MapFn::Builtin(Elementwise::Where), maps, compute: *compute }, ty, vec![*m, *v, *x])]
}

/// Whether scaling elements of `dtype` by the scalar `s` (multiplying or
/// dividing) rounds no more than the contraction's result does: f32 and
/// f64 by any scalar; a half float by a power of two alone, known from
/// `s`'s range.
fn scales_exactly_enough(eg: &EG, s: Id, dtype: DType) -> bool {
    if !matches!(dtype, DType::BF16 | DType::F16) {
        return true;
    }
    let range = match type_of(eg, s) {
        Type::Host(_, range) => *range,
        Type::Tensor(t) => t.range,
    };
    range.is_some_and(|r| r.lo == r.hi && r.lo != 0.0 && r.lo.is_finite() && r.lo.abs().log2().fract() == 0.0)
}

/// contract(a, b, ..) * s => contract(a * s, b, ..) (and `/ s`) with `a`
/// the smallest operand, for a float contraction and a scalar `s` that
/// scales its element type exactly enough ([`scales_exactly_enough`]).
fn scale_through_contraction(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let Op::Map { func: MapFn::Binary(b @ (BinaryOp::Mul | BinaryOp::Div)), maps, compute } = op else { return Vec::new() };
    let ty = node_type(eg, node).clone();
    let Type::Tensor(out) = &ty else { return Vec::new() };
    if !out.dtype.is_float() || *compute != out.dtype || node.children.len() != 2 {
        return Vec::new();
    }
    // The contraction's position: the left for a division, either for a product.
    let positions: &[usize] = if *b == BinaryOp::Div { &[0] } else { &[0, 1] };
    let mut results = Vec::new();
    for &p in positions {
        let (c, s) = (node.children[p], node.children[1 - p]);
        let scalar = matches!(type_of(eg, s), Type::Host(..)) || tensor_of(eg, s).is_some_and(|t| t.axes.is_empty());
        let full = tensor_of(eg, c).is_some_and(|t| t.dtype == out.dtype && eg.analysis.same_sizes(t, out));
        if !scalar || !full || !crate::language::is_identity(&maps[p]) || maps[p].len() != out.axes.len() || !scales_exactly_enough(eg, s, out.dtype) {
            continue;
        }
        for (contraction, contraction_op) in nodes_of(eg, c, |o| matches!(o, Op::Contract { .. })) {
            let Op::Contract { labels, output } = contraction_op else { continue };
            let sizes: Vec<Option<f64>> = contraction
                .children
                .iter()
                .map(|&x| {
                    tensor_of(eg, x)
                        .filter(|t| t.dtype == out.dtype)
                        .map(|t| t.axes.iter().map(|a| crate::language::extent(&eg.analysis.symbols, a.size)).product())
                })
                .collect();
            let Some(sizes) = sizes.into_iter().collect::<Option<Vec<f64>>>() else { continue };
            let Some(k) = (0..sizes.len()).min_by(|&i, &j| sizes[i].total_cmp(&sizes[j]).then(i.cmp(&j))) else { continue };
            let Some(xt) = tensor_of(eg, contraction.children[k]).cloned() else { continue };
            let scaled_maps = vec![(0..xt.axes.len()).collect(), maps[1 - p].clone()];
            let scaled = add(
                eg,
                Op::Map { func: MapFn::Binary(*b), maps: scaled_maps, compute: *compute },
                plain(&xt, xt.axes.clone()),
                vec![contraction.children[k], s],
            );
            let mut children = contraction.children.clone();
            children[k] = scaled;
            results.push(add(eg, Op::Contract { labels, output }, ty.clone(), children));
        }
    }
    results
}

/// The family's rules.
pub fn rules() -> Result<Vec<Rewrite<ENode, Types>>, RuleError> {
    Ok(vec![
        rule("log-of-softmax", |o| is_builtin(o, Elementwise::Log), log_of_softmax)?,
        rule("exp-of-log", |o| is_builtin(o, Elementwise::Exp), exp_of_log)?,
        rule("log-of-exp", |o| is_builtin(o, Elementwise::Log), log_of_exp)?,
        rule("masked-fill-to-where", |o| is_builtin(o, Elementwise::MaskedFill), masked_fill_to_where)?,
        rule("scale-through-contraction", |o| matches!(o, Op::Map { func: MapFn::Binary(BinaryOp::Mul | BinaryOp::Div), .. }), scale_through_contraction)?,
    ])
}

#[cfg(test)]
mod tests {
    use crate::testing::function as f;

    // log-of-softmax: log(softmax(x, b)) => log_softmax(x, b)
    #[test]
    fn log_of_softmax() {
        assert_eq!(f("x: [a b]) -> LogProb(b)[a b]", "log(softmax(x, b))"), "(log_softmax 1 x)");
    }

    // exp-of-log: exp(log(sigmoid x)) => sigmoid x (its range is [0, 1])
    #[test]
    fn exp_of_log_of_a_non_negative_value() {
        assert_eq!(f("x: [a]) -> [a]", "exp(log(sigmoid(x)))"), "(sigmoid x[0])");
    }

    // exp-of-log: exp(log x) with x of any sign => unchanged
    #[test]
    fn exp_of_log_of_any_value_stays() {
        assert_eq!(f("x: [a]) -> [a]", "exp(log(x))"), "(exp (log x[0])[0])");
    }

    // log-of-exp: log(exp(tanh x)) => tanh x (exp cannot overflow on [-1, 1])
    #[test]
    fn log_of_exp_of_a_bounded_value() {
        assert_eq!(f("x: [a]) -> [a]", "log(exp(tanh(x)))"), "(tanh x[0])");
    }

    // masked-fill-to-where: masked_fill(x, m, 0.0) => where(m, 0.0, x)
    #[test]
    fn masked_fill_to_where() {
        assert_eq!(f("x: [a b], m: Mask[a b]) -> [a b]", "masked_fill(x, m, 0.0)"), "(where m[0 1] 0.0 x[0 1])");
    }

    // scale-through-contraction: contract(x, w) / 8.0 => contract(x / 8.0, w) (x is the smaller)
    #[test]
    fn scale_through_contraction() {
        assert_eq!(f("x: [a k], w: [k b]) -> [a b]", "(x @ w) / 8.0"), "(contract (div x[0 1] 8.0)[0 2] w[2 1] -> [0 1])");
    }

    // scale-through-contraction: in bf16, contract(x, w) / 8.0 => contract(x / 8.0, w) (a power of two is exact)
    #[test]
    fn half_float_scale_by_a_power_of_two_moves() {
        assert_eq!(f("x: bf16[a k], w: bf16[k b]) -> bf16[a b]", "(x @ w) / 8.0"), "(contract (div x[0 1] 8.0)[0 2] w[2 1] -> [0 1])");
    }

    // scale-through-contraction: in bf16 or f16, contract(x, w) * 0.3 => unchanged (x * 0.3 would round each element)
    #[test]
    fn half_float_scale_by_another_number_stays() {
        assert_eq!(f("x: bf16[a k], w: bf16[k b]) -> bf16[a b]", "(x @ w) * 0.3"), "(mul (contract x[0 2] w[2 1] -> [0 1])[0 1] 0.3)");
        assert_eq!(f("x: f16[a k], w: f16[k b]) -> f16[a b]", "(x @ w) / 6.0"), "(div (contract x[0 2] w[2 1] -> [0 1])[0 1] 6.0)");
    }
}
