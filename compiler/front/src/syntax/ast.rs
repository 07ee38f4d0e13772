//! The syntax tree (LANGUAGE.md sections 2 and 3). Every node has a span.

use crate::diagnostics::Span;

/// A name and where it is written.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A parsed source file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Module {
    pub items: Vec<Item>,
}

/// A top-level declaration.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Dim(DimDecl),
    Param(ParamDecl),
    Def(FnDef),
}

/// `dim D = 512`, `dim Dh = D / H` or `dim V` (known at run time).
#[derive(Clone, Debug, PartialEq)]
pub struct DimDecl {
    pub name: Ident,
    pub value: Option<DimExpr>,
    pub span: Span,
}

/// An integer expression of dims.
#[derive(Clone, Debug, PartialEq)]
pub enum DimExpr {
    Number(u64, Span),
    Name(Ident),
    Binary(Box<DimExpr>, DimOp, Box<DimExpr>, Span),
}

impl DimExpr {
    pub fn span(&self) -> Span {
        match self {
            DimExpr::Number(_, s) | DimExpr::Binary(_, _, _, s) => *s,
            DimExpr::Name(i) => i.span,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DimOp {
    Add,
    Sub,
    Mul,
    Div,
}

/// `param w: [D V]`: a weight bound by name at load time.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamDecl {
    pub name: Ident,
    pub ty: TypeExpr,
    pub span: Span,
}

/// `def f(params) -> TYPE { body }` or `def f(params) -> (a: TYPE, b: TYPE) { body }`.
#[derive(Clone, Debug, PartialEq)]
pub struct FnDef {
    pub name: Ident,
    pub params: Vec<FnParam>,
    pub results: Results,
    pub body: Vec<Stmt>,
    pub span: Span,
}

/// A function's declared results (LANGUAGE.md section 14).
#[derive(Clone, Debug, PartialEq)]
pub enum Results {
    /// `-> TYPE`: one result, unnamed.
    One(TypeRef),
    /// `-> (NAME: TYPE, ...)`: results by name, in order.
    Named { results: Vec<NamedResult>, span: Span },
}

/// `NAME: TYPE` in a function's results.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedResult {
    pub name: Ident,
    pub ty: TypeRef,
}

/// One parameter of a function, with its optional default value.
#[derive(Clone, Debug, PartialEq)]
pub struct FnParam {
    pub name: Ident,
    pub ty: TypeRef,
    pub default: Option<Expr>,
}

/// A parameter or result type: a tensor type or a host scalar type.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeRef {
    Tensor(TypeExpr),
    Host(HostType, Span),
}

impl TypeRef {
    pub fn span(&self) -> Span {
        match self {
            TypeRef::Tensor(t) => t.span,
            TypeRef::Host(_, s) => *s,
        }
    }
}

/// The host scalar types `float`, `int` and `bool` (the runtime's vocabulary).
pub use nax_contract::HostType;

/// `KIND[AXES]`, e.g. `Prob(m)[b n m]`; `kind` is `None` for a bare `[AXES]`.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeExpr {
    pub kind: Option<KindExpr>,
    pub axes: Vec<AxisEntry>,
    pub span: Span,
}

/// The kind before the axes: `Real`, `f16`, `Int`, `Mask`, `Prob(a)`, ...
#[derive(Clone, Debug, PartialEq)]
pub struct KindExpr {
    pub name: Ident,
    pub domain: Option<Ident>,
    pub span: Span,
}

/// One entry of an axis list or a pattern side.
#[derive(Clone, Debug, PartialEq)]
pub enum AxisEntry {
    Name(Ident),
    Number(u64, Span),
    /// `(gh 16)`, or the grouped size `16gh` (then `shorthand` is true).
    /// On a pattern's output side a group may hold an ellipsis, `(h ...)`:
    /// where it stood (the number of parts before it) and its span.
    Group {
        parts: Vec<AxisEntry>,
        span: Span,
        shorthand: bool,
        ellipses: Vec<(usize, Span)>,
    },
}

