"""Array creation inside a traced function: `*_like` of traced arrays. (Plain
`np.zeros(shape)` never sees a traced value: numpy makes it eagerly and capture
takes it as a constant.)"""

from __future__ import annotations

import numpy as np

from ..registry import rule
from .common import static_shape


def _like(tr, a, fill, dtype, shape):
    x = tr.lift(a)
    dt = np.dtype(dtype) if dtype is not None else x.dtype
    shp = x.shape if shape is None else static_shape(shape)
    return tr.wrap(tr.prims.broadcast(tr.prims.constant(fill, dt), shp) if shp else tr.prims.constant(fill, dt))


@rule(np.zeros_like)
def zeros_like(tr, a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(tr, a, 0, dtype, shape)


@rule(np.ones_like)
def ones_like(tr, a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(tr, a, 1, dtype, shape)


@rule(np.empty_like)
def empty_like(tr, a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    return _like(tr, a, 0, dtype, shape)


@rule(np.full_like)
def full_like(tr, a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    if not isinstance(fill_value, (bool, int, float, np.generic)):
        x = tr.lift(a)
        dt = np.dtype(dtype) if dtype is not None else x.dtype
        shp = x.shape if shape is None else static_shape(shape)
        f = tr.lift(fill_value)
        return tr.wrap(tr.prims.broadcast(tr.prims.cast(f._v(), dt), shp))
    return _like(tr, a, fill_value, dtype, shape)
