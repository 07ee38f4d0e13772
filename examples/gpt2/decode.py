"""Greedy decoding with GPT-2 from Python, through nax: the prompt goes
through `step` with an empty cache, then each new token alone. The
key/value caches are numpy arrays allocated once, [L 1 H capacity Dh];
each step reads their first `length` positions in place (a strided view,
no copy), and its new keys and values, the named results `k` and `v`, are
written after them.

    python examples/gpt2/decode.py gpt2.nax WEIGHTS.safetensors NEW_TOKENS PROMPT_ID...

prints the generated ids on one line.
"""

import argparse
import re

import numpy as np
from safetensors.numpy import load_file

import nax


def cache_dims(step):
    """L, H and Dh of the caches, from the signature of `step`."""
    cache = re.search(r"k_cache: f32\[L=(\d+) b H=(\d+) c Dh=(\d+)\]", step.signature)
    return tuple(int(x) for x in cache.groups())


def decode(step, prompt, new_tokens):
    """The greedy ids after `prompt`, from gpt2.nax's `step`."""
    layers, heads, depth = cache_dims(step)
    capacity = len(prompt) + new_tokens
    keys = np.zeros((layers, 1, heads, capacity, depth), dtype=np.float32)
    values = np.zeros_like(keys)
    ids = np.array([prompt], dtype=np.int64)
    length = 0
    generated = []
    for _ in range(new_tokens):
        out = step(ids, keys[:, :, :, :length], values[:, :, :, :length])
        n = ids.shape[1]
        keys[:, :, :, length : length + n] = np.asarray(out.k)
        values[:, :, :, length : length + n] = np.asarray(out.v)
        length += n
        token = int(np.asarray(out.logits)[0, -1].argmax())
        generated.append(token)
        ids = np.array([[token]], dtype=np.int64)
    return generated


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("weights")
    parser.add_argument("new_tokens", type=int)
    parser.add_argument("prompt", type=int, nargs="+")
    args = parser.parse_args()
    with open(args.source) as f:
        module = nax.compile(f.read(), weights=load_file(args.weights))
    print(" ".join(str(t) for t in decode(module.step, args.prompt, args.new_tokens)))


if __name__ == "__main__":
    main()
