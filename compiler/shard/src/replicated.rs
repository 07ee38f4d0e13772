//! A product every rank would compute whole, split by the compiler over a
//! mesh axis it does not use. GPT-2's head (`[b n D] x [V D] -> [b n V]`)
//! has no split name where the user splits the heads and features, and
//! its vocabulary (50257) has no equal blocks: every rank would compute
//! it all, a third of the prefill's time at tp = 2. Its contracted axis
//! `D` splits instead: each rank reads its block of the weight (only that
//! block, from the file), cuts its block of the other operand, and the
//! partial products are all-reduced, the result whole as before.
//!
//! Per element of the result that saves `2 K (1 - 1/p)` flops and moves
//! `2 (1 - 1/p)` elements (a ring all-reduce): `K / 4` flops per byte, so
//! the contracted axis must be long (`K >= 128`: 32 flops per byte, where
//! a core does tens of flops in the time an engine moves a byte), and the
//! weight large enough that the product is worth a collective's latency.
//!
//! The choice is made on a first partition (what is whole over which mesh
//! axis is known there, after the name rule and every block pushed back to
//! the weights): a contraction whose operands and result are all whole
//! over a mesh axis, one operand a whole `f32` or `f64` weight contracted
//! along an axis of constant size that the mesh axis divides. The weight
//! may have no other use than such products along the same axis and
//! `take`s along another one (a tied embedding: the rank looks up its
//! block of each row and the rows are all-gathered, `[b n D]` moved, not
//! the table); then the function is partitioned again with the weight
//! split so.

use crate::partition::Partitioned;
use nax_contract::DType;
use nax_contract::shard::{Mesh, Split};
use nax_ir::{Op, Type};
use petgraph::Direction;
use petgraph::graph::NodeIndex;
use std::collections::HashMap;

/// The shortest contracted axis worth splitting (32 flops per byte moved).
const SHORTEST_CONTRACTION: u64 = 128;
/// The fewest elements of a weight worth a collective's latency.
const SMALLEST_WEIGHT: u64 = 1 << 16;

/// A module weight the compiler splits, though none of its names is split.
pub(crate) type Chosen = HashMap<String, (usize, Split)>;

/// The weights to split along a contracted axis, from the first partition
/// `first` of a function over `mesh`: each module weight's axis and split.
pub(crate) fn chosen_splits(first: &Partitioned, mesh: &Mesh) -> Chosen {
    let g = &first.graph;
    // Each weight node's module weight, where the rank holds it whole; a
    // weight the rank holds a block of anywhere is left as it is.
    let mut source: HashMap<NodeIndex, &str> = HashMap::new();
    let mut refused: Vec<&str> = Vec::new();
    for n in g.graph.node_indices() {
        let Op::Weight { name } = &g.graph[n].op else { continue };
        let Some(block) = first.weights.iter().find(|b| &b.name == name) else { continue };
        if block.splits.iter().all(Option::is_none) {
            source.insert(n, &block.source);
        } else {
            refused.push(&block.source);
        }
    }
    // The products that qualify: each one's weight node, axis and split.
    let mut products: HashMap<NodeIndex, (NodeIndex, usize, Split)> = HashMap::new();
    for c in g.graph.node_indices() {
        if let Some(choice) = product_choice(first, mesh, c, &source) {
            products.insert(c, choice);
        }
    }
    let mut chosen: Chosen = HashMap::new();
    for &(w, axis, split) in products.values() {
        let name = source[&w];
        if chosen.get(name).is_some_and(|&c| c != (axis, split)) {
            refused.push(name);
        } else {
            chosen.insert(name.to_string(), (axis, split));
        }
    }
    // Every node of a chosen weight: each of its uses must fit.
    for (&w, &name) in &source {
        if let Some(&(axis, split)) = chosen.get(name)
            && !every_use_fits(first, w, axis, split, &products)
        {
            refused.push(name);
        }
    }
    chosen.retain(|name, _| !refused.contains(&name.as_str()));
    chosen
}

/// Whether contraction `c` is whole over a mesh axis and has a weight
/// operand worth splitting along a contracted axis: the weight's node,
/// that axis, and the split.
fn product_choice(first: &Partitioned, mesh: &Mesh, c: NodeIndex, source: &HashMap<NodeIndex, &str>) -> Option<(NodeIndex, usize, Split)> {
    let g = &first.graph;
    let Op::Contract { labels, output } = &g.graph[c].op else { return None };
    let operands = g.operands(c);
    let weights: Vec<usize> = (0..operands.len()).filter(|&k| source.contains_key(&operands[k])).collect();
    let [k] = weights[..] else { return None };
    let w = operands[k];
    let Type::Tensor(t) = &g.graph[w].ty else { return None };
    let sizes: Option<Vec<u64>> = t.axes.iter().map(|a| g.symbols.constant(a.size)).collect();
    let sizes = sizes?;
    let float = matches!(t.dtype, DType::F32 | DType::F64);
    if !float || sizes.iter().product::<u64>() < SMALLEST_WEIGHT || operands.iter().filter(|&&o| o == w).count() > 1 {
        return None;
    }
    // The longest contracted axis of the weight.
    let axis = (0..sizes.len()).filter(|&j| !output.contains(&labels[k][j]) && sizes[j] >= SHORTEST_CONTRACTION).max_by_key(|&j| sizes[j])?;
    // The mesh axis none of the product's values is split over, the largest that divides the axis.
    let busy = |m: usize| operands.iter().chain([&c]).any(|&n| first.splits[n.index()].iter().flatten().any(|s| s.mesh_axis == m));
    let mesh_axis = (0..mesh.axes().len())
        .filter(|&m| mesh.size(m) > 1 && sizes[axis] % mesh.size(m) as u64 == 0 && !busy(m))
        .max_by_key(|&m| (mesh.size(m), std::cmp::Reverse(m)))?;
    Some((w, axis, Split { mesh_axis, parts: mesh.size(mesh_axis) as u64, outer: 1 }))
}

/// Whether every use of weight node `w` is a product that qualifies with
/// the same axis and split, or a `take` along another axis whose indices
/// and result are whole over the split's mesh axis.
fn every_use_fits(first: &Partitioned, w: NodeIndex, axis: usize, split: Split, products: &HashMap<NodeIndex, (NodeIndex, usize, Split)>) -> bool {
    let g = &first.graph;
    g.graph.neighbors_directed(w, Direction::Outgoing).all(|u| match &g.graph[u].op {
        Op::Contract { .. } => products.get(&u) == Some(&(w, axis, split)),
        Op::Take { axis: along } => {
            let operands = g.operands(u);
            let idle = |n: NodeIndex| first.splits[n.index()].iter().flatten().all(|s| s.mesh_axis != split.mesh_axis);
            operands[0] == w && operands[1..].iter().all(|&i| i != w && idle(i)) && *along != axis && idle(u)
        }
        _ => false,
    })
}
