"""Shared helpers of the Python package's tests (run by .ci/test after the
package is installed: ``pytest python/tests``)."""

import os
import pathlib
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def nax_binary():
    """The `nax` command: $NAX, the repository's build, or the PATH."""
    if os.environ.get("NAX"):
        return os.environ["NAX"]
    for profile in ("release", "debug"):
        candidate = ROOT / "target" / profile / "nax"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("nax")


@pytest.fixture
def torch():
    """PyTorch, or the test is skipped, saying why."""
    return pytest.importorskip("torch", reason="PyTorch is not installed: the torch tests are skipped")
