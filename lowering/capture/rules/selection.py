"""Selection and clipping: where, clip, nan_to_num, select.

`clip` is numpy's ufunc `np._core.umath.clip`, written as compares and selects
with its exact NaN rule (NaN in x or in a bound gives NaN) and its signed-zero
rule on ties, which differs between numpy's two inner loops (bounds constant
along the inner loop: a tie keeps x; general loop: a tie takes the bound). With
one bound None numpy itself calls `minimum`/`maximum`, and so do we."""

from __future__ import annotations

import numpy as np

from dialects.dtypes import finfo
from dialects.dtypes import kind as dtype_kind
from dialects.symbols import broadcast_shapes

from ..registry import rule
from ..traced import TracedArray
from ..tracer import Unsupported
from .common import check_out, store_out
from .reductions import strong

_NoValue = np._NoValue  # type: ignore[attr-defined]
_BOOL = np.dtype(np.bool_)
_CLIP = np._core.umath.clip  # the ufunc behind np.clip


def promotion_operand(t: TracedArray):
    """What `np.result_type` must see for t: a Python scalar *value* for a weak
    (NEP 50) scalar — the Python type itself would count as a strong float64."""
    return t._weak(0) if t._weak is not None else t.dtype


@rule(np.where)
def where(tr, condition, x=_NoValue, y=_NoValue, /):
    if x is _NoValue and y is _NoValue:
        raise Unsupported("one-argument np.where has a data-dependent shape")
    if x is _NoValue or y is _NoValue:
        raise ValueError("either both or neither of x and y should be given")
    c = tr.lift(condition)
    av, bv = tr.lift(x), tr.lift(y)
    dt = np.result_type(promotion_operand(av), promotion_operand(bv))
    p = tr.prims
    shape = broadcast_shapes(c.shape, av.shape, bv.shape)
    from .ufuncs import flipped, transposed_operands

    if transposed_operands([c, av, bv], shape):  # (in their memory's order: `ufuncs.apply`)
        return np.transpose(where(tr, *flipped([c, av, bv], len(shape))))
    cv = p.broadcast(p.cast(c._v(), _BOOL), shape)
    r = p.select(cv, p.broadcast(p.cast(av._v(), dt), shape),
                 p.broadcast(p.cast(bv._v(), dt), shape))
    return tr.wrap(r)


# ---- clip --------------------------------------------------------------------
@rule(np.clip)
def clip(tr, a, a_min=_NoValue, a_max=_NoValue, out=None, *, min=_NoValue, max=_NoValue,
         **kwargs):
    if a_min is _NoValue and a_max is _NoValue:
        a_min = None if min is _NoValue else min
        a_max = None if max is _NoValue else max
    elif a_min is _NoValue:
        raise TypeError("clip() missing 1 required positional argument: 'a_min'")
    elif a_max is _NoValue:
        raise TypeError("clip() missing 1 required positional argument: 'a_max'")
    elif min is not _NoValue or max is not _NoValue:
        raise ValueError("Passing `min` or `max` keyword argument when `a_min` and `a_max` "
                         "are provided is forbidden.")
    return _clip(tr, strong(tr, a), a_min, a_max, out, **kwargs)


def _clip(tr, a: TracedArray, lo, hi, out=None, dtype=None, casting="same_kind", where=True,
          order="K", subok=True, signature=None):
    from .ufuncs import call, operand_value, resolve

    if where is not True:
        raise Unsupported("where= in clip")
    if a.dtype.kind in "iu":
        # numpy's _clip: Python int bounds beyond the dtype's range mean no bound
        if type(lo) is int and lo <= np.iinfo(a.dtype).min:
            lo = None
        if type(hi) is int and hi >= np.iinfo(a.dtype).max:
            hi = None
    kw = {"out": out, "dtype": dtype, "casting": casting, "signature": signature}
    if lo is None and hi is None:
        uf, inputs = np.positive, [a]
    elif lo is None:
        uf, inputs = np.minimum, [a, hi]
    elif hi is None:
        uf, inputs = np.maximum, [a, lo]
    else:
        uf, inputs = _CLIP, [a, lo, hi]
    loop = resolve(uf, inputs, dtype, casting, signature)
    o = check_out(out)
    if o is not None and not np.can_cast(loop[-1], o.dtype, casting):
        # numpy's own exception (a UFuncTypeError) from the same call on dummies
        uf(*[np.zeros((1,), d) for d in loop[:-1]], out=np.zeros((1,), o.dtype),
           casting=casting)
    if uf is not _CLIP:
        return call(tr, uf, *inputs, **kw)
    for d in loop:
        if dtype_kind(d) not in "biuf":
            raise Unsupported(f"clip of {d}")
    shapes = [x.shape if isinstance(x, TracedArray) else np.shape(x) for x in inputs]
    from .ufuncs import flipped, transposed_operands

    shape = broadcast_shapes(*shapes)
    if o is None and transposed_operands(inputs, shape):  # (in their memory's order)
        return np.transpose(_clip(tr, *flipped(inputs, len(shape)), dtype=dtype,
                                  casting=casting, signature=signature))
    p = tr.prims
    xv, lov, hiv = [p.broadcast(operand_value(tr, v, d), shape)
                    for v, d in zip(inputs, loop[:3])]
    dt = np.dtype(loop[3])
    if dtype_kind(dt) == "f":
        isnan = lambda v: p.ufunc("isnan", [v], _BOOL)
        if _inner_constant(shapes[1], shape) and _inner_constant(shapes[2], shape):
            # numpy's loop for bounds constant along the inner loop (the common
            # case: scalar bounds): a tie keeps x, a NaN anywhere gives NaN
            r = p.select(p.compare("lt", xv, lov), lov, xv)
            r = p.select(isnan(lov), lov, r)
            r = p.select(p.compare("gt", r, hiv), hiv, r)
            r = p.select(isnan(hiv), hiv, r)
        else:
            # numpy's general loop: Min(Max(x, lo), hi) with Max(a, b) =
            # isnan(a) || a > b ? a : b (a tie takes the bound)
            r = p.select(_or(p, isnan(xv), p.compare("gt", xv, lov)), xv, lov)
            r = p.select(_or(p, isnan(r), p.compare("lt", r, hiv)), r, hiv)
    else:
        r = p.select(p.compare("lt", xv, lov), lov, xv)
        r = p.select(p.compare("gt", r, hiv), hiv, r)
    res = tr.wrap(p.cast(r, dt), scalar=shape == ())
    return res if o is None else store_out(tr, o, res, casting, "clip")


