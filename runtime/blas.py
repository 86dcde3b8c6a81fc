"""BLAS threads for matmul externs. OpenBLAS wakes its whole thread pool for
every gemm; for a small product the hand-off costs more than the work (and
on a busy machine far more), so matrix products under `SMALL_FLOPS` run on
one BLAS thread and larger ones on BLAS's own count. A matrix-vector product
keeps OpenBLAS's own choice, as numpy's call does (`one_thread`). The
library is found through threadpoolctl (numpy's bundled OpenBLAS, whatever
its symbol prefix); without it, or with another BLAS, matmuls run as numpy
runs them."""

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


def _once(name: str, find: Callable):
    """A module-level probe's value, found once (under the lock)."""
    value = globals()[name]
    if value is False:
        with _lock:
            if globals()[name] is False:
                globals()[name] = find()
            value = globals()[name]
    return value


def setter() -> tuple[Callable[[int], None], int] | None:
    return _once("_setter", _find)


def one_thread(routine: str, flops: int) -> bool:
    """Whether a product runs on one BLAS thread (we set the count): a
    matrix product ("sgemm", "dgemm") under SMALL_FLOPS. A matrix-vector
    product ("sgemv", "dgemv") is left to OpenBLAS, which picks one thread
    itself below about 460k matrix elements (0.3.31; two above, ~1.9x
    faster on 2 cores): it moves a matrix element per 2 flops, so SMALL_FLOPS
    (2M elements, 8-16 MB) is no small gemv — forced onto one thread, the
    products of 0.5-2M elements (a 1000x1000 matrix times a vector) ran at
    half numpy's speed, numpy making the same call on the default count."""
    return flops < SMALL_FLOPS and routine.endswith("gemm")


def matmul(ta: bool, tb: bool, flops: int) -> Callable:
    """The extern for one matmul: operands read transposed where asked, one
    BLAS thread for small products other than matrix-vector ones
    (`one_thread`)."""
    def plain(a, b, out):
        np.matmul(a.swapaxes(-1, -2) if ta else a, b.swapaxes(-1, -2) if tb else b, out=out)

    s = setter()
    if s is None or flops >= SMALL_FLOPS or s[1] <= 1:
        return plain
    set_threads, default = s

    def small(a, b, out):
        if out.shape[-1] == 1 or out.shape[-2] == 1:  # a gemv's: OpenBLAS's own count
            plain(a, b, out)
            return
        with _lock:
            set_threads(1)
            try:
                plain(a, b, out)
            finally:
                set_threads(default)

    return small


# ---- BLAS routines called from generated code ------------------------------
# numpy's bundled OpenBLAS (ILP64: 64-bit integer arguments, `scipy_` prefix
# and `64_` suffix) exports CBLAS; a matmul the backend can describe as one
# gemm or gemv per batch (`call`) is launched as a kernel that calls the
# routine by address, so it needs no Python between launches (the native
# entry launches it too). A small product runs on one BLAS thread: the
# launcher sets OpenBLAS's count to 1 (`openblas_set_num_threads_local`,
# which in numpy's pthreads build sets the process's count) and back, and is
# called with the GIL held, so no two small products' settings interleave
# (a big product releases the GIL and leaves the count alone).
ROUTINES = {"sgemm": "scipy_cblas_sgemm64_", "dgemm": "scipy_cblas_dgemm64_",
            "sgemv": "scipy_cblas_sgemv64_", "dgemv": "scipy_cblas_dgemv64_"}
SET_LOCAL_THREADS = "openblas_set_num_threads_local"
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112  # CBLAS enums

_addresses: dict[str, int] | None | bool = False


def _find_routines() -> dict[str, int] | None:
    try:
        from threadpoolctl import ThreadpoolController

        libs = ThreadpoolController().select(internal_api="openblas").lib_controllers
    except Exception:  # noqa: BLE001 - any probing failure: numpy runs the products
        return None
    for lc in libs:
        if "numpy" not in lc.filepath:
            continue
        out = {}
        for key, sym in (*ROUTINES.items(), ("set_local_threads", SET_LOCAL_THREADS)):
            fn = getattr(lc.dynlib, sym, None)
            if fn is None:
                return None
            out[key] = ctypes.cast(fn, ctypes.c_void_p).value
        return out
    return None


def routines() -> dict[str, int] | None:
    """Addresses of the CBLAS routines (and OpenBLAS's per-thread count
    setter) of numpy's BLAS, or None where numpy links another BLAS."""
    return _once("_addresses", _find_routines)


Strided = tuple[tuple[int, ...], tuple[int, ...], int]  # (shape, element strides, element offset)


def _matrix(rows: int, cols: int, rs: int, cs: int) -> tuple[int, int] | None:
    """(CBLAS transpose flag, leading dimension) of a row-major call reading a
    rows x cols matrix with these element strides, or None (no unit stride)."""
    if (cs == 1 or cols == 1) and (rows == 1 or rs >= max(1, cols)):
        return NO_TRANS, rs if rows > 1 else max(1, cols)
    if (rs == 1 or rows == 1) and (cols == 1 or cs >= max(1, rows)):
        return TRANS, cs if cols > 1 else max(1, rows)
    return None


