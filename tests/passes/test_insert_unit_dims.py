"""A row of a preallocated table filled from a row reduction —
`out[t] = x.argmax(axis=1)` — is one kernel storing straight into the row: lower-to-loop's slice-assignment kernel runs over the value's
own dims where the assignment only gives it unit dims (a reshape to
(1, n)), so a reduction in it is computed once per point there instead of
realized in a buffer of its own and copied into the row. Column reductions
of small inputs (from COLUMN_REDUCTION_BYTES, 1 KiB) run down the rows with
the columns vectorized, not as a strided walk per column (the Viterbi
step's `scores.argmax(axis=0)`)."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.programs.dynprog import viterbi
from lowering.testing import assert_matches_numpy
from lowering.testing import stage_text


def step(delta, log_A, back, t):
    back = back.copy()
    scores = delta[:, None] + log_A
    back[t] = scores.argmax(axis=0)
    return scores.max(axis=0), back


def rows(x, out):
    out = out.copy()
    out[2] = x.argmax(axis=1)
    out[3] = (x * x).sum(axis=1)
    return out


def test_row_reductions_are_stored_into_the_rows():
    """The copy of out, then one kernel per row written: each reduction
    stored at out[2] and out[3] — no buffer of its own, no copy of it."""
    text = stage_text(rows, "f64[16,64] f64[5,16]", "kernel")
    assert text.count("memref.alloc") == 1, text  # out's copy
    assert text.count("kernel.kernel") == 3, text
    for r in (2, 3):
        assert f"-> ({r}, d0)>" in text, text


def test_column_reductions_of_small_inputs_go_down_the_rows():
    """argmax(0) and max(0) of 32 x 32 (8 KiB): column kernels (`accumulate`:
    one row after another, the columns vectorized), not a strided walk down
    each column (loads at (d1, d0))."""
    text = stage_text(step, "f64[32] f64[32,32] i64[20,32] int:4", "kernel")
    assert "-> (d1, d0)>" not in text, text
    assert text.count("accumulate") >= 2, text


values = st.sampled_from([0.0, -0.0, 1.0, -2.5, np.nan, np.inf, -np.inf, 1e-310, 1e300])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 2**16), special=values,
       t=st.integers(0, 5))
def test_step_matches_numpy(n, seed, special, t):
    g = np.random.default_rng(seed)
    delta = g.standard_normal(n)
    log_A = g.standard_normal((n, n))
    log_A[g.integers(n), g.integers(n)] = special
    back = g.integers(0, 9, (6, n))
    assert_matches_numpy(step, delta, log_A, back, t)


@settings(max_examples=15, deadline=None)
@given(states=st.integers(2, 40), T=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_viterbi_matches_numpy(states, T, seed):
    g = np.random.default_rng(seed)
    A = np.log(g.random((states, states)) + 0.1)
    B = np.log(g.random((states, 16)) + 0.1)
    pi = np.log(g.random(states) + 0.1)
    obs = g.integers(0, 16, T)
    assert_matches_numpy(viterbi, pi, A, B, obs)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 20), m=st.integers(1, 70), seed=st.integers(0, 2**16), special=values)
def test_rows_match_numpy(n, m, seed, special):
    g = np.random.default_rng(seed)
    x = g.standard_normal((n, m))
    x[g.integers(n), g.integers(m)] = special
    with np.errstate(all="ignore"):
        assert_matches_numpy(rows, x, g.standard_normal((5, n)))
