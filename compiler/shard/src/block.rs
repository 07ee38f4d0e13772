//! A rank's block of a value it would otherwise compute whole: the block
//! of an elementwise operation is the operation on its operands' blocks,
//! a contraction's block along an output axis the contraction of the
//! operands' blocks along that label, and so on back to the weights, which
//! the rank then reads only as its block. Where no rule applies (an
//! argument given whole, an `arange`, a value after an exchange) the block
//! is cut from the whole value ([`Exchange::Block`]), no data moving. The
//! block of a sum over the block's own mesh axis is a reduce-scatter.

use crate::ShardError;
use crate::partition::{Partitioner, sizes};
use crate::regroup;
use nax_contract::shard::{Exchange, Split};
use nax_ir::Op;
use nax_ops::Constructor;
use petgraph::graph::NodeIndex;

impl Partitioner<'_> {
    /// Node `n` of the rank's graph with axis `axis` (whole in `n`) cut to
    /// the rank's block as `split` says.
    pub(crate) fn block(&mut self, n: NodeIndex, axis: usize, split: Split) -> Result<NodeIndex, ShardError> {
        if let Some(&done) = self.blocked.get(&(n, axis, split)) {
            return Ok(done);
        }
        let node = self.out.graph[n].clone();
        let operands = self.out.operands(n);
        let mut splits = self.splits_of(n);
        splits[axis] = Some(split);
        let ty = self.cut(&node.ty, axis, split)?;
        // The operands' blocks (operand index, its axis), or `None` to cut
        // the whole value.
        let pushed: Option<Vec<(usize, usize, Split)>> = match &node.op {
            Op::Map { maps, .. } => Some(maps.iter().enumerate().filter_map(|(k, m)| m.iter().position(|&r| r == axis).map(|j| (k, j, split))).collect()),
            Op::Rename => Some(vec![(0, axis, split)]),
            Op::Permute { perm } => Some(vec![(0, perm[axis], split)]),
            Op::Expand { map } => Some(map.iter().position(|&r| r == axis).map(|j| (0, j, split)).into_iter().collect()),
            Op::Select { axis: s, .. } => Some(vec![(0, if axis < *s { axis } else { axis + 1 }, split)]),
            Op::Contract { labels, output } => {
                let label = output[axis];
                Some(labels.iter().enumerate().filter_map(|(k, ls)| ls.iter().position(|&l| l == label).map(|j| (k, j, split))).collect())
            }
            Op::Reshape => {
                let (from, to) = (sizes(&node.ty), sizes(&self.out.graph[operands[0]].ty));
                regroup::carry(&self.out.symbols, &from, &to, axis, split).map(|(j, s)| vec![(0, j, s)])
            }
            Op::Construct { func: Constructor::Zeros | Constructor::Ones | Constructor::Full } => Some(Vec::new()),
            Op::Weight { .. } => Some(Vec::new()),
            // Summed over the block's own mesh axis: each rank receives only its block.
            Op::Exchange(Exchange::AllReduce { op, mesh_axis }) if *mesh_axis == split.mesh_axis => {
                let made = self.add(Op::Exchange(Exchange::ReduceScatter { op: *op, axis, split }), ty, &[operands[0]], splits);
                self.blocked.insert((n, axis, split), made);
                return Ok(made);
            }
            Op::Exchange(Exchange::AllReduce { .. }) => Some(vec![(0, axis, split)]),
            _ => None,
        };
        // An operand already split along that mesh axis cannot take a second block of it.
        let pushed = pushed.filter(|list| list.iter().all(|&(k, _, s)| !self.splits_of(operands[k]).iter().flatten().any(|o| o.mesh_axis == s.mesh_axis)));
        let made = match pushed {
            Some(list) => {
                let mut new_operands = operands.clone();
                for (k, j, s) in list {
                    new_operands[k] = self.block(operands[k], j, s)?;
                }
                let made = self.add(node.op.clone(), ty, &new_operands, splits);
                if let Some(source) = self.weights.iter().find(|(w, _)| *w == n).map(|(_, s)| s.clone()) {
                    let name = format!("{source}#{}", self.weights.len());
                    self.out.graph[made].op = Op::Weight { name };
                    self.weights.push((made, source));
                }
                made
            }
            None => return self.cut_in_place(n, axis, split),
        };
        self.blocked.insert((n, axis, split), made);
        Ok(made)
    }

    /// Node `n` with axis `axis` cut to the rank's block where it is
    /// computed whole ([`Exchange::Block`]), nothing pushed back: the
    /// other operand of a product whose weight the compiler split.
    pub(crate) fn cut_in_place(&mut self, n: NodeIndex, axis: usize, split: Split) -> Result<NodeIndex, ShardError> {
        let ty = self.cut(&self.out.graph[n].ty.clone(), axis, split)?;
        let mut splits = self.splits_of(n);
        splits[axis] = Some(split);
        let made = self.add(Op::Exchange(Exchange::Block { axis, split }), ty, &[n], splits);
        self.blocked.insert((n, axis, split), made);
        Ok(made)
    }
}
