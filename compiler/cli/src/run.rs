//! `nax run`: compile one function through the pipeline and run it on
//! tensors from safetensors files (CLI.md, "Tensors in and out of `nax
//! run`"). Inputs bind to the parameters by the host-boundary rules of
//! LANGUAGE.md section 12; every size the checker deferred to the call
//! boundary is checked before anything runs; the result is written
//! atomically (several results each under its declared name), and
//! nothing is written on any error.

use nax::pipeline::{self, Backend};
use nax::{HostTensor, HostType, ParamType, Scalar, Timings, Value};
use std::collections::HashMap;
use std::path::PathBuf;

/// What `nax run` was asked to do.
#[derive(Clone)]
pub struct RunRequest {
    pub file: PathBuf,
    pub function: String,
    pub inputs: Option<PathBuf>,
    pub weights: Option<PathBuf>,
    pub args: Vec<String>,
    pub out: PathBuf,
    /// Whether the graph is rewritten by the optimizer (`-O1`).
    pub optimize: bool,
    /// Whether every load and store is bounds-checked (`--check-bounds`).
    pub check_bounds: bool,
}

/// Why a run failed (each exits with 1; the checker's diagnostics are
/// printed as rendered, anything else after `error: `).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The source does not check, or the function does not compile.
    #[error(transparent)]
    Compile(#[from] nax::Error),
    /// A file of tensors, or a tensor in it, was refused.
    #[error(transparent)]
    Host(#[from] nax::HostError),
    /// The call was refused.
    #[error(transparent)]
    Runtime(#[from] nax::RuntimeError),
    /// A tensor of `--weights` does not bind to its weight.
    #[error("in --weights: {0}")]
    Weight(nax::RuntimeError),
    /// A host parameter given a tensor.
    #[error("parameter '{name}' is a host {ty} and comes from --arg, not from --inputs")]
    HostFromInputs { name: String, ty: &'static str },
    /// A host parameter without a value.
    #[error("parameter '{name}' ({ty}) needs a value: pass --arg {name}=VALUE")]
    MissingArg { name: String, ty: &'static str },
    /// A tensor parameter without a tensor.
    #[error("parameter '{0}' has no tensor in --inputs")]
    MissingInput(String),
    /// A tensor of `--inputs` no parameter takes.
    #[error("the input '{input}' matches no parameter of `{function}`")]
    ExtraInput { input: String, function: String },
    /// An `--arg` no parameter takes.
    #[error("--arg {name}: `{function}` has no host scalar parameter '{name}'")]
    ExtraArg { name: String, function: String },
    /// An `--arg` that is not `NAME=VALUE`.
    #[error("--arg {0}: expected NAME=VALUE")]
    ArgSyntax(String),
    /// An `--arg` given twice.
    #[error("--arg {0} is given twice")]
    ArgTwice(String),
    /// An `--arg` value of the wrong kind.
    #[error("--arg {name}={text}: expected {expected}")]
    ArgValue { name: String, text: String, expected: &'static str },
}

/// Runs the request.
pub fn run(req: &RunRequest, source: &str, backend: Backend, timings: &mut Timings) -> Result<(), RunError> {
    let module = pipeline::check(&req.file.display().to_string(), source, timings)?;
    run_checked(req, &module, backend, timings)
}

/// Runs the request's function of a module that checked.
fn run_checked(req: &RunRequest, module: &nax_front::CheckedModule, backend: Backend, timings: &mut Timings) -> Result<(), RunError> {
    let function = pipeline::compile_function(module, &req.function, backend, req.optimize, req.check_bounds, timings)?;
    let signature = function.signature();
    let mut inputs: HashMap<String, HostTensor> = match &req.inputs {
        Some(p) => nax::read_tensors(p)?.into_iter().collect(),
        None => HashMap::new(),
    };
    let mut stored: HashMap<String, HostTensor> = match &req.weights {
        Some(p) => nax::read_tensors(p)?.into_iter().collect(),
        None => HashMap::new(),
    };
    // The weights the function reads bind like inputs (named axes are transposed); others are ignored.
    let mut weights = HashMap::new();
    for w in &signature.weights {
        if let Some(t) = stored.remove(&w.name) {
            let bound = nax::bind_owned(&w.name, &w.ty.names(), t).map_err(RunError::Weight)?;
            weights.insert(w.name.clone(), bound);
        }
    }
    let mut scalars = parse_args(&req.args)?;
    let mut args = Vec::with_capacity(signature.params.len());
    for p in &signature.params {
        match &p.ty {
            ParamType::Host(h) => {
                if inputs.contains_key(&p.name) {
                    return Err(RunError::HostFromInputs { name: p.name.clone(), ty: h.as_str() });
                }
                let value = match (scalars.remove(&p.name), p.default) {
                    (Some(text), _) => host_argument(&p.name, *h, &text)?,
                    (None, Some(default)) => default,
                    (None, None) => return Err(RunError::MissingArg { name: p.name.clone(), ty: h.as_str() }),
                };
                args.push(Value::Scalar(value));
            }
            ParamType::Tensor(_) => {
                let tensor = inputs.remove(&p.name).ok_or_else(|| RunError::MissingInput(p.name.clone()))?;
                args.push(Value::Tensor(tensor));
            }
        }
    }
    if let Some(extra) = inputs.keys().min() {
        return Err(RunError::ExtraInput { input: extra.clone(), function: req.function.clone() });
    }
    if let Some(extra) = scalars.keys().min() {
        return Err(RunError::ExtraArg { name: extra.clone(), function: req.function.clone() });
    }
    timings.mark("load");
    let views: Vec<nax::Arg<'_>> = args.iter().map(Value::arg).collect();
    let pool = nax::ThreadPool::new(0)?;
    let results = function.call_results_in_order(views, &weights, &pool)?;
    timings.mark("run");
    // One result is `out`; several are written under their declared names.
    let names: Vec<&str> = match function.signature().results.as_slice() {
        [_] => vec!["out"],
        several => several.iter().map(|r| r.name.as_deref().unwrap_or("out")).collect(),
    };
    let tensors: Vec<(&str, &nax::HostTensor)> = names.into_iter().zip(&results).collect();
    Ok(nax::write_tensors_atomic(&req.out, &tensors)?)
}

/// Why `--out` may not be written, when it names a file the run reads
/// (the source, `--inputs`, `--weights`): the same file by device and
/// inode, whatever path names it.
pub fn out_overwrites_an_input(req: &RunRequest) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let out = std::fs::metadata(&req.out).ok()?;
    let read = [("the source file", Some(&req.file)), ("the --inputs file", req.inputs.as_ref()), ("the --weights file", req.weights.as_ref())];
    read.into_iter().find_map(|(what, path)| {
        let m = std::fs::metadata(path?).ok()?;
        (m.dev() == out.dev() && m.ino() == out.ino())
            .then(|| format!("--out `{}` is {what}; the result would overwrite it: choose another path", req.out.display()))
    })
}

/// `--arg NAME=VALUE`s by name.
fn parse_args(args: &[String]) -> Result<HashMap<String, String>, RunError> {
    let mut out = HashMap::new();
    for a in args {
        let (name, value) = a.split_once('=').ok_or_else(|| RunError::ArgSyntax(a.clone()))?;
        if out.insert(name.trim().to_string(), value.trim().to_string()).is_some() {
            return Err(RunError::ArgTwice(name.to_string()));
        }
    }
    Ok(out)
}

/// A host scalar from its `--arg` text: `true`/`false`, an integer, or a float.
fn host_argument(name: &str, h: HostType, text: &str) -> Result<Scalar, RunError> {
    let bad = || RunError::ArgValue {
        name: name.to_string(),
        text: text.to_string(),
        expected: match h {
            HostType::Bool => "true or false",
            HostType::Int => "an integer",
            HostType::Float => "a number such as 0.5 or 1e-5",
        },
    };
    Ok(match h {
        HostType::Bool => Scalar::Bool(match text {
            "true" => true,
            "false" => false,
            _ => return Err(bad()),
        }),
        HostType::Int => Scalar::Int(text.parse().map_err(|_| bad())?),
        HostType::Float => Scalar::Float(text.parse().map_err(|_| bad())?),
    })
}
