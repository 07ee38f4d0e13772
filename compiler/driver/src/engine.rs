//! The API for host applications: an [`Engine`] (back end, threads,
//! optimisation, a cache of compiled programs) compiles source into a
//! [`Program`], whose functions ([`Program::function`]) are called with
//! named host tensors borrowed from the caller, from any number of threads.
//!
//! ```
//! use nax::{Arg, Engine, TensorView};
//!
//! let engine = Engine::new().threads(2);
//! let program = engine.compile("def scale(x: [n d], s: float) -> [n d] {\n    return x * s\n}\n")?;
//! let scale = program.function("scale")?;
//! println!("{}", scale.signature()); // fn scale(x: f32[n d], s: float) -> f32[n d]
//!
//! // A [d n] buffer, passed as [n d] by naming its axes: no copy.
//! let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
//! let x = TensorView::new(&data, vec![2, 3], vec![Some("d".into()), Some("n".into())])?;
//! let y = scale.call([("x", Arg::from(x)), ("s", 2.0.into())])?;
//! assert_eq!(y.shape(), &[3, 2]);
//! assert_eq!(y.to_f64_vec(), [2.0, 8.0, 4.0, 10.0, 6.0, 12.0]);
//! # Ok::<(), nax::Error>(())
//! ```

use crate::error::Error;
use crate::pipeline::{self, Backend};
use crate::timings::Timings;
use nax_contract::shard::{Mesh, ShardedPlan, Sharding};
use nax_front::CheckedModule;
use nax_runtime::CallBoundary;
use nax_runtime::{Arg, BoundWeights, CheckedCall, HostError, HostTensor, PackedWeights, Signature, TensorMut, ThreadPool};
use nax_runtime::{Collectives, ShardedResult};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// What a program is compiled with; programs compiled with equal options
/// from equal source share their code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Options {
    backend: Backend,
    threads: usize,
    optimize: bool,
    check_bounds: bool,
}

/// Compiles programs: the back end, the threads each program's calls run
/// on, whether the optimizer rewrites graphs, and an in-memory cache of
/// compiled programs keyed by source and options (a program stays cached
/// while some [`Program`] holds it).
pub struct Engine {
    options: Options,
    cache: Mutex<HashMap<(String, Options), Weak<Compiled>>>,
}

impl Default for Engine {
    fn default() -> Engine {
        Engine::new()
    }
}

impl Engine {
    /// LLVM for the host CPU, one thread per available core, optimised.
    pub fn new() -> Engine {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Engine { options: Options { backend: Backend::Llvm, threads, optimize: true, check_bounds: false }, cache: Mutex::new(HashMap::new()) }
    }

    /// Uses this back end.
    pub fn backend(mut self, backend: Backend) -> Engine {
        self.options.backend = backend;
        self
    }

    /// Runs each program's calls on a pool of this many threads (at least 1).
    pub fn threads(mut self, threads: usize) -> Engine {
        self.options.threads = threads.max(1);
        self
    }

    /// Rewrites graphs with the optimizer (`-O1`, the default) or not (`-O0`).
    pub fn optimize(mut self, optimize: bool) -> Engine {
        self.options.optimize = optimize;
        self
    }

    /// Compiles every load and store with a bounds check (`--check-bounds`):
    /// an access outside its buffer fails the call instead of being made.
    /// Slower; for finding bugs of nax. The CPU back ends only.
    pub fn check_bounds(mut self, check_bounds: bool) -> Engine {
        self.options.check_bounds = check_bounds;
        self
    }

    /// Checks `source`; its functions compile when first asked for. An
    /// error carries every diagnostic, rendered as `nax check` prints them
    /// (against the file name `<source>`).
    pub fn compile(&self, source: &str) -> Result<Program, Error> {
        self.compile_named("<source>", source)
    }

    /// [`Engine::compile`] of a file's source; diagnostics name the file.
    pub fn compile_file(&self, path: &Path) -> Result<Program, Error> {
        let source = std::fs::read_to_string(path).map_err(|source| HostError::Read { path: path.to_path_buf(), source })?;
        self.compile_named(&path.display().to_string(), &source)
    }

