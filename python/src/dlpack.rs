//! Tensors in and out through DLPack, the protocol numpy, torch and every
//! array library speak.
//!
//! In: any object with `__dlpack__` (or a DLPack capsule) is imported by
//! `dlpark` (versioned or legacy ABI, never asking the producer to copy)
//! and seen through the C ABI's own checks (`nax_capi::tensor`: rank,
//! sizes, strides of any sign, byte offset, alignment, `bool` bytes): the
//! producer's memory read in place, kept alive while the [`Imported`]
//! lives (its deleter runs when it drops).
//!
//! Out: a [`Layout`] over memory an owner keeps (a result's data, or an
//! imported buffer) exported as a fresh managed tensor per `__dlpack__`
//! call, the owner shared with the consumer until it frees the tensor.

use dlpark::ffi::{DLDataType as ParkDataType, DLDataTypeCode, DLDevice as ParkDevice};
use dlpark::python::{DlpackExporter, ExportRequest, ImportedDlpack};
use dlpark::{DlpackFlags, Managed};
use nax_capi::{DLDataType, DLDevice, DLTensor, Input};
use nax_runtime::DType;
use pyo3::prelude::*;
use std::sync::Arc;

/// DLPack's `kDLCPU`.
const CPU: u32 = 1;

/// A tensor imported from a Python object: the producer's memory, in place.
pub struct Imported {
    /// Owns the producer's tensor; frees it when dropped.
    _managed: ImportedDlpack,
    /// The same tensor as the C ABI describes it (shape and strides point
    /// into the managed tensor).
    tensor: DLTensor,
    dtype: DType,
    read_only: bool,
}

// SAFETY: nax only reads the imported memory, from any thread, while the
// `Imported` lives; DLPack producers' deleters may run on any thread
// (numpy's and torch's take the GIL themselves).
unsafe impl Send for Imported {}
// SAFETY: as above: shared access only reads.
unsafe impl Sync for Imported {}

/// Python's name of an object's type, for messages.
pub fn type_name(object: &Bound<'_, PyAny>) -> String {
    object.get_type().name().map_or_else(|_| "object".to_string(), |n| n.to_string())
}

impl Imported {
    /// Imports `object` (`what` names it in errors): an error for an object
    /// without DLPack, memory that is not the CPU's, or an element type
    /// nax has no dtype for.
    pub fn new(what: &str, object: &Bound<'_, PyAny>) -> PyResult<Imported> {
        if !object.hasattr("__dlpack__")? && type_name(object) != "PyCapsule" {
            return Err(crate::errors::error(format!(
                "{what}: a {} is not a tensor: give a numpy array, a torch tensor, a nax.Tensor or any object with __dlpack__",
                type_name(object)
            )));
        }
        let failed = |e: PyErr| crate::errors::error(format!("{what}: its DLPack export failed: {e}"));
        let managed = match dlpark::python::from_dlpack(object.as_borrowed(), None, None) {
            Ok(managed) => managed,
            // A producer from before DLPack 1.0 whose `__dlpack__` takes no
            // `max_version` (as numpy and torch accept): its legacy capsule.
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyTypeError>(object.py()) && object.hasattr("__dlpack__")? => {
                let capsule = object.call_method0("__dlpack__").map_err(failed)?;
                dlpark::python::from_dlpack(capsule.as_borrowed(), None, None).map_err(failed)?
            }
            Err(e) => return Err(failed(e)),
        };
        Imported::from_managed(what, managed)
    }

    /// A managed tensor taken over (its deleter runs when the `Imported` drops).
    pub fn from_managed(what: &str, managed: ImportedDlpack) -> PyResult<Imported> {
        let read_only = managed.flags().contains(DlpackFlags::READ_ONLY);
        let view = managed.validate().map_err(|e| crate::errors::error(format!("{what}: a malformed DLPack tensor: {e}")))?;
        let device = view.device();
        if device.device_type.0 != CPU {
            let name = if device.device_type.0 == 2 { format!("cuda:{}", device.device_id) } else { format!("DLPack device type {}", device.device_type.0) };
            return Err(crate::errors::error(format!("{what}: the tensor is on {name}: nax runs on the CPU here; move it there first (torch: .cpu())")));
        }
        let raw = view.dtype();
        let dl = DLDataType { code: raw.code.0, bits: raw.bits, lanes: raw.lanes };
        let dtype = nax_capi::nax_dtype(dl).ok_or_else(|| {
            crate::errors::error(format!(
                "{what}: nax has no dtype for {} elements: convert the tensor to one of f16, bf16, f32, f64, i32, i64, bool",
                nax_capi::describe(dl)
            ))
        })?;
        let tensor = DLTensor {
            data: view.data_ptr().cast_mut(),
            device: DLDevice { device_type: CPU as i32, device_id: device.device_id },
            ndim: view.ndim() as i32,
            dtype: dl,
            shape: view.shape().as_ptr().cast_mut(),
            strides: view.strides().map_or(std::ptr::null_mut(), |s| s.as_ptr().cast_mut()),
            byte_offset: view.byte_offset(),
        };
        Ok(Imported { _managed: managed, tensor, dtype, read_only })
    }

