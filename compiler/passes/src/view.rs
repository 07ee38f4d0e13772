//! Groupings and ungroupings as views: a reshape or rename of a reshape or
//! rename is one reshape (or rename) of the original value, and one that
//! gives back the original sizes is a rename, or the value itself when the
//! types agree. `rearrange(x, "b (h d) -> b h d")` followed by
//! `rearrange(_, "b h d -> b (h d)")` cancels.

use crate::language::{EG, ENode, RuleError, Types, add, as_type, node_type, nodes_of, rule, type_of};
use egg::{Id, Rewrite};
use nax_ir::Op;
use nax_ir::Type;

fn is_view(op: &Op) -> bool {
    matches!(op, Op::Reshape | Op::Rename)
}

/// view(view(x)) => view(x): a reshape if either was one, else a rename.
fn view_of_view(eg: &mut EG, node: &ENode, op: &Op) -> Vec<Id> {
    let ty = node_type(eg, node).clone();
    nodes_of(eg, node.children[0], is_view)
        .into_iter()
        .map(|(inner, inner_op)| {
            let op = if *op == Op::Rename && inner_op == Op::Rename { Op::Rename } else { Op::Reshape };
            add(eg, op, ty.clone(), inner.children)
        })
        .collect()
}

/// view(x) with x's own sizes => x (or a rename to the view's names)
fn identity_view(eg: &mut EG, node: &ENode, _op: &Op) -> Vec<Id> {
    let ty = node_type(eg, node).clone();
    let x = node.children[0];
    if !matches!(ty, Type::Tensor(_)) || !eg.analysis.compatible(type_of(eg, x), &ty) {
        return Vec::new();
    }
    // A rename of x to its own type is x; a reshape to x's sizes is a rename.
    vec![as_type(eg, x, &ty)]
}

/// The family's rules.
pub fn rules() -> Result<Vec<Rewrite<ENode, Types>>, RuleError> {
    Ok(vec![rule("view-of-view", is_view, view_of_view)?, rule("identity-view", is_view, identity_view)?])
}

#[cfg(test)]
mod tests {
    use crate::testing::optimized;

    // view-of-view, identity-view: reshape(reshape(x)) back to x's sizes => rename(x)
    #[test]
    fn a_grouping_and_its_ungrouping_cancel() {
        assert_eq!(
            optimized(
                "dim b = 2\ndim D = 8\ndef f(x: [b D]) -> [b 8] {\n    y = rearrange(x, b (h d) -> b h d, h=2)\n    return rearrange(y, b h d -> b (h d))\n}\n"
            ),
            "(rename x)"
        );
    }

    // view-of-view: reshape(reshape(x)) => reshape(x)
    #[test]
    fn two_regroupings_are_one() {
        assert_eq!(
            optimized(
                "dim b = 2\ndim D = 8\ndim d = 2\ndef f(x: [b D]) -> [8 d] {\n    y = rearrange(x, b (h d) -> b h d, h=4)\n    return rearrange(y, b h d -> (b h) d)\n}\n"
            ),
            "(reshape x)"
        );
    }

    // identity-view: rename(x) to x's own type => x
    #[test]
    fn a_rename_to_the_same_type_is_the_value() {
        let text = "graph f\n%0 = input 0 \"x\" : f32 plain [a:4] range -inf inf\n%1 = rename %0 : f32 plain [a:4] range -inf inf\ninputs %0\noutput %1\n";
        assert_eq!(crate::testing::optimized_text(text), "x");
    }
}
