//! Borrowed tensors: a view of a caller's memory (any strides, named axes)
//! passed to a call without a copy, and a caller's contiguous buffer a call
//! writes its result into.
//!
//! Invariant kept by every constructor: every element a view's shape and
//! strides reach lies inside the slice it borrows (checked with overflow
//! checks), so nothing reads out of bounds whatever the caller passes.

use crate::error::HostError;
use crate::tensor::{HostTensor, TensorData, check_names, element_count};
use half::{bf16, f16};
use nax_contract::DType;
use std::marker::PhantomData;

mod sealed {
    pub trait Sealed {}
}

/// An element type a tensor can hold: `f16`, `bf16`, `f32`, `f64`, `i32`,
/// `i64`, `bool`.
pub trait Element: Copy + Send + Sync + sealed::Sealed + 'static {
    /// Its dtype.
    const DTYPE: DType;

    /// The elements of `data` when it holds this type.
    fn slice(data: &TensorData) -> Option<&[Self]>;

    /// Elements of this type as tensor data.
    fn into_data(v: Vec<Self>) -> TensorData;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$d;

            fn slice(data: &TensorData) -> Option<&[Self]> {
                match data {
                    TensorData::$d(v) => Some(v),
                    _ => None,
                }
            }

            fn into_data(v: Vec<Self>) -> TensorData {
                TensorData::$d(v)
            }
        }
    )*};
}
element!(f16 => F16, bf16 => BF16, f32 => F32, f64 => F64, i32 => I32, i64 => I64, bool => Bool);

/// A borrowed tensor: dtype, shape, strides (in elements, any sign), a
/// name or none per axis, over memory the caller keeps.
#[derive(Clone, Debug)]
pub struct TensorView<'a> {
    dtype: DType,
    shape: Vec<usize>,
    strides: Vec<isize>,
    names: Vec<Option<String>>,
    /// The element at index `[0, 0, ...]`.
    start: *const u8,
    borrow: PhantomData<&'a [u8]>,
}

// SAFETY: a view is a shared borrow of plain data (`&'a [T]` with `T: Sync`).
unsafe impl Send for TensorView<'_> {}
// SAFETY: as above; nothing is written through a view.
unsafe impl Sync for TensorView<'_> {}

/// The row-major strides of a shape, in elements, as a view's steps.
pub fn row_major_steps(shape: &[usize]) -> Vec<isize> {
    crate::tensor::row_major_strides(shape).into_iter().map(|s| s as isize).collect()
}

/// The lowest and highest element offsets a shape and strides reach from
/// the start, or `None` when some offset overflows. An empty shape reaches
/// only offset 0; a shape with a zero size reaches nothing (`Some(None)`).
fn reach(shape: &[usize], strides: &[isize]) -> Option<Option<(isize, isize)>> {
    if shape.contains(&0) {
        return Some(None);
    }
    let (mut lo, mut hi) = (0isize, 0isize);
    for (&n, &s) in shape.iter().zip(strides) {
        let last = isize::try_from(n - 1).ok()?.checked_mul(s)?;
        if last < 0 {
            lo = lo.checked_add(last)?;
        } else {
            hi = hi.checked_add(last)?;
        }
    }
    Some(Some((lo, hi)))
}

