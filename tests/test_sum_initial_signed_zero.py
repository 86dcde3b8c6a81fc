"""`np.sum(x, initial=-0.0)`: numpy's sum starts from `initial`, so it is
-0.0 exactly where every term is -0.0 (from the default +0.0 it is +0.0).
The compiled sum started from +0.0 and added `initial` after: +0.0 where
numpy gives -0.0 (capture/rules/reductions.py now selects `initial` where
every term is -0.0). Bit for bit against numpy, signs of zeros included."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
from lowering.testing import assert_same_value

ROWS = [[-0.0] * 8, [0.0] + [-0.0] * 7, [1.0, -1.0] + [-0.0] * 6, [-0.0] * 7 + [2.5]]


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
@pytest.mark.parametrize("axis", [1, 0, None, (0, 1)])
@pytest.mark.parametrize("initial", [-0.0, 0.0, -1.5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_from_initial_keeps_numpys_signed_zero(backend, axis, initial, dtype):
    x = np.array(ROWS, dtype)

    def f(x):
        return np.sum(x, axis=axis, initial=initial), x.sum(axis=axis, initial=initial,
                                                               keepdims=True)

    got = lowering.compile(f, backend=backend)(x)
    assert_same_value(got, f(x), rtol=0.0)
