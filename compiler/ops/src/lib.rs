//! The operations of nax's language, shared by every stage that names
//! them: the front end checks them, the graph and the kernel IR carry them,
//! the optimizer rewrites them and the back ends compute them. They live
//! here, in a crate of their own, so that no later stage imports the front
//! end's syntax tree to name an operator.

/// The prefix operators: `-x` and `!m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Not,
}

/// The infix operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    MatMul,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinaryOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::MatMul => "@",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
        }
    }

    /// Whether it compares (its result is a mask).
    pub fn is_comparison(self) -> bool {
        matches!(self, BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge)
    }
}

/// The built-ins that act elementwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elementwise {
    Exp,
    Log,
    Log1p,
    Expm1,
    Sqrt,
    Rsqrt,
    Abs,
    Sin,
    Cos,
    Tanh,
    Erf,
    Floor,
    Ceil,
    Round,
    Sign,
    Sigmoid,
    Relu,
    Gelu,
    Silu,
    Softplus,
    Pow,
    Maximum,
    Minimum,
    Where,
    Clamp,
    MaskedFill,
    ToFloat,
    ToInt,
}

/// softplus's threshold (torch's default, beta 1): above it softplus is x
/// itself (LANGUAGE.md section 8).
pub const SOFTPLUS_THRESHOLD: f64 = 20.0;

/// Operations along one named axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AlongAxis {
    Softmax,
    LogSoftmax,
    LogSumExp,
}

/// The reductions of `reduce` and of `sum(x, a)` and its siblings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reduction {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
}

impl Reduction {
    /// The reduction a name (`sum`, `mean`, ...) stands for.
    pub fn parse(name: &str) -> Option<Reduction> {
        Some(match name {
            "sum" => Reduction::Sum,
            "mean" => Reduction::Mean,
            "max" => Reduction::Max,
            "min" => Reduction::Min,
            "prod" => Reduction::Prod,
            _ => return None,
        })
    }
}

/// The constructors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Constructor {
    Zeros,
    Ones,
    Full,
    Arange,
}
