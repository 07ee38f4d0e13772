//! The PyTorch emitter: a checked nax module as plain PyTorch source, the
//! oracle the compiled back ends are compared with and the benchmark baseline.
//!
//! [`emit_module`] gives one Python module that imports only `math` and
//! `torch`, with one Python function per nax function, of the same name.
//!
//! # Calling convention
//!
//! `def NAME(p1, p2, ..., *, w1, w2)`:
//!
//! - the nax parameters, in order; host scalar parameters keep their
//!   defaults as Python defaults (those of a trailing run of parameters, as
//!   Python requires);
//! - then, keyword-only, every weight (`param`) the function uses directly,
//!   through its callees, or to learn a run-time size, in declaration order.
//!
//! A tensor argument is a `torch.Tensor` with its axes in the parameter's
//! declared order and the declared dtype: `Real`, `Prob`, `LogProb`,
//! `Logit` are float32, `Int` int64, `Mask` bool, and `f16 bf16 f32 f64
//! i32 i64` as named. Host scalars are Python numbers and bools. The result
//! has its axes in the declared result order. Sizes are checked at the call
//! boundary (`ValueError` on a mismatch). Constructors (`zeros`, `arange`)
//! allocate on the device of the first tensor argument (else of the first
//! weight).
//!
//! Names that are Python keywords, or that would shadow what the generated
//! code uses (`torch`, `math`, the prelude's helpers, the module's functions
//! and weights) get a `_` appended.

mod expr;
mod function;
mod names;
mod patterns;
mod prelude;
mod sizes;
#[cfg(test)]
mod tests;

use function::{Context, FnEmitter};
use nax_front::CheckedModule;
use nax_front::check::sizes::{Size, SymId};
use nax_front::check::types::DType;
use nax_front::checked::{CheckedFn, GradTarget, TExpr, TExprKind, TStmt};
use std::collections::BTreeSet;
use std::fmt;

/// Why a module cannot be emitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EmitError {
    /// The function did not check (`ok` is false): fix its errors first.
    Unchecked {
        /// The function's nax name.
        function: String,
    },
    /// The function uses something the emitter does not support.
    Unsupported {
        /// The function's nax name.
        function: String,
        /// What is not supported, as a noun phrase.
        what: String,
    },
    /// The checked program is not as the checker makes it.
    Invalid {
        /// What is inconsistent.
        what: String,
    },
}

impl fmt::Display for EmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmitError::Unchecked { function } => write!(f, "the function `{function}` has errors; it cannot be emitted"),
            EmitError::Unsupported { function, what } => {
                write!(f, "the PyTorch emitter does not support {what} (in the function `{function}`)")
            }
            EmitError::Invalid { what } => write!(f, "an inconsistent checked program: {what}"),
        }
    }
}

impl std::error::Error for EmitError {}

/// The torch dtype of a nax dtype: `torch.float32`.
pub(crate) fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F16 => "torch.float16",
        DType::BF16 => "torch.bfloat16",
        DType::F32 => "torch.float32",
        DType::F64 => "torch.float64",
        DType::I32 => "torch.int32",
        DType::I64 => "torch.int64",
        DType::Bool => "torch.bool",
    }
}

/// The Python source of a checked module: the prelude, then one function per
/// nax function (see the crate documentation for the calling convention).
/// Fails when a function did not check, or uses what the emitter does not
/// support (a size known only from a run-time keyword argument, for one).
pub fn emit_module(module: &CheckedModule) -> Result<String, EmitError> {
    if let Some(f) = module.functions.iter().find(|f| !f.ok) {
        return Err(EmitError::Unchecked { function: f.name.clone() });
    }
    let mut global = names::Namer::new();
    let functions: Vec<String> = module.functions.iter().map(|f| global.fresh(&f.name)).collect();
    let weights: Vec<String> = module.weights.iter().map(|w| global.fresh(&w.name)).collect();
    let direct: Vec<BTreeSet<usize>> = module.functions.iter().map(|f| uses(f).0).collect();
    let callees: Vec<BTreeSet<usize>> = module.functions.iter().map(|f| uses(f).1).collect();
    let mut cx = Context { module, functions, weights, global, lists: closure(&direct, &callees) };

    // A first pass finds the sizes a function can learn only from a weight it
    // does not use (a run-time dim): it takes that weight too.
    let mut wanted = direct;
    for (i, f) in module.functions.iter().enumerate() {
        for SymId(root) in FnEmitter::emit(&cx, i)?.unresolved {
            let giver = module.weights.iter().position(|w| w.ty.axes.iter().any(|a| f.symbols.resolve(a.size) == Size::Sym(SymId(root))));
            wanted[i].extend(giver);
        }
    }
    cx.lists = closure(&wanted, &callees);

    let mut text = prelude::PRELUDE.to_string();
    for (i, f) in module.functions.iter().enumerate() {
        let emitted = FnEmitter::emit(&cx, i)?;
        if let Some(&SymId(root)) = emitted.unresolved.first() {
            let name = f.symbols.data(SymId(root)).map_or_else(|| format!("#{root}"), |d| d.name.clone());
            return Err(EmitError::Unsupported {
                function: f.name.clone(),
                what: format!(
                    "the size `{name}`, which neither the arguments nor the weights give (a size given by a run-time keyword argument, or a run-time dim that no tensor carries)"
                ),
            });
        }
        text.push_str("\n\n");
        text.push_str(&emitted.text);
    }
    Ok(text)
}

