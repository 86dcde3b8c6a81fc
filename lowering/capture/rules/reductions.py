"""Reductions, written the way numpy's own `_methods.py` computes them so that
dtypes and rounding follow numpy (mean divides a float64-promoted sum by the
count; var squares deviations from the keepdims mean)."""

from __future__ import annotations

import numpy as np

from ..registry import rule, ufunc_method
from ..traced import TracedArray
from ..tracer import Unsupported
from .common import check_out, normalize_axes, normalize_axis, store_out

_KIND = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
         "logical_and": "all", "logical_or": "any"}
_ORACLE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "all": np.all,
           "any": np.any}


def _finish(tr, v, x: TracedArray, axes, keepdims: bool, out, scalar_ok=True):
    p = tr.prims
    if keepdims:
        v = p.reshape(v, tuple(1 if d in axes else n for d, n in enumerate(x.shape)))
    res = tr.wrap(v, scalar=scalar_ok and not keepdims and len(axes) == x.ndim)
    out = check_out(out)
    if out is None:
        return res
    return store_out(tr, out, res, "unsafe")


def reduce(tr, x, kind: str, axis=None, dtype=None, out=None, keepdims=False, initial=None,
           where=True):
    if where is not True:
        raise Unsupported("where= in a reduction")
    x = tr.lift(x)
    axes = normalize_axes(axis, x.ndim)
    # numpy decides the result dtype: ask it on a one-element array of x's dtype
    res_dt = _ORACLE[kind](np.ones((1,) * x.ndim, dtype=x.dtype), dtype=dtype).dtype \
        if kind in ("sum", "prod") else (np.dtype(np.bool_) if kind in ("any", "all") else x.dtype)
    if kind in ("max", "min") and any(x.shape[a] == 0 for a in axes) and initial is None:
        name = "maximum" if kind == "max" else "minimum"
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
    p = tr.prims
    v = p.cast(x._v(), res_dt)
    v = p.reduce(v, kind, axes)
    if initial is not None:
        from .ufuncs import apply

        uf = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
              "all": np.logical_and, "any": np.logical_or}[kind]
        r = apply(tr, uf, [tr.wrap(v), initial], dtype=res_dt)
        v = p.cast(r._v(), res_dt)
    return _finish(tr, v, x, axes, keepdims, out)


for _k, _f in _ORACLE.items():
    @rule(_f, *([np.amax] if _k == "max" else [np.amin] if _k == "min" else []))
    def _r(tr, a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True,
           _kind=_k):
        if _kind in ("max", "min", "all", "any") and dtype is not None:
            raise TypeError(f"{_kind}() got an unexpected keyword argument 'dtype'")
        return reduce(tr, a, _kind, axis, dtype, out, keepdims, initial, where)


@ufunc_method("reduce")
def ufunc_reduce(tr, ufunc, a, axis=0, dtype=None, out=None, keepdims=False, initial=None,
                 where=True):
    kind = _KIND.get(ufunc.__name__)
    if kind is None:
        raise Unsupported(f"{ufunc.__name__}.reduce")
    if kind in ("all", "any"):
        a = np.asarray(a).astype(bool) if not isinstance(a, TracedArray) else a
    return reduce(tr, a, kind, axis, dtype, out, keepdims, initial, where)


def _count(x: TracedArray, axes) -> int:
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


def _mean_dtype(x: TracedArray, dtype):
    if dtype is not None:
        return np.dtype(dtype), False
    if x.dtype.kind in "biu":
        return np.dtype(np.float64), False
    if x.dtype == np.float16:
        return np.dtype(np.float32), True
    return x.dtype, False


@rule(np.mean)
def mean(tr, a, axis=None, dtype=None, out=None, keepdims=False, where=True):
    if where is not True:
        raise Unsupported("where= in mean")
    x = tr.lift(a)
    axes = normalize_axes(axis, x.ndim)
    acc, f16 = _mean_dtype(x, dtype)
    p = tr.prims
    s = p.reduce(p.cast(x._v(), acc), "sum", axes)
    # numpy: true_divide(sum, intp(count), out=sum, casting="unsafe")
    div_dt = np.result_type(acc, np.intp)
    q = p.ufunc("divide", [p.cast(s, div_dt), p.constant(_count(x, axes), div_dt, p_shape(s))], div_dt)
    q = p.cast(q, np.dtype(np.float16) if f16 else acc)
    return _finish(tr, q, x, axes, keepdims, out)


