//! The checked program: what the checker decided, for the IR lowering.
//!
//! Every expression carries its [`Type`] (axes with resolved names and sizes,
//! dtype, kind, range) and the alignment the checker chose (which result axis
//! each operand axis lines up with, the resolved pattern of a pattern
//! operation), so no later stage re-derives a shape rule. Sizes refer to the
//! function's [`Symbols`], which also hold the checks deferred to the call
//! boundary.

use crate::check::sizes::{Size, Symbols};
use crate::check::types::{TensorType, Type};
use crate::diagnostics::Span;
use crate::syntax::ast::{BinaryOp, UnaryOp};

/// A checked module.
#[derive(Clone, Debug, Default)]
pub struct CheckedModule {
    /// Module-level sizes: each dim's size in `symbols`.
    pub dims: Vec<(String, Size)>,
    /// The module's symbols (run-time dims and their derived sizes).
    pub symbols: Symbols,
    /// `param` declarations: weights bound by name at load time.
    pub weights: Vec<CheckedWeight>,
    /// Every function, in source order; `ok` says whether it checked without error.
    pub functions: Vec<CheckedFn>,
}

/// A weight (`param w: [D V]`).
#[derive(Clone, Debug)]
pub struct CheckedWeight {
    pub name: String,
    pub ty: TensorType,
    pub span: Span,
}

/// A checked function.
#[derive(Clone, Debug)]
pub struct CheckedFn {
    pub name: String,
    pub span: Span,
    /// Whether the function checked without error (only then is `body` complete).
    pub ok: bool,
    /// The parameters: the first `params` entries of `bindings`.
    pub params: usize,
    /// Each parameter's default value (host scalars only).
    pub defaults: Vec<Option<TExpr>>,
    /// Sizes given at run time by host int parameters (`h=k` with `k: int`):
    /// the size, and the parameter's index.
    pub size_arguments: Vec<(Size, usize)>,
    /// Every named value: the parameters, then each statement's targets in order.
    pub bindings: Vec<Binding>,
    /// The declared results, in order, each resolved in the body's scope at
    /// `return` (one unnamed result for `-> TYPE`).
    pub results: Vec<CheckedResult>,
    pub body: Vec<TStmt>,
    /// The loops of `body` as written, for the PyTorch emitter (the
    /// lowering reads the written-out statements of `body`).
    pub loops: Vec<LoopForm>,
    /// Sizes of this function, with the checks deferred to the call boundary.
    pub symbols: Symbols,
    /// Whether the body takes a `grad`, itself or through a call (a
    /// `grad` whose value calls it would be a second derivative: E0417).
    pub differentiates: bool,
    /// What the body's own `grad`s differentiate by, each once, in order.
    pub grad_targets: Vec<GradTarget>,
}

/// A loop of the function's body as written (LANGUAGE.md section 14): its
/// statements checked once more with the variable an `int` known only when
/// running, so that the PyTorch emitter can write a Python loop. `body`
/// holds the loop written out per turn (what every other stage reads) at
/// `statements`; a loop whose body does not check that way (its sizes
/// depend on the variable, or a loop inside it does) has no form and is
/// emitted written out.
#[derive(Clone, Debug)]
pub struct LoopForm {
    /// The statements of [`CheckedFn::body`] the written-out loop is.
    pub statements: std::ops::Range<usize>,
    /// The loop variable's binding.
    pub var: usize,
    /// The turns: `start..end`.
    pub start: u64,
    pub end: u64,
    /// The statements of one turn.
    pub body: Vec<TStmt>,
    /// Each stacked name's binding (after the loop) and its yielded value.
    pub yields: Vec<(usize, TExpr)>,
}

impl CheckedFn {
    /// `def f(x: Real[b n D], s: float) -> Real[b n D]`, or
    /// `-> (logits: Real[b n V], k: Real[L b n D])` for named results.
    pub fn signature(&self) -> String {
        let params: Vec<String> = self.bindings[..self.params].iter().map(|b| format!("{}: {}", b.name, b.ty.display(&self.symbols))).collect();
        let results = match self.results.as_slice() {
            [CheckedResult { name: None, ty }] => ty.display(&self.symbols),
            results => {
                let named: Vec<String> = results.iter().map(|r| format!("{}: {}", r.name.as_deref().unwrap_or("_"), r.ty.display(&self.symbols))).collect();
                format!("({})", named.join(", "))
            }
        };
        format!("def {}({}) -> {}", self.name, params.join(", "), results)
    }
}

/// One declared result: its name (none for `-> TYPE`) and type.
#[derive(Clone, Debug)]
pub struct CheckedResult {
    pub name: Option<String>,
    pub ty: Type,
}

/// A named value: a parameter or a statement's target.
#[derive(Clone, Debug)]
pub struct Binding {
    pub name: String,
    pub span: Span,
    pub ty: Type,
    /// A value the checker named, not the source: a loop's yielded value
    /// of one turn (`ks_3`), or one of a call's results at `return`.
    pub hidden: bool,
}

/// A statement: targets are indices into [`CheckedFn::bindings`]. (Most
/// statements are assignments; boxing their value to shrink the rarer
/// `Return` would cost an allocation per statement.)
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum TStmt {
    Assign {
        targets: Vec<usize>,
        value: TExpr,
    },
    /// The returned values, one per declared result, in order.
    Return {
        values: Vec<Returned>,
    },
}

/// One returned value and, for each axis of its declared result, the
/// value's axis that becomes it (the permute-to-declared-order rule).
#[derive(Clone, Debug)]
pub struct Returned {
    pub value: TExpr,
    pub permutation: Vec<usize>,
}