    /// Its element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Whether its producer forbids writing it.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The tensor as nax reads it: a bounds-checked view of the producer's
    /// memory (a `bool` tensor: a checked copy). `what` names it in errors.
    pub fn input(&self, what: &str) -> PyResult<Input<'_>> {
        // SAFETY: the managed tensor (alive as long as `self`) describes
        // memory its producer keeps for its whole extent.
        unsafe { nax_capi::tensor(what, self.dtype, &self.tensor, std::ptr::null(), 0) }.map_err(crate::errors::error)
    }
}

/// The shape of a tensor as nax reads it (a host scalar's: none).
pub fn shape(input: &Input<'_>) -> Vec<usize> {
    match input {
        Input::View(v) => v.shape().to_vec(),
        Input::Copied(t) => t.shape().to_vec(),
        Input::Scalar(_) => vec![],
    }
}

/// A tensor's elements in nax's own memory (a view copied; `what` names
/// it in errors).
pub fn to_host(input: Input<'_>, what: &str) -> PyResult<nax_runtime::HostTensor> {
    match input {
        Input::View(v) => v.to_host().map_err(|e| crate::errors::error(format!("{what}: {e}"))),
        Input::Copied(t) => Ok(t),
        Input::Scalar(_) => Err(crate::errors::error(format!("{what}: a scalar, not a tensor"))),
    }
}

/// The layout of a tensor to export: its element type, shape, strides in
/// elements and the address of element 0, over memory `owner` keeps.
pub struct Layout<O: Send + Sync + 'static> {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub data: *mut u8,
    pub read_only: bool,
    pub owner: Arc<O>,
}

/// The DLPack element type of a nax dtype.
fn park_dtype(dtype: DType) -> ParkDataType {
    let dl = nax_capi::dl_dtype(dtype);
    ParkDataType::new(DLDataTypeCode(dl.code), dl.bits, dl.lanes)
}

impl<O: Send + Sync + 'static> Layout<O> {
    /// A fresh managed tensor of ABI `M` over the layout, owning a share of `owner`.
    fn export<M: dlpark::ManagedTensorBase>(&self) -> PyResult<Managed<M>> {
        let shape: Vec<i64> = self.shape.iter().map(|&n| n as i64).collect();
        let strides: Vec<i64> = self.strides.iter().map(|&s| s as i64).collect();
        let mut initialized = dlpark::metadata::Dynamic::new(shape, strides)
            .initialize_as::<M>(Arc::clone(&self.owner))
            .map_err(|e| crate::errors::error(format!("cannot describe the tensor to DLPack: {e}")))?;
        initialized.set_data(self.data.cast()).set_dtype(park_dtype(self.dtype)).set_device(ParkDevice::CPU);
        if self.read_only {
            initialized.set_flags(DlpackFlags::READ_ONLY).map_err(|e| crate::errors::error(format!("cannot mark the tensor read-only: {e}")))?;
        }
        // SAFETY: the data pointer addresses the shape's elements at these
        // strides, in memory `owner` keeps alive (the context holds a share
        // of it until the consumer's deleter runs); CPU memory; the flags
        // say whether it may be written.
        Ok(unsafe { initialized.finish() })
    }
}

impl<O: Send + Sync + 'static> DlpackExporter for Layout<O> {
    fn device(&self) -> ParkDevice {
        ParkDevice::CPU
    }

    fn flags(&self) -> DlpackFlags {
        if self.read_only { DlpackFlags::READ_ONLY } else { DlpackFlags::empty() }
    }

    fn prepare_export(&self, _py: Python<'_>, _request: &ExportRequest<'_>) -> PyResult<()> {
        Ok(())
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<dlpark::ffi::DLManagedTensor>> {
        self.export()
    }

    fn export_versioned(&self, _py: Python<'_>) -> PyResult<Managed<dlpark::ffi::DLManagedTensorVersioned>> {
        self.export()
    }
}
