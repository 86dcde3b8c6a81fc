"""A point-wise value that is both kept (returned, or read by a later graph)
and reduced is computed once, in the reduction's pass, which stores each
point as it folds it in (`passes/lower_to_loop.py: Lowering.deferrable`,
`KernelEmitter._carry`): one pass over memory, not a write and a re-read.

Where the reduction's pass would not visit each point exactly once, before
anything else reads the value, the value keeps its own kernel; the programs
below each put one such obstacle in the way, and all must match numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.testing import TOLERANCES, arrays, assert_matches_numpy


def kernels(fn, *args) -> int:
    return lowering.explain(lowering.compile(fn, backend="cpu"))(*args).kernel_count


def kept_and_summed(x):
    y = x * 2 + 1
    return y, y.sum()


def kept_and_row_summed(x):
    y = np.sqrt(np.abs(x)) + x
    return y, y.sum(axis=-1)


def kept_and_two_reductions(x):
    y = x * 3
    return y, y.max(axis=-1), (y * y).sum(axis=-1)


def two_kept_values(x):
    a = x + 1
    b = a * a
    return a, b, b.sum(axis=-1)


def test_a_kept_value_is_stored_by_its_reductions_pass():
    x = np.random.default_rng(0).standard_normal(1 << 16).astype(np.float32)
    assert kernels(kept_and_summed, x) == 1
    assert_matches_numpy(kept_and_summed, x, calls=2, rtol=TOLERANCES.rtol(x.dtype, "reduction", x.size))
    m = np.random.default_rng(1).standard_normal((64, 300)).astype(np.float32)
    rtol = TOLERANCES.rtol(m.dtype, "reduction", m.shape[1])
    for fn in (kept_and_row_summed, two_kept_values, kept_and_two_reductions):
        assert kernels(fn, m) == 1, fn.__name__
        assert_matches_numpy(fn, m, calls=2, rtol=rtol)


def test_the_branch_program_makes_one_kernel_before_its_break():
    """y = x * 2 + 1 is read again after the data-dependent `if`: it is
    written by the same pass that sums it."""
    def branch(x):
        y = x * 2 + 1
        if y.sum() > 0:
            return np.tanh(y) - 1
        return y * 3

    x = np.random.default_rng(2).integers(-9, 6, 1 << 16).astype(np.float32)
    ex = lowering.explain(lowering.compile(branch, backend="cpu"))(x)
    assert ex.kernel_count == 2  # one per graph
    assert_matches_numpy(branch, x, calls=2)  # integer values: the sum is exact


# each obstacle: the value is read elsewhere, or not point for point
OBSTACLES = {
    "reversed in the same pass": lambda x: (x * 2, (x * 2 * (x * 2)[::-1]).sum()),
    "read before the reduction": lambda x: ((y := x * 2), np.maximum.accumulate(y), y.sum()),
    "a slice reduced": lambda x: ((y := x + 1), y[: max(1, y.shape[0] // 2)].sum()),
    "a slice reduced first": lambda x: ((y := x + 1), y[: max(1, y.shape[0] // 2)].sum(), y.sum()),
    "gathered first": lambda x: ((y := x + 1), y[np.arange(y.shape[0])[::-1]].sum(), y.sum()),
    "a slice reduced in the same pass": lambda x: ((y := x + 1), y[: max(1, y.shape[0] // 2)].sum() + y.sum()),
    "broadcast into the reduction": lambda x: ((y := x - 1), (y[:, None] * y[None, :]).sum()),
    "matmul reads it": lambda x: ((y := x * 0.5), y @ y, y.sum()),
    "kept and scaled by its mean": lambda x: ((y := x * 2), y * y.mean()),
    "a sort reads it": lambda x: ((y := x * 2), np.sort(y), y.sum()),
    "reduced twice": lambda x: ((y := x * 2), y.sum(), (y + 1).max()),
    "a cumulative sum": lambda x: ((y := x * 2), np.cumsum(y), y.sum()),
    "an argmax": lambda x: ((y := x * 2), np.argmax(y), y.sum()),
}


@pytest.mark.parametrize("name", list(OBSTACLES))
def test_values_that_cannot_be_carried_keep_their_own_kernel(name):
    fn = OBSTACLES[name]
    for n in (1, 7, 64, 1000):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        rtol = TOLERANCES.rtol(x.dtype, "reduction", n * n)  # (y @ y, the outer product: n*n terms)
        assert_matches_numpy(fn, x, calls=2, compiled=lowering.compile(fn, backend="cpu"), rtol=rtol)


# values whose sums and products are exact in any order (so results compare
# bit for bit), with the edge values whose meaning is order-free: NaN, ±Inf, ±0
EXACT = [-4.0, -3.0, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0, 4.0,
         float("nan"), float("inf"), -float("inf")]
PROGRAMS = {
    "sum": kept_and_summed,
    "two reductions": kept_and_two_reductions,
    "two kept": two_kept_values,
    "kept and centred": lambda x: ((y := x * 2), y - y.mean(axis=-1, keepdims=True)),
    "max of a kept": lambda x: ((y := np.abs(x)), y.max(axis=0)),
    "prod of a kept": lambda x: ((y := np.sign(x) * 2), y.prod(axis=-1)),
    "all of a kept": lambda x: ((y := x > 0), y.all(axis=-1), y.any()),
    "min over all axes": lambda x: ((y := -x), y.min()),
}


@settings(deadline=None)
@given(name=st.sampled_from(sorted(PROGRAMS)),
       x=arrays(st.sampled_from([np.float32, np.float64]),
                st.lists(st.integers(0, 40), min_size=1, max_size=3).map(tuple),
                elements=st.sampled_from(EXACT)))
def test_kept_and_reduced_values_match_numpy(name, x):
    """NaN, ±Inf, ±0, empty and size-1 dims, every layout: the carried store
    writes exactly numpy's points, and the reductions are numpy's (exact
    values: any order of summation gives numpy's result)."""
    fn = PROGRAMS[name]
    assert_matches_numpy(fn, x, calls=2, compiled=lowering.compile(fn, backend="cpu"))
