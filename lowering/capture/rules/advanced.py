"""Integer-array ("advanced") indexing: gathers and scatters.

numpy's rule, followed literally: the basic part of the key (slices, None) is
applied first as a view; the advanced indices (integer arrays, integers, and
boolean masks turned into their `nonzero()`) broadcast to one shape B; the
dims they index are replaced by B, in place when the advanced indices are next
to each other in the key, else at the front. One advanced index is one
`array.gather` along its axis; several are flattened into one index over the
product of their dims (each first checked and wrapped by gathering from an
iota, so out-of-range values still fail at run time as numpy's do).

Boolean masks that are traced values have data-dependent result shapes: a
graph break (except `x[mask] = scalar`, which is a select). Masks that are
Python/numpy constants are turned into integer indices while tracing."""

from __future__ import annotations

import operator
from dataclasses import dataclass

import numpy as np

from dialects.dtypes import kind as dtype_kind
from dialects.symbols import broadcast_shapes

from ..registry import rule, ufunc_method
from ..traced import TracedArray
from ..tracer import Unsupported
from .common import check_out, normalize_axis, store_out
from .indexing import _is_basic, _is_int, _shape_str, basic_view, fit_value, value_for

_BAD_INDEX = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and "
              "integer or boolean arrays are valid indices")
_I64 = np.dtype(np.int64)


class TracedMask(Exception):
    """The key holds a boolean mask that is a traced value."""

    def __init__(self, mask: TracedArray, dim: int, only: bool):
        self.mask, self.dim, self.only = mask, dim, only


def is_source(tr, a) -> bool:
    """a is a caller/global array read at call time (never a constant)."""
    i = tr.source_ids.get(id(a))
    return i is not None and tr.sources[i] is a


def _contains_traced(x) -> bool:
    if isinstance(x, TracedArray):
        return True
    if isinstance(x, (list, tuple)):
        return any(_contains_traced(e) for e in x)
    return False


def index_array(tr, k):
    """An index component as a TracedArray (values known only at run time) or a
    constant numpy array."""
    if isinstance(k, TracedArray):
        return k
    if isinstance(k, np.ndarray):
        return tr.lift(k) if is_source(tr, k) else k
    if isinstance(k, (list, tuple)):
        if _contains_traced(k):
            return tr.lift_nested(k)
        arr = np.asarray(k)
        if arr.size == 0 and arr.dtype.kind == "f":
            arr = arr.astype(np.intp)  # numpy reads `[]` as an empty integer index
        return arr
    raise IndexError(_BAD_INDEX)


@dataclass
class Adv:
    """One advanced index over one dim of the basic view."""

    index: np.ndarray | TracedArray  # a constant is intp
    dim: int  # dim of x it indexes, for numpy's messages (-1: a new axis)


