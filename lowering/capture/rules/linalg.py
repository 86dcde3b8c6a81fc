"""matmul and friends, all on `array.dot` (batched, explicit broadcasting).

Every contraction ends as one (B, M, K) x (B, K, N) `array.dot` in the result
dtype numpy picks. Integer products wrap exactly as numpy's (the reference runs
numpy's own matmul in that dtype). Boolean products (numpy: OR of ANDs) run as an
int64 count of true products, then `!= 0`: exact, the count cannot overflow.

dot/vdot/inner/outer/tensordot/einsum/trace take their operands as numpy does
(`asarray`: Python scalars are not weak here, `np.dot(f32, 2.0)` is float64).
A label repeated in one einsum operand (`'ii->i'`, `'ij,jj->i'`) takes that
operand's diagonal first, as a view, and the einsum goes on without repeats."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dialects.symbols import broadcast_shapes

from ..registry import rule
from ..traced import TracedArray
from ..tracer import Unsupported
from .common import check_out, normalize_axis, static_int, store_out
from .reductions import reduce, strong

_I64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)


def _shape(v) -> tuple[int, ...]:
    return tuple(v.type.get_shape())


def _prod(xs) -> int:
    return int(math.prod(xs))


def dot3(p, a, b, dt: np.dtype):
    """(B.., M, K) x (B.., K, N) in dtype dt (batch dims equal)."""
    if dt.kind == "b":
        return p.cast(p.dot(p.cast(a, _I64), p.cast(b, _I64)), _BOOL)
    return p.dot(p.cast(a, dt), p.cast(b, dt))


# ---- matmul ----------------------------------------------------------------
def matmul(tr, a, b, out=None, dtype=None, casting="same_kind", **kw):
    if kw.get("axes") is not None or kw.get("axis") is not None:
        raise Unsupported("matmul with axes=/axis=")
    if kw.get("where", True) is not True:
        raise Unsupported("where= in matmul")
    x, y = tr.lift(a), tr.lift(b)
    if x.ndim == 0 or y.ndim == 0:
        i = 0 if x.ndim == 0 else 1
        raise ValueError(f"matmul: Input operand {i} does not have enough dimensions (has 0, "
                         "gufunc core with signature (n?,k),(k,m?)->(n?,m?) requires 1)")
    from .ufuncs import resolve

    sig = None if dtype is None else (None, None, np.dtype(dtype))
    loop = resolve(np.matmul, (x, y), None, casting, sig)
    dt = loop[-1]
    out = check_out(out)
    if out is not None and getattr(out, "_readonly", False):
        raise ValueError("output array is read-only")  # numpy checks this first
    if out is not None and not np.can_cast(dt, out.dtype, casting):
        # numpy checks the output cast before any shape: its own error, on dummies
        np.matmul(np.zeros((1, 1), loop[0]), np.zeros((1, 1), loop[1]),
                  out=np.zeros((1, 1), out.dtype), casting=casting)
    p = tr.prims
    xv, yv = p.cast(x._v(), loop[0]), p.cast(y._v(), loop[1])
    xs, ys = x.shape, y.shape
    if x.ndim == 1:
        xv, xs = p.reshape(xv, (1, xs[0])), (1, xs[0])
    if y.ndim == 1:
        yv, ys = p.reshape(yv, (ys[0], 1)), (ys[0], 1)
    if xs[-1] != ys[-2]:
        raise ValueError(
            f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
            f"signature (n?,k),(k,m?)->(n?,m?) (size {ys[-2]} is different from {xs[-1]})"
        )
    batch = broadcast_shapes(xs[:-2], ys[:-2])
    xv = p.broadcast(xv, batch + xs[-2:])
    yv = p.broadcast(yv, batch + ys[-2:])
    # the loop's input dtypes are its output dtype for every numeric matmul loop
    r = p.cast(dot3(p, xv, yv, np.dtype(loop[0])), dt)
    shape = batch + ((xs[-2],) if x.ndim > 1 else ()) + ((ys[-1],) if y.ndim > 1 else ())
    r = p.reshape(r, shape)
    res = tr.wrap(r, scalar=shape == ())
    if out is None:
        return res
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"matmul: output operand has a mismatch in its core or broadcast "
                         f"dimensions (expected {shape}, got {tuple(out.shape)})")
    return store_out(tr, out, res, casting, "matmul")


rule(np.matmul)(lambda tr, a, b, /, out=None, **k: matmul(tr, a, b, out=out, **k))


# ---- dot / vdot / inner / outer --------------------------------------------
def _multiply(tr, x: TracedArray, y: TracedArray, dt: np.dtype) -> TracedArray:
    """numpy's dot/inner with a 0-d operand: an element-wise product in dt."""
    p = tr.prims
    shape = broadcast_shapes(x.shape, y.shape)
    xv = p.broadcast(p.cast(x._v(), dt), shape)
    yv = p.broadcast(p.cast(y._v(), dt), shape)
    fn = "logical_and" if dt.kind == "b" else "multiply"
    return tr.wrap(p.ufunc(fn, [xv, yv], dt), scalar=shape == ())


