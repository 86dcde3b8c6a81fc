"""Reductions, written the way numpy computes them so that dtypes, rounding and
errors follow numpy: `sum`/`prod`/`max`/`min`/`all`/`any` are the ufunc
reductions of `add`/`multiply`/`maximum`/`minimum`/`logical_and`/`logical_or`;
`mean`/`var`/`std`/`ptp` mirror numpy's `_core/_methods.py` step by step (mean
divides the sum, in the loop dtype numpy picks for `sum / intp(count)`, and casts
back; var squares deviations from the keepdims mean); the nan-functions mirror
`lib/_nanfunctions_impl.py`; `average` mirrors `lib/_function_base_impl.py`.

numpy decides every dtype: reductions ask the ufunc itself on a one-element
dummy, divisions ask `true_divide.resolve_dtypes`."""

from __future__ import annotations

import numpy as np

from dialects.dtypes import BFLOAT16, kind as dtype_kind
from dialects.prims import shape_of as shape_of_value
from dialects.symbols import SymDim
from ..registry import rule, ufunc_method
from ..traced import TracedArray
from ..tracer import Unsupported
from .common import check_out, normalize_axis, static_int

_NoValue = np._NoValue  # type: ignore[attr-defined]
_INTP = np.dtype(np.intp)

UFUNC_OF = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum,
            "all": np.logical_and, "any": np.logical_or}
KIND_OF = {uf.__name__: k for k, uf in UFUNC_OF.items()}


def _given(x) -> bool:
    return x is not None and x is not _NoValue


def _flag(x) -> bool:
    return False if x is _NoValue else bool(x)


def _check_where(where, what: str) -> None:
    if where is not True and where is not _NoValue:
        raise Unsupported(f"where= in {what}")


def strong(tr, x) -> TracedArray:
    """`np.asanyarray(x)`: Python scalars lose NEP 50 weakness."""
    t = tr.lift(x)
    return t if t._weak is None else tr.wrap(t._v())


# ---- axes ------------------------------------------------------------------
def reduce_axes(axis, ndim: int, legacy_0d: bool = True) -> tuple[int, ...]:
    """numpy's axis handling for a reduction: None, an int or a tuple (a list is
    a TypeError); duplicates are a ValueError. ufunc reductions of a 0-d array
    accept the int axes 0 and -1 (numpy's legacy rule), not `(0,)`."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, tuple):
        axes = tuple(normalize_axis(a, ndim) for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError("duplicate value in 'axis'")
        return tuple(sorted(axes))
    if isinstance(axis, TracedArray):
        raise Unsupported("axis must be static")
    a = static_int(axis, "axis")
    if ndim == 0 and legacy_0d and a in (0, -1):
        return ()
    return (normalize_axis(a, ndim),)


def kept_shape(shape, axes) -> tuple[int, ...]:
    return tuple(1 if d in axes else n for d, n in enumerate(shape))


def reduced_shape(shape, axes, keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return kept_shape(shape, axes)
    return tuple(n for d, n in enumerate(shape) if d not in axes)


def count(shape, axes) -> int:
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _count(shape, axes):
    """numpy's rcount (an intp), or a symbolic size as it is."""
    n = count(shape, axes)
    return n if isinstance(n, SymDim) else np.intp(n)


def check_reduce_out(out, shape, opname: str, keepdims: bool):
    """numpy's reductions want `out` of exactly the result shape."""
    o = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if isinstance(o, (TracedArray, np.ndarray)):
        oshape = tuple(o.shape)
        if len(oshape) != len(shape):
            extra = " (must match the operand's when keepdims=True)" if keepdims else ""
            raise ValueError(
                f"output parameter for reduction operation {opname} has the wrong number of "
                f"dimensions: Found {len(oshape)} but expected {len(shape)}{extra}")
        if oshape != tuple(shape):
            raise ValueError(
                f"output parameter for reduction operation {opname} has a non-matching "
                f"dimension: found {oshape} but expected {tuple(shape)}")
    return check_out(out)