impl AxisEntry {
    pub fn span(&self) -> Span {
        match self {
            AxisEntry::Name(i) => i.span,
            AxisEntry::Number(_, s) => *s,
            AxisEntry::Group { span, .. } => *span,
        }
    }
}

/// A statement of a function body.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `a = e` or `q, k, v = split(...)`.
    Assign { targets: Vec<Ident>, value: Expr, span: Span },
    /// `return e` or `return e1, e2, ...`.
    Return { values: Vec<Expr>, span: Span },
    /// `for i in A..B { ... }`, bound by `targets` when it yields
    /// (`ks, vs = for l in L { ... yield k, v }`).
    Loop { targets: Vec<Ident>, body: Box<ForLoop>, span: Span },
    /// `yield e1, e2, ...`: the last statement of a loop's body.
    Yield { values: Vec<Expr>, span: Span },
}

impl Stmt {
    pub fn span(&self) -> Span {
        match self {
            Stmt::Assign { span, .. } | Stmt::Return { span, .. } | Stmt::Loop { span, .. } | Stmt::Yield { span, .. } => *span,
        }
    }
}

/// A loop: its variable, its range and its statements.
#[derive(Clone, Debug, PartialEq)]
pub struct ForLoop {
    pub var: Ident,
    pub range: LoopRange,
    pub body: Vec<Stmt>,
    /// `for i in A..B`, up to the `{`.
    pub header: Span,
}

/// The turns of a loop.
#[derive(Clone, Debug, PartialEq)]
pub enum LoopRange {
    /// `for l in L`: `0..L`, stacked along an axis named `L`.
    Dim(Expr),
    /// `for i in A..B`.
    Between(Expr, Expr),
}

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int(u64),
    Float(f64),
    Bool(bool),
    Inf,
    Str(String),
    Name(String),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `x as [n D]`.
    As(Box<Expr>, TypeExpr),
    /// `x[n = i, D = 0:8 as d]` (LANGUAGE.md section 13).
    Index(Box<Expr>, Vec<IndexEntry>),
    /// A call of a built-in or a function, with positional and keyword arguments.
    Call(Box<Call>),
    /// An expression that failed to parse (already reported).
    Error,
}

/// One entry of an indexing: the axis and what is taken from it.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexEntry {
    pub axis: Ident,
    pub at: IndexAt,
    pub span: Span,
}

/// `n = i` or `n = i:j:s as m`: bounds are integer literals (with an
/// optional `-`) or names of `int` values and sizes.
#[derive(Clone, Debug, PartialEq)]
pub enum IndexAt {
    Element(Expr),
    Slice(Box<SliceAt>),
}

/// `i:j:s as m`, each part optional.
#[derive(Clone, Debug, PartialEq)]
pub struct SliceAt {
    pub start: Option<Expr>,
    pub stop: Option<Expr>,
    pub step: Option<Expr>,
    pub rename: Option<Ident>,
}

/// `callee(args)`; pattern built-ins carry their pattern.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub callee: Ident,
    pub args: Vec<Expr>,
    /// `zeros(TYPE)`, `ones(TYPE)`, `full(TYPE, v)`: the type argument.
    pub type_arg: Option<TypeExpr>,
    pub pattern: Option<Pattern>,
    pub keywords: Vec<Keyword>,
}

/// `name=value` in a call.
#[derive(Clone, Debug, PartialEq)]
pub struct Keyword {
    pub name: Ident,
    pub value: Expr,
}

/// `inputs -> output`: one input side per operand.
#[derive(Clone, Debug, PartialEq)]
pub struct Pattern {
    pub inputs: Vec<PatternSide>,
    pub output: PatternSide,
    pub span: Span,
}

/// One side of a pattern: a list of entries, and where an ellipsis `...`
/// stood among them (the number of entries before it, and its span; the
/// checker refuses more than one).
#[derive(Clone, Debug, PartialEq)]
pub struct PatternSide {
    pub entries: Vec<AxisEntry>,
    pub ellipses: Vec<(usize, Span)>,
    pub span: Span,
}

pub use nax_ops::{BinaryOp, UnaryOp};
