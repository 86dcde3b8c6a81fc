"""Helpers shared by the rule families."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from dialects.symbols import SymDim, broadcast_shapes

from ..traced import TracedArray
from ..tracer import Unsupported


def static_int(x: Any, what: str) -> int:
    """Shapes, axes and counts must be Python ints at trace time."""
    if isinstance(x, TracedArray):
        raise Unsupported(f"{what} must be a static integer, got a traced value")
    if isinstance(x, SymDim):  # a size symbol's value stays symbolic
        return x
    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {type(x).__name__}") from None


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    axis = static_int(axis, what)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim


def normalize_axes(axis, ndim: int) -> tuple[int, ...]:
    """axis=None/int/tuple -> sorted tuple of non-negative axes (numpy errors)."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        axes = tuple(normalize_axis(a, ndim) for a in axis)
        if len(set(axes)) != len(axes):
            raise ValueError("duplicate value in 'axis'")
        return tuple(sorted(axes))
    return (normalize_axis(axis, ndim),)


def static_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (tuple, list)):
        return tuple(static_int(s, "shape entry") for s in shape)
    return (static_int(shape, "shape"),)


def result_dtype_of(*xs: Any) -> np.dtype:
    """numpy's promotion (NEP 50: Python scalars are weak)."""
    # a weak Python scalar takes part as a value (0 of its type): NEP 50 treats
    # values, not the types float/int, as weak
    return np.result_type(*[x._promo() if isinstance(x, TracedArray) else x for x in xs])


def lift_all(tr, xs) -> list[TracedArray]:
    return [tr.lift(x) for x in xs]


def broadcast_all(tr, xs: list[TracedArray], dtype: np.dtype | None = None):
    """Cast (when dtype is given) and broadcast to one shape: SSA values."""
    shape = broadcast_shapes(*[x.shape for x in xs])
    p = tr.prims
    out = []
    for x in xs:
        v = x._v()
        if dtype is not None:
            v = p.cast(v, dtype)
        out.append(p.broadcast(v, shape))
    return out, shape


def check_out(out, what: str = "out"):
    if out is None:
        return None
    if isinstance(out, tuple):
        if len(out) != 1:
            raise Unsupported(f"{what} with several arrays")
        out = out[0]
        if out is None:
            return None
    if not isinstance(out, TracedArray):
        raise Unsupported(f"{what}= must be an input array or an array made in the function")
    return out


def store_out(tr, out: TracedArray, result: TracedArray, casting: str = "same_kind",
              fname: str = "ufunc") -> TracedArray:
    """numpy's `out=`: cast (checked with `casting`), broadcast into out's shape,
    write through (functionalized); returns `out` itself."""
    if not np.can_cast(result.dtype, out.dtype, casting=casting):
        raise TypeError(
            f"Cannot cast {fname} output from {result.dtype!r} to {out.dtype!r} "
            f"with casting rule {casting!r}"
        )
    if broadcast_shapes(result.shape, out.shape) != out.shape:
        raise ValueError(
            f"non-broadcastable output operand with shape {out.shape} doesn't match the "
            f"broadcast shape {broadcast_shapes(result.shape, out.shape)}"
        )
    p = tr.prims
    v = p.broadcast(p.cast(result._v(), out.dtype), out.shape)
    tr.write(out, v)
    return out


def new(tr, v, scalar: bool = False) -> TracedArray:
    return tr.wrap(v, scalar=scalar)
