//! `nax.Tensor`: a tensor with a name or `None` per axis and optional
//! coordinate labels, over nax's own memory (a result) or a Python
//! object's, read in place; exported through DLPack without a copy, and
//! with the eager arithmetic and comparisons of LANGUAGE.md section 12
//! (the runtime's `NamedTensor`: alignment by name, partial names,
//! positional anonymous operands, coordinates joined inner).
//!
//! Coordinate labels are `str` or `int`, one kind per axis (the runtime
//! keeps them as text; the kind comes back on the way out); joining an
//! axis labelled by `int`s with one labelled by `str`s is an error.

use crate::dlpack::{Imported, Layout, shape, to_host, type_name};
use crate::errors::error;
use nax_capi::Input;
use nax_named::{BinaryOp, NamedTensor};
use nax_runtime::{DType, HostTensor, TensorView};
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::types::{PyDict, PyInt, PyString, PyTuple};
use std::sync::Arc;

/// Where a tensor's elements live.
pub enum Storage {
    /// nax's own memory: a result, or arithmetic's.
    Owned(HostTensor),
    /// A Python object's memory, imported through DLPack, not copied.
    Foreign(Imported),
}

/// The labels of one axis: their text, and whether they are `int`s.
#[derive(Clone, Debug, PartialEq)]
pub struct Labels {
    pub text: Vec<String>,
    pub ints: bool,
}

/// A tensor with named axes (PYTHON.md): `Tensor(data, names=None, coords=None)`.
///
/// `data` is a numpy array, a torch tensor, any object with `__dlpack__`,
/// or another `nax.Tensor` (whose memory is shared, never copied); `names`
/// a tuple of one `str` or `None` per axis; `coords` a dict from an axis
/// name to its distinct labels (`str` or `int`), as many as the axis is long.
#[pyclass(frozen, module = "nax", name = "Tensor")]
pub struct Tensor {
    storage: Arc<Storage>,
    names: Vec<Option<String>>,
    coords: Vec<Option<Labels>>,
    /// Where a sharded function's result lies in the whole result: its
    /// start along each axis and the whole's sizes (SHARDING.md).
    placement: Option<(Vec<usize>, Vec<usize>)>,
}

impl Tensor {
    /// A result's tensor.
    pub fn from_host(tensor: HostTensor) -> Tensor {
        let rank = tensor.shape().len();
        let names = tensor.names().to_vec();
        Tensor { storage: Arc::new(Storage::Owned(tensor)), names, coords: vec![None; rank], placement: None }
    }

    /// A sharded function's result: the rank's block, with where it lies.
    pub fn placed(result: nax::ShardedResult) -> Tensor {
        let placement = Some((result.offsets, result.global_shape));
        Tensor { placement, ..Tensor::from_host(result.tensor) }
    }

    /// A tensor over imported memory, under these names.
    pub fn foreign(imported: Imported, names: Vec<Option<String>>) -> PyResult<Tensor> {
        let rank = names.len();
        let tensor = Tensor { storage: Arc::new(Storage::Foreign(imported)), names, coords: vec![None; rank], placement: None };
        tensor.input("the tensor")?;
        Ok(tensor)
    }

