//! `nax.load`: an AOT library built by `nax build --emit so` (ABI.md),
//! opened with its weights and called through its C ABI: `NAME_open`,
//! `NAME_manifest` (the functions and their parameters), `NAME_call` with
//! DLPack tensors and axis names, `NAME_last_error` for the message of a
//! failure, `NAME_close` when the `Library` is dropped. Arguments bind as
//! a compiled module's do; a result is the library's DLPack tensor taken
//! over without a copy (its deleter runs when the `nax.Tensor` goes).

use crate::dlpack::Imported;
use crate::errors::error;
use crate::module::{Held, Parameter, bind};
use crate::tensor::Tensor;
use nax_capi::{DLDevice, DLTensor, Input, NaxArg, NaxResult, dl_dtype};
use nax_runtime::{DType, HostType, Scalar};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::Arc;

type Open = unsafe extern "C" fn(*const c_char, i32, *mut *mut c_void) -> c_int;
type Close = unsafe extern "C" fn(*mut c_void);
type Call = unsafe extern "C" fn(*mut c_void, *const c_char, *const NaxArg, usize, *mut NaxResult) -> c_int;
type CallN = unsafe extern "C" fn(*mut c_void, *const c_char, *const NaxArg, usize, *mut NaxResult, usize) -> c_int;
type Text = unsafe extern "C" fn() -> *const c_char;

/// An opened library: its code, one model (its functions bound to the
/// weights), and its functions' parameters from the manifest.
struct Opened {
    model: *mut c_void,
    close: Close,
    call: Call,
    /// `NAME_call_n` (absent from libraries built before it existed).
    call_n: Option<CallN>,
    last_error: Text,
    functions: Vec<LibraryEntry>,
    /// Declared last: unloaded after the model is closed.
    _library: libloading::Library,
}

// SAFETY: ABI.md: a model may be called from several threads at once, and
// closed from any thread once no call runs (the `Arc` guarantees that).
unsafe impl Send for Opened {}
// SAFETY: as above.
unsafe impl Sync for Opened {}

impl Drop for Opened {
    fn drop(&mut self) {
        // SAFETY: the model came from `NAME_open` and is closed once.
        unsafe { (self.close)(self.model) };
    }
}

/// An AOT library opened with its weights (`nax.load`): its functions as
/// attributes and by subscript, like a compiled module's.
#[pyclass(frozen, module = "nax")]
pub struct Library {
    opened: Arc<Opened>,
    path: PathBuf,
}

/// One function of an opened library.
#[pyclass(frozen, module = "nax")]
pub struct LibraryFunction {
    opened: Arc<Opened>,
    name: String,
}

/// The library's name: `NAME` of `libNAME.so`.
fn library_name(path: &Path) -> PyResult<String> {
    let file = path.file_name().and_then(|f| f.to_str()).unwrap_or_default();
    file.strip_prefix("lib")
        .and_then(|f| f.strip_suffix(".so"))
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .ok_or_else(|| error(format!("{}: a nax library's file is named libNAME.so", path.display())))
}

/// A function of a library, from its manifest.
#[derive(Clone)]
struct LibraryEntry {
    name: String,
    params: Vec<Parameter>,
    /// Its results' names, in order.
    results: Vec<String>,
}

/// The functions, parameters and results of a manifest (ABI.md's JSON).
fn manifest_functions(text: &str) -> Option<Vec<LibraryEntry>> {
    let manifest: serde_json::Value = serde_json::from_str(text).ok()?;
    manifest["functions"]
        .as_array()?
        .iter()
        .map(|f| {
            let params = f["params"]
                .as_array()?
                .iter()
                .map(|p| {
                    let host = match p["host"].as_str() {
                        None => None,
                        Some("int") => Some(HostType::Int),
                        Some("float") => Some(HostType::Float),
                        Some("bool") => Some(HostType::Bool),
                        Some(_) => return None,
                    };
                    Some((p["name"].as_str()?.to_string(), host))
                })
                .collect::<Option<Vec<_>>>()?;
            // A manifest without "results" (an older library) has one result.
            let results = match f["results"].as_array() {
                Some(results) => results.iter().map(|r| r["name"].as_str().map(str::to_string)).collect::<Option<Vec<_>>>()?,
                None => vec!["result".to_string()],
            };
            Some(LibraryEntry { name: f["name"].as_str()?.to_string(), params, results })
        })
        .collect()
}