def finish(tr, v, out, scalar_ok: bool = True) -> TracedArray:
    """Wrap a result value (already in its final shape); write it through `out`
    (unsafe cast, as numpy's reductions do) and return `out` when given. numpy
    hands back a scalar for a 0-d result without `out`."""
    p = tr.prims
    if out is None:
        return tr.wrap(v, scalar=scalar_ok and v.type.get_shape() == ())
    tr.write(out, p.cast(v, out.dtype))
    return out


def _dtype_of(v) -> np.dtype:
    from dialects.prims import dtype_of

    return dtype_of(v)


def _divide(p, v, divisor, target: np.dtype):
    """`true_divide(v, divisor)` in the loop numpy picks for (v.dtype,
    divisor's numpy scalar dtype), cast to `target` (numpy's out=/scalar-type
    cast back)."""
    loop = np.true_divide.resolve_dtypes((_dtype_of(v), getattr(divisor, "dtype", _INTP), None))
    shape = v.type.get_shape()
    c = p.broadcast(p.constant(divisor, loop[1]), shape)
    q = p.ufunc("divide", [p.cast(v, loop[0]), c], loop[2])
    return p.cast(q, target)


# ---- ufunc reductions ------------------------------------------------------
def _in_memory_order(tr, x: TracedArray, kind: str, axes):
    """(x's value, axes) to reduce, the reduced axes visited in numpy's
    order: numpy's iterator walks an array's axes by its memory layout (the
    largest stride outermost; a tie keeps the axes' order), so where x's
    layout is known (`_known_strides`) and its reduced axes lie otherwise
    (an F-ordered or a transposed array), x is transposed so they come last
    in that order. A floating sum or product then combines its elements
    as numpy does where both run them one after the other (small sizes):
    `x.T.prod()` with a partial product overflowing is numpy's NaN, not 0."""
    moved = _in_its_memory_order(x, axes)
    if moved is not None:
        return tr.prims.transpose(x._v(), moved[0]), moved[1], moved[2]
    if kind not in ("sum", "prod") or len(axes) < 2 or dtype_kind(x.dtype) not in "fc":
        return x._v(), axes, False
    strides = x._known_strides()
    if strides is None:
        return x._v(), axes, False
    walk = sorted((a for a in axes if x.shape[a] != 1), key=lambda a: -abs(strides[a]))
    walk += [a for a in axes if x.shape[a] == 1]
    if walk == sorted(axes):
        return x._v(), axes, False
    kept = [a for a in range(x.ndim) if a not in axes]
    return (tr.prims.transpose(x._v(), kept + walk),
            tuple(range(len(kept), x.ndim)), False)


def _in_its_memory_order(x: TracedArray, axes) -> tuple[list[int], tuple[int, ...], bool] | None:
    """Where x's memory runs in the reverse order of its axes (the caller's
    F-ordered array, `y.T` of a C-ordered one: `ufuncs._transposed`): (the
    permutation of x, the axes to reduce after it, whether the kept axes
    come out reversed) that walk memory as a C-ordered array's reduction
    would — the reduced axes put last where they are the innermost in
    memory (contiguous rows; the kept axes stay in their order), else all
    axes reversed (a reduction of the C-ordered transpose, over its columns
    or its middle axes: its kept axes reversed where two or more are kept).
    (Walked in x's axis order, a 512x1024 F-ordered `sum(axis=0)` read
    columns: 1.4 ms against numpy's 0.14; a 64^3 one's `sum(axis=2)` 527
    us against 52.) None where neither applies."""
    from .ufuncs import _transposed

    if not axes or x.ndim < 2 or not _transposed(x) or any(
            type(d) is not int for d in x.shape):
        return None
    memory = list(range(x.ndim - 1, -1, -1))  # outermost first
    if set(memory[-len(axes):]) == set(axes):
        perm = [a for a in range(x.ndim) if a not in axes] + memory[-len(axes):]
        if perm == list(range(x.ndim)):
            return None
        return perm, tuple(range(x.ndim - len(axes), x.ndim)), False
    return memory, tuple(sorted(x.ndim - 1 - a for a in axes)), x.ndim - len(axes) >= 2


