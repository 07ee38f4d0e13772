"""The README's quick start, run as a newcomer would copy it (every shell
block after the install, in order, in an empty folder, then the Python
block), and the book's Python example: nothing assumed that the text does
not create. Needs the `nax` command (`NAX`, as the suite gives it), a C
compiler, numpy and safetensors."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def blocks(text, language):
    return re.findall(r"```" + language + r"\n(.*?)```", text, re.S)


def section(text, heading):
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end >= 0 else len(text)]


def run_shell_blocks(shell, folder, what):
    """Runs each shell block in `folder` with bash -euo pipefail and the
    built `nax` first on PATH (a newcomer's setting), in order; their
    outputs. Skips where the tools a newcomer would have are missing."""
    nax = os.environ.get("NAX") or shutil.which("nax")
    if not nax or os.path.basename(nax) != "nax":
        pytest.skip("the nax command is not built (set NAX to it)")
    if not shutil.which("cc"):
        pytest.skip(f"no C compiler: {what} builds a library")
    pytest.importorskip("safetensors", reason=f"{what} writes safetensors files with numpy")
    env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(nax)) + os.pathsep + os.environ["PATH"])
    outputs = []
    for block in shell:
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", block.replace("python3", sys.executable)], cwd=folder, env=env, capture_output=True, text=True)
        assert run.returncode == 0, f"{block}\n{run.stdout}\n{run.stderr}"
        outputs.append(run.stdout)
    return outputs


def exec_in(folder, code, name):
    """Runs Python `code` (named `name` in tracebacks) in `folder`, as a
    newcomer runs it there."""
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(code, name, "exec"), {})
    finally:
        os.chdir(cwd)


def test_the_quick_start_runs_as_written(tmp_path):
    quick = section((ROOT / "README.md").read_text(), "## Quick start")
    shell = [b for b in blocks(quick, "sh") if "cargo install" not in b]
    assert len(shell) >= 3
    outputs = run_shell_blocks(shell, tmp_path, "the quick start")
    # x + relu(x @ w), w = I/2 + 1/8: the first row is [2.75, 4.25, 5.75, 7.25].
    assert "2.75" in outputs[1] and "y[0] = 2.75 4.25 5.75 7.25" in outputs[2]
    (python,) = blocks(quick, "python")
    exec_in(tmp_path, python, "README quick start")


def test_the_command_line_chapter_runs_as_written(tmp_path):
    """Every shell block of docs/src/cli.md, in order, in an empty folder."""
    shell = blocks((ROOT / "docs" / "src" / "cli.md").read_text(), "sh")
    assert len(shell) >= 4
    outputs = run_shell_blocks(shell, tmp_path, "the chapter")
    # rms([1 -1 1 -1]) * g * scale = [1 -1 1 -1] * 2 * 0.5, up to the 1e-6.
    assert "[ 0.9999995 -0.9999995  0.9999995 -0.9999995]" in outputs[2] or "[ 1. -1.  1. -1.]" in outputs[2], outputs[2]
    for made in ["checked.json", "out.safetensors", "out_interp.safetensors", "norm.graph", "norm.py", "norm.ll", "lib/libnorm.so", "lib/norm.h"]:
        assert (tmp_path / made).is_file(), made


def test_the_books_python_example_runs():
    pytest.importorskip("torch", reason="the book's Python example takes torch tensors")
    (example,) = blocks((ROOT / "docs" / "src" / "using.md").read_text(), "python")
    exec(compile(example, "docs/src/using.md", "exec"), {})


def test_the_books_nax_examples_check(tmp_path):
    """Every ```nax block of the book, its reference part included, as
    `nax check` sees it: a plain or ```nax,ok block checks clean; one
    tagged with an error code (```nax,E0404) gives that error; one tagged
    with a warning code (```nax,W0601) checks with that warning."""
    nax = os.environ.get("NAX") or shutil.which("nax")
    if not nax:
        pytest.skip("the nax command is not built (set NAX to it)")
    found = 0
    for page in sorted((ROOT / "docs" / "src").rglob("*.md")):
        for n, (code, source) in enumerate(re.findall(r"```nax(?:,(ok|[EW]\d+))?\n(.*?)```", page.read_text(), re.S)):
            path = tmp_path / f"{page.parent.name}_{page.stem}_{n}.nax"
            path.write_text(source)
            run = subprocess.run([nax, "check", str(path)], capture_output=True, text=True)
            where = f"{page.relative_to(ROOT)}, example {n + 1}"
            if code.startswith("E"):
                assert run.returncode == 1 and f"error[{code}]" in run.stderr, f"{where}: expected {code}\n{run.stderr}"
            elif code.startswith("W"):
                assert run.returncode == 0 and f"warning[{code}]" in run.stderr, f"{where}: expected {code}\n{run.stderr}"
            else:
                assert run.returncode == 0 and "warning" not in run.stderr, f"{where}\n{run.stderr}"
            found += 1
    assert found >= 100


def test_the_python_chapter_runs():
    """Every Python block of docs/src/python.md, in order, in one namespace
    (those that import torch where it is installed)."""
    import importlib.util

    namespace = {}
    for block in blocks((ROOT / "docs" / "src" / "python.md").read_text(), "python"):
        if "import torch" in block and importlib.util.find_spec("torch") is None:
            print("skipped a block of docs/src/python.md: PyTorch is not installed")
            continue
        exec(compile(block, "docs/src/python.md", "exec"), namespace)


def test_the_readmes_pytorch_import_runs_as_written(tmp_path, capsys):
    """README's "From a PyTorch model": the Python block imports a small
    GPT-2, the shell block builds its library and calls it from C; the
    next token from C is PyTorch's."""
    pytest.importorskip("torch", reason="the README's import takes a PyTorch model")
    pytest.importorskip("transformers", reason="the README's import takes a Hugging Face model")
    part = section((ROOT / "README.md").read_text(), "## From a PyTorch model")
    (python,) = blocks(part, "python")
    exec_in(tmp_path, python, "README's PyTorch import")
    expected = capsys.readouterr().out.split("PyTorch's next token:")[1].strip()
    (output,) = run_shell_blocks(blocks(part, "sh"), tmp_path, "the PyTorch import")
    assert output.strip() == f"nax's next token: {expected}", output
