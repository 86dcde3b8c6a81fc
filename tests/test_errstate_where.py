"""`np.where(c, a, b)` computes a and b whole, as numpy does, and raises
their IEEE flags whichever value it keeps: `np.where(x == 0, 5.0, 1.0 / x)`
warns of the division by zero (raises under `errstate(divide="raise")`)
although it never returns 1 / 0. The CPU emitter fences a computed float
operand of a select (`llvm_ops._computed`): LLVM folded the select into an
AVX-512 masked division, and a masked lane raises no flag, so the compiled
program returned where numpy raised."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering


def outcome(fn, x):
    try:
        with np.errstate(all="raise"):
            return "ok", fn(x)
    except FloatingPointError as e:
        return str(e).split(" encountered")[0], None


PROGRAMS = {
    "divide": (lambda x: np.where(x == 0, 5.0, 1.0 / x), 0.0),
    "overflow": (lambda x: np.where(x > 1e30, 0.0, x * x * x), 1e200),
    "invalid": (lambda x: np.where(x < 0, 0.0, np.sqrt(x) - np.sqrt(x) * 0.5), -1.0),
    "underflow": (lambda x: np.where(x < 1e-30, 1.0, x * 1e-300), 1e-10),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 80), at=st.integers(0, 79), dt=st.sampled_from([np.float32, np.float64]))
def test_a_kept_value_raises_its_flags_as_numpy(name, n, at, dt):
    fn, bad = PROGRAMS[name]
    x = np.linspace(1.0, 2.0, n).astype(dt)
    with np.errstate(all="ignore"):
        x[at % n] = np.array(bad).astype(dt)
    want, w = outcome(fn, x)
    got, g = outcome(lowering.compile(fn), x)
    assert got == want, (name, dt, n, at)
    if want == "ok":
        np.testing.assert_array_equal(g, w)
