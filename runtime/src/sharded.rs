//! One rank of a function split over processes (SHARDING.md): its plan's
//! stages (ordinary compiled functions) run in order, with the exchanges
//! between them run on the host's engine through [`Collectives`]: nax
//! moves no bytes between processes itself. A rank's weights are its
//! blocks of the module's ([`rank_weights`]).

use crate::call::{Arg, CallBoundary};
use crate::error::{CollectiveError, RuntimeError};
use crate::function::Function;
use crate::packed::Weights;
use crate::threads::ThreadPool;
use nax_contract::DType;
use nax_contract::Signature;
use nax_contract::shard::{Exchange, ReduceOp, ShardedPlan, Split, Step, ValueRef, WeightBlock};
use nax_host::{AxisBlock, HostTensor, TensorData, TensorFile};
use std::collections::HashMap;
use std::sync::Arc;

/// The ranks a collective runs among: those that share every mesh
/// coordinate but the one along `mesh_axis`, in order along it.
#[derive(Clone, Copy, Debug)]
pub struct Group<'a> {
    /// The mesh axis's name.
    pub mesh_axis: &'a str,
    /// The group's ranks, in order along the mesh axis.
    pub ranks: &'a [usize],
}

/// The collectives of the engine a host already runs (torch.distributed,
/// MPI, its own), on host buffers of a dtype. Every rank of a group calls
/// each collective in the same order; a failure (a rank died, a timeout)
/// is an error, never a hang past the engine's own timeout.
pub trait Collectives: Send + Sync {
    /// This process's rank in the mesh.
    fn rank(&self) -> usize;

    /// How many processes the engine's group has (the mesh's must match).
    fn size(&self) -> usize;

