//! Reverse mode over the named-axis graph (LANGUAGE.md section 15): the
//! derivative of a scalar node by some of its ancestors, built as more
//! nodes of the same graph, so that the optimizer, kernel formation and
//! every back end see the backward pass as they see the forward.
//!
//! The nodes between the targets and the value are visited in reverse
//! topological order; each one's adjoint (the derivative of the value by
//! it, of its type) is the sum of its users' contributions, and its
//! operation's rule (one family per file: `elementwise`, `structure`,
//! `reductions`) gives its operands' contributions. Only float tensors
//! carry a derivative: integers, masks and host scalars stop it.
//!
//! Every product of an adjoint with a local derivative is
//! `where(g == 0, 0, g * d)`: a zero a `where`, `masked_fill` or `clamp`
//! sends to the operand it did not pick stays zero through any chain
//! after it, even where that operand's own derivative is infinite or nan
//! (`where(x > 0, sqrt(x), 0)` at 0 has derivative 0).

mod elementwise;
mod reductions;
mod structure;

use crate::{LowerError, internal};
use nax_contract::{DType, HostType, Size};
use nax_front::check::sizes::Symbols;
use nax_ir::{Graph, Literal, MapFn, Op, Type};
use nax_ops::{BinaryOp, Constructor, Elementwise, Reduction};
use nax_values::{Axis, Kind, Range, TensorType};
use petgraph::Direction;
use petgraph::graph::NodeIndex;

/// The derivatives of `value` (a scalar) by each of `wrt`: one node per
/// target, of the target's type (zeros where `value` does not depend on it).
pub(crate) fn differentiate(g: &mut Graph, symbols: &mut Symbols, value: NodeIndex, wrt: &[NodeIndex]) -> Result<Vec<NodeIndex>, LowerError> {
    let mut r = Reverse { g, symbols };
    let active = r.active(value, wrt);
    let mut adjoints: Vec<Vec<Part>> = (0..r.g.graph.node_count()).map(|_| Vec::new()).collect();
    if active[value.index()] {
        let seed = r.tensor(value)?;
        adjoints[value.index()].push(Part::Whole(r.constant(Constructor::Ones, &seed)));
    }
    let order = petgraph::algo::toposort(&r.g.graph, None).map_err(|_| internal("the graph has a cycle"))?;
    let mut finished: Vec<Option<NodeIndex>> = vec![None; adjoints.len()];
    for n in order.into_iter().rev() {
        if !active.get(n.index()).copied().unwrap_or(false) {
            continue;
        }
        let contributions = std::mem::take(&mut adjoints[n.index()]);
        let Some(adjoint) = r.sum(&contributions, n)? else { continue };
        finished[n.index()] = Some(adjoint);
        if wrt.contains(&n) {
            // A target is a variable: what it is computed from is not.
            continue;
        }
        let operands = r.g.operands(n);
        let needs: Vec<bool> = operands.iter().map(|o| active[o.index()]).collect();
        if !needs.contains(&true) {
            continue;
        }
        // A selection's adjoint is kept as it is until its operand's
        // adjoint is summed: the selections of every position (a loop's
        // `w[L = i]`) then make one concatenation, not a sum of tensors
        // of the whole operand's size that are zero but at one position.
        if let Op::Select { axis, index, count } = r.g.graph[n].op {
            adjoints[operands[0].index()].push(Part::At { axis, index, count, node: adjoint });
            continue;
        }
        let parts = r.rule(n, adjoint, &operands, &needs)?;
        for ((o, part), need) in operands.iter().zip(parts).zip(needs) {
            if let (Some(part), true) = (part, need) {
                adjoints[o.index()].push(Part::Whole(part));
            }
        }
    }
    wrt.iter()
        .map(|&w| match finished[w.index()] {
            Some(a) => Ok(a),
            None => {
                let t = r.tensor(w)?;
                Ok(r.constant(Constructor::Zeros, &t))
            }
        })
        .collect()
}

