"""Scans: cumsum, cumprod, cumulative_sum/prod, add/multiply/maximum/minimum.accumulate, all on
`array.scan`. numpy decides the dtype (int32/bool widen to int64 like sum) by
running the same scan on a one-element dummy; `out=` must have exactly the
result shape and takes an unsafe cast, as in numpy."""

from __future__ import annotations

import numpy as np

from ..registry import rule, ufunc_method
from ..traced import TracedArray
from ..tracer import Unsupported
from .common import check_out, normalize_axis, static_int
from .reductions import finish, strong

_KIND = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}


def _raw_out(out):
    return out[0] if isinstance(out, tuple) and len(out) == 1 else out


def _check_scan_out(out, shape):
    o = _raw_out(out)
    if isinstance(o, (TracedArray, np.ndarray)) and tuple(o.shape) != tuple(shape):
        raise ValueError("provided out is the wrong size for the accumulation.")
    return check_out(out)


def scan(tr, x: TracedArray, kind: str, ax: int, res_dt: np.dtype, out):
    p = tr.prims
    out = _check_scan_out(out, x.shape)
    v = p.cast(x._v(), res_dt)
    if x.size:
        v = p.scan(v, kind, ax)
    return finish(tr, v, out, scalar_ok=False)


def _scan_dtype(uf, x, dtype, out, oracle):
    """numpy's loop dtype: `dtype=`; else with `out=` the ufunc loop for
    (out.dtype, x.dtype) (numpy promotes with out's dtype); else the scan's
    default (int32/bool widen to int64, like sum)."""
    o = _raw_out(out)
    if dtype is None and isinstance(o, (TracedArray, np.ndarray)):
        return uf.resolve_dtypes((o.dtype, x.dtype, None))[-1]
    return oracle(np.zeros((1,), x.dtype), dtype=dtype).dtype


def _cum(tr, a, kind, axis, dtype, out, oracle):
    x = strong(tr, a)
    uf = np.add if kind == "sum" else np.multiply
    res_dt = _scan_dtype(uf, x, dtype, out, oracle)
    if axis is None or x.ndim == 0:
        if axis is not None:
            normalize_axis(_axis_int(axis), 1)
        x = tr.wrap(tr.prims.reshape(x._v(), (x.size,)))
        ax = 0
    else:
        ax = normalize_axis(_axis_int(axis), x.ndim)
    return scan(tr, x, kind, ax, res_dt, out)


def _axis_int(axis):
    if isinstance(axis, TracedArray):
        raise Unsupported("axis must be static")
    return static_int(axis, "axis")


@rule(np.cumsum)
def cumsum(tr, a, axis=None, dtype=None, out=None):
    return _cum(tr, a, "sum", axis, dtype, out, np.cumsum)


@rule(np.cumprod)
def cumprod(tr, a, axis=None, dtype=None, out=None):
    return _cum(tr, a, "prod", axis, dtype, out, np.cumprod)


def _cumulative(tr, x, kind, axis, dtype, out, include_initial, fn):
    x = strong(tr, x)
    if x.ndim == 0:  # numpy: x = np.atleast_1d(x)
        x = tr.wrap(tr.prims.reshape(x._v(), (1,)))
    if axis is None:
        if x.ndim > 1:
            raise ValueError("For arrays which have more than one dimension ``axis`` "
                             "argument is required.")
        axis = 0
    ax = normalize_axis(_axis_int(axis), x.ndim)
    res_dt = _scan_dtype(np.add if kind == "sum" else np.multiply, x, dtype, out, fn)
    if not include_initial:
        return scan(tr, x, kind, ax, res_dt, out)
    p = tr.prims
    shape = list(x.shape)
    shape[ax] += 1
    out = _check_scan_out(out, tuple(shape))
    v = p.cast(x._v(), res_dt)
    if x.size:
        v = p.scan(v, kind, ax)
    first = list(x.shape)
    first[ax] = 1
    init = p.broadcast(p.constant(0 if kind == "sum" else 1, res_dt), tuple(first))
    return finish(tr, p.concat([init, v], ax), out, scalar_ok=False)


if hasattr(np, "cumulative_sum"):
    @rule(np.cumulative_sum)
    def cumulative_sum(tr, x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        return _cumulative(tr, x, "sum", axis, dtype, out, include_initial, np.cumulative_sum)

    @rule(np.cumulative_prod)
    def cumulative_prod(tr, x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        return _cumulative(tr, x, "prod", axis, dtype, out, include_initial,
                           np.cumulative_prod)


@ufunc_method("accumulate")
def accumulate(tr, ufunc, array, axis=0, dtype=None, out=None):
    kind = _KIND.get(ufunc.__name__)
    if kind is None:
        raise Unsupported(f"{ufunc.__name__}.accumulate")
    x = strong(tr, array)
    if x.ndim == 0:
        raise TypeError("cannot accumulate on a scalar")
    if axis is None:
        raise ValueError("accumulate does not allow multiple axes")
    if isinstance(axis, tuple):
        if len(axis) != 1:
            raise ValueError("accumulate does not allow multiple axes")
        axis = axis[0]
    ax = normalize_axis(_axis_int(axis), x.ndim)
    res_dt = _scan_dtype(ufunc, x, dtype, out, ufunc.accumulate)
    return scan(tr, x, kind, ax, res_dt, out)
