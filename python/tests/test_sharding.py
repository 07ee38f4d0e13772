"""A module split over processes by axis name (SHARDING.md), its
collectives run by torch.distributed's gloo: GPT-2 (examples/gpt2/sharded.py,
small dims) over 2 and 4 processes gives the unsplit logits and greedy
tokens, prefill and cached decoding step, each rank holding its share of
the weights; a sum then split on its mesh axis is torch's reduce-scatter;
a tied head left whole by the names is split along its contracted axis;
a rank that dies ends the others' call with nax.CollectiveError, ten
times in a row, nothing hanging; errors of the split itself are
nax.CompileError."""

import json
import os
import pathlib
import socket
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples/gpt2/sharded.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(world: int, *args: str, timeout: float = 300) -> list:
    """Runs the script on `world` processes (the environment torchrun
    gives); each process's exit code and output."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([sys.executable, str(SCRIPT), "--small", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outcomes = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        outcomes.append((p.returncode, out, err))
    return outcomes


@pytest.mark.parametrize(
    "world,mesh,shard",
    [(2, "tp=2", "H=tp,F=tp"), (4, "tp=4", "H=tp,F=tp"), (2, "dp=2", "b=dp"), (4, "dp=2,tp=2", "b=dp,H=tp,F=tp")],
)
def test_gpt2_split_gives_the_unsplit_logits_with_each_rank_holding_its_share(torch, tmp_path, world, mesh, shard):
    outcomes = launch(world, "--mesh", mesh, "--shard", shard, "--weights", str(tmp_path))
    for code, out, err in outcomes:
        assert code == 0, err[-3000:]
    reports = json.loads(outcomes[0][1].strip().splitlines()[-1])
    assert len(reports) == world
    for r in reports:
        assert r["prefill_max_rel"] <= 1e-5 and r["step_max_rel"] <= 1e-5, r
        assert r["step_keys_max_rel"] <= 1e-5, r
        assert r["same_tokens"], r
        assert abs(r["weight_bytes"] - r["share_weight_bytes"]) <= 0.05 * r["share_weight_bytes"], r
    collectives = "4 (4 all-reduces, 0 all-gathers)" if "tp" in shard else "0 (0 all-reduces, 0 all-gathers)"
    assert reports[0]["plan_collectives"] == f"collectives per call: {collectives}"


def test_a_rank_that_dies_ends_the_others_call_with_a_collective_error_ten_times(torch, tmp_path):
    for _ in range(10):
        outcomes = launch(2, "--mesh", "tp=2", "--shard", "H=tp,F=tp", "--die", "1", "--weights", str(tmp_path), timeout=120)
        code, out, err = outcomes[0]
        assert code == 0, err[-3000:]
        report = json.loads(out.strip().splitlines()[-1])
        assert report["collective_error"].startswith("a collective failed: "), report
        assert outcomes[1][0] == 3


# A sum over the mesh axis whose result is then split on it (the
# product's axis renamed, in a call, to a split name): each rank receives
# its block through torch.distributed.reduce_scatter_tensor (counted; the
# mean over the split axis is an all-reduce).
REDUCE_SCATTER = """
import json, numpy as np, torch.distributed as dist, nax
dist.init_process_group("gloo")
calls = []
scatter = dist.reduce_scatter_tensor
dist.reduce_scatter_tensor = lambda *a, **k: (calls.append(1), scatter(*a, **k))[1]
source = '''dim k = 8
dim j = 6
def g(y: [n m]) -> [n m] {
    return y * 2.0
}
def f(x: [n k], w: [k j]) -> [n j] {
    return g(x @ w) + mean(x, k)
}
'''
m = nax.compile(source, mesh={"tp": 2}, shard={"k": "tp", "m": "tp"})
rng = np.random.default_rng(7)
x = rng.standard_normal((3, 8), dtype=np.float32)
w = rng.standard_normal((8, 6), dtype=np.float32)
want = 2.0 * (x.astype(np.float64) @ w) + x.mean(axis=1, keepdims=True)
got = m.f(x, w)
start = got.offsets[1]
block = want[:, start:start + got.numpy().shape[1]]
print(json.dumps({"error": float(np.abs(got.numpy() - block).max()), "offsets": list(got.offsets), "global_shape": list(got.global_shape), "scatters": len(calls), "plan": m.plan("f").splitlines()[-1]}))
# As torch asks: a gloo group left to the interpreter's exit may abort it.
dist.destroy_process_group()
"""


def test_a_sum_then_split_on_its_mesh_axis_is_torch_reduce_scatter(torch):
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
        procs.append(subprocess.Popen([sys.executable, "-c", REDUCE_SCATTER], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for rank, p in enumerate(procs):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        report = json.loads(out.strip().splitlines()[-1])
        assert report["error"] <= 1e-5, report
        assert report["offsets"] == [0, 3 * rank] and report["global_shape"] == [3, 6], report
        assert report["scatters"] == 1, report
        assert report["plan"] == "collectives per call: 2 (1 all-reduces, 0 all-gathers, 1 reduce-scatters)", report


# A tied embedding and head around an MLP split by its features: the
# head (V = 601, odd) is left whole by the names, so nax splits it along D
# (SHARDING's "a large product every rank would compute whole"): each rank
# reads its columns of `wte` from the file, the rows looked up are
# all-gathered, the logits' partial sums all-reduced.
TIED_HEAD = """
import json, sys, numpy as np, torch.distributed as dist, nax
from safetensors.numpy import save_file
dist.init_process_group("gloo")
path = sys.argv[1]
rng = np.random.default_rng(3)
weights = {"wte": rng.standard_normal((601, 128)), "w1": rng.standard_normal((128, 256)), "w2": rng.standard_normal((256, 128))}
weights = {k: (v * 0.1).astype(np.float32) for k, v in weights.items()}
if dist.get_rank() == 0:
    save_file(weights, path)
