//! The checker (LANGUAGE.md sections 3 to 10): from the syntax tree to the
//! checked program.
//!
//! Module-level work lives here: dims (with exact division), weights,
//! function signatures, the call graph (E0203) and the order in which
//! functions are checked (callees first, so a call sees its callee's checked
//! result). Each function is checked by an [`FnChecker`]; its expression
//! rules are split by topic into `expr`, `builtins`, `patterns` and `calls`.
//!
//! Architecture invariant: the checker never panics, whatever the input, and
//! an expression that failed gets [`Type::Error`], which silences every
//! follow-on error about it.

mod broadcast;
mod builtins;
mod calls;
mod expr;
mod grad;
mod indexing;
mod loops;
mod patterns;
pub use nax_values::range;
pub mod sizes;
mod stmts;
pub mod types;

use crate::checked::{Binding, CheckedFn, CheckedModule, CheckedResult, CheckedWeight, TStmt};
use crate::diagnostics::{Code, Diagnostic, Span};
use crate::syntax::ast::{self, AxisEntry, DimExpr, DimOp, ExprKind, FnDef, Item, TypeExpr, TypeRef};
use range::Range;
use sizes::{MAX_SIZE, Size, Symbols};
use std::collections::{HashMap, HashSet};
use types::{Axis, DType, Kind, TensorType, Type};

/// Names of the built-in operations; a module function may not reuse them.
pub const BUILTINS: &[&str] = &[
    "exp",
    "log",
    "log1p",
    "expm1",
    "sqrt",
    "rsqrt",
    "abs",
    "sin",
    "cos",
    "tanh",
    "erf",
    "floor",
    "ceil",
    "round",
    "sign",
    "sigmoid",
    "relu",
    "gelu",
    "silu",
    "softplus",
    "pow",
    "maximum",
    "minimum",
    "where",
    "clamp",
    "masked_fill",
    "float",
    "int",
    "softmax",
    "log_softmax",
    "logsumexp",
    "sum",
    "mean",
    "max",
    "min",
    "prod",
    "arange",
    "zeros",
    "ones",
    "full",
    "matmul",
    "rearrange",
    "reduce",
    "repeat",
    "einsum",
    "split",
];

/// Checks a parsed module; diagnostics go to `diags`.
pub fn check_module(module: &ast::Module, diags: &mut Vec<Diagnostic>) -> CheckedModule {
    let mut out = CheckedModule::default();
    let mut dim_names: HashMap<String, Size> = HashMap::new();
    let mut weight_index: HashMap<String, usize> = HashMap::new();
    let mut defs: Vec<&FnDef> = Vec::new();
    let mut fn_index: HashMap<String, usize> = HashMap::new();
    let mut first_def: HashMap<(u8, &str), Span> = HashMap::new();

    for item in &module.items {
        let (ns, name) = match item {
            Item::Dim(d) => (0, &d.name),
            Item::Param(p) => (1, &p.name),
            Item::Def(f) => (2, &f.name),
        };
        if let Some(&first) = first_def.get(&(ns, name.name.as_str())) {
            diags.push(
                Diagnostic::new(Code::E0204, name.span, format!("`{}` is defined twice", name.name))
                    .primary("defined again here")
                    .label(first, "first defined here"),
            );
            continue;
        }
        first_def.insert((ns, &name.name), name.span);
        match item {
            Item::Dim(d) => {
                let size = dim_size(d, &dim_names, &mut out.symbols, diags);
                dim_names.insert(d.name.name.clone(), size);
                out.dims.push((d.name.name.clone(), size));
            }
            Item::Param(p) => {
                let mut scope = SizeScope { sizes: dim_names.clone(), new_names: false };
                if let Some(ty) = resolve_tensor_type(&p.ty, &mut scope, &mut out.symbols, diags) {
                    weight_index.insert(p.name.name.clone(), out.weights.len());
                    out.weights.push(CheckedWeight { name: p.name.name.clone(), ty, span: p.span });
                }
            }
            Item::Def(f) => {
                if BUILTINS.contains(&f.name.name.as_str()) {
                    diags.push(
                        Diagnostic::new(Code::E0204, f.name.span, format!("`{}` is a built-in operation and cannot be redefined", f.name.name))
                            .primary("the name of a built-in"),
                    );
                    continue;
                }
                fn_index.insert(f.name.name.clone(), defs.len());
                defs.push(f);
            }
        }
    }

    out.symbols.mark_shared();
    let (order, cycle_calls) = call_order(&defs, &fn_index, diags);
    let defaults = defs.iter().map(|f| f.params.iter().map(|p| p.default.is_some()).collect()).collect();
    let module_info = ModuleInfo { dims: dim_names, weights: weight_index, fn_index, cycle_calls, defaults };
    let mut checked: Vec<Option<CheckedFn>> = vec![None; defs.len()];
    for i in order {
        let f = FnChecker::check(defs[i], &module_info, &out, &checked, diags);
        checked[i] = Some(f);
    }
    out.functions = checked.into_iter().flatten().collect();
    out
}

