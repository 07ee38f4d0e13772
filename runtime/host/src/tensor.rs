//! Named host tensors: a dtype, a shape, a name or none per axis, and the
//! elements, row-major and contiguous (LANGUAGE.md section 12).
//!
//! Invariants kept by every constructor: the data's variant is the dtype,
//! the element count is the product of the shape (which fits in `usize`),
//! there is one name slot per axis, and every name is a valid axis name
//! (non-empty, not `_`, no white space: it must survive the space-separated
//! `NAME.axes` metadata of the safetensors files).

use half::{bf16, f16};

use crate::error::HostError;
use nax_contract::DType;

/// The elements of a tensor, row-major and contiguous, one variant per
/// [`DType`].
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    /// IEEE half precision.
    F16(Vec<f16>),
    /// bfloat16.
    BF16(Vec<bf16>),
    /// IEEE single precision.
    F32(Vec<f32>),
    /// IEEE double precision.
    F64(Vec<f64>),
    /// 32-bit signed integers.
    I32(Vec<i32>),
    /// 64-bit signed integers.
    I64(Vec<i64>),
    /// Booleans.
    Bool(Vec<bool>),
}

/// Applies `$body` to the vector inside `$data` (bound to `$v`), whatever
/// its element type; the arms must all have one type.
macro_rules! with_vec {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            TensorData::F16($v) => $body,
            TensorData::BF16($v) => $body,
            TensorData::F32($v) => $body,
            TensorData::F64($v) => $body,
            TensorData::I32($v) => $body,
            TensorData::I64($v) => $body,
            TensorData::Bool($v) => $body,
        }
    };
}

impl TensorData {
    /// The first element's address (for code that reads the elements).
    pub fn as_ptr(&self) -> *const u8 {
        with_vec!(self, v => v.as_ptr().cast())
    }

    /// The first element's address (for code that writes the elements).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        with_vec!(self, v => v.as_mut_ptr().cast())
    }

    /// Sets the number of elements.
    ///
    /// # Safety
    /// As `Vec::set_len`: `len` is within the capacity and every element up
    /// to it is initialised (bools as 0 or 1).
    pub unsafe fn set_len(&mut self, len: usize) {
        // SAFETY: the caller's contract.
        with_vec!(self, v => unsafe { v.set_len(len) })
    }

    /// The elements' bytes, in the machine's order.
    pub fn as_bytes(&self) -> &[u8] {
        let bytes = self.len() * self.dtype().size_bytes();
        // SAFETY: the vector's elements are plain data (bools are bytes 0
        // or 1), `bytes` of them initialised from its first element on.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), bytes) }
    }

    /// The elements' bytes, to write in place; `None` for `bool`s, whose
    /// bytes must stay 0 or 1.
    pub fn as_bytes_mut(&mut self) -> Option<&mut [u8]> {
        if self.dtype() == DType::Bool {
            return None;
        }
        let bytes = self.len() * self.dtype().size_bytes();
        // SAFETY: the vector's elements are numbers, for which every bit
        // pattern is a value; `bytes` of them from its first element on.
        Some(unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr(), bytes) })
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F16(_) => DType::F16,
            TensorData::BF16(_) => DType::BF16,
            TensorData::F32(_) => DType::F32,
            TensorData::F64(_) => DType::F64,
            TensorData::I32(_) => DType::I32,
            TensorData::I64(_) => DType::I64,
            TensorData::Bool(_) => DType::Bool,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        with_vec!(self, v => v.len())
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decodes little-endian elements; a trailing partial element is dropped
    /// (the caller's element-count check then reports it). Bool bytes other
    /// than 0 read as `true`.
    pub fn from_le_bytes(dtype: DType, raw: &[u8]) -> TensorData {
        /// Decodes each `N`-byte chunk with `from`.
        fn chunks<const N: usize, T>(raw: &[u8], from: impl Fn([u8; N]) -> T) -> Vec<T> {
            raw.chunks_exact(N)
                .map(|c| {
                    let mut a = [0u8; N];
                    a.copy_from_slice(c);
                    from(a)
                })
                .collect()
        }
        match dtype {
            DType::F16 => TensorData::F16(chunks(raw, f16::from_le_bytes)),
            DType::BF16 => TensorData::BF16(chunks(raw, bf16::from_le_bytes)),
            DType::F32 => TensorData::F32(chunks(raw, f32::from_le_bytes)),
            DType::F64 => TensorData::F64(chunks(raw, f64::from_le_bytes)),
            DType::I32 => TensorData::I32(chunks(raw, i32::from_le_bytes)),
            DType::I64 => TensorData::I64(chunks(raw, i64::from_le_bytes)),
            DType::Bool => TensorData::Bool(raw.iter().map(|&b| b != 0).collect()),
        }
    }

    /// The elements converted to `f64` from `values`, in the dtype `dtype`:
    /// see [`HostTensor::from_f64`] for the conversions.
    fn from_f64(dtype: DType, values: &[f64]) -> TensorData {
        let it = values.iter().copied();
        match dtype {
            DType::F16 => TensorData::F16(it.map(f16::from_f64).collect()),
            DType::BF16 => TensorData::BF16(it.map(bf16::from_f64).collect()),
            DType::F32 => TensorData::F32(it.map(|x| x as f32).collect()),
            DType::F64 => TensorData::F64(values.to_vec()),
            DType::I32 => TensorData::I32(it.map(|x| x as i32).collect()),
            DType::I64 => TensorData::I64(it.map(|x| x as i64).collect()),
            DType::Bool => TensorData::Bool(it.map(|x| x != 0.0).collect()),
        }
    }

    /// Element `i` as `f64`, or `None` past the end.
    fn get_f64(&self, i: usize) -> Option<f64> {
        Some(match self {
            TensorData::F16(v) => v.get(i)?.to_f64(),
            TensorData::BF16(v) => v.get(i)?.to_f64(),
            TensorData::F32(v) => f64::from(*v.get(i)?),
            TensorData::F64(v) => *v.get(i)?,
            TensorData::I32(v) => f64::from(*v.get(i)?),
            TensorData::I64(v) => *v.get(i)? as f64,
            TensorData::Bool(v) => f64::from(u8::from(*v.get(i)?)),
        })
    }
}

