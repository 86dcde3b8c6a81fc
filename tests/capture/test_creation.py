"""Array creation inside compiled functions against numpy: constants made
eagerly by numpy (np.zeros(shape), np.arange(n), np.eye(n)), `*_like` with
dtype/shape overrides, creation with `like=`, `linspace` with traced
endpoints, copies."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lowering
from lowering.config import patch
from lowering.testing import TIER1_DTYPES, array_shapes, arrays, assert_matches_numpy, dtypes

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def check(fn, *args, calls=2, rtol=None):
    cf = lowering.compile(fn, fullgraph=True)
    with patch(verify_each_pass=True):
        return assert_matches_numpy(fn, *args, compiled=cf, calls=calls, rtol=rtol)


# ---- constants numpy makes eagerly ---------------------------------------------------------

def test_static_creation_becomes_constants():
    def f(x):
        z = np.zeros(x.shape) + x
        o = np.ones((2, 3), dtype=np.int32) * x[:2, :1].astype(np.int32)
        e = np.eye(3, k=1) @ x[:3, :3]
        r = np.arange(4) + x[0, :4]
        i = np.identity(3, dtype=bool) | (x[:3, :3] > 2)
        f = np.full((3, 4), np.nan) - x
        return z, o, e, r, i, f, np.zeros(3), np.linspace(0, 1, 5)

    check(f, np.arange(20.0).reshape(5, 4))


def test_static_constants_are_fresh_each_call():
    def f(x):
        return np.zeros(3), x + 1

    cf = lowering.compile(f, fullgraph=True)
    a, _ = cf(np.ones(3))
    a[0] = 5  # the caller owns its result: the next call's constant is untouched
    b, _ = cf(np.ones(3))
    assert b[0] == 0 and a is not b


# ---- *_like ------------------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_like_functions(data):
    x = data.draw(arrays(dtypes(), array_shapes(max_dims=3)))
    dt = data.draw(st.one_of(st.none(), st.sampled_from(TIER1_DTYPES)))
    shape = data.draw(st.one_of(st.none(), array_shapes(max_dims=2), st.integers(0, 3)))
    fill = data.draw(st.sampled_from([0, 1, -2, 2.5, True, np.float32(1.25), np.nan]))

    def f(x):
        e = np.empty_like(x, dtype=dt, shape=shape)
        return (np.zeros_like(x, dtype=dt, shape=shape), np.ones_like(x, dtype=dt, shape=shape),
                np.full_like(x, fill, dtype=dt, shape=shape), e.shape, e.dtype)

    check(f, x)


def test_full_like_traced_fill_and_errors():
    x = np.arange(6.0).reshape(2, 3)
    check(lambda x: (np.full_like(x, x[0, 1]), np.full_like(x, x[0], dtype=np.int32),
                     np.full_like(x, x[:, :1], shape=(4, 2, 3))), x)
    check(lambda x: np.full_like(x.astype(np.int32), 2**40), x)
    check(lambda x: np.full_like(x.astype(np.int64), np.nan), x)
    check(lambda x: np.full_like(x, x[0, :2]), x)


def test_like_keyword_dispatch():
    x = np.arange(4.0)

    def f(x):
        return (np.zeros(3, like=x), np.ones((2, 2), dtype=np.int32, like=x),
                np.empty(2, like=x).shape, np.full(2, x[1], like=x), np.full((2, 1), 7, like=x),
                np.arange(1, 7, 2, like=x), np.eye(3, 2, 1, like=x),
                np.identity(2, dtype=bool, like=x))

    check(f, x)


# ---- linspace -------------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_linspace_traced_endpoints(data):
    dt = data.draw(dtypes("fi"))
    bshape = data.draw(st.sampled_from([(), (), (3,), (2, 1)]))
    ends = st.one_of(st.integers(-100, 100),
                     st.floats(-1e6, 1e6, width=32) if dt.kind == "f" else st.integers(-100, 100))
    start = data.draw(arrays(dt, bshape, elements=ends))
    stop = data.draw(st.one_of(arrays(dt, (), elements=ends), ends))
    num = data.draw(st.integers(0, 9))
    endpoint = data.draw(st.booleans())
    axis = data.draw(st.integers(-1 - len(bshape), len(bshape)))
    dtype = data.draw(st.sampled_from([None, np.float32, np.int64]))

    def f(a, b):
        return (np.linspace(a, b, num, endpoint=endpoint, axis=axis, dtype=dtype),
                np.linspace(a, b, num, endpoint=endpoint, retstep=True))

    check(f, start, stop, rtol=8 * float(np.finfo(np.float32).eps) if dt.kind == "f" else None)


def test_linspace_examples():
    check(lambda a: (np.linspace(a, 2.0, 5), np.linspace(0.0, a, 3, retstep=True),
                     np.linspace(a, a, 4), np.linspace(a, 1, 1, retstep=True)), 0.5)
    check(lambda a: np.linspace(a, 5, -1), 0.5)
    check(lambda a: np.linspace(a, np.float32(3), 4), np.float32(1))
    check(lambda a: np.linspace(a, 3, 4), np.array(1, np.int32))


# ---- copies -------------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_copies_do_not_alias(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=1, max_dims=3),
                         layout=data.draw(st.sampled_from(["C", "F", "strided", "transposed"]))))

    def f(x):
        # np.array/asarray/ascontiguousarray dispatch to capture only with like=
        a, b, c = np.copy(x), x.copy(), np.array(x[::-1], like=x)
        x[...] = 0
        a[...] = 1
        return a, b, c, x, np.ascontiguousarray(x.T, like=x), np.asarray(x, like=x) is x

    check(f, x)


def test_array_conversions_in_rules():
    def f(x, s):
        return np.asarray(s, like=x), np.array([x[0], s], like=x), np.ascontiguousarray(x[0], like=x)

    check(f, np.arange(3.0), 2.5)


@pytest.mark.parametrize("make", [lambda x: np.zeros(3), lambda x: np.ones_like(x)])
def test_mutating_created_arrays(make):
    def f(x):
        z = make(x)
        z[1:] = x[:2]
        z += 1
        return z

    lowering_result = lowering.compile(f)
    assert_matches_numpy(f, np.arange(3.0), compiled=lowering_result)
