//! A model: a library's functions bound to one set of weights and one
//! thread pool, made by `NAME_open` (or, for a library split over a mesh,
//! by `NAME_open_sharded` with the host's collectives: the rank's part of
//! each function and its blocks of the weights) and immutable after it
//! (so any number of threads may call a whole model at once).

use crate::collectives::{HostCollectives, NaxCollectives};
use crate::dlpack::{NaxArg, NaxShardResult};
use crate::library::Library;
use crate::status::Failure;
use crate::tensors::{Refusal, argument, free, result};
use nax_contract::plan::{LIBRARY_LAYOUT, StoredLibrary};
use nax_contract::shard::Split;
use nax_runtime::plan::StoredFunction;
use nax_runtime::{
    Arg, Function, HostTensor, KernelFn, MAX_THREADS, NativeFunction, PackedWeights, ShardedFunction, ShardedResult, Signature, Size, StoredTensor, TensorFile,
    TensorView, ThreadPool, Weights, mesh_coordinates, read_block,
};
use std::collections::HashMap;
use std::ffi::{CStr, c_char};
use std::path::Path;
use std::sync::Arc;

/// How many models are open (the allocator's kept blocks are released
/// when the last one closes).
static OPEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One open model, counted in [`OPEN`]; the last one dropped returns the
/// allocator's kept blocks to the system.
struct Counted;

impl Counted {
    fn new() -> Counted {
        OPEN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Counted
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if OPEN.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            crate::allocator::release_cache();
        }
    }
}

/// An opened library: `NAME_model` in C. Its fields drop in order, so
/// everything the model holds is freed (the pool's workers joined, their
/// scratch freed) before it stops being counted.
pub struct Model {
    /// The library's NAME, for messages.
    name: &'static str,
    /// Its functions and their weights.
    functions: Functions,
    /// The model's workers.
    pool: ThreadPool,
    /// Declared last: dropped after everything above.
    _counted: Counted,
}

/// A model's functions, as its library was built.
enum Functions {
    /// Compiled whole (`NAME_open`), bound to one set of weights in their
    /// declared axis order.
    Whole { functions: Vec<Function>, weights: ModelWeights },
    /// Each split over the library's mesh (`NAME_open_sharded`), with the
    /// rank's blocks of the weights; `gather`: every result whole.
    Sharded { functions: Vec<(ShardedFunction, ModelWeights)>, gather: bool },
}

/// A weight as a model holds it.
enum Stored {
    /// Read from a file, or copied out of the embedded ones.
    Owned(HostTensor),
    /// The embedded bytes, in place.
    InPlace(TensorView<'static>),
    /// A rank's block, which several functions of a sharded library may read.
    Block(Arc<HostTensor>),
}

/// The model's weights by name, and the panels its matrix products packed
/// from them (each weight once, at the first call that reads it).
struct ModelWeights(HashMap<String, Stored>, PackedWeights);

impl Stored {
    /// The weight as a view, wherever it is.
    fn view(&self) -> TensorView<'_> {
        match self {
            Stored::Owned(t) => t.view(),
            Stored::InPlace(v) => v.clone(),
            Stored::Block(t) => t.view(),
        }
    }
}

impl Weights for ModelWeights {
    fn weight(&self, name: &str) -> Option<TensorView<'_>> {
        self.0.get(name).map(Stored::view)
    }

    fn packed(&self) -> Option<&PackedWeights> {
        Some(&self.1)
    }
}

/// How `NAME_open_sharded` opens a model: `nax_shard_options`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ShardOptions {
    /// As `NAME_open`'s `threads`.
    pub threads: i32,
    /// Nonzero: every result whole on every rank; 0: each rank's block.
    pub gather: i32,
}

/// One function of a model with the weights it reads.
enum Callee<'a> {
    Whole(&'a Function, &'a ModelWeights),
    /// `gather`: every result whole.
    Sharded(&'a ShardedFunction, &'a ModelWeights, bool),
}

impl<'a> Callee<'a> {
    fn signature(&self) -> &'a Signature {
        match self {
            Callee::Whole(f, _) => f.signature(),
            Callee::Sharded(f, _, _) => f.signature(),
        }
    }
}

