#!/usr/bin/env python3
"""nax against PyTorch eager and torch.compile on every workload of
bench/WORKLOADS.md (or those --workload names), and against ONNX Runtime
and OpenVINO on the models users deploy, measured interleaved, in rounds,
so that a noisy shared machine moves every side of a comparison together.

    python3 benches/compare.py [--rounds R] [--seconds S] [--workload NAME ...]
                               [--markdown FILE] [--chart PNG] [--json FILE]

The GPT-2 rows (issue 15) run examples/gpt2/gpt2.nax at GPT-2 small's
sizes on seeded weights: `gpt2_prefill` (`gpt2` on 128 tokens, batch 1,
against the FMA peak) and `gpt2_decode` (`step`: one token after a cache
of 127, against the bandwidth: the weights read once). Where transformers
is importable, each also gets a row NAME_hf whose eager and compile sides
are transformers' own GPT2LMHeadModel (random weights; the decoding step
through its key/value cache, cropped back after each call), measured in the
same rounds. `gpt2_prefill_bf16` and `gpt2_decode_bf16` (issue 37) run the
same file with every parameter and value in bf16 (the worker's bf16
variant, its source from `bench_worker --source NAME`), PyTorch eager and
compiled in bf16 on the same code, and OpenVINO at its default precision
on the f32 model (bf16 on a CPU with AVX512_BF16: what a user who installs
OpenVINO gets); selecting one selects its f32 twin too, whose export it
shares.

`--workload block_so` selects the block's shared library (2b, row `block
.so from C`) with what its row needs: the JIT `block` and its PyTorch sides.

A run whose workloads span more than one of GROUPS (the memory-bound
and small products, GPT-2's inference, training; a run with no --workload
spans all three) measures each group in a process of its own, one after
the other, as if it had been named alone: its table under its own header,
one chart of every row, the JSON file the runs' records in order. A
round holds every side of its workloads at once; all of them together
would not fit in a 23 GB machine.

0. Without an importable PyTorch (and matplotlib), sets up a virtual
   environment in target/bench-venv (CPU wheels of torch, matplotlib) and
   runs itself there.

1. Builds `nax` and the worker (`cargo build --release --bin nax --example
   bench_worker`, benches/worker.rs) and compiles the machine's limits,
   the STREAM triad (benches/triad.c) and the FMA peak (benches/peak.c),
   with `cc -O3 -march=native -fopenmp` (clang-22 where `cc` lacks
   OpenMP), into target/triad and target/peak.
2. Starts one worker process per workload, one after the other, and keeps
   them all alive: each compiles its workload once as
   `cargo bench --bench workloads` does (the same code,
   benches/support/workloads.rs: LLVM back end, optimizer on, seeded
   arguments and weights), times the compile with LLVM and with Cranelift
   (source to callable), and then measures on request, each call
   allocating its output.
2b. For the block (LIBRARIES), also builds its shared library with the C
   ABI (`nax build examples/workloads/block.nax --emit so --timings`,
   the build time being the `total` it prints: source to .so, linked),
   writes seeded weights in [-1, 1) (the JIT worker's distribution) of
   the shapes its manifest (`block_manifest()`) gives into a safetensors
   file, compiles the C worker benches/aot_worker.c against the generated
   header (`cc -std=c99 -O2 -Wall -Wextra -Werror -pedantic`), and starts
   it on the library: the same protocol as the Rust worker, the same
   seeded input, the same thread count, each call through `block_call`
   with its result allocated by the library and freed by its deleter.
3. Loads each workload's PyTorch code (`nax build SRC --emit torch`), eager
   and under `torch.compile` (default mode, a cold inductor cache; its
   compile time is the first call's), on inputs of the same shapes, outputs
   allocated per call, 2 threads (printed) on both sides. For the
   workloads users deploy (DEPLOYED: the GPT-2 rows, `block`, `mlp`),
   exports that code with its weights to ONNX (`torch.onnx.export`) and
   loads it in ONNX Runtime (all graph optimizations, 2 intra-op
   threads) and OpenVINO (CPU, f32 inference precision, the latency hint,
   2 threads; the bf16 rows: its default precision), each checked against
   PyTorch eager before it is timed. ONNX Runtime's GPT-2 is the path its
   users take instead: transformers' GPT2LMHeadModel (random weights; the
   step's cache of 127 as inputs) exported to ONNX and optimized by
   `onnxruntime.transformers.optimizer` with `model_type="gpt2"` (its
   fused layer norms and gelu), checked against that model in PyTorch.
4. Runs --rounds rounds (5 unless told). A round measures, for --seconds
   each (0.5 unless told; at least 3 calls), every workload on each side
   (nax, eager, torch.compile), the C triad once and the FMA peak once
   (both `OMP_NUM_THREADS=2`; the triad on 2^25 floats per array, or four
   times the last-level cache where that is more, counted as 3 arrays x 4
   bytes per element; the peak as independent fused multiply-adds on the
   widest vectors `-march=native` gives). The block's library is a fourth
   side of the block, so that it is measured side by side with the JIT.
   The order rotates from round to round: the round's items (the triad,
   the peak, each workload) and, within each workload, its sides.
5. Reports, for each workload: each side's ms per call (the median over
   rounds of each round's median); nax's speed-up over eager and over
   torch.compile, ONNX Runtime and OpenVINO (the other side's ms over
   nax's), computed per round,
   as the median over rounds and the range (min-max); each side's
   fraction of the machine's limit, per round, median and range: for
   memory-bound workloads the bytes one pass moves over the same round's
   triad bandwidth (its best pass, as STREAM reports), for the others the
   FLOPs over the same round's FMA peak (its best pass: a peak taken
   from matrix products would be circular when nax's is the fastest);
   and the compile times. The row `block .so from C` gives the
   library's ms, its speed-ups and fraction of the limit as for the other
   rows, its ratio to the JIT (the JIT block's ms over the library's, per
   round, median and range) and its build time. The header names the
   CPU (model, family, vector extensions), the threads, PyTorch's version, the
   triad bandwidth and the peak (medians, ranges over rounds). Prints the
   Markdown table (also to --markdown FILE), draws the PNG bar chart of
   the speed-ups with the ranges as error bars, log scale (--chart,
   benches/compare.png unless told), and with --json FILE dumps every raw
   per-round number (and the machine's load average at the start and the
   end: other work on a shared machine shows there).
6. After the rounds, the training rows' peak memory: each side's process
   peak resident memory over three steps after the peak is reset
   (`/proc/self/clear_refs`, so that setup and compile do not count,
   while weights, packed panels and caches still resident do): nax's
   worker (`memory 3`, which also gives the memory plan's figure for one
   call), and eager and torch.compile each set up alone in a fresh
   process of their own (this script's `--peak-memory` mode). Printed as
   a second table.
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
# GPT-2 small (examples/gpt2/gpt2.nax, issue 15): its weights; an
# argument ("int", SHAPE) is token ids in [0, 1000).
GPT2_WEIGHTS = {
    "wte": (50257, 768), "wpe": (1024, 768), "ln1_g": (12, 768), "ln1_b": (12, 768), "attn_w": (12, 768, 2304), "attn_b": (12, 2304),
    "proj_w": (12, 768, 768), "proj_b": (12, 768), "ln2_g": (12, 768), "ln2_b": (12, 768), "fc_w": (12, 768, 3072), "fc_b": (12, 3072),
    "out_w": (12, 3072, 768), "out_b": (12, 768), "lnf_g": (768,), "lnf_b": (768,),
}
GPT2_LAYER_WEIGHTS = 768 * 2304 + 768 * 768 + 2 * 768 * 3072
# The prefill: 128 tokens, batch 1 (FLOPs of the products, the causal
# attention counted whole). The decoding step: one token after 127
# cached, bound by reading the weights once (all but the position table)
# and the caches.
WORKLOADS["gpt2_prefill"] = ([("int", (1, 128))], GPT2_WEIGHTS, None,
                             2 * 128 * (12 * GPT2_LAYER_WEIGHTS + 768 * 50257) + 12 * 2 * 2 * 12 * 128 * 128 * 64)
WORKLOADS["gpt2_decode"] = ([("int", (1, 1)), (12, 1, 12, 127, 64), (12, 1, 12, 127, 64)], GPT2_WEIGHTS,
                            4 * (12 * (GPT2_LAYER_WEIGHTS + 2304 + 5 * 768 + 3072) + 50257 * 768 + 2 * 768) + 2 * 4 * 12 * 12 * 127 * 64, None)
# The bf16 variants (issue 37): every parameter and value bf16, so the
# decoding step reads half the bytes. Each names its f32 twin.
BF16 = {"gpt2_prefill_bf16": "gpt2_prefill", "gpt2_decode_bf16": "gpt2_decode"}
WORKLOADS["gpt2_prefill_bf16"] = WORKLOADS["gpt2_prefill"]
WORKLOADS["gpt2_decode_bf16"] = WORKLOADS["gpt2_decode"][:2] + (WORKLOADS["gpt2_decode"][2] // 2, None)
# Training (issue 39): GPT-2 small's step (the cross entropy of 128
# tokens and every parameter's gradient: the products forward, and twice
# their FLOPs backward) and the block's (its value against a gradient of
# its output, and the gradients by its input and every weight). nax runs
# `train_step` and `block_train`. PyTorch runs, eager and under
# torch.compile, what its users run: for GPT-2, transformers'
# GPT2LMHeadModel(labels=...) and `backward()` (its own fused code; the
# `--emit torch` code of `loss` where transformers is not importable);
# for the block, the `--emit torch` code of `block` with the weights
# requiring gradients, then `backward()`.
WORKLOADS["gpt2_train_step"] = ([("int", (1, 128)), ("int", (1, 128))], GPT2_WEIGHTS, None, 3 * WORKLOADS["gpt2_prefill"][3])
WORKLOADS["block_train"] = ([(4, 256, 512), (4, 256, 512)], BLOCK_WEIGHTS, None, 3 * WORKLOADS["block"][3])
TRAINING = {"gpt2_train_step": "loss", "block_train": "block"}
# The function each workload runs, where it is not the workload's name.
FUNCTIONS = {"gpt2_prefill": "gpt2", "gpt2_decode": "step", "gpt2_prefill_bf16": "gpt2", "gpt2_decode_bf16": "step", "gpt2_train_step": "train_step"}
# Workloads also measured on transformers' own model (GPT2LMHeadModel, GPT-2
# small's configuration, random weights), eager and compiled, when
# transformers is importable: the row NAME_hf.
MODELS = ("gpt2_prefill", "gpt2_decode")
SIDES = ("nax", "eager", "compile")
# Workloads also measured on the runtimes users deploy with (issue 27):
# ONNX Runtime (all graph optimizations) and OpenVINO (f32 precision, the
# latency hint), each on the ONNX model `torch.onnx.export` makes of the
# workload's PyTorch code (weights as constants), checked against PyTorch
# eager before timing: the sides "ort" and "openvino".
DEPLOYED = ("gpt2_prefill", "gpt2_decode", "block", "mlp") + tuple(BF16)
RUNTIMES = ("ort", "openvino")
# Workloads also measured through their shared library called from C
# (benches/aot_worker.c), as the side "so": the row NAME_so.
LIBRARIES = ("block",)
# The workloads measured together, in a process of their own, when a run
# names workloads of more than one group (a run with no --workload names
# them all). A round holds every side of its workloads at once, to
# interleave them; GPT-2's inference and training sides together (its
# models eager, compiled, exported to ONNX Runtime and OpenVINO, at f32
# and bf16, and with gradients) took this process past 14 GB and out of
# a 23 GB machine's memory. Each group's ratios and fractions are
# measured within its own rounds.
GROUPS = (
    ("elementwise", "gelu_bias", "transpose_add", "layernorm", "softmax_mid", "attention", "mlp", "gemm", "einsum_chain", "block"),
    ("gpt2_prefill", "gpt2_decode", "gpt2_prefill_bf16", "gpt2_decode_bf16"),
    ("gpt2_train_step", "block_train"),
)
assert sorted(n for g in GROUPS for n in g) == sorted(WORKLOADS), "every workload is in exactly one group"
# The vector extensions the header names, as /proc/cpuinfo's flags spell them.
EXTENSIONS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_fp16", "amx_tile")


def timed(fn, seconds):
    """Calls fn repeatedly for about `seconds` (at least 3 calls), as the
    worker does: the median and the fastest call's ms, and the count."""
    times = []
    start = time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < seconds:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3, "calls": len(times)}


