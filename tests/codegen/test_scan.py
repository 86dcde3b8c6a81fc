"""Scans (`cumsum`, `cumprod`, `maximum/minimum.accumulate`) generated as kernels: numpy's `accumulate`
order, so the values are numpy's bit for bit (NaN, ±Inf, -0.0 and integer
wrap-around included), on any layout and axis."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import lowering
from lowering.testing import array_shapes, arrays, dtypes


def scan_kernels(fn, *args) -> list[str]:
    ks = lowering.explain(lowering.compile(fn))(*args).kernels
    return [name for graph in ks for name, _ in graph]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_scans_match_numpy_bitwise(data):
    x = data.draw(arrays(dtypes(), array_shapes(min_dims=1, max_dims=3, max_side=9)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    kind = data.draw(st.sampled_from([np.cumsum, np.cumprod, np.maximum.accumulate,
                                       np.minimum.accumulate]))
    fused = data.draw(st.booleans())  # the scanned value computed in the kernel

    def f(x):
        y = (x * 3 if x.dtype != np.bool_ else ~x) if fused else x
        return kind(y, axis=axis, dtype=x.dtype)

    with np.errstate(all="ignore"):
        want = f(x)
        got = lowering.compile(f)(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if x.dtype.kind == "f":  # signed zeros too
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_scans_are_kernels():
    x = np.ones((6, 5), np.float32)
    for axis in (0, 1):
        for scan in (np.cumsum, np.maximum.accumulate):
            names = scan_kernels(lambda x: scan(x * 2, axis=axis) + 1, x)
            assert not any(n.startswith("extern") for n in names), names
    # default dtype: int32 sums in int64, as numpy does
    i = np.arange(12, dtype=np.int32).reshape(3, 4)
    got = lowering.compile(lambda i: np.cumsum(i, axis=1))(i)
    assert got.dtype == np.cumsum(i, axis=1).dtype
    np.testing.assert_array_equal(got, np.cumsum(i, axis=1))


def test_long_float32_scan_rounds_as_numpy():
    """A million float32 terms: every partial sum rounded in turn, not summed
    pairwise (the error grows; numpy's does the same)."""
    x = np.random.default_rng(0).uniform(0, 1, 1 << 20).astype(np.float32)
    np.testing.assert_array_equal(lowering.compile(np.cumsum)(x), np.cumsum(x))


def test_a_last_axis_scan_carries_the_previous_point():
    """Along the last axis each point is one element, the one the point before
    stored: the loop level marks that load `previous_point` (the CPU emitter
    carries the value in a register); down the rows (axis 0) it stays a load
    of the previous row."""
    from tests.codegen.test_shared_rows import loop_text

    last = loop_text(lambda x: np.cumsum(x, axis=1), "f64[6,50]")
    assert last.count("previous_point") == 1
    first = loop_text(lambda x: np.cumsum(x, axis=0), "f64[6,50]")
    assert "previous_point" not in first


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_carried_scans_over_sizes_known_at_the_launch(data):
    """One program for every size (dynamic): the carried value starts at each
    launch's first point; numpy's values bit for bit."""
    kind = data.draw(st.sampled_from([np.cumsum, np.cumprod, np.maximum.accumulate]))
    dt = data.draw(st.sampled_from([np.float32, np.float64, np.int64]))

    def f(x):
        return kind(x, axis=-1)

    g = lowering.compile(f, dynamic=True)
    for rows, n in data.draw(st.lists(st.tuples(st.integers(2, 5), st.integers(2, 300)),
                                      min_size=2, max_size=4)):
        x = data.draw(arrays(dt, (rows, n), layout="C"))
        with np.errstate(all="ignore"):
            want = f(x)
            got = g(x)
        np.testing.assert_array_equal(got, want)


def test_a_one_dim_scan_indexes_its_points_without_a_division():
    """A kernel's point is split into its parallel coordinates by remainder
    and quotient per dim; the outermost coordinate is what is left (a point
    is below the product of the extents), so a 1-D scan, whose points run
    one at a time, does no division per element (an int64
    `minimum.accumulate` of 10001 elements spent more on `urem` than on its
    own work). A 2-D kernel still splits its inner coordinate."""
    from lowering.testing import stage_text

    one = stage_text(lambda x: np.minimum.accumulate(x), "i64[10001]", "llvm")
    assert "urem" not in one and "udiv" not in one, one
    two = stage_text(lambda x: np.cumsum(x * 2, axis=1), "f64[6,50]", "llvm")
    assert "urem" in two
    x = np.random.default_rng(0).integers(-50, 50, 10001)
    np.testing.assert_array_equal(lowering.compile(lambda x: np.minimum.accumulate(x))(x),
                                  np.minimum.accumulate(x))