/// What every function of a module can see.
pub(crate) struct ModuleInfo {
    pub dims: HashMap<String, Size>,
    pub weights: HashMap<String, usize>,
    pub fn_index: HashMap<String, usize>,
    /// Calls that close a cycle of the call graph (already reported as E0203).
    pub cycle_calls: HashSet<Span>,
    /// For each function, which parameters have defaults.
    pub defaults: Vec<Vec<bool>>,
}

fn dim_size(d: &ast::DimDecl, dims: &HashMap<String, Size>, syms: &mut Symbols, diags: &mut Vec<Diagnostic>) -> Size {
    let Some(value) = &d.value else {
        return Size::Sym(syms.fresh(&d.name.name, d.name.span));
    };
    let before = syms.all().count();
    match dim_expr(value, dims, syms, diags) {
        Some(size) => {
            if let Size::Sym(id) = size
                && id.0 as usize >= before
            {
                syms.rename(id, &d.name.name);
            }
            size
        }
        None => Size::Sym(syms.fresh(&d.name.name, d.name.span)),
    }
}

fn dim_expr(e: &DimExpr, dims: &HashMap<String, Size>, syms: &mut Symbols, diags: &mut Vec<Diagnostic>) -> Option<Size> {
    match e {
        DimExpr::Number(n, span) => literal_size(*n, *span, diags),
        DimExpr::Name(id) => match dims.get(&id.name) {
            Some(s) => Some(*s),
            None => {
                diags.push(Diagnostic::new(Code::E0201, id.span, format!("unknown dim `{}`", id.name)).primary("not a dim declared above"));
                None
            }
        },
        DimExpr::Binary(a, op, b, span) => {
            let x = dim_expr(a, dims, syms, diags);
            let y = dim_expr(b, dims, syms, diags);
            let (x, y) = (x?, y?);
            let result = match op {
                DimOp::Mul => syms.mul(x, y, *span),
                DimOp::Div => syms.div_exact(x, y, None, *span),
                DimOp::Add => syms.add_sub(x, y, false, *span),
                DimOp::Sub => syms.add_sub(x, y, true, *span),
            };
            if result.is_none() {
                let (xs, ys) = (syms.display(x), syms.display(y));
                let message = match op {
                    DimOp::Div => format!("{xs} / {ys} is not exact: dim sizes are integers"),
                    DimOp::Sub => format!("{xs} - {ys} is negative"),
                    _ => format!("the size {xs} {} {ys} is too large", if *op == DimOp::Mul { "*" } else { "+" }),
                };
                diags.push(Diagnostic::new(Code::E0401, *span, message).primary("not a valid size"));
            }
            result
        }
    }
}

/// `a * b`, or the E0401 diagnostic at `span` when the product is past
/// [`MAX_SIZE`] (`what` names the product's role: `the group's size`).
pub(crate) fn checked_product(syms: &mut Symbols, a: Size, b: Size, span: Span, what: &str) -> Result<Size, Diagnostic> {
    syms.mul(a, b, span).ok_or_else(|| {
        let message = format!("{what} {} * {} is larger than {MAX_SIZE}, the largest size", syms.display(a), syms.display(b));
        Diagnostic::new(Code::E0401, span, message).primary("not a valid size")
    })
}

/// A size written as a number: an error (E0401) past [`MAX_SIZE`].
fn literal_size(n: u64, span: Span, diags: &mut Vec<Diagnostic>) -> Option<Size> {
    if n > MAX_SIZE {
        diags.push(Diagnostic::new(Code::E0401, span, format!("the size {n} is larger than {MAX_SIZE}, the largest size")).primary("not a valid size"));
        return None;
    }
    Some(Size::Const(n))
}