    /// Replaces `data` (elements of `dtype`) on every rank of `group` with
    /// the elementwise `op` of the group's.
    fn all_reduce(&self, group: Group<'_>, dtype: DType, op: ReduceOp, data: &mut [u8]) -> Result<(), CollectiveError>;

    /// Writes every group rank's `block` (equal lengths), in the group's
    /// order, into `out` (the blocks' lengths times the group's size).
    fn all_gather(&self, group: Group<'_>, dtype: DType, block: &[u8], out: &mut [u8]) -> Result<(), CollectiveError>;

    /// Writes into `out` this rank's part of the elementwise `op` of the
    /// group's `data`: `data` is the group's size of equal parts, one per
    /// rank in the group's order, and `out` holds one. An engine without
    /// one keeps the default: an all-reduce of `data`, of which the rank
    /// keeps its part.
    fn reduce_scatter(&self, group: Group<'_>, dtype: DType, op: ReduceOp, data: &[u8], out: &mut [u8]) -> Result<(), CollectiveError> {
        reduce_scatter_by_all_reduce(self, group, dtype, op, data, out)
    }
}

/// A reduce-scatter made of an engine's all-reduce: `data` all-reduced,
/// of which the rank keeps its part (what [`Collectives::reduce_scatter`]
/// does for an engine without one of its own).
pub fn reduce_scatter_by_all_reduce(
    engine: &(impl Collectives + ?Sized),
    group: Group<'_>,
    dtype: DType,
    op: ReduceOp,
    data: &[u8],
    out: &mut [u8],
) -> Result<(), CollectiveError> {
    let rank = engine.rank();
    let index = group.ranks.iter().position(|&r| r == rank).ok_or_else(|| CollectiveError { message: format!("rank {rank} is not in its group") })?;
    let mut all = data.to_vec();
    engine.all_reduce(group, dtype, op, &mut all)?;
    let part = all.get(index * out.len()..(index + 1) * out.len()).ok_or_else(|| CollectiveError { message: "a reduce-scatter's parts do not fit".into() })?;
    out.copy_from_slice(part);
    Ok(())
}

/// A rank's result: its block, where the block lies along each axis, and
/// the whole result's sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardedResult {
    /// The rank's block.
    pub tensor: HostTensor,
    /// The block's start along each axis (0 where not split; the first
    /// run's for an axis split in runs).
    pub offsets: Vec<usize>,
    /// The whole result's sizes.
    pub global_shape: Vec<usize>,
}

/// One rank's part of a sharded function.
pub struct ShardedFunction {
    signature: Arc<Signature>,
    plan: ShardedPlan,
    stages: Vec<Function>,
    collectives: Arc<dyn Collectives>,
    coordinates: Vec<usize>,
    /// The step that reads each value last (the steps' count: a result).
    last_use: Vec<usize>,
    /// Held through a call: two calls of one rank never interleave their
    /// collectives (each rank of the group must meet them in one order).
    calls: std::sync::Mutex<()>,
}

impl ShardedFunction {
    /// The rank's function from its signature (parameters with the rank's
    /// sizes), its plan, its compiled stages and the host's engine;
    /// refused when the engine's group is not the mesh's size or the plan
    /// names stages or values it does not have.
    pub fn new(
        signature: Arc<Signature>,
        plan: ShardedPlan,
        stages: Vec<Function>,
        collectives: Arc<dyn Collectives>,
    ) -> Result<ShardedFunction, RuntimeError> {
        let processes = plan.mesh.processes();
        if collectives.size() != processes {
            return Err(RuntimeError::Internal(format!("the mesh ({}) has {processes} processes, the engine's group {}", plan.mesh, collectives.size())));
        }
        let coordinates = mesh_coordinates(&plan, collectives.rank())?;
        let value_ok = |v: &ValueRef| match *v {
            ValueRef::Argument(i) => i < signature.params.len(),
            ValueRef::Value(i) => i < plan.values,
        };
        if plan.params.len() != signature.params.len() {
            return Err(RuntimeError::Internal(format!(
                "a sharded plan has the splits of {} parameters, the signature {}",
                plan.params.len(),
                signature.params.len()
            )));
        }
        let fits = plan.steps.iter().all(|s| match s {
            Step::Stage { stage, carried, values } => *stage < stages.len() && carried.iter().all(value_ok) && values.iter().all(|&v| v < plan.values),
            Step::Exchange { exchange, input, value, .. } => value_ok(input) && *value < plan.values && exchange.mesh_axis() < plan.mesh.axes().len(),
        }) && plan.results.iter().all(|(v, _)| value_ok(v));
        if !fits {
            return Err(RuntimeError::Internal("a sharded plan names a stage or a value it does not have".into()));
        }
        let mut last_use = vec![0; plan.values];
        let mut read = |v: &ValueRef, at: usize| {
            if let ValueRef::Value(i) = *v {
                last_use[i] = at;
            }
        };
        for (at, step) in plan.steps.iter().enumerate() {
            match step {
                Step::Stage { carried, .. } => carried.iter().for_each(|v| read(v, at)),
                Step::Exchange { input, .. } => read(input, at),
            }
        }
        plan.results.iter().for_each(|(v, _)| read(v, plan.steps.len()));
        Ok(ShardedFunction { signature, plan, stages, collectives, coordinates, last_use, calls: std::sync::Mutex::new(()) })
    }

    /// The rank's signature: its parameters with their blocks' sizes.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The rank it runs as.
    pub fn rank(&self) -> usize {
        self.collectives.rank()
    }

    /// The plan it runs.
    pub fn plan(&self) -> &ShardedPlan {
        &self.plan
    }