    fn compile_named(&self, file_name: &str, source: &str) -> Result<Program, Error> {
        let key = (source.to_string(), self.options);
        let program = |compiled| Program { compiled, weights: Arc::new(BoundWeights::default()) };
        let cached = |cache: &HashMap<_, Weak<Compiled>>| cache.get(&key).and_then(Weak::upgrade);
        if let Some(compiled) = cached(&self.cache.lock().unwrap_or_else(|e| e.into_inner())) {
            return Ok(program(compiled));
        }
        // Checked outside the lock, so that threads compiling other sources
        // do not wait for this one.
        let compiled = Compiled::check(file_name, source, self.options)?;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        // Another thread may have compiled the same source meanwhile: one copy is kept.
        if let Some(compiled) = cached(&cache) {
            return Ok(program(compiled));
        }
        let compiled = Arc::new(compiled);
        cache.retain(|_, weak| weak.strong_count() > 0);
        cache.insert(key.clone(), Arc::downgrade(&compiled));
        Ok(program(compiled))
    }
}

/// One function's compiled code, made on first use: the function, or the
/// stage that failed and its message.
type Compiling = OnceLock<Result<Arc<nax_runtime::Function>, Arc<Error>>>;

/// A backward function's function and the names it differentiates by.
type BackwardKey = (String, Vec<String>);

/// A checked module with its source, its functions' compiled code and its
/// thread pool.
struct Compiled {
    file_name: String,
    source: String,
    module: CheckedModule,
    options: Options,
    functions: Vec<(String, Compiling)>,
    pool: ThreadPool,
    /// The programs holding each backward function asked for so far, by
    /// function and names: each compiled once.
    backwards: Mutex<HashMap<BackwardKey, Arc<Compiled>>>,
}

impl Compiled {
    /// Checks `source`; its functions compile when first asked for.
    fn check(file_name: &str, source: &str, options: Options) -> Result<Compiled, Error> {
        let module = pipeline::check(file_name, source, &mut Timings::start())?;
        let functions = module.functions.iter().map(|f| (f.name.clone(), OnceLock::new())).collect();
        let pool = ThreadPool::new(options.threads)?;
        Ok(Compiled { file_name: file_name.to_string(), source: source.to_string(), module, options, functions, pool, backwards: Mutex::default() })
    }
}

/// A compiled program and the weights bound to it. Cheap to clone;
/// `Send + Sync`.
#[derive(Clone)]
pub struct Program {
    compiled: Arc<Compiled>,
    weights: Arc<BoundWeights>,
}

