//! A function's backward function, written as nax source (LANGUAGE.md
//! section 15) beside it: for `def f(x: [n d], w: [d]) -> [n]` and the
//! names `x`, `w`,
//!
//! ```text
//! def nax_backward_f(x: [n d], w: [d], d_result: [n]) -> (value: [], d_x: [n d], d_w: [d]) {
//!     nax_r_0 = f(x, w)
//!     return grad(float(sum(rearrange(nax_r_0 * d_result, ... -> (...)) as [nax_all_0], nax_all_0)), x, w)
//! }
//! ```
//!
//! Its derivatives are the vector-Jacobian product of `f` at the
//! arguments against the gradients of its float results (`d_RESULT`, one
//! per float result, `d_result` for an unnamed one): what a host's
//! autograd (PyTorch's `backward`) asks of a nax function inside a model
//! it trains. The parameters' and results' types are copied from the
//! function's own text, so any type it can declare works.

use crate::error::Error;
use nax_front::CheckedModule;
use nax_front::check::types::Type;
use nax_front::syntax::ast::{Item, Results, TypeRef};
use nax_runtime::DType;

/// The name of `function`'s backward function.
pub(crate) fn backward_name(function: &str) -> String {
    format!("nax_backward_{function}")
}

/// The source of the backward function of `function` by `wrt` (its float
/// tensor parameters and the module's weights, by name), for `source` (the
/// module's text, which `module` is the checked form of).
pub(crate) fn backward_source(source: &str, module: &CheckedModule, function: &str, wrt: &[String]) -> Result<String, Error> {
    let refused = |problem: String| Error::NotDifferentiable { function: function.to_string(), problem };
    let ast = nax_front::syntax::parse(source, &mut Vec::new());
    let defs: Vec<_> = ast.items.iter().filter_map(|i| if let Item::Def(d) = i { Some(d) } else { None }).collect();
    let def = defs.iter().find(|d| d.name.name == function).ok_or_else(|| refused("no such function".into()))?;
    let f = module.functions.iter().find(|f| f.name == function).ok_or_else(|| refused("no such function".into()))?;
    let text = |t: &TypeRef| source.get(t.span().start..t.span().end).unwrap_or_default().to_string();
    if wrt.is_empty() {
        return Err(refused("give at least one parameter or weight to differentiate by".into()));
    }
    // The derivatives' declared types, by name.
    let mut derivatives = Vec::with_capacity(wrt.len());
    for (i, name) in wrt.iter().enumerate() {
        if wrt[..i].contains(name) {
            return Err(refused(format!("`{name}` is given twice")));
        }
        let declared = if let Some(p) = def.params.iter().position(|p| &p.name.name == name) {
            (f.bindings[p].ty.clone(), text(&def.params[p].ty))
        } else if let Some(w) = module.weights.iter().find(|w| &w.name == name) {
            let param = ast.items.iter().find_map(|i| if let Item::Param(p) = i { (p.name.name == *name).then_some(p) } else { None });
            let typed = param.map(|p| source.get(p.ty.span.start..p.ty.span.end).unwrap_or_default().to_string()).unwrap_or_default();
            (Type::Tensor(w.ty.clone()), typed)
        } else {
            return Err(refused(format!("`{name}` is neither a parameter of `{function}` nor a weight")));
        };
        match &declared.0 {
            Type::Tensor(t) if t.dtype.is_float() => derivatives.push(format!("d_{name}: {}", plain(&declared.1, t.dtype))),
            other => return Err(refused(format!("`{name}` is {}, which has no derivative", other.display(&f.symbols)))),
        }
    }
    // The float results, each with its gradient's parameter.
    let results: Vec<(String, &TypeRef)> = match &def.results {
        Results::One(t) => vec![("result".to_string(), t)],
        Results::Named { results, .. } => results.iter().map(|r| (r.name.name.clone(), &r.ty)).collect(),
    };
    let mut gradients = Vec::new();
    let mut terms = Vec::new();
    for (i, ((name, ty), checked)) in results.iter().zip(&f.results).enumerate() {
        let Type::Tensor(t) = &checked.ty else { continue };
        if !t.dtype.is_float() {
            continue;
        }
        let gradient = format!("d_{name}");
        if def.params.iter().any(|p| p.name.name == gradient) {
            return Err(refused(format!("a parameter is named `{gradient}`, the name of the gradient of the result `{name}`")));
        }
        gradients.push(format!("{gradient}: {}", plain(&text(ty), t.dtype)));
        let product = format!("nax_r_{i} * {gradient}");
        terms.push(if t.axes.is_empty() {
            format!("float({product})")
        } else {
            format!("float(sum(rearrange({product}, ... -> (...)) as [nax_all_{i}], nax_all_{i}))")
        });
    }
    if terms.is_empty() {
        return Err(refused("it has no float result to differentiate".into()));
    }
    let params: Vec<String> = def
        .params
        .iter()
        .map(|p| {
            let default = p.default.as_ref().map(|d| format!(" = {}", source.get(d.span.start..d.span.end).unwrap_or_default())).unwrap_or_default();
            format!("{}: {}{default}", p.name.name, text(&p.ty))
        })
        .collect();
    let arguments: Vec<&str> = def.params.iter().map(|p| p.name.name.as_str()).collect();
    let bound: Vec<String> = (0..results.len()).map(|i| format!("nax_r_{i}")).collect();
    let name = backward_name(function);
    Ok(format!(
        "\ndef {name}({}) -> (value: [], {}) {{\n    {} = {function}({})\n    return grad({}, {})\n}}\n",
        params.iter().chain(&gradients).cloned().collect::<Vec<_>>().join(", "),
        derivatives.join(", "),
        bound.join(", "),
        arguments.join(", "),
        terms.join(" + "),
        wrt.join(", ")
    ))
}

/// A float tensor type's text as a plain type of the same dtype and axes
/// (`Logit(V)[b n V]` is `[b n V]`, `bf16[n]` stays).
fn plain(text: &str, dtype: DType) -> String {
    let axes = text.find('[').map_or(text, |at| &text[at..]);
    match dtype {
        DType::F32 => axes.to_string(),
        other => format!("{}{axes}", other.as_str()),
    }
}
