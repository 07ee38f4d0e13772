"""GPT-2 small imported from transformers by `nax.from_torch` against the
hand-written examples/gpt2/gpt2.nax, same random weights, both built by
`nax build --emit so` and called through their libraries (`nax.load`),
interleaved: 7 rounds of about a second per side, alternating which goes
first; prints each round and the median ratio imported / hand-written.

    python benches/import_gpt2.py [WORK_DIR]

Needs torch, transformers, safetensors and the nax package, and the
release `nax` command (`cargo build --release --bin nax`).
"""

import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel

import nax

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "gpt2"))
from convert import convert  # noqa: E402


class Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids, use_cache=False).logits


def timed(f, seconds=1.0):
    times, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 3:
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(work: pathlib.Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    binary = ROOT / "target" / "release" / "nax"
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).eval()
    model.save_pretrained(work / "hf", safe_serialization=True)
    convert(work / "hf", work / "hand_weights.safetensors", work / "hand.nax")
    dims = {"ids": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq", max=1024)}}
    nax.from_torch(Logits(model).eval(), (torch.randint(0, 50257, (2, 16)),), dynamic_shapes=dims).save(work / "imported")
    subprocess.run([binary, "build", work / "hand.nax", "--emit", "so", "-o", work / "libhand.so"], check=True)
    subprocess.run([binary, "build", work / "imported" / "model.nax", "--emit", "so", "-o", work / "libimported.so"], check=True)
    hand = nax.load(work / "libhand.so", weights=work / "hand_weights.safetensors", threads=2)
    imported = nax.load(work / "libimported.so", weights=work / "imported" / "weights.safetensors", threads=2)
    ids = np.random.default_rng(0).integers(0, 50257, (1, 128)).astype(np.int64)
    a, b = np.asarray(hand.gpt2(ids)), np.asarray(imported.forward(ids))
    print(f"largest difference of the logits: {float(np.abs(a - b).max()):.3g} (their scale {float(np.abs(a).max()):.3g})")
    ratios = []
    for r in range(7):
        sides = [("hand", lambda: hand.gpt2(ids)), ("imported", lambda: imported.forward(ids))]
        if r % 2:
            sides.reverse()
        got = {name: timed(f) for name, f in sides}
        ratios.append(got["imported"] / got["hand"])
        print(f"round {r}: hand {got['hand'] * 1e3:.1f} ms, imported {got['imported'] * 1e3:.1f} ms, ratio {ratios[-1]:.3f}")
    print(f"median imported / hand-written: {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/nax-import-gpt2"))
