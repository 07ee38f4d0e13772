#!/usr/bin/env bash
# The device check: runs every case of .device/cases (PTX, launch plans,
# inputs and the interpreter's results, written here by .device/prepare.sh)
# on this machine's NVIDIA GPU through the CUDA driver, compares each with
# the interpreter, and prints `N passed, M failed`. For a machine with an
# NVIDIA GPU, PyTorch and CuPy, no network and no Rust; under 5 minutes.
set -euo pipefail
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
exec python3 check.py "$@"
