"""argmax/argmin over one dim in one vector pass (`emit_argreduce`): per
lane the best value and its position, the lanes and accumulators merged by
value then least position, the scalar tail folded in, a NaN's first position
searched for where one was seen; bools searched for their first True/False.
Rows of every length around the vector width and unroll (vector body, single
vectors, tail), ties, signed zeros, infinities and NaNs at every position,
every integer kind: numpy's positions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.testing import assert_matches_numpy

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 5e-324]


def argmax_rows(a):
    return a.argmax(axis=-1)


def argmin_rows(a):
    return np.argmin(a, axis=-1)


def argmax_of_expr(a):
    return np.argmax(a * 2.0 - 1.0, axis=-1)


@settings(deadline=None, max_examples=60)
@given(n=st.integers(1, 80), rows=st.integers(1, 3), dtype=st.sampled_from([np.float64, np.float32]),
       data=st.data())
def test_float_rows_with_special_values(n, rows, dtype, data):
    vals = data.draw(st.lists(st.sampled_from(SPECIAL), min_size=n * rows, max_size=n * rows))
    x = np.array(vals, dtype=dtype).reshape(rows, n)
    for fn in (argmax_rows, argmin_rows):
        assert_matches_numpy(fn, x)


@pytest.mark.parametrize("n", [1, 3, 4, 7, 8, 15, 16, 17, 63, 64, 65, 130, 1000])
@pytest.mark.parametrize("where", ["first", "last", "middle", "none"])
def test_nan_at_every_place(n, where):
    x = np.random.default_rng(n).standard_normal((2, n))
    if where != "none":
        at = {"first": 0, "last": n - 1, "middle": n // 2}[where]
        x[1, at] = np.nan
        x[1, -1 if at != n - 1 else 0] = np.nan if n > 1 else x[1, 0]
    for fn in (argmax_rows, argmin_rows, argmax_of_expr):
        assert_matches_numpy(fn, x, calls=2)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                   np.uint32, np.uint64])
@pytest.mark.parametrize("n", [1, 5, 33, 200])
def test_integer_rows_with_ties_and_extremes(dtype, n):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(n)
    x = rng.integers(info.min, info.max, (3, n), dtype=dtype, endpoint=True)
    x[1] = info.min
    x[2] = info.max
    x[0, n // 2:] = x[0, : n - n // 2]  # ties
    for fn in (argmax_rows, argmin_rows):
        assert_matches_numpy(fn, x, calls=2)


@pytest.mark.parametrize("n", [1, 5, 33, 200])
def test_bool_rows(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((4, n)) > 1.0
    x[1] = False
    x[2] = True
    for fn in (argmax_rows, argmin_rows):
        assert_matches_numpy(fn, x, calls=2)


def test_whole_array_and_axis_zero():
    x = np.random.default_rng(1).standard_normal((37, 29))
    x[5, 7] = np.inf
    for fn in (lambda a: a.argmax(), lambda a: a.argmin(axis=0), lambda a: a.T.argmax(axis=1)):
        assert_matches_numpy(fn, x, calls=2)
