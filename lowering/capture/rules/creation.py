"""Array creation inside a traced function.

`np.zeros(shape)`, `np.arange(n)`, `np.eye(n)` with static arguments are
made by `capture/conversions.py` as traced constants from birth (so writes
into them are captured). What reaches these rules: `*_like` of traced arrays,
`np.full` with a traced fill value, `linspace` with traced endpoints, and the
creation functions called with `like=` a traced array. Errors are numpy's
own, raised by numpy."""

from __future__ import annotations

import numpy as np

from dialects.dtypes import kind as dtype_kind
from dialects.symbols import broadcast_shapes

from ..registry import rule
from ..traced import TracedArray
from ..tracer import Unsupported
from .common import static_int, static_shape


def _fill(tr, value, dtype: np.dtype, shape: tuple[int, ...]) -> TracedArray:
    """A new array of `shape` filled with `value` converted as numpy's copyto
    (casting="unsafe") converts it; a traced value is broadcast."""
    p = tr.prims
    if isinstance(value, TracedArray):
        if broadcast_shapes(value.shape, shape) != tuple(shape):
            np.full(tuple(shape), np.zeros(value.shape, dtype))  # numpy's own error
        return tr.wrap(p.broadcast(p.cast(value._v(), dtype), shape))
    arr = np.asarray(value)
    if arr.ndim:  # an array fill (numpy broadcasts it): numpy builds it
        return tr.lift(np.full(shape, value, dtype=dtype))
    c = p.constant(np.array(value).astype(dtype)[()] if arr.dtype != object else value, dtype)
    return tr.wrap(p.broadcast(c, tuple(shape)) if shape else c)


def _like(tr, a, fill, dtype, shape):
    x = tr.lift(a)
    dt = np.dtype(dtype) if dtype is not None else x.dtype
    shp = x.shape if shape is None else static_shape(shape)
    from dialects.dtypes import supported

    if not supported(dt):
        raise Unsupported(f"arrays of dtype {dt}")
    return _fill(tr, fill, dt, shp)


@rule(np.zeros_like)
def zeros_like(tr, a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(tr, a, 0, dtype, shape)


@rule(np.ones_like)
def ones_like(tr, a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(tr, a, 1, dtype, shape)


@rule(np.empty_like)
def empty_like(tr, a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(tr, a, 0, dtype, shape)  # any contents are numpy's; zeros are cheapest


@rule(np.full_like)
def full_like(tr, a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    if not isinstance(fill_value, TracedArray):
        # numpy's conversion of the fill value (overflow and NaN-to-int errors)
        dt = np.dtype(dtype) if dtype is not None else tr.lift(a).dtype
        if np.ndim(fill_value) == 0:
            fill_value = np.full((), fill_value, dtype=dt)[()]  # numpy's copyto, numpy's errors
    return _like(tr, a, fill_value, dtype, shape)


# ---- called with like=<traced array> --------------------------------------------------------

def _eager(fn, *args, **kwargs):
    """numpy makes the array (static arguments); capture takes it as a constant."""
    def check(v):
        if isinstance(v, TracedArray):
            raise Unsupported(f"np.{fn.__name__} with a traced argument")
    for v in list(args) + list(kwargs.values()):
        check(v)
    return fn(*args, **kwargs)


@rule(np.zeros)
def zeros(tr, shape, dtype=float, order="C", *, device=None):
    shape = static_shape(shape)
    return _fill(tr, 0, np.dtype(dtype), shape)


@rule(np.ones)
def ones(tr, shape, dtype=None, order="C", *, device=None):
    shape = static_shape(shape)
    return _fill(tr, 1, np.dtype(dtype if dtype is not None else float), shape)


@rule(np.empty)
def empty(tr, shape, dtype=float, order="C", *, device=None):
    shape = static_shape(shape)
    return _fill(tr, 0, np.dtype(dtype), shape)


@rule(np.full)
def full(tr, shape, fill_value, dtype=None, order="C", *, device=None):
    shape = static_shape(shape)
    if dtype is None:
        dt = fill_value.dtype if isinstance(fill_value, TracedArray) else np.asarray(fill_value).dtype
    else:
        dt = np.dtype(dtype)
    return _fill(tr, fill_value, dt, shape)


@rule(np.arange)
def arange(tr, *args, **kwargs):
    return tr.lift(_eager(np.arange, *args, **kwargs))


@rule(np.eye)
def eye(tr, N, M=None, k=0, dtype=float, order="C", *, device=None):
    return tr.lift(_eager(np.eye, N, M, k, dtype))


@rule(np.identity)
def identity(tr, n, dtype=None):
    return tr.lift(_eager(np.identity, n, dtype))


# ---- linspace ----------------------------------------------------------------------------

def _operand(v):
    """What np.result_type should see: Python scalars as values (NEP 50 weak),
    traced Python-float inputs as a weak value of their type too."""
    if isinstance(v, TracedArray):
        return v._weak(0) if v._weak is not None else v.dtype
    if isinstance(v, (bool, int, float)):
        return v
    return np.asarray(v).dtype


@rule(np.linspace)
def linspace(tr, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """numpy's own algorithm (numpy/_core/function_base.py), step for step, on
    traced values, so results round exactly as numpy's do."""
    num = static_int(num, "num")
    if num < 0:
        np.linspace(0.0, 1.0, num)  # numpy's own error
    div = (num - 1) if endpoint else num
    dt = np.result_type(_operand(start), _operand(stop))
    if dtype_kind(dt) not in "fc":
        dt = np.result_type(dt, 0.0)  # ensure_inexact
    if dtype is None:
        dtype, integer_dtype = dt, False
    else:
        integer_dtype = np.issubdtype(dtype, np.integer)
    if dt.kind == "c":
        raise Unsupported("complex linspace")
    delta = np.subtract(stop, start, dtype=dt)
    if not isinstance(delta, TracedArray):
        delta = tr.lift(delta)
    p = tr.prims
    y = tr.wrap(p.iota((num,), 0, dt))
    y = tr.reshape(y, (num,) + (1,) * delta.ndim) if delta.ndim else y
    if div > 0:
        step = delta / div
        # numpy: if any step is 0 (denormal delta), y = y / div * delta instead
        zero = np.any(step == 0)
        y = np.where(zero, y / div * delta, y * step)
    else:
        step = np.nan
        y = y * delta
    y = y + start
    if endpoint and num > 1:
        y[-1, ...] = stop
    if axis != 0:
        y = np.moveaxis(y, 0, axis)
    if integer_dtype:
        y = np.floor(y)
    y = y.astype(dtype, copy=False)
    return (y, step) if retstep else y
