"""The row cache (`plan_row_cache`: a reduction's costly values kept in a
stack row for the map that computes them again) in kernels whose row
length is known only at the launch: one program (`dynamic=True`) runs the
cached version of the row's ops for rows that fit the row's capacity
(`row_capacity`: ROW_CACHE_BYTES of elements) and the recomputing version
for longer ones. Both give numpy's values at lengths below, at and above
the capacity, in rows with NaN and infinities, and at lengths 2 and 3
(0 and 1 are specialized, not dynamic). Outputs of a size known only at the
launch are marked for streamed stores, which a launch takes when its array
is big enough (the schedule's `stream_bytes`)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.dialects.builtin import f32, f64

import lowering
from lowering.backends.cpu_backend import MATH_INLINE_MAX_CALLS
from lowering.codegen.llvm import ROW_CACHE_BYTES, row_capacity, row_versions
from lowering.testing import TOLERANCES, assert_matches_numpy
from passes import schedule
from runtime import cpu


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def scaled_softmax(x):
    """Softmax times LayerNorm-like row statistics (the RMS and the mean
    magnitude): their two sums, one pass (`reduction_groups`), run between
    the cached row's sum and the map that reads the row."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    s = e.sum(axis=-1, keepdims=True)
    q = np.sqrt((x * x).mean(axis=-1, keepdims=True)) + np.abs(x).mean(axis=-1, keepdims=True)
    return e / s * q


def two_rows(x):
    """Two cached rows (exp and cosh) read by one map: their spans overlap."""
    a = np.exp(x - x.max(axis=-1, keepdims=True))
    b = np.cosh(x)
    return a / a.sum(axis=-1, keepdims=True) + b / b.sum(axis=-1, keepdims=True)


FNS = {"softmax": softmax, "scaled_softmax": scaled_softmax, "two_rows": two_rows}
# (a few pointwise ops around the reductions over the row)
EXTRA_OPS = {"softmax": 1, "scaled_softmax": 6, "two_rows": 4}


def lengths(dtype) -> list[int]:
    cap = ROW_CACHE_BYTES // np.dtype(dtype).itemsize
    return [2, 3, 17, 100, cap - 1, cap, cap + 1, cap + 37]


def rows_of(dtype, n: int, seed: int, special: bool = False) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((3, n)).astype(dtype)
    if special:  # a NaN row, a row with +inf, a row of -inf
        x[0, n // 2] = np.nan
        x[1, n - 1] = np.inf
        x[2, :] = -np.inf
    return x


def rtol(name: str, dtype, n: int) -> float:
    return TOLERANCES.rtol(dtype, "reduction", n + EXTRA_OPS[name])


@pytest.fixture
def fresh(monkeypatch):
    """Compiles in this test make their kernels anew (no program or kernel
    body from an earlier test), so that a program's `llvm_ir` is its own."""
    monkeypatch.setattr(cpu, "_kernels", {})
    lowering.pipeline.clear_programs()
    yield
    lowering.pipeline.clear_programs()


def test_the_capacity_is_the_row_cache_bytes():
    assert row_capacity(f32) == ROW_CACHE_BYTES // 4
    assert row_capacity(f64) == ROW_CACHE_BYTES // 8


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(FNS))
def test_rows_below_at_and_above_the_capacity(name, dtype, fresh):
    """One compile for every length; the program has both versions."""
    fn = FNS[name]
    f = lowering.compile(fn, dynamic=True)
    for n in lengths(dtype):
        assert_matches_numpy(fn, rows_of(dtype, n, n), compiled=f, rtol=rtol(name, dtype, n))
    assert f.stats["compiles"] == 1 and f.stats["eager_fallbacks"] == 0
    ir = f.programs_run[0].llvm_ir
    assert "row.cached:" in ir and "row.recomputed:" in ir


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(FNS))
def test_nan_and_inf_rows_in_both_versions(name, dtype):
    """(The flags such rows raise ignored: else numpy's warnings come from
    an eager re-run, not from the compiled rows.)"""
    fn = FNS[name]
    f = lowering.compile(fn, dynamic=True)
    with np.errstate(all="ignore"):
        for n in lengths(dtype):
            assert_matches_numpy(fn, rows_of(dtype, n, n + 1, special=True), compiled=f,
                                 rtol=rtol(name, dtype, n))
    assert f.stats["compiles"] == 1 and f.stats["eager_fallbacks"] == 0


