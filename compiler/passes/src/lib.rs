//! Graph rewriting by equality saturation (egg): the optimizer between the
//! named-axis graph and kernel formation. [`language`] turns a graph into
//! an e-graph over every graph operation (with an analysis carrying each
//! class's type) and back; each rewrite family lives in its own file with
//! its `rules()`; [`optimize`] saturates with all of them under node,
//! iteration and time limits, extracts the cheapest equivalent graph
//! (deterministically: the same input gives the same graph), and reports
//! why saturation stopped and which rules fired. `nax -O0` skips it.

pub mod algebra;
pub mod broadcast;
pub mod contraction;
pub mod indexing;
pub mod language;
pub mod permute;
pub mod view;

use egg::{Rewrite, Runner, SimpleScheduler};
pub use language::RuleError;
use language::{ENode, Types};
use nax_ir::Graph;
use std::time::Duration;

/// Saturation stops at this many e-nodes...
pub const NODE_LIMIT: usize = 20_000;
/// ... or iterations ...
pub const ITERATION_LIMIT: usize = 30;
/// ... or time.
pub const TIME_LIMIT: Duration = Duration::from_millis(500);

/// What the optimizer did to one graph.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Why saturation stopped (`Saturated`, or the limit it hit).
    pub stop_reason: String,
    pub iterations: usize,
    /// E-nodes and e-classes when saturation stopped.
    pub nodes: usize,
    pub classes: usize,
    /// How often each rule changed the e-graph, by rule name (rules that
    /// never did are left out).
    pub applied: Vec<(String, usize)>,
    /// The cost model's estimate of the graph before and after.
    pub cost_before: f64,
    pub cost_after: f64,
}

impl Report {
    /// The report as comment lines (`# ...`) for `--emit graph`.
    pub fn lines(&self) -> Vec<String> {
        let applied: Vec<String> = self.applied.iter().map(|(r, n)| format!("{r} x{n}")).collect();
        vec![
            format!("saturation stopped: {} after {} iterations ({} e-nodes, {} e-classes)", self.stop_reason, self.iterations, self.nodes, self.classes),
            format!("rules applied: {}", if applied.is_empty() { "none".to_string() } else { applied.join(", ") }),
            format!("estimated cost: {:.4e} -> {:.4e}", self.cost_before, self.cost_after),
        ]
    }
}

/// Every family's rules.
pub fn rules() -> Result<Vec<Rewrite<ENode, Types>>, RuleError> {
    let mut all = permute::rules()?;
    all.extend(broadcast::rules()?);
    all.extend(view::rules()?);
    all.extend(contraction::rules()?);
    all.extend(algebra::rules()?);
    all.extend(indexing::rules()?);
    Ok(all)
}

/// Why the optimizer failed; each is a bug of nax.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum OptimizeError {
    /// A rewrite rule could not be built.
    #[error("internal error: a rewrite rule does not build: {0}")]
    Rule(#[from] RuleError),
    /// The graph given has a cycle.
    #[error("internal error: the graph of `{function}` has a cycle")]
    Cycle { function: String },
    /// A rule made two values of contradicting types equal (the message names both).
    #[error("{message} (optimizing `{function}`)")]
    Contradiction { function: String, message: String },
    /// Extraction found no term for the output.
    #[error("internal error: the optimizer found no term for the output of `{function}`")]
    NoTerm { function: String },
}

/// The graph rewritten by every family, and what saturation did. The
/// graph is returned unchanged when the extracted one is not cheaper.
pub fn optimize(g: &Graph) -> Result<(Graph, Report), OptimizeError> {
    let (eg, roots) = language::to_egraph(g)?;
    let before = language::extract(&eg, &roots).map_or(f64::INFINITY, |(c, _, _)| c);
    let runner = Runner::default()
        .with_egraph(eg)
        .with_scheduler(SimpleScheduler)
        .with_node_limit(NODE_LIMIT)
        .with_iter_limit(ITERATION_LIMIT)
        .with_time_limit(TIME_LIMIT)
        .run(&rules()?);
    if let Some(message) = &runner.egraph.analysis.contradiction {
        return Err(OptimizeError::Contradiction { function: g.name.clone(), message: message.clone() });
    }
    let mut applied: Vec<(String, usize)> = Vec::new();
    for it in &runner.iterations {
        for (rule, &n) in &it.applied {
            match applied.iter_mut().find(|(r, _)| r == rule.as_str()) {
                Some((_, total)) => *total += n,
                None => applied.push((rule.to_string(), n)),
            }
        }
    }
    applied.retain(|(_, n)| *n > 0);
    applied.sort();
    let Some((after, best, positions)) = language::extract(&runner.egraph, &roots) else {
        return Err(OptimizeError::NoTerm { function: g.name.clone() });
    };
    let report = Report {
        stop_reason: runner.stop_reason.as_ref().map_or("unknown".to_string(), |s| format!("{s:?}")),
        iterations: runner.iterations.len(),
        nodes: runner.egraph.total_number_of_nodes(),
        classes: runner.egraph.number_of_classes(),
        applied,
        cost_before: before,
        cost_after: after.min(before),
    };
    if after >= before {
        return Ok((g.clone(), report));
    }
    Ok((language::to_graph(g, &best, &positions, &runner.egraph.analysis), report))
}