    /// The tensor as a call's argument reads it: a view of its memory under
    /// its names, or (a foreign `bool` tensor) a checked copy.
    pub fn input(&self, what: &str) -> PyResult<Input<'_>> {
        fn named<'v>(v: TensorView<'v>, names: &[Option<String>], what: &str) -> PyResult<TensorView<'v>> {
            v.with_names(names.to_vec()).map_err(|e| error(format!("{what}: {e}")))
        }
        let named = |v| named(v, &self.names, what);
        Ok(match &*self.storage {
            Storage::Owned(t) => Input::View(named(t.view())?),
            Storage::Foreign(imported) => match imported.input(what)? {
                Input::View(v) => Input::View(named(v)?),
                Input::Copied(t) => Input::Copied(t.with_names(self.names.clone()).map_err(|e| error(format!("{what}: {e}")))?),
                Input::Scalar(s) => Input::Scalar(s),
            },
        })
    }

    /// Its elements, shape and dtype, under its names, as a host tensor (a
    /// copy of foreign memory).
    fn host(&self) -> PyResult<HostTensor> {
        to_host(self.input("the tensor")?, "the tensor")
    }

    /// The runtime's named tensor of the same elements, names and labels.
    fn named(&self) -> PyResult<NamedTensor> {
        let coords = self.coords.iter().map(|c| c.as_ref().map(|l| l.text.clone())).collect();
        NamedTensor::new(self.host()?, coords).map_err(error)
    }

    /// A tensor from the runtime's named tensor, each labelled axis's kind
    /// taken from `kinds` (by axis name).
    fn from_named(result: NamedTensor, kinds: &[(String, bool)]) -> Tensor {
        let (tensor, coords) = result.into_parts();
        let names = tensor.names().to_vec();
        let coords = coords
            .into_iter()
            .zip(&names)
            .map(|(c, name)| {
                c.map(|text| {
                    let ints = name.as_ref().is_some_and(|n| kinds.iter().any(|(k, ints)| k == n && *ints));
                    Labels { text, ints }
                })
            })
            .collect();
        Tensor { storage: Arc::new(Storage::Owned(tensor)), names, coords, placement: None }
    }

    /// The shape, element type, strides and element 0's address, and
    /// whether it may be written.
    fn layout(&self) -> PyResult<Layout<Storage>> {
        let (dtype, shape, strides, data, read_only) = match &*self.storage {
            Storage::Owned(t) => {
                let v = t.view();
                (v.dtype(), v.shape().to_vec(), v.strides().to_vec(), v.as_ptr().cast_mut(), false)
            }
            Storage::Foreign(imported) => match imported.input("the tensor")? {
                Input::View(v) => (v.dtype(), v.shape().to_vec(), v.strides().to_vec(), v.as_ptr().cast_mut(), imported.read_only()),
                _ => return Err(error("a bool tensor imported from another library is not exported again: give nax.Tensor(x).numpy() a copy first")),
            },
        };
        Ok(Layout { dtype, shape, strides, data, read_only, owner: Arc::clone(&self.storage) })
    }
}

/// One label from Python: its text and whether it is an `int`.
fn label(object: &Bound<'_, PyAny>) -> PyResult<(String, bool)> {
    if object.is_instance_of::<PyString>() {
        Ok((object.extract::<String>()?, false))
    } else if object.is_instance_of::<PyInt>() && !object.is_instance_of::<pyo3::types::PyBool>() {
        Ok((object.extract::<i64>()?.to_string(), true))
    } else {
        Err(error(format!("a coordinate label is a str or an int, not a {}", type_name(object))))
    }
}

