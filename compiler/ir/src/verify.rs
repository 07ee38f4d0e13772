//! The verifier: checks every node's operands against its operation and its
//! type, proving sizes equal in the size algebra ([`Algebra`]: normal
//! forms, so a split's `2 * (d / 2)` is `d` whatever symbols name them).
//! Run after lowering and after any pass; a graph that fails is a
//! compiler bug, reported with the node and what is wrong.

use crate::algebra::Algebra;
use crate::graph::Type;
use crate::graph::{Graph, Op};
use nax_contract::Size;
use nax_contract::shard::Exchange;
use nax_values::TensorType;
use petgraph::graph::NodeIndex;

/// A problem the verifier found (a bug of nax).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The graph has a cycle.
    #[error("the graph has a cycle")]
    Cycle,
    /// A node does not fit its operation, its operands or its type.
    #[error("%{node}: {what}")]
    Node { node: usize, what: String },
}

/// Every problem found; empty when the graph is well formed.
pub fn verify(g: &Graph) -> Vec<Problem> {
    if petgraph::algo::is_cyclic_directed(&g.graph) {
        return vec![Problem::Cycle];
    }
    let algebra = Algebra::new(&g.symbols);
    g.graph.node_indices().filter_map(|n| check_node(g, &algebra, n).err()).collect()
}

fn tensor(ty: &Type) -> Option<&TensorType> {
    match ty {
        Type::Tensor(t) => Some(t),
        _ => None,
    }
}

fn rank(ty: &Type) -> usize {
    tensor(ty).map_or(0, TensorType::rank)
}

fn sizes(ty: &Type) -> Vec<Size> {
    tensor(ty).map(|t| t.axes.iter().map(|a| a.size).collect()).unwrap_or_default()
}