impl Program {
    /// The names of the module's functions.
    pub fn function_names(&self) -> Vec<&str> {
        self.compiled.functions.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// The function `name`, compiled on first use (once, whichever thread
    /// asks first).
    pub fn function(&self, name: &str) -> Result<Function, Error> {
        let c = &self.compiled;
        let Some((_, cell)) = c.functions.iter().find(|(n, _)| n == name) else {
            return Err(Error::UnknownFunction { name: name.to_string(), available: c.functions.iter().map(|(n, _)| n.clone()).collect() });
        };
        // Compiled in the program's own pool too (LLVM optimises a
        // program's modules in parallel): nax leaves rayon's global pool
        // to its host.
        let compiled = cell.get_or_init(|| {
            let mut timings = Timings::start();
            c.pool
                .install(|| pipeline::compile_function(&c.module, name, c.options.backend, c.options.optimize, c.options.check_bounds, &mut timings))
                .map(Arc::new)
                .map_err(Arc::new)
        });
        match compiled {
            Ok(f) => Ok(Function { program: self.clone(), function: Arc::clone(f) }),
            Err(e) => Err(Error::Shared(Arc::clone(e))),
        }
    }

    /// The backward function of `function` by `wrt` (float tensor
    /// parameters of it and weights of the module, by name), compiled with
    /// the program's options and bound to its weights: called with the
    /// function's arguments and one gradient per float result (`d_NAME`,
    /// `d_result` for an unnamed one), it gives the function's value
    /// against those gradients (`value`) and its vector-Jacobian product
    /// by each of `wrt` (`d_NAME`): what a host's autograd asks of a
    /// function inside a model it trains (LANGUAGE.md section 15).
    pub fn backward(&self, function: &str, wrt: &[String]) -> Result<Function, Error> {
        let c = &self.compiled;
        let key = (function.to_string(), wrt.to_vec());
        let known = c.backwards.lock().unwrap_or_else(|e| e.into_inner()).get(&key).cloned();
        let compiled = match known {
            Some(compiled) => compiled,
            None => {
                let backward = crate::backward::backward_source(&c.source, &c.module, function, wrt)?;
                let source = format!("{}{backward}", c.source);
                let compiled = Arc::new(Compiled::check(&format!("{} (with the backward of `{function}`)", c.file_name), &source, c.options)?);
                c.backwards.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_insert(compiled).clone()
            }
        };
        Program { compiled, weights: Arc::clone(&self.weights) }.function(&crate::backward::backward_name(function))
    }

    /// The same program with these weights: each tensor named like a weight
    /// of the module binds to it by the rules of LANGUAGE.md section 12
    /// (named axes are transposed to the declared order) and must have the
    /// weight's dtype, rank and constant sizes (checked here, not at the
    /// first call); tensors that are no weight of the module are ignored.
    pub fn with_weights(&self, tensors: impl IntoIterator<Item = (String, HostTensor)>) -> Result<Program, Error> {
        let module = &self.compiled.module;
        let mut weights = self.weights.tensors().clone();
        for (name, t) in tensors {
            let Some(w) = module.weights.iter().find(|w| w.name == name) else { continue };
            let names: Vec<Option<String>> = w.ty.axes.iter().map(|a| a.name.clone()).collect();
            let bound = nax_runtime::bind_owned(&name, &names, t)?;
            let misfit = |problem: String| Error::Weight { name: name.clone(), problem };
            if bound.dtype() != w.ty.dtype {
                return Err(misfit(format!("the tensor is {}, the weight is declared {}", bound.dtype().as_str(), w.ty.dtype.as_str())));
            }
            if bound.shape().len() != w.ty.axes.len() {
                return Err(misfit(format!(
                    "the tensor has rank {} ({:?}), the weight is declared with {} axes",
                    bound.shape().len(),
                    bound.shape(),
                    w.ty.axes.len()
                )));
            }
            for (i, (axis, &given)) in w.ty.axes.iter().zip(bound.shape()).enumerate() {
                if let nax_front::check::sizes::Size::Const(declared) = module.symbols.resolve(axis.size)
                    && declared != given as u64
                {
                    let which = axis.name.as_ref().map_or_else(|| format!("axis {i}"), |n| format!("axis {i} ('{n}')"));
                    return Err(misfit(format!("{which} has size {given}, the weight is declared with {declared}")));
                }
            }
            weights.insert(name, bound);
        }
        Ok(Program { compiled: Arc::clone(&self.compiled), weights: Arc::new(BoundWeights::new(weights)) })
    }

    /// The panels the matrix products packed from this binding's weights
    /// (how many packings, how many bytes): each weight once.
    pub fn packed_weights(&self) -> &PackedWeights {
        self.weights.packed_weights()
    }

    /// [`Program::with_weights`] with the tensors of a safetensors file.
    pub fn with_weights_file(&self, path: &Path) -> Result<Program, Error> {
        self.with_weights(nax_runtime::read_tensors(path)?)
    }

    /// How many threads calls run on.
    pub fn threads(&self) -> usize {
        self.compiled.pool.threads()
    }

    /// The function `name` split over `mesh` as `sharding` says
    /// (SHARDING.md), as the rank of `collectives` runs it: its weights
    /// are its blocks of the program's, its collectives run on the host's
    /// engine. Compiled at each request; every rank of the mesh asks for
    /// it with the same mesh and sharding.
    pub fn sharded(&self, name: &str, mesh: &Mesh, sharding: &Sharding, collectives: Arc<dyn Collectives>) -> Result<ShardedFunction, Error> {
        if collectives.size() != mesh.processes() {
            let (mesh, processes, group) = (mesh.to_string(), mesh.processes(), collectives.size());
            return Err(nax_shard::ShardError::GroupSize { mesh, processes, group }.into());
        }
        let c = &self.compiled;
        let options = (c.options.optimize, c.options.check_bounds);
        let parts = c.pool.install(|| pipeline::compile_sharded(&c.module, name, (mesh, sharding), c.options.backend, options, &mut Timings::start()))?;
        let weights = nax_runtime::rank_weights(&parts.plan, self.weights.tensors(), collectives.rank())?;
        let function = nax_runtime::ShardedFunction::new(parts.signature, parts.plan, parts.stages, collectives)?;
        // The whole weights are not held: the rank's memory is its blocks.
        let program = Program { compiled: Arc::clone(&self.compiled), weights: Arc::new(BoundWeights::default()) };
        Ok(ShardedFunction { program, function: Arc::new(function), weights: Arc::new(BoundWeights::new(weights)), gather: false })
    }

    /// What `nax plan` prints for the function `name` split over `mesh`
    /// as `sharding` says: each rank's sizes, its weights' blocks, every
    /// stage and collective with its bytes per call.
    pub fn plan(&self, name: &str, mesh: &Mesh, sharding: &Sharding) -> Result<String, Error> {
        Ok(pipeline::shard(&self.compiled.module, name, mesh, sharding, &mut Timings::start())?.plan_text())
    }
}

/// One rank's part of a function split over a mesh
/// ([`Program::sharded`]). Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct ShardedFunction {
    program: Program,
    function: Arc<nax_runtime::ShardedFunction>,
    weights: Arc<BoundWeights>,
    gather: bool,
}