/// The labels of `coords` (a dict from axis name to labels) per axis of `names`.
fn parse_coords(names: &[Option<String>], shape: &[usize], coords: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<Option<Labels>>> {
    let mut out = vec![None; names.len()];
    let Some(coords) = coords else { return Ok(out) };
    for (key, labels) in coords.iter() {
        let name: String = key.extract().map_err(|_| error(format!("coords: a key is an axis name, not a {}", type_name(&key))))?;
        let shown = nax_runtime::shortened(&name);
        let axis = names
            .iter()
            .position(|n| n.as_deref() == Some(name.as_str()))
            .ok_or_else(|| error(format!("coords: no axis is named '{shown}' (names: {})", show_names(names))))?;
        let mut text = Vec::new();
        let mut kinds = Vec::new();
        for item in labels.try_iter().map_err(|_| error(format!("coords['{shown}'] is not a sequence of labels")))? {
            let (t, ints) = label(&item?)?;
            text.push(t);
            kinds.push(ints);
        }
        if text.len() != shape[axis] {
            return Err(error(format!("coords['{shown}'] has {} labels for an axis of size {}", text.len(), shape[axis])));
        }
        let ints = kinds.first().copied().unwrap_or(false);
        if kinds.iter().any(|&k| k != ints) {
            return Err(error(format!("coords['{shown}'] mixes str and int labels")));
        }
        out[axis] = Some(Labels { text, ints });
    }
    Ok(out)
}

/// Names as Python writes the tuple: `('x', None)`.
fn show_names(names: &[Option<String>]) -> String {
    let parts: Vec<String> = names.iter().map(|n| n.as_ref().map_or("None".to_string(), |n| format!("'{}'", nax_runtime::shortened(n)))).collect();
    if parts.len() == 1 { format!("({},)", parts[0]) } else { format!("({})", parts.join(", ")) }
}

/// An operand of arithmetic: a Python number (typed by the other operand,
/// as torch types them), or a tensor.
enum Operand {
    Number(f64, NumberKind),
    Tensor(NamedTensor, Vec<(String, bool)>),
}

/// The kind of a Python number.
#[derive(Clone, Copy, PartialEq)]
enum NumberKind {
    Bool,
    Int,
    Float,
}

/// The element type a Python number takes beside a tensor of `other`
/// (torch's promotion: a number never widens a tensor of its kind).
fn number_dtype(kind: NumberKind, other: DType) -> DType {
    let float = matches!(other, DType::F16 | DType::BF16 | DType::F32 | DType::F64);
    match kind {
        NumberKind::Float if float => other,
        NumberKind::Float => DType::F32,
        NumberKind::Int if other == DType::Bool => DType::I64,
        NumberKind::Int | NumberKind::Bool => other,
    }
}

impl Operand {
    fn new(object: &Bound<'_, PyAny>) -> PyResult<Operand> {
        if object.is_instance_of::<pyo3::types::PyBool>() {
            return Ok(Operand::Number(f64::from(u8::from(object.extract::<bool>()?)), NumberKind::Bool));
        }
        if object.is_instance_of::<PyInt>() {
            return Ok(Operand::Number(object.extract::<i64>()? as f64, NumberKind::Int));
        }
        if object.is_instance_of::<pyo3::types::PyFloat>() {
            return Ok(Operand::Number(object.extract::<f64>()?, NumberKind::Float));
        }
        let tensor: PyRef<'_, Tensor> = match object.cast::<Tensor>() {
            Ok(t) => t.borrow(),
            Err(_) => {
                let imported = Imported::new("an operand", object)?;
                let rank = shape(&imported.input("an operand")?).len();
                let plain = Tensor { storage: Arc::new(Storage::Foreign(imported)), names: vec![None; rank], coords: vec![None; rank], placement: None };
                return Ok(Operand::Tensor(plain.named()?, Vec::new()));
            }
        };
        let kinds = tensor.names.iter().zip(&tensor.coords).filter_map(|(n, c)| Some((n.clone()?, c.as_ref()?.ints))).collect();
        Ok(Operand::Tensor(tensor.named()?, kinds))
    }

    /// As a named tensor, a number typed beside `other`'s dtype.
    fn into_named(self, other: Option<DType>) -> PyResult<(NamedTensor, Vec<(String, bool)>)> {
        match self {
            Operand::Tensor(t, kinds) => Ok((t, kinds)),
            Operand::Number(x, kind) => {
                let dtype = number_dtype(kind, other.unwrap_or(DType::F32));
                Ok((NamedTensor::new(HostTensor::scalar_f64(dtype, x), vec![]).map_err(error)?, Vec::new()))
            }
        }
    }
}

/// `left op right` by section 12's rules.
fn binary(op: BinaryOp, left: &Bound<'_, PyAny>, right: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    crate::errors::guard(|| {
        let (l, r) = (Operand::new(left)?, Operand::new(right)?);
        let dtype_of = |o: &Operand| match o {
            Operand::Tensor(t, _) => Some(t.dtype()),
            Operand::Number(..) => None,
        };
        let (ld, rd) = (dtype_of(&l), dtype_of(&r));
        let (l, lk) = l.into_named(rd)?;
        let (r, rk) = r.into_named(ld)?;
        for (name, ints) in &lk {
            if rk.iter().any(|(n, i)| n == name && i != ints) {
                return Err(error(format!("axis '{}' is labelled by ints on one side and by strs on the other", nax_runtime::shortened(name))));
            }
        }
        let kinds: Vec<(String, bool)> = lk.into_iter().chain(rk).collect();
        let result = left.py().detach(|| l.binary(op, &r)).map_err(error)?;
        Ok(Tensor::from_named(result, &kinds))
    })
}

