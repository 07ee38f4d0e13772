#!/usr/bin/env bash
# Writes .device/cases (run here, where Rust is; the GPU machine has none):
# the backend suite's cases compiled for the CUDA target, with their launch
# plans, inputs and the interpreter's results. Then carry .device/cases to
# the GPU machine and run .device/check.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --test suite -- --ignored cuda::export_device_cases --nocapture
