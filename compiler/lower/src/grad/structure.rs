//! The derivatives of the nodes that pick elements (LANGUAGE.md section
//! 15: the gradient goes to the elements read, summed where one is read
//! more than once, zero elsewhere): a selection and a slice of step 1 put
//! the adjoint between zeros (a concatenation), a concatenation slices it,
//! and a strided slice or a gather (`take`) sends it back with a
//! scatter-add into zeros (`Op::ScatterAdd`, which sums repeated
//! positions): work linear in the positions, not in positions times the
//! axis.

use super::{Reverse, adjoint_type};
use crate::{LowerError, internal};
use nax_contract::{HostType, Size};
use nax_ir::{Literal, MapFn, Op, Type};
use nax_ops::{BinaryOp, Constructor};
use nax_values::{Axis, TensorType};
use petgraph::graph::NodeIndex;

impl Reverse<'_> {
    /// The adjoints of selections of `axis` (of `count` positions) of a
    /// value of type `t`, each at its position (`at`: position and node,
    /// a node of `t`'s axes but `axis`), summed where one position is
    /// selected more than once, zeros at the others: one concatenation.
    pub(super) fn positions(&mut self, t: &TensorType, axis: usize, count: usize, at: &[(usize, NodeIndex)]) -> Result<NodeIndex, LowerError> {
        if let Some(batched) = self.batched(t, axis, count, at)? {
            return Ok(batched);
        }
        let mut slab = t.clone();
        slab.axes[axis].size = Size::Const(1);
        let reduced = TensorType { axes: t.axes.iter().enumerate().filter(|&(a, _)| a != axis).map(|(_, x)| x.clone()).collect(), ..t.clone() };
        let mut pieces = Vec::new();
        let mut zeros_from = None;
        for index in 0..count {
            let here: Vec<NodeIndex> = at.iter().filter(|(i, _)| *i == index).map(|&(_, n)| n).collect();
            let Some((&first, rest)) = here.split_first() else {
                zeros_from.get_or_insert(index);
                continue;
            };
            if let Some(start) = zeros_from.take() {
                pieces.push(self.zeros_along(t, axis, Size::Const((index - start) as u64)));
            }
            let mut sum = first;
            for &n in rest {
                sum = self.binary(BinaryOp::Add, sum, n, &reduced);
            }
            pieces.push(self.g.add(Op::Reshape, Type::Tensor(slab.clone()), &[sum]));
        }
        if let Some(start) = zeros_from {
            pieces.push(self.zeros_along(t, axis, Size::Const((count - start) as u64)));
        }
        let op = if pieces.len() == 1 { Op::Reshape } else { Op::Concat { axis } };
        Ok(self.g.add(op, Type::Tensor(t.clone()), &pieces))
    }

    /// [`Reverse::positions`] where every position has one adjoint and all
    /// are contractions of the same form (a stacked weight's gradient:
    /// `x_l^T g_l` for each layer `l`): one contraction batched over the
    /// positions, of each operand's values stacked (activations, smaller
    /// than the weights), instead of a concatenation of the products.
    fn batched(&mut self, t: &TensorType, axis: usize, count: usize, at: &[(usize, NodeIndex)]) -> Result<Option<NodeIndex>, LowerError> {
        if count < 2 || at.len() != count || (0..count).any(|i| at.iter().filter(|(j, _)| *j == i).count() != 1) {
            return Ok(None);
        }
        let mut by_position: Vec<NodeIndex> = vec![at[0].1; count];
        for &(i, n) in at {
            by_position[i] = n;
        }
        let Op::Contract { labels, output } = self.g.graph[by_position[0]].op.clone() else { return Ok(None) };
        let operands: Vec<Vec<NodeIndex>> = by_position.iter().map(|&n| self.g.operands(n)).collect();
        let types = |r: &Self, ops: &[NodeIndex]| ops.iter().map(|&o| r.g.graph[o].ty.clone()).collect::<Vec<_>>();
        let first_types = types(self, &operands[0]);
        let same = by_position.iter().zip(&operands).all(|(&n, ops)| {
            matches!(&self.g.graph[n].op, Op::Contract { labels: l, output: o } if *l == labels && *o == output) && types(self, ops) == first_types
        });
        if !same {
            return Ok(None);
        }
        let batch = labels.iter().flatten().chain(&output).max().map_or(0, |m| m + 1);
        let mut stacked = Vec::with_capacity(labels.len());
        for (k, ty) in first_types.iter().enumerate() {
            let Type::Tensor(operand) = ty else { return Ok(None) };
            let mut one = operand.clone();
            one.axes.insert(0, Axis { name: None, size: Size::Const(1) });
            let mut all = operand.clone();
            all.axes.insert(0, Axis { name: None, size: Size::Const(count as u64) });
            let slabs: Vec<NodeIndex> = operands.iter().map(|ops| self.g.add(Op::Reshape, Type::Tensor(one.clone()), &[ops[k]])).collect();
            stacked.push(self.g.add(Op::Concat { axis: 0 }, Type::Tensor(all), &slabs));
        }
        let labels = labels.iter().map(|l| std::iter::once(batch).chain(l.iter().copied()).collect()).collect();
        let mut output = output;
        output.insert(axis, batch);
        Ok(Some(self.g.add(Op::Contract { labels, output }, Type::Tensor(t.clone()), &stacked)))
    }

    /// Zeros of `t` with `len` positions along `axis`.
    fn zeros_along(&mut self, t: &TensorType, axis: usize, len: Size) -> NodeIndex {
        let mut z = t.clone();
        z.axes[axis].size = len;
        self.g.add(Op::Construct { func: Constructor::Zeros }, Type::Tensor(z), &[])
    }

    /// `x[axis = start : start + step * len : step]`.
    pub(super) fn slice_rule(&mut self, axis: usize, start: Size, step: u64, n: NodeIndex, g: NodeIndex, x: NodeIndex) -> Result<NodeIndex, LowerError> {
        let t = adjoint_type(&self.tensor(x)?);
        let len = self.tensor(n)?.axes[axis].size;
        if step == 1 {
            let end = self.symbols.add_sub(start, len, false, Default::default());
            let after = end.and_then(|end| self.symbols.add_sub(t.axes[axis].size, end, true, Default::default()));
            let after = after.ok_or_else(|| internal("a slice that ends past its axis"))?;
            return Ok(self.between_zeros(g, &t, axis, start, after));
        }
        // Element j of the slice is element start + step j of the axis.
        let positions = {
            let counting = self.arange(len);
            let int = TensorType { range: None, ..self.tensor(counting)? };
            let step = self.g.add(Op::Literal(Literal::Int(step as i64)), Type::Host(HostType::Int, None), &[]);
            let start = self.g.add(Op::SizeValue(start), Type::Host(HostType::Int, None), &[]);
            let strided = self.map(MapFn::Binary(BinaryOp::Mul), &[(counting, vec![0]), (step, Vec::new())], &int);
            self.map(MapFn::Binary(BinaryOp::Add), &[(strided, vec![0]), (start, Vec::new())], &int)
        };
        Ok(self.scatter(g, &t, axis, positions))
    }

    /// `concat` along `axis`: each operand's part of the adjoint.
    pub(super) fn concat_rule(&mut self, axis: usize, g: NodeIndex, operands: &[NodeIndex], needs: &[bool]) -> Result<Vec<Option<NodeIndex>>, LowerError> {
        let mut start = Size::Const(0);
        let mut parts = Vec::with_capacity(operands.len());
        for (&o, &need) in operands.iter().zip(needs) {
            let t = adjoint_type(&self.tensor(o)?);
            let len = t.axes[axis].size;
            parts.push(need.then(|| self.g.add(Op::Slice { axis, start, step: 1 }, Type::Tensor(t.clone()), &[g])));
            start = self.symbols.add_sub(start, len, false, Default::default()).ok_or_else(|| internal("a concatenation too long"))?;
        }
        Ok(parts)
    }

    /// `take(x, ids, axis)`: the adjoint's elements summed into the rows they came from.
    pub(super) fn take_rule(&mut self, axis: usize, g: NodeIndex, x: NodeIndex, ids: NodeIndex) -> Result<NodeIndex, LowerError> {
        let t = adjoint_type(&self.tensor(x)?);
        Ok(self.scatter(g, &t, axis, ids))
    }

    /// `scatter_add(values, ids, axis)` (itself an adjoint): the values'
    /// adjoint is `g` read back at the positions, a `take`.
    pub(super) fn scatter_rule(&mut self, axis: usize, g: NodeIndex, values: NodeIndex, ids: NodeIndex) -> Result<NodeIndex, LowerError> {
        let t = adjoint_type(&self.tensor(values)?);
        Ok(self.g.add(Op::Take { axis }, Type::Tensor(t), &[g, ids]))
    }

    /// `g` (the axes of `t` with `axis` replaced by the positions' axes)
    /// sent back to `t`'s axes: element p to position `positions[p]` of
    /// `axis`, summed where positions repeat (a scatter-add into zeros).
    fn scatter(&mut self, g: NodeIndex, t: &TensorType, axis: usize, positions: NodeIndex) -> NodeIndex {
        self.g.add(Op::ScatterAdd { axis }, Type::Tensor(t.clone()), &[g, positions])
    }

    /// `g` (of `t`'s axes, `axis` shorter) with `before` zeros before it
    /// and `after` after it along `axis`.
    fn between_zeros(&mut self, g: NodeIndex, t: &TensorType, axis: usize, before: Size, after: Size) -> NodeIndex {
        let mut pieces = Vec::with_capacity(3);
        if self.symbols.constant(before) != Some(0) {
            pieces.push(self.zeros_along(t, axis, before));
        }
        pieces.push(g);
        if self.symbols.constant(after) != Some(0) {
            pieces.push(self.zeros_along(t, axis, after));
        }
        let op = if pieces.len() == 1 { Op::Rename } else { Op::Concat { axis } };
        self.g.add(op, Type::Tensor(t.clone()), &pieces)
    }
}
