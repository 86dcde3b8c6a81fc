"""The real-programs benchmark (bench/programs) at its tiny size: every
program compiled with `lowering.compile` gives numpy's result (the
benchmark's tolerance: rtol 1e-6 float64, 1e-3 float32), on its first call
and on a cached one, and no program mutates its arguments."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lowering
from bench.programs import PROGRAMS
from bench.programs.check import compare


def _copies(args: tuple) -> list:
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_matches_numpy(name):
    p = PROGRAMS[name]
    args = p.inputs("T")
    before = _copies(args)
    ref = p.fn(*args)
    for a, b in zip(args, before):
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b, equal_nan=True), f"{name} mutates its arguments"
    fn = lowering.compile(p.fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # eager fallbacks are allowed
        for call in ("first", "cached"):
            c = compare(fn(*args), ref)
            assert c["ok"], f"{name} ({call} call): {'; '.join(c['problems'])}"
    for a, b in zip(args, before):
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b, equal_nan=True), f"compiled {name} mutates its arguments"


def test_registry():
    """Every program has the three sizes and a domain; names are unique."""
    for p in PROGRAMS.values():
        assert set(p.sizes) == {"T", "S", "M"}, p.name
        assert p.domain and p.numba in ("same", "loops"), p.name
    assert len(PROGRAMS) >= 30