/// The size names visible while resolving a type, and whether unknown names bind new sizes.
pub(crate) struct SizeScope {
    pub sizes: HashMap<String, Size>,
    pub new_names: bool,
}

/// The dtype and kind a type's KIND means (`None` on an unknown kind, reported).
fn resolve_kind(ty: &TypeExpr, diags: &mut Vec<Diagnostic>) -> Option<(DType, Kind)> {
    let Some(k) = &ty.kind else { return Some((DType::F32, Kind::Plain)) };
    let dtype = match k.name.name.as_str() {
        "Real" | "f32" | "Logit" | "Prob" | "LogProb" => DType::F32,
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        "f64" => DType::F64,
        "Int" | "i64" => DType::I64,
        "i32" => DType::I32,
        "Mask" => DType::Bool,
        other => {
            diags.push(
                Diagnostic::new(Code::E0201, k.name.span, format!("unknown kind `{other}`"))
                    .primary("not a kind")
                    .note("kinds: Real f16 bf16 f32 f64 Int i32 i64 Mask Logit(a) Prob(a) LogProb(a)"),
            );
            return None;
        }
    };
    let domain_kind = matches!(k.name.name.as_str(), "Logit" | "Prob" | "LogProb");
    let kind = match (&k.domain, domain_kind) {
        (Some(a), true) => match k.name.name.as_str() {
            "Logit" => Kind::Logit(a.name.clone()),
            "Prob" => Kind::Prob(a.name.clone()),
            _ => Kind::LogProb(a.name.clone()),
        },
        (None, false) => Kind::Plain,
        (None, true) => {
            diags.push(
                Diagnostic::new(Code::E0101, k.span, format!("syntax error: `{}` needs its axis, as in `{}(a)`", k.name.name, k.name.name))
                    .primary("missing `(axis)`"),
            );
            return None;
        }
        (Some(_), false) => {
            diags.push(
                Diagnostic::new(Code::E0101, k.span, format!("syntax error: `{}` takes no axis", k.name.name))
                    .primary("only Logit, Prob and LogProb are over an axis"),
            );
            return None;
        }
    };
    Some((dtype, kind))
}

/// Resolves a tensor type's axes and kind. Unknown names bind fresh symbols
/// when `scope.new_names`, else they are E0201. Reports E0410 for a domain
/// that is not an axis of the type.
pub(crate) fn resolve_tensor_type(ty: &TypeExpr, scope: &mut SizeScope, syms: &mut Symbols, diags: &mut Vec<Diagnostic>) -> Option<TensorType> {
    let kind_info = resolve_kind(ty, diags);
    let mut axes = Vec::with_capacity(ty.axes.len());
    let mut ok = true;
    for entry in &ty.axes {
        match resolve_type_entry(entry, scope, syms, diags) {
            Some(axis) => axes.push(axis),
            None => ok = false,
        }
    }
    let (dtype, kind) = kind_info?;
    if let Some(domain) = kind.domain()
        && !axes.iter().any(|a| a.name.as_deref() == Some(domain))
    {
        let span = ty.kind.as_ref().and_then(|k| k.domain.as_ref()).map_or(ty.span, |d| d.span);
        diags.push(
            Diagnostic::new(Code::E0410, span, format!("the domain axis '{domain}' is not an axis of the type {}", types::describe_axes(&axes, syms)))
                .primary("not an axis of this type")
                .note("Logit(a), Prob(a) and LogProb(a) are over one of the type's own axes"),
        );
        return None;
    }
    if !ok {
        return None;
    }
    let range = if dtype == DType::Bool { None } else { Some(kind.natural_range()) };
    Some(TensorType { dtype, kind, axes, range })
}

