"""A stand-in GPU for tests without one: device arrays that are not numpy's
(`Box`: their memory a host array) on `BoxDevice`, HostDevice's memory and
stand-in graph in boxes, every kernel in Triton's interpreter. The device
entries, the copies around a graph and the host-copy paths then run as they
do on a GPU (tests/test_gpu_reduce_overhead.py, tests/test_device_aliasing.py,
tests/runtime/test_gpu_backend.py)."""

from __future__ import annotations

import sys
from functools import partial

import numpy as np

from runtime import gpu


class Box:
    """A device array that is not a numpy array: its memory a host array."""

    def __init__(self, a: np.ndarray):
        self.a = a

    shape = property(lambda self: self.a.shape)
    dtype = property(lambda self: self.a.dtype)
    strides = property(lambda self: self.a.strides)
    itemsize = property(lambda self: self.a.itemsize)

    def __getitem__(self, k):  # (views; a 0-d result read as a scalar: x[()])
        return Box(self.a[k])

    def __setitem__(self, k, v):
        self.a[k] = v.a if isinstance(v, Box) else v

    def set(self, a):  # (as CuPy's: host data in; a host extern's results)
        self.a[...] = a

    def swapaxes(self, i, j):  # (a transposed operand of a matmul)
        return Box(self.a.swapaxes(i, j))


class BoxDevice(gpu.HostDevice):
    """HostDevice's memory (and its stand-in graph) in boxes (its methods
    make the arrays: numpy's constructors called from a test file would be
    the traced program's)."""

    name = "box"

    def empty(self, shape, dtype):
        return Box(super().empty(shape, dtype))

    def from_host(self, a):
        return Box(super().from_host(a))

    def to_host(self, x):
        return super().to_host(x.a)

    def launch_arg(self, x):
        return gpu.HostArray(x.a, gpu.tl_dtype(x.dtype))

    def copy(self, x):
        return Box(np.copy(x.a))

    def probe(self, x):  # (a box's views hold its host array's owner)
        return partial(sys.getrefcount, x.a)

    def share(self, x):
        return Box(x.a.view())

    def empty_like(self, x):
        return Box(np.empty_like(x.a))

    def copy_into(self, dst, src):
        np.copyto(dst.a, src.a)

    def matmul(self, a, b, out):
        gpu.host_matmul(a.a, b.a, out.a)

    def owns(self, x):
        return isinstance(x, Box)


def install(monkeypatch) -> BoxDevice:
    """A BoxDevice as the process's GPU, Boxes as its arrays (for one test)."""
    dev = BoxDevice()
    monkeypatch.setattr(gpu, "device", lambda kind=None: dev)
    monkeypatch.setattr(gpu, "of", lambda x: dev if isinstance(x, Box) else None)
    return dev
