//! Loops (LANGUAGE.md section 14): `for i in A..B { ... }` and `for l in L`.
//!
//! A loop means its statements written once per turn, so it is checked that
//! way: the body is checked for every turn with the loop variable an `int`
//! known when compiling (a size value, so `w[L = i]` selects a constant
//! layer), and the checked statements of every turn are appended to the
//! function's body in order. The checked program is therefore unrolled:
//! carried values are ordinary rebindings, and each stacked output is a
//! [`TExprKind::Stack`] of the turns' yielded values. What the section asks
//! of a rolled loop is checked here: carried and yielded values keep their
//! type (E0416), ranges are widened over the turns, names first bound in
//! the body end with it (E0201 after), and an empty range's body is checked
//! once (with the variable at `A`) and contributes nothing. A loop of the
//! function's body is also checked once more with its variable an `int`
//! known only when running, silently: where that checks with the same
//! types, the PyTorch emitter writes it as a Python loop ([`LoopForm`]).

use super::FnChecker;
use super::range::Range;
use super::sizes::Size;
use super::types::{Axis, TensorType, Type, describe_axes};
use crate::checked::{LoopForm, TExpr, TExprKind, TStmt};
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::syntax::ast::{self, ExprKind, ForLoop, HostType, LoopRange};
use std::collections::HashMap;

/// The most turns the loops of one function may unroll to, all together.
pub const MAX_TURNS: u64 = 100_000;

/// What the written-out loop left, for its [`LoopForm`].
struct Written<'a> {
    /// The statements of the function's body it is.
    statements: std::ops::Range<usize>,
    /// The scope before the loop.
    before_values: &'a HashMap<String, usize>,
    before_sizes: &'a HashMap<String, Size>,
    /// The bindings of its stacked names.
    stacks: &'a [usize],
}

/// A loop's turns: `start..end`, and the name of the stacked axis.
struct Turns {
    start: u64,
    end: u64,
    axis: Option<String>,
}