def _contract(tr, av, bv, dt):
    """(M, K) x (K, N) -> (M, N) in dt."""
    return dot3(tr.prims, av, bv, dt)


@rule(np.dot)
def dot(tr, a, b, out=None):
    if out is not None:
        raise Unsupported("np.dot with out=")
    x, y = strong(tr, a), strong(tr, b)
    dt = np.result_type(x.dtype, y.dtype)
    if x.ndim == 0 or y.ndim == 0:
        r = _multiply(tr, x, y, dt)
        return r if x.ndim == 0 and y.ndim == 0 else tr.wrap(r._v())
    p = tr.prims
    kb = 0 if y.ndim == 1 else y.ndim - 2
    K = x.shape[-1]
    if K != y.shape[kb]:
        raise ValueError(f"shapes {_fmt(x.shape)} and {_fmt(y.shape)} not aligned: {K} "
                         f"(dim {x.ndim - 1}) != {y.shape[kb]} (dim {kb})")
    av = p.reshape(x._v(), (_prod(x.shape[:-1]), K))
    if y.ndim == 1:
        bv = p.reshape(y._v(), (K, 1))
        shape = x.shape[:-1]
    else:
        perm = (y.ndim - 2,) + tuple(range(y.ndim - 2)) + (y.ndim - 1,)
        bv = p.transpose(y._v(), perm)
        bv = p.reshape(bv, (K, _prod(y.shape[:-2]) * y.shape[-1]))
        shape = x.shape[:-1] + y.shape[:-2] + y.shape[-1:]
    r = p.reshape(_contract(tr, av, bv, dt), shape)
    return tr.wrap(r, scalar=shape == ())


def _fmt(shape) -> str:
    return "(" + ",".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


@rule(np.vdot)
def vdot(tr, a, b, /):
    x, y = strong(tr, a), strong(tr, b)
    dt = np.result_type(x.dtype, y.dtype)
    if x.size != y.size:
        raise ValueError(f"cannot reshape array of size {y.size} into shape ({x.size},)")
    p = tr.prims
    av = p.reshape(x._v(), (1, x.size))
    bv = p.reshape(y._v(), (y.size, 1))
    return tr.wrap(p.reshape(_contract(tr, av, bv, dt), ()), scalar=True)


@rule(np.inner)
def inner(tr, a, b, /):
    x, y = strong(tr, a), strong(tr, b)
    dt = np.result_type(x.dtype, y.dtype)
    if x.ndim == 0 or y.ndim == 0:
        r = _multiply(tr, x, y, dt)
        return r if x.ndim == 0 and y.ndim == 0 else tr.wrap(r._v())
    K = x.shape[-1]
    if K != y.shape[-1]:
        bt = y.shape[-1:] + y.shape[:-1]
        raise ValueError(f"shapes {_fmt(x.shape)} and {_fmt(bt)} not aligned: {K} "
                         f"(dim {x.ndim - 1}) != {y.shape[-1]} (dim {max(y.ndim - 2, 0)})")
    p = tr.prims
    av = p.reshape(x._v(), (_prod(x.shape[:-1]), K))
    bv = p.transpose(p.reshape(y._v(), (_prod(y.shape[:-1]), K)), (1, 0))
    shape = x.shape[:-1] + y.shape[:-1]
    r = p.reshape(_contract(tr, av, bv, dt), shape)
    return tr.wrap(r, scalar=shape == ())


@rule(np.outer)
def outer(tr, a, b, out=None):
    from .ufuncs import call

    x, y = strong(tr, a), strong(tr, b)
    p = tr.prims
    xa = tr.wrap(p.reshape(x._v(), (x.size, 1)))
    yb = tr.wrap(p.reshape(y._v(), (1, y.size)))
    return call(tr, np.multiply, xa, yb, out=out)


