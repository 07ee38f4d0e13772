//! The derivatives of the nodes that pick elements (LANGUAGE.md section
//! 15: the gradient goes to the elements read, summed where one is read
//! more than once, zero elsewhere): a selection and a slice of step 1 put
//! the adjoint between zeros (a concatenation), a concatenation slices it,
//! and a strided slice or a gather (`take`) sends it back through a
//! one-hot contraction over the axis read (`arange(n) == position`), which
//! sums repeated positions as a scatter-add would.

use super::{Reverse, adjoint_type};
use crate::{LowerError, internal};
use nax_ir::{Literal, MapFn, Op, Type};
use nax_ops::{BinaryOp, Constructor};
use nax_runtime::{DType, HostType, Size};
use nax_values::{Axis, TensorType};
use petgraph::graph::NodeIndex;

impl Reverse<'_> {
    /// `x[axis = index]` (the axis goes): the adjoint at that position, zeros elsewhere.
    pub(super) fn select_rule(&mut self, axis: usize, index: usize, count: usize, g: NodeIndex, x: NodeIndex) -> Result<NodeIndex, LowerError> {
        let t = adjoint_type(&self.tensor(x)?);
        let mut one = t.clone();
        one.axes[axis].size = Size::Const(1);
        let g = self.g.add(Op::Reshape, Type::Tensor(one), &[g]);
        Ok(self.between_zeros(g, &t, axis, Size::Const(index as u64), Size::Const((count - index - 1) as u64)))
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
        self.scatter(g, &t, axis, positions, &[Axis { name: None, size: len }])
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
        let id_axes = match &self.g.graph[ids].ty {
            Type::Tensor(i) => i.axes.clone(),
            Type::Host(..) => Vec::new(),
        };
        self.scatter(g, &t, axis, ids, &id_axes)
    }

    /// `g` (the axes of `t` with `axis` replaced by `read`) sent back to
    /// `t`'s axes: element p of `read` to position `positions[p]` of
    /// `axis`, summed where positions repeat. A contraction with the
    /// one-hot `arange(n) == positions`.
    fn scatter(&mut self, g: NodeIndex, t: &TensorType, axis: usize, positions: NodeIndex, read: &[Axis]) -> Result<NodeIndex, LowerError> {
        let k = read.len();
        let mut onehot_axes = read.to_vec();
        onehot_axes.push(t.axes[axis].clone());
        let onehot_type = TensorType { axes: onehot_axes, ..t.clone() };
        let counting = self.arange(t.axes[axis].size);
        let position_map = if matches!(self.g.graph[positions].ty, Type::Tensor(_)) { (0..k).collect() } else { Vec::new() };
        let hits =
            self.map(MapFn::Binary(BinaryOp::Eq), &[(counting, vec![k]), (positions, position_map)], &TensorType { dtype: DType::I64, ..onehot_type.clone() });
        let hits = self.indicator(hits, &onehot_type);
        // Labels: t's axes 0..rank, the read axes after them.
        let rank = t.rank();
        let read_labels: Vec<usize> = (rank..rank + k).collect();
        let g_labels: Vec<usize> = (0..axis).chain(read_labels.iter().copied()).chain(axis + 1..rank).collect();
        let onehot_labels: Vec<usize> = read_labels.into_iter().chain([axis]).collect();
        Ok(self.g.add(Op::Contract { labels: vec![g_labels, onehot_labels], output: (0..rank).collect() }, Type::Tensor(t.clone()), &[g, hits]))
    }

    /// `g` (of `t`'s axes, `axis` shorter) with `before` zeros before it
    /// and `after` after it along `axis`.
    fn between_zeros(&mut self, g: NodeIndex, t: &TensorType, axis: usize, before: Size, after: Size) -> NodeIndex {
        let mut pieces = Vec::with_capacity(3);
        let zeros = |r: &mut Self, size: Size| {
            if r.symbols.constant(size) != Some(0) {
                let mut z = t.clone();
                z.axes[axis].size = size;
                Some(r.g.add(Op::Construct { func: Constructor::Zeros }, Type::Tensor(z), &[]))
            } else {
                None
            }
        };
        pieces.extend(zeros(self, before));
        pieces.push(g);
        pieces.extend(zeros(self, after));
        let op = if pieces.len() == 1 { Op::Rename } else { Op::Concat { axis } };
        self.g.add(op, Type::Tensor(t.clone()), &pieces)
    }
}
