"""GPT-2 (examples/gpt2/gpt2.nax) split over processes by axis name, its
collectives run by torch.distributed (gloo), checked against the same model
unsplit in each process.

    torchrun --nproc_per_node 2 examples/gpt2/sharded.py --mesh tp=2 --shard H=tp,F=tp

Every rank compiles the program with `mesh=` and `shard=`, reads only its
blocks of the weights file, and calls the prefill (`gpt2`) and a cached
decoding step (`step`) with its blocks of the arguments; rank 0 prints one
JSON line: the largest difference from the unsplit logits (relative to the
largest logit), whether the greedy tokens agree, the rank's weight bytes
against its Megatron share (with the tied table's columns where the
compiler splits the head along D), the collectives of one call, and the
time of a prefill split and unsplit (`--time ROUNDS`, interleaved: the
median of the rounds' ratios) with the time of the call's collectives
alone, and the head's time (the unsplit prefill less `hidden`, the
prefill without it).

`--small` uses the dims of a small GPT-2 (2 layers, width 32) instead of
GPT-2 small's (124M parameters); `--die RANK` makes that rank exit before
the first call, to see the others end their call with
`nax.CollectiveError`. The launcher's environment (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT: torchrun's, or the tests') says who is who.
"""

import argparse
import datetime
import json
import os
import pathlib
import re
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
from safetensors.numpy import save_file

import nax

HERE = pathlib.Path(__file__).resolve().parent
SMALL = {"L": 2, "D": 32, "H": 4, "V": 40, "P": 16}
FULL = {"L": 12, "D": 768, "H": 12, "V": 50257, "P": 1024}


def source(dims: dict) -> str:
    """gpt2.nax with these dims."""
    text = (HERE / "gpt2.nax").read_text()
    for name, value in dims.items():
        text = re.sub(rf"^dim {name} = .*$", f"dim {name} = {value}", text, flags=re.M)
    return text


def shapes(dims: dict) -> dict:
    """The shapes of gpt2.nax's weights."""
    L, D, V, P = dims["L"], dims["D"], dims["V"], dims["P"]
    F = 4 * D
    return {
        "wte": [V, D], "wpe": [P, D], "ln1_g": [L, D], "ln1_b": [L, D], "attn_w": [L, D, 3 * D], "attn_b": [L, 3 * D],
        "proj_w": [L, D, D], "proj_b": [L, D], "ln2_g": [L, D], "ln2_b": [L, D], "fc_w": [L, D, F], "fc_b": [L, F],
        "out_w": [L, F, D], "out_b": [L, D], "lnf_g": [D], "lnf_b": [D],
    }


def weights(dims: dict) -> dict:
    """Random weights of gpt2.nax's shapes, the same in every process."""
    rng = np.random.default_rng(0)
    return {k: (rng.standard_normal(s, dtype=np.float32) * 0.1).astype(np.float32) for k, s in shapes(dims).items()}


def block(array: np.ndarray, names: str, mesh: dict, shard: dict, coords: dict) -> np.ndarray:
    """This rank's block of an argument: along every axis whose name is split."""
    index = []
    for axis, name in enumerate(names.split()):
        mesh_axis = shard.get(name)
        if mesh_axis is None:
            index.append(slice(None))
            continue
        size = array.shape[axis] // mesh[mesh_axis]
        index.append(slice(coords[mesh_axis] * size, (coords[mesh_axis] + 1) * size))
    return np.ascontiguousarray(array[tuple(index)])


