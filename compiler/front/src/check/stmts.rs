//! Statements: bindings, split's several results (E0411), parameter
//! defaults, and `return` with the permute-to-declared-order rule (E0413).

use super::types::{Kind, TensorType, Type, describe_axes};
use super::{FnChecker, SizeScope, host_type, resolve_tensor_type};
use crate::checked::{PatternOp, TExpr, TExprKind, TStmt};
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::syntax::ast::{self, HostType, TypeRef};

impl FnChecker<'_> {
    pub(super) fn check_assign(&mut self, targets: &[ast::Ident], value: &ast::Expr, span: Span) -> TStmt {
        let value = self.expr(value);
        let results = match (&value.kind, &value.ty) {
            (TExprKind::Pattern { op: PatternOp::Split { count, .. }, .. }, ty) if !ty.is_error() => *count,
            _ => 1,
        };
        let mut ty = value.ty.clone();
        if targets.len() != results && !ty.is_error() {
            let message = if results == 1 {
                format!("{} names are bound to one value; only `split` gives several results", targets.len())
            } else {
                format!("split gives {results} results but {} names are bound", targets.len())
            };
            let first = targets.first().map_or(span, |t| t.span);
            let last = targets.last().map_or(span, |t| t.span);
            self.report(
                Diagnostic::new(Code::E0411, first.to(last), message)
                    .primary(format!("{} names", targets.len()))
                    .label(value.span, format!("{results} result{}", if results == 1 { "" } else { "s" })),
            );
            ty = Type::Error;
        }
        let indices = targets.iter().map(|t| self.bind(&t.name, t.span, ty.clone())).collect();
        TStmt::Assign { targets: indices, value }
    }

    /// A parameter's default must be a host scalar of the parameter's type.
    pub(super) fn check_default(&mut self, index: usize, default: &ast::Expr) -> TExpr {
        let value = self.expr(default);
        let param_ty = self.bindings[index].ty.clone();
        let fits = match (&param_ty, &value.ty) {
            (Type::Error, _) | (_, Type::Error) => true,
            (Type::Host(want, _), Type::Host(got, _)) => want == got || (*want == HostType::Float && *got == HostType::Int),
            _ => false,
        };
        if !fits {
            self.report(
                Diagnostic::new(
                    Code::E0202,
                    default.span,
                    format!(
                        "the default of `{}` must be a host {} value, not {}",
                        self.bindings[index].name,
                        param_ty.display(&self.syms),
                        value.ty.display(&self.syms)
                    ),
                )
                .primary("wrong kind of default")
                .note("only host scalar parameters (float, int, bool) take defaults"),
            );
        }
        value
    }

    /// The declared result type, resolved in the body's scope at `return`.
    fn declared_result(&mut self, ret: &TypeRef) -> Type {
        match ret {
            TypeRef::Host(h, _) => host_type(*h),
            TypeRef::Tensor(t) => {
                let mut scope = SizeScope { sizes: std::mem::take(&mut self.sizes), new_names: false };
                let mut diags = Vec::new();
                let resolved = resolve_tensor_type(t, &mut scope, &mut self.syms, &mut diags);
                self.sizes = scope.sizes;
                // An unbound result name is a follow-on error when the body already failed.
                let follow_on = self.errors > 0;
                for mut d in diags {
                    if d.code == Code::E0201 {
                        if follow_on {
                            continue;
                        }
                        d.message = format!("{}: a name of the result type must be a dim, a parameter's axis, or bound in the body before `return`", d.message);
                    }
                    self.report(d);
                }
                resolved.map_or(Type::Error, Type::Tensor)
            }
        }
    }

    pub(super) fn check_return(&mut self, ret: &TypeRef, value: &ast::Expr) -> (Option<TStmt>, Type) {
        let value = self.expr(value);
        let declared = self.declared_result(ret);
        let permutation = match (&declared, &value.ty) {
            (Type::Error, _) | (_, Type::Error) => None,
            (Type::Host(want, _), Type::Host(got, _)) => {
                if want == got || (*want == HostType::Float && *got == HostType::Int) {
                    Some(Vec::new())
                } else {
                    self.return_mismatch(&value, ret.span(), format!("a {} value is returned where {} is declared", got.as_str(), want.as_str()));
                    None
                }
            }
            (Type::Host(want, _), Type::Tensor(_)) => {
                let msg = format!("a tensor is returned where the host scalar type {} is declared", want.as_str());
                self.return_mismatch(&value, ret.span(), msg);
                None
            }
            (Type::Tensor(want), got) => {
                let got = match got {
                    Type::Tensor(t) => t.clone(),
                    Type::Host(h, r) => host_as_tensor(*h, *r),
                    Type::Error => unreachable!("handled above"),
                };
                self.match_result(want, &got, &value, ret.span())
            }
        };
        match permutation {
            Some(permutation) => {
                let ty = match (&declared, &value.ty) {
                    (Type::Tensor(d), Type::Tensor(v)) => Type::Tensor(TensorType { range: v.range.or(d.range), ..d.clone() }),
                    (Type::Host(h, _), Type::Host(_, r)) => Type::Host(*h, *r),
                    _ => declared.clone(),
                };
                (Some(TStmt::Return { value, permutation }), ty)
            }
            None => (None, Type::Error),
        }
    }

    fn return_mismatch(&mut self, value: &TExpr, declared_span: Span, message: String) {
        self.report(Diagnostic::new(Code::E0413, value.span, message).primary("the returned value").label(declared_span, "the declared result type"));
    }

    /// Compares the returned value with the declared result; gives, for each
    /// declared axis, the value axis that becomes it.
    fn match_result(&mut self, want: &TensorType, got: &TensorType, value: &TExpr, declared_span: Span) -> Option<Vec<usize>> {
        let mismatch = |c: &mut Self, why: &str| {
            let msg = format!(
                "the returned value has axes {} but the declared result has {}{why}",
                describe_axes(&got.axes, &c.syms),
                describe_axes(&want.axes, &c.syms)
            );
            c.return_mismatch(value, declared_span, msg);
        };
        if want.rank() != got.rank() {
            mismatch(self, "");
            return None;
        }
        let permutation = if want.fully_named() && got.fully_named() {
            let mut used = vec![false; got.rank()];
            let mut perm = Vec::with_capacity(want.rank());
            for axis in &want.axes {
                let Some(j) = (0..got.rank()).find(|&j| !used[j] && got.axes[j].name == axis.name) else {
                    mismatch(self, ": the names differ");
                    return None;
                };
                used[j] = true;
                perm.push(j);
            }
            perm
        } else {
            if want.axes.iter().zip(&got.axes).any(|(a, b)| a.name != b.name) {
                mismatch(self, "; with an unnamed axis, names must match in order");
                return None;
            }
            (0..want.rank()).collect()
        };
        for (i, &j) in permutation.iter().enumerate() {
            if !self.syms.unify(want.axes[i].size, got.axes[j].size) {
                mismatch(self, ": the sizes differ");
                return None;
            }
        }
        let kind_ok = match (&want.kind, &got.kind) {
            (Kind::Logit(_), Kind::Plain) => true,
            (w, g) => w == g,
        };
        if want.dtype != got.dtype {
            self.report(
                Diagnostic::new(
                    Code::E0502,
                    value.span,
                    format!("the returned value has dtype {} but the declared result has dtype {}", got.dtype.as_str(), want.dtype.as_str()),
                )
                .primary(format!("{} value", got.dtype.as_str()))
                .label(declared_span, format!("declared {}", want.dtype.as_str()))
                .note("convert explicitly with float() or int()"),
            );
            return None;
        }
        if !kind_ok {
            let msg = format!(
                "the returned value is {} but the declared result is {}",
                super::types::tensor_type_string(got, &self.syms),
                super::types::tensor_type_string(want, &self.syms)
            );
            self.return_mismatch(value, declared_span, msg);
            return None;
        }
        Some(permutation)
    }
}

/// A host scalar seen as a rank-0 tensor.
pub(super) fn host_as_tensor(h: HostType, range: Option<super::range::Range>) -> TensorType {
    use super::types::DType;
    let dtype = match h {
        HostType::Float => DType::F32,
        HostType::Int => DType::I64,
        HostType::Bool => DType::Bool,
    };
    TensorType { dtype, kind: Kind::Plain, axes: Vec::new(), range }
}