impl<'a> TensorView<'a> {
    /// A contiguous, row-major view of `data` with this shape and one name
    /// or `None` per axis. Errors: the element count is not the product of
    /// the shape, or the names do not fit.
    pub fn new<T: Element>(data: &'a [T], shape: Vec<usize>, names: Vec<Option<String>>) -> Result<TensorView<'a>, HostError> {
        let expected = element_count(&shape)?;
        if data.len() != expected {
            return Err(HostError::ElementCount { shape, expected, actual: data.len() });
        }
        let strides = row_major_steps(&shape);
        TensorView::strided(data, 0, shape, strides, names)
    }

    /// A view of `data` whose element `[i, j, ...]` is
    /// `data[offset + i * strides[0] + j * strides[1] + ...]` (strides in
    /// elements; negative and zero strides allowed). An error when some
    /// element would lie outside `data`, or the names do not fit.
    ///
    /// ```
    /// use nax_host::TensorView;
    /// // A 2 x 3 row-major buffer seen as its 3 x 2 transpose, without a copy.
    /// let data = [0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
    /// let t = TensorView::strided(&data, 0, vec![3, 2], vec![1, 3], vec![Some("m".into()), Some("n".into())])?;
    /// assert_eq!(t.to_host()?.to_f64_vec(), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    /// // A step that would leave the buffer is refused.
    /// assert!(TensorView::strided(&data, 0, vec![3, 2], vec![2, 3], vec![None, None]).is_err());
    /// # Ok::<(), nax_host::HostError>(())
    /// ```
    pub fn strided<T: Element>(
        data: &'a [T],
        offset: usize,
        shape: Vec<usize>,
        strides: Vec<isize>,
        names: Vec<Option<String>>,
    ) -> Result<TensorView<'a>, HostError> {
        if strides.len() != shape.len() {
            return Err(HostError::StridesRank { shape, strides });
        }
        check_names(&names, shape.len())?;
        // The element count fits in `usize` (zero strides could repeat one element past it).
        element_count(&shape)?;
        let out_of_bounds = || HostError::ViewOutOfBounds { shape: shape.clone(), strides: strides.clone(), offset, len: data.len() };
        let start = match reach(&shape, &strides).ok_or_else(out_of_bounds)? {
            None => data.as_ptr(),
            Some((lo, hi)) => {
                let offset_i = isize::try_from(offset).map_err(|_| out_of_bounds())?;
                let (first, last) = (offset_i.checked_add(lo), offset_i.checked_add(hi));
                match (first, last) {
                    (Some(first), Some(last)) if first >= 0 && (last as usize) < data.len() => {
                        // SAFETY: `offset` <= `last` < `data.len()`, so the pointer is inside `data`.
                        unsafe { data.as_ptr().add(offset) }
                    }
                    _ => return Err(out_of_bounds()),
                }
            }
        };
        Ok(TensorView { dtype: T::DTYPE, shape, strides, names, start: start.cast(), borrow: PhantomData })
    }

    /// [`TensorView::strided`] over `len` elements of `dtype` at `ptr`:
    /// memory a caller describes by address (a C caller's tensor, a
    /// library's embedded weights).
    ///
    /// # Safety
    /// `ptr` points to `len` initialised elements of `dtype`, aligned for
    /// it, not written while the view lives (`'a`); any aligned non-NULL
    /// pointer when `len` is 0; for `bool`, every byte is 0 or 1.
    pub unsafe fn from_raw_parts(
        dtype: DType,
        ptr: *const u8,
        len: usize,
        offset: usize,
        shape: Vec<usize>,
        strides: Vec<isize>,
        names: Vec<Option<String>>,
    ) -> Result<TensorView<'a>, HostError> {
        // The view over the dtype's element type.
        macro_rules! typed {
            ($t:ty) => {
                // SAFETY: the caller's contract, for the dtype's element type.
                TensorView::strided(unsafe { std::slice::from_raw_parts(ptr.cast::<$t>(), len) }, offset, shape, strides, names)
            };
        }
        match dtype {
            DType::F16 => typed!(f16),
            DType::BF16 => typed!(bf16),
            DType::F32 => typed!(f32),
            DType::F64 => typed!(f64),
            DType::I32 => typed!(i32),
            DType::I64 => typed!(i64),
            DType::Bool => typed!(bool),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The size of each axis.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The step of each axis, in elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// The name of each axis, `None` for an unnamed one.
    pub fn names(&self) -> &[Option<String>] {
        &self.names
    }

    /// The number of axes.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements (0 when some axis is empty, whatever the
    /// others: their product alone may not fit in `usize`).
    pub fn len(&self) -> usize {
        if self.is_empty() { 0 } else { self.shape.iter().product() }
    }

    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.shape.contains(&0)
    }