/// Opens an AOT library built by `nax build --emit so` (ABI.md), with the
/// weights of a safetensors file (`None`: the library's embedded weights,
/// or none needed) and `threads` threads per call (0: one per core).
#[pyfunction]
#[pyo3(signature = (path, weights = None, threads = 0))]
pub fn load(py: Python<'_>, path: PathBuf, weights: Option<PathBuf>, threads: i32) -> PyResult<Library> {
    crate::errors::guard(|| {
        let name = library_name(&path)?;
        let shown = path.display().to_string();
        // SAFETY: loading runs the library's initialisers: a nax library has
        // none beyond the C runtime's.
        let library = unsafe { libloading::Library::new(&path) }.map_err(|e| error(format!("{shown}: {e}")))?;
        let symbol = |what: &str| format!("{name}_{what}");
        // SAFETY: ABI.md fixes each entry's C signature.
        let (open, close, call, last_error, manifest) = unsafe {
            let get = |what: &str| error(format!("{shown}: no {} (not a nax library named {name}?)", symbol(what)));
            (
                *library.get::<Open>(symbol("open").as_bytes()).map_err(|_| get("open"))?,
                *library.get::<Close>(symbol("close").as_bytes()).map_err(|_| get("close"))?,
                *library.get::<Call>(symbol("call").as_bytes()).map_err(|_| get("call"))?,
                *library.get::<Text>(symbol("last_error").as_bytes()).map_err(|_| get("last_error"))?,
                *library.get::<Text>(symbol("manifest").as_bytes()).map_err(|_| get("manifest"))?,
            )
        };
        // SAFETY: the manifest is static NUL-terminated text.
        let text = unsafe { CStr::from_ptr(manifest()) }.to_string_lossy().into_owned();
        let functions = manifest_functions(&text).ok_or_else(|| error(format!("{shown}: its manifest is not ABI.md's: {text}")))?;
        let weights = weights.map(|w| CString::new(w.to_string_lossy().as_bytes())).transpose().map_err(|_| error("weights: the path holds a NUL byte"))?;
        let mut model: *mut c_void = std::ptr::null_mut();
        let weights_ptr = weights.as_ref().map_or(std::ptr::null(), |w| w.as_ptr()) as usize;
        let model_at = &mut model as *mut *mut c_void as usize;
        // SAFETY: the path is NUL-terminated or NULL; `model` receives the handle.
        let status = py.detach(|| unsafe { open(weights_ptr as *const c_char, threads, model_at as *mut *mut c_void) });
        if status != 0 {
            // SAFETY: this thread's last error, NUL-terminated.
            let message = unsafe { CStr::from_ptr(last_error()) }.to_string_lossy().into_owned();
            return Err(error(format!("{shown}: {message}")));
        }
        // SAFETY: ABI.md fixes the entry's C signature.
        let call_n = unsafe { library.get::<CallN>(symbol("call_n").as_bytes()) }.ok().map(|f| *f);
        let opened = Opened { model, close, call, call_n, last_error, functions, _library: library };
        Ok(Library { opened: Arc::new(opened), path })
    })
}

impl Library {
    fn function(&self, name: &str) -> Option<LibraryFunction> {
        self.opened.functions.iter().any(|f| f.name == name).then(|| LibraryFunction { opened: Arc::clone(&self.opened), name: name.to_string() })
    }

    fn names(&self) -> Vec<String> {
        self.opened.functions.iter().map(|f| f.name.clone()).collect()
    }
}

#[pymethods]
impl Library {
    /// The names of the library's functions.
    #[getter]
    fn functions(&self) -> Vec<String> {
        self.names()
    }

    fn __getattr__(&self, name: &str) -> PyResult<LibraryFunction> {
        self.function(name).ok_or_else(|| {
            pyo3::exceptions::PyAttributeError::new_err(format!("the library has no function '{name}' (functions: {})", self.names().join(", ")))
        })
    }

