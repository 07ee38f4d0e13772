"""Functions of several results (LANGUAGE.md section 14) return a named
tuple of `nax.Tensor`s, fields named as declared, from a compiled module
and from an AOT library alike; loops run as their unrolled program."""

import subprocess

import numpy as np
import pytest

import nax

from conftest import nax_binary

SOURCE = """\
dim n = 4
dim L = 3
param w: [L n n]
def step(x: [b n]) -> (y: [b n], hs: [L b n], total: [b]) {
    hs = for l in L {
        x = tanh(x @ w[L = l])
        yield x
    }
    return x, hs, sum(x, n)
}
def last(x: [b n]) -> [b n] {
    y, hs, t = step(x)
    return y
}
"""


def reference(x, w):
    hs = []
    for l in range(3):
        x = np.tanh(x @ w[l])
        hs.append(x)
    return x, np.stack(hs), x.sum(axis=1)


@pytest.fixture(scope="module")
def weights():
    return np.random.default_rng(1).standard_normal((3, 4, 4)).astype(np.float32)


def check(out, x, w):
    y, hs, total = reference(x, w)
    assert type(out).__name__ == "step_results"
    assert out._fields == ("y", "hs", "total")
    assert out.hs.names == ("L", "b", "n")
    np.testing.assert_allclose(np.asarray(out.y), y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(out.hs), hs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(out.total), total, rtol=1e-5, atol=1e-5)
    y2, hs2, total2 = out
    assert np.array_equal(np.asarray(y2), np.asarray(out.y))


def test_a_compiled_function_of_several_results_returns_a_named_tuple(weights):
    m = nax.compile(SOURCE, weights={"w": weights})
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    check(m.step(x), x, weights)
    # A function of one result still returns the tensor itself.
    last = m.last(x)
    assert isinstance(last, nax.Tensor)
    np.testing.assert_allclose(np.asarray(last), reference(x, weights)[0], rtol=1e-5, atol=1e-6)
    assert "(y: f32[b n=4], hs: f32[L=3 b n=4], total: f32[b])" in m.step.signature


def test_a_library_function_of_several_results_returns_the_same_named_tuple(weights, tmp_path):
    binary = nax_binary()
    if binary is None:
        pytest.skip("no nax binary (build it with cargo build, or set NAX): the library test is skipped")
    safetensors = pytest.importorskip("safetensors.numpy", reason="the safetensors package is not installed")
    (tmp_path / "steps.nax").write_text(SOURCE)
    safetensors.save_file({"w": weights}, str(tmp_path / "w.safetensors"))
    out = subprocess.run([binary, "build", str(tmp_path / "steps.nax"), "--emit", "so", "-o", str(tmp_path / "libsteps.so")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lib = nax.load(tmp_path / "libsteps.so", weights=tmp_path / "w.safetensors", threads=1)
    x = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    check(lib.step(x), x, weights)
    assert isinstance(lib.last(x), nax.Tensor)
