//! What `nax check` prints: the JSON object of CLI.md, and the `--types` text.

use nax_front::Checked;
use nax_front::check::range::Range;
use nax_front::check::types::{ShownSize, Type};
use nax_front::checked::CheckedFn;
use nax_front::diagnostics::LineIndex;
use serde_json::{Value, json};

fn bound(x: f64) -> Value {
    if x == f64::INFINITY {
        json!("inf")
    } else if x == f64::NEG_INFINITY {
        json!("-inf")
    } else {
        json!(x)
    }
}

fn range_json(r: Option<Range>) -> Value {
    r.map_or(Value::Null, |r| json!([bound(r.lo), bound(r.hi)]))
}

fn sizes_json(f: &CheckedFn, ty: &Type) -> Value {
    Value::Array(
        ty.sizes(&f.symbols)
            .into_iter()
            .map(|s| match s {
                ShownSize::Constant(v) => json!(v),
                ShownSize::Named(name) => json!(name),
            })
            .collect(),
    )
}

/// The functions that checked, as `nax check` reports them.
fn checked_functions(checked: &Checked) -> impl Iterator<Item = &CheckedFn> {
    let mut fns: Vec<&CheckedFn> = checked.module.functions.iter().filter(|f| f.ok).collect();
    fns.sort_by_key(|f| f.span.start);
    fns.into_iter()
}

/// The JSON object of CLI.md: diagnostics and the functions that checked.
pub fn json(source: &str, checked: &Checked) -> String {
    let lines = LineIndex::new(source);
    let diagnostics = nax::diagnostics_json(source, &checked.diagnostics);
    let functions: Vec<Value> = checked_functions(checked)
        .map(|f| {
            let bindings: Vec<Value> = f.bindings[f.params..]
                .iter()
                .filter(|b| !b.hidden)
                .map(|b| {
                    json!({
                        "name": b.name,
                        "line": lines.line_col(b.span.start).0,
                        "type": b.ty.display(&f.symbols),
                        "sizes": sizes_json(f, &b.ty),
                        "range": range_json(b.ty.range()),
                    })
                })
                .collect();
            json!({"name": f.name, "signature": f.signature(), "bindings": bindings})
        })
        .collect();
    serde_json::to_string_pretty(&json!({"diagnostics": diagnostics, "functions": functions})).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// `--types` in text mode: each signature, then one line per binding.
pub fn types_text(source: &str, checked: &Checked) -> String {
    let lines = LineIndex::new(source);
    let mut out = String::new();
    for f in checked_functions(checked) {
        out.push_str(&f.signature());
        out.push('\n');
        for b in f.bindings[f.params..].iter().filter(|b| !b.hidden) {
            let sizes: Vec<String> = b.ty.sizes(&f.symbols).iter().map(ShownSize::to_string).collect();
            let range = b.ty.range().map_or("-".to_string(), |r| r.to_string());
            out.push_str(&format!(
                "  {:<12} {:<28} sizes [{}]  range {}  (line {})\n",
                b.name,
                b.ty.display(&f.symbols),
                sizes.join(", "),
                range,
                lines.line_col(b.span.start).0
            ));
        }
    }
    out
}