def p_shape(v):
    return v.type.get_shape()


def _bcast_const(p, value, dtype, v):
    c = p.constant(value, dtype)
    return p.broadcast(c, p_shape(v))


@rule(np.var)
def var(tr, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=True, mean=None,
        correction=None):
    v = _var(tr, a, axis, dtype, ddof if correction is None else correction, where, mean)
    x = tr.lift(a)
    return _finish(tr, v, x, normalize_axes(axis, x.ndim), keepdims, out)


@rule(np.std)
def std(tr, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=True, mean=None,
        correction=None):
    v = _var(tr, a, axis, dtype, ddof if correction is None else correction, where, mean)
    v = tr.prims.ufunc("sqrt", [v], v.type.element_type and _dt(v))
    x = tr.lift(a)
    return _finish(tr, v, x, normalize_axes(axis, x.ndim), keepdims, out)


def _dt(v):
    from ..prims import dtype_of

    return dtype_of(v)


def _var(tr, a, axis, dtype, ddof, where, mean_arg):
    if where is not True or mean_arg is not None:
        raise Unsupported("where=/mean= in var/std")
    x = tr.lift(a)
    if x.dtype.kind == "c":
        raise Unsupported("complex var")
    axes = normalize_axes(axis, x.ndim)
    acc, f16 = _mean_dtype(x, dtype)
    p = tr.prims
    n = _count(x, axes)
    keep = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    xv = p.cast(x._v(), acc) if x.dtype.kind in "biu" or dtype is not None or f16 else x._v()
    s = p.reshape(p.reduce(p.cast(x._v(), acc), "sum", axes), keep)
    div_dt = np.result_type(acc, np.intp)
    m = p.cast(p.ufunc("divide", [p.cast(s, div_dt), _bcast_const(p, n, div_dt, s)], div_dt), acc)
    # x - arrmean (numpy promotes x with the accumulation dtype)
    sub_dt = np.result_type(_dt(xv), acc)
    d = p.ufunc("subtract", [p.cast(xv, sub_dt), p.broadcast(p.cast(m, sub_dt), x.shape)], sub_dt)
    sq = p.ufunc("multiply", [d, d], sub_dt)
    r = p.reduce(p.cast(sq, acc), "sum", axes)
    cnt = max(n - ddof, 0)
    q = p.cast(p.ufunc("divide", [p.cast(r, div_dt), _bcast_const(p, cnt, div_dt, r)], div_dt), acc)
    return p.cast(q, np.dtype(np.float16)) if f16 else q


def _argreduce(tr, a, kind, axis=None, out=None, keepdims=False):
    x = tr.lift(a)
    p = tr.prims
    if axis is None:
        v = p.reshape(x._v(), (x.size,))
        ax, flat = 0, True
    else:
        ax, flat = normalize_axis(axis, x.ndim), False
        v = x._v()
    n = x.size if flat else x.shape[ax]
    if n == 0:
        raise ValueError(f"attempt to get {kind} of an empty sequence")
    r = p.argreduce(v, kind, ax)
    if keepdims:
        r = p.reshape(r, (1,) * x.ndim if flat else tuple(1 if d == ax else s for d, s in enumerate(x.shape)))
    res = tr.wrap(r, scalar=flat and not keepdims)
    out = check_out(out)
    return res if out is None else store_out(tr, out, res, "unsafe")


@rule(np.argmax)
def argmax(tr, a, axis=None, out=None, *, keepdims=False):
    return _argreduce(tr, a, "argmax", axis, out, keepdims)


@rule(np.argmin)
def argmin(tr, a, axis=None, out=None, *, keepdims=False):
    return _argreduce(tr, a, "argmin", axis, out, keepdims)
