"""The Python examples run (with PyTorch; skipped, saying so, without it)."""

import subprocess
import sys

from conftest import ROOT


def test_the_distributed_example_runs_on_two_processes(torch):
    out = subprocess.run([sys.executable, str(ROOT / "examples/python/distributed.py"), "2"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 processes: gathered (256, 64)" in out.stdout, out.stdout
