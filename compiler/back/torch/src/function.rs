//! One nax function as one Python function: the signature (parameters, host
//! defaults, keyword-only weights), the device and size preamble, and one
//! Python statement per nax statement; a loop as a Python `for` loop.

use crate::names::Namer;
use crate::{EmitError, dtype_name};
use nax_front::CheckedModule;
use nax_front::check::sizes::{Size, SymId};
use nax_front::check::types::{DType, Type};
use nax_front::checked::{CheckedFn, GradTarget, LoopForm, TStmt};
use nax_front::syntax::ast::HostType;
use std::collections::{BTreeSet, HashMap};

/// What every function's emission shares: the module and the Python names of
/// its functions and weights, and which weights each function takes.
pub(crate) struct Context<'a> {
    /// The module being emitted.
    pub module: &'a CheckedModule,
    /// The Python name of each function, by index.
    pub functions: Vec<String>,
    /// The Python name of each weight, by index (also its keyword argument).
    pub weights: Vec<String>,
    /// A namer with every global name taken.
    pub global: Namer,
    /// For each function, the weights it takes (sorted by index): those it
    /// uses, those its callees take, and those that give it a size.
    pub lists: Vec<Vec<usize>>,
}

/// A function's Python text, and the sizes it needs but cannot compute.
pub(crate) struct Emitted {
    /// The `def`, its docstring, preamble and body.
    pub text: String,
    /// The size classes the code needs that nothing given defines.
    pub unresolved: Vec<SymId>,
}

/// Emits one function.
pub(crate) struct FnEmitter<'a> {
    /// What all functions share.
    pub cx: &'a Context<'a>,
    /// The function being emitted.
    pub f: &'a CheckedFn,
    /// Which function this is.
    pub index: usize,
    /// Hands out the function's local names.
    pub namer: Namer,
    /// The Python name of each nax binding name.
    pub locals: HashMap<String, String>,
    /// The Python variable of each size symbol (by the root of its class).
    pub size_vars: HashMap<u32, String>,
    /// The size symbols the code refers to.
    pub needed: BTreeSet<u32>,
    /// Whether the code refers to `_dev`, the device of the arguments.
    pub needs_dev: bool,
}

/// The indentation of a function body.
const INDENT: &str = "    ";

impl<'a> FnEmitter<'a> {
    /// Emits function `index` of the module.
    pub(crate) fn emit(cx: &'a Context<'a>, index: usize) -> Result<Emitted, EmitError> {
        let f = cx.module.functions.get(index).ok_or_else(|| EmitError::Invalid { what: format!("no function {index}") })?;
        if !f.ok {
            return Err(EmitError::Unchecked { function: f.name.clone() });
        }
        let targets = &f.grad_targets;
        let mut e =
            FnEmitter { cx, f, index, namer: cx.global.clone(), locals: HashMap::new(), size_vars: HashMap::new(), needed: BTreeSet::new(), needs_dev: false };
        for b in &f.bindings {
            if !e.locals.contains_key(&b.name) {
                let name = e.namer.fresh(&b.name);
                e.locals.insert(b.name.clone(), name);
            }
        }
        let signature = e.signature()?;
        let mut body = Vec::with_capacity(f.body.len());
        // The sizes the code refers to up to each statement.
        let mut used = Vec::with_capacity(f.body.len());
        let mut index = 0;
        while index < f.body.len() {
            // A loop as written, where it checked that way; else its turns written out.
            if let Some(form) = f.loops.iter().find(|l| l.statements.start == index)
                && let Ok(block) = e.loop_block(form)
            {
                body.push(block);
                used.push(e.needed.clone());
                for _ in form.statements.start + 1..form.statements.end {
                    body.push(String::new());
                    used.push(e.needed.clone());
                }
                index = form.statements.end;
                continue;
            }
            body.push(e.statement(&f.body[index])?);
            used.push(e.needed.clone());
            index += 1;
        }
        let (sizes, unresolved) = e.size_plan();
        let (body, unresolved) = e.bind_from_values(body, &used, unresolved)?;
        // A function that differentiates records its forward for autograd
        // from its own arguments on, whatever mode its caller runs in.
        let mut text = if targets.is_empty() { signature } else { format!("@torch.enable_grad()\n{signature}") };
        text.push_str(&format!("{INDENT}\"\"\"{}\"\"\"\n", f.signature().replace('\\', "\\\\").replace('"', "'")));
        for target in targets {
            let name = match *target {
                GradTarget::Param(i) => e.local(i)?,
                GradTarget::Weight(w) => e.weight(w)?,
            };
            text.push_str(&format!("{INDENT}{name} = _variable({name})\n"));
        }
        if e.needs_dev {
            text.push_str(&format!("{INDENT}_dev = {}\n", e.device_source()));
        }
        for line in sizes.iter().chain(&body).filter(|l| !l.is_empty()) {
            text.push_str(INDENT);
            text.push_str(line);
            text.push('\n');
        }
        Ok(Emitted { text, unresolved })
    }

