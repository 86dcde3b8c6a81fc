"""IEEE flags of ops whose operands the compiler knows (`1.0 /
np.zeros(3)`, the sum over an empty axis divided into): numpy computes them
on every call and warns, or raises under `np.errstate`; the compiled
program must too, on the call that compiles and on every cached call. LLVM
folds an op of constants at compile time, raising nothing when the kernel
runs, unless its operands are hidden from it (`opaque`, lowering/codegen/llvm.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lowering

CASES = {
    "divide": lambda a: 1.0 / np.zeros(3),
    "divide_f32": lambda a: np.float32(1.0) / np.zeros(4, np.float32),
    "exp_overflow": lambda a: np.exp(np.full(5, 1000.0)),
    "sqrt_invalid": lambda a: np.sqrt(np.full(3, -1.0)),
    "log_zero": lambda a: np.log(np.zeros(2)),
    "multiply_overflow": lambda a: np.full(9, 1e300) * 1e300,
    "cast_overflow": lambda a: np.full(3, 1e300).astype(np.float32),
    "constant_into_input": lambda a: a + 1.0 / np.zeros(a.shape),
    "empty_sum_divided": lambda a: 1.0 / a[:0].sum(axis=0),
    "empty_sum_then_log": lambda a: np.log(a[:0].sum(axis=0) * 2.0),
    "empty_prod_overflow": lambda a: a[:0].prod(axis=0) * 1e308 * 10.0,
}


def outcome(call, x, **errstate):
    """(what the call raised or returned, the RuntimeWarnings it gave)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with np.errstate(**errstate):
            try:
                r = call(x)
                got = ("value", np.asarray(r).dtype.str, repr(np.asarray(r).tolist()))
            except FloatingPointError as e:
                got = ("raised", str(e))
    return got, sorted(str(w.message) for w in seen if w.category is RuntimeWarning)


@pytest.mark.parametrize("mode", ["warn", "raise"])
@pytest.mark.parametrize("name", list(CASES))
def test_flags_of_folded_operands_are_numpys(name, mode):
    fn = CASES[name]
    x = np.arange(12.0).reshape(4, 3)
    want = outcome(fn, x, all=mode)
    assert want[0][0] == "raised" or want[1], "the case must raise a flag in numpy"
    cf = lowering.compile(fn, backend="cpu")
    for _ in range(3):  # the compiling call and cached calls
        assert outcome(cf, x, all=mode) == want