    /// Whether the elements lie row-major and contiguous from the start
    /// (what kernels read without a copy).
    pub fn is_contiguous(&self) -> bool {
        // An empty view addresses nothing: any strides will do.
        if self.shape.contains(&0) {
            return true;
        }
        let mut expected = 1isize;
        for (&n, &s) in self.shape.iter().zip(&self.strides).rev() {
            if n != 1 && s != expected {
                return false;
            }
            expected = expected.saturating_mul(n as isize);
        }
        true
    }

    /// The address of element `[0, 0, ...]`.
    pub fn as_ptr(&self) -> *const u8 {
        self.start
    }

    /// The elements' bytes, when they lie row-major and contiguous.
    pub fn contiguous_bytes(&self) -> Option<&'a [u8]> {
        if !self.is_contiguous() {
            return None;
        }
        // SAFETY: a contiguous view's `len()` elements of its dtype lie from
        // `start`, borrowed for `'a` (an empty view reads no byte).
        Some(if self.is_empty() { &[] } else { unsafe { std::slice::from_raw_parts(self.start, self.len() * self.dtype().size_bytes()) } })
    }

    /// The same elements under other axis names.
    pub fn with_names(self, names: Vec<Option<String>>) -> Result<TensorView<'a>, HostError> {
        check_names(&names, self.rank())?;
        Ok(TensorView { names, ..self })
    }

    /// The axes reordered without a copy: axis `i` of the result is axis
    /// `perm[i]` of `self`, names included. An error when `perm` is not a
    /// permutation of `0..rank`.
    pub fn permuted(&self, perm: &[usize]) -> Result<TensorView<'a>, HostError> {
        crate::tensor::check_permutation(perm, self.rank())?;
        Ok(TensorView {
            dtype: self.dtype,
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            names: perm.iter().map(|&p| self.names[p].clone()).collect(),
            start: self.start,
            borrow: PhantomData,
        })
    }

    /// A contiguous, row-major copy of the elements into a host tensor.
    /// Views with non-negative strides are copied by the tiled pointwise
    /// kernel of the named ops (a transposed view is read in cache tiles,
    /// large copies split across rayon's current pool); others element by
    /// element.
    pub fn to_host(&self) -> Result<HostTensor, HostError> {
        macro_rules! gather {
            ($t:ty) => {{
                let out: Vec<$t> = match self.tiled::<$t>() {
                    Some(copied) => copied?,
                    None => {
                        let mut out = Vec::new();
                        out.try_reserve_exact(self.len()).map_err(|_| self.allocation_error())?;
                        self.for_each_offset(|o| {
                            // SAFETY: every offset a view reaches is inside its borrow (see `strided`).
                            out.push(unsafe { *self.start.cast::<$t>().offset(o) })
                        });
                        out
                    }
                };
                <$t as Element>::into_data(out)
            }};
        }
        let data = match self.dtype {
            DType::F16 => gather!(f16),
            DType::BF16 => gather!(bf16),
            DType::F32 => gather!(f32),
            DType::F64 => gather!(f64),
            DType::I32 => gather!(i32),
            DType::I64 => gather!(i64),
            DType::Bool => gather!(bool),
        };
        Ok(HostTensor::from_parts(data, self.shape.clone(), self.names.clone()))
    }

    /// The error for a copy that cannot be allocated.
    fn allocation_error(&self) -> HostError {
        let count = self.len();
        HostError::Allocation { bytes: count.saturating_mul(self.dtype.size_bytes()), count }
    }

    /// The copy through the tiled kernel, when every stride is
    /// non-negative (`None` otherwise, or for an empty view).
    fn tiled<T: Element>(&self) -> Option<Result<Vec<T>, HostError>> {
        let strides: Vec<usize> = self.strides.iter().map(|&s| usize::try_from(s).ok()).collect::<Option<_>>()?;
        let (_, hi) = reach(&self.shape, &self.strides)??;
        let geometry = crate::strided::Geometry::new(&self.shape, &strides, &strides)?;
        // SAFETY: the view reaches offsets 0..=hi from its start (strides
        // are non-negative), all inside the slice it borrows (see `strided`).
        let data = unsafe { std::slice::from_raw_parts(self.start.cast::<T>(), hi as usize + 1) };
        Some(crate::strided::pointwise(&geometry, data, data, |x, _| x).map_err(|_| self.allocation_error()))
    }

    /// Calls `f` with the offset of each element, in row-major order of the
    /// view's axes; the last axis runs innermost, in a plain loop.
    fn for_each_offset(&self, mut f: impl FnMut(isize)) {
        if self.is_empty() {
            return;
        }
        let Some((&inner, outer)) = self.shape.split_last() else {
            f(0);
            return;
        };
        let step = self.strides[self.rank() - 1];
        let mut index = vec![0usize; outer.len()];
        loop {
            let base: isize = index.iter().zip(&self.strides).map(|(&i, &s)| i as isize * s).sum();
            (0..inner as isize).for_each(|j| f(base + j * step));
            let Some(axis) = (0..outer.len()).rev().find(|&a| index[a] + 1 < outer[a]) else { return };
            index[axis] += 1;
            index[axis + 1..].fill(0);
        }
    }
}

