//! The one pipeline every user of the compiler goes through (the CLI, the
//! host API, the benchmarks, the tests): source -> checked program ->
//! named-axis graph -> rewritten graph -> kernels -> code + plan, with the
//! verifier run after every stage that builds IR and each stage's time
//! recorded in a [`Timings`].

use crate::error::{Error, StageError};
use crate::timings::Timings;
use nax_contract::shard::{Mesh, Sharding};
pub use nax_contract::{Machine, NAMED_CPUS, UnknownCpu};
use nax_front::CheckedModule;
use nax_front::checked::{CheckedFn, TExprKind};
use nax_ir::Graph;
pub use nax_kernel::FormOptions;
use nax_runtime::{Function, HostType, Scalar};
use std::sync::Arc;

/// A code generator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Backend {
    /// LLVM, optimised for the host CPU (the default).
    #[default]
    Llvm,
    /// MLIR: nax's dialect and upstream dialects, lowered by MLIR and
    /// JIT-compiled by its execution engine.
    Mlir,
    /// Cranelift: compiles fast, scalar code.
    Cranelift,
    /// The reference interpreter over the graph.
    Interp,
    /// The CUDA target's kernels (formed for the GPU, one thread per
    /// position of each parallel loop) run on the CPU through MLIR, the
    /// thread ids as loop variables: the GPU schedule checked without a GPU.
    CudaEmulation,
    /// The CUDA target's kernels as PTX, run on the machine's NVIDIA GPU
    /// by the runtime's CUDA device (`--target cuda`).
    Cuda,
}

impl Backend {
    /// `machine` as this back end's code sees it, which kernel formation
    /// plans for: the GPU for the CUDA back ends; Cranelift's vectors are
    /// at most 16 bytes.
    pub fn machine(self, machine: Machine) -> Machine {
        match self {
            Backend::CudaEmulation | Backend::Cuda => Machine::CUDA,
            Backend::Cranelift => machine.with_vector_bytes(16),
            Backend::Llvm | Backend::Mlir | Backend::Interp => machine,
        }
    }

    /// The name `--backend` takes.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Llvm => "llvm",
            Backend::Mlir => "mlir",
            Backend::Cranelift => "cranelift",
            Backend::Interp => "interp",
            Backend::CudaEmulation => "cuda-emulation",
            Backend::Cuda => "cuda",
        }
    }
}

/// Parses and checks a source; the checked module, or every diagnostic
/// rendered against `file_name` when there is an error. Records `parse`
/// and `check`.
pub fn check(file_name: &str, source: &str, timings: &mut Timings) -> Result<CheckedModule, Error> {
    let (checked, stages) = nax_front::check_source_timed(source);
    timings.extend(&stages);
    if checked.has_errors() {
        let rendered = nax_front::diagnostics::render_text(file_name, source, &checked.diagnostics);
        return Err(Error::Diagnostics { diagnostics: checked.diagnostics, rendered });
    }
    Ok(checked.module)
}

/// A function's graph as lowered, and as rewritten by the optimizer.
#[derive(Debug)]
pub struct Lowered {
    /// As lowered from the checked program.
    pub lowered: Graph,
    /// As rewritten, with the optimizer's report; `None` at `-O0`.
    pub rewritten: Option<(Graph, nax_passes::Report)>,
}

impl Lowered {
    /// The graph code is generated from: the rewritten one, if any.
    pub fn graph(&self) -> &Graph {
        self.rewritten.as_ref().map_or(&self.lowered, |(g, _)| g)
    }

    /// The same, by value.
    pub fn into_graph(self) -> Graph {
        self.rewritten.map_or(self.lowered, |(g, _)| g)
    }
}

/// The function `name` of the module as a graph, verified, then rewritten
/// (when `optimize`) and verified again. Records `lower` and `rewrite`.
pub fn lower(module: &CheckedModule, name: &str, optimize: bool, timings: &mut Timings) -> Result<Lowered, Error> {
    function(module, name)?;
    let lowered = nax_lower::lower(module, name).map_err(Error::stage("lower"))?;
    verify_graph(&lowered, "graph")?;
    timings.mark("lower");
    let rewritten = if optimize {
        let (rewritten, report) = nax_passes::optimize(&lowered).map_err(Error::stage("rewrite"))?;
        verify_graph(&rewritten, "rewritten graph")?;
        timings.mark("rewrite");
        Some((rewritten, report))
    } else {
        None
    };
    Ok(Lowered { lowered, rewritten })
}

/// The module's function `name`, or the error naming the ones it has.
fn function<'m>(module: &'m CheckedModule, name: &str) -> Result<&'m CheckedFn, Error> {
    module
        .functions
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| Error::UnknownFunction { name: name.to_string(), available: module.functions.iter().map(|f| f.name.clone()).collect() })
}

