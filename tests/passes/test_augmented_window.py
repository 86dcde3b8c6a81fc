"""An augmented assignment through a window — `A[k + 1:, k] /= A[k, k]` —
stores its result through the view and again by the assignment, each time
reshaped to the window's shape. `array-canonicalize` (`InsertSliceTwice`)
sees the two reshapes of one value as one source and drops the second
store; without that, lower-to-loop found the second store clobbering what
the next update reads and copied the whole matrix every iteration (LU:
three kernels and a matrix copy per column instead of two kernels)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.programs.linalg import lu
from lowering.testing import assert_matches_numpy
from lowering.testing import stage_text


def scale_column(A, d):
    A = A.copy()
    A[1:, 0] *= d
    return A


def test_lu_writes_each_column_and_update_in_place():
    """Six columns: one division kernel and one update kernel per column
    (a flags kernel may precede the first update), no copy of the matrix."""
    text = stage_text(lu, "f64[7,7]", "kernel")
    kernels = text.count("kernel.kernel")
    assert kernels <= 2 * 6 + 1, text
    assert text.count("memref.alloc") == 1, text  # A.copy() only
    assert text.count("arith.divf") == 6, text


def test_one_store_per_augmented_assignment():
    text = stage_text(scale_column, "f64[9,5] f64[]", "kernel")
    assert text.count("arith.mulf") == 1, text


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 9), seed=st.integers(0, 2**16),
       special=st.sampled_from([None, np.nan, np.inf, -0.0, 1e-300, 1e300]))
def test_lu_matches_numpy(n, seed, special):
    g = np.random.default_rng(seed)
    A = g.standard_normal((n, n)) + n * np.eye(n)
    if special is not None and n > 1:
        A[g.integers(n), g.integers(n)] = special
    with np.errstate(all="ignore"):
        assert_matches_numpy(lu, A)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), d=st.sampled_from([2.5, -0.0, np.nan, np.inf, 1e-310]))
def test_scale_column_matches_numpy_on_a_strided_input(seed, d):
    A = np.random.default_rng(seed).standard_normal((9, 10))[:, ::2]
    with np.errstate(all="ignore"):
        assert_matches_numpy(scale_column, A, np.float64(d))
