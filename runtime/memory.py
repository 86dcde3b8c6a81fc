"""Buffer pool: compiled programs allocate outputs and intermediates here.

A fresh 64 MiB numpy array page-faults on every first touch (~20 ms for 16k
pages); reusing memory that was already touched avoids it. Each allocation
hands out an ndarray over a block of pooled memory through a small ctypes
owner object; when the last array or view referring to that owner dies, a
weak reference's callback puts the block back in the pool, so the default path —
call, drop the result, call again — runs on warm memory. Big blocks ask the
kernel for transparent huge pages."""

from __future__ import annotations

import ctypes
import mmap
import threading
import weakref
from collections import defaultdict

import numpy as np

PAGE = 4096
HUGE = 2 << 20
# blocks from this size on come from the pool; smaller ones from numpy's own
# allocator (glibc's heap, warm after the first call: its mmap threshold
# follows freed blocks up to 32 MiB), which hands one out in ~0.4 us where
# the pool's few Python operations take ~3 us — a 16 KB `x * 2` ran in 7 us
# against numpy's 3 us. Past it the 3 us are lost in the work, and a block
# the heap gave back to the system (trimmed) would fault on every page again.
POOL_MIN_BYTES = 1 << 20


def pooled(nbytes: int) -> bool:
    """Whether a block of nbytes comes from the pool (`POOL_MIN_BYTES`)."""
    return nbytes >= POOL_MIN_BYTES
MAX_CACHED_BYTES = 4 << 30  # free memory the pool keeps for reuse


class Pool:
    """Blocks by size; each free block is kept with its address. Handing one
    out is a few Python operations (they matter: between two BLAS calls the
    interpreter runs from a cold cache, ~5 us per allocation here): a ctypes
    owner over the block, an ndarray over the owner, and a weak reference to
    the owner whose callback puts the block back."""

    def __init__(self) -> None:
        self._free: dict[int, list[tuple[mmap.mmap, int]]] = defaultdict(list)
        self._live: dict[int, tuple[weakref.ref, mmap.mmap, int, int]] = {}  # id(ref) ->
        self._cached = 0
        self._lock = threading.Lock()
        self.stats = {"allocs": 0, "reused": 0}

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        n = dtype.itemsize
        for d in shape:
            n *= d
        if not pooled(n):  # numpy's allocator is fast and warm
            return np.empty(shape, dtype)
        size = -(-n // PAGE) * PAGE
        self.stats["allocs"] += 1
        with self._lock:
            free = self._free.get(size)
            got = free.pop() if free else None
            if got is not None:
                self._cached -= size
                self.stats["reused"] += 1
        if got is None:
            block = mmap.mmap(-1, size)
            if size >= HUGE and hasattr(mmap, "MADV_HUGEPAGE"):
                try:
                    block.madvise(mmap.MADV_HUGEPAGE)
                except OSError:
                    pass
            got = (block, ctypes.addressof(ctypes.c_char.from_buffer(block)))
        owner = (ctypes.c_char * n).from_address(got[1])
        ref = weakref.ref(owner, self._release)
        self._live[id(ref)] = (ref, got[0], got[1], size)
        return np.ndarray(shape, dtype, owner)

    def _release(self, ref: weakref.ref) -> None:
        _, block, addr, size = self._live.pop(id(ref))
        with self._lock:
            if self._cached + size <= MAX_CACHED_BYTES:
                self._free[size].append((block, addr))
                self._cached += size
                return
        # over the cap: the mmap closes when collected

    def clear(self) -> None:
        with self._lock:
            self._free.clear()
            self._cached = 0


POOL = Pool()
