//! `take` from a table split along the axis it indexes, as Megatron's
//! vocabulary-parallel embedding does: each rank looks up the indices that
//! fall in its block (the others give zeros) and the ranks' results are
//! all-reduced, so what moves is the result, not the table. The block's
//! first position is the rank's block of `arange` (cut at run time), so
//! one graph serves every rank.

use crate::ShardError;
use crate::partition::{Partitioner, Splits, spliced};
use nax_contract::shard::{Exchange, ReduceOp, Split};
use nax_contract::{DType, HostType, Size};
use nax_ir::{Literal, MapFn, Op, Type};
use nax_ops::{BinaryOp, Constructor, Elementwise};
use nax_values::{Axis, Kind, TensorType};
use petgraph::graph::NodeIndex;

impl Partitioner<'_> {
    /// `take(table, indices)` along `axis`, where the rank holds the
    /// table's block `split` along it and the indices whole along that
    /// mesh axis: the node,
    /// all-reduced, whose axes are split as `kept` says. `result` is the
    /// node's type as the function's graph has it.
    pub(crate) fn lookup_in_blocks(
        &mut self,
        table: NodeIndex,
        indices: NodeIndex,
        axis: usize,
        split: Split,
        result: &Type,
        kept: Splits,
    ) -> Result<NodeIndex, ShardError> {
        let Type::Tensor(t) = self.out.graph[table].ty.clone() else { unreachable!("a take's table is a tensor") };
        let block = t.axes[axis].size;
        let whole = self.whole_size(block, split.parts);
        let Type::Tensor(ids) = self.out.graph[indices].ty.clone() else { unreachable!("a take's indices are a tensor") };
        let rank = ids.axes.len();
        let all: Vec<usize> = (0..rank).collect();
        let int = |axes: Vec<Axis>, dtype: DType| Type::Tensor(TensorType { dtype, kind: Kind::Plain, axes, range: None });
        let mask = |axes: Vec<Axis>| Type::Tensor(TensorType { dtype: DType::Bool, kind: Kind::Plain, axes, range: None });
        // The block's first position: element 0 of the rank's block of `arange`.
        let positions = self.add(Op::Construct { func: Constructor::Arange }, int(vec![Axis::unnamed(whole)], DType::I64), &[], vec![None]);
        let positions = self.block(positions, 0, split)?;
        let one =
            self.add(Op::Slice { axis: 0, start: Size::Const(0), step: 1 }, int(vec![Axis::unnamed(Size::Const(1))], DType::I64), &[positions], vec![None]);
        let first = self.add(Op::Select { axis: 0, index: 0, count: 1 }, int(Vec::new(), DType::I64), &[one], Vec::new());
        let map = |p: &mut Self, func: MapFn, compute: DType, ty: Type, operands: &[(NodeIndex, Vec<usize>)], splits: Splits| {
            let maps = operands.iter().map(|(_, m)| m.clone()).collect();
            let nodes: Vec<NodeIndex> = operands.iter().map(|(n, _)| *n).collect();
            p.add(Op::Map { func, maps, compute }, ty, &nodes, splits)
        };
        let ids_splits = self.splits_of(indices);
        let shifted = map(
            self,
            MapFn::Binary(BinaryOp::Sub),
            DType::I64,
            int(ids.axes.clone(), DType::I64),
            &[(indices, all.clone()), (first, Vec::new())],
            ids_splits.clone(),
        );
        let zero = self.literal(Literal::Int(0));
        let size = match self.out.symbols.constant(block) {
            Some(c) => self.literal(Literal::Int(c as i64)),
            None => self.add(Op::SizeValue(block), Type::Host(HostType::Int, None), &[], Vec::new()),
        };
        let compare = |p: &mut Self, op: BinaryOp, bound: NodeIndex| {
            map(p, MapFn::Binary(op), DType::I64, mask(ids.axes.clone()), &[(shifted, all.clone()), (bound, Vec::new())], ids_splits.clone())
        };
        let above = compare(self, BinaryOp::Ge, zero);
        let below = compare(self, BinaryOp::Lt, size);
        let inside =
            map(self, MapFn::Binary(BinaryOp::And), DType::Bool, mask(ids.axes.clone()), &[(above, all.clone()), (below, all.clone())], ids_splits.clone());
        let safe = map(
            self,
            MapFn::Builtin(Elementwise::Where),
            DType::I64,
            int(ids.axes.clone(), DType::I64),
            &[(inside, all.clone()), (shifted, all.clone()), (zero, Vec::new())],
            ids_splits,
        );
        // The rank's positions' rows, zeros for the others', summed over the ranks.
        let Type::Tensor(r) = result else { unreachable!("a take gives a tensor") };
        let axes = spliced(&t.axes, axis, 1, &ids.axes);
        let dtype = t.dtype;
        let taken_ty = Type::Tensor(TensorType { dtype, kind: r.kind.clone(), axes, range: r.range });
        let taken = self.add(Op::Take { axis }, taken_ty.clone(), &[table, safe], kept.clone());
        let nothing = self.literal(if dtype.is_float() { Literal::Float(0.0) } else { Literal::Int(0) });
        let out: Vec<usize> = (0..kept.len()).collect();
        let index_axes: Vec<usize> = (axis..axis + rank).collect();
        let masked =
            map(self, MapFn::Builtin(Elementwise::Where), dtype, taken_ty.clone(), &[(inside, index_axes), (taken, out), (nothing, Vec::new())], kept.clone());
        let summed = self.add(Op::Exchange(Exchange::AllReduce { op: ReduceOp::Sum, mesh_axis: split.mesh_axis }), taken_ty, &[masked], kept);
        Ok(summed)
    }
}