/// A checked expression.
#[derive(Clone, Debug)]
pub struct TExpr {
    pub kind: TExprKind,
    pub ty: Type,
    pub span: Span,
}

pub use nax_ops::{AlongAxis, Constructor, Elementwise, Reduction};

/// The pattern operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternOp {
    Rearrange,
    Reduce(Reduction),
    Repeat,
    Einsum,
    /// Split into `count` results along part `part` of the input's axis `axis`.
    Split {
        count: usize,
        axis: usize,
        part: usize,
    },
}

/// One elementary axis of a pattern: a name, or a number (unnamed).
#[derive(Clone, Debug, PartialEq)]
pub struct Elem {
    pub name: Option<String>,
    pub size: Size,
}

/// A pattern with every entry resolved: each operand axis (and each result
/// axis) as the list of elementary axes grouped into it.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedPattern {
    pub inputs: Vec<Vec<Vec<Elem>>>,
    pub output: Vec<Vec<Elem>>,
}

/// What one entry of an indexing takes from its axis.
#[derive(Clone, Debug)]
pub enum IndexEntry {
    /// The element `index` (non-negative, inside the axis): the axis goes.
    Element { axis: usize, index: Size },
    /// The element at an `int` known only at the call (negative counts from
    /// the end; outside the axis fails the call): the axis goes.
    ElementAt { axis: usize, value: Box<TExpr> },
    /// `len` elements from `start`, `step` apart: the axis stays with size `len`.
    Slice { axis: usize, start: Size, step: u64, len: Size },
}

/// What an expression does.
#[derive(Clone, Debug)]
pub enum TExprKind {
    Int(u64),
    Float(f64),
    Bool(bool),
    /// A parameter or an earlier binding (index into [`CheckedFn::bindings`]).
    Local(usize),
    /// A weight (index into [`CheckedModule::weights`]).
    Weight(usize),
    /// A size name used as an `int` host scalar.
    SizeValue(Size),
    Unary(UnaryOp, Box<TExpr>),
    /// An elementwise operator; `align[i][k]` is the result axis of operand i's axis k.
    Binary {
        op: BinaryOp,
        lhs: Box<TExpr>,
        rhs: Box<TExpr>,
        align: [Vec<usize>; 2],
    },
    /// `@`: `batch[i][k]` is the result axis of operand i's leading (batch) axis k;
    /// a rank-1 operand has no batch axes.
    MatMul {
        lhs: Box<TExpr>,
        rhs: Box<TExpr>,
        batch: [Vec<usize>; 2],
    },
    /// An elementwise built-in with its operands' alignments.
    Elementwise {
        func: Elementwise,
        args: Vec<TExpr>,
        align: Vec<Vec<usize>>,
    },
    /// softmax, log_softmax, logsumexp along the operand's axis `axis`.
    AlongAxis {
        func: AlongAxis,
        arg: Box<TExpr>,
        axis: usize,
    },
    Pattern {
        op: PatternOp,
        args: Vec<TExpr>,
        pattern: ResolvedPattern,
    },
    Construct {
        func: Constructor,
        value: Option<Box<TExpr>>,
    },
    /// `x as [..]`: the same data with new axis names.
    Rename(Box<TExpr>),
    /// `x[n = i, m = a:b:s]`: each entry on an axis of the operand (its
    /// position in the operand), in the operand's axis order.
    Index {
        arg: Box<TExpr>,
        entries: Vec<IndexEntry>,
    },
    /// `concat(a, b, ...: n, m, ... -> k)`: `axes[i]` is operand i's joined
    /// axis; `align[i][j]` the result axis of operand i's axis j.
    Concat {
        args: Vec<TExpr>,
        axes: Vec<usize>,
        align: Vec<Vec<usize>>,
    },
    /// `take(table, ids, V)`: axis `axis` of `table` replaced by the axes of `ids`.
    Take {
        table: Box<TExpr>,
        ids: Box<TExpr>,
        axis: usize,
    },
    /// `cumsum` (`Reduction::Sum`) or `cumprod` (`Reduction::Prod`) along `axis`.
    Scan {
        op: Reduction,
        arg: Box<TExpr>,
        axis: usize,
    },
    /// `argmax` (`Reduction::Max`) or `argmin` (`Reduction::Min`) along `axis`.
    ArgReduce {
        op: Reduction,
        arg: Box<TExpr>,
        axis: usize,
    },
    /// A loop's yielded values, one per turn in order, stacked along a new
    /// first axis (the type's; of size 0, with no values, for an empty range).
    Stack(Vec<TExpr>),
    /// A call of the module's function `function` (index into
    /// [`CheckedModule::functions`]): one argument per parameter, in order,
    /// defaults filled in. A call of a function with several results is
    /// the whole value of an assignment that binds one name per result; its
    /// type is the first result's, the targets' bindings have each one's.
    Call {
        function: usize,
        args: Vec<TExpr>,
    },
    /// `grad(value, N1, ..., Nk)` (LANGUAGE.md section 15): the whole value
    /// of an assignment that binds k + 1 names (the value, then each
    /// derivative); its type is the value's.
    Grad {
        value: Box<TExpr>,
        wrt: Vec<GradTarget>,
    },
}

/// What a `grad` differentiates by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GradTarget {
    /// A parameter of the function (index into [`CheckedFn::bindings`]).
    Param(usize),
    /// A weight (index into [`CheckedModule::weights`]).
    Weight(usize),
}
