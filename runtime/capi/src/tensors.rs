//! Tensors across the C boundary: a caller's `nax_arg` (a DLPack tensor
//! with axis names) checked and seen as the runtime's bounds-checked view
//! or host scalar, and a result handed over as a `DLManagedTensorVersioned`
//! the caller frees.

use crate::dlpack::{CPU, DLManagedTensorVersioned, DLTensor, IS_COPIED, NaxArg, NaxResult, NaxShardResult, VERSION, describe, dl_dtype, nax_dtype};
use nax_runtime::{Arg, DType, HostTensor, HostType, ParamType, RuntimeError, Scalar, Signature, TensorData, TensorView, row_major_strides};
use std::ffi::{CStr, CString, c_char, c_void};

/// The highest rank a tensor may have (more is surely a corrupt `ndim`).
const MAX_RANK: i32 = 64;

/// Why a tensor argument is refused: what is wrong with it
/// (`NAX_ERR_ARGUMENT`), or the memory a copy of it needs
/// (`NAX_ERR_MEMORY`).
#[derive(Debug)]
pub enum Refusal {
    Invalid(String),
    Memory(String),
}

impl From<String> for Refusal {
    fn from(message: String) -> Refusal {
        Refusal::Invalid(message)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Invalid(m) | Refusal::Memory(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Refusal {}

/// An argument as the call holds it.
pub enum Input<'a> {
    /// The caller's memory, not copied.
    View(TensorView<'a>),
    /// A copy in memory of its own: a tensor whose element 0 is not aligned
    /// for its dtype, or bools whose span holds other bytes too (each
    /// element checked to be 0 or 1).
    Copied(HostTensor),
    /// A host scalar.
    Scalar(Scalar),
}

impl Input<'_> {
    /// As the runtime's argument.
    pub fn arg(&self) -> Arg<'_> {
        match self {
            Input::View(v) => Arg::Tensor(v.clone()),
            Input::Copied(t) => Arg::Tensor(t.view()),
            Input::Scalar(s) => Arg::Scalar(*s),
        }
    }
}

/// Argument `i` as the parameter it names and the runtime's argument; the
/// error message names the parameter and the axis.
///
/// # Safety
/// `a`'s pointers are NULL or valid as ABI.md says, for `'a`.
pub unsafe fn argument<'s, 'a>(signature: &'s Signature, i: usize, a: &'a NaxArg) -> Result<(&'s str, Input<'a>), Refusal> {
    if a.name.is_null() {
        return Err(format!("argument #{i} has a NULL name").into());
    }
    // SAFETY: NUL-terminated (the caller's contract).
    let name = unsafe { CStr::from_ptr(a.name) }.to_str().map_err(|_| format!("argument #{i}'s name is not UTF-8"))?;
    let param = signature.params.iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<&str> = signature.params.iter().map(|p| p.name.as_str()).collect();
        format!("there is no parameter '{}' (the parameters are: {})", nax_runtime::shortened(name), names.join(", "))
    })?;
    let what = format!("parameter '{name}'");
    // SAFETY: the caller's contract.
    let t = unsafe { a.tensor.as_ref() }.ok_or_else(|| format!("{what}: the tensor is NULL"))?;
    if t.device.device_type != CPU {
        return Err(format!(
            "{what}: the tensor is on device type {} (id {}); this library takes CPU tensors (kDLCPU)",
            t.device.device_type, t.device.device_id
        )
        .into());
    }
    let dtype = nax_dtype(t.dtype)
        .ok_or_else(|| format!("{what}: dtype {} is not one nax takes (f16, bf16, f32, f64, i32, i64, bool, one lane)", describe(t.dtype)))?;
    let value = match &param.ty {
        // SAFETY: the caller's contract.
        ParamType::Host(h) => Input::Scalar(unsafe { scalar(&what, *h, dtype, t, a.capacity) }?),
        // SAFETY: the caller's contract.
        ParamType::Tensor(_) => unsafe { tensor(&what, dtype, t, a.axes, a.capacity) }?,
    };
    Ok((param.name.as_str(), value))
}

