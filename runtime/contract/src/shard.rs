//! One program over several processes (SHARDING.md), as the compiler and
//! the runtime agree on it: the [`Mesh`] of processes, the [`Sharding`] of
//! axis names over its axes, where a value's block lies ([`Split`]), the
//! steps that move data between processes ([`Exchange`]: all-reduce,
//! all-gather, and reading a rank's block of a whole value), and the plan
//! a rank runs ([`ShardedPlan`]: ordinary compiled stages, with exchanges
//! between them).

use crate::dtype::DType;
use crate::signature::TensorSpec;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a mesh or a sharding was refused as written (`tp=2`, `H=tp,F=tp`,
/// or the maps a host gives), before any program is read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MeshError {
    /// An entry that is not `NAME=VALUE`.
    #[error("`{entry}` is not NAME=VALUE (as in {example})")]
    Entry { entry: String, example: &'static str },
    /// A mesh axis size that is not a positive integer.
    #[error("the mesh axis '{axis}' has the size `{size}`: sizes are positive integers")]
    Size { axis: String, size: String },
    /// A name given twice.
    #[error("'{name}' is given twice")]
    Repeated { name: String },
    /// No mesh axis at all.
    #[error("the mesh has no axis")]
    Empty,
    /// A sharding that names a mesh axis the mesh does not have.
    #[error("the axis name '{name}' is split over the mesh axis '{mesh_axis}', which the mesh ({mesh}) does not have")]
    UnknownMeshAxis { name: String, mesh_axis: String, mesh: String },
    /// More processes than an index can count.
    #[error("the mesh has more processes than can be counted")]
    TooLarge,
}

/// The processes a program runs over: named axes with their sizes, in
/// order. Rank `r` sits at the coordinates of `r` in row-major order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Mesh {
    axes: Vec<(String, usize)>,
}

impl Mesh {
    /// A mesh of these axes, in order (names distinct, sizes positive).
    pub fn new(axes: Vec<(String, usize)>) -> Result<Mesh, MeshError> {
        if axes.is_empty() {
            return Err(MeshError::Empty);
        }
        for (i, (name, size)) in axes.iter().enumerate() {
            if *size == 0 {
                return Err(MeshError::Size { axis: name.clone(), size: "0".into() });
            }
            if axes[..i].iter().any(|(n, _)| n == name) {
                return Err(MeshError::Repeated { name: name.clone() });
            }
        }
        axes.iter().try_fold(1usize, |p, (_, s)| p.checked_mul(*s)).ok_or(MeshError::TooLarge)?;
        Ok(Mesh { axes })
    }

    /// Parses `tp=2` or `dp=2,tp=4`.
    pub fn parse(text: &str) -> Result<Mesh, MeshError> {
        let mut axes = Vec::new();
        for (name, value) in entries(text, "dp=2,tp=4")? {
            let size = value.parse::<usize>().ok().filter(|&s| s > 0).ok_or_else(|| MeshError::Size { axis: name.clone(), size: value.clone() })?;
            axes.push((name, size));
        }
        Mesh::new(axes)
    }

    /// The axes, in order.
    pub fn axes(&self) -> &[(String, usize)] {
        &self.axes
    }

    /// The index of the axis `name`.
    pub fn axis(&self, name: &str) -> Option<usize> {
        self.axes.iter().position(|(n, _)| n == name)
    }

    /// The size of axis `axis`.
    pub fn size(&self, axis: usize) -> usize {
        self.axes.get(axis).map_or(1, |(_, s)| *s)
    }

    /// How many processes: the product of the sizes.
    pub fn processes(&self) -> usize {
        self.axes.iter().map(|(_, s)| *s).product()
    }

    /// The coordinates of rank `rank` (row-major), or `None` past the last.
    pub fn coordinates(&self, rank: usize) -> Option<Vec<usize>> {
        if rank >= self.processes() {
            return None;
        }
        let mut rest = rank;
        let mut coords = vec![0; self.axes.len()];
        for (i, (_, size)) in self.axes.iter().enumerate().rev() {
            coords[i] = rest % size;
            rest /= size;
        }
        Some(coords)
    }

    /// The ranks that share every coordinate of `rank` but the one along
    /// `axis`, in order along it: the group a collective over `axis` runs in.
    pub fn group(&self, rank: usize, axis: usize) -> Vec<usize> {
        let Some(coords) = self.coordinates(rank) else { return Vec::new() };
        let stride: usize = self.axes[axis + 1..].iter().map(|(_, s)| *s).product();
        let base = rank - coords[axis] * stride;
        (0..self.size(axis)).map(|c| base + c * stride).collect()
    }
}

