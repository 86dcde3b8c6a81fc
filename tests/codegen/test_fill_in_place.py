"""Slice assignments into an array the program made itself, which nothing
else reads, run in place (`passes/lower_to_loop.py: in_place`,
`InsertEmitter`): one kernel per assignment, its source fused in and stored
into the window, no copy of the whole array per assignment; an array that
assignments cover entirely before any read is never filled
(`overwritten`). Every other slice assignment copies. Each program below
must equal numpy; the kernel counts show which path ran."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
from bench.programs.dynprog import edit_distance  # (a new `np.empty` per row, written entirely)
from lowering.testing import assert_matches_numpy


def explained(fn, *args):
    return lowering.explain(lowering.compile(fn, backend="cpu"))(*args)


def externs(report) -> list[str]:
    return [name for ks in report.kernels for name, _ in ks if name.startswith("extern")]


def row_fill(x):
    out = np.zeros((x.shape[0], x.shape[1]), dtype=x.dtype)
    for i in range(x.shape[0]):
        out[i] = np.tanh(x[i]) + i
    return out


def test_rows_filled_in_place_one_kernel_each_and_no_fill():
    x = np.random.default_rng(0).standard_normal((12, 33)).astype(np.float32)
    rep = explained(row_fill, x)
    assert rep.kernel_count == 12 and not externs(rep), rep.kernels
    assert_matches_numpy(row_fill, x, calls=2)


def rows_partly_written(a, b):
    """The same, but each row's first element keeps np.zeros' zero."""
    n = b.shape[0]
    prev = np.arange(n + 1)
    for i in range(1, a.shape[0] + 1):
        cur = np.zeros(n + 1, dtype=np.int64)
        cur[1:] = np.minimum(prev[:-1] + (a[i - 1] != b), prev[1:] + 1) + cur[:-1]
        prev = cur * 2 - i
    return prev


def test_an_array_made_in_every_iteration_and_covered_is_never_filled():
    """After CSE every iteration's `np.empty(n + 1)` is one value; each row's
    assignments still run in place, with no copy of that value per row
    (`private_destinations`), and a row that keeps part of its fill keeps it."""
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 4, 6), rng.integers(0, 4, 17)
    rep = explained(edit_distance, a, b)
    assert not externs(rep), rep.kernels
    # per row: cur[0], cur[1:], the scan; no copy of a shared np.empty
    assert rep.kernel_count == 3 * 6 + 1, rep.kernels
    assert_matches_numpy(edit_distance, a, b, calls=2)
    assert_matches_numpy(rows_partly_written, a, b, calls=2)


def partial_fill(x):
    out = np.full(x.shape, -1.0, dtype=x.dtype)
    for i in range(0, x.shape[0], 2):
        out[i] = x[i] * 2
    return out


def test_a_partly_filled_array_keeps_its_fill():
    x = np.random.default_rng(1).standard_normal((6, 5))
    rep = explained(partial_fill, x)
    assert rep.kernel_count == 4 and not externs(rep), rep.kernels  # the fill and 3 rows
    assert_matches_numpy(partial_fill, x, calls=2)


def recurrence(x):
    out = np.zeros_like(x)
    out[0] = x[0]
    for i in range(1, x.shape[0]):
        out[i] = out[i - 1] * 0.5 + x[i]  # reads the array it writes: copies
    return out


def columns_backwards(x):
    out = np.empty((x.shape[1], x.shape[0]), dtype=x.dtype)
    for j in range(x.shape[1]):
        out[::-1, j][:] = 0.0
        out[j, ::-1] = x[:, j] * 3
    return out


def strided_windows(x):
    out = np.ones((7, 8), dtype=x.dtype)
    out[::2, 1::3] = x[:4, :3]
    out[5:0:-2, ::-4] = -x[:3, :2]
    out[3, 3] = x[0, 0] + 100
    out[...] += 1  # a read of the whole array: a copy
    return out, out[1:3].sum()


def returned_midway(x):
    out = np.zeros((3, x.shape[1]), dtype=x.dtype)
    out[0] = x[0]
    first = out.copy()
    out[1] = x[1]
    return first, out


def into_the_argument(x):
    x[1:] = x[:-1] * 2  # the caller's array: never written in place by the program
    return x.sum()


def broadcast_and_scalar_sources(x):
    out = np.zeros((4, x.shape[0]), dtype=x.dtype)
    out[0] = 1.5
    out[1] = x
    out[2:4] = x[None, :] - 1
    return out


def a_view_kept_past_the_write(x):
    out = np.zeros((2, x.shape[0]), dtype=x.dtype)
    head = out[0]
    out[0] = x  # head is a view: numpy shows the write through it
    return head * 1, out


def an_integer_array(x):
    out = np.zeros((3, x.shape[0]), dtype=np.int64)
    for i in range(3):
        out[i] = (x * (i + 1)).astype(np.int64)
    return out


@pytest.mark.parametrize("fn", [recurrence, columns_backwards, strided_windows, returned_midway,
                                into_the_argument, broadcast_and_scalar_sources,
                                a_view_kept_past_the_write, an_integer_array],
                         ids=lambda f: f.__name__)
def test_slice_assignments_match_numpy(fn):
    rng = np.random.default_rng(2)
    for shape in ((8, 8), (9, 7)):
        x = rng.standard_normal(shape).astype(np.float64)
        if fn in (broadcast_and_scalar_sources, a_view_kept_past_the_write, an_integer_array):
            x = x[0] * 10
        assert_matches_numpy(fn, x, calls=2, compiled=lowering.compile(fn, backend="cpu"))


def test_the_callers_array_is_pristine_when_the_call_fails():
    """An error after an in-program write re-runs the call eagerly: the
    caller's array must hold numpy's partial effect, not the program's."""
    def fails_after_writing(x, i):
        x[0] = x[0] + 1  # the argument's only use: written, then read by the gather
        return x[i]  # i an index array: checked when the kernel runs

    x = np.arange(4.0)
    cf = lowering.compile(fails_after_writing, backend="cpu")
    cf(x.copy(), np.array([1]))
    got, want = x.copy(), x.copy()
    with pytest.raises(IndexError):
        cf(got, np.array([9]))
    with pytest.raises(IndexError):
        fails_after_writing(want, np.array([9]))
    assert np.array_equal(got, want)