impl ShardedFunction {
    /// The same function giving every result whole on every rank
    /// (`gather`), or each rank its block (the default).
    pub fn gather(self, gather: bool) -> ShardedFunction {
        ShardedFunction { gather, ..self }
    }

    /// The same function with the rank's blocks of these weights (each
    /// bound and checked as [`Program::with_weights`] does, then cut; the
    /// whole tensors are not kept).
    pub fn with_weights(&self, tensors: impl IntoIterator<Item = (String, HostTensor)>) -> Result<ShardedFunction, Error> {
        let whole = self.program.with_weights(tensors)?;
        let weights = nax_runtime::rank_weights(self.plan(), whole.weights.tensors(), self.function.rank())?;
        Ok(ShardedFunction { weights: Arc::new(BoundWeights::new(weights)), ..self.clone() })
    }

    /// The same function with the rank's blocks of the weights in a
    /// safetensors file, each block read alone (the rest of a tensor is
    /// never read: the rank's memory is its share from the start), bound
    /// by name as [`Program::with_weights`] binds a weight.
    pub fn with_weights_file(&self, path: &Path) -> Result<ShardedFunction, Error> {
        let file = nax_runtime::TensorFile::open(path)?;
        let weights = nax_runtime::read_rank_weights(self.plan(), &file, self.function.rank())?;
        Ok(ShardedFunction { weights: Arc::new(BoundWeights::new(weights)), ..self.clone() })
    }

    /// The bytes of the weights this rank holds: its blocks.
    pub fn weight_bytes(&self) -> usize {
        self.weights.tensors().values().map(|t| t.len() * t.dtype().size_bytes()).sum()
    }

    /// The rank's signature: its parameters with their blocks' sizes.
    pub fn signature(&self) -> &Signature {
        self.function.signature()
    }

    /// The stages and exchanges the rank runs.
    pub fn plan(&self) -> &ShardedPlan {
        self.function.plan()
    }

    /// Calls the rank's part (every rank of the mesh calls at once) with
    /// arguments by parameter name, each rank passing its blocks: every
    /// result by name, each the rank's block with where it lies.
    pub fn call_results<'a>(&self, args: impl IntoIterator<Item = (&'a str, Arg<'a>)>) -> Result<Vec<(String, ShardedResult)>, Error> {
        let args: Vec<(&str, Arg<'_>)> = args.into_iter().collect();
        let results = self.function.call_results(args, &*self.weights, &self.program.compiled.pool, self.gather)?;
        let names = self.signature().results.iter().map(|r| r.name.clone().unwrap_or_else(|| "result".to_string()));
        Ok(names.zip(results).collect())
    }
}