def source_of(name, worker):
    if name == "elementwise":
        return ELEMENTWISE
    if name in BF16 or name == "block_train":
        return subprocess.run([worker, "--source", name], capture_output=True, text=True, check=True).stdout
    path = os.path.join(ROOT, "examples", "gpt2", "gpt2.nax") if name in FUNCTIONS else os.path.join(ROOT, "examples", "workloads", name + ".nax")
    with open(path) as f:
        return f.read()


def argument(torch, spec, dtype):
    """A seeded argument: token ids for ("int", SHAPE), else floats in [-1, 1) of `dtype`."""
    if isinstance(spec[0], str):
        return torch.randint(0, 1000, spec[1])
    return (torch.rand(spec) * 2 - 1).to(dtype)


VENV = os.path.join(ROOT, "target", "bench-venv")


def ensure_packages():
    """Re-runs this script in target/bench-venv when torch, matplotlib,
    ONNX Runtime, OpenVINO, onnxscript (torch.onnx's exporter) or
    transformers (ONNX Runtime's GPT-2 side exports its model; pinned as CI
    pins it) is missing."""
    try:
        import matplotlib  # noqa: F401
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401
        import openvino  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
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
    subprocess.run([python, "-m", "pip", "install", "-q", "matplotlib", "numpy", "onnx", "onnxscript", "onnxruntime", "openvino", "transformers==5.25.0"],
                   check=True)
    os.execv(python, [python] + sys.argv)


