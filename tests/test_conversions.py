"""np.asarray / np.array / np.ascontiguousarray of traced values are captured
(numpy's constructors do not dispatch; tracing routes them to the rules) and
numpy's own functions are back in place after tracing."""

import numpy as np
import pytest

import lowering
from lowering.testing import assert_matches_numpy

ORIGINAL = (np.asarray, np.array, np.asanyarray, np.ascontiguousarray)

CASES = [
    lambda x: np.asarray(x) + 1,
    lambda x: np.array(x) * 2,
    lambda x: np.asarray(x, dtype=np.float64) / 3,
    lambda x: np.ascontiguousarray(x.T) - 1,
    lambda x: np.array([x[0], x[1] * 2]),
    lambda x: np.asanyarray(x).sum(),
    lambda x: np.asarray(2.5) * x,  # a plain constant still goes to numpy
]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_constructors_capture_without_a_break(i):
    fn = CASES[i]
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    report = lowering.explain(fn)(x)
    assert report.graph_break_count == 0, report.breaks
    assert_matches_numpy(fn, x)
    assert (np.asarray, np.array, np.asanyarray, np.ascontiguousarray) == ORIGINAL


def test_array_copy_is_not_an_alias():
    def fn(x):
        y = np.array(x)
        y[0] = -1
        return y

    assert_matches_numpy(fn, np.arange(3.0))
