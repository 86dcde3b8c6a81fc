"""Column reductions (`x.sum(axis=0)`, a bias gradient) split into chunks
of rows on the CPU's threads (`ColumnEmitter`, `Lowering.column_chunks`):
chunk c of n adds its rows, in order, into row c of a buffer of partial
results, from numpy's start (+0.0; the chunk's first row for max/min), and a
join combines the n partials in chunk order. One thread walking every row
of a 4096x4096 float32 sum ran slower than numpy's own pass.

The split changes a sum's order (chunk by chunk, then the chunks'
partials): sums are compared within the reduction tolerance of
lowering.testing (relative to the sum of the terms' magnitudes); max and
min (NaN and infinities included), integer sums and products (never split)
are exact. The parallel threshold is lowered so that arrays of a few
hundred elements split, as a big one does at the default threshold."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowering
from lowering.backends.cpu_backend import KernelStep
from lowering.pipeline import clear_programs
from lowering.testing import TOLERANCES, assert_same_value, edge_values
from passes.lower_to_loop import COLUMN_CHUNK_ROWS
from runtime import cpu

THRESHOLD = 64
ROWS = st.integers(2 * COLUMN_CHUNK_ROWS, 5 * COLUMN_CHUNK_ROWS)
SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def low_threshold(monkeypatch):
    monkeypatch.setattr(cpu, "PARALLEL_THRESHOLD", THRESHOLD)
    monkeypatch.setattr(cpu, "PYTHON_POOL_THRESHOLD", THRESHOLD)
    monkeypatch.setenv("LOWERING_CACHE", "0")  # (programs of the default threshold)
    clear_programs()
    yield
    clear_programs()


def _kernels(cf) -> list[KernelStep]:
    return [s for p in cf.programs_run for s in getattr(p, "steps", ())
            if isinstance(s, KernelStep)]


def _matrix(dtype, edges: bool):
    elems = st.floats(-1e3, 1e3, width=np.dtype(dtype).itemsize * 8)
    if edges:
        elems = st.one_of(elems, st.sampled_from(edge_values(dtype)))
    return hnp.arrays(dtype, st.tuples(ROWS, st.integers(1, 24)), elements=elems)


@SETTINGS
@given(x=_matrix(np.float64, edges=False), dtype=st.sampled_from([np.float32, np.float64]))
def test_split_column_sums_are_numpys_within_the_reduction_tolerance(low_threshold, x, dtype):
    x = x.astype(dtype)

    def f(x):
        y = x * 0.5 - 1.0
        return y.sum(axis=0), y.mean(axis=0)

    cf = lowering.compile(f, backend="cpu")
    got, want = cf(x), f(x)
    scale = np.abs(x * 0.5 - 1.0).sum(axis=0)
    rtol = TOLERANCES.rtol(dtype, "reduction", x.shape[0])
    for g, w, s in ((got[0], want[0], scale), (got[1], want[1], scale / x.shape[0])):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.all(np.abs(g.astype(np.float64) - w) <= rtol * s + 1e-300)
    if cpu.THREADS > 1 and x.shape[1] > 1:  # (one column: a plain reduction, split as one)
        assert any(k.threads > 1 for k in _kernels(cf))  # the rows ran on more than one thread


@SETTINGS
@given(x=_matrix(np.float64, edges=True))
def test_split_column_max_and_min_are_exact_with_nan_and_infinities(low_threshold, x):
    def f(x):
        return (x * 3.0).max(axis=0), np.min(x - 1.0, axis=0)

    with np.errstate(all="ignore"):
        want = f(x)
        got = lowering.compile(f, backend="cpu")(x)
    assert_same_value(got, want, 0.0)


@SETTINGS
@given(x=hnp.arrays(np.int64, st.tuples(ROWS, st.integers(1, 9)),
                    elements=st.one_of(st.integers(-1000, 1000),
                                       st.sampled_from([2**63 - 1, -2**63, 0, -1]))))
def test_split_integer_and_boolean_column_reductions_are_exact(low_threshold, x):
    def f(x):
        return (x * 3).sum(axis=0), (x > 5).any(axis=0), (x % 7).max(axis=0)

    assert_same_value(lowering.compile(f, backend="cpu")(x), f(x), 0.0)


def test_columns_of_negative_zeros_sum_to_positive_zero(low_threshold):
    z = np.full((4 * COLUMN_CHUNK_ROWS, 5), -0.0)
    got = lowering.compile(lambda z: z.sum(axis=0))(z)
    assert_same_value(got, z.sum(axis=0), 0.0)
    assert not np.signbit(got).any()


def test_products_and_short_columns_run_in_one_ordered_pass(low_threshold):
    """Products keep numpy's order (a split product's partials overflow and
    underflow where numpy's one pass does not: inf * 0 a NaN); fewer than
    two chunks' rows are not split."""
    # (columns of a row long enough for one ordered pass: `column_reduction`)
    big = np.tile(np.array([[1e300], [1e300], [1e-300], [1e-300]] * COLUMN_CHUNK_ROWS), (1, 40))
    cf = lowering.compile(lambda x: np.prod(x, axis=0))
    with np.errstate(all="ignore"):
        assert_same_value(cf(big), np.prod(big, axis=0), 0.0)
    assert all(k.threads == 1 for k in _kernels(cf))
    for rows, split in ((2 * COLUMN_CHUNK_ROWS - 1, False), (2 * COLUMN_CHUNK_ROWS, True)):
        x = np.arange(rows * 1024.0).reshape(rows, 1024)  # (exact sums in any order)
        report = str(lowering.explain(lowering.compile(lambda x: x.sum(axis=0)))(x))
        assert ("k1_part" in report and "k1_join" in report) == (split and cpu.THREADS > 1), report
        assert_same_value(lowering.compile(lambda x: x.sum(axis=0))(x), x.sum(axis=0), 0.0)
