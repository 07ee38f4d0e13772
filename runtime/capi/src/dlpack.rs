//! The C structs of the ABI, laid out as `NAME.h` declares them: DLPack
//! 1.x's `DLTensor` and `DLManagedTensorVersioned`, and nax's `nax_arg` and
//! `nax_result`; and DLPack's dtype codes as nax dtypes.

use nax_runtime::DType;
use std::ffi::{c_char, c_void};

/// DLPack's `DLPackVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLPackVersion {
    /// The major version (1).
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

/// DLPack's `DLDevice`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLDevice {
    /// `kDLCPU` (1), `kDLCUDA` (2), ...
    pub device_type: i32,
    /// The device's index.
    pub device_id: i32,
}

/// DLPack's `DLDataType`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDataType {
    /// `kDLInt` (0), `kDLUInt` (1), `kDLFloat` (2), `kDLBfloat` (4), `kDLBool` (6), ...
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes per element (1 for every tensor nax takes).
    pub lanes: u16,
}

/// DLPack's `DLTensor`.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// The memory; element 0 is at `data + byte_offset`.
    pub data: *mut c_void,
    /// Where the memory is.
    pub device: DLDevice,
    /// The rank.
    pub ndim: i32,
    /// The element type.
    pub dtype: DLDataType,
    /// `ndim` sizes.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or NULL for row-major.
    pub strides: *mut i64,
    /// Bytes from `data` to element 0.
    pub byte_offset: u64,
}

/// DLPack's `DLManagedTensorVersioned`.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The DLPack version of the layout.
    pub version: DLPackVersion,
    /// The producer's context (here: the box that owns everything).
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; the consumer calls it once.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*`.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// `nax_arg`: one argument of `NAME_call`, bound by name.
#[repr(C)]
#[derive(Debug)]
pub struct NaxArg {
    /// The parameter's name.
    pub name: *const c_char,
    /// The tensor (a rank-0 tensor for a host scalar).
    pub tensor: *const DLTensor,
    /// NULL, or `ndim` axis names (NULL entries: unnamed axes).
    pub axes: *const *const c_char,
    /// Bytes the caller owns from `tensor->data`; 0: not given.
    pub capacity: u64,
}

/// `nax_result`: what `NAME_call` gives.
#[repr(C)]
#[derive(Debug)]
pub struct NaxResult {
    /// The result, owned by the caller (who calls its deleter once).
    pub tensor: *mut DLManagedTensorVersioned,
    /// `ndim` axis names, NULL entries for unnamed axes; valid until the
    /// tensor's deleter runs.
    pub axes: *const *const c_char,
}

/// `nax_shard_result`: what `NAME_call_sharded` gives: a result and where
/// it lies in the whole result of the function split over the mesh.
#[repr(C)]
#[derive(Debug)]
pub struct NaxShardResult {
    /// The rank's block (the whole result where not split, or gathered).
    pub result: NaxResult,
    /// `ndim` starts of the block along each axis (0 where not split);
    /// valid until the tensor's deleter runs.
    pub offsets: *const i64,
    /// `ndim` sizes of the whole result; valid as long.
    pub global_shape: *const i64,
}

/// `kDLCPU`.
pub const CPU: i32 = 1;
/// DLPack's version this library writes.
pub const VERSION: DLPackVersion = DLPackVersion { major: 1, minor: 1 };
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the result is the caller's alone.
pub const IS_COPIED: u64 = 1 << 1;

/// The DLPack dtype of a nax dtype.
pub fn dl_dtype(d: DType) -> DLDataType {
    let (code, bits) = match d {
        DType::F16 => (2, 16),
        DType::BF16 => (4, 16),
        DType::F32 => (2, 32),
        DType::F64 => (2, 64),
        DType::I32 => (0, 32),
        DType::I64 => (0, 64),
        DType::Bool => (6, 8),
    };
    DLDataType { code, bits, lanes: 1 }
}

/// The nax dtype of a DLPack dtype, or `None` when nax has none.
pub fn nax_dtype(t: DLDataType) -> Option<DType> {
    [DType::F16, DType::BF16, DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool].into_iter().find(|&d| dl_dtype(d) == t)
}

/// A DLPack dtype in words: `float32x4`, `uint8`, `code 9 (16 bits)`.
pub fn describe(t: DLDataType) -> String {
    let base = match t.code {
        0 => format!("int{}", t.bits),
        1 => format!("uint{}", t.bits),
        2 => format!("float{}", t.bits),
        4 => format!("bfloat{}", t.bits),
        5 => format!("complex{}", t.bits),
        6 => format!("bool ({} bits)", t.bits),
        c => format!("code {c} ({} bits)", t.bits),
    };
    if t.lanes == 1 { base } else { format!("{base}x{}", t.lanes) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_through_dlpack() {
        for d in [DType::F16, DType::BF16, DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool] {
            assert_eq!(nax_dtype(dl_dtype(d)), Some(d));
        }
        assert_eq!(nax_dtype(DLDataType { code: 2, bits: 32, lanes: 4 }), None);
        assert_eq!(describe(DLDataType { code: 2, bits: 32, lanes: 4 }), "float32x4");
        assert_eq!(std::mem::size_of::<DLTensor>(), 48);
        assert_eq!(std::mem::size_of::<DLManagedTensorVersioned>(), 80);
        assert_eq!(std::mem::size_of::<NaxArg>(), 32);
    }
}
