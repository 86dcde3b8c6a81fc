"""Specialization on values Python needs (`Tracer.may_specialize`): a Python
float argument converted by Python (`math.sqrt(dt)`, `if lr > 0.1`) and a
small array whose elements decide a size or an index (`best[w:]` for `w` of
`weights`) are read while tracing instead of breaking the graph; the program
holds for those values only, guarded bit for bit; when a later call changes
one, the function is compiled once more with that argument's uses breaking the
graph (never once per value). Every result is numpy's."""

import math

import numpy as np
import pytest

import lowering
from lowering.capture.tracer import SPECIALIZE_LIMIT, GraphBreakError


def asian_step(Z, T, r):
    dt = T / Z.shape[0]
    vol = 0.3 * math.sqrt(dt)  # float() of a traced value
    return Z * vol + r


def knapsack(weights, values, capacity):
    best = np.zeros(capacity + 1)
    for w, v in zip(weights, values):
        best[w:] = np.maximum(best[w:], best[:-w] + v)  # w: a slice bound
    return best


def _same(got, want):
    assert type(got) is type(want)
    np.testing.assert_array_equal(got, want)


def test_a_float_argument_python_converts_is_specialized_and_guarded():
    f = lowering.compile(asian_step, fullgraph=True)  # no graph break at all
    Z = np.arange(12.0).reshape(4, 3)
    _same(f(Z, 1.0, 0.5), asian_step(Z, 1.0, 0.5))
    _same(f(Z, 1.0, 0.25), asian_step(Z, 1.0, 0.25))  # r is still a 0-d input
    assert f.stats["compiles"] == 1 and f.stats["cache_hits"] == 1
    text = str(lowering.explain(f)(Z, 1.0, 0.5))
    assert "T == 1.0 (specialized" in text and "r: float (traced as 0-d)" in text


def test_a_changed_value_recompiles_once_then_breaks_the_graph():
    f = lowering.compile(asian_step)
    Z = np.arange(12.0).reshape(4, 3)
    for T in (1.0, 2.0, 3.0, 4.0, 1.0, 2.5):
        _same(f(Z, T, 0.5), asian_step(Z, T, 0.5))
    assert f.stats["recompiles"] == 1, f.stats  # T=2.0 fails the guard; no more after
    assert f.stats["graph_breaks"] >= 1 and f.stats["eager_fallbacks"] == 0
    with pytest.raises(GraphBreakError):  # fullgraph: the break is an error again
        g = lowering.compile(asian_step, fullgraph=True)
        g(Z, 1.0, 0.5)
        g(Z, 2.0, 0.5)


@pytest.mark.parametrize("a, b", [(0.0, -0.0), (-0.0, 0.0), (1.0, 1.0 + 2**-52)])
def test_float_guards_compare_bits(a, b):
    def f(x, s):
        return x * math.copysign(1.0, s) + s

    cf = lowering.compile(f)
    x = np.ones(3)
    _same(cf(x, a), f(x, a))
    _same(cf(x, b), f(x, b))  # not the entry made for a
    assert cf.stats["recompiles"] == 1


def test_a_nan_argument_hits_its_own_entry():
    def f(x, s):
        return x + (1.0 if math.isnan(s) else 2.0)

    cf = lowering.compile(f)
    x = np.ones(3)
    for _ in range(3):
        _same(cf(x, float("nan")), f(x, float("nan")))
    assert cf.stats["compiles"] == 1 and cf.stats["cache_hits"] == 2


def test_array_elements_deciding_slices_compile_whole():
    k = lowering.compile(knapsack, fullgraph=True)
    w, v = np.array([3, 5, 2]), np.array([1.0, 2.0, 0.5])
    _same(k(w, v, 12), knapsack(w, v, 12))
    _same(k(w, v * 2, 12), knapsack(w, v * 2, 12))  # values stay inputs
    assert k.stats["compiles"] == 1 and k.stats["cache_hits"] == 1
    assert "weights: its 24 bytes as traced" in str(lowering.explain(k)(w, v, 12))


def test_changed_array_elements_are_never_a_wrong_answer():
    k = lowering.compile(knapsack)
    v = np.array([1.0, 2.0, 0.5])
    for w in ([3, 5, 2], [3, 4, 2], [1, 1, 1], [3, 5, 2], [2, 2, 6]):
        w = np.array(w)
        _same(k(w, v, 12), knapsack(w, v, 12))
    assert k.stats["recompiles"] == 1, k.stats
    w = np.array([3, 5, 2])
    w[1] = 4  # the same array object, written by the caller
    _same(k(w, v, 12), knapsack(w, v, 12))


def test_large_arrays_and_data_dependent_branches_still_break():
    big = np.ones(SPECIALIZE_LIMIT + 1, np.int64)

    def slice_by_element(x):
        return x[x[0]:] * 2

    def branch_on_data(x):
        return x * 2 if x.sum() > 0 else x * 3  # bool() of an array: control flow on data

    cf = lowering.compile(slice_by_element)
    _same(cf(big), slice_by_element(big))
    assert cf.stats["graph_breaks"] == 1
    small = np.arange(4.0)
    cb = lowering.compile(branch_on_data)
    _same(cb(small), branch_on_data(small))
    assert cb.stats["graph_breaks"] == 1


def test_python_state_floats_compare_bits():
    """A float read from an attribute is a constant of the program: 0.0 and
    -0.0 (Python's or numpy's) are different constants."""

    class Model:
        eps = 0.0

    m = Model()

    def f(x):
        return x / m.eps

    cf = lowering.compile(f)
    x = np.ones(3)
    with np.errstate(divide="ignore"):
        for eps in (0.0, -0.0, np.float64(0.0), np.float64(-0.0), 0.0):
            m.eps = eps
            _same(cf(x), f(x))