# ---- tensordot -------------------------------------------------------------
@rule(np.tensordot)
def tensordot(tr, a, b, axes=2):
    if isinstance(axes, TracedArray):
        raise Unsupported("traced axes")
    try:
        iter(axes)
    except TypeError:
        n = static_int(axes, "axes")
        axes_a, axes_b = list(range(-n, 0)), list(range(n))
    else:
        axes_a, axes_b = axes
    try:
        na = len(axes_a)
        axes_a = list(axes_a)
    except TypeError:
        axes_a, na = [axes_a], 1
    try:
        nb = len(axes_b)
        axes_b = list(axes_b)
    except TypeError:
        axes_b, nb = [axes_b], 1
    x, y = strong(tr, a), strong(tr, b)
    as_, bs = x.shape, y.shape
    nda, ndb = x.ndim, y.ndim
    equal = na == nb
    if equal:
        for k in range(na):
            if as_[axes_a[k]] != bs[axes_b[k]]:
                equal = False
                break
            if axes_a[k] < 0:
                axes_a[k] += nda
            if axes_b[k] < 0:
                axes_b[k] += ndb
    if not equal:
        raise ValueError("shape-mismatch for sum")
    notin_a = [k for k in range(nda) if k not in axes_a]
    notin_b = [k for k in range(ndb) if k not in axes_b]
    K = _prod(as_[ax] for ax in axes_a)
    p = tr.prims
    at = p.reshape(p.transpose(x._v(), notin_a + axes_a), (_prod(as_[ax] for ax in notin_a), K))
    bt = p.reshape(p.transpose(y._v(), axes_b + notin_b), (K, _prod(bs[ax] for ax in notin_b)))
    dt = np.result_type(x.dtype, y.dtype)
    shape = tuple(as_[ax] for ax in notin_a) + tuple(bs[ax] for ax in notin_b)
    r = p.reshape(_contract(tr, at, bt, dt), shape)
    return tr.wrap(r)  # numpy's tensordot reshapes dot's result: always an ndarray


# ---- einsum ----------------------------------------------------------------
def _parse_einsum(subscripts: str, ndims: list[int]):
    """Labels per operand and of the output; '...' becomes fresh labels, right
    aligned across operands (numpy's broadcasting of ellipsis dims)."""
    s = subscripts.replace(" ", "")
    if "->" in s:
        ins, outs = s.split("->", 1)
        explicit = True
    else:
        ins, outs, explicit = s, "", False
    terms = ins.split(",")
    if len(terms) != len(ndims):
        raise ValueError("more operands provided to einstein sum function than specified "
                         "in the subscripts string" if len(ndims) > len(terms) else
                         "fewer operands provided to einstein sum function than specified "
                         "in the subscripts string")
    used = {c for c in s if c.isalpha()}
    pool = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in used]
    ell_n = 0
    per = []
    for t, nd in zip(terms, ndims):
        if "..." in t:
            pre, post = t.split("...", 1)
            e = nd - len(pre) - len(post)
            if e < 0:
                raise ValueError("einstein sum subscripts string contains too many subscripts "
                                 "for an operand")
            ell_n = max(ell_n, e)
            per.append((pre, e, post))
        else:
            per.append((t, -1, ""))
    ell = pool[:ell_n]
    labels = []
    for pre, e, post in per:
        if e < 0:
            labels.append(list(pre))
        else:
            labels.append(list(pre) + ell[ell_n - e:] + list(post))
    if explicit:
        if "..." in outs:
            pre, post = outs.split("...", 1)
            out = list(pre) + ell + list(post)
        else:
            out = list(outs)
    else:
        counts: dict[str, int] = {}
        for ls in labels:
            for c in ls:
                if c not in ell:
                    counts[c] = counts.get(c, 0) + 1
        out = ell + sorted(c for c, k in counts.items() if k == 1)
    return labels, out