def vector_softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def test_a_kernel_without_parallel_dims_has_both_versions(fresh):
    """A 1-D softmax: the row is the whole kernel."""
    f = lowering.compile(vector_softmax, dynamic=True)
    cap = ROW_CACHE_BYTES // 4
    for n in [2, 3, 100, cap, cap + 1, 3 * cap]:
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        assert_matches_numpy(vector_softmax, x, compiled=f, rtol=rtol("softmax", np.float32, n))
    assert f.stats["compiles"] == 1
    ir = f.programs_run[0].llvm_ir
    assert "row.cached:" in ir and "row.recomputed:" in ir


def test_the_versions_calls_count_once_for_inlining(fresh):
    """Softmax's exp is called at 5 places in the cached version and 7 in
    the other: only the larger's count against MATH_INLINE_MAX_CALLS
    (`outline_math`), so the cached version's exp stays inline, as in the
    static kernel."""
    f = lowering.compile(softmax, dynamic=True)
    f(rows_of(np.float32, 40, 0))
    ir = f.programs_run[0].llvm_ir
    # (the kernel's lanes: the host's vector width, doubled for the exp's long chain)
    lanes = max(int(w) for w in re.findall(r'call <(\d+) x float> @"lowering\.exp\.f32x\1"', ir))
    assert ir.count(f'call <{lanes} x float> @"lowering.exp.f32x{lanes}"') > MATH_INLINE_MAX_CALLS
    exp = re.search(r'define internal [^\n]*@"lowering\.exp\.f32x%d"[^\n]*' % lanes, ir).group(0)
    assert "alwaysinline" in exp and "noinline" not in exp


def test_overlapping_rows_share_one_pair_of_versions(fresh):
    """two_rows: the exp row's span (its sum through the map) and the cosh
    row's overlap: one branch on both extents, one pair of versions."""
    f = lowering.compile(two_rows, dynamic=True)
    assert_matches_numpy(two_rows, rows_of(np.float32, 40, 0), compiled=f,
                         rtol=rtol("two_rows", np.float32, 40))
    ir = f.programs_run[0].llvm_ir
    assert ir.count("row.cached:") == 1 and ir.count("row.recomputed:") == 1


class _Op:
    """A stand-in for a kernel-level op in `row_versions`' plan."""

    def __init__(self, dynamic: bool):
        self._extents = [object()] if dynamic else [8]

    def extents(self):
        return self._extents


def test_row_versions_join_overlapping_spans():
    ops = [_Op(True), _Op(False), _Op(True), _Op(False), _Op(False), _Op(True), _Op(False)]
    r0, m1, r2, m3, m4, r5, m6 = ops
    static = _Op(False)
    plan = {r0: (m3, None), r2: (m4, None), r5: (m6, None)}
    assert row_versions(ops, plan) == {0: (5, [r0, r2]), 5: (7, [r5])}
    # a row of a static length is cached without versions
    assert row_versions([static, m1], {static: (m1, None)}) == {}


@pytest.mark.parametrize("fn", [softmax, two_rows])
def test_streamed_outputs_of_a_size_known_at_the_launch(fn, monkeypatch, fresh):
    """With the threshold at 64 rows of 64 floats, launches over smaller
    outputs store as usual, bigger ones around the cache (when aligned);
    the values are numpy's either way."""
    monkeypatch.setattr(schedule, "STREAM_BYTES", 64 * 64 * 4)
    f = lowering.compile(fn, dynamic=True)
    rng = np.random.default_rng(5)
    for m, n in [(3, 8), (16, 64), (64, 64), (65, 64), (97, 131), (200, 3)]:
        x = rng.standard_normal((m, n)).astype(np.float32)
        assert_matches_numpy(fn, x, compiled=f, rtol=rtol(fn.__name__, np.float32, n))
    assert f.stats["compiles"] == 1
    ir = f.programs_run[0].llvm_ir
    assert "!nontemporal" in ir and "sfence" in ir
