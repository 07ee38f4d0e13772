//! The value types every stage after the checker shares: a tensor's type
//! ([`TensorType`]: dtype, [`Kind`], [`Axis`]es with names and sizes, and
//! its value [`Range`]). The checker computes them; the IR, the optimizer,
//! kernel formation and the back ends read them, without linking the
//! checker. Sizes are the runtime's ([`nax_contract::Size`]), resolved by a
//! function's size table.

pub mod range;

pub use nax_contract::{DType, Size};
pub use range::Range;

/// What the numbers mean: plain values, or scores over a named axis.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Plain,
    Logit(String),
    Prob(String),
    LogProb(String),
}

impl Kind {
    /// The domain axis of a Logit/Prob/LogProb.
    pub fn domain(&self) -> Option<&str> {
        match self {
            Kind::Plain => None,
            Kind::Logit(a) | Kind::Prob(a) | Kind::LogProb(a) => Some(a),
        }
    }

    /// The same kind over another axis.
    pub fn with_domain(&self, axis: String) -> Kind {
        match self {
            Kind::Plain => Kind::Plain,
            Kind::Logit(_) => Kind::Logit(axis),
            Kind::Prob(_) => Kind::Prob(axis),
            Kind::LogProb(_) => Kind::LogProb(axis),
        }
    }

    /// The range every value of a domain kind has.
    pub fn natural_range(&self) -> Range {
        match self {
            Kind::Prob(_) => Range::new(0.0, 1.0),
            Kind::LogProb(_) => Range::new(f64::NEG_INFINITY, 0.0),
            Kind::Plain | Kind::Logit(_) => Range::FULL,
        }
    }
}

/// One axis: an optional name and a size.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Axis {
    pub name: Option<String>,
    pub size: Size,
}

impl Axis {
    pub fn named(name: &str, size: Size) -> Axis {
        Axis { name: Some(name.to_string()), size }
    }

    pub fn unnamed(size: Size) -> Axis {
        Axis { name: None, size }
    }
}

/// The type of a tensor value.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorType {
    pub dtype: DType,
    pub kind: Kind,
    pub axes: Vec<Axis>,
    /// `None` for masks, which are not numbers.
    pub range: Option<Range>,
}

impl TensorType {
    pub fn rank(&self) -> usize {
        self.axes.len()
    }

    /// The position of the first axis with this name.
    pub fn axis_position(&self, name: &str) -> Option<usize> {
        self.axes.iter().position(|a| a.name.as_deref() == Some(name))
    }

    /// Whether every axis has a name.
    pub fn fully_named(&self) -> bool {
        self.axes.iter().all(|a| a.name.is_some())
    }
}
