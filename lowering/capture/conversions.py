"""numpy's array constructors (`np.asarray`, `np.array`, ...) are C functions
that never dispatch to `__array_function__` (only with `like=`): on a traced
value they would convert it — a graph break. While a function is traced, the
names in the `numpy` module point at thin wrappers that send traced values to
the capture rules and everything else to numpy untouched. (A name bound
before tracing, `from numpy import asarray`, still reaches numpy's own.)"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from . import registry

_NAMES = ("asarray", "array", "asanyarray", "ascontiguousarray")
_ORIGINAL = {n: getattr(np, n) for n in _NAMES}
_lock = threading.Lock()
_depth = 0


def _traced_in(x, depth: int = 0):
    from .traced import TracedArray

    if isinstance(x, TracedArray):
        return x._t
    if depth < 3 and isinstance(x, (list, tuple)):
        for e in x:
            t = _traced_in(e, depth + 1)
            if t is not None:
                return t
    return None


def _wrapper(name: str):
    original = _ORIGINAL[name]

    def convert(a, *args, **kwargs):
        tracer = _traced_in(a)
        if tracer is None:
            return original(a, *args, **kwargs)
        return registry.call_function(tracer, original, (a, *args), kwargs)

    convert.__name__ = convert.__qualname__ = name
    convert.__doc__ = original.__doc__
    convert.__wrapped__ = original  # type: ignore[attr-defined]
    return convert


_WRAPPERS = {n: _wrapper(n) for n in _NAMES}


@contextlib.contextmanager
def constructors_capture():
    global _depth
    registry._load_rules()  # rules register under numpy's own functions: load them unpatched
    with _lock:
        if _depth == 0:
            for n, w in _WRAPPERS.items():
                setattr(np, n, w)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for n, f in _ORIGINAL.items():
                    setattr(np, n, f)
