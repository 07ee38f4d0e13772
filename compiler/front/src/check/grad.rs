//! `grad(E, N1, ..., Nk)` (LANGUAGE.md section 15): the derivative of a
//! scalar by the names of the function's float tensor parameters and
//! weights. The checker types its k + 1 results and reports E0417; the
//! lowering builds the derivative on the named-axis graph.

use super::FnChecker;
use super::range::Range;
use super::types::{Kind, TensorType, Type, describe_axes};
use crate::checked::{GradTarget, TExpr, TExprKind};
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::syntax::ast::{self, ExprKind, HostType};

impl FnChecker<'_> {
    /// A `grad` used as one value: it has several results (E0202).
    pub(super) fn grad_as_value(&mut self, call: &ast::Call, span: Span) -> TExpr {
        let (mut value, results) = self.grad(call, span);
        if !value.ty.is_error() {
            value.ty = self.report(
                Diagnostic::new(
                    Code::E0202,
                    span,
                    format!("`grad` has {} results (the value, then one derivative per name) and is used as one value", results.len()),
                )
                .primary("a call with several results")
                .note("bind them by as many names (`loss, d_w = grad(...)`) or return them all (`return grad(...)`)"),
            );
        }
        value
    }

    /// `grad(E, N1, ..., Nk)` and the types of its k + 1 results (none when it failed).
    pub(super) fn grad(&mut self, call: &ast::Call, span: Span) -> (TExpr, Vec<Type>) {
        let failed = |value: TExpr| (TExpr { ty: Type::Error, ..value }, Vec::new());
        let grads_before = self.grads;
        let Some((first, names)) = call.args.split_first() else {
            let d = Diagnostic::new(Code::E0202, span, "`grad` needs a value and at least one name: `grad(loss, w)`").primary("nothing to differentiate");
            let ty = self.report(d);
            return (TExpr { kind: TExprKind::Bool(false), ty, span }, Vec::new());
        };
        let value = self.expr(first);
        let placeholder = TExpr { kind: TExprKind::Bool(false), ty: Type::Error, span };
        if let Some(k) = call.keywords.first() {
            self.report(Diagnostic::new(Code::E0202, k.name.span, "`grad` takes no keyword arguments").primary("unexpected keyword argument"));
            return failed(placeholder);
        }
        if names.is_empty() {
            self.report(
                Diagnostic::new(Code::E0202, span, "`grad` needs at least one name to differentiate by: `grad(loss, w)`").primary("no name after the value"),
            );
            return failed(placeholder);
        }
        let mut ok = !value.ty.is_error();
        if self.grads > grads_before {
            ok = false;
            self.report(
                Diagnostic::new(Code::E0417, first.span, "a `grad` inside the value of another `grad`: nax computes first derivatives only")
                    .primary("this value computes a derivative")
                    .label(call.callee.span, "the outer `grad`")
                    .note("a second derivative is not supported; compute the inner derivative in a function of its own and differentiate something else"),
            );
        }
        ok &= self.check_grad_value(&value);
        let mut targets: Vec<(GradTarget, Span)> = Vec::with_capacity(names.len());
        let mut types = vec![value.ty.clone()];
        for name in names {
            match self.grad_target(name) {
                Some((target, ty)) => {
                    if let Some((_, first_span)) = targets.iter().find(|(t, _)| *t == target) {
                        ok = false;
                        self.report(
                            Diagnostic::new(Code::E0417, name.span, "a name is given twice to the same `grad`")
                                .primary("given again here")
                                .label(*first_span, "first given here"),
                        );
                        continue;
                    }
                    targets.push((target, name.span));
                    types.push(Type::Tensor(TensorType { kind: Kind::Plain, range: Some(Range::FULL), ..ty }));
                }
                None => ok = false,
            }
        }
        self.grads += 1;
        for (target, _) in &targets {
            if !self.grad_targets.contains(target) {
                self.grad_targets.push(*target);
            }
        }
        let kind = TExprKind::Grad { value: Box::new(value.clone()), wrt: targets.into_iter().map(|(t, _)| t).collect() };
        if !ok {
            return failed(TExpr { kind, ty: Type::Error, span });
        }
        (TExpr { kind, ty: value.ty, span }, types)
    }

    /// Whether `grad`'s value has no axes and is a float; E0417 otherwise.
    fn check_grad_value(&mut self, value: &TExpr) -> bool {
        let problem = match &value.ty {
            Type::Error => return false,
            Type::Host(HostType::Float, _) => return true,
            Type::Host(h, _) => format!("is a host {}, not a float", h.as_str()),
            Type::Tensor(t) if !t.axes.is_empty() => {
                let names = describe_axes(&t.axes, &self.syms);
                let d = Diagnostic::new(Code::E0417, value.span, format!("the value of `grad` has axes {names}: it must be a scalar"))
                    .primary(format!("a value with axes {names}"))
                    .note("reduce it first: `sum(...)` or `mean(...)` over its axes (a loss is one number)");
                self.report(d);
                return false;
            }
            Type::Tensor(t) if !t.dtype.is_float() => format!("has dtype {}, not a float", t.dtype.as_str()),
            Type::Tensor(_) => return true,
        };
        self.report(
            Diagnostic::new(Code::E0417, value.span, format!("the value of `grad` {problem}: only a float has a derivative"))
                .primary("not a float")
                .note("convert it with float(...)"),
        );
        false
    }

    /// The parameter or weight a name after `grad`'s value names, with its
    /// type; E0417 (saying what the name is) otherwise.
    fn grad_target(&mut self, name: &ast::Expr) -> Option<(GradTarget, TensorType)> {
        let ExprKind::Name(text) = &name.kind else {
            self.report(
                Diagnostic::new(Code::E0417, name.span, "`grad` differentiates by names: each argument after the value must be a parameter or a weight")
                    .primary("not a name"),
            );
            return None;
        };
        let (target, ty) = match self.values.get(text.as_str()) {
            Some(&i) if i < self.params => (GradTarget::Param(i), self.bindings[i].ty.clone()),
            Some(&i) => {
                let was_param = self.bindings[..self.params].iter().any(|b| &b.name == text);
                let was_weight = self.module.weights.contains_key(text.as_str());
                let what = if was_param || was_weight {
                    format!(
                        "`{text}` is bound again in the body before the `grad`: the name no longer means the {}",
                        if was_param { "argument" } else { "weight" }
                    )
                } else {
                    format!("`{text}` is a value computed in the body, not a parameter or a weight")
                };
                let d = Diagnostic::new(Code::E0417, name.span, what)
                    .primary("not a parameter or a weight")
                    .label(self.bindings[i].span, format!("`{text}` bound here"))
                    .note("differentiate by the function's float tensor arguments and `param` weights");
                self.report(d);
                return None;
            }
            None => match self.module.weights.get(text.as_str()) {
                Some(&w) => (GradTarget::Weight(w), Type::Tensor(self.checked.weights[w].ty.clone())),
                None => {
                    let what = if self.sizes.contains_key(text.as_str()) || self.loop_vars.contains_key(text.as_str()) {
                        format!("`{text}` is a size, not a tensor")
                    } else {
                        format!("unknown name `{text}`")
                    };
                    self.report(Diagnostic::new(Code::E0417, name.span, what).primary("not a parameter or a weight"));
                    return None;
                }
            },
        };
        match ty {
            Type::Tensor(t) if t.dtype.is_float() => Some((target, t)),
            Type::Error => None,
            other => {
                let d = Diagnostic::new(Code::E0417, name.span, format!("`{text}` is {}, which has no derivative", other.display(&self.syms)))
                    .primary("not a float tensor")
                    .note("differentiate by float tensors: integers, masks and host scalars carry no gradient");
                self.report(d);
                None
            }
        }
    }
}