    /// An error for a checked program that is not as the checker makes them.
    pub(crate) fn invalid(&self, what: &str) -> EmitError {
        EmitError::Invalid { what: format!("in `{}`: {what}", self.f.name) }
    }

    /// An error for what the emitter does not support.
    pub(crate) fn unsupported(&self, what: String) -> EmitError {
        EmitError::Unsupported { function: self.f.name.clone(), what }
    }

    /// The Python name of binding `i`.
    pub(crate) fn local(&self, i: usize) -> Result<String, EmitError> {
        self.f.bindings.get(i).and_then(|b| self.locals.get(&b.name)).cloned().ok_or_else(|| self.invalid(&format!("no binding {i}")))
    }

    /// `def NAME(p1, p2=default, *, w1, w2):`.
    fn signature(&mut self) -> Result<String, EmitError> {
        let f = self.f;
        let params = f.bindings.get(..f.params).ok_or_else(|| self.invalid("fewer bindings than parameters"))?;
        // Python wants defaults only on a trailing run of parameters.
        let first_default =
            params.iter().enumerate().rev().take_while(|(i, _)| f.defaults.get(*i).is_some_and(Option::is_some)).last().map_or(params.len(), |(i, _)| i);
        let mut parts = Vec::with_capacity(params.len());
        for (i, p) in params.iter().enumerate() {
            let name = self.local(i)?;
            match f.defaults.get(i).and_then(Option::as_ref) {
                Some(default) if i >= first_default => {
                    let before = self.needed.len();
                    let value = self.expr(default)?;
                    if self.needed.len() != before || self.needs_dev {
                        return Err(self.unsupported(format!("the default of `{}` depends on a size known only at run time", p.name)));
                    }
                    let value = match (&p.ty, &default.ty) {
                        (Type::Host(HostType::Float, _), Type::Host(HostType::Int, _)) => format!("float({value})"),
                        _ => value,
                    };
                    parts.push(format!("{name}={}", strip_parens(&value)));
                }
                _ => parts.push(name),
            }
        }
        let weights = self.cx.lists.get(self.index).map(Vec::as_slice).unwrap_or_default();
        if !weights.is_empty() {
            parts.push("*".to_string());
            for &w in weights {
                parts.push(self.weight(w)?);
            }
        }
        let name = self.cx.functions.get(self.index).ok_or_else(|| self.invalid("no Python name"))?;
        Ok(format!("def {name}({}):\n", parts.join(", ")))
    }

    /// The Python name of weight `w`.
    pub(crate) fn weight(&self, w: usize) -> Result<String, EmitError> {
        self.cx.weights.get(w).cloned().ok_or_else(|| self.invalid(&format!("no weight {w}")))
    }

    /// Where `_dev` comes from: the first tensor parameter, else the first weight.
    fn device_source(&self) -> String {
        let params = self.f.bindings.iter().take(self.f.params).enumerate();
        let tensor_param = params.filter(|(_, b)| matches!(b.ty, Type::Tensor(_))).find_map(|(i, _)| self.local(i).ok());
        let weight = || self.cx.lists.get(self.index).and_then(|l| l.first()).and_then(|&w| self.weight(w).ok());
        match tensor_param.or_else(weight) {
            Some(name) => format!("{name}.device"),
            None => "None".to_string(),
        }
    }

