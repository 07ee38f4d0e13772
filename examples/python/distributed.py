"""A compiled nax function inside a torch.nn.Module, run data-parallel under
torch.distributed: two CPU processes (gloo) on one machine.

    python examples/python/distributed.py [WORLD_SIZE]

Each process compiles the same nax program (a residual feed-forward block)
once, wraps it in `NaxFeedForward`, a `torch.nn.Module` whose `forward`
hands its torch tensors to the nax function and the result back to torch
through DLPack (no copies either way), runs its shard of a batch, and the
shards are gathered with `dist.all_gather`. Rank 0 checks the gathered
result against the same block in torch eager and prints the time per step.

Scaling out is torch.distributed's job, unchanged: nax is one more kernel
inside the module, so DDP-style data parallelism, pipelines of modules and
`dist` collectives work as they do with torch's own ops. nax kernels do not
compute gradients (autograd is not nax's job): use them for inference, or
for frozen parts of a trained model.
"""

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import nax

SOURCE = """
dim D = 64
dim H = 256
param w1: [D H]
param w2: [H D]
def ffn(x: [n D]) -> [n D] {
    return gelu(x @ w1) @ w2 + x
}
"""


class NaxFeedForward(torch.nn.Module):
    """`gelu(x @ w1) @ w2 + x`, compiled by nax, called on torch tensors."""

    def __init__(self, w1, w2):
        super().__init__()
        self.register_buffer("w1", w1)
        self.register_buffer("w2", w2)
        # One thread per process: the processes are the parallelism here.
        self.ffn = nax.compile(SOURCE, weights={"w1": w1, "w2": w2}, threads=1).ffn

    def forward(self, x):
        return torch.from_dlpack(self.ffn(x))


def reference(x, w1, w2):
    return torch.nn.functional.gelu(x @ w1) @ w2 + x


def run(rank, world, port, steps=20):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)  # the same weights and batch on every rank
    w1 = torch.randn(64, 256, generator=generator) / 8
    w2 = torch.randn(256, 64, generator=generator) / 16
    batch = torch.randn(world * 128, 64, generator=generator)
    module = NaxFeedForward(w1, w2)
    shard = batch.chunk(world)[rank]
    with torch.no_grad():
        out = module(shard)
        start = time.perf_counter()
        for _ in range(steps):
            out = module(shard)
            gathered = [torch.empty_like(out) for _ in range(world)]
            dist.all_gather(gathered, out)
        per_step = (time.perf_counter() - start) / steps
    if rank == 0:
        full = torch.cat(gathered)
        error = (full - reference(batch, w1, w2)).abs().max().item()
        print(f"{world} processes: gathered {tuple(full.shape)}, max |nax - torch eager| = {error:.2e}, {per_step * 1e3:.3f} ms per step")
        if error > 1e-3:
            print("error: nax and torch disagree", file=sys.stderr)
            sys.exit(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    port = 29500 + os.getpid() % 1000
    mp.spawn(run, args=(world, port), nprocs=world, join=True)
