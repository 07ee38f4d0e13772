//! The interpreter's values: a dtype, a shape and row-major data held as
//! f64 (floats), i64 (integers) or bool (masks), rounded to the dtype after
//! every operation so results match a computation in that dtype.

use nax_runtime::DType;

/// Element storage.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    Float(Vec<f64>),
    Int(Vec<i64>),
    Bool(Vec<bool>),
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

    /// A value of `dtype` built from f64 results (rounded or truncated to the dtype).
    pub fn from_f64(dtype: DType, shape: Vec<usize>, values: impl Iterator<Item = f64>) -> Value {
        let data = if dtype.is_float() {
            Data::Float(values.map(|x| round_float(dtype, x)).collect())
        } else if dtype == DType::Bool {
            Data::Bool(values.map(|x| x != 0.0).collect())
        } else {
            Data::Int(values.map(|x| wrap_int(dtype, x as i64)).collect())
        };
        Value { dtype, shape, data }
    }

    /// The same elements converted to another dtype.
    pub fn cast(&self, dtype: DType) -> Value {
        let n = self.len();
        let data = if dtype.is_float() {
            Data::Float((0..n).map(|i| round_float(dtype, self.f64_at(i))).collect())
        } else if dtype == DType::Bool {
            Data::Bool((0..n).map(|i| self.bool_at(i)).collect())
        } else {
            Data::Int((0..n).map(|i| wrap_int(dtype, self.i64_at(i))).collect())
        };
        Value { dtype, shape: self.shape.clone(), data }
    }

    /// Gathers elements by flat index into a new value of `shape`.
    pub fn gather(&self, shape: Vec<usize>, index: impl Iterator<Item = usize>) -> Value {
        let data = match &self.data {
            Data::Float(v) => Data::Float(index.map(|i| v[i]).collect()),
            Data::Int(v) => Data::Int(index.map(|i| v[i]).collect()),
            Data::Bool(v) => Data::Bool(index.map(|i| v[i]).collect()),
        };
        Value { dtype: self.dtype, shape, data }
    }
}
