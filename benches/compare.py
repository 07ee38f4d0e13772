#!/usr/bin/env python3
"""nax against PyTorch eager and torch.compile on every workload of
bench/WORKLOADS.md, in one run.

    python3 benches/compare.py [--skip-bench] [--markdown FILE] [--chart PNG]

0. Without an importable PyTorch (and matplotlib), sets up a virtual
   environment in target/bench-venv (CPU wheels of torch, matplotlib) and
   runs itself there.

1. Runs `cargo bench --bench workloads` (criterion: the nax side, LLVM back
   end, outputs allocated per call; it also records each native back end's
   compile time, source to callable), each workload in its own process
   (`NAX_WORKLOAD=NAME`).
2. Runs the same workloads in PyTorch, eager and under `torch.compile`
   (default mode; its compile time is the first call's), on the code
   `nax build --emit torch` generates, with the same inputs' shapes, the
   same thread count (2, printed), outputs allocated per call.
3. Measures the machine's limits in the same run: memory bandwidth with a
   STREAM triad (`a = b + 3 c`, 2^25 floats, preallocated, counted as
   3 arrays; the best of one before and one after the workloads) and peak f32 FLOP/s as the best rate of PyTorch's matmuls
   (1024^3 and 2048^3 into preallocated outputs, and the gemm workload).
4. Prints a Markdown table: median ms of each side, the ratios, the
   fraction of the limit (bytes moved over bandwidth for memory-bound
   workloads, FLOP/s over peak for the rest) and the compile times (each nax
   back end, source to callable; torch.compile's first call), and draws a
   PNG bar chart of nax's speed-up over eager and over torch.compile
   (benches/compare.png unless --chart says otherwise).

`--skip-bench` reuses the criterion results already in target/criterion.
"""

import argparse
import venv
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREADS = 2
ELEMENTWISE = "dim n = 4096\ndim m = 4096\n\ndef elementwise(x: [n m], y: [n m]) -> [n m] {\n    return x + y\n}\n"
MB = 1 << 20
# name: (argument shapes, weight shapes, bytes a single pass moves, FLOPs
# of the best contraction order) -- f32 everywhere. Memory-bound workloads
# are measured against the bandwidth, the others against the peak.
BLOCK_WEIGHTS = {
    "ln1_g": (512,), "ln1_b": (512,), "w_qkv": (512, 1536), "w_o": (512, 512),
    "ln2_g": (512,), "ln2_b": (512,), "w_1": (512, 2048), "b_1": (2048,), "w_2": (2048, 512), "b_2": (512,),
}
WORKLOADS = {
    "elementwise": ([(4096, 4096), (4096, 4096)], {}, 3 * 4096 * 4096 * 4, None),
    "gelu_bias": ([(32, 512, 1024), (1024,), (1024,)], {}, 2 * 32 * 512 * 1024 * 4, None),
    "transpose_add": ([(4096, 4096), (4096, 4096)], {}, 3 * 4096 * 4096 * 4, None),
    "layernorm": ([(32, 512, 1024), (1024,), (1024,)], {}, 2 * 32 * 512 * 1024 * 4, None),
    "softmax_mid": ([(32, 512, 512)], {}, 2 * 32 * 512 * 512 * 4, None),
    "attention": ([(4, 8, 512, 64)] * 3, {}, None, 2 * 2 * 4 * 8 * 512 * 512 * 64),
    "mlp": ([(2048, 1024), (1024, 4096), (4096, 1024)], {}, None, 2 * 2 * 2048 * 1024 * 4096),
    "gemm": ([(1024, 1024), (1024, 1024)], {}, None, 2 * 1024 ** 3),
    "einsum_chain": ([(4096, 256), (256, 4096), (4096,)], {}, None, 2 * 2 * 4096 * 256),
    "block": ([(4, 256, 512)], BLOCK_WEIGHTS, None,
              2 * 1024 * 512 * (1536 + 512 + 2 * 2048) + 2 * 2 * 4 * 8 * 256 * 256 * 64),
}


def median_ms(fn, min_calls=10, min_seconds=1.0):
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < min_calls or time.perf_counter() - start < min_seconds:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def criterion_median_ms(name):
    path = os.path.join(ROOT, "target", "criterion", name, "nax", "new", "estimates.json")
    with open(path) as f:
        return json.load(f)["median"]["point_estimate"] / 1e6


def compile_ms(name):
    path = os.path.join(ROOT, "target", "criterion", name, "compile.json")
    with open(path) as f:
        return json.load(f)


def source_of(name):
    if name == "elementwise":
        return ELEMENTWISE
    with open(os.path.join(ROOT, "examples", "workloads", name + ".nax")) as f:
        return f.read()


VENV = os.path.join(ROOT, "target", "bench-venv")


