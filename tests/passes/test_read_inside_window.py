"""Accumulating shifted in-place updates — an FIR filter's `y[k:] += h[k] *
x[:n - k]` over its taps — run as one fused kernel over y[K:] plus one
element per tap, with numpy's values bit for bit (the same additions in the
same order) and numpy's floating-point errors:

- `array-canonicalize` (`ReadInsideWindow`): y[k + 1:] read right after
  `y[k:] = v` is read from v where the next assignment writes over the
  array there; the assignment keeps only y[k];
- `keep-flags`: slices and what slice assignments keep of a value together
  cover it (`_covered`), and `x[w] -= y`'s second store reads the whole of
  the first, so nothing is kept for its flags alone;
- `array-canonicalize` (`SliceAcrossWindow`): a slice across the edge of
  a window just written, the assignment read by nothing else, is the
  concatenation of what it reads of the destination and of the value (a
  moving average by cumsum: one pass after the cumsum);
- lower-to-loop: a value read through windows apart is computed once (in
  each window's kernel), and a read of a buffer apart from what was written
  into it since (each tap's one element) reads it where it lies."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.testing import arrays, assert_matches_numpy, stage_text


def fir(x, h):
    y = np.zeros_like(x)
    n = x.shape[0]
    for k in range(h.shape[0]):
        y[k:] += h[k] * x[: n - k]
    return y


def test_taps_fuse_into_one_pass():
    """16 taps over 40000 samples: the first tap's kernel, one tiny kernel
    per later tap, and one kernel computing every tap over y[15:] — not a
    pass over y per tap; no flags kernel (every element is read)."""
    with np.errstate(all="warn"):
        text = stage_text(fir, "f64[40000] f64[16]", "loop")
    assert "loop.flags" not in text
    maps = [int(m) for m in __import__("re").findall(r"loop\.map \[(\d+)\]", text)]
    big = [m for m in maps if m > 100]
    assert len(big) == 2, maps  # y = h[0] * x, then the fused taps over y[15:]
    assert len(maps) <= 16 + 2 + 15, maps  # (a tap's element may be staged)
    last = text.split('loop.kernel "')[-1]
    assert last.count("arith.mulf") == 15, last  # taps 1..15, fused


def test_taps_match_numpy_bit_for_bit():
    g = np.random.default_rng(0)
    x, h = g.standard_normal(5000), g.standard_normal(12)
    got = lowering.compile(fir)(x, h)
    np.testing.assert_array_equal(got, fir(x, h))


def test_an_overflow_in_one_tap_warns_and_raises_as_numpy():
    x = np.ones(3000)
    x[2500] = 1e300
    h = np.array([1.0, 2.0, 1e10])  # tap 2 overflows at 2502 only
    f = lowering.compile(fir)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        want = fir(x, h)
    with warnings.catch_warnings(record=True) as w2:
        warnings.simplefilter("always")
        got = f(x, h)
    np.testing.assert_array_equal(got, want)
    runtime = [str(m.message) for m in w2 if m.category is RuntimeWarning]
    assert runtime == [str(m.message) for m in w]
    assert len(w2) == len(w), [str(m.message) for m in w2]  # nothing else either
    assert w, "numpy warned"
    with np.errstate(over="raise"):
        try:
            f(x, h)
        except FloatingPointError as e:
            assert "overflow" in str(e)
        else:
            raise AssertionError("compiled did not raise")


def decay(y, g):
    """A 2-D variant: rows accumulate the row above, in place."""
    y = y.copy()
    for i in range(1, y.shape[0]):
        y[i:] += g * y[i - 1]
    return y


def test_two_d_rows_match_numpy():
    g = np.random.default_rng(1)
    assert_matches_numpy(decay, g.standard_normal((7, 300)), 0.5, calls=2)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_fir_matches_numpy(data):
    """Any length (taps longer than the signal included), any number of
    taps, values with NaN, ±Inf, -0.0, subnormals and huge magnitudes, any
    layout: numpy's values exactly, the same warnings."""
    dt = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    n = data.draw(st.integers(0, 40), label="n")
    taps = data.draw(st.integers(1, 9), label="taps")
    x = data.draw(arrays(dt, (n,)), label="x")
    h = data.draw(arrays(dt, (taps,)), label="h")
    assert_matches_numpy(fir, x, h, compiled=lowering.compile(fir), rtol=0.0)


def moving_average(x, w):
    ret = np.cumsum(x)
    ret[w:] = ret[w:] - ret[:-w]
    return ret[w - 1:] / w


def test_a_slice_across_the_window_is_read_in_pieces():
    """`ret[w - 1:]` of `ret[w:] = ...`, read by nothing else: the element
    before the window from ret, the rest from the difference — the
    division fused into both pieces (sink-concat), no array for the
    assignment, no flags kernel (every element of the difference is read)."""
    with np.errstate(all="warn"):
        text = stage_text(moving_average, "f64[40000] int:100", "loop")
    assert "loop.flags" not in text
    assert text.count("loop.kernel") == 3, text  # the cumsum, then one kernel per piece
    g = np.random.default_rng(2)
    x = g.standard_normal(3000)
    np.testing.assert_array_equal(lowering.compile(moving_average)(x, 50), moving_average(x, 50))


def test_an_overflow_in_the_window_read_across_warns_as_numpy():
    x = np.ones(20000)
    x[15000] = np.inf
    x[15010] = -np.inf  # inf - inf in the difference: invalid
    f = lowering.compile(moving_average)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        want = moving_average(x, 20)
    with warnings.catch_warnings(record=True) as w2:
        warnings.simplefilter("always")
        got = f(x, 20)
    np.testing.assert_array_equal(got, want)
    assert [str(m.message) for m in w2] == [str(m.message) for m in w]
    assert w, "numpy warned"


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_reads_across_and_inside_a_written_window_match_numpy(data):
    """A window of a 2-D array assigned, then a slice read that lies inside
    it, across its edge or apart from it, along either axis; the
    assignment kept or not: numpy's values exactly."""
    rows, cols = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    y = data.draw(arrays(np.float64, (rows, cols)), label="y")
    v = data.draw(arrays(np.float64, (rows, cols)), label="v")
    r0, r1 = sorted(data.draw(st.tuples(st.integers(0, rows), st.integers(0, rows))))
    c0, c1 = sorted(data.draw(st.tuples(st.integers(0, cols), st.integers(0, cols))))
    s0, s1 = sorted(data.draw(st.tuples(st.integers(0, rows), st.integers(0, rows))))
    keep = data.draw(st.booleans(), label="keep")

    def f(y, v):
        y = y.copy()
        y[r0:r1, c0:c1] = v[r0:r1, c0:c1] * 2.0 - 1.0
        part = y[s0:s1, c0:] * 3.0
        return (part, y) if keep else part

    assert_matches_numpy(f, y, v, compiled=lowering.compile(f), rtol=0.0)
