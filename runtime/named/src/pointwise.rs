//! Eager pointwise ops between named tensors: [`BinaryOp`], the methods
//! [`NamedTensor::binary`], `add sub mul div eq ne lt le gt ge`, and `+ - *
//! /` on references (their output is a `Result`).
//!
//! An op lines the operands up ([`align`]), reads each operand at the
//! positions its label joins keep (a gathered copy, only where labels
//! differ), converts an operand whose dtype is not the promoted one (one
//! pass), and runs the same-dtype kernel of [`kernel`](super::kernel).

use std::borrow::Cow;
use std::ops::{Add, Div, Mul, Sub};

use half::{bf16, f16};
use rayon::prelude::*;

use crate::alignment::align;
use crate::element::Arithmetic;
use crate::error::NamedError;
use crate::named_tensor::NamedTensor;
use nax_host::DType;
use nax_host::Element;
use nax_host::strided::{Geometry, pointwise};
use nax_host::{HostError, HostTensor, TensorData, row_major_strides};

/// A pointwise binary operation between named tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `+`; logical or on bools.
    Add,
    /// `-`; an error on two bools.
    Sub,
    /// `*`; logical and on bools.
    Mul,
    /// `/`, true division: integers and bools divide in f32.
    Div,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

impl BinaryOp {
    /// Every op.
    pub const ALL: [BinaryOp; 10] =
        [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge];

    /// Whether the op is a comparison (its result is bool).
    pub fn is_comparison(self) -> bool {
        !matches!(self, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div)
    }

    /// The dtype of the result for operands of dtypes `left` and `right`,
    /// as in torch: the promoted dtype ([`DType::promote`]) for `+ - *`,
    /// its float for `/` (integers and bools give f32), bool for the
    /// comparisons (which compute in the promoted dtype).
    pub fn result_dtype(self, left: DType, right: DType) -> DType {
        let promoted = DType::promote(left, right);
        match self {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => promoted,
            BinaryOp::Div => promoted.to_float(),
            _ => DType::Bool,
        }
    }
}

impl NamedTensor {
    /// `self op rhs`, elementwise, with the axes lined up as LANGUAGE.md
    /// section 12 says: by name for named axes, by position for unnamed
    /// ones, labelled axes joined by label (see
    /// `docs/src/named-tensors.md`). The result's dtype is
    /// [`BinaryOp::result_dtype`].
    ///
    /// Errors: an unnamed axis after a named one on operands whose names
    /// differ ([`NamedError::UnnamedAfterNamedOperand`]), sizes that do
    /// not broadcast ([`NamedError::OperandSizes`]), a labelled size-1
    /// axis that would broadcast ([`NamedError::LabelsBroadcast`]), `-`
    /// of two bool tensors ([`NamedError::BoolSubtraction`]), a result
    /// too large to count or allocate ([`HostError::ShapeOverflow`],
    /// [`HostError::Allocation`], inside [`NamedError::Host`]).
    pub fn binary(&self, op: BinaryOp, rhs: &NamedTensor) -> Result<NamedTensor, NamedError> {
        let al = align(self, rhs)?;
        let (left, left_shape) = take(self.tensor(), &al.left.take);
        let (right, right_shape) = take(rhs.tensor(), &al.right.take);
        let geo = Geometry::new(&al.shape, &strides(&left_shape, &al.left.axis_at), &strides(&right_shape, &al.right.axis_at))
            .ok_or_else(|| HostError::ShapeOverflow { shape: al.shape.clone() })?;
        let (l, r, shape) = (left.as_ref(), right.as_ref(), al.shape.as_slice());
        let data = match DType::promote(self.dtype(), rhs.dtype()) {
            DType::F16 => compute::<f16>(op, &geo, l, r, shape),
            DType::BF16 => compute::<bf16>(op, &geo, l, r, shape),
            DType::F32 => compute::<f32>(op, &geo, l, r, shape),
            DType::F64 => compute::<f64>(op, &geo, l, r, shape),
            DType::I32 => compute::<i32>(op, &geo, l, r, shape),
            DType::I64 => compute::<i64>(op, &geo, l, r, shape),
            DType::Bool => compute::<bool>(op, &geo, l, r, shape),
        }?;
        let tensor = HostTensor::new(data, al.shape, al.names)?;
        Ok(NamedTensor::from_parts(tensor, al.coords))
    }

