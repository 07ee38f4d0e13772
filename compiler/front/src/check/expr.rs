//! Expressions: literals, names, operators (section 7), broadcasting
//! (section 5), `@` (section 6) and `as`.

use super::FnChecker;
use super::broadcast::{Aligned, Mismatch, broadcast};
use super::range::Range;
use super::sizes::Size;
use super::stmts::host_as_tensor;
use super::types::{Axis, DType, Kind, TensorType, Type, describe_axes, describe_axis};
use crate::checked::{TExpr, TExprKind};
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::syntax::ast::{self, AxisEntry, BinaryOp, ExprKind, HostType, UnaryOp};

/// Which operand of a two-operand rule a message is about.
pub(super) const SIDES: [&str; 2] = ["left operand", "right operand"];

impl FnChecker<'_> {
    /// Checks an expression. Never fails: problems are reported and give [`Type::Error`].
    pub(super) fn expr(&mut self, e: &ast::Expr) -> TExpr {
        crate::syntax::with_stack(|| self.expr_inner(e))
    }

    fn expr_inner(&mut self, e: &ast::Expr) -> TExpr {
        let span = e.span;
        let (kind, ty) = match &e.kind {
            ExprKind::Int(n) => (TExprKind::Int(*n), Type::Host(HostType::Int, Some(Range::exact(*n as f64)))),
            ExprKind::Float(x) => (TExprKind::Float(*x), Type::Host(HostType::Float, Some(Range::exact(*x)))),
            ExprKind::Inf => (TExprKind::Float(f64::INFINITY), Type::Host(HostType::Float, Some(Range::exact(f64::INFINITY)))),
            ExprKind::Bool(b) => (TExprKind::Bool(*b), Type::Host(HostType::Bool, None)),
            ExprKind::Str(s) => {
                let ty = self.report(
                    Diagnostic::new(Code::E0412, span, format!("the string \"{s}\" is not a value"))
                        .primary("a string")
                        .note("strings appear only as reduction names, as in reduce(x, b n -> b, \"mean\")"),
                );
                (TExprKind::Bool(false), ty)
            }
            ExprKind::Name(name) => self.name(name, span),
            ExprKind::Unary(op, operand) => {
                let operand = self.expr(operand);
                let ty = self.unary(*op, &operand, span);
                (TExprKind::Unary(*op, Box::new(operand)), ty)
            }
            ExprKind::Binary(op, l, r) => {
                let same_value = matches!((&l.kind, &r.kind), (ExprKind::Name(a), ExprKind::Name(b)) if a == b);
                let (lhs, rhs) = (self.expr(l), self.expr(r));
                if *op == BinaryOp::MatMul {
                    return self.matmul(lhs, rhs, span);
                }
                let (ty, align) = self.binary(*op, &lhs, &rhs, same_value, span);
                (TExprKind::Binary { op: *op, lhs: Box::new(lhs), rhs: Box::new(rhs), align }, ty)
            }
            ExprKind::As(operand, ty) => {
                let operand = self.expr(operand);
                let ty = self.rename(&operand, ty);
                (TExprKind::Rename(Box::new(operand)), ty)
            }
            ExprKind::Call(call) => return self.call(call, span),
            ExprKind::Index(operand, entries) => return self.index(operand, entries, span),
            ExprKind::Error => {
                // A syntax error, already reported: the function did not check.
                self.errors += 1;
                (TExprKind::Bool(false), Type::Error)
            }
        };
        TExpr { kind, ty, span }
    }

    fn name(&mut self, name: &str, span: Span) -> (TExprKind, Type) {
        if let Some(&turn) = self.loop_vars.get(name) {
            return (TExprKind::SizeValue(Size::Const(turn)), Type::Host(HostType::Int, Some(Range::exact(turn as f64))));
        }
        if let Some(&i) = self.values.get(name) {
            return (TExprKind::Local(i), self.bindings[i].ty.clone());
        }
        if let Some(&w) = self.module.weights.get(name) {
            return (TExprKind::Weight(w), Type::Tensor(self.checked.weights[w].ty.clone()));
        }
        if let Some(&size) = self.sizes.get(name) {
            let range = match self.syms.constant(size) {
                Some(v) => Range::exact(v as f64),
                None => Range::new(0.0, f64::INFINITY),
            };
            return (TExprKind::SizeValue(size), Type::Host(HostType::Int, Some(range)));
        }
        let ty = self.report(Diagnostic::new(Code::E0201, span, format!("unknown name `{name}`")).primary("not a value, a weight or a size in scope"));
        (TExprKind::Local(0), ty)
    }

    /// A value as a tensor operand: host scalars act as rank-0 tensors.
    pub(super) fn as_tensor(ty: &Type) -> Option<TensorType> {
        match ty {
            Type::Tensor(t) => Some(t.clone()),
            Type::Host(h, r) => Some(host_as_tensor(*h, *r)),
            Type::Error => None,
        }
    }

    /// The dtype of arithmetic between two operands (see [`super::types::arith_dtype`]).
    pub(super) fn arith_dtype(l: &Type, r: &Type) -> DType {
        super::types::arith_dtype(l, r)
    }

    /// Whether a value is a Mask or a host bool.
    pub(super) fn is_mask(ty: &Type) -> bool {
        match ty {
            Type::Tensor(t) => t.dtype == DType::Bool,
            Type::Host(h, _) => *h == HostType::Bool,
            Type::Error => false,
        }
    }

    /// Reports E0505 when an operand of arithmetic is a Mask; `true` when it is.
    pub(super) fn reject_mask(&mut self, operand: &TExpr, what: &str) -> bool {
        if Self::is_mask(&operand.ty) {
            self.report(
                Diagnostic::new(Code::E0505, operand.span, format!("{what} needs numbers, but this operand is a mask"))
                    .primary(format!("{} value", operand.ty.display(&self.syms)))
                    .note("convert a mask to numbers with float() or int(), or combine masks with and, or, !"),
            );
            true
        } else {
            false
        }
    }

    /// Lines up two operands, reporting E0401/E0404 against the expression at `span`.
    pub(super) fn align(&mut self, l: &TExpr, r: &TExpr, span: Span, sides: [&str; 2]) -> Option<Aligned> {
        let (a, b) = (Self::as_tensor(&l.ty)?, Self::as_tensor(&r.ty)?);
        match broadcast(&a.axes, &b.axes, &mut self.syms) {
            Ok(aligned) => Some(aligned),
            Err(m) => {
                self.broadcast_error(m, &a.axes, &b.axes, [l.span, r.span], span, sides);
                None
            }
        }
    }

    pub(super) fn broadcast_error(&mut self, m: Mismatch, la: &[Axis], ra: &[Axis], spans: [Span; 2], span: Span, sides: [&str; 2]) {
        let (Mismatch::Size { left, right } | Mismatch::Names { left, right }) = m;
        let (x, y) = (describe_axis(&la[left], &self.syms), describe_axis(&ra[right], &self.syms));
        let d = match m {
            Mismatch::Names { .. } => {
                Diagnostic::new(Code::E0404, span, format!("{x} of the {} lines up with {y} of the {}; rename one with rearrange or 'as'", sides[0], sides[1]))
                    .primary("named axes that don't line up")
                    .note("operands line up by name only when every axis of one has a name that the other has; otherwise they line up from the right")
            }
            Mismatch::Size { .. } => Diagnostic::new(
                Code::E0401,
                span,
                format!("{x} of the {} does not match {y} of the {}: sizes must be equal, or one of them 1", sides[0], sides[1]),
            )
            .primary("sizes don't match"),
        };
        self.report(
            d.label(spans[0], format!("{} has axes {}", sides[0], describe_axes(la, &self.syms)))
                .label(spans[1], format!("{} has axes {}", sides[1], describe_axes(ra, &self.syms))),
        );
    }

    fn unary(&mut self, op: UnaryOp, operand: &TExpr, span: Span) -> Type {
        let ty = &operand.ty;
        if ty.is_error() {
            return Type::Error;
        }
        match op {
            UnaryOp::Not => {
                if !Self::is_mask(ty) {
                    return self.report(
                        Diagnostic::new(Code::E0501, span, format!("`!` needs a Mask or a bool, not {}", ty.display(&self.syms)))
                            .primary("logical not of a non-mask")
                            .label(operand.span, "this is not a mask")
                            .note("compare first, as in !(x > 0)"),
                    );
                }
                ty.clone()
            }
            UnaryOp::Neg => {
                if self.reject_mask(operand, "unary `-`") {
                    return Type::Error;
                }
                match ty {
                    Type::Host(h, r) => Type::Host(*h, r.map(|r| -r)),
                    Type::Tensor(t) => {
                        let kind = if matches!(t.kind, Kind::Logit(_)) { t.kind.clone() } else { Kind::Plain };
                        Type::Tensor(TensorType { kind, range: t.range.map(|r| -r), ..t.clone() })
                    }
                    Type::Error => Type::Error,
                }
            }
        }
    }

    /// An elementwise binary operator: its type and its operands' alignment.
    fn binary(&mut self, op: BinaryOp, l: &TExpr, r: &TExpr, same_value: bool, span: Span) -> (Type, [Vec<usize>; 2]) {
        let no_align = [Vec::new(), Vec::new()];
        if l.ty.is_error() || r.ty.is_error() {
            return (Type::Error, no_align);
        }
        let logical = matches!(op, BinaryOp::And | BinaryOp::Or);
        if logical {
            let bad: Vec<&TExpr> = [l, r].into_iter().filter(|o| !Self::is_mask(&o.ty)).collect();
            if let Some(first) = bad.first() {
                let mut d = Diagnostic::new(Code::E0501, span, format!("`{}` needs Masks or bools, not {}", op.as_str(), first.ty.display(&self.syms)))
                    .primary("logical operation on a non-mask");
                for o in &bad {
                    d = d.label(o.span, format!("{} value", o.ty.display(&self.syms)));
                }
                return (self.report(d.note("compare first, as in x > 0")), no_align);
            }
        } else if !op.is_comparison() {
            let l_bad = self.reject_mask(l, &format!("`{}`", op.as_str()));
            let r_bad = self.reject_mask(r, &format!("`{}`", op.as_str()));
            if l_bad || r_bad {
                return (Type::Error, no_align);
            }
        }
        if let (Type::Host(a, ra), Type::Host(b, rb)) = (&l.ty, &r.ty) {
            let ty = if logical || op.is_comparison() {
                Type::Host(HostType::Bool, None)
            } else {
                let host = if *a == HostType::Int && *b == HostType::Int && op != BinaryOp::Div { HostType::Int } else { HostType::Float };
                Type::Host(host, arith_range(op, *ra, *rb, same_value))
            };
            return (ty, no_align);
        }
        let Some(aligned) = self.align(l, r, span, SIDES) else { return (Type::Error, no_align) };
        let ty = if logical || op.is_comparison() {
            TensorType { dtype: DType::Bool, kind: Kind::Plain, axes: aligned.axes, range: None }
        } else {
            let mut dtype = Self::arith_dtype(&l.ty, &r.ty);
            if op == BinaryOp::Div {
                dtype = dtype.to_float();
            }
            TensorType { dtype, kind: Kind::Plain, axes: aligned.axes, range: arith_range(op, l.ty.range(), r.ty.range(), same_value) }
        };
        (Type::Tensor(ty), [aligned.left, aligned.right])
    }

    /// `x @ y` with torch.matmul's rules.
    pub(super) fn matmul(&mut self, lhs: TExpr, rhs: TExpr, span: Span) -> TExpr {
        let (ty, batch) = self.matmul_type(&lhs, &rhs, span);
        TExpr { kind: TExprKind::MatMul { lhs: Box::new(lhs), rhs: Box::new(rhs), batch }, ty, span }
    }

    fn matmul_type(&mut self, l: &TExpr, r: &TExpr, span: Span) -> (Type, [Vec<usize>; 2]) {
        let none = [Vec::new(), Vec::new()];
        if l.ty.is_error() || r.ty.is_error() {
            return (Type::Error, none);
        }
        let (Some(a), Some(b)) = (Self::as_tensor(&l.ty), Self::as_tensor(&r.ty)) else { return (Type::Error, none) };
        for (t, o, side) in [(&a, l, "left"), (&b, r, "right")] {
            if t.rank() == 0 {
                let d = Diagnostic::new(Code::E0403, o.span, format!("the {side} operand of `@` has rank 0; matmul needs at least one axis"))
                    .primary("rank 0")
                    .note("multiply by a scalar with `*`");
                return (self.report(d), none);
            }
        }
        if self.reject_mask(l, "`@`") | self.reject_mask(r, "`@`") {
            return (Type::Error, none);
        }
        if a.dtype != b.dtype {
            let d = Diagnostic::new(
                Code::E0502,
                span,
                format!("`@` needs operands of one dtype, but the left is {} and the right is {}", a.dtype.as_str(), b.dtype.as_str()),
            )
            .primary("operands of different dtypes")
            .label(l.span, a.dtype.as_str())
            .label(r.span, b.dtype.as_str())
            .note("matmul does not promote, as in torch; convert one operand with float()");
            return (self.report(d), none);
        }
        let (ra, rb) = (a.rank(), b.rank());
        let ka = &a.axes[ra - 1];
        let kb = if rb == 1 { &b.axes[0] } else { &b.axes[rb - 2] };
        if !self.syms.unify(ka.size, kb.size) {
            let d = Diagnostic::new(
                Code::E0401,
                span,
                format!(
                    "the contracted axes of `@` differ in size: {} of the left operand and {} of the right operand",
                    describe_axis(ka, &self.syms),
                    describe_axis(kb, &self.syms)
                ),
            )
            .primary("contracted axes must have equal sizes")
            .label(l.span, format!("left operand has axes {}", describe_axes(&a.axes, &self.syms)))
            .label(r.span, format!("right operand has axes {}", describe_axes(&b.axes, &self.syms)));
            return (self.report(d), none);
        }
        let count = self.syms.constant(ka.size);
        let range = match (a.range, b.range) {
            (Some(x), Some(y)) => Some((x * y).sum_over(count)),
            _ => None,
        };
        let (axes, batch) = match (ra, rb) {
            (1, 1) => (Vec::new(), none),
            (1, _) => {
                let mut axes = b.axes[..rb - 2].to_vec();
                axes.push(b.axes[rb - 1].clone());
                (axes, [Vec::new(), (0..rb - 2).collect()])
            }
            (_, 1) => (a.axes[..ra - 1].to_vec(), [(0..ra - 2).collect(), Vec::new()]),
            _ => {
                let (ba, bb) = (&a.axes[..ra - 2], &b.axes[..rb - 2]);
                let aligned = match broadcast(ba, bb, &mut self.syms) {
                    Ok(x) => x,
                    Err(m) => {
                        self.broadcast_error(m, ba, bb, [l.span, r.span], span, ["left operand's batch axes", "right operand's batch axes"]);
                        return (Type::Error, none);
                    }
                };
                let mut axes = aligned.axes;
                axes.push(a.axes[ra - 2].clone());
                axes.push(b.axes[rb - 1].clone());
                (axes, [aligned.left, aligned.right])
            }
        };
        (Type::Tensor(TensorType { dtype: a.dtype, kind: Kind::Plain, axes, range }), batch)
    }

    /// `x as [n D]`: new names for the same axes (E0403 rank, E0401 sizes).
    fn rename(&mut self, operand: &TExpr, ty: &ast::TypeExpr) -> Type {
        let Some(t) = Self::as_tensor(&operand.ty) else { return Type::Error };
        if ty.axes.len() != t.rank() {
            return self.report(
                Diagnostic::new(
                    Code::E0403,
                    ty.span,
                    format!("`as` gives {} axes to a value with {} axes {}", ty.axes.len(), t.rank(), describe_axes(&t.axes, &self.syms)),
                )
                .primary("wrong number of axes")
                .label(operand.span, "the renamed value"),
            );
        }
        if let Some(k) = &ty.kind {
            let written = super::resolve_tensor_type(
                &ast::TypeExpr { kind: Some(k.clone()), axes: ty.axes.clone(), span: ty.span },
                &mut super::SizeScope { sizes: self.sizes.clone(), new_names: true },
                &mut self.syms.clone(),
                &mut Vec::new(),
            );
            if let Some(w) = written
                && w.dtype != t.dtype
            {
                return self.report(
                    Diagnostic::new(Code::E0502, k.span, format!("`as` renames axes and cannot change the dtype {} to {}", t.dtype.as_str(), w.dtype.as_str()))
                        .primary("a different dtype")
                        .note("convert with float() or int()"),
                );
            }
        }
        let mut new_names = Vec::new();
        let mut axes = Vec::with_capacity(t.rank());
        for (entry, axis) in ty.axes.iter().zip(&t.axes) {
            let renamed = match entry {
                AxisEntry::Name(id) => {
                    let known = self.sizes.get(&id.name).copied().or_else(|| new_names.iter().find(|(n, _)| n == &id.name).map(|(_, s): &(String, Size)| *s));
                    match known {
                        Some(s) if !self.syms.unify(s, axis.size) => {
                            return self.report(
                                Diagnostic::new(
                                    Code::E0401,
                                    id.span,
                                    format!("`{}` has size {} but it names {}", id.name, self.syms.display(s), describe_axis(axis, &self.syms)),
                                )
                                .primary("size mismatch")
                                .label(operand.span, format!("value with axes {}", describe_axes(&t.axes, &self.syms))),
                            );
                        }
                        Some(_) => {}
                        None => new_names.push((id.name.clone(), axis.size)),
                    }
                    Axis::named(&id.name, axis.size)
                }
                AxisEntry::Number(n, nspan) => {
                    if !self.syms.unify(Size::Const(*n), axis.size) {
                        return self.report(
                            Diagnostic::new(Code::E0401, *nspan, format!("{n} does not match {}", describe_axis(axis, &self.syms))).primary("size mismatch"),
                        );
                    }
                    Axis::unnamed(axis.size)
                }
                AxisEntry::Group { span, .. } => {
                    return self.report(
                        Diagnostic::new(Code::E0407, *span, "`as` renames axes one by one; use rearrange to group or split axes").primary("a group in `as`"),
                    );
                }
            };
            axes.push(renamed);
        }
        for (name, size) in new_names {
            self.sizes.insert(name, size);
        }
        let kind = match t.kind.domain().and_then(|d| t.axis_position(d)) {
            Some(p) => match &axes[p].name {
                Some(n) => t.kind.with_domain(n.clone()),
                None => Kind::Plain,
            },
            None => match (&ty.kind, &t.kind) {
                (Some(k), Kind::Plain) if k.name.name == "Logit" => k.domain.as_ref().map_or(Kind::Plain, |d| Kind::Logit(d.name.clone())),
                _ => t.kind.clone(),
            },
        };
        Type::Tensor(TensorType { kind, axes, ..t })
    }
}

/// The range of `l op r` by interval arithmetic (`None` for masks).
fn arith_range(op: BinaryOp, l: Option<Range>, r: Option<Range>, same_value: bool) -> Option<Range> {
    let (a, b) = (l?, r?);
    Some(match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul if same_value => a.square(),
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        _ => return None,
    })
}
