"""Turns a Hugging Face `transformers` GPT-2 checkpoint into the weights of
examples/gpt2/gpt2.nax.

    python examples/gpt2/convert.py CHECKPOINT_DIR weights.safetensors [--nax model.nax]

CHECKPOINT_DIR holds `config.json` and `model.safetensors` (what
`save_pretrained` writes), with transformers' own parameter names
(`h.0.attn.c_attn.weight`, with or without the `transformer.` prefix).
Per-layer weights are stacked along a first axis `L` of 12 layers (the
number gpt2.nax has); a checkpoint with fewer layers is padded with layers
whose projections and biases are zero, which add exactly nothing to the
residual stream. With `--nax`, a copy of gpt2.nax whose dims are the
checkpoint's (width, heads, vocabulary, positions) is written too.
"""

import argparse
import json
import pathlib
import re
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

HERE = pathlib.Path(__file__).resolve().parent
LAYERS = 12


def as_nax(tensors: dict, layers: int, d: int, gain: float = 1.0, total: int = LAYERS) -> dict:
    """transformers' GPT-2 tensors (weights, or their gradients) by
    gpt2.nax's names, per-layer ones stacked along L and padded to `total`
    layers (layer norms' gains with `gain`, everything else with zeros)."""

    def stacked(name: str, shape: tuple, fill: float = 0.0) -> np.ndarray:
        per_layer = [np.asarray(tensors[f"h.{i}.{name}"], dtype=np.float32) for i in range(layers)]
        per_layer += [np.full(shape, fill, np.float32)] * (total - layers)
        return np.ascontiguousarray(np.stack(per_layer))

    return {
        "wte": np.asarray(tensors["wte.weight"], dtype=np.float32),
        "wpe": np.asarray(tensors["wpe.weight"], dtype=np.float32),
        "ln1_g": stacked("ln_1.weight", (d,), gain),
        "ln1_b": stacked("ln_1.bias", (d,)),
        "attn_w": stacked("attn.c_attn.weight", (d, 3 * d)),
        "attn_b": stacked("attn.c_attn.bias", (3 * d,)),
        "proj_w": stacked("attn.c_proj.weight", (d, d)),
        "proj_b": stacked("attn.c_proj.bias", (d,)),
        "ln2_g": stacked("ln_2.weight", (d,), gain),
        "ln2_b": stacked("ln_2.bias", (d,)),
        "fc_w": stacked("mlp.c_fc.weight", (d, 4 * d)),
        "fc_b": stacked("mlp.c_fc.bias", (4 * d,)),
        "out_w": stacked("mlp.c_proj.weight", (4 * d, d)),
        "out_b": stacked("mlp.c_proj.bias", (d,)),
        "lnf_g": np.asarray(tensors["ln_f.weight"], dtype=np.float32),
        "lnf_b": np.asarray(tensors["ln_f.bias"], dtype=np.float32),
    }


def convert(checkpoint: pathlib.Path, weights: pathlib.Path, nax: pathlib.Path | None = None) -> dict:
    config = json.loads((checkpoint / "config.json").read_text())
    if config.get("activation_function", "gelu_new") != "gelu_new":
        sys.exit(f"convert.py: gpt2.nax uses GPT-2's tanh gelu, the checkpoint uses {config['activation_function']}")
    if abs(config.get("layer_norm_epsilon", 1e-5) - 1e-5) > 1e-12:
        sys.exit("convert.py: gpt2.nax uses layer norms with epsilon 1e-5")
    tensors = {re.sub(r"^transformer\.", "", k): v for k, v in load_file(checkpoint / "model.safetensors").items()}
    d, heads, vocab, positions, layers = (config[k] for k in ("n_embd", "n_head", "vocab_size", "n_positions", "n_layer"))
    if layers > LAYERS:
        sys.exit(f"convert.py: the checkpoint has {layers} layers, gpt2.nax {LAYERS}")
    hidden = config.get("n_inner") or 4 * d
    if hidden != 4 * d:
        sys.exit("convert.py: gpt2.nax's MLP is 4 times the width")

    out = as_nax(tensors, layers, d)
    save_file(out, str(weights))
    if nax is not None:
        dims = {"D": d, "H": heads, "V": vocab, "P": positions}
        source = (HERE / "gpt2.nax").read_text()
        for name, value in dims.items():
            source = re.sub(rf"^dim {name} = \d+", f"dim {name} = {value}", source, flags=re.M)
        nax.write_text(source)
    return {"layers": layers, "width": d, "heads": heads, "vocabulary": vocab, "positions": positions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", type=pathlib.Path)
    parser.add_argument("weights", type=pathlib.Path)
    parser.add_argument("--nax", type=pathlib.Path, help="also write gpt2.nax with the checkpoint's dims here")
    args = parser.parse_args()
    print(json.dumps(convert(args.checkpoint, args.weights, args.nax)))


if __name__ == "__main__":
    main()