    /// `self + rhs` (logical or on bools): see [`NamedTensor::binary`].
    pub fn add(&self, rhs: &NamedTensor) -> Result<NamedTensor, NamedError> {
        self.binary(BinaryOp::Add, rhs)
    }

    /// `self - rhs` (an error on two bools): see [`NamedTensor::binary`].
    pub fn sub(&self, rhs: &NamedTensor) -> Result<NamedTensor, NamedError> {
        self.binary(BinaryOp::Sub, rhs)
    }

    /// `self * rhs` (logical and on bools): see [`NamedTensor::binary`].
    pub fn mul(&self, rhs: &NamedTensor) -> Result<NamedTensor, NamedError> {
        self.binary(BinaryOp::Mul, rhs)
    }

    /// `self / rhs`, true division (integers and bools give f32): see
    /// [`NamedTensor::binary`].
    pub fn div(&self, rhs: &NamedTensor) -> Result<NamedTensor, NamedError> {
        self.binary(BinaryOp::Div, rhs)
    }

    /// `self == rhs` elementwise, a bool tensor: see [`NamedTensor::binary`].
    /// (`==` between two named tensors is whole-value equality.)
    pub fn eq(&self, rhs: &NamedTensor) -> Result<NamedTensor, NamedError> {
        self.binary(BinaryOp::Eq, rhs)
    }

    /// `self != rhs` elementwise, a bool tensor: see [`NamedTensor::binary`].
    pub fn ne(&self, rhs: &NamedTensor) -> Result<NamedTensor, NamedError> {
        self.binary(BinaryOp::Ne, rhs)
    }

    /// `self < rhs` elementwise, a bool tensor: see [`NamedTensor::binary`].
    pub fn lt(&self, rhs: &NamedTensor) -> Result<NamedTensor, NamedError> {
        self.binary(BinaryOp::Lt, rhs)
    }

    /// `self <= rhs` elementwise, a bool tensor: see [`NamedTensor::binary`].
    pub fn le(&self, rhs: &NamedTensor) -> Result<NamedTensor, NamedError> {
        self.binary(BinaryOp::Le, rhs)
    }

    /// `self > rhs` elementwise, a bool tensor: see [`NamedTensor::binary`].
    pub fn gt(&self, rhs: &NamedTensor) -> Result<NamedTensor, NamedError> {
        self.binary(BinaryOp::Gt, rhs)
    }

    /// `self >= rhs` elementwise, a bool tensor: see [`NamedTensor::binary`].
    pub fn ge(&self, rhs: &NamedTensor) -> Result<NamedTensor, NamedError> {
        self.binary(BinaryOp::Ge, rhs)
    }
}

/// `&a op &b` for `+ - * /`: [`NamedTensor::binary`], a `Result` (these
/// never panic).
macro_rules! operator {
    ($trait:ident, $method:ident, $op:ident) => {
        impl $trait for &NamedTensor {
            type Output = Result<NamedTensor, NamedError>;

            fn $method(self, rhs: &NamedTensor) -> Self::Output {
                NamedTensor::binary(self, BinaryOp::$op, rhs)
            }
        }
    };
}

operator!(Add, add, Add);
operator!(Sub, sub, Sub);
operator!(Mul, mul, Mul);
operator!(Div, div, Div);

/// The elements of `t` read at the positions `take` keeps along each axis
/// (`None`: all of them), and their shape. Borrows when nothing is taken.
fn take<'t>(t: &'t HostTensor, take: &[Option<Vec<usize>>]) -> (Cow<'t, TensorData>, Vec<usize>) {
    let mut data = Cow::Borrowed(t.data());
    let mut shape = t.shape().to_vec();
    for (axis, keep) in take.iter().enumerate() {
        if let Some(keep) = keep {
            data = Cow::Owned(take_axis(&data, &shape, axis, keep));
            if let Some(size) = shape.get_mut(axis) {
                *size = keep.len();
            }
        }
    }
    (data, shape)
}

