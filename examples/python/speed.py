"""The Python example of the book (docs/src/using.md), timed: a layer norm followed by gelu,
compiled by nax and called on torch tensors, beside the same function in
torch eager and under torch.compile, on the same inputs, interleaved.

    python examples/python/speed.py [ROUNDS]

Prints the median milliseconds per call of each and the ratios. Needs
PyTorch.
"""

import statistics
import sys
import time

import torch

import nax

m = nax.compile("""
def norm_gelu(x: [b n D], g: [D], beta: [D]) -> [b n D] {
    mu = reduce(x, b n D -> b n, mean)
    xc = x - mu
    var = reduce(xc * xc, b n D -> b n, mean)
    return gelu(xc * rsqrt(var + 1e-5) * g + beta)
}
""")
x, g, beta = torch.randn(32, 512, 1024), torch.randn(1024), torch.randn(1024)
y = torch.from_dlpack(m.norm_gelu(x, g, beta))  # shares the result's memory


def eager(x, g, beta):
    return torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (1024,), g, beta, 1e-5))


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    compiled = torch.compile(eager)
    contenders = {"nax": lambda: m.norm_gelu(x, g, beta), "torch eager": lambda: eager(x, g, beta), "torch.compile": lambda: compiled(x, g, beta)}
    error = (y - eager(x, g, beta)).abs().max().item()
    times = {name: [] for name in contenders}
    with torch.no_grad():
        for f in contenders.values():
            f()
        for _ in range(rounds):
            for name, f in contenders.items():
                start = time.perf_counter()
                f()
                times[name].append(time.perf_counter() - start)
    nax_ms = statistics.median(times["nax"]) * 1e3
    print(f"max |nax - torch| = {error:.2e}; torch threads: {torch.get_num_threads()}")
    for name, t in times.items():
        ms = statistics.median(t) * 1e3
        print(f"{name:14s} {ms:8.3f} ms  ({ms / nax_ms:.2f}x nax's time)")


if __name__ == "__main__":
    main()
