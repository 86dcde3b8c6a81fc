"""CPU runtime: one MCJIT engine for the process (host CPU name and features),
and launching kernels through ctypes — which releases the GIL, so a kernel's
parallel domain is split across a persistent thread pool."""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial

import llvmlite.binding as llvm

# a kernel returns the IEEE exception flags it raised on its thread (MXCSR
# bits, `runtime/errors.py`)
KERNEL_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                               ctypes.c_void_p)
# the same entry called with the GIL held: cheaper when the kernel is tiny
SERIAL_KERNEL_TYPE = ctypes.PYFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_int64,
                                       ctypes.c_void_p, ctypes.c_void_p)


def serial_entry(fn):
    return SERIAL_KERNEL_TYPE(ctypes.cast(fn, ctypes.c_void_p).value)

_lock = threading.Lock()
_engine = None
_tm = None
_pool: ThreadPoolExecutor | None = None
THREADS = int(os.environ.get("LOWERING_THREADS", os.cpu_count() or 1))
# below this many elements (of the kernel's largest buffer), one thread is
# faster than splitting. Through the Python pool a hand-off cost ~75 us on a
# 2-vCPU VM (the worker's wake-up, ~40 us, and the GIL hand-offs around two
# ctypes calls), which put the threshold at 1 Mi elements; through the native
# pool (`runtime/pool.py`: a worker spinning between kernels) it costs a few
# µs: on a 2-vCPU Zen 3 VM, float32 `x * 2 + 1` over 256 Ki elements ran in
# 36.9 µs on one thread and 39.1 on two, over 512 Ki in 65.0 and 55.6; a row
# sum over 512 Ki in 29.8 and 28.9; `exp(x) * 0.5` over 64 Ki already in
# 44.5 and 29.4, over 512 Ki in 347 and 180. Where the native pool cannot be
# made, the Python pool's cost stands (`parallel_threshold`).
PARALLEL_THRESHOLD = 1 << 18
PYTHON_POOL_THRESHOLD = 1 << 20


def parallel_threshold() -> int:
    """The split threshold of the pool this process launches through."""
    from . import pool

    return PARALLEL_THRESHOLD if pool.available() else PYTHON_POOL_THRESHOLD


def _array_offsets() -> tuple[int, int]:
    """Byte offsets of `data` and `strides` inside numpy's PyArrayObject
    (after the object header: data, nd, dimensions, strides — numpy's stable
    ABI), checked on a live array so that a mismatch fails here, loudly,
    instead of as a wrong read in a kernel."""
    import numpy as np

    a = np.empty((3, 5), np.int32)[:, ::2]
    head = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)  # refcount, type
    data, nd, dims, strides = head, head + 8, head + 16, head + 24

    def ptr(o: int) -> int:
        return ctypes.c_void_p.from_address(id(a) + o).value or 0

    ok = (ptr(data) == a.ctypes.data and ctypes.c_int.from_address(id(a) + nd).value == a.ndim
          and ptr(strides) == ptr(dims) + 8 * a.ndim)
    if ok:
        ok = (tuple(ctypes.c_int64.from_address(ptr(dims) + 8 * d).value for d in range(2)) == a.shape
              and tuple(ctypes.c_int64.from_address(ptr(strides) + 8 * d).value
                        for d in range(2)) == a.strides)
    if not ok:
        raise ImportError("lowering: numpy's array object layout is not the one this "
                          "runtime reads (data, nd, dimensions, strides after the header)")
    return data, strides


ARRAY_OFFSETS = _array_offsets()


def target_machine():
    global _tm
    if _tm is None:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_default_triple()
        _tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                           features=llvm.get_host_cpu_features().flatten(),
                                           opt=3, codemodel="jitdefault")
    return _tm


VECTOR_BITS_CHOICES = (128, 256, 512)


# a width `vector_width` set for this thread's compiles (max-autotune's candidates)
_width = threading.local()


@contextmanager
def vector_width(bits: int) -> Iterator[None]:
    """Vectorize this thread's compiles for `bits` (one of VECTOR_BITS_CHOICES)."""
    if bits not in VECTOR_BITS_CHOICES:
        raise ValueError(f"vector width must be one of {VECTOR_BITS_CHOICES}, got {bits!r}")
    old = getattr(_width, "bits", None)
    _width.bits = bits
    try:
        yield
    finally:
        _width.bits = old


@functools.cache
def asm_vector_bits() -> int:
    """The widest vector an inline asm's "x" operand takes on this host:
    a ymm register (256 bits) where it has AVX, else an xmm one."""
    target_machine()
    f = llvm.get_host_cpu_features()
    return 256 if f.get("avx") else 128


def vector_bits() -> int:
    """The SIMD register width kernels are vectorized for: the host's, or
    LOWERING_VECTOR_BITS (128, 256 or 512) to vectorize for another width
    (LLVM splits vectors wider than the host's registers, so the kernels stay
    correct, if slower; the process-replay check pins it so that recorded
    kernels compare on any host), or `vector_width`'s in this thread."""
    width = getattr(_width, "bits", None)
    if width is not None:
        return width
    forced = os.environ.get("LOWERING_VECTOR_BITS")
    if forced:
        if not forced.isdigit() or int(forced) not in VECTOR_BITS_CHOICES:
            raise ValueError(f"LOWERING_VECTOR_BITS must be one of {VECTOR_BITS_CHOICES}, "
                             f"got {forced!r}")
        return int(forced)
    target_machine()
    f = llvm.get_host_cpu_features()
    if f.get("avx512f"):
        return 512
    if f.get("avx2") or f.get("avx"):
        return 256
    return 128