def build():
    """Builds nax and the worker, compiles the triad and the peak; their paths."""
    subprocess.run(["cargo", "build", "--release", "--bin", "nax", "--example", "bench_worker"], cwd=ROOT, check=True)
    release = os.path.join(ROOT, "target", "release")
    return os.path.join(release, "nax"), os.path.join(release, "examples", "bench_worker"), compile_c("triad"), compile_c("peak")


def compile_c(name):
    """benches/NAME.c compiled with OpenMP for this CPU into target/NAME."""
    binary = os.path.join(ROOT, "target", name)
    source = os.path.join(ROOT, "benches", name + ".c")
    for cc in ("cc", "clang-22"):
        built = subprocess.run([cc, "-O3", "-march=native", "-fopenmp", source, "-o", binary], capture_output=True, text=True)
        if built.returncode == 0:
            return binary
        print(f"{cc} could not build benches/{name}.c:\n{built.stderr.strip()}", file=sys.stderr)
    sys.exit(f"error: no C compiler with OpenMP built benches/{name}.c")


class Worker:
    """One workload's nax side, a bench_worker process kept alive (or its
    library's, an aot_worker process: the same protocol, no compile times)."""

    def __init__(self, command, name):
        self.name = name
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        ready = self.reply()
        if not ready.get("ready"):
            sys.exit(f"error: the {name} worker did not start: {ready}")
        self.compile_ms = ready.get("compile_ms")
        self.threads = ready["threads"]

    def reply(self):
        line = self.process.stdout.readline()
        if not line:
            sys.exit(f"error: the {self.name} worker exited (status {self.process.wait()})")
        return json.loads(line)

    def measure(self, seconds):
        self.process.stdin.write(f"measure {seconds}\n")
        self.process.stdin.flush()
        return self.reply()

    def memory(self, calls):
        """The process's peak resident memory over `calls` calls (after the
        peak is reset) and the memory plan's figure for one call."""
        self.process.stdin.write(f"memory {calls}\n")
        self.process.stdin.flush()
        return self.reply()

    def close(self):
        if self.process.poll() is None:
            try:
                self.process.stdin.write("quit\n")
                self.process.stdin.close()
            except BrokenPipeError:
                pass
        self.process.wait()