/// A host scalar from a rank-0 tensor (f64 or f32 for float, i64 or i32
/// for int, bool for bool; an integer tensor also gives a float). The
/// tensor goes through [`tensor`]'s checks first, as every argument does:
/// its one element must lie within `capacity` bytes, at an address the
/// `byte_offset` does not carry outside memory, aligned for its dtype, and a
/// `bool`'s byte must be 0 or 1.
///
/// # Safety
/// `t`'s pointers are valid as ABI.md says; when `capacity` is 0, the
/// element at `byte_offset` is the caller's memory.
unsafe fn scalar(what: &str, h: HostType, dtype: DType, t: &DLTensor, capacity: u64) -> Result<Scalar, Refusal> {
    if t.ndim != 0 {
        return Err(format!("{what} is a host {}: pass a rank-0 tensor, not rank {}", h.as_str(), t.ndim).into());
    }
    if matches!(dtype, DType::F16 | DType::BF16) {
        return Err(format!("{what} is a host {}: pass f64, f32, i64, i32 or bool, not {}", h.as_str(), dtype.as_str()).into());
    }
    // SAFETY: the caller's contract, as `tensor` states it.
    let data = match unsafe { tensor(what, dtype, t, std::ptr::null(), capacity) }? {
        Input::Copied(copy) => copy.into_data(),
        Input::View(view) => {
            TensorData::from_le_bytes(dtype, view.contiguous_bytes().ok_or_else(|| format!("{what}: internal error: a rank-0 tensor is not contiguous"))?)
        }
        Input::Scalar(s) => return Ok(s),
    };
    let value = match data {
        TensorData::F64(v) if v.len() == 1 => Scalar::Float(v[0]),
        TensorData::F32(v) if v.len() == 1 => Scalar::Float(f64::from(v[0])),
        TensorData::I64(v) if v.len() == 1 => Scalar::Int(v[0]),
        TensorData::I32(v) if v.len() == 1 => Scalar::Int(i64::from(v[0])),
        TensorData::Bool(v) if v.len() == 1 => Scalar::Bool(v[0]),
        _ => return Err(format!("{what}: internal error: a rank-0 {} tensor is not one element", dtype.as_str()).into()),
    };
    match (h, value) {
        (HostType::Float, Scalar::Float(_) | Scalar::Int(_)) | (HostType::Int, Scalar::Int(_)) | (HostType::Bool, Scalar::Bool(_)) => Ok(value),
        _ => Err(format!("{what} is a host {}: a {} tensor does not give one", h.as_str(), dtype.as_str()).into()),
    }
}

