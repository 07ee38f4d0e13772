"""nax.Tensor: names, coordinates, DLPack, and section 12's arithmetic
(the seed examples of LANGUAGE.md section 12 / docs/src/named-tensors.md,
with their values), against xarray where it is installed."""

import numpy as np
import pytest

import nax


def t(values, names, dtype=np.float32):
    return nax.Tensor(np.asarray(values, dtype=dtype), names=names)


def test_attributes_and_repr():
    a = nax.Tensor(np.arange(6).reshape(2, 3), names=("x", "y"))
    assert a.names == ("x", "y") and a.shape == (2, 3) and a.dtype == "i64" and a.coords == {}
    c = nax.Tensor(np.array([1.0, 2.0, 3.0]), names=("x",), coords={"x": ["A", "B", "C"]})
    assert c.coords == {"x": ("A", "B", "C")}
    text = repr(c)
    assert "names=('x',)" in text and "shape=(3,)" in text and "dtype='f64'" in text and "'A'" in text
    assert nax.Tensor(np.zeros((2, 3))).names == (None, None)
    assert len(a) == 2


def test_the_examples_of_python_md():
    torch_zeros = np.zeros((4, 2, 3), np.float32)
    a = nax.Tensor(np.arange(6).reshape(2, 3), names=("x", "y"))
    b = nax.Tensor(torch_zeros, names=(None, "x", "y"))
    assert (a + b).names == (None, "x", "y")
    assert (a + b).shape == (4, 2, 3)


def test_names_pair_by_name_and_the_left_order_is_kept():
    x = t([1, 2], ("x",))
    y = t([10, 20, 30], ("y",))
    xy = x + y
    assert xy.shape == (2, 3)
    assert np.asarray(xy).ravel().tolist() == [11, 21, 31, 12, 22, 32]
    yx = t(np.arange(6).reshape(3, 2), ("y", "x"))
    s = xy + yx
    assert s.names == ("x", "y")
    assert np.asarray(s).ravel().tolist() == [11, 23, 35, 13, 25, 37]


def test_arrays_and_numbers_on_either_side():
    a = t([[1, 2, 3], [4, 5, 6]], ("x", "y"))
    for result in (a + np.ones(3, np.float32), np.ones(3, np.float32) + a, 1 + a, a + 1):
        assert isinstance(result, nax.Tensor) and result.names == ("x", "y")
        assert np.asarray(result).tolist() == [[2, 3, 4], [5, 6, 7]]
    assert np.asarray(np.full(3, 10, np.float32) - a).tolist() == [[9, 8, 7], [6, 5, 4]]


def test_the_rules_of_alignment():
    a = t(np.arange(6).reshape(2, 3), ("x", None))
    b = t([[10, 20, 30]], ("x", None))
    assert np.asarray(a + b).ravel().tolist() == [10, 21, 32, 13, 24, 35]
    assert (a * 10).names == ("x", None)
    with pytest.raises(nax.Error, match="is unnamed but follows a named axis"):
        a + t(np.zeros((2, 3)), ("x", "y"))
    p = t(np.zeros((2, 3)), (None, "x"))
    q = t(np.zeros((4, 1, 5)), (None, None, "y"))
    r = p + q
    assert r.shape == (4, 2, 3, 5) and r.names == (None, None, "x", "y")
    with pytest.raises(nax.Error, match="do not broadcast"):
        t([0, 0], ("x",)) + t([0, 0, 0], ("x",))


def test_the_sharp_edge():
    a = t(np.zeros((3, 3, 5)), (None, "x", "y"))
    d = np.arange(15).reshape(3, 5)
    for names, column in [((None, None), [0, 0, 0]), ((None, "y"), [0, 5, 10]), (("x", "y"), [0, 0, 0])]:
        s = a + t(d, names)
        assert s.shape == (3, 3, 5) and s.names == (None, "x", "y")
        assert np.asarray(s)[:, 0, 0].tolist() == column


def test_coordinates_join_inner_in_the_left_order():
    abc = nax.Tensor(np.array([1.0, 2.0, 3.0], np.float32), names=("x",), coords={"x": ["A", "B", "C"]})
    cba = nax.Tensor(np.array([10.0, 20.0, 30.0], np.float32), names=("x",), coords={"x": ["C", "B", "A"]})
    s = abc + cba
    assert np.asarray(s).tolist() == [31.0, 22.0, 13.0] and s.coords == {"x": ("A", "B", "C")}
    bcd = nax.Tensor(np.array([10.0, 20.0, 30.0], np.float32), names=("x",), coords={"x": ["B", "C", "D"]})
    s = abc + bcd
    assert s.coords == {"x": ("B", "C")} and np.asarray(s).tolist() == [12.0, 23.0]
    plain = t([100, 200, 300], ("x",))
    s = plain + abc
    assert np.asarray(s).tolist() == [101.0, 202.0, 303.0] and s.coords == {"x": ("A", "B", "C")}
    ints = nax.Tensor(np.array([1.0, 2.0]), names=("t",), coords={"t": [2020, 2021]})
    assert (ints * 2).coords == {"t": (2020, 2021)}
    strs = nax.Tensor(np.array([1.0, 2.0]), names=("t",), coords={"t": ["2020", "2021"]})
    with pytest.raises(nax.Error, match="ints on one side"):
        ints + strs