def write_safetensors(path, tensors):
    """Numpy arrays by name into a safetensors file: the length of the JSON
    header (8 bytes, little-endian), the header (padded with spaces to 8
    bytes), the arrays' bytes, row-major, one after the other."""
    dtypes = {"float32": "F32", "float64": "F64"}
    header, offset = {}, 0
    for name, t in tensors.items():
        header[name] = {"dtype": dtypes[t.dtype.name], "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for t in tensors.values():
            f.write(t.tobytes())


def library_worker(nax, tmp, name):
    """The workload's shared library, built into tmp, and a C worker on it
    (benches/aot_worker.c, compiled against the library's header) calling
    its function on seeded weights and input; with the build's ms (the
    `total` of `nax build --timings`)."""
    import ctypes
    import numpy
    library = os.path.join(tmp, f"lib{name}.so")
    built = subprocess.run([nax, "build", os.path.join(ROOT, "examples", "workloads", name + ".nax"), "--emit", "so", "-o", library, "--timings"],
                           capture_output=True, text=True)
    if built.returncode != 0:
        sys.exit(f"error: nax build --emit so failed on {name}:\n{built.stderr.strip()}")
    build_ms = next(float(line.split()[1]) for line in built.stderr.splitlines() if line.split()[:1] == ["total"])
    manifest_fn = getattr(ctypes.CDLL(library), name + "_manifest")
    manifest_fn.restype = ctypes.c_char_p
    manifest = json.loads(manifest_fn())

    def shape(p):
        if not all(isinstance(size, int) for _, size in p["axes"]) or p["dtype"] not in ("f32", "f64"):
            sys.exit(f"error: lib{name}.so's `{p['name']}` is not a float tensor of constant sizes: {p}")
        return [size for _, size in p["axes"]]

    rng = numpy.random.default_rng(0)
    weights = os.path.join(tmp, name + "_weights.safetensors")
    write_safetensors(weights, {w["name"]: rng.uniform(-1, 1, shape(w)).astype("float" + w["dtype"][1:]) for w in manifest["weights"]})
    binary = os.path.join(tmp, "aot_worker")
    subprocess.run(["cc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic", f'-DNAX_HEADER="{os.path.join(tmp, name + ".h")}"',
                    os.path.join(ROOT, "benches", "aot_worker.c"), "-o", binary, "-ldl"], check=True)
    function = next(f for f in manifest["functions"] if f["name"] == name)
    params = [f"{p['name']}:{p['dtype']}:{','.join(map(str, shape(p)))}" for p in function["params"]]
    return Worker([binary, library, name, name, weights, str(THREADS)] + params, name + "_so"), build_ms


def limit(binary, seconds):
    """One run of a C measurement of the machine's limit (the triad: its
    best and median pass in GB/s; the peak: in GFLOP/s)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(THREADS))
    run = subprocess.run([binary, str(seconds)], env=env, capture_output=True, text=True, check=True)
    result = json.loads(run.stdout)
    if result["threads"] != THREADS:
        sys.exit(f"error: {binary} ran on {result['threads']} threads, not {THREADS}")
    return result


def torch_side(nax, worker, torch, tmp, names, only=None):
    """Each workload's PyTorch callables, eager and under torch.compile (with
    the compile time: the first call's), on seeded inputs (bf16 floats for
    the bf16 variants); `only` one of the two sides, where it is named (a
    memory measurement's process holds nothing of the other)."""
    sides, compile_s, inputs = {}, {}, {}
    for name in names:
        shapes, weight_shapes, _, _ = WORKLOADS[name]
        dtype = torch.bfloat16 if name in BF16 else torch.float32
        src = os.path.join(tmp, name + ".nax")
        py = os.path.join(tmp, name + "_torch.py")
        with open(src, "w") as f:
            f.write(source_of(name, worker))
        subprocess.run([nax, "build", src, "--emit", "torch", "-o", py], check=True)
        spec = importlib.util.spec_from_file_location(name + "_torch", py)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        args = [argument(torch, s, dtype) for s in shapes]
        weights = {w: ((torch.rand(s) * 2 - 1) * 0.05).to(dtype) for w, s in weight_shapes.items()}
        hf = name == "gpt2_train_step" and importlib.util.find_spec("transformers") is not None
        if hf:
            # transformers' model holds its own weights.
            fn, weights = (None if only == "compile" else transformers_training(torch)), {}
        elif name in TRAINING:
            fn = training(torch, getattr(module, TRAINING[name]), name == "block_train")
            weights = {w: t.requires_grad_() for w, t in weights.items()}
        else:
            fn = getattr(module, FUNCTIONS.get(name, name))
        sides[name] = {}
        if fn is not None:
            fn(*args, **weights)
            sides[name]["eager"] = lambda fn=fn, args=args, weights=weights: fn(*args, **weights)
        if only != "eager":
            fast = transformers_training(torch, compiled=True) if hf else torch.compile(fn)
            start = time.perf_counter()
            fast(*args, **weights)
            compile_s[name] = time.perf_counter() - start
            sides[name]["compile"] = lambda fast=fast, args=args, weights=weights: fast(*args, **weights)
        inputs[name] = (fn, args, weights)
    return sides, compile_s, inputs


def training(torch, forward, against_gradient):
    """A training step of `forward` (gradients enabled whatever the
    caller's mode): its value (times the last argument, a gradient of its
    output, summed, where `against_gradient`), then `backward()`; gives
    every weight's gradient, freed before the next step as an optimizer's
    `zero_grad` does."""
    def step(*args, **weights):
        with torch.enable_grad():
            for w in weights.values():
                w.grad = None
            if against_gradient:
                *inputs, dy = args
                value = (forward(*inputs, **weights) * dy).sum()
            else:
                value = forward(*args, **weights)
            value.backward()
            return [w.grad for w in weights.values()]
    return step


def transformers_training(torch, compiled=False):
    """transformers' GPT-2 small (random weights, no dropout) training step
    on the given tokens (the same work as nax's: 128 positions through the
    model and the head): the next-token cross entropy (`labels`, which
    transformers shifts itself), `backward()`, every gradient."""
    from transformers import GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config()).eval()
    run = torch.compile(model) if compiled else model

    def step(tokens, _targets, **_weights):
        with torch.enable_grad():
            model.zero_grad(set_to_none=True)
            run(tokens, labels=tokens, use_cache=False).loss.backward()
            return [p.grad for p in model.parameters()]
    return step


