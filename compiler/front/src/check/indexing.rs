//! Section 13: indexing and slicing (`x[n = i, m = a:b:s as k]`),
//! `concat`, `take`, the scans `cumsum`/`cumprod` and the arg-reductions
//! `argmax`/`argmin` (E0414 for an index, bound or step outside its axis,
//! E0415 for ids that are not integers).
//!
//! Bounds are integer literals, sizes or `int` parameters. On an axis whose
//! size is known when compiling literals and sizes are checked here; on a
//! run-time axis each requirement (`n >= 5`, `n - 3 >= 0`, a slice's stop
//! not before its start) becomes a derived size the call boundary
//! evaluates, so a bad call is refused before any kernel runs. An `int`
//! parameter as a slice bound is a signed size the call gives: it counts
//! from the end when negative and is clipped to the axis, and a stop before
//! the start gives an empty slice, as in Python (`SymDef::Position`,
//! `SymDef::Gap`).

use super::FnChecker;
use super::builtins::error_expr;
use super::patterns::reduction_type;
use super::range::Range;
use super::sizes::{Size, SymDef};
use super::types::{Axis, DType, Kind, TensorType, Type, describe_axes};
use crate::checked::{IndexEntry, Reduction, TExpr, TExprKind};
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::syntax::ast::{self, ExprKind, HostType, IndexAt, SliceAt, UnaryOp};

/// An index or a slice bound as written: an integer, a size, or an `int`
/// value known only at the call (an element's index only).
#[derive(Clone, Debug)]
enum Bound {
    Const(i64),
    Size(Size),
    Value(TExpr),
}

