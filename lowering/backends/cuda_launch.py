"""A compiled Triton kernel's first launches through the CUDA driver itself
(`early_runner`), while Triton's own launcher for the kernel's signature is
built in a thread; once it is, launches go through it
(`gpu_backend.launcher`: less Python per call).

Why: Triton (up to 3.6) launches through a C module generated for each
kernel signature and built with the system's C compiler the first time the
signature meets an empty Triton cache: 0.2-0.4 s, on the first call of a
program, after its kernels are compiled. The first launches here need none
of it: the kernel's cubin is loaded with cuModuleLoadData, its arguments
packed as Triton's launcher packs them (each argument of its signature but
the constexprs, in order: a pointer as the buffer's address, an integer at
its C width, a float at its own width; then the two scratch pointers Triton
appends, null), and cuLaunchKernel runs it on the caller's stream — all
through ctypes on libcuda, so nothing is compiled.

Kernels needing what only Triton's launcher does (a global or profile
scratch buffer, thread-block clusters, cooperative or programmatic-
dependent launches, tensor descriptors), and Triton versions whose
launcher packs otherwise or is not built per signature
(`_per_signature_launcher`), get no early runner: Triton's, as before."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import lru_cache

from .triton_launch import background

# a signature type's C type as Triton's launcher declares the argument
_C_TYPES = {
    "i1": ctypes.c_int8, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
    "i64": ctypes.c_int64, "u1": ctypes.c_uint8, "u8": ctypes.c_uint8, "u16": ctypes.c_uint16,
    "u32": ctypes.c_uint32, "u64": ctypes.c_uint64, "fp32": ctypes.c_float,
    "f32": ctypes.c_float, "fp64": ctypes.c_double,
}


def pack(signature: dict, args) -> list:
    """The kernel's parameters (ctypes values, in order) for `args`, one per
    entry of its Triton signature (constexprs included, and skipped): a
    pointer's address (`data_ptr()`, an int, or None), integers and floats
    at their C types; then the two null scratch pointers. A type it does
    not know (half floats, tuples, descriptors) raises TypeError."""
    out: list = []
    for ty, v in zip(signature.values(), args, strict=True):
        if ty == "constexpr":
            continue
        if not isinstance(ty, str):
            raise TypeError(f"no early launch for a signature entry {ty!r}")
        if ty.startswith("*"):
            ptr = 0 if v is None else v if isinstance(v, int) else v.data_ptr()
            out.append(ctypes.c_uint64(ptr))
            continue
        c = _C_TYPES.get(ty)
        if c is None:
            raise TypeError(f"no early launch for an argument of type {ty}")
        out.append(c(v))
    out += [ctypes.c_uint64(0), ctypes.c_uint64(0)]  # global and profile scratch
    return out


def plain(metadata) -> bool:
    """Whether a kernel's launch needs nothing but its grid, block, shared
    memory and parameters."""
    return (getattr(metadata, "global_scratch_size", 0) == 0
            and getattr(metadata, "profile_scratch_size", 0) == 0
            and getattr(metadata, "num_ctas", 1) == 1
            and not getattr(metadata, "launch_cooperative_grid", False)
            and not getattr(metadata, "launch_pdl", False)
            and not getattr(metadata, "tensordesc_meta", None))


@lru_cache(maxsize=None)
def _per_signature_launcher() -> bool:
    """Whether the installed Triton builds a C launcher per signature that
    packs parameters as `pack` does (read once, from its source)."""
    try:
        import inspect

        from triton.backends.nvidia import driver as d

        make = inspect.getsource(d.make_launcher)
        return ("compile_module_from_src" in inspect.getsource(d.CudaLauncher.__init__)
                and 'params.append("&global_scratch")' in make
                and 'params.append("&profile_scratch")' in make
                and "cuLaunchKernelEx" in make)
    except Exception:  # (another Triton: its own launcher)
        return False


class _Cuda:
    """The few driver functions, through ctypes on libcuda."""

    def __init__(self):
        lib = ctypes.CDLL("libcuda.so.1")
        self.load = lib.cuModuleLoadData
        self.load.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        self.get = lib.cuModuleGetFunction
        self.get.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
        self.set_attr = lib.cuFuncSetAttribute
        self.set_attr.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        self.get_attr = lib.cuFuncGetAttribute
        self.get_attr.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_void_p]
        self.dev_attr = lib.cuDeviceGetAttribute
        self.dev_attr.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int]
        self.ctx_device = lib.cuCtxGetDevice
        self.ctx_device.argtypes = [ctypes.POINTER(ctypes.c_int)]
        self.ctx_current = lib.cuCtxGetCurrent
        self.ctx_current.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        self.launch = lib.cuLaunchKernel
        self.launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
            ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
        self.error = lib.cuGetErrorString
        self.error.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]

    def check(self, status: int, what: str) -> None:
        if status:
            s = ctypes.c_char_p()
            self.error(status, ctypes.byref(s))
            raise RuntimeError(f"CUDA error in {what}: {(s.value or b'?').decode()} ({status})")


@lru_cache(maxsize=None)
def _cuda() -> _Cuda:
    return _Cuda()


# driver enums (cuda.h)
_FUNC_SHARED_SIZE_BYTES = 1
_FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_DEV_MAX_SHARED_PER_BLOCK_OPTIN = 97


def _load(ck) -> int:
    """The kernel's function handle, its cubin loaded into the current
    context (as Triton loads it: dynamic shared memory past 48 KiB
    allowed); RuntimeError where the thread has no current context (the
    array library has not made one current: Triton's launcher does it)."""
    cu = _cuda()
    ctx = ctypes.c_void_p()
    cu.check(cu.ctx_current(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:
        raise RuntimeError("no current CUDA context")
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    cu.check(cu.load(ctypes.byref(mod), ck.kernel), "cuModuleLoadData")
    cu.check(cu.get(ctypes.byref(fn), mod, ck.metadata.name.encode()), "cuModuleGetFunction")
    shared = ck.metadata.shared
    if shared > 49152:
        dev, optin, static = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        cu.check(cu.ctx_device(ctypes.byref(dev)), "cuCtxGetDevice")
        cu.check(cu.dev_attr(ctypes.byref(optin), _DEV_MAX_SHARED_PER_BLOCK_OPTIN, dev.value),
                 "cuDeviceGetAttribute")
        cu.check(cu.get_attr(ctypes.byref(static), _FUNC_SHARED_SIZE_BYTES, fn),
                 "cuFuncGetAttribute")
        cu.check(cu.set_attr(fn, _FUNC_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin.value - static.value),
                 "cuFuncSetAttribute")
    return fn.value


def early_runner(ck, grid: int, stream_of: Callable[[], int],
                 later: Callable[[], Callable]) -> Callable | None:
    """`run(*args, stream=None)` launching compiled kernel `ck`, not yet
    given its Triton launcher, on `grid` programs through the driver (the
    stream, when not given, from `stream_of()`), while a thread builds
    Triton's launcher for its signature; once built, calls go through
    `later()` (Triton's runner, made at the first call after). None where
    the early path does not apply (`plain`, `_per_signature_launcher`, a
    kernel already given its launcher, no libcuda)."""
    if getattr(ck, "_run", None) is not None or not plain(ck.metadata) \
            or not _per_signature_launcher():
        return None
    try:
        signature = dict(ck.src.signature)
        cu = _cuda()
        function = _load(ck)
    except Exception:  # (Triton's launcher, as before)
        return None
    threads, shared = 32 * ck.metadata.num_warps, ck.metadata.shared
    built: list = []

    def build():
        try:
            from triton.runtime import driver

            driver.active.launcher_cls(ck.src, ck.metadata)  # (into Triton's cache)
            built.append(True)
        except Exception:  # (the early launches go on)
            pass
    worker = background(build, "lowering-triton-launcher")  # (the exit waits for it)
    state: dict = {}

    def driver(*args, stream=None):
        params = pack(signature, args)
        ptrs = (ctypes.c_void_p * len(params))(*[ctypes.addressof(p) for p in params])
        s = stream_of() if stream is None else stream
        cu.check(cu.launch(function, grid, 1, 1, threads, 1, 1, shared, s, ptrs, None),
                 "cuLaunchKernel")

    def run(*args, stream=None):
        fast = state.get("run")
        if fast is None and built:
            fast = state["run"] = later()
        (driver if fast is None else fast)(*args, stream=stream)
    run.builder = worker  # (tests wait for it)
    # the driver's launch alone, for a launch recorded into a graph: the
    # hand-over loads Triton's module, which a stream capture must not see
    run.driver = driver
    return run