def reduce_value(tr, x: TracedArray, kind: str, axes, dtype=None, initial=_NoValue,
                 out_dt=None):
    """The reduced value of x over axes (axes removed), in numpy's loop dtype:
    `dtype=` if given; else, with an `out=` of dtype out_dt, the ufunc loop for
    (out_dt, x.dtype) (numpy promotes the reduction with out's dtype); else the
    reduction's own default (int32/bool sums widen to int64)."""
    uf = UFUNC_OF[kind]
    p = tr.prims
    if kind in ("all", "any") and dtype is None:
        dtype = np.dtype(np.bool_)
    if dtype is None and out_dt is not None:
        res_dt = uf.resolve_dtypes((np.dtype(out_dt), x.dtype, None))[-1]
    else:
        res_dt = uf.reduce(np.zeros((1,), x.dtype), dtype=dtype).dtype
    empty = any(x.shape[a] == 0 for a in axes)
    init = None
    if _given(initial):
        if isinstance(initial, TracedArray):
            raise Unsupported("a traced initial=")
        # numpy's own conversion of `initial` (and its errors)
        init = uf.reduce(np.zeros((0,), x.dtype), dtype=res_dt, initial=initial)
    if empty and axes and kind in ("max", "min") and init is None:
        raise ValueError(f"zero-size array to reduction operation {uf.__name__} which has no "
                         "identity")
    out_shape = reduced_shape(x.shape, axes, False)
    if empty and axes and init is not None:
        return p.broadcast(p.constant(init, res_dt), out_shape)
    xv, axes, reversed_kept = _in_memory_order(tr, x, kind, axes)

    def reduced(v):  # (the kept axes back in their order)
        v = p.reduce(v, kind, axes)
        n = len(v.type.get_shape())
        return p.transpose(v, tuple(range(n - 1, -1, -1))) if reversed_kept else v
    if kind in ("all", "any"):
        v = p.cast(reduced(p.cast(xv, np.dtype(np.bool_))), res_dt)
    elif res_dt == BFLOAT16 and kind in ("sum", "prod") and axes:
        # ml_dtypes' add/multiply loops round every partial sum to bfloat16 (a
        # sum of 1000 ones is 256); sums and products of bfloat16 accumulate in
        # float32 and round once, as torch's do (lowering/testing.py: their
        # tolerance, and the float32 reference the tests compare with)
        f32 = np.dtype(np.float32)
        v = reduced(p.cast(xv, f32))
        if kind == "sum":  # (from the identity +0.0, as numpy's float32 sum: -0.0 + 0.0)
            v = p.ufunc("add", [v, p.broadcast(p.constant(0.0, f32), out_shape)], f32)
        v = p.cast(v, res_dt)
    else:
        v = reduced(p.cast(xv, res_dt))
        if kind == "sum" and not axes and dtype_kind(res_dt) == "f" and init is None:
            # numpy's add.reduce starts from the identity +0.0, even over no axes
            # (np.sum(np.array(-0.0)) is 0.0)
            v = p.ufunc("add", [v, p.broadcast(p.constant(0.0, res_dt), out_shape)], res_dt)
    if init is not None:
        c = p.broadcast(p.constant(init, res_dt), out_shape)
        v = p.cast(p.ufunc(uf.__name__, [v, c], res_dt), res_dt)
        if kind == "sum" and dtype_kind(res_dt) == "f" and init == 0 and np.signbit(init):
            # numpy's sum starts from `initial`: from -0.0 it stays -0.0 where
            # every term is -0.0 (any other terms give what v + initial does);
            # the reduce above starts from +0.0
            xf = p.cast(xv, res_dt)
            bool_ = np.dtype(np.bool_)
            zero = p.broadcast(p.constant(0.0, res_dt), shape_of_value(xf))
            neg0 = p.ufunc("logical_and", [p.compare("eq", xf, zero),
                                           p.ufunc("signbit", [xf], bool_)], bool_)
            every = p.reduce(neg0, "all", axes)
            v = p.select(every, c, v)
    return v