    fn __getitem__(&self, name: &str) -> PyResult<LibraryFunction> {
        self.function(name)
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(format!("the library has no function '{name}' (functions: {})", self.names().join(", "))))
    }

    fn __repr__(&self) -> String {
        format!("nax.Library({:?}, functions={:?})", self.path.display().to_string(), self.names())
    }
}

/// One argument as the C ABI takes it, with the memory its pointers use.
struct CArgument {
    name: CString,
    tensor: DLTensor,
    shape: Vec<i64>,
    strides: Vec<i64>,
    axes: Vec<CString>,
    axis_pointers: Vec<*const c_char>,
    scalar: [u8; 8],
}

/// A call's arguments for `NAME_call`, pointers into `arguments`.
struct CCall {
    arguments: Vec<CArgument>,
    args: Vec<NaxArg>,
}

// SAFETY: the pointers address memory the calling thread keeps alive, only
// read by the library during the call.
unsafe impl Send for CCall {}

impl CArgument {
    fn new(name: &str, input: &Input<'_>) -> PyResult<CArgument> {
        let name = CString::new(name).map_err(|_| error("a parameter name holds a NUL byte"))?;
        let empty = DLTensor {
            data: std::ptr::null_mut(),
            device: DLDevice { device_type: 1, device_id: 0 },
            ndim: 0,
            dtype: dl_dtype(DType::F64),
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        let mut argument = CArgument { name, tensor: empty, shape: vec![], strides: vec![], axes: vec![], axis_pointers: vec![], scalar: [0; 8] };
        let view = match input {
            Input::Scalar(s) => {
                let dtype = match *s {
                    Scalar::Float(_) => DType::F64,
                    Scalar::Int(_) => DType::I64,
                    Scalar::Bool(_) => DType::Bool,
                };
                argument.tensor.dtype = dl_dtype(dtype);
                argument.scalar = s.to_ne_bytes();
                return Ok(argument);
            }
            Input::View(v) => v.clone(),
            Input::Copied(t) => t.view(),
        };
        argument.tensor.data = view.as_ptr().cast_mut().cast();
        argument.tensor.dtype = dl_dtype(view.dtype());
        argument.tensor.ndim = view.rank() as i32;
        argument.shape = view.shape().iter().map(|&n| n as i64).collect();
        argument.strides = view.strides().iter().map(|&s| s as i64).collect();
        for name in view.names() {
            argument.axes.push(CString::new(name.clone().unwrap_or_default()).map_err(|_| error("an axis name holds a NUL byte"))?);
        }
        Ok(argument)
    }
}

impl CCall {
    /// The C arguments, once every owned part has its final address.
    fn new(mut arguments: Vec<CArgument>, named: &[Vec<bool>]) -> CCall {
        let mut args = Vec::with_capacity(arguments.len());
        for (a, named) in arguments.iter_mut().zip(named) {
            a.tensor.shape = a.shape.as_mut_ptr();
            a.tensor.strides = if a.strides.is_empty() { std::ptr::null_mut() } else { a.strides.as_mut_ptr() };
            if a.tensor.data.is_null() {
                a.tensor.data = a.scalar.as_mut_ptr().cast();
            }
            a.axis_pointers = a.axes.iter().zip(named).map(|(n, &is)| if is { n.as_ptr() } else { std::ptr::null() }).collect();
            let axes = if a.axis_pointers.is_empty() { std::ptr::null() } else { a.axis_pointers.as_ptr() };
            args.push(NaxArg { name: a.name.as_ptr(), tensor: &a.tensor, axes, capacity: 0 });
        }
        CCall { arguments, args }
    }
}

#[pymethods]
impl LibraryFunction {
    /// Calls the library's function (the GIL released while it runs): a
    /// `nax.Tensor`, or a named tuple of several results.
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(&self, py: Python<'_>, args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
        crate::errors::guard(|| {
            let entry = self.opened.functions.iter().find(|f| f.name == self.name).cloned().ok_or_else(|| error(format!("no function '{}'", self.name)))?;
            let held: Vec<(String, Held<'_>)> = bind(&self.name, &entry.params, args, kwargs)?;
            let inputs = held.iter().map(|(name, h)| Ok((name.as_str(), h.input(&format!("argument '{name}'"))?))).collect::<PyResult<Vec<_>>>()?;
            let mut arguments = Vec::with_capacity(inputs.len());
            let mut named = Vec::with_capacity(inputs.len());
            for (name, input) in &inputs {
                arguments.push(CArgument::new(name, input)?);
                named.push(match input {
                    Input::View(v) => v.names().iter().map(Option::is_some).collect(),
                    Input::Copied(t) => t.names().iter().map(Option::is_some).collect(),
                    Input::Scalar(_) => vec![],
                });
            }
            let call = CCall::new(arguments, &named);
            let function = CString::new(self.name.as_str()).map_err(|_| error("a function name holds a NUL byte"))?;
            let opened = &self.opened;
            let count = entry.results.len();
            let call_n = match (count, opened.call_n) {
                (1, _) => None,
                (_, Some(call_n)) => Some(call_n),
                (_, None) => return Err(error(format!("`{}` has {count} results but the library has no NAME_call_n", self.name))),
            };
            let (status, results, message) = py.detach(|| {
                let call = call;
                let mut results: Vec<NaxResult> = (0..count).map(|_| NaxResult { tensor: std::ptr::null_mut(), axes: std::ptr::null() }).collect();
                // SAFETY: every pointer addresses memory `call` and the inputs
                // keep alive for the call; the model is open; `results` holds
                // the function's count of results.
                let status = unsafe {
                    match call_n {
                        None => (opened.call)(opened.model, function.as_ptr(), call.args.as_ptr(), call.args.len(), results.as_mut_ptr()),
                        Some(call_n) => call_n(opened.model, function.as_ptr(), call.args.as_ptr(), call.args.len(), results.as_mut_ptr(), count),
                    }
                };
                // SAFETY: this thread's last error, NUL-terminated.
                let message = if status != 0 { unsafe { CStr::from_ptr((opened.last_error)()) }.to_string_lossy().into_owned() } else { String::new() };
                drop(call.arguments);
                (status, results.into_iter().map(SendResult).collect::<Vec<_>>(), message)
            });
            if status != 0 {
                return Err(error(message));
            }
            // Every result is taken over (each freed by its tensor) before any error returns.
            let taken: Vec<PyResult<Tensor>> = results.into_iter().map(|r| take_result(r.0)).collect();
            let tensors = taken.into_iter().collect::<PyResult<Vec<_>>>()?;
            crate::module::call_value(py, &self.name, &entry.results, tensors)
        })
    }

    fn __repr__(&self) -> String {
        format!("<nax library function {}>", self.name)
    }
}

/// A result crossing back from the released GIL.
struct SendResult(NaxResult);
// SAFETY: the result is owned by this call alone.
unsafe impl Send for SendResult {}

/// The library's result as a `nax.Tensor`: its axis names copied, its
/// tensor taken over (freed when the tensor goes).
fn take_result(result: NaxResult) -> PyResult<Tensor> {
    if result.tensor.is_null() {
        return Err(error("internal error: the library gave no result"));
    }
    // SAFETY: the result is a valid managed tensor whose `ndim` axis names
    // (NULL entries for unnamed axes) live until its deleter runs.
    let names: Vec<Option<String>> = unsafe {
        let rank = (*result.tensor).dl_tensor.ndim.max(0) as usize;
        (0..rank)
            .map(|i| {
                let p = if result.axes.is_null() { std::ptr::null() } else { *result.axes.add(i) };
                (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
            })
            .collect()
    };
    // SAFETY: the library's `DLManagedTensorVersioned` has DLPack 1.x's
    // layout, as dlpark's does; ownership passes to the managed handle.
    let managed = unsafe { dlpark::Managed::from_raw(result.tensor.cast::<dlpark::ffi::DLManagedTensorVersioned>()) }
        .map_err(|e| error(format!("internal error: the library's result: {e}")))?;
    let imported = Imported::from_managed("the result", dlpark::python::ImportedDlpack::Versioned(managed))?;
    Tensor::foreign(imported, names)
}