def parse(x: TracedArray, key):
    """(basic key for the view, advanced index per view dim or None)."""
    tr = x._t
    keys = key if isinstance(key, tuple) else (key,)
    comps = []
    for k in keys:
        if k is None or k is Ellipsis or isinstance(k, slice):
            comps.append(("basic", k, 0 if k is None or k is Ellipsis else 1))
        elif _is_int(k):
            comps.append(("arr", np.array(operator.index(k), dtype=np.intp), 1))
        elif isinstance(k, (bool, np.bool_)):
            comps.append(("bool0", bool(k), 0))
        else:
            a = index_array(tr, k)
            if a.dtype == np.bool_:
                if a.ndim == 0 and not isinstance(a, TracedArray):
                    comps.append(("bool0", bool(a), 0))
                else:
                    comps.append(("mask", a, a.ndim))
            elif a.dtype.kind in "iu":
                comps.append(("arr", a, 1))
            elif isinstance(k, (list, tuple)):
                raise IndexError(_BAD_INDEX)
            else:
                raise IndexError("arrays used as indices must be of integer (or boolean) type")
    if sum(1 for c in comps if c[1] is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(c[2] for c in comps)
    if used > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, but "
                         f"{used} were indexed")
    if not any(c[1] is Ellipsis for c in comps):
        comps.append(("basic", Ellipsis, 0))
    bkey: list = []
    advs: list[Adv | None] = []
    d = 0
    for kind, k, _ in comps:
        if kind == "basic":
            if k is Ellipsis:
                bkey.extend([slice(None)] * (x.ndim - used))
                advs.extend([None] * (x.ndim - used))
                d += x.ndim - used
            else:
                bkey.append(k)
                advs.append(None)
                d += k is not None
        elif kind == "arr":
            bkey.append(slice(None))
            advs.append(Adv(k, d))
            d += 1
        elif kind == "bool0":  # a new axis of length 1 indexed by [0] or []
            bkey.append(None)
            advs.append(Adv(np.zeros(1 if k else 0, dtype=np.intp), -1))
        else:  # mask
            for i in range(k.ndim):
                if k.shape[i] != x.shape[d + i]:
                    raise IndexError(
                        f"boolean index did not match indexed array along axis {d + i}; size "
                        f"of axis is {x.shape[d + i]} but size of corresponding boolean axis "
                        f"is {k.shape[i]}")
            if isinstance(k, TracedArray):
                only = all(c[0] == "basic" and (c[1] is Ellipsis or c[1] == slice(None))
                           for c in comps if c[1] is not k)
                raise TracedMask(k, d, only and d == 0)
            for nz in np.nonzero(k):
                bkey.append(slice(None))
                advs.append(Adv(nz.astype(np.intp), d))
                d += 1
    return tuple(bkey), advs


@dataclass
class Plan:
    """x[key] with advanced indices, resolved against the basic view y."""

    y: TracedArray
    pos: list[int]  # view dims indexed by advanced indices
    advs: list[Adv]
    bshape: tuple[int, ...]  # broadcast shape of the advanced indices
    adjacent: bool
    rshape: tuple[int, ...]  # the result's shape

    @property
    def rest(self) -> list[int]:
        return [d for d in range(self.y.ndim) if d not in self.pos]


def plan(x: TracedArray, key) -> Plan:
    bkey, advs = parse(x, key)
    y = basic_view(x, bkey)
    pos = [i for i, a in enumerate(advs) if a is not None]
    used = [a for a in advs if a is not None]
    shapes = [tuple(a.index.shape) for a in used]
    try:
        bshape = tuple(broadcast_shapes(*shapes))
    except ValueError:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together with "
                         "shapes " + "".join(_shape_str(s) + " " for s in shapes)) from None
    for p, a in zip(pos, used):
        n = y.shape[p]
        if not isinstance(a.index, TracedArray) and a.index.size:
            bad = (a.index >= n) | (a.index < -n)
            if bad.any():
                raise IndexError(f"index {a.index[bad].flat[0]} is out of bounds for axis "
                                 f"{max(a.dim, 0)} with size {n}")
    adjacent = pos == list(range(pos[0], pos[0] + len(pos)))
    rest = [y.shape[d] for d in range(y.ndim) if d not in pos]
    if adjacent:
        rshape = (*rest[:pos[0]], *bshape, *rest[pos[0]:])
    else:
        rshape = (*bshape, *rest)
    return Plan(y, pos, used, bshape, adjacent, tuple(rshape))


def _traced_index(p, a: TracedArray):
    return p.cast(a._v(), _I64)