/// A host tensor: what a host passes to a compiled function and gets back.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    dtype: DType,
    shape: Vec<usize>,
    names: Vec<Option<String>>,
    data: TensorData,
}

impl HostTensor {
    /// A tensor of `data` (row-major) with this shape and one name or `None`
    /// per axis. Errors: the element count is not the product of the shape,
    /// the product overflows, the number of names is not the rank, or a
    /// name is invalid (empty, `_`, or containing white space).
    pub fn new(data: TensorData, shape: Vec<usize>, names: Vec<Option<String>>) -> Result<HostTensor, HostError> {
        let expected = element_count(&shape)?;
        if data.len() != expected {
            return Err(HostError::ElementCount { shape, expected, actual: data.len() });
        }
        check_names(&names, shape.len())?;
        Ok(HostTensor { dtype: data.dtype(), shape, names, data })
    }

    /// A tensor of dtype `dtype` holding `values` converted from `f64`:
    /// floats round to nearest (even); integers truncate toward zero, as
    /// torch's `.to(int)` does on in-range values, and otherwise follow
    /// Rust's `as` (out-of-range values saturate at the type's bounds, NaN
    /// gives 0); bool is `value != 0` (so NaN is `true`, as in torch).
    /// Errors as [`HostTensor::new`].
    pub fn from_f64(dtype: DType, shape: Vec<usize>, names: Vec<Option<String>>, values: &[f64]) -> Result<HostTensor, HostError> {
        let expected = element_count(&shape)?;
        if values.len() != expected {
            return Err(HostError::ElementCount { shape, expected, actual: values.len() });
        }
        HostTensor::new(TensorData::from_f64(dtype, values), shape, names)
    }

    /// A rank-0 tensor of dtype `dtype` holding `v`, converted as in
    /// [`HostTensor::from_f64`].
    pub fn scalar_f64(dtype: DType, v: f64) -> HostTensor {
        HostTensor { dtype, shape: Vec::new(), names: Vec::new(), data: TensorData::from_f64(dtype, &[v]) }
    }

    /// A tensor from parts the caller has already checked: the data's
    /// length is the product of the shape, one valid name per axis.
    pub(crate) fn from_parts(data: TensorData, shape: Vec<usize>, names: Vec<Option<String>>) -> HostTensor {
        HostTensor { dtype: data.dtype(), shape, names, data }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The size of each axis.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The name of each axis, `None` for an unnamed one.
    pub fn names(&self) -> &[Option<String>] {
        &self.names
    }

    /// The elements, row-major.
    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// The elements' bytes, row-major, to write in place; `None` for
    /// `bool`s, whose bytes must stay 0 or 1.
    pub fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        self.data.as_bytes_mut()
    }

    /// The elements, row-major, without a copy.
    pub fn into_data(self) -> TensorData {
        self.data
    }