@rule(np.einsum)
def einsum(tr, *operands, out=None, optimize=False, dtype=None, order="K", casting="safe"):
    if out is not None:
        raise Unsupported("np.einsum with out=")
    if not operands or not isinstance(operands[0], str):
        raise Unsupported("einsum in the operand/sublist form")
    subscripts, ops = operands[0], [strong(tr, o) for o in operands[1:]]
    # numpy validates the subscripts and decides the dtype: on small dummies (a dim
    # kept at 0 or 1, label sizes are checked below)
    dummies = [np.zeros(tuple(min(d, 1) for d in o.shape), o.dtype) for o in ops]
    dt = np.asarray(np.einsum(subscripts, *dummies, dtype=dtype, casting=casting)).dtype
    labels, out_labels = _parse_einsum(subscripts, [o.ndim for o in ops])
    if any(len(set(ls)) != len(ls) for ls in labels):
        return _einsum_diagonals(tr, subscripts, ops, labels, out_labels, dtype, casting)
    sizes: dict[str, int] = {}
    for ls, o in zip(labels, ops):
        for c, n in zip(ls, o.shape):
            if sizes.get(c, 1) == 1:
                sizes[c] = n
            elif n != 1 and n != sizes[c]:
                raise ValueError("operands could not be broadcast together with remapped "
                                 f"shapes (label {c!r}: {sizes[c]} vs {n})")
    p = tr.prims
    # a pure transpose of one operand is a view in numpy
    if (len(ops) == 1 and sorted(labels[0]) == sorted(out_labels) and ops[0].dtype == dt):
        from ..views import TransposeStep

        perm = tuple(labels[0].index(c) for c in out_labels)
        if perm == tuple(range(len(perm))):
            return ops[0][...] if ops[0].ndim else tr.wrap(ops[0]._v(), scalar=True)
        return tr.view(ops[0], TransposeStep(perm))
    out_shape = tuple(sizes[c] for c in out_labels)
    if any(sizes[c] == 0 for c in sizes if c not in out_labels):
        # every output element is an empty sum: numpy gives 0 whatever the other
        # operands hold (summing a label away early would turn 0 * NaN into NaN)
        return tr.wrap(p.broadcast(p.constant(0, dt), out_shape), scalar=not out_labels)
    work_dt = _I64 if dt.kind == "b" else dt
    terms = []
    for ls, o in zip(labels, ops):
        v = p.cast(o._v(), dt)
        terms.append((list(ls), p.cast(v, work_dt)))

    def needed(i):
        keep = set(out_labels)
        for ls, _ in terms[i + 1:]:
            keep.update(ls)
        return keep

    def sum_out(ls, v, keep):
        drop = [d for d, c in enumerate(ls) if c not in keep]
        if not drop:
            return ls, v
        v = p.reduce(v, "sum", drop)
        return [c for c in ls if c in keep], v

    cur_l, cur_v = sum_out(*terms[0], needed(0))
    for i in range(1, len(terms)):
        keep = needed(i)
        bl, bv = terms[i]
        bl, bv = sum_out(bl, bv, keep | set(cur_l))
        cur_l, cur_v = sum_out(cur_l, cur_v, keep | set(bl))
        cur_l, cur_v = _einsum_pair(p, cur_l, cur_v, bl, bv, keep, sizes, work_dt)
    cur_l, cur_v = sum_out(cur_l, cur_v, set(out_labels))
    # labels of size 1 in every operand that they appear in may still need broadcasting
    perm = [cur_l.index(c) for c in out_labels]
    v = p.transpose(cur_v, perm)
    v = p.broadcast(v, tuple(sizes[c] for c in out_labels))
    if dt.kind == "b":
        v = p.cast(v, _BOOL)
    return tr.wrap(v, scalar=not out_labels)


def _einsum_diagonals(tr, subscripts, ops, labels, out_labels, dtype, casting):
    """A label repeated in one operand takes that operand's diagonal (`'ii->i'`,
    `'ij,jj->i'`, `'iii'`): the einsum of the diagonals, with each repeat
    collapsed. numpy returns a (writeable) view of a single operand when
    nothing is summed; so does this."""
    fresh = []
    for i, (ls, o) in enumerate(zip(labels, ops)):
        ls = list(ls)
        while len(set(ls)) != len(ls):
            c = next(c for c in ls if ls.count(c) > 1)
            a1 = ls.index(c)
            a2 = ls.index(c, a1 + 1)
            if o.shape[a1] != o.shape[a2]:
                which = "single operand" if len(ops) == 1 else f"operand {i}"
                raise ValueError(f"dimensions in {which} for collapsing index '{c}' don't "
                                 f"match ({o.shape[a1]} != {o.shape[a2]})")
            o = tr.view(o, EinsumDiagonalStep(a1, a2))
            ls = [x for d, x in enumerate(ls) if d not in (a1, a2)] + [c]
        fresh.append((ls, o))
    letters = {c: chr(ord("a") + k) if k < 26 else chr(ord("A") + k - 26)
               for k, c in enumerate(dict.fromkeys([c for ls, _ in fresh for c in ls] + out_labels))}
    sub = ",".join("".join(letters[c] for c in ls) for ls, _ in fresh)
    sub += "->" + "".join(letters[c] for c in out_labels)
    return einsum(tr, sub, *[o for _, o in fresh], dtype=dtype, casting=casting)


