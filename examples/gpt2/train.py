"""Trains a small GPT-2 (2 layers, width 128, 4 heads, bytes as tokens)
on examples/gpt2/train.txt twice from the same initialisation and the
same batches: with nax (the loss and every gradient from gpt2.nax's
`train_step`, each parameter updated by adamw.nax's `adamw`) and with
PyTorch (transformers' GPT2LMHeadModel and torch.optim.AdamW). Writes
both loss curves to a PNG (with matplotlib) and prints their last losses.

    python examples/gpt2/train.py [--steps 300] [--png train_loss.png]
"""

import argparse
import pathlib
import re
import sys

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel

import nax

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from convert import as_nax  # noqa: E402

LAYERS, WIDTH, HEADS, VOCABULARY = 2, 128, 4, 256
CONTEXT, BATCH = 32, 4
LR, DECAY = 1e-3, 0.01


def model():
    """The initial model, seeded, without dropout (both sides compute the same function)."""
    torch.manual_seed(0)
    config = GPT2Config(n_layer=LAYERS, n_embd=WIDTH, n_head=HEADS, vocab_size=VOCABULARY, n_positions=CONTEXT + 1,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config)


def batches(steps):
    """`steps` batches of BATCH windows of CONTEXT + 1 bytes of the text, seeded."""
    data = np.frombuffer((HERE / "train.txt").read_bytes(), dtype=np.uint8).astype(np.int64)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        starts = rng.integers(0, len(data) - CONTEXT - 1, BATCH)
        yield np.stack([data[s : s + CONTEXT + 1] for s in starts])


def torch_losses(steps):
    """PyTorch's training: the loss of each step."""
    m = model()
    optimizer = torch.optim.AdamW(m.parameters(), lr=LR, weight_decay=DECAY)
    losses = []
    for ids in batches(steps):
        ids = torch.from_numpy(ids)
        optimizer.zero_grad()
        loss = m(ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def nax_source():
    """gpt2.nax with the small model's dims (its two layers exactly: no padding)."""
    text = (HERE / "gpt2.nax").read_text()
    dims = {"L": LAYERS, "D": WIDTH, "H": HEADS, "V": VOCABULARY, "P": CONTEXT + 1}
    for name, value in dims.items():
        text = re.sub(rf"^dim {name} = \d+", f"dim {name} = {value}", text, flags=re.M)
    return text


def nax_losses(steps):
    """nax's training: the loss of each step."""
    tensors = {re.sub(r"^transformer\.", "", k): v.detach().numpy() for k, v in model().state_dict().items()}
    weights = {k: np.ascontiguousarray(v) for k, v in as_nax(tensors, LAYERS, WIDTH, total=LAYERS).items()}
    step = nax.compile(nax_source(), weights=weights)
    update = nax.compile(str(HERE / "adamw.nax")).adamw
    moments = {k: (np.zeros(v.size, np.float32), np.zeros(v.size, np.float32)) for k, v in weights.items()}
    losses = []
    for t, ids in enumerate(batches(steps), start=1):
        # transformers' `labels` are shifted inside the model: the targets are the next bytes.
        out = step.train_step(ids[:, :-1], ids[:, 1:])
        losses.append(float(np.asarray(out.loss)))
        c1, c2 = 1.0 - 0.9**t, 1.0 - 0.999**t
        for name, w in weights.items():
            g = np.asarray(getattr(out, f"d_{name}")).reshape(-1)
            new, m, v = update(w.reshape(-1), g, *moments[name], LR, DECAY, c1, c2)
            weights[name] = np.array(new).reshape(w.shape)
            moments[name] = (np.array(m), np.array(v))
        step = step.with_weights(weights)
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--png", type=pathlib.Path, default=pathlib.Path("train_loss.png"))
    args = parser.parse_args()
    ours, theirs = nax_losses(args.steps), torch_losses(args.steps)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(theirs, label="PyTorch (transformers, torch.optim.AdamW)")
        ax.plot(ours, label="nax (gpt2.nax train_step, adamw.nax)", linestyle="--")
        ax.set_xlabel("step")
        ax.set_ylabel("cross entropy (nats per byte)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
        print(f"wrote {args.png}")
    except ImportError:
        print("matplotlib is not installed: no PNG")
    print(f"last loss: nax {ours[-1]:.4f}, PyTorch {theirs[-1]:.4f}")


if __name__ == "__main__":
    main()