    /// The number of elements (the product of the shape).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the tensor has no elements (some axis has size 0).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Every element as `f64` (bool gives 0 or 1; i64 beyond 2^53 rounds).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match &self.data {
            TensorData::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            TensorData::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
            TensorData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::F64(v) => v.clone(),
            TensorData::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| f64::from(u8::from(x))).collect(),
        }
    }

    /// The element at row-major position `flat_index` as `f64` (as in
    /// [`HostTensor::to_f64_vec`]), or `None` when it is past the end.
    pub fn get_f64(&self, flat_index: usize) -> Option<f64> {
        self.data.get_f64(flat_index)
    }

    /// The same tensor with other axis names. Errors as [`HostTensor::new`].
    pub fn with_names(self, names: Vec<Option<String>>) -> Result<HostTensor, HostError> {
        check_names(&names, self.rank())?;
        Ok(HostTensor { names, ..self })
    }

    /// A contiguous copy with the axes reordered: axis `i` of the result is
    /// axis `perm[i]` of `self`, names included (the view's permutation,
    /// copied by its tiled kernel). An error when `perm` is not a
    /// permutation of `0..rank`.
    pub fn permuted(&self, perm: &[usize]) -> Result<HostTensor, HostError> {
        self.view().permuted(perm)?.to_host()
    }
}

/// An error unless `perm` is a permutation of `0..rank`.
pub(crate) fn check_permutation(perm: &[usize], rank: usize) -> Result<(), HostError> {
    let mut seen = vec![false; rank];
    let valid = perm.len() == rank && perm.iter().all(|&p| p < rank && !std::mem::replace(&mut seen[p], true));
    if valid { Ok(()) } else { Err(HostError::InvalidPermutation { perm: perm.to_vec(), rank }) }
}

/// The product of `shape`: 0 when any size is 0, an error when it
/// overflows `usize`.
pub(crate) fn element_count(shape: &[usize]) -> Result<usize, HostError> {
    if shape.contains(&0) {
        return Ok(0);
    }
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).ok_or_else(|| HostError::ShapeOverflow { shape: shape.to_vec() })
}

/// Checks that an axis name can be written to and read back from the
/// `NAME.axes` metadata: non-empty, not `_`, no white space.
fn check_axis_name(name: &str) -> Result<(), HostError> {
    let reason = if name.is_empty() {
        "an axis name cannot be empty"
    } else if name == "_" {
        "'_' stands for an unnamed axis; use None"
    } else if name.chars().any(char::is_whitespace) {
        "an axis name cannot contain white space"
    } else if name.chars().any(char::is_control) {
        "an axis name cannot contain control characters (a NUL byte, an escape)"
    } else {
        return Ok(());
    };
    Err(HostError::InvalidAxisName { name: name.to_string(), reason })
}

/// Checks one name slot per axis, each name valid.
pub(crate) fn check_names(names: &[Option<String>], rank: usize) -> Result<(), HostError> {
    if names.len() != rank {
        return Err(HostError::NamesRank { given: names.to_vec(), rank });
    }
    names.iter().flatten().try_for_each(|n| check_axis_name(n))
}

