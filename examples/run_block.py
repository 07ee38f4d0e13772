#!/usr/bin/env python3
"""Run the example transformer block with `nax run` on generated inputs.

    python3 examples/run_block.py NAX_BINARY [--backend B] [--save-weights W]

Writes seeded random inputs (x of shape [b n D] with b=2, n=16) and weights
for every `param` of examples/transformer_block.nax to a temporary folder,
runs `nax run --fn block`, and prints the output's shape, axis names and a
checksum (the sum and the sum of absolute values). With --save-weights, the
weights are also kept in W (for the C example, examples/host_c).
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
D, F = 512, 2048
WEIGHTS = {
    "ln1_g": (D,), "ln1_b": (D,), "w_qkv": (D, 3 * D), "w_o": (D, D),
    "ln2_g": (D,), "ln2_b": (D,), "w_1": (D, F), "b_1": (F,), "w_2": (F, D), "b_2": (D,),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("nax")
    ap.add_argument("--backend", default="llvm")
    ap.add_argument("--timings", action="store_true", help="print the time of each stage (nax run --timings)")
    ap.add_argument("--save-weights", metavar="W", help="also write the weights to this safetensors file")
    opts = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        inputs = os.path.join(tmp, "in.safetensors")
        weights = os.path.join(tmp, "w.safetensors")
        out = os.path.join(tmp, "out.safetensors")
        x = rng.standard_normal((2, 16, D)).astype(np.float32)
        save_file({"x": x}, inputs, metadata={"x.axes": "b n D"})
        w = {}
        for name, shape in WEIGHTS.items():
            scale = 1.0 if name.startswith("ln") and name.endswith("_g") else 0.02
            w[name] = (rng.standard_normal(shape) * scale).astype(np.float32)
        save_file(w, weights)
        if opts.save_weights:
            save_file(w, opts.save_weights)
        cmd = [opts.nax, "run", os.path.join(HERE, "transformer_block.nax"), "--fn", "block",
               "--inputs", inputs, "--weights", weights, "--out", out, "--backend", opts.backend] + (["--timings"] if opts.timings else [])
        done = subprocess.run(cmd)
        if done.returncode != 0:
            sys.exit(done.returncode)
        with safe_open(out, "numpy") as f:
            y = f.get_tensor("out")
            axes = (f.metadata() or {}).get("out.axes", "")
        print(f"block: shape {list(y.shape)}, axes [{axes}], dtype {y.dtype}")
        print(f"checksum: sum {float(y.sum()):.6f}, sum|.| {float(np.abs(y).sum()):.6f}")


if __name__ == "__main__":
    main()