    /// Calls the rank's part with arguments by parameter name (each rank
    /// passes its blocks); every rank of the mesh must call it. Gives each
    /// result's block, with where it lies; with `gather`, every result
    /// whole (gathered from every rank's block). Calls from several
    /// threads of one rank run one at a time.
    pub fn call_results(&self, args: Vec<(&str, Arg<'_>)>, weights: &dyn Weights, pool: &ThreadPool, gather: bool) -> Result<Vec<ShardedResult>, RuntimeError> {
        // A call that failed mid-way left nothing the next one reads.
        let _one_at_a_time = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let args = self.signature.arguments(args)?;
        let blocks = self.blocks_of_whole_arguments(&args)?;
        let args: Vec<Arg<'_>> = args.into_iter().zip(&blocks).map(|(a, b)| b.as_ref().map_or(a, |t| Arg::Tensor(t.view()))).collect();
        // The whole call's sizes are checked before any stage runs.
        drop(self.signature.check(args.clone(), weights)?);
        let mut values: Vec<Option<HostTensor>> = vec![None; self.plan.values];
        let missing = |i: usize| RuntimeError::Internal(format!("value {i} is read before a step gives it"));
        // A value is moved out at its last reader, else copied.
        let take = |values: &mut [Option<HostTensor>], v: ValueRef, at: usize| -> Result<HostTensor, RuntimeError> {
            match v {
                ValueRef::Argument(i) => match args.get(i) {
                    Some(Arg::Tensor(t)) => Ok(t.to_host()?),
                    _ => Err(RuntimeError::Internal(format!("a sharded plan reads parameter {i} as a tensor"))),
                },
                ValueRef::Value(i) if self.last_use.get(i) == Some(&at) => values.get_mut(i).and_then(Option::take).ok_or_else(|| missing(i)),
                ValueRef::Value(i) => values.get(i).cloned().flatten().ok_or_else(|| missing(i)),
            }
        };
        for (at, step) in self.plan.steps.iter().enumerate() {
            match step {
                Step::Stage { stage, carried, values: given } => {
                    // The carried values are lent, not copied.
                    let mut stage_args = args.clone();
                    for &v in carried {
                        stage_args.push(match v {
                            ValueRef::Argument(i) => args.get(i).cloned().ok_or_else(|| RuntimeError::Internal(format!("no parameter {i}")))?,
                            ValueRef::Value(i) => Arg::Tensor(values.get(i).and_then(Option::as_ref).ok_or_else(|| missing(i))?.view()),
                        });
                    }
                    let results = self.stages[*stage].call_results_in_order(stage_args, weights, pool)?;
                    for (&v, t) in given.iter().zip(results) {
                        values[v] = Some(t);
                    }
                }
                Step::Exchange { exchange, input, value, dtype } => {
                    let input = take(&mut values, *input, at)?;
                    if input.dtype() != *dtype {
                        return Err(RuntimeError::Internal(format!("an exchange of {} is given {}", dtype.as_str(), input.dtype().as_str())));
                    }
                    values[*value] = Some(self.exchange(*exchange, input)?);
                }
            }
        }
        let end = self.plan.steps.len();
        let mut results = Vec::with_capacity(self.plan.results.len());
        for (k, (v, splits)) in self.plan.results.iter().enumerate() {
            // A value that is two results is copied for the first.
            let again = self.plan.results[k + 1..].iter().any(|(w, _)| w == v);
            let mut tensor = take(&mut values, *v, if again { usize::MAX } else { end })?;
            let mut offsets = vec![0; tensor.rank()];
            if gather {
                for (axis, split) in splits.iter().enumerate() {
                    if let Some(split) = split {
                        tensor = self.exchange(Exchange::AllGather { axis, split: *split }, tensor)?;
                    }
                }
                let global_shape = tensor.shape().to_vec();
                results.push(ShardedResult { tensor, offsets, global_shape });
                continue;
            }
            let mut global_shape = tensor.shape().to_vec();
            for (axis, split) in splits.iter().enumerate() {
                if let (Some(split), Some(size)) = (split, global_shape.get_mut(axis)) {
                    let run = *size / split.outer.max(1) as usize;
                    offsets[axis] = run * self.coordinates[split.mesh_axis];
                    *size *= split.parts as usize;
                }
            }
            results.push(ShardedResult { tensor, offsets, global_shape });
        }
        Ok(results)
    }

    /// The rank's block of each argument given whole: along a split axis
    /// whose block's size is known when compiling, an argument as long as
    /// the whole axis (the block's times the parts) is cut (`None`: the
    /// argument is the rank's own block, or a scalar).
    fn blocks_of_whole_arguments(&self, args: &[Arg<'_>]) -> Result<Vec<Option<HostTensor>>, RuntimeError> {
        let mut blocks = Vec::with_capacity(args.len());
        for ((arg, param), splits) in args.iter().zip(&self.signature.params).zip(&self.plan.params) {
            let (Arg::Tensor(view), nax_contract::ParamType::Tensor(spec)) = (arg, &param.ty) else {
                blocks.push(None);
                continue;
            };
            let bound = crate::binding::bind(&param.name, &spec.names(), view)?;
            let whole_along = |axis: usize, split: &Split| {
                let block = self.signature.sizes.constant(spec.axes[axis].size);
                block.is_some_and(|b| split.parts > 1 && bound.shape().get(axis) == Some(&((b * split.parts) as usize)))
            };
            let whole: Vec<(usize, Split)> = splits.iter().enumerate().filter_map(|(a, s)| s.filter(|s| whole_along(a, s)).map(|s| (a, s))).collect();
            if whole.is_empty() {
                blocks.push(None);
                continue;
            }
            let mut block = bound.to_host()?;
            for (axis, split) in whole {
                block = cut(&block, axis, split, self.coordinates[split.mesh_axis])?;
            }
            blocks.push(Some(block));
        }
        Ok(blocks)
    }

    /// Runs one exchange on a value of this rank (an all-reduce in its memory).
    fn exchange(&self, exchange: Exchange, mut input: HostTensor) -> Result<HostTensor, RuntimeError> {
        let rank = self.collectives.rank();
        let mesh_axis = exchange.mesh_axis();
        let ranks = self.plan.mesh.group(rank, mesh_axis);
        let group = Group { mesh_axis: &self.plan.mesh.axes()[mesh_axis].0, ranks: &ranks };
        let dtype = input.dtype();
        let names = input.names().to_vec();
        match exchange {
            Exchange::AllReduce { op, .. } => match input.bytes_mut() {
                Some(data) => {
                    self.collectives.all_reduce(group, dtype, op, data)?;
                    Ok(input)
                }
                // Booleans through a copy, whose bytes are checked back.
                None => {
                    let mut data = input.data().as_bytes().to_vec();
                    self.collectives.all_reduce(group, dtype, op, &mut data)?;
                    Ok(HostTensor::new(TensorData::from_le_bytes(dtype, &data), input.shape().to_vec(), names)?)
                }
            },
            Exchange::AllGather { axis, split } => {
                check_split(input.shape(), axis, split, ranks.len())?;
                let block = input.data().as_bytes();
                let mut all = vec![0u8; block.len() * ranks.len()];
                self.collectives.all_gather(group, dtype, block, &mut all)?;
                let mut shape = input.shape().to_vec();
                let data = interleave(&shape, axis, split, &all, dtype.size_bytes());
                shape[axis] *= ranks.len();
                Ok(HostTensor::new(TensorData::from_le_bytes(dtype, &data), shape, names)?)
            }
            Exchange::Block { axis, split } => cut(&input, axis, split, self.coordinates[mesh_axis]),
            Exchange::ReduceScatter { op, axis, split } => {
                check_split(input.shape(), axis, split, ranks.len())?;
                // Each rank's block laid out contiguously, in the group's order.
                let mut parts = Vec::with_capacity(input.len() * dtype.size_bytes());
                for c in 0..ranks.len() {
                    parts.extend_from_slice(cut(&input, axis, split, c)?.data().as_bytes());
                }
                let mut out = vec![0u8; parts.len() / ranks.len()];
                self.collectives.reduce_scatter(group, dtype, op, &parts, &mut out)?;
                let mut shape = input.shape().to_vec();
                shape[axis] /= ranks.len();
                Ok(HostTensor::new(TensorData::from_le_bytes(dtype, &out), shape, names)?)
            }
        }
    }
}

/// Refuses a split that does not fit a tensor (a damaged plan).
fn check_split(shape: &[usize], axis: usize, split: Split, parts: usize) -> Result<(), RuntimeError> {
    let fits = split.parts as usize == parts && split.outer > 0 && shape.get(axis).is_some_and(|&s| s % split.outer as usize == 0);
    if fits {
        Ok(())
    } else {
        Err(RuntimeError::Internal(format!("a split in {parts} parts of {} runs does not fit the shape {shape:?} along axis {axis}", split.outer)))
    }
}

/// Every rank's block, gathered rank after rank in `all`, laid out as the
/// whole axis: for each position before the axis and each run, the ranks'
/// pieces of that run in order.
fn interleave(block_shape: &[usize], axis: usize, split: Split, all: &[u8], elem: usize) -> Vec<u8> {
    let parts = split.parts as usize;
    let before: usize = block_shape[..axis].iter().product();
    let after: usize = block_shape[axis + 1..].iter().product();
    let runs = split.outer as usize;
    let piece = block_shape[axis] / runs * after * elem;
    let block_bytes = all.len() / parts.max(1);
    let mut out = Vec::with_capacity(all.len());
    for p in 0..before {
        for r in 0..runs {
            for c in 0..parts {
                let at = c * block_bytes + (p * runs + r) * piece;
                out.extend_from_slice(&all[at..at + piece]);
            }
        }
    }
    out
}

/// The block at `coordinate` of a tensor held whole along `axis`.
fn cut(t: &HostTensor, axis: usize, split: Split, coordinate: usize) -> Result<HostTensor, RuntimeError> {
    let shape = t.shape();
    let parts = split.parts as usize;
    let runs = split.outer as usize;
    let fits = runs > 0 && parts > 0 && shape.get(axis).is_some_and(|&s| s % (runs * parts) == 0) && coordinate < parts;
    if !fits {
        return Err(RuntimeError::Internal(format!("the block {coordinate} of {parts} in {runs} runs does not fit the shape {shape:?} along axis {axis}")));
    }
    let elem = t.dtype().size_bytes();
    let before: usize = shape[..axis].iter().product();
    let after: usize = shape[axis + 1..].iter().product();
    let piece = shape[axis] / runs / parts * after * elem;
    let bytes = t.data().as_bytes();
    let mut out = Vec::with_capacity(bytes.len() / parts);
    for p in 0..before {
        for r in 0..runs {
            let at = ((p * runs + r) * parts + coordinate) * piece;
            out.extend_from_slice(&bytes[at..at + piece]);
        }
    }
    let mut block_shape = shape.to_vec();
    block_shape[axis] /= parts;
    Ok(HostTensor::new(TensorData::from_le_bytes(t.dtype(), &out), block_shape, t.names().to_vec())?)
}

/// A rank's weights: its block of each module weight the plan binds,
/// under the name the rank's stages read it by. `whole` holds the module's
/// weights bound in their declared axis order.
pub fn rank_weights(plan: &ShardedPlan, whole: &HashMap<String, HostTensor>, rank: usize) -> Result<HashMap<String, HostTensor>, RuntimeError> {
    let coordinates = mesh_coordinates(plan, rank)?;
    let mut out = HashMap::new();
    for block in &plan.weights {
        if let Some(t) = whole.get(&block.source) {
            out.insert(block.name.clone(), cut_block(t, block, &coordinates)?);
        }
    }
    Ok(out)
}

/// A rank's weights read from a safetensors file: its block of each
/// module weight the plan binds, under the name its stages read it by,
/// each read alone ([`read_block`]).
pub fn read_rank_weights(plan: &ShardedPlan, file: &TensorFile, rank: usize) -> Result<HashMap<String, HostTensor>, RuntimeError> {
    let coordinates = mesh_coordinates(plan, rank)?;
    let mut out = HashMap::new();
    for block in &plan.weights {
        if let Some(t) = read_block(file, block, &coordinates)? {
            out.insert(block.name.clone(), t);
        }
    }
    Ok(out)
}

/// The mesh coordinates of `rank`.
pub fn mesh_coordinates(plan: &ShardedPlan, rank: usize) -> Result<Vec<usize>, RuntimeError> {
    plan.mesh.coordinates(rank).ok_or_else(|| RuntimeError::Internal(format!("rank {rank} is outside the mesh ({})", plan.mesh)))
}

/// The block of a module weight (`whole`, bound in its declared axis
/// order) at the rank's mesh `coordinates`.
fn cut_block(whole: &HostTensor, block: &WeightBlock, coordinates: &[usize]) -> Result<HostTensor, RuntimeError> {
    let mut t = whole.clone();
    for (axis, split) in block.splits.iter().enumerate() {
        if let Some(split) = split {
            t = cut(&t, axis, *split, coordinates[split.mesh_axis])?;
        }
    }
    Ok(t)
}

/// The block of a module weight at the rank's mesh `coordinates`, read
/// from a safetensors file alone (the rest of the tensor is never read)
/// and bound in its declared axis order (a tensor whose axes are named in
/// another order is bound by name, as a whole weight is); `None` where
/// the file has no tensor of the weight's name.
pub fn read_block(file: &TensorFile, block: &WeightBlock, coordinates: &[usize]) -> Result<Option<HostTensor>, RuntimeError> {
    let WeightBlock { source, splits, ty, .. } = block;
    let Some(info) = file.info(source)? else { return Ok(None) };
    let declared = ty.names();
    let order = crate::binding::binding_order(source, &declared, &info.names)?;
    let mut blocks = vec![AxisBlock::WHOLE; info.shape.len()];
    for (axis, split) in splits.iter().enumerate() {
        let Some(split) = split else { continue };
        let in_file = order.as_ref().map_or(axis, |o| o[axis]);
        let at = blocks.get_mut(in_file).ok_or_else(|| RuntimeError::Internal(format!("weight '{source}' has no axis {axis} to split")))?;
        *at = AxisBlock { runs: split.outer as usize, parts: split.parts as usize, index: coordinates[split.mesh_axis] };
    }
    let read = file.read(source, &blocks)?.ok_or_else(|| RuntimeError::Internal(format!("weight '{source}' left the file while it was read")))?;
    Ok(Some(crate::binding::bind_owned(source, &declared, read)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_and_a_gather_of_every_block_give_the_whole_back() {
        let values: Vec<f64> = (0..24).map(f64::from).collect();
        let whole = HostTensor::from_f64(DType::F32, vec![2, 12], vec![None, None], &values).unwrap();
        for outer in [1, 3] {
            let split = Split { mesh_axis: 0, parts: 2, outer };
            let blocks: Vec<HostTensor> = (0..2).map(|c| cut(&whole, 1, split, c).unwrap()).collect();
            assert_eq!(blocks[0].shape(), &[2, 6]);
            let all: Vec<u8> = blocks.iter().flat_map(|b| b.data().as_bytes().to_vec()).collect();
            let back = interleave(blocks[0].shape(), 1, split, &all, 4);
            assert_eq!(back, whole.data().as_bytes());
        }
        // Runs of 3: block 1 holds the second half of each third.
        let b = cut(&whole, 1, Split { mesh_axis: 0, parts: 2, outer: 3 }, 1).unwrap();
        assert_eq!(b.to_f64_vec()[..6], [2.0, 3.0, 6.0, 7.0, 10.0, 11.0]);
        assert!(cut(&whole, 1, Split { mesh_axis: 0, parts: 5, outer: 1 }, 0).is_err());
    }
}
