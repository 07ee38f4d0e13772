//! Element types and torch's promotion rules between them (LANGUAGE.md
//! sections 4 and 7), shared by the checker and the runtime.

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F16,
    BF16,
    F32,
    F64,
    I32,
    I64,
    Bool,
}

impl DType {
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// The name used in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }

    /// torch's promotion of two tensor dtypes: int with float gives the float,
    /// f16 with bf16 gives f32, otherwise the wider of the two.
    pub fn promote(a: DType, b: DType) -> DType {
        use DType::*;
        match (a, b) {
            _ if a == b => a,
            (Bool, x) | (x, Bool) => x,
            (F16, BF16) | (BF16, F16) => F32,
            (x, y) if x.is_float() && y.is_int() => x,
            (x, y) if x.is_int() && y.is_float() => y,
            (x, y) => {
                if x.rank() >= y.rank() { x } else { y }
            }
        }
    }

    fn rank(self) -> u8 {
        match self {
            DType::Bool => 0,
            DType::I32 => 1,
            DType::I64 => 2,
            DType::F16 | DType::BF16 => 3,
            DType::F32 => 4,
            DType::F64 => 5,
        }
    }

    /// The float dtype an operation on this dtype computes in (ints and bools give f32).
    pub fn to_float(self) -> DType {
        if self.is_float() { self } else { DType::F32 }
    }
}