/// `data` (of shape `shape`) read at the positions `keep` along `axis`.
fn take_axis(data: &TensorData, shape: &[usize], axis: usize, keep: &[usize]) -> TensorData {
    match data {
        TensorData::F16(v) => TensorData::F16(take_along(v, shape, axis, keep)),
        TensorData::BF16(v) => TensorData::BF16(take_along(v, shape, axis, keep)),
        TensorData::F32(v) => TensorData::F32(take_along(v, shape, axis, keep)),
        TensorData::F64(v) => TensorData::F64(take_along(v, shape, axis, keep)),
        TensorData::I32(v) => TensorData::I32(take_along(v, shape, axis, keep)),
        TensorData::I64(v) => TensorData::I64(take_along(v, shape, axis, keep)),
        TensorData::Bool(v) => TensorData::Bool(take_along(v, shape, axis, keep)),
    }
}

/// The row-major elements `v` of shape `shape` read at the positions
/// `keep` (each below the axis's size) along `axis`.
fn take_along<T: Copy>(v: &[T], shape: &[usize], axis: usize, keep: &[usize]) -> Vec<T> {
    if v.is_empty() {
        return Vec::new();
    }
    // The tensor is not empty, so these products divide its length.
    let size = shape.get(axis).copied().unwrap_or(1);
    let inner: usize = shape.get(axis + 1..).unwrap_or_default().iter().product();
    let outer = v.len() / (size * inner);
    let mut out = Vec::with_capacity(outer * keep.len() * inner);
    for o in 0..outer {
        for &k in keep {
            let start = (o * size + k) * inner;
            out.extend_from_slice(v.get(start..start + inner).unwrap_or_default());
        }
    }
    out
}

/// An operand's stride along each result axis: its own row-major stride
/// along the axis placed there, 0 where it has no axis or one of size 1.
fn strides(shape: &[usize], axis_at: &[Option<usize>]) -> Vec<usize> {
    let own = row_major_strides(shape);
    axis_at
        .iter()
        .map(|axis| match axis {
            Some(i) if shape.get(*i).is_some_and(|&d| d != 1) => own.get(*i).copied().unwrap_or(0),
            _ => 0,
        })
        .collect()
}

/// `op` over `geo` with both operands in the element type `T` (converted
/// where they are not). `shape` is the result's, for the errors.
fn compute<T: Arithmetic>(op: BinaryOp, geo: &Geometry, a: &TensorData, b: &TensorData, shape: &[usize]) -> Result<TensorData, NamedError> {
    let oom = |_| {
        let count = shape.iter().fold(1usize, |n, &d| n.saturating_mul(d));
        let bytes = count.saturating_mul(op.result_dtype(T::DTYPE, T::DTYPE).size_bytes());
        HostError::Allocation { bytes, count }
    };
    let (a, b) = (converted::<T>(a), converted::<T>(b));
    let (a, b) = (a.as_ref(), b.as_ref());
    let mask = |v: Vec<bool>| TensorData::Bool(v);
    Ok(match op {
        BinaryOp::Add => T::into_data(pointwise(geo, a, b, T::plus).map_err(oom)?),
        BinaryOp::Sub => match T::minus() {
            Some(minus) => T::into_data(pointwise(geo, a, b, minus).map_err(oom)?),
            None => return Err(NamedError::BoolSubtraction),
        },
        BinaryOp::Mul => T::into_data(pointwise(geo, a, b, T::times).map_err(oom)?),
        BinaryOp::Div => T::Quotient::into_data(pointwise(geo, a, b, T::over).map_err(oom)?),
        BinaryOp::Eq => mask(pointwise(geo, a, b, |x: T, y: T| x == y).map_err(oom)?),
        BinaryOp::Ne => mask(pointwise(geo, a, b, |x: T, y: T| x != y).map_err(oom)?),
        BinaryOp::Lt => mask(pointwise(geo, a, b, |x: T, y: T| x < y).map_err(oom)?),
        BinaryOp::Le => mask(pointwise(geo, a, b, |x: T, y: T| x <= y).map_err(oom)?),
        BinaryOp::Gt => mask(pointwise(geo, a, b, |x: T, y: T| x > y).map_err(oom)?),
        BinaryOp::Ge => mask(pointwise(geo, a, b, |x: T, y: T| x >= y).map_err(oom)?),
    })
}

