//! The element types the pointwise kernels run on, and torch's arithmetic
//! on each: [`Arithmetic`] for `f32 f64 i32 i64 bool f16 bf16`.
//!
//! - Floats: IEEE arithmetic; `f16` and `bf16` compute in `f32` and round
//!   back, as torch does on CPU.
//! - Integers: `+ - *` wrap on overflow, as torch's do; `/` is true
//!   division in `f32` (torch's default float), so a division by zero gives
//!   `inf` or `nan`, never a panic.
//! - `bool`: `+` is logical or, `*` logical and, `/` true division in
//!   `f32`, and `-` is not defined (torch rejects it).
//! - Comparisons use the type's own order (`false < true`; IEEE for
//!   floats, so `nan` compares unequal to everything).
//!
//! Conversions between element types follow torch's casts: integers and
//! bools to `f16`/`bf16` go through `f32`, bools are 0 and 1.

use half::{bf16, f16};

use nax_host::Element;

/// An element type the kernels run on: a tensor [`Element`] with torch's
/// arithmetic.
pub(crate) trait Arithmetic: Element + PartialOrd {
    /// The element type of a quotient of two elements.
    type Quotient: Element;

    /// The value as `f32` (torch's cast).
    fn to_f32(self) -> f32;

    /// The value as `f64` (torch's cast).
    fn to_f64(self) -> f64;

    /// The value as `i64` (torch's cast: floats truncate toward zero).
    fn to_i64(self) -> i64;

    /// `value` cast to this type, as torch casts.
    fn cast<S: Arithmetic>(value: S) -> Self;

    /// `self + rhs`.
    fn plus(self, rhs: Self) -> Self;

    /// `self * rhs`.
    fn times(self, rhs: Self) -> Self;

    /// `self / rhs`, true division.
    fn over(self, rhs: Self) -> Self::Quotient;

    /// `self - rhs` as a function, or `None` where the type has no
    /// subtraction (bool).
    fn minus() -> Option<impl Fn(Self, Self) -> Self + Sync>;
}

/// `Arithmetic` for a float type computed natively.
macro_rules! native_float {
    ($t:ty, $variant:ident, $cast:ident) => {
        impl Arithmetic for $t {
            type Quotient = $t;

            fn to_f32(self) -> f32 {
                self as f32
            }

            fn to_f64(self) -> f64 {
                self.into()
            }

            fn to_i64(self) -> i64 {
                self as i64
            }

            fn cast<S: Arithmetic>(value: S) -> Self {
                value.$cast()
            }

            fn plus(self, rhs: Self) -> Self {
                self + rhs
            }

            fn times(self, rhs: Self) -> Self {
                self * rhs
            }

            fn over(self, rhs: Self) -> Self {
                self / rhs
            }

            fn minus() -> Option<impl Fn(Self, Self) -> Self + Sync> {
                Some(|x: Self, y: Self| x - y)
            }
        }
    };
}

native_float!(f32, F32, to_f32);
native_float!(f64, F64, to_f64);

/// `Arithmetic` for a 16-bit float type, computed in `f32` and rounded.
macro_rules! half_float {
    ($t:ty, $variant:ident) => {
        impl Arithmetic for $t {
            type Quotient = $t;

            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }

            fn to_f64(self) -> f64 {
                <$t>::to_f64(self)
            }

            fn to_i64(self) -> i64 {
                <$t>::to_f32(self) as i64
            }

            fn cast<S: Arithmetic>(value: S) -> Self {
                <$t>::from_f32(value.to_f32())
            }

            fn plus(self, rhs: Self) -> Self {
                <$t>::from_f32(<$t>::to_f32(self) + <$t>::to_f32(rhs))
            }

            fn times(self, rhs: Self) -> Self {
                <$t>::from_f32(<$t>::to_f32(self) * <$t>::to_f32(rhs))
            }

            fn over(self, rhs: Self) -> Self {
                <$t>::from_f32(<$t>::to_f32(self) / <$t>::to_f32(rhs))
            }

            fn minus() -> Option<impl Fn(Self, Self) -> Self + Sync> {
                Some(|x: Self, y: Self| <$t>::from_f32(<$t>::to_f32(x) - <$t>::to_f32(y)))
            }
        }
    };
}

half_float!(f16, F16);
half_float!(bf16, BF16);

