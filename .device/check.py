"""Runs nax's CUDA kernels on this machine's NVIDIA GPU and compares them
with nax's reference interpreter (.device/check.sh runs it; the machine has
PyTorch, CuPy and nvcc, no network and no Rust).

Each case of `cases/` (written on a machine with Rust by .device/prepare.sh:
`cargo test --test suite -- --ignored cuda::export_device_cases`) is the PTX
of one function's kernels for sm_90, its launch plan as JSON, its inputs'
bytes and the interpreter's result. For each case this loads the PTX through
the CUDA driver (CuPy's RawModule), allocates every buffer (aliases share
their source's memory; temporaries start zeroed), copies the inputs and
weights, puts the size slots in device memory, launches each kernel in order
(one thread per position of its parallel loop, 256 per block, as
`begin, end = 0, threads`; a kernel without one runs in one thread), copies
the result back and compares it at CLI.md's tolerance. It prints one line per
failure and `N passed, M failed`; the exit status is 1 when any failed.

Then it times each workload of bench/WORKLOADS.md (examples/workloads at their
sizes; inputs and weights drawn on the GPU): nax's kernels, and the same
function through PyTorch (the `--emit torch` code) eager and under
`torch.compile`, each the median of timed repetitions with CUDA events, and
prints a table. `torch.compile` is skipped once the run has used 200 s, so the
whole check stays under 5 minutes.

The same cases also run through nax's own CUDA device (the runtime's
`CudaFunction`, in the small Rust binary `cases/cuda_run` built by
prepare.sh): it loads each case's plan, copies, launches and reads back
as `nax run --target cuda` does, and its results are compared the same way.
"""

import importlib.util
import json
import pathlib
import subprocess
import sys
import time

import numpy as np

try:
    import cupy as cp
except ImportError as e:  # pragma: no cover - the GPU machine has CuPy
    sys.exit(f"error: .device/check.py needs CuPy ({e})")

HERE = pathlib.Path(__file__).resolve().parent
CASES = HERE / "cases"
THREADS_PER_BLOCK = 256

# How each dtype of a plan is stored: numpy's type of the same bytes.
STORAGE = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64,
           "i32": np.int32, "i64": np.int64, "bool": np.uint8}


def as_f64(dtype, raw):
    """The values of a buffer's bytes (a numpy array of its storage type) as f64."""
    if dtype == "bf16":
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return raw.astype(np.float64)


def random_fill(buffer, dtype):
    """Fills a buffer with values like the benchmarks' (floats in [-1, 1),
    integers in [0, 1000), masks 0 or 1)."""
    n = buffer.size
    if dtype in ("f16", "f32", "f64"):
        buffer[...] = (cp.random.random(n) * 2 - 1).astype(buffer.dtype)
    elif dtype == "bf16":
        buffer[...] = ((cp.random.random(n, dtype=cp.float32) * 2 - 1).view(cp.uint32) >> 16).astype(cp.uint16)
    elif dtype == "bool":
        buffer[...] = (cp.random.random(n) < 0.5).astype(cp.uint8)
    else:
        buffer[...] = cp.random.randint(0, 1000, n).astype(buffer.dtype)


def allocate(description):
    """Every buffer of a plan in device memory: aliases share their source's,
    temporaries start zeroed, inputs and weights hold the case's bytes (or,
    for a workload, values drawn here)."""
    name = description["name"]
    memory = []
    for b in description["buffers"]:
        storage = STORAGE[b["dtype"]]
        if b["kind"] == "alias":
            memory.append(memory[b["source"]])
            continue
        buffer = cp.zeros(max(int(b["elements"]), 1), dtype=storage)
        if "data" in b:
            host = np.fromfile(CASES / b["data"], dtype=storage)
            if host.size != int(b["elements"]):
                raise ValueError(f"{name}: {b['data']} has {host.size} elements, the plan {b['elements']}")
            buffer[: host.size] = cp.asarray(host)
        elif b["kind"] in ("input", "weight"):
            random_fill(buffer, b["dtype"])
        memory.append(buffer)
    return memory


