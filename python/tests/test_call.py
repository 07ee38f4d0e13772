"""Calls: numpy inputs of any layout read in place, binding by position,
by keyword and by name, host scalars, threads, and every error path of a
call (PYTHON.md)."""

import threading
import time

import numpy as np
import pytest

import nax

SOURCE = """\
def affine(x: [n d], w: [d k], b: [k], s: float) -> [n k] {
    return (x @ w + b) * s
}
def pick(x: [n d], i: int, flag: bool) -> [n d] {
    return x * i
}
"""


@pytest.fixture(scope="module")
def compiled():
    return nax.compile(SOURCE), nax.compile(SOURCE, backend="interp")


def arrays(rng):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    return x, w, b


def test_numpy_arrays_of_any_layout_give_the_interpreters_result(compiled):
    m, reference = compiled
    rng = np.random.default_rng(0)
    x, w, b = arrays(rng)
    want = np.asarray(reference.affine(x, w, b, 0.5))
    assert np.allclose(want, (x @ w + b) * 0.5, rtol=1e-5, atol=1e-6)
    big = rng.standard_normal((9, 8)).astype(np.float32)
    layouts = {
        "contiguous": x,
        "transposed": np.ascontiguousarray(x.T).T,
        "sliced with steps": np.ascontiguousarray(np.repeat(x, 2, axis=1))[:, ::2],
        "reversed": np.ascontiguousarray(x[::-1, ::-1])[::-1, ::-1],
        "offset into a larger buffer": big[2:6, 1:4],
    }
    layouts["offset into a larger buffer"][...] = x
    for label, view in layouts.items():
        assert np.array_equal(view, x), label
        got = np.asarray(m.affine(view, w, b, 0.5))
        assert np.allclose(got, want, rtol=1e-5, atol=1e-6), label


def test_arguments_bind_by_position_by_keyword_and_mixed(compiled):
    m, _ = compiled
    x, w, b = arrays(np.random.default_rng(1))
    a = np.asarray(m.affine(x, w, b, 2.0))
    assert np.array_equal(np.asarray(m.affine(x=x, w=w, b=b, s=2.0)), a)
    assert np.array_equal(np.asarray(m.affine(x, w, s=2.0, b=b)), a)
    assert np.array_equal(np.asarray(m["affine"](b=b, s=2, w=w, x=x)), a)


def test_a_named_tensor_binds_by_its_names(compiled):
    m, _ = compiled
    x, w, b = arrays(np.random.default_rng(2))
    xt = nax.Tensor(np.ascontiguousarray(x.T), names=("d", "n"))
    got = m.affine(xt, w, b, 1.0)
    assert got.names == ("n", "k")
    assert np.allclose(np.asarray(got), x @ w + b, rtol=1e-5, atol=1e-6)


def test_host_scalars_of_each_type(compiled):
    m, _ = compiled
    x = np.ones((2, 2), np.float32)
    assert np.asarray(m.pick(x, 3, True)).tolist() == [[3.0, 3.0], [3.0, 3.0]]
    assert np.asarray(m.pick(x, np.int64(2), False)).tolist() == [[2.0, 2.0], [2.0, 2.0]]
    with pytest.raises(nax.Error, match="host int"):
        m.pick(x, 1.5, True)
    with pytest.raises(nax.Error, match="host float"):
        m.affine(x, x, x[0], "two")


def test_every_bad_call_raises_nax_error_with_the_message_nax_run_prints(compiled):
    m, _ = compiled
    x, w, b = arrays(np.random.default_rng(3))
    cases = [
        (lambda: m.affine(x, w, b), "parameter .s. \\(float\\) needs a value"),
        (lambda: m.affine(x, w, b, 1.0, 2.0), "takes 4 arguments, 5 were given"),
        (lambda: m.affine(x, w, b, 1.0, y=x), "no parameter 'y'"),
        (lambda: m.affine(x, w, b, x=x, s=1.0), "given twice"),
        (lambda: m.affine(x[0], w, b, 1.0), "rank 2"),
        (lambda: m.affine(x, w[:2], b, 1.0), "d"),
        (lambda: m.affine(x.astype(np.float64), w, b, 1.0), "f32"),
        (lambda: m.affine([[1.0]], w, b, 1.0), "a list is not a tensor"),
        (lambda: m.affine(x.astype(np.uint8), w, b, 1.0), "uint8"),
    ]
    for call, message in cases:
        with pytest.raises(nax.Error, match=message):
            call()
    with pytest.raises(AttributeError, match="no function 'nope'"):
        m.nope
    with pytest.raises(KeyError):
        m["nope"]


def test_calls_from_eight_threads_at_once(compiled):
    m, reference = compiled
    rng = np.random.default_rng(4)
    inputs = [arrays(rng) for _ in range(8)]
    wants = [np.asarray(reference.affine(x, w, b, 1.5)) for x, w, b in inputs]
    results = [None] * 8
    barrier = threading.Barrier(8)

    def work(i):
        barrier.wait()
        x, w, b = inputs[i]
        for _ in range(50):
            results[i] = np.asarray(m.affine(x, w, b, 1.5))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, wants):
        assert np.allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_result_is_a_tensor_whose_memory_numpy_shares(compiled):
    m, _ = compiled
    x, w, b = arrays(np.random.default_rng(5))
    y = m.affine(x, w, b, 1.0)
    assert isinstance(y, nax.Tensor) and y.dtype == "f32" and y.shape == (4, 5)
    a, c = np.from_dlpack(y), y.numpy()
    a[0, 0] = 42.0
    assert c[0, 0] == 42.0
    assert np.asarray(y)[0, 0] == 42.0


def test_a_call_releases_the_gil_while_it_runs():
    m = nax.compile("def f(a: [n k], b: [k m]) -> [n m] {\n    return a @ b\n}\n", threads=1)
    a = np.ones((1024, 1024), np.float32)
    m.f(a, a)
    span = []
    done = threading.Event()

    def work():
        start = time.perf_counter()
        m.f(a, a)
        span.extend([start, time.perf_counter()])
        done.set()

    stamps = []
    worker = threading.Thread(target=work)
    worker.start()
    while not done.is_set():
        stamps.append(time.perf_counter())
    worker.join()
    start, end = span
    inside = [t for t in stamps if start < t < end]
    # Holding the GIL, the call would leave this thread no turn while it ran.
    assert inside, f"the main thread never ran during the {1e3 * (end - start):.1f} ms call"
    assert inside[-1] - inside[0] > 0.5 * (end - start), "the main thread ran only at the call's edges"