def flat_index(tr, pl: Plan):
    """One int64 index of shape B over the advanced dims taken together (C
    order), or for a single advanced index that index itself."""
    p = tr.prims
    if len(pl.advs) == 1:
        a = pl.advs[0].index
        return _traced_index(p, a) if isinstance(a, TracedArray) else p.dense(a.astype(_I64))
    sizes = [pl.y.shape[d] for d in pl.pos]
    strides = [int(np.prod(sizes[j + 1:], dtype=np.int64)) for j in range(len(sizes))]
    const = None
    traced = []
    for a, n, s in zip(pl.advs, sizes, strides):
        if not isinstance(a.index, TracedArray):
            c = (a.index % n if n else a.index).astype(_I64) * s
            const = c if const is None else const + c
        else:
            # gather from an iota: numpy's bounds check and negative wrap, at run time
            norm = p.gather(p.iota((n,), 0, _I64), _traced_index(p, a.index), 0)
            if s != 1:
                norm = p.ufunc("multiply", [norm, p.broadcast(p.constant(s, _I64), a.index.shape)], _I64)
            traced.append(p.broadcast(norm, pl.bshape))
    vals = traced + ([p.broadcast(p.dense(const), pl.bshape)] if const is not None else [])
    out = vals[0]
    for v in vals[1:]:
        out = p.ufunc("add", [out, v], _I64)
    return out


def _to_front(pl: Plan, v, nb: int, inverse: bool = False):
    """Between the result layout and (B..., rest...) when the advanced dims stay in place."""
    if not pl.adjacent or len(pl.advs) == 1:
        return v
    p0, nrest = pl.pos[0], len(pl.rest)
    perm = [nb + i for i in range(p0)] + list(range(nb)) + [nb + i for i in range(p0, nrest)]
    if inverse:
        perm = [int(i) for i in np.argsort(perm)]
    return pl.y._t.prims.transpose(v, perm)


def _flatten_advanced(pl: Plan, v):
    """The view's value with its advanced dims moved to the front and merged."""
    p = pl.y._t.prims
    rest = pl.rest
    n = int(np.prod([pl.y.shape[d] for d in pl.pos], dtype=np.int64))
    vt = p.transpose(v, pl.pos + rest)
    return p.reshape(vt, (n, *[pl.y.shape[d] for d in rest]))


def _unflatten_advanced(pl: Plan, v):
    p = pl.y._t.prims
    rest = pl.rest
    perm = pl.pos + rest
    v = p.reshape(v, tuple(pl.y.shape[d] for d in perm))
    return p.transpose(v, [int(i) for i in np.argsort(perm)])


def gather(pl: Plan):
    tr = pl.y._t
    p = tr.prims
    idx = flat_index(tr, pl)
    if len(pl.advs) == 1:
        return p.gather(pl.y._v(), idx, pl.pos[0])
    g = p.gather(_flatten_advanced(pl, pl.y._v()), idx, 0)
    return _to_front(pl, g, len(pl.bshape))


def scatter(pl: Plan, upd, mode: str, base=None):
    """The view's new value (or `base`'s, a value of the view's shape) with
    `upd` (result-shaped) scattered in."""
    tr = pl.y._t
    p = tr.prims
    idx = flat_index(tr, pl)
    base = pl.y._v() if base is None else base
    if len(pl.advs) == 1:
        return p.scatter(base, idx, upd, pl.pos[0], mode)
    upd = _to_front(pl, upd, len(pl.bshape), inverse=True)
    s = p.scatter(_flatten_advanced(pl, base), idx, upd, 0, mode)
    return _unflatten_advanced(pl, s)


# ---- x[key], x[key] = v ---------------------------------------------------------

def getitem(x: TracedArray, key):
    tr = x._t
    try:
        pl = plan(x, key)
    except TracedMask:
        return tr.eager_call("boolean-mask indexing has a data-dependent shape",
                             operator.getitem, (x, key), {})
    return tr.wrap(gather(pl), scalar=pl.rshape == ())


def _mask_assign(x: TracedArray, m: TracedMask, value) -> bool:
    """x[mask] = v as a select when v is one value per masked row (its shape
    does not depend on how many elements the mask selects)."""
    tr = x._t
    p = tr.prims
    rest = x.shape[m.mask.ndim:]
    val = value_for(tr, value, x.dtype)
    try:
        v = fit_value(tr, val, (1, *rest), lambda: ValueError())
    except ValueError:
        return False
    v = p.broadcast(p.reshape(v, rest), x.shape)
    c = p.broadcast(p.reshape(m.mask._v(), m.mask.shape + (1,) * len(rest)), x.shape)
    tr.write(x, p.select(c, v, x._v()))
    return True