    /// Binds the sizes the parameters and weights do not give (a size a
    /// callee derives from a keyword, used by the caller) from the shape of
    /// the first value that has them, right after the statement that binds
    /// it, when no statement up to that one refers to the size (`used`:
    /// the sizes referred to up to each statement); gives the body and
    /// what is still unresolved.
    fn bind_from_values(&mut self, body: Vec<String>, used: &[BTreeSet<u32>], unresolved: Vec<SymId>) -> Result<(Vec<String>, Vec<SymId>), EmitError> {
        let mut unresolved = unresolved;
        let mut out = Vec::with_capacity(body.len());
        for ((stmt, line), used) in self.f.body.iter().zip(body).zip(used) {
            out.push(line);
            let TStmt::Assign { targets, .. } = stmt else { continue };
            for &t in targets {
                let Some(Type::Tensor(ty)) = self.f.bindings.get(t).map(|b| &b.ty) else { continue };
                for (k, axis) in ty.axes.iter().enumerate() {
                    let Size::Sym(root) = self.f.symbols.resolve(axis.size) else { continue };
                    if used.contains(&root.0) {
                        continue;
                    }
                    if let Some(at) = unresolved.iter().position(|&r| r == root) {
                        unresolved.remove(at);
                        let var = self.size_var(root.0);
                        out.push(format!("{var} = {}.shape[{k}]", self.local(t)?));
                    }
                }
            }
        }
        Ok((out, unresolved))
    }

    /// One statement.
    fn statement(&mut self, stmt: &TStmt) -> Result<String, EmitError> {
        match stmt {
            TStmt::Assign { targets, value } => {
                let names = targets.iter().map(|&t| self.local(t)).collect::<Result<Vec<_>, _>>()?;
                let value = self.expr(value)?;
                Ok(format!("{} = {}", names.join(", "), strip_parens(&value)))
            }
            TStmt::Return { values } => {
                let mut texts = Vec::with_capacity(values.len());
                for (returned, result) in values.iter().zip(&self.f.results) {
                    let (value, permutation) = (&returned.value, &returned.permutation);
                    let text = self.expr(value)?;
                    let text = match (&result.ty, &value.ty) {
                        (Type::Tensor(_), Type::Tensor(_)) if permutation.iter().enumerate().any(|(i, &p)| i != p) => {
                            format!("{text}.permute({})", join(permutation))
                        }
                        (Type::Tensor(d), Type::Host(..)) => self.host_tensor(&text, d.dtype),
                        (Type::Host(HostType::Float, _), Type::Host(HostType::Int, _)) => format!("float({text})"),
                        _ => text,
                    };
                    texts.push(strip_parens(&text).to_string());
                }
                Ok(format!("return {}", texts.join(", ")))
            }
        }
    }

    /// A loop as a Python `for` over its turns, each yielded value appended
    /// to a list that is stacked after it (one text; its later lines indented).
    fn loop_block(&mut self, form: &LoopForm) -> Result<String, EmitError> {
        let mut lines = Vec::new();
        for (stack, _) in &form.yields {
            lines.push(format!("{} = []", self.local(*stack)?));
        }
        lines.push(format!("for {} in range({}, {}):", self.local(form.var)?, form.start, form.end));
        let inside = lines.len();
        for stmt in &form.body {
            lines.push(format!("{INDENT}{}", self.statement(stmt)?));
        }
        for (stack, value) in &form.yields {
            let value = self.expr(value)?;
            lines.push(format!("{INDENT}{}.append({})", self.local(*stack)?, strip_parens(&value)));
        }
        if lines.len() == inside {
            lines.push(format!("{INDENT}pass"));
        }
        for (stack, _) in &form.yields {
            let name = self.local(*stack)?;
            lines.push(format!("{name} = torch.stack({name})"));
        }
        Ok(lines.join(&format!("\n{INDENT}")))
    }

    /// A host scalar as a rank-0 tensor on the arguments' device.
    pub(crate) fn host_tensor(&mut self, value: &str, dtype: DType) -> String {
        self.needs_dev = true;
        format!("torch.tensor({}, dtype={}, device=_dev)", strip_parens(value), dtype_name(dtype))
    }
}

/// Numbers separated by `, `.
pub(crate) fn join(items: &[usize]) -> String {
    items.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
}

/// `text` without one pair of parentheses around all of it.
pub(crate) fn strip_parens(text: &str) -> &str {
    let Some(inner) = text.strip_prefix('(').and_then(|t| t.strip_suffix(')')) else { return text };
    // The opening parenthesis must close at the very end.
    let mut depth = 0i32;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 && i + 1 != text.len() {
                    return text;
                }
            }
            _ => {}
        }
    }
    inner
}

#[cfg(test)]
mod tests {
    use super::strip_parens;

    #[test]
    fn only_one_enclosing_pair_is_stripped() {
        assert_eq!(strip_parens("(a + b)"), "a + b");
        assert_eq!(strip_parens("(a) + (b)"), "(a) + (b)");
        assert_eq!(strip_parens("((a))"), "(a)");
        assert_eq!(strip_parens("x"), "x");
    }
}