def launcher(description, memory):
    """A function that runs the plan's kernels once, in order."""
    module = cp.RawModule(path=str(CASES / description["ptx"]))
    slots = cp.asarray(np.array(description["slots"] or [0], dtype=np.int64))
    launches = []
    for k in description["kernels"]:
        threads = int(k["threads"])
        if threads == 0:
            continue
        function = module.get_function(k["entry"])
        args = tuple(memory[b] for b in k["buffers"]) + (slots, np.int64(0), np.int64(threads))
        blocks = (threads + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
        launches.append((function, (blocks,), (min(threads, THREADS_PER_BLOCK),), args))

    def run():
        for function, grid, block, args in launches:
            function(grid, block, args)

    return run


def compare(name, result, got):
    """None when `got` (f64 values) is the interpreter's result at the
    case's tolerance; else what differs."""
    want = np.fromfile(CASES / result["expected"], dtype=np.float64)
    if got.shape != want.shape:
        return f"{name}: {got.size} elements, expected {want.size}"
    rtol, atol = result["rtol"], result["atol"]
    same = (np.isnan(got) & np.isnan(want)) | (got == want) | (np.abs(got - want) <= atol + rtol * np.abs(want))
    if not same.all():
        i = int(np.argmin(same))
        return f"{name}: element {i} is {got[i]!r}, expected {want[i]!r}"
    return None


def run_case(description):
    """The case through CuPy's launches of the plan."""
    memory = allocate(description)
    launcher(description, memory)()
    cp.cuda.Device().synchronize()
    result = description["result"]
    plan = description["buffers"][result["buffer"]]
    got = as_f64(plan["dtype"], cp.asnumpy(memory[result["buffer"]])[: int(plan["elements"])])
    return compare(description["name"], result, got)


# safetensors' dtypes as nax's.
SAFETENSORS = {"F16": "f16", "BF16": "bf16", "F32": "f32", "F64": "f64", "I32": "i32", "I64": "i64", "BOOL": "bool"}


def read_out(path):
    """The tensor `out` of a safetensors file, as f64 values."""
    raw = path.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    entry = json.loads(raw[8 : 8 + length])["out"]
    begin, end = entry["data_offsets"]
    dtype = SAFETENSORS[entry["dtype"]]
    return as_f64(dtype, np.frombuffer(raw[8 + length + begin : 8 + length + end], dtype=STORAGE[dtype]))


def run_rust(description, runner):
    """The case through nax's own CUDA device: the runtime alone, built
    here as `cuda_run`, loading the plan, copying, launching."""
    name = description["name"]
    rust = description["rust"]
    out = CASES / f"{name}.out.safetensors"
    command = [str(runner), str(CASES / rust["call"]), str(CASES / rust["inputs"]), str(CASES / rust["weights"]), str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return f"{name}: cuda_run exit {done.returncode}: {done.stderr.strip()}"
    try:
        return compare(name, description["result"], read_out(out))
    finally:
        out.unlink(missing_ok=True)


def milliseconds(run, budget=0.5, most=200):
    """The median time of `run` in milliseconds, by CUDA events, over
    repetitions filling about `budget` seconds, after a warm-up run; one
    timed run when that alone takes longer than half the budget."""
    run()
    cp.cuda.Device().synchronize()
    times = []
    spent = 0.0
    while len(times) < most and (spent < budget or len(times) < 5):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        run()
        stop.record()
        stop.synchronize()
        t = cp.cuda.get_elapsed_time(start, stop)
        times.append(t)
        spent += t / 1e3
        if len(times) == 1 and t / 1e3 > budget / 2:
            break
    return float(np.median(times))


TORCH_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "bool": "bool"}


def torch_arguments(description, torch):
    """Arguments and weights for the workload's PyTorch function, of the plan's
    shapes and dtypes, drawn on the GPU."""
    args, weights = {}, {}
    for b in description["buffers"]:
        if b["kind"] not in ("input", "weight"):
            continue
        dtype = getattr(torch, TORCH_DTYPES[b["dtype"]])
        shape = [int(n) for n in b["shape"]]
        if b["dtype"] == "bool":
            t = torch.rand(shape, device="cuda") < 0.5
        elif b["dtype"] in ("i32", "i64"):
            t = torch.randint(0, 1000, shape, device="cuda", dtype=dtype)
        else:
            t = (torch.rand(shape, device="cuda") * 2 - 1).to(dtype)
        if b["kind"] == "input":
            args[b["source"]] = t
        else:
            weights[b["source"]] = t
    return [args[i] for i in sorted(args)], weights


def time_workload(description, started, torch):
    """nax, eager and compiled PyTorch times of one workload, in ms (None
    where not measured)."""
    memory = allocate(description)
    nax_ms = milliseconds(launcher(description, memory))
    del memory
    eager_ms = compiled_ms = None
    if torch is not None:
        w = description["workload"]
        spec = importlib.util.spec_from_file_location(description["name"], CASES / w["torch"])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        function = getattr(module, w["function"])
        args, weights = torch_arguments(description, torch)
        with torch.no_grad():
            eager_ms = milliseconds(lambda: function(*args, **weights))
            if time.time() - started < 200:
                compiled = torch.compile(function)
                compiled_ms = milliseconds(lambda: compiled(*args, **weights))
    return nax_ms, eager_ms, compiled_ms


def main():
    if not (CASES / "index.json").is_file():
        sys.exit("error: .device/cases is missing: run .device/prepare.sh on a machine with Rust first")
    index = json.loads((CASES / "index.json").read_text())
    start = time.time()
    passed, failed = 0, 0
    for name in index["cases"]:
        description = json.loads((CASES / f"{name}.json").read_text())
        try:
            problem = run_case(description)
        except Exception as e:  # a launch or load failure: the driver's message
            problem = f"{name}: {type(e).__name__}: {e}"
        if problem is None:
            passed += 1
        else:
            failed += 1
            print(problem)
    device = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"{passed} passed, {failed} failed ({device}, {time.time() - start:.1f} s)")
    runner = CASES / "cuda_run"
    if runner.is_file():
        rust_passed, rust_failed = 0, 0
        for name in index["cases"]:
            try:
                problem = run_rust(json.loads((CASES / f"{name}.json").read_text()), runner)
            except Exception as e:
                problem = f"{name}: {type(e).__name__}: {e}"
            if problem is None:
                rust_passed += 1
            else:
                rust_failed += 1
                print(f"nax's CUDA device: {problem}")
        print(f"nax's CUDA device (the runtime's, cuda_run): {rust_passed} passed, {rust_failed} failed")
        failed += rust_failed
    else:
        print("nax's CUDA device not checked: no cases/cuda_run (run .device/prepare.sh)")
    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch is not importable: only nax's times")
    show = lambda v: "-" if v is None else f"{v:.3f}"
    ratio = lambda a, b: "-" if a is None or b is None else f"{b / a:.2f}x"
    print("| workload | nax ms | eager ms | torch.compile ms | nax vs eager | nax vs compile |")
    print("|---|---|---|---|---|---|")
    for name in index["workloads"]:
        description = json.loads((CASES / f"{name}.json").read_text())
        try:
            nax_ms, eager_ms, compiled_ms = time_workload(description, start, torch)
        except Exception as e:
            print(f"| {name} | failed: {type(e).__name__}: {e} | | | | |")
            failed += 1
            continue
        print(f"| {name.removeprefix('workload_')} | {show(nax_ms)} | {show(eager_ms)} | {show(compiled_ms)} | {ratio(nax_ms, eager_ms)} | {ratio(nax_ms, compiled_ms)} |")
    print(f"total {time.time() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
