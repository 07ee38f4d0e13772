"""The reference for nax's GPT-2: transformers' GPT2LMHeadModel with a small
configuration (2 layers, width 128, 4 heads, vocabulary 1000) and random
weights (no download), seeded.

    python examples/gpt2/reference.py OUT_DIR

writes OUT_DIR/hf (the checkpoint), OUT_DIR/weights.safetensors and
OUT_DIR/gpt2.nax (through convert.py), and OUT_DIR/reference.safetensors:
`prompt` (Int [1 n]), `logits` ([1 n V], the prefill), `next` (the greedy
token after the prompt), `k_cache` and `v_cache` ([12 1 H n Dh], the
model's past_key_values after the prompt, padded as convert.py pads the
layers), `step_logits` ([1 1 V], the logits of `next` through that cache)
and `generated` (Int [1 20], model.generate's greedy continuation); and
OUT_DIR/gradients.safetensors: `loss` (the next-token cross entropy of
the prompt, `GPT2LMHeadModel(labels=prompt)`) and its gradient by every
parameter after `backward()`, by gpt2.nax's names (`d_wte`, ...; the
layers after the model's own are zeros).
"""

import pathlib
import re
import sys

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from convert import LAYERS, as_nax, convert  # noqa: E402

PROMPT = 9
NEW_TOKENS = 20


def main(out: pathlib.Path) -> None:
    torch.manual_seed(0)
    # Weights drawn wider than GPT-2's initialisation (0.02), so that the
    # greedy continuation varies rather than repeating the last token.
    config = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, initializer_range=0.1)
    model = GPT2LMHeadModel(config).eval()
    model.save_pretrained(out / "hf", safe_serialization=True)
    convert(out / "hf", out / "weights.safetensors", out / "gpt2.nax")
    prompt = torch.randint(0, config.vocab_size, (1, PROMPT))
    with torch.no_grad():
        prefill = model(prompt, use_cache=True)
        nxt = prefill.logits[:, -1].argmax(-1, keepdim=True)
        cache = prefill.past_key_values
        step = model(nxt, past_key_values=cache, use_cache=True)
        generated = model.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)
    # The cache after the prompt alone (the step above appended to it).
    with torch.no_grad():
        cache = model(prompt, use_cache=True).past_key_values
    layers = [cache.layers[i] for i in range(config.n_layer)]
    pad = torch.zeros_like(layers[0].keys)
    k = torch.stack([l.keys for l in layers] + [pad] * (LAYERS - config.n_layer))
    v = torch.stack([l.values for l in layers] + [pad] * (LAYERS - config.n_layer))
    save_file(
        {
            "prompt": prompt.contiguous(),
            "logits": prefill.logits.contiguous(),
            "next": nxt.contiguous(),
            "k_cache": k.contiguous(),
            "v_cache": v.contiguous(),
            "step_logits": step.logits.contiguous(),
            "generated": generated[:, PROMPT:].contiguous(),
        },
        str(out / "reference.safetensors"),
    )


    # The training loss and its gradients (eval mode: no dropout).
    out_loss = model(prompt, labels=prompt).loss
    out_loss.backward()
    grads = {re.sub(r"^transformer\.", "", name): p.grad.numpy() for name, p in model.named_parameters() if p.grad is not None}
    grads = {f"d_{k}": torch.from_numpy(v) for k, v in as_nax(grads, config.n_layer, config.n_embd, gain=0.0).items()}
    save_file({"loss": out_loss.detach().reshape(()).contiguous(), **grads}, str(out / "gradients.safetensors"))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
