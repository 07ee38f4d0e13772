//! A split through a regrouping (`reshape`): which axis of the other side
//! holds it, and after how many runs. Axes are regrouped in row-major
//! order, so a split of a group's axis is a split of the group's flat
//! index after some number of runs, which lands on one axis of the other
//! side when the sizes divide (the factor `H` of `(3 H Dh)` is the group
//! split after 3 runs). With sizes known only at the call, the split of a
//! group's first axis lands on the other side's first (the call checks
//! that the mesh axis divides it).

use nax_contract::shard::Split;
use nax_contract::{Size, SizeTable};
use nax_ir::algebra::Algebra;
use std::ops::Range;

/// The consecutive axes of `from` and of `to` whose sizes have equal
/// products, in order (the shortest such groups); `None` where the
/// products never meet.
fn groups(algebra: &Algebra<'_>, from: &[Size], to: &[Size]) -> Option<Vec<(Range<usize>, Range<usize>)>> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < from.len() || j < to.len() {
        let mut candidates: Vec<(usize, usize)> = (i..=from.len()).flat_map(|a| (j..=to.len()).map(move |b| (a, b))).filter(|&(a, b)| a + b > i + j).collect();
        candidates.sort_by_key(|&(a, b)| (a + b, a));
        let group = candidates.into_iter().find(|&(a, b)| algebra.equal_products(&from[i..a], &to[j..b]))?;
        out.push((i..group.0, j..group.1));
        (i, j) = group;
    }
    Some(out)
}

/// Where axis `axis` of `from`, split as `split`, lies in `to` (the same
/// elements regrouped): the axis of `to` and its split, or `None` when the
/// blocks do not fall on one axis of `to`.
pub fn carry(table: &SizeTable, from: &[Size], to: &[Size], axis: usize, split: Split) -> Option<(usize, Split)> {
    let algebra = Algebra::new(table);
    let (ins, outs) = groups(&algebra, from, to)?.into_iter().find(|(ins, _)| ins.contains(&axis))?;
    let constants = |sizes: &[Size]| sizes.iter().map(|&s| table.constant(s)).collect::<Option<Vec<u64>>>();
    let (Some(from), Some(to)) = (constants(&from[ins.clone()]), constants(&to[outs.clone()])) else {
        // Run-time sizes: a contiguous block of the group's first axis.
        return (axis == ins.start && split.outer == 1 && !outs.is_empty()).then_some((outs.start, split));
    };
    // The group's flat index is split after this many runs.
    let runs = from[..axis - ins.start].iter().try_fold(split.outer, |p, &s| p.checked_mul(s))?;
    let mut before = 1u64;
    for (q, &size) in outs.zip(&to) {
        if runs % before == 0 && runs / before < size {
            let outer = runs / before;
            let fits = outer.checked_mul(split.parts).is_some_and(|k| k > 0 && size % k == 0);
            return fits.then_some((q, Split { outer, ..split }));
        }
        before = before.checked_mul(size)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use nax_contract::{SymDef, SymId, Symbol};

    fn tp(outer: u64) -> Split {
        Split { mesh_axis: 0, parts: 2, outer }
    }

    #[test]
    fn a_factor_of_a_group_is_the_group_split_after_runs() {
        let table = SizeTable::default();
        let c = |v: &[u64]| v.iter().map(|&s| Size::Const(s)).collect::<Vec<_>>();
        // [b n (3 H Dh)] -> [b n 3 H Dh]: H split is (3 H Dh) split after 3 runs, and back.
        assert_eq!(carry(&table, &c(&[1, 4, 3, 12, 64]), &c(&[1, 4, 2304]), 3, tp(1)), Some((2, tp(3))));
        assert_eq!(carry(&table, &c(&[1, 4, 2304]), &c(&[1, 4, 3, 12, 64]), 2, tp(3)), Some((3, tp(1))));
        // [H Dh] -> [(H Dh)]: a contiguous block stays one; Dh's blocks are runs of it.
        assert_eq!(carry(&table, &c(&[12, 64]), &c(&[768]), 0, tp(1)), Some((0, tp(1))));
        assert_eq!(carry(&table, &c(&[12, 64]), &c(&[768]), 1, tp(1)), Some((0, tp(12))));
        // A split of 3 in 2 does not divide.
        assert_eq!(carry(&table, &c(&[1, 4, 2304]), &c(&[1, 4, 3, 12, 64]), 2, tp(1)), None);
    }

    #[test]
    fn with_run_time_sizes_the_first_axis_of_a_group_carries_its_block() {
        let free = |name: &str, i: u32| Symbol { name: name.into(), def: SymDef::Free, class: SymId(i), value: None };
        let product = Symbol { name: "a*b".into(), def: SymDef::Mul(Size::Sym(SymId(0)), Size::Sym(SymId(1))), class: SymId(2), value: None };
        let table = SizeTable { symbols: vec![free("a", 0), free("b", 1), product] };
        let (a, b, ab) = (Size::Sym(SymId(0)), Size::Sym(SymId(1)), Size::Sym(SymId(2)));
        assert_eq!(carry(&table, &[a, b, Size::Const(2)], &[ab, Size::Const(2)], 0, tp(1)), Some((0, tp(1))));
        assert_eq!(carry(&table, &[a, b, Size::Const(2)], &[ab, Size::Const(2)], 1, tp(1)), None);
        assert_eq!(carry(&table, &[ab, Size::Const(2)], &[a, b, Size::Const(2)], 0, tp(1)), Some((0, tp(1))));
    }
}
