//! Contraction order: an einsum of three or more operands is a set of
//! pairwise contractions, and the order decides the cost
//! (`einsum(a, b, c: i j, j k, k -> i)` must contract `b` with `c` first).
//! Each n-ary contraction becomes a small e-graph over the terms
//! `Operand(i)` and `Contract(keep, children)` (a contraction of its
//! children keeping the labels `keep`); the rule [`rules`] associates any
//! two children of a contraction of three or more; extraction picks the
//! tree of fewest multiply-adds (opt_einsum's measure), and the graph gets
//! one binary contraction per inner node of that tree.

use crate::Report;
use egg::{Analysis, Applier, CostFunction, DidMerge, EGraph, Extractor, Id, Language, PatternAst, RecExpr, Rewrite, Runner, SearchMatches, Searcher, Subst, Symbol, Var};
use nax_front::check::range::Range;
use nax_front::check::types::{Axis, Kind, TensorType, Type};
use nax_ir::{Graph, Op};
use petgraph::graph::NodeIndex;
use std::time::Duration;

/// Operands beyond which the family leaves a contraction alone (the
/// e-graph holds every subset of the operands).
const MAX_OPERANDS: usize = 8;

/// A term of the contraction language.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Term {
    /// Operand `i` of the original contraction.
    Operand(usize),
    /// The contraction of the children, keeping these labels (in order).
    Contract(Vec<usize>, Vec<Id>),
}

impl Language for Term {
    type Discriminant = (Option<usize>, Vec<usize>, usize);

    fn discriminant(&self) -> Self::Discriminant {
        match self {
            Term::Operand(i) => (Some(*i), Vec::new(), 0),
            Term::Contract(keep, children) => (None, keep.clone(), children.len()),
        }
    }

    fn matches(&self, other: &Self) -> bool {
        self.discriminant() == other.discriminant()
    }

    fn children(&self) -> &[Id] {
        match self {
            Term::Operand(_) => &[],
            Term::Contract(_, c) => c,
        }
    }

    fn children_mut(&mut self) -> &mut [Id] {
        match self {
            Term::Operand(_) => &mut [],
            Term::Contract(_, c) => c,
        }
    }
}

/// The e-class analysis: the labels of each class's tensor, and the first
/// contradiction met (two classes merged with different labels), reported
/// as an internal error rather than a panic.
#[derive(Debug, Default)]
pub struct Labels {
    /// Each original operand's labels.
    pub operands: Vec<Vec<usize>>,
    pub contradiction: Option<String>,
}

impl Analysis<Term> for Labels {
    type Data = Vec<usize>;

    fn make(egraph: &mut EGraph<Term, Self>, enode: &Term, _id: Id) -> Vec<usize> {
        match enode {
            Term::Operand(i) => egraph.analysis.operands.get(*i).cloned().unwrap_or_default(),
            Term::Contract(keep, _) => keep.clone(),
        }
    }

    fn merge(&mut self, a: &mut Vec<usize>, b: Vec<usize>) -> DidMerge {
        if *a != b && self.contradiction.is_none() {
            self.contradiction = Some(format!("internal error: contraction classes with labels {a:?} and {b:?} were merged"));
        }
        DidMerge(false, false)
    }
}

type CGraph = EGraph<Term, Labels>;

/// Finds the classes holding a contraction of three or more children.
struct Wide;

impl Searcher<Term, Labels> for Wide {
    fn search_eclass_with_limit(&self, egraph: &CGraph, eclass: Id, limit: usize) -> Option<SearchMatches<'_, Term>> {
        let wide = egraph[eclass].nodes.iter().any(|n| matches!(n, Term::Contract(_, c) if c.len() >= 3));
        (wide && limit > 0).then(|| SearchMatches { eclass, substs: vec![Subst::default()], ast: None })
    }

    fn vars(&self) -> Vec<Var> {
        Vec::new()
    }
}

/// Adds, for every pair of children of a wide contraction, the same
/// contraction with that pair contracted first (keeping the labels the
/// rest or the result still need).
struct Associate;

impl Applier<Term, Labels> for Associate {
    fn apply_one(&self, egraph: &mut CGraph, eclass: Id, _subst: &Subst, _ast: Option<&PatternAst<Term>>, _rule: Symbol) -> Vec<Id> {
        let wide: Vec<(Vec<usize>, Vec<Id>)> = egraph[eclass]
            .nodes
            .iter()
            .filter_map(|n| match n {
                Term::Contract(keep, c) if c.len() >= 3 => Some((keep.clone(), c.clone())),
                _ => None,
            })
            .collect();
        let mut changed = Vec::new();
        for (keep, children) in wide {
            for i in 0..children.len() {
                for j in i + 1..children.len() {
                    let rest: Vec<Id> = children.iter().enumerate().filter(|&(k, _)| k != i && k != j).map(|(_, &c)| c).collect();
                    let mut needed: Vec<usize> = keep.clone();
                    for &r in &rest {
                        needed.extend(egraph[r].data.iter().copied());
                    }
                    let mut pair_keep: Vec<usize> = egraph[children[i]].data.iter().chain(&egraph[children[j]].data).copied().filter(|l| needed.contains(l)).collect();
                    pair_keep.sort_unstable();
                    pair_keep.dedup();
                    let pair = egraph.add(Term::Contract(pair_keep, vec![children[i], children[j]]));
                    let mut outer = vec![pair];
                    outer.extend(rest);
                    let new = egraph.add(Term::Contract(keep.clone(), outer));
                    if egraph.union(eclass, new) {
                        changed.push(new);
                    }
                }
            }
        }
        changed
    }
}