/// The row-major strides of a shape, in elements: the last axis steps by 1,
/// each other by the product of the sizes after it (saturating). An empty
/// shape (a size 0) addresses no element: its sizes of 0 count as 1, as
/// torch lays out empty tensors, and a stride past `isize::MAX` is 0, so
/// that every stride is a valid `isize` and `int64` (`[0 3 2^63-1]` has
/// strides `[0 2^63-1 1]`, not an overflow).
pub fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let empty = shape.contains(&0);
    let mut strides = vec![1usize; shape.len()];
    let mut acc = 1usize;
    for (stride, &d) in strides.iter_mut().zip(shape).rev() {
        *stride = if empty && acc > isize::MAX as usize { 0 } else { acc };
        acc = acc.saturating_mul(if empty { d.max(1) } else { d });
    }
    strides
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::names;

    fn iota(shape: &[usize]) -> HostTensor {
        let n = element_count(shape).unwrap();
        let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
        HostTensor::from_f64(DType::F32, shape.to_vec(), vec![None; shape.len()], &v).unwrap()
    }

    #[test]
    fn new_checks_count_names_and_overflow() {
        let t = HostTensor::new(TensorData::I32(vec![1, 2, 3, 4, 5, 6]), vec![2, 3], names("a b")).unwrap();
        assert_eq!(t.dtype(), DType::I32);
        assert_eq!(t.shape(), &[2, 3]);
        assert_eq!(t.names(), names("a b").as_slice());
        assert_eq!(t.len(), 6);
        assert_eq!(t.rank(), 2);
        assert!(!t.is_empty());
        assert_eq!(t.data(), &TensorData::I32(vec![1, 2, 3, 4, 5, 6]));

        let e = HostTensor::new(TensorData::I32(vec![1, 2]), vec![3], names("_")).unwrap_err();
        assert!(matches!(e, HostError::ElementCount { expected: 3, actual: 2, .. }), "{e}");
        let e = HostTensor::new(TensorData::I32(vec![1, 2]), vec![2], names("a b")).unwrap_err();
        assert!(matches!(e, HostError::NamesRank { rank: 1, .. }), "{e}");
        assert_eq!(e.to_string(), "2 axis names [a b] given for a tensor of rank 1");
        let e = HostTensor::new(TensorData::I32(vec![]), vec![usize::MAX, 2], names("_ _")).unwrap_err();
        assert!(matches!(e, HostError::ShapeOverflow { .. }), "{e}");
        // A zero anywhere makes the count 0, even after sizes whose product overflows.
        let t = HostTensor::new(TensorData::F64(vec![]), vec![usize::MAX, 2, 0], names("_ _ _")).unwrap();
        assert!(t.is_empty());
        assert!(t.permuted(&[2, 1, 0]).unwrap().is_empty());
        assert!(t.permuted(&[0, 1, 2]).unwrap().is_empty());
    }

    #[test]
    fn empty_shapes_have_strides_that_fit_int64() {
        let huge = i64::MAX as usize;
        assert_eq!(row_major_strides(&[0, 3, huge]), vec![0, huge, 1]);
        assert_eq!(row_major_strides(&[2, 0, 5]), vec![5, 5, 1]);
        assert_eq!(row_major_strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert!(row_major_strides(&[huge, huge, 0]).iter().all(|&s| s <= huge));
    }

    #[test]
    fn new_rejects_bad_names() {
        for bad in ["", "_", "a b", "a\tb"] {
            let e = HostTensor::new(TensorData::Bool(vec![true]), vec![1], vec![Some(bad.into())]).unwrap_err();
            assert!(matches!(e, HostError::InvalidAxisName { .. }), "{bad:?}: {e}");
        }
    }

    #[test]
    fn from_f64_converts_per_dtype() {
        let v = [1.7, -1.7, 0.0, f64::NAN, 1e20, -1e20];
        let shape = vec![6];
        let n = vec![None];
        let t = HostTensor::from_f64(DType::I32, shape.clone(), n.clone(), &v).unwrap();
        assert_eq!(t.data(), &TensorData::I32(vec![1, -1, 0, 0, i32::MAX, i32::MIN]));
        let t = HostTensor::from_f64(DType::I64, shape.clone(), n.clone(), &v).unwrap();
        assert_eq!(t.data(), &TensorData::I64(vec![1, -1, 0, 0, i64::MAX, i64::MIN]));
        let t = HostTensor::from_f64(DType::Bool, shape.clone(), n.clone(), &v).unwrap();
        assert_eq!(t.data(), &TensorData::Bool(vec![true, true, false, true, true, true]));
        let t = HostTensor::from_f64(DType::F32, vec![2], n.clone(), &[0.1, 1e300]).unwrap();
        assert_eq!(t.data(), &TensorData::F32(vec![0.1f32, f32::INFINITY]));
        let t = HostTensor::from_f64(DType::F16, vec![2], n.clone(), &[0.5, 65520.0]).unwrap();
        assert_eq!(t.data(), &TensorData::F16(vec![f16::from_f32(0.5), f16::INFINITY]));
        let t = HostTensor::from_f64(DType::BF16, vec![1], n.clone(), &[1.0 + 1.0 / 512.0]).unwrap();
        // 1 + 2^-9 is halfway between two bf16 values: ties go to even (1.0).
        assert_eq!(t.data(), &TensorData::BF16(vec![bf16::ONE]));
        let t = HostTensor::from_f64(DType::F64, vec![1], n.clone(), &[0.1]).unwrap();
        assert_eq!(t.data(), &TensorData::F64(vec![0.1]));
        let e = HostTensor::from_f64(DType::F64, vec![2], n, &[0.1]).unwrap_err();
        assert!(matches!(e, HostError::ElementCount { expected: 2, actual: 1, .. }));
    }

    #[test]
    fn f64_views() {
        let t = HostTensor::new(TensorData::Bool(vec![true, false]), vec![2], names("_")).unwrap();
        assert_eq!(t.to_f64_vec(), vec![1.0, 0.0]);
        assert_eq!(t.get_f64(0), Some(1.0));
        assert_eq!(t.get_f64(2), None);
        for dtype in DType::ALL.into_iter().filter(|d| *d != DType::Bool) {
            let t = HostTensor::from_f64(dtype, vec![3], names("_"), &[-2.0, 0.0, 3.0]).unwrap();
            assert_eq!(t.dtype(), dtype);
            assert_eq!(t.data().dtype(), dtype);
            assert_eq!(t.to_f64_vec(), vec![-2.0, 0.0, 3.0], "{dtype:?}");
            assert_eq!(t.get_f64(2), Some(3.0), "{dtype:?}");
            assert_eq!(t.get_f64(3), None);
        }
    }

    #[test]
    fn scalars() {
        let t = HostTensor::scalar_f64(DType::I64, -3.9);
        assert_eq!(t.rank(), 0);
        assert_eq!(t.len(), 1);
        assert!(t.names().is_empty());
        assert_eq!(t.data(), &TensorData::I64(vec![-3]));
        assert_eq!(t.permuted(&[]).unwrap(), t);
    }

    #[test]
    fn with_names_checks_rank() {
        let t = iota(&[2, 3]);
        let t = t.with_names(names("a _")).unwrap();
        assert_eq!(t.names(), names("a _").as_slice());
        assert!(t.clone().with_names(names("a")).is_err());
        assert!(t.with_names(vec![Some("_".into()), None]).is_err());
    }

    /// The reference: element at result index `out` is the source element
    /// at the index with `src[perm[i]] = out[i]`.
    fn permute_reference(t: &HostTensor, perm: &[usize]) -> Vec<f64> {
        let shape = t.shape();
        let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let n = t.len();
        let vals = t.to_f64_vec();
        let mut res = Vec::with_capacity(n);
        for flat in 0..n {
            let mut out_idx = vec![0; shape.len()];
            let mut rem = flat;
            for i in (0..shape.len()).rev() {
                out_idx[i] = rem % out_shape[i];
                rem /= out_shape[i];
            }
            let mut src_idx = vec![0; shape.len()];
            for (i, &p) in perm.iter().enumerate() {
                src_idx[p] = out_idx[i];
            }
            let src_flat = src_idx.iter().zip(shape).fold(0, |acc, (&i, &d)| acc * d + i);
            res.push(vals[src_flat]);
        }
        res
    }

    fn all_perms(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![vec![]];
        }
        let mut out = Vec::new();
        for p in all_perms(n - 1) {
            for pos in 0..n {
                let mut q = p.clone();
                q.insert(pos, n - 1);
                out.push(q);
            }
        }
        out
    }

    #[test]
    fn permuted_matches_reference() {
        for shape in [vec![5], vec![2, 3], vec![2, 3, 4], vec![3, 1, 2, 2], vec![1, 1, 1]] {
            let t = iota(&shape).with_names((0..shape.len()).map(|i| Some(format!("a{i}"))).collect());
            let t = t.unwrap();
            for perm in all_perms(shape.len()) {
                let p = t.permuted(&perm).unwrap();
                assert_eq!(p.to_f64_vec(), permute_reference(&t, &perm), "{shape:?} {perm:?}");
                let want_shape: Vec<usize> = perm.iter().map(|&i| shape[i]).collect();
                assert_eq!(p.shape(), want_shape.as_slice());
                let want_names: Vec<_> = perm.iter().map(|&i| t.names()[i].clone()).collect();
                assert_eq!(p.names(), want_names.as_slice());
            }
        }
    }

    #[test]
    fn permuted_keeps_dtype() {
        let t = HostTensor::new(TensorData::Bool(vec![true, false, false, true, true, false]), vec![2, 3], names("_ _")).unwrap();
        let p = t.permuted(&[1, 0]).unwrap();
        assert_eq!(p.data(), &TensorData::Bool(vec![true, true, false, true, false, false]));
        let t = HostTensor::new(TensorData::I64(vec![1, 2, 3, 4]), vec![2, 2], names("_ _")).unwrap();
        assert_eq!(t.permuted(&[1, 0]).unwrap().into_data(), TensorData::I64(vec![1, 3, 2, 4]));
    }

    #[test]
    fn permuted_rejects_non_permutations() {
        let t = iota(&[2, 3]);
        for bad in [&[0][..], &[0, 0], &[0, 2], &[1, 0, 2]] {
            let e = t.permuted(bad).unwrap_err();
            assert!(matches!(e, HostError::InvalidPermutation { rank: 2, .. }), "{bad:?}");
        }
    }
}
