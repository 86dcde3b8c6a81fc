"""Scans (cumsum, cumprod, cumulative_sum/prod, add/multiply.accumulate) and
selection (where, clip, nan_to_num, select) against numpy itself.

Every property compiles with `fullgraph=True`, so a graph break fails the test.
Scans run numpy's own sequential cumsum/cumprod on the same layout and clip is
numpy's clip ufunc, so results are compared exactly (no extra rtol), signed
zeros and NaN included."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowering
from lowering.capture.tracer import GraphBreakError
from lowering.testing import assert_matches_numpy

DEEP = os.environ.get("HYPOTHESIS_PROFILE") == "deep"


def examples(n: int):
    return settings(max_examples=n * (20 if DEEP else 1), deadline=None, derandomize=not DEEP,
                    suppress_health_check=list(HealthCheck))


F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
I32, I64, B = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)
TIER1 = [F32, F64, I32, I64, B]


def elements(dt: np.dtype):
    if dt.kind == "f":
        fi = np.finfo(dt)
        sp = [float(v) for v in (np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, fi.max, -fi.max,
                                 fi.tiny, fi.smallest_subnormal)]
        return st.one_of(st.floats(-10, 10, width=dt.itemsize * 8), st.sampled_from(sp),
                         st.floats(width=dt.itemsize * 8))
    if dt.kind == "i":
        ii = np.iinfo(dt)
        return st.one_of(st.integers(-10, 10), st.sampled_from([ii.min, ii.max]),
                         st.integers(ii.min, ii.max))
    return st.booleans()


@st.composite
def arrays(draw, dtypes=TIER1, min_dims=0, max_dims=3, min_side=0, max_side=4, shape=None):
    dt = np.dtype(draw(st.sampled_from(dtypes)))
    if shape is None:
        shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                                      max_side=max_side))
    return draw(hnp.arrays(dt, shape, elements=elements(dt)))


LAYOUTS = st.sampled_from(["c", "T", "rev", "step"])


def lay(x, how: str):
    if x.ndim == 0 or how == "c":
        return x
    return {"T": lambda: x.T, "rev": lambda: x[::-1], "step": lambda: x[::2]}[how]()


def check(fn, *args, **kw):
    return assert_matches_numpy(fn, *args, compiled=lowering.compile(fn, fullgraph=True), **kw)


# ---- scans -------------------------------------------------------------------------
@examples(50)
@given(arrays(), st.data(), st.sampled_from(["cumsum", "cumprod"]),
       st.sampled_from([None, F32, F64, I32, I64]), LAYOUTS, st.booleans())
def test_cumsum_cumprod(x, data, kind, dtype, layout, method):
    nd = max(x.ndim, 1)
    ax = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1)), "axis")
    if method:
        fn = lambda a: getattr(lay(a, layout), kind)(axis=ax, dtype=dtype)
    else:
        fn = lambda a: getattr(np, kind)(lay(a, layout), axis=ax, dtype=dtype)
    check(fn, x)


@examples(30)
@given(arrays(min_dims=1), st.data(), st.sampled_from(["cumsum", "cumprod"]),
       st.sampled_from([F32, F64, I32, I64, B]))
def test_scan_out(x, data, kind, out_dtype):
    ax = data.draw(st.integers(-x.ndim, x.ndim - 1), "axis")
    out = np.zeros(x.shape, out_dtype)
    # numpy runs the scan in the loop for (out.dtype, x.dtype), then casts
    check(lambda a, o: (getattr(np, kind)(a, axis=ax, out=o), o)[1], x, out)


@examples(40)
@given(arrays(min_dims=1), st.data(),
       st.sampled_from([np.add, np.multiply, np.maximum, np.minimum]),
       st.sampled_from([None, F64, I32, I64]))
def test_ufunc_accumulate(x, data, uf, dtype):
    kw = {} if dtype is None else {"dtype": dtype}
    if data.draw(st.booleans(), "explicit axis"):
        kw["axis"] = data.draw(st.integers(-x.ndim, x.ndim - 1), "axis")
    check(lambda a: uf.accumulate(a, **kw), x)


@examples(25)
@given(arrays(min_dims=1, max_dims=2), st.data(), st.booleans(),
       st.sampled_from(["cumulative_sum", "cumulative_prod"]))
def test_cumulative(x, data, include_initial, kind):
    ax = data.draw(st.integers(-x.ndim, x.ndim - 1), "axis") if x.ndim > 1 else None
    check(lambda a: getattr(np, kind)(a, axis=ax, include_initial=include_initial), x)


@pytest.mark.parametrize("fn", [
    lambda a: np.cumsum(a.sum()),
    lambda a: np.cumsum(a.sum(), axis=0),
    lambda a: np.cumsum(a.sum(), axis=1),
    lambda a: np.cumsum(a, axis=2),
    lambda a: np.add.accumulate(a.sum()),
    lambda a: np.add.accumulate(a, axis=None),
    lambda a: np.add.accumulate(a, axis=(0,)),
    lambda a: np.add.accumulate(a, axis=(0, 1)),
    lambda a: np.cumsum(a, axis=0, out=np.zeros((3, 2))),
    lambda a: np.cumulative_sum(a),
    lambda a: np.cumulative_sum(a.sum()),
], ids=lambda f: "")
def test_scan_errors_and_edges_match_numpy(fn):
    check(fn, np.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("uf", [np.maximum, np.minimum])
def test_max_min_accumulate_compile_whole_and_propagate_nan(uf):
    x = np.array([3.0, 1.0, np.nan, 5.0, -0.0, 0.0])
    fn = lambda a: uf.accumulate(a)
    cf = lowering.compile(fn, fullgraph=True)
    assert_matches_numpy(fn, x, compiled=cf)
    assert not cf.last_trace.breaks
    y = np.array([[2, 7, 1], [5, 0, 9]], np.int32)  # int32 stays int32 (no widening)
    assert_matches_numpy(lambda a: uf.accumulate(a, axis=1), y)
    assert_matches_numpy(lambda a: uf.accumulate(a > 3), y)


def test_other_accumulates_graph_break_but_match():
    x = np.array([3.0, 1.0, np.nan, 5.0])
    fn = lambda a: np.fmax.accumulate(a)
    cf = lowering.compile(fn)
    assert_matches_numpy(fn, x, compiled=cf)
    assert any("fmax.accumulate" in b.reason for b in cf.last_trace.breaks)
    with pytest.raises(GraphBreakError):
        lowering.compile(fn, fullgraph=True)(x)


# ---- where -------------------------------------------------------------------------
@st.composite
def broadcastable(draw, n):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=n, min_dims=0, max_dims=3,
                                                    max_side=3))
    return shapes.input_shapes


@examples(50)
@given(st.data())
def test_where(data):
    sc, sa, sb = data.draw(broadcastable(3))
    c = data.draw(arrays(shape=sc, dtypes=[B, F64, I32]))
    a = data.draw(st.one_of(arrays(shape=sa), st.sampled_from([2, -1.5, True, 2**40])))
    b = data.draw(st.one_of(arrays(shape=sb), st.sampled_from([0, 0.5, False, np.nan])))
    check(lambda c, a, b: np.where(c, a, b), c, a, b)
    if isinstance(a, np.ndarray):
        check(lambda c, a: np.where(c, a, b), c, a)  # b as a Python scalar (NEP 50: weak)


def test_where_weak_scalar_inputs():
    x = np.arange(4, dtype=np.float32)
    check(lambda c, a, s: np.where(c, a, s), x > 1, x, 2.5)  # a float argument stays weak
    check(lambda c, a: np.where(c, a, 2**40), x > 1, x)
    check(lambda a: np.where(a > 1, 1, 2.0), x)
    check(lambda a: np.where(True, a[0], 0), x)  # 0-d array result, not a scalar


# ---- clip ----------------------------------------------------------------------------
@examples(60)
@given(st.data(), LAYOUTS)
def test_clip(data, layout):
    sx, slo, shi = data.draw(broadcastable(3))
    x = data.draw(arrays(shape=sx))
    bound = st.one_of(st.none(), arrays(shape=slo, dtypes=[F32, F64, I32, I64]),
                      st.sampled_from([0, -1, 2.5, -0.0, 0.0, np.nan, 2**40, -2**40, True]))
    lo = data.draw(bound, "lo")
    hi = data.draw(st.one_of(st.none(), arrays(shape=shi, dtypes=[F32, F64, I32]),
                             st.sampled_from([1, 3.5, 0.0, -0.0, np.nan, 2**31])), "hi")
    if x.ndim and layout != "c" and isinstance(lo, np.ndarray) and lo.ndim:
        layout = "c"  # keep the bounds' broadcasting valid
    check(lambda a, lo, hi: np.clip(lay(a, layout), lo, hi), x, lo, hi)
    check(lambda a: lay(a, layout).clip(lo, hi), x)


@examples(25)
@given(arrays(min_dims=1, dtypes=[F32, F64, I64]), st.sampled_from([F32, F64, I64, I32]))
def test_clip_out(x, out_dtype):
    out = np.zeros(x.shape, out_dtype)
    # numpy's same_kind casting into out: float into int raises in both
    check(lambda a, o: (np.clip(a, -1, 1, out=o), o)[1], x, out)
    check(lambda a: (np.clip(a, -1, 1, out=a), a)[1], x)


def test_clip_signed_zeros_and_nan():
    x = np.array([-0.0, 0.0, np.nan, -1.0, 5.0] * 5)
    for lo, hi in [(0.0, 1.0), (-0.0, 1.0), (np.nan, 1.0), (0.0, np.nan), (2.0, 1.0)]:
        check(lambda a, lo=lo, hi=hi: np.clip(a, lo, hi), x)
        check(lambda a, lo_arr, hi=hi: np.clip(a, lo_arr, hi), x, np.full(x.shape, lo))
    check(lambda a: np.clip(a, min=0.0), x)
    check(lambda a: np.clip(a, max=0.0), x)
    check(lambda a: np.clip(a), x)
    check(lambda a: np.clip(a, 0.0), x)  # TypeError: a_max missing
    check(lambda a: np.clip(a, 0.0, 1.0, min=0.0), x)  # ValueError
    check(lambda a: np.clip(a > 0, False, True), x)
    check(lambda a: np.clip(a, 0, 1, dtype=np.float32), x)


# ---- nan_to_num -------------------------------------------------------------------------
@examples(40)
@given(arrays(), st.sampled_from([0.0, -1.0, 1e300, np.nan]),
       st.sampled_from([None, 9.0, -0.0, 1e40]), st.sampled_from([None, -9.0, 0.0]),
       LAYOUTS)
def test_nan_to_num(x, nan, posinf, neginf, layout):
    check(lambda a: np.nan_to_num(lay(a, layout), nan=nan, posinf=posinf, neginf=neginf), x)


@examples(25)
@given(arrays(min_dims=1))
def test_nan_to_num_in_place(x):
    def fn(a):
        r = np.nan_to_num(a, copy=False, posinf=7.0)
        return r

    check(fn, x)  # the argument is rewritten in place, as numpy does

    def through_view(a):
        np.nan_to_num(a[::2], copy=False)
        return a

    check(through_view, x)


def test_nan_to_num_scalars():
    x = np.array([np.nan, np.inf, -np.inf, 1.0])
    assert type(check(lambda a: np.nan_to_num(a[0]), x)) is np.float64
    assert type(check(lambda a: np.nan_to_num(np.sum(a[:1])), x)) is np.float64
    check(lambda a: np.nan_to_num(a.sum(), copy=False), x)  # ValueError: scalar, no copy
    check(lambda a, s: np.nan_to_num(s), x, float("nan"))
    check(lambda a, s: np.nan_to_num(s, copy=False), x, float("inf"))  # ValueError


# ---- select -------------------------------------------------------------------------------
@examples(40)
@given(st.data(), st.integers(1, 3))
def test_select(data, n):
    shapes = data.draw(broadcastable(2 * n + 1))
    conds = [data.draw(arrays(shape=s, dtypes=[B])) for s in shapes[:n]]
    choices = [data.draw(st.one_of(arrays(shape=s), st.sampled_from([1, -2.5, True, 2**40])))
               for s in shapes[n:2 * n]]
    default = data.draw(st.one_of(arrays(shape=shapes[-1]), st.sampled_from([0, np.nan, 7])))
    check(lambda *xs: np.select(list(xs[:n]), list(xs[n:2 * n]), default=xs[-1]),
          *conds, *choices, default)
    check(lambda *cs: np.select(list(cs), choices, default), *conds)  # closed-over choices


def test_select_from_traced_conditions_and_errors():
    x = np.linspace(-2, 2, 9)
    check(lambda a: np.select([a < -1, a > 1], [a * 10, a * 100], default=a), x)
    check(lambda a: np.select([a < 0], [a], default=np.nan), x.astype(np.float32))
    check(lambda a: np.select([a], [a]), x)  # TypeError: condition not boolean
    check(lambda a: np.select([a > 0], [a, a]), x)  # ValueError: lengths differ
    check(lambda a: np.select([], []), x)  # ValueError: empty
    check(lambda a: np.select([a > 0], [a.astype(np.int32)], default=0), x)
    assert type(check(lambda a: np.select([a[0] > 0], [1]), x)) is np.ndarray