fn verify_graph(g: &Graph, what: &'static str) -> Result<(), Error> {
    let problems = nax_ir::verify(g);
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::Compile { stage: "lower", error: StageError::VerifyGraph { what, function: g.name.clone(), problems } })
}

/// The kernels of a graph, formed for `machine` and verified.
pub fn kernels(graph: &Graph, machine: &Machine, options: FormOptions) -> Result<nax_kernel::Program, Error> {
    let program = nax_kernel::form(graph, machine, options).map_err(Error::stage("kernels"))?;
    let problems = nax_kernel::verify(&program);
    if !problems.is_empty() {
        return Err(Error::Compile { stage: "kernels", error: StageError::VerifyKernels { function: graph.name.clone(), problems } });
    }
    Ok(program)
}

/// Each parameter's default value (host scalars given a literal default).
pub fn defaults(f: &CheckedFn) -> Vec<Option<Scalar>> {
    let params = f.bindings.get(..f.params).unwrap_or_default();
    params
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let default = f.defaults.get(i)?.as_ref()?;
            let nax_front::check::types::Type::Host(h, _) = b.ty else { return None };
            match (h, &default.kind) {
                (HostType::Float, TExprKind::Float(x)) => Some(Scalar::Float(*x)),
                (HostType::Float, TExprKind::Int(x)) => Some(Scalar::Float(*x as f64)),
                (HostType::Int, TExprKind::Int(x)) => Some(Scalar::Int(i64::try_from(*x).unwrap_or(i64::MAX))),
                (HostType::Bool, TExprKind::Bool(b)) => Some(Scalar::Bool(*b)),
                _ => None,
            }
        })
        .collect()
}

/// Compiles a graph with a back end into a callable function. Records
/// `kernels` (native back ends), `codegen` and `link`.
pub fn compile_graph(graph: Graph, defaults: &[Option<Scalar>], backend: Backend, timings: &mut Timings) -> Result<Function, Error> {
    compile_graph_for(graph, defaults, backend, &backend.machine(Machine::host()), FormOptions::default(), timings)
}

/// [`compile_graph`] with the kernels formed for `machine` (the JIT's is
/// the host as the back end sees it; tests give small caches to reach
/// every blocking edge) with `options`.
pub fn compile_graph_for(
    graph: Graph,
    defaults: &[Option<Scalar>],
    backend: Backend,
    machine: &Machine,
    options: FormOptions,
    timings: &mut Timings,
) -> Result<Function, Error> {
    let signature = Arc::new(nax_ir::signature(&graph, defaults));
    let mut stage = |name| timings.mark(name);
    let exec: Box<dyn nax_runtime::Execute> = match backend {
        Backend::Interp => {
            let interpreter = nax_back_interp::Interpreter { graph, signature: Arc::clone(&signature) };
            stage("codegen");
            Box::new(interpreter)
        }
        Backend::Llvm | Backend::Mlir | Backend::Cranelift | Backend::CudaEmulation => {
            let program = kernels(&graph, machine, options)?;
            stage("kernels");
            let compiled = match backend {
                Backend::Llvm => nax_back_llvm::compile(&program, Arc::clone(&signature), &mut stage),
                Backend::Mlir => nax_back_mlir::compile(&program, nax_back_mlir::Device::Cpu, Arc::clone(&signature), &mut stage),
                Backend::CudaEmulation => nax_back_mlir::compile(&program, nax_back_mlir::Device::Emulated, Arc::clone(&signature), &mut stage),
                _ => nax_back_cranelift::compile(&program, Arc::clone(&signature), &mut stage),
            };
            Box::new(compiled.map_err(Error::stage("codegen"))?)
        }
        Backend::Cuda => {
            let program = kernels(&graph, machine, options)?;
            stage("kernels");
            let plan = nax_back_mlir::cuda(&program).map_err(Error::stage("codegen"))?;
            stage("codegen");
            let function = nax_runtime::cuda::CudaFunction::load(Arc::clone(&signature), plan)?;
            stage("link");
            Box::new(function)
        }
    };
    Ok(Function::new(signature, exec))
}

/// Lowers, rewrites (when `optimize`) and compiles the module's function
/// `name`, with every load and store bounds-checked when `check_bounds`.
pub fn compile_function(
    module: &CheckedModule,
    name: &str,
    backend: Backend,
    optimize: bool,
    check_bounds: bool,
    timings: &mut Timings,
) -> Result<Function, Error> {
    let defaults = defaults(function(module, name)?);
    let lowered = lower(module, name, optimize, timings)?;
    let machine = backend.machine(Machine::host());
    compile_graph_for(lowered.into_graph(), &defaults, backend, &machine, FormOptions { check_bounds }, timings)
}