def setitem(x: TracedArray, key, value) -> None:
    tr = x._t
    try:
        pl = plan(x, key)
    except TracedMask as m:
        if m.only and _mask_assign(x, m, value):
            return
        tr.eager_call("boolean-mask assignment with a value whose shape depends on the mask",
                      operator.setitem, (x, key, value), {})
        return
    val = value_for(tr, value, x.dtype)
    upd = fit_value(tr, val, pl.rshape, lambda: ValueError(
        f"shape mismatch: value array of shape {_shape_str(val.shape)} could not be broadcast "
        f"to indexing result of shape {_shape_str(pl.rshape)}"))
    tr.write(pl.y, scatter(pl, upd, "set"))


def _target(tr, a) -> TracedArray:
    """The array a mutating function writes into: traced, or a caller/global
    array (written back). Other concrete arrays are mutated eagerly."""
    if isinstance(a, TracedArray) or (isinstance(a, np.ndarray) and is_source(tr, a)):
        return tr.lift(a)
    raise Unsupported("the destination is a concrete array made outside the graph")


# ---- take, take_along_axis, put_along_axis ------------------------------------------

@rule(np.take)
def take(tr, a, indices, axis=None, out=None, mode="raise"):
    x = tr.lift(a)
    if axis is None:
        x = np.ravel(x)
        ax = 0
    else:
        ax = normalize_axis(axis, x.ndim)
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    n = x.shape[ax]
    idx = index_array(tr, indices) if not isinstance(indices, (int, np.integer, float)) \
        else np.asarray(indices)
    p = tr.prims
    if isinstance(idx, TracedArray):
        if idx.size and n == 0:
            raise IndexError("cannot do a non-empty take from an empty axes.")
        iv = p.cast(idx._v(), _I64)
        if mode == "wrap":
            iv = p.ufunc("remainder", [iv, p.broadcast(p.constant(n, _I64), idx.shape)], _I64)
        elif mode == "clip":
            iv = p.ufunc("maximum", [iv, p.broadcast(p.constant(0, _I64), idx.shape)], _I64)
            iv = p.ufunc("minimum", [iv, p.broadcast(p.constant(n - 1, _I64), idx.shape)], _I64)
    else:
        c = np.asarray(idx).astype(np.intp)
        if c.size and n == 0:
            raise IndexError("cannot do a non-empty take from an empty axes.")
        if mode == "wrap":
            c = c % n if n else c
        elif mode == "clip":
            c = np.clip(c, 0, n - 1)
        elif c.size and ((c >= n) | (c < -n)).any():
            raise IndexError(f"index {c[(c >= n) | (c < -n)].flat[0]} is out of bounds for axis "
                             f"{ax} with size {n}")
        iv = p.dense(c.astype(_I64))
    r = p.gather(x._v(), iv, ax)
    res = tr.wrap(r, scalar=r.type.get_shape() == ())
    out = check_out(out)
    return res if out is None else store_out(tr, out, res, "unsafe", "take")


def _along_axis_index(shape, indices, axis: int):
    """numpy's `_make_along_axis_idx`: orthogonal aranges with `indices` at `axis`."""
    if indices.dtype.kind not in "iu":
        raise IndexError("`indices` must be an integer array")
    if len(shape) != indices.ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    ones = (1,) * indices.ndim
    fancy = []
    for d, n in enumerate(shape):
        if d == axis:
            fancy.append(indices)
        else:
            fancy.append(np.arange(n).reshape(ones[:d] + (-1,) + ones[d + 1:]))
    return tuple(fancy)


def _along_axis(tr, arr, indices, axis):
    x = arr if isinstance(arr, TracedArray) else tr.lift(arr)
    idx = index_array(tr, indices)
    if axis is None:
        if idx.ndim != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")
        return np.ravel(x), idx, 0
    return x, idx, normalize_axis(axis, x.ndim)