def ensure_packages():
    """Re-runs this script in target/bench-venv when torch or matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
        import torch  # noqa: F401
        return
    except ImportError as e:
        missing = e.name
    if os.path.abspath(sys.prefix) == os.path.abspath(VENV):
        sys.exit(f"error: {missing} is still missing in {VENV}")
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        print(f"{missing} is not importable: setting up {VENV}", flush=True)
        venv.create(VENV, with_pip=True)
    # The CPU-only wheels are smaller; where PyTorch's own index is not
    # reachable, PyPI's wheel (with CUDA libraries) runs on the CPU too.
    cpu = subprocess.run([python, "-m", "pip", "install", "-q", "torch", "--index-url", "https://download.pytorch.org/whl/cpu"])
    if cpu.returncode != 0:
        print("PyTorch's CPU index is not reachable: installing torch from PyPI", flush=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "torch"], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "matplotlib", "numpy"], check=True)
    os.execv(python, [python] + sys.argv)


def torch_side(nax, torch, tmp):
    """Median ms of each workload in PyTorch eager and under torch.compile
    (with the compile time), and the machine's limits."""
    torch.set_num_threads(THREADS)
    n = 1 << 25
    a, b, c = torch.empty(n), torch.rand(n), torch.rand(n)

    def triad():
        return 3 * n * 4 / (median_ms(lambda: torch.add(b, c, alpha=3.0, out=a)) / 1e3)

    # The best of a triad before and after the workloads: the machine's limit.
    bandwidth = triad()
    results, compiled, compile_s = {}, {}, {}
    for name, (shapes, weight_shapes, _, _) in WORKLOADS.items():
        src = os.path.join(tmp, name + ".nax")
        py = os.path.join(tmp, name + "_torch.py")
        with open(src, "w") as f:
            f.write(source_of(name))
        subprocess.run([nax, "build", src, "--emit", "torch", "-o", py], check=True)
        spec = importlib.util.spec_from_file_location(name + "_torch", py)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = getattr(module, name)
        args = [torch.rand(s) * 2 - 1 for s in shapes]
        weights = {w: (torch.rand(s) * 2 - 1) * 0.05 for w, s in weight_shapes.items()}
        with torch.no_grad():
            results[name] = median_ms(lambda: fn(*args, **weights))
            fast = torch.compile(fn)
            start = time.perf_counter()
            fast(*args, **weights)
            compile_s[name] = time.perf_counter() - start
            compiled[name] = median_ms(lambda: fast(*args, **weights))
    bandwidth = max(bandwidth, triad())
    # The best f32 matmul rate seen, the gemm workload's included.
    peak = 2 * 1024 ** 3 / (results["gemm"] / 1e3)
    for m in (1024, 2048):
        x, y, z = torch.rand(m, m), torch.rand(m, m), torch.empty(m, m)
        mm = median_ms(lambda: torch.mm(x, y, out=z))
        peak = max(peak, 2 * m ** 3 / (mm / 1e3))
    return results, compiled, compile_s, bandwidth, peak


def chart(path, names, vs_eager, vs_compiled):
    """Bars of nax's speed-up over eager and over torch.compile, log scale."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 4.5))
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], vs_eager, width=0.4, label="vs PyTorch eager")
    ax.bar([x + 0.2 for x in xs], vs_compiled, width=0.4, label="vs torch.compile")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(list(xs), names, rotation=30, ha="right")
    ax.set_ylabel("nax speed-up (higher is better)")
    ax.set_title(f"nax vs PyTorch, f32 CPU, {THREADS} threads")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-bench", action="store_true", help="reuse target/criterion results")
    ap.add_argument("--markdown", help="also write the table to this file")
    ap.add_argument("--chart", default=os.path.join(ROOT, "benches", "compare.png"), help="the PNG bar chart")
    opts = ap.parse_args()
    ensure_packages()
    if not opts.skip_bench:
        # Each workload in its own process: the memory an earlier one freed
        # would otherwise back this one's buffers with small pages.
        for name in WORKLOADS:
            env = dict(os.environ, NAX_WORKLOAD=name)
            subprocess.run(["cargo", "bench", "--bench", "workloads"], cwd=ROOT, check=True, env=env)
    subprocess.run(["cargo", "build", "--release", "--bin", "nax"], cwd=ROOT, check=True)
    nax = os.path.join(ROOT, "target", "release", "nax")
    with tempfile.TemporaryDirectory() as tmp:
        # A fresh inductor cache: torch.compile's compile times are cold ones.
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
        import torch
        eager, compiled, compile_s, bandwidth, peak = torch_side(nax, torch, tmp)
    lines = [f"Threads: {THREADS}. PyTorch {torch.__version__}. Measured limits: "
             f"STREAM triad {bandwidth / 1e9:.1f} GB/s, f32 matmul peak {peak / 1e9:.1f} GFLOP/s.", ""]
    lines.append("| workload | nax ms | eager ms | torch.compile ms | nax vs eager | nax vs compile "
                 "| nax of limit | eager of limit | compile of limit | nax compile llvm ms | cranelift ms | torch.compile s |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    names, vs_eager, vs_compiled = [], [], []
    for name, (_, _, moved, flops) in WORKLOADS.items():
        ours = criterion_median_ms(name)
        comp = compile_ms(name)

        def fraction(ms):
            if moved is not None:
                return f"{moved / (ms / 1e3) / bandwidth:.0%} of BW"
            return f"{flops / (ms / 1e3) / peak:.0%} of peak"

        names.append(name)
        vs_eager.append(eager[name] / ours)
        vs_compiled.append(compiled[name] / ours)
        lines.append(f"| {name} | {ours:.2f} | {eager[name]:.2f} | {compiled[name]:.2f} | {vs_eager[-1]:.2f}x | "
                     f"{vs_compiled[-1]:.2f}x | {fraction(ours)} | {fraction(eager[name])} | {fraction(compiled[name])} | "
                     f"{comp.get('llvm', float('nan')):.0f} | {comp.get('cranelift', float('nan')):.0f} | {compile_s[name]:.1f} |")
    chart(opts.chart, names, vs_eager, vs_compiled)
    table = "\n".join(lines)
    print(table)
    if opts.markdown:
        with open(opts.markdown, "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    sys.exit(main())