/// A function compiled for one rank of a mesh: the rank's signature (its
/// parameters' blocks), its compiled stages and its plan.
pub struct ShardedParts {
    /// The rank's parameters, weights and results with their blocks' sizes.
    pub signature: Arc<nax_runtime::Signature>,
    /// The stages, compiled, in the order the plan runs them.
    pub stages: Vec<Function>,
    /// The stages and exchanges, in order.
    pub plan: nax_contract::shard::ShardedPlan,
}

/// Every axis name of the module: its dims, its weights' axes and every
/// value's axes in every function.
fn axis_names(module: &CheckedModule) -> Vec<String> {
    let mut names: Vec<String> = module.dims.iter().map(|(n, _)| n.clone()).collect();
    let mut axes = |t: &nax_values::TensorType| names.extend(t.axes.iter().filter_map(|a| a.name.clone()));
    for w in &module.weights {
        axes(&w.ty);
    }
    for f in &module.functions {
        for b in &f.bindings {
            if let nax_front::check::types::Type::Tensor(t) = &b.ty {
                axes(t);
            }
        }
    }
    names
}

/// A function split for one rank of a mesh: its graph as partitioned and
/// its stages, not compiled.
pub struct Sharded {
    /// The rank's graph, with each node's splits and the weights' blocks.
    pub partitioned: nax_shard::Partitioned,
    /// Its stages and the plan that runs them.
    pub staged: nax_shard::Staged,
}

impl Sharded {
    /// What `nax plan` prints of it.
    pub fn plan_text(&self) -> String {
        nax_shard::plan_text(&self.partitioned, &self.staged)
    }
}

/// The module's function `name` split over `mesh` as `sharding` says
/// (SHARDING.md), for one rank: the graph as lowered, partitioned and cut
/// at its exchanges into stages. Nothing is compiled. Records `lower` and
/// `shard`.
pub fn shard(module: &CheckedModule, name: &str, mesh: &Mesh, sharding: &Sharding, timings: &mut Timings) -> Result<Sharded, Error> {
    function(module, name)?;
    sharding.check_against(mesh).map_err(nax_shard::ShardError::from)?;
    let names = axis_names(module);
    nax_shard::check_names(sharding, names.iter().map(String::as_str))?;
    let lowered = lower(module, name, false, timings)?.into_graph();
    let partitioned = nax_shard::partition(&lowered, mesh, sharding)?;
    let staged = nax_shard::stages(&partitioned, mesh, sharding)?;
    timings.mark("shard");
    Ok(Sharded { partitioned, staged })
}

/// A function split for one rank, ready to compile: the rank's signature,
/// each stage's graph (rewritten where asked) with its parameters'
/// defaults, and the plan.
pub struct ShardedGraphs {
    /// The rank's parameters, weights and results with their blocks' sizes.
    pub signature: Arc<nax_runtime::Signature>,
    /// Each stage's graph and its parameters' defaults.
    pub stages: Vec<(Graph, Vec<Option<nax_runtime::Scalar>>)>,
    /// The stages and exchanges, in order.
    pub plan: nax_contract::shard::ShardedPlan,
}

/// [`shard`], with every stage rewritten when `optimize` (and verified),
/// as the JIT ([`compile_sharded`]) and AOT libraries compile them.
pub fn sharded_graphs(
    module: &CheckedModule,
    name: &str,
    (mesh, sharding): (&Mesh, &Sharding),
    optimize: bool,
    timings: &mut Timings,
) -> Result<ShardedGraphs, Error> {
    let defaults = defaults(function(module, name)?);
    let Sharded { partitioned, staged } = shard(module, name, mesh, sharding, timings)?;
    let signature = Arc::new(nax_ir::signature(&partitioned.graph, &defaults));
    let mut stages = Vec::with_capacity(staged.stages.len());
    for stage in staged.stages {
        let graph = if optimize {
            let (rewritten, _) = nax_passes::optimize(&stage).map_err(Error::stage("rewrite"))?;
            verify_graph(&rewritten, "rewritten graph")?;
            rewritten
        } else {
            stage
        };
        let mut stage_defaults = defaults.clone();
        stage_defaults.resize(graph.inputs.len(), None);
        stages.push((graph, stage_defaults));
    }
    Ok(ShardedGraphs { signature, stages, plan: staged.plan })
}

/// [`sharded_graphs`], each stage compiled as a function is.
pub fn compile_sharded(
    module: &CheckedModule,
    name: &str,
    split: (&Mesh, &Sharding),
    backend: Backend,
    (optimize, check_bounds): (bool, bool),
    timings: &mut Timings,
) -> Result<ShardedParts, Error> {
    let ShardedGraphs { signature, stages: graphs, plan } = sharded_graphs(module, name, split, optimize, timings)?;
    let machine = backend.machine(Machine::host());
    let mut stages = Vec::with_capacity(graphs.len());
    for (graph, defaults) in graphs {
        stages.push(compile_graph_for(graph, &defaults, backend, &machine, FormOptions { check_bounds }, timings)?);
    }
    Ok(ShardedParts { signature, stages, plan })
}
