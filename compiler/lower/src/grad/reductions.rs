//! The derivatives of the nodes that combine elements: contractions
//! (`@`, einsum: the adjoint contracted with the other operands, the
//! operand's labels as output), reductions (`sum` and `mean` broadcast it
//! back; `max` and `min` share it equally among the elements equal to the
//! result; `prod` as the product of the others, exact where elements are
//! zero), softmax, log_softmax and logsumexp, and scans (`cumsum` through
//! a triangular contraction, `cumprod` through the running products that
//! leave each element out).

use super::{Reverse, adjoint_type, without};
use crate::{LowerError, internal};
use nax_contract::HostType;
use nax_ir::{MapFn, Op, Type};
use nax_ops::{AlongAxis, BinaryOp, Elementwise, Reduction};
use nax_values::{Axis, TensorType};
use petgraph::graph::NodeIndex;

impl Reverse<'_> {
    /// A contraction: for operand k, the adjoint contracted with the other
    /// operands onto k's labels; a label only k has is broadcast back, an
    /// axis of size 1 that broadcast is summed to size 1.
    pub(super) fn contract_rule(
        &mut self,
        labels: &[Vec<usize>],
        output: &[usize],
        g: NodeIndex,
        operands: &[NodeIndex],
        needs: &[bool],
    ) -> Result<Vec<Option<NodeIndex>>, LowerError> {
        let types = operands.iter().map(|&o| self.tensor(o)).collect::<Result<Vec<_>, _>>()?;
        let mut parts = Vec::with_capacity(operands.len());
        for k in 0..operands.len() {
            if !needs[k] {
                parts.push(None);
                continue;
            }
            let own = &labels[k];
            if (0..own.len()).any(|j| own[..j].contains(&own[j])) {
                return Err(internal("the derivative of a contraction that repeats a label in one operand (a diagonal)"));
            }
            // An axis is contracted back when its label has more than one
            // element elsewhere, and it has them too (an axis of size 1 that
            // broadcast is summed to size 1, a label only it has is
            // broadcast back: both by the expansion below).
            let t = adjoint_type(&types[k]);
            let carried = |r: &Self, l: usize| {
                output.contains(&l) || (0..operands.len()).any(|i| i != k && labels[i].iter().zip(&types[i].axes).any(|(&m, a)| m == l && !r.is_one(a.size)))
            };
            let broadcast = |r: &Self, j: usize| r.is_one(t.axes[j].size) && !r.all_one(own[j], labels, &types);
            let direct: Vec<usize> = (0..own.len()).filter(|&j| carried(self, own[j]) && !broadcast(self, j)).collect();
            let mut nodes = vec![g];
            let mut all_labels = vec![output.to_vec()];
            for i in (0..operands.len()).filter(|&i| i != k) {
                nodes.push(operands[i]);
                all_labels.push(labels[i].clone());
            }
            let axes: Vec<Axis> = direct.iter().map(|&j| t.axes[j].clone()).collect();
            let c = self.contract(nodes, all_labels, direct.iter().map(|&j| own[j]).collect(), TensorType { axes, ..t.clone() })?;
            let gone: Vec<usize> = (0..t.rank()).filter(|j| !direct.contains(j)).collect();
            parts.push(Some(self.expand(c, &t, &gone)));
        }
        Ok(parts)
    }

    /// Whether every axis labelled `l` has one element.
    fn all_one(&self, l: usize, labels: &[Vec<usize>], types: &[TensorType]) -> bool {
        labels.iter().zip(types).all(|(ls, ty)| ls.iter().zip(&ty.axes).all(|(&m, a)| m != l || self.is_one(a.size)))
    }

    /// `sum`, `mean`, `max`, `min`, `prod` over `axes` of `x` (the node `n`).
    pub(super) fn reduce_rule(&mut self, op: Reduction, axes: &[usize], n: NodeIndex, g: NodeIndex, x: NodeIndex) -> Result<NodeIndex, LowerError> {
        let t = adjoint_type(&self.tensor(x)?);
        let kept = without(t.rank(), axes);
        let spread = self.expand(g, &t, axes);
        match op {
            Reduction::Sum => Ok(spread),
            Reduction::Mean => {
                let mut count = None;
                for &a in axes {
                    let size = self.g.add(Op::SizeValue(t.axes[a].size), Type::Host(HostType::Int, None), &[]);
                    count = Some(match count {
                        None => size,
                        Some(c) => self.g.add(
                            Op::Map { func: MapFn::Binary(BinaryOp::Mul), maps: vec![Vec::new(), Vec::new()], compute: nax_contract::DType::I64 },
                            Type::Host(HostType::Int, None),
                            &[c, size],
                        ),
                    });
                }
                Ok(match count {
                    Some(c) => self.map(MapFn::Binary(BinaryOp::Div), &[(spread, (0..t.rank()).collect()), (c, Vec::new())], &t),
                    None => spread,
                })
            }
            Reduction::Max | Reduction::Min => {
                // Shared equally among the elements equal to the result.
                let hit = self.map(MapFn::Binary(BinaryOp::Eq), &[(x, (0..t.rank()).collect()), (n, kept.clone())], &t);
                let ones = self.indicator(hit, &t);
                let count = self.reduce(Reduction::Sum, ones, &t, axes);
                let reduced = TensorType { axes: kept.iter().map(|&a| t.axes[a].clone()).collect(), ..t.clone() };
                let share = self.binary(BinaryOp::Div, g, count, &reduced);
                let share = self.expand(share, &t, axes);
                let zero = self.float(0.0);
                Ok(self.select(hit, share, zero, &t))
            }
            Reduction::Prod => {
                // The product of the others: z / x without zeros; with one
                // zero, the product of the rest at it and 0 elsewhere; with
                // more, 0.
                let reduced = TensorType { axes: kept.iter().map(|&a| t.axes[a].clone()).collect(), ..t.clone() };
                let (zero, one) = (self.float(0.0), self.float(1.0));
                let is_zero = self.binary(BinaryOp::Eq, x, zero, &t);
                let zeros = {
                    let ones = self.indicator(is_zero, &t);
                    self.reduce(Reduction::Sum, ones, &t, axes)
                };
                let rest = {
                    let nonzero = self.select(is_zero, one, x, &t);
                    self.reduce(Reduction::Prod, nonzero, &t, axes)
                };
                let single = self.binary(BinaryOp::Eq, zeros, one, &reduced);
                let none = self.binary(BinaryOp::Eq, zeros, zero, &reduced);
                let at_zero = self.select(single, rest, zero, &reduced);
                let at_zero = self.expand(at_zero, &t, axes);
                let quotient = self.map(MapFn::Binary(BinaryOp::Div), &[(n, kept.clone()), (x, (0..t.rank()).collect())], &t);
                let elsewhere =
                    self.map(MapFn::Builtin(Elementwise::Where), &[(none, kept.clone()), (quotient, (0..t.rank()).collect()), (zero, Vec::new())], &t);
                let others = self.select(is_zero, at_zero, elsewhere, &t);
                Ok(self.binary(BinaryOp::Mul, spread, others, &t))
            }
        }
    }

    /// softmax, log_softmax, logsumexp along `axis` of `x` (the node `z`).
    pub(super) fn along_rule(&mut self, func: AlongAxis, axis: usize, z: NodeIndex, g: NodeIndex, x: NodeIndex) -> Result<NodeIndex, LowerError> {
        let t = adjoint_type(&self.tensor(x)?);
        let all: Vec<usize> = (0..t.rank()).collect();
        let rest = without(t.rank(), &[axis]);
        Ok(match func {
            AlongAxis::Softmax => {
                // z (g - sum(g z))
                let gz = self.binary(BinaryOp::Mul, g, z, &t);
                let s = self.reduce(Reduction::Sum, gz, &t, &[axis]);
                let centred = self.map(MapFn::Binary(BinaryOp::Sub), &[(g, all.clone()), (s, rest)], &t);
                self.binary(BinaryOp::Mul, z, centred, &t)
            }
            AlongAxis::LogSoftmax => {
                // g - exp(z) sum(g)
                let s = self.reduce(Reduction::Sum, g, &t, &[axis]);
                let p = self.unary(Elementwise::Exp, z, &t);
                let weighted = self.map(MapFn::Binary(BinaryOp::Mul), &[(p, all.clone()), (s, rest)], &t);
                self.binary(BinaryOp::Sub, g, weighted, &t)
            }
            AlongAxis::LogSumExp => {
                // g exp(x - z)
                let d = self.map(MapFn::Binary(BinaryOp::Sub), &[(x, all.clone()), (z, rest.clone())], &t);
                let p = self.unary(Elementwise::Exp, d, &t);
                self.map(MapFn::Binary(BinaryOp::Mul), &[(p, all), (g, rest)], &t)
            }
        })
    }

    /// `cumsum` and `cumprod` along `axis` of `x`.
    pub(super) fn scan_rule(&mut self, op: Reduction, axis: usize, g: NodeIndex, x: NodeIndex) -> Result<NodeIndex, LowerError> {
        let t = adjoint_type(&self.tensor(x)?);
        let rank = t.rank();
        let n = t.axes[axis].size;
        // later[j][i]: j >= i (element i counts in the running value at j).
        let square = TensorType { axes: vec![Axis { name: None, size: n }, Axis { name: None, size: n }], ..t.clone() };
        let counting = self.arange(n);
        let later = self.map(
            MapFn::Binary(BinaryOp::Ge),
            &[(counting, vec![0]), (counting, vec![1])],
            &TensorType { dtype: nax_contract::DType::I64, ..square.clone() },
        );
        match op {
            Reduction::Sum => {
                // dx[i] = sum over j >= i of g[j].
                let later = self.indicator(later, &square);
                let g_labels: Vec<usize> = (0..rank).map(|a| if a == axis { rank } else { a }).collect();
                Ok(self.g.add(Op::Contract { labels: vec![g_labels, vec![rank, axis]], output: (0..rank).collect() }, Type::Tensor(t.clone()), &[g, later]))
            }
            Reduction::Prod => {
                // dx[i] = sum over j >= i of g[j] times the product of x[k], k <= j, k != i:
                // the running product, along the axis, of x with element i set to 1.
                let mut wide = t.clone();
                wide.axes.push(Axis { name: None, size: n });
                let all: Vec<usize> = (0..rank).collect();
                let same = self.map(
                    MapFn::Binary(BinaryOp::Eq),
                    &[(counting, vec![axis]), (counting, vec![rank])],
                    &TensorType { dtype: nax_contract::DType::I64, ..wide.clone() },
                );
                let one = self.float(1.0);
                let left_out = self.map(MapFn::Builtin(Elementwise::Where), &[(same, (0..=rank).collect()), (one, Vec::new()), (x, all.clone())], &wide);
                let running = self.g.add(Op::Scan { op: Reduction::Prod, axis }, Type::Tensor(wide.clone()), &[left_out]);
                let weighted = self.map(MapFn::Binary(BinaryOp::Mul), &[(running, (0..=rank).collect()), (g, all)], &wide);
                let zero = self.float(0.0);
                let counted =
                    self.map(MapFn::Builtin(Elementwise::Where), &[(later, vec![axis, rank]), (weighted, (0..=rank).collect()), (zero, Vec::new())], &wide);
                let summed = self.reduce(Reduction::Sum, counted, &wide, &[axis]);
                // The new last axis is i: it goes where the scanned axis was.
                let perm: Vec<usize> = (0..rank)
                    .map(|a| {
                        if a < axis {
                            a
                        } else if a == axis {
                            rank - 1
                        } else {
                            a - 1
                        }
                    })
                    .collect();
                Ok(self.g.add(Op::Permute { perm }, Type::Tensor(t), &[summed]))
            }
            _ => Err(internal("a scan that is neither a sum nor a product")),
        }
    }
}