dist.barrier()
source = '''dim V = 601
dim D = 128
dim F = 256
param wte: [V D]
param w1: [D F]
param w2: [F D]
def f(tokens: Int[b n]) -> [b n V] {
    x = take(wte, tokens, V)
    h = x + relu(x @ w1) @ w2
    return einsum(h, wte: b n D, V D -> b n V)
}
'''
m = nax.compile(source, weights=path, mesh={"tp": 2}, shard={"F": "tp"})
tokens = rng.integers(0, 601, size=(2, 3))
wte, w1, w2 = (weights[k].astype(np.float64) for k in ("wte", "w1", "w2"))
x = wte[tokens]
want = (x + np.maximum(x @ w1, 0) @ w2) @ wte.T
got = m.f(tokens).numpy()
plan = m.plan("f").splitlines()
print(json.dumps({"error": float(np.abs(got - want).max() / np.abs(want).max()), "shape": list(got.shape), "weight_bytes": m.f.weight_bytes,
                  "plan": plan[-1], "wte": [l.strip() for l in plan if l.strip().startswith("wte:")]}))
# As torch asks: a gloo group left to the interpreter's exit may abort it.
dist.destroy_process_group()
"""


def test_a_large_product_left_whole_is_split_along_its_contracted_axis_reading_the_rank_columns(torch, tmp_path):
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
        procs.append(subprocess.Popen([sys.executable, "-c", TIED_HEAD, str(tmp_path / "w.safetensors")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        report = json.loads(out.strip().splitlines()[-1])
        assert report["error"] <= 1e-5 and report["shape"] == [2, 3, 601], report
        assert report["plan"] == "collectives per call: 3 (2 all-reduces, 1 all-gathers)", report
        assert report["wte"] == ["wte: f32[V:601 D:64 (split over tp)]"], report
        # Half of wte's columns, half of each MLP weight: 4 * (601 * 64 + 2 * 128 * 128).
        assert report["weight_bytes"] == 4 * (601 * 64 + 2 * 128 * 128), report


def test_a_split_that_cannot_be_made_is_a_compile_error_before_anything_runs(torch):
    import torch.distributed as dist

    import nax

    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    source = "dim D = 6\ndef f(x: [n D]) -> [n D] {\n    return x * 2.0\n}\n"
    with pytest.raises(nax.CompileError, match="the mesh \\(tp=2\\) has 2 processes, the process group has 1"):
        nax.compile(source, mesh={"tp": 2}, shard={"D": "tp"})
    with pytest.raises(nax.CompileError, match="the axis 'D' of size 6 cannot be split over the mesh axis 'tp' of size 4"):
        nax.compile(source, mesh={"tp": 4}, shard={"D": "tp"})
    with pytest.raises(nax.CompileError, match="the sharding splits 'Q', which is no axis name of the module"):
        nax.compile(source, mesh={"tp": 1}, shard={"Q": "tp"})
    # A mesh of one process: the functions run as written, and say where their results lie.
    m = nax.compile(source, mesh={"tp": 1}, shard={"D": "tp"})
    import numpy as np

    y = m.f(np.ones((2, 6), np.float32))
    assert y.offsets == (0, 0) and y.global_shape == (2, 6)
    assert "collectives per call: 0" in m.plan("f")
    assert issubclass(nax.CollectiveError, nax.Error)