/// The family's rules.
pub fn rules() -> Result<Vec<Rewrite<Term, Labels>>, String> {
    Ok(vec![Rewrite::new("associate-contraction", Wide, Associate)?])
}

/// Multiply-adds: a contraction costs the product of the extents of every
/// label its children carry, times one less than its number of children.
struct MultiplyAdds<'a> {
    egraph: &'a CGraph,
    extent: &'a [f64],
}

impl CostFunction<Term> for MultiplyAdds<'_> {
    type Cost = f64;

    fn cost<C: FnMut(Id) -> f64>(&mut self, enode: &Term, mut costs: C) -> f64 {
        match enode {
            Term::Operand(_) => 0.0,
            Term::Contract(_, children) => {
                let mut labels: Vec<usize> = children.iter().flat_map(|&c| self.egraph[c].data.iter().copied()).collect();
                labels.sort_unstable();
                labels.dedup();
                let work: f64 = labels.iter().map(|&l| self.extent.get(l).copied().unwrap_or(1.0)).product();
                work * (children.len() as f64 - 1.0).max(1.0) + children.iter().map(|&c| costs(c)).sum::<f64>()
            }
        }
    }
}

/// Reorders every contraction of three or more operands of a graph.
pub fn reorder(g: &Graph, report: &mut Report) -> Result<Graph, String> {
    let mut out = g.clone();
    let wide: Vec<NodeIndex> = g.graph.node_indices().filter(|&n| matches!(&g.graph[n].op, Op::Contract { labels, .. } if labels.len() >= 3 && labels.len() <= MAX_OPERANDS)).collect();
    for n in wide {
        reorder_one(&mut out, n, report)?;
    }
    Ok(out)
}

/// A label's axis (name and size) and extent estimate, from the operands.
fn label_axes(g: &Graph, operands: &[NodeIndex], labels: &[Vec<usize>]) -> (Vec<Option<Axis>>, Vec<f64>) {
    let count = labels.iter().flatten().copied().max().map_or(0, |m| m + 1);
    let mut axes: Vec<Option<Axis>> = vec![None; count];
    for (&o, ls) in operands.iter().zip(labels) {
        if let Type::Tensor(t) = &g.graph[o].ty {
            for (&l, a) in ls.iter().zip(&t.axes) {
                let is_one = g.symbols.constant(a.size) == Some(1);
                if axes[l].as_ref().is_none_or(|x: &Axis| g.symbols.constant(x.size) == Some(1) && !is_one) {
                    axes[l] = Some(a.clone());
                }
            }
        }
    }
    // Symbolic sizes are estimated at 64 for choosing an order.
    let extent = axes.iter().map(|a| a.as_ref().map_or(1.0, |a| g.symbols.constant(a.size).map_or(64.0, |c| c as f64))).collect();
    (axes, extent)
}

