"""In-place updates: the caller's arrays end up exactly as numpy leaves them."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.testing import assert_matches_numpy


def iadd(x, y):
    x += y
    return x


def slice_assign(x):
    x[1:-1] = 0.5 * (x[:-2] + x[2:])


def write_through_view(x):
    v = x[::2]
    v[1:] = -1.0
    t = x.T
    t[0] *= 3
    return v.sum()


def out_kwarg(a, b, c):
    np.add(a, b, out=c)
    np.multiply(c, 2, out=c)
    return c


def chain_of_views(x):
    y = x.reshape(2, -1)[:, 1:]
    y += 100
    z = x[..., None][1:3]
    z[...] = 7
    return x.copy()


def reads_after_write(x):
    a = x[0]
    x[0] = 10.0
    return a  # a view: sees the write


def local_array_mutation(x):
    y = x * 2
    w = y[1:]
    w[:] = 0
    return y


def fill_and_setitem_scalar(x):
    x.fill(3)
    x[0] = 1
    return None


def stencil_loop(u, steps):
    for _ in range(steps):
        u[1:-1] = 0.25 * u[:-2] + 0.5 * u[1:-1] + 0.25 * u[2:]
    return u


CASES = [
    (iadd, lambda: (np.arange(6.0).reshape(2, 3), np.ones(3))),
    (iadd, lambda: (np.arange(6, dtype=np.int32), np.int32(3))),
    (slice_assign, lambda: (np.arange(10.0),)),
    (write_through_view, lambda: (np.arange(12.0).reshape(4, 3),)),
    (write_through_view, lambda: (np.asfortranarray(np.arange(12.0).reshape(4, 3)),)),
    (out_kwarg, lambda: (np.ones(4, np.float32), np.arange(4, dtype=np.float32), np.zeros(4, np.float32))),
    (chain_of_views, lambda: (np.arange(8.0),)),
    (reads_after_write, lambda: (np.arange(6.0).reshape(3, 2),)),
    (local_array_mutation, lambda: (np.arange(5.0),)),
    (fill_and_setitem_scalar, lambda: (np.zeros((2, 2), np.int64),)),
    (stencil_loop, lambda: (np.linspace(0, 1, 9) ** 2, 3)),
]


@pytest.mark.parametrize("fn, make", CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_mutation_matches_numpy(fn, make):
    f = lowering.compile(fn)
    for _ in range(2):  # the compiling call and the cached call
        assert_matches_numpy(fn, *make(), compiled=f)
    assert f.stats["compiles"] == 1 and f.stats["cache_hits"] == 1


def test_returned_view_aliases_the_argument_like_numpy():
    f = lowering.compile(lambda x: x[1:])
    x = np.arange(4.0)
    for _ in range(2):
        y = f(x)
        assert np.shares_memory(y, x)
        y[0] = 42
        assert x[1] == 42
        x[1] = 1


def test_reshape_of_noncontiguous_is_a_copy_like_numpy():
    def fn(x):
        y = x.T.reshape(-1)  # a copy for C-contiguous x
        y[0] = 99
        return y

    assert_matches_numpy(fn, np.arange(6.0).reshape(2, 3))


def test_read_only_inputs_refuse_writes_like_numpy():
    x = np.zeros(3)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        lowering.compile(iadd)(x, 1.0)


def test_broadcast_view_is_read_only():
    def fn(x):
        b = np.broadcast_to(x, (3, 3))
        b[0, 0] = 1

    with pytest.raises(ValueError, match="read-only"):
        lowering.compile(fn)(np.zeros(3))


def test_int_array_plus_float_in_place_raises_casting_error():
    x = np.zeros(3, np.int64)
    with pytest.raises(Exception) as e:
        iadd(x.copy(), 1.5)
    with pytest.raises(type(e.value)):
        lowering.compile(iadd)(x, 1.5)
    np.testing.assert_array_equal(x, 0)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(3, 12),
    start=st.integers(0, 2),
    step=st.integers(1, 3),
    value=st.floats(allow_nan=True, allow_infinity=True),
)
def test_strided_slice_assignment_property(n, start, step, value):
    def fn(x, v):
        x[start::step] = v
        x[::-1][0] += 1
        return x.sum()

    assert_matches_numpy(fn, np.arange(float(n)), value)


def test_a_view_of_a_python_scalar_argument_is_a_fresh_writeable_array():
    """`np.transpose(0.5, ())` and `np.reshape(0.5, (1,))` are new writeable
    arrays in numpy (the float goes through np.asarray first): writing into
    them with out= or += works and never reaches the caller's float. Found by
    the random-program property test (deep profile)."""
    def via_transpose(a0, a2):
        v = np.transpose(a2, ())
        np.add(v, a0, out=v)
        return v

    def via_reshape(a2, a0):
        v = np.reshape(a2, (1,))
        v += a0
        return v, a2

    for backend in ("cpu", "numpy"):
        assert_matches_numpy(via_transpose, np.array(1.5, np.float32), 0.5, rtol=0.0, calls=2,
                             compiled=lowering.compile(via_transpose, backend=backend))
        assert_matches_numpy(via_reshape, 0.25, np.ones(1), rtol=0.0, calls=2,
                             compiled=lowering.compile(via_reshape, backend=backend))


def test_a_view_of_a_numpy_scalar_is_a_new_array_not_an_alias():
    """A ufunc of a 0-d array gives a numpy scalar; its `.reshape(-1)` is a new
    array, so writing into that leaves the scalar alone (found by the
    random-program property test, deep profile: we wrote through to it)."""
    def via_out(a0, a1):
        v0 = np.absolute(a1)
        v1 = v0.reshape(-1)
        np.add(v1, a1, out=v1)
        return np.absolute(a0), v0, v1

    def via_iadd(a0):
        v0 = np.absolute(a0)
        v1 = v0.reshape(-1)
        v1 += 1
        v2 = a0[()].reshape(1)
        v2 *= 3
        return v0, v1, v2, a0

    for backend in ("cpu", "numpy"):
        assert_matches_numpy(via_out, np.array(0.0, np.float32), np.array(-2**31, np.int32),
                             rtol=0.0, calls=2, compiled=lowering.compile(via_out, backend=backend))
        assert_matches_numpy(via_iadd, np.array(2.5, np.float32), rtol=0.0, calls=2,
                             compiled=lowering.compile(via_iadd, backend=backend))