def reduce(tr, a, kind: str, axis=None, dtype=None, out=None, keepdims=False,
           initial=_NoValue, where=True, legacy_0d: bool = True):
    _check_where(where, f"np.{kind}")
    keepdims = _flag(keepdims)
    x = strong(tr, a)
    axes = reduce_axes(axis, x.ndim, legacy_0d)
    out = check_reduce_out(out, reduced_shape(x.shape, axes, keepdims),
                           UFUNC_OF[kind].__name__, keepdims)
    v = reduce_value(tr, x, kind, axes, dtype, initial, None if out is None else out.dtype)
    if keepdims:
        v = tr.prims.reshape(v, kept_shape(x.shape, axes))
    elif out is None and _kept_axes_put_back(v):
        # (the C-ordered transpose's reduction, its kept axes reversed: the
        # result is its transpose, a view, as numpy's is laid out; no copy)
        return np.transpose(tr.wrap(v.owner.operands[0]))
    return finish(tr, v, out)


def _kept_axes_put_back(v) -> bool:
    """v is a reduction's result whose kept axes `reduce_value` reversed
    back (`_in_its_memory_order`): the transpose of all its axes."""
    from dialects import array as A

    op = v.owner
    return (isinstance(op, A.TransposeOp) and len(A.ints(op.permutation)) >= 2
            and list(A.ints(op.permutation)) == list(range(len(A.ints(op.permutation)) - 1, -1, -1))
            and isinstance(op.operands[0].owner, A.ReduceOp))


def _make_rule(kind: str):
    no_dtype = kind in ("max", "min", "all", "any")

    if no_dtype:
        def impl(tr, a, axis=None, out=None, keepdims=False, initial=_NoValue, where=True,
                 **kw):
            if kw:
                raise TypeError(f"{kind}() got an unexpected keyword argument "
                                f"'{next(iter(kw))}'")
            if kind in ("all", "any") and _given(initial):
                raise TypeError(f"{kind}() got an unexpected keyword argument 'initial'")
            return reduce(tr, a, kind, axis, None, out, keepdims, initial, where)
    else:
        def impl(tr, a, axis=None, dtype=None, out=None, keepdims=False, initial=_NoValue,
                 where=True):
            return reduce(tr, a, kind, axis, dtype, out, keepdims, initial, where)

    impl.__name__ = kind
    return impl


rule(np.sum)(_make_rule("sum"))
rule(np.prod)(_make_rule("prod"))
rule(np.max, np.amax)(_make_rule("max"))
rule(np.min, np.amin)(_make_rule("min"))
rule(np.all)(_make_rule("all"))
rule(np.any)(_make_rule("any"))


@ufunc_method("reduce")
def ufunc_reduce(tr, ufunc, array, axis=0, dtype=None, out=None, keepdims=False,
                 initial=_NoValue, where=True):
    kind = KIND_OF.get(ufunc.__name__)
    if kind is None:
        raise Unsupported(f"{ufunc.__name__}.reduce")
    return reduce(tr, array, kind, axis, dtype, out, keepdims, initial, where)


# ---- mean / var / std --------------------------------------------------------
def _array_result(out, shape) -> bool:
    """numpy's `isinstance(ret, ndarray)` after a reduction."""
    return out is not None or tuple(shape) != ()


