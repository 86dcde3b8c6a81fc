"""Shape and view functions. Views (transpose, reshape of compatible layouts,
expand_dims, squeeze, swapaxes, moveaxis, broadcast_to) are view steps sharing
the base's storage, so writes through them reach the base as in numpy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dialects.symbols import SymDim, broadcast_shapes, symbolic_reshape

from ..registry import rule
from ..traced import TracedArray
from ..tracer import Unsupported
from ..views import BroadcastStep, TransposeStep, np_apply_all, strided_dummy
from .common import normalize_axis, static_int, static_shape


def _resolve_shape(shape, size: int) -> tuple[int, ...]:
    shape = static_shape(shape)
    if isinstance(size, SymDim) or any(isinstance(n, SymDim) for n in shape):
        return symbolic_reshape(shape, size)
    # numpy computes -1 and validates; ask it on a layout-only dummy
    return strided_dummy((size,), (0,), np.uint8).reshape(shape).shape


def _layout(x: TracedArray) -> np.ndarray:
    """A data-less numpy array with x's layout (shape and strides)."""
    st = x._st
    return np_apply_all(x._steps, strided_dummy(st.shape, st.strides, st.dtype))


def _order_of(x: TracedArray, order) -> str:
    """'A' means F when x is Fortran- and not C-contiguous (numpy), else C."""
    if order is None:
        return "C"
    if order not in ("C", "F", "A", "K"):
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
    if order == "A":
        lay = _layout(x)
        return "F" if lay.flags.f_contiguous and not lay.flags.c_contiguous else "C"
    return order


def _reshape_f(tr, x: TracedArray, shape, copy=None) -> TracedArray:
    """Fortran-order reshape: reverse the dims, reshape in C order, reverse back."""
    t = np.transpose(x)
    if copy:
        t = tr.wrap(t._v())
    elif copy is False and not tr.reshape_is_view(t, tuple(shape[::-1])):
        raise ValueError("Unable to avoid creating a copy while reshaping.")
    return np.transpose(tr.reshape(t, tuple(shape[::-1])))


@rule(np.reshape)
def reshape(tr, a, /, shape=None, order="C", *, newshape=None, copy=None):
    if shape is None:
        shape = newshape
    x = tr.lift(a)
    if order not in ("C", "F", "A"):
        raise ValueError(f"order must be one of 'C', 'F', 'A' (got {order!r})")
    shape = _resolve_shape(shape, x.size)
    if _order_of(x, order) == "F":
        return _reshape_f(tr, x, shape, copy)
    if copy:
        return tr.wrap(tr.prims.reshape(x._v(), shape))
    if copy is False and not tr.reshape_is_view(x, shape):
        raise ValueError("Unable to avoid creating a copy while reshaping.")
    return tr.reshape(x, shape)


@rule(np.ravel)
def ravel(tr, a, order="C"):
    x = tr.lift(a)
    order = _order_of(x, order)
    if order == "K":
        lay = _layout(x)
        if lay.flags.c_contiguous or x.ndim <= 1:
            order = "C"
        elif lay.flags.f_contiguous:
            order = "F"
        elif all(s != 0 for s, n in zip(lay.strides, lay.shape) if n > 1):
            # numpy's K order: axes by decreasing |stride|, each read forwards
            perm = sorted(range(x.ndim), key=lambda d: -abs(lay.strides[d]))
            return tr.reshape(np.transpose(x, perm), (x.size,))
        else:
            raise Unsupported("ravel(order='K') of a broadcast (zero-stride) view")
    if order == "F":
        return _reshape_f(tr, x, (x.size,))
    return tr.reshape(x, (x.size,))


@rule(np.transpose)
def transpose(tr, a, axes=None):
    x = tr.lift(a)
    if x._scalar and x._weak is None and x.ndim == 0 and not axes:
        return x  # a numpy scalar's transpose is itself (a Python float's is a 0-d array)
    if axes is None:
        perm = tuple(range(x.ndim))[::-1]
    else:
        perm = tuple(normalize_axis(ax, x.ndim) for ax in axes)
        if sorted(perm) != list(range(x.ndim)):
            raise ValueError("axes don't match array")
    return tr.view(x, TransposeStep(perm))


