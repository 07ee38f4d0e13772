//! Statements: bindings, several results (split's, a call's: E0411),
//! parameter defaults, and `return` of one result or several, with the
//! permute-to-declared-order rule (E0413).

use super::types::{Kind, TensorType, Type, describe_axes};
use super::{FnChecker, SizeScope, host_type, resolve_tensor_type};
use crate::checked::{CheckedResult, PatternOp, Returned, TExpr, TExprKind, TStmt};
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::syntax::ast::{self, ExprKind, HostType, Results, TypeRef};

/// The most results a function may declare (LANGUAGE.md section 14).
pub const MAX_RESULTS: usize = 64;

impl FnChecker<'_> {
    /// A value and the types of its results: several for a call of a
    /// function with several results, else one (split's count is in its kind).
    fn value_with_results(&mut self, value: &ast::Expr) -> (TExpr, Vec<Type>) {
        if let ExprKind::Call(call) = &value.kind
            && self.module.fn_index.contains_key(&call.callee.name)
        {
            return self.call_results(call, value.span);
        }
        if let ExprKind::Call(call) = &value.kind
            && call.callee.name == "grad"
            && call.pattern.is_none()
        {
            return self.grad(call, value.span);
        }
        let value = self.expr(value);
        let count = match (&value.kind, &value.ty) {
            (TExprKind::Pattern { op: PatternOp::Split { count, .. }, .. }, ty) if !ty.is_error() => *count,
            _ => 1,
        };
        let ty = value.ty.clone();
        (value, vec![ty; count])
    }

    pub(super) fn check_assign(&mut self, targets: &[ast::Ident], value: &ast::Expr, span: Span) -> TStmt {
        let (value, mut types) = self.value_with_results(value);
        let results = types.len();
        if targets.len() != results && !value.ty.is_error() {
            let message = if results == 1 {
                format!(
                    "{} names are bound to one value; only `split`, a call of a function with several results, or a loop that yields several values gives several",
                    targets.len()
                )
            } else {
                let source = match &value.kind {
                    TExprKind::Call { function, .. } => format!("`{}`", self.done[*function].as_ref().map_or("the call", |f| f.name.as_str())),
                    TExprKind::Grad { .. } => "`grad`".to_string(),
                    _ => "split".to_string(),
                };
                format!("{source} gives {results} results but {} name{} bound", targets.len(), if targets.len() == 1 { " is" } else { "s are" })
            };
            let first = targets.first().map_or(span, |t| t.span);
            let last = targets.last().map_or(span, |t| t.span);
            self.report(
                Diagnostic::new(Code::E0411, first.to(last), message)
                    .primary(format!("{} name{}", targets.len(), if targets.len() == 1 { "" } else { "s" }))
                    .label(value.span, format!("{results} result{}", if results == 1 { "" } else { "s" })),
            );
            types = Vec::new();
        }
        let indices = targets.iter().enumerate().map(|(i, t)| self.bind(&t.name, t.span, types.get(i).cloned().unwrap_or(Type::Error))).collect();
        TStmt::Assign { targets: indices, value }
    }

    /// Checks the declared results' names: distinct (E0407), at most 64 (E0407).
    pub(super) fn check_result_names(&mut self, results: &Results) {
        let Results::Named { results, span } = results else { return };
        if results.len() > MAX_RESULTS {
            self.report(
                Diagnostic::new(Code::E0407, *span, format!("{} results are declared; a function has at most {MAX_RESULTS}", results.len()))
                    .primary("too many results"),
            );
        }
        for (i, r) in results.iter().enumerate() {
            if let Some(first) = results[..i].iter().find(|f| f.name.name == r.name.name) {
                self.report(
                    Diagnostic::new(Code::E0407, r.name.span, format!("the result `{}` is declared twice", r.name.name))
                        .primary("declared again here")
                        .label(first.name.span, "first declared here"),
                );
            }
        }
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

    /// `return e1, e2, ...` (or `return f(x)` of a function with several
    /// results): one value per declared result, each checked against its type.
    pub(super) fn check_return(&mut self, declared: &Results, values: &[ast::Expr], span: Span, out: &mut Vec<TStmt>) -> Vec<CheckedResult> {
        let (names, refs, decl_span): (Vec<Option<String>>, Vec<&TypeRef>, Span) = match declared {
            Results::One(t) => (vec![None], vec![t], t.span()),
            Results::Named { results, span } => (results.iter().map(|r| Some(r.name.name.clone())).collect(), results.iter().map(|r| &r.ty).collect(), *span),
        };
        // The values, with a call of several results bound to hidden names first.
        let mut given: Vec<TExpr> = Vec::new();
        match values {
            [single] => {
                let (value, types) = self.value_with_results(single);
                if types.len() > 1 && !matches!(value.kind, TExprKind::Pattern { .. }) {
                    let targets: Vec<usize> = types.iter().enumerate().map(|(i, ty)| self.hidden(&format!("result{i}"), single.span, ty.clone())).collect();
                    given = targets.iter().zip(&types).map(|(&t, ty)| TExpr { kind: TExprKind::Local(t), ty: ty.clone(), span: single.span }).collect();
                    out.push(TStmt::Assign { targets, value });
                } else {
                    given.push(value);
                }
            }
            values => given.extend(values.iter().map(|v| self.expr(v))),
        }
        let declared_types: Vec<Type> = refs.iter().map(|r| self.declared_result(r)).collect();
        let results = |types: Vec<Type>| names.iter().cloned().zip(types).map(|(name, ty)| CheckedResult { name, ty }).collect();
        if given.len() != declared_types.len() {
            if !given.iter().any(|v| v.ty.is_error()) {
                self.report(
                    Diagnostic::new(
                        Code::E0413,
                        span,
                        format!(
                            "{} value{} returned where {} result{} declared",
                            given.len(),
                            if given.len() == 1 { " is" } else { "s are" },
                            declared_types.len(),
                            if declared_types.len() == 1 { " is" } else { "s are" }
                        ),
                    )
                    .primary("the returned values")
                    .label(decl_span, "the declared results"),
                );
            }
            return results(vec![Type::Error; declared_types.len()]);
        }
        let mut returned = Vec::with_capacity(given.len());
        let mut types = Vec::with_capacity(given.len());
        for ((value, declared), (name, r)) in given.into_iter().zip(declared_types).zip(names.iter().zip(&refs)) {
            match self.check_returned(value, &declared, r.span(), name.as_deref()) {
                Some((value, ty)) => {
                    returned.push(value);
                    types.push(ty);
                }
                None => types.push(Type::Error),
            }
        }
        if returned.len() == types.len() {
            out.push(TStmt::Return { values: returned });
        }
        results(types)
    }

    /// A binding no source name refers to (a call's several results at `return`).
    pub(super) fn hidden(&mut self, name: &str, span: Span, ty: Type) -> usize {
        let index = self.bindings.len();
        self.bindings.push(super::Binding { name: name.to_string(), span, ty, hidden: true });
        index
    }

    /// One returned value against its declared type (`result`: its name
    /// when the function declares results by name).
    fn check_returned(&mut self, value: TExpr, declared: &Type, declared_span: Span, result: Option<&str>) -> Option<(Returned, Type)> {
        let prefix = result.map_or(String::new(), |n| format!("the result `{n}`: "));
        let permutation = match (declared, &value.ty) {
            (Type::Error, _) | (_, Type::Error) => None,
            (Type::Host(want, _), Type::Host(got, _)) => {
                if want == got || (*want == HostType::Float && *got == HostType::Int) {
                    Some(Vec::new())
                } else {
                    self.return_mismatch(&value, declared_span, format!("{prefix}a {} value is returned where {} is declared", got.as_str(), want.as_str()));
                    None
                }
            }
            (Type::Host(want, _), Type::Tensor(_)) => {
                let msg = format!("{prefix}a tensor is returned where the host scalar type {} is declared", want.as_str());
                self.return_mismatch(&value, declared_span, msg);
                None
            }
            (Type::Tensor(want), got) => {
                let got = match got {
                    Type::Tensor(t) => t.clone(),
                    Type::Host(h, r) => host_as_tensor(*h, *r),
                    Type::Error => unreachable!("handled above"),
                };
                self.match_result(want, &got, &value, declared_span, &prefix)
            }
        }?;
        let ty = match (declared, &value.ty) {
            (Type::Tensor(d), Type::Tensor(v)) => Type::Tensor(TensorType { range: v.range.or(d.range), ..d.clone() }),
            (Type::Host(h, _), Type::Host(_, r)) => Type::Host(*h, *r),
            _ => declared.clone(),
        };
        Some((Returned { value, permutation }, ty))
    }

    fn return_mismatch(&mut self, value: &TExpr, declared_span: Span, message: String) {
        self.report(Diagnostic::new(Code::E0413, value.span, message).primary("the returned value").label(declared_span, "the declared result type"));
    }

    /// Compares the returned value with the declared result; gives, for each
    /// declared axis, the value axis that becomes it.
    fn match_result(&mut self, want: &TensorType, got: &TensorType, value: &TExpr, declared_span: Span, prefix: &str) -> Option<Vec<usize>> {
        let mismatch = |c: &mut Self, why: &str| {
            let msg = format!(
                "{prefix}the returned value has axes {} but the declared result has {}{why}",
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
                    format!("{prefix}the returned value has dtype {} but the declared result has dtype {}", got.dtype.as_str(), want.dtype.as_str()),
                )
                .primary(format!("{} value", got.dtype.as_str()))
                .label(declared_span, format!("declared {}", want.dtype.as_str()))
                .note("convert explicitly with float() or int()"),
            );
            return None;
        }
        if !kind_ok {
            let msg = format!(
                "{prefix}the returned value is {} but the declared result is {}",
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