impl FnChecker<'_> {
    /// A statement of a body: a binding, a loop, or one that may not stand
    /// here (`return` in a loop is E0416; a `yield` outside a loop's end
    /// was a syntax error).
    pub(super) fn check_stmt(&mut self, stmt: &ast::Stmt, out: &mut Vec<TStmt>) {
        match stmt {
            ast::Stmt::Assign { targets, value, span } => out.push(self.check_assign(targets, value, *span)),
            ast::Stmt::Loop { targets, body, span } => self.check_loop(targets, body, *span, out),
            ast::Stmt::Return { span, .. } => {
                self.report(
                    Diagnostic::new(Code::E0416, *span, "`return` inside a loop")
                        .primary("a `return` in a loop's body")
                        .note("a loop's body is repeated; give values out of it by rebinding a name bound before the loop, or with `yield`"),
                );
            }
            ast::Stmt::Yield { .. } => self.errors += 1,
        }
    }

    fn check_loop(&mut self, targets: &[ast::Ident], lp: &ForLoop, span: Span, out: &mut Vec<TStmt>) {
        let (statements, yields) = match lp.body.split_last() {
            Some((ast::Stmt::Yield { values, span }, rest)) => (rest, Some((values.as_slice(), *span))),
            _ => (lp.body.as_slice(), None),
        };
        let Some(turns) = self.loop_turns(lp) else { return self.bind_failed(targets) };
        match (yields, targets.len()) {
            (Some((_, yspan)), 0) => {
                self.report(
                    Diagnostic::new(Code::E0416, yspan, "the loop yields values but is not bound")
                        .primary("yielded values go nowhere")
                        .note("bind the stacked values: `ks, vs = for l in L { ... yield k, v }`"),
                );
                return;
            }
            (yields, n) if n > 0 && yields.map_or(0, |(v, _)| v.len()) != n => {
                let count = yields.map_or(0, |(v, _)| v.len());
                self.report(
                    Diagnostic::new(
                        Code::E0411,
                        targets[0].span.to(targets[n - 1].span),
                        format!(
                            "the loop yields {count} value{} but {n} name{} bound",
                            if count == 1 { "" } else { "s" },
                            if n == 1 { " is" } else { "s are" }
                        ),
                    )
                    .primary(format!("{n} name{}", if n == 1 { "" } else { "s" }))
                    .label(yields.map_or(lp.header, |(_, s)| s), format!("{count} value{}", if count == 1 { "" } else { "s" })),
                );
                return self.bind_failed(targets);
            }
            _ => {}
        }
        let count = turns.end.saturating_sub(turns.start);
        self.turns = self.turns.saturating_add(count);
        if self.turns > MAX_TURNS {
            self.report(
                Diagnostic::new(Code::E0416, lp.header, format!("the function's loops run {} turns; at most {MAX_TURNS} are compiled", self.turns))
                    .primary("too many turns")
                    .note("loops are written out once per turn when compiling"),
            );
            return self.bind_failed(targets);
        }

        let before_values = self.values.clone();
        let before_sizes = self.sizes.clone();
        let first_statement = out.len();
        self.loop_depth += 1;
        let outer_var = self.loop_vars.get(&lp.var.name).copied();
        let mut stacked: Vec<Vec<TExpr>> = vec![Vec::new(); targets.len()];
        let mut yielded: Vec<Option<Type>> = vec![None; targets.len()];
        // Carried names: the ranges they take at the end of each turn.
        let mut carried: HashMap<String, Option<Range>> = HashMap::new();
        let mut failed = false;
        for turn in turns.start..turns.end.max(turns.start + 1) {
            self.loop_vars.insert(lp.var.name.clone(), turn);
            let errors = self.errors;
            let mut body = Vec::new();
            for stmt in statements {
                self.check_stmt(stmt, &mut body);
            }
            if let Some((values, _)) = yields {
                for (k, value) in values.iter().enumerate() {
                    let value = self.expr(value);
                    self.check_yielded(&value, &mut yielded[k], turn, turns.start);
                    let hidden = self.hidden(&format!("{}_{turn}", targets[k].name), value.span, value.ty.clone());
                    stacked[k].push(TExpr { kind: TExprKind::Local(hidden), ty: value.ty.clone(), span: value.span });
                    body.push(TStmt::Assign { targets: vec![hidden], value });
                }
            }
            for (name, &first) in &before_values {
                let now = self.values[name];
                if now != first {
                    self.check_carried(name, first, now);
                    let range = self.bindings[now].ty.range();
                    carried.entry(name.clone()).and_modify(|r| *r = widen(*r, range)).or_insert_with(|| widen(self.bindings[first].ty.range(), range));
                }
            }
            // Names first bound in the body, and its sizes, end with the turn.
            self.values.retain(|name, _| before_values.contains_key(name));
            self.sizes.clone_from(&before_sizes);
            if self.errors > errors {
                failed = true;
                break;
            }
            if count > 0 {
                out.extend(body);
            }
        }
        self.loop_depth -= 1;
        match outer_var {
            Some(v) => self.loop_vars.insert(lp.var.name.clone(), v),
            None => self.loop_vars.remove(&lp.var.name),
        };
        if failed {
            // Names carried out of a failed loop, and its own, report nothing more.
            let changed: Vec<ast::Ident> = before_values
                .iter()
                .filter(|(name, first)| self.values.get(*name) != Some(first))
                .map(|(name, &first)| ast::Ident { name: name.clone(), span: self.bindings[first].span })
                .collect();
            self.bind_failed(&changed);
            return self.bind_failed(targets);
        }
        if count == 0 {
            // Nothing ran: every name keeps its value from before the loop.
            self.values.clone_from(&before_values);
        } else {
            for (name, range) in carried {
                let now = self.values[&name];
                set_range(&mut self.bindings[now].ty, range);
            }
        }
        let mut stacks = Vec::with_capacity(targets.len());
        for (k, target) in targets.iter().enumerate() {
            let ty = match yielded[k].take() {
                Some(Type::Tensor(t)) => {
                    let size = Size::Const(count);
                    let axis = match &turns.axis {
                        Some(name) => Axis::named(name, self.sizes.get(name).copied().unwrap_or(size)),
                        None => Axis::unnamed(size),
                    };
                    let mut axes = Vec::with_capacity(t.rank() + 1);
                    axes.push(axis);
                    axes.extend(t.axes.iter().cloned());
                    Type::Tensor(TensorType { axes, ..t })
                }
                _ => Type::Error,
            };
            let values = if count == 0 { Vec::new() } else { std::mem::take(&mut stacked[k]) };
            let index = self.bind(&target.name, target.span, ty.clone());
            stacks.push(index);
            out.push(TStmt::Assign { targets: vec![index], value: TExpr { kind: TExprKind::Stack(values), ty, span } });
        }
        if count > 0 && self.loop_depth == 0 {
            let written = Written { statements: first_statement..out.len(), before_values: &before_values, before_sizes: &before_sizes, stacks: &stacks };
            if let Some(form) = self.loop_form(lp, statements, yields.map(|(v, _)| v), &turns, written) {
                self.loop_forms.push(form);
            }
        }
    }

    /// The loop's body checked once more, with its variable an `int` known
    /// only when running, for the PyTorch emitter ([`LoopForm`]); none when
    /// that does not check, or a carried or yielded value's type would
    /// differ from the written-out loop's. Nothing of it is reported, and
    /// the scope is left as the written-out loop left it.
    fn loop_form(&mut self, lp: &ForLoop, statements: &[ast::Stmt], yields: Option<&[ast::Expr]>, turns: &Turns, written: Written<'_>) -> Option<LoopForm> {
        let saved = (self.values.clone(), self.sizes.clone(), std::mem::take(&mut self.loop_vars), self.diags.len(), self.errors, self.turns);
        let first_binding = self.bindings.len();
        self.values = written.before_values.clone();
        self.sizes = written.before_sizes.clone();
        self.loop_depth = 1;
        let range = Range::new(turns.start as f64, turns.end.saturating_sub(1) as f64);
        let var = self.bind(&lp.var.name, lp.var.span, Type::Host(HostType::Int, Some(range)));
        let mut body = Vec::new();
        for stmt in statements {
            self.check_stmt(stmt, &mut body);
        }
        let yielded: Vec<(usize, TExpr)> = written.stacks.iter().zip(yields.unwrap_or_default()).map(|(&stack, e)| (stack, self.expr(e))).collect();
        let mut fits = self.errors == saved.4;
        for (name, &first) in written.before_values {
            let now = self.values[name];
            let (was, is) = (self.bindings[first].ty.clone(), self.bindings[now].ty.clone());
            fits &= now == first || self.same_type(&was, &is);
        }
        for (stack, value) in &yielded {
            let one_turn = match &self.bindings[*stack].ty {
                Type::Tensor(t) => Type::Tensor(TensorType { axes: t.axes[1..].to_vec(), ..t.clone() }),
                other => other.clone(),
            };
            fits &= self.same_type(&one_turn, &value.ty);
        }
        (self.values, self.sizes, self.loop_vars) = (saved.0, saved.1, saved.2);
        self.diags.truncate(saved.3);
        (self.errors, self.turns, self.loop_depth) = (saved.4, saved.5, 0);
        // Its bindings are the emitter's, not the source's as checked.
        self.bindings[first_binding..].iter_mut().for_each(|b| b.hidden = true);
        fits.then_some(LoopForm { statements: written.statements, var, start: turns.start, end: turns.end, body, yields: yielded })
    }

    /// The loop's turns, when its bounds are known when compiling (E0416 otherwise).
    fn loop_turns(&mut self, lp: &ForLoop) -> Option<Turns> {
        match &lp.range {
            LoopRange::Dim(bound) => {
                let end = self.loop_bound(bound)?;
                let axis = match &bound.kind {
                    ExprKind::Name(n) if !self.loop_vars.contains_key(n) => Some(n.clone()),
                    _ => None,
                };
                Some(Turns { start: 0, end, axis })
            }
            LoopRange::Between(start, end) => {
                let start = self.loop_bound(start);
                let end = self.loop_bound(end);
                Some(Turns { start: start?, end: end?, axis: None })
            }
        }
    }

    /// An integer literal, a size known when compiling (a dim), or an
    /// enclosing loop's variable.
    fn loop_bound(&mut self, bound: &ast::Expr) -> Option<u64> {
        let known = match &bound.kind {
            ExprKind::Int(n) => Some(*n),
            ExprKind::Name(n) => self.loop_vars.get(n).copied().or_else(|| self.sizes.get(n).and_then(|&s| self.syms.constant(s))),
            _ => None,
        };
        if known.is_none() {
            let what = match &bound.kind {
                ExprKind::Name(n) if self.sizes.contains_key(n) => format!("the size `{n}` is known only when the function is called"),
                ExprKind::Name(n) if self.values.contains_key(n) => format!("`{n}` is a value, known only when the function is called"),
                ExprKind::Name(n) => format!("`{n}` is not a dim"),
                _ => "a loop's bound is an integer literal or a dim".to_string(),
            };
            self.report(
                Diagnostic::new(Code::E0416, bound.span, format!("the loop's bound is not known when compiling: {what}"))
                    .primary("not known when compiling")
                    .note("write `for i in A..B` with integer literals or dims (`dim L = 12`), or `for l in L`"),
            );
        }
        known
    }

    /// A carried name's type at the end of a turn must be its type before the loop.
    fn check_carried(&mut self, name: &str, before: usize, now: usize) {
        let (was, is) = (self.bindings[before].ty.clone(), self.bindings[now].ty.clone());
        if was.is_error() || is.is_error() || self.same_type(&was, &is) {
            return;
        }
        let message = format!("`{name}` is {} before the loop but {} at the end of a turn", self.type_text(&was), self.type_text(&is));
        self.report(
            Diagnostic::new(Code::E0416, self.bindings[now].span, message)
                .primary("bound again in the loop with another type")
                .label(self.bindings[before].span, "bound before the loop")
                .note("a value carried from one turn to the next keeps its axes, sizes, dtype and kind"),
        );
    }

    /// A yielded value: a tensor whose type is the same in every turn.
    fn check_yielded(&mut self, value: &TExpr, first: &mut Option<Type>, turn: u64, start: u64) {
        match (&value.ty, first.as_mut()) {
            (Type::Error, _) => {}
            (Type::Host(..), _) => {
                self.report(
                    Diagnostic::new(Code::E0416, value.span, "a loop yields a host scalar; yielded values are tensors")
                        .primary("a host scalar")
                        .note("stack tensors; a host value can be made a tensor with `full`"),
                );
            }
            (ty, None) => *first = Some(ty.clone()),
            (ty, Some(earlier)) => {
                if self.same_type(earlier, ty) {
                    let range = widen(earlier.range(), ty.range());
                    set_range(earlier, range);
                } else {
                    let message = format!("the yielded value is {} in turn {start} but {} in turn {turn}", self.type_text(earlier), self.type_text(ty));
                    self.report(
                        Diagnostic::new(Code::E0416, value.span, message)
                            .primary("yields another type in this turn")
                            .note("every turn yields the same axes, sizes, dtype and kind"),
                    );
                }
            }
        }
    }

    /// Same axes (names and sizes), dtype and kind; ranges may differ.
    fn same_type(&mut self, a: &Type, b: &Type) -> bool {
        match (a, b) {
            (Type::Host(x, _), Type::Host(y, _)) => x == y,
            (Type::Tensor(x), Type::Tensor(y)) => {
                x.dtype == y.dtype
                    && x.kind == y.kind
                    && x.rank() == y.rank()
                    && x.axes.iter().zip(&y.axes).all(|(p, q)| p.name == q.name)
                    && x.axes.iter().zip(&y.axes).all(|(p, q)| self.syms.unify(p.size, q.size))
            }
            _ => false,
        }
    }

    fn type_text(&self, ty: &Type) -> String {
        match ty {
            Type::Tensor(t) => format!("{} {}", super::types::tensor_type_string(t, &self.syms), describe_axes(&t.axes, &self.syms)),
            other => other.display(&self.syms),
        }
    }

    /// A loop that failed: its names are bound to the error type, so later
    /// uses report nothing more.
    fn bind_failed(&mut self, targets: &[ast::Ident]) {
        for t in targets {
            self.bind(&t.name, t.span, Type::Error);
        }
    }
}

/// The smallest range holding both (none when either is unbounded by a range).
fn widen(a: Option<Range>, b: Option<Range>) -> Option<Range> {
    Some(a?.union(b?))
}

fn set_range(ty: &mut Type, range: Option<Range>) {
    match ty {
        Type::Tensor(t) => t.range = range,
        Type::Host(_, r) => *r = range,
        Type::Error => {}
    }
}