/// What the families' start => goal tests share: a source's function `f`,
/// optimized, written as an s-expression of its output.
#[cfg(test)]
pub(crate) mod testing {
    use nax_ir::{Graph, Literal, Op};
    use petgraph::graph::NodeIndex;

    /// The sizes the one-line tests use.
    const DIMS: &str = "dim a = 4\ndim b = 5\ndim c = 6\ndim k = 3\n";

    /// `def f(SIGNATURE { return BODY }` over [`DIMS`], optimized (see [`optimized`]).
    pub fn function(signature: &str, body: &str) -> String {
        optimized(&format!("{DIMS}def f({signature} {{\n    return {body}\n}}\n"))
    }

    /// `f` in `source`, lowered and optimized (the rewritten graph verifies).
    pub fn optimized(source: &str) -> String {
        let checked = nax_front::check_source(source);
        assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
        let g = nax_lower::lower(&checked.module, "f").expect("lower");
        rewritten(&g)
    }

    /// A graph in the text form, optimized.
    pub fn optimized_text(text: &str) -> String {
        rewritten(&nax_ir::text::parse(text).expect("parse"))
    }

    /// The optimized graph's output as an s-expression (it verifies).
    fn rewritten(g: &Graph) -> String {
        let (out, _) = crate::optimize(g).expect("optimize");
        assert!(nax_ir::verify(&out).is_empty(), "{:?}\n{}", nax_ir::verify(&out), nax_ir::text::print(&out));
        sexpr(&out, out.outputs[0].node)
    }

    fn list(v: &[usize]) -> String {
        format!("[{}]", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" "))
    }

    /// A node as an s-expression: inputs and weights by name, operands of
    /// maps and contractions with their index maps or labels.
    pub fn sexpr(g: &Graph, n: NodeIndex) -> String {
        let args: Vec<String> = g.operands(n).iter().map(|&o| sexpr(g, o)).collect();
        match &g.graph[n].op {
            Op::Input { name, .. } | Op::Weight { name } => name.clone(),
            Op::Literal(Literal::Float(v)) => format!("{v:?}"),
            Op::Literal(Literal::Int(v)) => v.to_string(),
            Op::Literal(Literal::Bool(v)) => v.to_string(),
            Op::SizeValue(s) => nax_ir::text::size_text(*s),
            Op::Map { func, maps, .. } => {
                let xs: Vec<String> = args.iter().zip(maps).map(|(a, m)| if m.is_empty() { a.clone() } else { format!("{a}{}", list(m)) }).collect();
                format!("({} {})", nax_ir::text::map_fn_name(*func), xs.join(" "))
            }
            Op::Contract { labels, output } => {
                let xs: Vec<String> = args.iter().zip(labels).map(|(a, l)| format!("{a}{}", list(l))).collect();
                format!("(contract {} -> {})", xs.join(" "), list(output))
            }
            Op::Reduce { op, axes } => format!("({} {} {})", nax_ir::text::reduction_name(*op), list(axes), args[0]),
            Op::Along { func, axis } => format!("({} {axis} {})", nax_ir::text::along_name(*func), args[0]),
            Op::Reshape => format!("(reshape {})", args[0]),
            Op::Rename => format!("(rename {})", args[0]),
            Op::Permute { perm } => format!("(permute {} {})", list(perm), args[0]),
            Op::Expand { map } => format!("(expand {} {})", list(map), args[0]),
            Op::Select { axis, index, .. } => format!("(select {axis} {index} {})", args[0]),
            Op::Slice { axis, start, step } => format!("(slice {axis} {} {step} {})", nax_ir::text::size_text(*start), args[0]),
            Op::Concat { axis } => format!("(concat {axis} {})", args.join(" ")),
            Op::Take { axis } => format!("(take {axis} {} {})", args[0], args[1]),
            Op::ScatterAdd { axis } => format!("(scatter_add {axis} {})", args.join(" ")),
            Op::Scan { op, axis } => format!("(scan {} {axis} {})", nax_ir::text::reduction_name(*op), args[0]),
            Op::ArgReduce { op, axis } => format!("(arg{} {axis} {})", nax_ir::text::reduction_name(*op), args[0]),
            Op::Construct { .. } => format!("(construct {})", args.join(" ")),
            Op::Exchange(exchange) => format!("(exchange {} {})", nax_ir::text::exchange_text(exchange), args[0]),
        }
    }
}
