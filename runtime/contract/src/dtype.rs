//! Element types and torch's promotion rules between them (LANGUAGE.md
//! sections 4 and 7), shared by the checker and the runtime.

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum DType {
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single precision (the default float).
    F32,
    /// IEEE double precision.
    F64,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer (the default integer).
    I64,
    /// Boolean (masks).
    Bool,
}

impl DType {
    /// Every dtype.
    pub const ALL: [DType; 7] = [DType::F16, DType::BF16, DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool];

    /// Whether this is a floating-point dtype.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// Whether this is an integer dtype (bool is not).
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// The bytes of one element in memory (a bool is one byte, 0 or 1).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
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
                if x.rank() >= y.rank() {
                    x
                } else {
                    y
                }
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

#[cfg(test)]
mod tests {
    use super::DType::{self, *};

    const ALL: [DType; 7] = [F16, BF16, F32, F64, I32, I64, Bool];

    #[test]
    fn kinds_and_names() {
        assert!(ALL.iter().filter(|d| d.is_float()).eq([F16, BF16, F32, F64].iter()));
        assert!(ALL.iter().filter(|d| d.is_int()).eq([I32, I64].iter()));
        let names: Vec<&str> = ALL.iter().map(|d| d.as_str()).collect();
        assert_eq!(names, ["f16", "bf16", "f32", "f64", "i32", "i64", "bool"]);
        assert_eq!(I64.to_float(), F32);
        assert_eq!(Bool.to_float(), F32);
        assert_eq!(BF16.to_float(), BF16);
    }

    #[test]
    fn promotion() {
        assert_eq!(DType::promote(F16, BF16), F32);
        assert_eq!(DType::promote(I64, F16), F16);
        assert_eq!(DType::promote(Bool, I32), I32);
        assert_eq!(DType::promote(I32, I64), I64);
        assert_eq!(DType::promote(F32, F64), F64);
        for a in ALL {
            assert_eq!(DType::promote(a, a), a);
            for b in ALL {
                assert_eq!(DType::promote(a, b), DType::promote(b, a), "{a:?} {b:?}");
            }
        }
    }
}
