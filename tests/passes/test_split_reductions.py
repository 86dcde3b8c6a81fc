"""Full reductions split across threads (`schedule.split_reductions`) and
point-wise producers run inside the reduction that reads them
(`fuse_into_reductions`, `drop_dead_stores`): the results are numpy's.

The split changes the order of a sum (chunk by chunk, then the chunks'
totals): results are compared within the reduction tolerance of
lowering.testing; max and min, NaN included, are exact. The parallel
threshold is lowered for these tests so that arrays of a few hundred
elements split, as a big one does at the default threshold."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowering
from lowering.backends.cpu_backend import KernelStep
from lowering.pipeline import clear_programs
from lowering.testing import TOLERANCES, assert_same_value, edge_values
from runtime import cpu

THRESHOLD = 64


@pytest.fixture
def low_threshold(monkeypatch):
    monkeypatch.setattr(cpu, "PARALLEL_THRESHOLD", THRESHOLD)
    clear_programs()
    yield
    clear_programs()


def _threads(cf) -> list[int]:
    return [s.threads for p in cf.programs_run for s in getattr(p, "steps", ())
            if isinstance(s, KernelStep)]


def _values(dtype, finite: bool, positive: bool):
    lo = 0.0 if positive else -1e3
    elems = st.floats(lo, 1e3, width=np.dtype(dtype).itemsize * 8)
    if not finite:
        edges = [v for v in edge_values(dtype) if not positive or not (v < 0)]
        elems = st.one_of(elems, st.sampled_from(edges))
    return elems


def _vec(dtype, finite=False, positive=False, min_size=THRESHOLD, max_size=600):
    return hnp.arrays(dtype, st.integers(min_size, max_size),
                      elements=_values(dtype, finite, positive))


SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(x=_vec(np.float64, positive=True))
def test_sum_and_mean_of_a_point_wise_expression(low_threshold, x):
    def f(x):
        y = np.sqrt(x) * 2.0 + 1.0
        return y.sum(), y.mean()

    cf = lowering.compile(f, backend="cpu")
    got, want = cf(x.copy()), f(x.copy())
    n = x.size
    assert_same_value(got, want, TOLERANCES.rtol(np.float64, "reduction", n))
    if cpu.THREADS > 1 and n % 2 == 0 and np.isfinite(x).all():
        assert max(_threads(cf)) > 1  # the reduction ran on more than one thread


@SETTINGS
@given(x=_vec(np.float32), dtype=st.sampled_from([np.float32, np.float64]))
def test_max_and_min_are_exact_with_nan_and_infinities(low_threshold, x, dtype):
    x = x.astype(dtype)

    def f(x):
        return (x * 3.0).max(), np.min(x - 1.0)

    got = lowering.compile(f, backend="cpu")(x.copy())
    with np.errstate(all="ignore"):
        want = f(x.copy())
    assert_same_value(got, want, 0.0)


def _ints(dtype):
    info = np.iinfo(dtype)
    elems = st.one_of(st.integers(-1000, 1000), st.sampled_from([info.min, info.max, 0, -1]))
    return hnp.arrays(dtype, st.integers(THRESHOLD, 600), elements=elems)


@SETTINGS
@given(x=_ints(np.int64), y=_ints(np.int32))
def test_integer_sums_are_exact(low_threshold, x, y):
    """(wrapping around as numpy's do: the same in any order)"""
    def f(x, y):
        return (x * 3).sum(), (y + 1).sum(), (x % 7).max()

    assert_same_value(lowering.compile(f, backend="cpu")(x, y), f(x, y), 0.0)


@SETTINGS
@given(x=_vec(np.float64, finite=True, positive=True, max_size=300))
def test_product_within_the_reduction_tolerance(low_threshold, x):
    def f(x):
        return np.prod(1.0 + x * 1e-4)

    assert_same_value(lowering.compile(f, backend="cpu")(x), f(x),
                      TOLERANCES.rtol(np.float64, "reduction", x.size))


@SETTINGS
@given(x=_vec(np.float64))
def test_values_stored_inside_the_reduction_land_at_their_own_index(low_threshold, x):
    """The payoff pattern: an array returned and reduced in one kernel; split,
    each chunk stores its own elements."""
    def f(x):
        p = np.maximum(x - 1.0, 0.0) * 0.5
        return p, p.sum()

    got_p, got_s = lowering.compile(f, backend="cpu")(x.copy())
    with np.errstate(all="ignore"):
        want_p, want_s = f(x.copy())
    assert_same_value(got_p, want_p, 0.0)
    assert_same_value(got_s, want_s, TOLERANCES.rtol(np.float64, "reduction", x.size))


@SETTINGS
@given(steps=st.integers(1, 6), paths=st.integers(THRESHOLD // 2, 400),
       seed=st.integers(0, 2**32 - 1))
def test_a_time_loop_feeding_mean_and_std(low_threshold, steps, paths, seed):
    """Monte Carlo paths: each step's state read by the next step and by the
    running total; the total's mean and std. The loop runs inside the
    reduction, no buffer per step."""
    z = np.random.default_rng(seed).standard_normal((steps, paths))

    def f(z, s0):
        s = np.full(z.shape[1], s0)
        total = np.zeros(z.shape[1])
        for t in range(z.shape[0]):
            s = s * np.exp(0.01 + 0.2 * z[t])
            total += s
        pay = np.maximum(total / z.shape[0] - 100.0, 0.0)
        return pay.mean(), pay.std() / math.sqrt(z.shape[1])

    got = lowering.compile(f, backend="cpu")(z, 100.0)
    want = f(z, 100.0)
    # (a sum of `paths` non-negative terms; the std's from two such sums)
    assert_same_value(got, want, TOLERANCES.rtol(np.float64, "reduction", 4 * paths))


def test_the_loop_states_are_not_stored(low_threshold):
    """The kernel level of the time loop: one kernel computes the states and
    the reduction, with no buffer of the paths' size left but the input."""
    import io

    from lowering.dump import capture, parse_spec, print_lower_stages

    def f(z):
        s = np.ones(z.shape[1])
        total = np.zeros(z.shape[1])
        for t in range(z.shape[0]):
            s = s * np.exp(z[t])
            total += s
        return total.mean()

    out = io.StringIO()
    print_lower_stages(capture(f, parse_spec("f64[3,512]")), out, ("kernel",))
    text = out.getvalue()
    assert "memref<512xf64>" not in text.replace("memref<3x512xf64>", "")
    assert text.count("math.exp") == 3