/// Checks one node; sizes are equal when the size algebra proves it
/// (their normal forms agree), whatever symbols name them.
fn check_node(g: &Graph, algebra: &Algebra<'_>, n: NodeIndex) -> Result<(), Problem> {
    let wrong = |what: String| Problem::Node { node: n.index(), what };
    let node = &g.graph[n];
    let ops = g.operands(n);
    let ty = |i: usize| &g.graph[ops[i]].ty;
    let same = |a: Size, b: Size| algebra.equal(a, b);
    let is_one = |s: Size| g.symbols.constant(s) == Some(1);
    let count = |want: usize| if ops.len() == want { Ok(()) } else { Err(wrong(format!("expects {want} operands, has {}", ops.len()))) };
    let out = sizes(&node.ty);
    // A view of a tensor reads its buffer: the dtype (the element's size) is kept.
    let same_dtype = || match (ops.first().map(|&o| &g.graph[o].ty).and_then(tensor), tensor(&node.ty)) {
        (Some(a), Some(b)) if a.dtype != b.dtype => Err(wrong(format!("a view changes a tensor's dtype from {} to {}", a.dtype.as_str(), b.dtype.as_str()))),
        _ => Ok(()),
    };
    match &node.op {
        Op::Input { index, .. } => {
            count(0)?;
            if g.inputs.get(*index).is_none_or(|&i| i != n) {
                return Err(wrong(format!("input {index} is not the graph's input {index}")));
            }
        }
        Op::Weight { .. } | Op::Literal(_) | Op::SizeValue(_) => count(0)?,
        Op::Map { maps, .. } => {
            if maps.len() != ops.len() {
                return Err(wrong("one index map per operand".into()));
            }
            for (k, m) in maps.iter().enumerate() {
                let s = sizes(ty(k));
                if m.len() != s.len() {
                    return Err(wrong(format!("operand {k} has rank {} but its map has {} entries", s.len(), m.len())));
                }
                for (j, &r) in m.iter().enumerate() {
                    let Some(&o) = out.get(r) else { return Err(wrong(format!("operand {k} axis {j} reads result axis {r}, out of range"))) };
                    if !same(s[j], o) && !is_one(s[j]) {
                        return Err(wrong(format!(
                            "operand {k} axis {j} has size {} but result axis {r} has {}",
                            g.symbols.display(s[j]),
                            g.symbols.display(o)
                        )));
                    }
                }
            }
        }
        Op::Contract { labels, output } => {
            if labels.len() != ops.len() || output.len() != out.len() {
                return Err(wrong("labels do not match the operands or the result".into()));
            }
            let mut extent: Vec<Option<Size>> = Vec::new();
            for (k, ls) in labels.iter().enumerate() {
                let s = sizes(ty(k));
                if ls.len() != s.len() {
                    return Err(wrong(format!("operand {k} has rank {} but {} labels", s.len(), ls.len())));
                }
                for (&l, &size) in ls.iter().zip(&s) {
                    if extent.len() <= l {
                        extent.resize(l + 1, None);
                    }
                    // A size-1 axis broadcasts against its label's extent.
                    match extent[l] {
                        _ if is_one(size) => {}
                        Some(e) if !same(e, size) && !is_one(e) => return Err(wrong(format!("label {l} has two sizes"))),
                        _ => extent[l] = Some(size),
                    }
                }
            }
            for (&l, &o) in output.iter().zip(&out) {
                match extent.get(l).copied().flatten() {
                    Some(e) if same(e, o) => {}
                    None if is_one(o) => {}
                    _ => return Err(wrong(format!("output label {l} does not match the result's size"))),
                }
            }
        }
        Op::Reduce { axes, .. } => {
            count(1)?;
            let s = sizes(ty(0));
            let kept: Vec<Size> = (0..s.len()).filter(|a| !axes.contains(a)).map(|a| s[a]).collect();
            if axes.iter().any(|&a| a >= s.len()) || kept.len() != out.len() || kept.iter().zip(&out).any(|(&a, &b)| !same(a, b)) {
                return Err(wrong("reduced axes do not give the result's shape".into()));
            }
        }
        Op::Along { axis, .. } => {
            count(1)?;
            if *axis >= rank(ty(0)) {
                return Err(wrong(format!("axis {axis} out of range")));
            }
        }
        Op::Reshape => {
            count(1)?;
            same_dtype()?;
            let product = |v: &[Size]| v.iter().try_fold(1u64, |p, &s| g.symbols.constant(s).and_then(|c| p.checked_mul(c)));
            let input = sizes(ty(0));
            if let (Some(a), Some(b)) = (product(&input), product(&out))
                && a != b
            {
                return Err(wrong(format!("reshape from {a} to {b} elements")));
            }
            if !algebra.equal_products(&input, &out) {
                let shown = |v: &[Size]| v.iter().map(|&s| g.symbols.display(s)).collect::<Vec<_>>().join(" ");
                return Err(wrong(format!("reshape from [{}] to [{}]: the element counts are not provably equal", shown(&input), shown(&out))));
            }
        }
        Op::Rename => {
            count(1)?;
            same_dtype()?;
            let s = sizes(ty(0));
            if s.len() != out.len() || s.iter().zip(&out).any(|(&a, &b)| !same(a, b)) {
                return Err(wrong("rename changes sizes".into()));
            }
        }
        Op::Permute { perm } => {
            count(1)?;
            let s = sizes(ty(0));
            let mut seen = vec![false; s.len()];
            for &p in perm {
                if p >= s.len() || std::mem::replace(&mut seen[p], true) {
                    return Err(wrong("not a permutation".into()));
                }
            }
            if perm.len() != s.len() || perm.iter().zip(&out).any(|(&p, &o)| !same(s[p], o)) {
                return Err(wrong("permuted sizes differ from the result's".into()));
            }
        }
        Op::Expand { map } => {
            count(1)?;
            let s = sizes(ty(0));
            if map.len() != s.len() || map.iter().zip(&s).any(|(&r, &a)| out.get(r).is_none_or(|&o| !same(a, o) && !is_one(a))) {
                return Err(wrong("expanded axes do not match the result".into()));
            }
        }
        Op::Select { axis, index, count: c } => {
            count(1)?;
            let s = sizes(ty(0));
            if *axis >= s.len() || index >= c || g.symbols.constant(s[*axis]) != Some(*c as u64) || s.len() != out.len() + 1 {
                return Err(wrong("selection out of range".into()));
            }
        }
        Op::Slice { axis, start, step } => {
            count(1)?;
            let s = sizes(ty(0));
            let fits = match (
                g.symbols.constant(s.get(*axis).copied().unwrap_or(Size::Const(0))),
                g.symbols.constant(*start),
                out.get(*axis).and_then(|&l| g.symbols.constant(l)),
            ) {
                // start + step * (len - 1) must lie inside the axis.
                (Some(n), Some(b), Some(l)) => l == 0 || (l - 1).checked_mul(*step).and_then(|d| d.checked_add(b)).is_some_and(|last| last < n),
                _ => true,
            };
            if *axis >= s.len() || s.len() != out.len() || *step == 0 || !fits {
                return Err(wrong("slice out of range".into()));
            }
            if (0..s.len()).any(|a| a != *axis && !same(s[a], out[a])) {
                return Err(wrong("a slice changes another axis".into()));
            }
        }
        Op::Concat { axis } => {
            if ops.len() < 2 {
                return Err(wrong("concat needs at least two operands".into()));
            }
            for k in 0..ops.len() {
                let s = sizes(ty(k));
                if s.len() != out.len() || *axis >= s.len() || (0..s.len()).any(|a| a != *axis && !same(s[a], out[a])) {
                    return Err(wrong(format!("operand {k} does not line up with the result")));
                }
            }
        }
        Op::Take { axis } | Op::ScatterAdd { axis } => {
            if ops.len() == 3 && matches!(node.op, Op::ScatterAdd { .. }) {
                let base = sizes(ty(2));
                let dtype = |t: &Type| tensor(t).map(|t| t.dtype);
                if base.len() != out.len() || base.iter().zip(&out).any(|(&a, &b)| !same(a, b)) || dtype(ty(2)) != dtype(&node.ty) {
                    return Err(wrong("a scatter's base does not have its result's type".into()));
                }
            } else {
                count(2)?;
            }
            // The table (take's operand, scatter_add's result) and the gathered values.
            let scatter = matches!(node.op, Op::ScatterAdd { .. });
            if scatter {
                same_dtype()?;
            }
            let (s, i) = (if scatter { out.clone() } else { sizes(ty(0)) }, sizes(ty(1)));
            let gathered = if scatter { sizes(ty(0)) } else { out.clone() };
            let index_dtype = match ty(1) {
                Type::Tensor(t) => t.dtype,
                Type::Host(..) => nax_contract::DType::I64,
            };
            if *axis >= s.len() || !index_dtype.is_int() {
                return Err(wrong("a gather's (or scatter's) axis or indices are wrong".into()));
            }
            let want: Vec<Size> = s[..*axis].iter().chain(&i).chain(&s[axis + 1..]).copied().collect();
            if want.len() != gathered.len() || want.iter().zip(&gathered).any(|(&a, &b)| !same(a, b)) {
                return Err(wrong("a gather's values do not have the table's and the indices' axes".into()));
            }
        }
        Op::Scan { op, axis } => {
            count(1)?;
            let s = sizes(ty(0));
            if !matches!(op, nax_ops::Reduction::Sum | nax_ops::Reduction::Prod)
                || *axis >= s.len()
                || s.len() != out.len()
                || s.iter().zip(&out).any(|(&a, &b)| !same(a, b))
            {
                return Err(wrong("a scan keeps its operand's shape".into()));
            }
        }
        Op::ArgReduce { op, axis } => {
            count(1)?;
            let s = sizes(ty(0));
            let kept: Vec<Size> = (0..s.len()).filter(|a| a != axis).map(|a| s[a]).collect();
            if !matches!(op, nax_ops::Reduction::Max | nax_ops::Reduction::Min)
                || *axis >= s.len()
                || kept.len() != out.len()
                || kept.iter().zip(&out).any(|(&a, &b)| !same(a, b))
            {
                return Err(wrong("an arg-reduction drops its axis".into()));
            }
        }
        Op::Construct { .. } => {
            if ops.len() > 1 {
                return Err(wrong("a constructor takes at most one operand".into()));
            }
        }
        Op::Exchange(exchange) => {
            count(1)?;
            same_dtype()?;
            let given = sizes(ty(0));
            if given.len() != out.len() {
                return Err(wrong("an exchange changes its operand's rank".into()));
            }
            // The one axis a gather or a block resizes, by its parts.
            let resized = match *exchange {
                Exchange::AllReduce { .. } => None,
                Exchange::AllGather { axis, split } => Some((axis, split, true)),
                Exchange::Block { axis, split } | Exchange::ReduceScatter { axis, split, .. } => Some((axis, split, false)),
            };
            if let Some((axis, split, _)) = resized
                && (axis >= out.len() || split.parts == 0 || split.outer == 0)
            {
                return Err(wrong(format!("an exchange along axis {axis} of {} axes, in {} parts after {} runs", out.len(), split.parts, split.outer)));
            }
            for (i, (&a, &b)) in given.iter().zip(&out).enumerate() {
                let ok = match resized {
                    Some((axis, split, gather)) if axis == i => {
                        let (whole, block) = if gather { (b, a) } else { (a, b) };
                        algebra.equal_products(&[block, Size::Const(split.parts)], &[whole])
                            && g.symbols.constant(whole).is_none_or(|w| w % split.outer.saturating_mul(split.parts) == 0)
                    }
                    _ => same(a, b),
                };
                if !ok {
                    return Err(wrong(format!("axis {i} of an exchange is {} from {}", g.symbols.display(b), g.symbols.display(a))));
                }
            }
        }
    }
    Ok(())
}