fn reorder_one(g: &mut Graph, n: NodeIndex, report: &mut Report) -> Result<(), String> {
    let Op::Contract { labels, output } = g.graph[n].op.clone() else { return Ok(()) };
    let operands = g.operands(n);
    let (axes, extent) = label_axes(g, &operands, &labels);
    let mut egraph = CGraph::new(Labels { operands: labels.clone(), contradiction: None });
    let leaves: Vec<Id> = (0..operands.len()).map(|i| egraph.add(Term::Operand(i))).collect();
    let root = egraph.add(Term::Contract(output.clone(), leaves));
    let original_cost = MultiplyAdds { egraph: &egraph, extent: &extent }.cost_rec(&{
        let mut e = RecExpr::default();
        let ids: Vec<Id> = (0..operands.len()).map(|i| e.add(Term::Operand(i))).collect();
        e.add(Term::Contract(output.clone(), ids));
        e
    });
    let runner = Runner::default().with_egraph(egraph).with_iter_limit(32).with_node_limit(20_000).with_time_limit(Duration::from_secs(2)).run(&rules()?);
    if let Some(e) = &runner.egraph.analysis.contradiction {
        return Err(e.clone());
    }
    let stop = format!("{:?}", runner.stop_reason);
    let root = runner.egraph.find(root);
    let (best_cost, best) = Extractor::new(&runner.egraph, MultiplyAdds { egraph: &runner.egraph, extent: &extent }).find_best(root);
    if best_cost >= original_cost {
        return Ok(());
    }
    // The tree, bottom-up: each term's graph node and labels.
    let dtype = nax_ir::value_dtype(&g.graph[n].ty);
    let mut built: Vec<(NodeIndex, Vec<usize>)> = Vec::with_capacity(best.len());
    let last = best.len() - 1;
    for (i, term) in best.iter().enumerate() {
        match term {
            Term::Operand(k) => built.push((operands[*k], labels[*k].clone())),
            Term::Contract(keep, children) => {
                let ins: Vec<(NodeIndex, Vec<usize>)> = children.iter().map(|&c| built[usize::from(c)].clone()).collect();
                let op = Op::Contract { labels: ins.iter().map(|(_, l)| l.clone()).collect(), output: keep.clone() };
                let xs: Vec<NodeIndex> = ins.iter().map(|(x, _)| *x).collect();
                if i == last {
                    // The original node, with its new operands.
                    let mut incoming: Vec<_> = g.graph.edges_directed(n, petgraph::Direction::Incoming).map(|e| petgraph::visit::EdgeRef::id(&e)).collect();
                    // Highest first: removing an edge moves the last one into its place.
                    incoming.sort_by_key(|e| std::cmp::Reverse(e.index()));
                    for e in incoming {
                        g.graph.remove_edge(e);
                    }
                    for (k, &x) in xs.iter().enumerate() {
                        g.graph.add_edge(x, n, k);
                    }
                    g.graph[n].op = op;
                    built.push((n, keep.clone()));
                } else {
                    let axes: Option<Vec<Axis>> = keep.iter().map(|&l| axes.get(l).cloned().flatten()).collect();
                    let axes = axes.ok_or("internal error: a contraction label has no axis")?;
                    let ty = Type::Tensor(TensorType { dtype, kind: Kind::Plain, axes, range: Some(Range::FULL) });
                    built.push((g.add(op, ty, &xs), keep.clone()));
                }
            }
        }
    }
    report.lines.push(format!("contraction of {} operands: {original_cost:.3e} -> {best_cost:.3e} multiply-adds (saturation stopped: {stop})", operands.len()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The graph of `f` in `source`, reordered: each node's operation name and operands, outermost first.
    fn reordered(source: &str) -> (Graph, Report) {
        let checked = nax_front::check_source(source);
        assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
        let g = nax_ir::lower(&checked.module, "f").expect("lower");
        let mut report = Report::default();
        let out = reorder(&g, &mut report).expect("reorder");
        assert!(nax_ir::verify(&out).is_empty(), "{:?}", nax_ir::verify(&out));
        (out, report)
    }

    /// The parameter names under a contraction node, nested as written.
    fn shape_of(g: &Graph, n: NodeIndex) -> String {
        match &g.graph[n].op {
            Op::Input { name, .. } => name.clone(),
            Op::Contract { .. } => format!("({})", g.operands(n).iter().map(|&o| shape_of(g, o)).collect::<Vec<_>>().join(" ")),
            _ => "?".into(),
        }
    }

    // associate-contraction: einsum(a, b, c: i j, j k, k -> i) => ((b c) a)
    #[test]
    fn a_chain_contracts_its_small_end_first() {
        let (g, report) = reordered("dim i = 4096\ndim j = 256\ndim k = 4096\ndef f(a: [i j], b: [j k], c: [k]) -> [i] {\n    return einsum(a, b, c: i j, j k, k -> i)\n}\n");
        assert_eq!(shape_of(&g, g.output), "((b c) a)", "{report:?}");
        assert_eq!(report.lines.len(), 1);
    }

    // associate-contraction: einsum(a, b, c: i j, j k, k l -> i l) with k = 2 => ((a b) c)
    #[test]
    fn a_chain_with_a_small_middle_contracts_its_left_first() {
        let (g, _) = reordered("dim i = 8\ndim j = 512\ndim k = 2\ndim l = 512\ndef f(a: [i j], b: [j k], c: [k l]) -> [i l] {\n    return einsum(a, b, c: i j, j k, k l -> i l)\n}\n");
        assert_eq!(shape_of(&g, g.output), "((a b) c)");
    }

    // associate-contraction: a two-operand contraction => unchanged
    #[test]
    fn a_binary_contraction_is_left_alone() {
        let (g, report) = reordered("dim i = 4\ndim j = 5\ndef f(a: [i j], b: [j]) -> [i] {\n    return a @ b\n}\n");
        assert_eq!(shape_of(&g, g.output), "(a b)");
        assert!(report.lines.is_empty());
    }

    #[test]
    fn extraction_is_deterministic() {
        let source = "dim i = 64\ndim j = 64\ndim k = 64\ndim l = 64\ndef f(a: [i j], b: [j k], c: [k l], d: [l]) -> [i] {\n    return einsum(a, b, c, d: i j, j k, k l, l -> i)\n}\n";
        let first = nax_ir::text::print(&reordered(source).0);
        for _ in 0..3 {
            assert_eq!(nax_ir::text::print(&reordered(source).0), first);
        }
    }
}
