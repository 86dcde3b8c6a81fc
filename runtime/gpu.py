"""Device memory for the GPU backend: where its buffers live and how arrays
get there and back. One `Device` per kind of array library:

- `TorchDevice`: torch CUDA tensors (Triton's launcher takes them as they are).
- `CupyDevice`: CuPy arrays, handed to Triton's launcher through `Pointer`
  (the `data_ptr()` and `dtype` it reads of a tensor argument).
- `HostDevice`: numpy arrays in host memory, for Triton's interpreter
  (`TRITON_INTERPRET=1` semantics): the GPU backend's programs run on a
  machine without a GPU, step for step as on the device, so that the
  plan (buffers, aliasing, launches, externs, copies back) is tested in CI.

Each device also makes `DeviceGraph`s: work captured once and replayed
(`mode="reduce-overhead"`): a CUDA graph through torch (`TorchGraph`) or
CuPy's stream capture (`CupyGraph`), and for `HostDevice` a stand-in
(`HostGraph`) that records the work and replays it on the same buffers, so
that the buffers, copies and re-captures around a graph are tested in CI.

`device()` picks one: the `LOWERING_GPU` environment variable
(`torch`, `cupy`, `interpret`), else torch with CUDA, else CuPy with a
device, else none (`NoDevice` says what is missing). `of(x)` is the device
an array argument already lives on (a torch CUDA tensor, a CuPy array, any
`__cuda_array_interface__` producer through CuPy), or None for host arrays.

Nothing here imports torch, CuPy or Triton before a function needs them."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from functools import lru_cache, partial

import ml_dtypes
import numpy as np


class NoDevice(RuntimeError):
    """backend="gpu" on a machine where no CUDA array library finds a device."""


class NotCapturable(RuntimeError):
    """Work that a graph cannot hold (the message says what): it runs step
    by step, as without a graph."""


class Pointer:
    """A device buffer as Triton's launcher reads a tensor argument: its
    address and element type (`str(dtype)` names it, as torch's does)."""

    __slots__ = ("ptr", "dtype")

    def __init__(self, ptr: int, dtype):
        self.ptr = ptr
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self.ptr


class Device:
    name = "?"
    interpreted = False  # kernels run in Triton's interpreter (host memory)

    def empty(self, shape: Sequence[int], dtype: np.dtype):
        raise NotImplementedError

    def from_host(self, a: np.ndarray):
        """A device copy of a host array, its strides kept (a view's
        layout is what the program was compiled for)."""
        raise NotImplementedError

    def to_host(self, x) -> np.ndarray:
        raise NotImplementedError

    def copy_to_host(self, x, out: np.ndarray) -> None:
        """Write device array `x` into the caller's host array `out` (an
        input the program updated in place)."""
        out[...] = self.to_host(x)

    def launch_arg(self, x):
        """What Triton's launcher is given for buffer `x`."""
        return x

    def copy(self, x):
        """A copy of device array `x` (same layout)."""
        raise NotImplementedError

    def probe(self, x) -> Callable[[], object] | None:
        """A cheap count of what refers to buffer `x`'s memory, or None where
        this kind of array cannot tell. Each live array on that memory other
        than `x` itself — one `share` made, a view of it, anything holding
        one — makes the count differ from what it is with none: a graph's
        output handed to the caller (`share`) may be overwritten by a later
        replay only once the count is back to that."""
        return None

    def share(self, x):
        """A new array object on `x`'s memory (what a caller is handed)."""
        raise NotImplementedError

    def matmul(self, a, b, out) -> None:
        """out <- a @ b. `a` and `b` may be float16 or bfloat16 where `out` is
        float32 (a matmul of widened operands: the products are exact in
        float32 and summed in float32), or where `out` is of their type too
        (numpy's `(a @ b).astype(bfloat16)`: those float32 sums rounded once
        to it, never summed in the narrow type)."""
        raise NotImplementedError

    def synchronize(self) -> None:
        pass

    def owns(self, x) -> bool:
        """Whether `x` is an array of this device's kind."""
        return False

    # ---- what graphs need ----
    def empty_like(self, x):
        """An uninitialized array of x's shape and dtype in x's layout (C
        stays C, F stays F): a graph's own buffer for an input, which the
        program was compiled for in the caller's layout."""
        raise NotImplementedError

    def copy_into(self, dst, src) -> None:
        """dst <- src, device to device, on the current stream (any layouts)."""
        raise NotImplementedError

    def data_ptr(self, x) -> int:
        """The address of x's first element: what a graph bakes in."""
        return self.launch_arg(x).data_ptr()

    def current_stream(self) -> int:
        """The current stream's handle: a graph's buffers are ordered by the
        stream that replays it, so a call on another one runs without it."""
        return 0

    def model(self) -> str:
        """The device's model (what tuned launch configurations depend on)."""
        return self.name

    def where(self) -> tuple:
        """Which memory this device object allocates in now (one object
        stands for every GPU of its library: the current one's): what a
        buffer kept across calls is keyed by."""
        return (id(self), 0)

    def graph(self) -> DeviceGraph:
        raise NotCapturable(f"{self.name} arrays have no graphs")


class TorchDevice(Device):
    name = "torch"

    def __init__(self):
        import torch

        if not torch.cuda.is_available():
            raise NoDevice("torch finds no CUDA device")
        self.torch = torch
        self.dev = torch.device("cuda")
        self._dtypes: dict = {}  # numpy dtype -> torch dtype
        # (torch's own methods: one Python call less each on a replay's path)
        self.data_ptr = torch.Tensor.data_ptr
        self.share = torch.Tensor.detach
        try:  # (what Triton's launcher reads too: cheaper than a Stream object)
            from torch._C import _cuda_getCurrentRawStream as raw
            from torch._C import _cuda_getDevice as current  # (torch.cuda.current_device: 1 us)

            torch.cuda.init()
            self.current_stream = lambda: raw(current())  # (one Python call less)
        except ImportError:
            self.current_stream = lambda: torch.cuda.current_stream().cuda_stream

    def dtype(self, dt: np.dtype):
        t = self._dtypes.get(dt)  # (numpy's dtype name is a slow property: ~5 us)
        if t is None:
            t = self._dtypes[dt] = _torch_dtype(self.torch, np.dtype(dt))
        return t

    def empty(self, shape, dtype):
        return self.torch.empty(shape, dtype=self.dtype(dtype), device=self.dev)

    def from_host(self, a):
        # torch keeps a dense layout (C or F order) in the copy; anything else
        # arrives C-contiguous, which a kernel compiled for strided inputs
        # reads through the strides it is given at each launch
        t = self.torch
        a = np.asarray(a)
        if any(s < 0 for s in a.strides):
            a = np.ascontiguousarray(a)
        if a.dtype == np.bool_:
            return t.from_numpy(a.view(np.uint8)).to(self.dev).view(t.bool)
        if a.dtype == _BFLOAT16:  # (torch has no numpy bfloat16: its bits as int16)
            return t.from_numpy(a.view(np.int16)).to(self.dev).view(t.bfloat16)
        return t.from_numpy(a).to(self.dev)

    def to_host(self, x):
        if x.dtype == self.torch.bfloat16:  # (ml_dtypes' bfloat16: the same bits)
            return x.cpu().view(self.torch.int16).numpy().view(_BFLOAT16)
        return x.cpu().numpy()

    def copy(self, x):
        return x.clone()

    def probe(self, x):
        # the storage's use count: one per tensor on it (views, detached ones)
        count = getattr(self.torch._C, "_storage_Use_Count", None)
        return None if count is None else partial(count, x.untyped_storage()._cdata)

    def share(self, x):
        return x.detach()

    def matmul(self, a, b, out):
        t = self.torch
        if a.dtype == out.dtype and a.dtype in (t.float16, t.bfloat16):
            # cuBLAS sums in float32 and rounds once; its split-K partial sums
            # rounded to the narrow type are off while this runs (torch
            # allows them by default: a sum in bfloat16 is not numpy's)
            flags = t.backends.cuda.matmul
            name = ("allow_bf16_reduced_precision_reduction" if a.dtype == t.bfloat16
                    else "allow_fp16_reduced_precision_reduction")
            before = getattr(flags, name)
            setattr(flags, name, False)
            try:
                t.matmul(a, b, out=out)
            finally:
                setattr(flags, name, before)
        elif a.dtype == out.dtype:
            self.torch.matmul(a, b, out=out)
        elif a.dim() == b.dim() == 2:  # cuBLAS on the narrow operands, a float32 result
            self.torch.mm(a, b, out_dtype=out.dtype, out=out)
        elif a.dim() == b.dim() == 3 and a.shape[0] == b.shape[0]:
            self.torch.bmm(a, b, out_dtype=out.dtype, out=out)
        else:
            self.torch.matmul(a.to(out.dtype), b.to(out.dtype), out=out)

    def synchronize(self):
        self.torch.cuda.synchronize()

    def owns(self, x):
        return isinstance(x, self.torch.Tensor) and x.is_cuda

    def empty_like(self, x):
        return self.torch.empty_like(x)  # (preserve_format: a dense layout's strides kept)

    def copy_into(self, dst, src):
        dst.copy_(src)

    def data_ptr(self, x):
        return x.data_ptr()

    def model(self):
        return "cuda:" + self.torch.cuda.get_device_name(self.torch.cuda.current_device())

    def where(self):
        return (id(self), self.torch.cuda.current_device())

    def graph(self):
        return TorchGraph(self)


class CupyDevice(Device):
    name = "cupy"

    def __init__(self):
        import cupy

        try:
            if cupy.cuda.runtime.getDeviceCount() < 1:
                raise NoDevice("CuPy finds no CUDA device")
        except cupy.cuda.runtime.CUDARuntimeError as e:
            raise NoDevice(f"CuPy finds no CUDA device ({e})") from e
        self.cp = cupy

    def empty(self, shape, dtype):
        return self.cp.empty(tuple(shape), dtype=np.dtype(dtype))

    def from_host(self, a):
        a = np.asarray(a)
        out = self.cp.empty_like(a) if a.flags.c_contiguous or a.flags.f_contiguous \
            else self.cp.empty(a.shape, a.dtype)
        out.set(a if out.strides == a.strides else np.ascontiguousarray(a))
        return out

    def to_host(self, x):
        return self.cp.asnumpy(x)

    def launch_arg(self, x):
        return Pointer(x.data.ptr, x.dtype)

    def copy(self, x):
        return x.copy()

    def probe(self, x):
        # a view made by `share` holds x's memory pointer object; any other
        # array on the memory, a pointer to it
        ptr = x.data
        mem = ptr.mem
        return lambda: (sys.getrefcount(ptr), sys.getrefcount(mem))

    def share(self, x):
        return x.view()

    def matmul(self, a, b, out):
        if a.dtype != out.dtype:  # (widened operands: CuPy has no bfloat16 matmul)
            a, b = a.astype(out.dtype), b.astype(out.dtype)
        elif out.dtype.itemsize == 2 and out.dtype.kind in "fV":  # float32 sums, rounded once
            out[...] = self.cp.matmul(a.astype(np.float32), b.astype(np.float32))
            return
        self.cp.matmul(a, b, out=out)

    def synchronize(self):
        self.cp.cuda.runtime.deviceSynchronize()

    def owns(self, x):
        return isinstance(x, self.cp.ndarray)

    def empty_like(self, x):
        return self.cp.empty_like(x)  # (order "K": x's layout)

    def copy_into(self, dst, src):
        self.cp.copyto(dst, src)

    def data_ptr(self, x):
        return x.data.ptr

    def where(self):
        return (id(self), self.cp.cuda.Device().id)

    def model(self):
        props = self.cp.cuda.runtime.getDeviceProperties(self.cp.cuda.Device().id)
        name = props["name"]
        return "cuda:" + (name.decode() if isinstance(name, bytes) else str(name))

    def current_stream(self):
        return self.cp.cuda.get_current_stream().ptr

    def graph(self):
        return CupyGraph(self)


class _HostStorage:
    # (the address only: the interpreter keeps storages it was handed, which
    # must not count as references to the array: `HostDevice.probe`)
    def __init__(self, a: np.ndarray):
        self.ptr = a.ctypes.data

    def data_ptr(self) -> int:
        return self.ptr

    def cpu(self):
        return self

    def copy_(self, other) -> None:  # the same host memory: nothing to copy back
        pass


class HostArray:
    """A numpy array as the Triton interpreter's tensor protocol (data_ptr,
    dtype, storage): kernels read and write the array's own memory."""

    def __init__(self, a: np.ndarray, dtype):
        self.a = a
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self.a.ctypes.data

    def untyped_storage(self):
        return _HostStorage(self.a)

    def new_empty(self, *args, **kwargs):
        return self

    def set_(self, *args):
        return self

    def storage_offset(self) -> int:
        return 0

    def size(self):
        return self.a.shape

    def stride(self, d: int | None = None):
        s = tuple(x // self.a.itemsize for x in self.a.strides)
        return s if d is None else s[d]


class HostDevice(Device):
    """Host memory, kernels in Triton's interpreter."""

    name = "interpret"
    interpreted = True

    def empty(self, shape, dtype):
        return np.empty(tuple(shape), np.dtype(dtype))

    def from_host(self, a):
        return np.array(a, copy=True, order="K")

    def to_host(self, x):
        return np.array(x, copy=True)

    def launch_arg(self, x):
        return HostArray(x, tl_dtype(x.dtype))

    def copy(self, x):
        return np.copy(x)

    def probe(self, x):
        return partial(sys.getrefcount, x)  # (numpy's views hold their owner: x)

    def share(self, x):
        return x.view()

    def matmul(self, a, b, out):
        host_matmul(a, b, out)

    def owns(self, x):
        return False

    def empty_like(self, x):
        return np.empty_like(x)  # (order "K": x's layout)

    def copy_into(self, dst, src):
        np.copyto(dst, src)

    def graph(self):
        return HostGraph(self)


# ---- graphs ------------------------------------------------------------------------

class DeviceGraph:
    """Device work captured once and replayed. `capture(work)` records the
    calls in `work`, in order — each `w(stream)` launches a kernel or calls
    the device library on buffers fixed at capture, on the stream it is
    given — and runs none of them (as a CUDA capture runs nothing);
    `replay()` runs them all again on the current stream. The graph bakes
    in every buffer's address: whoever replays it keeps those buffers alive
    and copies data in and out of them (`copy`, `clone`), which the graph
    counts."""

    def __init__(self, device: Device):
        self.device = device
        self.copies = 0  # copies into its inputs and back out of them
        self.clones = 0  # outputs cloned for the caller

    def capture(self, work: Sequence[Callable[[int | None], None]]) -> None:
        raise NotImplementedError

    def replay(self) -> None:
        raise NotImplementedError

    def copy(self, dst, src) -> None:
        """dst <- src on the device: the caller's array into one of the
        graph's inputs before a replay, or back after it."""
        self.copies += 1
        self.device.copy_into(dst, src)

    def clone(self, x):
        """A fresh copy of one of the graph's outputs, which the next replay
        overwrites."""
        self.clones += 1
        return self.device.copy(x)


class TorchGraph(DeviceGraph):
    """torch.cuda.CUDAGraph, captured on a side stream (capture needs one
    that is not the default stream) after the current stream's work."""

    def capture(self, work):
        torch = self.device.torch
        g = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            # (thread_local: other threads' allocations don't break this capture)
            g.capture_begin(capture_error_mode="thread_local")
            _capture_work(work, side.cuda_stream, g.capture_end)
        torch.cuda.current_stream().wait_stream(side)
        self.g = g
        self.replay = g.replay  # (one Python call less per replay)

    def replay(self):
        self.g.replay()


class CupyGraph(DeviceGraph):
    """CuPy's stream capture (`Stream.begin_capture`, relaxed mode: its
    memory pool may allocate) into a `cupy.cuda.Graph`, launched on CuPy's
    current stream."""

    def capture(self, work):
        cp = self.device.cp
        side = cp.cuda.Stream(non_blocking=True)
        side.wait_event(cp.cuda.get_current_stream().record())
        with side:
            side.begin_capture()
            ended: list = []
            _capture_work(work, side.ptr, lambda: ended.append(side.end_capture()))
        self.g = ended[0]
        self.replay = self.g.launch  # (one Python call less per replay)

    def replay(self):
        self.g.launch()


class HostGraph(DeviceGraph):
    """HostDevice's stand-in for a CUDA graph: capture records the work
    (runs nothing), replay runs it in order on the same host buffers."""

    def capture(self, work):
        self.work = list(work)

    def replay(self):
        for w in self.work:
            w(None)


def _capture_work(work, stream: int, end: Callable[[], None]) -> None:
    """Issue `work` on the capturing `stream`, then end the capture (also
    when issuing failed: the failure is what the caller hears)."""
    try:
        for w in work:
            w(stream)
    except BaseException:
        try:
            end()
        except Exception:  # (an invalidated capture: the first failure says why)
            pass
        raise
    end()


_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)  # torch.bfloat16's numpy dtype (names match)


def host_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """`Device.matmul` on host arrays: narrow operands widened to float32;
    a narrow result is the float32 product rounded once."""
    if out.dtype.itemsize == 2 and out.dtype.kind in "fV":  # float16, bfloat16
        out[...] = np.matmul(a.astype(np.float32), b.astype(np.float32))
    else:
        np.matmul(a.astype(out.dtype, copy=False), b.astype(out.dtype, copy=False), out=out)


def tl_dtype(dt: np.dtype):
    import triton.language as tl

    dt = np.dtype(dt)
    if dt == np.bool_:
        return tl.int1
    return getattr(tl, dt.name)


def _torch_dtype(torch, dt: np.dtype):
    if dt == np.bool_:
        return torch.bool
    return getattr(torch, dt.name)


KINDS = {"torch": TorchDevice, "cupy": CupyDevice, "interpret": HostDevice}


@lru_cache(maxsize=None)
def _make(kind: str) -> Device:
    return KINDS[kind]()


def device(kind: str | None = None) -> Device:
    """The device the GPU backend runs on (see the module's text)."""
    kind = kind or os.environ.get("LOWERING_GPU") or None
    if kind is not None:
        if kind not in KINDS:
            raise ValueError(f"LOWERING_GPU must be one of {', '.join(KINDS)}, got {kind!r}")
        return _make(kind)
    why = []
    for k in ("torch", "cupy"):
        try:
            return _make(k)
        except ImportError:
            why.append(f"{k} is not installed")
        except NoDevice as e:
            why.append(str(e))
    raise NoDevice("backend='gpu' needs a CUDA device through torch or CuPy (" +
                   "; ".join(why) + "); LOWERING_GPU=interpret runs its kernels in Triton's "
                   "interpreter on the CPU")


def of(x) -> Device | None:
    """The device an array argument lives on, None for a host array."""
    if isinstance(x, np.ndarray):
        return None
    if type(x).__module__.split(".")[0] == "torch":
        return _make("torch") if getattr(x, "is_cuda", False) else None
    # CuPy's own arrays, and any other producer of the interface through CuPy
    return _make("cupy") if hasattr(x, "__cuda_array_interface__") else None


def layout_class_of(x) -> str:
    """"C", "F" or "strided" for a device array, by numpy's rules (dims of
    size 1 don't count; an empty array is contiguous): what the program the
    device entry runs on it was compiled for."""
    shape = tuple(x.shape)
    strides = x.stride() if callable(getattr(x, "stride", None)) else \
        tuple(s // x.itemsize for s in x.strides)
    if _dense(shape, strides, reversed(range(len(shape)))):
        return "C"
    return "F" if _dense(shape, strides, range(len(shape))) else "strided"


def _dense(shape, strides, order) -> bool:
    if 0 in shape:
        return True
    step = 1
    for d in order:
        if shape[d] != 1:
            if strides[d] != step:
                return False
            step *= shape[d]
    return True
