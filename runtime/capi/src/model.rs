//! A model: a library's functions bound to one set of weights and one
//! thread pool, made by `NAME_open` and immutable after it (so any number
//! of threads may call it at once).

use crate::dlpack::{NaxArg, NaxResult};
use crate::library::Library;
use crate::status::Failure;
use crate::tensors::{Refusal, argument, free, result};
use nax_runtime::plan::StoredFunction;
use nax_runtime::{
    Arg, Function, HostTensor, KernelFn, MAX_THREADS, NativeFunction, PackedWeights, Signature, Size, StoredTensor, TensorView, ThreadPool, Weights,
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
    /// Its functions, by name.
    functions: Vec<Function>,
    /// The weights, bound in their declared axis order.
    weights: ModelWeights,
    /// The model's workers.
    pool: ThreadPool,
    /// Declared last: dropped after everything above.
    _counted: Counted,
}

/// A weight as a model holds it.
enum Stored {
    /// Read from a file, or copied out of the embedded ones.
    Owned(HostTensor),
    /// The embedded bytes, in place.
    InPlace(TensorView<'static>),
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

impl Model {
    /// The library's function `name`.
    pub fn function(&self, name: &str) -> Result<&Function, Failure> {
        self.functions.iter().find(|f| f.signature().name == name).ok_or_else(|| {
            let names: Vec<&str> = self.functions.iter().map(|f| f.signature().name.as_str()).collect();
            Failure::argument(format!("library `{}` has no function `{name}` (it has: {})", self.name, names.join(", ")))
        })
    }

    /// Opens `library`: checks the CPU, reads the plans, binds the weights
    /// (from `weights_path`, or the embedded ones when it is NULL), starts
    /// the pool.
    ///
    /// # Safety
    /// `library` describes a generated library (its pointers valid);
    /// `weights_path` is NULL or NUL-terminated.
    pub unsafe fn open(library: &'static Library, weights_path: *const c_char, threads: i32) -> Result<Model, Failure> {
        // SAFETY: the descriptor's strings are static and NUL-terminated.
        let (name, cpu, plans) = unsafe { (Library::text(library.name)?, Library::text(library.cpu)?, Library::text(library.plans)?) };
        if library.layout != crate::library::LAYOUT_VERSION {
            return Err(Failure::internal(format!(
                "library `{name}` was generated for descriptor layout {}, not {}",
                library.layout,
                crate::library::LAYOUT_VERSION
            )));
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
        let threads = usize::try_from(threads)
            .ok()
            .filter(|&t| t <= MAX_THREADS)
            .ok_or_else(|| Failure::argument(format!("`threads` is {threads}: give 0 (one per core) or a count from 1 to {MAX_THREADS}")))?;
        let stored: Vec<StoredFunction> = serde_json::from_str(plans).map_err(|e| Failure::internal(format!("library `{name}`'s plans do not parse: {e}")))?;
        // SAFETY: the descriptor holds `function_count` functions.
        let codes = unsafe { slice(library.functions, library.function_count) };
        let mut functions = Vec::with_capacity(stored.len());
        for f in stored {
            let code = codes
                .iter()
                // SAFETY: the descriptor's names are static NUL-terminated strings.
                .find(|c| unsafe { Library::text(c.name) }.is_ok_and(|n| n == f.name))
                .ok_or_else(|| Failure::internal(format!("library `{name}` has no code for function `{}`", f.name)))?;
            // SAFETY: `count` entry points.
            let entries: Vec<KernelFn> = unsafe { slice(code.entries, code.count) }.to_vec();
            let signature = Arc::new(f.signature);
            // SAFETY: the generated C file lists the function's compiled
            // kernels and microkernels in the plan's order, compiled from the
            // same program as the plan; the code is the library's, alive as
            // long as it is loaded (a model must be closed before that).
            let native = unsafe { NativeFunction::new(Arc::clone(&signature), f.plan, entries, Box::new(())) }
                .map_err(|e| Failure::runtime(&format!("in `{}`", f.name), e))?;
            functions.push(Function::new(signature, Box::new(native)));
        }
        let weights = bind_weights(name, library, weights_path, &functions)?;
        let pool = ThreadPool::new(threads).map_err(|e| Failure::runtime(&format!("opening `{name}`"), e))?;
        Ok(Model { name, functions, weights, pool, _counted: Counted::new() })
    }

    /// Calls `function` with `args`: its results, in declared order.
    ///
    /// # Safety
    /// The arguments' pointers are NULL or valid as ABI.md says.
    pub unsafe fn call(&self, function: &str, args: &[NaxArg]) -> Result<Vec<NaxResult>, Failure> {
        let f = self.function(function)?;
        let signature = f.signature();
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
        let outs = f.call_results(named, &self.weights, &self.pool).map_err(|e| Failure::runtime(&context, e))?;
        let mut results = Vec::with_capacity(outs.len());
        for out in outs {
            match result(out) {
                Ok(r) => results.push(r),
                Err(e) => {
                    // Nothing is handed out on an error: free what was made.
                    results.into_iter().for_each(free);
                    return Err(Failure::runtime(&context, e));
                }
            }
        }
        Ok(results)
    }
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
    let check = |signature: &Signature, spec: &nax_runtime::WeightSpec, dtype: nax_runtime::DType, shape: &[usize]| -> Result<(), Failure> {
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
    };
    // Where the weights come from (named in messages), each tensor as read.
    let (origin, mut tensors): (String, HashMap<String, StoredTensor<'static>>) = if !weights_path.is_null() {
        // SAFETY: NUL-terminated (the caller's contract).
        let bytes = unsafe { CStr::from_ptr(weights_path) }.to_bytes();
        let path = Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(bytes));
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
        check(signature, spec, view.dtype(), view.shape())?;
        bound.insert(spec.name.clone(), stored);
    }
    Ok(ModelWeights(bound, PackedWeights::new()))
}
