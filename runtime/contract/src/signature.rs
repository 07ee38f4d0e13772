//! What a compiled function takes and gives, as the runtime sees it: its
//! parameters (tensors with dtypes, axis names and symbolic sizes, or host
//! scalars with their defaults), the module weights it reads, its result,
//! and the size table that the call-boundary check solves. The compiler
//! writes it; hosts read it to know how to call a function.

use crate::dtype::DType;
use crate::sizes::{Size, SizeTable};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The host scalar types `float`, `int` and `bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HostType {
    /// A float (`f64` on the host).
    Float,
    /// An integer (`i64` on the host).
    Int,
    /// A boolean.
    Bool,
}

impl HostType {
    /// The name in the language: `float`, `int`, `bool`.
    pub fn as_str(self) -> &'static str {
        match self {
            HostType::Float => "float",
            HostType::Int => "int",
            HostType::Bool => "bool",
        }
    }
}

/// A host scalar value.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Scalar {
    /// A float.
    Float(f64),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
}

impl Scalar {
    /// The scalar's type.
    pub fn host_type(self) -> HostType {
        match self {
            Scalar::Float(_) => HostType::Float,
            Scalar::Int(_) => HostType::Int,
            Scalar::Bool(_) => HostType::Bool,
        }
    }

    /// The 8 bytes kernels read a host scalar from: an f64, an i64, or a
    /// bool's byte (0 or 1) followed by zeros.
    pub fn to_ne_bytes(self) -> [u8; 8] {
        match self {
            Scalar::Float(x) => x.to_ne_bytes(),
            Scalar::Int(x) => x.to_ne_bytes(),
            Scalar::Bool(x) => [u8::from(x), 0, 0, 0, 0, 0, 0, 0],
        }
    }
}

/// One axis of a tensor type: its name, if any, and its size.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AxisSpec {
    /// The axis name; `None` for an unnamed axis.
    pub name: Option<String>,
    /// The size: a constant or a symbol of the function's size table.
    pub size: Size,
}

/// A tensor type: dtype and axes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorSpec {
    /// The element type.
    pub dtype: DType,
    /// The axes, outermost first.
    pub axes: Vec<AxisSpec>,
}

impl TensorSpec {
    /// The axis names (`None` for unnamed axes).
    pub fn names(&self) -> Vec<Option<String>> {
        self.axes.iter().map(|a| a.name.clone()).collect()
    }

    /// `f32[b n 512]`, sizes printed through `sizes`.
    pub fn display(&self, sizes: &SizeTable) -> String {
        let axes: Vec<String> = self
            .axes
            .iter()
            .map(|a| {
                let size = sizes.display(a.size);
                match &a.name {
                    Some(n) if *n == size => n.clone(),
                    Some(n) => format!("{n}={size}"),
                    None => size,
                }
            })
            .collect();
        format!("{}[{}]", self.dtype.as_str(), axes.join(" "))
    }
}

/// What a parameter takes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ParamType {
    /// A tensor of this type.
    Tensor(TensorSpec),
    /// A host scalar.
    Host(HostType),
}

/// One parameter of a function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Param {
    /// Its name.
    pub name: String,
    /// What it takes.
    pub ty: ParamType,
    /// The value a host scalar parameter takes when none is given.
    pub default: Option<Scalar>,
}

/// A module weight a function reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WeightSpec {
    /// Its name.
    pub name: String,
    /// Its type.
    pub ty: TensorSpec,
}

/// One result of a function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultSpec {
    /// Its declared name; none for a function declared `-> TYPE`.
    pub name: Option<String>,
    /// Its type.
    pub ty: TensorSpec,
}

/// A compiled function's signature.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Signature {
    /// The function's name.
    pub name: String,
    /// Its parameters, in order.
    pub params: Vec<Param>,
    /// The weights it reads, by name.
    pub weights: Vec<WeightSpec>,
    /// Its results, in declared order: one for `-> TYPE` (unnamed),
    /// several for `-> (NAME: TYPE, ...)` (LANGUAGE.md section 14).
    pub results: Vec<ResultSpec>,
    /// The type of every other value it computes (once each), for the
    /// check that a call's values fit in memory.
    pub values: Vec<TensorSpec>,
    /// The symbols its sizes are written in.
    pub sizes: SizeTable,
    /// Sizes given by host `int` parameters (`h=k` with `k: int`): the size
    /// and the parameter's position.
    pub size_arguments: Vec<(Size, usize)>,
}

impl Signature {
    /// The position of the parameter called `name`.
    pub fn param_index(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }

    /// The names of several results, `logits, k, v` (for messages).
    pub fn result_names(&self) -> String {
        self.results.iter().map(|r| r.name.as_deref().unwrap_or("_")).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for Signature {
    /// `fn attention(x: f32[b n D=512], scale: float = 0.5) -> f32[b n D=512]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fn {}(", self.name)?;
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            match &p.ty {
                ParamType::Tensor(t) => write!(f, "{}: {}", p.name, t.display(&self.sizes))?,
                ParamType::Host(h) => write!(f, "{}: {}", p.name, h.as_str())?,
            }
            match p.default {
                Some(Scalar::Float(x)) => write!(f, " = {x:?}")?,
                Some(Scalar::Int(x)) => write!(f, " = {x}")?,
                Some(Scalar::Bool(x)) => write!(f, " = {x}")?,
                None => {}
            }
        }
        match self.results.as_slice() {
            [ResultSpec { name: None, ty }] => write!(f, ") -> {}", ty.display(&self.sizes)),
            results => {
                let named: Vec<String> = results.iter().map(|r| format!("{}: {}", r.name.as_deref().unwrap_or("_"), r.ty.display(&self.sizes))).collect();
                write!(f, ") -> ({})", named.join(", "))
            }
        }
    }
}