fn resolve_type_entry(entry: &AxisEntry, scope: &mut SizeScope, syms: &mut Symbols, diags: &mut Vec<Diagnostic>) -> Option<Axis> {
    match entry {
        AxisEntry::Name(id) => {
            if let Some(&s) = scope.sizes.get(&id.name) {
                return Some(Axis::named(&id.name, s));
            }
            if scope.new_names {
                let s = Size::Sym(syms.fresh(&id.name, id.span));
                scope.sizes.insert(id.name.clone(), s);
                return Some(Axis::named(&id.name, s));
            }
            diags.push(Diagnostic::new(Code::E0201, id.span, format!("unknown size name `{}`", id.name)).primary("not a dim or an axis in scope"));
            None
        }
        AxisEntry::Number(n, span) => literal_size(*n, *span, diags).map(Axis::unnamed),
        AxisEntry::Group { ellipses, .. } if !ellipses.is_empty() => {
            diags.push(
                Diagnostic::new(Code::E0407, ellipses[0].1, "`...` stands only in patterns, not in a type")
                    .primary("an ellipsis in a type")
                    .note("write the group's axes, `(n d)`, or its size"),
            );
            None
        }
        AxisEntry::Group { parts, span, .. } => {
            let mut known = Size::Const(1);
            let mut unknown: Vec<&ast::Ident> = Vec::new();
            for part in parts {
                match part {
                    AxisEntry::Name(id) => match scope.sizes.get(&id.name) {
                        Some(&s) => known = checked_product(syms, known, s, *span, "the group's size").map_err(|d| diags.push(d)).ok()?,
                        None => unknown.push(id),
                    },
                    AxisEntry::Number(n, nspan) => {
                        let n = literal_size(*n, *nspan, diags)?;
                        known = checked_product(syms, known, n, *span, "the group's size").map_err(|d| diags.push(d)).ok()?;
                    }
                    AxisEntry::Group { span, .. } => {
                        diags.push(Diagnostic::new(Code::E0407, *span, "groups can't be nested").primary("a group inside a group"));
                        return None;
                    }
                }
            }
            match unknown.as_slice() {
                [] => Some(Axis::unnamed(known)),
                [id] if scope.new_names => {
                    let text: Vec<String> = parts.iter().map(entry_text).collect();
                    let whole = Size::Sym(syms.fresh(&format!("({})", text.join(" ")), *span));
                    let part = syms.div_exact(whole, known, Some(&id.name), id.span)?;
                    scope.sizes.insert(id.name.clone(), part);
                    Some(Axis::unnamed(whole))
                }
                [id, ..] if !scope.new_names => {
                    diags.push(Diagnostic::new(Code::E0201, id.span, format!("unknown size name `{}`", id.name)).primary("not a dim or an axis in scope"));
                    None
                }
                _ => {
                    let names: Vec<String> = unknown.iter().map(|i| format!("'{}'", i.name)).collect();
                    diags.push(
                        Diagnostic::new(Code::E0402, *span, format!("the group has two unknown parts: {}", names.join(" and ")))
                            .primary("at most one part of a group may be unknown"),
                    );
                    None
                }
            }
        }
    }
}

/// The source text of a type or pattern entry.
pub(crate) fn entry_text(e: &AxisEntry) -> String {
    match e {
        AxisEntry::Name(i) => i.name.clone(),
        AxisEntry::Number(n, _) => n.to_string(),
        AxisEntry::Group { parts, ellipses, .. } => {
            let mut t: Vec<String> = parts.iter().map(entry_text).collect();
            for &(at, _) in ellipses.iter().rev() {
                t.insert(at.min(t.len()), "...".to_string());
            }
            format!("({})", t.join(" "))
        }
    }
}

