"""Ops numpy raises an exception for on some values, whatever `np.errstate`
says (`dialects.array.raises_on_values`): an integer power with a negative
exponent (ValueError), a numpy routine (`np.linalg.inv` of a singular
matrix: LinAlgError). numpy computes every op a program writes, so it raises
even where nothing reads the result, or reads only part of it; the compiled
program must too: keep-flags keeps such ops under every errstate, where
dead-code elimination would drop them (a silent result where numpy
raises)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lowering

BACKENDS = ["cpu", "numpy"]
ERRSTATES = ["ignore", "warn", "raise"]


def dead_power(x, k):
    z = x ** k  # noqa: F841  (unused: numpy raises all the same)
    return x + 1


def power_in_part(x, k):
    return (x ** k)[:1] * 2


def dead_array_power(x, y):
    z = np.power(x, y)  # noqa: F841
    return x * 3


def dead_inverse(a):
    z = np.linalg.inv(a)  # noqa: F841
    return a + 1.0


def outcome(fn, *args, mode="warn"):
    with warnings.catch_warnings(), np.errstate(all=mode):
        warnings.simplefilter("ignore")
        try:
            return "ok", fn(*args)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError) as e:
            return "raise", type(e).__name__, str(e)


CASES = [
    (dead_power, lambda dt: (np.arange(1, 5, dtype=dt), -1)),
    (dead_power, lambda dt: (np.arange(1, 5, dtype=dt), 2)),
    (power_in_part, lambda dt: (np.arange(1, 5, dtype=dt), -2)),
    (dead_array_power, lambda dt: (np.arange(4, dtype=dt), np.array([1, 2, -1, 0], dt))),
    (dead_array_power, lambda dt: (np.arange(4, dtype=dt), np.array([1, 2, 3, 0], dt))),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ERRSTATES)
@pytest.mark.parametrize("dt", [np.int64, np.int32, np.int8])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_integer_powers_raise_as_numpy_does(case, dt, mode, backend):
    fn, make = CASES[case]
    args = make(dt)
    want = outcome(fn, *args, mode=mode)
    f = lowering.compile(fn, backend=backend)
    for _ in range(2):  # (the compiling call, then the cached entry)
        got = outcome(f, *args, mode=mode)
        assert got[0] == want[0], (got, want)
        if want[0] == "ok":
            np.testing.assert_array_equal(got[1], want[1])
            assert got[1].dtype == want[1].dtype
        else:
            assert got[1:] == want[1:]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ERRSTATES)
def test_an_unused_routine_raises_as_numpy_does(mode, backend):
    f = lowering.compile(dead_inverse, backend=backend)
    singular, fine = np.zeros((3, 3)), np.eye(3) * 2.0
    for a in (singular, fine, singular):
        want, got = outcome(dead_inverse, a, mode=mode), outcome(f, a, mode=mode)
        assert got[0] == want[0] and got[1:] == want[1:] if want[0] == "raise" else True
        if want[0] == "ok":
            np.testing.assert_array_equal(got[1], want[1])
