//! `nax.compile`, a compiled program (`Module`) and its functions
//! (`Function`), and how a call's Python arguments become the runtime's:
//! positional ones in parameter order, keyword ones by name; `int`,
//! `float` and `bool` (or anything `float()`/`int()` take) for host scalar
//! parameters; a `nax.Tensor` binding by its names; any other tensor
//! (numpy, torch, `__dlpack__`) read in place and binding by position.
//! The GIL is released while a call is checked and run, and while a
//! program compiles.

use crate::dlpack::{Imported, to_host, type_name};
use crate::errors::{error, from_nax};
use crate::sharded::{Distributed, TorchCollectives};
use crate::tensor::Tensor;
use nax::{Arg, Backend, Engine, HostType, ParamType, Scalar, Signature};
use nax_capi::Input;
use nax_runtime::CallBoundary;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A compiled program: its functions as attributes (`m.f(x)`), by
/// subscript (`m["f"]`), and their names in `m.functions`.
#[pyclass(frozen, module = "nax")]
pub struct Module {
    program: nax::Program,
    /// The mesh its functions are split over, when compiled with one.
    distributed: Option<Arc<Distributed>>,
}

/// One function of a compiled program: call it with tensors and host
/// scalars, positionally (in parameter order) or by parameter name; the
/// result is a `nax.Tensor` with the function's result axis names.
#[pyclass(frozen, module = "nax")]
pub struct Function {
    function: nax::Function,
    name: String,
}

/// The back end `backend=` names.
fn backend(name: &str) -> PyResult<Backend> {
    Ok(match name {
        "llvm" => Backend::Llvm,
        "cranelift" => Backend::Cranelift,
        "mlir" => Backend::Mlir,
        "interp" => Backend::Interp,
        "cuda" => Backend::Cuda,
        other => return Err(error(format!("backend '{other}': give \"llvm\" (the default), \"cranelift\", \"mlir\", \"interp\" or \"cuda\""))),
    })
}

/// Weights from a safetensors path, or a dict from name to tensor (copied into nax's memory).
fn weights(program: nax::Program, weights: &Bound<'_, PyAny>) -> PyResult<nax::Program> {
    let py = weights.py();
    if let Ok(dict) = weights.cast::<PyDict>() {
        let mut tensors = Vec::new();
        for (key, value) in dict.iter() {
            let name: String = key.extract().map_err(|_| error(format!("weights: a key is a weight's name, not a {}", type_name(&key))))?;
            let what = format!("weight '{name}'");
            let host = match value.cast::<Tensor>() {
                Ok(t) => to_host(t.borrow().input(&what)?, &what)?,
                Err(_) => to_host(Imported::new(&what, &value)?.input(&what)?, &what)?,
            };
            tensors.push((name, host));
        }
        return py.detach(|| program.with_weights(tensors)).map_err(error);
    }
    let path: PathBuf =
        weights.extract().map_err(|_| error(format!("weights: a path to a safetensors file or a dict of tensors, not a {}", type_name(weights))))?;
    py.detach(|| program.with_weights_file(&path)).map_err(error)
}

