"""IEEE flags of ops whose operands the compiler knows (`1.0 /
np.zeros(3)`, the sum over an empty axis divided into): numpy computes them
on every call and warns, or raises under `np.errstate`; the compiled
program must too, on the call that compiles and on every cached call. LLVM
folds an op of constants at compile time, and an op of a select with a
constant arm into a select of the op's results (`1.0 / np.maximum(x, 0.0)`),
raising nothing when the kernel runs, unless the constants are hidden from
it (`opaque`, `hide_select_constants`: lowering/codegen/llvm.py)."""

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
    "empty_sum_power": lambda a: a[:0].sum(axis=0) ** -0.5,  # (1 / sqrt, zero selected)
    # a select with a constant arm: LLVM computes the op on the arm at compile time
    "where_constants": lambda a: 1.0 / np.where(a > 5, 0.0, 1.0),
    "where_one_constant": lambda a: 1.0 / np.where(a > 5, 0.0, a + 1),
    "where_overflow": lambda a: np.where(a > 5, 1e300, a) * 1e10,
    "maximum_divided_into": lambda a: 1.0 / np.maximum(a - 5, 0.0),
    "clip_log": lambda a: np.log(np.clip(a - 5, 0.0, 3.0)),
    "maximum_cast": lambda a: np.maximum(a, 1e300 * (a > 5)).astype(np.float32),
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


# np.where computes both of its operands whole: their flags are numpy's even
# where the condition keeps the other one. A scalar select of a division
# becomes a branch around it (x86's code preparation), and a condition one
# for every lane (a scalar's) lets LLVM drop the value it never keeps.
WHERE = {
    "safe_division": lambda a: np.where(a > 0, 1.0 / a, 0.0),
    "safe_division_swapped": lambda a: np.where(a == 0, 0.0, 1.0 / a),
    "sqrt_of_negative": lambda a: np.where(a > 0, np.sqrt(a - 0.5), a),
    "overflowing_product": lambda a: np.where(a == 0, a, (1 - a) * 1e308 * 10.0 + a),
    "power": lambda a: np.where(a > 0, a ** -0.5, 0.0),
    "scalar_condition": lambda a: np.where(a.sum() > 0, a, 1.0 / a),
}


@pytest.mark.parametrize("n,at", [(1, 0), (3, 2), (37, 36), (37, 0), (1000, 999)])
@pytest.mark.parametrize("name", list(WHERE))
def test_where_computes_the_value_it_does_not_keep(name, n, at):
    fn = WHERE[name]
    x = np.ones(n)
    x[at] = 0.0
    for mode in ("warn", "raise"):
        want = outcome(fn, x, all=mode)
        assert want[0][0] == "raised" or want[1], "the case must raise a flag in numpy"
        cf = lowering.compile(fn, backend="cpu")
        for _ in range(2):
            assert outcome(cf, x, all=mode) == want
