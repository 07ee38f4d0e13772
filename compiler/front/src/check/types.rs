//! The types the checker gives every expression (LANGUAGE.md section 4):
//! dtype, kind, axes (names and sizes) and range, and how they print.

use super::range::Range;
use super::sizes::Symbols;
use crate::syntax::ast::HostType;

pub use nax_contract::DType;
pub use nax_values::{Axis, Kind, TensorType};

/// The type of any expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    /// The type of an expression that failed to check: it suppresses follow-on errors.
    Error,
    /// A host scalar: `float`, `int` or `bool` (a bool has no range).
    Host(HostType, Option<Range>),
    Tensor(TensorType),
}

impl Type {
    pub fn is_error(&self) -> bool {
        matches!(self, Type::Error)
    }

    pub fn range(&self) -> Option<Range> {
        match self {
            Type::Error => None,
            Type::Host(_, r) => *r,
            Type::Tensor(t) => t.range,
        }
    }

    /// The type string of CLI.md: `Real[b n D]`, `Prob(m)[n m]`, `float`.
    pub fn display(&self, syms: &Symbols) -> String {
        match self {
            Type::Error => "{error}".to_string(),
            Type::Host(h, _) => h.as_str().to_string(),
            Type::Tensor(t) => tensor_type_string(t, syms),
        }
    }

    /// Each axis's size: a constant, or the symbol's name.
    pub fn sizes(&self, syms: &Symbols) -> Vec<ShownSize> {
        match self {
            Type::Tensor(t) => {
                t.axes.iter().map(|a| syms.constant(a.size).map_or_else(|| ShownSize::Named(syms.display(a.size)), ShownSize::Constant)).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// An axis's size as `--types` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShownSize {
    /// A constant.
    Constant(u64),
    /// A size known by name (a symbol, or an expression of symbols).
    Named(String),
}

impl std::fmt::Display for ShownSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShownSize::Constant(n) => write!(f, "{n}"),
            ShownSize::Named(name) => f.write_str(name),
        }
    }
}

/// `KIND[AXES]` as CLI.md prints it.
pub fn tensor_type_string(t: &TensorType, syms: &Symbols) -> String {
    let kind = match &t.kind {
        Kind::Logit(a) => format!("Logit({a})"),
        Kind::Prob(a) => format!("Prob({a})"),
        Kind::LogProb(a) => format!("LogProb({a})"),
        Kind::Plain => match t.dtype {
            DType::F32 => "Real".to_string(),
            DType::I64 => "Int".to_string(),
            DType::Bool => "Mask".to_string(),
            other => other.as_str().to_string(),
        },
    };
    format!("{kind}[{}]", axes_string(&t.axes, syms))
}

/// The axes separated by spaces: names, constant sizes, or `_`.
pub fn axes_string(axes: &[Axis], syms: &Symbols) -> String {
    let parts: Vec<String> = axes
        .iter()
        .map(|a| match (&a.name, syms.constant(a.size)) {
            (Some(n), _) => n.clone(),
            (None, Some(v)) => v.to_string(),
            (None, None) => "_".to_string(),
        })
        .collect();
    parts.join(" ")
}

/// An axis for messages: `'n' (size 8)` or `an unnamed axis of size 3`.
pub fn describe_axis(axis: &Axis, syms: &Symbols) -> String {
    match &axis.name {
        Some(n) => format!("axis '{n}' (size {})", syms.display(axis.size)),
        None => format!("an unnamed axis of size {}", syms.display(axis.size)),
    }
}

/// Axes with sizes for messages: `[b=2 n=16 3]`.
pub fn describe_axes(axes: &[Axis], syms: &Symbols) -> String {
    let parts: Vec<String> = axes
        .iter()
        .map(|a| match &a.name {
            Some(n) => format!("{n}={}", syms.display(a.size)),
            None => syms.display(a.size),
        })
        .collect();
    format!("[{}]", parts.join(" "))
}

/// The dtype of arithmetic between two operands: torch's promotion, where a
/// host scalar can change a tensor's category but not its width (`Int[n] +
/// 2.5` is f32, `f16[n] * 2.0` stays f16); two host scalars promote as
/// their rank-0 tensors would.
pub fn arith_dtype(l: &Type, r: &Type) -> DType {
    let host_dtype = |h: HostType| match h {
        HostType::Float => DType::F32,
        HostType::Int => DType::I64,
        HostType::Bool => DType::Bool,
    };
    match (l, r) {
        (Type::Tensor(a), Type::Tensor(b)) => DType::promote(a.dtype, b.dtype),
        (Type::Tensor(t), Type::Host(h, _)) | (Type::Host(h, _), Type::Tensor(t)) => {
            if *h == HostType::Float && !t.dtype.is_float() {
                DType::F32
            } else {
                t.dtype
            }
        }
        (Type::Host(a, _), Type::Host(b, _)) => DType::promote(host_dtype(*a), host_dtype(*b)),
        _ => DType::F32,
    }
}