impl fmt::Display for Mesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.axes.iter().map(|(n, s)| format!("{n}={s}")).collect();
        write!(f, "{}", parts.join(","))
    }
}

/// Which axis names of a program are split over which mesh axis.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Sharding {
    names: Vec<(String, String)>,
}

impl Sharding {
    /// Axis names to mesh axes (each name once).
    pub fn new(names: Vec<(String, String)>) -> Result<Sharding, MeshError> {
        for (i, (name, _)) in names.iter().enumerate() {
            if names[..i].iter().any(|(n, _)| n == name) {
                return Err(MeshError::Repeated { name: name.clone() });
            }
        }
        Ok(Sharding { names })
    }

    /// Parses `H=tp,F=tp`.
    pub fn parse(text: &str) -> Result<Sharding, MeshError> {
        Sharding::new(entries(text, "H=tp,F=tp")?)
    }

    /// The pairs, in the order given.
    pub fn names(&self) -> &[(String, String)] {
        &self.names
    }

    /// The mesh axis the axis name `name` is split over.
    pub fn mesh_axis_of(&self, name: &str) -> Option<&str> {
        self.names.iter().find(|(n, _)| n == name).map(|(_, m)| m.as_str())
    }

    /// Checks that every mesh axis named is one of `mesh`'s.
    pub fn check_against(&self, mesh: &Mesh) -> Result<(), MeshError> {
        match self.names.iter().find(|(_, m)| mesh.axis(m).is_none()) {
            Some((name, m)) => Err(MeshError::UnknownMeshAxis { name: name.clone(), mesh_axis: m.clone(), mesh: mesh.to_string() }),
            None => Ok(()),
        }
    }
}

impl fmt::Display for Sharding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.names.iter().map(|(n, m)| format!("{n}={m}")).collect();
        write!(f, "{}", parts.join(","))
    }
}

/// `NAME=VALUE` entries separated by commas.
fn entries(text: &str, example: &'static str) -> Result<Vec<(String, String)>, MeshError> {
    text.split(',')
        .map(|entry| {
            let (name, value) = entry.split_once('=').ok_or_else(|| MeshError::Entry { entry: entry.to_string(), example })?;
            let (name, value) = (name.trim(), value.trim());
            if name.is_empty() || value.is_empty() {
                return Err(MeshError::Entry { entry: entry.to_string(), example });
            }
            Ok((name.to_string(), value.to_string()))
        })
        .collect()
}

/// Where one axis of a rank's value lies in the whole value: split over
/// mesh axis `mesh_axis` (of `parts` processes) into equal blocks, after
/// `outer` groups. With
/// `outer` 1 the block is contiguous (block `c` of the axis on the ranks at
/// coordinate `c`); with `outer` k the axis is k runs, each split alike
/// (the factor `H` of a group `(3 H Dh)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Split {
    /// The mesh axis (an index into the mesh's axes).
    pub mesh_axis: usize,
    /// The mesh axis's size: how many blocks.
    pub parts: u64,
    /// How many runs the axis is split in.
    pub outer: u64,
}

/// The elementwise operation of an all-reduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
    Prod,
}

impl ReduceOp {
    /// Its name (`sum`, `max`, `min`, `prod`).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Prod => "prod",
        }
    }

    /// The operation named `name`.
    pub fn parse(name: &str) -> Option<ReduceOp> {
        [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod].into_iter().find(|op| op.name() == name)
    }
}

/// A step that moves data between the ranks of one mesh axis, or picks a
/// rank's part of a value every rank holds whole: what the compiler
/// inserts where SHARDING.md's rules need it and the runtime runs between
/// a sharded function's stages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Exchange {
    /// Every rank of the group gets the elementwise `op` of the group's values.
    AllReduce { op: ReduceOp, mesh_axis: usize },
    /// Every rank of the group gets the whole of `axis`, whose blocks
    /// (laid out as `split` says) the group's ranks hold.
    AllGather { axis: usize, split: Split },
    /// The rank's block along `axis` of a value it holds whole (no data
    /// moves).
    Block { axis: usize, split: Split },
    /// The rank's block along `axis` of the elementwise `op` of the
    /// group's values (each whole along `axis`): an all-reduce whose
    /// result the rank keeps only its block of, each rank receiving only
    /// its block.
    ReduceScatter { op: ReduceOp, axis: usize, split: Split },
}

