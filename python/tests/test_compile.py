"""nax.compile: sources as text or files, back ends, weights, diagnostics."""

import json
import pathlib
import subprocess

import numpy as np
import pytest

import nax

from conftest import ROOT, nax_binary

SCALE = "def scale(x: [n d], s: float) -> [n d] {\n    return x * s\n}\n"


def test_a_program_compiles_from_text_and_lists_its_functions():
    m = nax.compile(SCALE)
    assert m.functions == ["scale"]
    assert m.scale.signature == "fn scale(x: f32[n d], s: float) -> f32[n d]"
    assert m["scale"].name == "scale"
    assert "scale" in dir(m)


def test_a_program_compiles_from_a_file_path(tmp_path):
    path = tmp_path / "scale.nax"
    path.write_text(SCALE)
    for source in (str(path), path):
        m = nax.compile(source)
        assert np.asarray(m.scale(np.ones((1, 2), np.float32), 3.0)).tolist() == [[3.0, 3.0]]


@pytest.mark.parametrize("backend", ["llvm", "cranelift", "mlir", "interp"])
def test_every_backend_gives_the_same_result(backend):
    m = nax.compile(SCALE, backend=backend)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(np.asarray(m.scale(x, 0.5)), x * 0.5)


def test_an_unknown_backend_is_an_error():
    with pytest.raises(nax.Error, match="backend 'gpu'"):
        nax.compile(SCALE, backend="gpu")


def test_the_cuda_backend_runs_on_a_gpu_or_says_there_is_none():
    m = nax.compile(SCALE, backend="cuda")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    try:
        y = m.scale(x, 0.5)
    except nax.Error as e:
        assert "no NVIDIA GPU driver on this machine" in str(e)
    else:
        assert np.array_equal(np.asarray(y), x * 0.5)


def test_a_program_that_does_not_check_raises_compile_error_with_the_cli_json():
    source = "def f(x: [n]) -> [m] {\n    return x\n}\n"
    with pytest.raises(nax.CompileError) as info:
        nax.compile(source)
    e = info.value
    assert isinstance(e, ValueError)
    assert "error[E0201]" in str(e) and "<source>:1:19" in str(e)
    assert [d["code"] for d in e.diagnostics] == ["E0201"]
    d = e.diagnostics[0]
    assert (d["line"], d["column"], d["severity"]) == (1, 19, "error")
    binary = nax_binary()
    if binary:
        # The same objects as `nax check --format json` prints.
        path = pathlib.Path(ROOT / "target" / "python-check.nax")
        path.write_text(source)
        out = subprocess.run([binary, "check", str(path), "--format", "json"], capture_output=True, text=True)
        assert json.loads(out.stdout)["diagnostics"] == e.diagnostics


def test_a_missing_file_and_a_wrong_source_type_are_errors(tmp_path):
    with pytest.raises(nax.Error, match="missing.nax"):
        nax.compile(str(tmp_path / "missing.nax"))
    with pytest.raises(nax.Error, match="source"):
        nax.compile(42)


def test_weights_from_a_dict_and_from_a_safetensors_file(tmp_path):
    source = "dim d = 2\nparam w: [d]\ndef f(x: [n d]) -> [n d] {\n    return x + w\n}\n"
    w = np.array([1.0, 2.0], np.float32)
    m = nax.compile(source, weights={"w": w})
    assert np.asarray(m.f(np.zeros((1, 2), np.float32))).tolist() == [[1.0, 2.0]]
    safetensors = pytest.importorskip("safetensors.numpy", reason="the safetensors package is not installed")
    path = tmp_path / "w.safetensors"
    safetensors.save_file({"w": w}, str(path))
    m = nax.compile(source, weights=str(path))
    assert np.asarray(m.f(np.zeros((1, 2), np.float32))).tolist() == [[1.0, 2.0]]
    with pytest.raises(nax.Error):
        nax.compile(source, weights=str(tmp_path / "none.safetensors"))


def test_a_weight_is_packed_once_however_many_calls_read_it():
    source = "dim t = 64\ndim D = 96\ndim F = 200\nparam w: [D F]\ndef f(x: [t D]) -> [t F] {\n    return x @ w\n}\n"
    rng = np.random.default_rng(3)
    w = rng.standard_normal((96, 200)).astype(np.float32)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    m = nax.compile(source, weights={"w": w}, threads=2)
    assert m.weight_packings == 0
    for _ in range(5):
        np.testing.assert_allclose(np.asarray(m.f(x)), x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)
    assert m.weight_packings == 1


def test_help_explains_compile():
    assert "Compiles a nax program" in nax.compile.__doc__
    assert "nax.compile" in nax.__doc__