@dataclass(frozen=True)
class EinsumDiagonalStep:
    """The diagonal of axes axis1 == axis2 as a writeable view, moved last
    (numpy's einsum view: `np.einsum('ii->i', a)[0] = 1` writes into a)."""

    axis1: int
    axis2: int
    readonly = False

    def _perm(self, nd: int) -> list[int]:
        return [d for d in range(nd) if d not in (self.axis1, self.axis2)] + [self.axis1, self.axis2]

    def apply(self, p, base):
        shape = base.type.get_shape()
        perm = self._perm(len(shape))
        n = shape[self.axis1]
        keep = [shape[d] for d in perm[:-2]]
        v = p.reshape(p.transpose(base, perm), keep + [n * n])
        return p.slice(v, [0] * len(keep) + [0], [1] * len(keep) + [n + 1], keep + [n])

    def update(self, p, base, new):
        shape = base.type.get_shape()
        perm = self._perm(len(shape))
        n = shape[self.axis1]
        keep = [shape[d] for d in perm[:-2]]
        flat = p.reshape(p.transpose(base, perm), keep + [n * n])
        flat = p.insert_slice(new, flat, [0] * len(keep) + [0], [1] * len(keep) + [n + 1])
        inv = [int(i) for i in np.argsort(perm)]
        return p.transpose(p.reshape(flat, [shape[d] for d in perm]), inv)

    def np_apply(self, arr: np.ndarray) -> np.ndarray:
        perm = self._perm(arr.ndim)
        t = arr.transpose(perm)
        s = t.strides
        return np.lib.stride_tricks.as_strided(t, t.shape[:-1], s[:-2] + (s[-2] + s[-1],))


def _einsum_pair(p, al, av, bl, bv, keep, sizes, dt):
    """Contract two labelled operands; labels in both but not kept are summed."""
    batch = [c for c in al if c in bl and c in keep]
    contr = [c for c in al if c in bl and c not in keep]
    a_only = [c for c in al if c not in bl]
    b_only = [c for c in bl if c not in al]

    def arrange(ls, v, order):
        v = p.transpose(v, [ls.index(c) for c in order])
        return p.broadcast(v, tuple(sizes[c] for c in order))

    A = arrange(al, av, batch + a_only + contr)
    B = arrange(bl, bv, batch + contr + b_only)
    nb = tuple(sizes[c] for c in batch)
    M = _prod(sizes[c] for c in a_only)
    K = _prod(sizes[c] for c in contr)
    N = _prod(sizes[c] for c in b_only)
    A = p.reshape(A, nb + (M, K))
    B = p.reshape(B, nb + (K, N))
    if dt.kind == "b":
        raise AssertionError("bool einsum runs in int64")
    r = p.dot(A, B)
    r = p.reshape(r, nb + tuple(sizes[c] for c in a_only) + tuple(sizes[c] for c in b_only))
    return batch + a_only + b_only, r


# ---- trace -------------------------------------------------------------------
def diagonal_value(tr, x: TracedArray, offset: int, axis1: int, axis2: int):
    """numpy's `diagonal(x, offset, axis1, axis2)` as a value: the two axes are
    removed and the diagonal appended as the last axis."""
    if x.ndim < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    a1, a2 = normalize_axis(axis1, x.ndim), normalize_axis(axis2, x.ndim)
    if a1 == a2:
        raise ValueError("axis1 and axis2 cannot be the same")
    p = tr.prims
    rest = [d for d in range(x.ndim) if d not in (a1, a2)]
    n1, n2 = x.shape[a1], x.shape[a2]
    pre = tuple(x.shape[d] for d in rest)
    k = static_int(offset, "offset")
    cnt = max(0, min(n1 - max(0, -k), n2 - max(0, k)))
    if cnt == 0:
        return p.broadcast(p.constant(0, x.dtype), pre + (0,))
    v = p.reshape(p.transpose(x._v(), rest + [a1, a2]), pre + (n1 * n2,))
    start = k if k >= 0 else -k * n2
    return p.slice(v, (0,) * len(pre) + (start,), (1,) * len(pre) + (n2 + 1,), pre + (cnt,))


@rule(np.trace)
def trace(tr, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    x = strong(tr, a)
    d = tr.wrap(diagonal_value(tr, x, offset, axis1, axis2))
    return reduce(tr, d, "sum", -1, dtype, out)