/// An operand as an elementwise node reads it: the node and its map.
type Arg = (NodeIndex, Vec<usize>);

/// A contribution to a node's adjoint.
enum Part {
    /// Of the node's type.
    Whole(NodeIndex),
    /// From a selection of position `index` of `axis` (of `count`
    /// positions): `node` has the node's type without that axis, and the
    /// contribution is zero at every other position.
    At { axis: usize, index: usize, count: usize, node: NodeIndex },
}

/// Selections' adjoints along one axis: the axis, its positions, and each
/// adjoint with its position.
type Selections = (usize, usize, Vec<(usize, NodeIndex)>);

/// The graph being extended, with the sizes it refers to.
struct Reverse<'a> {
    g: &'a mut Graph,
    symbols: &'a mut Symbols,
}

/// A derivative's type: the value's axes and dtype, plain, of any value.
fn adjoint_type(t: &TensorType) -> TensorType {
    TensorType { kind: Kind::Plain, range: Some(Range::FULL), ..t.clone() }
}

/// The axes `0..rank` but `gone`, in order.
fn without(rank: usize, gone: &[usize]) -> Vec<usize> {
    (0..rank).filter(|a| !gone.contains(a)).collect()
}

impl Reverse<'_> {
    /// Which nodes carry a derivative: float tensors computed from a
    /// target that the value is computed from.
    fn active(&self, value: NodeIndex, wrt: &[NodeIndex]) -> Vec<bool> {
        let reach = |starts: &[NodeIndex], direction: Direction| {
            let mut seen = vec![false; self.g.graph.node_count()];
            let mut stack = starts.to_vec();
            while let Some(n) = stack.pop() {
                if !std::mem::replace(&mut seen[n.index()], true) {
                    stack.extend(self.g.graph.neighbors_directed(n, direction));
                }
            }
            seen
        };
        let from_targets = reach(wrt, Direction::Outgoing);
        let to_value = reach(&[value], Direction::Incoming);
        self.g
            .graph
            .node_indices()
            .map(|n| from_targets[n.index()] && to_value[n.index()] && matches!(&self.g.graph[n].ty, Type::Tensor(t) if t.dtype.is_float()))
            .collect()
    }

    /// The contributions of a node's users added up (`None`: it has none);
    /// those of selections along one axis as one concatenation.
    fn sum(&mut self, contributions: &[Part], n: NodeIndex) -> Result<Option<NodeIndex>, LowerError> {
        let t = adjoint_type(&self.tensor(n)?);
        let mut wholes: Vec<NodeIndex> = Vec::new();
        let mut selected: Vec<Selections> = Vec::new();
        for part in contributions {
            match *part {
                Part::Whole(node) => wholes.push(node),
                Part::At { axis, index, count, node } => match selected.iter_mut().find(|(a, c, _)| *a == axis && *c == count) {
                    Some((_, _, at)) => at.push((index, node)),
                    None => selected.push((axis, count, vec![(index, node)])),
                },
            }
        }
        for (axis, count, at) in selected {
            wholes.push(self.positions(&t, axis, count, &at)?);
        }
        let Some((&first, rest)) = wholes.split_first() else { return Ok(None) };
        let mut total = first;
        for &c in rest {
            total = self.binary(BinaryOp::Add, total, c, &t);
        }
        Ok(Some(total))
    }

    /// Each operand's contribution to its adjoint, given the node's
    /// adjoint `g` (only those `needs` asks for).
    fn rule(&mut self, n: NodeIndex, g: NodeIndex, operands: &[NodeIndex], needs: &[bool]) -> Result<Vec<Option<NodeIndex>>, LowerError> {
        let op = self.g.graph[n].op.clone();
        let one = |part: Result<NodeIndex, LowerError>| part.map(|p| vec![Some(p)]);
        match op {
            Op::Map { func, maps, .. } => self.map_rule(func, &maps, n, g, operands, needs),
            Op::Contract { labels, output } => self.contract_rule(&labels, &output, g, operands, needs),
            Op::Reduce { op, axes } => one(self.reduce_rule(op, &axes, n, g, operands[0])),
            Op::Along { func, axis } => one(self.along_rule(func, axis, n, g, operands[0])),
            Op::Scan { op, axis } => one(self.scan_rule(op, axis, g, operands[0])),
            Op::Reshape | Op::Rename => {
                let t = adjoint_type(&self.tensor(operands[0])?);
                let op = if matches!(op, Op::Rename) { Op::Rename } else { Op::Reshape };
                Ok(vec![Some(self.g.add(op, Type::Tensor(t), &[g]))])
            }
            Op::Permute { perm } => {
                let mut inverse = vec![0; perm.len()];
                for (i, &p) in perm.iter().enumerate() {
                    inverse[p] = i;
                }
                let t = adjoint_type(&self.tensor(operands[0])?);
                Ok(vec![Some(self.g.add(Op::Permute { perm: inverse }, Type::Tensor(t), &[g]))])
            }
            Op::Expand { map } => {
                let result = self.tensor(n)?;
                one(self.unbroadcast(g, &result, &map, operands[0]))
            }
            Op::Select { .. } => Err(internal("a selection's adjoint is summed with its operand's")),
            Op::Exchange(_) => Err(internal("an exchange between processes in a graph being differentiated (graphs are split after `grad`)")),
            Op::Slice { axis, start, step } => one(self.slice_rule(axis, start, step, n, g, operands[0])),
            Op::Concat { axis } => self.concat_rule(axis, g, operands, needs),
            Op::Take { axis } => Ok(vec![Some(self.take_rule(axis, g, operands[0], operands[1])?), None]),
            // A base's adjoint is the node's own.
            Op::ScatterAdd { axis } => {
                Ok([Some(self.scatter_rule(axis, g, operands[0], operands[1])?), None, Some(g)].into_iter().take(operands.len()).collect())
            }
            // Positions and constants carry no derivative.
            Op::ArgReduce { .. } | Op::Construct { .. } => Ok(vec![None; operands.len()]),
            Op::Input { .. } | Op::Weight { .. } | Op::Literal(_) | Op::SizeValue(_) => Ok(Vec::new()),
        }
    }

    /// A node's tensor type (an internal error for a host scalar).
    fn tensor(&self, n: NodeIndex) -> Result<TensorType, LowerError> {
        match &self.g.graph[n].ty {
            Type::Tensor(t) => Ok(t.clone()),
            Type::Host(..) => Err(internal("a derivative of a host scalar")),
        }
    }

    fn is_one(&self, s: Size) -> bool {
        self.symbols.constant(s) == Some(1)
    }

    /// A float host literal.
    fn float(&mut self, v: f64) -> NodeIndex {
        self.g.add(Op::Literal(Literal::Float(v)), Type::Host(HostType::Float, Some(Range::exact(v))), &[])
    }

    /// `zeros` or `ones` of the adjoint type of `t`.
    fn constant(&mut self, func: Constructor, t: &TensorType) -> NodeIndex {
        self.g.add(Op::Construct { func }, Type::Tensor(adjoint_type(t)), &[])
    }

    /// `arange(size)`, integers.
    fn arange(&mut self, size: Size) -> NodeIndex {
        let t = TensorType { dtype: DType::I64, kind: Kind::Plain, axes: vec![Axis { name: None, size }], range: Some(Range::new(0.0, f64::INFINITY)) };
        self.g.add(Op::Construct { func: Constructor::Arange }, Type::Tensor(t), &[])
    }

    /// An elementwise node over the axes of `shape`: each operand given
    /// with its map (host scalars with none), computing in `shape`'s dtype;
    /// a comparison gives a mask.
    fn map(&mut self, func: MapFn, operands: &[Arg], shape: &TensorType) -> NodeIndex {
        let compares = matches!(func, MapFn::Binary(op) if op.is_comparison());
        let t = if compares { TensorType { dtype: DType::Bool, range: None, ..adjoint_type(shape) } } else { adjoint_type(shape) };
        let compute = shape.dtype;
        let nodes: Vec<NodeIndex> = operands.iter().map(|(n, _)| *n).collect();
        let maps = operands.iter().map(|(n, m)| if matches!(self.g.graph[*n].ty, Type::Host(..)) { Vec::new() } else { m.clone() }).collect();
        self.g.add(Op::Map { func, maps, compute }, Type::Tensor(t), &nodes)
    }

    /// A node as an elementwise node of its own axes reads it (a host
    /// scalar with no map).
    fn here(&self, n: NodeIndex) -> Arg {
        let rank = match &self.g.graph[n].ty {
            Type::Tensor(t) => t.rank(),
            Type::Host(..) => 0,
        };
        (n, (0..rank).collect())
    }

    /// An elementwise node whose tensor operands all have `shape`.
    fn same_shape(&mut self, func: MapFn, operands: &[NodeIndex], shape: &TensorType) -> NodeIndex {
        let operands: Vec<Arg> = operands.iter().map(|&o| self.here(o)).collect();
        self.map(func, &operands, shape)
    }

    fn binary(&mut self, op: BinaryOp, a: NodeIndex, b: NodeIndex, shape: &TensorType) -> NodeIndex {
        self.same_shape(MapFn::Binary(op), &[a, b], shape)
    }

    fn unary(&mut self, f: Elementwise, a: NodeIndex, shape: &TensorType) -> NodeIndex {
        self.same_shape(MapFn::Builtin(f), &[a], shape)
    }

    /// `where(mask, a, b)` over `shape`.
    fn select(&mut self, mask: NodeIndex, a: NodeIndex, b: NodeIndex, shape: &TensorType) -> NodeIndex {
        self.same_shape(MapFn::Builtin(Elementwise::Where), &[mask, a, b], shape)
    }

    /// A mask as 1 and 0 of `shape`'s dtype.
    fn indicator(&mut self, mask: NodeIndex, shape: &TensorType) -> NodeIndex {
        let (one, zero) = (self.float(1.0), self.float(0.0));
        self.select(mask, one, zero, shape)
    }

    /// Sums `x` (of `t`) over `axes`.
    fn reduce(&mut self, op: Reduction, x: NodeIndex, t: &TensorType, axes: &[usize]) -> NodeIndex {
        if axes.is_empty() {
            return x;
        }
        let kept = without(t.rank(), axes).into_iter().map(|a| t.axes[a].clone()).collect();
        self.g.add(Op::Reduce { op, axes: axes.to_vec() }, Type::Tensor(TensorType { axes: kept, ..adjoint_type(t) }), &[x])
    }

    /// `x`, which has the axes of `full` but `gone`, broadcast to `full`.
    fn expand(&mut self, x: NodeIndex, full: &TensorType, gone: &[usize]) -> NodeIndex {
        if gone.is_empty() {
            return x;
        }
        self.g.add(Op::Expand { map: without(full.rank(), gone) }, Type::Tensor(adjoint_type(full)), &[x])
    }

    /// A contraction of `nodes` (with `labels`) onto `output`, of type
    /// `t`. Where it sums over several labels that every operand carrying
    /// one of them carries all of, side by side and in one order (a
    /// weight's gradient sums over batch and positions), those axes are
    /// first merged into one: a matrix product sums over one axis.
    fn contract(&mut self, mut nodes: Vec<NodeIndex>, mut labels: Vec<Vec<usize>>, output: Vec<usize>, t: TensorType) -> Result<NodeIndex, LowerError> {
        let mut summed: Vec<usize> = Vec::new();
        for &l in labels.iter().flatten() {
            if !output.contains(&l) && !summed.contains(&l) {
                summed.push(l);
            }
        }
        if summed.len() >= 2 {
            // Their order in the first operand carrying them; each carrier must hold them in a run.
            let carriers: Vec<usize> = (0..nodes.len()).filter(|&k| labels[k].iter().any(|l| summed.contains(l))).collect();
            let run = |ls: &[usize]| -> Option<(usize, Vec<usize>)> {
                let start = ls.iter().position(|l| summed.contains(l))?;
                let run: Vec<usize> = ls[start..].iter().take_while(|l| summed.contains(l)).copied().collect();
                (run.len() == summed.len()).then_some((start, run))
            };
            let first = carriers.first().and_then(|&k| run(&labels[k]));
            let mergeable = first.as_ref().is_some_and(|(_, order)| carriers.iter().all(|&k| run(&labels[k]).is_some_and(|(_, r)| &r == order)));
            if let (true, Some((_, order))) = (mergeable, first) {
                for k in carriers {
                    let (start, _) = run(&labels[k]).ok_or_else(|| internal("a summed run vanished"))?;
                    let operand = self.tensor(nodes[k])?;
                    let mut size = Size::Const(1);
                    for a in &operand.axes[start..start + order.len()] {
                        size = self.symbols.mul(size, a.size, Default::default()).ok_or_else(|| internal("a merged size too large"))?;
                    }
                    let mut axes = operand.axes.clone();
                    axes.splice(start..start + order.len(), [Axis { name: None, size }]);
                    nodes[k] = self.g.add(Op::Reshape, Type::Tensor(TensorType { axes, ..operand }), &[nodes[k]]);
                    labels[k].splice(start..start + order.len(), [order[0]]);
                }
            }
        }
        Ok(self.g.add(Op::Contract { labels, output }, Type::Tensor(t), &nodes))
    }

    /// A contribution `c` over the axes of `result` to an operand whose
    /// axis j was read at result axis `map[j]`: summed over the result
    /// axes the operand lacks or has with size 1, in the operand's order.
    fn unbroadcast(&mut self, c: NodeIndex, result: &TensorType, map: &[usize], operand: NodeIndex) -> Result<NodeIndex, LowerError> {
        let target = adjoint_type(&self.tensor(operand)?);
        // A conversion (`float(x)`, `bf16(x)`) sends the adjoint back in the operand's dtype.
        let (c, result) = if target.dtype == result.dtype {
            (c, result.clone())
        } else {
            let converted = TensorType { dtype: target.dtype, ..adjoint_type(result) };
            let compute = if matches!(target.dtype, DType::F16 | DType::BF16) { target.dtype } else { result.dtype };
            let identity = (0..result.rank()).collect();
            let node = self.g.add(Op::Map { func: MapFn::Builtin(Elementwise::ToFloat), maps: vec![identity], compute }, Type::Tensor(converted.clone()), &[c]);
            (node, converted)
        };
        let result = &result;
        let broadcast = |r: &Self, j: usize| r.is_one(target.axes[j].size) && !r.is_one(result.axes[map[j]].size);
        let summed: Vec<usize> = (0..result.rank()).filter(|&a| (0..map.len()).all(|j| map[j] != a || broadcast(self, j))).collect();
        let c = self.reduce(Reduction::Sum, c, result, &summed);
        let kept = without(result.rank(), &summed);
        // The kept axes in the operand's order.
        let direct: Vec<usize> = (0..map.len()).filter(|&j| !broadcast(self, j)).collect();
        let perm: Vec<usize> = direct.iter().map(|&j| kept.iter().position(|&a| a == map[j]).unwrap_or(0)).collect();
        let c = if perm.iter().enumerate().all(|(i, &p)| i == p) {
            c
        } else {
            let axes = direct.iter().map(|&j| target.axes[j].clone()).collect();
            self.g.add(Op::Permute { perm }, Type::Tensor(TensorType { axes, ..target.clone() }), &[c])
        };
        let op = if direct.len() == target.rank() { Op::Rename } else { Op::Reshape };
        Ok(self.g.add(op, Type::Tensor(target), &[c]))
    }
}