impl HostTensor {
    /// A contiguous view of this tensor's elements.
    pub fn view(&self) -> TensorView<'_> {
        let strides = row_major_steps(self.shape());
        TensorView {
            dtype: self.dtype(),
            shape: self.shape().to_vec(),
            strides,
            names: self.names().to_vec(),
            start: self.data().as_ptr(),
            borrow: PhantomData,
        }
    }
}

/// A caller's contiguous, row-major buffer that a call writes its result
/// into (`call_into`): the elements are the caller's, borrowed mutably for
/// the call.
#[derive(Debug)]
pub struct TensorMut<'a> {
    dtype: DType,
    len: usize,
    start: *mut u8,
    borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: an exclusive borrow of plain data (`&'a mut [T]` with `T: Send`).
unsafe impl Send for TensorMut<'_> {}

impl<'a> TensorMut<'a> {
    /// The whole of `data` as a result buffer.
    pub fn new<T: Element>(data: &'a mut [T]) -> TensorMut<'a> {
        TensorMut { dtype: T::DTYPE, len: data.len(), start: data.as_mut_ptr().cast(), borrow: PhantomData }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the first element.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.start
    }

    /// Copies a result of the same dtype and element count into the buffer.
    pub fn copy_from(&mut self, t: &HostTensor) -> Result<(), HostError> {
        if t.dtype() != self.dtype || t.len() != self.len {
            return Err(HostError::OutputBuffer { expected_dtype: t.dtype(), expected_len: t.len(), dtype: self.dtype, len: self.len });
        }
        let bytes = self.len * self.dtype.size_bytes();
        // SAFETY: both hold `len` elements of one dtype; the caller's buffer
        // is borrowed exclusively, so they do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(t.data().as_ptr(), self.start, bytes) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::names;

    #[test]
    fn a_transposed_view_reads_by_strides() {
        let data: Vec<f32> = (0..6).map(|i| i as f32).collect();
        let v = TensorView::strided(&data, 0, vec![3, 2], vec![1, 3], names("n d")).unwrap();
        assert!(!v.is_contiguous());
        assert_eq!(v.to_host().unwrap().to_f64_vec(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        let back = v.permuted(&[1, 0]).unwrap();
        assert!(back.is_contiguous());
        assert_eq!(back.names(), names("d n").as_slice());
        // Negative strides: the rows reversed.
        let r = TensorView::strided(&data, 3, vec![2, 3], vec![-3, 1], names("_ _")).unwrap();
        assert_eq!(r.to_host().unwrap().to_f64_vec(), vec![3.0, 4.0, 5.0, 0.0, 1.0, 2.0]);
    }

    #[test]
    fn views_never_reach_past_their_slice() {
        let data = [0i64; 6];
        assert!(matches!(TensorView::strided(&data, 0, vec![2, 3], vec![3, 2], names("_ _")), Err(HostError::ViewOutOfBounds { .. })));
        assert!(TensorView::strided(&data, 1, vec![2, 3], vec![3, 1], names("_ _")).is_err());
        assert!(TensorView::strided(&data, 0, vec![2, 3], vec![-3, 1], names("_ _")).is_err());
        assert!(TensorView::strided(&data, 0, vec![usize::MAX, 2], vec![isize::MAX, 1], names("_ _")).is_err());
        assert!(TensorView::strided(&data, 0, vec![2], vec![1, 1], names("_")).is_err());
        // Zero strides repeat one element, but never past a countable size.
        assert!(matches!(TensorView::strided(&data, 0, vec![1 << 40, 1 << 40], vec![0, 0], names("_ _")), Err(HostError::ShapeOverflow { .. })));
        assert_eq!(TensorView::strided(&data, 0, vec![3, 4], vec![0, 0], names("_ _")).unwrap().to_host().unwrap().len(), 12);
        // Nothing is reached by an empty view, whatever its strides.
        assert!(TensorView::strided(&data, 99, vec![0, 3], vec![1000, 1], names("_ _")).is_ok());
        assert!(TensorView::new(&data, vec![4], names("_")).is_err());
    }

    #[test]
    fn a_result_buffer_takes_only_its_own_dtype_and_length() {
        let t = HostTensor::from_f64(DType::F32, vec![2], names("_"), &[1.0, 2.0]).unwrap();
        let mut out = [0f32; 2];
        TensorMut::new(&mut out).copy_from(&t).unwrap();
        assert_eq!(out, [1.0, 2.0]);
        let mut wrong = [0f64; 2];
        assert!(TensorMut::new(&mut wrong).copy_from(&t).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Any shape, strides, offset and slice: the view is refused, or it
        /// reads exactly the elements plain index arithmetic names, each
        /// inside the slice (checked here with `get`, never trusted).
        #[test]
        fn a_view_is_refused_or_reads_what_its_strides_name(
            shape in proptest::collection::vec(0usize..5, 0..4),
            strides in proptest::collection::vec(-7isize..8, 0..4),
            offset in 0usize..40,
            len in 0usize..40,
        ) {
            let data: Vec<i64> = (0..len as i64).collect();
            let rank = shape.len();
            let view = TensorView::strided(&data, offset, shape.clone(), strides.clone(), vec![None; rank]);
            if strides.len() != rank {
                proptest::prop_assert!(view.is_err());
                return Ok(());
            }
            let count: usize = shape.iter().product();
            let (mut expected, mut inside) = (Vec::with_capacity(count), true);
            for flat in 0..count {
                let mut rest = flat;
                let mut at = offset as isize;
                for (&n, &st) in shape.iter().zip(&strides).rev() {
                    at += (rest % n) as isize * st;
                    rest /= n;
                }
                match usize::try_from(at).ok().and_then(|i| data.get(i)) {
                    Some(&v) => expected.push(v as f64),
                    None => inside = false,
                }
            }
            match (view, inside) {
                (Ok(v), true) => proptest::prop_assert_eq!(v.to_host().unwrap().to_f64_vec(), expected),
                (Err(_), false) => {}
                (Ok(_), false) => proptest::prop_assert!(false, "a view reaching outside its slice was accepted"),
                (Err(e), true) => proptest::prop_assert!(false, "refused a view that fits: {}", e),
            }
        }
    }
}
