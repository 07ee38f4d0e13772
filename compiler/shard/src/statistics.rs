//! `softmax`, `log_softmax` and `logsumexp` along a split axis from the
//! ranks' partial statistics, as Megatron's vocabulary-parallel cross
//! entropy computes them: each rank takes the `logsumexp` of its block,
//! the ranks' values (one per row, not the axis) are all-gathered along a
//! new axis, and their `logsumexp` is the whole axis's. The rank then
//! keeps its block of the result: `x - lse` (`log_softmax`), `exp(x -
//! lse)` (`softmax`), or `lse` itself. What moves is one number per row
//! and rank, not the axis; infinities and NaNs come out as from the
//! unsplit operation (a `logsumexp` of `logsumexp`s is the whole's).

use crate::partition::{Partitioner, Splits};
use nax_contract::shard::{Exchange, Split};
use nax_contract::{DType, Size};
use nax_ir::{MapFn, Op, Type};
use nax_ops::{AlongAxis, BinaryOp, Elementwise};
use nax_values::Axis;
use petgraph::graph::NodeIndex;

impl Partitioner<'_> {
    /// Whether `func` along `axis` of `x` (split there) is computed from
    /// partial statistics: for `f32` and `f64` values (16-bit floats are
    /// gathered, so their statistics keep the fused kernel's precision).
    pub(crate) fn along_from_statistics(&self, x: NodeIndex, axis: usize) -> bool {
        let held = self.splits_of(x).get(axis).copied().flatten().is_some();
        held && matches!(nax_ir::value_dtype(&self.out.graph[x].ty), DType::F32 | DType::F64)
    }

    /// `func` along `axis` of `x`, the rank's block along it: the node
    /// giving the rank's block of the result, of type `result` (the
    /// unsplit node's, cut to the blocks).
    pub(crate) fn along_in_blocks(&mut self, func: AlongAxis, axis: usize, x: NodeIndex, result: Type) -> NodeIndex {
        let Type::Tensor(t) = self.out.graph[x].ty.clone() else { unreachable!("an operation along an axis takes a tensor") };
        let splits = self.splits_of(x);
        let split: Split = splits[axis].expect("checked by along_from_statistics");
        let rank = t.rank();
        let compute = t.dtype;
        // The rank's logsumexp per row: the axis dropped.
        let mut rows = t.clone();
        rows.axes.remove(axis);
        rows.range = None;
        let mut row_splits: Splits = splits.clone();
        row_splits.remove(axis);
        let local = self.add(Op::Along { func: AlongAxis::LogSumExp, axis }, Type::Tensor(rows.clone()), &[x], row_splits.clone());
        // One new axis of size 1, gathered into one entry per rank.
        let mut one = rows.clone();
        one.axes.push(Axis { name: None, size: Size::Const(1) });
        let mut per_rank = row_splits.clone();
        per_rank.push(None);
        let stacked = self.add(Op::Reshape, Type::Tensor(one.clone()), &[local], per_rank.clone());
        let mut all = one;
        if let Some(last) = all.axes.last_mut() {
            last.size = Size::Const(split.parts);
        }
        let last = rows.rank();
        let gathered = self.add(Op::Exchange(Exchange::AllGather { axis: last, split: Split { outer: 1, ..split } }), Type::Tensor(all), &[stacked], per_rank);
        let lse = self.add(Op::Along { func: AlongAxis::LogSumExp, axis: last }, Type::Tensor(rows), &[gathered], row_splits);
        if func == AlongAxis::LogSumExp {
            return lse;
        }
        // `x - lse`, the rows broadcast along the axis.
        let maps = vec![(0..rank).collect(), (0..rank).filter(|&a| a != axis).collect()];
        let shifted = self.add(Op::Map { func: MapFn::Binary(BinaryOp::Sub), maps, compute }, result.clone(), &[x, lse], splits.clone());
        if func == AlongAxis::LogSoftmax {
            return shifted;
        }
        let maps = vec![(0..rank).collect()];
        self.add(Op::Map { func: MapFn::Builtin(Elementwise::Exp), maps, compute }, result, &[shifted], splits)
    }
}