/// Orders functions callees-first and reports each call that closes a cycle (E0203).
fn call_order(defs: &[&FnDef], fn_index: &HashMap<String, usize>, diags: &mut Vec<Diagnostic>) -> (Vec<usize>, HashSet<Span>) {
    let calls: Vec<Vec<(usize, Span)>> = defs
        .iter()
        .map(|f| {
            let mut out = Vec::new();
            let mut stack: Vec<&ast::Expr> = Vec::new();
            for p in &f.params {
                stack.extend(p.default.iter());
            }
            let mut statements: Vec<&ast::Stmt> = f.body.iter().collect();
            while let Some(s) = statements.pop() {
                match s {
                    ast::Stmt::Assign { value, .. } => stack.push(value),
                    ast::Stmt::Return { values, .. } | ast::Stmt::Yield { values, .. } => stack.extend(values),
                    ast::Stmt::Loop { body, .. } => statements.extend(&body.body),
                }
            }
            while let Some(e) = stack.pop() {
                match &e.kind {
                    ExprKind::Call(c) => {
                        if let Some(&j) = fn_index.get(&c.callee.name) {
                            out.push((j, e.span));
                        }
                        stack.extend(c.args.iter());
                        stack.extend(c.keywords.iter().map(|k| &k.value));
                    }
                    ExprKind::Unary(_, a) | ExprKind::As(a, _) => stack.push(a),
                    ExprKind::Binary(_, a, b) => {
                        stack.push(a);
                        stack.push(b);
                    }
                    _ => {}
                }
            }
            out.sort_by_key(|(_, span)| span.start);
            out
        })
        .collect();
    // Iterative depth-first search: 0 = new, 1 = on the stack, 2 = done.
    let mut state = vec![0u8; defs.len()];
    let mut order = Vec::with_capacity(defs.len());
    let mut cycle_calls = HashSet::new();
    for root in 0..defs.len() {
        if state[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        state[root] = 1;
        while let Some(&mut (f, ref mut next)) = stack.last_mut() {
            if let Some(&(g, span)) = calls[f].get(*next) {
                *next += 1;
                match state[g] {
                    0 => {
                        state[g] = 1;
                        stack.push((g, 0));
                    }
                    1 => {
                        cycle_calls.insert(span);
                        let path = if f == g {
                            format!("`{}` calls itself", defs[f].name.name)
                        } else {
                            let start = stack.iter().position(|&(h, _)| h == g).unwrap_or(0);
                            let mut names: Vec<&str> = stack[start..].iter().map(|&(h, _)| defs[h].name.name.as_str()).collect();
                            names.push(&defs[g].name.name);
                            format!("recursion between functions: {}", names.join(" -> "))
                        };
                        diags.push(
                            Diagnostic::new(Code::E0203, span, path)
                                .primary("this call closes the cycle")
                                .label(defs[g].name.span, "called function defined here")
                                .note("calls are inlined, so functions cannot be recursive"),
                        );
                    }
                    _ => {}
                }
            } else {
                state[f] = 2;
                order.push(f);
                stack.pop();
            }
        }
    }
    (order, cycle_calls)
}

/// Checks one function: parameters, statements, `return`.
pub(crate) struct FnChecker<'a> {
    pub module: &'a ModuleInfo,
    pub checked: &'a CheckedModule,
    /// Functions checked so far (callees come first).
    pub done: &'a [Option<CheckedFn>],
    pub syms: Symbols,
    /// Size names in scope: dims, parameter axes, pattern names.
    pub sizes: HashMap<String, Size>,
    /// Value names in scope: the binding each refers to.
    pub values: HashMap<String, usize>,
    pub bindings: Vec<Binding>,
    pub diags: &'a mut Vec<Diagnostic>,
    /// Errors reported while checking this function.
    pub errors: usize,
    /// How many of `bindings` are parameters (known once they are bound).
    pub params: usize,
    /// Sizes given by host int parameters (run-time keyword sizes).
    pub size_arguments: Vec<(Size, usize)>,
    /// The variables of the loops being checked, each at its turn.
    pub loop_vars: HashMap<String, u64>,
    /// The turns the function's loops have unrolled to so far.
    pub turns: u64,
    /// How many loops enclose the statements being checked.
    pub loop_depth: usize,
    /// The loops of the function's body as written (see [`LoopForm`]).
    pub loop_forms: Vec<crate::checked::LoopForm>,
    /// The `grad`s checked so far, in the body and through calls.
    pub grads: usize,
    /// What the body's `grad`s differentiate by, each once.
    pub grad_targets: Vec<crate::checked::GradTarget>,
}

impl<'a> FnChecker<'a> {
    fn check(def: &FnDef, module: &'a ModuleInfo, checked: &'a CheckedModule, done: &'a [Option<CheckedFn>], diags: &'a mut Vec<Diagnostic>) -> CheckedFn {
        let mut c = FnChecker {
            module,
            checked,
            done,
            syms: checked.symbols.clone(),
            sizes: module.dims.clone(),
            values: HashMap::new(),
            bindings: Vec::new(),
            diags,
            errors: 0,
            params: 0,
            size_arguments: Vec::new(),
            loop_vars: HashMap::new(),
            turns: 0,
            loop_depth: 0,
            loop_forms: Vec::new(),
            grads: 0,
            grad_targets: Vec::new(),
        };
        let mut defaults = Vec::new();
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for p in &def.params {
            if let Some(&first) = seen.get(p.name.name.as_str()) {
                c.report(
                    Diagnostic::new(Code::E0204, p.name.span, format!("parameter `{}` is declared twice", p.name.name))
                        .primary("declared again here")
                        .label(first, "first declared here"),
                );
            }
            seen.insert(&p.name.name, p.name.span);
            let ty = c.param_type(&p.ty);
            if let Some(d) = &p.default {
                defaults.push((c.bindings.len(), d));
            }
            c.bind(&p.name.name, p.name.span, ty);
        }
        let params = c.bindings.len();
        c.params = params;
        let mut default_values = vec![None; params];
        for (index, default) in defaults {
            default_values[index] = Some(c.check_default(index, default));
        }
        c.check_result_names(&def.results);
        let (body, results) = c.check_body(def);
        CheckedFn {
            name: def.name.name.clone(),
            span: def.span,
            ok: c.errors == 0,
            params,
            defaults: default_values,
            size_arguments: c.size_arguments,
            bindings: c.bindings,
            results,
            body,
            loops: c.loop_forms,
            symbols: c.syms,
            differentiates: c.grads > 0,
            grad_targets: c.grad_targets,
        }
    }