def peak_rss(step, calls=3):
    """The process's peak resident memory over `calls` steps, in bytes:
    the peak is reset first (Linux's /proc/self/clear_refs), so what the
    setup and the compile held and freed does not count, while everything
    still resident (weights, packed panels, caches) does."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    for _ in range(calls):
        step()
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    return kib * 1024


def torch_peak_memory(nax, worker, name, side):
    """Mode `--peak-memory`: one PyTorch side of a training workload set
    up alone in this fresh process, warmed up, then its peak resident
    memory over three steps, printed as JSON."""
    import torch
    torch.set_num_threads(THREADS)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
        with torch.no_grad():
            sides, _, _ = torch_side(nax, worker, torch, tmp, [name], only=side)
            step = sides[name][side]
            step()
            print(json.dumps({"peak_rss_bytes": peak_rss(step)}))


def peak_memory(nax, worker_binary, workers, names):
    """Each training workload's peak resident memory per side: nax's
    worker (and its memory plan's figure for one call), and each PyTorch
    side in a process of its own (`--peak-memory`), three steps each after
    the peak is reset."""
    memory = {}
    for name in names:
        if name not in TRAINING:
            continue
        nax_side = workers[name].memory(3)
        memory[name] = {"nax": nax_side["peak_rss_bytes"], "nax_plan": nax_side["plan_bytes"]}
        for side in ("eager", "compile"):
            run = subprocess.run([sys.executable, os.path.abspath(__file__), "--peak-memory", name, side, nax, worker_binary],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"error: the {side} side's memory of {name} was not measured:\n{run.stderr[-2000:]}")
            memory[name][side] = json.loads(run.stdout.strip().splitlines()[-1])["peak_rss_bytes"]
    return memory


def memory_table(memory):
    """The Markdown table of the training rows' peak memory."""
    mb = lambda b: f"{b / 1e6:.0f}"
    lines = ["", "", "Peak resident memory of a process over three training steps, after the peak is reset (MB; the memory plan's "
             "figure is what one nax call allocates at most, the weights and their packed panels apart):", "",
             "| workload | nax process | nax memory plan | eager process | torch.compile process | nax / eager | nax / compile |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, m in memory.items():
        lines.append(f"| {name} | {mb(m['nax'])} | {mb(m['nax_plan'])} | {mb(m['eager'])} | {mb(m['compile'])} | "
                     f"{m['nax'] / m['eager']:.2f} | {m['nax'] / m['compile']:.2f} |")
    return "\n".join(lines)


def check_against(name, side, got, want, tolerance):
    """Exits unless every output is within `tolerance` of the largest
    magnitude of PyTorch's (and 1e-5)."""
    import numpy as np
    for g, w in zip(got, want):
        error = float(np.abs(g - w).max())
        if not error <= tolerance * float(np.abs(w).max()) + 1e-5:
            sys.exit(f"error: {name} on {side} differs from PyTorch by {error:g}")


def runtime_sides(torch, tmp, inputs):
    """ONNX Runtime and OpenVINO (f32) on the ONNX export of each DEPLOYED
    workload's PyTorch code: {name: {"ort": .., "openvino": ..}}, each
    checked against PyTorch eager (within 1e-4 of its largest magnitude);
    the GPT-2 rows' ONNX Runtime is transformers' model (`ort_gpt2`), and
    a bf16 variant's OpenVINO is its f32 twin's export at OpenVINO's default
    precision (within 3e-2)."""
    import onnxruntime as ort
    import openvino as ov
    sides = {}
    for name, (fn, args, weights) in inputs.items():
        if name not in DEPLOYED or name in BF16:
            continue

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                for k, v in weights.items():
                    self.register_buffer(k, v)

            def forward(self, *xs):
                return fn(*xs, **{k: getattr(self, k) for k in weights})

        model = Model().eval()
        # A function of several results (the decoding step) returns a tuple.
        got = model(*args)
        want = [t.numpy() for t in (got if isinstance(got, tuple) else (got,))]
        path = os.path.join(tmp, name + ".onnx")
        torch.onnx.export(model, tuple(args), path, dynamo=True, external_data=False, optimize=True)
        calls = {"openvino": openvino_call(ov, path, args, {"INFERENCE_PRECISION_HINT": "f32"})}
        check_against(name, "openvino", calls["openvino"](), want, 1e-4)
        if name in MODELS:
            # Checked against transformers' model, which it runs.
            calls["ort"] = ort_gpt2(torch, tmp, name)
        else:
            calls["ort"] = ort_call(ort, path, args)
            check_against(name, "ort", calls["ort"](), want, 1e-4)
        sides[name] = calls
        for variant in (v for v, twin in BF16.items() if twin == name and v in inputs):
            default = openvino_call(ov, path, args, {})
            check_against(variant, "openvino (default precision)", default(), want, 3e-2)
            sides[variant] = {"openvino": default}
    return sides


def ort_call(ort, path, args):
    """A call of the ONNX model at `path` on `args` in ONNX Runtime (all
    graph optimizations, THREADS intra-op threads), returning every output."""
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = THREADS, 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)}
    return lambda: session.run(None, feeds)


def openvino_call(ov, path, args, config):
    """A call of the ONNX model at `path` on `args` in OpenVINO (CPU, THREADS
    threads, the latency hint, and `config`: an inference precision, or none
    for OpenVINO's default, which it prints), returning every output."""
    compiled = ov.Core().compile_model(path, "CPU", dict({"INFERENCE_NUM_THREADS": THREADS, "PERFORMANCE_HINT": "LATENCY"}, **config))
    if not config:
        print(f"OpenVINO's default precision here: {compiled.get_property('INFERENCE_PRECISION_HINT')}", file=sys.stderr)
    request, arrays, outputs = compiled.create_infer_request(), [a.numpy() for a in args], compiled.outputs

    def every_output():
        results = request.infer(arrays)
        return [results[o] for o in outputs]
    return every_output