/// A tensor argument as a bounds-checked view of the caller's memory (a
/// `bool` tensor: a checked copy): what every DLPack tensor nax reads goes
/// through (a C caller's, a Python object's). `what` names it in errors.
///
/// # Safety
/// `t`'s pointers are valid as ABI.md says; when `capacity` is 0, every
/// element the shape and strides address is the caller's memory.
pub unsafe fn tensor<'a>(what: &str, dtype: DType, t: &'a DLTensor, axes: *const *const c_char, capacity: u64) -> Result<Input<'a>, Refusal> {
    if !(0..=MAX_RANK).contains(&t.ndim) {
        return Err(format!("{what}: ndim is {}", t.ndim).into());
    }
    let rank = t.ndim as usize;
    if rank > 0 && t.shape.is_null() {
        return Err(format!("{what}: the shape pointer is NULL for a rank-{rank} tensor").into());
    }
    // SAFETY: `ndim` sizes (the caller's contract).
    let dims = if rank == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(t.shape, rank) } };
    // SAFETY: as above; names are NUL-terminated strings or NULL.
    let names = unsafe { axis_names(what, axes, rank) }?;
    let axis = |i: usize| match &names[i] {
        Some(n) => format!("axis {i} ('{n}')"),
        None => format!("axis {i}"),
    };
    let mut shape = Vec::with_capacity(rank);
    for (i, &n) in dims.iter().enumerate() {
        shape.push(usize::try_from(n).map_err(|_| format!("{what}: {} has negative size {n}", axis(i)))?);
    }
    let strides: Vec<isize> = if t.strides.is_null() {
        row_major_strides(&shape).into_iter().map(|s| s as isize).collect()
    } else {
        // SAFETY: `ndim` strides (the caller's contract).
        let s = unsafe { std::slice::from_raw_parts(t.strides, rank) };
        s.iter()
            .enumerate()
            .map(|(i, &x)| isize::try_from(x).map_err(|_| format!("{what}: {} has stride {x}, too large", axis(i))))
            .collect::<Result<_, _>>()?
    };
    let size = dtype.size_bytes() as i128;
    let count = shape.iter().try_fold(1u128, |acc, &n| acc.checked_mul(n as u128)).filter(|&c| c.saturating_mul(size as u128) <= isize::MAX as u128);
    let Some(count) = count else {
        return Err(format!("{what}: the shape {shape:?} holds more bytes of {} than memory can address", dtype.as_str()).into());
    };
    let shown = |lo: i128, hi: i128| format!("shape {shape:?} and strides {strides:?} reach bytes {lo} to {hi} from `data`");
    if count == 0 {
        // Nothing is read: a view of no memory.
        // SAFETY: no element is addressed.
        return unsafe { TensorView::from_raw_parts(dtype, std::ptr::NonNull::<u64>::dangling().as_ptr().cast(), 0, 0, shape, strides, names) }
            .map(Input::View)
            .map_err(|e| format!("{what}: {e}").into());
    }
    if t.data.is_null() {
        return Err(format!("{what}: the data pointer is NULL for a tensor of {count} elements").into());
    }
    // The lowest and highest element offsets from element 0, and their bytes from `data`.
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&n, &s) in shape.iter().zip(&strides) {
        let last = (n as i128 - 1) * s as i128;
        if last < 0 { lo += last } else { hi += last }
    }
    let offset = i128::from(t.byte_offset);
    let (first_byte, end_byte) = (offset + lo * size, offset + (hi + 1) * size);
    if capacity != 0 && (first_byte < 0 || end_byte > i128::from(capacity)) {
        return Err(format!("{what}: {}, outside the capacity of {capacity} bytes", shown(first_byte, end_byte)).into());
    }
    let base = t.data as usize as i128;
    let (start, end) = (base + first_byte, base + end_byte);
    if start < 0 || end > usize::MAX as i128 || end - start > isize::MAX as i128 {
        return Err(format!("{what}: {}, outside the address space", shown(first_byte, end_byte)).into());
    }
    let len = (hi - lo + 1) as usize;
    let origin = (-lo) as usize;
    let p = start as usize as *const u8;
    // A bool tensor is read in place when every byte of its span is 0 or
    // 1, however many elements a broadcast (a stride of 0) makes of it.
    // SAFETY: the span's bytes are the caller's memory (as below).
    let bools_beside_other_bytes = dtype == DType::Bool && unsafe { std::slice::from_raw_parts(p, len) }.iter().any(|&b| b > 1);
    if !(start as usize).is_multiple_of(dtype.size_bytes()) || bools_beside_other_bytes {
        // An element 0 that is not aligned for its dtype (any `byte_offset`
        // is allowed), or bools beside other bytes: the elements copied.
        // SAFETY: the addressed elements are the caller's memory.
        return unsafe { gathered(what, dtype, p, origin, shape, &strides, names) };
    }
    // SAFETY: the elements from `start` to `end` are the caller's memory
    // (checked against `capacity`, else the caller's contract), aligned
    // for the dtype, every bit pattern of which is a value (for bools,
    // every byte of the span was checked to be 0 or 1 above).
    unsafe { TensorView::from_raw_parts(dtype, p, len, origin, shape, strides, names) }.map(Input::View).map_err(|e| format!("{what}: {e}").into())
}

/// A tensor's elements gathered into aligned memory of its own, row-major
/// (`bool`s each checked to be 0 or 1: a `bool` with another byte is
/// undefined behaviour in the kernels' and the runtime's code alike).
///
/// # Safety
/// Every element at byte `p + (origin + sum(i_k * strides_k)) * size` for
/// indices inside `shape` is the caller's memory (none is 0-sized here).
unsafe fn gathered(
    what: &str,
    dtype: DType,
    p: *const u8,
    origin: usize,
    shape: Vec<usize>,
    strides: &[isize],
    names: Vec<Option<String>>,
) -> Result<Input<'static>, Refusal> {
    let size = dtype.size_bytes();
    let count: usize = shape.iter().product();
    let mut bytes: Vec<u8> = Vec::new();
    bytes.try_reserve_exact(count * size).map_err(|_| Refusal::Memory(format!("{what}: no memory for an aligned copy of {count} elements")))?;
    let mut index = vec![0usize; shape.len()];
    let mut offset = origin as isize;
    for _ in 0..count {
        // SAFETY: the offset addresses an element (the caller's contract).
        let element = unsafe { std::slice::from_raw_parts(p.offset(offset * size as isize), size) };
        if dtype == DType::Bool && element[0] > 1 {
            return Err(format!("{what}: the bool at index {index:?} holds the byte {}, not 0 or 1", element[0]).into());
        }
        bytes.extend_from_slice(element);
        // The next index, last axis fastest, and its offset.
        for k in (0..shape.len()).rev() {
            index[k] += 1;
            offset += strides[k];
            if index[k] < shape[k] {
                break;
            }
            offset -= strides[k] * shape[k] as isize;
            index[k] = 0;
        }
    }
    // Native order is little-endian on every target nax compiles for.
    HostTensor::new(TensorData::from_le_bytes(dtype, &bytes), shape, names).map(Input::Copied).map_err(|e| format!("{what}: {e}").into())
}

