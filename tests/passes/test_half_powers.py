"""`x ** 1.5`, `x ** -1.5` and `x ** -0.5` (`strength-reduce`'s
`POWER_RULES`) as a square root and a multiply or divisions, `x ** -2` as
the square of the reciprocal: within the pointwise
tolerance of numpy's `pow` (2 ULPs measured), numpy's value bit for bit at
every special input (signed zeros, infinities, NaN, negatives, subnormals)
and numpy's IEEE flags there."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.testing import TOLERANCES, assert_matches_numpy
from lowering.testing import stage_text
from tests.test_errstate_where import outcome

EXPONENTS = (1.5, -1.5, -0.5, -2.0)
SPECIALS = [-0.0, 0.0, -np.inf, np.inf, np.nan, -1.0, -2.5, -1e-310, 1e-310, 5e-324,
            1e308, 1e-300, 1e206, 1e-206, 1.0, 4.0, 2.0**-1074, 1e38, 1e-38, 1e-45,
            1e155, 1e-155, 1e154, -1e160, 1e19, 1e-19, 1e-20]


def power(e):
    return lambda x: x ** e


@pytest.mark.parametrize("e", EXPONENTS)
def test_no_pow_is_left(e):
    text = stage_text(power(e), "f64[1000]", "kernel")
    assert "math.powf" not in text and ("math.sqrt" in text) == (e != -2.0), text


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("e", EXPONENTS)
def test_special_inputs_give_numpys_values_and_flags(e, dt):
    fn = power(e)
    cf = lowering.compile(fn)
    for v in SPECIALS:
        with np.errstate(all="ignore"):
            x = np.full(19, v).astype(dt)  # (vector lanes and the scalar tail)
        want, w = outcome(fn, x)
        got, g = outcome(cf, x)
        assert got == want, (e, dt, v)
        with np.errstate(all="ignore"):
            w, g = fn(x), cf(x)
        exact = ~np.isfinite(w) | (w == 0)
        np.testing.assert_array_equal(g[exact], w[exact])
        np.testing.assert_array_equal(np.signbit(g[exact]), np.signbit(w[exact]))


@settings(max_examples=40, deadline=None)
@given(e=st.sampled_from(EXPONENTS), dt=st.sampled_from([np.float32, np.float64]),
       seed=st.integers(0, 2**16), n=st.integers(0, 70))
def test_values_within_the_pointwise_tolerance(e, dt, seed, n):
    g = np.random.default_rng(seed)
    top = 300 if dt == np.float64 else 36
    x = (10.0 ** g.uniform(-top, top, n)).astype(dt)
    if n:
        x[g.integers(n)] = g.choice(np.array(SPECIALS)).astype(dt) if dt == np.float64 else \
            np.float32(g.choice([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0]))
    with np.errstate(all="ignore"):
        assert_matches_numpy(power(e), x, rtol=TOLERANCES.rtol(dt, "pointwise"))
