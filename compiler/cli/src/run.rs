//! `nax run`: compile one function and run it on tensors from safetensors
//! files (CLI.md, "Tensors in and out of `nax run`"). Inputs bind to the
//! parameters by the host-boundary rules of LANGUAGE.md section 12; every
//! size the checker deferred to the call boundary is checked before
//! anything runs; the result is written atomically, and nothing is written
//! on any error.

use nax_front::check::types::Type;
use nax_front::syntax::ast::HostType;
use nax_ir::{Argument, Backend};
use nax_runtime::HostTensor;
use crate::timings::Timings;
use std::collections::HashMap;
use std::path::PathBuf;

/// What `nax run` was asked to do.
pub struct RunRequest {
    pub file: PathBuf,
    pub function: String,
    pub inputs: Option<PathBuf>,
    pub weights: Option<PathBuf>,
    pub args: Vec<String>,
    pub out: PathBuf,
    /// Whether the graph is rewritten by the optimizer (`-O1`).
    pub optimize: bool,
}

/// Runs the request; the error is the message printed before exiting with 1.
pub fn run(req: &RunRequest, source: &str, backend: &dyn Backend, timings: &mut Timings) -> Result<(), String> {
    let (checked, front) = nax_front::check_source_timed(source);
    timings.extend(&front);
    if checked.has_errors() {
        let name = req.file.display().to_string();
        return Err(nax_front::diagnostics::render_text(&name, source, &checked.diagnostics).trim_end().to_string());
    }
    let graph = nax_ir::lower(&checked.module, &req.function).map_err(|e| e.to_string())?;
    let problems = nax_ir::verify(&graph);
    if !problems.is_empty() {
        return Err(format!("internal error: the graph of `{}` does not verify: {}", req.function, problems.join("; ")));
    }
    timings.mark("lower");
    let graph = if req.optimize {
        let (rewritten, _) = nax_passes::optimize(&graph)?;
        let problems = nax_ir::verify(&rewritten);
        if !problems.is_empty() {
            return Err(format!("internal error: the rewritten graph of `{}` does not verify: {}", req.function, problems.join("; ")));
        }
        timings.mark("rewrite");
        rewritten
    } else {
        graph
    };
    let mut inputs: HashMap<String, HostTensor> = match &req.inputs {
        Some(p) => nax_runtime::read_tensors(p).map_err(|e| e.to_string())?.into_iter().collect(),
        None => HashMap::new(),
    };
    let stored: HashMap<String, HostTensor> = match &req.weights {
        Some(p) => nax_runtime::read_tensors(p).map_err(|e| e.to_string())?.into_iter().collect(),
        None => HashMap::new(),
    };
    // The weights the function uses bind like inputs (named axes are transposed); others are ignored.
    let mut weights = HashMap::new();
    for w in &checked.module.weights {
        if let Some(t) = stored.get(&w.name) {
            let names: Vec<Option<String>> = w.ty.axes.iter().map(|a| a.name.clone()).collect();
            let bound = nax_runtime::bind(&w.name, &names, t).map_err(|e| format!("in --weights: {e}"))?;
            weights.insert(w.name.clone(), bound);
        }
    }
    let mut scalars = parse_args(&req.args)?;
    let f = checked.module.functions.iter().find(|f| f.name == req.function).ok_or("no such function")?;

    let mut args = Vec::with_capacity(f.params);
    for (index, b) in f.bindings[..f.params].iter().enumerate() {
        match &b.ty {
            Type::Host(h, _) => {
                if inputs.contains_key(&b.name) {
                    return Err(format!("parameter '{}' is a host {} and comes from --arg, not from --inputs", b.name, h.as_str()));
                }
                let value = match scalars.remove(&b.name) {
                    Some(text) => host_argument(&b.name, *h, &text)?,
                    None => match f.defaults.get(index).and_then(Option::as_ref) {
                        Some(default) => default_argument(*h, &default.kind)?,
                        None => return Err(format!("parameter '{}' ({}) needs a value: pass --arg {}=VALUE", b.name, h.as_str(), b.name)),
                    },
                };
                args.push(value);
            }
            Type::Tensor(t) => {
                let tensor = inputs.remove(&b.name).ok_or_else(|| format!("parameter '{}' has no tensor in --inputs", b.name))?;
                let names: Vec<Option<String>> = t.axes.iter().map(|a| a.name.clone()).collect();
                let bound = nax_runtime::bind(&b.name, &names, &tensor).map_err(|e| e.to_string())?;
                args.push(Argument::Tensor(bound));
            }
            Type::Error => return Err(format!("parameter '{}' did not check", b.name)),
        }
    }
    if let Some(extra) = inputs.keys().min() {
        return Err(format!("the input '{extra}' matches no parameter of `{}`", req.function));
    }
    if let Some(extra) = scalars.keys().min() {
        return Err(format!("--arg {extra}: `{}` has no host scalar parameter '{extra}'", req.function));
    }
    timings.mark("load");
    let sizes = nax_ir::check_call(&graph, &args, &weights)?;
    let executable = backend.compile_timed(&graph, &mut |stage| timings.mark(stage))?;
    let result = executable.run(&args, &weights, &sizes)?;
    timings.mark("run");
    nax_runtime::write_tensor_atomic(&req.out, "out", &result).map_err(|e| e.to_string())
}

/// `--arg NAME=VALUE`s by name.
fn parse_args(args: &[String]) -> Result<HashMap<String, String>, String> {
    let mut out = HashMap::new();
    for a in args {
        let (name, value) = a.split_once('=').ok_or_else(|| format!("--arg {a}: expected NAME=VALUE"))?;
        if out.insert(name.trim().to_string(), value.trim().to_string()).is_some() {
            return Err(format!("--arg {name} is given twice"));
        }
    }
    Ok(out)
}

/// A host scalar from its `--arg` text: `true`/`false`, an integer, or a float.
fn host_argument(name: &str, h: HostType, text: &str) -> Result<Argument, String> {
    let bad = || format!("--arg {name}={text}: expected {}", match h {
        HostType::Bool => "true or false",
        HostType::Int => "an integer",
        HostType::Float => "a number such as 0.5 or 1e-5",
    });
    Ok(match h {
        HostType::Bool => Argument::Bool(match text {
            "true" => true,
            "false" => false,
            _ => return Err(bad()),
        }),
        HostType::Int => Argument::Int(text.parse().map_err(|_| bad())?),
        HostType::Float => Argument::Float(text.parse().map_err(|_| bad())?),
    })
}

/// A parameter's default, a literal the checker accepted.
fn default_argument(h: HostType, kind: &nax_front::checked::TExprKind) -> Result<Argument, String> {
    use nax_front::checked::TExprKind as K;
    Ok(match (h, kind) {
        (HostType::Float, K::Float(x)) => Argument::Float(*x),
        (HostType::Float, K::Int(x)) => Argument::Float(*x as f64),
        (HostType::Int, K::Int(x)) => Argument::Int(i64::try_from(*x).unwrap_or(i64::MAX)),
        (HostType::Bool, K::Bool(b)) => Argument::Bool(*b),
        _ => return Err("a parameter default must be a literal".to_string()),
    })
}