@rule(np.mean)
def mean(tr, a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    _check_where(where, "np.mean")
    keepdims = _flag(keepdims)
    x = strong(tr, a)
    axes = reduce_axes(axis, x.ndim, legacy_0d=False)
    rshape = reduced_shape(x.shape, axes, keepdims)
    out = check_reduce_out(out, rshape, "add", keepdims)
    p = tr.prims
    f16_result = False
    if dtype is None:
        if x.dtype.kind in "biu":
            dtype = np.dtype(np.float64)
        elif x.dtype == np.float16:
            dtype, f16_result = np.dtype(np.float32), True
    # ret = umr_sum(arr, axis, dtype, out, keepdims)
    s = reduce_value(tr, x, "sum", axes, dtype, out_dt=None if out is None else out.dtype)
    s = p.reshape(s, rshape)
    ret_dt = out.dtype if out is not None else _dtype_of(s)
    s = p.cast(s, ret_dt)
    n = _count(x.shape, axes)
    if _array_result(out, rshape):
        # true_divide(ret, rcount, out=ret, casting='unsafe'); then arr.dtype.type(ret)
        q = _divide(p, s, n, ret_dt)
        if f16_result and out is None:
            q = p.cast(q, x.dtype)
    else:
        # arr.dtype.type(ret / rcount) for float16, else ret.dtype.type(ret / rcount)
        q = _divide(p, s, n, x.dtype if f16_result else ret_dt)
    return finish(tr, q, out)


def _var(tr, a, axis, dtype, out, ddof, keepdims, where, mean_arg, what):
    _check_where(where, what)
    if _given(mean_arg):
        raise Unsupported(f"mean= in {what}")
    if isinstance(ddof, TracedArray):
        raise Unsupported("a traced ddof")
    keepdims = _flag(keepdims)
    x = strong(tr, a)
    if x.dtype.kind == "c":
        raise Unsupported("complex var/std")
    axes = reduce_axes(axis, x.ndim, legacy_0d=False)
    rshape = reduced_shape(x.shape, axes, keepdims)
    out = check_reduce_out(out, rshape, "add", keepdims)
    p = tr.prims
    if dtype is None and x.dtype.kind in "biu":
        dtype = np.dtype(np.float64)
    n = _count(x.shape, axes)
    # arrmean = umr_sum(arr, axis, dtype, keepdims=True); true_divide(.., out=arrmean)
    m = p.reshape(reduce_value(tr, x, "sum", axes, dtype), kept_shape(x.shape, axes))
    m = _divide(p, m, n, _dtype_of(m))
    # x = subtract(arr, arrmean); x = square(x) (multiply(x, conj(x)) for bool: same)
    sub = np.subtract.resolve_dtypes((x.dtype, _dtype_of(m), None))
    d = p.ufunc("subtract", [p.cast(x._v(), sub[0]), p.broadcast(p.cast(m, sub[1]), x.shape)],
                sub[2])
    sq = p.ufunc("multiply", [d, d], sub[2])
    # ret = umr_sum(x, axis, dtype, out, keepdims)
    r = reduce_value(tr, tr.wrap(sq), "sum", axes, dtype,
                     out_dt=None if out is None else out.dtype)
    r = p.reshape(r, rshape)
    ret_dt = out.dtype if out is not None else _dtype_of(r)
    r = p.cast(r, ret_dt)
    # rcount = maximum(rcount - ddof, 0); ret = ret / rcount
    if isinstance(n, SymDim) and type(ddof) is int:  # (a symbolic count stays one)
        rc = n - ddof
        rc = rc if rc > 0 else np.intp(0)
    else:
        rc = np.maximum(np.intp(n) - ddof, 0)
    r = _divide(p, r, rc, ret_dt)
    return x, r, out, rshape


@rule(np.var)
def var(tr, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
        mean=_NoValue, correction=_NoValue):
    ddof = _ddof(ddof, correction)
    _, r, out, _ = _var(tr, a, axis, dtype, out, ddof, keepdims, where, mean, "np.var")
    return finish(tr, r, out)


@rule(np.std)
def std(tr, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
        mean=_NoValue, correction=_NoValue):
    ddof = _ddof(ddof, correction)
    _, r, out, rshape = _var(tr, a, axis, dtype, out, ddof, keepdims, where, mean, "np.std")
    p = tr.prims
    dt = _dtype_of(r)
    loop = np.sqrt.resolve_dtypes((dt, None))
    if _array_result(out, rshape):
        # sqrt(ret, out=ret): numpy's same_kind check on the output (and its error)
        np.sqrt(np.zeros((1,), dt), out=np.zeros((1,), dt))
    q = p.cast(p.ufunc("sqrt", [p.cast(r, loop[0])], loop[1]), dt)
    return finish(tr, q, out)


def _ddof(ddof, correction):
    if correction is not _NoValue:
        if ddof != 0:
            raise ValueError("ddof and correction can't be provided simultaneously.")
        return correction
    return ddof


# ---- argmax / argmin -------------------------------------------------------
def _argreduce(tr, a, kind, axis=None, out=None, keepdims=False):
    keepdims = _flag(keepdims)
    x = strong(tr, a)
    p = tr.prims
    v = x._v()
    if axis is None or x.ndim == 0:
        if axis is not None:
            if isinstance(axis, tuple):
                raise TypeError("'tuple' object cannot be interpreted as an integer")
            normalize_axis(axis, 1)
        v = p.reshape(v, (x.size,))
        ax, n = 0, x.size
        rshape = (1,) * x.ndim if keepdims else ()
    else:
        if isinstance(axis, (tuple, list)):
            raise TypeError(f"'{type(axis).__name__}' object cannot be interpreted as an integer")
        ax = normalize_axis(axis, x.ndim)
        n = x.shape[ax]
        rshape = reduced_shape(x.shape, (ax,), keepdims)
    if n == 0:
        raise ValueError(f"attempt to get {kind} of an empty sequence")
    out = check_out(out)
    if out is not None:
        if tuple(out.shape) != tuple(rshape):
            raise ValueError(f"output array does not match result of np.{kind}.")
        if not np.can_cast(out.dtype, _INTP, "safe"):
            raise TypeError(f"Cannot cast array data from {out.dtype!r} to {_INTP!r} "
                            "according to the rule 'safe'")
    r = p.reshape(p.argreduce(v, kind, ax), rshape)
    return finish(tr, r, out)


@rule(np.argmax)
def argmax(tr, a, axis=None, out=None, *, keepdims=False):
    return _argreduce(tr, a, "argmax", axis, out, keepdims)


@rule(np.argmin)
def argmin(tr, a, axis=None, out=None, *, keepdims=False):
    return _argreduce(tr, a, "argmin", axis, out, keepdims)


# ---- ptp ---------------------------------------------------------------------
@rule(np.ptp)
def ptp(tr, a, axis=None, out=None, keepdims=False):
    from .ufuncs import call

    # subtract(maximum.reduce(a, axis, None, out, keepdims),
    #          minimum.reduce(a, axis, None, None, keepdims), out)
    mx = reduce(tr, a, "max", axis, None, out, keepdims)
    mn = reduce(tr, a, "min", axis, None, None, keepdims)
    return call(tr, np.subtract, mx, mn, out=out)


# ---- nan-functions -----------------------------------------------------------
def _replace_nan(tr, a, val):
    """numpy's `_replace_nan`: (array with NaN replaced by val, mask or None)."""
    x = strong(tr, a)
    if dtype_kind(x.dtype) != "f":
        return x, None
    p = tr.prims
    mask = p.ufunc("isnan", [x._v()], np.dtype(np.bool_))
    c = p.broadcast(p.constant(val, x.dtype), x.shape)
    return tr.wrap(p.select(mask, c, x._v())), mask


@rule(np.nansum)
def nansum(tr, a, axis=None, dtype=None, out=None, keepdims=_NoValue, initial=_NoValue,
           where=_NoValue):
    x, _ = _replace_nan(tr, a, 0)
    return reduce(tr, x, "sum", axis, dtype, out, keepdims, initial, where)


@rule(np.nanprod)
def nanprod(tr, a, axis=None, dtype=None, out=None, keepdims=_NoValue, initial=_NoValue,
            where=_NoValue):
    x, _ = _replace_nan(tr, a, 1)
    return reduce(tr, x, "prod", axis, dtype, out, keepdims, initial, where)


def _nanextreme(tr, a, kind, axis, out, keepdims, initial, where):
    """numpy runs `fmax.reduce`/`fmin.reduce` on ndarrays: NaNs are skipped,
    an all-NaN slice gives NaN, `initial` takes part as one more element."""
    _check_where(where, f"np.nan{kind}")
    keepdims = _flag(keepdims)
    x = strong(tr, a)
    fname = "fmax" if kind == "max" else "fmin"
    if dtype_kind(x.dtype) != "f":
        axes = reduce_axes(axis, x.ndim)
        if any(x.shape[d] == 0 for d in axes) and not _given(initial):
            raise ValueError(f"zero-size array to reduction operation {fname} which has no "
                             "identity")
        return reduce(tr, x, kind, axis, None, out, keepdims, initial)
    p = tr.prims
    axes = reduce_axes(axis, x.ndim)
    rshape = reduced_shape(x.shape, axes, keepdims)
    out = check_reduce_out(out, rshape, fname, keepdims)
    if any(x.shape[d] == 0 for d in axes) and not _given(initial):
        raise ValueError(f"zero-size array to reduction operation {fname} which has no "
                         "identity")
    fill = -np.inf if kind == "max" else np.inf
    mask = p.ufunc("isnan", [x._v()], np.dtype(np.bool_))
    y = tr.wrap(p.select(mask, p.broadcast(p.constant(fill, x.dtype), x.shape), x._v()))
    m = reduce_value(tr, y, kind, axes, None, fill if _given(initial) else _NoValue)
    allnan = reduce_value(tr, tr.wrap(mask), "all", axes)
    m = p.select(allnan, p.broadcast(p.constant(np.nan, x.dtype), m.type.get_shape()), m)
    if _given(initial):
        if isinstance(initial, TracedArray):
            raise Unsupported("a traced initial=")
        init = getattr(np, fname).reduce(np.zeros((0,), x.dtype), initial=initial)
        c = p.broadcast(p.constant(init, x.dtype), m.type.get_shape())
        m = p.ufunc(fname, [m, c], x.dtype)
    m = p.reshape(m, rshape)
    return finish(tr, m, out)


@rule(np.nanmax)
def nanmax(tr, a, axis=None, out=None, keepdims=_NoValue, initial=_NoValue, where=_NoValue):
    return _nanextreme(tr, a, "max", axis, out, keepdims, initial, where)


@rule(np.nanmin)
def nanmin(tr, a, axis=None, out=None, keepdims=_NoValue, initial=_NoValue, where=_NoValue):
    return _nanextreme(tr, a, "min", axis, out, keepdims, initial, where)


@rule(np.nanmean)
def nanmean(tr, a, axis=None, dtype=None, out=None, keepdims=_NoValue, *, where=_NoValue):
    _check_where(where, "np.nanmean")
    arr, mask = _replace_nan(tr, a, 0)
    if mask is None:
        return mean(tr, arr, axis=axis, dtype=dtype, out=out, keepdims=keepdims)
    if dtype is not None and dtype_kind(dtype) not in "fc":
        raise TypeError("If a is inexact, then dtype must be inexact")
    outc = check_out(out)
    if outc is not None and dtype_kind(outc.dtype) not in "fc":
        raise TypeError("If a is inexact, then out must be inexact")
    keep = _flag(keepdims)
    p = tr.prims
    axes = reduce_axes(axis, arr.ndim)
    rshape = reduced_shape(arr.shape, axes, keep)
    outc = check_reduce_out(outc, rshape, "add", keep)
    # cnt = sum(~mask, axis, dtype=intp, keepdims); tot = sum(arr, axis, dtype, out, keepdims)
    notmask = p.ufunc("logical_not", [mask], np.dtype(np.bool_))
    cnt = p.reshape(reduce_value(tr, tr.wrap(notmask), "sum", axes, _INTP), rshape)
    tot = reduce_value(tr, arr, "sum", axes, dtype, out_dt=None if outc is None else outc.dtype)
    tot = p.reshape(tot, rshape)
    tot_dt = outc.dtype if outc is not None else _dtype_of(tot)
    tot = p.cast(tot, tot_dt)
    # np.divide(tot, cnt, out=tot or out, casting='unsafe') / tot.dtype.type(tot / cnt)
    loop = np.true_divide.resolve_dtypes((tot_dt, _INTP, None))
    q = p.ufunc("divide", [p.cast(tot, loop[0]), p.cast(cnt, loop[1])], loop[2])
    return finish(tr, p.cast(q, tot_dt), outc)


# ---- average -------------------------------------------------------------------
@rule(np.average)
def average(tr, a, axis=None, weights=None, returned=False, *, keepdims=_NoValue):
    x = strong(tr, a)
    if axis is not None:
        axis = np.lib.array_utils.normalize_axis_tuple(axis, x.ndim, argname="axis")
    kw = {} if keepdims is _NoValue else {"keepdims": keepdims}
    if weights is None:
        avg = mean(tr, x, axis, **kw)
        avg_shape = tuple(avg.shape)
        avg_size = int(np.prod(avg_shape, dtype=np.int64))
        scl = avg.dtype.type(x.size / avg_size)
        if returned:
            if avg_shape != ():
                scl = np.broadcast_to(scl, avg_shape).copy()
            return avg, scl
        return avg
    wgt = strong(tr, weights)
    if x.dtype.kind in "biu":
        result_dtype = np.result_type(x.dtype, wgt.dtype, "f8")
    else:
        result_dtype = np.result_type(x.dtype, wgt.dtype)
    if tuple(x.shape) != tuple(wgt.shape):
        if axis is None:
            raise TypeError("Axis must be specified when shapes of a and weights differ.")
        if tuple(wgt.shape) != tuple(x.shape[ax] for ax in axis):
            raise ValueError("Shape of weights must be consistent with shape of a along "
                             "specified axis.")
        p = tr.prims
        wv = p.transpose(wgt._v(), tuple(int(i) for i in np.argsort(axis)))
        wv = p.reshape(wv, tuple(s if ax in axis else 1 for ax, s in enumerate(x.shape)))
        wgt = tr.wrap(wv)
    scl = np.sum(wgt, axis=axis, dtype=result_dtype, **kw)
    w_const = _constant_of(tr, weights)
    if w_const is not None:
        # weights known at trace time: numpy's zero check runs now, no graph break
        wc = w_const
        if tuple(x.shape) != tuple(wc.shape):
            wc = wc.transpose(np.argsort(axis)).reshape(
                tuple(s if ax in axis else 1 for ax, s in enumerate(x.shape)))
        zero = np.any(wc.sum(axis=axis, dtype=result_dtype, **kw) == 0.0)
    else:
        zero = np.any(scl == 0.0)  # numpy's data-dependent check: a graph break
    if zero:
        raise ZeroDivisionError("Weights sum to zero, can't be normalized")
    avg = np.sum(np.multiply(x, wgt, dtype=result_dtype), axis, **kw) / scl
    if returned:
        if tuple(np.shape(scl)) != tuple(avg.shape):
            scl = np.copy(np.broadcast_to(scl, avg.shape))
        return avg, scl
    return avg


def _constant_of(tr, w):
    """w as a concrete array when it is a trace-time constant (not a traced value,
    not a caller/global array read at call time), else None."""
    if isinstance(w, TracedArray):
        return None
    if isinstance(w, np.ndarray):
        i = tr.source_ids.get(id(w))
        return None if i is not None and tr.sources[i] is w else w
    if any(isinstance(e, TracedArray) for e in np.ravel(np.asarray(w, dtype=object))):
        return None
    arr = np.asarray(w)
    return None if arr.dtype == object else arr