def test_bad_names_and_coordinates_are_errors():
    x = np.zeros((2, 3))
    with pytest.raises(nax.Error, match="3 names for a tensor of rank 2"):
        nax.Tensor(x, names=("a", "b", "c"))
    with pytest.raises(nax.Error, match="names: a tuple of one str or None per axis"):
        nax.Tensor(x, names=(1, 2))
    with pytest.raises(nax.Error, match="2 labels for an axis of size 3"):
        nax.Tensor(x, names=("a", "b"), coords={"b": ["p", "q"]})
    with pytest.raises(nax.Error, match="no axis is named 'c'"):
        nax.Tensor(x, names=("a", "b"), coords={"c": ["p", "q"]})
    with pytest.raises(nax.Error, match="mixes str and int"):
        nax.Tensor(x, names=("a", "b"), coords={"a": ["p", 1]})
    with pytest.raises(nax.Error, match="not a tensor"):
        nax.Tensor("text")


def test_dtypes_promote_as_torch():
    i = nax.Tensor(np.array([7, 1], np.int64), names=("i",))
    assert (i / nax.Tensor(np.array([2, 0], np.int64), names=("i",))).dtype == "f32"
    assert (i * 2).dtype == "i64"
    assert (i * 2.5).dtype == "f32"
    h = nax.Tensor(np.array([0.5], np.float16), names=("i",))
    assert (h * 2.0).dtype == "f16"
    lt = i < 3
    assert lt.dtype == "bool" and np.asarray(lt).tolist() == [False, True]
    assert np.asarray(3 - i).tolist() == [-4, 2]
    assert np.asarray(14 / i).tolist() == [2.0, 14.0]


def test_a_tensor_shares_the_memory_it_was_made_from():
    x = np.zeros(4, np.float32)
    a = nax.Tensor(x, names=("n",))
    x[1] = 5.0
    assert np.asarray(a)[1] == 5.0
    renamed = nax.Tensor(a, names=("m",))
    assert renamed.names == ("m",) and np.asarray(renamed)[1] == 5.0


def test_random_fully_named_operands_agree_with_xarray():
    xr = pytest.importorskip("xarray", reason="xarray is not installed: the property test against it is skipped")
    hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed: the property test is skipped")
    st = hypothesis.strategies
    names = ["a", "b", "c", "d"]
    sizes = {"a": 2, "b": 3, "c": 1, "d": 4}

    @hypothesis.given(st.permutations(names), st.permutations(names), st.integers(1, 4), st.integers(1, 4), st.integers(0, 2**32 - 1))
    @hypothesis.settings(max_examples=60, deadline=None)
    def check(left, right, lrank, rrank, seed):
        rng = np.random.default_rng(seed)
        ln, rn = left[:lrank], right[:rrank]
        lv = rng.standard_normal([sizes[n] for n in ln]).astype(np.float32)
        rv = rng.standard_normal([sizes[n] for n in rn]).astype(np.float32)
        got = nax.Tensor(lv, names=tuple(ln)) * nax.Tensor(rv, names=tuple(rn))
        want = xr.DataArray(lv, dims=ln) * xr.DataArray(rv, dims=rn)
        want = want.transpose(*got.names)
        assert np.allclose(np.asarray(got), want.values, rtol=1e-6)

    check()


def test_xarray_round_trip():
    xr = pytest.importorskip("xarray", reason="xarray is not installed: the conversion test is skipped")
    da = xr.DataArray(np.arange(6.0).reshape(2, 3), dims=("t", "city"), coords={"city": ["Oslo", "Rome", "Lima"], "t": [2020, 2021]})
    t = nax.Tensor.from_xarray(da)
    assert t.names == ("t", "city") and t.coords == {"t": (2020, 2021), "city": ("Oslo", "Rome", "Lima")}
    back = (t * 2).to_xarray()
    assert back.dims == ("t", "city") and list(back.coords["city"].values) == ["Oslo", "Rome", "Lima"]
    assert np.array_equal(back.values, da.values * 2)
    assert nax.Tensor(np.zeros((2, 3)), names=(None, "y")).to_xarray().dims == ("dim_0", "y")
