"""Indexing: basic indexing (ints, slices with steps, None, Ellipsis) is a view
(slice step + reshape step); integer-array indexing is a gather; assignment
through either is functionalized (insert_slice / scatter)."""

from __future__ import annotations

import numpy as np

from ..traced import TracedArray
from ..tracer import Unsupported
from ..views import SliceStep


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


def _is_basic(key) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    for k in keys:
        if k is None or k is Ellipsis or isinstance(k, slice):
            continue
        if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
            continue
        return False
    return True


def basic_view(x: TracedArray, key) -> TracedArray:
    """x[key] for a basic key: one slice step, then one reshape step that drops
    integer-indexed dims and inserts new axes."""
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
            b, e, s = k.indices(n)
            cnt = len(range(b, e, s))
            start.append(b if cnt else 0)
            step.append(s)
            sizes.append(cnt)
            final.append(cnt)
        else:
            i = int(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {d} with size {n}")
            start.append(i % n)
            step.append(1)
            sizes.append(1)
        d += 1
    out = x
    if tuple(sizes) != x.shape or any(start) or any(s != 1 for s in step):
        out = tr.view(x, SliceStep(tuple(start), tuple(step), tuple(sizes)))
    if tuple(final) != out.shape:
        out = tr.reshape(out, tuple(final))
    elif out is x:
        out = tr.view(x, SliceStep(tuple(start), tuple(step), tuple(sizes)))
    return out


def getitem(x: TracedArray, key):
    if _is_basic(key):
        return basic_view(x, key)
    from . import advanced

    return advanced.getitem(x, key)


def setitem(x: TracedArray, key, value) -> None:
    tr = x._t
    if x._readonly:
        raise ValueError("assignment destination is read-only")
    if _is_basic(key):
        target = basic_view(x, key)
        p = tr.prims
        val = tr.lift(value)
        if np.broadcast_shapes(val.shape, target.shape) != target.shape:
            raise ValueError(
                f"could not broadcast input array from shape {val.shape} into shape {target.shape}"
            )
        v = p.broadcast(p.cast(val._v(), target.dtype), target.shape)
        tr.write(target, v)
        return
    from . import advanced

    advanced.setitem(x, key, value)
