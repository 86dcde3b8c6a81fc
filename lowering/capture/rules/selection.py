"""Selection and clipping: where, clip, nan_to_num, select."""

from __future__ import annotations

import numpy as np

from ..registry import rule
from ..tracer import Unsupported
from .common import result_dtype_of


@rule(np.where)
def where(tr, condition, x=None, y=None):
    if x is None and y is None:
        raise Unsupported("one-argument np.where has a data-dependent shape")
    c, a, b = tr.lift(condition), x, y
    dt = result_dtype_of(a, b)
    p = tr.prims
    av = tr.lift(a)
    bv = tr.lift(b)
    shape = np.broadcast_shapes(c.shape, av.shape, bv.shape)
    cv = p.broadcast(p.cast(c._v(), np.dtype(np.bool_)), shape)
    r = p.select(cv, p.broadcast(p.cast(av._v(), dt), shape), p.broadcast(p.cast(bv._v(), dt), shape))
    return tr.wrap(r)