impl Model {
    /// The library's function `name`, with its weights.
    fn function(&self, name: &str) -> Result<Callee<'_>, Failure> {
        let mut callees: Vec<Callee<'_>> = match &self.functions {
            Functions::Whole { functions, weights } => functions.iter().map(|f| Callee::Whole(f, weights)).collect(),
            Functions::Sharded { functions, gather } => functions.iter().map(|(f, weights)| Callee::Sharded(f, weights, *gather)).collect(),
        };
        match callees.iter().position(|c| c.signature().name == name) {
            Some(at) => Ok(callees.swap_remove(at)),
            None => {
                let names: Vec<&str> = callees.iter().map(|c| c.signature().name.as_str()).collect();
                Err(Failure::argument(format!("library `{}` has no function `{name}` (it has: {})", self.name, names.join(", "))))
            }
        }
    }

    /// The signature of the library's function `name`.
    pub fn signature(&self, name: &str) -> Result<&Signature, Failure> {
        self.function(name).map(|c| c.signature())
    }

    /// Opens `library`, built whole: checks the CPU, reads the plans, binds
    /// the weights (from `weights_path`, or the embedded ones when it is
    /// NULL), starts the pool.
    ///
    /// # Safety
    /// `library` describes a generated library (its pointers valid);
    /// `weights_path` is NULL or NUL-terminated.
    pub unsafe fn open(library: &'static Library, weights_path: *const c_char, threads: i32) -> Result<Model, Failure> {
        // SAFETY: the caller's contract.
        let (name, stored) = unsafe { described(library) }?;
        let stored = match stored {
            StoredLibrary::Whole(stored) => stored,
            StoredLibrary::Sharded(functions) => {
                let mesh = functions.first().map_or_else(String::new, |f| format!(" (mesh {}, split {})", f.plan.mesh, f.plan.sharding));
                return Err(Failure::argument(format!(
                    "library `{name}` was built split over processes{mesh}: open it with {name}_open_sharded and the host's collectives"
                )));
            }
        };
        let pool = pool(name, threads)?;
        let mut functions = Vec::with_capacity(stored.len());
        for f in stored {
            // SAFETY: as above.
            functions.push(unsafe { native(library, name, f) }?);
        }
        let weights = bind_weights(name, library, weights_path, &functions)?;
        Ok(Model { name, functions: Functions::Whole { functions, weights }, pool, _counted: Counted::new() })
    }

    /// Opens `library`, built split over a mesh, as the rank of the host's
    /// `collectives`: checks the CPU, reads the plans, reads the rank's
    /// blocks of the weights (from `weights_path`, each block alone, or
    /// the embedded ones), starts the pool.
    ///
    /// # Safety
    /// As [`Model::open`]; `collectives`' functions are callable as the
    /// ABI says.
    pub unsafe fn open_sharded(
        library: &'static Library,
        weights_path: *const c_char,
        options: ShardOptions,
        collectives: &NaxCollectives,
    ) -> Result<Model, Failure> {
        // SAFETY: the caller's contract.
        let (name, stored) = unsafe { described(library) }?;
        let StoredLibrary::Sharded(stored) = stored else {
            return Err(Failure::argument(format!(
                "library `{name}` was built whole: open it with {name}_open (build it with `nax build --mesh ... --shard ...` to split it over processes)"
            )));
        };
        // SAFETY: the caller's contract.
        let engine = Arc::new(unsafe { HostCollectives::new(collectives) }?);
        let pool = pool(name, options.threads)?;
        let mut functions = Vec::with_capacity(stored.len());
        for f in stored {
            let processes = f.plan.mesh.processes();
            if processes != nax_runtime::Collectives::size(&*engine) {
                return Err(Failure::argument(format!(
                    "library `{name}` was built for the mesh {} of {processes} processes, but the host's engine has {}",
                    f.plan.mesh,
                    nax_runtime::Collectives::size(&*engine)
                )));
            }
            let mut stages = Vec::with_capacity(f.stages.len());
            for stage in f.stages {
                // SAFETY: as above.
                stages.push(unsafe { native(library, name, stage) }?);
            }
            let function = ShardedFunction::new(Arc::new(f.signature), f.plan, stages, Arc::clone(&engine) as Arc<dyn nax_runtime::Collectives>)
                .map_err(|e| Failure::runtime(&format!("in `{}`", f.name), e))?;
            functions.push(function);
        }
        let weights = rank_weights(name, library, weights_path, &functions)?;
        let functions = functions.into_iter().zip(weights).collect();
        Ok(Model { name, functions: Functions::Sharded { functions, gather: options.gather != 0 }, pool, _counted: Counted::new() })
    }

    /// Calls `function` with `args`: its results, in declared order, each
    /// with where it lies (a rank's block of a sharded function's result;
    /// the whole result otherwise).
    ///
    /// # Safety
    /// The arguments' pointers are NULL or valid as ABI.md says.
    pub unsafe fn call(&self, function: &str, args: &[NaxArg]) -> Result<Vec<NaxShardResult>, Failure> {
        let callee = self.function(function)?;
        let signature = callee.signature();
        let context = format!("in `{function}`");
        let mut inputs = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            // SAFETY: the caller's contract.
            inputs.push(unsafe { argument(signature, i, a) }.map_err(|refused| match refused {
                Refusal::Memory(m) => Failure::memory(format!("{context}: {m}")),
                Refusal::Invalid(m) => Failure::argument(format!("{context}: {m}")),
            })?);
        }
        let named: Vec<(&str, Arg<'_>)> = inputs.iter().map(|(name, input)| (*name, input.arg())).collect();
        // Each result with where it lies (a whole function's: everywhere).
        let outs: Vec<ShardedResult> = match callee {
            Callee::Whole(f, weights) => {
                let results = f.call_results(named, weights, &self.pool).map_err(|e| Failure::runtime(&context, e))?;
                results.into_iter().map(|tensor| ShardedResult { offsets: vec![0; tensor.rank()], global_shape: tensor.shape().to_vec(), tensor }).collect()
            }
            Callee::Sharded(f, weights, gather) => f.call_results(named, weights, &self.pool, gather).map_err(|e| Failure::runtime(&context, e))?,
        };
        let mut results = Vec::with_capacity(outs.len());
        for out in outs {
            match result(out.tensor, &out.offsets, &out.global_shape) {
                Ok(r) => results.push(r),
                Err(e) => {
                    // Nothing is handed out on an error: free what was made.
                    results.into_iter().for_each(|r| free(r.result));
                    return Err(Failure::runtime(&context, e));
                }
            }
        }
        Ok(results)
    }
}