/// For each function, `direct` with every callee's list added, to a fixpoint.
fn closure(direct: &[BTreeSet<usize>], callees: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    let mut lists = direct.to_vec();
    loop {
        let mut changed = false;
        for i in 0..lists.len() {
            let more: Vec<usize> = callees[i].iter().flat_map(|&c| lists.get(c).into_iter().flatten().copied()).collect();
            for w in more {
                changed |= lists[i].insert(w);
            }
        }
        if !changed {
            break;
        }
    }
    lists.into_iter().map(|l| l.into_iter().collect()).collect()
}

/// The weights a function uses directly, and the functions it calls.
fn uses(f: &CheckedFn) -> (BTreeSet<usize>, BTreeSet<usize>) {
    let mut weights = BTreeSet::new();
    let mut calls = BTreeSet::new();
    let mut visit = |e: &TExpr| match e.kind {
        TExprKind::Weight(w) => {
            weights.insert(w);
        }
        TExprKind::Call { function, .. } => {
            calls.insert(function);
        }
        TExprKind::Grad { ref wrt, .. } => {
            weights.extend(wrt.iter().filter_map(|t| match t {
                GradTarget::Weight(w) => Some(*w),
                GradTarget::Param(_) => None,
            }));
        }
        _ => {}
    };
    for stmt in &f.body {
        match stmt {
            TStmt::Assign { value, .. } => walk(value, &mut visit),
            TStmt::Return { values } => values.iter().for_each(|r| walk(&r.value, &mut visit)),
        }
    }
    (weights, calls)
}

/// Calls `visit` on `e` and every expression inside it.
fn walk(e: &TExpr, visit: &mut impl FnMut(&TExpr)) {
    stacker::maybe_grow(64 * 1024, 1024 * 1024, || {
        visit(e);
        match &e.kind {
            TExprKind::Int(_) | TExprKind::Float(_) | TExprKind::Bool(_) | TExprKind::Local(_) | TExprKind::Weight(_) | TExprKind::SizeValue(_) => {}
            TExprKind::Index { arg, entries } => {
                walk(arg, visit);
                for e in entries {
                    if let nax_front::checked::IndexEntry::ElementAt { value, .. } = e {
                        walk(value, visit);
                    }
                }
            }
            TExprKind::Unary(_, x)
            | TExprKind::Rename(x)
            | TExprKind::AlongAxis { arg: x, .. }
            | TExprKind::Scan { arg: x, .. }
            | TExprKind::ArgReduce { arg: x, .. }
            | TExprKind::Grad { value: x, .. } => walk(x, visit),
            TExprKind::Binary { lhs, rhs, .. } | TExprKind::MatMul { lhs, rhs, .. } | TExprKind::Take { table: lhs, ids: rhs, .. } => {
                walk(lhs, visit);
                walk(rhs, visit);
            }
            TExprKind::Elementwise { args, .. }
            | TExprKind::Pattern { args, .. }
            | TExprKind::Call { args, .. }
            | TExprKind::Concat { args, .. }
            | TExprKind::Stack(args) => {
                args.iter().for_each(|a| walk(a, visit));
            }
            TExprKind::Construct { value, .. } => value.iter().for_each(|v| walk(v, visit)),
        }
    });
}
