//! Runs one function on this machine's NVIDIA GPU through the runtime's
//! CUDA device alone, without the compiler: how `.device/check.sh` checks
//! the Rust device on a GPU machine, which has no Rust (this small binary
//! is built here by `.device/prepare.sh` and carried there).
//!
//! ```text
//! cuda_run CALL.json INPUTS.safetensors WEIGHTS.safetensors OUT.safetensors
//! ```
//!
//! `CALL.json` holds the function's `signature`, its CUDA `plan` and the
//! host `scalars` by parameter name; the inputs are the tensor arguments
//! by parameter name, the weights by name. The result is written as the
//! tensor `out`. Exit 1 with the error on stderr when anything fails.

use nax_runtime::cuda::{CudaFunction, CudaPlan};
use nax_runtime::{Arg, Function, HostError, HostTensor, RuntimeError, Scalar, Signature, ThreadPool};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// What `CALL.json` holds.
#[derive(Deserialize)]
struct Call {
    signature: Signature,
    plan: CudaPlan,
    #[serde(default)]
    scalars: HashMap<String, Scalar>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("usage: cuda_run CALL.json INPUTS.safetensors WEIGHTS.safetensors OUT.safetensors")]
    Usage,
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: not a call description: {source}")]
    Json { path: String, source: serde_json::Error },
    #[error(transparent)]
    Host(#[from] HostError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

fn run(paths: &[String]) -> Result<(), Failure> {
    let [call_path, inputs, weights, out] = paths else { return Err(Failure::Usage) };
    let text = std::fs::read_to_string(call_path).map_err(|source| Failure::Read { path: call_path.clone(), source })?;
    let call: Call = serde_json::from_str(&text).map_err(|source| Failure::Json { path: call_path.clone(), source })?;
    let inputs: HashMap<String, HostTensor> = nax_runtime::read_tensors(Path::new(inputs))?.into_iter().collect();
    let weights: HashMap<String, HostTensor> = nax_runtime::read_tensors(Path::new(weights))?.into_iter().collect();
    let signature = Arc::new(call.signature);
    let function = Function::new(Arc::clone(&signature), Box::new(CudaFunction::load(Arc::clone(&signature), call.plan)?));
    let args: Vec<(&str, Arg<'_>)> = signature
        .params
        .iter()
        .filter_map(|p| {
            let name = p.name.as_str();
            match (inputs.get(name), call.scalars.get(name)) {
                (Some(t), _) => Some((name, Arg::Tensor(t.view()))),
                (None, Some(&s)) => Some((name, Arg::Scalar(s))),
                (None, None) => None,
            }
        })
        .collect();
    let result = function.call(args, &weights, &ThreadPool::new(1)?)?;
    nax_runtime::write_tensor_atomic(Path::new(out), "out", &result)?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    match run(&paths) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cuda_run: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