def ort_gpt2(torch, tmp, name):
    """ONNX Runtime's own GPT-2 path for `gpt2_prefill` or `gpt2_decode`:
    transformers' GPT2LMHeadModel (GPT-2 small, random weights) exported to
    ONNX (its logits; the step with a cache of 127 given as stacked keys and
    values), optimized by `onnxruntime.transformers.optimizer` with
    `model_type="gpt2"`, checked against the model in PyTorch (1e-4); the
    session's call. The exporter writes products without a bias as `Gemm`
    of two inputs, which the optimizer's GPT-2 pass cannot read: each gets
    a zero bias first."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    from onnxruntime.transformers import optimizer
    from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config()).eval()

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids, keys=None, values=None):
            if keys is None:
                return self.model(ids, use_cache=False).logits
            cache = DynamicCache(config=model.config)
            for layer in range(keys.shape[0]):
                cache.update(keys[layer], values[layer], layer)
            return self.model(ids, past_key_values=cache, use_cache=True).logits

    if name == "gpt2_prefill":
        args = (torch.randint(0, 1000, (1, 128)),)
    else:
        prompt = model(torch.randint(0, 1000, (1, 127)), use_cache=True).past_key_values
        args = (torch.randint(0, 1000, (1, 1)), torch.stack([c.keys for c in prompt.layers]), torch.stack([c.values for c in prompt.layers]))
    want = [Step()(*args).numpy()]
    path = os.path.join(tmp, name + "_hf.onnx")
    torch.onnx.export(Step(), args, path, dynamo=True, external_data=False, optimize=True)
    exported = onnx.load(path)
    initializers = {i.name: i for i in exported.graph.initializer}
    for node in exported.graph.node:
        if node.op_type == "Gemm" and len(node.input) == 2:
            weight = initializers[node.input[1]]
            transposed = any(a.name == "transB" and a.i for a in node.attribute)
            exported.graph.initializer.append(numpy_helper.from_array(np.zeros(weight.dims[0 if transposed else 1], np.float32), node.name + "_zero_bias"))
            node.input.append(node.name + "_zero_bias")
    onnx.save(exported, path)
    optimized = optimizer.optimize_model(path, model_type="gpt2", num_heads=12, hidden_size=768)
    print(f"ONNX Runtime's optimizer on {name}: {optimized.get_fused_operator_statistics()}", file=sys.stderr)
    optimized.save_model_to_file(path)
    call = ort_call(ort, path, args)
    check_against(name, "ort (transformers' model, optimized)", call(), want, 1e-4)
    return call


def transformers_side(torch, names):
    """transformers' GPT2LMHeadModel (GPT-2 small, random weights) on the
    GPT-2 workloads, eager and compiled: {name: {"hf": .., "hf_compile": ..}},
    and the compile times; empty where transformers is not importable."""
    wanted = [n for n in names if n in MODELS]
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        if wanted:
            print("transformers is not importable: the GPT-2 rows have no transformers model side", file=sys.stderr)
        return {}, {}
    if not wanted:
        return {}, {}
    model = GPT2LMHeadModel(GPT2Config()).eval()
    fast = torch.compile(model)
    sides, compile_s = {}, {}
    for name in wanted:
        if name == "gpt2_prefill":
            tokens = torch.randint(0, 1000, (1, 128))
            calls = {s: (lambda m=m: m(tokens, use_cache=False)) for s, m in (("hf", model), ("hf_compile", fast))}
        else:
            prompt, token = torch.randint(0, 1000, (1, 127)), torch.randint(0, 1000, (1, 1))
            cache = model(prompt, use_cache=True).past_key_values

            def step(m, cache=cache, token=token):
                out = m(token, past_key_values=cache, use_cache=True)
                cache.crop(-1)
                return out
            calls = {s: (lambda m=m: step(m)) for s, m in (("hf", model), ("hf_compile", fast))}
        calls["hf"]()
        start = time.perf_counter()
        calls["hf_compile"]()
        compile_s[name + "_hf"] = time.perf_counter() - start
        sides[name] = calls
    return sides, compile_s


def rotated(items, r):
    k = r % len(items)
    return items[k:] + items[:k]


def rounds(opts, names, libraries, workers, sides, limits, models):
    """Every round's raw numbers."""
    items = list(limits) + list(names)
    raw = []
    for r in range(opts.rounds):
        record = {"round": r, "order": [], "workloads": {}}
        for item in rotated(items, r):
            if item in limits:
                record["order"].append(item)
                record[item] = limit(limits[item], opts.seconds)
            else:
                record["workloads"][item] = {}
                extra = (["so"] if item in libraries else []) + list(models.get(item, {}))
                for side in rotated(list(SIDES) + extra, r):
                    record["order"].append(f"{item}/{side}")
                    if side == "nax":
                        record["workloads"][item][side] = workers[item].measure(opts.seconds)
                    elif side == "so":
                        record["workloads"][item][side] = workers[item + "_so"].measure(opts.seconds)
                    elif side in models.get(item, {}):
                        record["workloads"][item][side] = timed(models[item][side], opts.seconds)
                    else:
                        record["workloads"][item][side] = timed(sides[item][side], opts.seconds)
        raw.append(record)
        print(f"round {r + 1}/{opts.rounds}: triad {record['triad']['best_gbs']:.1f} GB/s, peak {record['peak']['best_gflops']:.1f} GFLOP/s",
              file=sys.stderr, flush=True)
    return raw


def peak_vector_bytes(raw):
    return raw[0]["peak"]["vector_bytes"]


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(raw, names, libraries, models):
    """Medians over rounds, per-round ratios and fractions of the limit;
    the rows NAME_so (the library as nax's side, and its ratio to the JIT)
    and NAME_hf (transformers' model as the eager and compiled sides); the
    runtimes' sides (ONNX Runtime, OpenVINO) in their workload's row."""
    # A round's bandwidth is its triad's best pass, STREAM's figure: the
    # triad's two threads wait for each other at every pass's end, so a
    # pass that lost a core to the machine's other work is the triad's
    # loss, not the memory's limit.
    bandwidth = [r["triad"]["best_gbs"] * 1e9 for r in raw]
    # A round's peak is the best pass of the FMA chains (benches/peak.c),
    # for the same reason: a peak taken from a matrix product would be
    # circular when nax's is the fastest in the run.
    peak = [r["peak"]["best_gflops"] * 1e9 for r in raw]
    summary = {"bandwidth": spread(bandwidth), "peak_flops": spread(peak), "workloads": {}}
    for name in names:
        _, _, moved, flops = WORKLOADS[name]
        ms = {s: [r["workloads"][name][s]["median_ms"] for r in raw] for s in SIDES}
        rows = {name: ms}
        if name in libraries:
            rows[name + "_so"] = dict(ms, nax=[r["workloads"][name]["so"]["median_ms"] for r in raw])
        if "hf" in models.get(name, {}):
            rows[name + "_hf"] = dict(ms, eager=[r["workloads"][name]["hf"]["median_ms"] for r in raw],
                                      compile=[r["workloads"][name]["hf_compile"]["median_ms"] for r in raw])

        def fraction(ms_s, bw, top):
            return moved / (ms_s / 1e3) / bw if moved is not None else flops / (ms_s / 1e3) / top

        for row, times in rows.items():
            summary["workloads"][row] = {
                "ms": {s: statistics.median(times[s]) for s in SIDES},
                "vs_eager": spread([e / n for e, n in zip(times["eager"], times["nax"])]),
                "vs_compile": spread([c / n for c, n in zip(times["compile"], times["nax"])]),
                "of_limit": {s: spread([fraction(t, bw, top) for t, bw, top in zip(times[s], bandwidth, peak)]) for s in SIDES},
                "limit": "bandwidth" if moved is not None else "peak",
            }
        runtimes = [r for r in RUNTIMES if r in models.get(name, {})]
        for r in runtimes:
            times = [x["workloads"][name][r]["median_ms"] for x in raw]
            w = summary["workloads"][name]
            w["ms"][r] = statistics.median(times)
            w["vs_" + r] = spread([t / n for t, n in zip(times, rows[name]["nax"])])
            w["of_limit"][r] = spread([fraction(t, bw, top) for t, bw, top in zip(times, bandwidth, peak)])
        if name in libraries:
            summary["workloads"][name + "_so"]["jit_vs_so"] = spread([j / so for j, so in zip(rows[name]["nax"], rows[name + "_so"]["nax"])])
    return summary


