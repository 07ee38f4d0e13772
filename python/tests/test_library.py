"""nax.load: a library built by `nax build --emit so` (ABI.md), called
like a compiled module, agreeing with it."""

import subprocess

import numpy as np
import pytest

import nax

from conftest import nax_binary

SOURCE = """\
dim d = 3
dim k = 4
param w: [d k]
def project(x: [n d], s: float) -> [n k] {
    return (x @ w) * s
}
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    binary = nax_binary()
    if binary is None:
        pytest.skip("no nax binary (build it with cargo build, or set NAX): the library tests are skipped")
    safetensors = pytest.importorskip("safetensors.numpy", reason="the safetensors package is not installed")
    d = tmp_path_factory.mktemp("lib")
    (d / "proj.nax").write_text(SOURCE)
    w = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    safetensors.save_file({"w": w}, str(d / "w.safetensors"))
    out = subprocess.run([binary, "build", str(d / "proj.nax"), "--emit", "so", "-o", str(d / "libproj.so")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return d, w


def test_a_library_gives_what_the_compiled_module_gives(library):
    d, w = library
    lib = nax.load(d / "libproj.so", weights=d / "w.safetensors", threads=1)
    assert lib.functions == ["project"]
    x = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    want = np.asarray(nax.compile(SOURCE, weights={"w": w}).project(x, 2.0))
    got = lib.project(x, s=2.0)
    assert got.names == ("n", "k") and got.shape == (5, 4)
    assert np.allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    named = lib["project"](nax.Tensor(np.ascontiguousarray(x.T), names=("d", "n")), 2.0)
    assert np.allclose(np.asarray(named), want, rtol=1e-5, atol=1e-6)


def test_library_errors(library):
    d, _ = library
    lib = nax.load(d / "libproj.so", weights=d / "w.safetensors")
    with pytest.raises(nax.Error, match="x"):
        lib.project(np.zeros((5, 2), np.float32), 1.0)
    with pytest.raises(AttributeError):
        lib.nope
    with pytest.raises(nax.Error, match="libNAME.so"):
        nax.load(d / "proj.nax")
    with pytest.raises(nax.Error):
        nax.load(d / "libmissing.so")
    with pytest.raises(nax.Error):
        nax.load(d / "libproj.so", weights=d / "missing.safetensors")


def test_a_librarys_gradients_are_the_compiled_modules(tmp_path):
    """A function returning `grad(...)` (LANGUAGE.md section 15) built into a
    library: its value and derivatives by name, through the C ABI, are the
    compiled module's."""
    binary = nax_binary()
    if binary is None:
        pytest.skip("no nax binary (build it with cargo build, or set NAX): the library tests are skipped")
    safetensors = pytest.importorskip("safetensors.numpy", reason="the safetensors package is not installed")
    source = SOURCE + "def fit(x: [n d], y: [n k]) -> (loss: [], d_w: [d k], d_x: [n d]) {\n    e = x @ w - y\n    return grad(mean(sum(e * e, k), n), w, x)\n}\n"
    (tmp_path / "fit.nax").write_text(source)
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    safetensors.save_file({"w": w}, str(tmp_path / "w.safetensors"))
    out = subprocess.run([binary, "build", str(tmp_path / "fit.nax"), "--emit", "so", "-o", str(tmp_path / "libfit.so")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    x, y = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    got = nax.load(tmp_path / "libfit.so", weights=tmp_path / "w.safetensors", threads=1).fit(x, y)
    want = nax.compile(source, weights={"w": w}).fit(x, y)
    assert got._fields == ("loss", "d_w", "d_x")
    e = x @ w - y
    assert np.allclose(np.asarray(got.d_w), 2 * x.T @ e / 5, rtol=1e-5, atol=1e-6)
    for a, b in zip(got, want):
        assert np.allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