impl Exchange {
    /// The mesh axis it runs over.
    pub fn mesh_axis(&self) -> usize {
        match *self {
            Exchange::AllReduce { mesh_axis, .. } => mesh_axis,
            Exchange::AllGather { split, .. } | Exchange::Block { split, .. } | Exchange::ReduceScatter { split, .. } => split.mesh_axis,
        }
    }
}

/// Where a sharded function's value comes from: an argument (by parameter
/// index) or an earlier step's value (by its index in [`ShardedPlan::values`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ValueRef {
    Argument(usize),
    Value(usize),
}

/// One step of a rank's plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Step {
    /// Calls stage `stage` (a compiled function) with the function's
    /// arguments followed by `carried`; its results become `values`.
    Stage { stage: usize, carried: Vec<ValueRef>, values: Vec<usize> },
    /// Runs `exchange` on `input`, giving `value`.
    Exchange { exchange: Exchange, input: ValueRef, value: usize, dtype: DType },
}

/// What a rank runs for one sharded function: its stages (ordinary
/// compiled functions, cut where data must move) and the exchanges between
/// them, in order; the values each step gives; the results (each with the
/// split of each axis: where the rank's block lies).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardedPlan {
    pub mesh: Mesh,
    pub sharding: Sharding,
    /// How many values the steps give.
    pub values: usize,
    pub steps: Vec<Step>,
    /// Each parameter's axes' splits (none for a host scalar): where a
    /// split axis's whole size is known when compiling, a caller may pass
    /// the whole argument, and the rank reads its block.
    pub params: Vec<Vec<Option<Split>>>,
    /// The results, in declared order, and each axis's split.
    pub results: Vec<(ValueRef, Vec<Option<Split>>)>,
    /// Each weight the rank binds: the name it binds under, the module's
    /// weight it is cut from, and each axis's split.
    pub weights: Vec<WeightBlock>,
}

impl ShardedPlan {
    /// How many exchanges of each kind a call runs: (all-reduces,
    /// all-gathers, blocks).
    pub fn exchange_counts(&self) -> (usize, usize, usize) {
        let mut counts = (0, 0, 0);
        for step in &self.steps {
            match step {
                Step::Exchange { exchange: Exchange::AllReduce { .. }, .. } => counts.0 += 1,
                Step::Exchange { exchange: Exchange::AllGather { .. }, .. } => counts.1 += 1,
                Step::Exchange { exchange: Exchange::Block { .. }, .. } => counts.2 += 1,
                Step::Exchange { exchange: Exchange::ReduceScatter { .. }, .. } | Step::Stage { .. } => {}
            }
        }
        counts
    }
    /// How many reduce-scatters a call runs.
    pub fn reduce_scatters(&self) -> usize {
        self.steps.iter().filter(|s| matches!(s, Step::Exchange { exchange: Exchange::ReduceScatter { .. }, .. })).count()
    }
}

/// A weight as one rank binds it: the rank's block of a module weight.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WeightBlock {
    /// The name the rank's stages read it by.
    pub name: String,
    /// The module's weight it is cut from.
    pub source: String,
    /// Each axis's split (`None`: whole).
    pub splits: Vec<Option<Split>>,
    /// Its type on the rank.
    pub ty: TensorSpec,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mesh_places_ranks_row_major_and_groups_them_along_an_axis() {
        let mesh = Mesh::parse("dp=2,tp=3").unwrap();
        assert_eq!(mesh.processes(), 6);
        assert_eq!(mesh.coordinates(4), Some(vec![1, 1]));
        assert_eq!(mesh.group(4, 1), [3, 4, 5]);
        assert_eq!(mesh.group(4, 0), [1, 4]);
        assert_eq!(mesh.coordinates(6), None);
        assert_eq!(mesh.to_string(), "dp=2,tp=3");
    }

    #[test]
    fn bad_meshes_and_shardings_are_named() {
        assert_eq!(Mesh::parse("tp=0").unwrap_err().to_string(), "the mesh axis 'tp' has the size `0`: sizes are positive integers");
        assert!(matches!(Mesh::parse("tp"), Err(MeshError::Entry { .. })));
        assert!(matches!(Mesh::parse("tp=2,tp=2"), Err(MeshError::Repeated { .. })));
        assert!(matches!(Sharding::parse("H=tp,H=dp"), Err(MeshError::Repeated { .. })));
        let mesh = Mesh::parse("tp=2").unwrap();
        let err = Sharding::parse("H=dp").unwrap().check_against(&mesh).unwrap_err();
        assert_eq!(err.to_string(), "the axis name 'H' is split over the mesh axis 'dp', which the mesh (tp=2) does not have");
    }
}
