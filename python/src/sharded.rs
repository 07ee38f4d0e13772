//! A module compiled for a mesh of processes (SHARDING.md): its
//! collectives run through `torch.distributed` on the process group the
//! host initialized (gloo, NCCL, MPI), each mesh axis's groups made once
//! when compiling; its functions ([`ShardedFunction`]) are called by every
//! rank with its blocks and give `nax.Tensor`s with `.offsets` and
//! `.global_shape`. A failed collective raises `nax.CollectiveError`.

use crate::errors::{at_call, error};
use crate::module::{Held, bind, call_value, parameters};
use crate::tensor::Tensor;
use nax::{Arg, CollectiveError, Collectives, DType, Group, Mesh, ReduceOp, Sharding};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// `PyBUF_WRITE`: a `memoryview` that may be written (CPython's
/// `memoryobject.h`; pyo3's ffi names it only outside the limited API).
const PY_BUF_WRITE: std::os::raw::c_int = 0x200;

/// The collectives of `torch.distributed` on a process group.
pub struct TorchCollectives {
    rank: usize,
    size: usize,
    dist: Py<PyAny>,
    torch: Py<PyAny>,
    /// Each mesh group's process group, by its ranks.
    groups: HashMap<Vec<usize>, Py<PyAny>>,
}

impl TorchCollectives {
    /// The collectives of `group` (the default group when `None`), with a
    /// process group made for every group of every mesh axis (every rank
    /// makes them all, in one order, as `torch.distributed.new_group`
    /// asks). The mesh must have as many processes as the group.
    pub fn new(py: Python<'_>, mesh: &Mesh, group: Option<&Bound<'_, PyAny>>) -> PyResult<TorchCollectives> {
        let dist = py.import("torch.distributed")?;
        if !dist.call_method0("is_initialized")?.is_truthy()? {
            return Err(crate::errors::CompileError::new_err(
                "a mesh needs torch.distributed's process group: call torch.distributed.init_process_group first (torchrun sets its environment)",
            ));
        }
        let group_arg = group.map_or_else(|| py.None(), |g| g.clone().unbind());
        let kwargs = PyDict::new(py);
        kwargs.set_item("group", &group_arg)?;
        let rank: usize = dist.getattr("get_rank")?.call((), Some(&kwargs))?.extract()?;
        let size: usize = dist.getattr("get_world_size")?.call((), Some(&kwargs))?.extract()?;
        if size != mesh.processes() {
            return Err(crate::errors::CompileError::new_err(format!("the mesh ({mesh}) has {} processes, the process group has {size}", mesh.processes())));
        }
        let mut groups = HashMap::new();
        for axis in 0..mesh.axes().len() {
            for r in 0..size {
                let ranks = mesh.group(r, axis);
                if groups.contains_key(&ranks) {
                    continue;
                }
                let handle = if ranks.len() == size {
                    group_arg.clone_ref(py)
                } else {
                    // The group's ranks in the default group's numbering.
                    let global: Vec<usize> = match group {
                        Some(g) => ranks.iter().map(|&r| dist.call_method1("get_global_rank", (g, r))?.extract()).collect::<PyResult<_>>()?,
                        None => ranks.clone(),
                    };
                    dist.call_method1("new_group", (global,))?.unbind()
                };
                groups.insert(ranks, handle);
            }
        }
        Ok(TorchCollectives { rank, size, dist: dist.into_any().unbind(), torch: py.import("torch")?.into_any().unbind(), groups })
    }

