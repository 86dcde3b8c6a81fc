"""A slice assignment whose new part reads the destination shifted —
`best[w:] = np.maximum(best[w:], best[:-w] + v)`, a 0/1 knapsack's item —
is one kernel writing into the destination's buffer, its points walked in
an order that reads every point before the point writing over it runs
(lower-to-loop's "ordered" write: the dims whose shift is negative walked
backwards, on one thread), not the new part computed into a buffer and
copied into the window ("staged"). Shifts that no one order serves (`x[1:-1]
= x[:-2] + x[2:]`) stay staged. numpy computes the new part whole before it
writes: the results must match it bit for bit, whatever the shifts."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from bench.programs.dynprog import knapsack
from lowering.testing import assert_matches_numpy
from lowering.testing import stage_text


def item(x):
    best = x * 2
    best[37:] = np.maximum(best[37:], best[:-37] + 1.5)
    return best


def both_ways(x):
    b = x + 1
    b[1:-1] = b[:-2] + b[2:]
    return b


def test_a_shifted_read_is_one_kernel_walked_backwards():
    """The item's update: one kernel after the one making best, storing
    into best's buffer at 100000 - d0 (walked backwards), its points in
    order (`accumulate`); no buffer for the new part, no copy."""
    text = stage_text(item, "f64[100001]", "kernel")
    assert text.count("memref.alloc") == 1, text
    assert text.count("kernel.kernel") == 2, text
    assert "loop.store %11, %1[affine_map<(d0) -> (((d0 * -1) + 100000))>]" in text, text
    assert "{accumulate}" in text, text


def test_shifts_both_ways_are_staged():
    text = stage_text(both_ways, "f64[500]", "kernel")
    assert text.count("memref.alloc") == 2, text  # b, and the new part's buffer
    assert "accumulate" not in text, text


def test_knapsack_matches_numpy():
    g = np.random.default_rng(3)
    w, v = g.integers(1, 50, 40), g.random(40)
    assert_matches_numpy(knapsack, w, v, 700)


values = st.sampled_from([0.0, -0.0, 1.0, -2.5, np.nan, np.inf, -np.inf, 1e-310, 1e300])


@st.composite
def assignments(draw):
    """A shape of 1 or 2 dims, a window in it (start, count, step per dim)
    and two reads of the same count and step, each shifted from the window
    by a few elements (in or out of its steps)."""
    nd = draw(st.integers(1, 2))
    shape, window, reads = [], [], [[], []]
    for _ in range(nd):
        n = draw(st.integers(1, 40 if nd == 1 else 12))
        step = draw(st.sampled_from([1, 1, 1, 2, 3, -1, -2]))
        count = draw(st.integers(0, max(0, (n - 1) // abs(step) + 1)))
        span = (count - 1) * abs(step) if count else 0
        lo = draw(st.integers(0, max(0, n - 1 - span)))
        start = lo if step > 0 else lo + span
        shape.append(n)
        window.append((start, count, step))
        for r in reads:
            off = draw(st.integers(-5, 5))
            assume(count == 0 or 0 <= min(start, start + (count - 1) * step) + off
                   and max(start, start + (count - 1) * step) + off < n)
            r.append((start + off, count, step))
    return tuple(shape), window, reads


def _index(box):
    out = []
    for start, count, step in box:
        stop = start + count * step
        out.append(slice(0, 0) if count == 0 else slice(start, stop if stop >= 0 else None, step))
    return tuple(out)


@settings(max_examples=60, deadline=None)
@given(a=assignments(), seed=st.integers(0, 2**16), special=values,
       combine=st.sampled_from(["add", "maximum", "mixed"]))
def test_shifted_assignments_match_numpy(a, seed, special, combine):
    shape, window, (r1, r2) = a
    w, i1, i2 = _index(window), _index(r1), _index(r2)

    def update(x):
        b = x * 1.5
        if combine == "add":
            b[w] = b[i1] + b[i2] * 0.5
        elif combine == "maximum":
            b[w] = np.maximum(b[w], b[i1] + 1.0)
        else:
            b[w] = b[w] - np.minimum(b[i1], b[i2])
        return b

    g = np.random.default_rng(seed)
    x = g.standard_normal(shape)
    if x.size:
        x.flat[g.integers(x.size)] = special
    with np.errstate(all="ignore"):
        assert_matches_numpy(update, x, calls=2)
