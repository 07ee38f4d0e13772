//! Calls of the module's functions (LANGUAGE.md section 10): arguments bind
//! to the parameters as a pattern's input side does, the callee's names are
//! fresh for each call, and in the result each callee name bound to an
//! argument's axis is replaced by that axis.

use super::FnChecker;
use super::sizes::{Size, SymDef, SymId, Symbols};
use super::types::{Axis, Kind, TensorType, Type, describe_axes, describe_axis};
use crate::checked::{CheckedFn, TExpr, TExprKind};
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::syntax::ast::{self, HostType};
use std::collections::HashMap;

impl FnChecker<'_> {
    /// A call used as a value: its function must have one result (E0202).
    pub(super) fn call_function(&mut self, call: &ast::Call, span: Span) -> TExpr {
        let (mut value, results) = self.call_results(call, span);
        if results.len() > 1 {
            let callee = &self.done[self.module.fn_index[&call.callee.name]];
            let names: Vec<String> = callee.iter().flat_map(|f| &f.results).map(|r| r.name.clone().unwrap_or_default()).collect();
            value.ty = self.report(
                Diagnostic::new(
                    Code::E0202,
                    span,
                    format!("`{}` has {} results ({}) and is used as one value", call.callee.name, results.len(), names.join(", ")),
                )
                .primary("a call with several results")
                .note(format!(
                    "bind them by as many names (`{} = {}(...)`) or return them all (`return {}(...)`)",
                    names.join(", "),
                    call.callee.name,
                    call.callee.name
                )),
            );
        }
        value
    }

    /// A call and the types of its results (one, or the callee's several;
    /// none when it failed). The expression's type is the first result's.
    pub(super) fn call_results(&mut self, call: &ast::Call, span: Span) -> (TExpr, Vec<Type>) {
        let index = self.module.fn_index[&call.callee.name];
        let args: Vec<TExpr> = call.args.iter().map(|a| self.expr(a)).collect();
        let keyword_values: Vec<(String, Span, TExpr)> = call.keywords.iter().map(|k| (k.name.name.clone(), k.name.span, self.expr(&k.value))).collect();
        let error = |args| (TExpr { kind: TExprKind::Call { function: index, args }, ty: Type::Error, span }, Vec::new());
        if self.module.cycle_calls.contains(&span) {
            return error(args);
        }
        let Some(callee) = self.done.get(index).and_then(Option::as_ref) else {
            self.report(
                Diagnostic::new(Code::E0203, span, format!("`{}` is called within its own definition cycle", call.callee.name)).primary("recursive call"),
            );
            return error(args);
        };
        // Order the arguments by parameter: positional first, then keywords, then defaults.
        let params = &callee.bindings[..callee.params];
        let mut slots: Vec<Option<TExpr>> = vec![None; params.len()];
        if args.len() > params.len() {
            self.report(
                Diagnostic::new(
                    Code::E0202,
                    span,
                    format!("`{}` takes {} argument{} but {} were given", callee.name, params.len(), if params.len() == 1 { "" } else { "s" }, args.len()),
                )
                .primary("too many arguments")
                .label(callee.span, "function defined here"),
            );
            return error(args);
        }
        for (slot, arg) in slots.iter_mut().zip(args) {
            *slot = Some(arg);
        }
        for (name, kspan, value) in keyword_values {
            match params.iter().position(|p| p.name == name) {
                Some(i) if slots[i].is_none() => slots[i] = Some(value),
                Some(_) => {
                    self.report(Diagnostic::new(Code::E0202, kspan, format!("the parameter `{name}` is given twice")).primary("given again"));
                    return error(slots.into_iter().flatten().collect());
                }
                None => {
                    self.report(
                        Diagnostic::new(Code::E0202, kspan, format!("`{}` has no parameter `{name}`", callee.name))
                            .primary("unknown keyword argument")
                            .label(callee.span, "function defined here"),
                    );
                    return error(slots.into_iter().flatten().collect());
                }
            }
        }
        let has_default = self.defaults_of(index);
        let missing: Vec<&str> = params.iter().enumerate().filter(|(i, _)| slots[*i].is_none() && !has_default[*i]).map(|(_, p)| p.name.as_str()).collect();
        if !missing.is_empty() {
            self.report(
                Diagnostic::new(
                    Code::E0202,
                    span,
                    format!("`{}` is missing the argument{} {}", callee.name, if missing.len() == 1 { "" } else { "s" }, missing.join(", ")),
                )
                .primary("missing arguments")
                .label(callee.span, "function defined here"),
            );
            return error(slots.into_iter().flatten().collect());
        }
        let given: Vec<TExpr> = slots.iter().zip(&callee.defaults).filter_map(|(slot, default)| slot.clone().or_else(|| default.clone())).collect();
        if given.len() != params.len() || given.iter().any(|a| a.ty.is_error()) || !callee.ok {
            return error(given);
        }
        if callee.differentiates {
            self.grads += 1;
        }
        match self.instantiate(callee, &slots, span) {
            Some(results) => {
                let ty = results.first().cloned().unwrap_or(Type::Error);
                (TExpr { kind: TExprKind::Call { function: index, args: given }, ty, span }, results)
            }
            None => error(given),
        }
    }

    /// Which parameters of function `index` have defaults.
    fn defaults_of(&self, index: usize) -> Vec<bool> {
        self.module.defaults.get(index).cloned().unwrap_or_default()
    }

    /// Binds the arguments to the callee's parameters and gives the call's result types.
    fn instantiate(&mut self, callee: &CheckedFn, slots: &[Option<TExpr>], span: Span) -> Option<Vec<Type>> {
        let mut map = Instance { from: &callee.symbols, map: HashMap::new() };
        // callee name -> the caller's axis it was bound to
        let mut renamed: HashMap<String, Axis> = HashMap::new();
        for (param, slot) in callee.bindings[..callee.params].iter().zip(slots) {
            let Some(arg) = slot else { continue };
            match (&param.ty, &arg.ty) {
                (Type::Host(want, _), Type::Host(got, _)) => {
                    if !(want == got || (*want == HostType::Float && *got == HostType::Int)) {
                        self.report(
                            Diagnostic::new(
                                Code::E0202,
                                arg.span,
                                format!("the parameter `{}` is a {} but the argument is a {}", param.name, want.as_str(), got.as_str()),
                            )
                            .primary("wrong kind of argument")
                            .label(param.span, "parameter declared here"),
                        );
                        return None;
                    }
                }
                (Type::Host(want, _), _) => {
                    self.report(
                        Diagnostic::new(
                            Code::E0202,
                            arg.span,
                            format!("the parameter `{}` is a host {} but the argument is a tensor", param.name, want.as_str()),
                        )
                        .primary("a tensor where a host scalar is expected")
                        .label(param.span, "parameter declared here"),
                    );
                    return None;
                }
                (Type::Tensor(p), got) => {
                    let a = Self::as_tensor(got)?;
                    if p.rank() != a.rank() {
                        self.report(
                            Diagnostic::new(
                                Code::E0403,
                                arg.span,
                                format!(
                                    "the parameter `{}` has {} axes but the argument has {} axes {}",
                                    param.name,
                                    p.rank(),
                                    a.rank(),
                                    describe_axes(&a.axes, &self.syms)
                                ),
                            )
                            .primary("wrong number of axes")
                            .label(param.span, format!("parameter declared as {}", param.ty.display(&callee.symbols))),
                        );
                        return None;
                    }
                    if p.dtype != a.dtype {
                        self.report(
                            Diagnostic::new(
                                Code::E0502,
                                arg.span,
                                format!("the parameter `{}` is {} but the argument is {}", param.name, p.dtype.as_str(), a.dtype.as_str()),
                            )
                            .primary("a different dtype")
                            .label(param.span, "parameter declared here")
                            .note("convert with float() or int()"),
                        );
                        return None;
                    }
                    // A distribution's axis binds to the parameter's: a Prob(n)
                    // argument whose `n` binds to `r` is no Prob(c) parameter.
                    let same_axis = match (p.kind.domain(), a.kind.domain()) {
                        (Some(pd), Some(ad)) => p.axis_position(pd).is_some() && p.axis_position(pd) == a.axis_position(ad),
                        _ => true,
                    };
                    let kind_ok = match (&p.kind, &a.kind) {
                        (Kind::Plain, _) | (Kind::Logit(_), Kind::Plain) => true,
                        (pk, ak) => std::mem::discriminant(pk) == std::mem::discriminant(ak) && same_axis,
                    };
                    if !kind_ok {
                        self.report(
                            Diagnostic::new(
                                Code::E0202,
                                arg.span,
                                format!(
                                    "the parameter `{}` is {} but the argument is {}",
                                    param.name,
                                    param.ty.display(&callee.symbols),
                                    got.display(&self.syms)
                                ),
                            )
                            .primary(if same_axis { "a different kind" } else { "a distribution over another axis" })
                            .label(param.span, "parameter declared here"),
                        );
                        return None;
                    }
                    for (pa, aa) in p.axes.iter().zip(&a.axes) {
                        let size = map.size(pa.size, &mut self.syms, span);
                        if !self.syms.unify(size, aa.size) {
                            self.report(
                                Diagnostic::new(
                                    Code::E0401,
                                    arg.span,
                                    format!(
                                        "the parameter `{}` needs {} where the argument has {}",
                                        param.name,
                                        describe_axis(&Axis { name: pa.name.clone(), size }, &self.syms),
                                        describe_axis(aa, &self.syms)
                                    ),
                                )
                                .primary("size mismatch")
                                .label(param.span, format!("parameter declared as {}", param.ty.display(&callee.symbols))),
                            );
                            return None;
                        }
                        if let Some(n) = &pa.name {
                            renamed.entry(n.clone()).or_insert_with(|| aa.clone());
                        }
                    }
                }
                (Type::Error, _) => return None,
            }
        }
        callee.results.iter().map(|result| self.result_type(callee, &result.ty, &mut map, &renamed, span)).collect()
    }

    /// One of the callee's result types in the caller's names and sizes.
    fn result_type(&mut self, callee: &CheckedFn, ty: &Type, map: &mut Instance, renamed: &HashMap<String, Axis>, span: Span) -> Option<Type> {
        Some(match ty {
            Type::Tensor(r) => {
                let mut axes = Vec::with_capacity(r.rank());
                for a in &r.axes {
                    let axis = match &a.name {
                        Some(n) if renamed.contains_key(n) => renamed[n].clone(),
                        Some(n) if self.module.dims.contains_key(n) => Axis::named(n, self.module.dims[n]),
                        Some(n) => {
                            let size = map.size(a.size, &mut self.syms, span);
                            match self.sizes.get(n) {
                                Some(&s) => {
                                    if !self.syms.unify(s, size) {
                                        self.report(
                                            Diagnostic::new(
                                                Code::E0401,
                                                span,
                                                format!(
                                                    "the result axis '{n}' of `{}` has size {} but '{n}' is already {} here",
                                                    callee.name,
                                                    self.syms.display(size),
                                                    self.syms.display(s)
                                                ),
                                            )
                                            .primary("size mismatch"),
                                        );
                                        return None;
                                    }
                                }
                                None => {
                                    self.sizes.insert(n.clone(), size);
                                }
                            }
                            Axis::named(n, size)
                        }
                        None => Axis::unnamed(map.size(a.size, &mut self.syms, span)),
                    };
                    axes.push(axis);
                }
                let kind = match r.kind.domain().and_then(|d| r.axis_position(d)) {
                    Some(p) => axes[p].name.clone().map_or(Kind::Plain, |n| r.kind.with_domain(n)),
                    None => Kind::Plain,
                };
                Type::Tensor(TensorType { dtype: r.dtype, kind, axes, range: r.range })
            }
            other => other.clone(),
        })
    }
}

