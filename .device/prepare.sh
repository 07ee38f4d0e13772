#!/usr/bin/env bash
# Writes .device/cases (run here, where Rust is; the GPU machine has none):
# the backend suite's cases compiled for the CUDA target, with their launch
# plans, inputs and the interpreter's results, and `cuda_run`, the runtime's
# CUDA device as a small binary. Then carry .device/cases to
# the GPU machine and run .device/check.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --test suite -- --ignored cuda::export_device_cases --nocapture
# nax's CUDA device without the compiler: a small binary of the runtime.
cargo build --release --quiet -p nax-runtime --features cuda --example cuda_run
cp target/release/examples/cuda_run .device/cases/cuda_run
strip .device/cases/cuda_run
du -sh .device/cases