/// The axis names of `ndim` axes from a NULL-or-names array.
///
/// # Safety
/// `axes` is NULL or holds `rank` pointers, each NULL or NUL-terminated.
unsafe fn axis_names(what: &str, axes: *const *const c_char, rank: usize) -> Result<Vec<Option<String>>, Refusal> {
    if axes.is_null() {
        return Ok(vec![None; rank]);
    }
    let mut names = Vec::with_capacity(rank);
    for i in 0..rank {
        // SAFETY: `rank` entries (the caller's contract).
        let p = unsafe { *axes.add(i) };
        names.push(if p.is_null() {
            None
        } else {
            // SAFETY: NUL-terminated (the caller's contract).
            Some(unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| format!("{what}: the name of axis {i} is not UTF-8"))?.to_string())
        });
    }
    Ok(names)
}

/// What a result's `manager_ctx` owns: the tensor, its shape, strides and
/// axis names, and the DLPack struct itself.
struct Owned {
    managed: DLManagedTensorVersioned,
    _tensor: HostTensor,
    _shape: Vec<i64>,
    _strides: Vec<i64>,
    _names: Vec<Option<CString>>,
    axes: Vec<*const c_char>,
    offsets: Vec<i64>,
    global_shape: Vec<i64>,
}

/// A result handed to the caller: a row-major tensor the library
/// allocated, freed by its deleter, with where it lies in the whole
/// result (a rank's block of a function split over a mesh: its
/// `offsets` and the whole result's sizes; a whole result: zeros and
/// its own shape).
pub fn result(t: HostTensor, offsets: &[usize], global_shape: &[usize]) -> Result<NaxShardResult, RuntimeError> {
    let to_i64 = |v: usize| i64::try_from(v).map_err(|_| RuntimeError::Internal("a result size does not fit in int64".into()));
    let shape: Vec<i64> = t.shape().iter().map(|&n| to_i64(n)).collect::<Result<_, _>>()?;
    let offsets: Vec<i64> = offsets.iter().map(|&n| to_i64(n)).collect::<Result<_, _>>()?;
    let global_shape: Vec<i64> = global_shape.iter().map(|&n| to_i64(n)).collect::<Result<_, _>>()?;
    let strides: Vec<i64> = row_major_strides(t.shape()).into_iter().map(to_i64).collect::<Result<_, _>>()?;
    let names: Vec<Option<CString>> = t.names().iter().map(|n| n.as_ref().and_then(|n| CString::new(n.as_str()).ok())).collect();
    let axes: Vec<*const c_char> = names.iter().map(|n| n.as_ref().map_or(std::ptr::null(), |n| n.as_ptr())).collect();
    let data: *mut c_void = if t.is_empty() { std::ptr::null_mut() } else { t.data().as_ptr().cast_mut().cast() };
    let owned = Box::new(Owned {
        managed: DLManagedTensorVersioned {
            version: VERSION,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete),
            flags: IS_COPIED,
            dl_tensor: DLTensor {
                data,
                device: crate::dlpack::DLDevice { device_type: CPU, device_id: 0 },
                ndim: shape.len() as i32,
                dtype: dl_dtype(t.dtype()),
                shape: shape.as_ptr().cast_mut(),
                strides: strides.as_ptr().cast_mut(),
                byte_offset: 0,
            },
        },
        _tensor: t,
        _shape: shape,
        _strides: strides,
        _names: names,
        axes,
        offsets,
        global_shape,
    });
    let (axes, offsets, global_shape) = (owned.axes.as_ptr(), owned.offsets.as_ptr(), owned.global_shape.as_ptr());
    let raw = Box::into_raw(owned);
    // SAFETY: `raw` is the box just leaked; the context points back to it.
    unsafe { (*raw).managed.manager_ctx = raw.cast() };
    // SAFETY: as above; the struct lives until the deleter frees the box.
    Ok(NaxShardResult { result: NaxResult { tensor: unsafe { &raw mut (*raw).managed }, axes }, offsets, global_shape })
}

