"""Shape and view functions. Views (transpose, reshape of compatible layouts,
expand_dims, squeeze, swapaxes, moveaxis, broadcast_to) are view steps sharing
the base's storage, so writes through them reach the base as in numpy."""

from __future__ import annotations

import numpy as np

from ..registry import rule
from ..traced import TracedArray
from ..tracer import Unsupported
from ..views import BroadcastStep, TransposeStep
from .common import normalize_axis, static_int, static_shape


def _resolve_shape(shape, size: int) -> tuple[int, ...]:
    shape = static_shape(shape)
    # numpy computes -1 and validates; ask it on a layout-only dummy
    from ..views import strided_dummy

    return strided_dummy((size,), (0,), np.uint8).reshape(shape).shape


@rule(np.reshape)
def reshape(tr, a, /, shape=None, order="C", *, newshape=None, copy=None):
    if shape is None:
        shape = newshape
    if order != "C":
        raise Unsupported(f"reshape with order={order!r}")
    x = tr.lift(a)
    shape = _resolve_shape(shape, x.size)
    if copy:
        return tr.wrap(tr.prims.reshape(x._v(), shape))
    if copy is False and not tr.reshape_is_view(x, shape):
        raise ValueError("Unable to avoid creating a copy while reshaping.")
    return tr.reshape(x, shape)


@rule(np.ravel)
def ravel(tr, a, order="C"):
    if order not in ("C", "K", "A") and not (order == "F"):
        raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
    x = tr.lift(a)
    if order == "F":
        x = np.transpose(x)
    return tr.reshape(x, (x.size,))


@rule(np.transpose)
def transpose(tr, a, axes=None):
    x = tr.lift(a)
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
    if np.broadcast_shapes(x.shape, shape) != shape:
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
    from ..dtypes import supported

    if not supported(dt):
        raise Unsupported(f"astype to {dt}")
    return tr.wrap(tr.prims.cast(x._v(), dt))


@rule(np.copy)
def copy(tr, a, order="K", subok=False):
    x = tr.lift(a)
    return tr.wrap(x._v(), scalar=False)


@rule(np.asarray, np.asanyarray, np.ascontiguousarray)
def asarray(tr, a, dtype=None, order=None, *, like=None, device=None, copy=None):
    if isinstance(a, TracedArray) or isinstance(a, np.ndarray):
        x = tr.lift(a)
    else:
        x = tr.lift_nested(a) if isinstance(a, (list, tuple)) else tr.lift(a)
        if not isinstance(a, (list, tuple)):
            x = tr.wrap(x._v())
    if dtype is not None and np.dtype(dtype) != x.dtype:
        return tr.wrap(tr.prims.cast(x._v(), np.dtype(dtype)))
    if copy:
        return tr.wrap(x._v())
    x._scalar = False
    return x


@rule(np.array)
def array(tr, object, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    x = asarray(tr, object, dtype)
    if copy and x is object:
        x = tr.wrap(x._v())
    x._scalar = False
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
