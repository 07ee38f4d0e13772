//! The interpreter's values: a dtype, a shape and row-major data held as
//! f64 (floats), i64 (integers) or bool (masks), rounded to the dtype after
//! every operation so results match a computation in that dtype. Every
//! allocation is fallible: memory that cannot be had is an error naming
//! the size, never an abort.

use nax_runtime::{DType, HostError, RuntimeError};

/// An empty vector with room for `count` elements, or the error naming them.
pub fn room<T>(count: usize) -> Result<Vec<T>, RuntimeError> {
    let mut v = Vec::new();
    v.try_reserve_exact(count).map_err(|_| HostError::Allocation { bytes: count.saturating_mul(std::mem::size_of::<T>()), count })?;
    Ok(v)
}

/// The items in fresh storage of their exact count, or the error naming it.
pub fn collect<T>(items: impl ExactSizeIterator<Item = T>) -> Result<Vec<T>, RuntimeError> {
    let mut v = room(items.len())?;
    v.extend(items);
    Ok(v)
}

/// Bytes the interpreter holds per element of a value of `dtype` (floats
/// as f64, integers as i64, masks as bool).
pub fn held_bytes(dtype: DType) -> u128 {
    if dtype == DType::Bool { 1 } else { 8 }
}

/// Element storage.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    Float(Vec<f64>),
    Int(Vec<i64>),
    Bool(Vec<bool>),
}

impl Data {
    /// Empty storage for `count` elements of `dtype`.
    pub fn with_capacity(dtype: DType, count: usize) -> Result<Data, RuntimeError> {
        Ok(if dtype.is_float() {
            Data::Float(room(count)?)
        } else if dtype == DType::Bool {
            Data::Bool(room(count)?)
        } else {
            Data::Int(room(count)?)
        })
    }
}

/// A tensor (or a host scalar, as rank 0).
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Data,
}

/// Rounds a float to what the dtype can hold.
pub fn round_float(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F32 => x as f32 as f64,
        DType::F16 => half::f16::from_f64(x).to_f64(),
        DType::BF16 => half::bf16::from_f64(x).to_f64(),
        _ => x,
    }
}

/// Wraps an integer to the dtype's width, as torch's integer arithmetic does.
pub fn wrap_int(dtype: DType, x: i64) -> i64 {
    if dtype == DType::I32 { x as i32 as i64 } else { x }
}

impl Value {
    pub fn len(&self) -> usize {
        match &self.data {
            Data::Float(v) => v.len(),
            Data::Int(v) => v.len(),
            Data::Bool(v) => v.len(),
        }
    }

    /// Element `i` as f64 (bools as 0 and 1).
    pub fn f64_at(&self, i: usize) -> f64 {
        match &self.data {
            Data::Float(v) => v[i],
            Data::Int(v) => v[i] as f64,
            Data::Bool(v) => f64::from(u8::from(v[i])),
        }
    }

    /// Element `i` as i64 (floats truncated toward zero, as a cast does).
    pub fn i64_at(&self, i: usize) -> i64 {
        match &self.data {
            Data::Float(v) => v[i] as i64,
            Data::Int(v) => v[i],
            Data::Bool(v) => i64::from(v[i]),
        }
    }

    /// Element `i` as bool (non-zero is true).
    pub fn bool_at(&self, i: usize) -> bool {
        match &self.data {
            Data::Float(v) => v[i] != 0.0,
            Data::Int(v) => v[i] != 0,
            Data::Bool(v) => v[i],
        }
    }

    /// A value of `dtype` from f64 results, rounded in place for a float
    /// dtype (converted into fresh storage for others).
    pub fn from_f64(dtype: DType, shape: Vec<usize>, mut values: Vec<f64>) -> Result<Value, RuntimeError> {
        let data = if dtype.is_float() {
            values.iter_mut().for_each(|x| *x = round_float(dtype, *x));
            Data::Float(values)
        } else if dtype == DType::Bool {
            Data::Bool(collect(values.iter().map(|&x| x != 0.0))?)
        } else {
            Data::Int(collect(values.iter().map(|&x| wrap_int(dtype, x as i64)))?)
        };
        Ok(Value { dtype, shape, data })
    }

    /// The same elements converted to another dtype.
    pub fn cast(&self, dtype: DType) -> Result<Value, RuntimeError> {
        let n = self.len();
        let mut data = Data::with_capacity(dtype, n)?;
        match &mut data {
            Data::Float(v) => v.extend((0..n).map(|i| round_float(dtype, self.f64_at(i)))),
            Data::Bool(v) => v.extend((0..n).map(|i| self.bool_at(i))),
            Data::Int(v) => v.extend((0..n).map(|i| wrap_int(dtype, self.i64_at(i)))),
        }
        Ok(Value { dtype, shape: self.shape.clone(), data })
    }

    /// A copy.
    pub fn try_clone(&self) -> Result<Value, RuntimeError> {
        self.gather(self.shape.clone(), 0..self.len())
    }

    /// Gathers elements by flat index into a new value of `shape`.
    pub fn gather(&self, shape: Vec<usize>, index: impl ExactSizeIterator<Item = usize>) -> Result<Value, RuntimeError> {
        let data = match &self.data {
            Data::Float(v) => Data::Float(collect(index.map(|i| v[i]))?),
            Data::Int(v) => Data::Int(collect(index.map(|i| v[i]))?),
            Data::Bool(v) => Data::Bool(collect(index.map(|i| v[i]))?),
        };
        Ok(Value { dtype: self.dtype, shape, data })
    }
}