/// Compiles a nax program (PYTHON.md).
///
/// `source` is the program's text, or a path to a `.nax` file (a `str`
/// ending in `.nax`, or any `os.PathLike`). `backend` is "llvm" (the
/// default), "cranelift", "mlir", "interp", or "cuda" (the kernels on
/// this machine's NVIDIA GPU, the host tensors copied there and back);
/// `weights` a safetensors file or a dict from weight name to tensor;
/// `threads` the threads each call runs on (0: one per core);
/// `optimize=False` skips the graph rewriting; `check_bounds=True`
/// compiles every load and store with a bounds check (an access outside a
/// buffer fails the call: slower, for finding bugs of nax).
/// With `mesh` (a dict from mesh axis to size, `{"tp": 2}`) and `shard`
/// (a dict from axis name to mesh axis, `{"H": "tp"}`), every function is
/// split over the processes of `torch.distributed`'s default group (or
/// `group`), whose collectives it calls; each rank reads only its blocks
/// of the weights; results are each rank's blocks, or whole with
/// `gather=True` (SHARDING.md).
/// A program that does not check, or that cannot be split as asked,
/// raises `nax.CompileError`; functions compile when first used.
#[pyfunction]
#[pyo3(signature = (source, backend = "llvm", weights = None, threads = 0, optimize = true, check_bounds = false, mesh = None, shard = None, gather = false, group = None))]
#[allow(clippy::too_many_arguments)]
pub fn compile(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    backend: &str,
    weights: Option<&Bound<'_, PyAny>>,
    threads: usize,
    optimize: bool,
    check_bounds: bool,
    mesh: Option<&Bound<'_, PyDict>>,
    shard: Option<&Bound<'_, PyDict>>,
    gather: bool,
    group: Option<&Bound<'_, PyAny>>,
) -> PyResult<Module> {
    crate::errors::guard(|| {
        if threads > nax::MAX_THREADS {
            return Err(error(format!("threads={threads}: give 0 (one per core) or a count from 1 to {}", nax::MAX_THREADS)));
        }
        let mut engine = Engine::new().backend(self::backend(backend)?).optimize(optimize).check_bounds(check_bounds);
        if threads > 0 {
            engine = engine.threads(threads);
        }
        let path: Option<PathBuf> = match source.extract::<String>() {
            Ok(text) if text.ends_with(".nax") && !text.contains('\n') => Some(PathBuf::from(text)),
            Ok(_) => None,
            Err(_) if source.hasattr("__fspath__")? => Some(source.call_method0("__fspath__")?.extract()?),
            Err(_) => return Err(error(format!("source: the program's text or a path to a .nax file, not a {}", type_name(source)))),
        };
        let (text, compiled) = match path {
            Some(path) => {
                let text = std::fs::read_to_string(&path).map_err(|e| error(format!("{}: {e}", path.display())))?;
                let compiled = py.detach(|| engine.compile_file(&path));
                (text, compiled)
            }
            None => {
                let text: String = source.extract()?;
                let compiled = py.detach(|| engine.compile(&text));
                (text, compiled)
            }
        };
        let mut program = compiled.map_err(|e| from_nax(py, &text, e))?;
        let distributed = match (mesh, shard) {
            (None, None) => None,
            (mesh, shard) => {
                let mesh = mesh.map_or_else(|| Ok(Vec::new()), |m| entries(m, "mesh", "a mesh axis's size"))?;
                let shard = shard.map_or_else(|| Ok(Vec::new()), |s| entries(s, "shard", "a mesh axis's name"))?;
                Some(Arc::new(distributed(py, &program, mesh, shard, gather, group, weights)?))
            }
        };
        // A sharded module's functions read their blocks from a file themselves.
        let file_for_ranks = distributed.as_ref().is_some_and(|d| d.weights_file.is_some());
        if let Some(w) = weights.filter(|_| !file_for_ranks) {
            program = self::weights(program, w)?;
        }
        Ok(Module { program, distributed })
    })
}

/// A dict's entries, in order: `str` keys, values of `T` (`what` says
/// which in an error).
fn entries<'py, T: for<'a> FromPyObject<'a, 'py>>(dict: &Bound<'py, PyDict>, argument: &str, what: &str) -> PyResult<Vec<(String, T)>> {
    dict.iter()
        .map(|(k, v)| {
            let key: String = k.extract().map_err(|_| error(format!("{argument}: a key is an axis name (a str), not a {}", type_name(&k))))?;
            let value: T = v.extract().map_err(|_| error(format!("{argument}['{key}']: {what}, not {}", type_name(&v))))?;
            Ok((key, value))
        })
        .collect()
}

/// The mesh, sharding and collectives of a module compiled for a mesh,
/// every function's split checked now (a `nax.CompileError` names what
/// cannot be split).
fn distributed(
    py: Python<'_>,
    program: &nax::Program,
    mesh: Vec<(String, usize)>,
    shard: Vec<(String, String)>,
    gather: bool,
    group: Option<&Bound<'_, PyAny>>,
    weights: Option<&Bound<'_, PyAny>>,
) -> PyResult<Distributed> {
    let compile_error = |e: &dyn std::fmt::Display| crate::errors::CompileError::new_err(e.to_string());
    let mesh = nax::Mesh::new(mesh).map_err(|e| compile_error(&e))?;
    let sharding = nax::Sharding::new(shard).map_err(|e| compile_error(&e))?;
    for name in program.function_names() {
        py.detach(|| program.plan(name, &mesh, &sharding)).map_err(|e| compile_error(&e))?;
    }
    let collectives = Arc::new(TorchCollectives::new(py, &mesh, group)?);
    let weights_file = match weights {
        Some(w) if w.cast::<PyDict>().is_err() => {
            Some(w.extract::<PathBuf>().map_err(|_| error(format!("weights: a path to a safetensors file or a dict of tensors, not a {}", type_name(w))))?)
        }
        _ => None,
    };
    Ok(Distributed { mesh, sharding, gather, collectives, weights_file, made: Default::default() })
}