#[pymethods]
impl Tensor {
    #[new]
    #[pyo3(signature = (data, names = None, coords = None))]
    fn new(data: &Bound<'_, PyAny>, names: Option<&Bound<'_, PyAny>>, coords: Option<&Bound<'_, PyDict>>) -> PyResult<Tensor> {
        crate::errors::guard(|| {
            let (storage, old_names, old_coords) = match data.cast::<Tensor>() {
                Ok(t) => {
                    let t = t.borrow();
                    (Arc::clone(&t.storage), t.names.clone(), t.coords.clone())
                }
                Err(_) => {
                    let imported = Imported::new("data", data)?;
                    let rank = shape(&imported.input("data")?).len();
                    (Arc::new(Storage::Foreign(imported)), vec![None; rank], vec![None; rank])
                }
            };
            let rank = old_names.len();
            let names: Vec<Option<String>> = match names {
                None => old_names.clone(),
                Some(n) => {
                    let items: Vec<Option<String>> = n.extract().map_err(|_| error("names: a tuple of one str or None per axis"))?;
                    if items.len() != rank {
                        return Err(error(format!("names: {} names for a tensor of rank {rank}", items.len())));
                    }
                    items
                }
            };
            let probe = Tensor { storage: Arc::clone(&storage), names: names.clone(), coords: vec![None; rank], placement: None };
            let shape = shape(&probe.input("data")?);
            let coords = match coords {
                Some(c) => parse_coords(&names, &shape, Some(c))?,
                // Labels stay with their axes while the names do.
                None if names == old_names => old_coords,
                None => vec![None; rank],
            };
            let tensor = Tensor { storage, names, coords, placement: None };
            // The runtime's own checks of names against labels (duplicates, sizes).
            if tensor.coords.iter().any(Option::is_some) {
                tensor.named()?;
            }
            Ok(tensor)
        })
    }