impl FnChecker<'_> {
    /// `x[n = i, m = a:b:s as k]`.
    pub(super) fn index(&mut self, operand: &ast::Expr, entries: &[ast::IndexEntry], span: Span) -> TExpr {
        let arg = self.expr(operand);
        if arg.ty.is_error() {
            return TExpr { span, ..arg };
        }
        let Type::Tensor(t) = arg.ty.clone() else {
            self.report(Diagnostic::new(Code::E0403, operand.span, "only a tensor can be indexed").primary(format!("{} value", arg.ty.display(&self.syms))));
            return error_expr(span);
        };
        let mut checked: Vec<(usize, IndexEntry, Option<String>)> = Vec::new();
        for entry in entries {
            let Some(axis) = self.axis_named(&entry.axis.name, entry.axis.span, &t, &arg) else { return error_expr(span) };
            if checked.iter().any(|(a, ..)| *a == axis) {
                self.report(
                    Diagnostic::new(Code::E0407, entry.axis.span, format!("axis '{}' is indexed twice", entry.axis.name))
                        .primary("a second entry for this axis"),
                );
                return error_expr(span);
            }
            let size = t.axes[axis].size;
            let Some(index) = self.index_entry(entry, axis, size) else { return error_expr(span) };
            let rename = match &entry.at {
                IndexAt::Slice(s) => s.rename.as_ref().map(|r| r.name.clone()),
                IndexAt::Element(_) => None,
            };
            checked.push((axis, index, rename));
        }
        checked.sort_by_key(|(a, ..)| *a);
        let mut axes = Vec::new();
        let mut kind = t.kind.clone();
        for (p, a) in t.axes.iter().enumerate() {
            let Some((_, entry, rename)) = checked.iter().find(|(q, ..)| *q == p) else {
                axes.push(a.clone());
                continue;
            };
            if a.name.is_some() && a.name.as_deref() == t.kind.domain() {
                kind = Kind::Plain;
            }
            if let IndexEntry::Slice { len, .. } = entry {
                axes.push(Axis { name: rename.clone(), size: *len });
            }
        }
        for entry in entries {
            if let IndexAt::Slice(s) = &entry.at
                && let Some(r) = &s.rename
                && let Some(a) = axes.iter().find(|a| a.name.as_deref() == Some(r.name.as_str()))
                && !self.bind_size_name(&r.name, a.size, r.span)
            {
                return error_expr(span);
            }
        }
        let renamed: Vec<Axis> = checked.iter().filter_map(|(p, _, r)| r.as_ref().map(|r| Axis::named(r, t.axes[*p].size))).collect();
        let kept: Vec<Axis> = t.axes.iter().enumerate().filter(|(p, _)| !checked.iter().any(|(q, ..)| q == p)).map(|(_, a)| a.clone()).collect();
        if let Some(name) = Self::clash(&kept, &renamed) {
            let d = Diagnostic::new(Code::E0404, span, format!("the result would have two axes named '{name}'")).primary("rename the slice's axis with `as`");
            return TExpr { kind: TExprKind::Bool(false), ty: self.report(d), span };
        }
        let ty = Type::Tensor(TensorType { dtype: t.dtype, kind, axes, range: t.range });
        let entries = checked.into_iter().map(|(_, e, _)| e).collect();
        TExpr { kind: TExprKind::Index { arg: Box::new(arg), entries }, ty, span }
    }

    /// Makes a new axis name (a slice's `as m`, concat's `-> k`) a size of
    /// the body, as `as` does; a name already a size must have this one (E0401).
    fn bind_size_name(&mut self, name: &str, size: Size, span: Span) -> bool {
        match self.sizes.get(name) {
            Some(&known) if !self.syms.unify(known, size) => {
                let d = Diagnostic::new(
                    Code::E0401,
                    span,
                    format!("'{name}' is already a size, {}, but this axis has {}", self.syms.display(known), self.syms.display(size)),
                )
                .primary("size mismatch");
                self.report(d);
                false
            }
            Some(_) => true,
            None => {
                self.sizes.insert(name.to_string(), size);
                true
            }
        }
    }

    /// A name of `new` that one of `others` already has (repeated names
    /// a type already had, as in `[D D]`, are not new).
    fn clash(others: &[Axis], new: &[Axis]) -> Option<String> {
        new.iter().filter_map(|a| a.name.as_deref()).find(|n| others.iter().any(|o| o.name.as_deref() == Some(*n))).map(str::to_string)
    }

    /// One entry on axis `axis` (of size `size`), with its bounds normalised.
    fn index_entry(&mut self, entry: &ast::IndexEntry, axis: usize, size: Size) -> Option<IndexEntry> {
        match &entry.at {
            IndexAt::Element(e) => match self.bound(e)? {
                // Checked while the call runs, as `take`'s indices are.
                Bound::Value(value) => Some(IndexEntry::ElementAt { axis, value: Box::new(value) }),
                bound => {
                    let index = self.position(bound, size, true, e.span, &entry.axis.name)?;
                    Some(IndexEntry::Element { axis, index })
                }
            },
            IndexAt::Slice(slice) => {
                let SliceAt { start, stop, step, .. } = slice.as_ref();
                let step_value = match step {
                    None => 1,
                    Some(e) => match self.bound(e)? {
                        Bound::Const(s) if s >= 1 => s as u64,
                        Bound::Size(s) if self.syms.constant(s).is_some_and(|v| v >= 1) => self.syms.constant(s).unwrap_or(1),
                        other => {
                            let shown = match other {
                                Bound::Const(s) => s.to_string(),
                                Bound::Size(s) => self.syms.display(s),
                                Bound::Value(_) => "a value known only at the call".to_string(),
                            };
                            self.report(
                                Diagnostic::new(Code::E0414, e.span, format!("the step of a slice must be a positive integer, not {shown}"))
                                    .primary("a step below 1 or not known when compiling"),
                            );
                            return None;
                        }
                    },
                };
                let mut bounds = [None, None];
                for (b, e) in bounds.iter_mut().zip([start, stop]) {
                    if let Some(e) = e {
                        *b = Some((self.bound(e)?, e.span));
                    }
                }
                let int_bounds = bounds.iter().any(|b| matches!(b, Some((Bound::Value(_), _))));
                let [start, stop] = bounds;
                let start = match start {
                    None => Size::Const(0),
                    Some((b, span)) => self.position(b, size, false, span, &entry.axis.name)?,
                };
                let stop = match stop {
                    None => size,
                    Some((b, span)) => self.position(b, size, false, span, &entry.axis.name)?,
                };
                let len = match (self.syms.constant(start), self.syms.constant(stop)) {
                    (Some(a), Some(b)) => Size::Const(b.saturating_sub(a).div_ceil(step_value)),
                    // Python's empty slice when an `int` bound's stop comes before its start.
                    _ if int_bounds => {
                        let gap = self.syms.gap(stop, start, entry.span);
                        self.syms.ceil_div(gap, Size::Const(step_value), entry.span)
                    }
                    // On a run-time axis the stop must not come before the start (checked at the call).
                    _ => {
                        let diff = self.syms.add_sub(stop, start, true, entry.span)?;
                        self.syms.ceil_div(diff, Size::Const(step_value), entry.span)
                    }
                };
                let start = if self.syms.constant(len) == Some(0) { Size::Const(0) } else { start };
                Some(IndexEntry::Slice { axis, start, step: step_value, len })
            }
        }
    }

    /// A bound's value: an integer literal, its negation, or a size.
    fn bound(&mut self, e: &ast::Expr) -> Option<Bound> {
        let literal = |e: &ast::Expr| match e.kind {
            ExprKind::Int(n) => i64::try_from(n).ok(),
            _ => None,
        };
        match &e.kind {
            ExprKind::Int(_) => literal(e).map(Bound::Const),
            ExprKind::Unary(UnaryOp::Neg, inner) => literal(inner).map(|n| Bound::Const(-n)),
            ExprKind::Name(_) => {
                let checked = self.expr(e);
                match (&checked.kind, &checked.ty) {
                    (_, Type::Error) => return None,
                    (TExprKind::SizeValue(s), _) => return Some(Bound::Size(*s)),
                    (_, Type::Host(HostType::Int, _)) => return Some(Bound::Value(checked)),
                    _ => None,
                }
            }
            _ => None,
        }
        .or_else(|| {
            self.report(Diagnostic::new(Code::E0202, e.span, "an index or a slice bound must be an integer literal or a size").primary("not an integer"));
            None
        })
    }

    /// A bound's position on an axis of size `size`: negative counts from
    /// the end. An element's index must lie in `[-size, size)`, a slice
    /// bound in `[-size, size]` (E0414 when known here, a check at the call otherwise).
    fn position(&mut self, bound: Bound, size: Size, element: bool, span: Span, axis: &str) -> Option<Size> {
        if let Bound::Value(v) = bound {
            // A slice's length depends on its bounds: an `int` parameter
            // gives them at the call, clipped to the axis as Python does.
            let TExprKind::Local(i) = v.kind else { return None };
            if i >= self.params {
                self.report(
                    Diagnostic::new(Code::E0202, v.span, "a run-time slice bound must be an `int` parameter of the function")
                        .primary("an `int` computed in the body")
                        .note("a slice's bounds fix its length, which the call boundary computes from the arguments"),
                );
                return None;
            }
            let raw = self.signed_argument(i);
            return Some(self.syms.position(raw, size, span));
        }
        let known = |s: &Self, b: Size| s.syms.constant(b);
        let outside = |s: &mut Self, shown: String| {
            let limit = s.syms.display(size);
            let what = if element { "index" } else { "slice bound" };
            let allowed = if element { format!("[-{limit}, {limit})") } else { format!("[-{limit}, {limit}]") };
            s.report(
                Diagnostic::new(Code::E0414, span, format!("the {what} {shown} lies outside axis '{axis}' of size {limit}"))
                    .primary(format!("must lie in {allowed}")),
            );
            None
        };
        let (value, from_end) = match bound {
            Bound::Const(b) if b < 0 => (Size::Const(b.unsigned_abs()), true),
            Bound::Const(b) => (Size::Const(b as u64), false),
            Bound::Size(s) => (s, false),
            Bound::Value(_) => return None,
        };
        // The largest value `value` may take: `size` itself for a slice
        // bound or a count from the end, `size - 1` for an element.
        let past_end = element && !from_end;
        match (known(self, value), known(self, size)) {
            (Some(v), Some(n)) => {
                let fits = if past_end { v < n } else { v <= n };
                if !fits {
                    let shown = if from_end { format!("-{v}") } else { v.to_string() };
                    return outside(self, shown);
                }
                Some(Size::Const(if from_end { n - v } else { v }))
            }
            _ => {
                // `size - value` (or `size - value - 1`) must not be negative at the call.
                let need = if past_end { self.syms.add_sub(value, Size::Const(1), false, span)? } else { value };
                let room = self.syms.add_sub(size, need, true, span)?;
                Some(if from_end { room } else { value })
            }
        }
    }

    /// The signed size `int` parameter `i` gives at the call (one per parameter).
    fn signed_argument(&mut self, i: usize) -> Size {
        if let Some(&(size, _)) = self.size_arguments.iter().find(|&&(size, p)| p == i && self.syms.defined_as(size, &SymDef::Signed)) {
            return size;
        }
        let binding = &self.bindings[i];
        let size = Size::Sym(self.syms.signed(&binding.name, binding.span));
        self.size_arguments.push((size, i));
        size
    }

    /// `concat(a, b, ...: n, m, ... -> k)`.
    pub(super) fn concat(&mut self, call: &ast::Call, span: Span) -> (TExprKind, Type) {
        let fail = (TExprKind::Bool(false), Type::Error);
        let Some(pattern) = &call.pattern else { return fail };
        let args: Vec<TExpr> = call.args.iter().map(|a| self.expr(a)).collect();
        if args.iter().any(|a| a.ty.is_error()) {
            return fail;
        }
        let single = |side: &ast::PatternSide| match (side.entries.as_slice(), side.ellipses.is_empty()) {
            ([ast::AxisEntry::Name(n)], true) => Some(n.clone()),
            _ => None,
        };
        let names: Option<Vec<_>> = pattern.inputs.iter().chain([&pattern.output]).map(single).collect();
        let Some(mut names) = names else {
            let d = Diagnostic::new(Code::E0407, pattern.span, "concat's pattern names one axis per operand and the result's axis: `n, m -> k`")
                .primary("not one axis name per side");
            return (TExprKind::Bool(false), self.report(d));
        };
        let result_name = names.pop().map(|n| n.name).unwrap_or_default();
        if names.len() != args.len() || args.len() < 2 {
            let d = Diagnostic::new(
                Code::E0202,
                pattern.span,
                format!("concat joins at least two operands, one axis name each: {} operands, {} names", args.len(), names.len()),
            )
            .primary("one axis per operand");
            return (TExprKind::Bool(false), self.report(d));
        }
        let mut tensors = Vec::new();
        let mut axes = Vec::new();
        for (arg, name) in args.iter().zip(&names) {
            let Type::Tensor(t) = &arg.ty else {
                let d =
                    Diagnostic::new(Code::E0403, arg.span, "concat joins tensors, not host scalars").primary(format!("{} value", arg.ty.display(&self.syms)));
                return (TExprKind::Bool(false), self.report(d));
            };
            let Some(p) = self.axis_named(&name.name, name.span, t, arg) else { return (TExprKind::Bool(false), Type::Error) };
            tensors.push(t.clone());
            axes.push(p);
        }
        let first = &tensors[0];
        let rest = |t: &TensorType, p: usize| -> Vec<(usize, Axis)> { t.axes.iter().cloned().enumerate().filter(|(i, _)| *i != p).collect() };
        let first_rest = rest(first, axes[0]);
        let mut out_axes = first.axes.clone();
        let mut total = first.axes[axes[0]].size;
        let mut align = vec![(0..first.rank()).collect::<Vec<_>>()];
        let mut range = first.range;
        for (i, t) in tensors.iter().enumerate().skip(1) {
            if t.dtype != first.dtype {
                let d = Diagnostic::new(
                    Code::E0502,
                    args[i].span,
                    format!("concat's operands must share a dtype: {} and {}", first.dtype.as_str(), t.dtype.as_str()),
                )
                .primary(format!("a {} operand", t.dtype.as_str()))
                .label(args[0].span, format!("a {} operand", first.dtype.as_str()));
                return (TExprKind::Bool(false), self.report(d));
            }
            let mine = rest(t, axes[i]);
            let by_name = first.fully_named() && t.fully_named();
            let mut map = vec![0; t.rank()];
            map[axes[i]] = axes[0];
            let other_axes = |s: &Self, primary: String| {
                let message =
                    format!("concat's operands must have the same other axes: {} and {}", describe_axes(&first.axes, &s.syms), describe_axes(&t.axes, &s.syms));
                Diagnostic::new(Code::E0404, args[i].span, message).primary(primary).label(args[0].span, "the first operand")
            };
            if mine.len() != first_rest.len() {
                let d = other_axes(self, "this operand".into());
                return (TExprKind::Bool(false), self.report(d));
            }
            for (k, (fp, fa)) in first_rest.iter().enumerate() {
                let found = if by_name {
                    mine.iter().find(|(_, a)| a.name == fa.name)
                } else {
                    mine.get(k).filter(|(_, a)| a.name == fa.name || a.name.is_none() || fa.name.is_none())
                };
                let Some((mp, ma)) = found else {
                    let d = other_axes(self, format!("no axis lines up with '{}'", fa.name.as_deref().unwrap_or("_")));
                    return (TExprKind::Bool(false), self.report(d));
                };
                if !self.syms.unify(fa.size, ma.size) {
                    let d = Diagnostic::new(
                        Code::E0401,
                        args[i].span,
                        format!(
                            "concat's operands must agree on their other axes: {} and {}",
                            describe_axes(&first.axes, &self.syms),
                            describe_axes(&t.axes, &self.syms)
                        ),
                    )
                    .primary(format!("size {} here", self.syms.display(ma.size)))
                    .label(args[0].span, format!("size {} in the first operand", self.syms.display(fa.size)));
                    return (TExprKind::Bool(false), self.report(d));
                }
                map[*mp] = *fp;
            }
            let Some(sum) = self.syms.add_sub(total, t.axes[axes[i]].size, false, span) else {
                let d = Diagnostic::new(Code::E0401, span, "the joined axis would be larger than the largest size, 2^63 - 1").primary("too many elements");
                return (TExprKind::Bool(false), self.report(d));
            };
            total = sum;
            range = range.zip(t.range).map(|(a, b)| a.union(b));
            align.push(map);
        }
        if !self.bind_size_name(&result_name, total, pattern.output.span) {
            return fail;
        }
        let joined = Axis { name: Some(result_name), size: total };
        let others: Vec<Axis> = out_axes.iter().enumerate().filter(|(p, _)| *p != axes[0]).map(|(_, a)| a.clone()).collect();
        out_axes[axes[0]] = joined.clone();
        if let Some(name) = Self::clash(&others, &[joined]) {
            let d =
                Diagnostic::new(Code::E0404, pattern.output.span, format!("the result would have two axes named '{name}'")).primary("the joined axis's name");
            return (TExprKind::Bool(false), self.report(d));
        }
        let ty = Type::Tensor(TensorType { dtype: first.dtype, kind: Kind::Plain, axes: out_axes, range });
        (TExprKind::Concat { args, axes, align }, ty)
    }

    /// `take(table, ids, V)`.
    pub(super) fn take(&mut self, call: &ast::Call) -> (TExprKind, Type) {
        let fail = (TExprKind::Bool(false), Type::Error);
        if !self.arity(call, 3, 3) {
            return fail;
        }
        let (table, ids) = (self.expr(&call.args[0]), self.expr(&call.args[1]));
        if table.ty.is_error() || ids.ty.is_error() {
            return fail;
        }
        let Type::Tensor(t) = table.ty.clone() else {
            let d = Diagnostic::new(Code::E0403, table.span, "take gathers from a tensor, not a host scalar")
                .primary(format!("{} value", table.ty.display(&self.syms)));
            return (TExprKind::Bool(false), self.report(d));
        };
        let Some(i) = Self::as_tensor(&ids.ty) else { return fail };
        if !i.dtype.is_int() {
            let d = Diagnostic::new(Code::E0415, ids.span, format!("take's indices must be an Int tensor, not {}", ids.ty.display(&self.syms)))
                .primary("not integers")
                .note("convert with int() if the values are whole numbers");
            return (TExprKind::Bool(false), self.report(d));
        }
        let Some(axis) = self.axis_argument(call, 2, &t, &table) else { return fail };
        let bound = t.axes[axis].size;
        if let (Some(r), Some(v)) = (i.range, self.syms.constant(bound))
            && (r.lo >= v as f64 || r.hi < 0.0)
        {
            let d =
                Diagnostic::new(Code::E0414, ids.span, format!("every index lies outside axis '{}' of size {v}", t.axes[axis].name.as_deref().unwrap_or("_")))
                    .primary(format!("values in [{}, {}]", r.lo, r.hi));
            return (TExprKind::Bool(false), self.report(d));
        }
        let mut axes = t.axes[..axis].to_vec();
        axes.extend(i.axes.iter().cloned());
        axes.extend(t.axes[axis + 1..].iter().cloned());
        let others: Vec<Axis> = t.axes.iter().enumerate().filter(|(p, _)| *p != axis).map(|(_, a)| a.clone()).collect();
        if let Some(name) = Self::clash(&others, &i.axes) {
            let d = Diagnostic::new(Code::E0404, ids.span, format!("the result would have two axes named '{name}': rename one with 'as'"))
                .primary(format!("the indices' axes {}", describe_axes(&i.axes, &self.syms)))
                .label(table.span, format!("the table's axes {}", describe_axes(&t.axes, &self.syms)));
            return (TExprKind::Bool(false), self.report(d));
        }
        let kind = if t.kind.domain() == t.axes[axis].name.as_deref() { Kind::Plain } else { t.kind.clone() };
        let ty = Type::Tensor(TensorType { dtype: t.dtype, kind, axes, range: t.range });
        (TExprKind::Take { table: Box::new(table), ids: Box::new(ids), axis }, ty)
    }

    /// The operand and axis of `cumsum`, `cumprod`, `argmax` and `argmin`.
    fn along_one_axis(&mut self, call: &ast::Call) -> Option<(TExpr, TensorType, usize)> {
        if !self.arity(call, 2, 2) {
            return None;
        }
        let arg = self.expr(&call.args[0]);
        if arg.ty.is_error() || self.reject_mask(&arg, &format!("`{}`", call.callee.name)) {
            return None;
        }
        let t = Self::as_tensor(&arg.ty)?;
        let axis = self.axis_argument(call, 1, &t, &arg)?;
        Some((arg, t, axis))
    }

    /// `cumsum(x, a)` and `cumprod(x, a)`: the type of `x`, with the range
    /// `sum` or `prod` over `a` would have.
    pub(super) fn scan(&mut self, call: &ast::Call) -> (TExprKind, Type) {
        let op = if call.callee.name == "cumsum" { Reduction::Sum } else { Reduction::Prod };
        let Some((arg, t, axis)) = self.along_one_axis(call) else { return (TExprKind::Bool(false), Type::Error) };
        let count = self.syms.constant(t.axes[axis].size);
        let reduced = reduction_type(op, &t, t.axes.clone(), count, count, None);
        let ty =
            Type::Tensor(TensorType { dtype: t.dtype, kind: Kind::Plain, axes: t.axes.clone(), range: reduced.range.map(|r| r.union(t.range.unwrap_or(r))) });
        (TExprKind::Scan { op, arg: Box::new(arg), axis }, ty)
    }

    /// `argmax(x, a)` and `argmin(x, a)`: `Int` without `a`, in `[0, size of a - 1]`.
    pub(super) fn arg_reduce(&mut self, call: &ast::Call) -> (TExprKind, Type) {
        let op = if call.callee.name == "argmax" { Reduction::Max } else { Reduction::Min };
        let Some((arg, t, axis)) = self.along_one_axis(call) else { return (TExprKind::Bool(false), Type::Error) };
        // An empty axis has no first maximum: E0414 here, a call-boundary check on a run-time axis.
        if self.syms.add_sub(t.axes[axis].size, Size::Const(1), true, call.callee.span).is_none() {
            let d = Diagnostic::new(Code::E0414, call.args[1].span, format!("`{}` along an empty axis has no answer", call.callee.name))
                .primary("an axis of size 0");
            return (TExprKind::Bool(false), self.report(d));
        }
        let hi = self.syms.constant(t.axes[axis].size).map_or(f64::INFINITY, |n| n.saturating_sub(1) as f64);
        let mut axes = t.axes.clone();
        axes.remove(axis);
        let ty = Type::Tensor(TensorType { dtype: DType::I64, kind: Kind::Plain, axes, range: Some(Range::new(0.0, hi)) });
        (TExprKind::ArgReduce { op, arg: Box::new(arg), axis }, ty)
    }
}