#[pymethods]
impl Module {
    /// The names of the program's functions.
    #[getter]
    fn functions(&self) -> Vec<String> {
        self.program.function_names().into_iter().map(str::to_string).collect()
    }

    fn __getattr__(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        if !self.program.function_names().contains(&name) {
            return Err(pyo3::exceptions::PyAttributeError::new_err(format!(
                "the program has no function '{}' (functions: {})",
                nax_runtime::shortened(name),
                self.functions().join(", ")
            )));
        }
        self.function(py, name)
    }

    fn __getitem__(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        if !self.program.function_names().contains(&name) {
            return Err(pyo3::exceptions::PyKeyError::new_err(format!(
                "the program has no function '{}' (functions: {})",
                nax_runtime::shortened(name),
                self.functions().join(", ")
            )));
        }
        self.function(py, name)
    }

    /// How many times the module's matrix products packed one of its
    /// weights into their panels: each weight once, at the first call that
    /// reads it, and never again while these weights are bound.
    #[getter]
    fn weight_packings(&self) -> u64 {
        self.program.packed_weights().packings()
    }

    /// The same compiled program with other weights (a safetensors file or
    /// a dict from weight name to tensor, copied; weights not given keep
    /// their tensors): no recompilation, so a training loop rebinds its
    /// updated weights at every step.
    fn with_weights(&self, weights: &Bound<'_, PyAny>) -> PyResult<Module> {
        crate::errors::guard(|| Ok(Module { program: self::weights(self.program.clone(), weights)?, distributed: self.distributed.clone() }))
    }

    /// What `nax plan` prints for the function `name` over the module's
    /// mesh: each rank's sizes, its weights' blocks, every collective and
    /// its bytes per call.
    fn plan(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        let Some(d) = &self.distributed else {
            return Err(error("the module was compiled without a mesh: give nax.compile mesh= and shard="));
        };
        py.detach(|| self.program.plan(name, &d.mesh, &d.sharding)).map_err(error)
    }

    fn __dir__(&self) -> Vec<String> {
        let own = ["functions", "plan", "weight_packings", "with_weights"].map(str::to_string);
        self.functions().into_iter().chain(own).collect()
    }

    fn __repr__(&self) -> String {
        format!("nax.Module(functions={:?})", self.functions())
    }
}

impl Module {
    /// The function `name`, compiled now if it was not (the GIL released):
    /// split for this rank in a module compiled for a mesh.
    fn function(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        if let Some(d) = &self.distributed {
            return Ok(Py::new(py, d.function(py, &self.program, name)?)?.into_any());
        }
        let function = py.detach(|| self.program.function(name)).map_err(error)?;
        Ok(Py::new(py, Function { function, name: name.to_string() })?.into_any())
    }
}

/// A Python argument as the call holds it while it runs.
pub enum Held<'py> {
    /// A host scalar.
    Scalar(Scalar),
    /// A `nax.Tensor` (bound by its names).
    Named(PyRef<'py, Tensor>),
    /// Any other tensor, imported (bound by position).
    Plain(Imported),
}

impl<'py> Held<'py> {
    /// Holds `object`, the argument of parameter `name` (a host scalar of
    /// type `host`, or a tensor).
    pub fn new(name: &str, host: Option<HostType>, object: &Bound<'py, PyAny>) -> PyResult<Held<'py>> {
        let what = format!("argument '{name}'");
        if let Some(host) = host {
            let wrong = |_: PyErr| error(format!("{what}: the parameter is a host {}, not a {}", host.as_str(), type_name(object)));
            // An int outside int64 is an int all the same: say so.
            let out_of_range = |e: PyErr| match object.is_instance_of::<pyo3::types::PyInt>() {
                true => error(format!("{what}: {object} does not fit a host int (a signed 64-bit integer, from -2**63 to 2**63 - 1)")),
                false => wrong(e),
            };
            return Ok(Held::Scalar(match host {
                HostType::Bool => Scalar::Bool(object.extract::<bool>().map_err(wrong)?),
                HostType::Int => Scalar::Int(object.extract::<i64>().map_err(out_of_range)?),
                HostType::Float => Scalar::Float(object.extract::<f64>().map_err(wrong)?),
            }));
        }
        Ok(match object.cast::<Tensor>() {
            Ok(t) => Held::Named(t.borrow()),
            Err(_) => Held::Plain(Imported::new(&what, object)?),
        })
    }

    /// What the runtime reads.
    pub fn input(&self, what: &str) -> PyResult<Input<'_>> {
        match self {
            Held::Scalar(s) => Ok(Input::Scalar(*s)),
            Held::Named(t) => t.input(what),
            Held::Plain(i) => i.input(what),
        }
    }
}