/// The library's name and functions as its descriptor gives them, after
/// checking its layout and that this CPU has the features its kernels
/// were compiled for.
///
/// # Safety
/// `library` describes a generated library (its pointers valid).
unsafe fn described(library: &'static Library) -> Result<(&'static str, StoredLibrary), Failure> {
    // SAFETY: the descriptor's strings are static and NUL-terminated.
    let (name, cpu, plans) = unsafe { (Library::text(library.name)?, Library::text(library.cpu)?, Library::text(library.plans)?) };
    if library.layout != LIBRARY_LAYOUT {
        return Err(Failure::internal(format!("library `{name}` was generated for descriptor layout {}, not {LIBRARY_LAYOUT}", library.layout)));
    }
    let needed: Vec<&str> = cpu.split(',').filter(|f| !f.is_empty()).collect();
    let missing = nax_contract::Machine::host().missing(needed.iter().copied());
    if !missing.is_empty() {
        return Err(Failure {
            code: crate::status::CPU,
            message: format!(
                "library `{name}` was compiled for CPU features this machine lacks: {} (rebuild it with `nax build --cpu generic`, or for this machine)",
                missing.join(", ")
            ),
        });
    }
    let stored = serde_json::from_str(plans).map_err(|e| Failure::internal(format!("library `{name}`'s plans do not parse: {e}")))?;
    Ok((name, stored))
}

/// The model's pool of `threads` workers (0: one per core).
fn pool(name: &str, threads: i32) -> Result<ThreadPool, Failure> {
    let threads = usize::try_from(threads)
        .ok()
        .filter(|&t| t <= MAX_THREADS)
        .ok_or_else(|| Failure::argument(format!("`threads` is {threads}: give 0 (one per core) or a count from 1 to {MAX_THREADS}")))?;
    ThreadPool::new(threads).map_err(|e| Failure::runtime(&format!("opening `{name}`"), e))
}