def placed(result, whole: np.ndarray) -> np.ndarray:
    """The part of the whole result a rank's block stands for."""
    index = tuple(slice(o, o + s) for o, s in zip(result.offsets, result.shape))
    return whole[index]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mesh", default="tp=2")
    parser.add_argument("--shard", default="H=tp,F=tp")
    parser.add_argument("--small", action="store_true")
    parser.add_argument("--die", type=int, default=-1)
    parser.add_argument("--time", type=int, default=0, help="rounds of timing a prefill split and unsplit")
    parser.add_argument("--batch", type=int, default=2, help="sequences per rank of the batch axis")
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--weights", help="the folder of the weights file (written by rank 0 when missing)")
    args = parser.parse_args()
    mesh = {k: int(v) for k, v in (e.split("=") for e in args.mesh.split(","))}
    shard = dict(e.split("=") for e in args.shard.split(","))
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    rank = dist.get_rank()
    coords, rest = {}, rank
    for name in reversed(list(mesh)):
        coords[name], rest = rest % mesh[name], rest // mesh[name]
    dims = SMALL if args.small else FULL
    text = source(dims)
    path = pathlib.Path(args.weights or tempfile.gettempdir()) / f"nax_sharded_{'small' if args.small else 'full'}.safetensors"
    if rank == 0 and not path.exists():
        save_file(weights(dims), str(path))
    dist.barrier()

    m = nax.compile(text, weights=str(path), mesh=mesh, shard=shard, threads=1)
    whole = nax.compile(text, weights=str(path), threads=1)
    rng = np.random.default_rng(1)
    batch = args.batch * mesh.get(shard.get("b", ""), 1)
    tokens = rng.integers(0, dims["V"], size=(batch, args.tokens), dtype=np.int64)
    if rank == args.die:
        os._exit(3)
    gpt2 = m.gpt2
    report = {"rank": rank, "mesh": args.mesh, "shard": args.shard}
    try:
        logits = gpt2(block(tokens, "b n", mesh, shard, coords))
    except nax.CollectiveError as e:
        print(json.dumps({"rank": rank, "collective_error": str(e)}), flush=True)
        # The group lost a member: its teardown at the interpreter's exit
        # (gloo's threads joined in a destructor) may abort the process
        # ("terminate called without an active exception", seen once in
        # ten such exits), so this rank leaves without tearing it down.
        sys.stderr.flush()
        os._exit(0)
    want = whole.gpt2(tokens).numpy()
    got, ref = logits.numpy(), placed(logits, want)
    scale = float(np.abs(want).max())
    report["prefill_max_rel"] = float(np.abs(got - ref).max()) / scale
    report["same_tokens"] = bool((got.argmax(-1) == ref.argmax(-1)).all())
    report["global_shape"] = list(logits.global_shape)

    # One cached decoding step after the prompt.
    L, H, Dh = dims["L"], dims["H"], dims["D"] // dims["H"]
    cache = rng.standard_normal((L, batch, H, args.tokens, Dh), dtype=np.float32) * 0.1
    new = rng.integers(0, dims["V"], size=(batch, 1), dtype=np.int64)
    mine = [block(a, n, mesh, shard, coords) for a, n in ((new, "b n"), (cache, "L b H c Dh"), (cache, "L b H c Dh"))]
    out = m.step(*mine)
    ref_step = whole.step(new, cache, cache)
    step_logits = out.logits.numpy()
    ref_logits = placed(out.logits, ref_step.logits.numpy())
    report["step_max_rel"] = float(np.abs(step_logits - ref_logits).max()) / float(np.abs(ref_logits).max())
    report["step_keys_max_rel"] = float(np.abs(out.k.numpy() - placed(out.k, ref_step.k.numpy())).max())
    report["weight_bytes"] = gpt2.weight_bytes
    # Megatron's share: the heads' and features' weights split over tp,
    # the rest (embeddings, norms, biases after a sum) on every rank; and
    # the tied table where the compiler splits the head along D (a table
    # of 2^16 elements or more, D of 128 or more).
    tp = mesh.get(shard.get("H", ""), 1)
    split = {"attn_w", "attn_b", "proj_w", "fc_w", "fc_b", "out_w"}
    head_split = dims["D"] >= 128 and dims["V"] * dims["D"] >= 1 << 16 and "V" not in shard
    if head_split:
        split.add("wte")
    report["share_weight_bytes"] = int(sum(4 * np.prod(s) // (tp if k in split else 1) for k, s in shapes(dims).items()))
    report["plan_collectives"] = m.plan("gpt2").splitlines()[-1]
    if args.time:
        # Interleaved: each round times one split call (every rank) and one
        # unsplit call (each process alone on its core, one thread).
        # Also the unsplit prefill without the head (`hidden`): the head's
        # share bounds the speed-up where the vocabulary is not split.
        split, unsplit, body = [], [], []
        mine = block(tokens, "b n", mesh, shard, coords)
        for _ in range(args.time):
            dist.barrier()
            start = time.perf_counter()
            gpt2(mine)
            split.append(time.perf_counter() - start)
            dist.barrier()
            start = time.perf_counter()
            whole.gpt2(tokens)
            unsplit.append(time.perf_counter() - start)
            start = time.perf_counter()
            whole.hidden(tokens)
            body.append(time.perf_counter() - start)
        # The communication's share: the plan's collectives timed alone, as
        # many as a call runs: all-reduces of [b n D], and where the head is
        # split along D, the embedding's rows gathered and the logits' partial
        # sums all-reduced ([b n V]).
        reduces = int(re.search(r"\((\d+) all-reduces", report["plan_collectives"]).group(1))
        buffer = torch.zeros(mine.shape[0], mine.shape[1], dims["D"])
        rows = [torch.zeros(mine.shape[0], mine.shape[1], dims["D"] // tp) for _ in range(tp)]
        logits = torch.zeros(mine.shape[0], mine.shape[1], dims["V"])
        dist.barrier()
        start = time.perf_counter()
        for _ in range(reduces - head_split):
            dist.all_reduce(buffer)
        if head_split:
            dist.all_gather(rows, rows[0].clone())
            dist.all_reduce(logits)
        report["communication_ms"] = (time.perf_counter() - start) * 1e3
        report["split_ms"] = float(np.median(split)) * 1e3
        report["unsplit_ms"] = float(np.median(unsplit)) * 1e3
        report["speedup"] = float(np.median([u / s for s, u in zip(split, unsplit)]))
        head = max(report["unsplit_ms"] - float(np.median(body)) * 1e3, 0.0)
        report["head_ms"] = head
        if "V" not in shard and not head_split:
            # Every rank computes the whole head: the most the split can
            # give with no communication and no overhead.
            parts = mesh.get(shard.get("H", ""), 1)
            report["ceiling_without_communication"] = report["unsplit_ms"] / ((report["unsplit_ms"] - head) / parts + head)
    reports = [None] * dist.get_world_size()
    dist.all_gather_object(reports, report)
    if rank == 0:
        print(json.dumps(reports), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