@rule(np.take_along_axis)
def take_along_axis(tr, arr, indices, axis=-1):
    x, idx, ax = _along_axis(tr, arr, indices, axis)
    return getitem(x, _along_axis_index(x.shape, idx, ax))


@rule(np.put_along_axis)
def put_along_axis(tr, arr, indices, values, axis):
    x = _target(tr, arr)
    base = x
    x, idx, ax = _along_axis(tr, x, indices, axis)
    if axis is None and x._st is not base._st:
        # numpy writes into `np.array(arr.flat)`: a view of a C-contiguous
        # array, else a read-only copy
        raise ValueError("assignment destination is read-only")
    setitem(x, _along_axis_index(x.shape, idx, ax), values)


# ---- np.add.at ------------------------------------------------------------------------

def _kind(v):
    if isinstance(v, TracedArray):
        return v._dtype_operand()
    if isinstance(v, (bool, int, float)):
        return type(v)
    return np.asarray(v).dtype


@ufunc_method("at")
def ufunc_at(tr, ufunc, a, indices, b=None):
    if ufunc is not np.add:
        raise Unsupported(f"{ufunc.__name__}.at is not captured (only add.at)")
    if b is None:
        raise ValueError("second operand needed for ufunc")
    x = _target(tr, a)
    if x._readonly:  # numpy's ufunc.at writes into read-only (even broadcast) arrays
        raise Unsupported("add.at into a read-only array")
    try:
        loop = np.add.resolve_dtypes((x.dtype, _kind(b), None), casting="unsafe")
    except TypeError as e:
        raise type(e)(str(e)) from None
    if any(dtype_kind(d) not in "biuf" for d in loop):
        raise Unsupported(f"add.at with {loop[-1]}")
    p = tr.prims
    if _is_basic(indices):  # no element twice: one read-add-write
        y = basic_view(x, indices)
        bv = fit_value(tr, value_for(tr, b, loop[1]), y.shape, _not_broadcastable, strict=True)
        s = p.ufunc("add", [p.cast(y._v(), loop[0]), bv], loop[2])
        tr.write(y, p.cast(s, x.dtype))
        return
    try:
        pl = plan(x, indices)
    except TracedMask:
        raise Unsupported("add.at with a boolean mask that is a traced value") from None
    bv = value_for(tr, b, loop[1])
    upd = fit_value(tr, bv, pl.rshape, _not_broadcastable, strict=True)
    dt, out = x.dtype, loop[2]
    if out == dt or (dt.kind in "iu" and out.kind in "iu") or (dtype_kind(dt) == "f" and dtype_kind(out) == "f"):
        # one scatter-add: exact for equal and integer (modular) types; for a
        # narrower float destination the rounding happens once instead of per add
        acc = dt if dt.kind in "iub" else out
        new = scatter(pl, p.cast(upd, acc), "add", base=p.cast(pl.y._v(), acc))
        tr.write(pl.y, p.cast(new, dt))
        return
    # numpy rounds into the destination's type after every add: equal only
    # when no element is hit twice, which constant indices can show
    if any(isinstance(ad.index, TracedArray) for ad in pl.advs) or not _unique(pl):
        raise Unsupported(f"add.at into {dt} from a {out} loop with repeated or traced indices")
    cur = gather(pl)
    s = p.ufunc("add", [p.cast(cur, out), p.cast(upd, out)], out)
    tr.write(pl.y, scatter(pl, p.cast(s, dt), "set"))


def _not_broadcastable():
    return ValueError("array is not broadcastable to correct shape")


def _unique(pl: Plan) -> bool:
    sizes = [pl.y.shape[d] for d in pl.pos]
    flat = np.zeros(pl.bshape, dtype=np.int64)
    for a, n in zip(pl.advs, sizes):
        flat = flat * max(n, 1) + np.broadcast_to(a.index % max(n, 1), pl.bshape)
    return len(np.unique(flat)) == flat.size
