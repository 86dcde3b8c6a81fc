"""BLAS threads for matmul externs. OpenBLAS wakes its whole thread pool for
every call; for a small product the hand-off costs more than the work (and
on a busy machine far more), so products under `SMALL_FLOPS` run on one BLAS
thread and larger ones on BLAS's own count. The library is found through
threadpoolctl (numpy's bundled OpenBLAS, whatever its symbol prefix); without
it, or with another BLAS, matmuls run as numpy runs them."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

import numpy as np

SMALL_FLOPS = 1 << 22  # 4 MFLOP: ~0.1 ms on one core

_setter: tuple[Callable[[int], None], int] | None | bool = False
# BLAS's thread count is process-wide: the probe runs once, and one small
# product at a time sets it to 1 and back (interleaved, one thread's restore
# would change the count under another thread's small product)
_lock = threading.Lock()


def _find() -> tuple[Callable[[int], None], int] | None:
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    try:
        libs = ThreadpoolController().select(internal_api="openblas").lib_controllers
    except Exception:  # noqa: BLE001 - any probing failure: leave BLAS alone
        return None
    for lc in libs:
        if "numpy" not in lc.filepath:
            continue
        for name in ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_",
                     "scipy_openblas_set_num_threads", "openblas_set_num_threads64_"):
            fn = getattr(lc.dynlib, name, None)
            if fn is not None:
                fn.argtypes, fn.restype = [ctypes.c_int], None
                return fn, int(lc.num_threads)
    return None


def setter() -> tuple[Callable[[int], None], int] | None:
    global _setter
    if _setter is False:
        with _lock:
            if _setter is False:
                _setter = _find()
    return _setter  # type: ignore[return-value]


def matmul(ta: bool, tb: bool, flops: int) -> Callable:
    """The extern for one matmul: operands read transposed where asked, one
    BLAS thread for small products."""
    def plain(a, b, out):
        np.matmul(a.swapaxes(-1, -2) if ta else a, b.swapaxes(-1, -2) if tb else b, out=out)

    s = setter()
    if s is None or flops >= SMALL_FLOPS or s[1] <= 1:
        return plain
    set_threads, default = s

    def small(a, b, out):
        with _lock:
            set_threads(1)
            try:
                plain(a, b, out)
            finally:
                set_threads(default)

    return small