    /// Records a diagnostic; returns the error type for convenience.
    pub fn report(&mut self, d: Diagnostic) -> Type {
        if d.code.severity() == crate::diagnostics::Severity::Error {
            self.errors += 1;
        }
        self.diags.push(d);
        Type::Error
    }

    /// Adds a named value to the scope (shadowing any earlier one).
    pub fn bind(&mut self, name: &str, span: Span, ty: Type) -> usize {
        self.loop_vars.remove(name);
        let index = self.bindings.len();
        self.bindings.push(Binding { name: name.to_string(), span, ty, hidden: false });
        self.values.insert(name.to_string(), index);
        index
    }

    fn param_type(&mut self, ty: &TypeRef) -> Type {
        match ty {
            TypeRef::Host(h, _) => host_type(*h),
            TypeRef::Tensor(t) => {
                let mut scope = SizeScope { sizes: std::mem::take(&mut self.sizes), new_names: true };
                let before = self.diags.len();
                let resolved = resolve_tensor_type(t, &mut scope, &mut self.syms, self.diags);
                self.errors += self.diags.len() - before;
                self.sizes = scope.sizes;
                resolved.map_or(Type::Error, Type::Tensor)
            }
        }
    }

    /// Finishes a function: its statements and its return.
    fn check_body(&mut self, def: &FnDef) -> (Vec<TStmt>, Vec<CheckedResult>) {
        let mut body = Vec::with_capacity(def.body.len());
        let mut results = None;
        for stmt in &def.body {
            match stmt {
                ast::Stmt::Return { values, span } => results = Some(self.check_return(&def.results, values, *span, &mut body)),
                stmt => self.check_stmt(stmt, &mut body),
            }
        }
        let results = results.unwrap_or_else(|| match &def.results {
            ast::Results::One(_) => vec![CheckedResult { name: None, ty: Type::Error }],
            ast::Results::Named { results, .. } => results.iter().map(|r| CheckedResult { name: Some(r.name.name.clone()), ty: Type::Error }).collect(),
        });
        (body, results)
    }
}

/// The type of a host scalar parameter: any value of its type.
pub(crate) fn host_type(h: ast::HostType) -> Type {
    let range = if h == ast::HostType::Bool { None } else { Some(Range::FULL) };
    Type::Host(h, range)
}

#[cfg(test)]
mod tests {
    use super::types::Type;

    #[test]
    fn run_time_sizes_become_call_boundary_checks() {
        let src = "dim V\ndim W = V / 2\ndef f(x: [V], y: [W]) -> [W] {\n    z = rearrange(x, (h 4) -> h 4)\n    return y\n}\n";
        let c = crate::check_source(src);
        assert!(c.diagnostics.is_empty(), "{:?}", c.diagnostics);
        let f = &c.module.functions[0];
        let (Type::Tensor(x), Type::Tensor(y)) = (&f.bindings[0].ty, &f.bindings[1].ty) else { panic!() };
        assert!(f.symbols.table().solve(&[(x.axes[0].size, 8), (y.axes[0].size, 4)]).is_ok());
        let wrong_y = f.symbols.table().solve(&[(x.axes[0].size, 8), (y.axes[0].size, 5)]).unwrap_err();
        assert!(wrong_y.message.contains("`W`") && wrong_y.message.contains('5'), "{wrong_y:?}");
        let inexact_group = f.symbols.table().solve(&[(x.axes[0].size, 6)]).unwrap_err();
        assert!(inexact_group.message.contains("6 / 4 is not exact"), "{inexact_group:?}");
        let odd = f.symbols.table().solve(&[(x.axes[0].size, 7)]).unwrap_err();
        assert!(odd.message.contains("7 / 2 is not exact"), "{odd:?}");
    }
}
