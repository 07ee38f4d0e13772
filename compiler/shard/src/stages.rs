//! The rank's graph cut at its exchanges: stages, each an ordinary graph
//! (the function's parameters, then the values it takes from earlier
//! steps; its results the values later steps take), compiled by any back
//! end as a function is; and the [`ShardedPlan`] that runs them in order
//! with the exchanges between. A computation goes into the first stage
//! after every exchange it depends on, so there are as few stages as the
//! exchanges' dependencies allow; parameters, literals and sizes are read
//! by every stage that needs them, weights bound by name in each.

use crate::ShardError;
use crate::partition::Partitioned;
use nax_contract::shard::{Mesh, ShardedPlan, Sharding, Step, ValueRef};
use nax_ir::{Graph, Op, Output, value_dtype};
use petgraph::graph::NodeIndex;
use std::collections::{HashMap, HashSet};

/// A rank's stages and its plan.
#[derive(Clone, Debug)]
pub struct Staged {
    /// The stages, in the order they run.
    pub stages: Vec<Graph>,
    pub plan: ShardedPlan,
    /// The rank graph's exchange nodes, in the order the plan runs them.
    pub exchanges: Vec<NodeIndex>,
}

/// The nodes every stage may read without a value carried to it:
/// parameters, weights, literals, sizes, host scalars computed from those
/// alone, and views of them (a layer's slice of a stacked weight): each
/// stage that needs one reads or computes it itself, so no weight is
/// copied from stage to stage.
fn free_nodes(g: &Graph, order: &[NodeIndex]) -> HashSet<NodeIndex> {
    let mut free = HashSet::new();
    for &n in order {
        let node = &g.graph[n];
        let leaf = matches!(node.op, Op::Input { .. } | Op::Weight { .. } | Op::Literal(_) | Op::SizeValue(_));
        let of_free = g.operands(n).iter().all(|o| free.contains(o));
        let scalar = matches!(node.ty, nax_ir::Type::Host(..)) && !matches!(node.op, Op::Exchange(_)) && of_free;
        let view = matches!(node.op, Op::Select { .. } | Op::Rename | Op::Reshape | Op::Permute { .. } | Op::Expand { .. } | Op::Slice { .. }) && of_free;
        if leaf || scalar || view {
            free.insert(n);
        }
    }
    free
}

/// Copies free node `n` (and what it is computed from) into `stage`.
fn copy_free(g: &Graph, stage: &mut Graph, map: &mut HashMap<NodeIndex, NodeIndex>, n: NodeIndex) -> NodeIndex {
    if let Some(&done) = map.get(&n) {
        return done;
    }
    let operands: Vec<NodeIndex> = g.operands(n).into_iter().map(|o| copy_free(g, stage, map, o)).collect();
    let copy = stage.add(g.graph[n].op.clone(), g.graph[n].ty.clone(), &operands);
    map.insert(n, copy);
    copy
}

