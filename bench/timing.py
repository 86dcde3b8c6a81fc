"""Timers: per-call medians after warm-up, and the machine's copy bandwidth.

Garbage collection is off while samples are taken; each result is dropped
after its sample's clock stops, so freeing is not timed but a fresh output's
page faults are (every peer pays those: see BENCH.md's allocator note)."""

from __future__ import annotations

import gc
import itertools
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

MiB = 1024 * 1024


def measure(run: Callable[[], Any], *, repeats: int, warmup: int, inner: int = 1) -> dict:
    """`warmup` calls, then `repeats` samples of `inner` calls each; times
    per call, in milliseconds. (The first call is the caller's: it keeps
    its result for the check.)"""
    for _ in range(warmup):
        run()
    samples = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            if inner == 1:
                t0 = time.perf_counter()
                out = run()
                dt = time.perf_counter() - t0
                del out
            else:
                t0 = time.perf_counter()
                for _ in range(inner):
                    run()
                dt = (time.perf_counter() - t0) / inner
            samples.append(dt)
    finally:
        gc.enable()
    ms = [s * 1e3 for s in samples]
    return {
        "median_ms": statistics.median(ms),
        "min_ms": min(ms),
        "samples_ms": ms,
        "calls_per_sample": inner,
    }


def _copy_after(barrier: threading.Barrier, dst: np.ndarray, src: np.ndarray) -> None:
    barrier.wait()
    np.copyto(dst, src)


def copy_bandwidth(nbytes: int = 256 * MiB, repeats: int = 10, threads: int = 1) -> float:
    """GB/s (1e9 bytes/s, read + write counted) of `np.copyto` on `nbytes`;
    with threads > 1 each thread copies its slice (copyto drops the GIL)."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.zeros_like(src)  # written once so its pages exist
    bounds = np.linspace(0, src.size, threads + 1).astype(int)
    slices = [(dst[a:b], src[a:b]) for a, b in itertools.pairwise(bounds)]
    np.copyto(dst, src)
    times = []
    for _ in range(repeats):
        if threads == 1:
            t0 = time.perf_counter()
            np.copyto(dst, src)
            times.append(time.perf_counter() - t0)
            continue
        barrier = threading.Barrier(threads + 1)

        pool = [threading.Thread(target=_copy_after, args=(barrier, *sl)) for sl in slices]
        for t in pool:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in pool:
            t.join()
        times.append(time.perf_counter() - t0)
    return 2 * nbytes / statistics.median(times) / 1e9