def _engine_get():
    global _engine
    if _engine is None:
        tm = target_machine()
        _engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
    return _engine


# what LLVM did in this process: modules of kernels compiled (-O3 and
# machine code, JIT or object file), native entries compiled
# (runtime/native.py), object files linked in (the on-disk cache's entries),
# the BLAS launchers' module (once per process, at the first BLAS product)
COUNTS = {"kernel_modules": 0, "entry_modules": 0, "objects_loaded": 0, "blas_modules": 0,
          "pool_modules": 0}


def optimize(ir_text: str, speed: int = 3):
    tm = target_machine()
    mod = llvm.parse_assembly(ir_text)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    # -O3 without LLVM's loop and SLP vectorizers: the kernels are written
    # with vector types already, and those two passes were 40 % of the MLP
    # step's compile time (1.05 -> 0.69 s) for no measured change in any
    # benchmark kernel's speed
    pto = llvm.create_pipeline_tuning_options(speed_level=speed)
    pto.loop_vectorization = False
    pto.slp_vectorization = False
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


def jit(ir_text: str, names: list[str], what: str = "kernel_modules",
        speed: int = 3) -> dict[str, int]:
    """Compile LLVM IR into the process engine; addresses of `names`
    (`what` it is, for COUNTS; `speed` the optimizer's level)."""
    mod = optimize(ir_text, speed)
    with _lock:
        COUNTS[what] += 1
        ee = _engine_get()
        ee.add_module(mod)
        ee.finalize_object()
        return {n: ee.get_function_address(n) for n in names}


def compile_object(ir_text: str) -> bytes:
    """LLVM IR to an object file for the process's target machine: what
    `jit` would run, as bytes to keep (`load_object` runs them)."""
    mod = optimize(ir_text)
    COUNTS["kernel_modules"] += 1
    return target_machine().emit_object(mod)


# object files loaded, by the tag their loader gave: the addresses of their
# functions (an object's symbols are defined once per process)
_objects: dict[str, dict[str, int]] = {}


def loaded_object(tag: str) -> dict[str, int] | None:
    return _objects.get(tag)


def load_object(data: bytes, names: list[str], tag: str) -> dict[str, int]:
    """Link an object file (from `compile_object`) into the process engine:
    the addresses of its functions `names`. Its calls into libm and the C
    library resolve against the process, as JIT-compiled code's do. A name
    the object does not define is a ValueError. `tag` names the object (its
    symbols' owner): loading a tag twice returns the first load's addresses."""
    with _lock:
        addrs = _objects.get(tag)
        if addrs is None:
            ee = _engine_get()
            ee.add_object_file(llvm.ObjectFileRef.from_data(data))
            ee.finalize_object()
            COUNTS["objects_loaded"] += 1
            addrs = _objects[tag] = {n: ee.get_function_address(n) for n in names}
    missing = [n for n in names if not addrs.get(n)]
    if missing:
        raise ValueError(f"the object file defines no function {missing[0]!r}")
    return addrs


# compiled kernels, process-wide: a kernel's body key (its text without its
# name and parameter values, and the vector width) -> its function's address
_kernels: dict[object, int] = {}


def compiled_kernel(key) -> int | None:
    """The address of the kernel compiled for `key`, if any."""
    return _kernels.get(key)


def remember_kernel(key, address: int) -> None:
    with _lock:
        _kernels.setdefault(key, address)


def kernels_compiled() -> int:
    """How many distinct kernels this process has compiled."""
    return len(_kernels)


def assembly(ir_text: str) -> str:
    return target_machine().emit_assembly(optimize(ir_text))


def pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=max(THREADS - 1, 1), thread_name_prefix="lowering")
    return _pool


def run_chunks(calls: list) -> list:
    """Run the calls (work that releases the GIL: kernels, numpy routines on
    chunks of an array), the first on the calling thread, the others on the
    Python pool; their results in order, or the first error raised, once all
    are done."""
    futs = [pool().submit(c) for c in calls[1:]]
    error, out = None, []
    try:
        out.append(calls[0]())
    except BaseException as e:
        error = e
    for f in futs:
        try:
            out.append(f.result())
        except BaseException as e:
            error = error or e
    if error is not None:
        raise error
    return out


_native = None  # runtime/pool.py, imported at the first split launch


def launch(fn, work: int, bufs, status, threads: int, linger: int = 0) -> int:
    """Run fn over [0, work), one contiguous chunk per thread; the exception
    flags raised on any of the threads. The chunks go to the native pool
    (`runtime/pool.py`: one C call, workers that spin between a program's
    kernels, and `linger` turns more after this one) where it can be made,
    else to the Python pool."""
    if work <= 0:
        return 0
    threads = min(threads, work)
    if threads <= 1:
        return fn(0, work, bufs, status)
    global _native
    if _native is None:
        from . import pool as _native
    np_ = _native.get(max(THREADS - 1, 1), jit)
    if np_ is not None and threads <= np_.workers + 1:
        if np_.busy.acquire(blocking=False):
            try:
                return np_.run(ctypes.cast(fn, ctypes.c_void_p).value, work,
                               ctypes.addressof(bufs), status, threads, linger)
            finally:
                np_.busy.release()
        return fn(0, work, bufs, status)  # (another thread's job holds the pool)
    bounds = [work * i // threads for i in range(threads + 1)]
    flags = 0
    for f in run_chunks([partial(fn, bounds[i], bounds[i + 1], bufs, status)
                         for i in range(threads)]):
        flags |= f
    return flags
