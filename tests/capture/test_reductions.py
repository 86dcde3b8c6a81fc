"""Reductions against numpy itself: sum prod max min amax amin all any (function
and method forms, ufunc.reduce), mean var std, argmax argmin, ptp, the
nan-functions, average and a logsumexp composition.

Every property compiles with `fullgraph=True`, so a graph break fails the test;
`assert_matches_numpy` checks type (numpy scalar vs array), dtype, shape,
values, NaN/Inf positions and mutation of the arguments, and that numpy's
exception type is raised when numpy raises. The numpy backend runs numpy's own
reductions on the same layouts, so results are compared exactly (the default
few-ULP tolerance of `assert_matches_numpy`, no extra rtol)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lowering
from lowering.capture.tracer import GraphBreakError
from lowering.testing import TOLERANCES, assert_matches_numpy

DEEP = os.environ.get("HYPOTHESIS_PROFILE") == "deep"


def examples(n: int):
    return settings(max_examples=n * (20 if DEEP else 1), deadline=None, derandomize=not DEEP,
                    suppress_health_check=list(HealthCheck))


F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I32, I64, B = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)
TIER1 = [F32, F64, I32, I64, B]
FLOATS = [F32, F64]


def specials(dt: np.dtype) -> list[float]:
    fi = np.finfo(dt)
    return [float(v) for v in (np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, fi.max, -fi.max,
                               fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal)]


def elements(dt: np.dtype, small: bool = False, no_negzero: bool = False):
    if dt.kind == "f":
        if small:  # integer-valued floats: sums are exact in any order
            return st.integers(-8, 8).map(float)
        sp = [v for v in specials(dt) if not (no_negzero and v == 0 and np.signbit(v))]
        return st.one_of(st.floats(-100, 100, width=dt.itemsize * 8).map(
                             lambda v: 0.0 if no_negzero and v == 0 else v),
                         st.sampled_from(sp),
                         st.floats(width=dt.itemsize * 8).map(
                             lambda v: 0.0 if no_negzero and v == 0 else v))
    if dt.kind == "i":
        if small:
            return st.integers(-8, 8)
        ii = np.iinfo(dt)
        return st.one_of(st.integers(-100, 100), st.sampled_from([ii.min, ii.max, 0, -1]),
                         st.integers(ii.min, ii.max))
    return st.booleans()


@st.composite
def arrays(draw, dtypes=TIER1, min_dims=0, max_dims=3, min_side=0, max_side=4, **kw):
    dt = np.dtype(draw(st.sampled_from(dtypes)))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                                  max_side=max_side))
    return draw(hnp.arrays(dt, shape, elements=elements(dt, **kw)))


LAYOUTS = st.sampled_from(["c", "T", "rev", "step"])


def lay(x, how: str):
    """A non-contiguous view, taken inside the compiled function."""
    if x.ndim == 0 or how == "c":
        return x
    return {"T": lambda: x.T, "rev": lambda: x[::-1], "step": lambda: x[::2]}[how]()


def axes(ndim: int):
    """None, an int (negative too) or a tuple of distinct axes; () for 0-d."""
    if ndim == 0:
        return st.sampled_from([None, ()])
    return st.one_of(
        st.none(),
        st.integers(-ndim, ndim - 1),
        st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim).flatmap(
            lambda ax: st.tuples(*[st.sampled_from([a, a - ndim]) for a in ax])),
    )


def check(fn, *args, fullgraph=True, **kw):
    return assert_matches_numpy(fn, *args, compiled=lowering.compile(fn, fullgraph=fullgraph),
                                **kw)


# ---- sum prod max min all any ---------------------------------------------------
@examples(60)
@given(arrays(), st.data(), st.sampled_from(["sum", "prod", "max", "min", "amax", "amin",
                                             "all", "any"]),
       st.booleans(), st.booleans(), LAYOUTS)
def test_basic_reductions(x, data, kind, keepdims, method, layout):
    ax = data.draw(axes(x.ndim), "axis")
    if method and kind not in ("amax", "amin"):
        fn = lambda a: getattr(lay(a, layout), kind)(axis=ax, keepdims=keepdims)
    else:
        fn = lambda a: getattr(np, kind)(lay(a, layout), axis=ax, keepdims=keepdims)
    check(fn, x)


@examples(30)
@given(arrays(), st.data(), st.sampled_from(["sum", "prod"]),
       st.sampled_from([None, F32, F64, I32, I64, B]))
def test_sum_prod_dtype(x, data, kind, dtype):
    ax = data.draw(axes(x.ndim), "axis")
    check(lambda a: getattr(np, kind)(a, axis=ax, dtype=dtype), x)


@examples(30)
@given(arrays(small=True), st.data(), st.sampled_from(["sum", "prod", "max", "min"]),
       st.sampled_from([2, -3, 0.5, 7.0, True]), st.booleans())
def test_initial(x, data, kind, initial, keepdims):
    # integer-valued floats: initial + sum is exact in any order; no ±0 ties
    ax = data.draw(axes(x.ndim), "axis")
    check(lambda a: getattr(np, kind)(a, axis=ax, initial=initial, keepdims=keepdims), x)


@examples(40)
@given(arrays(), st.data(),
       st.sampled_from([np.add, np.multiply, np.maximum, np.minimum, np.logical_and,
                        np.logical_or]),
       st.booleans())
def test_ufunc_reduce(x, data, uf, keepdims):
    kw = {}
    if data.draw(st.booleans(), "explicit axis"):
        kw["axis"] = data.draw(st.one_of(axes(x.ndim), st.sampled_from([0, -1])), "axis")
    if uf in (np.add, np.multiply) and data.draw(st.booleans(), "dtype"):
        kw["dtype"] = data.draw(st.sampled_from([F64, I64, I32]), "dtype value")
    check(lambda a: uf.reduce(a, keepdims=keepdims, **kw), x)


@examples(25)
@given(arrays(min_dims=1), st.sampled_from(["sum", "max", "any", "prod"]),
       st.sampled_from([F32, F64, I64, B]), st.booleans())
def test_reduction_out(x, kind, out_dtype, keepdims):
    shape = (1,) + x.shape[1:] if keepdims else x.shape[1:]
    out = np.full(shape, 7, dtype=out_dtype)

    def fn(a, o):
        r = getattr(np, kind)(a, axis=0, out=o, keepdims=keepdims)
        return r, o

    check(fn, x, out)


def test_out_is_returned_and_written():
    x = np.arange(12.0).reshape(3, 4)
    o = np.zeros(4)

    def fn(a, o):
        r = np.sum(a, axis=0, out=o)
        return r is o

    assert check(fn, x, o) is True
    cf = lowering.compile(lambda a, o: np.sum(a, axis=0, out=o), fullgraph=True)
    o2 = np.zeros(4)
    cf(x, o2)
    np.testing.assert_array_equal(o2, x.sum(axis=0))


# ---- mean var std ------------------------------------------------------------------
@examples(60)
@given(arrays(dtypes=TIER1 + [F16]), st.data(), st.sampled_from(["mean", "var", "std"]),
       st.booleans(), st.sampled_from([None, F32, F64]), LAYOUTS, st.booleans())
def test_mean_var_std(x, data, kind, keepdims, dtype, layout, method):
    ax = data.draw(axes(x.ndim), "axis")
    kw = {"axis": ax, "keepdims": keepdims, "dtype": dtype}
    if kind != "mean":
        kw["ddof"] = data.draw(st.sampled_from([0, 1, 2, 0.5]), "ddof")
    if method:
        fn = lambda a: getattr(lay(a, layout), kind)(**kw)
    else:
        fn = lambda a: getattr(np, kind)(lay(a, layout), **kw)
    check(fn, x)


@examples(25)
@given(arrays(min_dims=1, dtypes=TIER1 + [F16]), st.sampled_from(["mean", "var", "std"]),
       st.sampled_from([F16, F32, F64]))
def test_mean_var_std_out(x, kind, out_dtype):
    out = np.zeros(x.shape[1:], out_dtype)

    def fn(a, o):
        getattr(np, kind)(a, axis=0, out=o)
        return o

    check(fn, x, out)


@pytest.mark.parametrize("kind", ["var", "std"])
@pytest.mark.parametrize("dtype", [I64, I32])
def test_var_std_integer_dtype(kind, dtype):
    # numpy computes in the integer dtype (truncating divisions); std of an
    # ndarray result cannot write float sqrt back into int (UFuncTypeError)
    x = np.array([[1, 5, 9], [2, 7, 3]], np.int64)
    check(lambda a: getattr(np, kind)(a, dtype=dtype), x)
    check(lambda a: getattr(np, kind)(a, axis=0, dtype=dtype), x)


def test_correction_keyword():
    x = np.arange(10.0)
    check(lambda a: np.var(a, correction=1), x)
    check(lambda a: np.std(a, ddof=1, correction=1), x)  # ValueError in both


# ---- argmax argmin ---------------------------------------------------------------
@examples(50)
@given(arrays(), st.data(), st.sampled_from(["argmax", "argmin"]), st.booleans(), LAYOUTS,
       st.booleans())
def test_argreductions(x, data, kind, keepdims, layout, method):
    ax = data.draw(st.one_of(st.none(), st.integers(-max(x.ndim, 1), max(x.ndim, 1) - 1)),
                   "axis")
    if method:
        fn = lambda a: getattr(lay(a, layout), kind)(axis=ax, keepdims=keepdims)
    else:
        fn = lambda a: getattr(np, kind)(lay(a, layout), axis=ax, keepdims=keepdims)
    check(fn, x)


@pytest.mark.parametrize("out_dtype", [I64, I32, F64])
def test_argmax_out(out_dtype):
    x = np.array([[1.0, np.nan, 3.0], [4.0, 2.0, np.nan]])
    check(lambda a, o: (np.argmax(a, axis=1, out=o), o)[1], x, np.zeros(2, out_dtype))
    check(lambda a, o: (np.argmin(a, axis=0, out=o), o)[1], x, np.zeros(3, out_dtype))
    check(lambda a, o: (np.argmin(a, axis=0, out=o), o)[1], x, np.zeros(2, out_dtype))


def test_nan_wins_argmax_and_max():
    x = np.array([1.0, np.nan, 5.0, np.nan, -np.inf], np.float32)
    assert check(lambda a: np.argmax(a), x) == 1
    assert check(lambda a: np.argmin(a), x) == 1
    assert np.isnan(check(lambda a: np.max(a), x))
    assert np.isnan(check(lambda a: a.min(), x))


# ---- ptp, nan-functions, average ---------------------------------------------------
@examples(30)
@given(arrays(), st.data(), st.booleans())
def test_ptp(x, data, keepdims):
    ax = data.draw(axes(x.ndim), "axis")
    check(lambda a: np.ptp(a, axis=ax, keepdims=keepdims), x)


@examples(50)
@given(arrays(no_negzero=True), st.data(),
       st.sampled_from(["nansum", "nanprod", "nanmax", "nanmin", "nanmean"]), st.booleans(),
       st.floats(0, 1))
def test_nan_functions(x, data, kind, keepdims, nan_fraction):
    # -0.0 is left out: numpy's nanmax/nanmin run fmax/fmin.reduce, whose choice
    # between +0.0 and -0.0 on a tie is not max/min's (see the report of this change)
    if x.dtype.kind == "f" and x.size:
        mask = np.asarray(data.draw(hnp.arrays(B, x.shape), "nan mask"))
        if nan_fraction > 0.5:
            x = np.where(mask, np.nan, x).astype(x.dtype)
    ax = data.draw(axes(x.ndim), "axis")
    check(lambda a: getattr(np, kind)(a, axis=ax, keepdims=keepdims), x)


@pytest.mark.parametrize("kind", ["nanmax", "nanmin"])
def test_nanmax_all_nan_and_initial(kind):
    x = np.array([[np.nan, np.nan], [1.0, np.nan], [np.nan, -np.inf]])
    check(lambda a: getattr(np, kind)(a, axis=1), x)
    check(lambda a: getattr(np, kind)(a, axis=1, initial=0.5), x)
    check(lambda a: getattr(np, kind)(a[:0], axis=0), x)  # ValueError in both
    check(lambda a: getattr(np, kind)(a[:0], axis=0, initial=2.0), x)
    check(lambda a, o: (getattr(np, kind)(a, axis=0, out=o), o)[1], x, np.zeros(2))


@examples(30)
@given(arrays(dtypes=[F32, F64, I32, I64, B], min_dims=1, small=True), st.data(),
       st.booleans())
def test_average(x, data, returned):
    ax = data.draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)), "axis")
    check(lambda a: np.average(a, axis=ax, returned=returned), x)


@examples(25)
@given(arrays(dtypes=[F64, I64, F32], min_dims=2, max_dims=2, min_side=1, small=True),
       st.booleans(), st.sampled_from([F64, F32, I64]))
def test_average_weighted(x, full_weights, wdtype):
    rng = np.random.default_rng(x.size)
    if full_weights:
        w, ax = rng.integers(0, 3, x.shape).astype(wdtype), None
    else:
        w, ax = rng.integers(0, 3, x.shape[1]).astype(wdtype), 1
    # weights are an input: numpy's zero-sum check is a data-dependent branch,
    # one graph break (ZeroDivisionError when a weight sum is 0, as in numpy)
    fn = lambda a, w: np.average(a, axis=ax, weights=w, returned=True)
    cf = lowering.compile(fn)
    assert_matches_numpy(fn, x, w, compiled=cf)
    assert cf.last_trace is None or len(cf.last_trace.breaks) <= 1


def test_average_constant_weights_do_not_break():
    x = np.arange(12.0).reshape(3, 4)
    check(lambda a: np.average(a, axis=1, weights=[1.0, 2.0, 0.0, 1.0], returned=True), x)
    check(lambda a: np.average(a, axis=1, weights=[1.0, -1.0, 0.0, 0.0]), x)  # ZeroDivision


# ---- compositions, scalars, errors -------------------------------------------------
@examples(25)
@given(arrays(dtypes=FLOATS, min_dims=1, min_side=1), st.data())
def test_logsumexp(x, data):
    ax = data.draw(st.integers(-x.ndim, x.ndim - 1), "axis")

    def logsumexp(a):
        m = np.max(a, axis=ax, keepdims=True)
        return np.log(np.sum(np.exp(a - m), axis=ax, keepdims=True)) + m

    # log turns the sum's relative error into an absolute one: log(s(1 + d))
    # = log(s) + d, however small log(s) is (s = 1.22: log s = 0.2, so a
    # 1-ULP error in s is 5 ULPs of the result). The bound per element is
    # the op-class tolerance of exp, the n-term sum and log as an absolute
    # error, plus the usual relative one of the result.
    got = lowering.compile(logsumexp, fullgraph=True)(x.copy())
    with np.errstate(all="ignore"):
        want = logsumexp(x.copy())
    assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want))
    inf = np.isinf(want)
    assert np.array_equal(got[inf], want[inf])
    fin = np.isfinite(want)
    n = x.shape[ax]
    tol = TOLERANCES.rtol(x.dtype, "reduction", n + 2) + TOLERANCES.rtol(x.dtype) * np.abs(want)
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert np.all(err[fin] <= tol[fin]), (got, want)


def test_scalar_vs_array_results():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert type(check(lambda a: a.sum(), x)) is np.int64
    assert type(check(lambda a: a.sum(axis=(0, 1), keepdims=True), x)) is np.ndarray
    assert type(check(lambda a: np.mean(a), x)) is np.float64
    assert type(check(lambda a: np.sum(a[0, 0]), x)) is np.int64
    assert type(check(lambda a: np.add.reduce(np.sum(a), axis=0), x)) is np.int64
    assert type(check(lambda a: np.max(a, axis=()), x)) is np.ndarray
    assert type(check(lambda a, o: np.sum(a, out=o), x, np.zeros((), np.int64))) is np.ndarray


@pytest.mark.parametrize("fn", [
    lambda a: np.sum(a, axis=2),
    lambda a: np.sum(a, axis=(0, 0)),
    lambda a: np.sum(a, axis=(0, -2)),
    lambda a: np.sum(a, axis=[0]),
    lambda a: np.sum(a, axis=0.0),
    lambda a: np.mean(a, axis=[1]),
    lambda a: np.max(a, dtype=np.float32),
    lambda a: np.all(a, dtype=bool),
    lambda a: np.max(a[:, :0], axis=1),
    lambda a: np.max(a[:, :0], axis=0),
    lambda a: np.min(a[:0]),
    lambda a: np.argmax(a[:0]),
    lambda a: np.argmax(a[:0], axis=0),
    lambda a: np.argmax(a, axis=(0,)),
    lambda a: np.sum(a, axis=0, out=np.zeros((1, 3))),
    lambda a: np.sum(a.sum(), axis=0),
    lambda a: np.sum(a.sum(), axis=-1),
    lambda a: np.sum(a.sum(), axis=(0,)),
    lambda a: np.mean(a.sum(), axis=0),
    lambda a: np.argmax(a.sum(), axis=0),
    lambda a: np.argmax(a.sum(), axis=1),
    lambda a: np.ptp(a > 0),
    lambda a: np.add.reduce(a, axis=None),
    lambda a: np.std(a, axis=1, dtype=np.int64),
], ids=lambda f: "")
def test_errors_and_edge_axes_match_numpy(fn):
    check(fn, np.arange(6.0).reshape(2, 3))


def test_graph_breaks_are_reported():
    x = np.arange(6.0).reshape(2, 3)
    for fn, reason in [
        (lambda a: np.sum(a, where=a > 2), "where="),
        (lambda a: np.mean(a, axis=0, where=a > 2), "where="),
        (lambda a: np.var(a, mean=np.mean(a, keepdims=True)), "mean="),
        (lambda a: np.fmax.reduce(a), "fmax.reduce"),
    ]:
        cf = lowering.compile(fn)
        assert_matches_numpy(fn, x, compiled=cf)
        assert any(reason in b.reason for b in cf.last_trace.breaks), cf.last_trace.breaks
        with pytest.raises(GraphBreakError):
            lowering.compile(fn, fullgraph=True)(x)


# ---- the order numpy combines elements in -------------------------------------
OVERFLOWING = st.sampled_from([3.0e38, -3.0e38, 0.0, 1.5, -1.5, 2.0, np.inf])


@examples(40)
@given(st.sampled_from([F32, F64]), hnp.array_shapes(min_dims=2, max_dims=3, min_side=1,
                                                         max_side=3),
       st.sampled_from(["F", "T", "swap", "c"]), st.data())
def test_products_combine_in_numpys_order(dt, shape, layout, data):
    """numpy walks a reduction's axes in memory order (the largest stride
    outermost): over an F-ordered or transposed array, a partial product
    that overflows meets a zero (NaN) or not (0.0) by that order. The
    compiled reduction visits the reduced axes of an array of known layout in
    numpy's order, so NaN and ±Inf land where numpy's do. (A sum of 8 or more
    terms numpy adds pairwise, 8 partial sums at a time, which is not
    modelled: lowering/testing.py, "reassociated reductions".)"""
    big = (np.finfo(dt).max / 2) if dt == F64 else None
    vals = data.draw(hnp.arrays(dt, shape, elements=OVERFLOWING.map(
        lambda v: v if big is None or abs(v) != 3.0e38 else np.copysign(big, v))))
    x = {"F": np.asfortranarray(vals), "c": vals}.get(layout, vals)
    view = {"T": lambda a: a.T, "swap": lambda a: np.swapaxes(a, 0, -1)}.get(layout,
                                                                           lambda a: a)
    axis = data.draw(st.sampled_from([None, (0, 1), (-1, 0)]), "axis")

    def fn(a):
        return view(a).prod(axis=axis)

    with np.errstate(all="ignore"):
        check(fn, x)