/// Maps the callee's sizes into the caller's table, making fresh symbols for each call.
struct Instance<'a> {
    from: &'a Symbols,
    map: HashMap<SymId, Size>,
}

impl Instance<'_> {
    fn size(&mut self, s: Size, to: &mut Symbols, origin: Span) -> Size {
        match self.from.resolve(s) {
            Size::Const(v) => Size::Const(v),
            Size::Sym(id) => {
                if let Some(&m) = self.map.get(&id) {
                    return m;
                }
                // Module-level symbols are shared by every function.
                let data = self.from.data(id).cloned();
                let mapped = match data {
                    Some(_) if (id.0 as usize) < to.module_symbols() => Size::Sym(id),
                    Some(d) => match d.def {
                        SymDef::Free => Size::Sym(to.fresh(&d.name, origin)),
                        SymDef::Signed => Size::Sym(to.signed(&d.name, origin)),
                        SymDef::Position(a, b) => {
                            let (x, y) = (self.size(a, to, origin), self.size(b, to, origin));
                            to.position(x, y, origin)
                        }
                        SymDef::Gap(a, b) => {
                            let (x, y) = (self.size(a, to, origin), self.size(b, to, origin));
                            to.gap(x, y, origin)
                        }
                        SymDef::Mul(a, b) => {
                            let (x, y) = (self.size(a, to, origin), self.size(b, to, origin));
                            to.mul(x, y, origin).unwrap_or_else(|| Size::Sym(to.fresh(&d.name, origin)))
                        }
                        SymDef::Div(a, b) => {
                            let (x, y) = (self.size(a, to, origin), self.size(b, to, origin));
                            to.div_exact(x, y, Some(&d.name), origin).unwrap_or_else(|| Size::Sym(to.fresh(&d.name, origin)))
                        }
                        SymDef::CeilDiv(a, b) => {
                            let (x, y) = (self.size(a, to, origin), self.size(b, to, origin));
                            to.ceil_div(x, y, origin)
                        }
                        SymDef::Add(a, b) | SymDef::Sub(a, b) => {
                            let (x, y) = (self.size(a, to, origin), self.size(b, to, origin));
                            to.add_sub(x, y, matches!(d.def, SymDef::Sub(..)), origin).unwrap_or_else(|| Size::Sym(to.fresh(&d.name, origin)))
                        }
                    },
                    None => Size::Sym(to.fresh("_", origin)),
                };
                self.map.insert(id, mapped);
                mapped
            }
        }
    }
}