    /// The axis names: one `str` or `None` per axis.
    #[getter(names)]
    fn py_names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.names)
    }

    /// The shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.layout()?.shape)
    }

    /// Where the tensor starts in the whole result of a sharded function,
    /// along each axis (zeros for any other tensor).
    #[getter]
    fn offsets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        match &self.placement {
            Some((offsets, _)) => PyTuple::new(py, offsets),
            None => PyTuple::new(py, vec![0usize; self.names.len()]),
        }
    }

    /// The sizes of the whole result a sharded function's block is part
    /// of (the shape for any other tensor).
    #[getter]
    fn global_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        match &self.placement {
            Some((_, shape)) => PyTuple::new(py, shape),
            None => self.shape(py),
        }
    }

    /// The element type, as ABI.md writes it: `f32`, `f64`, `f16`, `bf16`, `i32`, `i64`, `bool`.
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        Ok(match &*self.storage {
            Storage::Owned(t) => t.dtype().as_str(),
            Storage::Foreign(i) => i.dtype().as_str(),
        })
    }

    /// The coordinate labels: a dict from axis name to a tuple of labels.
    #[getter]
    fn coords<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (name, labels) in self.names.iter().zip(&self.coords) {
            if let (Some(name), Some(labels)) = (name, labels) {
                let items: Vec<Bound<'py, PyAny>> = labels
                    .text
                    .iter()
                    .map(|t| match t.parse::<i64>() {
                        Ok(i) if labels.ints => PyInt::new(py, i).into_any(),
                        _ => PyString::new(py, t).into_any(),
                    })
                    .collect();
                dict.set_item(name, PyTuple::new(py, items)?)?;
            }
        }
        Ok(dict)
    }

    /// `None`: numpy's operators defer to this class's, so `array + tensor`
    /// aligns by section 12's rules and gives a `nax.Tensor`, as `tensor +
    /// array` does.
    #[classattr]
    fn __array_ufunc__(py: Python<'_>) -> Py<PyAny> {
        py.None()
    }

    /// A tensor from an xarray `DataArray`: its dims as names, the labels
    /// of its dimension coordinates as coords, its values read in place.
    #[staticmethod]
    fn from_xarray(array: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        let py = array.py();
        let dims: Vec<String> = array.getattr("dims")?.extract().map_err(|_| error("from_xarray: dims must be strs"))?;
        let coords = PyDict::new(py);
        let present = array.getattr("coords")?;
        for dim in &dims {
            if present.contains(dim)? {
                coords.set_item(dim, present.get_item(dim)?.getattr("values")?.call_method0("tolist")?)?;
            }
        }
        let names = PyTuple::new(py, &dims)?;
        Tensor::new(&array.getattr("values")?, Some(names.as_any()), Some(&coords))
    }

    /// An xarray `DataArray` of the same values (shared), dims (an
    /// unnamed axis `i` becomes `dim_i`) and coordinates.
    fn to_xarray<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let xarray = py.import("xarray").map_err(|_| error("to_xarray needs xarray (pip install xarray)"))?;
        let t = slf.borrow();
        let dims: Vec<String> = t.names.iter().enumerate().map(|(i, n)| n.clone().unwrap_or_else(|| format!("dim_{i}"))).collect();
        let kwargs = PyDict::new(py);
        kwargs.set_item("dims", dims)?;
        // Lists, not tuples: xarray reads a tuple as (dims, values).
        let coords = PyDict::new(py);
        for (name, labels) in Tensor::coords(&t, py)?.iter() {
            coords.set_item(name, labels.call_method0("__iter__")?.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
        }
        kwargs.set_item("coords", coords)?;
        xarray.getattr("DataArray")?.call((Tensor::numpy(slf)?,), Some(&kwargs))
    }

    /// The elements as a numpy array sharing this tensor's memory.
    fn numpy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py().import("numpy")?.call_method1("from_dlpack", (slf,))
    }

    /// numpy's conversion: the shared array, or a copy of another dtype.
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(slf: &Bound<'py, Self>, dtype: Option<&Bound<'py, PyAny>>, copy: Option<bool>) -> PyResult<Bound<'py, PyAny>> {
        let array = Tensor::numpy(slf)?;
        let array = match dtype {
            Some(d) => array.call_method1("astype", (d,))?,
            None => array,
        };
        if copy == Some(true) { array.call_method0("copy") } else { Ok(array) }
    }

    /// DLPack export: a capsule over this tensor's memory, shared.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let request = dlpark::python::ExportRequest::parse(stream, max_version, dl_device, copy)?;
        dlpark::python::export_dlpack(&self.layout()?, py, request)
    }

    /// DLPack's device: the CPU.
    fn __dlpack_device__(&self) -> (u32, i32) {
        (1, 0)
    }

    fn __len__(&self) -> PyResult<usize> {
        self.layout()?.shape.first().copied().ok_or_else(|| pyo3::exceptions::PyTypeError::new_err("len() of a rank-0 nax.Tensor"))
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let t = slf.borrow();
        let shape: Vec<String> = t.layout()?.shape.iter().map(usize::to_string).collect();
        let shape = if shape.len() == 1 { format!("({},)", shape[0]) } else { format!("({})", shape.join(", ")) };
        let mut head = format!("nax.Tensor(names={}, shape={shape}, dtype='{}'", show_names(&t.names), t.dtype()?);
        let coords = Tensor::coords(&t, slf.py())?;
        if !coords.is_empty() {
            head += &format!(", coords={}", coords.repr()?);
        }
        let values = Tensor::numpy(slf)?.repr()?.to_string();
        Ok(format!("{head})\n{values}"))
    }

    fn __add__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        binary(BinaryOp::Add, slf.as_any(), other)
    }

    fn __radd__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        binary(BinaryOp::Add, other, slf.as_any())
    }

    fn __sub__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        binary(BinaryOp::Sub, slf.as_any(), other)
    }

    fn __rsub__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        binary(BinaryOp::Sub, other, slf.as_any())
    }

    fn __mul__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        binary(BinaryOp::Mul, slf.as_any(), other)
    }

    fn __rmul__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        binary(BinaryOp::Mul, other, slf.as_any())
    }

    fn __truediv__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        binary(BinaryOp::Div, slf.as_any(), other)
    }

    fn __rtruediv__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        binary(BinaryOp::Div, other, slf.as_any())
    }

    fn __richcmp__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>, op: CompareOp) -> PyResult<Tensor> {
        let op = match op {
            CompareOp::Eq => BinaryOp::Eq,
            CompareOp::Ne => BinaryOp::Ne,
            CompareOp::Lt => BinaryOp::Lt,
            CompareOp::Le => BinaryOp::Le,
            CompareOp::Gt => BinaryOp::Gt,
            CompareOp::Ge => BinaryOp::Ge,
        };
        binary(op, slf.as_any(), other)
    }
}