    /// A torch tensor of `dtype` over `len` bytes at `memory`, without a
    /// copy (a `memoryview` of them), and that view, to release when the
    /// collective is done.
    ///
    /// # Safety
    /// The bytes stay alive, and nothing else touches them, until the view
    /// is released; torch writes them only where the caller lent them to be written.
    unsafe fn tensor<'py>(&self, py: Python<'py>, memory: *mut u8, len: usize, dtype: DType) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let torch = self.torch.bind(py);
        let name = match dtype {
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::Bool => "bool",
        };
        // SAFETY: the caller's contract; the length fits an isize (it is a slice's).
        let view = unsafe {
            let raw = pyo3::ffi::PyMemoryView_FromMemory(memory.cast(), len as pyo3::ffi::Py_ssize_t, PY_BUF_WRITE);
            Bound::from_owned_ptr_or_err(py, raw)?
        };
        let kwargs = PyDict::new(py);
        kwargs.set_item("dtype", torch.getattr("uint8")?)?;
        let raw = torch.call_method("frombuffer", (&view,), Some(&kwargs))?;
        Ok((raw.call_method1("view", (torch.getattr(name)?,))?, view))
    }

    /// The keyword arguments of a reduction `op` on the process group `handle`.
    fn reduce_arguments<'py>(&self, py: Python<'py>, op: ReduceOp, handle: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
        let op = self.dist.bind(py).getattr("ReduceOp")?.getattr(match op {
            ReduceOp::Sum => "SUM",
            ReduceOp::Max => "MAX",
            ReduceOp::Min => "MIN",
            ReduceOp::Prod => "PRODUCT",
        })?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("op", op)?;
        kwargs.set_item("group", handle)?;
        Ok(kwargs)
    }

    /// The process group of `group`.
    fn handle<'py>(&self, py: Python<'py>, group: Group<'_>) -> Result<Bound<'py, PyAny>, CollectiveError> {
        self.groups
            .get(group.ranks)
            .map(|g| g.bind(py).clone())
            .ok_or_else(|| CollectiveError { message: format!("no process group was made for the ranks {:?} along '{}'", group.ranks, group.mesh_axis) })
    }
}

/// A Python exception as a collective's failure.
fn failed(e: PyErr) -> CollectiveError {
    CollectiveError { message: e.to_string() }
}

impl Collectives for TorchCollectives {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn all_reduce(&self, group: Group<'_>, dtype: DType, op: ReduceOp, data: &mut [u8]) -> Result<(), CollectiveError> {
        Python::attach(|py| {
            let handle = self.handle(py, group)?;
            let mut run = || -> PyResult<()> {
                // SAFETY: `data` is borrowed mutably for this call, and the view released before it ends.
                let (t, view) = unsafe { self.tensor(py, data.as_mut_ptr(), data.len(), dtype)? };
                let kwargs = self.reduce_arguments(py, op, &handle)?;
                let done = self.dist.bind(py).call_method("all_reduce", (&t,), Some(&kwargs));
                drop(t);
                release(&view);
                done.map(drop)
            };
            run().map_err(failed)
        })
    }

