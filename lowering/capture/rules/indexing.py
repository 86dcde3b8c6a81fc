"""Indexing: basic indexing (ints, slices with steps, None, Ellipsis) is a view
(slice step + reshape step); integer-array indexing is a gather
(`advanced.py`); assignment through either is functionalized (insert_slice /
scatter)."""

from __future__ import annotations

import operator

import numpy as np

from ..traced import TracedArray
from ..views import SliceStep, strided_dummy
from dialects.symbols import SymDim, range_length, slice_indices


def _expand_key(key, ndim: int):
    if not isinstance(key, tuple):
        key = (key,)
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {used} were indexed")
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([slice(None)] * (ndim - used))
        else:
            out.append(k)
    if not n_ell:
        out.extend([slice(None)] * (ndim - used))
    return out


def _is_int(k) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def _is_basic(key) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, slice) or _is_int(k) for k in keys)


def _slice_indices(k: slice, n: int) -> tuple[int, int, int]:
    """slice.indices, but a traced bound is a graph break (its value decides
    the shape) rather than a TypeError."""
    parts = [k.start, k.stop, k.step]
    for i, b in enumerate(parts):
        if isinstance(b, TracedArray):
            parts[i] = operator.index(b)
        elif b is not None and not isinstance(b, SymDim):
            parts[i] = operator.index(b)
    return slice_indices(*parts, n)


def basic_view(x: TracedArray, key) -> TracedArray:
    """x[key] for a basic key: one slice step, then one reshape step that drops
    integer-indexed dims and inserts new axes. Always a new view (never x)."""
    tr = x._t
    items = _expand_key(key, x.ndim)
    start, step, sizes, final = [], [], [], []
    d = 0
    for k in items:
        if k is None:
            final.append(1)
            continue
        n = x.shape[d]
        if isinstance(k, slice):
            b, e, s = _slice_indices(k, n)
            cnt = range_length(b, e, s)
            start.append(b if cnt else 0)
            step.append(s)
            sizes.append(cnt)
            final.append(cnt)
        else:
            i = k if isinstance(k, SymDim) else operator.index(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {d} with size {n}")
            start.append(i % n)
            step.append(1)
            sizes.append(1)
        d += 1
    out = tr.view(x, SliceStep(tuple(start), tuple(step), tuple(sizes)))
    if tuple(final) != out.shape:
        out = tr.reshape(out, tuple(final))
    return out


def _is_element(key, ndim: int) -> bool:
    """numpy returns a scalar (a copy) when integers index every dimension."""
    keys = key if isinstance(key, tuple) else (key,)
    return len(keys) == ndim and all(_is_int(k) for k in keys)


def getitem(x: TracedArray, key):
    if _is_basic(key):
        out = basic_view(x, key)
        if _is_element(key, x.ndim):
            return x._t.wrap(out._v(), scalar=True)
        return out
    return advanced.getitem(x, key)


def value_for(tr, value, dtype: np.dtype) -> TracedArray:
    """The right-hand side of `x[...] = value` converted to x's dtype the way
    numpy's setitem converts it (Python scalars with numpy's own overflow and
    NaN-to-int errors; arrays with an unsafe cast)."""
    if isinstance(value, (bool, int, float, complex, np.generic)):
        tmp = np.empty((), dtype=dtype)
        tmp[()] = value  # numpy's conversion, numpy's errors
        return tr.wrap(tr.prims.constant(tmp[()], dtype))
    val = tr.lift(value)
    return tr.wrap(tr.prims.cast(val._v(), dtype)) if val.dtype != dtype else val


def _shape_str(shape) -> str:
    """A shape the way numpy's indexing errors print it: `(2,3)`, `(4,)`."""
    return "(" + ",".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def fit_value(tr, val: TracedArray, shape, error, strict: bool = False):
    """val broadcast to `shape` as numpy's setitem does (leading size-1 dims of
    the value may be dropped unless `strict`); `error()` is raised where numpy
    refuses."""
    vshape = tuple(val.shape)
    while len(vshape) > len(shape) and vshape[0] == 1 and not strict:
        vshape = vshape[1:]
    if len(vshape) > len(shape) or any(a not in (1, b) for a, b in zip(vshape[::-1], shape[::-1])):
        raise error()
    p = tr.prims
    return p.broadcast(p.reshape(val._v(), vshape), tuple(shape))


def _static_key(k):
    """A basic index of Python ints, slices of them, None and Ellipsis as a
    routine's config value, or None where it is not one."""
    if k is None:
        return ("none",)
    if k is Ellipsis:
        return ("ellipsis",)
    if type(k) is int:
        return ("int", k)
    if isinstance(k, slice) and all(b is None or type(b) is int for b in (k.start, k.stop, k.step)):
        return ("slice", k.start, k.stop, k.step)
    return None


def complex_getitem(x: TracedArray, key):
    """Basic indexing of a complex array (ints, slices, None, ...): a copy
    by the routine `np.getitem` (complex values are numpy's alone), standing
    for numpy's view — a write through it stops capture
    (`tracer._no_write_through`). Any other index is a graph break."""
    keys = key if isinstance(key, tuple) else (key,)
    cfg = [_static_key(k) for k in keys]
    if any(c is None for c in cfg) or any(type(d) is not int for d in x.shape):
        raise Unsupported("an index of a complex array other than ints and slices")
    dummy = strided_dummy(x.shape, (0,) * x.ndim, x.dtype)  # (no memory: shapes only)
    shape = dummy[key].shape  # numpy's own IndexError for an index out of range
    (v,) = x._t.prims.routine("np.getitem", [x._v()], {"key": tuple(cfg)}, [(shape, x.dtype)])
    r = x._t.wrap(v, scalar=shape == ())
    r._st.part_of = "[...]"
    return r


def setitem(x: TracedArray, key, value) -> None:
    tr = x._t
    if x._readonly:
        raise ValueError("assignment destination is read-only")
    if _is_basic(key):
        target = basic_view(x, key)
        val = value_for(tr, value, target.dtype)
        if _is_element(key, x.ndim) and val.ndim:
            raise ValueError("setting an array element with a sequence.")
        v = fit_value(tr, val, target.shape, lambda: ValueError(
            f"could not broadcast input array from shape {_shape_str(val.shape)} into shape "
            f"{_shape_str(target.shape)}"))
        tr.write(target, v)
        return
    advanced.setitem(x, key, value)


# integer-array indexing; importing it also registers take, take_along_axis, add.at, ...
from . import advanced
