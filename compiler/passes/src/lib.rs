//! Graph rewriting by equality saturation (egg): the optimizer between the
//! named-axis graph and kernel formation. Each rewrite family lives in its
//! own file with its `rules()`; [`optimize`] runs them under node,
//! iteration and time limits, extracts the cheapest equivalent graph
//! deterministically, and reports why saturation stopped. `nax -O0`
//! skips it.
//!
//! Today's family: the contraction order of n-ary einsums
//! ([`contraction`]).

pub mod contraction;

use nax_ir::Graph;

/// What the optimizer did to one graph.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// One line per rewritten node: what changed, the cost before and after,
    /// and why saturation stopped.
    pub lines: Vec<String>,
}

/// The graph rewritten by every family.
pub fn optimize(g: &Graph) -> Result<(Graph, Report), String> {
    let mut report = Report::default();
    let g = contraction::reorder(g, &mut report)?;
    Ok((g, report))
}