/// Frees a result that is not handed to the caller.
pub fn free(r: NaxResult) {
    // SAFETY: `r` was made by `result` and is dropped here, once.
    unsafe { delete(r.tensor) };
}

/// The deleter of every result: frees everything the result owns.
unsafe extern "C" fn delete(managed: *mut DLManagedTensorVersioned) {
    if managed.is_null() {
        return;
    }
    // SAFETY: the context is the box `result` leaked, freed once (the
    // caller calls the deleter once); dropping plain data cannot panic.
    unsafe {
        let ctx = (*managed).manager_ctx.cast::<Owned>();
        if !ctx.is_null() {
            drop(Box::from_raw(ctx));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dlpack::{DLDataType, DLDevice};

    fn described(data: *mut c_void, shape: &mut [i64], strides: &mut [i64], byte_offset: u64, dtype: DLDataType) -> DLTensor {
        DLTensor {
            data,
            device: DLDevice { device_type: 1, device_id: 0 },
            ndim: shape.len() as i32,
            dtype,
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset,
        }
    }

    /// A bool broadcast to 2^32 elements by strides of 0 is read in place:
    /// one byte checked, nothing copied.
    #[test]
    fn a_broadcast_bool_is_read_in_place() {
        let mut byte = 1u8;
        let (mut shape, mut strides) = ([1i64 << 16, 1 << 16], [0i64, 0]);
        let t = described((&raw mut byte).cast(), &mut shape, &mut strides, 0, DLDataType { code: 6, bits: 8, lanes: 1 });
        // SAFETY: every element addressed is `byte`.
        match unsafe { tensor("mask", DType::Bool, &t, std::ptr::null(), 0) } {
            Ok(Input::View(v)) => assert_eq!(v.shape(), &[1 << 16, 1 << 16]),
            Ok(_) => panic!("the broadcast bool was copied"),
            Err(e) => panic!("{e}"),
        }
    }

    /// A result with an empty axis beside one of 2^63 - 1 elements gets
    /// strides that fit int64 (a DLPack consumer computes with them).
    #[test]
    fn an_empty_result_has_int64_strides() {
        let huge = i64::MAX as usize;
        let t = HostTensor::new(TensorData::F32(Vec::new()), vec![0, 3, huge], vec![None; 3]).expect("an empty tensor");
        let (offsets, shape) = (vec![0; t.rank()], t.shape().to_vec());
        let out = result(t, &offsets, &shape).expect("a result").result;
        // SAFETY: the result's tensor and its arrays live until its deleter runs.
        unsafe {
            let dl = &(*out.tensor).dl_tensor;
            let strides = std::slice::from_raw_parts(dl.strides, 3);
            assert_eq!(strides, &[0, i64::MAX, 1]);
            ((*out.tensor).deleter.expect("a deleter"))(out.tensor);
        }
    }

    /// Element 0 at an odd byte: the f32s are copied to aligned memory.
    #[test]
    fn an_unaligned_tensor_is_copied() {
        let mut bytes = vec![0u8; 1 + 12];
        for (i, x) in [1.5f32, -2.0, 3.25].iter().enumerate() {
            bytes[1 + 4 * i..5 + 4 * i].copy_from_slice(&x.to_le_bytes());
        }
        let (mut shape, mut strides) = ([3i64], [1i64]);
        let t = described(bytes.as_mut_ptr().cast(), &mut shape, &mut strides, 1, DLDataType { code: 2, bits: 32, lanes: 1 });
        // SAFETY: the three elements lie in `bytes`.
        match unsafe { tensor("x", DType::F32, &t, std::ptr::null(), 13) } {
            Ok(Input::Copied(c)) => assert_eq!(c.to_f64_vec(), vec![1.5, -2.0, 3.25]),
            Ok(_) => panic!("an unaligned tensor was read in place"),
            Err(e) => panic!("{e}"),
        }
    }
}