@rule(np.swapaxes)
def swapaxes(tr, a, axis1, axis2):
    x = tr.lift(a)
    i, j = normalize_axis(axis1, x.ndim), normalize_axis(axis2, x.ndim)
    perm = list(range(x.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return tr.view(x, TransposeStep(tuple(perm)))


@rule(np.moveaxis)
def moveaxis(tr, a, source, destination):
    x = tr.lift(a)
    src = [source] if not isinstance(source, (tuple, list)) else list(source)
    dst = [destination] if not isinstance(destination, (tuple, list)) else list(destination)
    src = [normalize_axis(s, x.ndim, "source") for s in src]
    dst = [normalize_axis(d, x.ndim, "destination") for d in dst]
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number of elements")
    order = [n for n in range(x.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return tr.view(x, TransposeStep(tuple(order)))


@rule(np.expand_dims)
def expand_dims(tr, a, axis):
    x = tr.lift(a)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    nd = x.ndim + len(axes)
    axes = sorted(normalize_axis(ax, nd) for ax in axes)
    if len(set(axes)) != len(axes):
        raise ValueError("repeated axis")
    shape = list(x.shape)
    for ax in axes:
        shape.insert(ax, 1)
    return tr.reshape(x, tuple(shape))


@rule(np.squeeze)
def squeeze(tr, a, axis=None):
    x = tr.lift(a)
    if axis is None:
        shape = tuple(n for n in x.shape if n != 1)
    else:
        axes = axis if isinstance(axis, (tuple, list)) else (axis,)
        axes = {normalize_axis(ax, x.ndim) for ax in axes}
        for ax in axes:
            if x.shape[ax] != 1:
                raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
        shape = tuple(n for d, n in enumerate(x.shape) if d not in axes)
    return tr.reshape(x, shape)


@rule(np.broadcast_to)
def broadcast_to(tr, array, shape, subok=False):
    x = tr.lift(array)
    shape = static_shape(shape)
    if broadcast_shapes(x.shape, shape) != shape:
        raise ValueError(f"operands could not be broadcast together with remapped shapes [original->remapped]: {x.shape} and requested shape {shape}")
    return tr.view(x, BroadcastStep(shape))


@rule(np.ndarray.astype)
def astype(tr, x, dtype, casting="unsafe", copy=True):
    x = tr.lift(x)
    dt = np.dtype(dtype)
    if not np.can_cast(x.dtype, dt, casting=casting):
        raise TypeError(f"Cannot cast array data from {x.dtype!r} to {dt!r} according to the rule {casting!r}")
    if not copy and dt == x.dtype:
        return x
    from dialects.dtypes import supported

    if not supported(dt):
        raise Unsupported(f"astype to {dt}")
    from .ufuncs import transposed_operands

    if transposed_operands([x], x.shape):  # (in its memory's order: `ufuncs.apply`)
        return np.transpose(astype(tr, np.transpose(x), dt, casting, copy))
    return tr.wrap(tr.prims.cast(x._v(), dt), scalar=x._scalar)


@rule(np.copy)
def copy(tr, a, order="K", subok=False):
    x = tr.lift(a)
    return tr.wrap(x._v(), scalar=False)


@rule(np.asarray, np.asanyarray)
def asarray(tr, a, dtype=None, order=None, *, like=None, device=None, copy=None):
    if isinstance(a, (TracedArray, np.ndarray)):
        x = tr.lift(a)
    else:
        x = tr.lift_nested(a) if isinstance(a, (list, tuple)) else tr.lift(a)
        if not isinstance(a, (list, tuple)):
            x = tr.wrap(x._v())
    if dtype is not None and np.dtype(dtype) != x.dtype:
        return tr.wrap(tr.prims.cast(x._v(), np.dtype(dtype)))
    if copy or x._scalar or x._weak is not None:
        # a scalar becomes a new 0-d array; the scalar itself stays a scalar
        return tr.wrap(x._v())
    return x


@rule(np.ascontiguousarray)
def ascontiguousarray(tr, a, dtype=None, *, like=None):
    x = asarray(tr, a, dtype)
    if x.ndim == 0:
        return tr.reshape(x, (1,))  # numpy: at least 1-d
    if not _layout(x).flags.c_contiguous:
        return tr.wrap(x._v())
    return x


@rule(np.array)
def array(tr, object, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    x = asarray(tr, object, dtype)
    if copy and x is object:
        x = tr.wrap(x._v())
    if ndmin > x.ndim:
        x = tr.reshape(x, (1,) * (ndmin - x.ndim) + x.shape)
    return x


@rule(np.shape)
def shape(tr, a):
    return tr.lift(a).shape


@rule(np.ndim)
def ndim(tr, a):
    return tr.lift(a).ndim


@rule(np.size)
def size(tr, a, axis=None):
    x = tr.lift(a)
    return x.size if axis is None else x.shape[static_int(axis, "axis")]


# ---- static arguments -------------------------------------------------------------

def static_array(tr, v, what: str) -> np.ndarray:
    """An argument whose values decide shapes (repeats, sections, pad widths):
    it must be known while tracing, not a traced value nor a caller/global array
    (those are read at call time and their values are not guarded)."""
    from .advanced import is_source

    def check(e):
        if isinstance(e, TracedArray) or (isinstance(e, np.ndarray) and is_source(tr, e)):
            raise Unsupported(f"{what} must be static, got a traced value")
        if isinstance(e, (list, tuple)):
            for i in e:
                check(i)

    check(v)
    return np.asarray(v)


# ---- joining --------------------------------------------------------------------------

def _join_checks(xs: list[TracedArray], ax: int | None) -> None:
    """numpy's concatenate errors: ranks first (ax None), then the other dims."""
    nd = xs[0].ndim
    for i, x in enumerate(xs[1:], 1):
        if x.ndim != nd:
            raise ValueError(
                "all the input arrays must have same number of dimensions, but the array at "
                f"index 0 has {nd} dimension(s) and the array at index {i} has {x.ndim} "
                "dimension(s)")
    if ax is None:
        return
    for i, x in enumerate(xs[1:], 1):
        for d in range(nd):
            if d != ax and x.shape[d] != xs[0].shape[d]:
                raise ValueError(
                    "all the input array dimensions except for the concatenation axis must "
                    f"match exactly, but along dimension {d}, the array at index 0 has size "
                    f"{xs[0].shape[d]} and the array at index {i} has size {x.shape[d]}")


@rule(np.concatenate)
def concatenate(tr, arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    from .common import check_out, store_out

    if out is not None and dtype is not None:
        raise TypeError("concatenate() only takes `out` or `dtype` as an argument, but both "
                        "were provided.")
    xs = [tr.lift(a) for a in (list(arrays) if isinstance(arrays, TracedArray) else arrays)]
    if not xs:
        raise ValueError("need at least one array to concatenate")
    if axis is None:
        xs = [np.ravel(x) for x in xs]
        axis = 0
    if xs[0].ndim == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    _join_checks(xs, None)
    ax = normalize_axis(axis, xs[0].ndim)
    _join_checks(xs, ax)
    out = check_out(out)
    if dtype is not None:
        dt = np.dtype(dtype)
    elif out is not None:
        dt = out.dtype
    else:
        dt = np.result_type(*[x.dtype for x in xs])
    for x in xs:
        if not np.can_cast(x.dtype, dt, casting=casting):
            raise TypeError(f"Cannot cast array data from {x.dtype!r} to {dt!r} according to "
                            f"the rule {casting!r}")
    if out is None and _in_reverse_order(xs):
        # joined in their memory's order (contiguous reads and writes), the
        # result its transpose: F-ordered, as numpy's is for such arrays
        nd = xs[0].ndim
        return np.transpose(concatenate(tr, [np.transpose(x) for x in xs], nd - 1 - ax,
                                        dtype=dt, casting="unsafe"))
    p = tr.prims
    res = tr.wrap(p.concat([p.cast(x._v(), dt) for x in xs], ax))
    if out is None:
        return res
    if out.shape != res.shape:
        raise ValueError("Output array is the wrong shape")
    return store_out(tr, out, res, "unsafe", "concatenate")


def _in_reverse_order(xs: list[TracedArray]) -> bool:
    """Arrays of static sizes, each laid out in the reverse order of its
    axes where it has two of more than one element (`ufuncs._transposed`:
    the caller's F-ordered arrays, transposes of C-ordered ones), one such
    at least: an op over them walks memory contiguously in their
    transpose's order (numpy's result is then F-ordered too)."""
    from .ufuncs import _transposed

    if not xs or xs[0].ndim < 2 or any(type(d) is not int for x in xs for d in x.shape):
        return False
    full = [x for x in xs if sum(d > 1 for d in x.shape) >= 2]
    return bool(full) and all(_transposed(x) for x in full)


@rule(np.stack)
def stack(tr, arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    xs = [tr.lift(a) for a in (list(arrays) if isinstance(arrays, TracedArray) else arrays)]
    if not xs:
        raise ValueError("need at least one array to stack")
    if len({x.shape for x in xs}) != 1:
        raise ValueError("all input arrays must have the same shape")
    ax = normalize_axis(axis, xs[0].ndim + 1)
    if ax == 0 and out is None and _in_reverse_order(xs):
        # each array one block of the result, in its memory's order (numpy's
        # layout: the blocks outermost, each F-ordered); at other axes the
        # join below reverses all the axes (`concatenate`)
        nd = xs[0].ndim
        return np.transpose(stack(tr, [np.transpose(x) for x in xs], 0, dtype=dtype,
                                  casting=casting), (0, *range(nd, 0, -1)))
    return concatenate(tr, [np.expand_dims(x, ax) for x in xs], axis=ax, out=out, dtype=dtype,
                       casting=casting)


def _atleast(tr, a, n: int) -> TracedArray:
    """numpy's atleast_{1,2,3}d of one array (views: reshape / new axes)."""
    x = asarray(tr, a)
    if x.ndim >= n:
        return x
    if x.ndim == 0:
        return tr.reshape(x, (1,) * n)
    if n == 2 or x.ndim == 2:  # (n,) -> (1, n); (m, n) -> (m, n, 1)
        return np.expand_dims(x, 0 if n == 2 else 2)
    return np.expand_dims(x, (0, 2))  # (n,) -> (1, n, 1)


def _atleast_rule(n):
    def impl(tr, *arys):
        res = [_atleast(tr, a, n) for a in arys]
        return res[0] if len(res) == 1 else tuple(res)

    return impl


rule(np.atleast_1d)(_atleast_rule(1))
rule(np.atleast_2d)(_atleast_rule(2))
rule(np.atleast_3d)(_atleast_rule(3))


@rule(np.hstack)
def hstack(tr, tup, *, dtype=None, casting="same_kind"):
    arrs = [_atleast(tr, a, 1) for a in tup]
    ax = 0 if arrs and arrs[0].ndim == 1 else 1
    return concatenate(tr, arrs, axis=ax, dtype=dtype, casting=casting)


@rule(np.vstack)
def vstack(tr, tup, *, dtype=None, casting="same_kind"):
    return concatenate(tr, [_atleast(tr, a, 2) for a in tup], axis=0, dtype=dtype,
                       casting=casting)


@rule(np.dstack)
def dstack(tr, tup):
    return concatenate(tr, [_atleast(tr, a, 3) for a in tup], axis=2)


@rule(np.column_stack)
def column_stack(tr, tup):
    arrs = []
    for v in tup:
        x = asarray(tr, v)
        if x.ndim < 2:
            x = np.transpose(tr.reshape(x, (1,) * (2 - x.ndim) + x.shape))
        arrs.append(x)
    return concatenate(tr, arrs, axis=1)


# ---- splitting (views) ------------------------------------------------------------------

def _section_view(x: TracedArray, ax: int, start: int, stop: int) -> TracedArray:
    from .indexing import basic_view

    return basic_view(x, (slice(None),) * ax + (slice(start, stop),))


@rule(np.array_split)
def array_split(tr, ary, indices_or_sections, axis=0):
    x = tr.lift(ary)
    axis = static_int(axis, "axis")
    if not -x.ndim <= axis < x.ndim:
        raise IndexError("tuple index out of range")
    ax = axis % x.ndim
    total = x.shape[ax]
    try:
        n_sections = len(indices_or_sections) + 1
        points = [0] + [static_int(i, "split index") for i in
                        static_array(tr, indices_or_sections, "split indices").tolist()] + [total]
    except TypeError:
        n_sections = int(static_int(indices_or_sections, "sections"))
        if n_sections <= 0:
            raise ValueError("number sections must be larger than 0.") from None
        each, extras = divmod(total, n_sections)
        sizes = [0] + extras * [each + 1] + (n_sections - extras) * [each]
        points = np.cumsum(sizes).tolist()
    return [_section_view(x, ax, points[i], points[i + 1]) for i in range(n_sections)]


@rule(np.split)
def split(tr, ary, indices_or_sections, axis=0):
    try:
        len(indices_or_sections)
    except TypeError:
        x = tr.lift(ary)
        axis = static_int(axis, "axis")
        if not -x.ndim <= axis < x.ndim:
            raise IndexError("tuple index out of range") from None
        if x.shape[axis] % static_int(indices_or_sections, "sections"):
            raise ValueError("array split does not result in an equal division") from None
    return array_split(tr, ary, indices_or_sections, axis)


@rule(np.hsplit)
def hsplit(tr, ary, indices_or_sections):
    x = tr.lift(ary)
    if x.ndim == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(tr, x, indices_or_sections, 1 if x.ndim > 1 else 0)


@rule(np.vsplit)
def vsplit(tr, ary, indices_or_sections):
    x = tr.lift(ary)
    if x.ndim < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return split(tr, x, indices_or_sections, 0)


@rule(np.dsplit)
def dsplit(tr, ary, indices_or_sections):
    x = tr.lift(ary)
    if x.ndim < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(tr, x, indices_or_sections, 2)


# ---- flips, rolls, tiles, repeats ---------------------------------------------------------

def _axis_tuple(axis, ndim: int, allow_duplicate: bool = False) -> tuple[int, ...]:
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    axes = tuple(normalize_axis(a, ndim) for a in axes)
    if not allow_duplicate and len(set(axes)) != len(axes):
        raise ValueError("repeated axis")
    return axes


@rule(np.flip)
def flip(tr, m, axis=None):
    x = tr.lift(m)
    axes = range(x.ndim) if axis is None else _axis_tuple(axis, x.ndim)
    key = tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(x.ndim))
    return x[key]


@rule(np.fliplr)
def fliplr(tr, m):
    x = asarray(tr, m)
    if x.ndim < 2:
        raise ValueError("Input must be >= 2-d.")
    return x[:, ::-1]


@rule(np.flipud)
def flipud(tr, m):
    x = asarray(tr, m)
    if x.ndim < 1:
        raise ValueError("Input must be >= 1-d.")
    return x[::-1, ...]


@rule(np.roll)
def roll(tr, a, shift, axis=None):
    x = asarray(tr, a)
    if axis is None:
        flat = roll(tr, np.ravel(x), shift, 0)
        return tr.wrap(tr.prims.reshape(flat._v(), x.shape))
    axes = _axis_tuple(axis, x.ndim, allow_duplicate=True)
    b = np.broadcast(static_array(tr, shift, "shift"), np.asarray(axes))
    if b.ndim > 1:
        raise ValueError("'shift' and 'axis' should be scalars or 1D sequences")
    if _in_reverse_order([x]):  # (in its memory's order: `_in_reverse_order`)
        flipped = tuple(x.ndim - 1 - a for a in axes)
        return np.transpose(roll(tr, np.transpose(x), shift, flipped))
    shifts = dict.fromkeys(range(x.ndim), 0)
    for s, ax in b:
        shifts[int(ax)] += int(s)
    p = tr.prims
    v = x._v()
    for ax, off in shifts.items():
        n = x.shape[ax]
        off %= n or 1
        if off:
            lo = [0] * x.ndim
            one = [1] * x.ndim
            tail = list(x.shape)
            tail[ax] = off
            head = list(x.shape)
            head[ax] = n - off
            lo_tail = lo.copy()
            lo_tail[ax] = n - off
            v = p.concat([p.slice(v, lo_tail, one, tail), p.slice(v, lo, one, head)], ax)
    return tr.wrap(v)


@rule(np.diff)
def diff(tr, a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    """numpy's own steps: prepend and append joined along the axis (a
    scalar broadcast to one slice), then n differences of neighbours —
    `not_equal` for booleans, `subtract` otherwise —, each of two slices:
    one fused kernel instead of a graph break."""
    n = static_int(n, "n")
    if n == 0:
        return a
    if n < 0:
        raise ValueError("order must be non-negative but got " + repr(n))
    x = asarray(tr, a)
    if x.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    ax = normalize_axis(axis, x.ndim)
    parts = []
    for extra, where in ((prepend, 0), (append, 1)):
        if extra is np._NoValue:
            continue
        e = asarray(tr, extra)
        if e.ndim == 0:
            shape = list(x.shape)
            shape[ax] = 1
            e = broadcast_to(tr, e, tuple(shape))
        parts.append((where, e))
    if parts:
        x = np.concatenate([e for w, e in parts if w == 0] + [x] + [e for w, e in parts if w == 1],
                           axis=ax)
    lo = tuple(slice(1, None) if d == ax else slice(None) for d in range(x.ndim))
    hi = tuple(slice(None, -1) if d == ax else slice(None) for d in range(x.ndim))
    op = np.not_equal if x.dtype == np.bool_ else np.subtract
    for _ in range(n):
        x = op(x[lo], x[hi])
    return x


@rule(np.tile)
def tile(tr, A, reps):
    static_array(tr, reps, "reps")
    try:
        tup = tuple(reps)
    except TypeError:
        tup = (reps,)
    tup = tuple(static_int(t, "reps") for t in tup)
    d = len(tup)
    x = asarray(tr, A)
    c = tr.reshape(x, (1,) * (d - x.ndim) + x.shape) if d > x.ndim else x
    tup = (1,) * (c.ndim - d) + tup
    shape_out = tuple(s * t for s, t in zip(c.shape, tup))
    if any(t < 0 for t in tup) and (c.size or any(s < 0 for s in shape_out)):
        raise ValueError("negative dimensions are not allowed")
    p = tr.prims
    if c.size == 0:
        return tr.wrap(p.broadcast(p.constant(0, c.dtype), shape_out) if shape_out
                       else p.constant(0, c.dtype))
    inter = tuple(v for s in c.shape for v in (1, s))
    full = tuple(v for s, t in zip(c.shape, tup) for v in (t, s))
    return tr.wrap(p.reshape(p.broadcast(p.reshape(c._v(), inter), full), shape_out))


@rule(np.repeat)
def repeat(tr, a, repeats, axis=None):
    x = asarray(tr, a)
    r = static_array(tr, repeats, "repeats")
    if axis is None:
        x = np.ravel(x)
        ax = 0
    else:
        ax = normalize_axis(axis, x.ndim)
    n = x.shape[ax]
    p = tr.prims
    if r.size == 1 and r.ndim <= 1:
        k = int(np.repeat(np.arange(1), repeats).size)  # numpy's checks (negative, casting)
        shape = list(x.shape)
        shape.insert(ax + 1, 1)
        big = list(shape)
        big[ax + 1] = k
        out = list(x.shape)
        out[ax] = n * k
        return tr.wrap(p.reshape(p.broadcast(p.reshape(x._v(), shape), big), out))
    idx = np.repeat(np.arange(n), repeats)  # numpy decides the length (and raises its errors)
    return tr.wrap(p.gather(x._v(), p.dense(idx.astype(np.int64)), ax))


# ---- padding ------------------------------------------------------------------------------

_PAD_KWARGS = {
    "empty": [], "edge": [], "wrap": [], "constant": ["constant_values"],
    "linear_ramp": ["end_values"], "maximum": ["stat_length"], "mean": ["stat_length"],
    "median": ["stat_length"], "minimum": ["stat_length"], "reflect": ["reflect_type"],
    "symmetric": ["reflect_type"],
}


def _as_pairs(x, ndim: int, as_index: bool = False):
    """numpy's `_as_pairs` (numpy/lib/_arraypad_impl.py): broadcast to (ndim, 2)."""
    x = np.array(x)
    if as_index:
        x = np.round(x).astype(np.intp, copy=False)
    if x.ndim < 3:
        if x.size == 1:
            x = x.ravel()
            if as_index and x < 0:
                raise ValueError("index can't contain negative values")
            return ((x[0], x[0]),) * ndim
        if x.size == 2 and x.shape != (2, 1):
            x = x.ravel()
            if as_index and (x[0] < 0 or x[1] < 0):
                raise ValueError("index can't contain negative values")
            return ((x[0], x[1]),) * ndim
    if as_index and x.min() < 0:
        raise ValueError("index can't contain negative values")
    return np.broadcast_to(x, (ndim, 2)).tolist()


def _one_value(tr, mode: str, kwargs: dict) -> bool:
    """A pad whose result does not depend on the order its axes are padded
    in: any mode but "constant" with different values per axis or side
    (numpy pads axis by axis, the later axes owning the corners)."""
    if mode != "constant" or "constant_values" not in kwargs:
        return True
    values = kwargs["constant_values"]
    if isinstance(values, TracedArray):
        return False
    return len({repr(v) for v in np.asarray(static_array(tr, values, "constant_values")).ravel()}) == 1


@rule(np.pad)
def pad(tr, array, pad_width, mode="constant", **kwargs):
    x = asarray(tr, array)
    if isinstance(pad_width, dict):
        seq = [(0, 0)] * x.ndim
        for ax, w in pad_width.items():
            seq[ax] = (w, w) if isinstance(w, int) else tuple(w)
        pad_width = seq
    widths = static_array(tr, pad_width, "pad_width")
    if widths.dtype.kind != "i":
        raise TypeError("`pad_width` must be of integral type.")
    widths = [(int(a), int(b)) for a, b in _as_pairs(widths, x.ndim, as_index=True)]
    if callable(mode):
        raise Unsupported("np.pad with a function as mode")
    if mode not in _PAD_KWARGS:
        raise ValueError(f"mode '{mode}' is not supported")
    bad = set(kwargs) - set(_PAD_KWARGS[mode])
    if bad:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': {bad}")
    p = tr.prims
    if x.size and _in_reverse_order([x]) and _one_value(tr, mode, kwargs):
        # padded in its memory's order (`_in_reverse_order`): the widths
        # reversed, the result transposed back
        return np.transpose(pad(tr, np.transpose(x), widths[::-1], mode, **kwargs))
    if mode in ("constant", "empty"):
        return tr.wrap(_pad_constant(tr, x, widths, kwargs.get("constant_values", 0)))
    if mode not in ("edge", "wrap", "reflect", "symmetric") or (
            mode in ("reflect", "symmetric") and kwargs.get("reflect_type", "even") != "even"):
        raise Unsupported(f"np.pad mode {mode!r} with {kwargs}")
    if x.size == 0:
        for ax, w in enumerate(widths):
            if x.shape[ax] == 0 and any(w):
                raise ValueError(f"can't extend empty axis {ax} using modes other than "
                                 "'constant' or 'empty'")
    v = x._v()
    for ax, (lo, hi) in enumerate(widths):
        if lo or hi:
            # these modes are index maps along each axis: ask numpy for the map
            idx = np.pad(np.arange(x.shape[ax]), (lo, hi), mode=mode, **kwargs)
            v = p.gather(v, p.dense(idx.astype(np.int64)), ax)
    return tr.wrap(v)


def _pad_constant(tr, x: TracedArray, widths, values):
    from .indexing import value_for

    p = tr.prims
    if not any(a or b for a, b in widths):
        return x._v()
    if isinstance(values, TracedArray):
        if values.ndim:
            raise Unsupported("np.pad with traced constant_values that are not one scalar")
        c = p.cast(values._v(), x.dtype)
        return p.pad(x._v(), c, [w[0] for w in widths], [w[1] for w in widths])
    pairs = _as_pairs(static_array(tr, values, "constant_values"), x.ndim)
    consts = [[value_for(tr, v, x.dtype)._v() for v in pair] for pair in pairs]
    keys = {np.asarray(v).astype(x.dtype).tobytes() for pair in pairs for v in pair}
    if len(keys) == 1 or not x.ndim:
        return p.pad(x._v(), consts[0][0] if x.ndim else p.constant(0, x.dtype),
                     [w[0] for w in widths], [w[1] for w in widths])
    # different values per axis/side: numpy pads axis by axis, so later axes
    # own the corners
    v = x._v()
    for ax, ((lo, hi), (cl, ch)) in enumerate(zip(widths, consts)):
        parts = []
        shape = list(v.type.get_shape())
        if lo:
            shape[ax] = lo
            parts.append(p.broadcast(cl, tuple(shape)))
        parts.append(v)
        if hi:
            shape[ax] = hi
            parts.append(p.broadcast(ch, tuple(shape)))
        v = p.concat(parts, ax)
    return v


# ---- triangles and diagonals -----------------------------------------------------------------

def _tri_mask(tr, n: int, m: int, k: int, upper: bool):
    """j <= i + k (tril) or j >= i + k (triu) over an (n, m) grid."""
    p = tr.prims
    i64 = np.dtype(np.int64)
    rows = p.iota((n, m), 0, i64)
    cols = p.iota((n, m), 1, i64)
    shifted = p.ufunc("add", [rows, p.broadcast(p.constant(k, i64), (n, m))], i64) if k else rows
    return p.compare("ge" if upper else "le", cols, shifted)


def _tri(tr, m, k, upper: bool):
    x = asarray(tr, m)
    k = static_int(k, "k")
    if x.ndim == 0:
        raise TypeError("tri() missing 1 required positional argument: 'N'")
    n, mm = x.shape[-2:] if x.ndim >= 2 else (x.shape[0], x.shape[0])
    p = tr.prims
    mask = _tri_mask(tr, n, mm, k, upper)
    shape = broadcast_shapes((n, mm), x.shape)
    zero = p.broadcast(p.constant(0, x.dtype), shape)
    return tr.wrap(p.select(p.broadcast(mask, shape), p.broadcast(x._v(), shape), zero))


@rule(np.tril)
def tril(tr, m, k=0):
    return _tri(tr, m, k, upper=False)


@rule(np.triu)
def triu(tr, m, k=0):
    return _tri(tr, m, k, upper=True)


def _diag_len(n1: int, n2: int, offset: int) -> int:
    return max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))


@dataclass(frozen=True)
class DiagonalStep:
    """numpy's `diagonal` view (read-only): the two axes move last, merge into
    one, and the diagonal is a strided slice of it."""

    offset: int
    axis1: int
    axis2: int
    readonly = True

    def apply(self, p, base):
        shape = base.type.get_shape()
        rest = [d for d in range(len(shape)) if d not in (self.axis1, self.axis2)]
        n1, n2 = shape[self.axis1], shape[self.axis2]
        v = p.transpose(base, rest + [self.axis1, self.axis2])
        keep = [shape[d] for d in rest]
        v = p.reshape(v, keep + [n1 * n2])
        length = _diag_len(n1, n2, self.offset)
        start = (self.offset if self.offset >= 0 else -self.offset * n2) if length else 0
        return p.slice(v, [0] * len(rest) + [start], [1] * len(rest) + [n2 + 1], keep + [length])

    def update(self, p, base, new):  # pragma: no cover - read-only views refuse writes first
        raise ValueError("assignment destination is read-only")

    def np_apply(self, arr: np.ndarray) -> np.ndarray:
        return np.diagonal(arr, self.offset, self.axis1, self.axis2)


@rule(np.diagonal)
def diagonal(tr, a, offset=0, axis1=0, axis2=1):
    x = asarray(tr, a)
    if x.ndim < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    a1, a2 = normalize_axis(axis1, x.ndim), normalize_axis(axis2, x.ndim)
    if a1 == a2:
        raise ValueError("axis1 and axis2 cannot be the same")
    return tr.view(x, DiagonalStep(static_int(offset, "offset"), a1, a2))


@rule(np.diag)
def diag(tr, v, k=0):
    x = asarray(tr, v)
    k = static_int(k, "k")
    if x.ndim == 2:
        return diagonal(tr, x, k)
    if x.ndim != 1:
        raise ValueError("Input must be 1- or 2-d.")
    p = tr.prims
    n = x.shape[0] + abs(k)
    zero = p.constant(0, x.dtype)
    # the value on row i (k >= 0) or column j (k < 0) of the diagonal, padded to n
    vals = p.pad(x._v(), zero, [0], [abs(k)])
    vals = p.broadcast(p.reshape(vals, (n, 1) if k >= 0 else (1, n)), (n, n))
    i64 = np.dtype(np.int64)
    rows, cols = p.iota((n, n), 0, i64), p.iota((n, n), 1, i64)
    on = p.compare("eq", cols, p.ufunc("add", [rows, p.broadcast(p.constant(k, i64), (n, n))], i64))
    return tr.wrap(p.select(on, vals, p.broadcast(zero, (n, n))))


# ---- broadcasting -------------------------------------------------------------------------------

@rule(np.broadcast_arrays)
def broadcast_arrays(tr, *args, subok=False):
    xs = [asarray(tr, a) for a in args]
    shape = tuple(broadcast_shapes(*[x.shape for x in xs]))
    # numpy hands back arrays already of the shape unchanged; the others are
    # broadcast views, read-only here (numpy warns on writes and will refuse)
    return tuple(x if x.shape == shape else tr.view(x, BroadcastStep(shape)) for x in xs)