def _batch(a: Strided, b: Strided, c: Strided) -> tuple[int, int, int, int] | None:
    """(count, a's, b's and c's element stride) of the batch dims merged into
    one, or None where they do not merge."""
    dims = [(n, a[1][i], b[1][i], c[1][i]) for i, n in enumerate(c[0][:-2]) if n != 1]
    if not dims:
        return 1, 0, 0, 0
    n, sa, sb, sc = dims[-1]
    for m, ta, tb, tc in reversed(dims[:-1]):
        if (ta, tb, tc) != (sa * n, sb * n, sc * n):
            return None
        n *= m
    return n, sa, sb, sc


def _fold_rows(a: Strided, b: Strided, c: Strided) -> tuple[Strided, Strided, Strided] | None:
    """Products of one row each (m = 1) whose batch dims do not merge, with a
    batch dim along which B is shared (stride 0): that dim made the rows of
    the product (a's and c's strides along it their row strides), so that
    each remaining batch is one gemm of many rows instead of a gemv per
    batch. `x[:, :, None, :] @ C` of x (p, q, k) and C (q, k, n): q gemms of
    p rows, not p * q gemvs (numpy's matmul loops over the p * q). The
    longest such dim; None where there is none."""
    (sha, sta, oa), (shb, stb, ob), (shc, stc, oc) = a, b, c
    nb = len(shc) - 2
    dims = [d for d in range(nb) if stb[d] == 0 and shc[d] > 1]
    if not dims:
        return None
    d = max(dims, key=lambda i: shc[i])

    def moved(shape, strides, rows, row_stride):
        keep = [i for i in range(nb) if i != d]
        return ((*[shape[i] for i in keep], rows, shape[-1]),
                (*[strides[i] for i in keep], row_stride, strides[-1]))
    a2 = (*moved(sha, sta, shc[d], sta[d]), oa)
    b2 = (tuple(x for i, x in enumerate(shb) if i != d),
          tuple(x for i, x in enumerate(stb) if i != d), ob)
    c2 = (*moved(shc, stc, shc[d], stc[d]), oc)
    if _batch(a2, b2, c2) is None:
        return None
    return a2, b2, c2


def call(kind: str, a: Strided, b: Strided, c: Strided) -> tuple[str, tuple[int, ...], tuple[int, int, int]] | None:
    """How BLAS computes c = a @ b for these strided operands (`kind` "s" or
    "d"; c C-contiguous): (routine, the launch's integer words: batch count,
    the three buffers' batch strides and offsets, then the routine's own
    arguments; which of a, b, c each of the launch's three buffers is), or
    None where BLAS cannot read them as they are (no unit stride, a negative
    or zero step, an empty dim, batch dims that do not merge). Strides and
    offsets are in elements."""
    (sha, sta, oa), (shb, stb, ob), (shc, stc, oc) = a, b, c
    m, k = sha[-2:]
    n = shb[-1]
    if 0 in (*sha, *shb, *shc) or min((*sta, *stb, oa, ob)) < 0:
        return None  # (an empty batch too: nothing to call BLAS for)
    batch = _batch(a, b, c)
    if batch is None:
        folded = _fold_rows(a, b, c) if m == 1 else None
        return None if folded is None else call(kind, *folded)
    count, ba, bb, bc = batch
    ars, acs = sta[-2:]
    brs, bcs = stb[-2:]
    crs = stc[-2]
    if m == 1 and count > 1:  # one row per batch: its row stride is the batch's
        ars, crs = ba, bc
    if count > 1 and bb == 0 and ba == m * ars and bc == m * crs:
        m, count, ba, bc = m * count, 1, 0, 0  # one B for all: one product of all the rows
    words = (count, ba, bb, bc)
    if m == 1 or n == 1:
        if m == 1:  # y = B^T x: x a's row, y c's row
            which, rows, cols, mrs, mcs, inc, incy = (1, 0, 2), k, n, brs, bcs, acs, stc[-1]
        else:  # y = A x: x b's column, y c's column
            which, rows, cols, mrs, mcs, inc, incy = (0, 1, 2), m, k, ars, acs, brs, crs
        lay = _matrix(rows, cols, mrs, mcs)
        if k == 1:
            inc = 1
        if lay is None or inc <= 0:
            return None
        trans, ld = lay
        # (row-major gemv computes op(M) x of the matrix M it reads, ld its rows' stride)
        gm, gn = (rows, cols) if trans == NO_TRANS else (cols, rows)
        if m == 1:
            trans = TRANS if trans == NO_TRANS else NO_TRANS
        strides = tuple((ba, bb, bc)[w] for w in which)
        offs = tuple((oa, ob, oc)[w] for w in which)
        return (kind + "gemv", (count, *strides, *offs, ROW_MAJOR, trans, gm, gn, ld, inc,
                                max(incy, 1)), which)
    la, lb = _matrix(m, k, ars, acs), _matrix(k, n, brs, bcs)
    if la is None or lb is None:
        return None
    return (kind + "gemm", (*words, oa, ob, oc, ROW_MAJOR, la[0], lb[0], m, n, k, la[1], lb[1],
                            max(crs, n)), (0, 1, 2))
