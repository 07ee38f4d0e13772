//! The shared execution cases (`../shared/exec`): `run_exec.py` drives
//! `nax run --backend B` on each case and compares with numpy references,
//! for every back end (interp, llvm, cranelift). It needs python3 with
//! numpy and safetensors, which `.ci/test` installs; without them the test
//! fails and says so.

use crate::support::shared;
use std::process::Command;

#[test]
fn shared_execution_cases_pass_on_every_backend() {
    let script = shared().join("exec/run_exec.py");
    assert!(script.exists(), "{} is missing", script.display());
    let probe = Command::new("python3").args(["-c", "import numpy, safetensors"]).output();
    assert!(probe.as_ref().is_ok_and(|o| o.status.success()), "run_exec.py needs python3 with numpy and safetensors (pip install numpy safetensors)");
    for backend in ["interp", "llvm", "mlir", "cranelift"] {
        let out = Command::new("python3").arg(&script).arg(env!("CARGO_BIN_EXE_nax")).args(["--backend", backend]).output().expect("run python3");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        println!("--backend {backend}:\n{text}");
        assert!(out.status.success(), "execution cases failed with --backend {backend}:\n{text}");
    }
}
