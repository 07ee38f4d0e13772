//! The shared execution cases (`../shared/exec`): `run_exec.py` drives
//! `nax run --backend interp` on each case and compares with numpy
//! references. It needs python3 with numpy and safetensors, which
//! `.ci/test` installs; without them the test fails and says so.

use crate::support::shared;
use std::process::Command;

#[test]
fn shared_execution_cases_pass_with_the_interpreter() {
    let script = shared().join("exec/run_exec.py");
    assert!(script.exists(), "{} is missing", script.display());
    let probe = Command::new("python3").args(["-c", "import numpy, safetensors"]).output();
    assert!(
        probe.as_ref().is_ok_and(|o| o.status.success()),
        "run_exec.py needs python3 with numpy and safetensors (pip install numpy safetensors)"
    );
    let out = Command::new("python3")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_nax"))
        .args(["--backend", "interp"])
        .output()
        .expect("run python3");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    assert!(out.status.success(), "execution cases failed:\n{text}");
}