/// The elements of `data` in the element type `T`: borrowed when they are
/// already, else cast in one (parallel) pass.
fn converted<T: Arithmetic>(data: &TensorData) -> Cow<'_, [T]> {
    if let Some(v) = T::slice(data) {
        return Cow::Borrowed(v);
    }
    Cow::Owned(match data {
        TensorData::F16(v) => cast_all(v),
        TensorData::BF16(v) => cast_all(v),
        TensorData::F32(v) => cast_all(v),
        TensorData::F64(v) => cast_all(v),
        TensorData::I32(v) => cast_all(v),
        TensorData::I64(v) => cast_all(v),
        TensorData::Bool(v) => cast_all(v),
    })
}

/// `v` cast to `T`, split across rayon's current pool when long.
fn cast_all<S: Arithmetic, T: Arithmetic>(v: &[S]) -> Vec<T> {
    v.par_iter().with_min_len(1 << 15).map(|&s| T::cast(s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::names;

    /// A named tensor of `values` in `dtype`.
    fn nt(dtype: DType, shape: &[usize], axis_names: &str, values: &[f64]) -> NamedTensor {
        HostTensor::from_f64(dtype, shape.to_vec(), names(axis_names), values).unwrap().into()
    }

    fn iota(shape: &[usize], axis_names: &str) -> NamedTensor {
        let n: usize = shape.iter().product();
        let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
        nt(DType::F32, shape, axis_names, &v)
    }

    fn zeros(shape: &[usize], axis_names: &str) -> NamedTensor {
        let n: usize = shape.iter().product();
        nt(DType::F32, shape, axis_names, &vec![0.0; n])
    }

    fn labels(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn pairing_is_per_operand_and_per_axis() {
        // The sharp edge of section 12: a is [_ x y] of shape (3, 3, 5), d is
        // arange(15) as (3, 5); the values at [:, 0, 0] depend on d's names.
        let a = zeros(&[3, 3, 5], "_ x y");
        let first_column = |t: &NamedTensor| -> Vec<f64> {
            let v = t.to_f64_vec();
            (0..3).map(|i| v[i * 15]).collect()
        };
        for (d_names, want) in [("_ _", [0.0, 0.0, 0.0]), ("_ y", [0.0, 5.0, 10.0]), ("x y", [0.0, 0.0, 0.0])] {
            let d = iota(&[3, 5], d_names);
            let r = a.add(&d).unwrap();
            assert_eq!(r.shape(), &[3, 3, 5], "{d_names}");
            assert_eq!(r.names(), names("_ x y").as_slice(), "{d_names}");
            assert_eq!(first_column(&r), want, "{d_names}");
        }
    }

    #[test]
    fn coordinates_meet_by_label() {
        let a = nt(DType::F32, &[3], "x", &[1.0, 2.0, 3.0]).with_labels(0, labels("A B C")).unwrap();
        let b = nt(DType::F32, &[3], "x", &[10.0, 20.0, 30.0]).with_labels(0, labels("C B A")).unwrap();
        let r = a.add(&b).unwrap();
        assert_eq!(r.to_f64_vec(), [31.0, 22.0, 13.0]);
        assert_eq!(r.labels(0).unwrap(), labels("A B C"));

        // An inner join, in the left operand's order.
        let c = nt(DType::F32, &[3], "x", &[10.0, 20.0, 30.0]).with_labels(0, labels("B C D")).unwrap();
        let r = a.add(&c).unwrap();
        assert_eq!(r.labels(0).unwrap(), labels("B C"));
        assert_eq!(r.to_f64_vec(), [12.0, 23.0]);
        let r = c.add(&a).unwrap();
        assert_eq!(r.labels(0).unwrap(), labels("B C"));
        assert_eq!(r.to_f64_vec(), [12.0, 23.0]);

        // Labelled on one side only: positional, the labels kept.
        let r = a.mul(&nt(DType::F32, &[3], "x", &[1.0, 10.0, 100.0])).unwrap();
        assert_eq!(r.to_f64_vec(), [1.0, 20.0, 300.0]);
        assert_eq!(r.labels(0).unwrap(), labels("A B C"));

        // A join along one axis of a 2-d operand, transposed by name.
        let m = iota(&[2, 3], "y x").with_labels(1, labels("C A B")).unwrap();
        let r = a.add(&m).unwrap();
        assert_eq!(r.names(), names("x y").as_slice());
        // x = A, B, C sits at m's columns 1, 2, 0.
        assert_eq!(r.to_f64_vec(), [2.0, 5.0, 4.0, 7.0, 3.0, 6.0]);
        assert_eq!(r.coords(), &[Some(labels("A B C")), None]);
    }

    #[test]
    fn fully_named_union_and_transpose() {
        let x = nt(DType::F64, &[2], "x", &[1.0, 2.0]);
        let y = nt(DType::F64, &[3], "y", &[10.0, 20.0, 30.0]);
        let r = x.add(&y).unwrap();
        assert_eq!(r.names(), names("x y").as_slice());
        assert_eq!(r.to_f64_vec(), [11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
        let r = y.add(&x).unwrap();
        assert_eq!(r.names(), names("y x").as_slice());
        assert_eq!(r.to_f64_vec(), [11.0, 12.0, 21.0, 22.0, 31.0, 32.0]);
        // [x y] - [y x]: the right one is read transposed.
        let a = iota(&[2, 3], "x y");
        let b = iota(&[3, 2], "y x");
        let r = a.sub(&b).unwrap();
        assert_eq!(r.names(), names("x y").as_slice());
        assert_eq!(r.to_f64_vec(), [0.0, -1.0, -2.0, 2.0, 1.0, 0.0]);
        // A shared axis of size 1 broadcasts.
        let r = iota(&[1, 3], "x y").add(&iota(&[2, 1], "x z")).unwrap();
        assert_eq!(r.shape(), &[2, 3, 1]);
        assert_eq!(r.names(), names("x y z").as_slice());
        assert_eq!(r.to_f64_vec(), [0.0, 1.0, 2.0, 1.0, 2.0, 3.0]);
    }

    #[test]
    fn partially_named_unnamed_runs_broadcast_by_position() {
        // [_ x] (2, 3) + [_ _ x] (4, 1, 3): the unnamed runs (2) and (4, 1)
        // broadcast to (4, 2), then x.
        let a = iota(&[2, 3], "_ x");
        let b = nt(DType::F32, &[4, 1, 3], "_ _ x", &[0.0; 12]);
        let r = a.add(&b).unwrap();
        assert_eq!(r.shape(), &[4, 2, 3]);
        assert_eq!(r.names(), names("_ _ x").as_slice());
        assert_eq!(r.to_f64_vec()[..6], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        // The named axes follow the unnamed run, in the union's order.
        let r = iota(&[3], "y").add(&iota(&[2, 3], "_ y")).unwrap();
        assert_eq!(r.names(), names("_ y").as_slice());
        assert_eq!(r.to_f64_vec(), [0.0, 2.0, 4.0, 3.0, 5.0, 7.0]);
        // Unnamed runs that do not broadcast.
        let e = iota(&[2, 3], "_ x").add(&iota(&[4, 3], "_ x")).unwrap_err();
        assert!(matches!(e, NamedError::OperandSizes { .. }), "{e}");
    }

    #[test]
    fn identical_names_line_up_by_position() {
        let a = iota(&[2, 3], "x _");
        let b = nt(DType::F32, &[1, 3], "x _", &[10.0, 20.0, 30.0]);
        let r = a.add(&b).unwrap();
        assert_eq!(r.names(), names("x _").as_slice());
        assert_eq!(r.to_f64_vec(), [10.0, 21.0, 32.0, 13.0, 24.0, 35.0]);
    }

    #[test]
    fn anonymous_operands_broadcast_by_position() {
        let a = iota(&[2, 3], "x y");
        let s = NamedTensor::from(HostTensor::scalar_f64(DType::F32, 10.0));
        let r = a.add(&s).unwrap();
        assert_eq!(r.names(), names("x y").as_slice());
        assert_eq!(r.to_f64_vec(), [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]);
        let r = s.sub(&a).unwrap();
        assert_eq!(r.names(), names("x y").as_slice());
        assert_eq!(r.to_f64_vec(), [10.0, 9.0, 8.0, 7.0, 6.0, 5.0]);
        // A longer anonymous operand: the extra leading axes are unnamed.
        let big = iota(&[2, 2, 3], "_ _ _");
        let r = big.add(&iota(&[3], "y")).unwrap();
        assert_eq!(r.names(), names("_ _ y").as_slice());
        assert_eq!(r.shape(), &[2, 2, 3]);
        // Positional even against a non-leading unnamed axis.
        let r = iota(&[2, 3], "x _").add(&iota(&[3], "_")).unwrap();
        assert_eq!(r.names(), names("x _").as_slice());
        assert_eq!(r.to_f64_vec(), [0.0, 2.0, 4.0, 3.0, 5.0, 7.0]);
        // Two scalars.
        let r = s.mul(&s).unwrap();
        assert_eq!((r.rank(), r.to_f64_vec()), (0, vec![100.0]));
    }

    #[test]
    fn unnamed_after_named_names_both_operands() {
        let e = iota(&[2, 3], "x _").add(&iota(&[2, 3], "x y")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("axis 1 of the left operand is unnamed"), "{msg}");
        assert!(msg.contains("left [x _], right [x y]"), "{msg}");
        let e = iota(&[3], "y").add(&iota(&[2, 3], "y _")).unwrap_err();
        assert!(matches!(&e, NamedError::UnnamedAfterNamedOperand { side: crate::error::Operand::Right, position: 1, .. }), "{e}");
        assert!(e.to_string().contains("axis 1 of the right operand"), "{e}");
        let e = iota(&[2], "x").add(&iota(&[3], "x")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "axis 'x' (size 2) of the left operand [x] and axis 'x' (size 3) of the right \
             operand [x] do not broadcast: the sizes must be equal or one of them 1"
        );
    }

    #[test]
    fn dtypes_promote_as_torch() {
        let h = nt(DType::F16, &[2], "i", &[1.5, 2.0]);
        let b = nt(DType::BF16, &[2], "i", &[0.25, 1.0]);
        let r = h.add(&b).unwrap();
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_f64_vec(), [1.75, 3.0]);

        let i = nt(DType::I32, &[2], "i", &[3.0, -4.0]);
        let f = nt(DType::F32, &[2], "i", &[0.5, 0.25]);
        let r = i.add(&f).unwrap();
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_f64_vec(), [3.5, -3.75]);

        let n = nt(DType::I64, &[4], "i", &[7.0, 1.0, -1.0, 0.0]);
        let d = nt(DType::I64, &[4], "i", &[2.0, 0.0, 0.0, 0.0]);
        let r = n.div(&d).unwrap();
        assert_eq!(r.dtype(), DType::F32);
        let v = r.to_f64_vec();
        assert_eq!(v[..3], [3.5, f64::INFINITY, f64::NEG_INFINITY]);
        assert!(v[3].is_nan());

        for op in BinaryOp::ALL.into_iter().filter(|op| op.is_comparison()) {
            let r = i.binary(op, &f).unwrap();
            assert_eq!(r.dtype(), DType::Bool, "{op:?}");
        }
        let r = i.lt(&f).unwrap();
        assert_eq!(r.into_tensor().into_data(), TensorData::Bool(vec![false, true]));
        // Comparisons compute in the promoted dtype: 16777217 as f32 is 16777216.
        let big = nt(DType::I32, &[1], "i", &[16_777_217.0]);
        let big_f = nt(DType::F32, &[1], "i", &[16_777_216.0]);
        assert_eq!(big.eq(&big_f).unwrap().to_f64_vec(), [1.0]);
        // ... while in i64 they differ.
        let big_i = nt(DType::I64, &[1], "i", &[16_777_216.0]);
        assert_eq!(big.ne(&big_i).unwrap().to_f64_vec(), [1.0]);

        let t = nt(DType::Bool, &[4], "i", &[0.0, 0.0, 1.0, 1.0]);
        let u = nt(DType::Bool, &[4], "i", &[0.0, 1.0, 0.0, 1.0]);
        let e = t.sub(&u).unwrap_err();
        assert!(matches!(e, NamedError::BoolSubtraction), "{e}");
        let or = t.add(&u).unwrap();
        assert_eq!(or.dtype(), DType::Bool);
        assert_eq!(or.to_f64_vec(), [0.0, 1.0, 1.0, 1.0]);
        assert_eq!(t.mul(&u).unwrap().to_f64_vec(), [0.0, 0.0, 0.0, 1.0]);
        let q = t.div(&u).unwrap();
        assert_eq!(q.dtype(), DType::F32);
        assert_eq!(q.to_f64_vec()[2], f64::INFINITY);
        // bool - int is int.
        let r = t.sub(&nt(DType::I32, &[4], "i", &[1.0; 4])).unwrap();
        assert_eq!((r.dtype(), r.to_f64_vec()), (DType::I32, vec![-1.0, -1.0, 0.0, 0.0]));
        assert_eq!(t.ge(&u).unwrap().to_f64_vec(), [1.0, 0.0, 1.0, 1.0]);
        assert_eq!(t.gt(&u).unwrap().to_f64_vec(), [0.0, 0.0, 1.0, 0.0]);
        assert_eq!(t.le(&u).unwrap().to_f64_vec(), [1.0, 1.0, 0.0, 1.0]);
    }

    #[test]
    fn integers_wrap() {
        let m = nt(DType::I32, &[1], "i", &[f64::from(i32::MAX)]);
        let one = nt(DType::I32, &[1], "i", &[1.0]);
        assert_eq!(m.add(&one).unwrap().to_f64_vec(), [f64::from(i32::MIN)]);
        let m = nt(DType::I64, &[1], "i", &[-9.2e18]);
        let r = m.mul(&nt(DType::I64, &[1], "i", &[2.0])).unwrap();
        assert_eq!(r.into_tensor().into_data(), TensorData::I64(vec![(-9_200_000_000_000_000_000i64).wrapping_mul(2)]));
        assert_eq!(BinaryOp::Div.result_dtype(DType::I64, DType::I32), DType::F32);
        assert_eq!(BinaryOp::Mul.result_dtype(DType::I64, DType::I32), DType::I64);
        assert_eq!(BinaryOp::Div.result_dtype(DType::F16, DType::Bool), DType::F16);
    }

    #[test]
    fn operators_on_references() {
        let a = iota(&[2], "x");
        let b = iota(&[2], "x");
        assert_eq!((&a + &b).unwrap().to_f64_vec(), [0.0, 2.0]);
        assert_eq!((&a - &b).unwrap().to_f64_vec(), [0.0, 0.0]);
        assert_eq!((&a * &b).unwrap().to_f64_vec(), [0.0, 1.0]);
        let q = (&a / &b).unwrap().to_f64_vec();
        assert!(q[0].is_nan() && q[1] == 1.0);
        assert!((&a + &iota(&[3], "x")).is_err());
    }

    #[test]
    fn empty_and_large_results() {
        let e = iota(&[0, 3], "x y").add(&iota(&[3], "y")).unwrap();
        assert_eq!((e.shape(), e.to_f64_vec().len()), (&[0, 3][..], 0));
        // Sizes whose product overflows are fine next to a 0.
        let huge = HostTensor::new(TensorData::F32(vec![]), vec![usize::MAX, 0], names("x y"));
        let huge = NamedTensor::from(huge.unwrap()).with_labels(1, Vec::<String>::new()).unwrap();
        let r = huge.mul(&iota(&[2], "z")).unwrap();
        assert_eq!(r.shape(), &[usize::MAX, 0, 2]);
        let r = huge.add(&huge).unwrap();
        assert_eq!(r.shape(), &[usize::MAX, 0]);

        // Large enough to split across threads and tile the transposed operand.
        let (n, m) = (300, 257);
        let a = iota(&[n, m], "i j");
        let b = iota(&[m, n], "j i");
        let r = a.add(&b).unwrap().to_f64_vec();
        for (k, &got) in r.iter().enumerate() {
            let (i, j) = (k / m, k % m);
            assert_eq!(got, (i * m + j + j * n + i) as f64, "[{i} {j}]");
        }
        // Mixed dtypes converted in parallel, and a label join on a large axis.
        let c = nt(DType::I64, &[m], "j", &vec![1.0; m]);
        let r = a.add(&c).unwrap();
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.to_f64_vec()[m + 1], (m + 2) as f64);
        let words = |k: usize| (0..k).map(|x| format!("w{x}")).collect::<Vec<_>>();
        let la = a.clone().with_labels(1, words(m)).unwrap();
        let mut rev = words(m);
        rev.reverse();
        let lb = iota(&[m], "j").with_labels(0, rev).unwrap();
        let r = la.sub(&lb).unwrap();
        assert_eq!(r.labels(1).unwrap(), words(m).as_slice());
        // Column j of lb's labels is at lb position m - 1 - j.
        assert_eq!(r.to_f64_vec()[3], 3.0 - (m - 1 - 3) as f64);
    }
}
