"""Hostile input through the Python package (issue 28): each door ends in
the right result or a clear `nax.Error`, quickly, never a crash."""

import time

import numpy as np
import pytest

import nax


def test_threads_past_the_limit_are_refused_at_once():
    started = time.monotonic()
    for threads in (5000, 10**9):
        with pytest.raises(nax.Error, match="1024"):
            nax.compile("def f(x: [n]) -> [n] {\n    return x\n}\n", threads=threads)
    assert time.monotonic() - started < 5


def test_a_host_int_past_int64_is_named_as_out_of_range():
    m = nax.compile("def g(x: [n], k: int) -> [n] {\n    return x * k\n}\n")
    for k in (2**63, 2**64, -(2**63) - 1):
        with pytest.raises(nax.Error, match="does not fit a host int"):
            m.g(np.ones(3, np.float32), k)
    assert m.g(np.ones(3, np.float32), 2**40).numpy()[0] == 2.0**40


def test_weights_are_checked_when_bound():
    source = "param w: [3]\ndef h(x: [3]) -> [3] {\n    return x + w\n}\n"
    with pytest.raises(nax.Error, match="axis 0 has size 4"):
        nax.compile(source, weights={"w": np.ones(4, np.float32)})
    with pytest.raises(nax.Error, match="f64"):
        nax.compile(source, weights={"w": np.ones(3, np.float64)})
    with pytest.raises(nax.Error, match="rank"):
        nax.compile(source, weights={"w": np.ones((3, 1), np.float32)})


class Legacy:
    """A DLPack producer from before 1.0: `__dlpack__` takes no `max_version`."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_legacy_dlpack_producers_are_read():
    m = nax.compile("def g(x: [n], k: int) -> [n] {\n    return x * k\n}\n")
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(m.g(Legacy(x), 2).numpy(), x * 2)
    np.testing.assert_array_equal(m.g(x.__dlpack__(), 2).numpy(), x * 2)


def test_a_broadcast_mask_is_read_in_place():
    m = nax.compile("def f(x: [n], keep: Mask[n]) -> [n] {\n    return masked_fill(x, !keep, 0.0)\n}\n")
    n = 1 << 24
    x = np.broadcast_to(np.float32(2.0), (n,))
    keep = np.broadcast_to(np.True_, (n,))
    started = time.monotonic()
    out = m.f(x, keep).numpy()
    assert out.shape == (n,) and out[0] == 2.0 and out[-1] == 2.0
    assert time.monotonic() - started < 10


def test_results_with_empty_axes_have_valid_strides():
    torch = pytest.importorskip("torch", reason="needs torch (torch.from_dlpack of the result)")
    m = nax.compile("def mm(x: [a b c], w: [c d]) -> [a b d] {\n    return x @ w\n}\n")
    r = m.mm(np.zeros((0, 3, 0), np.float32), torch.empty(0, 2**63 - 1))
    t = torch.from_dlpack(r)
    assert tuple(t.shape) == (0, 3, 2**63 - 1)
    assert all(0 <= s <= 2**63 - 1 for s in t.stride())