    fn all_gather(&self, group: Group<'_>, dtype: DType, block: &[u8], out: &mut [u8]) -> Result<(), CollectiveError> {
        Python::attach(|py| {
            let handle = self.handle(py, group)?;
            let parts = group.ranks.len();
            let mut run = || -> PyResult<()> {
                // SAFETY: `block` is only read by the gather (the view is
                // writable because torch asks for one), `out` borrowed
                // mutably for this call; both views released before it ends.
                let (mine, mine_view) = unsafe { self.tensor(py, block.as_ptr().cast_mut(), block.len(), dtype)? };
                let (all, all_view) = unsafe { self.tensor(py, out.as_mut_ptr(), out.len(), dtype)? };
                let pieces = all.call_method1("chunk", (parts,))?;
                let list = PyList::new(py, pieces.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
                let kwargs = PyDict::new(py);
                kwargs.set_item("group", &handle)?;
                let done = self.dist.bind(py).call_method("all_gather", (&list, &mine), Some(&kwargs));
                drop((list, pieces, all, mine));
                release(&mine_view);
                release(&all_view);
                done.map(drop)
            };
            run().map_err(failed)
        })
    }

    /// `torch.distributed.reduce_scatter_tensor`: each rank receives only
    /// its part (half the bytes of an all-reduce of the whole).
    fn reduce_scatter(&self, group: Group<'_>, dtype: DType, op: ReduceOp, data: &[u8], out: &mut [u8]) -> Result<(), CollectiveError> {
        Python::attach(|py| {
            let handle = self.handle(py, group)?;
            let mut run = || -> PyResult<()> {
                // SAFETY: `data` is only read by the reduce-scatter (the
                // view is writable because torch asks for one), `out`
                // borrowed mutably for this call; both views released before it ends.
                let (all, all_view) = unsafe { self.tensor(py, data.as_ptr().cast_mut(), data.len(), dtype)? };
                let (mine, mine_view) = unsafe { self.tensor(py, out.as_mut_ptr(), out.len(), dtype)? };
                let kwargs = self.reduce_arguments(py, op, &handle)?;
                let done = self.dist.bind(py).call_method("reduce_scatter_tensor", (&mine, &all), Some(&kwargs));
                drop((mine, all));
                release(&mine_view);
                release(&all_view);
                done.map(drop)
            };
            run().map_err(failed)
        })
    }
}

/// Releases a `memoryview` of the runtime's memory, so that nothing in
/// Python reads it after the collective (a tensor torch still holds
/// keeps it: then the release fails, and the view stays valid only as
/// long as torch's reference, which ends with the synchronous call).
fn release(view: &Bound<'_, PyAny>) {
    let _ = view.call_method0("release");
}

/// How a module's functions are split: the mesh, the sharding, whether
/// results come back whole, the engine, and the weights each function
/// reads its blocks from.
pub struct Distributed {
    pub mesh: Mesh,
    pub sharding: Sharding,
    pub gather: bool,
    pub collectives: Arc<TorchCollectives>,
    /// A safetensors file each function reads its rank's blocks from (the
    /// module then holds no whole weights); `None`: the module's bound ones.
    pub weights_file: Option<PathBuf>,
    /// The functions made so far, each once.
    pub made: Mutex<HashMap<String, nax::ShardedFunction>>,
}

impl Distributed {
    /// The function `name` of `program`, split for this rank: compiled
    /// (and its weights read) the first time it is asked for.
    pub fn function(&self, py: Python<'_>, program: &nax::Program, name: &str) -> PyResult<ShardedFunction> {
        if let Some(f) = self.made.lock().unwrap_or_else(|e| e.into_inner()).get(name) {
            return Ok(ShardedFunction { function: f.clone(), name: name.to_string() });
        }
        let collectives: Arc<dyn Collectives> = self.collectives.clone();
        let made = py.detach(|| {
            let f = program.sharded(name, &self.mesh, &self.sharding, collectives)?.gather(self.gather);
            match &self.weights_file {
                Some(path) => f.with_weights_file(path),
                None => Ok(f),
            }
        });
        let function = made.map_err(error)?;
        self.made.lock().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), function.clone());
        Ok(ShardedFunction { function, name: name.to_string() })
    }
}

/// One function of a module compiled for a mesh, as this rank runs it:
/// called by every rank at once with its blocks of the arguments
/// (positionally or by name); gives `nax.Tensor`s whose `.offsets` and
/// `.global_shape` say where each block lies.
#[pyclass(frozen, module = "nax")]
pub struct ShardedFunction {
    function: nax::ShardedFunction,
    name: String,
}

#[pymethods]
impl ShardedFunction {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(&self, py: Python<'_>, args: &Bound<'_, PyTuple>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
        crate::errors::guard(|| {
            let signature = self.function.signature();
            let held: Vec<(String, Held<'_>)> = bind(&signature.name, &parameters(signature), args, kwargs)?;
            let inputs = held.iter().map(|(name, h)| Ok((name.as_str(), h.input(&format!("argument '{name}'"))?))).collect::<PyResult<Vec<_>>>()?;
            let call: Vec<(&str, Arg<'_>)> = inputs.iter().map(|(name, input)| (*name, input.arg())).collect();
            let results = py.detach(|| self.function.call_results(call)).map_err(at_call)?;
            let (names, tensors): (Vec<String>, Vec<Tensor>) = results.into_iter().map(|(name, r)| (name, Tensor::placed(r))).unzip();
            call_value(py, &self.name, &names, tensors)
        })
    }

    /// The rank's signature: its parameters with their blocks' sizes.
    #[getter]
    fn signature(&self) -> String {
        self.function.signature().to_string()
    }

    /// The bytes of the weights this rank holds: its blocks.
    #[getter]
    fn weight_bytes(&self) -> usize {
        self.function.weight_bytes()
    }

    /// The function's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    fn __repr__(&self) -> String {
        format!("<nax sharded function {}>", self.function.signature())
    }
}