def cpu():
    """The CPU's model name, its family (`family()`) and which of
    EXTENSIONS its flags show."""
    fields, flags = {}, set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags" and not flags:
                    flags = set(value.split())
                else:
                    fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields.get("model name", "unknown CPU"), family(fields, flags), [e for e in EXTENSIONS if e in flags]


def family(fields, flags):
    """The CPU family the floors of issue 37 are met on: AMD Zen 4 (AVX-512
    on a 256-bit datapath), Zen 5, an Intel core with AMX (Sapphire Rapids
    or later), or the vendor with CPUID's family and model."""
    vendor = fields.get("vendor_id", "")
    try:
        number, model = int(fields.get("cpu family", "")), int(fields.get("model", ""))
    except ValueError:
        return "unknown family"
    if vendor == "AuthenticAMD" and number == 0x19 and (0x10 <= model <= 0x1F or 0x60 <= model <= 0x7F or 0xA0 <= model <= 0xAF):
        return "AMD Zen 4"
    if vendor == "AuthenticAMD" and number == 0x1A:
        return "AMD Zen 5"
    if vendor == "GenuineIntel" and "amx_tile" in flags:
        return f"Intel with AMX (Sapphire Rapids or later; family {number}, model {model})"
    return f"{vendor or 'unknown vendor'} family {number}, model {model}"