def _or(p, a, b):
    return p.ufunc("logical_or", [a, b], _BOOL)


def _inner_constant(bshape, shape) -> bool:
    """Does a bound of shape bshape stay constant along numpy's inner loop over
    `shape` (C order: the last axis longer than 1)? Then numpy runs clip's
    fast loop, whose handling of ±0 ties differs from its general loop."""
    inner = [d for d in range(len(shape)) if shape[d] > 1]
    if not inner:
        return True
    k = inner[-1] - (len(shape) - len(bshape))
    return k < 0 or bshape[k] == 1


# ---- nan_to_num ------------------------------------------------------------------
def _fill_value(value, dtype: np.dtype):
    """`np.copyto(d, value, where=...)`'s conversion of a fill value (numpy's own
    casting rule and errors)."""
    tmp = np.zeros((), dtype)
    np.copyto(tmp, value, casting="same_kind")
    return tmp[()]


@rule(np.nan_to_num)
def nan_to_num(tr, x, copy=True, nan=0.0, posinf=None, neginf=None):
    t = tr.lift(x)
    if not copy:
        # np.array(x, copy=False): no copy-free array of a scalar or a sequence
        if t._scalar or t._weak is not None or isinstance(x, (list, tuple, int, float, bool,
                                                                 np.generic)):
            raise ValueError("Unable to avoid copy while creating an array as requested.")
        if not isinstance(x, TracedArray):
            raise Unsupported("nan_to_num(copy=False) of an array that is not traced")
    if any(isinstance(v, TracedArray) for v in (nan, posinf, neginf)):
        raise Unsupported("traced nan=/posinf=/neginf=")
    t = strong(tr, t)
    p = tr.prims
    dt = t.dtype
    if dtype_kind(dt) != "f":
        res = t if not copy else tr.wrap(t._v())
    else:
        info = finfo(dt)
        maxf = info.max if posinf is None else posinf
        minf = info.min if neginf is None else neginf
        v = t._v()
        shape = t.shape

        def const(val):
            return p.broadcast(p.constant(_fill_value(val, dt), dt), shape)

        def cmp(pred, val):
            return p.compare(pred, v, p.broadcast(p.constant(val, dt), shape))

        r = p.select(p.ufunc("isnan", [v], _BOOL), const(nan), v)
        r = p.select(cmp("eq", np.inf), const(maxf), r)
        r = p.select(cmp("eq", -np.inf), const(minf), r)
        if copy:
            res = tr.wrap(r)
        else:
            tr.write(t, r)
            res = t
    if res.ndim == 0:
        return tr.wrap(res._v(), scalar=True)
    return res


# ---- select ------------------------------------------------------------------------
@rule(np.select)
def select(tr, condlist, choicelist, default=0):
    if isinstance(condlist, TracedArray) or isinstance(choicelist, TracedArray):
        raise Unsupported("select needs static lists of conditions and choices")
    condlist, choicelist = list(condlist), list(choicelist)
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    if len(condlist) == 0:
        raise ValueError("select with an empty condition list is not possible")
    # numpy keeps Python scalars (weak, NEP 50) for the result dtype only
    def pyscalar(c):
        return type(c) in (int, float, complex) or (isinstance(c, TracedArray)
                                                   and c._weak is not None)

    items = list(choicelist) + [default]
    kinds = [(c if not isinstance(c, TracedArray) else c._weak(0)) if pyscalar(c)
             else strong(tr, c).dtype for c in items]
    try:
        dtype = np.result_type(*kinds)
    except TypeError as e:
        raise TypeError(f"Choicelist and default value do not have a common dtype: {e}") from None
    # ... then np.broadcast_arrays makes every choice an array (strong)
    vals = [strong(tr, c) for c in items]
    conds = [tr.lift(c) for c in condlist]
    for i, c in enumerate(conds):
        if c.dtype != _BOOL:
            raise TypeError(f"invalid entry {i} in condlist: should be boolean ndarray")
    cshape = broadcast_shapes(*[c.shape for c in conds])
    chshape = broadcast_shapes(*[v.shape for v in vals])
    shape = broadcast_shapes(cshape, chshape)
    p = tr.prims
    for v in vals[:-1]:
        # np.copyto(result, choice, where=cond): casting='same_kind'
        if not np.can_cast(v.dtype, dtype, "same_kind"):
            raise TypeError(f"Cannot cast array data from {v.dtype!r} to {dtype!r} according "
                            "to the rule 'same_kind'")
    # np.full(shape, default, dtype): an unsafe cast
    r = p.broadcast(p.cast(vals[-1]._v(), dtype), shape)
    for c, v in zip(reversed(conds), reversed(vals[:-1])):
        r = p.select(p.broadcast(c._v(), shape), p.broadcast(p.cast(v._v(), dtype), shape), r)
    return tr.wrap(r)