/// A compiled function of a [`Program`], ready to call. Cheap to clone;
/// `Send + Sync`: any number of threads may call it at once.
#[derive(Clone)]
pub struct Function {
    program: Program,
    function: Arc<nax_runtime::Function>,
}

impl Function {
    /// Its backward function by `wrt` ([`Program::backward`]).
    pub fn backward(&self, wrt: &[String]) -> Result<Function, Error> {
        self.program.backward(&self.function.signature().name, wrt)
    }

    /// Its parameters (dtypes, axis names, symbolic sizes, defaults), the
    /// weights it reads and its result.
    pub fn signature(&self) -> &Signature {
        self.function.signature()
    }

    /// Calls it with arguments by parameter name: tensors borrowed from the
    /// caller ([`nax_runtime::TensorView`]: any strides, axes named or not, bound by the
    /// rules of LANGUAGE.md section 12 without a copy when their memory
    /// lies row-major in the parameter's order) and host scalars; host
    /// scalar parameters left out take their defaults. Every size is
    /// checked before anything runs.
    pub fn call<'a>(&self, args: impl IntoIterator<Item = (&'a str, Arg<'a>)>) -> Result<HostTensor, Error> {
        let args: Vec<(&str, Arg<'_>)> = args.into_iter().collect();
        Ok(self.function.call(args, &*self.program.weights, &self.program.compiled.pool)?)
    }

    /// As [`Function::call`], for a function of any number of results
    /// (LANGUAGE.md section 14): each result by its declared name (`result`
    /// for a function declared `-> TYPE`), in declared order. [`Function::call`]
    /// on a function of several results is an error naming them.
    pub fn call_results<'a>(&self, args: impl IntoIterator<Item = (&'a str, Arg<'a>)>) -> Result<Vec<(String, HostTensor)>, Error> {
        let args: Vec<(&str, Arg<'_>)> = args.into_iter().collect();
        let results = self.function.call_results(args, &*self.program.weights, &self.program.compiled.pool)?;
        Ok(self.named(results))
    }

    /// The results of a call paired with their names.
    fn named(&self, results: Vec<HostTensor>) -> Vec<(String, HostTensor)> {
        let names = self.signature().results.iter().map(|r| r.name.clone().unwrap_or_else(|| "result".to_string()));
        names.zip(results).collect()
    }

    /// As [`Function::call`], writing the result into the caller's
    /// contiguous buffer, which must have the result's dtype and element
    /// count.
    pub fn call_into<'a>(&self, args: impl IntoIterator<Item = (&'a str, Arg<'a>)>, out: &mut TensorMut<'_>) -> Result<(), Error> {
        let args: Vec<(&str, Arg<'_>)> = args.into_iter().collect();
        Ok(self.function.call_into(args, &*self.program.weights, out, &self.program.compiled.pool)?)
    }

    /// Checks arguments given in parameter order (the call boundary alone,
    /// as `nax run` does before running).
    pub fn check<'a>(&'a self, args: Vec<Arg<'a>>) -> Result<CheckedCall<'a>, Error> {
        Ok(self.signature().check(args, &*self.program.weights)?)
    }

    /// Whether two handles share one compiled function (the engine's cache
    /// gave both the same code).
    pub fn same_code(&self, other: &Function) -> bool {
        Arc::ptr_eq(&self.function, &other.function)
    }

    /// The most iterations any loop nest of this call runs: how long a
    /// call will take, before it runs.
    pub fn work(&self, call: &CheckedCall<'_>) -> Result<u128, Error> {
        Ok(self.function.work(call)?)
    }

    /// Runs a call [`Function::check`] accepted.
    pub fn run(&self, call: &CheckedCall<'_>) -> Result<HostTensor, Error> {
        Ok(self.function.run(call, &self.program.compiled.pool)?)
    }

    /// Runs a call [`Function::check`] accepted: every result, by name.
    pub fn run_results(&self, call: &CheckedCall<'_>) -> Result<Vec<(String, HostTensor)>, Error> {
        let results = self.function.run_results(call, &self.program.compiled.pool)?;
        Ok(self.named(results))
    }
}
