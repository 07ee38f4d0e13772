"""The Python examples run (with PyTorch; skipped, saying so, without it)."""

import subprocess
import sys

from conftest import ROOT


def test_the_distributed_example_runs_on_two_processes(torch):
    out = subprocess.run([sys.executable, str(ROOT / "examples/python/distributed.py"), "2"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 processes: gathered (256, 64)" in out.stdout, out.stdout


def test_the_gpt2_decoding_loop_gives_transformers_greedy_tokens(tmp_path):
    """examples/gpt2/decode.py (a preallocated cache written in place from
    `step`'s named results) against transformers' own greedy decoding."""
    import pytest

    pytest.importorskip("transformers", reason="transformers is not installed: the GPT-2 decoding example is not compared")
    made = subprocess.run([sys.executable, str(ROOT / "examples/gpt2/reference.py"), str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr
    from safetensors.numpy import load_file

    reference = load_file(str(tmp_path / "reference.safetensors"))
    prompt = [str(int(t)) for t in reference["prompt"][0]]
    want = " ".join(str(int(t)) for t in reference["generated"][0])
    args = [str(tmp_path / "gpt2.nax"), str(tmp_path / "weights.safetensors"), str(len(reference["generated"][0])), *prompt]
    out = subprocess.run([sys.executable, str(ROOT / "examples/gpt2/decode.py"), *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == want


def test_gpt2_trained_in_nax_follows_pytorchs_adamw(torch, tmp_path):
    """examples/gpt2/train.py: a small GPT-2 trained with nax's gradients
    and nax's AdamW, and with transformers and torch.optim.AdamW, from one
    initialisation on one text: the first 20 losses agree within 1e-3
    (relative) and both fall; the script writes its PNG."""
    import importlib.util

    import pytest

    pytest.importorskip("transformers", reason="transformers is not installed: the training example is not compared")
    spec = importlib.util.spec_from_file_location("train", ROOT / "examples/gpt2/train.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    ours, theirs = train.nax_losses(20), train.torch_losses(20)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        assert abs(a - b) <= 1e-3 * abs(b), f"step {step}: nax {a}, PyTorch {b}"
    assert ours[-1] < ours[0] - 1.0 and theirs[-1] < theirs[0] - 1.0, (ours, theirs)
    png = tmp_path / "loss.png"
    out = subprocess.run([sys.executable, str(ROOT / "examples/gpt2/train.py"), "--steps", "5", "--png", str(png)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "last loss: nax" in out.stdout and (png.exists() or "no PNG" in out.stdout), out.stdout
