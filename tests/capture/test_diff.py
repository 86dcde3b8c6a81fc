"""`np.diff` captured (its prepend/append joined, then n differences of
neighbouring slices: one fused kernel, no graph break), against numpy on
arrays of every layout and Tier 1 dtype, with numpy's errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.config import patch
from lowering.testing import array_shapes, arrays, assert_matches_numpy, dtypes


def check(fn, *args):
    cf = lowering.compile(fn, fullgraph=True)
    with patch(verify_each_pass=True):
        return assert_matches_numpy(fn, *args, compiled=cf, calls=2)


@settings(deadline=None, max_examples=40)
@given(data=st.data())
def test_diff_matches_numpy(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=1, max_dims=3),
                         layout=data.draw(st.sampled_from(["C", "F", "strided", "transposed"]))))
    n = data.draw(st.integers(0, 3))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    check(lambda a: np.diff(a, n=n, axis=axis), x)


@pytest.mark.parametrize("fn", [
    lambda a: np.diff(a, prepend=0.0),
    lambda a: np.diff(a, axis=0, append=a[:1]),
    lambda a: np.diff(a, n=2, axis=0, prepend=a[-1:], append=1.5),
    lambda a: np.diff(a > 0),  # booleans: not_equal
    lambda a: np.diff(a, n=9),  # more than the axis has: empty
])
def test_diff_options_match_numpy(fn):
    check(fn, np.random.default_rng(2).standard_normal((5, 4)))


@pytest.mark.parametrize("fn", [lambda a: np.diff(a, n=-1), lambda a: np.diff(a[0, 0]),
                                lambda a: np.diff(a, axis=2)])
def test_diff_errors_are_numpys(fn):
    check(fn, np.ones((3, 4)))


def test_diff_is_one_kernel():
    x = np.random.default_rng(0).standard_normal((30, 40))
    report = lowering.explain(lowering.compile(lambda a: np.diff(a, n=2), backend="cpu"))(x)
    assert report.graph_break_count == 0 and [len(k) for k in report.kernels] == [1]
