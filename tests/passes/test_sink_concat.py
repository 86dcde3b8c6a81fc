"""`sink-concat`: an element-wise op over a concatenation (`np.roll`,
`np.concatenate`) is computed piece by piece, one fused kernel per piece
writing its window of the result, with numpy's values: nothing copied into
a concatenation's buffer only to be read back, nothing computed twice."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.dump import capture, parse_spec, print_lower_stages
from lowering.testing import arrays, array_shapes, assert_matches_numpy
from passes.sink_concat import MAX_PIECES


def loop_text(fn, spec: str) -> str:
    out = io.StringIO()
    print_lower_stages(capture(fn, parse_spec(spec)), out, ("loop",))
    return out.getvalue()


def sw_step(eta, u, v):
    c_u, c_eta = 9.81 * 0.002, 100.0 * 0.002
    u = u - c_u * (np.roll(eta, -1, axis=1) - eta)
    v = v - c_u * (np.roll(eta, -1, axis=0) - eta)
    eta = eta - c_eta * (u - np.roll(u, 1, axis=1) + v - np.roll(v, 1, axis=0))
    return eta, u, v


def sw_steps(eta, u, v):
    for _ in range(3):
        eta, u, v = sw_step(eta, u, v)
    return eta, u, v


def test_a_shallow_water_step_is_one_kernel_per_piece():
    """u and v: two pieces each (the roll's), eta: four (two rolls along
    two axes, nested, written into one buffer). Without the pass: a kernel
    per piece of each roll, its buffer, and a kernel reading it (14)."""
    text = loop_text(sw_step, "f64[16,12] f64[16,12] f64[16,12]")
    assert text.count("loop.kernel") == 8, text
    # every kernel computes: none only copies a piece into a buffer
    kernels = text.split("loop.kernel")[1:]
    assert all("arith.subf" in k for k in kernels), text
    g = np.random.default_rng(0)
    args = [g.standard_normal((16, 12)) for _ in range(3)]
    assert_matches_numpy(sw_step, *args, calls=2)


def test_steps_chain_without_copies_and_match_numpy_with_nan_and_inf():
    """Across steps each field is read where it lies (a concatenation read
    twice keeps its buffer, its pieces computed once into it)."""
    text = loop_text(sw_steps, "f64[9,7] f64[9,7] f64[9,7]")
    assert text.count("loop.kernel") == 3 * 8, text
    g = np.random.default_rng(1)
    args = [g.standard_normal((9, 7)) for _ in range(3)]
    args[0][2, 3], args[1][0, 6], args[2][8, 0] = np.nan, np.inf, -np.inf
    args[0][8, 6] = -0.0
    assert_matches_numpy(sw_steps, *args, calls=2)


def test_a_value_read_by_the_pieces_and_elsewhere_is_computed_once():
    def f(x):
        r = np.roll(x, 1, axis=0) * 3.0  # two pieces, read twice below
        return r + 1.0, r - np.roll(r, 2, axis=0)

    text = loop_text(f, "f32[10,4]")
    assert text.count("arith.mulf") == 2, text  # one per piece of r, none again
    assert_matches_numpy(f, np.arange(40, dtype=np.float32).reshape(10, 4), calls=2)


def test_pieces_are_bounded():
    """A sum of many rolls would split into the product of their pieces:
    at most MAX_PIECES kernels write a concatenation made by splitting."""
    def f(x):
        return sum(np.roll(x, k, axis=k % 2) for k in range(1, 7))

    text = loop_text(f, "f64[12,10]")
    assert text.count("loop.kernel") <= 6 * MAX_PIECES, text
    g = np.random.default_rng(2)
    assert_matches_numpy(f, g.standard_normal((12, 10)), calls=2)


def test_half_on_the_cpu_is_left_whole_and_matches():
    """float16's concatenation is numpy's on the CPU: nothing split."""
    def f(x):
        return np.roll(x, 1, axis=1) * np.float16(2) - x

    text = loop_text(f, "f16[6,5]")
    assert "array.concat" in text
    assert_matches_numpy(f, np.linspace(-3, 3, 30, dtype=np.float16).reshape(6, 5))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_rolled_expressions_match_numpy(data):
    """Rolls (any shift, either axis, sizes 0 and 1 included) under element-wise
    ops with a broadcast operand, on values with NaN, ±Inf, -0.0, subnormals
    and huge magnitudes, in any layout: the exact values numpy gives."""
    shape = data.draw(array_shapes(min_dims=2, max_dims=2, max_side=5), label="shape")
    dt = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    x = data.draw(arrays(dt, shape), label="x")
    y = data.draw(arrays(dt, shape), label="y")
    w = data.draw(arrays(dt, shape[1:]), label="w")
    s1, s2 = data.draw(st.integers(-6, 6)), data.draw(st.integers(-6, 6))
    a1, a2 = data.draw(st.integers(0, 1)), data.draw(st.integers(0, 1))
    cat_axis = data.draw(st.integers(0, 1))

    def f(x, y, w):
        r = (np.roll(x, s1, axis=a1) - y) * w
        c = np.concatenate([r[:1], r[1:]], axis=cat_axis) if 0 not in r.shape else r
        return c + np.roll(y, s2, axis=a2) * x, np.maximum(np.roll(r, s2, axis=a2), x)

    assert_matches_numpy(f, x, y, w, compiled=lowering.compile(f))


@pytest.mark.parametrize("axis", [0, 1])
def test_a_concatenate_of_computed_pieces_is_written_in_place(axis):
    """`np.concatenate` of two expressions read only by an element-wise op:
    the op moves into each piece's kernel (two kernels, no copy)."""
    def f(a, b, y):
        return np.concatenate([np.exp(a), b * 2.0], axis=axis) - y

    shape_b = "f64[3,5]" if axis == 0 else "f64[4,2]"
    shape_y = "f64[7,5]" if axis == 0 else "f64[4,7]"
    text = loop_text(f, f"f64[4,5] {shape_b} {shape_y}")
    assert text.count("loop.kernel") == 2, text
    assert text.count("math.exp") == 1, text
    g = np.random.default_rng(3)
    b = g.standard_normal((3, 5) if axis == 0 else (4, 2))
    y = g.standard_normal((7, 5) if axis == 0 else (4, 7))
    assert_matches_numpy(f, g.standard_normal((4, 5)), b, y, calls=2)