def table(summary, rows, compile_ms, compile_s, header):
    """The Markdown table: a row per workload, and per library (NAME_so:
    its ratio to the JIT in its name, its build time as its compile time,
    the PyTorch sides of its workload)."""
    def ratio(s):
        return f"{s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f})"

    def fraction(s, limit):
        return f"{s['median']:.0%} ({s['min']:.0%}-{s['max']:.0%}) of {'BW' if limit == 'bandwidth' else 'peak'}"

    def runtime(w, r):
        if r not in w["ms"]:
            return "- | -"
        return f"{w['ms'][r]:.2f} | {ratio(w['vs_' + r])}"

    def limit(w, side):
        return fraction(w["of_limit"][side], w["limit"]) if side in w["of_limit"] else "-"

    lines = [header, "", "ONNX Runtime on the GPT-2 rows is transformers' model optimized by ONNX Runtime's transformer optimizer; "
             "OpenVINO runs at f32 precision, and at its default precision on the bf16 rows.", ""]
    lines.append("| workload | nax ms | eager ms | torch.compile ms | nax vs eager | nax vs compile "
                 "| ONNX Runtime ms | nax vs ONNX Runtime | OpenVINO ms | nax vs OpenVINO "
                 "| nax of limit | eager of limit | compile of limit | ONNX Runtime of limit | OpenVINO of limit "
                 "| nax compile llvm ms | cranelift ms | torch.compile s |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        w = summary["workloads"][row]
        ms, of = w["ms"], w["of_limit"]
        name = row.removesuffix("_so").removesuffix("_hf")
        torch_compile_s = compile_s[row] if row.endswith("_hf") else compile_s[name]
        if "jit_vs_so" in w:
            label, llvm, cranelift = f"{name} .so from C (JIT ms / .so ms {ratio(w['jit_vs_so'])})", f"{compile_ms[row]['llvm']:.0f}", "-"
        elif row.endswith("_hf"):
            label, llvm, cranelift = f"{name}, transformers' GPT2LMHeadModel as eager and compile", "-", "-"
        else:
            label, llvm, cranelift = name, f"{compile_ms[row]['llvm']:.0f}", f"{compile_ms[row]['cranelift']:.0f}"
        lines.append(f"| {label} | {ms['nax']:.2f} | {ms['eager']:.2f} | {ms['compile']:.2f} | {ratio(w['vs_eager'])} | "
                     f"{ratio(w['vs_compile'])} | {runtime(w, 'ort')} | {runtime(w, 'openvino')} | "
                     f"{fraction(of['nax'], w['limit'])} | {fraction(of['eager'], w['limit'])} | "
                     f"{fraction(of['compile'], w['limit'])} | {limit(w, 'ort')} | {limit(w, 'openvino')} | "
                     f"{llvm} | {cranelift} | {torch_compile_s:.1f} |")
    return "\n".join(lines)


def chart(path, names, summary, rounds_run):
    """Bars of nax's speed-up over eager and over torch.compile (median over
    rounds, the range as error bars), log scale."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(10, 4.5))
    xs = range(len(names))
    for key, label, dx in (("vs_eager", "vs PyTorch eager", -0.2), ("vs_compile", "vs torch.compile", 0.2)):
        s = [summary["workloads"][n][key] for n in names]
        med = [v["median"] for v in s]
        err = [[v["median"] - v["min"] for v in s], [v["max"] - v["median"] for v in s]]
        ax.bar([x + dx for x in xs], med, width=0.4, yerr=err, capsize=3, label=label)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(list(xs), names, rotation=30, ha="right")
    ax.set_ylabel("nax speed-up (higher is better)")
    ax.set_title(f"nax vs PyTorch, f32 CPU, {THREADS} threads, median and range over {rounds_run} rounds")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def grouped(opts, groups, libraries):
    """Runs each group's workloads in a process of its own, one after the
    other (see GROUPS): the tables one after the other, each under its
    run's header; one chart of every workload; the JSON file the runs'
    records, in order."""
    runs, texts = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i, group in enumerate(groups):
            print(f"group {i + 1}/{len(groups)}: {', '.join(group)}", file=sys.stderr, flush=True)
            json_path, markdown_path = os.path.join(tmp, f"{i}.json"), os.path.join(tmp, f"{i}.md")
            selected = group + [n + "_so" for n in group if n in libraries]
            command = [sys.executable, os.path.abspath(__file__), "--rounds", str(opts.rounds), "--seconds", str(opts.seconds),
                       "--json", json_path, "--markdown", markdown_path, "--chart", os.path.join(tmp, f"{i}.png")]
            subprocess.run(command + [a for n in selected for a in ("--workload", n)], check=True, stdout=subprocess.DEVNULL)
            with open(json_path) as f:
                runs.append(json.load(f))
            with open(markdown_path) as f:
                texts.append(f.read().strip())
    names = [n for g in groups for n in g]
    summary = {"workloads": {k: v for run in runs for k, v in run["summary"]["workloads"].items()}}
    chart(opts.chart, names, summary, opts.rounds)
    text = "\n\n".join(texts)
    print(text)
    if opts.markdown:
        with open(opts.markdown, "w") as f:
            f.write(text + "\n")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"runs": runs}, f, indent=1)
            f.write("\n")


def main():
    ap = argparse.ArgumentParser(description="nax against PyTorch eager and torch.compile, interleaved in rounds")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of measurements (default 5)")
    ap.add_argument("--seconds", type=float, default=0.5, help="seconds each side is measured in each round (default 0.5)")
    ap.add_argument("--workload", action="append", choices=list(WORKLOADS) + [n + "_so" for n in LIBRARIES],
                    help="only this workload (repeatable); NAME_so: NAME's library, with NAME")
    ap.add_argument("--markdown", help="also write the table to this file")
    ap.add_argument("--chart", default=os.path.join(ROOT, "benches", "compare.png"), help="the PNG bar chart")
    ap.add_argument("--json", help="dump every raw per-round number to this file")
    ap.add_argument("--peak-memory", nargs=4, metavar=("NAME", "SIDE", "NAX", "WORKER"), help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.peak_memory:
        name, side, nax, worker = opts.peak_memory
        return torch_peak_memory(nax, worker, name, side)
    if opts.rounds < 1 or not opts.seconds > 0:
        ap.error("--rounds must be at least 1 and --seconds above 0")
    ensure_packages()
    load = {"start": os.getloadavg()}
    libraries = [n for n in LIBRARIES if opts.workload is None or n + "_so" in opts.workload]
    # A bf16 variant's OpenVINO side is its f32 twin's export: the twin comes along.
    twins = [BF16[n] for n in opts.workload or () if n in BF16]
    names = [n for n in WORKLOADS if opts.workload is None or n in opts.workload or n in libraries or n in twins]
    groups = [[n for n in g if n in names] for g in GROUPS]
    if sum(1 for g in groups if g) > 1:
        return grouped(opts, [g for g in groups if g], libraries)
    nax, worker_binary, triad_binary, peak_binary = build()
    workers, build_ms = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            # One process per workload (and library), kept alive: no other
            # workload's freed memory shapes its page layout. Started one
            # after the other, so that their compile times do not share the cores.
            for name in names:
                workers[name] = Worker([worker_binary, name, str(THREADS)], name)
                if name in libraries:
                    workers[name + "_so"], build_ms[name] = library_worker(nax, tmp, name)
            for name, w in workers.items():
                if w.threads != THREADS:
                    sys.exit(f"error: the {name} worker has {w.threads} threads, not {THREADS}")
            # A fresh inductor cache: torch.compile's compile times are cold ones.
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
            import torch
            torch.set_num_threads(THREADS)
            with torch.no_grad():
                sides, compile_s, inputs = torch_side(nax, worker_binary, torch, tmp, names)
                models, model_compile_s = transformers_side(torch, names)
                compile_s.update(model_compile_s)
                for name, calls in runtime_sides(torch, tmp, inputs).items():
                    models.setdefault(name, {}).update(calls)
                raw = rounds(opts, names, libraries, workers, sides, {"triad": triad_binary, "peak": peak_binary}, models)
            # After the rounds, each side's memory, one side per process.
            memory = peak_memory(nax, worker_binary, workers, names)
        finally:
            for w in workers.values():
                w.close()
    load["end"] = os.getloadavg()
    summary = summarize(raw, names, libraries, models)
    model, cpu_family, extensions = cpu()
    bw, top = summary["bandwidth"], summary["peak_flops"]
    import onnxruntime
    import openvino
    header = (f"CPU: {model}, {cpu_family} ({', '.join(extensions) or 'none of ' + ', '.join(EXTENSIONS)}). Threads: {THREADS}. "
              f"PyTorch {torch.__version__}, ONNX Runtime {onnxruntime.__version__}, OpenVINO {openvino.__version__}. "
              f"{opts.rounds} rounds of {opts.seconds:g} s per side. "
              f"STREAM triad (C, OpenMP, best pass per round) {bw['median'] / 1e9:.1f} GB/s ({bw['min'] / 1e9:.1f}-{bw['max'] / 1e9:.1f}), "
              f"f32 FMA peak (C, OpenMP, {peak_vector_bytes(raw)}-byte vectors, best pass per round) "
              f"{top['median'] / 1e9:.1f} GFLOP/s ({top['min'] / 1e9:.1f}-{top['max'] / 1e9:.1f}).")
    compile_ms = dict({n: workers[n].compile_ms for n in names}, **{n + "_so": {"llvm": build_ms[n]} for n in libraries})
    rows = [row for n in names for row in [n] + ([n + "_so"] if n in libraries else []) + ([n + "_hf"] if "hf" in models.get(n, {}) else [])]
    text = table(summary, rows, compile_ms, compile_s, header) + (memory_table(memory) if memory else "")
    chart(opts.chart, names, summary, opts.rounds)
    print(text)
    if opts.markdown:
        with open(opts.markdown, "w") as f:
            f.write(text + "\n")
    if opts.json:
        machine = {"cpu": model, "family": cpu_family, "extensions": extensions, "threads": THREADS, "torch": torch.__version__,
                   "rounds": opts.rounds, "seconds": opts.seconds, "load_average": load}
        with open(opts.json, "w") as f:
            compiles = dict({n: {"nax_ms": compile_ms[n], "torch_compile_s": compile_s[n]} for n in names},
                            **{n + "_so": {"nax_build_ms": build_ms[n]} for n in libraries},
                            **{n + "_hf": {"torch_compile_s": compile_s[n + "_hf"]} for n in models if "hf" in models[n]})
            json.dump({"machine": machine, "compile": compiles, "rounds": raw, "summary": summary, "peak_memory_bytes": memory}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