/// A stored function (a whole function, or a stage of a sharded one) with
/// its compiled code from the library.
///
/// # Safety
/// `library` describes a generated library (its pointers valid).
unsafe fn native(library: &'static Library, name: &str, f: StoredFunction) -> Result<Function, Failure> {
    // SAFETY: the descriptor holds `function_count` functions.
    let codes = unsafe { slice(library.functions, library.function_count) };
    let code = codes
        .iter()
        // SAFETY: the descriptor's names are static NUL-terminated strings.
        .find(|c| unsafe { Library::text(c.name) }.is_ok_and(|n| n == f.name))
        .ok_or_else(|| Failure::internal(format!("library `{name}` has no code for function `{}`", f.name)))?;
    // SAFETY: `count` entry points.
    let entries: Vec<KernelFn> = unsafe { slice(code.entries, code.count) }.to_vec();
    let signature = Arc::new(f.signature);
    // SAFETY: the generated C file lists the function's compiled kernels
    // and microkernels in the plan's order, compiled from the same program
    // as the plan; the code is the library's, alive as long as it is
    // loaded (a model must be closed before that).
    let native =
        unsafe { NativeFunction::new(Arc::clone(&signature), f.plan, entries, Box::new(())) }.map_err(|e| Failure::runtime(&format!("in `{}`", f.name), e))?;
    Ok(Function::new(signature, Box::new(native)))
}

/// `count` elements at `p` (none when `count` is 0, whatever `p` is).
///
/// # Safety
/// When `count` > 0, `p` points to `count` initialised elements alive for `'a`.
unsafe fn slice<'a, T>(p: *const T, count: usize) -> &'a [T] {
    if count == 0 || p.is_null() {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(p, count) }
}

/// Every weight the functions read, bound by name in its declared axis
/// order from `weights_path` (or the embedded file), and checked against
/// its declared dtype, rank and constant sizes.
fn bind_weights(name: &str, library: &'static Library, weights_path: *const c_char, functions: &[Function]) -> Result<ModelWeights, Failure> {
    let mut specs: Vec<(&Signature, &nax_runtime::WeightSpec)> = Vec::new();
    for f in functions {
        for w in &f.signature().weights {
            if !specs.iter().any(|(_, s)| s.name == w.name) {
                specs.push((f.signature(), w));
            }
        }
    }
    // Where the weights come from (named in messages), each tensor as read.
    let (origin, mut tensors): (String, HashMap<String, StoredTensor<'static>>) = if !weights_path.is_null() {
        // SAFETY: NUL-terminated (the caller's contract).
        let path = path_of(unsafe { CStr::from_ptr(weights_path) });
        let tensors = nax_runtime::read_tensors(path).map_err(|e| Failure::weights(e.to_string()))?;
        (format!("'{}'", path.display()), tensors.into_iter().map(|(n, t)| (n, StoredTensor::Copied(t))).collect())
    } else if !library.weights.is_null() {
        // SAFETY: the embedded file: `weights_len` static bytes.
        let bytes: &'static [u8] = unsafe { slice(library.weights, library.weights_len) };
        let origin = format!("{name}'s embedded weights");
        let tensors = nax_runtime::read_tensors_in_place(bytes, Path::new(&origin)).map_err(|e| Failure::weights(e.to_string()))?;
        (origin, tensors.into_iter().collect())
    } else if let Some((signature, spec)) = specs.first() {
        return Err(Failure::weights(format!(
            "library `{name}` has no embedded weights and `{}` reads weight '{}': pass a safetensors file to {name}_open",
            signature.name, spec.name
        )));
    } else {
        return Ok(ModelWeights(HashMap::new(), PackedWeights::new()));
    };
    let mut bound = HashMap::new();
    for (signature, spec) in specs {
        let t =
            tensors.remove(&spec.name).ok_or_else(|| Failure::weights(format!("{origin} has no tensor '{}', a weight of `{}`", spec.name, signature.name)))?;
        let in_origin = |e| Failure::weights(format!("in {origin}: {e}"));
        let stored = match t {
            // Kept in place when binding leaves it contiguous, else copied once.
            StoredTensor::InPlace(view) => {
                let view = nax_runtime::bind(&spec.name, &spec.ty.names(), &view).map_err(in_origin)?;
                if view.is_contiguous() { Stored::InPlace(view) } else { Stored::Owned(view.to_host().map_err(|e| Failure::runtime(&origin, e))?) }
            }
            StoredTensor::Copied(t) => Stored::Owned(nax_runtime::bind_owned(&spec.name, &spec.ty.names(), t).map_err(in_origin)?),
        };
        let view = stored.view();
        check_weight(signature, spec, view.dtype(), view.shape())?;
        bound.insert(spec.name.clone(), stored);
    }
    Ok(ModelWeights(bound, PackedWeights::new()))
}