/// `Arithmetic` for a signed integer type: wrapping `+ - *`, `/` in `f32`.
macro_rules! integer {
    ($t:ty, $variant:ident) => {
        impl Arithmetic for $t {
            type Quotient = f32;

            fn to_f32(self) -> f32 {
                self as f32
            }

            fn to_f64(self) -> f64 {
                self as f64
            }

            fn to_i64(self) -> i64 {
                self.into()
            }

            fn cast<S: Arithmetic>(value: S) -> Self {
                // Only bools and narrower integers are cast to an integer
                // type (promotion never narrows), so this is exact.
                value.to_i64() as $t
            }

            fn plus(self, rhs: Self) -> Self {
                self.wrapping_add(rhs)
            }

            fn times(self, rhs: Self) -> Self {
                self.wrapping_mul(rhs)
            }

            fn over(self, rhs: Self) -> f32 {
                self as f32 / rhs as f32
            }

            fn minus() -> Option<impl Fn(Self, Self) -> Self + Sync> {
                Some(|x: Self, y: Self| x.wrapping_sub(y))
            }
        }
    };
}

integer!(i32, I32);
integer!(i64, I64);

impl Arithmetic for bool {
    type Quotient = f32;

    fn to_f32(self) -> f32 {
        f32::from(u8::from(self))
    }

    fn to_f64(self) -> f64 {
        f64::from(u8::from(self))
    }

    fn to_i64(self) -> i64 {
        i64::from(self)
    }

    fn cast<S: Arithmetic>(value: S) -> Self {
        value.to_f64() != 0.0
    }

    fn plus(self, rhs: Self) -> Self {
        self | rhs
    }

    fn times(self, rhs: Self) -> Self {
        self & rhs
    }

    fn over(self, rhs: Self) -> f32 {
        self.to_f32() / rhs.to_f32()
    }

    fn minus() -> Option<impl Fn(Self, Self) -> Self + Sync> {
        None::<fn(bool, bool) -> bool>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nax_host::TensorData;

    #[test]
    fn integer_arithmetic_wraps_and_divides_in_f32() {
        assert_eq!(i32::MAX.plus(1), i32::MIN);
        assert_eq!(i64::MAX.times(2), -2);
        let sub = i32::minus().unwrap();
        assert_eq!(sub(i32::MIN, 1), i32::MAX);
        assert_eq!(7i64.over(2), 3.5f32);
        assert_eq!(1i32.over(0), f32::INFINITY);
        assert!(0i64.over(0).is_nan());
        assert_eq!(i64::cast(true), 1);
        assert_eq!(i64::cast(-3i32), -3);
        assert_eq!(i32::cast(true), 1);
    }

    #[test]
    fn bool_is_logical() {
        assert!(true.plus(false));
        assert!(!false.plus(false));
        assert!(!true.times(false));
        assert!(true.times(true));
        assert_eq!(true.over(false), f32::INFINITY);
        assert!(bool::minus().is_none());
        assert!(bool::cast(2.0f32));
        assert!(!bool::cast(0i32));
        assert_eq!(true.to_i64(), 1);
    }

    #[test]
    fn halves_compute_in_f32_and_round() {
        let a = f16::from_f32(1.0);
        let b = f16::from_f32(0.0004);
        // 1 + 0.0004 rounds to 1 in f16 (the spacing near 1 is 2^-10).
        assert_eq!(a.plus(b), a);
        assert_eq!(bf16::from_f32(3.0).over(bf16::from_f32(2.0)), bf16::from_f32(1.5));
        assert_eq!(f16::cast(3i64), f16::from_f32(3.0));
        assert_eq!(bf16::cast(true), bf16::ONE);
        assert_eq!(f16::from_f32(-2.5).to_i64(), -2);
        let sub = f16::minus().unwrap();
        assert_eq!(sub(a, a), f16::ZERO);
        // torch casts an integer to f16 through f32.
        assert_eq!(f16::cast(65519i32), f16::from_f32(65519.0));
    }

    #[test]
    fn floats_cast_as_torch() {
        assert_eq!(f32::cast(16_777_217i32), 16_777_216.0);
        assert_eq!(f64::cast(f16::from_f32(0.5)), 0.5);
        assert_eq!(f32::cast(bf16::from_f32(2.0)), 2.0);
        assert_eq!((-2.7f64).to_i64(), -2);
        assert_eq!(2.5f32.to_f64(), 2.5);
        assert_eq!(3i32.to_f64(), 3.0);
        assert_eq!(f32::slice(&TensorData::F32(vec![1.0])), Some(&[1.0f32][..]));
        assert_eq!(f32::slice(&TensorData::F64(vec![1.0])), None);
    }
}