/// A parameter as binding sees it: its name, and its host type if it is a
/// host scalar.
pub type Parameter = (String, Option<HostType>);

/// The parameters of a signature.
pub fn parameters(signature: &Signature) -> Vec<Parameter> {
    signature
        .params
        .iter()
        .map(|p| {
            let host = match p.ty {
                ParamType::Host(h) => Some(h),
                ParamType::Tensor(_) => None,
            };
            (p.name.clone(), host)
        })
        .collect()
}

/// A call's arguments, each with its parameter's name: positional ones in
/// parameter order, then keyword ones (`function` names the callee in errors).
pub fn bind<'py>(function: &str, params: &[Parameter], args: &Bound<'py, PyTuple>, kwargs: Option<&Bound<'py, PyDict>>) -> PyResult<Vec<(String, Held<'py>)>> {
    if args.len() > params.len() {
        return Err(error(format!("{function} takes {} arguments, {} were given", params.len(), args.len())));
    }
    let mut held = Vec::with_capacity(params.len());
    for ((name, host), object) in params.iter().zip(args.iter()) {
        held.push((name.clone(), Held::new(name, *host, &object)?));
    }
    if let Some(kwargs) = kwargs {
        for (key, object) in kwargs.iter() {
            let name: String = key.extract()?;
            let Some((_, host)) = params.iter().find(|(p, _)| *p == name) else {
                let names: Vec<&str> = params.iter().map(|(p, _)| p.as_str()).collect();
                return Err(error(format!("{function} has no parameter '{name}' (parameters: {})", names.join(", "))));
            };
            if held.iter().any(|(n, _)| *n == name) {
                return Err(error(format!("argument '{name}' is given twice")));
            }
            let value = Held::new(&name, *host, &object)?;
            held.push((name, value));
        }
    }
    Ok(held)
}