/// Refuses a weight (or a rank's block of one) whose dtype, rank or
/// constant sizes are not those `signature` declares for it.
fn check_weight(signature: &Signature, spec: &nax_runtime::WeightSpec, dtype: nax_runtime::DType, shape: &[usize]) -> Result<(), Failure> {
    let declared = spec.ty.display(&signature.sizes);
    let wrong = |what: String| Failure::weights(format!("weight '{}' (declared {declared}, read by `{}`): {what}", spec.name, signature.name));
    if dtype != spec.ty.dtype {
        return Err(wrong(format!("the file gives dtype {}", dtype.as_str())));
    }
    if shape.len() != spec.ty.axes.len() {
        return Err(wrong(format!("the file gives rank {}", shape.len())));
    }
    for (axis, &n) in spec.ty.axes.iter().zip(shape) {
        if let Size::Const(c) = signature.sizes.resolve(axis.size)
            && c != n as u64
        {
            let which = axis.name.as_deref().map_or_else(|| "an unnamed axis".to_string(), |a| format!("axis '{}'", nax_runtime::shortened(a)));
            return Err(wrong(format!("{which} has size {n} in the file, expected {c}")));
        }
    }
    Ok(())
}

/// Each sharded function's weights: the rank's block of every weight its
/// plan binds, read once however many functions bind the same block (from
/// `weights_path` or the embedded weights, each block alone), and
/// checked against the rank's declared blocks.
fn rank_weights(name: &str, library: &'static Library, weights_path: *const c_char, functions: &[ShardedFunction]) -> Result<Vec<ModelWeights>, Failure> {
    let reads_weights = functions.iter().any(|f| !f.plan().weights.is_empty());
    let (origin, source) = if !reads_weights {
        (String::new(), None)
    } else if !weights_path.is_null() {
        // SAFETY: NUL-terminated (the caller's contract).
        let path = path_of(unsafe { CStr::from_ptr(weights_path) });
        (format!("'{}'", path.display()), Some(TensorFile::open(path).map_err(|e| Failure::weights(e.to_string()))?))
    } else if !library.weights.is_null() {
        // SAFETY: the embedded file: `weights_len` static bytes.
        let bytes: &'static [u8] = unsafe { slice(library.weights, library.weights_len) };
        let origin = format!("{name}'s embedded weights");
        let file = TensorFile::in_memory(bytes, Path::new(&origin)).map_err(|e| Failure::weights(e.to_string()))?;
        (origin, Some(file))
    } else {
        let f = functions.iter().find(|f| !f.plan().weights.is_empty()).map_or("", |f| f.signature().name.as_str());
        return Err(Failure::weights(format!(
            "library `{name}` has no embedded weights and `{f}` reads weights: pass a safetensors file to {name}_open_sharded"
        )));
    };
    let mut read: HashMap<(String, Vec<Option<Split>>), Arc<HostTensor>> = HashMap::new();
    let mut out = Vec::with_capacity(functions.len());
    for f in functions {
        let coordinates = mesh_coordinates(f.plan(), f.rank()).map_err(|e| Failure::runtime("opening", e))?;
        let signature = f.signature();
        let mut bound = HashMap::new();
        for block in &f.plan().weights {
            let key = (block.source.clone(), block.splits.clone());
            let tensor = match (read.get(&key), &source) {
                (Some(t), _) => Arc::clone(t),
                (None, Some(file)) => {
                    let t = read_block(file, block, &coordinates).map_err(|e| Failure::weights(format!("in {origin}: {e}")))?;
                    let t =
                        Arc::new(t.ok_or_else(|| Failure::weights(format!("{origin} has no tensor '{}', a weight of `{}`", block.source, signature.name)))?);
                    read.insert(key, Arc::clone(&t));
                    t
                }
                (None, None) => return Err(Failure::internal("a weight to read with no weights")),
            };
            if let Some(spec) = signature.weights.iter().find(|w| w.name == block.name) {
                check_weight(signature, spec, tensor.dtype(), tensor.shape())?;
            }
            bound.insert(block.name.clone(), Stored::Block(tensor));
        }
        out.push(ModelWeights(bound, PackedWeights::new()));
    }
    Ok(out)
}

/// A path given as C bytes.
fn path_of(bytes: &CStr) -> &Path {
    Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(bytes.to_bytes()))
}
