"""matmul and friends, all on `array.dot` (batched, explicit broadcasting)."""

from __future__ import annotations

import numpy as np

from ..registry import rule
from ..tracer import Unsupported
from .common import check_out, store_out


def matmul(tr, a, b, out=None, dtype=None, casting="same_kind"):
    x, y = tr.lift(a), tr.lift(b)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    loop = np.matmul.resolve_dtypes((x.dtype, y.dtype, None), signature=None if dtype is None else (None, None, np.dtype(dtype)))
    dt = loop[-1]
    if dt.kind == "b":
        raise Unsupported("boolean matmul")
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
    batch = np.broadcast_shapes(xs[:-2], ys[:-2])
    xv = p.broadcast(xv, batch + xs[-2:])
    yv = p.broadcast(yv, batch + ys[-2:])
    r = p.cast(p.dot(xv, p.cast(yv, loop[0])), dt)
    shape = batch + ((xs[-2],) if x.ndim > 1 else ()) + ((ys[-1],) if y.ndim > 1 else ())
    r = p.reshape(r, shape)
    res = tr.wrap(r, scalar=shape == ())
    out = check_out(out)
    return res if out is None else store_out(tr, out, res, casting, "matmul")


rule(np.matmul)(lambda tr, a, b, out=None, **k: matmul(tr, a, b, out=out, **k))