/// A call's value: the one result's tensor, or for a function of several
/// results (LANGUAGE.md section 14) a named tuple of them, typed
/// `FUNCTION_results`, with the declared names as fields (a name Python
/// cannot take as a field, a keyword or one starting with `_`, becomes
/// `_0`, `_1`, ... by its position, as `namedtuple(rename=True)` does).
pub fn call_value(py: Python<'_>, function: &str, names: &[String], mut tensors: Vec<Tensor>) -> PyResult<Py<PyAny>> {
    if tensors.len() == 1 && names.len() <= 1 {
        return Ok(Py::new(py, tensors.remove(0))?.into_any());
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("rename", true)?;
    let tuple_type = py.import("collections")?.getattr("namedtuple")?.call((format!("{function}_results"), names.to_vec()), Some(&kwargs))?;
    let values = tensors.into_iter().map(|t| Py::new(py, t).map(Py::into_any)).collect::<PyResult<Vec<_>>>()?;
    Ok(tuple_type.call1(PyTuple::new(py, values)?)?.unbind())
}

/// The work (the most iterations of a loop nest) from which a call runs on
/// a thread of its own, so that Ctrl-C reaches it: about 10 ms.
const LONG_CALL_WORK: u128 = 10_000_000;

/// Waits up to 10 ms for `running` to finish; whether it has.
fn wait_for<T>(running: &std::thread::ScopedJoinHandle<'_, T>) -> bool {
    for _ in 0..10 {
        if running.is_finished() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    running.is_finished()
}

/// Whether a call goes through PyTorch's autograd: torch is loaded, its
/// gradients are enabled, and some argument is a torch tensor that
/// requires a gradient.
fn through_autograd(py: Python<'_>, args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<bool> {
    let Ok(torch) = py.import("sys")?.getattr("modules")?.get_item("torch") else { return Ok(false) };
    let requires_grad = |object: Bound<'_, PyAny>| -> PyResult<bool> {
        Ok(object.hasattr("requires_grad")? && object.hasattr("grad_fn")? && object.getattr("requires_grad")?.is_truthy()?)
    };
    let mut any = false;
    for object in args.iter() {
        any |= requires_grad(object)?;
    }
    if let Some(kwargs) = kwargs {
        for (_, object) in kwargs.iter() {
            any |= requires_grad(object)?;
        }
    }
    Ok(any && torch.getattr("is_grad_enabled")?.call0()?.is_truthy()?)
}

#[pymethods]
impl Function {
    /// Calls the function: tensors read in place, the GIL released while it
    /// runs; a `nax.Tensor`, or a named tuple of several results. Called on
    /// torch tensors that require a gradient (with torch's gradients
    /// enabled), the results are torch tensors whose `backward` runs the
    /// function's compiled backward function (`nax._autograd`).
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(slf: &Bound<'_, Self>, args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        if through_autograd(py, args, kwargs)? {
            return Ok(py.import("nax._autograd")?.getattr("call")?.call1((slf, args, kwargs))?.unbind());
        }
        slf.get()._call(py, args, kwargs)
    }

    /// The call itself, whatever its arguments (what `__call__` runs
    /// outside autograd).
    #[pyo3(signature = (*args, **kwargs))]
    fn _call(&self, py: Python<'_>, args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
        crate::errors::guard(|| {
            let signature = self.function.signature();
            let held = bind(&signature.name, &parameters(signature), args, kwargs)?;
            let inputs = held.iter().map(|(name, h)| Ok((name.as_str(), h.input(&format!("argument '{name}'"))?))).collect::<PyResult<Vec<_>>>()?;
            let call: Vec<(&str, Arg<'_>)> = inputs.iter().map(|(name, input)| (*name, input.arg())).collect();
            let ordered = signature.arguments(call).map_err(|e| error(e.to_string()))?;
            let interrupt = AtomicBool::new(false);
            let checked = self.function.check(ordered).map_err(error)?.interruptible(&interrupt);
            let work = self.function.work(&checked).map_err(error)?;
            let result = if work < LONG_CALL_WORK {
                py.detach(|| self.function.run_results(&checked))
            } else {
                // A long call runs on a thread of its own while this one,
                // the GIL released, looks for signals every few
                // milliseconds: Ctrl-C stops the call before its next
                // kernel and raises KeyboardInterrupt.
                std::thread::scope(|scope| {
                    let running = scope.spawn(|| self.function.run_results(&checked));
                    while !py.detach(|| wait_for(&running)) {
                        if let Err(signal) = py.check_signals() {
                            interrupt.store(true, Ordering::Relaxed);
                            let _ = py.detach(|| running.join());
                            return Err(signal);
                        }
                    }
                    running.join().map_err(|_| error("internal error: the call's thread panicked"))
                })?
            };
            let (names, tensors): (Vec<String>, Vec<Tensor>) = result.map_err(error)?.into_iter().map(|(name, t)| (name, Tensor::from_host(t))).unzip();
            call_value(py, &self.name, &names, tensors)
        })
    }

    /// The function's signature, as `nax check --types` prints it.
    #[getter]
    fn signature(&self) -> String {
        self.function.signature().to_string()
    }

    /// The backward function by `names` (float tensor parameters of this
    /// function, or weights), compiled once: called with this function's
    /// arguments and a gradient per float result (`d_NAME`, `d_result` for
    /// an unnamed result), it returns `(value, d_NAME...)`, the value and
    /// the vector-Jacobian product by each name (LANGUAGE.md section 15).
    #[pyo3(signature = (*names))]
    fn backward(&self, py: Python<'_>, names: Vec<String>) -> PyResult<Function> {
        let backward = py.detach(|| self.function.backward(&names)).map_err(error)?;
        Ok(Function { name: backward.signature().name.clone(), function: backward })
    }

    /// The parameters' names, in order.
    #[getter]
    fn _parameters(&self) -> Vec<String> {
        self.function.signature().params.iter().map(|p| p.name.clone()).collect()
    }

    /// The results' declared names (`result` for an unnamed one).
    #[getter]
    fn _result_names(&self) -> Vec<String> {
        self.function.signature().results.iter().map(|r| r.name.clone().unwrap_or_else(|| "result".into())).collect()
    }

    /// For each result, the name of its gradient in the backward function
    /// (`d_NAME`; `d_result` for an unnamed one), or `None` for a result
    /// that is not a float.
    #[getter]
    fn _result_gradients(&self) -> Vec<Option<String>> {
        self.function.signature().results.iter().map(|r| r.ty.dtype.is_float().then(|| format!("d_{}", r.name.as_deref().unwrap_or("result")))).collect()
    }

    fn __repr__(&self) -> String {
        format!("<nax function {}>", self.function.signature())
    }

    /// The function's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }
}