/// Cuts a rank's graph at its exchanges.
pub fn stages(p: &Partitioned, mesh: &Mesh, sharding: &Sharding) -> Result<Staged, ShardError> {
    let g = &p.graph;
    let order = crate::topological(g)?;
    let is_exchange = |n: NodeIndex| matches!(g.graph[n].op, Op::Exchange(_));
    let free_set = free_nodes(g, &order);
    let free = |n: NodeIndex| free_set.contains(&n);
    // The stage each computation is in; an exchange runs after the stage
    // of its operand (-1: before the first).
    let mut time: HashMap<NodeIndex, i64> = HashMap::new();
    for &n in &order {
        if free(n) {
            continue;
        }
        let ops = g.operands(n);
        let t = if is_exchange(n) {
            let o = ops[0];
            match &g.graph[o].op {
                Op::Input { .. } => -1,
                _ if free(o) => 0,
                _ => time[&o],
            }
        } else {
            ops.iter()
                .map(|&o| {
                    if free(o) {
                        0
                    } else if is_exchange(o) {
                        time[&o] + 1
                    } else {
                        time[&o]
                    }
                })
                .max()
                .unwrap_or(0)
        };
        time.insert(n, t);
    }
    let last = time.iter().filter(|(n, _)| !is_exchange(**n)).map(|(_, &t)| t).max().unwrap_or(0).max(0);
    // Where each value is: an argument, or the value id of a stage's result or an exchange's.
    let mut values: HashMap<NodeIndex, ValueRef> = HashMap::new();
    let mut value_count = 0usize;
    for &i in &g.inputs {
        if let Op::Input { index, .. } = g.graph[i].op {
            values.insert(i, ValueRef::Argument(index));
        }
    }
    let params = g.inputs.len();
    // The values each stage must give: used by a later stage or an
    // exchange, or a result; free nodes an exchange or a result needs are
    // given by the stage that holds them (the first, or the last).
    let users = |n: NodeIndex| g.graph.neighbors_directed(n, petgraph::Direction::Outgoing).collect::<Vec<_>>();
    let home = |n: NodeIndex| -> Option<i64> {
        if let Some(&t) = time.get(&n) {
            return (!is_exchange(n)).then_some(t);
        }
        if matches!(g.graph[n].op, Op::Input { .. }) {
            return None;
        }
        if users(n).iter().any(|&u| is_exchange(u)) {
            Some(0)
        } else if g.output_nodes().any(|o| o == n) {
            Some(last)
        } else {
            None
        }
    };
    let mut steps = Vec::new();
    let mut stages = Vec::new();
    let time = &time;
    let mut exchanges = Vec::new();
    let run_exchanges = |t: i64, values: &mut HashMap<NodeIndex, ValueRef>, steps: &mut Vec<Step>, value_count: &mut usize, exchanges: &mut Vec<NodeIndex>| {
        for n in order.iter().copied().filter(|&n| is_exchange(n) && time.get(&n) == Some(&t)) {
            exchanges.push(n);
            let Op::Exchange(exchange) = g.graph[n].op else { continue };
            let input = values[&g.operands(n)[0]];
            steps.push(Step::Exchange { exchange, input, value: *value_count, dtype: value_dtype(&g.graph[n].ty) });
            values.insert(n, ValueRef::Value(*value_count));
            *value_count += 1;
        }
    };
    run_exchanges(-1, &mut values, &mut steps, &mut value_count, &mut exchanges);
    for k in 0..=last {
        let members: Vec<NodeIndex> = order.iter().copied().filter(|&n| home(n) == Some(k)).collect();
        if !members.is_empty() {
            let mut stage = crate::empty_like(g, format!("{}_stage{k}", g.name));
            let mut map: HashMap<NodeIndex, NodeIndex> = HashMap::new();
            for &i in &g.inputs {
                let copy = stage.add(g.graph[i].op.clone(), g.graph[i].ty.clone(), &[]);
                stage.inputs.push(copy);
                map.insert(i, copy);
            }
            let mut carried = Vec::new();
            for &n in &members {
                for o in g.operands(n) {
                    if map.contains_key(&o) {
                        continue;
                    }
                    let node = &g.graph[o];
                    let copy = if free(o) {
                        copy_free(g, &mut stage, &mut map, o)
                    } else {
                        let v = values.get(&o).copied().ok_or_else(|| ShardError::Verify {
                            function: g.name.clone(),
                            problems: format!("node %{} is read before a step gives it", o.index()),
                        })?;
                        let input = stage.add(Op::Input { index: params + carried.len(), name: value_name(v) }, node.ty.clone(), &[]);
                        stage.inputs.push(input);
                        carried.push(v);
                        input
                    };
                    map.insert(o, copy);
                }
                let ops: Vec<NodeIndex> = g.operands(n).iter().map(|o| map[o]).collect();
                let copy = stage.add(g.graph[n].op.clone(), g.graph[n].ty.clone(), &ops);
                map.insert(n, copy);
            }
            let mut given = Vec::new();
            for &n in &members {
                let later = users(n).iter().any(|&u| is_exchange(u) || home(u).is_some_and(|t| t > k));
                if later || g.output_nodes().any(|o| o == n) {
                    let v = value_count;
                    value_count += 1;
                    stage.outputs.push(Output { name: Some(value_name(ValueRef::Value(v))), node: map[&n] });
                    values.insert(n, ValueRef::Value(v));
                    given.push(v);
                }
            }
            steps.push(Step::Stage { stage: stages.len(), carried, values: given });
            stages.push(crate::verified(stage)?);
        }
        run_exchanges(k, &mut values, &mut steps, &mut value_count, &mut exchanges);
    }
    let results = g
        .outputs
        .iter()
        .map(|o| {
            let v = values.get(&o.node).copied().ok_or_else(|| ShardError::Verify { function: g.name.clone(), problems: "a result no step gives".into() })?;
            Ok((v, p.splits.get(o.node.index()).cloned().unwrap_or_default()))
        })
        .collect::<Result<Vec<_>, ShardError>>()?;
    let params = g.inputs.iter().map(|i| p.splits.get(i.index()).cloned().unwrap_or_default()).collect();
    let plan = ShardedPlan { mesh: mesh.clone(), sharding: sharding.clone(), values: value_count, steps, params, results, weights: p.weights.clone() };
    Ok(Staged { stages, plan, exchanges })
}

/// The name a stage gives a carried value's parameter and result.
fn value_name(v: ValueRef) -> String {
    match v {
        ValueRef::Argument(i) => format!("%arg{i}"),
        ValueRef::Value(i) => format!("%v{i}"),
    }
}
