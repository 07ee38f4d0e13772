//! What `nax plan` prints: the mesh and the sharding, each rank's
//! parameters, weights and results with their blocks' sizes, and every
//! step (a stage, or an exchange with its kind, mesh axis and bytes per
//! call, a formula in the sizes known only at the call).

use crate::partition::Partitioned;
use crate::stages::Staged;
use nax_contract::shard::{Exchange, Mesh, Split, Step};
use nax_contract::{Size, SizeTable, TensorSpec};
use nax_ir::{Op, Type};
use std::fmt::Write;

/// A value's type as `dtype[name:size ...]`, each split axis marked with
/// its mesh axis; `scalar` for a host scalar.
fn axes_text(ty: &Type, splits: &[Option<Split>], symbols: &SizeTable, mesh: &Mesh) -> String {
    match ty {
        Type::Host(..) => "scalar".into(),
        Type::Tensor(_) => spec_text(&nax_ir::tensor_spec(ty), splits, symbols, mesh),
    }
}

/// A tensor type as `dtype[name:size ...]`, each split axis marked with its mesh axis.
fn spec_text(spec: &TensorSpec, splits: &[Option<Split>], symbols: &SizeTable, mesh: &Mesh) -> String {
    let axes: Vec<String> = spec
        .axes
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let name = a.name.clone().unwrap_or_else(|| "_".into());
            let split = match splits.get(i).copied().flatten() {
                Some(s) => {
                    let runs = if s.outer > 1 { format!(" in {} runs", s.outer) } else { String::new() };
                    format!(" (split over {}{runs})", mesh.axes()[s.mesh_axis].0)
                }
                None => String::new(),
            };
            format!("{name}:{}{split}", symbols.display(a.size))
        })
        .collect();
    format!("{}[{}]", spec.dtype.as_str(), axes.join(" "))
}

/// A value's bytes: a number, or a product with the run-time sizes.
fn bytes_text(ty: &Type, symbols: &SizeTable) -> String {
    let Type::Tensor(t) = ty else { return "8".into() };
    let mut constant = t.dtype.size_bytes() as u128;
    let mut symbolic = Vec::new();
    for a in &t.axes {
        match symbols.resolve(a.size) {
            Size::Const(c) => constant = constant.saturating_mul(u128::from(c)),
            s => symbolic.push(symbols.display(s)),
        }
    }
    if symbolic.is_empty() { constant.to_string() } else { format!("{constant}*{}", symbolic.join("*")) }
}

/// The text `nax plan` prints for one function.
pub fn plan_text(p: &Partitioned, staged: &Staged) -> String {
    let g = &p.graph;
    let plan = &staged.plan;
    let mesh = &plan.mesh;
    let mut out = String::new();
    let _ = writeln!(out, "function {}", g.name);
    let _ = writeln!(out, "mesh {} ({} processes)", mesh, mesh.processes());
    let _ = writeln!(out, "sharding {}", plan.sharding);
    let _ = writeln!(out, "each rank's parameters:");
    for &i in &g.inputs {
        if let Op::Input { name, .. } = &g.graph[i].op {
            let _ = writeln!(out, "  {name}: {}", axes_text(&g.graph[i].ty, &p.splits[i.index()], &g.symbols, mesh));
        }
    }
    let _ = writeln!(out, "each rank's weights:");
    for w in &plan.weights {
        let from = if w.name == w.source { String::new() } else { format!(" (of {})", w.source) };
        let _ = writeln!(out, "  {}{from}: {}", w.name, spec_text(&w.ty, &w.splits, &g.symbols, mesh));
    }
    let _ = writeln!(out, "each rank's results:");
    for o in &g.outputs {
        let name = o.name.clone().unwrap_or_else(|| "result".into());
        let _ = writeln!(out, "  {name}: {}", axes_text(&g.graph[o.node].ty, &p.splits[o.node.index()], &g.symbols, mesh));
    }
    let _ = writeln!(out, "steps:");
    let mut next_exchange = staged.exchanges.iter();
    for step in &plan.steps {
        match step {
            Step::Stage { stage, carried, values } => {
                let s = &staged.stages[*stage];
                let _ = writeln!(out, "  stage {stage}: {} operations, takes {} values, gives {}", s.graph.node_count(), carried.len(), values.len());
            }
            Step::Exchange { exchange, .. } => {
                let node = next_exchange.next();
                let ty = node.map(|&n| &g.graph[n].ty);
                let bytes = ty.map_or_else(|| "?".into(), |t| bytes_text(t, &g.symbols));
                let axis_name = &mesh.axes()[exchange.mesh_axis()].0;
                let what = match exchange {
                    Exchange::AllReduce { op, .. } => format!("all_reduce {} over {axis_name}", op.name()),
                    Exchange::AllGather { axis, .. } => format!("all_gather axis {axis} over {axis_name}"),
                    Exchange::Block { axis, .. } => format!("block axis {axis} along {axis_name} (no data moves)"),
                    Exchange::ReduceScatter { op, axis, .. } => format!("reduce_scatter {} axis {axis} over {axis_name}", op.name()),
                };
                let _ = writeln!(out, "  {what}: {bytes} bytes");
            }
        }
    }
    let (reduces, gathers, _) = plan.exchange_counts();
    let scatters = plan.reduce_scatters();
    let scatters_text = if scatters == 0 { String::new() } else { format!(", {scatters} reduce-scatters") };
    let _ = writeln!(out, "collectives per call: {} ({reduces} all-reduces, {gathers} all-gathers{scatters_text})", reduces + gathers + scatters);
    out
}
