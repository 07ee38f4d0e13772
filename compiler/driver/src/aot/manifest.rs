//! `NAME_manifest()`'s JSON (ABI.md): each function's parameters and
//! results (dtype and axes, each axis's name or null and its size or
//! symbol; host scalars by type), the weights, the CPU features; for a
//! library split over processes, its mesh and sharding (each rank's
//! blocks' sizes are the functions').

use nax_runtime::{ParamType, Signature, Size, TensorSpec};
use serde_json::{Value, json};

/// The manifest of a library of these functions, compiled for `cpu`.
pub fn manifest(functions: &[&Signature], cpu: &[&str], split: Option<&(String, String)>) -> Value {
    let mut weights: Vec<Value> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for f in functions {
        for w in &f.weights {
            if !seen.contains(&w.name.as_str()) {
                seen.push(&w.name);
                weights.push(tensor(&w.name, &w.ty, f));
            }
        }
    }
    let functions: Vec<Value> = functions
        .iter()
        .map(|f| {
            let params: Vec<Value> = f
                .params
                .iter()
                .map(|p| match &p.ty {
                    ParamType::Tensor(t) => tensor(&p.name, t, f),
                    ParamType::Host(h) => json!({"name": p.name, "host": h.as_str()}),
                })
                .collect();
            let results: Vec<Value> = f.results.iter().map(|r| tensor(r.name.as_deref().unwrap_or("result"), &r.ty, f)).collect();
            json!({"name": f.name, "params": params, "result": results.first(), "results": results})
        })
        .collect();
    let mut manifest = json!({"abi": 1, "functions": functions, "weights": weights, "cpu": cpu});
    if let Some((mesh, sharding)) = split {
        manifest["mesh"] = json!(mesh);
        manifest["shard"] = json!(sharding);
    }
    manifest
}

/// A tensor's entry: its name, dtype and axes.
fn tensor(name: &str, t: &TensorSpec, f: &Signature) -> Value {
    let axes: Vec<Value> = t
        .axes
        .iter()
        .map(|a| {
            let size = match f.sizes.resolve(a.size) {
                Size::Const(c) => json!(c),
                symbol => json!(f.sizes.display(symbol)),
            };
            json!([a.name, size])
        })
        .collect();
    json!({"name": name, "dtype": t.dtype.as_str(), "axes": axes})
}
