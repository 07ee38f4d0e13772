//! One function over several processes, split by axis name (SHARDING.md).
//!
//! [`partition`] takes a function's named-axis graph (as lowered), a
//! [`Mesh`] and a [`Sharding`], and builds the graph one rank runs: every
//! value whose axis is split holds its block (sizes divided by the mesh
//! axis's size), and [`Exchange`](nax_contract::shard::Exchange) nodes
//! move data where the rules need it: an all-reduce after a contraction or
//! reduction over a split axis, an all-gather before an operation that
//! needs a split axis whole, a rank's block of a whole value where a split
//! one meets it (pushed back toward the weights, so that a weight is read
//! only as the rank's block: the Megatron layout falls out of splitting
//! `H` and `F`), and a large product left whole on every rank split along
//! its contracted axis ([`replicated`]: GPT-2's head). [`stages`] cuts that graph at its exchanges into ordinary
//! graphs, each compiled as any function is, and the [`ShardedPlan`] the
//! runtime runs them by; [`plan_text`] is what `nax plan` prints.

mod block;
mod lookup;
mod partition;
mod regroup;
mod replicated;
mod report;
mod stages;
mod statistics;

pub use partition::{Partitioned, partition};
pub use report::plan_text;
pub use stages::{Staged, stages};

use nax_contract::shard::MeshError;

/// Why a function cannot be split as asked, before anything runs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// The mesh or the sharding as written.
    #[error(transparent)]
    Mesh(#[from] MeshError),
    /// A split axis whose size the mesh axis does not divide.
    #[error("the axis '{axis}' of size {size} cannot be split over the mesh axis '{mesh_axis}' of size {parts}: {size} is not a multiple of {parts}")]
    NotDivisible { axis: String, size: u64, mesh_axis: String, parts: u64 },
    /// Two axes of one value split over one mesh axis.
    #[error("`{function}` has a value with the axes '{first}' and '{second}', both split over the mesh axis '{mesh_axis}'")]
    TwoAxesOnOneMeshAxis { function: String, first: String, second: String, mesh_axis: String },
    /// A sharded name no function of the module has.
    #[error("the sharding splits '{name}', which is no axis name of the module (its names: {known})")]
    UnknownName { name: String, known: String },
    /// The engine's group has another number of processes than the mesh.
    #[error("the mesh ({mesh}) has {processes} processes, the engine's group has {group}")]
    GroupSize { mesh: String, processes: usize, group: usize },
    /// A bug of nax: the graph it built does not verify.
    #[error("internal error: the graph of `{function}` for one rank does not verify: {problems}")]
    Verify { function: String, problems: String },
}

/// The nodes of `g` in topological order (a cycle is a bug of nax).
fn topological(g: &nax_ir::Graph) -> Result<Vec<petgraph::graph::NodeIndex>, ShardError> {
    petgraph::algo::toposort(&g.graph, None).map_err(|_| ShardError::Verify { function: g.name.clone(), problems: "a cycle".into() })
}

/// An empty graph named `name` over `g`'s sizes and size arguments.
fn empty_like(g: &nax_ir::Graph, name: String) -> nax_ir::Graph {
    nax_ir::Graph {
        name,
        graph: petgraph::graph::DiGraph::new(),
        inputs: Vec::new(),
        outputs: Vec::new(),
        symbols: g.symbols.clone(),
        size_arguments: g.size_arguments.clone(),
    }
}

/// `g`, verified: a graph the partitioner built that does not verify is
/// a bug of nax, reported with the verifier's problems.
fn verified(g: nax_ir::Graph) -> Result<nax_ir::Graph, ShardError> {
    let problems = nax_ir::verify(&g);
    if problems.is_empty() {
        return Ok(g);
    }
    let problems: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    Err(ShardError::Verify { function: g.name.clone(), problems: problems.join("; ") })
}

/// Axis names of `names` that the sharding splits but `known` lacks: the
/// module-level check (a name no function of the module has).
pub fn check_names<'a>(sharding: &nax_contract::shard::Sharding, known: impl IntoIterator<Item = &'a str> + Clone) -> Result<(), ShardError> {
    for (name, _) in sharding.names() {
        if !known.clone().into_iter().any(|k| k == name) {
            let mut all: Vec<&str> = known.clone().into_iter().collect();
            all.sort_unstable();
            all.dedup();
            return Err(ShardError::UnknownName { name: name.clone(), known: all.join(", ") });
        }
    }
    Ok(())
}
