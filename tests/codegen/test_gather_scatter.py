"""Gathers and scatters generated in kernels (`loop.index`): the values are
numpy's bit for bit, every index is checked (an IndexError of the call, as in
numpy, on every path: threaded kernels, the cached fast call), and the
caller's arrays are never left half-written. The hypothesis tests of
tests/capture/test_indexing.py run these paths too; here are the cases they
do not single out."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.testing import arrays

INDEX_DTYPES = [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64]


def externs(fn, *args) -> list[str]:
    ks = lowering.explain(lowering.compile(fn))(*args).kernels
    return [name for graph in ks for name, _ in graph if name.startswith("extern")]


def take0(x, i):
    return np.take(x, i, axis=0)


def take1(x, i):
    return np.take(x, i, axis=1) * 2 + 1


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_take_matches_numpy_bitwise(data):
    x = data.draw(arrays(st.sampled_from([np.float32, np.float64, np.int32, np.bool_]),
                         st.tuples(st.integers(1, 9), st.integers(1, 40))))
    fn = data.draw(st.sampled_from([take0, take1]))
    n = x.shape[0 if fn is take0 else 1]
    idt = data.draw(st.sampled_from(INDEX_DTYPES))
    lo = 0 if np.dtype(idt).kind == "u" else -n
    i = np.array(data.draw(st.lists(st.integers(lo, n - 1), max_size=50)), dtype=idt)
    if fn is take1 and x.dtype == np.bool_:
        fn = take0
        i = i.clip(-x.shape[0], x.shape[0] - 1).astype(idt)
    want = fn(x, i)
    got = lowering.compile(fn)(x, i)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_gathers_are_generated():
    x = np.arange(50.0, dtype=np.float32).reshape(10, 5)
    assert externs(take1, x, np.array([0, -1, 2])) == []
    # the fancy-index gather of a cross-entropy loss: no numpy routine left
    lab = np.array([1, 4, 0, 2, 3, 3, 0, 1, 4, 2])
    assert externs(lambda x, lab: -x[np.arange(10), lab].mean(), x, lab) == []
    # uint64 indices convert to intp first, as in numpy (2**64 - 1 is -1 there)
    i = np.array([1, 2**64 - 1], np.uint64)
    np.testing.assert_array_equal(lowering.compile(take0)(x, i), take0(x, i))


@pytest.mark.parametrize("bad", [5, -6, 127])
def test_out_of_range_raises_like_numpy(bad):
    x = np.zeros((5, 3), np.float32)
    i = np.array([0, 1, bad, 2], np.int64)
    cf = lowering.compile(take0)
    cf(x, np.array([0, 1], np.int64))  # compiled and cached
    for _ in range(2):  # the cached call checks as well
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds for axis 0 with size 5"):
            cf(x, i)
    np.testing.assert_array_equal(cf(x, np.array([4, -5])), take0(x, np.array([4, -5])))


def test_threaded_gather_checks_every_chunk():
    """Big enough for two threads: a bad index in the second half is found."""
    x = np.arange(4096, dtype=np.float32)
    i = np.tile(np.arange(4096), 512)
    cf = lowering.compile(lambda x, i: x[i] * 2)
    np.testing.assert_array_equal(cf(x, i), x[i] * 2)
    i[-3] = 4096
    with pytest.raises(IndexError, match="index 4096 is out of bounds"):
        cf(x, i)


def test_bad_index_leaves_the_callers_arrays_alone():
    def f(x, t, i):
        x[...] = t[i]
        return x

    x = np.ones(4, np.float32)
    t = np.arange(10, dtype=np.float32)
    cf = lowering.compile(f)
    cf(x.copy(), t, np.array([1, 2, 3, 4]))
    with pytest.raises(IndexError):
        cf(x, t, np.array([1, 2, 30, 4]))
    np.testing.assert_array_equal(x, np.ones(4, np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
def test_scatter_set_last_write_wins(dtype):
    def f(d, i, u):
        d = d.copy()
        d[i] = u
        return d

    d = np.zeros((20, 3), dtype)
    i = np.array([3, -1, 3, 0, 19, 3, 7, 7])
    u = (np.arange(24).reshape(8, 3) % 5).astype(dtype)
    np.testing.assert_array_equal(lowering.compile(f)(d, i, u), f(d, i, u))
    assert externs(f, d, i, u) == []


def test_add_at_adds_duplicates_in_numpys_order():
    """Float additions in index order, one at a time: bitwise np.add.at, even
    where the order changes the rounding."""
    def f(d, i, u):
        d = d.copy()
        np.add.at(d, i, u)
        return d

    rng = np.random.default_rng(0)
    d = np.zeros(8, np.float32)
    i = rng.integers(-8, 8, 1000)
    u = (rng.standard_normal(1000) * 10.0 ** rng.integers(-6, 6, 1000)).astype(np.float32)
    np.testing.assert_array_equal(lowering.compile(f)(d, i, u), f(d, i, u))
    assert externs(f, d, i, u) == []


def test_scatter_with_a_bad_index_raises():
    def f(x, lab):
        y = x * 2.0
        y[np.arange(x.shape[0]), lab] -= 1
        return y

    x = np.ones((4, 3), np.float32)
    cf = lowering.compile(f)
    np.testing.assert_array_equal(cf(x, np.array([0, 1, 2, -1])), f(x, np.array([0, 1, 2, -1])))
    with pytest.raises(IndexError, match="index 3 is out of bounds"):
        cf(x, np.array([0, 3, 2, 1]))
